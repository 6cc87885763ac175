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


@register("CategoryEncoding")
class CategoryEncoding(KerasLayer):
    """Integers to num_tokens-wide vectors: one_hot adds an axis unless the last is 1; multi_hot
    and count replace the last axis."""

    def output_specs(self, inputs):
        shape = self.one(inputs).shape
        tokens = self.get("num_tokens")
        if self.get("output_mode", "multi_hot") == "one_hot" and (shape[-1] != 1 or len(shape) == 1):
            return [self.spec(shape + (tokens,))]
        return [self.spec(shape[:-1] + (tokens,))]


@register("Hashing", "IntegerLookup", "StringLookup", "Discretization")
class ToIndices(KerasLayer):
    """Values to int64 indices, one per value (output_mode "int"); the other modes' widths depend on
    a vocabulary the config may only name, so they are declared instead."""

    def output_specs(self, inputs):
        mode = self.get("output_mode", "int")
        if mode != "int":
            raise self.error(f"output_mode {mode!r}: its width depends on the vocabulary",
                             fix=f"declare its output shape, e.g. --input {self.name}=32x100")
        return [self.spec(self.one(inputs).shape)._replace(dtype="int64")]


@register("TextVectorization")
class TextVectorization(KerasLayer):
    """Strings to token indices: with output_mode "int", (batch, output_sequence_length) int64 (without
    a length, each batch's longest text decides, so it is declared instead); the other modes give
    (batch, vocabulary size), which the config fixes only with pad_to_max_tokens (max_tokens wide).
    The vocabulary is a lookup table, not a variable."""

    def output_specs(self, inputs):
        batch = self.one(inputs).shape[0]
        if self.get("output_mode", "int") == "int":
            length = self.get("output_sequence_length")
            if not isinstance(length, int) or isinstance(length, bool):
                raise self.error("has no output_sequence_length: each batch's longest text sets its length",
                                 fix=f"declare its output shape, e.g. --input {self.name}={batch}x200")
            return [self.spec((batch, length))._replace(dtype="int64")]
        tokens = self.get("max_tokens")
        if not self.get("pad_to_max_tokens", False) or not isinstance(tokens, int):
            raise self.error(f"output_mode {self.get('output_mode')!r} without pad_to_max_tokens: its width is "
                             "the vocabulary's size", fix=f"declare its output shape, e.g. --input {self.name}={batch}x10000")
        return [self.spec((batch, tokens))]


@register("HashedCrossing")
class HashedCrossing(KerasLayer):
    """Two or more equal (batch,) or (batch, 1) feature columns crossed into bins: "int" gives the
    first input's shape in int64 (the dtype Keras defaults to), "one_hot" num_bins floats a row."""

    def output_specs(self, inputs):
        if len(inputs) < 2 or len({s.shape for s in inputs}) != 1 or len(inputs[0].shape) > 2:
            raise self.error("crosses two or more equal (batch,) or (batch, 1) inputs, "
                             f"got {[s.shape for s in inputs]}")
        shape = inputs[0].shape
        if self.get("output_mode", "int") == "int":
            dtype = self.policy if self.policy.startswith(("int", "uint")) else "int64"
            return [self.spec(shape)._replace(dtype=dtype)]
        bins = self.get("num_bins")
        wide = shape + (bins,) if shape[-1] != 1 or len(shape) == 1 else shape[:-1] + (bins,)
        return [self.spec(wide)._replace(dtype=self.compute_dtype)]
