"""Reshaping layers: shapes only, no variables."""
import math

from .base import KerasLayer, register


@register("Reshape")
class Reshape(KerasLayer):
    """target_shape excludes the batch; one -1 takes what is left."""

    def output_specs(self, inputs):
        x = self.one(inputs)
        target = list(self.get("target_shape"))
        size = math.prod(x.shape[1:])
        if target.count(-1) > 1 or any(not isinstance(d, int) or d == 0 or d < -1 for d in target):
            raise self.error(f"target_shape {tuple(target)} is not valid")
        known = -math.prod(target) if -1 in target else math.prod(target)
        if -1 in target:
            if size % known:
                raise self.error(f"cannot reshape {x.shape[1:]} to {tuple(target)}")
            target[target.index(-1)] = size // known
        elif known != size:
            raise self.error(f"cannot reshape {x.shape[1:]} ({size} elements) to {tuple(target)}")
        return [self.spec((x.shape[0], *target), inputs)]


@register("Flatten")
class Flatten(KerasLayer):
    def output_specs(self, inputs):
        x = self.one(inputs)
        return [self.spec((x.shape[0], math.prod(x.shape[1:])), inputs)]


@register("Permute")
class Permute(KerasLayer):
    """dims counts from 1 (the batch stays first)."""

    def output_specs(self, inputs):
        x = self.one(inputs)
        dims = list(self.get("dims"))
        if sorted(dims) != list(range(1, len(x.shape))):
            raise self.error(f"dims {tuple(dims)} is not a permutation of 1..{len(x.shape) - 1}")
        return [self.spec((x.shape[0], *(x.shape[d] for d in dims)), inputs)]


@register("RepeatVector")
class RepeatVector(KerasLayer):
    def output_specs(self, inputs):
        x = self.one(inputs)
        return [self.spec((x.shape[0], self.get("n"), *x.shape[1:]), inputs)]


class _Spatial(KerasLayer):
    """Cropping, padding and upsampling: a rule per spatial axis, channels first or last."""

    rank = 1

    def output_specs(self, inputs):
        x = self.one(inputs)
        if len(x.shape) != self.rank + 2:
            raise self.error(f"expects a rank-{self.rank + 2} input, got {x.shape}")
        shape = list(x.shape)
        first = self.first_spatial_axis()
        for i in range(self.rank):
            shape[first + i] = self.resize(i, shape[first + i])
            if shape[first + i] <= 0:
                raise self.error(f"leaves axis {first + i} of {x.shape} empty")
        return [self.spec(shape, inputs)]

    def first_spatial_axis(self):
        """The input axis of the first spatial axis: 1, or 2 after channels (a 1-D layer's steps are axis 1)."""
        return 1 if self.channels_last() or self.rank == 1 else 2

    def pairs(self, key):
        """((before, after),) per spatial axis from an int, a pair, or a pair per axis."""
        value = self.get(key)
        if isinstance(value, int):
            return ((value, value),) * self.rank
        if self.rank == 1 and len(value) == 2 and all(isinstance(v, int) for v in value):
            return (tuple(value),)
        if len(value) == self.rank and all(isinstance(v, int) for v in value):
            return tuple((v, v) for v in value)
        if len(value) == self.rank and all(isinstance(v, (list, tuple)) and len(v) == 2 for v in value):
            return tuple(tuple(v) for v in value)
        raise self.error(f"'{key}' is {value!r}, not an int, a pair, or a pair per axis")


def _family(base, names, resize):
    for rank, name in enumerate(names, 1):
        register(name)(type(name, (base,), {"rank": rank, "resize": resize, "__doc__": base.__doc__}))


class Cropping(_Spatial):
    """Removes (before, after) along each spatial axis."""

    def resize(self, i, n):
        before, after = self.pairs("cropping")[i]
        return n - before - after


class ZeroPadding(_Spatial):
    """Adds (before, after) along each spatial axis."""

    def resize(self, i, n):
        before, after = self.pairs("padding")[i]
        return n + before + after


class UpSampling(_Spatial):
    """Multiplies each spatial axis by its size (UpSampling1D's is `size`, an int)."""

    def resize(self, i, n):
        return n * self.ints("size", self.rank, 2)[i]


_family(Cropping, ("Cropping1D", "Cropping2D", "Cropping3D"), Cropping.resize)
_family(ZeroPadding, ("ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D"), ZeroPadding.resize)
_family(UpSampling, ("UpSampling1D", "UpSampling2D", "UpSampling3D"), UpSampling.resize)
