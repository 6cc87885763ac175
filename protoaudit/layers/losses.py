"""Loss layers (a scalar top, loss weight 1 by default) and Accuracy."""
from . import touch
from .base import Layer, canonical_axis, count, legacy_shape, register
from .normalization import softmax_buffers


class Loss(Layer):
    """Caffe's LossLayer: two bottoms with the same first dimension, one scalar top."""

    exact_bottoms = 2
    exact_tops = 1
    auto_top_blobs = True
    loss_by_default = True

    def reshape(self, bottoms):
        self.check(len(bottoms[0]) and len(bottoms[1]) and bottoms[0][0] == bottoms[1][0],
                   f"the data {bottoms[0]} and label {bottoms[1]} should have the same first dimension")
        self.check_bottoms(bottoms)
        return [()]

    def check_bottoms(self, bottoms):
        pass

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1  # never into the labels


def legacy_num_pair(layer, bottoms, same="the same number (loss_layer.cpp:25)"):
    """The 2015 Caffes' LossLayer::Reshape, or a fork's CHECK like it: bottoms 0 and 1 read as (num,
    channels, height, width), their num() equal (`same` says where); returns both."""
    data, label = (legacy_shape(layer, shape) for shape in bottoms[:2])
    layer.check(data[0] == label[0], f"the data {tuple(bottoms[0])} and label {tuple(bottoms[1])} should have {same}")
    return data, label


class LabelWeights:
    """A fork's loss with an optional third bottom, one weight a label (JAA-Net's SoftmaxWithLoss, ARL's
    SigmoidCrossEntropyLoss): CHECK_EQ of its count with the label's (`weights_check` names the line), and
    Reshape keeps its host data pointer, which the CPU loops and, in GPU mode, the kernels read: a host
    touch of bottom 2 at setup. Mixed in before the BVLC class it extends."""

    exact_bottoms = None
    min_bottoms = 2
    max_bottoms = 3
    weights_check = ""

    def check_bottoms(self, bottoms):
        super().check_bottoms(bottoms)
        if len(bottoms) == 3:
            self.check(count(bottoms[1]) == count(bottoms[2]),
                       f"number of weights must match number of labels ({self.weights_check}): bottom 2 "
                       f"{tuple(bottoms[2])} for the label {tuple(bottoms[1])}")

    def touches(self, run):
        t = super().touches(run)
        if len(run.bottoms) == 3:
            t.append(touch.bottom(2, "data", "setup", device="host"))
        return t


def one_label_per_item(layer, prediction, axis):
    """The prediction's shape with its class axis 1: the label check_label_count accepts."""
    axis = canonical_axis(layer, axis, len(prediction))
    return tuple(prediction[:axis]) + (1,) + tuple(prediction[axis + 1:])


def check_label_count(layer, bottoms, axis):
    """One label per prediction: bottom 1 counts bottom 0's items less its class axis; returns the axis."""
    axis = canonical_axis(layer, axis, len(bottoms[0]))
    outer, inner = count(bottoms[0], 0, axis), count(bottoms[0], axis + 1)
    layer.check(outer * inner == count(bottoms[1]),
                f"number of labels must match number of predictions: {count(bottoms[1]):,} labels "
                f"{tuple(bottoms[1])} for {outer * inner:,} predictions ({tuple(bottoms[0])} less its class "
                f"axis {axis})", fix="with spatial output (N, C, H, W) the label must have N*H*W entries")
    return axis


