"""Normalisation and affine layers: LRN, MVN, BatchNorm, Scale, Bias, Softmax."""
from .activations import Neuron
from .base import Layer, canonical_axis, legacy_shape, register


@register("LRN")
class LRN(Neuron):
    def reshape(self, bottoms):
        self.check(len(bottoms[0]) == 4, "LRN needs a 4-axis bottom (N, C, H, W)")
        self.check(self.lp.lrn_param.local_size % 2 == 1, "LRN only supports odd values for local_size")
        return [tuple(bottoms[0])]


@register("MVN")
class MVN(Neuron):
    """MVNLayer shapes its top through the legacy 4-axis accessors: an (N, C) bottom gives (N, C, 1, 1)."""

    def reshape(self, bottoms):
        return [legacy_shape(self, bottoms[0])]


@register("Softmax")
class Softmax(Neuron):
    def reshape(self, bottoms):
        canonical_axis(self, self.lp.softmax_param.axis, len(bottoms[0]))
        return [tuple(bottoms[0])]


@register("BatchNorm")
class BatchNorm(Neuron):
    """Running mean and variance per channel (axis 1), and the moving-average factor.

    Caffe's setup gives these statistics lr_mult 0 by adding the param specs the layer lacks to its
    own LayerParameter (which Net::Init then reads), and refuses a nonzero lr_mult for them.
    """

    def __init__(self, lp, ctx):
        super().__init__(lp, ctx)
        self._specs = lp.param  # this layer's own copy, as Caffe's layer_param_

    def reshape(self, bottoms):
        self.check(len(bottoms[0]) >= 2, f"BatchNorm normalises per channel (axis 1); the bottom "
                   f"{tuple(bottoms[0])} has no axis 1")
        return [tuple(bottoms[0])]

    def param_shapes(self, bottoms):
        for i in range(3):
            if len(self._specs) == i:
                self._specs.add().lr_mult = 0
            else:
                self.check(self._specs[i].lr_mult == 0, "cannot configure batch normalization statistics "
                           f"as layer parameters (param {i} has lr_mult {self._specs[i].lr_mult})",
                           fix="give BatchNorm's param { } entries lr_mult: 0, or none at all")
        channels = bottoms[0][1]
        return [(channels,), (channels,), (1,)]  # running mean, variance, moving-average factor


def _affine_shape(layer, bottoms, axis, num_axes):
    """The shape of a Scale/Bias parameter: bottom[0]'s axes [axis, axis+num_axes)."""
    shape = bottoms[0]
    axis = canonical_axis(layer, axis, len(shape))
    layer.check(num_axes >= -1, "num_axes must be non-negative, or -1 to extend to the end of bottom[0]")
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
        if p.bias_term:  # an inner Bias layer over bottom[0], spanning bottom[1]'s axes if given
            num_axes = p.num_axes if len(bottoms) == 1 else len(bottoms[1])
            shapes.append(_affine_shape(self, bottoms, p.axis, num_axes))
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
