"""Recurrent layers (RNN, LSTM) and LSTMUnit, as recurrent_layer.cpp, rnn_layer.cpp, lstm_layer.cpp
and lstm_unit_layer.cpp shape them.

An RNN or LSTM layer builds an internal "unrolled" net of T timesteps from its bottoms x (T, N, ...)
and cont (T, N), plus an optional static input x_static (N, ...). Its top is that net's output,
(T, N, num_output); with expose_hidden the initial hidden state blobs are extra bottoms and the final
ones extra tops, each (1, N, num_output). The layer's parameters are the unrolled net's own (not
shared) parameter blobs, in the order that net's layers create them. What the layer allocates is
what running that net allocates, less what it shares with the layer's blobs: the unrolled net is
built and walked as any net (protoaudit.layers.recurrent_unrolled).
"""
from . import recurrent_unrolled, touch
from .base import Layer, count, register
from ..options import INT_MAX

KEPT = 4  # unrolled nets kept per layer object, by bottom shapes


class Recurrent(Layer):
    """RecurrentLayer: the checks, blob counts and shapes common to RNN and LSTM."""

    recurrent_states = ()  # the hidden state blobs carried between timesteps (h_0, or h_0 and c_0)
    gates = 1  # rows of the transforms per output unit (LSTM: 4, for input, forget, output, cell)
    fill_unrolled = None  # FillUnrolledNet: the subclass's layers of the unrolled net (recurrent_unrolled)
    transform = None  # the name FillUnrolledNet gives x's transform's weight (W_xh, W_xc)

    @property
    def num_exposed(self):
        return len(self.recurrent_states) if self.lp.recurrent_param.expose_hidden else 0

    @property
    def min_bottoms(self):
        return 2 + self.num_exposed

    @property
    def max_bottoms(self):
        return 3 + self.num_exposed

    @property
    def exact_tops(self):
        return 1 + self.num_exposed

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1  # never into the sequence continuation indicators

    def label_for(self, prediction):
        """cont (bottom 1), where its dataset is absent: (T, N), x's first two axes (RecurrentLayer::Reshape's
        CHECKs, recurrent_layer.cpp)."""
        return tuple(prediction[:2]) if len(prediction) >= 2 else None

    def _setup(self, bottoms):
        """(T, N, num_output, x_static or None), after RecurrentLayer's checks."""
        x, cont = bottoms[0], bottoms[1]
        self.check(len(x) >= 2, f"bottom 0 (x) must have at least 2 axes (timesteps, streams, ...); got {tuple(x)}")
        t, n = x[0], x[1]
        self.check(len(cont) == 2, f"bottom 1 (cont) must have exactly 2 axes (timesteps, streams); got {tuple(cont)}")
        self.check(tuple(cont) == (t, n), f"bottom 1 (cont) {tuple(cont)} must be ({t}, {n}), as x's first two axes")
        num_output = self.lp.recurrent_param.num_output
        self.check(num_output > 0, "num_output must be positive", fix="set recurrent_param { num_output: N }")
        self.check(len(x) >= 3, f"bottom 0 (x) {tuple(x)} needs a third axis: the unrolled net's input "
                   "transform is an InnerProduct over axes 2 and up")
        static = bottoms[2] if len(bottoms) > 2 + self.num_exposed else None
        if static is not None:
            self.check(len(static) >= 2 and static[0] == n, f"the static input (bottom 2) {tuple(static)} must be "
                       f"({n}, ...) with at least 2 axes: an InnerProduct over axes 1 and up")
        state = (1, n, num_output)
        for j, shape in enumerate(bottoms[2 + (static is not None):]):
            self.check(tuple(shape) == state, f"the initial state {self.recurrent_states[j]} "
                       f"(bottom {2 + (static is not None) + j}) is {tuple(shape)}; it must be {state}")
        rows = self.gates * num_output  # the largest blob of the unrolled net: x's transform, (T, N, rows)
        self.check(t * n * rows <= INT_MAX, f"its unrolled net's blob {self.transform}_x would hold "
                   f"{t * n * rows:,} elements {(t, n, rows)}; a Caffe blob holds at most {INT_MAX:,}",
                   fix="use fewer timesteps or streams")
        return t, n, num_output, static

    def reshape(self, bottoms):
        t, n, num_output, _ = self._setup(bottoms)
        if t > recurrent_unrolled.STEPS_BUILT:
            self.assume(f"its unrolled net of {t:,} timesteps is not built whole: its buffers are counted from "
                        f"the pattern of its timesteps (exact), its C++ objects (host memory) read off the nets "
                        f"of {recurrent_unrolled.BASES[0]} and {recurrent_unrolled.BASES[1]} timesteps (within about "
                        "10%)", f"fewer timesteps: up to {recurrent_unrolled.STEPS_BUILT:,} are built whole")
        return [(t, n, num_output)] + [(1, n, num_output)] * self.num_exposed

    def param_shapes(self, bottoms):
        _, _, num_output, static = self._setup(bottoms)
        rows = self.gates * num_output
        shapes = [(rows, count(bottoms[0], 2)), (rows,)]  # the input transform, with its bias
        if static is not None:
            shapes.append((rows, count(static, 1)))  # the static input's transform, without bias
        return shapes + self.recurrent_params(num_output)

    def recurrent_params(self, num_output):
        raise NotImplementedError

    def unrolled(self, bottoms):
        """(Plan, built net) of the unrolled net on these bottoms (the last few kept: a search over
        the batch asks for one net after another)."""
        bottoms = tuple(map(tuple, bottoms))
        kept = self.__dict__.setdefault("_unrolled", {})
        if bottoms not in kept:
            self._setup(bottoms)
            if len(kept) >= KEPT:
                del kept[next(iter(kept))]
            kept[bottoms] = recurrent_unrolled.build_unrolled(self, bottoms)
        return kept[bottoms]

    def inner_nets(self, node):
        """Its unrolled net, which Net::Init prints within this layer's setup (recurrent_layer.cpp:
        `new Net<Dtype>(net_param)` in LayerSetUp); none past STEPS_BUILT timesteps, where it is not
        built whole."""
        bottoms = tuple(map(tuple, node.bottom_shapes))
        if recurrent_unrolled.steps(bottoms) > recurrent_unrolled.STEPS_BUILT:
            return []
        if node.lp.name == self.lp.name:
            return [self.unrolled(bottoms)[1]]
        return [recurrent_unrolled.build_unrolled(self, bottoms, node.lp.name)[1]]

    def touches(self, run):
        """Every buffer the unrolled net allocates, setting it up (inside this layer's LayerSetUp),
        running it forward and backward: those it shares with this layer's bottoms, tops and
        parameters as theirs, the rest as this layer's own (recurrent_unrolled.unrolled_touches).
        Backward always writes x's diff (bottom 0) and x_static's (bottom 2): the unrolled net's
        transforms of them have propagate_down true; the exposed states' bottoms never get a diff.
        Past STEPS_BUILT timesteps, from the pattern of its timesteps (recurrent_unrolled)."""
        if recurrent_unrolled.steps(run.bottoms) > recurrent_unrolled.STEPS_BUILT:
            found = recurrent_unrolled.periodic_touches(self, run)
            if found is not None:
                return found
        p, net = self.unrolled(run.bottoms)
        return recurrent_unrolled.unrolled_touches(self, run, p, net)

    def inner_objects(self, node):
        """(bytes, SyncedMemory objects its first forward frees) of the C++ objects the unrolled net
        adds to this layer's, for the layer `node` (this object's, or one alike named otherwise:
        the inner layers' names begin with its name); protoaudit.memory.host asks. Past STEPS_BUILT
        timesteps the bytes are read off the nets of a few (reshape notes it as an assumption)."""
        bottoms = tuple(map(tuple, node.bottom_shapes))
        kept = self.__dict__.setdefault("_objects", {})
        key = (bottoms, node.lp.name)
        if key not in kept:
            if len(kept) >= KEPT:
                del kept[next(iter(kept))]
            if recurrent_unrolled.steps(bottoms) > recurrent_unrolled.STEPS_BUILT:
                kept[key] = recurrent_unrolled.periodic_objects(self, node.lp.name, bottoms)
            else:
                p, net = (self.unrolled(bottoms) if node.lp.name == self.lp.name
                          else recurrent_unrolled.build_unrolled(self, bottoms, node.lp.name))
                kept[key] = recurrent_unrolled.objects(self, p, net)
        return kept[key]


