"""Merging layers: several inputs, one output."""
from .base import KerasLayer, broadcast, register


class Merge(KerasLayer):
    def many(self, inputs):
        if len(inputs) < 2 and self.class_name not in ("Add", "Concatenate"):
            raise self.error(f"merges at least two inputs, got {len(inputs)}")
        if not inputs:
            raise self.error("has no input")
        return inputs


@register("Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum")
class Elementwise(Merge):
    """Keras broadcasts the inputs' shapes against each other (batch included)."""

    def output_specs(self, inputs):
        return [self.spec(broadcast(self, self.many(inputs)), inputs)]


@register("Concatenate")
class Concatenate(Merge):
    def output_specs(self, inputs):
        inputs = self.many(inputs)
        rank = len(inputs[0].shape)
        axis = self.axis_of(self.get("axis", -1), rank)
        rest = {s.shape[:axis] + s.shape[axis + 1:] for s in inputs}
        if len(rest) > 1 or any(len(s.shape) != rank for s in inputs):
            raise self.error(f"cannot concatenate shapes {[s.shape for s in inputs]} on axis {axis}")
        shape = list(inputs[0].shape)
        shape[axis] = sum(s.shape[axis] for s in inputs)
        return [self.spec(shape, inputs)]


@register("Dot")
class Dot(Merge):
    """Contracts axes[0] of the first with axes[1] of the second; the second's batch goes."""

    def output_specs(self, inputs):
        a, b = self.many(inputs)[:2]
        axes = self.get("axes")
        axes = [axes, axes] if isinstance(axes, int) else list(axes)
        axes = [self.axis_of(axes[0], len(a.shape)), self.axis_of(axes[1], len(b.shape))]
        if a.shape[axes[0]] != b.shape[axes[1]]:
            raise self.error(f"cannot dot {a.shape} axis {axes[0]} with {b.shape} axis {axes[1]}")
        first = list(a.shape)
        second = list(b.shape)
        first.pop(axes[0])
        second.pop(axes[1])
        second.pop(0)
        shape = first + second
        if len(shape) == 1:
            shape.append(1)
        return [self.spec(shape, inputs)]


@register("Merge")
class LegacyMerge(Merge):
    """Keras's own Merge layer, of Keras 1 and of keras/legacy/layers.py in Keras 2.0 and 2.1: its mode
    names the merge (sum, mul, ave and max of inputs of one shape; concat along concat_axis; dot and
    cos contract dot_axes, compute_output_shape as Dot's). A mode that is a Python function (mode_type
    lambda or function) is code, never run."""

    MODES = ("sum", "mul", "concat", "ave", "cos", "dot", "max")

    @staticmethod
    def readable(config):
        return config.get("mode_type", "raw") == "raw"

    def output_specs(self, inputs):
        inputs = self.many(inputs)
        mode = self.get("mode", "sum")
        if mode not in self.MODES:
            raise self.error(f"has merge mode {mode!r}, not one of {', '.join(self.MODES)}")
        shapes = [s.shape for s in inputs]
        if mode in ("sum", "mul", "ave", "max"):
            if len(set(shapes)) > 1:
                raise self.error(f"merges shapes {shapes} in mode {mode}, which takes inputs of one shape")
            return [self.spec(shapes[0], inputs)]
        if mode == "concat":
            rank = len(shapes[0])
            axis = self.axis_of(self.get("concat_axis", -1), rank)
            if any(len(s) != rank for s in shapes) or len({s[:axis] + s[axis + 1:] for s in shapes}) > 1:
                raise self.error(f"cannot concatenate shapes {shapes} on axis {axis}")
            return [self.spec(shapes[0][:axis] + (sum(s[axis] for s in shapes),) + shapes[0][axis + 1:], inputs)]
        if len(inputs) != 2:
            raise self.error(f"merges exactly two inputs in mode {mode}, got {len(inputs)}")
        a, b = shapes
        axes = self.get("dot_axes", -1)
        # _arguments_validation: an int is that axis of both (a negative one counted from each end)
        axes = [axes, axes] if isinstance(axes, int) else list(axes) if isinstance(axes, (list, tuple)) else axes
        if not isinstance(axes, list) or len(axes) != 2:
            raise self.error(f"dot_axes {self.get('dot_axes')!r} is not an int or two ints")
        axes = [self.axis_of(axes[0], len(a)), self.axis_of(axes[1], len(b))]
        if a[axes[0]] != b[axes[1]]:
            raise self.error(f"cannot {mode} {a} axis {axes[0]} with {b} axis {axes[1]}")
        shape = [d for k, d in enumerate(a) if k != axes[0]] + [d for k, d in enumerate(b) if k != axes[1]][1:]
        if len(shape) == 1:
            shape.append(1)
        return [self.spec(shape, inputs)]
