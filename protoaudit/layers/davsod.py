"""DAVSOD's ConvLSTM Caffe (DengPingFan/DAVSOD 769c91e, mycaffe-convlstm/): BVLC Caffe of March 2017
(c0597b1: src/ and include/ file for file but for what follows) with PSPNet's BN and Interp and a
convolutional LSTM, as its sources shape them.

- bn_layer.cpp/.cu, bn_layer.hpp, cudnn_bn_layer.* and interp_layer.*, util/interp.* are hszhao/PSPNet
  798bdc9's byte for byte (the layer factory is BVLC's: REGISTER_LAYER_CLASS(BN) alone): PSPNet's BN and
  DeepLab v2's Interp, carried.
- ConvLSTM (conv_lstm_layer.cpp, conv_lstm_layer.hpp, conv_lstm_helper.hpp), a RecurrentLayer whose unrolled
  net convolves instead of InnerProduct, with ConvLSTMUnit (conv_lstm_unit_layer.cpp/.cu) and DummyForward
  (dummy_forward.cpp), the layers that unrolled net is made of.
- sigmoid_cross_entropy_loss_layer.cpp/.cu and image_data_layer.cpp differ from BVLC's by comments and a
  blank line; SigmoidCrossEntropyBalanceLoss (no net of the repository uses it) has no rule here.
Its data layers, Convolution, Pooling and the rest are BVLC's of March 2017, which size as BVLC's later
files (the changes since: logging, USE_HDF5 guards, a cuDNN descriptor leak).

File:line references are to mycaffe-convlstm/src/caffe/layers/ and mycaffe-convlstm/include/caffe/layers/
at that commit.
"""
from . import deeplab, drml, pspnet, recurrent_unrolled, touch
from .base import Layer, carry, register
from .recurrent import LSTMUnit, Recurrent

FORK = "davsod"

carry(__name__, FORK, deeplab.Interp, pspnet.BN)

# ConvolutionParameter fields ConvLSTMHelper::CopyConv copies from an LSTMConvolutionParameter
# (conv_lstm_helper.hpp:22-47): pad_h, pad_w, kernel_h, kernel_w, stride_h and stride_w are not among them
COPIED = ("num_output", "kernel_size", "pad", "stride", "dilation", "weight_filler", "bias_filler", "bias_term",
          "axis", "group", "force_nd_im2col", "engine")


def _conv(net, source, name, bottom, top, num_output):
    """ConvLSTMHelper::CreateConvLayer (conv_lstm_helper.hpp:146-164): CopyConv of `source` with num_output
    set (the caller's set_num_output), axis 2, propagate_down true."""
    lp = net.layer.add()
    lp.type = "Convolution"
    cp = lp.convolution_param
    for field in COPIED:
        value = getattr(source, field)
        if field in ("weight_filler", "bias_filler"):
            recurrent_unrolled._copy(value, getattr(cp, field))  # mutable_...()->CopyFrom: set even if empty
        elif field in ("kernel_size", "pad", "stride", "dilation"):
            getattr(cp, field).extend(value)
        else:
            setattr(cp, field, value)
    cp.num_output = num_output
    cp.axis = 2
    lp.name = name
    lp.bottom.append(bottom)
    lp.top.append(top)
    lp.propagate_down.append(True)
    return lp


def _layer(net, name, type_, bottoms=(), tops=()):
    return recurrent_unrolled._layer(net, name, type_, bottoms, tops)


def _dummy_forward(net, name, bottom, top):
    """ConvLSTMHelper::CreateDummyForwardLayer (conv_lstm_helper.hpp:166-174)."""
    _layer(net, name, "DummyForward", (bottom,), (top,)).propagate_down.append(True)


