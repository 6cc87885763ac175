"""Data sources: Input, DummyData, MemoryData and the dataset readers (Data, ImageData, ...).

A dataset reader's image size often lives in the dataset, which protoaudit never opens: then the
layer asks for `--input`. What the prototxt does state (batch_size, crop_size, new_height/new_width,
is_color) is used, and `--batch` replaces the batch size.
"""
from . import touch
from .base import Layer, count, register


class DataSource(Layer):
    exact_bottoms = 0
    data_source = True

    def batch_size(self):
        raise NotImplementedError

    def image_shape(self):
        """(C, H, W) of the data top when the prototxt fixes it, else None."""
        return None

    def reshape(self, bottoms):
        batch = self.batch_size()
        tops = []
        for j, _ in enumerate(self.lp.top):
            if j == 0:
                image = self.image_shape()
                shape = self.override(0, (batch,) + image if image else None, own_batch=batch)
                if shape is None:
                    # the label follows the data's batch: only the data top needs declaring
                    self.need_input(f"{self.lp.type} layer: its image size is in the dataset", self.lp.top[:1])
                batch = shape[0] if shape else batch
            else:
                shape = self.override(j, self.label_shape(batch))
            tops.append(shape)
        return tops

    def label_shape(self, batch):
        return (batch,)

    def crop(self):
        return self.lp.transform_param.crop_size


class Prefetching(DataSource):
    """BasePrefetchingDataLayer: a reader thread fills `data_param.prefetch` batches (default 4) of
    every top at setup, on the device in GPU mode (with host copies, which do not count there)."""

    def touches(self, run):
        t = super().touches(run)
        batches = self.lp.data_param.prefetch
        return t + [touch.buffer(f"prefetch[{batches}].{self.lp.top[j]}", batches * count(shape), "setup",
                                 per_sample=True, kind="prefetch") for j, shape in enumerate(run.tops)]


@register("Data")
class Data(Prefetching):
    min_tops = 1
    max_tops = 2

    def batch_size(self):
        return self.lp.data_param.batch_size


@register("ImageData")
class ImageData(Prefetching):
    """Images decoded in colour (3 channels) or grey (1), resized to new_height x new_width when
    given, then cropped to crop_size; the label top is always there."""

    exact_tops = 2

    def batch_size(self):
        batch = self.lp.image_data_param.batch_size
        self.check(batch > 0, "ImageData needs a positive batch_size")
        return batch

    def image_shape(self):
        p = self.lp.image_data_param
        self.check((p.new_height == 0) == (p.new_width == 0), "new_height and new_width must be set together")
        channels = 3 if p.is_color else 1
        crop = self.crop()
        if p.new_height:
            self.check(crop <= min(p.new_height, p.new_width),
                       f"crop_size {crop} is larger than the resized image {p.new_height}x{p.new_width}")
        if crop:
            return (channels, crop, crop)
        if p.new_height:
            return (channels, p.new_height, p.new_width)
        return None


@register("WindowData")
class WindowData(Prefetching):
    """Windows warped to transform_param's crop_size. The channel count is the window file's, and
    the images are always decoded in colour, so a working window file says 3."""

    exact_tops = 2

    def batch_size(self):
        return self.lp.window_data_param.batch_size

    def image_shape(self):
        crop = self.crop()
        self.check(crop > 0, "WindowData needs transform_param { crop_size } (the window size)")
        return (3, crop, crop)


@register("HDF5Data")
class HDF5Data(DataSource):
    """Every top is a dataset of the HDF5 files (batch_size rows of it), so its shape is the user's."""

    min_tops = 1

    def reshape(self, bottoms):
        self.check(not self.lp.HasField("transform_param"), "HDF5Data does not transform data",
                   fix="remove transform_param")
        tops = []
        for j, name in enumerate(self.lp.top):
            shape = self.override(j, None)
            if shape is None:
                self.need_input("HDF5Data layer: every top's shape is in the HDF5 files")
            tops.append(shape)
        return tops


@register("MemoryData")
class MemoryData(DataSource):
    exact_tops = 2

    def reshape(self, bottoms):
        p = self.lp.memory_data_param
        self.check(p.batch_size * p.channels * p.height * p.width > 0,
                   "batch_size, channels, height and width must be specified and positive in memory_data_param")
        data = self.override(0, (p.batch_size, p.channels, p.height, p.width))
        label = self.override(1, (data[0],))
        return [data, label]


def once_or_per_top(layer, values, what):
    """Caffe's rule for shape lists: one entry for every top, or one per top; the entry for each top."""
    tops = len(layer.lp.top)
    layer.check(len(values) in (1, tops), f"give {what} once, or once per top ({tops}); it is given "
                f"{len(values)} times")
    return [values[0] if len(values) == 1 else values[j] for j in range(tops)]


@register("Input")
class Input(DataSource):
    """Shapes from input_param (once, or once per top); with none, the user's --input."""

    min_tops = 1

    def reshape(self, bottoms):
        shapes = self.lp.input_param.shape
        if not shapes:
            tops = [self.override(j, None) for j in range(len(self.lp.top))]
            if None in tops:
                self.need_input("Input layer without input_param { shape }")
            return tops
        return [self.override(j, tuple(s.dim)) for j, s in enumerate(once_or_per_top(self, shapes, "shape"))]

    def touches(self, run):
        """Input's forward does nothing: its tops are allocated when a consumer first reads them."""
        return []


@register("DummyData")
class DummyData(DataSource):
    """Shapes from `shape` (once, or once per top), or from the legacy num/channels/height/width
    lists (each once, or once per top), which make 4-axis tops."""

    min_tops = 1

    def reshape(self, bottoms):
        p = self.lp.dummy_data_param
        fillers = len(p.data_filler)
        self.check(fillers in (0, 1, len(self.lp.top)),
                   f"give 0, 1 or one data_filler per top ({len(self.lp.top)}); {fillers} are given")
        legacy = [list(p.num), list(p.channels), list(p.height), list(p.width)]
        if any(legacy):
            self.check(not p.shape, "dummy_data_param gives both shape and the legacy num/channels/height/width")
            columns = [once_or_per_top(self, values, name)
                       for values, name in zip(legacy, ("num", "channels", "height", "width"))]
            shapes = list(zip(*columns))
        else:
            shapes = [tuple(s.dim) for s in once_or_per_top(self, p.shape, "shape")]
        return [self.override(j, shape) for j, shape in enumerate(shapes)]

    def touches(self, run):
        """LayerSetUp runs one forward that fills only the tops with a constant filler (the
        default); the others are first filled by the first forward."""
        fillers = self.lp.dummy_data_param.data_filler
        constant = [(fillers[0] if len(fillers) == 1 else fillers[j]).type == "constant" if fillers else True
                    for j in range(len(run.tops))]
        return [touch.top(j, "data", "setup" if constant[j] else "forward") for j in range(len(run.tops))]


class Declared(Layer):
    """A layer whose top shapes protoaudit cannot compute: the user declares every top with --input.
    Its tops and their diffs are counted; whatever its own code allocates is a gap, reported."""

    gap = "its own buffers (protoaudit cannot see into it)"

    def reshape(self, bottoms):
        missing = [t for t in self.lp.top if t not in self.ctx.inputs]
        if missing:
            self.need_input(self.why(self.lp), missing)
        return [self.override(j, None) for j in range(len(self.lp.top))]

    @classmethod
    def why(cls, lp):
        """Why the user must declare the layer's tops."""
        return f"unknown layer type '{lp.type}'"

    @classmethod
    def asks(cls, lp):
        """Whether the user must declare this layer's tops (else it knows their shapes)."""
        return True
