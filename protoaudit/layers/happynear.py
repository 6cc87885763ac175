"""happynear's Caffe (happynear/caffe-windows, branch ms), the Caffe NormFace and AM-Softmax train on:
Flip, Normalize, LabelSpecificAdd, InnerDistance, GeneralContrastiveLoss, GeneralTripletLoss, ChannelScale,
SoftTruncation, Noise, and its own InnerProduct, SoftmaxWithLoss, Accuracy, BatchNorm and Eltwise.

Sources: happynear/caffe-windows at 967eedf (the head of ms; caffe.proto and these layers' files are
those of 504d8a8, the commit happynear/AMSoftmax pins, but for a parenthesised macro in
normalize_layer.cpp), src/caffe/layers/ and include/caffe/layers/, cited by file and line. The other
layers these nets use (Convolution, PReLU, Slice, Concat, Scale, ImageData with two tops) differ from
BVLC's in messages and parameters that allocate nothing: BVLC's classes size them.
"""
from . import enet, touch
from .base import Layer, canonical_axis, count, legacy_shape, register
from .dense import InnerProduct as BvlcInnerProduct
from .losses import SoftmaxWithLoss as BvlcSoftmaxWithLoss
from .losses import check_label_count
from .normalization import BatchNorm as BvlcBatchNorm
from .normalization import _statistics_spec
from .structure import Eltwise as BvlcEltwise

FORK = "happynear"
NORMS = ("L2", "L1")  # NormalizeParameter.normalize_type: anything else is NOT_IMPLEMENTED
ENGINE_CUDNN = 2  # BatchNormParameter.Engine (caffe.proto)
SORT = 3  # EltwiseParameter.EltwiseOp, the fork's own (caffe.proto:780)


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
                                          "normalize_layer.cpp:80, NOT_IMPLEMENTED)",
                               fix='set normalize_type: "L2" or "L1"')]
    if not two_tops:
        t.append(touch.buffer("norm_", n * h * w, "forward", per_sample=True,
                              note=f"{n}x1x{h}x{w} (one norm per position)"))
    else:
        t.append(touch.top(1, "data", "forward"))
    if gpu_backward:
        t.append(touch.buffer("norm_.diff", n * h * w, "backward", per_sample=True,
                              note=f"{n}x1x{h}x{w} (GPU scratch)"))
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
    GPU forward (cu:41); and the weight taken from bottom 1 (NormFace's nets feed it a Parameter
    layer): N is then bottom 1's num() (cpp:17, 85), and the layer has no weight of its own
    (cpp:25-28)."""

    exact_bottoms = None
    min_bottoms = 1
    max_bottoms = 3

    @classmethod
    def sized_as(cls, lp):
        """With one bottom and without `normalize` the layer is BVLC's, line for line."""
        return cls if lp.inner_product_param.normalize or len(lp.bottom) > 1 else BvlcInnerProduct

    def _dims(self, bottoms):
        if len(bottoms) == 1:
            return super()._dims(bottoms)
        p = self.lp.inner_product_param
        # a bias beside a weight from bottom 1 lives in blobs_[0] but is read through
        # param_propagate_down_[1], which only a one-bottom layer sizes (cpp:70, 168); from bottom 2,
        # it needs bias_multiplier_, which Reshape sizes for at most two bottoms (cpp:93, 124)
        self.check(len(bottoms) == 2 and not p.bias_term,
                   f"protoaudit sizes the fork's InnerProduct with {len(bottoms)} bottoms only as NormFace uses it: "
                   "the weight as bottom 1 and bias_term: false (with a bias the fork reads blobs it never sized: "
                   "inner_product_layer.cpp:70, 93, 168)",
                   fix="set bias_term: false, or give the layer one bottom")
        axis = canonical_axis(self, p.axis, len(bottoms[0]))
        return axis, count(bottoms[0], axis), legacy_shape(self, bottoms[1])[0]

    def param_shapes(self, bottoms):
        return super().param_shapes(bottoms) if len(bottoms) == 1 else []

    def touches(self, run):
        if len(run.bottoms) > 1:
            return Layer.touches(self, run)
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
            # (its backward never runs the inner layer's: no norm_.diff)
            t += normalize_touches(legacy_shape(self, shape), p.normalize_type, False, False, False)
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
class Accuracy(enet.Accuracy):
    """The fork's AccuracyLayer: BVLC's of 2017 (a scalar top, an optional per-class top and its
    nums_buffer_), with an optional bottom 2 of weights, one per label (accuracy_layer.hpp: 2 to 3
    bottoms; cpp:37-40), and CPU code only (no accuracy_layer.cu), so in GPU mode its bottoms, tops
    and nums_buffer_ are read and written on the host, as caffe-enet's are."""

    exact_bottoms = None
    min_bottoms = 2
    max_bottoms = 3

    def reshape(self, bottoms):
        if len(bottoms) == 3:
            self.check(count(bottoms[2]) == count(bottoms[1]),
                       f"the weights (bottom 2, {tuple(bottoms[2])}) need one value per label {tuple(bottoms[1])}")
        return super().reshape(bottoms[:2])


