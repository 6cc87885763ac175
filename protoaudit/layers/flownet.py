"""liruoteng/FlowNet's Caffe (commit e9321cb), FlowNet's layers on a 2016 BVLC Caffe, as its sources
shape them: L1Loss, Correlation, Downsample, Mean, FloData and its one-top ImageData.

File and line references are to that commit: src/caffe/layers/<name>_layer.cpp and .cu,
include/caffe/loss_layers.hpp (L1LossLayer), vision_layers.hpp (CorrelationLayer, DownsampleLayer),
data_layers.hpp (Batch, BasePrefetchingDataLayer, FloDataLayer, ImageDataLayer, MeanLayer) and
src/caffe/net.cpp. Its Correlation, L1Loss and Downsample have GPU code only (their Forward_cpu is
NOT_IMPLEMENTED); its Mean has CPU code only, which GPU mode runs through Layer's Forward_gpu.

SVS's Caffe (lawy623/SVS at b7c7ae3, the fork svs) is FlowNet 2.0's Caffe of 2017 with DispNet's layers;
references to it say "SVS" and are to caffe/src/caffe/layers and caffe/include/caffe/layers there. Its
correlation_layer.cpp/.cu differ from liruoteng's in their includes alone, and its Eltwise takes one bottom
too (eltwise_layer.hpp:29): those classes serve both forks.

LiteFlowNet's Caffe (twhui/LiteFlowNet at e7d6c43, the fork liteflownet) is FlowNet 2.0's Caffe with its Warp
layer; references to it say "LiteFlowNet" and are to src/caffe/layers and include/caffe/layers there. Its
l1loss_layer.cu, correlation_layer.cpp/.cu and eltwise_layer.cpp are FlowNet 2.0's (lmb-freiburg/flownet2
b92e198) byte for byte, which differ from liruoteng's in includes and comments; its l1loss_layer.cpp adds
l1_loss_param.power for the square root's exponent, which allocates alike. Like SVS's, its net.cpp never asks
AllowBackward().

FlowNet 2.0's Caffe (the fork flownet2, protoaudit.layers.flownet2) has those same files (L1Loss: l1loss_layer.cu
byte for byte, its .cpp LiteFlowNet's with the square root's exponent fixed at 0.5), sized by these classes.
"""
import struct

from . import touch
from .base import Layer, legacy_shape, register
from .structure import Eltwise as BVLCEltwise
from ..read.datasets import reader
from .data import FIRST_TOKENS, CopyingPrefetching, ImageData as BVLCImageData, LIST_ENTRY_BYTES

FORK = "flownet"
SVS = "svs"
LITE = "liteflownet"
FLOWNET2 = "flownet2"
FLO_MAGIC = 202021.25  # the .flo header's first float (flo_data_layer.cpp:27)
STRING_BYTES = 32  # sizeof(std::string), libstdc++: one entry of ImageData's vector<string> lines_


class DifferenceLoss(Layer):
    """A FlowNet loss of one bottom, or of the difference of two through an inner Eltwise, which CHECKs
    that they have the same shape; its label is the prediction's shape, and it allows a forced
    backward into either bottom."""

    min_bottoms = 1
    max_bottoms = 2
    exact_tops = 1
    auto_top_blobs = True
    loss_by_default = True
    cited = ""  # where the layer's source sets up its inner Eltwise

    def reshape(self, bottoms):
        for j, shape in enumerate(bottoms[1:], 1):
            self.check(tuple(shape) == tuple(bottoms[0]),
                       f"its Eltwise difference CHECKs bottom[{j}]->shape() == bottom[0]->shape() "
                       f"({self.cited}, eltwise_layer.cpp:34): {tuple(bottoms[0])} vs {tuple(shape)}")
        legacy_shape(self, bottoms[0])
        return [()]

    def label_for(self, prediction):
        return tuple(prediction)

    def allow_force_backward(self, bottom_index):
        return True

    @staticmethod
    def into_bottoms(run, full):
        """The backward's last step: the inner Eltwise's diff_ (two bottoms) and the bottoms' diffs."""
        if len(run.bottoms) < 2:
            return [touch.bottom(0, "diff", "backward")]
        return [touch.buffer("diff_.diff", full, "backward", per_sample=True)] + [
            touch.bottom(j, "diff", "backward") for j, down in enumerate(run.propagate_down[:2]) if down]


