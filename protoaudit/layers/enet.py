"""caffe-enet (TimoSaemann/caffe-enet): caffe-segnet's BN, Upsample and DenseImageData ported to a
2017 BVLC Caffe, with a label_divide_factor for DenseImageData, and the spatial dropout ENet uses,
shipped as a Python layer (python/spatial_dropout.py).

Sources: TimoSaemann/caffe-enet at the commit named in proto/forks/enet.proto. Where a file is
caffe-segnet's unchanged (bn_layer.cpp/.cu, upsample_layer.cpp/.cu and softmax_loss_layer.cpp/.cu
differ from alexgkendall/caffe-segnet 344c113 in their #include lines only), the class is
segnet's; the other layers are BVLC's.
"""
import ast

from . import segnet, touch
from .base import count, register
from .activations import Dropout as BvlcDropout
from .data import Python
from .losses import Accuracy as BvlcAccuracy
from .losses import SoftmaxWithLoss as BvlcSoftmaxWithLoss

FORK = "enet"


@register("BN", fork=FORK)
class BN(segnet.BN):
    """caffe-enet's BNLayer: caffe-segnet's bn_layer.cpp/.cu (LEARN or INFERENCE bn_mode,
    scale and shift (1, C, 1, 1)), buffers as segnet.BN lists them."""


@register("Upsample", fork=FORK)
class Upsample(segnet.Upsample):
    """caffe-enet's UpsampleLayer: caffe-segnet's upsample_layer.cpp/.cu (scale, or
    upsample_h/upsample_w; the pooling mask as bottom 1), no buffers of its own."""


@register("DenseImageData", fork=FORK)
class DenseImageData(segnet.DenseImageData):
    """caffe-enet's DenseImageDataLayer (dense_image_data_layer.cpp:31-124): caffe-segnet's, with
    label_divide_factor. Without a crop, the label top is (N, 1, H / f, W / f) for the image's
    H x W (new_height x new_width when given) and f = label_divide_factor (:114-116, C++ integer
    division); a crop (crop_size, else crop_height x crop_width) gives the label the crop's size
    whatever the factor (:93-108). Its 2017 base (base_data_layer.cpp, as caffe-segnet's) keeps
    ONE prefetch batch of each top and copies it into the tops each forward."""

    def reshape(self, bottoms):
        data, label = super().reshape(bottoms)
        p = self.lp.dense_image_data_param
        factor = p.label_divide_factor
        self.check(factor > 0, "label_divide_factor must be positive")
        if not self.crop() and not p.crop_height and self.lp.top[1] not in self.ctx.inputs:
            label = (data[0], 1, data[2] // factor, data[3] // factor)
        return [data, label]


@register("SoftmaxWithLoss", fork=FORK)
class SoftmaxWithLoss(BvlcSoftmaxWithLoss):
    """caffe-enet's SoftmaxWithLossLayer is caffe-segnet's (softmax_loss_layer.cpp/.cu): BVLC's,
    with per-class weights when loss_param.weight_by_label_freqs (label_counts_, C floats)."""

    def class_weighting(self):
        return self.lp.loss_param.weight_by_label_freqs


@register("Accuracy", fork=FORK)
class Accuracy(BvlcAccuracy):
    """caffe-enet's AccuracyLayer (accuracy_layer.cpp:22-45): BVLC's of 2017, a scalar top and a
    per-class (C,) top with its nums_buffer_ (C), but CPU code only (no accuracy_layer.cu), so in
    GPU mode its tops and nums_buffer_ stay on the host."""

    def touches(self, run):
        t = [touch.bottom(j, "data", "forward", device="host") for j in range(len(run.bottoms))]
        t += [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))]
        if len(run.tops) > 1:
            t.append(touch.buffer("nums_buffer_", count(run.tops[1]), "forward", per_sample=False, device="host"))
        return t


@register("Dropout", fork=FORK)
class Dropout(BvlcDropout):
    """caffe-enet's DropoutLayer (dropout_layer.cpp, .cu): BVLC's, plus dropout_param's
    sample_weights_test, which draws the uint32 mask rand_vec_ (the bottom's size) in TEST too."""

    def touches(self, run):
        t = super().touches(run)
        if run.phase != "TRAIN" and run.mode != "cpu" and self.lp.dropout_param.sample_weights_test:
            t.append(touch.buffer("rand_vec_", count(run.bottoms[0]), "forward", per_sample=True))
        return t


SPATIAL_DROPOUT = ("spatial_dropout", "SpatialDropoutLayer")


@register("Python", fork=FORK)
class PythonLayer(Python):
    """A Python layer in a caffe-enet net: the fork ships one, python/spatial_dropout.py
    (SpatialDropoutLayer), which protoaudit sizes from its source without running it; any other
    module is the user's, whose tops the user declares (--input), as for BVLC's Python layer.

    SpatialDropoutLayer (spatial_dropout.py:16-59): one bottom, one top of its shape (reshape,
    :37-39). Its mask is per channel: setup keeps `vec`, C ones, and each TRAIN forward draws
    `vec_w` (np.random.binomial, C values), both NumPy int64 arrays on the host; the `phase` in
    its param_str, not the net's, decides whether it drops. It computes through the blobs' host
    views (top[0].data, bottom[0].diff), so in GPU mode its top and its bottom's diff reach the
    device only when the neighbouring layers read them (as the net's other blobs)."""

    def is_spatial_dropout(self):
        p = self.lp.python_param
        return (p.module, p.layer) == SPATIAL_DROPOUT

    @property
    def gap(self):
        return None if self.is_spatial_dropout() else Python.gap

    def reshape(self, bottoms):
        if not self.is_spatial_dropout():
            return super().reshape(bottoms)
        self.check(len(bottoms) == 1 and len(self.lp.top) == 1, "SpatialDropoutLayer takes one bottom and "
                   "gives one top")
        self.check(len(bottoms[0]) == 4, f"SpatialDropoutLayer reads (num, channels, height, width); got "
                   f"{tuple(bottoms[0])}")
        return [tuple(bottoms[0])]

    def drops(self):
        """Whether the layer's own param_str says TRAIN (setup reads it with eval, :27-29)."""
        try:
            param = ast.literal_eval(self.lp.python_param.param_str)
            return param["phase"] == "TRAIN"
        except (ValueError, SyntaxError, TypeError, KeyError):
            self.fail("SpatialDropoutLayer's param_str must be a dict with 'phase' and 'p', e.g. "
                      "\"{'phase': 'TRAIN', 'p': '0.01'}\"")

    def touches(self, run):
        t = super().touches(run)
        if not self.is_spatial_dropout():
            return t
        channels = run.bottoms[0][1]
        t.append(touch.buffer("vec", channels, "setup", per_sample=False, itemsize=8, device="host",
                              note=f"{channels} int64 (NumPy)"))
        if self.drops():
            t.append(touch.buffer("vec_w", channels, "forward", per_sample=False, itemsize=8, device="host",
                                  note=f"{channels} int64 (NumPy)"))
        return t
