"""caffe-segnet's own layers (BN, Upsample, DenseImageData), as the fork's layer sources shape them.

The fork's layers read their bottoms through Blob's legacy accessors (num, channels, height, width:
a missing axis reads as 1, more than four axes is an error) and always make 4-axis tops.
"""
from . import touch
from .base import Layer, count, register
from ..read.datasets.examples import dense_example
from .data import FIRST_TOKENS, IMAGE_HEADER, OPENCV_BYTES, DatasetLayer

LEARN = 0  # BNParameter.BNMode


def legacy_nchw(layer, shape):
    """Blob::LegacyShape(0..3): the shape padded with 1s to four axes."""
    layer.check(len(shape) <= 4, f"{layer.lp.type} reads its bottom as (num, channels, height, width); "
                f"got {len(shape)} axes {tuple(shape)}")
    return tuple(shape) + (1,) * (4 - len(shape))


@register("BN", fork="segnet")
class BN(Layer):
    """BNLayer: per-channel normalisation with a learnt scale and shift of shape (1, C, 1, 1) each.

    In LEARN mode it may also output the batch mean and variance, each (1, C, 1, 1).
    """

    exact_bottoms = 1
    min_tops = 1

    @property
    def max_tops(self):
        learn = self.fork_param("bn_param").bn_mode == LEARN
        return 3 if learn else 1

    def reshape(self, bottoms):
        n, c, h, w = legacy_nchw(self, bottoms[0])
        return [(n, c, h, w)] + [(1, c, 1, 1)] * (len(self.lp.top) - 1)

    def param_shapes(self, bottoms):
        c = legacy_nchw(self, bottoms[0])[1]
        return [(1, c, 1, 1), (1, c, 1, 1)]

    def touches(self, run):
        """BNLayer's blobs, from bn_layer.cpp/.cu (N, C, H, W as LayerSetUp read them).

        Reshape (at setup) fills the ones of spatial_sum_multiplier_ (H*W) and
        batch_sum_multiplier_ (N), and zeroes their diffs on the host (the GPU code never reads
        those diffs, so they are no device memory). Forward squares and normalises through
        buffer_blob_ (bottom-sized) and the per-sample spatial_mean_/spatial_variance_ (N*C);
        LEARN also keeps batch_mean_/batch_variance_ (C) and x_norm_ (bottom-sized) and may copy
        them to tops 1 and 2. Backward always writes both param diffs and the bottom's diff (no
        propagate_down check); on the CPU it sums through spatial_variance_'s and spatial_mean_'s
        diffs (N*C each), where the GPU code uses their data. It reads only top 0's diff."""
        n, c, h, w = legacy_nchw(self, run.bottoms[0])
        learn = self.fork_param("bn_param").bn_mode == LEARN
        cpu = run.mode == "cpu"
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        t += [touch.buffer("spatial_sum_multiplier_", h * w, "setup", per_sample=False),
              touch.buffer("batch_sum_multiplier_", n, "setup", per_sample=True)]
        if cpu:
            t += [touch.buffer("spatial_sum_multiplier_.diff", h * w, "setup", per_sample=False),
                  touch.buffer("batch_sum_multiplier_.diff", n, "setup", per_sample=True)]
        size = n * c * h * w
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward"),
              touch.buffer("buffer_blob_", size, "forward", per_sample=True),
              touch.buffer("spatial_mean_", n * c, "forward", per_sample=True),
              touch.buffer("spatial_variance_", n * c, "forward", per_sample=True)]
        if learn:
            t += [touch.buffer("batch_mean_", c, "forward", per_sample=False),
                  touch.buffer("batch_variance_", c, "forward", per_sample=False),
                  touch.buffer("x_norm_", size, "forward", per_sample=True)]
            t += [touch.top(j, "data", "forward") for j in range(1, len(run.tops))]
        t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward"),
              touch.param(0, "diff", "backward"), touch.param(1, "diff", "backward")]
        if cpu:
            t += [touch.buffer("spatial_variance_.diff", n * c, "backward", per_sample=True),
                  touch.buffer("spatial_mean_.diff", n * c, "backward", per_sample=True)]
        return t


