"""Recurrent layers (RNN, LSTM) and LSTMUnit, as recurrent_layer.cpp, rnn_layer.cpp, lstm_layer.cpp
and lstm_unit_layer.cpp shape them.

An RNN or LSTM layer builds an internal "unrolled" net of T timesteps from its bottoms x (T, N, ...)
and cont (T, N), plus an optional static input x_static (N, ...). Its top is that net's output,
(T, N, num_output); with expose_hidden the initial hidden state blobs are extra bottoms and the final
ones extra tops, each (1, N, num_output). The layer's parameters are the unrolled net's own (not
shared) parameter blobs, in the order that net's layers create them. What the unrolled net allocates
besides is a memory question, not a shape one.
"""
from .base import Layer, count, register


class Recurrent(Layer):
    """RecurrentLayer: the checks, blob counts and shapes common to RNN and LSTM."""

    recurrent_states = ()  # the hidden state blobs carried between timesteps (h_0, or h_0 and c_0)
    gates = 1  # rows of the transforms per output unit (LSTM: 4, for input, forget, output, cell)

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
        return t, n, num_output, static

    def reshape(self, bottoms):
        t, n, num_output, _ = self._setup(bottoms)
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


@register("RNN")
class RNN(Recurrent):
    """h_t = tanh(W_hh h_{t-1} + W_xh x_t + b_h), o_t = tanh(W_ho h_t + b_o).

    Parameters: W_xh, b_h, [W_xh_static], W_hh, W_ho, b_o.
    """

    recurrent_states = ("h_0",)

    def recurrent_params(self, num_output):
        return [(num_output, num_output), (num_output, num_output), (num_output,)]


@register("LSTM")
class LSTM(Recurrent):
    """Gates (i, f, o, g) = W_hc h_{t-1} + W_xc x_t + b_c, then LSTMUnit per timestep.

    Parameters: W_xc, b_c, [W_xc_static], W_hc; the gate rows are 4 * num_output.
    """

    recurrent_states = ("h_0", "c_0")
    gates = 4

    def recurrent_params(self, num_output):
        return [(self.gates * num_output, num_output)]


@register("LSTMUnit")
class LSTMUnit(Layer):
    """One LSTM timestep: c_{t-1} (1, N, D), gates (1, N, 4D), cont (1, N) -> c_t and h_t, (1, N, D) each."""

    exact_bottoms = 3
    exact_tops = 2

    def allow_force_backward(self, bottom_index):
        return bottom_index != 2

    def reshape(self, bottoms):
        c_prev, gates, cont = bottoms
        self.check(len(c_prev) == 3 and len(gates) == 3 and len(cont) == 2,
                   f"LSTMUnit takes c_prev (1, N, D), gates (1, N, 4D) and cont (1, N); got "
                   f"{tuple(c_prev)}, {tuple(gates)}, {tuple(cont)}")
        n = c_prev[1]
        self.check(all(shape[0] == 1 and shape[1] == n for shape in bottoms),
                   f"every bottom must be one timestep of the same {n} streams: got "
                   f"{tuple(c_prev)}, {tuple(gates)}, {tuple(cont)}")
        self.check(gates[2] == 4 * c_prev[2], f"the gates {tuple(gates)} must be 4 x the cell size {c_prev[2]}")
        return [tuple(c_prev), tuple(c_prev)]
