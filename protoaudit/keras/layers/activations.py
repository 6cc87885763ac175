"""Activation layers: all shape-preserving; PReLU alone has a variable (one alpha per unshared position)."""
from .base import KerasLayer, register


@register("ReLU", "LeakyReLU", "ELU", "Softmax", "ThresholdedReLU")
class Elementwise(KerasLayer):
    pass


@register("PReLU")
class PReLU(KerasLayer):
    """alpha has the input's shape without the batch, 1 along each of `shared_axes` (counted from 1)."""

    def weights(self, inputs):
        shape = list(self.one(inputs).shape[1:])
        shared = self.get("shared_axes") or []
        for axis in [shared] if isinstance(shared, int) else shared:
            if not 1 <= axis <= len(shape):
                raise self.error(f"shared_axes {shared!r} is out of range for input {self.one(inputs).shape}")
            shape[axis - 1] = 1
        return [self.weight("alpha", shape)]
