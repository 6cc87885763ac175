"""Convolutions (plain, transposed, depthwise, separable; 1D/2D/3D): Keras's conv_utils shape rules and
the kernels build() makes (kernel_size..., in/groups, filters)."""
from .base import KerasLayer, conv_output_length, deconv_output_length, register


class Conv(KerasLayer):
    rank = 2

    def out_channels(self, channels):
        return self.get("filters")

    def out_size(self, i, n):
        return conv_output_length(n, self.ints("kernel_size", self.rank)[i], self.padding(),
                                  self.ints("strides", self.rank, 1)[i], self.ints("dilation_rate", self.rank, 1)[i])

    def padding(self):
        padding = str(self.get("padding", "valid")).lower()
        if padding not in ("valid", "same", "causal"):
            raise self.error(f"padding {padding!r} is not valid, same or causal")
        return padding

    def output_specs(self, inputs):
        batch, sizes, channels = self.geometry(inputs)
        sizes = tuple(self.out_size(i, n) for i, n in enumerate(sizes))
        if any(n <= 0 for n in sizes):
            raise self.error(f"the output would be {sizes}: the input {inputs[0].shape} is smaller than the "
                             "kernel", fix="use padding='same' or a larger input")
        out = self.out_channels(channels)
        shape = (batch, *sizes, out) if self.channels_last() else (batch, out, *sizes)
        return [self.spec(shape, inputs)]

    def weights(self, inputs):
        _, _, channels = self.geometry(inputs)
        groups = self.get("groups", 1)
        if channels % groups:
            raise self.error(f"{channels} input channels do not split into {groups} groups")
        out = [self.weight("kernel", (*self.ints("kernel_size", self.rank), channels // groups, self.get("filters")))]
        if self.get("use_bias", True):
            out.append(self.weight("bias", (self.get("filters"),)))
        return out


class ConvTranspose(Conv):
    """Output sizes by deconv_output_length; kernel (kernel_size..., filters, in)."""

    def out_size(self, i, n):
        output_padding = self.get("output_padding")
        if output_padding is not None:
            output_padding = self.ints("output_padding", self.rank)[i]
        return deconv_output_length(n, self.ints("kernel_size", self.rank)[i], self.padding(), output_padding,
                                    self.ints("strides", self.rank, 1)[i], self.ints("dilation_rate", self.rank, 1)[i])

    def weights(self, inputs):
        _, _, channels = self.geometry(inputs)
        out = [self.weight("kernel", (*self.ints("kernel_size", self.rank), self.get("filters"), channels))]
        if self.get("use_bias", True):
            out.append(self.weight("bias", (self.get("filters"),)))
        return out


class DepthwiseConv(Conv):
    """in x depth_multiplier outputs; kernel (kernel_size..., in, depth_multiplier)."""

    def out_channels(self, channels):
        return channels * self.get("depth_multiplier", 1)

    def weights(self, inputs):
        _, _, channels = self.geometry(inputs)
        multiplier = self.get("depth_multiplier", 1)
        out = [self.weight("depthwise_kernel" if self.flavour == "tf_keras" else "kernel",
                           (*self.ints("kernel_size", self.rank), channels, multiplier))]
        if self.get("use_bias", True):
            out.append(self.weight("bias", (channels * multiplier,)))
        return out


class SeparableConv(Conv):
    """A depthwise kernel, then a 1x1 pointwise kernel (in x depth_multiplier, filters)."""

    def weights(self, inputs):
        _, _, channels = self.geometry(inputs)
        multiplier = self.get("depth_multiplier", 1)
        out = [self.weight("depthwise_kernel", (*self.ints("kernel_size", self.rank), channels, multiplier)),
               self.weight("pointwise_kernel", (*(1,) * self.rank, channels * multiplier, self.get("filters")))]
        if self.get("use_bias", True):
            out.append(self.weight("bias", (self.get("filters"),)))
        return out


for _base, _names in ((Conv, (("Conv1D", "Convolution1D"), ("Conv2D", "Convolution2D"),
                              ("Conv3D", "Convolution3D"))),
                      (ConvTranspose, (("Conv1DTranspose", "Convolution1DTranspose"),
                                       ("Conv2DTranspose", "Convolution2DTranspose", "Deconvolution2D"),
                                       ("Conv3DTranspose", "Convolution3DTranspose", "Deconvolution3D"))),
                      (DepthwiseConv, (("DepthwiseConv1D",), ("DepthwiseConv2D",))),
                      (SeparableConv, (("SeparableConv1D", "SeparableConvolution1D"),
                                       ("SeparableConv2D", "SeparableConvolution2D")))):
    for _rank, _aliases in enumerate(_names, 1):
        register(*_aliases)(type(_aliases[0], (_base,), {"rank": _rank, "__doc__": _base.__doc__}))
