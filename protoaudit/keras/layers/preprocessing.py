"""Preprocessing layers that sit inside models: most keep the shape; Resizing and the crops set the
image size; Normalization keeps its adapted mean and variance (and a count) as variables."""
from .base import KerasLayer, register


@register("Rescaling", "RandomFlip", "RandomRotation", "RandomZoom", "RandomContrast", "RandomTranslation",
          "RandomBrightness", "RandomGrayscale", "RandomSaturation", "RandomHue", "RandomSharpness",
          "RandomColorJitter", "RandomPosterization", "RandomInvert", "RandomErasing", "RandomGaussianBlur",
          "AutoContrast", "Solarization", "Equalization", "MaxNumBoundingBoxes")
class SameShape(KerasLayer):
    pass


@register("Resizing", "CenterCrop", "RandomCrop")
class ImageSize(KerasLayer):
    """(batch, height, width, channels) or channels first, at the configured height and width."""

    def output_specs(self, inputs):
        x = self.one(inputs)
        size = (self.get("height"), self.get("width"))
        if len(x.shape) == 3:  # one image
            return [self.spec(size + x.shape[-1:] if self.channels_last() else x.shape[:1] + size, inputs)]
        if len(x.shape) != 4:
            raise self.error(f"expects images (batch, height, width, channels), got {x.shape}")
        shape = x.shape[:1] + size + x.shape[-1:] if self.channels_last() else x.shape[:2] + size
        return [self.spec(shape, inputs)]


@register("Normalization")
class Normalization(KerasLayer):
    """Adapted mean and variance over the kept axes, and an int64 count; none when mean and variance
    are given in the config (they are constants then)."""

    def weights(self, inputs):
        if self.config.get("mean") is not None:
            return []
        shape = self.one(inputs).shape
        axis = self.config.get("axis", -1)
        axes = [] if axis is None else list(axis) if isinstance(axis, (list, tuple)) else [axis]
        kept = tuple(shape[self.axis_of(a, len(shape))] for a in sorted(a % len(shape) for a in axes))
        dtype = self.compute_dtype if self.flavour == "tf_keras" else self.variable_dtype
        return [self.weight("mean", kept, trainable=False, dtype=dtype),
                self.weight("variance", kept, trainable=False, dtype=dtype),
                self.weight("count", (), trainable=False, dtype="int64")]