@register("L1Loss", fork=(FORK, LITE, FLOWNET2))
class L1Loss(DifferenceLoss):
    """L1LossLayer: one or two bottoms (loss_layers.hpp:516-518), LossLayer's one scalar top of loss
    weight 1 (Reshape: l1loss_layer.cpp:68-69). With two, an EltwiseLayer SUM with coefficients 1, -1
    writes their difference into diff_ (cpp:18-27), whose Reshape CHECKs the bottoms' shapes equal
    (eltwise_layer.cpp:34); with one, bottom 0 is the difference itself (cpp:15-17) and the forward
    zeroes its NaNs in place (l1loss_layer.cu:130-131).

    Buffers, each bottom 0's size (legacy 4 axes) unless said: sign_ and mask_ (cpp:75-79), written
    forward (cu:79-80, 134-135). With l2_per_location (cpp:32-62, 83-88): square_output_ (a
    PowerLayer's top, bottom 0's size), sum_output_ and sqrt_output_ (N x 1 x H x W: a 1x1
    ConvolutionLayer of one output summing the channels, then a PowerLayer), the convolution's weight
    (1 x C x 1 x 1) and bias (1), filled on the host at setup by their constant fillers (cpp:44-51) and
    read on the device, and its bias_multiplier_ (H x W), set on the host by
    its Reshape (base_conv_layer.cpp:235-238) and read on the device; Reshape also sets sign_ to ones
    on the host (cpp:87), which the forward reads on the device (cu:117). plateau_l2_ is shaped like
    sum_output_ (cpp:81) and written only when plateau > 0 (cu:102-113). The loss is written on the host
    (cu:140) and its diff read there (cu:153). Backward (cu:144-185), when either bottom propagates:
    the diffs of sqrt_output_, sum_output_, square_output_ and diff_ in turn, or diff_'s alone; the
    inner convolution's weight and bias diffs (its param_propagate_down_ is true); then the Eltwise
    writes the diffs of the bottoms that propagate."""

    cited = "l1loss_layer.cpp:27"  # its forced backward: loss_layers.hpp:512-514

    def param(self):
        return self.fork_param("l1_loss_param")

    def touches(self, run):
        p = self.param()
        n, c, h, w = legacy_shape(self, run.bottoms[0])
        full, plane = n * c * h * w, n * h * w
        two = len(run.bottoms) >= 2
        shape = "x".join(map(str, (n, c, h, w)))
        t = [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        if two:
            t.append(touch.buffer("diff_", full, "forward", per_sample=True, note=shape))
        else:
            t.append(touch.bottom(0, "data", "forward"))  # NaNs zeroed in place (cu:130-131)
        t.append(touch.buffer("mask_", full, "forward", per_sample=True, note=shape))
        l2 = p.l2_per_location
        if l2:
            t += [touch.buffer("sign_ (host)", full, "setup", per_sample=True, device="host", note=shape),
                  touch.buffer("sum_layer_ weight (host)", c, "setup", per_sample=False, device="host",
                               note=f"1x{c}x1x1"),
                  touch.buffer("sum_layer_ bias (host)", 1, "setup", per_sample=False, device="host"),
                  touch.buffer("sum_layer_ bias_multiplier_ (host)", h * w, "setup", per_sample=False, device="host"),
                  touch.buffer("sum_layer_ weight", c, "forward", per_sample=False, note=f"1x{c}x1x1"),
                  touch.buffer("sum_layer_ bias", 1, "forward", per_sample=False),
                  touch.buffer("sign_", full, "forward", per_sample=True, note=shape),
                  touch.buffer("square_output_", full, "forward", per_sample=True, note=shape),
                  touch.buffer("sum_output_", plane, "forward", per_sample=True, note=f"{n}x1x{h}x{w}"),
                  touch.buffer("sum_layer_ bias_multiplier_", h * w, "forward", per_sample=False),
                  touch.buffer("sqrt_output_", plane, "forward", per_sample=True, note=f"{n}x1x{h}x{w}")]
            if p.plateau > 0:
                t.append(touch.buffer("plateau_l2_", plane, "forward", per_sample=True, note=f"{n}x1x{h}x{w}"))
        else:
            t.append(touch.buffer("sign_", full, "forward", per_sample=True, note=shape))
        t.append(touch.top(0, "data", "forward", device="host"))
        if not any(run.propagate_down):
            return t
        t.append(touch.top(0, "diff", "backward", device="host"))
        if l2:
            t += [touch.buffer("sqrt_output_.diff", plane, "backward", per_sample=True),
                  touch.buffer("sum_output_.diff", plane, "backward", per_sample=True),
                  touch.buffer("sum_layer_ weight.diff", c, "backward", per_sample=False),
                  touch.buffer("sum_layer_ bias.diff", 1, "backward", per_sample=False),
                  touch.buffer("square_output_.diff", full, "backward", per_sample=True)]
        return t + self.into_bottoms(run, full)


@register("Eltwise", fork=(FORK, SVS, LITE, FLOWNET2))
class Eltwise(BVLCEltwise):
    """BVLC's EltwiseLayer, but one bottom is enough (common_layers.hpp:301, MinBottomBlobs 1): FlowNet's
    nets scale a blob with a SUM of one coefficient (eltwise_layer.cpp:10-37 is BVLC's otherwise)."""

    min_bottoms = 1


@register("L1Loss", fork=SVS)
class SVSL1Loss(L1Loss):
    """SVS's L1LossLayer: liruoteng's buffers and passes (SVS l1loss_layer.cpp:91-117, .cu:97-260), and a
    third bottom (l1_loss_layer.hpp:48), a mask: Reshape hands all three bottoms to the Eltwise, whose CHECK
    makes them one shape (cpp:97-100); the forward reads bottom 2 (cu:134-135), the backward writes the
    diffs of the first two only (cu:259, bottom_1_2)."""

    max_bottoms = 3


@register("L1LossKitti", fork=SVS)
class L1LossKitti(L1Loss):
    """SVS's L1LossKittiLayer: L1Loss of one or two bottoms (l1_loss_kitti_layer.hpp:42-44) read from
    l1_loss_param, its mask the differences of at least 1 (l1loss_kitti_layer.cu:29-32): the same buffers
    and passes (l1loss_kitti_layer.cpp, .cu)."""


@register("Correlation1D", fork=SVS)
class Correlation1D(Layer):
    """SVS's Correlation1DLayer (correlation_layer1d.cpp/.cu, correlation_1d_layer.hpp:28-29): two bottoms
    of one shape (cpp:61-63), correlated along x only. Reshape (cpp:68-95): kernel radius (kernel_size - 1)
    / 2, border max_displacement + radius; the bottoms are padded by pad across and by the radius down
    (cpp:71-72), so the top is ceil((W + 2 pad - 2 border) / stride_1) wide and ceil(H / stride_1) high,
    both at least 1 (cpp:77-78), with 2 (max_displacement / stride_2) + 1 channels (cpp:81-92).

    rbot1_ and rbot2_, N x (H + 2 radius) x (W + 2 pad) x C (cpp:98-101), are written by each forward on
    the device (cu:446-457; on the host by the CPU forward, cpp:506-507); rtopdiff_ is shaped only. The GPU
    backward writes both bottoms' diffs whatever propagate_down says (cu:521-542); the CPU backward is
    NOT_IMPLEMENTED (cpp:548-551)."""

    exact_bottoms = 2
    exact_tops = 1

    def geometry(self, bottoms):
        p = self.fork_param("correlation_param")
        first, second = (legacy_shape(self, s) for s in bottoms)
        for axis, name in ((3, "width"), (2, "height"), (1, "number of channels")):
            self.check(first[axis] == second[axis], f"Both bottom blobs must have same {name} "
                       f"(correlation_layer1d.cpp:61-63): {tuple(bottoms[0])} vs {tuple(bottoms[1])}")
        self.check(p.stride_1 > 0 and p.stride_2 > 0, "stride_1 and stride_2 must be positive")
        n, c, h, w = first
        radius = (p.kernel_size - 1) // 2
        top_w = -((-(w + 2 * p.pad - 2 * (p.max_displacement + radius))) // p.stride_1)
        top_h = -((-h) // p.stride_1)
        self.check(top_w >= 1 and top_h >= 1, "Correlation cannot be done with current settings. Neighborhood and "
                   f"kernel don't fit in blob (correlation_layer1d.cpp:77-78): bottom {h}x{w}, pad {p.pad}, "
                   f"max_displacement {p.max_displacement}, kernel_size {p.kernel_size}")
        return n, c, h + 2 * radius, w + 2 * p.pad, 2 * (p.max_displacement // p.stride_2) + 1, top_h, top_w

    def reshape(self, bottoms):
        n, _, _, _, channels, top_h, top_w = self.geometry(bottoms)
        return [(n, channels, top_h, top_w)]

    def touches(self, run):
        n, c, ph, pw, _, _, _ = self.geometry(run.bottoms)
        padded, note = n * ph * pw * c, f"{n}x{ph}x{pw}x{c}"
        host = "host" if run.mode != "gpu" else "device"
        t = [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"),
             touch.buffer("rbot1_", padded, "forward", per_sample=True, note=note, device=host),
             touch.buffer("rbot2_", padded, "forward", per_sample=True, note=note, device=host),
             touch.top(0, "data", "forward")]
        if run.mode != "gpu":
            return t + [touch.stop("backward", "Correlation1D's CPU backward is NOT_IMPLEMENTED "
                                               "(correlation_layer1d.cpp:548-551)")]
        return t + [touch.top(0, "diff", "backward"),
                    touch.bottom(0, "diff", "backward"), touch.bottom(1, "diff", "backward")]


@register("Resample", fork=(SVS, FLOWNET2))
class Resample(Layer):
    """SVS's ResampleLayer (resample_layer.cpp/.cu/.hpp, in src): bottom 0 resized to resample_param's height
    x width, or to bottom 1's size where there are two (cpp:40-46), both at least 1 (cpp:48-49); CUBIC,
    LINEAR or NEAREST only (cpp:17-20). The GPU forward writes the top and allocates nothing
    (cu:129-207); the CPU forward stops (cpp:61), and so does any backward that propagates (cu:210-214).
    FlowNet 2.0's (the fork flownet2, b92e198) has the same .cpp to line 66 and the same kernels; its CPU
    backward stops whatever propagate_down says (cpp:67-68), never reached as the CPU forward stops first."""

    min_bottoms = 1
    max_bottoms = 2
    exact_tops = 1

    def reshape(self, bottoms):
        p = self.fork_param("resample_param")
        self.check(p.type in (1, 2, 3), "ResampleLayer: only CUBIC, LINEAR and NEAREST interpolation is supported "
                   "for now (resample_layer.cpp:17-20)")
        n, c, _, _ = legacy_shape(self, bottoms[0])
        top_h, top_w = legacy_shape(self, bottoms[1])[2:] if len(bottoms) == 2 else (p.height, p.width)
        self.check(top_h >= 1, "ResampleLayer must have top_height > 0 (resample_layer.cpp:48)")
        self.check(top_w >= 1, "ResampleLayer must have top_width > 0 (resample_layer.cpp:49)")
        return [(n, c, top_h, top_w)]

    def touches(self, run):
        t = _gpu_only(run, "ResampleLayer: CPU Forward not yet implemented. (resample_layer.cpp:61)")
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        return t + _no_backward(run, "ResampleLayer cannot do backward. (resample_layer.cu:212-214)")


@register("NegReLU", fork=SVS)
class NegReLU(Layer):
    """SVS's NegReLULayer, a NeuronLayer (neg_relu_layer.hpp:19): the top is the bottom's shape, min(x, 0) +
    negative_slope max(x, 0); forward and backward read and write only the bottom and top
    (neg_relu_layer.cpp:10-37, .cu)."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        return [tuple(bottoms[0])]


@register("Correlation", fork=(FORK, SVS, LITE, FLOWNET2))
class Correlation(Layer):
    """CorrelationLayer: two bottoms of one shape (correlation_layer.cpp:45-47), one top
    (vision_layers.hpp:294-295). LayerSetUp CHECKs kernel_size and max_displacement are given and the
    kernel odd (cpp:17-21). Reshape (cpp:43-81): border = max_displacement + (kernel_size - 1) / 2, the
    top's height and width ceil((side + 2 pad - 2 border) / stride_1), at least 1, its channels
    (2 (max_displacement / stride_2) + 1)^2.

    rbot1_ and rbot2_, N x (H + 2 pad) x (W + 2 pad) x C each (cpp:77-78), are the bottoms padded and
    rearranged by each forward (correlation_layer.cu:445-456) and read by the backward; rtopdiff_
    (cpp:80-81) is shaped but never touched. Reshape makes the three Blobs anew each time (reset):
    one of each is held. Backward writes both bottoms' diffs whatever propagate_down says
    (cu:513-514). There is no CPU code (cpp:85-95)."""

    exact_bottoms = 2
    exact_tops = 1

    def param(self):
        return self.fork_param("correlation_param")

    def geometry(self, bottoms):
        p = self.param()
        self.check(p.HasField("kernel_size"), "Filter kernel_size is not set (correlation_layer.cpp:17)")
        self.check(p.HasField("max_displacement"), "Max displacement is required. (correlation_layer.cpp:18)")
        self.check(p.kernel_size % 2 == 1, "Odd kernel size required (correlation_layer.cpp:21)")
        first, second = (legacy_shape(self, s) for s in bottoms)
        for axis, name in ((3, "width"), (2, "height"), (1, "channels")):
            self.check(first[axis] == second[axis], f"Both bottom blobs must have same {name} "
                       f"(correlation_layer.cpp:45-47): {tuple(bottoms[0])} vs {tuple(bottoms[1])}")
        n, c, h, w = first
        border = p.max_displacement + (p.kernel_size - 1) // 2
        # ceil((float)(padded - 2 border) / (float)stride_1), cpp:58-59 (stride 0 is a float division by zero)
        self.check(p.stride_1 > 0 and p.stride_2 > 0, "stride_1 and stride_2 must be positive")
        top_w = -((-(w + 2 * p.pad - 2 * border)) // p.stride_1)
        top_h = -((-(h + 2 * p.pad - 2 * border)) // p.stride_1)
        self.check(top_w >= 1 and top_h >= 1, "Correlation cannot be done with current settings. Neighborhood and "
                   f"kernel don't fit in blob (correlation_layer.cpp:61-62): bottom {h}x{w}, pad {p.pad}, "
                   f"max_displacement {p.max_displacement}, kernel_size {p.kernel_size}")
        grid = 2 * (p.max_displacement // p.stride_2) + 1
        return n, c, h + 2 * p.pad, w + 2 * p.pad, grid * grid, top_h, top_w

    def reshape(self, bottoms):
        n, _, _, _, channels, top_h, top_w = self.geometry(bottoms)
        return [(n, channels, top_h, top_w)]

    def touches(self, run):
        n, c, ph, pw, _, _, _ = self.geometry(run.bottoms)
        padded = n * ph * pw * c
        note = f"{n}x{ph}x{pw}x{c}"
        t = _gpu_only(run, "Correlation has no CPU code (correlation_layer.cpp:85-89)")
        t += [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"),
              touch.buffer("rbot1_", padded, "forward", per_sample=True, note=note),
              touch.buffer("rbot2_", padded, "forward", per_sample=True, note=note),
              touch.top(0, "data", "forward"),
              touch.top(0, "diff", "backward"),
              touch.bottom(0, "diff", "backward"), touch.bottom(1, "diff", "backward")]
        return t


@register("Downsample", fork=FORK)
class Downsample(Layer):
    """DownsampleLayer: bottom 0 resized to top_height x top_width of downsample_param, or to bottom 1's
    height and width where there are two bottoms (downsample_layer.cpp:30-36), both at least 1
    (cpp:38-39); the top is (num, channels) of bottom 0 at that size (cpp:46). Where the size is bottom
    0's own, the top shares bottom 0's data and diff (cpp:49-52) and the forward does nothing
    (downsample_layer.cu:95). It allocates nothing else.

    AllowBackward() is false (vision_layers.hpp:445), so Net::Init never gives it a backward
    (net.cpp:180, 188); force_backward would, and its backward stops (cpp:66, cu:134)."""

    min_bottoms = 1
    max_bottoms = 2
    exact_tops = 1
    allows_backward = False

    def reshape(self, bottoms):
        n, c, h, w = legacy_shape(self, bottoms[0])
        if len(bottoms) == 2:
            _, _, top_h, top_w = legacy_shape(self, bottoms[1])
        else:
            p = self.fork_param("downsample_param")
            top_h, top_w = p.top_height, p.top_width
        self.check(top_h >= 1, "DownsampleLayer must have top_height > 0 (downsample_layer.cpp:38)")
        self.check(top_w >= 1, "DownsampleLayer must have top_width > 0 (downsample_layer.cpp:39)")
        self._shared = (top_h, top_w) == (h, w)
        return [(n, c, top_h, top_w)]

    def shares(self):
        return [(0, 0, "data"), (0, 0, "diff")] if self.__dict__.get("_shared") else []

    def touches(self, run):
        t = _gpu_only(run, "Downsample has no CPU code (downsample_layer.cpp:59)")
        if not self._shared:
            t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        t.append(touch.stop("backward", "DownsamplingLayer cannot do backward. (downsample_layer.cu:134)",
                            fix="Downsample never runs backward: leave force_backward out"))
        return t


@register("Downsample", fork=SVS)
class SVSDownsample(Downsample):
    """SVS's DownsampleLayer: the same shapes and sharing (SVS downsample_layer.cpp:21-57), but its net.cpp
    never asks AllowBackward(), its forward runs the kernel even where the top is bottom 0 (cu:97, the size
    test commented out), and its backward stops only where a bottom propagates (cu, Backward_gpu)."""

    allows_backward = True
    kernel_when_shared = True

    def touches(self, run):
        t = _gpu_only(run, "Downsample has no CPU code (downsample_layer.cpp:63)")
        if self.kernel_when_shared or not self._shared:
            t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        return t + _no_backward(run, "DownsamplingLayer cannot do backward. (downsample_layer.cu)")


@register("Downsample", fork=LITE)
class LiteDownsample(SVSDownsample):
    """LiteFlowNet's DownsampleLayer (FlowNet 2.0's files): SVS's, but its forward skips the kernel where the
    top is bottom 0 (downsample_layer.cu:95-96)."""

    kernel_when_shared = False


@register("Mean", fork=FORK)
class Mean(Layer):
    """MeanLayer: as many tops as bottoms (mean_layer.cpp:52-53), each its bottom's shape (cpp:71-72),
    the bottom scaled and a mean added or subtracted. Reshape CHECKs that the channels are a multiple
    of the values given (cpp:67-68), or reads mean_param.file into mean_ on the host at every Reshape
    and CHECKs its height and width against each bottom's (cpp:55-63).

    CPU code only (cpp:75-123; no .cu): in GPU mode Layer's Forward_gpu runs it, reading the bottoms and
    writing the tops on the host, which the layers after it read on the device. Its backward stops
    (data_layers.hpp:344-347)."""

    min_bottoms = 1
    min_tops = 1
    equal_bottoms_tops = True

    def reshape(self, bottoms):
        p = self.fork_param("mean_param")
        shapes = [legacy_shape(self, b) for b in bottoms]
        if p.file:
            self.fail("a Mean layer with mean_param.file reads its mean at every Reshape (mean_layer.cpp:55-63); "
                      "protoaudit does not read that file", fix="give the mean as mean_param value entries")
        values = len(p.value)
        self.check(values > 0, "mean_param has no value: the channels' check divides by their count "
                   "(mean_layer.cpp:68)")
        for s in shapes:
            self.check(s[1] % values == 0, f"bottom size not divisible by mean size (mean_layer.cpp:68): "
                       f"{s[1]} channels, {values} values")
        return shapes

    def touches(self, run):
        t = [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        t += [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))]
        t.append(touch.stop("backward", "MeanLayer cannot do backward. (data_layers.hpp:344-347)",
                            fix="nothing below a Mean layer can learn: its bottoms are data"))
        return t


class FlowPrefetching(CopyingPrefetching):
    """The fork's BasePrefetchingDataLayer: PREFETCH_COUNT = 3 Batches (data_, label_) in an array
    (data_layers.hpp:59-62, 81-87); the forward copies the batch into the top (base_data_layer.cu:9-23).
    Its ImageData and FloData give one top, no label (data_layers.hpp:164, 309)."""

    PREFETCH_COUNT = 3
    BATCH_BLOBS = 2
    exact_tops = 1

    def reader_touches(self, run):
        """lines_: ImageData keeps a vector<string> (image_data_layer.cpp:39-41), FloData a
        vector<pair<string, int>> (flo_data_layer.cpp:65-67), each entry one name."""
        if not getattr(self, "list_path", None):
            return []
        lists = reader("lists")
        e = lists.entries(self.list_path, lists.token_names)
        capacity = 1 << max(0, e.count - 1).bit_length() if e.count else 0
        size = STRING_BYTES if self.lp.type == "ImageData" else LIST_ENTRY_BYTES["ImageData"]
        return [touch.host("lines_", capacity * size + e.name_bytes, f"{e.count:,} entries")]


@register("ImageData", fork=FORK)
class ImageData(FlowPrefetching, BVLCImageData):
    """ImageDataLayer: BVLC's image list and transformer, but every whitespace-separated token of the
    list is an image (infile >> filename, image_data_layer.cpp:37-41) and there is no label top
    (data_layers.hpp:309; cpp:80-86)."""

    def first_names(self, list_path):
        return [self.param().root_folder + FIRST_TOKENS(list_path, 1, "image list")[0]]


@register("FloData", fork=FORK)
class FloData(FlowPrefetching, BVLCImageData):
    """FloDataLayer: optical flow read from Middlebury .flo files that image_data_param.source lists
    (one name a token, under root_folder: flo_data_layer.cpp:58-67). The top is (batch_size, 2, height,
    width) of the first file's header (cpp:89-109); no transformation. Where the list or the file is
    absent, the two channels are known and the size is the dataset's."""

    def data_shape(self, batch):
        p = self.param()
        if self.declared():
            return None, "--input"
        found = self.files.find(p.source)
        self.list_path = found.path if found else None
        if found is None:
            self.missing(batch, (2, None, None), self.files.not_found("source", p.source), absent=True)
        name = p.root_folder + self.files.read(FIRST_TOKENS, found.path, 1, "flow list", what=f"source '{p.source}'")[0]
        flo = self.files.find(name)
        if flo is None:
            self.missing(batch, (2, None, None), self.files.not_found(f"the first file that '{p.source}' names,",
                                                                      name), absent=True)
        with open(flo.path, "rb") as f:
            head = f.read(12)
        magic = struct.unpack("<f", head[:4])[0] if len(head) == 12 else None
        self.check(magic == FLO_MAGIC, f"'{name}' is not a .flo file (its header is not 202021.25 and two ints): "
                   "File corrupted (flo_data_layer.cpp:27-42)")
        width, height = struct.unpack("<ii", head[4:])
        return (2, height, width), f"{self.files.shown(flo, name)} ({width}x{height} flow, first in {p.source})"

    def rngs(self, run):
        return int(self.param().shuffle)  # prefetch_rng_ (cpp:69-74); no transformer RNG drawn


def _gpu_only(run, message):
    """The stop of a layer whose forward has no CPU code, in a CPU run."""
    return [touch.stop("forward", message)] if run.mode != "gpu" else []


def _no_backward(run, message):
    """The stop of a layer that cannot run backward, where a bottom asks for its gradient (the fork's
    net.cpp ignores AllowBackward: only propagate_down: false keeps it out)."""
    return [touch.stop("backward", message, fix="give the layer propagate_down: false for each bottom")] \
        if any(run.propagate_down) else []
