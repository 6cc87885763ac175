"""The Keras layer registry: one class per layer family, holding its shape rule and what build() creates.

A class is created once per layer of a model (a shared layer once), with the layer's own config; it
answers Keras's `compute_output_shape` with the batch concrete, and the variables `build()` makes
from the layer's first call. Class names are registered as Keras writes them in configs.
"""
import math
from typing import NamedTuple

from ...errors import InputError

REGISTRY = {}
MAX_ELEMENTS = 2 ** 40  # no tensor of a trainable model is this large; a config that says so is wrong
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
               "int32": 4, "int64": 8, "uint32": 4, "uint64": 8, "bool": 1, "string": 8, "complex64": 8}
FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})


class Spec(NamedTuple):
    shape: tuple  # batch first, every dim an int
    dtype: str


class Weight(NamedTuple):
    name: str
    shape: tuple
    dtype: str
    trainable: bool


def elements(shape):
    return math.prod(shape)


def nbytes(thing):
    """Bytes of a Spec or a Weight."""
    return elements(thing.shape) * DTYPE_BYTES.get(thing.dtype, 4)


def register(*class_names):
    """Class decorator: the class names (as in a config's "class_name") the class implements."""

    def deco(cls):
        for name in class_names:
            if name in REGISTRY:
                raise RuntimeError(f"Keras layer {name} registered twice")
            REGISTRY[name] = cls
        cls.class_names = class_names
        return cls

    return deco


def policy_name(dtype):
    """The dtype policy's name in a layer's "dtype" field (a string, or Keras 2's Policy / Keras 3's
    DTypePolicy dict); None where the layer inherits its model's."""
    if isinstance(dtype, str):
        return dtype
    if isinstance(dtype, dict):
        config = dtype.get("config")
        if isinstance(config, dict) and isinstance(config.get("name"), str):
            return config["name"]
    return None


def policy_dtypes(name):
    """(compute dtype, variable dtype) of a policy: mixed_float16 computes in float16 on float32 variables."""
    name = name or "float32"
    if name.startswith("mixed_"):
        return name[len("mixed_"):], "float32"
    if name.startswith(("int", "uint")) or name not in DTYPE_BYTES:
        return "float32", "float32"
    return name, name


class KerasLayer:
    """One layer: its config and the shapes it makes. Subclasses override output_specs and weights."""

    class_names = ()

    def __init__(self, class_name, config, *, trainable=True, policy=None, flavour="tf_keras", path=""):
        self.class_name = class_name
        self.config = config
        self.name = config.get("name") or path.rsplit("/", 1)[-1]
        self.trainable = bool(trainable) and config.get("trainable", True) is not False
        self.policy = policy_name(config.get("dtype")) or policy or "float32"
        self.compute_dtype, self.variable_dtype = policy_dtypes(self.policy)
        self.flavour = flavour
        self.path = path

    def __repr__(self):
        return f"{self.class_name}({self.name!r})"

    # -- what subclasses answer -------------------------------------------------------------------
    def output_specs(self, inputs):
        """Keras's compute_output_shape, batch concrete: by default the input's shape."""
        return [self.spec(self.one(inputs).shape, inputs)]

    def weights(self, inputs):
        """The variables build() creates, from the first call's inputs."""
        return []

    # -- helpers ------------------------------------------------------------------------------------
    def get(self, key, default=None):
        value = self.config.get(key, default)
        return default if value is None else value

    def spec(self, shape, inputs=()):
        """An output Spec in the compute dtype (non-float inputs pass their dtype through, as Keras
        does not cast them)."""
        dtype = self.compute_dtype
        if inputs and all(s.dtype not in FLOATS for s in inputs):
            dtype = inputs[0].dtype
        return Spec(tuple(int(d) for d in shape), dtype)

    def weight(self, name, shape, *, trainable=True, dtype=None):
        return Weight(name, tuple(int(d) for d in shape), dtype or self.variable_dtype,
                      self.trainable and trainable)

    def one(self, inputs):
        if len(inputs) != 1:
            raise self.error(f"takes one input, got {len(inputs)}")
        return inputs[0]

    def ints(self, key, n, default=None):
        """A config value Keras accepts as an int or an n-tuple, as an n-tuple of ints."""
        value = self.get(key, default)
        if isinstance(value, int):
            return (value,) * n
        if isinstance(value, (list, tuple)) and len(value) == n and all(isinstance(v, int) for v in value):
            return tuple(value)
        raise self.error(f"'{key}' is {value!r}, not an int or {n} ints")

    def channels_last(self):
        return self.get("data_format", "channels_last") != "channels_first"

    def axis_of(self, axis, rank):
        if not isinstance(axis, int) or not -rank <= axis < rank:
            raise self.error(f"axis {axis!r} is out of range for a rank-{rank} input")
        return axis % rank

    def error(self, message, fix=None):
        return InputError(message, layer=self.path or self.name, fix=fix)


