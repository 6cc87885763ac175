"""Chen Feng's Caffe (simbaforrest/caffe, tag kcnet, 3d42ec5: the Caffe merlresearch/KCNet builds), as its
sources shape its layers: TensorTranspose, and its versions of BVLC's Reduction (a PROD operation) and
SoftmaxWithLoss (loss_param.label_weight).

The fork is a BVLC Caffe of April 2018 with Chen Feng's layers added (proto/forks/kcnet.proto). Its Permute is
SSD's layer (weiliu89/caffe's permute_layer.cpp but for one LOG(FATAL)'s case; the header's blobs permute_order_,
old_steps_ and new_steps_ and the .cu's reads of them alike; SSD's PermuteParameter): SSD's class sizes it. Its
other types (KernelCorrelation, GraphPooling, MatrixMultiplication and its Xt and Yt forms, MatrixTranspose,
L2Normalization, BSplineBasis, SingleInputAccuracy) have no rule here. File:line references are to that commit's
src/caffe/layers/ and include/caffe/layers/ files.
"""
from . import ssd, touch
from .base import Layer, carry, count, refuse_in_place, register
from .losses import SoftmaxWithLoss as BvlcSoftmaxWithLoss
from .structure import Reduction as BvlcReduction

FORK = "kcnet"
PROD = 5  # ReductionParameter.PROD, the fork's (caffe.proto:1035)

carry(__name__, FORK, ssd.Permute)


@register("TensorTranspose", fork=FORK)
class TensorTranspose(Layer):
    """TensorTransposeLayer: one bottom, one top (tensor_transpose_layer.hpp:39-40), never in place (a CHECK,
    tensor_transpose_layer.cpp:17). LayerSetUp CHECKs that tensor_transpose_param gives one order an axis of
    the bottom (cpp:26); Reshape CHECKs the bottom has 2 axes or more (cpp:40-41), and makes top axis n the
    bottom's axis order(n) (cpp:55: Blob::shape's own CHECK refuses an order past the last axis). The order
    is not checked to be a permutation; the forward writes the bottom's count of top entries (cpp:85-89), so a
    repeated order that makes the top smaller than the bottom would write past it.

    order_, Xstride_ and Ystride_ are Blob<unsigned int> of one entry an axis (hpp:52-54): filled on the host
    at setup (cpp:23-25, :28-31, :46-53); in GPU mode the kernels read their device copies (cu:64-66, :88-90).
    Forward and backward read and write every entry, one kernel each (cu:62-70, :86-94): no scratch."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        refuse_in_place(self)
        shape = tuple(bottoms[0])
        order = self.orders()
        self.check(len(order) == len(shape), f"tensor_transpose_param gives {len(order)} orders for a bottom of "
                   f"{len(shape)} axes {shape}: LayerSetUp CHECKs one an axis (tensor_transpose_layer.cpp:26)",
                   fix="give one order for each axis of the bottom")
        self.check(len(shape) >= 2, f"the bottom {shape} has {len(shape)} axes: Reshape CHECKs 2 or more "
                   "(tensor_transpose_layer.cpp:40)", fix="give a bottom of 2 axes or more")
        for o in order:
            self.check(o < len(shape), f"order {o} names no axis of the {len(shape)}-axis bottom {shape} "
                       "(Blob::shape's CHECK, tensor_transpose_layer.cpp:55)", fix="give orders 0 to N-1")
        top = tuple(shape[o] for o in order)
        self.check(count(top) >= count(shape), f"the orders {order} make a top {top} of {count(top):,} values from "
                   f"a bottom of {count(shape):,}: the forward writes one an entry of the bottom "
                   "(tensor_transpose_layer.cpp:85-89), past the top", fix="give each axis once in the orders")
        return [top]

    def orders(self):
        return list(self.fork_param("tensor_transpose_param").order)

    def bottom_for(self, top_index, shape, bottom):
        """The bottom whose axis order(n) is the top's axis n: where the orders are each axis once."""
        order = self.orders()
        if sorted(order) != list(range(len(shape))):
            return None
        found = [0] * len(shape)
        for n, o in enumerate(order):
            found[o] = shape[n]
        return tuple(found)

    def fitting(self, bottoms, kinds):
        """Data whose dataset is absent, of another number of axes than the orders give (an assumed image
        where the layer takes a sequence's (N, T) indicators): its batch by its values an item, in as many
        axes as the orders, for the layer after it to size again."""
        order, shape = self.orders(), tuple(bottoms[0])
        if not kinds[0] or len(order) == len(shape) or len(order) < 2 or not shape:
            return None
        rest = (1,) * (len(order) - 2)
        return [(shape[0], count(shape, 1)) + rest], f"its batch by its values an item, in {len(order)} axes"

    def touches(self, run):
        axes = len(run.bottoms[0])
        t = [touch.buffer(name, axes, "setup", per_sample=False, device="host",
                          note="Blob<unsigned int>, one entry an axis (tensor_transpose_layer.hpp:52-54)")
             for name in ("order_", "Xstride_", "Ystride_")]
        if run.mode == "gpu":
            t += [touch.buffer(f"{name} (device)", axes, "forward", per_sample=False,
                               note="read by the kernels (tensor_transpose_layer.cu:64-66)")
                  for name in ("order_", "Xstride_", "Ystride_")]
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward"),
              touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t