@register("InnerDistance", fork=FORK)
class InnerDistance(Layer):
    """InnerDistanceLayer: NormFace's squared L2 (or L1) distance from each row of bottom 0 (K values
    from `axis` on, M rows) to N centres. With one bottom the centres are the layer's weight
    (num_output, K), or (K, num_output) transposed (inner_distance_layer.cpp:26-48), normalised like
    InnerProduct's with weight_norm_, N floats, set on the host in Reshape (cpp:71-77) and used by the
    GPU forward (cu:71); with two or more they are bottom 1, N = its num() (cpp:27, 64), and there is
    no weight (cpp:29-31; update_center_only reads the labels from the last bottom, cpp:136, so it
    keeps the weight with two bottoms). The top is bottom 0's axes before `axis`, then N (cpp:67-70).
    Only the top count is checked (the header's Min/MaxNumBottomBlobs are no Layer methods). Any
    distance_type but L2 or L1 is NOT_IMPLEMENTED (cpp:116-118, cu:93-95)."""

    min_bottoms = 1
    max_bottoms = 3
    exact_tops = 1

    def _own_weight(self, bottoms):
        p = self.fork_param("inner_distance_param")
        return len(bottoms) == 1 or (p.update_center_only and len(bottoms) == 2)

    def _dims(self, bottoms):
        p = self.fork_param("inner_distance_param")
        axis = canonical_axis(self, p.axis, len(bottoms[0]))
        if len(bottoms) == 1:
            self.check(p.num_output > 0, "num_output must be set and positive")
            n = p.num_output
        else:
            n = legacy_shape(self, bottoms[1])[0]
        return axis, count(bottoms[0], axis), n

    def reshape(self, bottoms):
        axis, _, n = self._dims(bottoms)
        return [tuple(bottoms[0][:axis]) + (n,)]

    def param_shapes(self, bottoms):
        if not self._own_weight(bottoms):
            return []
        _, k, n = self._dims(bottoms)
        return [(k, n) if self.fork_param("inner_distance_param").transpose else (n, k)]

    def touches(self, run):
        p = self.fork_param("inner_distance_param")
        labels = len(run.bottoms) - 1 if p.update_center_only and len(run.bottoms) > 1 else None
        t = [x for x in super().touches(run) if not (x.what == "bottom" and x.part == "diff" and x.index == labels)]
        if p.distance_type not in NORMS:
            t.append(touch.stop("forward", f"InnerDistance has no distance_type '{p.distance_type}' (only L2 and "
                                           "L1: inner_distance_layer.cpp:116, NOT_IMPLEMENTED)",
                                fix='set distance_type: "L2" or "L1"'))
        if p.normalize and len(run.bottoms) == 1:
            n = self._dims(run.bottoms)[2]
            t.append(touch.buffer("weight_norm_", n, "setup", per_sample=False, note=f"{n} (one norm per centre)"))
        return t


