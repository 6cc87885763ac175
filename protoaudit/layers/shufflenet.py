"""farmingyard's layers for BVLC Caffe: ShuffleNet's ShuffleChannel (farmingyard/ShuffleNet b962444,
shuffle_channel_layer.cpp/.cu) and caffe-mobilenet's ConvolutionDepthwise (farmingyard/caffe-mobilenet
f7d7d13, conv_dw_layer.cpp/.cu), as their sources shape them. Both are copied into a BVLC Caffe;
proto/forks/shufflenet.proto is BVLC's schema with the README's shuffle_channel_param.
"""
from . import touch
from .base import Layer, legacy_shape, register

FORK = "shufflenet"


@register("ShuffleChannel", fork=FORK)
class ShuffleChannel(Layer):
    """ShuffleChannelLayer: the channels of (N, C, H, W) regrouped, the top of the bottom's shape
    (shuffle_channel_layer.cpp:33-41); group > 0 (cpp:12) and a divisor of C, checked in the
    forward (cpp:56, .cu:50). No buffer of its own (temp_blob_ is commented out); backward writes
    the bottom's diff when asked (cpp:70, .cu:65)."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        n, c, h, w = legacy_shape(self, bottoms[0])
        group = self.fork_param("shuffle_channel_param").group
        self.check(group > 0, "group must be greater than 0")
        self.check(c % group == 0, f"Wrong group size: {c} channels do not split into {group} groups "
                   "(shuffle_channel_layer.cpp:56)", fix="give a group that divides the channels")
        return [(n, c, h, w)]


@register("ConvolutionDepthwise", fork=FORK)
class ConvolutionDepthwise(Layer):
    """ConvolutionDepthwiseLayer: one kh x kw filter per channel, its own code (no im2col).

    The top keeps the bottom's channels, whatever num_output says (conv_dw_layer.cpp:104-111); the
    weight is (C, 1, kh, kw) and the bias (C) (cpp:75-98). It reads kernel, stride and pad as one
    value or two, or the _h/_w pair when both are set (cpp:12-56), and reads the first one or two
    even when none is given, so stride and pad must be given.

    Reshape sizes weight_multiplier_ and, with a bias, bias_multiplier_ as (N, Ho, Wo) and fills
    them with ones on the device (cpp:120-139: caffe_gpu_set). The GPU backward zeroes the bottom's
    diff first (.cu:168), sums the bias's gradient through bias_buffer_ (C x N x Ho x Wo, .cu:169-181)
    and the weight's through weight_buffer_ (C x kh x kw x N x Ho x Wo, .cu:182-197), each only when
    that parameter learns. The CPU backward keeps no buffer (cpp:208-275)."""

    exact_bottoms = 1
    exact_tops = 1

    def _pair(self, name):
        p = self.lp.convolution_param
        h, w = {"kernel": ("kernel_h", "kernel_w"), "stride": ("stride_h", "stride_w"), "pad": ("pad_h", "pad_w")}[name]
        if p.HasField(h) and p.HasField(w):
            return getattr(p, h), getattr(p, w)
        values = list({"kernel": p.kernel_size, "stride": p.stride, "pad": p.pad}[name])
        self.check(values, f"ConvolutionDepthwise reads {name} (or {h} and {w}) whether or not it is given "
                   "(conv_dw_layer.cpp:12-56)", fix=f"give {name if name != 'kernel' else 'kernel_size'} explicitly")
        return (values[0], values[0]) if len(values) == 1 else (values[0], values[1])

    def _geometry(self):
        p = self.lp.convolution_param
        dilation = list(p.dilation)
        d = (1, 1) if not dilation else (dilation[0], dilation[0]) if len(dilation) == 1 else tuple(dilation[:2])
        return self._pair("kernel"), self._pair("stride"), self._pair("pad"), d

    def reshape(self, bottoms):
        n, c, h, w = legacy_shape(self, bottoms[0])
        (kh, kw), (sh, sw), (ph, pw), (dh, dw) = self._geometry()
        self.check(sh > 0 and sw > 0, "stride must be positive")
        out = [(size + 2 * p - (d * (k - 1) + 1)) // s + 1 for size, p, d, k, s in
               ((h, ph, dh, kh, sh), (w, pw, dw, kw, sw))]
        self.check(all(o > 0 for o in out), f"the kernel does not fit the bottom {tuple(bottoms[0])}")
        return [(n, c) + tuple(out)]

    def param_shapes(self, bottoms):
        c = legacy_shape(self, bottoms[0])[1]
        kernel = self._pair("kernel")
        return [(c, 1) + kernel, (c,)] if self.lp.convolution_param.bias_term else [(c, 1) + kernel]

    def touches(self, run):
        n, c, ho, wo = run.tops[0]
        kh, kw = self._pair("kernel")
        bias = self.lp.convolution_param.bias_term
        per = n * ho * wo
        note = f"{n}x{ho}x{wo} (N x top H x W)"
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        t.append(touch.buffer("weight_multiplier_", per, "setup", per_sample=True, note=note))
        if bias:
            t.append(touch.buffer("bias_multiplier_", per, "setup", per_sample=True, note=note))
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward"), touch.top(0, "diff", "backward"),
              touch.bottom(0, "diff", "backward")]
        learns = run.param_propagate_down
        if bias and learns[1]:
            if run.mode == "gpu":
                t.append(touch.buffer("bias_buffer_", c * per, "backward", per_sample=True, note=f"{c}x" + note))
            t.append(touch.param(1, "diff", "backward"))
        if learns[0]:
            if run.mode == "gpu":
                t.append(touch.buffer("weight_buffer_", c * kh * kw * per, "backward", per_sample=True,
                                      note=f"{c}x{kh}x{kw}x" + note))
            t.append(touch.param(0, "diff", "backward"))
        return t
