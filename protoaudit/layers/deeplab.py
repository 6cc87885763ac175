"""DeepLab's layers: Interp, ImageSegData, SegAccuracy, MatWrite, and DeepLab v1's Caffe (2014).

Two forks, one family. deeplab-public-ver2 (schema `deeplab_v2`, a 2016 BVLC Caffe) registers
Interp, ImageSegData, SegAccuracy and MatWrite, and its Data, ImageData and WindowData hold five
prefetch batches and copy them into their tops (V2Prefetching); PSPNet's Caffe (schema `pspnet`) is that fork
plus a BN layer, with these files unchanged, so the same classes serve it. DeepLab-Context
(schema `deeplab_v1`, an October 2014 Caffe with V1 layers only) has older versions of the same
layers, its convolution's `hole`, and an older SoftmaxWithLoss and data-layer base.

Sources, at the commits named in proto/forks/*.proto: v2 = talent518/deeplab-public-ver2,
v1 = TheLegendAli/DeepLab-Context.
"""
from . import touch
from .base import Layer, count, legacy_shape, register
from .conv import Convolution
from ..read.datasets import lists
from .data import (FIRST_TOKENS, OPENCV_BYTES, RNG_BYTES, THREAD_BYTES, THREAD_RNG_BYTES, CopyingPrefetching, Data,
                   DatasetLayer, ImageData, ThroughDataReader, WindowData)
from .losses import SoftmaxWithLoss
from .normalization import BatchNorm
from .pooling import Pooling

V2 = ("deeplab_v2", "pspnet")
V1 = "deeplab_v1"
ALL = V2 + (V1,)


