"""The Keras layer registry: one class per layer family, holding its shape rule and what build() creates.

A class is created once per layer of a model (a shared layer once), with the layer's own config; it
answers Keras's `compute_output_shape` with the batch concrete, and the variables `build()` makes
from the layer's first call. Class names are registered as Keras writes them in configs.
"""
import math
from typing import NamedTuple

from ...errors import InputError

REGISTRY = {}
OPS = {}  # Keras 3 operations (keras.ops) a Functional model may hold as nodes: class name -> class
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


def register_op(*class_names):
    """Class decorator: Keras 3 operation class names (module keras.src.ops...) the class implements."""

    def deco(cls):
        for name in class_names:
            OPS[name] = cls
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
    call_options = {}  # the current call's constant keyword arguments (return_attention_scores=True, ...)

    @staticmethod
    def readable(config):
        """Whether a config of this class can be read (False: it holds code, which is never run)."""
        return True

    def __init__(self, class_name, config, *, trainable=True, policy=None, flavour="tf_keras", path=""):
        self.class_name = class_name
        self.config = config
        self.name = config["name"] if isinstance(config.get("name"), str) else path.rsplit("/", 1)[-1]
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
        return Spec(self.dims(shape), dtype)

    def weight(self, name, shape, *, trainable=True, dtype=None):
        return Weight(name, self.dims(shape), dtype or self.variable_dtype, self.trainable and trainable)

    def dims(self, shape):
        """A shape from config values: ints only (a size of 2.5 or "64" is a broken config, not a guess)."""
        shape = tuple(shape)
        if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
            raise self.error(f"its config makes a shape {shape} of non-integer sizes")
        return shape

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

    def geometry(self, inputs):
        """(batch, spatial sizes, channels) of a rank-(self.rank + 2) input, as its data_format lays it out
        (a layer with spatial axes sets `rank`)."""
        x = self.one(inputs)
        if len(x.shape) != self.rank + 2:
            raise self.error(f"expects a rank-{self.rank + 2} input, got {x.shape}")
        if self.channels_last():
            return x.shape[0], x.shape[1:-1], x.shape[-1]
        return x.shape[0], x.shape[2:], x.shape[1]

    def channels_last(self):
        return self.get("data_format", "channels_last") != "channels_first"

    def axis_of(self, axis, rank):
        if not isinstance(axis, int) or not -rank <= axis < rank:
            raise self.error(f"axis {axis!r} is out of range for a rank-{rank} input")
        return axis % rank

    def error(self, message, fix=None):
        return InputError(message, layer=self.path or self.name, fix=fix)