@register("Upsample", fork="segnet")
class Upsample(Layer):
    """UpsampleLayer: scatters bottom 0 through the pooling mask (bottom 1) into a larger map.

    The output size is upsample_h x upsample_w when both are given, else the bottom's size times
    scale (or scale_h/scale_w), minus 1 where pad_out_h/pad_out_w undo an odd size's ceil pooling.
    """

    exact_bottoms = 2
    exact_tops = 1

    @classmethod
    def sizes_named(cls, lp):
        p = getattr(lp, "upsample_param", None)
        return ((p.upsample_h, p.upsample_w),) if p is not None and p.upsample_h > 1 and p.upsample_w > 1 else ()

    def _output_size(self, height, width):
        p = self.fork_param("upsample_param")
        has = p.HasField
        self.check((has("upsample_h") and has("upsample_w"))
                   or (not has("scale") and has("scale_h") and has("scale_w"))
                   or (not has("scale_h") and not has("scale_w")),
                   "give upsample_h and upsample_w, else (deprecated) scale, or scale_h and scale_w")
        if has("upsample_h") and has("upsample_w"):
            self.check(p.upsample_h > 1 and p.upsample_w > 1, "upsample_h and upsample_w must be > 1")
            return p.upsample_h, p.upsample_w
        scale_h, scale_w = (p.scale_h, p.scale_w) if has("scale_h") else (p.scale, p.scale)
        self.check(scale_h > 1 and scale_w > 1, f"the scale must be > 1, got {scale_h}x{scale_w}")
        self.check(not p.pad_out_h or scale_h == 2, "pad_out_h needs scale_h == 2")
        self.check(not p.pad_out_w or scale_w == 2, "pad_out_w needs scale_w == 2")
        return height * scale_h - int(p.pad_out_h), width * scale_w - int(p.pad_out_w)

    def reshape(self, bottoms):
        data, mask = bottoms
        self.check(len(data) == 4 and len(mask) == 4,
                   f"the input {tuple(data)} and the mask {tuple(mask)} must have 4 axes (N, C, H, W)",
                   fix="bottom 1 is the mask top of a MAX Pooling layer")
        self.check(tuple(data) == tuple(mask),
                   f"the input {tuple(data)} and the mask {tuple(mask)} must have the same shape",
                   fix="feed the mask of the pooling layer whose output this decoder stage mirrors")
        height, width = self._output_size(data[2], data[3])
        return [(data[0], data[1], height, width)]

    def touches(self, run):
        """UpsampleLayer keeps no buffer: forward scatters into its top; backward, only when
        bottom 0 needs it, gathers top 0's diff into bottom 0's diff through the mask's data.
        The mask (bottom 1) never gets a diff."""
        t = [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"),
             touch.top(0, "data", "forward")]
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t


