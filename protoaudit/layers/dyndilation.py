"""caffe-dynamic-dilation (SSAW14/LearnableDilationNetwork 4838c44, caffe-dynamic-dilation/): DeepLab v2's Caffe
(talent518/deeplab-public-ver2 51750fa, file for file) whose Convolution learns its dilation, as its sources
shape it.

What differs from DeepLab v2's files, and is sized here:
- BaseConvolutionLayer (base_conv_layer.hpp:249-250, base_conv_layer.cpp:14-18): col_buffer_ is one static
  Blob for every Convolution and Deconvolution of the process, and a second static Blob, col_buffer_dilation_,
  is reshaped like it by every one of them (cpp:263); output_buffer_cc_, output_buffer_cf_ and rand_vec_ are
  reshaped (cpp:201-203, :228-231, :264) and never allocated.
- ConvolutionLayer takes an optional second bottom, a map of dilations (conv_layer.cpp:28-34, .cu:19-25), and
  computes one top.
- Truncation (clips to [truncation_min, truncation_max]) and Duplicate (spreads (N, C) to (N, C, H, W)), the
  layers that make the dilation map from a learnt bias.
- SoftmaxWithLoss's Forward_gpu reads the bottom's diff on the host (softmax_loss_layer.cu:54).
- The Batch of its prefetching base holds a fourth Blob, depth_, never shaped (base_data_layer.hpp:51).
Interp, SegAccuracy, MatWrite and BatchNorm are DeepLab v2's files unchanged: their classes are carried.
Its Sigmoid's ratio and EuclideanLoss's bool_ignore change values, not sizes; its Crop, ManualCrop,
LinearTransform, NLU and Stop (no net of the repository uses them) have no rule here.

File:line references are to caffe-dynamic-dilation/src/caffe/ and include/caffe/ at that commit.
"""
from . import touch
from .base import Layer, carry, count, legacy_shape, register
from .conv import Convolution, Deconvolution
from .deeplab import BatchNormV2, DataV2, ImageDataV2, ImageSegData, Interp, MatWrite, SegAccuracy, WindowDataV2
from .losses import SoftmaxWithLoss

FORK = "dyndilation"
COL = "BaseConvolutionLayer::col_buffer_"
COL_DILATION = "BaseConvolutionLayer::col_buffer_dilation_"
BATCH_BLOBS = 4  # Batch: data_, depth_, label_, dim_ (base_data_layer.hpp:51)

carry(__name__, FORK, Interp, SegAccuracy, MatWrite, BatchNormV2)


@register("Data", fork=FORK)
class Data(DataV2):
    BATCH_BLOBS = BATCH_BLOBS


@register("ImageData", fork=FORK)
class ImageData(ImageDataV2):
    BATCH_BLOBS = BATCH_BLOBS


@register("WindowData", fork=FORK)
class WindowData(WindowDataV2):
    BATCH_BLOBS = BATCH_BLOBS


@register("ImageSegData", fork=FORK)
class ImageSegDataDyn(ImageSegData):
    """DeepLab v2's ImageSegData (image_seg_data_layer.cpp is its file unchanged) in the fork's prefetching
    base, whose Batch has a fourth Blob, depth_, that no layer shapes (base_data_layer.hpp:51)."""

    BATCH_BLOBS = BATCH_BLOBS


def _col_note(channels, kernel, out):
    return "x".join(map(str, (channels,) + tuple(kernel) + tuple(out))) + " (C_in x kernel x output, one image)"


