"""py-R-FCN's Caffe's own layers (Microsoft/caffe at 1a2be8e, the commit YuwenXiong/py-R-FCN names).

PSROIPooling and BoxAnnotatorOHEM (psroi_pooling_layer, box_annotator_ohem_layer), and
SoftmaxWithLossOHEM and SmoothL1LossOHEM (softmax_loss_ohem_layer, smooth_L1_loss_ohem_layer:
SoftmaxWithLoss and SmoothL1Loss with a per-item loss top); file references are to that commit's
include/caffe/layers/*.hpp and src/caffe/layers/*.cpp/.cu. None of them has CPU code (each
Forward_cpu and Backward_cpu is NOT_IMPLEMENTED), so a CPU-mode run stops at the first of them
(`touch.stop`). Its ROIPooling and SmoothL1Loss are caffe-fast-rcnn's, with caffe-priv's CPU
backward for ROIPooling (the same code as protoaudit.layers.priv's).

The fork grew from caffe-fast-rcnn's layers (protoaudit.read.schema.DESCENDS_FROM): a file both
read, such as py-faster-rcnn's, is caffe-fast-rcnn's; R-FCN's own fields and types make it this fork's.
"""
from . import enet, fastrcnn, normalization, priv, touch
from .base import Layer, count, legacy_shape, register
from .losses import SoftmaxWithLoss

FORK = "rfcn"
SOURCE = "py-R-FCN's Caffe"


def no_cpu(layer, passes=("forward", "backward")):
    """The stops of a layer whose CPU passes are NOT_IMPLEMENTED (where: its `no_cpu_code`)."""
    return [touch.stop(p, f"{layer.source}'s {layer.lp.type} has no CPU {p} ({layer.no_cpu_code}, NOT_IMPLEMENTED): "
                       f"Caffe stops at its first {p} pass in CPU mode") for p in passes]


@register("PSROIPooling", fork=FORK)
class PSROIPooling(Layer):
    """PSROIPoolingLayer: position-sensitive average pooling of each region of interest (bottom 1,
    R rows of 5) of the score maps (bottom 0, output_dim x group_size^2 channels) into
    group_size x group_size bins, one channel group per bin.

    The top and mapping_channel_ (Blob<int>) are (R, output_dim, group_size, group_size)
    (psroi_pooling_layer.cpp:47-50); the channels must be output_dim * group_size^2 (cpp:43-44)."""

    source = SOURCE
    no_cpu_code = "psroi_pooling_layer.cpp:56 and :62"  # Forward_cpu, Backward_cpu

    exact_bottoms = 2  # psroi_pooling_layer.hpp:46-49
    exact_tops = 1

    def reshape(self, bottoms):
        p = self.fork_param("psroi_pooling_param")
        self.check(p.output_dim > 0, "output_dim must be > 0", fix="set psroi_pooling_param { output_dim: CLASSES }")
        self.check(p.group_size > 0, "group_size must be > 0", fix="set psroi_pooling_param { group_size: 7 }")
        channels = legacy_shape(self, bottoms[0])[1]
        need = p.output_dim * p.group_size ** 2
        self.check(channels == need, f"input channel number does not match layer parameters: bottom 0 has {channels} "
                   f"channels, output_dim x group_size^2 = {need}")
        return [(legacy_shape(self, bottoms[1])[0], p.output_dim, p.group_size, p.group_size)]

    def touches(self, run):
        """Forward (cu:93-101) writes the top and mapping_channel_. Backward returns unless the maps
        need a diff (cu:183-185); then it zeroes the rois' diff as well as the maps', whatever
        propagate_down says of the rois (cu:192-193)."""
        if run.mode == "cpu":
            return no_cpu(self)
        t = [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"), touch.top(0, "data", "forward"),
             touch.buffer("mapping_channel_", count(run.tops[0]), "forward", per_sample=True,
                          note="int32, the top's size: each output's channel")]
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(1, "diff", "backward"),
                  touch.bottom(0, "diff", "backward")]
        return t