@register("ConvLSTM", fork=FORK)
class ConvLSTM(Recurrent):
    """ConvLSTMLayer (conv_lstm_layer.hpp:13-49, conv_lstm_layer.cpp), a RecurrentLayer (BVLC's
    recurrent_layer.cpp, unchanged). Bottoms: x (T, N, C, H, W), cont (T, N), an optional static input,
    and with expose_hidden the initial h and c, (1, N, num_output, H, W) each (RecurrentInputShapes,
    cpp:69-93: x's shape with T = 1 and num_output channels). Tops: h (T, N, num_output, H', W'), one per
    lstm_debug_param.expose (that inner blob), and with expose_hidden h_T and c_T (hpp:25-36).

    Its unrolled net (FillUnrolledNet, cpp:106-279), built and walked as any net: x's transform, a
    Convolution on axis 2 of 4 num_output outputs without bias (cpp:127-135); the initial c and h as an
    Input (:150-151); x's transform and cont sliced by timestep (:156-160); a DummyForward in place on c_0
    and on h_0 (:171-172); each timestep: h_{t-1} scaled by cont_t (a Scale on axis 0, :187-188), its
    Convolution of 4 num_output outputs, weight and bias shared by name across timesteps (:191-202),
    unless disable_hadamard three Scales of c_{t-1} on axis_hadamard over num_axes_hadamard (learnt,
    shared by name) and a DummyData of zeros concatenated on axis 2 (:204-223), the Eltwise sum of the
    gate inputs (:227-239) and a ConvLSTMUnit (:245-252); the Concat of every h_t (:255-259); a
    DummyForward from h_T and from c_T to h_t=T and c_t=T (:264-265); with expose_hidden a Reduction
    pseudoloss on each (:267-277). Then RecurrentLayer's pseudoloss on h (recurrent_layer.cpp:96-105).
    Its parameters are the net's own: x's transform, the four DummyForward blobs of one float
    (dummy_forward.cpp:17-21), h's transform and bias and the three Hadamard scales.

    LayerSetUp sets last_layer_index_ two layers further back than RecurrentLayer's (cpp:48-50): the two
    layers before the pseudoloss never run, the DummyForwards to h_t=T and c_t=T without expose_hidden, the
    two pseudolosses with it. Reshape also shares the exposed bottoms' diffs with h_0's and c_0's, and
    the exposed tops' data and diffs with h_t=T's and c_t=T's (cpp:11-22). Without expose_hidden each
    Forward copies h_t=T and c_t=T into h_0 and c_0 on the host (recurrent_layer.cpp:256-263)."""

    recurrent_states = ("h_t=0", "c_t=0")
    gates = 4
    transform = "x->transform"
    never_run = 2  # conv_lstm_layer.cpp:48-50

    @property
    def num_exposed(self):
        return 2 if self.lp.recurrent_param.expose_hidden else 0

    def _debug(self):
        return self.fork_param("lstm_debug_param")

    @property
    def exact_tops(self):
        return 1 + len(self._debug().expose) + self.num_exposed  # hpp:25-36

    def _conv_params(self):
        return self.fork_param("lstm_conv_param")

    def _setup(self, bottoms):
        """(T, N, num_output, x_static or None), after the layer's CHECKs and RecurrentLayer's."""
        params = self._conv_params()
        self.check(1 <= len(params) <= 2, f"gives {len(params)} lstm_conv_param; ConvLSTM takes 1 or 2 (one for "
                   "the hidden state, one for the input: CHECK_LE/CHECK_GE, conv_lstm_layer.cpp:30-31)")
        if len(params) == 2:
            self.check(params[0].num_output == params[1].num_output, f"the two lstm_conv_param have num_output "
                       f"{params[0].num_output} and {params[1].num_output}: they must be equal (cpp:34-35)")
        num_output = params[0].num_output  # cpp:38
        x, cont = bottoms[0], bottoms[1]
        self.check(len(x) == 5, f"bottom 0 (x) is {tuple(x)}; ConvLSTM takes (T, N, C, H, W): FillUnrolledNet reads "
                   "its axes 2 to 4 (conv_lstm_layer.cpp:113) and ConvLSTMUnit takes 5-axis states "
                   "(conv_lstm_unit_layer.cpp:33)")
        t, n = x[0], x[1]
        self.check(len(cont) == 2 and tuple(cont) == (t, n), f"bottom 1 (cont) {tuple(cont)} must be ({t}, {n}): "
                   "(timesteps, streams), as x's first two axes (recurrent_layer.cpp:23-26)")
        self.check(num_output > 0, "lstm_conv_param's num_output must be positive",
                   fix="set lstm_conv_param { num_output: N }")
        static = bottoms[2] if len(bottoms) > 2 + self.num_exposed else None
        if static is not None:
            self.check(len(static) >= 1 and static[0] == n, f"the static input (bottom 2) {tuple(static)} must "
                       f"have {n} streams on axis 0 (recurrent_layer.cpp:46-47)")
        state = (1, n, num_output) + tuple(x[3:])
        for j, shape in enumerate(bottoms[2 + (static is not None):]):
            self.check(tuple(shape) == state, f"the initial state {self.recurrent_states[j]} (bottom "
                       f"{2 + (static is not None) + j}) is {tuple(shape)}; it must be {state} "
                       "(recurrent_layer.cpp:216, RecurrentInputShapes: conv_lstm_layer.cpp:69-93)")
        return t, n, num_output, static

    def fitting(self, bottoms, kinds):
        """cont from a dataset not on this machine (045's and 124's HDF5 list of sequence markers): the
        (T, N) x's first two axes make it, the one shape RecurrentLayer's CHECKs take
        (recurrent_layer.cpp:23-26)."""
        x = bottoms[0]
        if len(bottoms) < 2 or not kinds[1] or kinds[0] or len(x) < 2:
            return None
        return [None, tuple(x[:2])] + [None] * (len(bottoms) - 2), "(timesteps, streams), x's first two axes"

    def fill_unrolled(self, net, t_steps, n, num_output, static, rp):
        """ConvLSTMLayer::FillUnrolledNet (conv_lstm_layer.cpp:106-279) for x of T timesteps: names
        (recurrent inputs, recurrent outputs, outputs) as RecurrentInputBlobNames, RecurrentOutputBlobNames
        and OutputBlobNames give them (cpp:54-65, :95-103)."""
        params = self._conv_params()
        debug = self._debug()
        num_output = params[0].num_output
        x_shape = tuple(net.layer[0].input_param.shape[0].dim)  # RecurrentLayer's Input of x (in_shape_, cpp:40-43)
        state = (1, n, num_output) + tuple(x_shape[3:])
        if debug.ignore_x:  # cpp:115-121
            _layer(net, None, "Silence", ("x",))
        else:
            source = params[1] if params[0].type == "hidden" else params[0]  # cpp:127-129
            x = _conv(net, source, "x->transform", "x", "x->transform", 4 * source.num_output)
            x.param.add().name = "x_transform"
            x.convolution_param.bias_term = False
            if static:
                s = _conv(net, source, "static->input", "x_static", "static->input", 4 * source.num_output)
                s.convolution_param.bias_term = False
                s.param.add().name = "static_transform"
        inputs = _layer(net, "input->cell_hidden", "Input", (), ("c_t=0", "h_t=0"))  # cpp:147-151
        for _ in range(2):
            inputs.input_param.shape.add().dim.extend(state)
        x_slice = None
        if not debug.ignore_x:
            x_slice = _layer(net, "W_xc_x_slice", "Slice", ("x->transform",))
            x_slice.slice_param.axis = 0
        cont_slice = _layer(net, "cont_slice", "Slice", ("cont",))
        cont_slice.slice_param.axis = 0
        concat = []
        _dummy_forward(net, "dummy_forward_c0", "c_t=0", "c_t=0")  # cpp:171-172
        _dummy_forward(net, "dummy_forward_h0", "h_t=0", "h_t=0")
        hidden = params[1] if params[0].type == "input" else params[0]  # cpp:191-193
        for t in range(1, t_steps + 1):
            tm1, ts = str(t - 1), str(t)
            cont_slice.top.append("cont_t=" + ts)
            if x_slice is not None:
                x_slice.top.append("x->transform->t=" + ts)
            scale = _layer(net, "h_conted_t=" + tm1, "Scale", ("h_t=" + tm1, "cont_t=" + ts), ("h_conted_t=" + tm1,))
            scale.scale_param.axis = 0  # conv_lstm_helper.hpp:81-92
            direct = debug.disable_hadamard and debug.ignore_x
            hidden_top = "gate_input_" + ts if direct else "hidden->transform->" + tm1
            h = _conv(net, hidden, "hidden->transform->" + tm1, "h_conted_t=" + tm1, hidden_top,
                      4 * hidden.num_output)
            h.param.add().name = "h->transform"
            h.param.add().name = "h->transform_bias"
            if not debug.disable_hadamard:  # cpp:204-223
                for gate, spec, top in (("input", "hadamard.input", "hadamard_in_t="),
                                        ("forget", "hadamard.forget", "hadamard_fog_t="),
                                        ("output", "hadamard.output", "hadamard_out_t=")):
                    had = _layer(net, f"hadamard->{gate}_t=" + tm1, "Scale", ("c_t=" + tm1,), (top + ts,))
                    had.scale_param.axis = debug.axis_hadamard
                    had.scale_param.num_axes = debug.num_axes_hadamard
                    had.param.add().name = spec
                dummy = _layer(net, "hadamard_gat_t=" + ts, "DummyData", (), ("hadamard_gat_t=" + ts,))
                dummy.dummy_data_param.shape.add().dim.extend(state)
                cat = _layer(net, "concat_hadamard_t=" + ts, "Concat",
                             ("hadamard_in_t=" + ts, "hadamard_fog_t=" + ts, "hadamard_out_t=" + ts,
                              "hadamard_gat_t=" + ts), ("hadamard_t=" + ts,))
                cat.concat_param.axis = 2
            total = ["hidden->transform->" + tm1]
            if not debug.ignore_x:
                total.append("x->transform->t=" + ts)
            if not debug.disable_hadamard:
                total.append("hadamard_t=" + ts)
            if static:
                total.append("static->input")
            if not debug.ignore_x or not debug.disable_hadamard:
                recurrent_unrolled._sum(net, "gate_input_" + ts, total, "gate_input_" + ts)
            _layer(net, "unit_t=" + ts, "ConvLSTMUnit", ("c_t=" + tm1, "gate_input_" + ts, "cont_t=" + ts),
                   ("c_t=" + ts, "h_t=" + ts))
            concat.append("h_t=" + ts)
        _layer(net, "h_concat", "Concat", concat, ("h",)).concat_param.axis = 0
        _dummy_forward(net, "dummy_forward_h", "h_t=" + str(t_steps), "h_t=T")
        _dummy_forward(net, "dummy_forward_c", "c_t=" + str(t_steps), "c_t=T")
        if self.lp.recurrent_param.expose_hidden:  # cpp:267-277
            for name in ("h_t=T", "c_t=T"):
                loss = _layer(net, name + "_pseudoloss", "Reduction", (name,), (name + "_pseudoloss",))
                loss.loss_weight.append(1)
        return ("h_t=0", "c_t=0"), ("h_t=T", "c_t=T"), ("h",) + tuple(debug.expose)

    def _inner(self, bottoms):
        self._setup(bottoms)
        return self.unrolled(bottoms)

    def reshape(self, bottoms):
        p, net = self._inner(bottoms)
        shapes = {b.name: tuple(b.shape) for b in net.blobs}
        if recurrent_unrolled.steps(bottoms) > recurrent_unrolled.STEPS_BUILT:
            self.assume(f"its unrolled net of {bottoms[0][0]:,} timesteps is not built whole: its buffers are "
                        "counted from the pattern of its timesteps", "fewer timesteps")
        # top[i]->ReshapeLike(*output_blobs_[i]), the exposed tops like the recurrent outputs (recurrent_layer.cpp:222-232)
        names = p.outputs + (p.recur_outputs if self.num_exposed else ())
        missing = [x for x in names if x not in shapes]
        self.check(not missing, f"lstm_debug_param exposes {missing[0] if missing else ''!r}, which its unrolled net "
                   "has no blob of (CHECK_NOTNULL(blob_by_name), recurrent_layer.cpp:135-136)")
        return [shapes[x] for x in names]

    def param_shapes(self, bottoms):
        """The unrolled net's own parameters, in the order Net::Init made them (recurrent_layer.cpp:147-154)."""
        _, net = self._inner(bottoms)
        return [tuple(q.shape) for node in net.layers for q in node.params if q.owner is None]

    def recurrent_params(self, num_output):
        raise NotImplementedError  # param_shapes reads them off the unrolled net

    def more_shared(self, p):
        """What ConvLSTMLayer::Reshape shares beyond RecurrentLayer's (cpp:11-22): with expose_hidden, the
        recurrent inputs' diffs are the exposed bottoms' and the exposed tops' data and diffs the recurrent
        outputs'."""
        if not self.num_exposed:
            return {}
        first = 2 + p.static
        shared = {(name, "diff"): ("bottom", first + j) for j, name in enumerate(p.recur_inputs)}
        for j, name in enumerate(p.recur_outputs):
            shared[(name, "data")] = ("top", len(p.outputs) + j)
            shared[(name, "diff")] = ("top", len(p.outputs) + j)
        return shared

    def touches(self, run):
        t = super().touches(run)
        if self.num_exposed:
            return t
        # Forward_cpu/gpu (recurrent_layer.cpp:256-263, the .cu's alike): h_t=T's and c_t=T's host data, which
        # no layer of the unrolled net writes (their DummyForwards never run), copied into h_0's and c_0's host data
        p, net = self.unrolled(run.bottoms)
        size = next(b.count for b in net.blobs if b.name == "h_t=T")
        note = "x".join(map(str, next(b.shape for b in net.blobs if b.name == "h_t=T")))
        t += [touch.buffer(f"{recurrent_unrolled.PREFIX}{name} data (host)", size, "forward", per_sample=True,
                           note=note + " (recurrent_layer.cpp:260-262)", device="host")
              for name in ("h_t=T", "c_t=T")]
        if run.mode == "gpu":
            t += [touch.buffer(f"{recurrent_unrolled.PREFIX}{name} data (host)", size, "forward", per_sample=True,
                               note=note + " (recurrent_layer.cpp:261)", device="host") for name in ("h_t=0", "c_t=0")]
        return t

    def inner_objects(self, node):
        """RecurrentLayer's count, less the SyncedMemory objects ConvLSTMLayer::Reshape's sharing frees
        beyond it (cpp:11-22): with expose_hidden, h_0's and c_0's diffs and the exposed tops' diffs; the
        exposed tops' data it shares at Reshape, not at the first forward."""
        from ..memory.host import SYNCED

        setup, frees = super().inner_objects(node)
        exposed = self.num_exposed
        return setup - SYNCED * 3 * exposed, frees - exposed


