"""PiCANet's Caffe (nian-liu/PiCANet fee3a2f, caffe/): a 2017 BVLC Caffe with DeepLab v2's data and
Interp layers, PiCANet's attentive pooling and ReNetLSTM, as its sources shape them.

Two static Blobs, one per process: BaseConvolutionLayer::col_buffer_ (base_conv_layer.hpp:170,
base_conv_layer.cpp:12), which every Convolution and Deconvolution reshapes (cpp:235-244, cuDNN's
too: cudnn_conv_layer.cpp:93), and BasePiCANetLayer::col_buffer_ (base_picanet_layer.hpp:30).
Its base_data_layer, data_transformer and image_seg_data_layer.hpp are PSPNet's (hszhao/PSPNet
798bdc9) byte for byte, image_seg_data_layer.cpp too but for reading labels nearest (:209): DeepLab
v2's ImageSegData serves. Its interp_layer.cpp adds is_seglabel (nearest, no backward).
File:line references are to caffe/src/caffe/layers/ there unless said.
"""
from . import touch
from .base import Layer, carry, count, legacy_shape, register
from .conv import Convolution, Deconvolution
from .deeplab import ImageSegData, Interp

FORK = "picanet"
CONV_COL = "BaseConvolutionLayer::col_buffer_"
ATT_COL = "BasePiCANetLayer::col_buffer_"


class _StaticCol:
    """BVLC's convolution but for its column buffer: one static Blob whose size is the largest any
    convolution reshapes it to (1x1 and cuDNN ones included), allocated at the first touch."""

    def col_elements(self, run):
        raise NotImplementedError

    def touches(self, run):
        t = [touch.static(CONV_COL, x.elements, x.stage, x.note) if x.name == "col_buffer_" else x
             for x in super().touches(run)]
        return t + [touch.static(CONV_COL, self.col_elements(run), "reshape")]


@register("Convolution", fork=FORK)
class ConvolutionPica(_StaticCol, Convolution):
    """col_buffer_shape_ (base_conv_layer.cpp:235-244): C_in x kernel x output, one image."""

    def col_elements(self, run):
        geo, channels = self._setup(run.bottoms)[:2]
        return channels * count(geo.kernel) * count(geo.conv_out(run.bottoms[0][geo.axis + 1:]))


@register("Deconvolution", fork=FORK)
class DeconvolutionPica(_StaticCol, Deconvolution):
    """Always Caffe's: deconv_layer.cpp registers the class itself, and there is no cuDNN one.
    col_buffer_shape_: C_out x kernel x input (base_conv_layer.cpp:235-240)."""

    def uses_cudnn(self, run):
        return False

    def col_elements(self, run):
        geo, _, num_output = self._setup(run.bottoms)[:3]
        return num_output * count(geo.kernel) * count(run.bottoms[0][geo.axis + 1:])


