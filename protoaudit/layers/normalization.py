"""Normalisation and affine layers: LRN, MVN, BatchNorm, Scale, Bias, Softmax."""
import functools

from . import touch
from .activations import Neuron
from .base import CUDNN_2015_FORKS, Layer, canonical_axis, count, legacy_shape, register


@register("LRN")
class LRN(Neuron):
    def reshape(self, bottoms):
        self.check(len(bottoms[0]) == 4, "LRN needs a 4-axis bottom (N, C, H, W)")
        self.check(self.lp.lrn_param.local_size % 2 == 1, "LRN only supports odd values for local_size")
        return [tuple(bottoms[0])]

    def touches(self, run):
        """ACROSS_CHANNELS on Caffe's engine keeps scale_, the bottom's size (cuDNN keeps none).
        WITHIN_CHANNEL runs an inner split, square, average pooling, power and product: three
        bottom-sized outputs forward, and their diffs plus the split's two diffs backward.
        (protoaudit counts cuDNN's within-channel LCN the same way.)"""
        t = super().touches(run)
        p = self.lp.lrn_param
        size = count(run.bottoms[0])
        if p.norm_region == 1:
            inner = ("square_output_", "pool_output_", "power_output_")
            t += [touch.buffer(name, size, "forward", per_sample=True) for name in inner]
            t += [touch.buffer(name + ".diff", size, "backward", per_sample=True)
                  for name in inner + ("product_input_", "square_input_")]
        # the 2015 forks have no cuDNN LRN: theirs is always Caffe's.
        elif not (run.mode == "gpu" and run.engine == "cudnn" and p.engine != 1
                  and self.ctx.schema not in CUDNN_2015_FORKS):
            t.append(touch.buffer("scale_", size, "forward", per_sample=True))
        return t


@register("MVN")
class MVN(Neuron):
    """MVNLayer shapes its top through the legacy 4-axis accessors: an (N, C) bottom gives (N, C, 1, 1)."""

    def reshape(self, bottoms):
        return [legacy_shape(self, bottoms[0])]

    def touches(self, run):
        """Reshape sets sum_multiplier_ to ones (H*W, or C*H*W across channels); the forward writes
        mean_ (N*C), temp_ (the bottom's size) and, normalising the variance, variance_ (N*C)
        (mvn_layer.cpp:9-67)."""
        n, c, h, w = legacy_shape(self, run.bottoms[0])
        p = self.lp.mvn_param
        t = super().touches(run)
        t.append(touch.buffer("sum_multiplier_", (c if p.across_channels else 1) * h * w, "setup", per_sample=False))
        t.append(touch.buffer("mean_", n * c, "forward", per_sample=True))
        t.append(touch.buffer("temp_", n * c * h * w, "forward", per_sample=True))
        if p.normalize_variance:
            t.append(touch.buffer("variance_", n * c, "forward", per_sample=True))
        return t


@register("Softmax")
class Softmax(Neuron):
    def reshape(self, bottoms):
        canonical_axis(self, self.lp.softmax_param.axis, len(bottoms[0]))
        return [tuple(bottoms[0])]

    def touches(self, run):
        return super().touches(run) + softmax_buffers(self, run.bottoms[0], run)


@register("BatchNorm")
class BatchNorm(Neuron):
    """Running mean and variance per channel (axis 1), and the moving-average factor.

    Caffe's setup gives these statistics lr_mult 0 by adding the param specs the layer lacks to its
    own copy of the LayerParameter, and refuses a nonzero lr_mult for them. Net::Init decides
    whether the layer needs backward from the net's copy, where a missing spec means lr_mult 1.
    """

    def __init__(self, lp, ctx):
        super().__init__(lp, ctx)
        self._specs = list(lp.param)  # this layer's own ParamSpecs (Caffe's layer_param_), the missing ones added
        self._schema_layer = lp.DESCRIPTOR

    def reshape(self, bottoms):
        if len(bottoms[0]) < 2:
            self.fail(f"BatchNorm normalises per channel (axis 1); the bottom {tuple(bottoms[0])} has no axis 1")
        return [tuple(bottoms[0])]

    def param_shapes(self, bottoms):
        for i in range(3):
            if len(self._specs) == i:
                self._specs.append(_statistics_spec(self._schema_layer))
            else:
                self.check(self._specs[i].lr_mult == 0, "cannot configure batch normalization statistics "
                           f"as layer parameters (param {i} has lr_mult {self._specs[i].lr_mult})",
                           fix="give BatchNorm's param { } entries lr_mult: 0, or none at all")
        channels = bottoms[0][1]
        return [(channels,), (channels,), (1,)]  # running mean, variance, moving-average factor

    def param_specs(self):
        return self._specs

    def touches(self, run):
        """mean_/variance_ per channel, temp_ and x_norm_ the bottom's size, and the multipliers;
        its three statistics blobs get no gradient; in place, backward keeps x_norm_'s diff too."""
        shape = run.bottoms[0]
        n, c = shape[0], (shape[1] if len(shape) > 1 else 1)
        spatial = count(shape) // (n * c)
        size = count(shape)
        t = [x for x in super().touches(run) if not (x.what == "param" and x.part == "diff")]
        t += [touch.buffer("spatial_sum_multiplier_", spatial, "setup", per_sample=False),
              touch.buffer("batch_sum_multiplier_", n, "setup", per_sample=True),
              touch.buffer("mean_", c, "forward", per_sample=False),
              touch.buffer("variance_", c, "forward", per_sample=False),
              touch.buffer("num_by_chans_", n * c, "forward", per_sample=True),
              touch.buffer("temp_", size, "forward", per_sample=True),
              touch.buffer("x_norm_", size, "forward", per_sample=True),
              touch.bottom(0, "diff", "backward")]
        if run.in_place[0]:
            t.append(touch.buffer("x_norm_.diff", size, "backward", per_sample=True))
        return t