@register("ConvLSTMUnit", fork=FORK)
class ConvLSTMUnit(LSTMUnit):
    """ConvLSTMUnitLayer (conv_lstm_layer.hpp:51-80): bottoms c_{t-1} (1, N, C, H, W), the gate inputs
    (1, N, 4C, H, W) and cont (1, N) (conv_lstm_unit_layer.cpp:27-37, :45); tops c_t and h_t like c_{t-1}
    (:46-47); X_acts_ like the gates (:48), written by Forward_gpu (.cu:63), its diff by Backward_gpu
    (.cu:145). Backward, when c_{t-1} or the gates propagate down, writes both their diffs (cpp:92-110,
    .cu:131-151): LSTMUnit's buffers and touches (lstm_unit_layer.cu's kernels, over C x H x W)."""

    cell = ("C", "H", "W")
    cited = (" (conv_lstm_unit_layer.cpp:29-34)", " (cpp:35-36)", " (cpp:45)")


@register("DummyForward", fork=FORK)
class DummyForward(Layer):
    """DummyForwardLayer, a NeuronLayer (dummy_forward.hpp:23): the top like the bottom. LayerSetUp makes
    one parameter Blob of shape (1) that no code fills or reads, and param_propagate_down true
    (dummy_forward.cpp:17-21). It has CPU code only (no Forward_gpu or Backward_gpu: Layer's call the
    CPU ones): forward copies the bottom's host data into the top's (cpp:30-35), backward, where
    propagate_down[0], the top's host diff into the bottom's (cpp:43-50)."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        return [tuple(bottoms[0])]

    def param_shapes(self, bottoms):
        return [(1,)]

    def touches(self, run):
        return drml.host_paste_touches(run)
