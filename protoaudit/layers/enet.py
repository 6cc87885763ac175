"""caffe-enet (TimoSaemann/caffe-enet): caffe-segnet's BN, Upsample and DenseImageData ported to a
2017 BVLC Caffe, with a label_divide_factor for DenseImageData, and the spatial dropout ENet uses,
shipped as a Python layer (python/spatial_dropout.py), known to protoaudit.layers.python_layers.

Sources: TimoSaemann/caffe-enet at the commit named in proto/forks/enet.proto. Where a file is
caffe-segnet's unchanged (bn_layer.cpp/.cu, upsample_layer.cpp/.cu and softmax_loss_layer.cpp/.cu
differ from alexgkendall/caffe-segnet 344c113 in their #include lines only), the class is
segnet's; the other layers are BVLC's.
"""
from . import segnet, touch
from .base import count, register
from .activations import Dropout as BvlcDropout
from .losses import Accuracy as BvlcAccuracy
from .losses import SoftmaxWithLoss as BvlcSoftmaxWithLoss
from .python_layers import Known, known

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
    whatever the factor (:93-108). The label image is read at the label's size, and the fork drops
    caffe-segnet's check that it matches its image (:88-89). Its 2017 base (base_data_layer.cpp, as
    caffe-segnet's) keeps ONE prefetch batch of each top and copies it into the tops each forward."""

    def first_pair_size(self, batch):
        p = self.param()
        read = self.first_image(p.source, self.first_names, batch, self.channels(), self.size_from_parameters())
        if read is None:
            return None
        size, origin, _ = read
        if p.new_height:
            return (p.new_height, p.new_width), origin + f", resized to {p.new_width}x{p.new_height}"
        return size, origin

    def reshape(self, bottoms):
        data, label = super().reshape(bottoms)
        p = self.param()
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


@known("spatial_dropout", "SpatialDropoutLayer")
class SpatialDropout(Known):
    """caffe-enet's python/spatial_dropout.py (SpatialDropoutLayer), the spatial dropout ENet's nets
    use, sized from its source (never imported or run): one bottom, one top of its shape (reshape,
    :37-39): exact, not an assumption. Its mask is per channel: setup keeps `vec`, C ones (:33), and
    each forward in its own TRAIN phase draws `vec_w` (np.random.binomial, C values, :43-44), both
    NumPy int64 arrays on the host; the `phase` in its param_str, not the net's, decides whether it
    drops. It computes through the blobs' host views (top[0].data, bottom[0].diff): in GPU mode its
    top and its bottom's diff reach the device when the neighbouring layers read them."""

    gap = None

    def reshape(self, bottoms):
        self.check(len(bottoms) == 1 and len(self.lp.top) == 1, "SpatialDropoutLayer takes one bottom and "
                   "gives one top (spatial_dropout.py:18-21)")
        self.check(len(bottoms[0]) == 4, f"SpatialDropoutLayer reads (num, channels, height, width); got "
                   f"{tuple(bottoms[0])}")
        return [tuple(bottoms[0])]

    def touches(self, run):
        """Forward writes the top from the bottom; backward, when asked (:52), the bottom's diff from
        the top's."""
        channels = run.bottoms[0][1]
        t = [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward"),
             touch.buffer("vec", channels, "setup", per_sample=False, itemsize=8, device="host",
                          note=f"{channels} int64 (NumPy)")]
        if self.drops():
            t.append(touch.buffer("vec_w", channels, "forward", per_sample=False, itemsize=8, device="host",
                                  note=f"{channels} int64 (NumPy)"))
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t

    def drops(self):
        """Whether the layer's own param_str says TRAIN (setup reads it with eval, :27-29)."""
        return self.param(self.dict_params(), "phase", "spatial_dropout.py:28") == "TRAIN"