@register("Convolution", fork=FORK)
class ConvolutionDyn(Convolution):
    """ConvolutionLayer with an optional dilation map (conv_layer.cpp, .cu). One bottom: DeepLab v2's
    convolution, but for the static column buffers. Two bottoms: bottom 1 is the map, one dilation per input
    channel and position on the GPU (im2col.cu:120), one per position on the CPU (im2col.cpp:147); the top
    is bottom 0's convolution, its shape BaseConvolutionLayer::Reshape's, from the `dilation` field
    (base_conv_layer.cpp:203-231). The dynamic kernels take `pad` as the largest dilation and size the
    columns with it (im2col.cu:160-163, im2col.cpp:133-137): it must give that top's size.

    Two bottoms, Caffe engine: forward reads both and im2cols bottom 0 through the map into col_buffer_
    (base_conv_layer.cpp:299-316, .cu:28-38). Backward (.cu:64-138) takes the weight's diff and bottom 0's
    diff before any check (:67, :84), and on the GPU zeroes bottom 1's diff (:74-79) whatever propagate_down
    says; with propagate_down[0] or force_back_propagation it runs col2im through col_buffer_ and fills
    bottom 1's diff through col_buffer_dilation_ (base_conv_layer.cpp:482-499), the one touch that
    allocates that Blob. The CPU backward has no dilation gradient (conv_layer.cpp:60-111).

    A cuDNN build gives a convolution without dilation > 1 to CuDNNConvolutionLayer (layer_factory.cpp:
    40-57), whose forward writes a top for each bottom (cudnn_conv_layer.cu:14-16): with a dilation map it
    has no second top to write."""

    min_bottoms = 1
    max_bottoms = 2
    min_tops = 1
    max_tops = 1
    equal_bottoms_tops = False  # base_conv_layer.hpp:29

    def _setup(self, bottoms):
        bottoms = tuple(bottoms)
        if len(bottoms) == 1:
            return super()._setup(bottoms)
        found = super()._setup(bottoms[:1])
        geo, channels = found[:2]
        self.check(geo.axis == 1 and len(bottoms[0]) == 4, f"a convolution with a dilation map takes (N, C, H, "
                   f"W) images: bottom 0 is {tuple(bottoms[0])} (im2col_dynamic reads height and width)")
        n, c, h, w = bottoms[0]
        dil = tuple(bottoms[1])
        self.check(len(dil) >= 1 and dil[0] == n, f"the dilation map {dil} must have bottom 0's {n} images: "
                   "image n reads it at bottom[1]->offset(n) (conv_layer.cu:31)")
        self.check(count(dil, 1) >= c * h * w, f"the dilation map {dil} holds {count(dil, 1)} values an image; "
                   f"the GPU kernel reads one per input channel and position, {c} x {h} x {w} = {c * h * w} "
                   "(im2col.cu:120)")
        by_pad = tuple((size + 2 * p - (k + (k - 1) * (p - 1))) // s + 1
                       for size, k, s, p in zip((h, w), geo.kernel, geo.stride, geo.pad))
        out = geo.conv_out((h, w))
        self.check(by_pad == out, f"with a dilation map the kernels take pad as the largest dilation (im2col.cu:"
                   f"160-163): pad {geo.pad[0]} gives {by_pad[0]}x{by_pad[1]} columns, the top is "
                   f"{out[0]}x{out[1]} (dilation {geo.dilation[0]})", fix="give pad equal to dilation")
        return found

    def reshape(self, bottoms):
        return super().reshape(bottoms)[:1]

    def force_back(self):
        return self.lp.convolution_param.force_back_propagation

    def col_elements(self, run):
        geo, channels = self._setup(run.bottoms)[:2]
        return channels * count(geo.kernel) * count(geo.conv_out(run.bottoms[0][geo.axis + 1:]))

    def statics(self, run):
        """Every convolution's Reshape grows both static Blobs to its column shape (base_conv_layer.cpp:
        260-264), cuDNN's too (its Reshape calls it)."""
        n = self.col_elements(run)
        return [touch.static(COL, n, "reshape"), touch.static(COL_DILATION, n, "reshape")]

    def touches(self, run):
        if len(run.bottoms) == 1:
            t = [touch.static(COL, x.elements, x.stage, x.note) if x.name == "col_buffer_" else x
                 for x in super().touches(run)]
            if (self.force_back() and not self.uses_cudnn(run) and not any(run.propagate_down)
                    and not any(x.name == "col_buffer_" for x in super().touches(run))):
                # backward_gemm runs for force_back_propagation too (conv_layer.cu:130), taking col_buffer_
                t.append(touch.static(COL, self.col_elements(run), "backward"))
            return t + self.statics(run)
        if self.uses_cudnn(run):
            return self.statics(run) + [touch.stop(
                "forward", "a cuDNN build runs this convolution (no dilation > 1) as CuDNNConvolutionLayer, "
                "whose forward writes a top for each bottom (cudnn_conv_layer.cu:14-16): the dilation map has no "
                "top to go to", fix="set engine: CAFFE in its convolution_param, or audit with --engine caffe")]
        geo, channels = self._setup(run.bottoms)[:2]
        one_by_one = all(k == 1 for k in geo.kernel) and all(s == 1 for s in geo.stride) and not any(geo.pad)
        col = self.col_elements(run)
        note = _col_note(channels, geo.kernel, geo.conv_out(run.bottoms[0][geo.axis + 1:]))
        gpu = run.mode == "gpu"
        down = run.propagate_down[0] or self.force_back()
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        if self.param.bias_term:
            t.append(touch.buffer("bias_multiplier_", count(run.tops[0], geo.axis + 1), "setup", per_sample=False))
        t += [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"), touch.top(0, "data", "forward")]
        if not one_by_one:
            t.append(touch.static(COL, col, "forward", note))
        t += [touch.top(0, "diff", "backward"), touch.param(0, "diff", "backward")]
        if self.param.bias_term and run.param_propagate_down[1]:
            t.append(touch.param(1, "diff", "backward"))
        if gpu:
            t.append(touch.bottom(1, "diff", "backward"))
        t.append(touch.bottom(0, "diff", "backward"))
        if down and one_by_one:
            t.append(touch.static(COL, col, "backward", note))
        if down and gpu:
            t.append(touch.static(COL_DILATION, col, "backward", note))
        return t + self.statics(run)


@register("Deconvolution", fork=FORK)
class DeconvolutionDyn(Deconvolution):
    """DeepLab v2's DeconvolutionLayer (deconv_layer.cpp unchanged: it registers the class itself, :82, so
    never cuDNN's), its column buffer the static one, reshaped to C_out x kernel x input
    (base_conv_layer.cpp:253-264), as the static col_buffer_dilation_ is."""

    def uses_cudnn(self, run):
        return False

    def touches(self, run):
        geo, _, num_output = self._setup(run.bottoms)[:3]
        n = num_output * count(geo.kernel) * count(run.bottoms[0][geo.axis + 1:])
        t = [touch.static(COL, x.elements, x.stage, x.note) if x.name == "col_buffer_" else x
             for x in super().touches(run)]
        return t + [touch.static(COL, n, "reshape"), touch.static(COL_DILATION, n, "reshape")]


@register("Truncation", fork=FORK)
class Truncation(Layer):
    """TruncationLayer, a NeuronLayer (truncation_layer.hpp:21): the top is the bottom clipped to
    [truncation_min, truncation_max] (cpp:34, .cu:24-27), of its shape (in place allowed); no buffer. Its
    backward reads the bottom and the top's diff into the bottom's diff, where Net::Init asks for it
    (cpp:42-57, .cu:59-71)."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        return [tuple(bottoms[0])]


@register("Duplicate", fork=FORK)
class Duplicate(Layer):
    """DuplicateLayer: one value per (image, channel) of the bottom spread over an H x W map. LayerSetUp
    (duplicate_layer.cpp:10-17) keeps the bottom's num() and channels() (the legacy accessors) and
    duplicate_param's height and width, floats cast to int; Reshape makes the top (num, channels, height,
    width) from them (:20-23). The GPU forward reads in[n * channels + c] (.cu:14-22), the CPU forward only
    takes the top (cpp:26-35). Backward, where Net::Init asks for the bottom's diff, zeroes it and adds into
    it on the GPU, then takes its host copy (.cu:53-66: mutable_cpu_diff); the CPU backward only takes it
    (cpp:41-49)."""

    exact_bottoms = 1
    exact_tops = 1

    def _top(self, bottom):
        n, c = legacy_shape(self, bottom)[:2]
        p = self.fork_param("duplicate_param")
        h, w = int(p.height), int(p.width)  # float fields into ints (duplicate_layer.cpp:15-16)
        self.check(h >= 0 and w >= 0, f"duplicate_param's height {p.height} and width {p.width} make a "
                   f"{h}x{w} top: Blob::Reshape takes no negative size")
        return (n, c, h, w)

    def reshape(self, bottoms):
        return [self._top(bottoms[0])]

    def touches(self, run):
        t = [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
            if run.mode == "gpu":
                t.append(touch.buffer("bottom diff (host)", count(run.bottoms[0]), "backward", per_sample=True,
                                      device="host", note="bottom[0]->mutable_cpu_diff() (duplicate_layer.cu:64)"))
        return t


@register("SoftmaxWithLoss", fork=FORK)
class SoftmaxWithLossDyn(SoftmaxWithLoss):
    """DeepLab v2's SoftmaxWithLoss, whose Forward_gpu reads bottom 0's diff, the scratch it sums the
    losses in, through cpu_diff() (softmax_loss_layer.cu:54-58): a host copy of the bottom's size."""

    def touches(self, run):
        t = super().touches(run)
        if run.mode == "gpu":
            t.append(touch.buffer("bottom diff (host)", count(run.bottoms[0]), "forward", per_sample=True,
                                  device="host", note="bottom[0]->cpu_diff() (softmax_loss_layer.cu:54)"))
        return t