@register("BoxAnnotatorOHEM", fork=FORK)
class BoxAnnotatorOHEM(Layer):
    """BoxAnnotatorOHEMLayer: online hard example mining. Bottoms: the rois (R, 5), the per-roi
    loss, the labels and the box-regression weights, each R-by-... with the rois' height and width
    (box_annotator_ohem_layer.cpp:39-58). Tops: the labels (R, 1, H, W) and the weights (R, box
    channels, H, W) (cpp:61-63). Its GPU forward reads the bottoms and writes the tops on the host
    (cu:20-25); its GPU backward does nothing (cu:74-77)."""

    source = SOURCE
    no_cpu_code = "box_annotator_ohem_layer.cpp:69 and :76"  # Forward_cpu, Backward_cpu

    exact_bottoms = 4  # box_annotator_ohem_layer.hpp:32-33
    exact_tops = 2

    def reshape(self, bottoms):
        p = self.fork_param("box_annotator_ohem_param")
        self.check(p.roi_per_img > 0, "roi_per_img must be > 0", fix="set box_annotator_ohem_param { roi_per_img: 128 }")
        rois, loss, labels, weights = (legacy_shape(self, b) for b in bottoms)
        self.check(rois[1] == 5, f"the rois (bottom 0) must have 5 channels; got {tuple(bottoms[0])}")
        spatial = rois[2:]
        for j, (shape, channels) in enumerate(((loss, 1), (labels, 1), (weights, None)), start=1):
            self.check(shape[0] == rois[0] and (channels is None or shape[1] == channels) and shape[2:] == spatial,
                       f"bottom {j} {tuple(bottoms[j])} must have the rois' num {rois[0]}"
                       + (f", {channels} channel" if channels else "") + f" and their height and width {spatial}")
        return [(rois[0], 1) + spatial, (rois[0], weights[1]) + spatial]

    def touches(self, run):
        if run.mode == "cpu":
            return no_cpu(self)
        return ([touch.bottom(j, "data", "forward", device="host") for j in range(4)]
                + [touch.top(j, "data", "forward", device="host") for j in range(2)])