@register("SoftmaxWithLoss")
class SoftmaxWithLoss(Loss):
    exact_tops = None
    min_tops = 1
    max_tops = 2

    def check_bottoms(self, bottoms):
        check_label_count(self, bottoms, self.lp.softmax_param.axis)

    def label_for(self, prediction):
        return one_label_per_item(self, prediction, self.lp.softmax_param.axis)

    def class_weighting(self):
        """caffe-segnet's per-class loss weights (loss_param.weight_by_label_freqs); BVLC has none."""
        return self.ctx.schema == "segnet" and self.lp.loss_param.weight_by_label_freqs

    def reshape(self, bottoms):
        if self.class_weighting():
            weights, classes = len(self.lp.loss_param.class_weighting), (tuple(bottoms[0]) + (1, 1))[1]
            self.check(weights == classes, f"{weights} class_weighting values for {classes} classes",
                       fix="give one class_weighting per channel of the prediction")
        tops = super().reshape(bottoms)
        return tops + [tuple(bottoms[0])] if len(self.lp.top) > 1 else tops

    def touches(self, run):
        """The inner Softmax's top prob_ (the bottom's size; a second top shares it) and its
        buffers; SetLossWeights fills prob_'s diff at setup. On the GPU the forward pass borrows
        the bottom's diff as scratch, so even a forward-only (test) net allocates it."""
        shape = run.bottoms[0]
        t = [x for x in super().touches(run) if not (x.what == "top" and x.index == 1)]
        t += softmax_buffers(self, shape, run)
        t.append(touch.buffer("prob_.diff", count(shape), "setup", per_sample=True))
        if len(run.tops) > 1:
            t.append(touch.top(1, "data", "forward"))
        else:
            t.append(touch.buffer("prob_", count(shape), "forward", per_sample=True))
        if run.mode == "gpu":
            t.append(touch.bottom(0, "diff", "forward"))
        if self.class_weighting():
            # caffe-segnet's class weighting: LayerSetUp copies class_weighting into label_counts_.
            t.append(touch.buffer("label_counts_", len(self.lp.loss_param.class_weighting), "setup",
                                  per_sample=False))
        return t


@register("EuclideanLoss")
class EuclideanLoss(Loss):
    label_either = True  # either bottom may be the label (a net's age target first, then its prediction)

    def allow_force_backward(self, bottom_index):
        return True  # both bottoms may be predictions

    def check_bottoms(self, bottoms):
        self.check(count(bottoms[0], 1) == count(bottoms[1], 1),
                   f"inputs must have the same dimension: {bottoms[0]} vs {bottoms[1]}")

    def label_for(self, prediction):
        return tuple(prediction)

    def touches(self, run):
        return super().touches(run) + [touch.buffer("diff_", count(run.bottoms[0]), "forward", per_sample=True)]


@register("SigmoidCrossEntropyLoss")
class SigmoidCrossEntropyLoss(Loss):
    def check_bottoms(self, bottoms):
        self.check(count(bottoms[0]) == count(bottoms[1]),
                   "SigmoidCrossEntropyLoss needs inputs of the same count")

    def label_for(self, prediction):
        return tuple(prediction)

    def touches(self, run):
        """The inner Sigmoid's output (the bottom's size); the GPU forward borrows both bottoms'
        diffs as scratch. The inner Sigmoid is built from this layer's own parameters
        (sigmoid_cross_entropy_loss_layer.hpp:49), so a loss_weight written in the file makes it a
        loss too: SetLossWeights fills its output's diff at setup and each forward reads it."""
        t = super().touches(run)
        t.append(touch.buffer("sigmoid_output_", count(run.bottoms[0]), "forward", per_sample=True))
        if self.lp.loss_weight and self.lp.loss_weight[0]:
            t.append(touch.buffer("sigmoid_output_.diff", count(run.bottoms[0]),
                                  "forward" if run.mode == "gpu" else "setup", per_sample=True))
        if run.mode == "gpu":
            t += [touch.bottom(0, "diff", "forward"), touch.bottom(1, "diff", "forward")]
        return t


@register("HingeLoss")
class HingeLoss(Loss):
    def touches(self, run):
        """The forward computes the margins in the first bottom's diff (hinge_loss_layer.cpp:17)."""
        return super().touches(run) + [touch.bottom(0, "diff", "forward")]


@register("MultinomialLogisticLoss")
class MultinomialLogisticLoss(Loss):
    def check_bottoms(self, bottoms):
        self.check(legacy_shape(self, bottoms[1])[1:] == (1, 1, 1),
                   f"the label {tuple(bottoms[1])} must hold one value per item: (N) or (N, 1, 1, 1)")