def conv_output_length(length, kernel, padding, stride, dilation=1):
    """Keras's conv_utils.conv_output_length."""
    dilated = kernel + (kernel - 1) * (dilation - 1)
    if padding in ("same", "causal"):
        out = length
    elif padding == "valid":
        out = length - dilated + 1
    elif padding == "full":
        out = length + dilated - 1
    else:
        raise ValueError(f"padding {padding!r}")
    return (out + stride - 1) // stride


def deconv_output_length(length, kernel, padding, output_padding, stride, dilation=1):
    """Keras's conv_utils.deconv_output_length."""
    kernel = kernel + (kernel - 1) * (dilation - 1)
    if output_padding is None:
        if padding == "valid":
            return length * stride + max(kernel - stride, 0)
        if padding == "full":
            return length * stride - (stride + kernel - 2)
        if padding == "same":
            return length * stride
        raise ValueError(f"padding {padding!r}")
    pad = {"same": kernel // 2, "valid": 0, "full": kernel - 1}[padding]
    return (length - 1) * stride + kernel - 2 * pad + output_padding


NEVER_RUN = frozenset({"Lambda", "TFOpLambda", "SlicingOpLambda"})


def builtin(entry):
    """Whether a layer entry names a class Keras itself ships (not user code registered under a name)."""
    module = entry.get("module")
    registered = entry.get("registered_name")
    if isinstance(module, str) and module.split(".")[0] not in ("keras", "tf_keras", "tensorflow"):
        return False
    return registered in (None, entry.get("class_name")) or (
        isinstance(registered, str) and registered.split(">")[0] in ("keras", "keras.layers", "tf_keras"))


def layer_class(entry):
    """The registered class of a layer entry, or None (unknown, custom or Lambda: never run)."""
    name = entry.get("class_name")
    if name in NEVER_RUN or not builtin(entry):
        return None
    return REGISTRY.get(name)


def make_layer(entry, *, trainable=True, policy=None, flavour="tf_keras", path=""):
    """The KerasLayer of a config entry {"class_name", "config"}; InputError for one never run."""
    if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
        raise InputError("the layer has no config dict", layer=path)
    cls = layer_class(entry)
    if cls is None:
        raise unknown_layer(entry, path)
    return cls(entry["class_name"], entry["config"], trainable=trainable, policy=policy, flavour=flavour,
               path=path)


def unknown_layer(entry, path):
    name = entry.get("class_name")
    if name in NEVER_RUN:
        why = f"is a {name}: its Python code is never run"
    elif name in REGISTRY:
        why = f"is a custom class registered as {entry.get('registered_name')!r}: user code is never run"
    else:
        why = f"has class {name!r}, which is not a built-in Keras layer (custom code is never run)"
    return InputError(why, layer=path,
                      fix=f"declare its output shape, e.g. --input {path.rsplit('/', 1)[-1]}=32x10")
