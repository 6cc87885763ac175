"""Pooling (MAX/AVE/STOCHASTIC, global, the ceil rounding and pad clip rule) and SPP."""
import math

import numpy as np

from .base import Layer, register


def pooling_geometry(layer, param, shape):
    """(kernel, stride, pad) as (h, w) pairs: PoolingLayer::LayerSetUp's rules and checks."""
    layer.check(len(shape) == 4, f"Pooling needs a 4-axis bottom (N, C, H, W), got {len(shape)} axes")
    has_size = param.HasField("kernel_size")
    has_hw = param.HasField("kernel_h") or param.HasField("kernel_w")
    if param.global_pooling:
        layer.check(not (has_size or has_hw), "with global_pooling: true, the filter size cannot be specified")
        kernel = (shape[2], shape[3])
    else:
        layer.check(has_size != has_hw, "give either kernel_size or kernel_h and kernel_w, not both",
                    fix="pooling needs a kernel size")
        layer.check(has_size or (param.HasField("kernel_h") and param.HasField("kernel_w")),
                    "for a non-square filter both kernel_h and kernel_w are required")
        kernel = (param.kernel_size,) * 2 if has_size else (param.kernel_h, param.kernel_w)
    layer.check(kernel[0] > 0 and kernel[1] > 0, "filter dimensions cannot be zero")
    if param.HasField("pad_h") or param.HasField("pad_w"):
        pad = (param.pad_h, param.pad_w)
    else:
        pad = (param.pad, param.pad)
    if param.HasField("stride_h") or param.HasField("stride_w"):
        stride = (param.stride_h, param.stride_w)
    else:
        stride = (param.stride, param.stride)
    if param.global_pooling:
        layer.check(pad == (0, 0) and stride == (1, 1), "with global pooling, stride must be 1 and pad 0")
    if pad != (0, 0):
        layer.check(param.pool in (0, 1), "padding is implemented only for average and max pooling")
        layer.check(pad[0] < kernel[0] and pad[1] < kernel[1], "pad must be smaller than the kernel")
    return kernel, stride, pad


def pooled_size(size, kernel, stride, pad):
    """Caffe's ceil rounding in float, then the clip that keeps the last window inside the padding."""
    out = int(math.ceil(np.float32(size + 2 * pad - kernel) / np.float32(stride))) + 1
    if pad and (out - 1) * stride >= size + pad:
        out -= 1
    return out


@register("Pooling")
class Pooling(Layer):
    exact_bottoms = 1
    min_tops = 1

    @property
    def max_tops(self):
        return 2 if self.lp.pooling_param.pool == 0 else 1  # MAX pooling may output its mask

    def reshape(self, bottoms):
        shape = bottoms[0]
        kernel, stride, pad = pooling_geometry(self, self.lp.pooling_param, shape)
        h = pooled_size(shape[2], kernel[0], stride[0], pad[0])
        w = pooled_size(shape[3], kernel[1], stride[1], pad[1])
        top = (shape[0], shape[1], h, w)
        return [top] * max(1, len(self.lp.top))


@register("SPP")
class SPP(Layer):
    """Spatial pyramid pooling: level l pools into 2^l x 2^l bins, flattened and concatenated."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        n, c, h, w = self._shape(bottoms[0])
        levels = self.lp.spp_param.pyramid_height
        if levels == 1:
            return [(n, c) + self._bins(0, h, w)]
        return [(n, sum(c * ph * pw for ph, pw in (self._bins(level, h, w) for level in range(levels))))]

    def _shape(self, shape):
        self.check(len(shape) == 4, "SPP needs a 4-axis bottom (N, C, H, W)")
        self.check(shape[2] > 0 and shape[3] > 0, "input dimensions cannot be zero")
        return shape

    @staticmethod
    def _bins(level, h, w):
        bins = 2 ** level
        out = []
        for size in (h, w):
            kernel = math.ceil(size / bins)
            pad = (kernel * bins - size + 1) // 2
            out.append(pooled_size(size, kernel, kernel, pad))
        return tuple(out)