def broadcast(layer, inputs):
    """The shape numpy-style broadcasting gives the inputs' shapes (batch included)."""
    rank = max(len(s.shape) for s in inputs)
    shape = []
    for axis in range(rank):
        sizes = {s.shape[axis - rank + len(s.shape)] for s in inputs if axis - rank + len(s.shape) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise layer.error(f"cannot broadcast shapes {[s.shape for s in inputs]} together")
        shape.append(sizes.pop() if sizes else 1)
    return tuple(shape)


def conv_output_length(length, kernel, padding, stride, dilation=1):
    """Keras's conv_utils.conv_output_length (the paddings layers accept: same, causal, valid)."""
    dilated = kernel + (kernel - 1) * (dilation - 1)
    if padding in ("same", "causal"):
        out = length
    elif padding == "valid":
        out = length - dilated + 1
    else:
        raise ValueError(f"padding {padding!r}")
    return (out + stride - 1) // stride


def deconv_output_length(length, kernel, padding, output_padding, stride, dilation=1):
    """Keras's conv_utils.deconv_output_length (Keras 3's _get_output_shape_given_tf_padding is the
    same for valid and same)."""
    kernel = kernel + (kernel - 1) * (dilation - 1)
    if padding not in ("valid", "same"):
        raise ValueError(f"padding {padding!r}")
    if output_padding is None:
        return length * stride + max(kernel - stride, 0) if padding == "valid" else length * stride
    pad = kernel // 2 if padding == "same" else 0
    return (length - 1) * stride + kernel - 2 * pad + output_padding


NEVER_RUN = frozenset({"Lambda"})  # marshalled Python bytecode


# Classes Keras's applications define in their own modules (layers/applications.py): the module each
# lives in, and the config keys its get_config writes. An entry is Keras's own where its module is
# that one (tf_keras's registers the class as "Custom>..."), or, in a file that writes no module (a
# Keras before 2.13), where its config has those keys.
APPLICATION_LAYERS = {"LayerScale": ("convnext", {"init_values", "projection_dim"}),
                      "CustomScaleLayer": ("inception_resnet_v2", {"scale"})}
_APPLICATION_PACKAGES = ("keras.src.applications.", "tf_keras.src.applications.", "keras.applications.")


def application_layer(entry):
    """Whether a layer entry is one of APPLICATION_LAYERS as Keras's applications write it."""
    known = APPLICATION_LAYERS.get(entry.get("class_name"))
    if known is None or not isinstance(entry.get("config"), dict):
        return False
    module = entry.get("module")
    if module is not None and module not in {p + known[0] for p in _APPLICATION_PACKAGES}:
        return False
    return known[1] <= set(entry["config"])


def builtin(entry):
    """Whether a layer entry names a class Keras itself ships (not user code registered under a name)."""
    if entry.get("class_name") in APPLICATION_LAYERS:
        return application_layer(entry)
    module = entry.get("module")
    registered = entry.get("registered_name")
    if not isinstance(registered, (str, type(None))):
        return False
    if isinstance(module, str) and module.split(".")[0] not in ("keras", "tf_keras", "tensorflow"):
        return False
    return registered in (None, entry.get("class_name")) or (
        isinstance(registered, str) and registered.split(">")[0] in ("keras", "keras.layers", "tf_keras"))


def layer_class(entry):
    """The registered class of a layer entry, or None (unknown, custom or Lambda: never run)."""
    name = entry.get("class_name")
    if not isinstance(name, str) or name in NEVER_RUN or not builtin(entry):
        return None
    cls = OPS.get(name) if is_op(entry) else REGISTRY.get(name)
    return cls if cls is None or cls.readable(entry["config"] if isinstance(entry.get("config"), dict) else {}) \
        else None


def is_op(entry):
    module = entry.get("module")
    return isinstance(module, str) and module.startswith(("keras.src.ops", "keras.ops"))


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
    elif is_op(entry):
        why = f"is the operation keras.ops {name}, whose shape rule is not known here"
    elif name in APPLICATION_LAYERS:
        tail, keys = APPLICATION_LAYERS[name]
        why = (f"has class {name!r} (module {entry.get('module') or 'not given'}), which is Keras's own only as "
               f"applications/{tail}.py writes it, config {', '.join(sorted(keys))}: custom code is never run")
    elif name == "Merge" and builtin(entry):
        why = (f"is Keras's legacy Merge with a Python function as its mode (mode_type "
               f"{entry.get('config', {}).get('mode_type')!r}): its code is never run")
    elif name in REGISTRY:
        why = f"is a custom class registered as {entry.get('registered_name')!r}: user code is never run"
    else:
        why = f"has class {name!r}, which is not a built-in Keras layer (custom code is never run)"
    return InputError(why, layer=path,
                      fix=f"declare its output shape, e.g. --input {path.rsplit('/', 1)[-1]}=32x10")


def unreadable_kind(entry):
    """(what the layer is, why it is not read), in a few words, for a refusal that names several
    layers: ("Lambda", "Python code, never run"), ("class 'X'", "not a built-in Keras layer"), ..."""
    name = entry.get("class_name")
    if name in NEVER_RUN:
        return name, "its Python code is never run"
    if is_op(entry):
        return f"keras.ops {name}", "its shape rule is not known here"
    if name == "TFOpLambda":
        return f"tf.{entry.get('config', {}).get('function')}", "its shape rule is not known here"
    if name in APPLICATION_LAYERS:
        return f"class {name!r}", f"not Keras's own (module {entry.get('module') or 'not given'}): custom code"
    if name == "Merge" and builtin(entry):
        return "Merge", "a Python function as its mode, never run"
    if name in REGISTRY:
        return f"class {name!r}", f"a custom class registered as {entry.get('registered_name')!r}"
    return f"class {name!r}", "not a built-in Keras layer (custom code is never run)"

