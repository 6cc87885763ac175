"""Data sources: Input, DummyData, MemoryData and the dataset readers (Data, ImageData, ...).

A dataset reader's image size often lives in the dataset, which protoaudit never opens: then the
layer asks for `--input`. What the prototxt does state (batch_size, crop_size, new_height/new_width,
is_color) is used, and `--batch` replaces the batch size.
"""
from .base import Layer, register


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
                shape = self.override(0, (batch,) + image if image else None)
                if shape is None:
                    self.need_input(f"{self.lp.type} layer: its image size is in the dataset")
                batch = shape[0] if shape else batch
            else:
                shape = self.override(j, self.label_shape(batch))
            tops.append(shape)
        return tops

    def label_shape(self, batch):
        return (batch,)

    def crop(self):
        return self.lp.transform_param.crop_size


@register("Data")
class Data(DataSource):
    min_tops = 1
    max_tops = 2

    def batch_size(self):
        return self.lp.data_param.batch_size


@register("ImageData")
class ImageData(DataSource):
    min_tops = 1
    max_tops = 2

    def batch_size(self):
        return self.lp.image_data_param.batch_size

    def image_shape(self):
        p = self.lp.image_data_param
        channels = 3 if p.is_color else 1
        if self.crop():
            return (channels, self.crop(), self.crop())
        if p.new_height and p.new_width:
            return (channels, p.new_height, p.new_width)
        return None


@register("WindowData")
class WindowData(DataSource):
    exact_tops = 2

    def batch_size(self):
        return self.lp.window_data_param.batch_size

    def image_shape(self):
        crop = self.lp.window_data_param.crop_size or self.crop()
        self.check(crop > 0, "WindowData needs crop_size")
        return (3, crop, crop)


@register("HDF5Data")
class HDF5Data(DataSource):
    min_tops = 1

    def reshape(self, bottoms):
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
        self.check(p.batch_size > 0 and p.channels > 0 and p.height > 0 and p.width > 0,
                   "MemoryData needs batch_size, channels, height and width")
        data = self.override(0, (p.batch_size, p.channels, p.height, p.width))
        label = self.override(1, (data[0], 1, 1, 1))
        return [data, label]


def blob_shapes(layer, shapes, legacy, what):
    """Shapes given as 1 or N BlobShapes (or the legacy num/channels/height/width lists)."""
    tops = len(layer.lp.top)
    if shapes:
        layer.check(len(shapes) in (1, tops), f"{what} must give 1 shape or one per top ({tops})")
        dims = [tuple(s.dim) for s in shapes]
    elif legacy is not None and any(legacy):
        num, channels, height, width = legacy
        n = max(len(num), len(channels), len(height), len(width))
        layer.check(all(len(v) in (1, n) for v in legacy) and n in (1, tops),
                    f"{what}: num, channels, height and width must each be given 1 or {tops} times")
        pick = lambda values, i: values[0] if len(values) == 1 else values[i]  # noqa: E731
        dims = [(pick(num, i), pick(channels, i), pick(height, i), pick(width, i)) for i in range(n)]
    else:
        layer.fail(f"{what} gives no shape")
    return [dims[0] if len(dims) == 1 else dims[i] for i in range(tops)]


@register("Input")
class Input(DataSource):
    min_tops = 1

    def reshape(self, bottoms):
        shapes = blob_shapes(self, self.lp.input_param.shape, None, "input_param")
        return [self.override(j, shape) for j, shape in enumerate(shapes)]


@register("DummyData")
class DummyData(DataSource):
    min_tops = 1

    def reshape(self, bottoms):
        p = self.lp.dummy_data_param
        legacy = (list(p.num), list(p.channels), list(p.height), list(p.width))
        shapes = blob_shapes(self, p.shape, legacy, "dummy_data_param")
        return [self.override(j, shape) for j, shape in enumerate(shapes)]


@register("Python")
class Python(Layer):
    """A Python layer's shapes are set by code protoaudit never imports: the user declares them."""

    def reshape(self, bottoms):
        tops = []
        for j, _ in enumerate(self.lp.top):
            shape = self.override(j, None) if self.lp.top[j] in self.ctx.inputs else None
            if shape is None:
                module = self.lp.python_param.module
                self.fail(
                    f"Python layer ({module}.{self.lp.python_param.layer}): its top shapes are set by "
                    "Python code, which protoaudit never runs",
                    fix="declare every top: " + ", ".join(f"--input {t}=NxCxHxW" for t in self.lp.top),
                )
            tops.append(shape)
        return tops
