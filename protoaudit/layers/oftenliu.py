"""oftenliu's MTCNN layers (oftenliu/caffe ad8749e, the Caffe oftenliu/caffe-mtcnn's train_*net.prototxt
name), as their sources shape them.

oftenliu/caffe is BVLC Caffe of June 2018 (2a1c552) with MTCNN layers added and its caffe.proto
extended (mtcnn_data_param, mtcnn_loss_param: proto/forks/oftenliu.proto, verbatim); the five layer
types its nets use read BVLC's parameters only. At ad8749e none of them has GPU code (the headers
declare no Forward_gpu or Backward_gpu and there is no .cu), so Layer's Forward_gpu and Backward_gpu
run the CPU code: in GPU mode they read their bottoms and write their tops and buffers on the host.
Labels: -1 and -2 mark samples without a face class (part faces and landmark faces), 0 marks
negatives (no box).

File and line references are to that commit's include/caffe/layers/often_mtcnn_*_layer.hpp and
src/caffe/layers/often_mtcnn_*_layer.cpp.
"""
from . import touch
from .base import Layer, count, legacy_shape, register
from .losses import Accuracy as BvlcAccuracy
from .losses import Loss, SoftmaxWithLoss
from .normalization import softmax_buffers

FORK = "oftenliu"


def label_stop(layer, run):
    """A gradient asked into the label (bottom 1) is LOG(FATAL) in the backward."""
    if len(run.propagate_down) > 1 and run.propagate_down[1]:
        return [touch.stop("backward", f"{layer.lp.type} cannot backpropagate to label inputs (LOG(FATAL) in "
                                       "its Backward_cpu)", fix="set propagate_down: 0 on its label bottom")]
    return []


def host_backward(layer, run):
    """label_stop, then the backward of a layer with CPU code only: top 0's diff read on the host and
    bottom 0's diff written, where the net asks for it."""
    t = label_stop(layer, run)
    if run.propagate_down and run.propagate_down[0]:
        t += [touch.top(0, "diff", "backward", device="host"), touch.bottom(0, "diff", "backward")]
    return t


@register("OftenMtcnnClassBridge", fork=FORK)
class OftenMtcnnClassBridge(Layer):
    """OftenMtcnnClassBridgeLayer: passes the face-class scores of the samples labelled 0 or 1 and
    zeroes the others (classbridge_layer.cpp:43-72). Two bottoms exactly, 1 or 2 tops by its header
    (hpp:27-30), but Reshape shapes top[1] whatever the count (cpp:34-36), so with one top Caffe
    writes past the top vector: two are asked for. Top 0 is bottom 0's shape (cpp:31-32), top 1 is
    (bottom 1's first dimension,) (cpp:34-36). No buffer of its own. The backward copies top 0's
    diff into bottom 0's (on the host) and zeroes the ignored samples' rows (cpp:81-97); a gradient
    into the labels is LOG(FATAL) (cpp:77-80)."""

    exact_bottoms = 2
    min_tops = 1
    max_tops = 2

    def reshape(self, bottoms):
        self.check(len(self.lp.top) == 2, "OftenMtcnnClassBridge's Reshape shapes a second top whatever the "
                   "count (often_mtcnn_classbridge_layer.cpp:34-36); one is named", fix="name a second top, the labels")
        self.check(len(bottoms[1]) > 0, f"the labels {tuple(bottoms[1])} have no first axis (bottom[1]->shape(0))")
        return [tuple(bottoms[0]), (bottoms[1][0],)]

    def touches(self, run):
        t = [touch.bottom(j, "data", "forward", device="host") for j in range(2)]
        t += [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))]
        return t + host_backward(self, run)


@register("OftenMtcnnSoftmaxLoss", fork=FORK)
class OftenMtcnnSoftmaxLoss(SoftmaxWithLoss):
    """OftenMtcnnSoftmaxLossLayer: BVLC's SoftmaxWithLoss rewritten to skip labels -1 and -2 and to
    pass back only the 70% of the samples with the largest loss (softmax_loss_layer.cpp:105-163). A
    LossLayer (loss weight 1 unless the file says otherwise, LossLayer::LayerSetUp, cpp:27), 1 or 2
    tops (hpp:72-74): the scalar loss and, with two, the probabilities, shaped like bottom 0 (cpp:65-68)
    and sharing prob_'s data at each forward (cpp:198-200). The label count must be bottom 0's count
    up to the softmax axis (cpp:58-64): BVLC's shape rule, inherited.

    LayerSetUp makes an inner Softmax from a copy of the layer's parameters, after LossLayer's setup
    gave them a loss weight (cpp:27-35): it is made by the layer factory (cuDNN's in a cuDNN build),
    runs in the build's mode, and its SetUp fills prob_'s diff with that loss weight. Reshape sizes
    loss_buffer_, a std::vector of one (Dtype loss, int index) pair per label (cpp:70, hpp:45-50), on
    the host. The forward reads prob_ and the labels on the host (cpp:171-172); the backward copies
    prob_ into bottom 0's diff and scales it there, on the host (cpp:212-243)."""

    def touches(self, run):
        shape, labels = run.bottoms[0], count(run.bottoms[1])
        t = [touch.bottom(0, "data", "forward"),  # read by the inner Softmax, in the build's mode
             touch.bottom(1, "data", "forward", device="host")]
        t += softmax_buffers(self, shape, run)
        t.append(touch.buffer("prob_.diff", count(shape), "setup", per_sample=True))
        t.append(touch.buffer("loss_buffer_", labels, "setup", per_sample=True, itemsize=8, device="host",
                              note=f"{labels} (loss, index) pairs, a std::vector"))
        t.append(touch.buffer("prob_", count(shape), "forward", per_sample=True))
        if run.mode == "gpu":  # the inner Softmax writes it on the device, the forward reads it on the host
            t.append(touch.buffer("prob_ (host copy)", count(shape), "forward", per_sample=True, device="host"))
        t.append(touch.top(0, "data", "forward", device="host"))
        if len(run.tops) > 1:
            t.append(touch.top(1, "data", "forward", owns=False))  # prob_'s data (ShareData)
        return t + host_backward(self, run)