@register("AttPooling", fork=FORK)
class AttPooling(Layer):
    """AttPoolingLayer (att_pooling_layer.cpp:23-78): bottom 0 a feature map (N, C, H0, W0), bottom
    1 attention (N, k*k, H1, W1); top (N, C, H1, W1). GLOBAL: stride 1, H0 == W0, k the kernel_size
    or W0 (dilation 1), and one output position ((H0 + 2 pad - (d (k-1) + 1)) / stride + 1 == 1);
    LOCAL: kernel_size given, that output equal to H1 x W1. k*k <= 1024.

    Its buffer is the static col_buffer_, reshaped to 1 x C k k x H_out x W_out (cpp:77) and shared
    by every AttPooling of the process. Forward_gpu im2cols each image into its data (cu:89-98);
    Backward_gpu takes its data and diff, bottom 0's and bottom 1's diffs, whatever propagate_down
    says (cu:121-130). Forward_cpu and Backward_cpu are NOT_IMPLEMENTED (cpp:84, :119)."""

    exact_bottoms = 2  # base_picanet_layer.hpp:23-24
    exact_tops = 1

    def _geometry(self, bottoms):
        """(C, k, H_out, W_out), after Reshape's CHECKs."""
        fm, att = (legacy_shape(self, b) for b in bottoms)
        p = self.lp.att_pooling_param
        n, c, h0, w0 = fm
        self.check(n == att[0], f"the two bottoms {tuple(bottoms[0])} and {tuple(bottoms[1])} must have the same "
                   "batch size")
        d, s, pad = p.dilation, p.stride, p.pad
        self.check(d > 0 and s > 0, f"dilation {d} and stride {s} must be positive")
        if p.att_mode == 0:  # GLOBAL
            self.check(s == 1, "stride must be 1 for global attention")
            self.check(h0 == w0, f"global attention takes square feature maps; bottom 0 is {h0}x{w0}")
            if p.HasField("kernel_size"):
                k = p.kernel_size
            else:
                self.check(d == 1, "dilation must be 1 for global attention without kernel_size")
                k = w0
        else:
            self.check(p.HasField("kernel_size"), "local attention needs kernel_size",
                       fix="set att_pooling_param { kernel_size: K }")
            k = p.kernel_size
        extent = d * (k - 1) + 1
        h_out, w_out = (h0 + 2 * pad - extent) // s + 1, (w0 + 2 * pad - extent) // s + 1
        if p.att_mode == 0:
            self.check(h_out == 1 and w_out == 1, f"kernel_size {k}, dilation {d} and pad {pad} give a "
                       f"{h_out}x{w_out} output on the {h0}x{w0} map: global attention needs 1x1")
        else:
            self.check((h_out, w_out) == tuple(att[2:]), f"kernel_size {k}, dilation {d}, pad {pad} and stride {s} "
                       f"give {h_out}x{w_out} on the {h0}x{w0} map; the attention is {att[2]}x{att[3]}")
        self.check(k * k == att[1], f"the attention has {att[1]} channels; kernel_size {k} needs {k * k}")
        self.check(k * k <= 1024, f"kernel_size {k}: k*k must be at most 1024 (a CUDA block)")
        return c, k, h_out, w_out

    def reshape(self, bottoms):
        c = self._geometry(bottoms)[0]
        att = legacy_shape(self, bottoms[1])
        return [(att[0], c, att[2], att[3])]

    def touches(self, run):
        if run.mode != "gpu":
            return [touch.stop("forward", "AttPooling's Forward_cpu is NOT_IMPLEMENTED (att_pooling_layer.cpp:84)")]
        c, k, h_out, w_out = self._geometry(run.bottoms)
        col = c * k * k * h_out * w_out
        note = f"1x{c * k * k}x{h_out}x{w_out} (C k k x output, one image)"
        return [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"),
                touch.top(0, "data", "forward"), touch.static(ATT_COL, col, "forward", note),
                touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward"),
                touch.static(ATT_COL + " diff", col, "backward", note), touch.bottom(1, "diff", "backward")]