@functools.cache
def _statistics_spec(layer_descriptor):
    """A ParamSpec with lr_mult 0, as BatchNorm's setup adds for a statistic the file gives none
    (one message of the schema's ParamSpec type, shared: it is only read)."""
    from google.protobuf import message_factory

    spec = message_factory.GetMessageClass(layer_descriptor.fields_by_name["param"].message_type)()
    spec.lr_mult = 0
    return spec


def _affine_shape(layer, bottoms, axis, num_axes):
    """The shape of a Scale/Bias parameter: bottom[0]'s axes [axis, axis+num_axes)."""
    shape = bottoms[0]
    axis = canonical_axis(layer, axis, len(shape))
    layer.check(num_axes >= -1, "num_axes must be non-negative, or -1 to extend to the end of bottom[0]")
    end = len(shape) if num_axes == -1 else axis + num_axes
    if end > len(shape):
        layer.fail(f"bottom[0] has {len(shape)} axes; axis {axis} + num_axes {num_axes} is beyond")
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

    def touches(self, run):
        """ScaleLayer keeps sum_multiplier_ (set in Reshape), a copy of its bottom when in place
        (temp_, every forward), sum_result_ for the scale gradient, and an inner BiasLayer's
        bias_multiplier_; its backward writes the scale diff through the bottom's diff."""
        p = self.param()
        shape = run.bottoms[0]
        axis = canonical_axis(self, p.axis, len(shape)) if shape else 0
        scale_shape = run.bottoms[1] if len(run.bottoms) > 1 else _affine_shape(self, run.bottoms, p.axis, p.num_axes)
        outer, scale_dim = count(shape, 0, axis), count(scale_shape)
        inner = count(shape, axis + len(scale_shape))
        t = super().touches(run)
        t.append(touch.buffer("sum_multiplier_", max(outer, inner), "setup", per_sample=outer >= inner))
        if p.bias_term:
            t.append(touch.buffer("bias_layer_.bias_multiplier_", inner, "setup", per_sample=False))
        if run.in_place[0]:
            t.append(touch.buffer("temp_", count(shape), "forward", per_sample=True))
        scale_grad = run.propagate_down[1] if len(run.bottoms) > 1 else run.param_propagate_down[0]
        if scale_grad:
            is_eltwise = count(shape) == scale_dim
            if not is_eltwise and not run.in_place[0]:
                t.append(touch.bottom(0, "diff", "backward"))  # the product is staged there
            if not is_eltwise and inner != 1 and outer * scale_dim != 1 and outer != 1:
                t.append(touch.buffer("sum_result_", outer * scale_dim, "backward", per_sample=True))
        return t


@register("Bias")
class Bias(_Affine):
    def param(self):
        return self.lp.bias_param

    def param_shapes(self, bottoms):
        if len(bottoms) == 2:
            return []
        p = self.param()
        return [_affine_shape(self, bottoms, p.axis, p.num_axes)]

    def touches(self, run):
        p = self.param()
        shape = run.bottoms[0]
        axis = canonical_axis(self, p.axis, len(shape)) if shape else 0
        bias_shape = run.bottoms[1] if len(run.bottoms) > 1 else _affine_shape(self, run.bottoms, p.axis, p.num_axes)
        inner = count(shape, axis + len(bias_shape))
        t = [x for x in super().touches(run)
             if not (x.what == "bottom" and x.part == "diff" and x.index == 0 and run.in_place[0])]
        return t + [touch.buffer("bias_multiplier_", inner, "setup", per_sample=False)]


def softmax_buffers(layer, shape, run):
    """SoftmaxLayer's sum_multiplier_ (the class axis, set to ones in Reshape; only the CPU code
    reads it, so in GPU mode it stays on the host) and scale_ (the bottom with the class axis cut
    to 1), as Softmax and SoftmaxWithLoss's inner softmax keep. cuDNN's softmax (the default in a
    cuDNN build, for the inner one too) never touches scale_."""
    axis = canonical_axis(layer, layer.lp.softmax_param.axis, len(shape))
    t = [touch.buffer("sum_multiplier_", shape[axis], "setup", per_sample=False, device="host")]
    cudnn = run.mode == "gpu" and run.engine == "cudnn" and layer.lp.softmax_param.engine != 1
    if not cudnn:
        t.append(touch.buffer("scale_", count(shape) // shape[axis], "forward", per_sample=True))
    return t