@register("Interp", fork=V2)
class Interp(Layer):
    """InterpLayer: bilinear resize of an (N, C, H, W) bottom (v2 interp_layer.cpp:21-63).

    The input is first cropped by pad_beg and pad_end (each <= 0, LayerSetUp, :13-18):
    H_eff = H + pad_beg + pad_end. Then, in this order of precedence: shrink_factor alone gives
    (H_eff - 1) / s + 1; zoom_factor alone H_eff + (H_eff - 1) * (z - 1); height and width give
    themselves; both factors shrink first, then zoom. It keeps no buffer: forward writes the top;
    backward, when the bottom needs it, zeroes and fills the bottom's diff from the top's
    (:74-81, :93-100; interp.cu's kernels use no scratch)."""

    exact_bottoms = 1
    exact_tops = 1

    def host_members(self, node, lp_bytes):
        """InterpLayer's ten ints beyond Layer<Dtype>'s (interp_layer.hpp: num_, channels_, height_in_,
        width_in_, height_out_, width_out_, pad_beg_, pad_end_, height_in_eff_, width_in_eff_)."""
        return 10 * 4

    def reshape(self, bottoms):
        p = self.lp.interp_param
        self.check(p.pad_beg <= 0 and p.pad_end <= 0,
                   f"Interp only crops: pad_beg {p.pad_beg} and pad_end {p.pad_end} must be <= 0",
                   fix="use pad values of 0 or below")
        n, c, h, w = legacy_shape(self, bottoms[0])
        h_eff, w_eff = h + p.pad_beg + p.pad_end, w + p.pad_beg + p.pad_end
        self.check(h_eff > 0 and w_eff > 0, f"the input {h}x{w} cropped by pad_beg {p.pad_beg} and pad_end "
                   f"{p.pad_end} is empty")
        h_out, w_out = self.output_size(p, h_eff, w_eff)
        self.check(h_out > 0 and w_out > 0, f"the output would be {h_out}x{w_out}")
        return [(n, c, h_out, w_out)]

    def output_size(self, p, h_eff, w_eff):
        has = p.HasField
        if has("shrink_factor") and not has("zoom_factor"):
            return shrink(self, p.shrink_factor, h_eff, w_eff)
        if has("zoom_factor") and not has("shrink_factor"):
            return zoom(self, p.zoom_factor, h_eff, w_eff)
        if has("height") and has("width"):
            return p.height, p.width
        if has("shrink_factor") and has("zoom_factor"):
            return zoom(self, p.zoom_factor, *shrink(self, p.shrink_factor, h_eff, w_eff))
        self.fail("Interp needs zoom_factor, shrink_factor, or height and width",
                  fix="set interp_param { zoom_factor: N } (or shrink_factor, or height and width)")

    def touches(self, run):
        t = [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t


def shrink(layer, factor, h, w):
    layer.check(factor >= 1, f"shrink_factor {factor} must be positive")
    return (h - 1) // factor + 1, (w - 1) // factor + 1


def zoom(layer, factor, h, w):
    layer.check(factor >= 1, f"zoom_factor {factor} must be positive")
    return h + (h - 1) * (factor - 1), w + (w - 1) * (factor - 1)


@register("Interp", fork=V1)
class InterpV1(Interp):
    """DeepLab v1's InterpLayer (interp_layer.cpp:11-60): exactly one of zoom_factor,
    shrink_factor, or height and width (a CHECK in LayerSetUp), with the same arithmetic. Its members
    are not read here: its host objects are a plain layer's."""

    host_members = None

    def output_size(self, p, h_eff, w_eff):
        has = p.HasField
        given = has("zoom_factor") + has("shrink_factor") + (has("height") and has("width"))
        self.check(given == 1, "give the output size one way: zoom_factor, or shrink_factor, or height and width",
                   fix="DeepLab v1's Interp takes exactly one of them")
        if has("zoom_factor"):
            return zoom(self, p.zoom_factor, h_eff, w_eff)
        if has("shrink_factor"):
            return shrink(self, p.shrink_factor, h_eff, w_eff)
        return p.height, p.width


class V2Prefetching(CopyingPrefetching):
    """deeplab-public-ver2's BasePrefetchingDataLayer (base_data_layer.hpp:54-82,
    base_data_layer.cpp:35-125, .cu:7-27; PSPNet's Caffe keeps these files unchanged), a 2016 BVLC
    one: PREFETCH_COUNT = 5 batches (hpp:71) in an array (hpp:77), each of three Blobs (data_, label_
    and dim_, hpp:48-52, which only ImageSegData shapes), allocated at setup on the host and,
    in GPU mode, on the device (cpp:53-68), and a forward that copies the current batch into the
    tops (cpp:106-125, .cu:7-27), which own their buffers. Its Data, ImageData and WindowData are
    this base's; Data reads through a DataReader (data_layer.hpp:33, data_layer.cpp:15-18,
    ThroughDataReader)."""

    PREFETCH_COUNT = 5
    BATCH_BLOBS = 3


@register("Data", fork=V2)
class DataV2(V2Prefetching, ThroughDataReader, Data):
    pass


@register("ImageData", fork=V2)
class ImageDataV2(V2Prefetching, ImageData):
    """Its list is read as whitespace-separated "name label" pairs (image_data_layer.cpp:40-44,
    `infile >> filename >> label`), where BVLC 9b89154 splits each line at its last space."""

    def first_names(self, list_path):
        return [self.param().root_folder + FIRST_TOKENS(list_path, 1, "image list")[0]]

    def list_touch(self, kind, names_of=None, values=0, what=""):
        return super().list_touch(kind, lists.name_label_names, values, what)


@register("WindowData", fork=V2)
class WindowDataV2(V2Prefetching, WindowData):
    pass


class _SegData(DatasetLayer):
    """ImageSegData: images and their label images named by a list ("image label" lines, under
    root_folder), cropped together.

    Tops: data (N, C, H, W), label (N, 1, H, W) and data_dim (N, 1, 1, 2), each image's size
    before cropping; Caffe adds the tops a file leaves out (ExactNumTopBlobs 3, AutoTopBlobs).
    C is 3 with is_color (the default), else 1. H x W is the crop when transform_param gives one,
    else the first image's size (resized to new_height x new_width when given), read from the
    dataset when it is on disk, else asked for with --input."""

    exact_tops = 3
    auto_top_blobs = True

    def param(self):
        return self.lp.image_data_param

    def batch_size(self):
        return self.param().batch_size

    def crop_hw(self):
        size = self.lp.transform_param.crop_size
        return (size, size) if size else None

    def first_names(self, list_path):
        return [self.param().root_folder + FIRST_TOKENS(list_path, 1, "image list")[0]]

    def reshape(self, bottoms):
        p = self.param()
        self.check(not self.lp.transform_param.mean_file, "ImageSegData does not support mean_file",
                   fix="give mean_value instead")
        self.check((p.new_height == 0) == (p.new_width == 0), "set new_height and new_width together")
        batch = self.batch_size()
        channels = 3 if p.is_color else 1
        self.decodes = True
        crop = self.crop_hw()
        resized = (p.new_height, p.new_width) if p.new_height else None
        origin = "the layer's parameters (is_color and its crop)"
        size = crop
        if not self.declared():
            read = self.first_image(p.source, self.first_names, batch, channels, crop or resized)
            if read is not None and not crop:
                size, origin = (resized or read[0]), read[1] + (", resized" if resized else "")
            elif read is None and not crop:
                size, origin = resized, "the layer's parameters (is_color, new_height and new_width)"
        data = self.override(0, (batch, channels) + tuple(size) if size else None, own_batch=batch)
        self.check(len(data) == 4, f"the data top must have 4 axes (N, C, H, W), got {tuple(data)}")
        self.check(data[0] > 0, "batch_size must be set and positive", fix="set batch_size, or use --batch")
        n, _, h, w = data
        tops = [data, (n, 1, h, w), (n, 1, 1, 2)]
        self.note_origin(0, data, origin)
        self.note_origin(1, tops[1], "the data top (a label image per image)")
        self.note_origin(2, tops[2], "the data top (each image's height and width)")
        return tops

    def host_touches(self, run):
        """The list Caffe keeps (lines_, pairs of names), and OpenCV's one-time codec registry."""
        return self.list_touch("DenseImageData") + [
            touch.process("OpenCV codec registry", OPENCV_BYTES, "initialised by the first image decode")]


@register("ImageSegData", fork=V2)
class ImageSegData(_SegData):
    """deeplab-public-ver2's ImageSegDataLayer (image_seg_data_layer.cpp:29-153), on its
    ImageDimPrefetchingDataLayer (base_data_layer.cpp:130-174, .cu:28-56).

    The crop is crop_size, or crop_height x crop_width (:87-99). Setup allocates PREFETCH_COUNT
    = 5 batches (base_data_layer.hpp:71) of all three tops on the host and, in GPU mode, their
    device copies (base_data_layer.cpp:136-157; the host ones are then pinned). Forward COPIES the
    next batch into the tops, which are blobs of their own (:160-174 and .cu:28-56), unlike BVLC
    master's data layers, whose tops point into the batch. Host state: the prefetch thread with its
    RNG (internal_thread.cpp:41-47), the transformer's RNG (mirror, or a crop in TRAIN:
    data_transformer.cpp:730-739) and the shuffle's (image_seg_data_layer.cpp:60-66); each batch's
    three Blobs (base_data_layer.hpp:49-52, 77), the queues, the transformer, transformed_data_
    and transformed_label_ are Caffe's objects (protoaudit.memory.host).
    Measured in PSPNet's Caffe, which keeps this layer: tests/data/fork_oracle/pspnet."""

    PREFETCH_COUNT = V2Prefetching.PREFETCH_COUNT
    BATCH_BLOBS = V2Prefetching.BATCH_BLOBS
    batches_in_array = True  # Batch<Dtype> prefetch_[PREFETCH_COUNT] (base_data_layer.hpp:77)

    def prefetch(self):
        return self.PREFETCH_COUNT

    def crop_hw(self):
        t = self.lp.transform_param
        has = t.HasField
        self.check((not has("crop_size") and has("crop_height") and has("crop_width"))
                   or (not has("crop_height") and not has("crop_width")),
                   "give crop_size, or both crop_height and crop_width")
        if has("crop_height"):
            return (t.crop_height, t.crop_width) if t.crop_height and t.crop_width else None
        return super().crop_hw()

    def touches(self, run):
        n = self.PREFETCH_COUNT
        t = [touch.top(j, "data", "forward") for j in range(len(run.tops))]
        for name, shape in zip(("data_", "label_", "dim_"), run.tops):
            note = f"{n} x {'x'.join(map(str, shape))}"
            t.append(touch.buffer(f"prefetch[{n}].{name}", n * count(shape), "setup", per_sample=True,
                                  kind="prefetch", note=note))
            if run.mode == "gpu":
                t.append(touch.buffer(f"prefetch[{n}].{name} (host)", n * count(shape), "setup", per_sample=True,
                                      kind="prefetch", note=note + ", pinned host copies", device="host"))
        tp = self.lp.transform_param
        rngs = int(tp.mirror or (self.ctx.phase == "TRAIN" and tp.crop_size > 0)) + int(self.param().shuffle)
        t += [touch.host("prefetch thread", THREAD_BYTES, "boost::thread data, glibc's TLS vector"),
              touch.host("RNGs", THREAD_RNG_BYTES + rngs * RNG_BYTES,
                         f"the thread's and {rngs} more" if rngs else "the thread's")]
        return t + self.host_touches(run)


@register("ImageSegData", fork=V1)
class ImageSegDataV1(_SegData):
    """DeepLab v1's ImageSegDataLayer (image_seg_data_layer.cpp:28-124): crop_size only. Its
    2014 BasePrefetchingDataLayer holds ONE batch, prefetch_data_, prefetch_label_ and
    prefetch_data_dim_, on the host only (base_data_layer.cpp:81-105; the prefetch thread writes
    them through cpu pointers), and each forward copies it into the tops (.cu:27-46: the device
    copy in GPU mode is the tops' own), joins the thread and starts a new one."""

    def touches(self, run):
        t = [touch.top(j, "data", "forward") for j in range(len(run.tops))]
        t += [touch.buffer(f"prefetch_{name}", count(shape), "setup", per_sample=True, kind="prefetch",
                           device="host")
              for name, shape in zip(("data_", "label_", "data_dim_"), run.tops)]
        return t + self.host_touches(run)


@register("SegAccuracy", fork=ALL)
class SegAccuracy(Layer):
    """SegAccuracyLayer (v2 seg_accuracy_layer.cpp:14-40, v1 the same): the pixel accuracy of
    an (N, C, H, W) prediction against an (N, 1, H, W) label, into a (1, 1, 1, 3) top.

    It has CPU code only (no .cu; Layer's Forward_gpu runs Forward_cpu), so in GPU mode its top
    stays on the host. LayerSetUp sizes its confusion matrix, C rows of C unsigned longs (host)."""

    exact_bottoms = 2
    exact_tops = 1

    def reshape(self, bottoms):
        pred, label = (legacy_shape(self, shape) for shape in bottoms)
        self.check(pred[1] >= 1, "the prediction needs at least one channel (class)")
        self.check(pred[0] == label[0], f"the prediction {tuple(bottoms[0])} and the label {tuple(bottoms[1])} "
                   "must have the same number")
        self.check(label[1] == 1, f"the label {tuple(bottoms[1])} must have one channel")
        self.check(pred[2:] == label[2:], f"the prediction {tuple(bottoms[0])} and the label {tuple(bottoms[1])} "
                   "must have the same height and width",
                   fix="shrink the label to the score map (an Interp layer with shrink_factor), or zoom the scores")
        return [(1, 1, 1, 3)]

    def allow_force_backward(self, bottom_index):
        return False

    def touches(self, run):
        classes = legacy_shape(self, run.bottoms[0])[1]
        return [touch.buffer("confusion_matrix_", classes * classes, "setup", per_sample=False, itemsize=8,
                             device="host", note=f"{classes}x{classes} unsigned long"),
                touch.bottom(0, "data", "forward", device="host"), touch.bottom(1, "data", "forward", device="host"),
                touch.top(0, "data", "forward", device="host")]


@register("MatWrite", fork=ALL)
class MatWrite(Layer):
    """MatWriteLayer (mat_write_layer.cpp:11-60 in both forks): every period-th forward writes
    each bottom to a .mat file through its host copy; no tops, no buffers of its own."""

    min_bottoms = 1
    exact_tops = 0

    def reshape(self, bottoms):
        self.check(self.lp.mat_write_param.period > 0 if self.lp.mat_write_param.HasField("period") else True,
                   "period must be positive")
        return []

    def touches(self, run):
        return [touch.bottom(j, "data", "forward", device="host") for j in range(len(run.bottoms))]


@register("BatchNorm", fork=V2)
class BatchNormV2(BatchNorm):
    """deeplab-public-ver2's BatchNormLayer (batch_norm_layer.cpp, .cu), BVLC's of 2016 edited:
    use_global_stats and update_global_stats (:12-23), no x_norm_ at all (Reshape leaves it
    unshaped, :53), and a GPU backward that always writes the bottom's diff as the top's diff over
    temp_ (.cu:100-103), never the statistics' diffs. Its three statistics (C), (C), (1) keep the
    lr_mult the file gives (no forced 0, :24-38).

    Reshape fills spatial_sum_multiplier_ (H*W) and batch_sum_multiplier_ (N) with ones
    (:54-73); forward writes mean_ and variance_ (C), num_by_chans_ (N*C) and temp_ (the bottom's
    size). Forward_cpu ends copying into x_norm_ (:154), a Blob never shaped, whose mutable_cpu_data
    fails Blob's CHECK(data_): the layer runs in GPU mode only."""

    def param_shapes(self, bottoms):
        self.check(len(bottoms[0]) >= 1, "BatchNorm needs a bottom")
        channels = bottoms[0][1] if len(bottoms[0]) > 1 else 1
        return [(channels,), (channels,), (1,)]

    def param_specs(self):
        return self.lp.param

    def touches(self, run):
        if run.mode != "gpu":
            return [touch.param(k, "data", "setup") for k in range(run.num_params)] + [touch.stop(
                "forward", "DeepLab v2's BatchNorm cannot run in CPU mode: its Forward_cpu copies into x_norm_, "
                "which Reshape never shapes (batch_norm_layer.cpp:53, :154), and Caffe aborts at Blob's "
                "CHECK(data_) (observed: tests/data/fork_oracle/pspnet/README.md)")]
        shape = run.bottoms[0]
        n, c = shape[0], (shape[1] if len(shape) > 1 else 1)
        size = count(shape)
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        t += [touch.buffer("spatial_sum_multiplier_", size // (n * c), "setup", per_sample=False),
              touch.buffer("batch_sum_multiplier_", n, "setup", per_sample=True),
              touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward"),
              touch.buffer("mean_", c, "forward", per_sample=False),
              touch.buffer("variance_", c, "forward", per_sample=False),
              touch.buffer("num_by_chans_", n * c, "forward", per_sample=True),
              touch.buffer("temp_", size, "forward", per_sample=True),
              touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t


class _HoleAsDilation:
    """DeepLab v1's ConvolutionParameter read as BVLC's: `hole` (or hole_h, hole_w) is the
    dilation, which later Caffe named so (the same effective kernel, (k - 1) * hole + 1)."""

    __slots__ = ("_p",)

    def __init__(self, p):
        self._p = p

    def __getattr__(self, name):
        if name == "dilation":
            p = self._p
            return [p.hole_h, p.hole_w] if p.HasField("hole_h") else [p.hole]
        return getattr(self._p, name)

    def HasField(self, name):
        return self._p.HasField(name)


@register("Convolution", fork=V1)
class ConvolutionV1(Convolution):
    """DeepLab v1's ConvolutionLayer (conv_layer.cpp:12-148): BVLC's of 2014 plus `hole`.

    The output is (H + 2 pad - kernel_eff) / stride + 1 with kernel_eff = k + (k - 1)(hole - 1)
    (:123-126); col_buffer_ holds one image's im2col, C_in*kh*kw x H_out*W_out (:138-139), skipped
    for a 1x1 kernel with stride 1, no pad and no hole (:62-63), also in backward; Backward takes
    the weight diff and the bottom diff whenever either is needed (:198-232), as BVLC's does.
    In a cuDNN build every convolution is cuDNN's R1 layer (layer_factory.cpp:10-28), which
    uses no workspace and keeps the bias multiplier on the host."""

    @property
    def param(self):
        return _HoleAsDilation(self.lp.convolution_param)

    def uses_cudnn(self, run):
        return run.mode == "gpu" and run.engine == "cudnn" and self.param.engine != 1

    def touches(self, run):
        if not self.uses_cudnn(run):
            geo, channels = self._setup(run.bottoms)[:2]
            t = [x for x in super().touches(run) if x.name != "col_buffer_"]
            one_by_one = (all(k == 1 for k in geo.kernel) and all(s == 1 for s in geo.stride) and not any(geo.pad)
                          and all(d == 1 for d in geo.dilation))
            if not one_by_one:
                out = geo.conv_out(run.bottoms[0][geo.axis + 1:])
                note = "x".join(map(str, (channels,) + geo.kernel + out)) + " (C_in x kernel x output, one image)"
                t.append(touch.buffer("col_buffer_", channels * count(geo.kernel) * count(out), "forward",
                                      per_sample=False, note=note))
            return t
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        if self.param.bias_term:
            top_spatial = count(run.tops[0], 2)
            t.append(touch.buffer("bias_multiplier_", top_spatial, "setup", per_sample=False, device="host"))
        t += [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        t += [touch.top(j, "data", "forward") for j in range(len(run.tops))]
        t += [touch.top(j, "diff", "backward") for j in range(len(run.tops))]
        t += [touch.param(k, "diff", "backward") for k, down in enumerate(run.param_propagate_down) if down]
        t += [touch.bottom(j, "diff", "backward") for j, down in enumerate(run.propagate_down) if down]
        return t


@register("Pooling", fork=V1)
class PoolingV1(Pooling):
    """DeepLab v1's pooling: BVLC's of 2014 (the same shapes and max_idx_/rand_idx_); in a
    cuDNN build its factory gives every pooling without padding and with one top to cuDNN,
    MAX included (layer_factory.cpp:33-56), which keeps no argmax."""

    def cudnn_2015(self, run):
        p = self.lp.pooling_param
        return (run.mode == "gpu" and run.engine == "cudnn" and p.engine != 1
                and not (p.pad or p.pad_h or p.pad_w) and len(run.tops) == 1)


@register("SoftmaxWithLoss", fork=V1)
class SoftmaxWithLossV1(SoftmaxWithLoss):
    """DeepLab v1's SoftmaxWithLossLayer (softmax_loss_layer.cpp:13-57, .cu:11-22).

    Its inner softmax is always Caffe's SoftmaxLayer (loss_layers.hpp:738), run on the device in
    GPU mode: prob_ (the bottom's size), scale_ (N x H x W) and sum_multiplier_ (C, set on the
    host in Reshape, softmax_layer.cpp:15-20, read only by the CPU code). The loss itself is
    computed on the host (Forward_gpu and Backward_gpu call the CPU code), so the loss top lives
    on the host and no diff serves as device scratch; the inner softmax gets no loss weight (it
    is built from the file's LayerParameter, which gives none)."""

    def touches(self, run):
        n, c, h, w = legacy_shape(self, run.bottoms[0])
        t = [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward", device="host"),
             touch.buffer("sum_multiplier_", c, "setup", per_sample=False, device="host"),
             touch.buffer("prob_", n * c * h * w, "forward", per_sample=True),
             touch.buffer("scale_", n * h * w, "forward", per_sample=True),
             touch.top(0, "data", "forward", device="host")]
        if len(run.tops) > 1:
            t.append(touch.top(1, "data", "forward", device="host"))
        t.append(touch.top(0, "diff", "backward", device="host"))
        if run.propagate_down[0]:
            t.append(touch.bottom(0, "diff", "backward"))
        return t
