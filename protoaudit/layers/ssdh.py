"""SSDH's Caffe (kevinlin311tw/Caffe-DeepBinaryCode 9eaa766: Yang, Lin and Chen, supervised
semantics-preserving deep hashing), as its sources shape its layers.

The fork is a mid-2015 BVLC Caffe with two losses added on the latent (hash) layer: K1_EuclideanLoss
pushes each sigmoid output away from 0.5 (binary codes), K2_EuclideanLoss pulls each code's mean to
0.5 (a 50% fire rate). Both have CPU code only. Its BasePrefetchingDataLayer is the SSD fork's:
PREFETCH_COUNT = 3 batches of data_ and label_ in an array, copied into the tops
(include/caffe/data_layers.hpp:56-90, base_data_layer.cpp:50-65, 104-122, base_data_layer.cu:8-25),
its DataLayer reading through a DataReader (data_layer.cpp:17-21); its Accuracy has no .cu (CPU code
only), as caffe-enet's. The rest of the net is counted as BVLC 9b89154's layers, as for the other
forks here.

File and line references are to that commit's src/caffe/layers/K1_euclidean_loss_layer.cpp,
K2_euclidean_loss_layer.cpp, loss_layer.cpp and include/caffe/{loss_layers,layer}.hpp.
"""
from . import enet, ssd, touch
from .base import carry, count, register
from .losses import Loss, legacy_num_pair

FORK = "ssdh"

carry(__name__, FORK, ssd.SSDData, ssd.SSDImageData, ssd.SSDWindowData, enet.Accuracy)


class _HalfEuclideanLoss(Loss):
    """What K1 and K2 share (their .cpp files differ only in the loss's and the gradient's sign).

    Reshape (cpp:11-19): LossLayer's CHECK of equal num() (loss_layer.cpp:25-26) and equal
    channels(), height() and width() (cpp:14-16), all legacy accessors, so bottom 1 must have
    bottom 0's shape though it is never read: the loss compares bottom 0 with the constant 0.5. The
    top is LossLayer's scalar (loss_layer.cpp:27-28); diff_ takes bottom 0's shape (cpp:17-18).

    There is no .cu and Forward_gpu/Backward_gpu are commented out (loss_layers.hpp:922-928), so
    Layer's Forward_gpu and Backward_gpu run the CPU code (layer.hpp:341-345, 359-364), in either
    mode on the host: the forward reads bottom 0's cpu_data, writes diff_ and the loss into the top's
    cpu_data (cpp:24-33), so diff_ and the loss live on the host (Layer::Forward's gpu_data of the
    loss, layer.hpp:474, is a 4-byte copy, not counted). The backward reads the top's cpu_diff and
    diff_ and writes the cpu_diff of each bottom propagate_down asks for, either bottom (cpp:39-49;
    AllowForceBackward is true for both, loss_layers.hpp:914-916); in GPU mode the backward of the
    layer below (the Split Caffe inserts where the blob has other readers) reads it with gpu_diff,
    whose device copy is the one counted."""

    def reshape(self, bottoms):
        data, other = legacy_num_pair(self, bottoms)
        self.check(data[1:] == other[1:], f"{self.lp.type} checks that its bottoms have the same channels, height "
                   f"and width (cpp:14-16): {tuple(bottoms[0])} vs {tuple(bottoms[1])}",
                   fix="give it the same blob twice, as SSDH's nets do (bottom 1 is never read)")
        return [()]

    def allow_force_backward(self, bottom_index):
        return True

    def touches(self, run):
        shape = "x".join(map(str, run.bottoms[0]))
        t = [touch.bottom(0, "data", "forward", device="host"),
             touch.buffer("diff_", count(run.bottoms[0]), "forward", per_sample=True, device="host", note=shape),
             touch.top(0, "data", "forward", device="host"), touch.top(0, "diff", "backward", device="host")]
        return t + [touch.bottom(j, "diff", "backward") for j, down in enumerate(run.propagate_down) if down]


@register("K1_EuclideanLoss", fork=FORK)
class K1EuclideanLoss(_HalfEuclideanLoss):
    """K1_EuclideanLossLayer: -sum((x - 0.5)^2) / (2 count), codes driven to 0 or 1."""


@register("K2_EuclideanLoss", fork=FORK)
class K2EuclideanLoss(_HalfEuclideanLoss):
    """K2_EuclideanLossLayer: sum((x - 0.5)^2) / (2 count), each code's mean held near 0.5."""