@register("OftenMtcnnAccuracy", fork=FORK)
class OftenMtcnnAccuracy(BvlcAccuracy):
    """OftenMtcnnAccuracyLayer: BVLC's AccuracyLayer (the same Reshape: a scalar top, a per-class (C,)
    second top and nums_buffer_ (C), accuracy_layer.cpp:22-45) whose forward skips labels -1 and -2
    (cpp:64-66), with CPU code only: its bottoms are read and its tops and nums_buffer_ written on the
    host. A gradient asked of it is NOT_IMPLEMENTED (hpp:39-44)."""

    def touches(self, run):
        t = [touch.bottom(j, "data", "forward", device="host") for j in range(len(run.bottoms))]
        t += [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))]
        if len(run.tops) > 1:
            t.append(touch.buffer("nums_buffer_", count(run.tops[1]), "forward", per_sample=False, device="host"))
        if any(run.propagate_down):
            t.append(touch.stop("backward", "OftenMtcnnAccuracy has no backward (NOT_IMPLEMENTED)",
                                fix="set propagate_down: 0 on its bottoms"))
        return t


@register("OftenMtcnnEuclideanLoss", fork=FORK)
class OftenMtcnnEuclideanLoss(Loss):
    """OftenMtcnnEuclideanLossLayer: a Euclidean loss over the samples whose label (bottom 2) is neither
    0 nor -2, the box regression (euclidean_loss_layer.cpp:35-47). A LossLayer (loss weight 1 by
    default; bottoms 0 and 1 of the same first dimension) with at least two bottoms by its header
    (hpp:48-49), but the forward reads bottom[2], the labels, with num() (cpp:23-24), so three are
    asked for; bottoms 0 and 1 agree in count(1) (cpp:12-13). Reshape sizes diff_ like bottom 0
    (cpp:15), which the forward zeroes and fills on the host (cpp:27-44) and the backward reads. The
    backward writes the diffs of bottoms 0 and 1 that propagate_down asks for (cpp:57-75), never the
    labels'; every bottom may be given a gradient (AllowForceBackward, hpp:55-57)."""

    exact_bottoms = None
    min_bottoms = 3
    WHERE = "often_mtcnn_euclidean_loss_layer.cpp:23-28"

    def check_bottoms(self, bottoms):
        self.check(count(bottoms[0], 1) == count(bottoms[1], 1),
                   f"inputs must have the same dimension: {tuple(bottoms[0])} vs {tuple(bottoms[1])}")
        legacy_shape(self, bottoms[0])  # channels() (WHERE)
        legacy_shape(self, bottoms[2])  # num()

    def allow_force_backward(self, bottom_index):
        return True

    def touches(self, run):
        n = count(run.bottoms[0])
        t = [touch.bottom(j, "data", "forward", device="host") for j in range(3)]
        t.append(touch.buffer("diff_", n, "forward", per_sample=True, device="host", note="like bottom 0"))
        t.append(touch.top(0, "data", "forward", device="host"))
        down = [j for j in range(2) if j < len(run.propagate_down) and run.propagate_down[j]]
        if down:
            t.append(touch.top(0, "diff", "backward", device="host"))
            t += [touch.bottom(j, "diff", "backward") for j in down]
        return t


@register("OftenMtcnnLandMarkLoss", fork=FORK)
class OftenMtcnnLandMarkLoss(OftenMtcnnEuclideanLoss):
    """OftenMtcnnLandMarkLossLayer: the same Euclidean loss (landmark_loss_layer.cpp:11-78, hpp:35-69)
    over the samples labelled -2, the landmark faces (cpp:39, 67): the same bottoms, checks, diff_ and
    backward."""

    WHERE = "often_mtcnn_landmark_loss_layer.cpp:26-31"
