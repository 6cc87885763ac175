"""OpenVINO's training toolbox Caffe (openvinotoolkit/training_toolbox_caffe 5e543a4, its caffe/ folder),
as its sources shape them: Intel's port of SSD's layers to a 2017 BVLC Caffe.

File:line references are to caffe/src/caffe/layers/ at that commit. Compared past Intel's licence header:
- with weiliu89/caffe 4817bf8 (the SSD fork protoaudit ships): permute_layer.cpp/.cu, prior_box_layer.cpp and
  normalize_layer.cpp/.cu are the same files; multibox_loss_layer.cpp, detection_output_layer.cpp/.cu and
  detection_evaluate_layer.cpp differ only in which ground-truth labels they keep with two classes and an
  OpenCV version guard (no blob, no shape): those classes are SSD's;
- with happynear/caffe-windows 967eedf: inner_product_layer.cpp/.cu (`normalize`'s weight_norm_, weights as
  bottoms) differ only in accumulating the weight's gradient where happynear's overwrites it (cpp:186-197,
  cu:47-50): the same blobs, so that class.
Its own here: PriorBoxClustered; AnnotatedData on BVLC's prefetching; py-faster-rcnn's SmoothL1Loss with CPU
code; a SoftmaxWithLoss with no GPU code; cuDNN 7's grouped convolution; Pooling without round_mode; a
ConvolutionDepthwise that pads 0 by default.
"""
from . import conv, fastrcnn, goodluckcwl, happynear, pooling, ssd, touch
from .base import Layer, carry, count, register
from .data import Prefetching
from .losses import SoftmaxWithLoss as BvlcSoftmaxWithLoss

FORK = "openvino"

carry(__name__, FORK, ssd.Permute, ssd.PriorBox, ssd.Normalize, ssd.MultiBoxLoss, ssd.DetectionOutput,
      ssd.DetectionEvaluate)
carry(__name__, FORK, happynear.InnerProduct)


@register("AnnotatedData", fork=FORK)
class AnnotatedData(ssd.AnnotatedData):
    """The SSD fork's AnnotatedDataLayer (the same tops: annotated_data_layer.cpp:84-148) read through a
    cursor on BVLC's BasePrefetchingDataLayer: data_param.prefetch batches, the tops pointed at the
    current one (base_data_layer.cpp:76-80, :152-162), where SSD's keeps 3 and copies them."""

    prefetch = Prefetching.prefetch
    touches = Prefetching.touches
    batches_in_array = Prefetching.batches_in_array


@register("Convolution", fork=FORK)
class Convolution(conv.Convolution):
    """BVLC's convolution but for its cuDNN 7 code (the toolbox's docker image builds on
    nvidia/cuda:9.0-cudnn7): the groups go to cuDNN in one descriptor (cudnn_conv_layer.cpp:138-139),
    and one workspace per stream, 3 in all, serves every group (cpp:79-80, :269-270)."""

    workspace_groups = 1

    @classmethod
    def sized_as(cls, lp):
        """One group is BVLC's convolution, line for line."""
        return cls if lp.convolution_param.group > 1 else conv.Convolution


@register("ConvolutionDepthwise", fork=FORK)
class ConvolutionDepthwise(goodluckcwl.ConvolutionDepthwise):
    """farmingyard's ConvolutionDepthwiseLayer as goodluckcwl/custom-caffe keeps it (its multipliers filled on
    the host: conv_dw_layer.cpp:153-170), but for a pad left out, which is 0 here (cpp:74-88) where that one
    reads the field anyway."""

    def _pair(self, name):
        p = self.lp.convolution_param
        if name == "pad" and not p.pad and not (p.HasField("pad_h") and p.HasField("pad_w")):
            return 0, 0
        return super()._pair(name)


@register("Pooling", fork=FORK)
class Pooling(pooling.Pooling):
    """BVLC's PoolingLayer as SSD's has it (no round_mode: always rounding up, pooling_layer.cpp:135-138), plus
    Intel's MDS, a shared multi-dilation pooling (cpp:151-161: C / (kh x kw) channels), which has no rule: it is
    refused, as is a dilation other than 1 on another method (cpp:104-109)."""

    MDS = 3

    @classmethod
    def sized_as(cls, lp):
        """Without MDS or a dilation, BVLC's Pooling sizes it alike (its default round_mode rounds up)."""
        p = lp.pooling_param
        return cls if p.pool == cls.MDS or p.dilation != 1 else pooling.Pooling

    def rounding(self):
        return pooling.CEIL

    def reshape(self, bottoms):
        p = self.lp.pooling_param
        self.check(p.pool != self.MDS, "protoaudit has no rule for MDS pooling (pooling_layer.cpp:151-161)",
                   fix="declare its top with --input")
        self.check(p.dilation == 1, "Dilation implemented only for MDS pooling")
        return super().reshape(bottoms)


