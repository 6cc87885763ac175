"""Normalization layers: the output is the input's shape; the variables are per-channel along `axis`."""
from .base import KerasLayer, register


class _Axes(KerasLayer):
    def axes(self, shape, default=-1):
        axis = self.get("axis", default)
        axis = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        return sorted(self.axis_of(a, len(shape)) for a in axis)

    def param_shape(self, inputs, default=-1):
        shape = self.one(inputs).shape
        return tuple(shape[a] for a in self.axes(shape, default))


@register("BatchNormalization", "SyncBatchNormalization")
class BatchNormalization(_Axes):
    """gamma and beta (trainable), moving mean and variance (never trained); renorm adds two more."""

    def weights(self, inputs):
        shape = self.param_shape(inputs)
        out = []
        if self.get("scale", True):
            out.append(self.weight("gamma", shape))
        if self.get("center", True):
            out.append(self.weight("beta", shape))
        out += [self.weight("moving_mean", shape, trainable=False),
                self.weight("moving_variance", shape, trainable=False)]
        if self.get("renorm", False):
            out += [self.weight("renorm_mean", shape, trainable=False),
                    self.weight("renorm_stddev", shape, trainable=False)]
        return out


@register("LayerNormalization")
class LayerNormalization(_Axes):
    """gamma and beta over the normalized axes (Keras 3's rms_scaling has no beta)."""

    def weights(self, inputs):
        shape = self.param_shape(inputs)
        out = []
        if self.get("scale", True):
            out.append(self.weight("gamma", shape))
        if self.get("center", True) and not self.get("rms_scaling", False):
            out.append(self.weight("beta", shape))
        return out


@register("GroupNormalization")
class GroupNormalization(_Axes):
    """gamma and beta per channel."""

    def weights(self, inputs):
        shape = self.param_shape(inputs)
        groups = self.get("groups", 32)
        if groups == -1:
            groups = shape[0]
        if not isinstance(groups, int) or groups <= 0 or shape[0] % groups:
            raise self.error(f"{shape[0]} channels do not split into {groups} groups")
        out = []
        if self.get("scale", True):
            out.append(self.weight("gamma", shape))
        if self.get("center", True):
            out.append(self.weight("beta", shape))
        return out


@register("UnitNormalization")
class UnitNormalization(KerasLayer):
    pass
