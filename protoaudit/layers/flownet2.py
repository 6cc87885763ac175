"""FlowNet 2.0's Caffe (lmb-freiburg/flownet2 at b92e198): FlowWarp, ChannelNorm, Accum and LpqLoss, and its
versions of the augmentation layers and Downsample, as its sources shape them.

File and line references are to that commit's src/caffe/layers/<name>_layer.cpp and .cu, include/caffe/layers
and src/caffe/net.cpp. Its net.cpp asks AllowBackward() (net.cpp:172-173, 182-183), which DataAugmentation,
FlowAugmentation, GenerateAugmentationParameters and Downsample answer false (their .hpp): Net::Init never gives
them a backward, so nothing below them gets a gradient through them. Its CustomData, Correlation, L1Loss, Eltwise
and Resample are the classes of protoaudit.layers.liteflownet, .flownet (Resample: SVS's), where the files
compared are named.
"""
from . import touch
from .base import Layer, legacy_shape, register
from .flownet import DifferenceLoss, LiteDownsample, _gpu_only
from .liteflownet import (DataAugmentation as LiteDataAugmentation, FlowAugmentation as LiteFlowAugmentation,
                          GenerateAugmentationParameters as LiteGenerate)

FORK = "flownet2"


@register("FlowWarp", fork=FORK)
class FlowWarp(Layer):
    """FlowWarpLayer: an image (bottom 0) sampled at a flow of its size (bottom 1). Reshape (flow_warp_layer
    .cpp:37-51) CHECKs two bottoms, one top, the same num, height and width, and 2 flow channels; the top is
    bottom 0's shape, and transposed_image_ is shaped (N, H, W, C).

    The GPU forward writes transposed_image_ (the image rearranged, cu:369) and the top; the GPU backward
    reads both bottoms and the top, and writes both bottoms' diffs, zeroing the one that does not propagate
    (cu:471-476, 512-513). The CPU forward and backward (cpp:58-117, 120-190) never touch transposed_image_."""

    exact_bottoms = 2
    exact_tops = 1

    def reshape(self, bottoms):
        image, flow = (legacy_shape(self, s) for s in bottoms)
        self.check(image[0] == flow[0], "Num of the inputs should be the same (flow_warp_layer.cpp:45): "
                   f"{tuple(bottoms[0])} and {tuple(bottoms[1])}")
        self.check(flow[1] == 2, "Flow should have 2 channels: x-flow and y-flow (flow_warp_layer.cpp:46): "
                   f"{tuple(bottoms[1])}")
        self.check(image[3] == flow[3], "Width of the inputs should be the same (flow_warp_layer.cpp:47): "
                   f"{tuple(bottoms[0])} and {tuple(bottoms[1])}")
        self.check(image[2] == flow[2], "Height of the inputs should be the same (flow_warp_layer.cpp:48): "
                   f"{tuple(bottoms[0])} and {tuple(bottoms[1])}")
        return [tuple(image)]

    def touches(self, run):
        n, c, h, w = legacy_shape(self, run.bottoms[0])
        t = [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward")]
        if run.mode == "gpu":
            t.append(touch.buffer("transposed_image_", n * h * w * c, "forward", per_sample=True,
                                  note=f"{n}x{h}x{w}x{c}"))
        return t + [touch.top(0, "data", "forward"), touch.top(0, "data", "backward"),
                    touch.top(0, "diff", "backward"),
                    touch.bottom(0, "diff", "backward"), touch.bottom(1, "diff", "backward")]


@register("ChannelNorm", fork=FORK)
class ChannelNorm(Layer):
    """ChannelNormLayer: the L2 norm over the channels at each pixel. Reshape CHECKs one bottom and one top
    (channel_norm_layer.cpp:30-31); the top is (N, 1, H, W) (cpp:39). It allocates nothing. The GPU forward
    reads the bottom and writes the top on the device (cu:58-59); the GPU backward takes the top's data and
    diff and the bottom's data and diff on the host (cpu_data, mutable_cpu_diff: cu:80-83), whatever
    propagate_down says, so each gets a host copy."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        n, _, h, w = legacy_shape(self, bottoms[0])
        return [(n, 1, h, w)]

    def touches(self, run):
        return [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward"),
                touch.top(0, "data", "backward", device="host"), touch.top(0, "diff", "backward", device="host"),
                touch.bottom(0, "data", "backward", device="host"), touch.bottom(0, "diff", "backward", device="host")]


@register("Accum", fork=FORK)
class Accum(Layer):
    """AccumLayer: its bottoms resized bilinearly and stacked along the channels (accum_layer.cpp:20-80).
    With have_reference the last bottom gives only the size (height, width) and is not accumulated; else
    the size is the bottoms' largest height and width, unless top_height x top_width (or the largest sides
    rounded up to size_divisible_by) exceed both (cpp:59-73). The accumulated bottoms CHECK one num and at
    least one channel in all (cpp:34-36, 55-57). It allocates nothing.

    The GPU backward (cu:146-212) reads the top's diff on the host too (cu:149) and, for each accumulated
    bottom, writes its diff on the device and then reads it on the host (cu:167, 209), whatever
    propagate_down says; the CPU backward (cpp:157-231) writes each accumulated bottom's diff."""

    min_bottoms = 1
    exact_tops = 1

    def accumulated(self, bottoms):
        return bottoms[:-1] if self.fork_param("accum_param").have_reference else bottoms

    def reshape(self, bottoms):
        p = self.fork_param("accum_param")
        if p.have_reference:
            self.check(len(bottoms) >= 2, "Need at least two bottom blobs (one as reference) (accum_layer.cpp:29)")
        shapes = [legacy_shape(self, s) for s in self.accumulated(bottoms)]
        n = legacy_shape(self, bottoms[0])[0]
        for s in shapes:
            self.check(s[0] == n, "All accumulated layers must have same number of images (num_) "
                       f"(accum_layer.cpp:34, 55): {[tuple(b) for b in bottoms]}")
        channels = sum(s[1] for s in shapes)
        self.check(channels >= 1, "Accumulated layers must have some channels in total (accum_layer.cpp:36, 57)")
        if p.have_reference:
            _, _, h, w = legacy_shape(self, bottoms[-1])
            return [(n, channels, h, w)]
        max_h, max_w = max(s[2] for s in shapes), max(s[3] for s in shapes)
        if p.HasField("size_divisible_by"):
            d = p.size_divisible_by
            self.check(d > 0, "size_divisible_by must be positive (accum_layer.cpp:60-62 divide by it)")
            top_h, top_w = -(-max_h // d) * d, -(-max_w // d) * d
        else:
            top_h, top_w = p.top_height, p.top_width
        h, w = (top_h, top_w) if top_h > max_h and top_w > max_w else (max_h, max_w)
        return [(n, channels, h, w)]

    def touches(self, run):
        k = len(self.accumulated(run.bottoms))
        t = [touch.bottom(j, "data", "forward") for j in range(k)]
        t += [touch.top(0, "data", "forward"), touch.top(0, "diff", "backward")]
        if run.mode == "gpu":
            t.append(touch.top(0, "diff", "backward", device="host"))
        for j in range(k):
            t.append(touch.bottom(j, "diff", "backward"))
            if run.mode == "gpu":
                t.append(touch.bottom(j, "diff", "backward", device="host"))
        return t


@register("LpqLoss", fork=FORK)
class LpqLoss(DifferenceLoss):
    """LpqLossLayer: (sum over the channels of |d + p_epsilon|^p + q_epsilon)^q, summed and normalized, of the
    difference d of two bottoms (an EltwiseLayer SUM 1, -1 into diff_, whose Reshape CHECKs one shape) or of
    bottom 0 itself (lpq_loss_layer.cpp:84-100); one scalar top of loss weight 1 (cpp:149-150). The p, q and
    pq_episode_starts_at_iter lists must be one p and one q, or of one length starting at 0 and increasing
    (cpp:29-69).

    Buffers, each bottom 0's size unless said (cpp:152-170): sign_ and mask_, written forward (cu:147-186);
    ones_, set on the host at Reshape (cpp:164-166) and read on the device (cu:194); p_output_ (a PowerLayer's
    top); sum_output_ and q_output_ (N x 1 x H x W: a 1x1 ConvolutionLayer of one output, then a PowerLayer);
    the convolution's weight (1 x C x 1 x 1) and bias (1), filled on the host at setup (cpp:116-129) and read on
    the device, and its bias_multiplier_ (H x W), set on the host by its Reshape and read on the device. With
    one bottom the forward zeroes its NaNs and takes its absolute value in place (cu:165-186). The loss is
    written on the host (cu:197). Backward, where a bottom propagates (cu:209-243): the top's diff on the host,
    q_output_'s diff set on the host (cu:218) and read on the device, then the diffs of sum_output_, the
    convolution's weight and bias, p_output_, and diff_ (or bottom 0's), and the Eltwise's bottoms' diffs.
    There is no CPU code (cpp:175-186)."""

    cited = "lpq_loss_layer.cpp:97"  # its forced backward: lpq_loss_layer.hpp:42-45

    def reshape(self, bottoms):
        p = self.fork_param("lpq_loss_param")
        starts, ps, qs = list(p.pq_episode_starts_at_iter), list(p.p), list(p.q)
        if not (not starts and len(ps) == 1 and len(qs) == 1):
            self.check(len(starts) == len(ps) == len(qs), f"Incompatible sizes: (pq_episode_starts_at_iter -> "
                       f"{len(starts)}, p -> {len(ps)}, q -> {len(qs)}) (lpq_loss_layer.cpp:41-46)")
            self.check(starts, "Lpq schedule parameters must not be empty (lpq_loss_layer.cpp:49-51)")
            self.check(all(a < b for a, b in zip(starts, starts[1:])), "pq_episode_starts_at_frame is not ordered "
                       "or contains duplicates (lpq_loss_layer.cpp:53-64)")
            self.check(starts[0] == 0, "First entry in pq_episode_starts_at_frame is not 0 (lpq_loss_layer.cpp:66-69)")
        return DifferenceLoss.reshape(self, bottoms)

    def touches(self, run):
        n, c, h, w = legacy_shape(self, run.bottoms[0])
        full, plane, shape, flat = n * c * h * w, n * h * w, f"{n}x{c}x{h}x{w}", f"{n}x1x{h}x{w}"
        two = len(run.bottoms) == 2
        t = _gpu_only(run, "LpqLossLayer's Forward_cpu is NOT_IMPLEMENTED (lpq_loss_layer.cpp:177-180)")
        t += [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        t += [touch.buffer("ones_ (host)", full, "setup", per_sample=True, device="host", note=shape),
              touch.buffer("sum_layer_ weight (host)", c, "setup", per_sample=False, device="host", note=f"1x{c}x1x1"),
              touch.buffer("sum_layer_ bias (host)", 1, "setup", per_sample=False, device="host"),
              touch.buffer("sum_layer_ bias_multiplier_ (host)", h * w, "setup", per_sample=False, device="host")]
        t.append(touch.buffer("diff_", full, "forward", per_sample=True, note=shape) if two
                 else touch.bottom(0, "data", "forward"))
        t += [touch.buffer("mask_", full, "forward", per_sample=True, note=shape),
              touch.buffer("sign_", full, "forward", per_sample=True, note=shape),
              touch.buffer("p_output_", full, "forward", per_sample=True, note=shape),
              touch.buffer("sum_layer_ weight", c, "forward", per_sample=False, note=f"1x{c}x1x1"),
              touch.buffer("sum_layer_ bias", 1, "forward", per_sample=False),
              touch.buffer("sum_layer_ bias_multiplier_", h * w, "forward", per_sample=False),
              touch.buffer("sum_output_", plane, "forward", per_sample=True, note=flat),
              touch.buffer("q_output_", plane, "forward", per_sample=True, note=flat),
              touch.buffer("ones_", full, "forward", per_sample=True, note=shape),
              touch.top(0, "data", "forward", device="host")]
        if not any(run.propagate_down):
            return t
        t += [touch.top(0, "diff", "backward", device="host"),
              touch.buffer("q_output_.diff (host)", plane, "backward", per_sample=True, device="host"),
              touch.buffer("q_output_.diff", plane, "backward", per_sample=True),
              touch.buffer("sum_output_.diff", plane, "backward", per_sample=True),
              touch.buffer("sum_layer_ weight.diff", c, "backward", per_sample=False),
              touch.buffer("sum_layer_ bias.diff", 1, "backward", per_sample=False),
              touch.buffer("p_output_.diff", full, "backward", per_sample=True)]
        return t + self.into_bottoms(run, full)


@register("DataAugmentation", fork=FORK)
class DataAugmentation(LiteDataAugmentation):
    """LiteFlowNet's DataAugmentationLayer (data_augmentation_layer.cpp and .hpp byte for byte; .cu but for
    one block), whose GPU forward here also reads bottom 0 on the host, looking for NaNs (cu:338-344, a block
    LiteFlowNet comments out); AllowBackward() is false (data_augmentation_layer.hpp:29)."""

    allows_backward = False

    def touches(self, run):
        return [touch.bottom(0, "data", "forward", device="host")] + super().touches(run)


@register("FlowAugmentation", fork=FORK)
class FlowAugmentation(LiteFlowAugmentation):
    """LiteFlowNet's FlowAugmentationLayer (flow_augmentation_layer.cpp and .cu byte for byte); AllowBackward()
    is false (flow_augmentation_layer.hpp:28) and its backward would stop (hpp:39-41)."""

    allows_backward = False


@register("GenerateAugmentationParameters", fork=FORK)
class GenerateAugmentationParameters(LiteGenerate):
    """LiteFlowNet's GenerateAugmentationParametersLayer (generate_augmentation_parameters_layer.cpp and .cu
    byte for byte); AllowBackward() is false (generate_augmentation_parameters_layer.hpp:27)."""

    allows_backward = False


@register("Downsample", fork=FORK)
class Downsample(LiteDownsample):
    """LiteFlowNet's DownsampleLayer (downsample_layer.cpp and .cu byte for byte); AllowBackward() is false
    (downsample_layer.hpp:30), which this net.cpp asks: only force_backward gives it a backward."""

    allows_backward = False
