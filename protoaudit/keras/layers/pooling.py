"""Pooling: windows by conv_output_length (strides default to the pool size); global pooling drops
or keeps (keepdims) the spatial axes."""
from .base import KerasLayer, conv_output_length, register
from .convolution import Conv


class Pool(Conv):
    def out_channels(self, channels):
        return channels

    def out_size(self, i, n):
        pool = self.ints("pool_size", self.rank, 2)
        strides = self.get("strides")
        stride = pool[i] if strides is None else self.ints("strides", self.rank)[i]
        return conv_output_length(n, pool[i], self.padding(), stride)

    def weights(self, inputs):
        return []


class GlobalPool(KerasLayer):
    rank = 2

    def output_specs(self, inputs):
        x = self.one(inputs)
        if len(x.shape) != self.rank + 2:
            raise self.error(f"expects a rank-{self.rank + 2} input, got {x.shape}")
        channels_last = self.channels_last()
        channels = x.shape[-1] if channels_last else x.shape[1]
        if self.get("keepdims", False):
            ones = (1,) * self.rank
            shape = (x.shape[0], *ones, channels) if channels_last else (x.shape[0], channels, *ones)
        else:
            shape = (x.shape[0], channels)
        return [self.spec(shape, inputs)]


for _rank in (1, 2, 3):
    for _kind, _short in (("Max", "Max"), ("Average", "Avg")):
        register(f"{_kind}Pooling{_rank}D", f"{_short}Pool{_rank}D")(
            type(f"{_kind}Pooling{_rank}D", (Pool,), {"rank": _rank, "__doc__": Pool.__doc__}))
        register(f"Global{_kind}Pooling{_rank}D", f"Global{_short}Pool{_rank}D")(
            type(f"Global{_kind}Pooling{_rank}D", (GlobalPool,), {"rank": _rank, "__doc__": GlobalPool.__doc__}))


class AdaptivePool(GlobalPool):
    """Keras 3: pools to output_size whatever the input's size."""

    def output_specs(self, inputs):
        x = self.one(inputs)
        if len(x.shape) != self.rank + 2:
            raise self.error(f"expects a rank-{self.rank + 2} input, got {x.shape}")
        size = self.ints("output_size", self.rank)
        if self.channels_last():
            return [self.spec((x.shape[0], *size, x.shape[-1]), inputs)]
        return [self.spec((x.shape[0], x.shape[1], *size), inputs)]


for _rank in (1, 2, 3):
    for _kind in ("Max", "Average"):
        register(f"Adaptive{_kind}Pooling{_rank}D")(
            type(f"Adaptive{_kind}Pooling{_rank}D", (AdaptivePool,), {"rank": _rank, "__doc__": AdaptivePool.__doc__}))