@register("DenseImageData", fork="segnet")
class DenseImageData(DatasetLayer):
    """DenseImageDataLayer (caffe-segnet's dense_image_data_layer.cpp): "image label-image" pairs
    (whitespace-separated, under root_folder); data (N, C, H, W) and label (N, 1, H, W).

    C is 3 with is_color (OpenCV's colour read), else 1. H x W is transform_param.crop_size, else
    crop_height x crop_width, else new_height x new_width, else the first pair's image size (its
    label image must have the same size: the layer checks it). `shuffle` and `rand_skip` pick
    another first pair at setup; the batch needs every image of one size anyway, so the list's first
    pair is as good. Without the images, --input gives the data top (the label follows it).

    Subclasses (other forks' versions) reuse `size_from_parameters` and `first_pair_size`.
    """

    exact_tops = 2

    def param(self):
        return self.fork_param("dense_image_data_param")

    def batch_size(self):
        return self.param().batch_size

    def channels(self):
        return 3 if self.param().is_color else 1

    def size_from_parameters(self):
        """(H, W) of the tops that the parameters fix (crop, crop_height/width, new size), else None."""
        p = self.param()
        self.check((p.new_height == 0) == (p.new_width == 0), "set new_height and new_width together")
        self.check((p.crop_height == 0) == (p.crop_width == 0), "set crop_height and crop_width together")
        if self.crop():
            return self.crop(), self.crop()
        if p.crop_height:
            return p.crop_height, p.crop_width
        if p.new_height:
            return p.new_height, p.new_width
        return None

    def first_names(self, list_path):
        root = self.param().root_folder
        return [root + name for name in FIRST_TOKENS(list_path, 2, "image list")]

    def first_pair_size(self, batch):
        """((H, W), origin) of the first pair's image after new_height/new_width, its label image
        checked to match; None when the images are not on disk and the parameters fix the size."""
        p = self.param()
        fixed = self.size_from_parameters()
        known = dense_example(p.source) if self.files.find(p.source) is None and p.is_color else None
        if known is not None:  # SegNet's tutorial's lists, named where its nets name them
            self.example = known
            h, w = known.size
            size = (p.new_height, p.new_width) if p.new_height else known.size
            self.assume_known(p.source, f"by its path it is {known.made_by}: {known.pairs} pairs of {w}x{h} colour "
                                        "images and grey label images", [(self.lp.top[0], (batch, 3, *size))])
            return size, f"assumed: {known.made_by}, {w}x{h}"
        read = self.first_image(p.source, self.first_names, batch, self.channels(), fixed)
        if read is None:
            return None
        size, origin, names = read
        if p.new_height:
            return (p.new_height, p.new_width), origin + f", resized to {p.new_width}x{p.new_height}"
        label = self.files.find(names[1])
        if label is not None:
            h, w, _, _ = self.files.read(IMAGE_HEADER, label.path, names[1], what=f"label image '{names[1]}'")
            self.check((h, w) == size, f"the label image '{names[1]}' is {w}x{h} but its image is "
                       f"{size[1]}x{size[0]} (Caffe: 'Input and label image heights and widths must match')")
        return size, origin

    def reshape(self, bottoms):
        batch = self.batch_size()
        self.decodes = True
        size = None if self.declared() else self.first_pair_size(batch)
        fixed = self.size_from_parameters()
        origin = "the layer's parameters (is_color and its crop or new size)"
        if size is not None:
            size, origin = size
        own = (batch, self.channels()) + tuple(fixed or size) if (fixed or size) else None
        if size is not None and fixed:
            origin += f"; cropped to {fixed[1]}x{fixed[0]}"
        data = self.override(0, own)
        self.check(len(data) == 4, f"the data top must have 4 axes (N, C, H, W), got {data}")
        self.check(data[0] > 0, "batch_size must be set and positive", fix="set batch_size, or use --batch")
        label = (data[0], 1, data[2], data[3])
        if self.lp.top[1] in self.ctx.inputs:
            label = self.override(1, label)
        self.note_origin(0, data, origin)
        self.note_origin(1, label, "the data top (a label image per image)")
        return [data, label]

    def touches(self, run):
        """The fork's BasePrefetchingDataLayer holds ONE prefetch batch (prefetch_data_ and
        prefetch_label_, the tops' sizes, data_layers.hpp:76-77), allocated on the host at setup
        before its reader thread starts (base_data_layer.cpp:38-41), then copied into the tops
        each forward: from the host into the tops' host memory (cpp:59-80) or, in GPU mode, into
        their device memory (base_data_layer.cu:8-26 copies from prefetch_data_.cpu_data(); the
        layer has no .cu of its own). So on the device it holds its tops alone, and the batch is
        host memory in either mode (malloc'd, syncedmem.hpp:24-27; caffe-enet's 2017 SyncedMemory
        pins it, the same base otherwise). Its host memory is also the list (lines_) and OpenCV's
        one-time codec registry; the fork's other small objects are not measured."""
        t = super().touches(run) + [
            touch.buffer(f"prefetch[1].{self.lp.top[j]}", count(shape), "setup", per_sample=True, kind="prefetch",
                         device="host")
            for j, shape in enumerate(run.tops)]
        t += self.list_touch("DenseImageData")
        return t + [touch.process("OpenCV codec registry", OPENCV_BYTES, "initialised by the first image decode")]
