"""LocallyConnected1D/2D (tf_keras): a convolution with a kernel per output position.

The three implementations hold the same outputs but different kernels (tf_keras's build()):
1: (positions, kernel x in, filters); 2: a dense (input..., in, output..., filters) masked kernel;
3: a sparse kernel of one value per (position, kernel tap inside the input, in, filters).
The bias is (output..., filters) in all three.
"""
import math

from .base import KerasLayer, conv_output_length, register


class LocallyConnected(KerasLayer):
    rank = 2

    def padding(self):
        padding = str(self.get("padding", "valid")).lower()
        if padding not in ("valid", "same"):
            raise self.error(f"padding {padding!r} is not valid or same")
        return padding

    def out_sizes(self, sizes):
        kernel, strides = self.ints("kernel_size", self.rank), self.ints("strides", self.rank, 1)
        out = tuple(conv_output_length(n, kernel[i], self.padding(), strides[i]) for i, n in enumerate(sizes))
        if any(n <= 0 for n in out):
            raise self.error(f"the output would be {out}: the input {sizes} is smaller than the kernel")
        return out

    def output_specs(self, inputs):
        batch, sizes, _ = self.geometry(inputs)
        out, filters = self.out_sizes(sizes), self.get("filters")
        shape = (batch, *out, filters) if self.channels_last() else (batch, filters, *out)
        return [self.spec(shape, inputs)]

    def implementation(self):
        impl = self.get("implementation", 1)
        if impl not in (1, 2, 3):
            raise self.error(f"implementation {impl!r} is not 1, 2 or 3")
        return impl

    def weights(self, inputs):
        _, sizes, channels = self.geometry(inputs)
        out, filters = self.out_sizes(sizes), self.get("filters")
        kernel = self.ints("kernel_size", self.rank)
        impl = self.implementation()
        if impl == 1:
            shape = (math.prod(out), math.prod(kernel) * channels, filters)
        elif impl == 2:
            shape = (*sizes, channels, *out, filters) if self.channels_last() else (channels, *sizes, filters, *out)
        else:
            shape = (self.taps(sizes, out, kernel) * channels * filters,)
        weights = [self.weight("kernel", shape)]
        if self.get("use_bias", True):
            weights.append(self.weight("bias", (*out, filters)))
        return weights

    def taps(self, sizes, out, kernel):
        """Kernel taps inside the input over all output positions (conv_utils.conv_connected_inputs)."""
        strides = self.ints("strides", self.rank, 1)
        total = 1
        for n, o, k, s in zip(sizes, out, kernel, strides):
            left = k // 2
            count = 0
            for p in range(o):
                center = p * s + (left if self.padding() == "valid" else 0)
                count += min(n, center + k - left) - max(0, center - left)
            total *= count
        return total


register("LocallyConnected1D")(type("LocallyConnected1D", (LocallyConnected,), {"rank": 1}))
register("LocallyConnected2D")(type("LocallyConnected2D", (LocallyConnected,), {"rank": 2}))