@register("PriorBoxClustered", fork=FORK)
class PriorBoxClustered(ssd.PriorBox):
    """PriorBoxClusteredLayer: one prior per (width, height) pair at each cell of bottom 0, as
    (1, 2, H * W * priors * 4): corners, then variances (prior_box_clustered_layer.cpp:123-137), with
    priors = the number of widths (cpp:67). Each width needs a height: the forward reads heights_[s] for
    every width (cpp:170-172), while setup CHECKs the counts only when heights are given (cpp:59-65).
    The bottom count is not checked (the header misspells ExactNumBottomBlobs, hpp:78); the forward reads
    bottom 1's size unless img_size or img_h and img_w are given (cpp:145-147). CPU code only, no
    backward, no buffer: its top is written on the host (in GPU mode the next layer copies it over)."""

    def num_priors(self):
        p = self.fork_param("prior_box_param")
        self.check(len(p.width) > 0, "must provide width")
        self.check(all(w > 0 for w in p.width), "width must be positive")
        self.check(len(p.height) == len(p.width),
                   f"give one height per width ({len(p.width)} width, {len(p.height)} height): the forward "
                   "reads a height for every width", fix="add the heights of the clustered priors")
        self.check(all(h > 0 for h in p.height), "height must be positive")
        self.check_variances_and_steps(p)
        return len(p.width)


@register("SmoothL1Loss", fork=FORK)
class SmoothL1Loss(fastrcnn.SmoothL1Loss):
    """py-faster-rcnn's SmoothL1LossLayer: smooth_l1_loss_layer.cu is caffe-fast-rcnn 4115385's
    smooth_L1_loss_layer.cu line for line, and its .cpp adds the CPU code that one lacks
    (smooth_l1_loss_layer.cpp:84-167): the same diff_, errors_ and ones_ on the host, the same diffs.
    A file whose only fork type is SmoothL1Loss stays caffe-fast-rcnn's (`--fork openvino` makes it this)."""

    claims_files = False
    source = "OpenVINO's training toolbox Caffe"

    def touches(self, run):
        if run.mode != "cpu":
            return super().touches(run)
        size = count(run.bottoms[0])
        down = [j for j in (0, 1) if run.propagate_down[j]]
        t = [touch.buffer("ones_", size, "setup", per_sample=True, note="ones, bottom 0's size")]
        t += [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        t += [touch.buffer("diff_", size, "forward", per_sample=True, note="w_in * (b0 - b1)"),
              touch.buffer("errors_", size, "forward", per_sample=True, note="smooth L1 of each element"),
              touch.top(0, "data", "forward")]
        t += [touch.bottom(j, "diff", "backward") for j in down]
        return t + ([touch.top(0, "diff", "backward")] if down else [])


@register("SoftmaxWithLoss", fork=FORK)
class SoftmaxWithLoss(BvlcSoftmaxWithLoss):
    """SoftmaxWithLossLayer with Intel's class and instance weighting and no GPU code (there is no
    softmax_loss_layer.cu): in GPU mode only its inner Softmax runs on the device. That Softmax is made
    from a bare LayerParameter (cpp:54-62: axis 1, the default engine, no loss weight, so prob_ has no
    diff). Each forward reads prob_ and the labels on the host and writes each item's loss into bottom
    0's diff and a 1 per counted item into valid_losses_ (outer x inner), both on the host
    (cpp:259-271); backward writes the bottom's diff on the host (cpp:398-408), which the layer below
    copies to the device. weight_by_label_freqs keeps class_weights_, adaptive_weighting class_counts_
    and smoothed_frequencies_ too, one float per class (cpp:96-118)."""

    def class_weighting(self):
        loss = self.lp.loss_param
        self.check(not (loss.weight_by_label_freqs and loss.adaptive_weighting),
                   "weight_by_label_freqs and adaptive_weighting cannot both be set (softmax_loss_layer.cpp:90)")
        return loss.weight_by_label_freqs  # one class_weighting per class (cpp:103)

    def touches(self, run):
        shape = run.bottoms[0]
        gpu = run.mode == "gpu"
        host = "host" if gpu else "device"
        loss = self.lp.loss_param
        t = [x for x in Layer.touches(self, run) if not (x.what == "top" and x.index == 1)]
        t.append(touch.buffer("sum_multiplier_", shape[1], "setup", per_sample=False, device=host))
        if not (gpu and run.engine == "cudnn"):
            t.append(touch.buffer("scale_", count(shape) // shape[1], "forward", per_sample=True))
        if len(run.tops) > 1:
            t.append(touch.top(1, "data", "forward"))
        else:
            t.append(touch.buffer("prob_", count(shape), "forward", per_sample=True))
        t.append(touch.bottom(0, "diff", "forward", device=host))
        if gpu:
            t += [touch.buffer("prob_ (host)", count(shape), "forward", per_sample=True, device="host"),
                  touch.bottom(1, "data", "forward", device="host"), touch.top(0, "data", "forward", device="host")]
            if run.propagate_down[0]:
                t += [touch.top(0, "diff", "backward", device="host"), touch.bottom(0, "diff", "backward")]
        axis = self.lp.softmax_param.axis % len(shape)
        t.append(touch.buffer("valid_losses_", count(shape) // shape[axis], "forward", per_sample=True,
                              device=host))
        weights = ["class_weights_"] if loss.weight_by_label_freqs or loss.adaptive_weighting else []
        if loss.adaptive_weighting:
            weights += ["class_counts_", "smoothed_frequencies_"]
        t += [touch.buffer(name, shape[axis], "setup", per_sample=False, device=host) for name in weights]
        return t