@register("SmoothL1LossOHEM", fork=FORK)
class SmoothL1LossOHEM(Layer):
    """SmoothL1LossOHEMLayer: two bottoms, or three with the inside weights (smooth_l1_loss_ohem_layer.hpp:
    33-35, cpp:19); bottoms 1 and 2 have bottom 0's channels, height and width (cpp:35-42), and
    LossLayer's num check (cpp:34). Its LayerSetUp never calls LossLayer's (cpp:17-29), so no loss
    weight of 1 by default. A second top holds the per-item loss, (N, 1, H, W) (cpp:53-56).
    diff_ and errors_ are bottom 0's size (cpp:47-50); there is no ones_. No CPU code (cpp:92, :99)."""

    source = SOURCE
    no_cpu_code = "smooth_L1_loss_ohem_layer.cpp:92 and :99"  # Forward_cpu, Backward_cpu

    min_bottoms = 2
    max_bottoms = 3
    min_tops = 1
    max_tops = 2
    auto_top_blobs = True  # a LossLayer

    def allow_force_backward(self, bottom_index):
        return True  # hpp:44-46

    def reshape(self, bottoms):
        shapes = [legacy_shape(self, b) for b in bottoms]
        self.check(shapes[0][0] == shapes[1][0],
                   f"the data {tuple(bottoms[0])} and label {tuple(bottoms[1])} should have the same number")
        for j in range(1, len(shapes)):
            self.check(shapes[j][1:] == shapes[0][1:], f"bottom {j} {tuple(bottoms[j])} must have bottom 0's "
                       f"channels, height and width {tuple(bottoms[0])}")
        n, _, h, w = shapes[0]
        return [()] + ([(n, 1, h, w)] if len(self.lp.top) > 1 else [])

    def touches(self, run):
        """Forward (cu:46-80): diff_ and errors_, the loss into top 0, the per-item sums into top 1.
        Backward (cu:101-124) turns diff_ into the gradient in place and writes the diffs of bottoms
        0 and 1 where they need one."""
        if run.mode == "cpu":
            return no_cpu(self)
        size = count(run.bottoms[0])
        t = [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        t += [touch.buffer("diff_", size, "forward", per_sample=True, note="w_in * (b0 - b1)"),
              touch.buffer("errors_", size, "forward", per_sample=True, note="smooth L1 of each element")]
        t += [touch.top(j, "data", "forward") for j in range(len(run.tops))]
        down = [j for j in (0, 1) if run.propagate_down[j]]
        if down:
            t += [touch.top(0, "diff", "backward")] + [touch.bottom(j, "diff", "backward") for j in down]
        return t


@register("SoftmaxWithLossOHEM", fork=FORK)
class SoftmaxWithLossOHEM(SoftmaxWithLoss):
    """SoftmaxWithLossOHEMLayer: BVLC's SoftmaxWithLoss with a third top that holds each item's
    loss, bottom 1's shape (softmax_loss_ohem_layer.cpp:59-62; hpp:64-66), copied there from the
    forward's scratch, bottom 0's diff (cu:42, :67). No CPU code (cpp:98, :105)."""

    max_tops = 3
    source = SOURCE
    no_cpu_code = "softmax_loss_ohem_layer.cpp:98 and :105"  # Forward_cpu, Backward_cpu

    def reshape(self, bottoms):
        tops = super().reshape(bottoms)
        return tops + [tuple(bottoms[1])] if len(self.lp.top) > 2 else tops

    def touches(self, run):
        """BVLC's, but the inner Softmax is set up without the loss weights (cpp:14-16, for a layer
        of several tops), so prob_'s diff is not filled at setup: the GPU forward first writes it,
        as the valid counts (cu:45)."""
        if run.mode == "cpu":
            return no_cpu(self)
        t = [x for x in super().touches(run) if not (x.what == "top" and x.index == 2) and x.name != "prob_.diff"]
        t.append(touch.buffer("prob_.diff", count(run.bottoms[0]), "forward", per_sample=True,
                              note="the valid counts"))
        return t + ([touch.top(2, "data", "forward")] if len(run.tops) > 2 else [])


@register("ROIPooling", fork=FORK)
class ROIPooling(priv.ROIPooling):
    """caffe-fast-rcnn's ROIPoolingLayer with caffe-priv's CPU backward, the same code
    (roi_pooling_layer.cpp/.cu)."""

    claims_files = True


@register("SmoothL1Loss", fork=FORK)
class SmoothL1Loss(fastrcnn.SmoothL1Loss):
    """caffe-fast-rcnn's SmoothL1LossLayer, the same code (smooth_l1_loss_layer.cpp/.cu)."""

    source = SOURCE
    no_cpu_code = "smooth_l1_loss_layer.cpp:49 and :55"  # Forward_cpu, Backward_cpu


@register("BatchNorm", fork=FORK)
class BatchNorm(normalization.BatchNorm):
    """BVLC's BatchNormLayer as the fork changed it: on the GPU the normalised output is cached in
    x_norm_ (batch_norm_layer.cu:88-91), and in place the top's diff staged in x_norm_'s diff
    (cu:99-108), only when the layer computes batch statistics; with use_global_stats (R-FCN's
    frozen BatchNorms; the default in TEST, cpp:14-16) it touches neither. Its CPU code does both
    whatever the statistics (cpp:152-153, :164-165)."""

    def global_stats(self, run):
        p = self.lp.batch_norm_param
        return p.use_global_stats if p.HasField("use_global_stats") else run.phase == "TEST"

    def x_norm_shaped(self, run):
        """Whether Reshape gives x_norm_ the bottom's shape: always here (cpp:51)."""
        return True

    def touches(self, run):
        t = super().touches(run)
        if self.x_norm_shaped(run) and (run.mode == "cpu" or not self.global_stats(run)):
            return t
        return [x for x in t if x.name not in ("x_norm_", "x_norm_.diff")]


@register("Scale", fork=FORK)
class Scale(normalization.Scale):
    """BVLC's ScaleLayer, but in place its GPU forward copies the bottom into temp_ only when the
    scale takes a gradient: always with the scale as a bottom, with its own scale only when that
    parameter learns (scale_layer.cu:34-43); R-FCN's frozen Scales (lr_mult 0) never touch it. The
    CPU forward copies it whatever (scale_layer.cpp:114-121)."""

    def touches(self, run):
        t = super().touches(run)
        if run.mode == "cpu" or len(run.bottoms) > 1 or run.param_propagate_down[0]:
            return t
        return [x for x in t if x.name != "temp_"]


@register("Accuracy", fork=FORK)
class Accuracy(enet.Accuracy):
    """The fork's AccuracyLayer: 2016 BVLC's, a scalar top and a per-class top with nums_buffer_
    (accuracy_layer.cpp:36-44), with CPU code only (no accuracy_layer.cu), as caffe-enet's: in GPU
    mode its bottoms are read and its tops and nums_buffer_ written on the host."""
