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
