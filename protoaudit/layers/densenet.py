"""Tongcheng's memory-efficient DenseBlock: a whole DenseNet dense block in one layer.

Source: Tongcheng/caffe 1625bb3 (master, the fork Tongcheng/DN_CaffeScript's README names),
src/caffe/layers/DenseBlock_layer.cpp and DenseBlock_layer.cu; the file:line references below are
to those two files.
"""
from . import touch
from .base import Layer, register

# cudnnDropoutGetStatesSize depends on the card (cuDNN keeps random-number-generator states for the
# threads it launches) and is not documented; protoaudit takes 1 MiB per dropout descriptor, an
# estimate. The reserve space is taken as one byte per element of the tensor dropped out.
CUDNN_DROPOUT_STATES_BYTES = 2**20
INT_MAX = 2**31 - 1


@register("DenseBlock", fork="tongcheng")
class DenseBlock(Layer):
    """T transitions of BN-ReLU-Conv3x3 (with use_BC: BN-ReLU-Conv1x1(4k)-BN-ReLU-Conv3x3), each
    appending growthRate (k) channels: bottom (N, C0, H, W) gives top (N, C0 + T*k, H, W)
    (Reshape, cpp:213-220; C0 is initChannel, which must be the bottom's channels: the GPU code
    copies C0 channels per image out of the bottom, cu:514-521, and the CPU code CopyFrom's it,
    cpp:859). The convolutions are always 3x3, pad 1, stride 1 (cpp:81, cu:298 and 368): the
    parameter's filter_H/filter_W, pad_h/pad_w and strides are never read.

    Parameters (LayerSetUp, cpp:70-163), for transition i with c_i = C0 + i*k input channels:
    blobs_[i] the 3x3 filter (k, c_i, 3, 3), or (k, 4k, 3, 3) with BC; blobs_[T+i] and [2T+i] the
    BN scale and shift (1, c_i, 1, 1); [3T+i] and [4T+i] the running mean and variance, the same
    shape; with BC also [5T+i] the 1x1 filter (4k, c_i, 1, 1) and [6T+i]..[9T+i] the second BN's
    scale, shift, mean and variance (1, 4k, 1, 1); last, one (1,) blob (cpp:160-164). The layer
    adds its own ParamSpecs (lr_mult 0 for the statistics and that last blob, 1 for the rest,
    cpp:166-209) and refuses any in the prototxt ("Nope", cpp:168-170).

    Memory: see touches().
    """

    exact_bottoms = 1
    exact_tops = 1

    def __init__(self, lp, ctx):
        super().__init__(lp, ctx)
        p = self.lp.denseblock_param
        self.T, self.c0, self.k = p.numTransition, p.initChannel, p.growthRate
        self.bc, self.ultra = p.use_BC, p.BC_ultra_space_efficient
        self.dropout = p.use_dropout
        self._own = type(lp)()  # the layer's own copy of its LayerParameter, for the specs it adds

    # --- shapes and parameters ------------------------------------------------------------------
    def _check(self, bottoms):
        shape = bottoms[0]
        self.check(self.T > 0 and self.c0 > 0 and self.k > 0,
                   f"numTransition ({self.T}), initChannel ({self.c0}) and growthRate ({self.k}) must be positive")
        self.check(len(shape) == 4, f"DenseBlock needs a 4-axis bottom (N, C, H, W), got {tuple(shape)}")
        self.check(shape[1] == self.c0, f"initChannel is {self.c0} but the bottom has {shape[1]} channels "
                   "(the layer copies initChannel channels per image out of its bottom)",
                   fix=f"set denseblock_param {{ initChannel: {shape[1]} }}")
        return shape

    def reshape(self, bottoms):
        n, _, h, w = self._check(bottoms)
        return [(n, self.c0 + self.T * self.k, h, w)]

    def param_shapes(self, bottoms):
        self._check(bottoms)
        self.check(not len(self.lp.param), "DenseBlock sets its own param specs and refuses any in the prototxt "
                   "(DenseBlock_layer.cpp:168-170)", fix="remove the layer's param { } entries")
        T, k = self.T, self.k
        channels = [self.c0 + i * k for i in range(T)]
        bn = [(1, c, 1, 1) for c in channels]
        shapes = [(k, 4 * k, 3, 3) if self.bc else (k, c, 3, 3) for c in channels] + bn * 4
        if self.bc:
            shapes += [(4 * k, c, 1, 1) for c in channels] + [(1, 4 * k, 1, 1)] * (4 * T)
        return shapes + [(1,)]

    def param_specs(self):
        """cpp:166-209: the statistics (and the last blob) lr_mult 0, decay_mult 0; the rest 1, 1."""
        T = self.T
        frozen = (lambda i: 3 * T <= i < 5 * T or i >= 8 * T) if self.bc else (lambda i: i >= 3 * T)
        specs = self._own.param
        if not len(specs):
            for i in range((10 if self.bc else 5) * T + 1):
                spec = specs.add()
                spec.lr_mult = spec.decay_mult = 0.0 if frozen(i) else 1.0
        return specs

    def _learnt(self):
        """The blobs backward writes a diff into: filters, BN scales and shifts (and BC's)."""
        T = self.T
        out = list(range(3 * T))
        return out + list(range(5 * T, 8 * T)) if self.bc else out

    # --- memory -----------------------------------------------------------------------------------
    def touches(self, run):
        """GPU mode (the layer's point): the first Forward_gpu calls GPU_Initialization (cu:191-454),
        which cudaMallocs, whatever the phase (a TEST net's layer too):
          six buffers of the whole block's output size, N*(C0 + T*k)*H*W floats each, shared by
          every transition (cu:196-208): postConv/postBN/postReLU data and grad; with use_dropout
          two more, postDropout data and grad; the transitions write into channel offsets of them
          (strided cuDNN descriptors, cu:244 and 293), and Backward_gpu recomputes each
          transition's BN and ReLU from postConv data (cu:742-772) instead of keeping them;
          workspace and workspace2, workspace_MB MiB each (cu:217-220);
          per transition the saved batch mean and inverse variance, c_i floats each (cu:280-281);
          Mean_tmp and Var_tmp, C0 + T*k floats each (cu:372-373);
          with use_dropout, per transition a cuDNN dropout state and reserve space (cu:318-335);
          with BC, five buffers of N*4k*H*W floats shared by every transition (cu:249-253), the
          1x1 convolution's output either once more (BC_ultra_space_efficient, cu:259-261) or
          once per transition (cu:338-342), and per transition 4 x 4k floats of statistics
          (cu:344-362).
        Its four cuDNN handles and streams (cu:223-237) are library state, like the context.
        Forward writes the top; Backward_gpu reads the top's diff and always writes the bottom's
        diff (cu:713), and the diffs of the filters, scales and shifts (cu:845-983).

        CPU mode runs a naive reference (cpp:717-987) that keeps every intermediate in Blobs
        made on the first Forward_cpu (CPU_Initialization, cpp:717-770) and touched as it goes:
        per transition the merged input (c_i channels), BN x-hat, BN output and ReLU output, the
        k-channel convolution output, the batch mean and variance (TRAIN), plus the merged
        output; each gets its diff in Backward_cpu; with BC four more N*4k*H*W blobs and two
        4k statistics per transition. In TEST, BN_inf_Fwd makes two c_i-float Blobs per BN per
        forward and never frees them (cpp:551-552): they add up every test iteration."""
        n, _, h, w = self._check(run.bottoms)
        t = [touch.param(j, "data", "setup") for j in range(run.num_params)]
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        t += self._gpu_buffers(n, h, w) if run.mode == "gpu" else self._cpu_buffers(n, h, w, run.phase)
        t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        t += [touch.param(j, "diff", "backward") for j in self._learnt()]
        return t

    def _gpu_buffers(self, n, h, w):
        T, k, c0 = self.T, self.k, self.c0
        total = c0 + T * k
        block = n * total * h * w
        quad = 4 * n * k * h * w
        self.check(block * 4 <= INT_MAX and quad * 4 <= INT_MAX,
                   f"the block's shared buffers would be {block * 4:,} bytes; DenseBlock_layer.cu sizes them "
                   "in an int (cu:196, cu:246), which overflows past 2 GiB: Caffe's cudaMalloc fails or "
                   "allocates a wrapped size", fix="lower the batch or the input size")
        per_sample = dict(per_sample=True, stage="forward")
        note = f"{n}x{total}x{h}x{w}: the block's output size, shared by its {T} transitions"
        names = ["postConv_data_gpu", "postBN_data_gpu", "postReLU_data_gpu",
                 "postConv_grad_gpu", "postBN_grad_gpu", "postReLU_grad_gpu"]
        if self.dropout:
            names += ["postDropout_data_gpu", "postDropout_grad_gpu"]
        t = [touch.buffer(name, block, note=note, **per_sample) for name in names]
        workspace = self.lp.denseblock_param.workspace_MB * 1024 * 1024
        t += [touch.buffer(name, workspace, "forward", per_sample=False, itemsize=1, kind="workspace",
                           note=f"workspace_MB: {self.lp.denseblock_param.workspace_MB} MiB for its cuDNN convolutions")
              for name in ("workspace", "workspace2")]
        channels = sum(c0 + i * k for i in range(T))
        t += [touch.buffer(name, channels, "forward", per_sample=False, note=f"sum of c_i over {T} transitions")
              for name in ("ResultSaveMean_gpu", "ResultSaveInvVariance_gpu")]
        t += [touch.buffer(name, total, "forward", per_sample=False) for name in ("Mean_tmp", "Var_tmp")]
        if self.dropout:
            t.append(touch.buffer("dropout_state_gpu", T * CUDNN_DROPOUT_STATES_BYTES, "forward", per_sample=False,
                                  itemsize=1, kind="workspace",
                                  note=f"{T} cuDNN dropout states, 1 MiB each: an estimate, cuDNN sizes them to the card"))
            t.append(touch.buffer("dropout_reserve_gpu", T * n * k * h * w, "forward", per_sample=True, itemsize=1,
                                  note=f"{T} x {n}x{k}x{h}x{w} bytes: an estimate, one byte per element"))
        if self.bc:
            qnote = f"{n}x{4 * k}x{h}x{w}: shared by its {T} transitions"
            t += [touch.buffer(name, quad, note=qnote, **per_sample)
                  for name in ("postBN_4G", "postBN_4G_grad", "postReLU_4G", "postReLU_4G_grad", "postConv_4G_grad")]
            if self.ultra:
                t.append(touch.buffer("postConv_4G", quad, note=qnote, **per_sample))
            else:
                t.append(touch.buffer("postConv_4GVec", T * quad, note=f"{T} x {n}x{4 * k}x{h}x{w}: one per transition",
                                      **per_sample))
            t += [touch.buffer(name, T * 4 * k, "forward", per_sample=False, note=f"{T} x {4 * k}")
                  for name in ("BC_MeanInfVec", "BC_VarInfVec", "ResultSaveMean_BC", "ResultSaveInvVariance_BC")]
        return t

    def _cpu_buffers(self, n, h, w, phase):
        T, k, c0 = self.T, self.k, self.c0
        spatial = n * h * w
        train = phase == "TRAIN"
        inputs = sum(c0 + i * k for i in range(T))  # channels entering the T BN layers
        total = c0 + T * k

        def blob(name, elements, note, per_sample=True, diff=True):
            out = [touch.buffer(name, elements, "forward", per_sample=per_sample, note=note)]
            if diff and train:
                out.append(touch.buffer(name + ".diff", elements, "backward", per_sample=per_sample, note=note))
            return out

        many = f"summed over {T} transitions"
        t = blob("merged_conv", spatial * (inputs + total), f"{n}x(c_0..c_T)x{h}x{w}, {many} and the output")
        t += blob("postBN_blobVec", spatial * inputs, f"{n}x c_i x{h}x{w}, {many}")
        t += blob("postReLU_blobVec", spatial * inputs, f"{n}x c_i x{h}x{w}, {many}")
        t += blob("postConv_blobVec", spatial * T * k, f"{T} x {n}x{k}x{h}x{w}")
        if train:
            t += blob("BN_XhatVec", spatial * inputs, f"{n}x c_i x{h}x{w}, {many}")
            t += blob("batch_Mean", inputs, many, per_sample=False) + blob("batch_Var", inputs, many, per_sample=False)
        if self.bc:
            quad = f"{T} x {n}x{4 * k}x{h}x{w}"
            for name in ("postConv_BCVec", "postBN_BCVec", "postReLU_BCVec") + (("BC_BN_XhatVec",) if train else ()):
                t += blob(name, T * 4 * k * spatial, quad)
            if train:
                t += blob("batch_Mean4G", T * 4 * k, f"{T} x {4 * k}", per_sample=False)
                t += blob("batch_Var4G", T * 4 * k, f"{T} x {4 * k}", per_sample=False)
        if not train:
            leaked = 2 * (inputs + (T * 4 * k if self.bc else 0))
            t.append(touch.buffer("BN_inf_Fwd localInf_Mean/Var", leaked, "forward", per_sample=False,
                                  note="made anew and never freed on every forward: grows each test iteration"))
        return t