@register("GeneralContrastiveLoss", fork=FORK)
class GeneralContrastiveLoss(Layer):
    """GeneralContrastiveLossLayer: NormFace's contrastive loss over a distance matrix, bottom 0 (N
    rows of distances to every class) with the labels as bottom 1 (and, if given, bottom 2 read in
    place of bottom 0's values, general_constrastive_loss_layer.cpp:54; the header sets no bottom
    count, the setup checks two at least, cpp:14). A LossLayer (the first dimensions of bottoms 0
    and 1 agree, loss_layer.cpp:19-21) with a scalar top and an optional second top of 2 distances
    (3 with add_intra_mae, cpp:36-45). CPU code only (no .cu): in GPU mode it reads and writes on
    the host, and its forward already writes bottom 0's diff (cpp:55); max_negative_only keeps one
    int per row, max_negative_index_ (cpp:46-48, 58)."""

    min_bottoms = 2
    min_tops = 1
    max_tops = 2
    loss_by_default = True
    PARAM = "general_contrastive_loss_param"
    INDEX = ("max_negative_only", "max_negative_index_")  # the flag that keeps one int per row, and its blob

    def distances(self, p):
        return 3 if p.add_intra_mae else 2

    def reshape(self, bottoms):
        p = self.fork_param(self.PARAM)
        self.check(len(bottoms[0]) and len(bottoms[1]) and bottoms[0][0] == bottoms[1][0],
                   f"the distances {tuple(bottoms[0])} and labels {tuple(bottoms[1])} need the same first dimension")
        legacy_shape(self, bottoms[0])
        tops = [()]
        return tops + [(self.distances(p),)] if len(self.lp.top) == 2 else tops

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1

    def touches(self, run):
        p = self.fork_param(self.PARAM)
        values = 2 if len(run.bottoms) == 3 else 0  # the distances it reads (cpp:54)
        t = [touch.bottom(values, "data", "forward", device="host"), touch.bottom(1, "data", "forward", device="host"),
             touch.bottom(0, "diff", "forward", device="host")]
        flag, name = self.INDEX
        if getattr(p, flag):
            n = run.bottoms[0][0]
            t.append(touch.buffer(name, n, "forward", per_sample=True, device="host", note=f"{n} ints (one per row)"))
        t += [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))]
        if run.propagate_down[0]:
            t.append(touch.top(0, "diff", "backward", device="host"))
        return t


@register("GeneralTripletLoss", fork=FORK)
class GeneralTripletLoss(GeneralContrastiveLoss):
    """GeneralTripletLossLayer: NormFace's triplet loss over the same distance matrix, written as the
    contrastive one is (CPU code only, bottom 0's diff written by the forward on the host,
    general_triplet_loss_layer.cpp:41), but with LossLayer's two bottoms exactly (the header keeps
    ExactNumBottomBlobs; the bottom-2 weights of cpp:149-155 are never reached), a second top of 2
    distances (cpp:28-31) and, with hardest_only, hardest_index_, one int per row (cpp:32-34, 44)."""

    min_bottoms = None
    exact_bottoms = 2
    PARAM = "general_triplet_loss_param"
    INDEX = ("hardest_only", "hardest_index_")

    def distances(self, p):
        return 2


