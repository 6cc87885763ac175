"""caffe-video_triplet (xiaolonw/caffe-video_triplet c39ea1a: Wang and Gupta, unsupervised learning of
visual representations using videos), as its sources shape its layers.

The fork is HED's mid-2015 BVLC Caffe with a triplet ranking loss on L2-normalised features: Norm
divides each feature by its L2 norm, RankHardLoss compares each pair (rows i, i+1 of the batch) with
negatives mined from the rest of the batch. Both have CPU code only (their .cu calls it). ImageData's
pair_size only shuffles the list in blocks of pair_size images, so that pairs stay adjacent
(image_data_layer.cpp:93-122, read at :104); its tops are BVLC's (cpp:67-86). Its BasePrefetchingDataLayer
is the SSD fork's: PREFETCH_COUNT = 3 batches of data_ and label_, copied into the tops
(include/caffe/data_layers.hpp:56-90, base_data_layer.cpp:42-122, base_data_layer.cu:8-27); its
Accuracy has no .cu, as caffe-enet's. The rest of the net is counted as BVLC 9b89154's layers, as for
the other forks here.

File and line references are to that commit's src/caffe/layers/norm_layer.cpp/.cu,
rank_hard_loss_layer.cpp/.cu, loss_layer.cpp and include/caffe/{vision_layers,loss_layers}.hpp.
"""
from . import enet, ssd, touch
from .base import Layer, carry, legacy_shape, register
from .losses import Loss, legacy_num_pair

FORK = "video_triplet"

carry(__name__, FORK, ssd.SSDData, ssd.SSDImageData, ssd.SSDWindowData, enet.Accuracy)


@register("Norm", fork=FORK)
class Norm(Layer):
    """NormLayer: each (n, h, w) column of channels divided by its L2 norm (+ 1e-6).

    Reshape gives the top the bottom's legacy num, channels, height and width (cpp:25-30): at most 4
    axes, and a (N, D) bottom makes an (N, D, 1, 1) top. The .cu runs the CPU code (cu:10-20), so in
    either mode the forward reads the bottom's cpu_data and writes the top's (cpp:38-39): the top lives
    on the host. The backward returns unless propagate_down[0] (cpp:75-77), reads the top's cpu_diff and
    cpu_data and the bottom's cpu_data, and writes the bottom's cpu_diff (cpp:78-81), which the GPU
    backward of the layer below reads with gpu_diff: its device copy is the one counted."""

    exact_bottoms = 1
    exact_tops = 1  # CHECK_EQ(top.size(), 1) (cpp:20)

    def reshape(self, bottoms):
        return [legacy_shape(self, bottoms[0])]

    def touches(self, run):
        t = [touch.bottom(0, "data", "forward", device="host"), touch.top(0, "data", "forward", device="host")]
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward", device="host"), touch.bottom(0, "diff", "backward")]
        return t


@register("RankHardLoss", fork=FORK)
class RankHardLoss(Loss):
    """RankHardLossLayer: a hinge on dot-product distances, anchor row i and positive row i+1 of each
    pair_size block against up to neg_num negatives of other labels.

    Reshape is LossLayer's (the same num(), a scalar top: loss_layer.cpp:25-28) and sizes dis_ and
    mask_ N x N (cpp:28-29); diff_ is reshaped like bottom 0 (cpp:27) but never touched, so never
    allocated. The .cu runs the CPU code (cu:10-20): the forward reads both bottoms' cpu_data, fills dis_
    and mask_ (cpp:47-53, 158-159) and writes the loss into the top's cpu_data (cpp:177), all on the host.
    The backward writes bottom 0's cpu_diff whatever propagate_down says (cpp:185-187, 203-247) and never
    reads the top's diff (the loss weight does not scale it). That diff stays on the host where the layer
    below runs CPU code, as Norm does in the fork's nets; a GPU layer below would also read it with
    gpu_diff, a device copy not counted here. AllowForceBackward is true (loss_layers.hpp:322-324)."""

    def reshape(self, bottoms):
        legacy_num_pair(self, bottoms)
        return [()]

    def allow_force_backward(self, bottom_index):
        return True

    def touches(self, run):
        n = legacy_shape(self, run.bottoms[0])[0]
        pairs = lambda name: touch.buffer(name, n * n, "forward", per_sample=True, device="host",  # noqa: E731
                                          note=f"{n}x{n}")
        return [touch.bottom(0, "data", "forward", device="host"), touch.bottom(1, "data", "forward", device="host"),
                pairs("dis_"), pairs("mask_"), touch.top(0, "data", "forward", device="host"),
                touch.bottom(0, "diff", "backward", device="host")]
