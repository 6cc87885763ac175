"""caffe-fast-rcnn's own layers (ROIPooling, SmoothL1Loss), as the fork's sources shape them.

rbgirshick/caffe-fast-rcnn, branch faster-rcnn, commit 4115385 (the Caffe py-faster-rcnn builds):
include/caffe/fast_rcnn_layers.hpp, src/caffe/layers/roi_pooling_layer.cpp/.cu and
smooth_L1_loss_layer.cpp/.cu. Both layers read their bottoms through Blob's legacy accessors
(num, channels, height, width). Neither has all of its CPU code: ROIPooling's Backward_cpu and
SmoothL1Loss's Forward_cpu and Backward_cpu are NOT_IMPLEMENTED, so a CPU-mode run stops there,
and so does protoaudit's audit of one (`touch.stop`).

The original Fast R-CNN (rbgirshick/fast-rcnn) builds the same repository's branch fast-rcnn,
commit bcd9b4e: its roi_pooling_layer.cpp/.cu are the faster-rcnn branch's byte for byte, its
SmoothL1Loss is older (one weight blob, no ones_: OriginalSmoothL1Loss), and a three-bottom
SmoothL1Loss, which the faster-rcnn branch refuses, is sized as that one.
"""
from . import touch
from .base import Layer, count, legacy_shape, register

FORK = "fastrcnn"
SOURCE = "caffe-fast-rcnn"


@register("ROIPooling", fork=FORK)
class ROIPooling(Layer):
    """ROIPoolingLayer: max pooling of each region of interest (bottom 1, R rows of
    (batch index, x1, y1, x2, y2)) of the feature map (bottom 0) into pooled_h x pooled_w bins.

    The top is (R, C, pooled_h, pooled_w) (roi_pooling_layer.cpp:39-40): R from the rois'
    num(), C the map's channels()."""

    exact_bottoms = 2
    exact_tops = 1

    def reshape(self, bottoms):
        p = self.fork_param("roi_pooling_param")
        self.check(p.pooled_h > 0, "pooled_h must be > 0", fix="set roi_pooling_param { pooled_h: 7 }")
        self.check(p.pooled_w > 0, "pooled_w must be > 0", fix="set roi_pooling_param { pooled_w: 7 }")
        channels = legacy_shape(self, bottoms[0])[1]
        rois = legacy_shape(self, bottoms[1])[0]
        return [(rois, channels, p.pooled_h, p.pooled_w)]

    def touches(self, run):
        """Reshape sizes max_idx_ (Blob<int>) as the top (roi_pooling_layer.cpp:41-42); forward
        writes the top and the argmax into it, on the CPU (cpp:54-57) as on the GPU
        (cu:84-85). Backward: `backward_touches`."""
        return [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"),
                touch.top(0, "data", "forward"),
                touch.buffer("max_idx_", count(run.tops[0]), "forward", per_sample=True,
                             note="int32, the top's size: each output's argmax")] + self.backward_touches(run)

    def backward_touches(self, run):
        """On the GPU only (cu:168-184; cpp:128-131 is NOT_IMPLEMENTED)."""
        if run.mode == "cpu":
            return [touch.stop("backward", f"{SOURCE}'s ROIPooling has no CPU backward "
                               "(roi_pooling_layer.cpp:130, NOT_IMPLEMENTED): Caffe stops at the first "
                               "backward pass in CPU mode (a forward-only run, --inference, has none)")]
        return into_the_map(run)