@register("SoftTruncation", fork=FORK)
class SoftTruncation(Layer):
    """SoftTruncationLayer, 1 - exp(-x / c): a NeuronLayer (top like bottom, in place allowed) with no
    buffers; its backward reads its top's data and diff (soft_truncation_layer.cpp:25-27, cu:42-44)."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        return [tuple(bottoms[0])]


@register("Noise", fork=FORK)
class Noise(Layer):
    """NoiseLayer adds Gaussian or uniform noise in TRAIN. Its Reshape sizes only mask, the bottom's
    size (noise_layer.cpp:11-14), and not the top (it overrides NeuronLayer::Reshape without calling
    it), so Caffe's forward writes a whole bottom into a top of no size unless the top is the bottom
    itself. In TRAIN the forward fills mask and adds it (cpp:22-32, cu:14-24: gpu_data allocates it
    even without a noise type); the backward only shares the top's diff with the bottom (cpp:43)."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        self.check(self.lp.top[0] == self.lp.bottom[0], "Noise never shapes its top (noise_layer.cpp:11-14 sizes "
                   "its mask only), so Caffe writes the noisy bottom into an empty top",
                   fix=f"compute it in place: top: \"{self.lp.bottom[0]}\"")
        return [tuple(bottoms[0])]

    def touches(self, run):
        t = [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        if run.phase == "TRAIN":
            size = count(run.bottoms[0])
            t.append(touch.buffer("mask", size, "forward", per_sample=True, note=f"{size} (the bottom)"))
        return t


@register("BatchNorm", fork=FORK)
class BatchNorm(BvlcBatchNorm):
    """The fork's BatchNormLayer is BVLC's (batch_norm_layer.cpp/.cu differ in layout only) but for
    disable_mean and disable_variance, which skip parts of both passes (cpp:112-180, 202-260), and
    engine: CUDNN, which keeps the statistics' learning rates (cpp:40-54) although no cuDNN
    BatchNorm is built (cudnn_batch_norm_layer.hpp has no source file). protoaudit sizes the layer
    as BVLC's, and refuses those three settings rather than guess."""

    def reshape(self, bottoms):
        p = self.lp.batch_norm_param
        for name in ("disable_mean", "disable_variance"):
            self.check(not getattr(p, name), f"protoaudit has no rule for the fork's BatchNorm with {name} (it "
                       "skips parts of both passes: batch_norm_layer.cpp:112-260)",
                       fix=f"audit without {name}, or declare the layer's top with --input")
        self.check(p.engine != ENGINE_CUDNN, "protoaudit has no rule for the fork's BatchNorm with engine: CUDNN "
                   "(it learns the statistics: batch_norm_layer.cpp:40)", fix="audit without the engine setting")
        return super().reshape(bottoms)

    @classmethod
    def sized_as(cls, lp):
        return BvlcBatchNorm


@register("ChannelScale", fork=FORK)
class ChannelScale(Layer):
    """ChannelScaleLayer (AM-Softmax's feature-norm scale, GNAP): top 0 is bottom 0 with each position
    scaled by bottom 1, which holds one value per (num, height, width) position (the CHECKs of
    channel_scale_layer.cpp:16-17, on the legacy 4-axis shape); top 0 is bottom 0's shape (cpp:48).
    With global_scale the layer keeps one scale (1,) set on the host, which learns nothing: setup
    adds lr_mult 0 when no param is given and refuses another (cpp:24-42); the forward updates it on
    the host (cu:48) and a second top (1,) gets it there (cpp:49-51, cu:60-62). The backward writes
    both bottoms' diffs whatever propagate_down says (cpp:96-97, 118; cu:87-88)."""

    exact_bottoms = 2
    min_tops = 1
    max_tops = 2

    def __init__(self, lp, ctx):
        super().__init__(lp, ctx)
        self._specs = list(lp.param)
        self._schema_layer = lp.DESCRIPTOR

    def _global(self):
        return self.fork_param("channel_scale_param").global_scale

    def reshape(self, bottoms):
        n, c, h, w = legacy_shape(self, bottoms[0])
        self.check(n == legacy_shape(self, bottoms[1])[0] and n * h * w == count(bottoms[1]),
                   f"the scales (bottom 1, {tuple(bottoms[1])}) need one value per position of bottom 0 "
                   f"{tuple(bottoms[0])}: {n}x{h}x{w} (channel_scale_layer.cpp:16-17)")
        tops = [tuple(bottoms[0])]
        return tops + [(1,)] if self._global() and len(self.lp.top) == 2 else tops

    def param_shapes(self, bottoms):
        if not self._global():
            return []
        if not self._specs:
            self._specs.append(_statistics_spec(self._schema_layer))
        self.check(self._specs[0].lr_mult == 0, "the global scale cannot be a learned parameter "
                   f"(param 0 has lr_mult {self._specs[0].lr_mult}: channel_scale_layer.cpp:39-40)",
                   fix="give its param { } lr_mult: 0, or none at all")
        return [(1,)]

    def param_specs(self):
        return self._specs

    def touches(self, run):
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        t += [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"), touch.top(0, "data", "forward")]
        if len(run.tops) == 2:
            t.append(touch.top(1, "data", "forward", device="host"))
        return t + [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward"),
                    touch.bottom(1, "diff", "backward")]


@register("Eltwise", fork=FORK)
class Eltwise(BvlcEltwise):
    """The fork's EltwiseLayer: BVLC's, plus the SORT operation, prod(1 + x_i) - 1 over the bottoms,
    which keeps sort_temp_, bottom 0's size (eltwise_layer.cpp:44-47), written by every forward
    (cpp:100-106, cu:65-73). Its GPU backward has only the stable_prod_grad form (the default); the
    other is NOT_IMPLEMENTED (cu:153-157)."""

    @classmethod
    def sized_as(cls, lp):
        return cls if lp.eltwise_param.operation == SORT else BvlcEltwise

    def touches(self, run):
        t = super().touches(run)
        p = self.lp.eltwise_param
        if p.operation == SORT:
            size = count(run.bottoms[0])
            t.append(touch.buffer("sort_temp_", size, "forward", per_sample=True, note=f"{size} (bottom 0)"))
            if run.mode == "gpu" and not p.stable_prod_grad and any(run.propagate_down):
                t.append(touch.stop("backward", "the fork's Eltwise SORT has no GPU backward without "
                                                "stable_prod_grad (eltwise_layer.cu:156, NOT_IMPLEMENTED)",
                                    fix="set stable_prod_grad: true, or audit CPU mode (--mode cpu)"))
        return t
