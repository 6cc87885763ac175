"""happynear's Caffe (happynear/caffe-windows, branch ms), the Caffe NormFace and AM-Softmax train on:
Flip, Normalize, LabelSpecificAdd, and its own InnerProduct, SoftmaxWithLoss and Accuracy.

Sources: happynear/caffe-windows at 967eedf (the head of ms; caffe.proto and these layers' files are
those of 504d8a8, the commit happynear/AMSoftmax pins, but for a parenthesised macro in
normalize_layer.cpp), src/caffe/layers/ and include/caffe/layers/, cited by file and line. The other
layers these nets use (Convolution, PReLU, Eltwise but its SORT, Slice, Concat, Scale, ImageData with
two tops) differ from BVLC's in messages and parameters that allocate nothing: BVLC's classes size them.
"""
from . import touch
from .base import Layer, canonical_axis, count, legacy_shape, register
from .dense import InnerProduct as BvlcInnerProduct
from .losses import Accuracy as BvlcAccuracy
from .losses import SoftmaxWithLoss as BvlcSoftmaxWithLoss
from .losses import check_label_count
from .normalization import softmax_buffers

FORK = "happynear"
NORMS = ("L2", "L1")  # NormalizeParameter.normalize_type: anything else is NOT_IMPLEMENTED