def into_the_map(run):
    """ROIPooling's backward (here and in caffe-priv's copy, CPU and GPU alike) returns at once unless bottom 0 needs a
    diff; then it reads top 0's diff and max_idx_ and writes bottom 0's diff. The rois never get one."""
    if run.propagate_down[0]:
        return [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
    return []


@register("SmoothL1Loss", fork=FORK)
class SmoothL1Loss(Layer):
    """SmoothL1LossLayer: sum over bottom 0 - bottom 1 (times the inside weights, bottom 2) of the
    smooth L1 function (times the outside weights, bottom 3), over the batch.

    Two bottoms, or four with both weights (smooth_L1_loss_layer.cpp:17-21); every one has bottom
    0's channels, height and width (cpp:28-37) and LossLayer's num check. Unlike Caffe's other
    losses its LayerSetUp never calls LossLayer's (cpp:13-22), so it has no loss weight of 1 by
    default: without `loss_weight` it contributes no loss and gets no backward pass. It may
    propagate into every bottom under force_backward (fast_rcnn_layers.hpp:79-81)."""

    min_bottoms = 2
    max_bottoms = 4
    exact_tops = 1
    auto_top_blobs = True
    source = SOURCE
    no_cpu_code = "smooth_L1_loss_layer.cpp:54 and :60"  # Forward_cpu, Backward_cpu
    labels_beside = (1, 2, 3)  # the targets and both weights, each bottom 0's shape

    def label_for(self, prediction):
        return tuple(prediction)

    def check_shapes(self, bottoms):
        """LossLayer's num check, and every bottom with bottom 0's channels, height and width."""
        shapes = [legacy_shape(self, b) for b in bottoms]
        self.check(shapes[0][0] == shapes[1][0],
                   f"the data {tuple(bottoms[0])} and label {tuple(bottoms[1])} should have the same number")
        for j in range(1, len(shapes)):
            self.check(shapes[j][1:] == shapes[0][1:],
                       f"bottom {j} {tuple(bottoms[j])} must have bottom 0's channels, height and width "
                       f"{tuple(bottoms[0])}")

    def reshape(self, bottoms):
        self.check(len(bottoms) in (2, 4), "if weights are used, give both the inside and the outside weights",
                   fix="give 2 bottoms (prediction, target) or 4 (with inside and outside weights)")
        self.check_shapes(bottoms)
        return [()]

    def touches(self, run):
        """Reshape fills ones_ (bottom 0's size) on the host at setup (cpp:44-48). Forward, on the
        GPU only (cu:29-61; cpp:54 is NOT_IMPLEMENTED), writes diff_ and errors_ (bottom 0's size
        each) on the device, copies ones_ there for the dot product, and the loss into the top
        (which Layer::Forward then reads on the device). Backward (cu:80-113; cpp:60 is
        NOT_IMPLEMENTED) turns diff_ into the gradient in place and writes the diff of bottoms 0
        and 1 where they need one; the weights are read, never given a diff."""
        size = count(run.bottoms[0])
        weights = range(2, len(run.bottoms))
        if run.mode == "cpu":
            return [touch.buffer("ones_", size, "setup", per_sample=True, note="ones, bottom 0's size"),
                    *self.cpu_stops()]
        t = [touch.buffer("ones_ (host)", size, "setup", per_sample=True, device="host",
                          note="ones, bottom 0's size, filled on the host")]
        t += [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        t += [touch.buffer("diff_", size, "forward", per_sample=True, note="w_in * (b0 - b1)"),
              touch.buffer("errors_", size, "forward", per_sample=True, note="smooth L1 of each element"),
              touch.buffer("ones_", size, "forward", per_sample=True, note="ones, bottom 0's size"),
              touch.top(0, "data", "forward")]
        down = [j for j in (0, 1) if run.propagate_down[j]]
        t += [touch.bottom(j, "diff", "backward") for j in down]
        if down:
            t += [touch.top(0, "diff", "backward")]
            t += [touch.bottom(j, "data", "backward") for j in weights]
        return t

    def allow_force_backward(self, bottom_index):
        return True

    def cpu_stops(self):
        """Its forward and backward have no CPU code (`no_cpu_code`): a CPU-mode run stops at each."""
        why = (f"{self.source}'s SmoothL1Loss has no CPU code ({self.no_cpu_code}, NOT_IMPLEMENTED): "
               "Caffe stops at its first {} pass in CPU mode")
        return [touch.stop("forward", why.format("forward")), touch.stop("backward", why.format("backward"))]

    @classmethod
    def version(cls, lp):
        """Three bottoms: the original Fast R-CNN's layer, the only one that takes them (caffe-priv's
        and R-FCN's copies are this branch's code and refuse them as it does)."""
        return OriginalSmoothL1Loss if cls is SmoothL1Loss and len(lp.bottom) == 3 else cls


class OriginalSmoothL1Loss(SmoothL1Loss):
    """The original Fast R-CNN's SmoothL1LossLayer (rbgirshick/caffe-fast-rcnn branch fast-rcnn,
    bcd9b4e, fast_rcnn_layers.hpp:59-98, smooth_L1_loss_layer.cpp/.cu): prediction, target and
    optionally one weight blob that scales b0 - b1 (MaxBottomBlobs 3, hpp:72-73; has_weights_ is
    three bottoms, cpp:15). Its LayerSetUp does not call LossLayer's either (cpp:13-16): no loss
    weight by default. Reshape is LossLayer's (the num check, a scalar top) and every bottom has
    bottom 0's channels, height and width (cpp:21-29)."""

    max_bottoms = 3
    source = "the original Fast R-CNN's caffe-fast-rcnn (branch fast-rcnn)"
    no_cpu_code = "smooth_L1_loss_layer.cpp:39 and :45"  # Forward_cpu, Backward_cpu

    def reshape(self, bottoms):
        self.check_shapes(bottoms)
        if len(bottoms) == 3:
            self.assume("SmoothL1Loss of 3 bottoms is the original Fast R-CNN's (rbgirshick/caffe-fast-rcnn "
                        "branch fast-rcnn, bcd9b4e, which rbgirshick/fast-rcnn builds): one weight blob, "
                        "diff_ and errors_; py-faster-rcnn's (branch faster-rcnn) takes 2 or 4 and keeps ones_ too",
                        "give it 2 or 4 bottoms for py-faster-rcnn's layer")
        return [()]

    def touches(self, run):
        """Reshape sizes diff_ and errors_ as bottom 0 (cpp:30-33), nothing else. Forward, on the GPU
        only (cu:28-50; cpp:39 is NOT_IMPLEMENTED), writes diff_ (the weights times b0 - b1) and
        errors_, sums errors_ with cuBLAS's asum (no ones_) and writes the loss into the top on the
        host. Backward (cu:67-86; cpp:45 is NOT_IMPLEMENTED) turns diff_ into the gradient in place
        and writes the diff of bottoms 0 and 1 where they need one, from top 0's diff; the weights,
        already in diff_, are not read again."""
        size = count(run.bottoms[0])
        if run.mode == "cpu":
            return self.cpu_stops()
        t = [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        t += [touch.buffer("diff_", size, "forward", per_sample=True, note="w * (b0 - b1)"),
              touch.buffer("errors_", size, "forward", per_sample=True, note="smooth L1 of each element"),
              touch.top(0, "data", "forward")]
        down = [j for j in (0, 1) if run.propagate_down[j]]
        t += [touch.bottom(j, "diff", "backward") for j in down]
        return t + ([touch.top(0, "diff", "backward")] if down else [])