@register("InfogainLoss")
class InfogainLoss(Loss):
    exact_bottoms = None
    min_bottoms = 2
    max_bottoms = 3
    exact_tops = None
    min_tops = 1
    max_tops = 2

    def check_bottoms(self, bottoms):
        p = self.lp.infogain_loss_param
        self.check(not self.lp.loss_param.HasField("normalize"), "normalize is deprecated for InfogainLoss",
                   fix='use loss_param { normalization: ... }')
        axis = check_label_count(self, bottoms, p.axis)
        labels = bottoms[0][axis]
        if len(bottoms) < 3:
            self.check(p.HasField("source"), "the infogain matrix H has no source",
                       fix="set infogain_loss_param { source: ... }, or give H as a third bottom")
        else:
            self.check(count(bottoms[2]) == labels * labels, f"the infogain matrix (bottom 2) "
                       f"{tuple(bottoms[2])} must be {labels}x{labels}")

    labels_beside = (1, 2)  # the labels, and the infogain matrix H when it is a bottom

    def label_for(self, prediction):
        """One label per item (as SoftmaxWithLoss), and H, num_labels x num_labels values
        (infogain_loss_layer.cpp Reshape: infogain->count() == num_labels_ * num_labels_), as a data
        layer gives a matrix: 1 x 1 x K x K."""
        axis = canonical_axis(self, self.lp.infogain_loss_param.axis, len(prediction))
        k = prediction[axis]
        return {1: one_label_per_item(self, prediction, self.lp.infogain_loss_param.axis), 2: (1, 1, k, k)}

    def reshape(self, bottoms):
        tops = super().reshape(bottoms)
        return tops + [tuple(bottoms[0])] if len(self.lp.top) > 1 else tops


@register("ContrastiveLoss")
class ContrastiveLoss(Loss):
    """Two (N, C, 1, 1) feature bottoms and an (N, 1, 1, 1) similarity label."""

    exact_bottoms = 3

    def check_bottoms(self, bottoms):
        a, b, same = (legacy_shape(self, shape) for shape in bottoms)
        self.check(a[1] == b[1] and a[2:] == b[2:] == (1, 1),
                   f"the two features must be (N, C, 1, 1) with the same C: {tuple(bottoms[0])} and "
                   f"{tuple(bottoms[1])}")
        self.check(same[1:] == (1, 1, 1), f"the similarity label {tuple(bottoms[2])} must be (N, 1, 1, 1)")

    def allow_force_backward(self, bottom_index):
        return bottom_index != 2

    def touches(self, run):
        """diff_ and diff_sq_ (N x C), dist_sq_ (N) and summer_vec_ (C, ones at setup); the CPU
        forward leaves diff_sq_ untouched."""
        n, c = run.bottoms[0][0], count(run.bottoms[0], 1)
        t = super().touches(run) + [
            touch.buffer("summer_vec_", c, "setup", per_sample=False),
            touch.buffer("diff_", n * c, "forward", per_sample=True),
            touch.buffer("dist_sq_", n, "forward", per_sample=True),
        ]
        if run.mode == "gpu":
            t.append(touch.buffer("diff_sq_", n * c, "forward", per_sample=True))
        return t


@register("Accuracy")
class Accuracy(Layer):
    exact_bottoms = 2
    min_tops = 1
    max_tops = 2

    def reshape(self, bottoms):
        p = self.lp.accuracy_param
        self.check(p.top_k <= count(bottoms[0]) // max(count(bottoms[1]), 1),
                   "top_k must be less than or equal to the number of classes")
        axis = check_label_count(self, bottoms, p.axis)
        tops = [()]
        if len(self.lp.top) > 1 and self.ctx.schema == "segnet":
            self.check(len(bottoms[0]) > 1, "the per-class accuracy top needs a prediction with a channel axis")
            tops.append((bottoms[0][1], 1, 1, 1))  # the fork's per-class top is 4-axis
        elif len(self.lp.top) > 1:
            tops.append((bottoms[0][axis],))
        return tops

    def label_for(self, prediction):
        return one_label_per_item(self, prediction, self.lp.accuracy_param.axis)

    def touches(self, run):
        t = super().touches(run)
        if self.ctx.schema == "segnet":
            # caffe-segnet's Accuracy has CPU code only (no .cu), so in GPU mode its tops stay on
            # the host; it counts per class in host std::vectors, with no nums_buffer_
            return [x if x.what != "top" else touch.top(x.index, x.part, x.stage, device="host") for x in t]
        if len(run.tops) > 1:
            t.append(touch.buffer("nums_buffer_", count(run.tops[1]), "forward", per_sample=False))
        return t
