"""Core layers: Dense and EinsumDense (the weights of most models), and the shape-preserving ones."""
import re

from .base import KerasLayer, broadcast, register, register_op


@register("Dense")
class Dense(KerasLayer):
    """Acts on the last axis: kernel (in, units), bias (units,)."""

    def output_specs(self, inputs):
        x = self.one(inputs)
        return [self.spec(x.shape[:-1] + (self.get("units"),), inputs)]

    def weights(self, inputs):
        units = self.get("units")
        out = [self.weight("kernel", (self.one(inputs).shape[-1], units))]
        if self.get("use_bias", True):
            out.append(self.weight("bias", (units,)))
        return out


@register("EinsumDense")
class EinsumDense(KerasLayer):
    """Keras's _analyze_einsum_string: the equation's letters size the kernel, bias and output."""

    def _analyze(self, shape):
        equation = self.get("equation", "")
        dotted = equation.replace("...", "0")
        for pattern, left in ((r"([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)$", False),
                              (r"0([a-zA-Z]+),([a-zA-Z]+)->0([a-zA-Z]+)$", True),
                              (r"([a-zA-Z]{2,})0,([a-zA-Z]+)->([a-zA-Z]+)0$", False)):
            match = re.match(pattern, dotted)
            if match:
                return self._split(match.groups(), list(shape), left)
        raise self.error(f"equation {equation!r} is not one EinsumDense supports")

    def _split(self, specs, shape, left):
        in_spec, w_spec, out_spec = specs
        wanted = self.get("output_shape")
        wanted = [wanted] if isinstance(wanted, int) else list(wanted or [])
        elided = len(shape) - len(in_spec)
        out = [shape[0]] + wanted
        if elided > 0 and left:
            for i in range(1, elided):
                out.insert(1, shape[i])
        elif elided > 0:
            out.extend(shape[len(shape) - elided:])
        if left:
            in_map = {d: i + elided - len(shape) for i, d in enumerate(in_spec)}
            out_map = {d: i + elided - len(out) for i, d in enumerate(out_spec)}
        else:
            in_map = {d: i for i, d in enumerate(in_spec)}
            out_map = {d: i for i, d in enumerate(out_spec)}
        for d, i in out_map.items():  # a None in output_shape is the input's size of the same letter
            if out[i] is None and d in in_map:
                out[i] = shape[in_map[d]]
        if any(d is None for d in out) or len(out) != len(out_spec) + max(elided, 0):
            raise self.error(f"output_shape {self.get('output_shape')!r} does not fit equation "
                             f"{self.get('equation')!r} on input {tuple(shape)}")
        kernel = []
        for d in w_spec:
            if d in in_map:
                kernel.append(shape[in_map[d]])
            elif d in out_map:
                kernel.append(out[out_map[d]])
            else:
                raise self.error(f"weight axis '{d}' of {self.get('equation')!r} is in neither input nor output")
        bias = None
        axes = self.get("bias_axes")
        if axes:
            first = min(out_spec.find(c) for c in axes)
            bias = [out[out_map[c]] if c in axes else 1 for c in out_spec[first:]]
            if not left:
                bias += [1] * max(elided, 0)
        return kernel, bias, tuple(out)

    def output_specs(self, inputs):
        return [self.spec(self._analyze(self.one(inputs).shape)[2], inputs)]

    def weights(self, inputs):
        kernel, bias, _ = self._analyze(self.one(inputs).shape)
        out = [self.weight("kernel", kernel)]
        if bias is not None:
            out.append(self.weight("bias", bias))
        return out


@register("Activation", "Masking", "Identity")
class SameShape(KerasLayer):
    """Elementwise: the output is the input's shape."""


class Broadcasting(KerasLayer):
    """An elementwise function of its tensor arguments: their broadcast shape, the first's dtype."""

    def output_specs(self, inputs):
        if not inputs:
            raise self.error("has no input tensor")
        return [inputs[0]._replace(shape=broadcast(self, inputs))]


# tf_keras's TFOpLambda names a public TensorFlow function (e.g. `x + 3.0` is "__operators__.add"):
# a name, not code. The elementwise ones broadcast their tensor arguments; others are declared.
ELEMENTWISE_TF = frozenset({
    "__operators__.add", "math.add", "math.subtract", "math.multiply", "math.truediv", "math.divide",
    "math.maximum", "math.minimum", "math.negative", "math.abs", "math.square", "math.sqrt", "math.rsqrt",
    "math.exp", "math.log", "math.pow", "math.sigmoid", "math.tanh", "nn.relu", "nn.relu6", "nn.elu",
    "nn.selu", "nn.silu", "nn.swish", "nn.gelu", "nn.sigmoid", "nn.softplus", "clip_by_value", "identity"})


@register("TFOpLambda")
class TFOpLambda(Broadcasting):
    def output_specs(self, inputs):
        function = self.get("function")
        if function not in ELEMENTWISE_TF:
            raise self.error(f"is TensorFlow's tf.{function}, whose shape rule is not known here",
                             fix=f"declare its output shape, e.g. --input {self.name}=32x10")
        return super().output_specs(inputs)


# Keras 3 keeps `x + 3.0` or keras.ops.relu(x) in a Functional model as operation nodes (module
# keras.src.ops.numpy / .nn); the elementwise ones, by their class names there:
register_op("Add", "Subtract", "Multiply", "Divide", "TrueDivide", "Maximum", "Minimum", "Power", "Negative",
            "Absolute", "Square", "Sqrt", "Exp", "Log", "Tanh", "Clip", "Relu", "Relu6", "Sigmoid", "Silu",
            "Gelu", "Softplus", "Elu", "Selu", "HardSigmoid", "HardSilu", "LeakyRelu")(Broadcasting)


class Predicate(Broadcasting):
    """keras.ops comparisons and logic (keras.src.ops.numpy's Equal, NotEqual, Greater, ..., LogicalAnd,
    Isnan): compute_output_spec is the tensor arguments' broadcast shape (a constant such as the 0 of
    `ops.not_equal(x, 0)` is not a tensor) in dtype bool."""

    def output_specs(self, inputs):
        return [super().output_specs(inputs)[0]._replace(dtype="bool")]


COMPARISONS = ("Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual", "LogicalAnd", "LogicalOr",
               "LogicalXor", "LogicalNot", "Isnan", "Isinf", "Isfinite")
register_op(*COMPARISONS)(Predicate)
