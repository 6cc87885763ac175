"""Core layers: Dense and EinsumDense (the weights of most models), and the shape-preserving ones."""
import re

from .base import KerasLayer, register


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
