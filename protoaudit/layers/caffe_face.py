"""caffe-face's own layer (ydwen/caffe-face, commit 48ff38e): CenterLoss, as its source shapes it.

File and line references are to src/caffe/layers/center_loss_layer.cpp and .cu at that commit.
"""
from . import touch
from .base import canonical_axis, count, legacy_shape, register
from .losses import Loss


@register("CenterLoss", fork="caffe_face")
class CenterLoss(Loss):
    """CenterLossLayer: one centre of K = bottom 0's count from `axis` on, per class (num_output of
    them), kept as the layer's only parameter blob (N, K) (cpp:13-29). The labels are one per item
    (cpp:42-44); the top is LossLayer's scalar (cpp:48).

    distance_ is bottom 0's size, written by every forward (cpp:49, 65; cu:49). variation_sum_ is
    the centres' size (cpp:50), first written in the backward: on the host in either mode (the CPU
    one when the centres learn, cpp:80; the GPU one always hands its mutable_cpu_data to the
    kernels, cu:61-64, and writes the centres' diff whatever param_propagate_down says, cu:64)."""

    def reshape(self, bottoms):
        p = self.fork_param("center_loss_param")
        self.check(p.num_output > 0, "center_loss_param needs num_output, the number of classes",
                   fix="set center_loss_param { num_output: CLASSES }")
        label = legacy_shape(self, bottoms[1])
        self.check(label[1:] == (1, 1, 1), f"the labels must be (N, 1, 1, 1), one per item; got {tuple(bottoms[1])}")
        return super().reshape(bottoms)

    def param_shapes(self, bottoms):
        p = self.fork_param("center_loss_param")
        axis = canonical_axis(self, p.axis, len(bottoms[0]))
        return [(p.num_output, count(bottoms[0], axis))]

    def touches(self, run):
        t = super().touches(run)
        t.append(touch.buffer("distance_", count(run.bottoms[0]), "forward", per_sample=True))
        centres = count(self.param_shapes(run.bottoms)[0])
        gpu = run.mode == "gpu"
        if gpu or run.param_propagate_down[0]:
            t.append(touch.buffer("variation_sum_", centres, "backward", per_sample=False, device="host"))
        if gpu and not run.param_propagate_down[0]:
            t.append(touch.param(0, "diff", "backward"))
        return t