@register("Reduction", fork=FORK)
class Reduction(BvlcReduction):
    """ReductionLayer with the fork's PROD operation and group (caffe.proto:1035, :1058): LayerSetUp CHECKs
    group is not 0 whatever the operation (reduction_layer.cpp:12-13). PROD takes an (N, M) bottom (a CHECK,
    cpp:25) and gives (N, 1), or (N, M / group) where group > 0 divides M (cpp:19-29); it returns before
    sum_multiplier_ is shaped (cpp:30), so it holds nothing of its own. Its kernel reads the bottom and
    writes the top on the device (cu:64-72), its backward kernel the bottom's data, the top's data and diff,
    and writes the bottom's diff (cu:118, :125-142); in GPU mode Forward_gpu and Backward_gpu first ask the
    top's host data and diff (cu:56, :124), as BVLC's do. Every other operation is BVLC's, line for line."""

    @classmethod
    def sized_as(cls, lp):
        p = lp.reduction_param
        return cls if p.operation == PROD or p.group == 0 else BvlcReduction

    def reshape(self, bottoms):
        p = self.fork_param("reduction_param")
        self.check(p.group != 0, "reduction_param.group is 0: LayerSetUp CHECKs it is not (reduction_layer.cpp:13)",
                   fix="leave group out (-1) or give it a positive value")
        if p.operation != PROD:
            return super().reshape(bottoms)
        shape = tuple(bottoms[0])
        self.check(len(shape) == 2, f"PROD takes an (N, M) matrix and the bottom is {shape} "
                   "(a CHECK, reduction_layer.cpp:25)", fix="reshape the bottom to 2 axes first")
        if p.group > 0:
            self.check(shape[1] % p.group == 0, f"the bottom's {shape[1]} columns are not divisible by group "
                       f"{p.group} (reduction_layer.cpp:21)", fix="give a group that divides the columns")
        return [(shape[0], 1 if p.group < 0 else shape[1] // p.group)]

    def touches(self, run):
        if self.lp.reduction_param.operation != PROD:
            return super().touches(run)
        t = Layer.touches(self, run) + [touch.top(0, "data", "backward")]
        if run.mode == "gpu":
            t += [touch.top(0, "data", "forward", device="host"), touch.top(0, "diff", "backward", device="host")]
        return t


@register("SoftmaxWithLoss", fork=FORK)
class SoftmaxWithLoss(BvlcSoftmaxWithLoss):
    """SoftmaxWithLossLayer with loss_param.label_weight (caffe.proto:483), one weight a class from class 0,
    the rest 1. With any given, FillLabelWeights (softmax_loss_layer.cpp:11-48, from LayerSetUp and Reshape)
    CHECKs each is positive (cpp:20-21) and keeps label_weights_, a Blob of bottom 0's shape, each entry its
    class's weight, written on the host (cpp:45-46; softmax_loss_layer.hpp:128); in GPU mode the forward and
    backward multiply the losses and the bottom's diff by its device copy (cu:50, :120). More weights than
    classes are written past the vector (cpp:17-19). Without label_weight the layer is BVLC's."""

    @classmethod
    def sized_as(cls, lp):
        return cls if lp.loss_param.label_weight else BvlcSoftmaxWithLoss

    def reshape(self, bottoms):
        tops = super().reshape(bottoms)
        weights = list(self.fork_param("loss_param").label_weight)
        if weights:
            axis = self.lp.softmax_param.axis
            classes = tuple(bottoms[0])[axis if axis >= 0 else axis + len(bottoms[0])]
            self.check(all(w > 0 for w in weights), f"loss_param.label_weight {weights}: FillLabelWeights CHECKs "
                       "each is positive (softmax_loss_layer.cpp:20)", fix="give positive weights")
            self.check(len(weights) <= classes, f"{len(weights)} label_weight values for {classes} classes: "
                       "FillLabelWeights writes them into a vector of one a class (softmax_loss_layer.cpp:16-19), "
                       "past its end", fix="give at most one weight a class")
        return tops

    def touches(self, run):
        t = super().touches(run)
        if self.lp.loss_param.label_weight:
            n = count(run.bottoms[0])
            t.append(touch.buffer("label_weights_", n, "setup", per_sample=True, device="host",
                                  note="each entry its class's weight, on the host (softmax_loss_layer.cpp:45-46)"))
            if run.mode == "gpu":
                t.append(touch.buffer("label_weights_ (device)", n, "forward", per_sample=True,
                                      note="read by the forward and backward (softmax_loss_layer.cu:50, :120)"))
        return t