@register("ReNetLSTM", fork=FORK)
class ReNetLSTM(Layer):
    """ReNetLSTMLayer (renet_lstm_layer.cpp:14-230, .cu): two LSTMs sweep a (N, C, H, W) bottom's
    patches (patch_height x patch_width) in opposite directions along X_DIR or Y_DIR; top (N,
    2 num_output, H / ph, W / pw).

    Per direction (cpp:66-123): W_i, W_c, W_o, W_f (num_output, P + num_output), P = C ph pw; W_ic,
    W_oc, W_fc (num_output, num_output); b_i, b_c, b_o, b_f (num_output): 22 blobs. With R RNNs
    (rows for X_DIR), S steps and M = R N, Reshape (cpp:189-208) shapes per direction X_H_data_
    (S, R, N, P + num_output), gi, ci, go, gf and cstate _data_ (S, R, N, num_output), X_H_diff_
    (R, N, P + num_output) and hidden_data_ and nine diff blobs (R, N, num_output); each is used
    through its data alone, the forward ones in Forward, the others in Backward; bias_multiplier_
    (M) is set on the host (cpp:226-229). The GPU backward clears the bottom's and all 22 diffs
    through their host pointers (cu:604-613), then writes them on the device."""

    exact_bottoms = 1
    exact_tops = 1

    def _dims(self, bottoms):
        p = self.lp.renet_lstm_param
        self.check(len(bottoms[0]) == 4, f"the bottom must have 4 axes, got {tuple(bottoms[0])}")
        n, c, h, w = bottoms[0]
        ph, pw = p.patch_height, p.patch_width
        self.check(ph > 0 and pw > 0 and h % ph == 0 and w % pw == 0,
                   f"the bottom's {h}x{w} must divide into {ph}x{pw} patches")
        ny, nx = h // ph, w // pw
        rnns, steps = (ny, nx) if p.direction == 0 else (nx, ny)
        return n, c * ph * pw, p.num_output, ny, nx, rnns, steps

    def reshape(self, bottoms):
        n, _, out, ny, nx = self._dims(bottoms)[:5]
        return [(n, 2 * out, ny, nx)]

    def param_shapes(self, bottoms):
        _, patch, out = self._dims(bottoms)[:3]
        return 2 * (4 * [(out, patch + out)] + 3 * [(out, out)] + 4 * [(out,)])

    def touches(self, run):
        n, patch, out, _, _, rnns, steps = self._dims(run.bottoms)
        gpu = run.mode == "gpu"
        m = rnns * n
        xh, cell = m * (patch + out), m * out
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        t.append(touch.buffer("bias_multiplier_" + (" (host)" if gpu else ""), m, "setup", per_sample=True,
                              device="host"))
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        if gpu:
            t.append(touch.buffer("bias_multiplier_", m, "forward", per_sample=True))
        for d in range(2):
            t.append(touch.buffer(f"X_H_data_[{d}]", steps * xh, "forward", per_sample=True))
            t.append(touch.buffer(f"hidden_data_[{d}]", cell, "forward", per_sample=True))
            t += [touch.buffer(f"{g}_data_[{d}]", steps * cell, "forward", per_sample=True)
                  for g in ("gi", "ci", "go", "gf", "cstate")]
        t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        peephole = self.lp.renet_lstm_param.peephole
        written = [k for k in range(run.num_params) if peephole or k % 11 not in (4, 5, 6)]
        t += [touch.param(k, "diff", "backward") for k in (written if gpu else range(run.num_params))]
        if gpu:
            t.append(touch.buffer("bottom diff (host)", count(run.bottoms[0]), "backward", per_sample=True,
                                  device="host", note="bottom[0]->mutable_cpu_diff() (cu:604)"))
            params = sum(count(s) for s in self.param_shapes(run.bottoms))
            t.append(touch.buffer("blobs_ diff (host)", params, "backward", per_sample=False, device="host",
                                  note="the 22 blobs' mutable_cpu_diff() (cu:608-613)"))
        for d in range(2):
            t.append(touch.buffer(f"X_H_diff_[{d}]", xh, "backward", per_sample=True))
            t += [touch.buffer(f"{g}_[{d}]", cell, "backward", per_sample=True)
                  for g in ("hidden_diff", "gi_diff", "gi_next_diff", "ci_diff", "go_diff", "gf_diff",
                            "gf_next_diff", "cstate_diff", "cstate_next_diff")]
        return t


@register("Interp", fork=FORK)
class InterpPica(Interp):
    """DeepLab v2's Interp plus is_seglabel (interp_layer.cpp:16): nearest instead of bilinear, and
    a backward that stops where the bottom needs a diff (:78-79, :99-100)."""

    def touches(self, run):
        if self.lp.interp_param.is_seglabel and run.propagate_down[0]:
            return super().touches(run)[:2] + [touch.stop(
                "backward", "Interp with is_seglabel has no backward (interp_layer.cpp:78-79, 99-100)",
                fix="give is_seglabel only to an Interp whose bottom needs no gradient (a label's)")]
        return super().touches(run)


carry(__name__, FORK, ImageSegData)
