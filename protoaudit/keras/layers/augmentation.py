"""Image augmentation layers that keras.layers added after the first ones (preprocessing.py), tf_keras's
RandomHeight and RandomWidth, and Keras 3's Pipeline of such layers."""
import math
import struct

from ...errors import InputError
from .base import KerasLayer, layer_class, make_layer, register


# Keras 3's image_preprocessing layers (each module's compute_output_shape returns its input's). Their
# step rule is rules.Reshaping's, not the Identity line's: in training each makes a new tensor
# (transform_images casts and transforms the batch), which the next layer reads.
AUGMENTATIONS = ("RandomColorDegeneration", "RandomPerspective", "RandomShear", "RandomElasticTransform", "AugMix",
                 "CutMix", "MixUp", "RandAugment", "ContrastLimitedAdaptiveHistogramEqualization")


@register(*AUGMENTATIONS[:-1])
class FloatImage(KerasLayer):
    """The input's shape; in training each casts the images to its compute dtype (a uint8 batch
    comes out float32)."""

    def output_specs(self, inputs):
        return [self.spec(self.one(inputs).shape)._replace(dtype=self.compute_dtype)]


@register(AUGMENTATIONS[-1])
class CLAHE(KerasLayer):
    """clahe.py: the input's shape, cast back to the input's own dtype (uint8 stays uint8)."""

    def output_specs(self, inputs):
        x = self.one(inputs)
        return [self.spec(x.shape)._replace(dtype=x.dtype)]


def _f32(value):
    return struct.unpack("f", struct.pack("f", value))[0]


@register("RandomHeight", "RandomWidth")
class RandomSize(KerasLayer):
    """tf_keras: in training the height (width) is `int(uniform(1 + lower, 1 + upper) * size)` in
    float32, drawn per batch, and compute_output_shape leaves it None. A step's memory needs one
    number, so this takes the largest a draw can give: the largest int below (1 + upper) * size (the
    draw never reaches its upper bound), or that product where lower == upper. The output is cast
    to the compute dtype."""

    def output_specs(self, inputs):
        x = self.one(inputs)
        if len(x.shape) not in (3, 4):
            raise self.error(f"expects images (batch, height, width, channels), got {x.shape}")
        factor = self.get("factor")
        if isinstance(factor, (list, tuple)) and len(factor) == 2:
            lower, upper = factor
        else:
            lower, upper = (-factor if _number(factor) else None), factor
        if not (_number(lower) and _number(upper)) or not -1 <= lower <= upper:
            raise self.error(f"factor {factor!r} is not a number or (lower, upper) with -1 <= lower <= upper")
        axis = len(x.shape) - (3 if self.class_name == "RandomHeight" else 2)
        product = _f32(_f32(1.0 + upper) * x.shape[axis])
        size = math.floor(product) if lower == upper else math.ceil(product) - 1
        shape = list(x.shape)
        shape[axis] = size
        return [self.spec(shape)._replace(dtype=self.compute_dtype)]


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


PREPROCESSING_MODULES = frozenset({"preprocessing", "augmentation", "audio"})


@register("Pipeline")
class Pipeline(KerasLayer):
    """keras.layers.Pipeline: its config's layers called in turn, each on the last one's output. An
    inner layer without a shape rule here is refused: a Pipeline is audited only whole."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        entries = self.config.get("layers")
        if not isinstance(entries, list) or not entries:
            raise self.error("its config has no list of layers")
        self.inner = []
        for k, entry in enumerate(entries):
            config = entry.get("config") if isinstance(entry, dict) else None
            name = config.get("name") if isinstance(config, dict) else None
            if not isinstance(config, dict) or layer_class(entry) is None:
                raise InputError(f"its layer {name or k!r} has class {entry.get('class_name') if config else None!r}, "
                                 "which is not a built-in Keras layer with a shape rule here (custom code is "
                                 "never run; a Pipeline is audited only when every layer in it is)", layer=self.path)
            self.inner.append(make_layer(entry, trainable=self.trainable, policy=self.policy, flavour=self.flavour,
                                         path=f"{self.path}/{name or k}"))

    def calls(self, inputs):
        """(inner layer, its input specs, its output specs) in turn."""
        out = []
        for layer in self.inner:
            outputs = layer.output_specs(inputs)
            out.append((layer, inputs, outputs))
            inputs = outputs
        return out

    def output_specs(self, inputs):
        return self.calls(inputs)[-1][2]

    def weights(self, inputs):
        return [w._replace(name=f"{layer.name}/{w.name}") for layer, specs, _ in self.calls(inputs)
                for w in layer.weights(specs)]

    def not_preprocessing(self):
        """The first inner layer that is not a preprocessing or augmentation layer, or None."""
        for layer in self.inner:
            if type(layer).__module__.rsplit(".", 1)[-1] not in PREPROCESSING_MODULES:
                return layer
        return None