@register("RNN")
class RNN(Recurrent):
    """h_t = tanh(W_hh h_{t-1} + W_xh x_t + b_h), o_t = tanh(W_ho h_t + b_o).

    Parameters: W_xh, b_h, [W_xh_static], W_hh, W_ho, b_o.
    """

    recurrent_states = ("h_0",)
    transform = "W_xh"
    fill_unrolled = staticmethod(recurrent_unrolled.fill_rnn)

    def recurrent_params(self, num_output):
        return [(num_output, num_output), (num_output, num_output), (num_output,)]


@register("LSTM")
class LSTM(Recurrent):
    """Gates (i, f, o, g) = W_hc h_{t-1} + W_xc x_t + b_c, then LSTMUnit per timestep.

    Parameters: W_xc, b_c, [W_xc_static], W_hc; the gate rows are 4 * num_output.
    """

    recurrent_states = ("h_0", "c_0")
    gates = 4
    transform = "W_xc"
    fill_unrolled = staticmethod(recurrent_unrolled.fill_lstm)

    def recurrent_params(self, num_output):
        return [(self.gates * num_output, num_output)]


@register("LSTMUnit")
class LSTMUnit(Layer):
    """One LSTM timestep: c_{t-1} (1, N, D), gates (1, N, 4D), cont (1, N) -> c_t and h_t, (1, N, D) each."""

    exact_bottoms = 3
    exact_tops = 2
    cell = ("D",)  # the cell's axes after (1, N), as the messages name them (a fork's unit: C, H, W)
    cited = ("", "", "")  # where each of the three checks stands in a fork's source

    def allow_force_backward(self, bottom_index):
        return bottom_index != 2

    def reshape(self, bottoms):
        c_prev, gates, cont = bottoms
        got = f"{tuple(c_prev)}, {tuple(gates)}, {tuple(cont)}"
        axes = 2 + len(self.cell)
        self.check(len(c_prev) == axes and len(gates) == axes and len(cont) == 2,
                   f"{self.lp.type} takes c_prev (1, N, {', '.join(self.cell)}), gates (1, N, "
                   f"{', '.join(('4' + self.cell[0],) + self.cell[1:])}) and cont (1, N){self.cited[0]}; got {got}")
        n = c_prev[1]
        self.check(all(shape[0] == 1 and shape[1] == n for shape in bottoms),
                   f"every bottom must be one timestep of the same {n} streams{self.cited[1]}: got {got}")
        self.check(gates[2] == 4 * c_prev[2],
                   f"the gates {tuple(gates)} must be 4 x the cell size {c_prev[2]}{self.cited[2]}")
        return [tuple(c_prev), tuple(c_prev)]

    def touches(self, run):
        """lstm_unit_layer.cpp/.cu: forward reads the three bottoms and writes c_t and h_t; the GPU
        forward keeps the gates' activations in X_acts_ (the gates' size), whose diff the GPU
        backward uses. Backward (when either c_{t-1} or the gates propagate down) reads both tops'
        diffs and writes the diffs of c_{t-1} and of the gates, both, whatever propagate_down says
        of each (cpp:77-87, cu:127-145): in an unrolled LSTM, c_0's diff, which Net::Init never asks for."""
        t = [touch.bottom(j, "data", "forward") for j in range(3)]
        t += [touch.top(j, "data", "forward") for j in range(2)]
        gpu = run.mode == "gpu"
        gates = count(run.bottoms[1])
        note = "x".join(map(str, run.bottoms[1]))
        if gpu:
            t.append(touch.buffer("X_acts_", gates, "forward", per_sample=True, note=note))
        if run.propagate_down[0] or run.propagate_down[1]:
            t += [touch.top(j, "diff", "backward") for j in range(2)]
            t += [touch.bottom(j, "diff", "backward") for j in range(2)]
            if gpu:
                t.append(touch.buffer("X_acts_ (diff)", gates, "backward", per_sample=True, note=note))
        return t
