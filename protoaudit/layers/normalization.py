"""Normalisation and affine layers: LRN, MVN, BatchNorm, Scale, Bias, Softmax."""
from .activations import Neuron
from .base import Layer, canonical_axis, register


@register("LRN")
class LRN(Neuron):
    def reshape(self, bottoms):
        self.check(len(bottoms[0]) == 4, "LRN needs a 4-axis bottom (N, C, H, W)")
        self.check(self.lp.lrn_param.local_size % 2 == 1, "LRN only supports odd values for local_size")
        return [tuple(bottoms[0])]


@register("MVN", "Softmax")
class SameShape(Neuron):
    pass


@register("BatchNorm")
class BatchNorm(Neuron):
    def param_shapes(self, bottoms):
        shape = bottoms[0]
        channels = shape[1] if len(shape) > 1 else 1
        return [(channels,), (channels,), (1,)]  # running mean, variance, moving-average factor


def _affine_shape(layer, bottoms, axis, num_axes):
    """The shape of a Scale/Bias parameter: bottom[0]'s axes [axis, axis+num_axes)."""
    shape = bottoms[0]
    layer.check(num_axes >= -1, "num_axes must be non-negative, or -1 to extend to the end of bottom[0]")
    axis = canonical_axis(layer, axis, len(shape)) if shape else 0
    end = len(shape) if num_axes == -1 else axis + num_axes
    layer.check(end <= len(shape), f"bottom[0] has {len(shape)} axes; axis {axis} + num_axes {num_axes} is beyond")
    return tuple(shape[axis:end])


class _Affine(Layer):
    min_bottoms = 1
    max_bottoms = 2
    exact_tops = 1

    def reshape(self, bottoms):
        if len(bottoms) == 2:
            p = self.param()
            shape = bottoms[0]
            axis = canonical_axis(self, p.axis, len(shape)) if bottoms[1] else 0
            other = tuple(bottoms[1])
            self.check(tuple(shape[axis:axis + len(other)]) == other,
                       f"bottom[1] {other} must match bottom[0] {tuple(shape)} from axis {axis}")
        return [tuple(bottoms[0])]


@register("Scale")
class Scale(_Affine):
    def param(self):
        return self.lp.scale_param

    def param_shapes(self, bottoms):
        p = self.param()
        shapes = []
        if len(bottoms) == 1:
            shapes.append(_affine_shape(self, bottoms, p.axis, p.num_axes))
        if p.bias_term:
            if len(bottoms) == 1:
                shapes.append(shapes[0])
            else:
                axis = canonical_axis(self, p.axis, len(bottoms[0]))
                shapes.append(tuple(bottoms[0][axis:axis + len(bottoms[1])]))
        return shapes


@register("Bias")
class Bias(_Affine):
    def param(self):
        return self.lp.bias_param

    def param_shapes(self, bottoms):
        if len(bottoms) == 2:
            return []
        p = self.param()
        return [_affine_shape(self, bottoms, p.axis, p.num_axes)]