@register("Flip", fork=FORK)
class Flip(Layer):
    """FlipLayer mirrors the width (and, if asked, the height) of a (num, channels, height, width)
    blob: top like the bottom (flip_layer.cpp:25), read through the legacy 4-axis accessors
    (cpp:33-36). No buffers: forward and backward index one blob into the other (cpp:38-71,
    cu:8-50), the backward only when the layer runs backward, which for this one-bottom layer
    without parameters means its bottom wants a diff."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        legacy_shape(self, bottoms[0])
        return [tuple(bottoms[0])]


def normalize_touches(shape, norm_type, two_tops, bp_norm, gpu_backward):
    """NormalizeLayer's own buffers for a bottom of `shape` (n, c, h, w): squared_ the bottom's size,
    written every forward (normalize_layer.cpp:43, cu:97); norm_ (n, 1, h, w), whose data holds the
    norms unless a second top does (cpp:44, cu:98), and whose diff the GPU backward always uses as
    scratch (cu:138). An unknown normalize_type stops the forward (cpp:80-82, cu:122-124)."""
    n, c, h, w = shape
    t = [touch.buffer("squared_", n * c * h * w, "forward", per_sample=True, note=f"{n}x{c}x{h}x{w} (the bottom)")]
    if norm_type not in NORMS:
        return t + [touch.stop("forward", f"Normalize has no normalize_type '{norm_type}' (only L2 and L1: "
                                          "normalize_layer.cpp:80, NOT_IMPLEMENTED)")]
    if not two_tops:
        t.append(touch.buffer("norm_", n * h * w, "forward", per_sample=True, note=f"{n}x1x{h}x{w} (one norm per position)"))
    else:
        t.append(touch.top(1, "data", "forward"))
    if gpu_backward:
        t.append(touch.buffer("norm_.diff", n * h * w, "backward", per_sample=True, note=f"{n}x1x{h}x{w} (GPU scratch)"))
    if bp_norm and two_tops:
        t.append(touch.top(1, "diff", "backward"))
    return t


@register("Normalize", fork=FORK)
class Normalize(Layer):
    """NormalizeLayer divides each position's channel vector by its L2 (or L1) norm. Top 0 is the
    bottom as (num, channels, height, width), so a (N, C) bottom gives (N, C, 1, 1)
    (normalize_layer.cpp:26-27); an optional top 1 holds the norms, (num, 1, height, width)
    (cpp:30-33). The backward writes the bottom's diff whatever propagate_down says (cpp:93,
    cu:137) and reads top 1's diff only with bp_norm and two tops (cpp:20, 126-127)."""

    exact_bottoms = 1
    min_tops = 1
    max_tops = 2

    def reshape(self, bottoms):
        n, c, h, w = legacy_shape(self, bottoms[0])
        tops = [(n, c, h, w)]
        return tops + [(n, 1, h, w)] if len(self.lp.top) == 2 else tops

    def touches(self, run):
        p = self.fork_param("normalize_param")
        shape = legacy_shape(self, run.bottoms[0])
        t = [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        t += normalize_touches(shape, p.normalize_type, len(run.tops) == 2, p.bp_norm, run.mode == "gpu")
        return t + [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]


@register("InnerProduct", fork=FORK)
class InnerProduct(BvlcInnerProduct):
    """The fork's InnerProductLayer: BVLC's, plus `normalize`, which rescales each weight row to unit
    length before every forward (inner_product_layer.cpp:111-118, cu:39-49) with weight_norm_, one
    float per output (num_output), set to zeros on the host in Reshape (cpp:98-102) and filled by the
    GPU forward (cu:41). (The fork also takes the weight and bias as bottoms 1 and 2, which no
    NormFace or AM-Softmax net does: protoaudit keeps BVLC's one bottom.)"""

    @classmethod
    def sized_as(cls, lp):
        """Without `normalize` the layer is BVLC's, line for line."""
        return cls if lp.inner_product_param.normalize else BvlcInnerProduct

    def touches(self, run):
        t = super().touches(run)
        if self.lp.inner_product_param.normalize:
            n = self.lp.inner_product_param.num_output
            t.append(touch.buffer("weight_norm_", n, "setup", per_sample=False, note=f"{n} (one norm per output)"))
        return t


@register("LabelSpecificAdd", fork=FORK)
class LabelSpecificAdd(Layer):
    """LabelSpecificAddLayer adds `bias` (AM-Softmax's -m) to each sample's score of its true class,
    in TRAIN only (label_specific_add.cpp:43). Bottoms: the scores and the labels (the forward reads
    bottom 1 unchecked, cpp:34: the header's MinNumBottomBlobs is no Layer method, so Caffe checks
    no count). Top 0 is the scores' shape (cpp:26), and may be bottom 0 itself; an optional top 1,
    (1,), gets the bias on the host in each TRAIN forward (cpp:51-52, cu:38-39). No buffers; the
    backward copies top 0's diff to bottom 0's when they differ (cpp:65-70, cu:52-57)."""

    min_bottoms = 2
    min_tops = 1
    max_tops = 2

    def reshape(self, bottoms):
        self.fork_param("label_specific_add_param")
        tops = [tuple(bottoms[0])]
        return tops + [(1,)] if len(self.lp.top) == 2 else tops

    def touches(self, run):
        t = [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"), touch.top(0, "data", "forward")]
        if len(run.tops) == 2 and run.phase == "TRAIN":
            t.append(touch.top(1, "data", "forward", device="host"))
        if not run.in_place[0] and run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t


@register("SoftmaxWithLoss", fork=FORK)
class SoftmaxWithLoss(BvlcSoftmaxWithLoss):
    """The fork's SoftmaxWithLossLayer: an optional bottom 2 of per-label weights (hpp: 2 to 3
    bottoms; softmax_loss_layer.cpp:108-111) and class_weight (C floats set on the host at setup,
    cpp:64-80), an inner Normalize instead of Softmax with softmax_param.normalize_type L2 or L1
    (cpp:26-35), and the GPU forward's scratch in blobs of its own, loss_ and counts_ (outer x
    inner each, cpp:101-102; cu:108, 111), where BVLC's borrows the bottom's diff and prob_'s."""

    exact_bottoms = None
    min_bottoms = 2
    max_bottoms = 3

    @classmethod
    def sized_as(cls, lp):
        return cls

    def reshape(self, bottoms):
        p = self.lp.softmax_param
        self.check(p.normalize_type in ("Softmax",) + NORMS,
                   f"softmax_param.normalize_type '{p.normalize_type}' is not Softmax, L2 or L1: the fork's "
                   "SoftmaxWithLoss stops at setup (softmax_loss_layer.cpp:36-38)", fix='use normalize_type: "Softmax"')
        axis = check_label_count(self, bottoms, p.axis)
        if len(bottoms) == 3:
            self.check(count(bottoms[2]) == count(bottoms[1]),
                       f"the weights (bottom 2, {tuple(bottoms[2])}) need one value per label {tuple(bottoms[1])}")
        if p.class_weight:
            self.check(len(p.class_weight) == bottoms[0][axis],
                       f"{len(p.class_weight)} class_weight values for {bottoms[0][axis]} classes",
                       fix="give one class_weight per class")
        return super().reshape(bottoms[:2])

    def touches(self, run):
        p = self.lp.softmax_param
        shape = run.bottoms[0]
        axis = canonical_axis(self, p.axis, len(shape))
        rows = count(shape, 0, axis) * count(shape, axis + 1)
        gpu = run.mode == "gpu"
        # the labels' and weights' diffs are never written (cpp:203-206, cu:234-237)
        t = [x for x in super().touches(run) if not (x.what == "bottom" and x.part == "diff"
                                                    and (x.stage == "forward" or x.index > 0))]
        if p.normalize_type != "Softmax":
            t = [x for x in t if not (x.what == "buffer" and x.name in ("sum_multiplier_", "scale_"))]
            t += normalize_touches(legacy_shape(self, shape), p.normalize_type, False, False, False)  # (no inner backward)
        if p.class_weight or len(run.bottoms) == 3:
            t.append(touch.buffer("class_weight_", shape[axis], "setup", per_sample=False,
                                  device="device" if len(run.bottoms) == 3 else "host"))
        if gpu:
            t += [touch.buffer("loss_", rows, "forward", per_sample=True, note=f"{rows} (one per label)"),
                  touch.buffer("counts_", rows, "forward", per_sample=True, note=f"{rows} (one per label)")]
            if len(run.bottoms) == 3 and p.HasField("hard_ratio") and run.propagate_down[0]:
                # hard mining sorts a host copy of the losses in loss_'s diff (cu:239-242)
                t.append(touch.buffer("loss_.diff", rows, "backward", per_sample=True, device="host"))
        return t


@register("Accuracy", fork=FORK)
class Accuracy(BvlcAccuracy):
    """The fork's AccuracyLayer: BVLC's of 2017 (a scalar top, an optional per-class top and its
    nums_buffer_), with an optional bottom 2 of weights, one per label (accuracy_layer.hpp: 2 to 3
    bottoms; cpp:37-40), and CPU code only (no accuracy_layer.cu), so in GPU mode its bottoms, tops
    and nums_buffer_ are read and written on the host."""

    exact_bottoms = None
    min_bottoms = 2
    max_bottoms = 3

    def reshape(self, bottoms):
        if len(bottoms) == 3:
            self.check(count(bottoms[2]) == count(bottoms[1]),
                       f"the weights (bottom 2, {tuple(bottoms[2])}) need one value per label {tuple(bottoms[1])}")
        return super().reshape(bottoms[:2])

    def touches(self, run):
        t = [touch.bottom(j, "data", "forward", device="host") for j in range(len(run.bottoms))]
        t += [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))]
        if len(run.tops) > 1:
            t.append(touch.buffer("nums_buffer_", count(run.tops[1]), "forward", per_sample=False, device="host"))
        return t
