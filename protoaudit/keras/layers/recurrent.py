"""Recurrent layers and their wrappers: SimpleRNN/LSTM/GRU, ConvLSTM, Bidirectional, TimeDistributed.

A cell's kernels are (input, gates x units) and (units, gates x units); the wrappers build the
layer inside their config on the shapes they hand it.
"""
from .base import KerasLayer, conv_output_length, make_layer, register


def with_states(layer, inputs, states):
    """The sequence of a recurrent call whose initial_state tensors follow it (`states` of them)."""
    if not inputs:
        raise layer.error("has no input tensor")
    if len(inputs) not in (1, 1 + states):
        raise layer.error(f"takes a sequence and {states} initial state(s), got {len(inputs)} inputs")
    return inputs[0]


class RNN(KerasLayer):
    gates = 1
    states = 1

    def sequence(self, inputs):
        x = with_states(self, inputs, self.states)
        if len(x.shape) != 3:
            raise self.error(f"expects (batch, timesteps, features), got {x.shape}")
        return x.shape

    def output_specs(self, inputs):
        batch, steps, _ = self.sequence(inputs)
        units = self.get("units")
        out = [self.spec((batch, steps, units) if self.get("return_sequences", False) else (batch, units))]
        if self.get("return_state", False):
            out += [self.spec((batch, units))] * self.states
        return out

    def weights(self, inputs):
        features = self.sequence(inputs)[-1]
        units = self.get("units")
        out = [self.weight("kernel", (features, self.gates * units)),
               self.weight("recurrent_kernel", (units, self.gates * units))]
        if self.get("use_bias", True):
            out.append(self.weight("bias", self.bias_shape(units)))
        return out

    def bias_shape(self, units):
        return (self.gates * units,)


@register("SimpleRNN")
class SimpleRNN(RNN):
    pass


@register("LSTM", "CuDNNLSTM")
class LSTM(RNN):
    gates = 4
    states = 2

    def bias_shape(self, units):
        return (8 * units,) if self.class_name == "CuDNNLSTM" else (4 * units,)


@register("GRU", "CuDNNGRU")
class GRU(RNN):
    """reset_after (TF2's default) keeps separate input and recurrent biases: (2, 3 x units)."""

    gates = 3

    def bias_shape(self, units):
        if self.class_name == "CuDNNGRU":
            return (6 * units,)
        return (2, 3 * units) if self.get("reset_after", True) else (3 * units,)


class ConvLSTM(KerasLayer):
    """(batch, time, spatial..., channels): the LSTM's gates as convolutions."""

    rank = 2

    def geometry(self, inputs):
        x = with_states(self, inputs, 2)
        if len(x.shape) != self.rank + 3:
            raise self.error(f"expects a rank-{self.rank + 3} input, got {x.shape}")
        if self.channels_last():
            return x.shape[:2], x.shape[2:-1], x.shape[-1]
        return x.shape[:2], x.shape[3:], x.shape[2]

    def output_specs(self, inputs):
        (batch, steps), sizes, _ = self.geometry(inputs)
        kernel = self.ints("kernel_size", self.rank)
        strides = self.ints("strides", self.rank, 1)
        dilation = self.ints("dilation_rate", self.rank, 1)
        sizes = tuple(conv_output_length(n, kernel[i], str(self.get("padding", "valid")).lower(), strides[i],
                                         dilation[i]) for i, n in enumerate(sizes))
        if any(n <= 0 for n in sizes):
            raise self.error(f"the output would be {sizes}: the input is smaller than the kernel")
        filters = self.get("filters")
        state = (batch, *sizes, filters) if self.channels_last() else (batch, filters, *sizes)
        out = [self.spec(state[:1] + (steps,) + state[1:] if self.get("return_sequences", False) else state)]
        if self.get("return_state", False):
            out += [self.spec(state)] * 2
        return out

    def weights(self, inputs):
        _, _, channels = self.geometry(inputs)
        kernel = self.ints("kernel_size", self.rank)
        filters = self.get("filters")
        out = [self.weight("kernel", (*kernel, channels, 4 * filters)),
               self.weight("recurrent_kernel", (*kernel, filters, 4 * filters))]
        if self.get("use_bias", True):
            out.append(self.weight("bias", (4 * filters,)))
        return out


for _rank in (1, 2, 3):
    register(f"ConvLSTM{_rank}D")(type(f"ConvLSTM{_rank}D", (ConvLSTM,), {"rank": _rank, "__doc__": ConvLSTM.__doc__}))


class Wrapper(KerasLayer):
    def inner(self, key="layer", prefix=""):
        entry = self.get(key)
        return make_layer(entry, trainable=self.trainable, policy=self.policy, flavour=self.flavour,
                          path=f"{self.path}/{prefix}{(entry or {}).get('config', {}).get('name', key)}")


@register("TimeDistributed")
class TimeDistributed(Wrapper):
    """The inner layer sees (batch, features...) without the time axis, which comes back after."""

    def split(self, inputs):
        x = self.one(inputs)
        if len(x.shape) < 3:
            raise self.error(f"expects (batch, timesteps, ...), got {x.shape}")
        return x.shape[1], [x._replace(shape=x.shape[:1] + x.shape[2:])]

    def output_specs(self, inputs):
        steps, inner_inputs = self.split(inputs)
        return [s._replace(shape=s.shape[:1] + (steps,) + s.shape[1:])
                for s in self.inner().output_specs(inner_inputs)]

    def weights(self, inputs):
        return self.inner().weights(self.split(inputs)[1])


@register("Bidirectional")
class Bidirectional(Wrapper):
    """A forward and a backward copy of the layer (or backward_layer's config), merged by merge_mode."""

    def pair(self):
        backward = self.inner("backward_layer", "backward_") if self.get("backward_layer") else \
            self.inner(prefix="backward_")
        return self.inner(prefix="forward_"), backward

    def halves(self, inputs):
        """The inputs of each direction: the sequence, and half of the initial states each."""
        states = inputs[1:]
        if len(states) % 2:
            raise self.error(f"takes initial states for both directions, got {len(states)}")
        half = len(states) // 2
        return inputs[:1] + states[:half], inputs[:1] + states[half:]

    def output_specs(self, inputs):
        forward, backward = self.pair()
        fwd_in, bwd_in = self.halves(inputs)
        fwd, bwd = forward.output_specs(fwd_in), backward.output_specs(bwd_in)
        mode = self.config.get("merge_mode", "concat")
        if mode is None:
            outputs = [fwd[0], bwd[0]]
        elif mode == "concat":
            outputs = [fwd[0]._replace(shape=fwd[0].shape[:-1] + (fwd[0].shape[-1] + bwd[0].shape[-1],))]
        elif mode in ("sum", "ave", "mul"):
            outputs = [fwd[0]]
        else:
            raise self.error(f"merge_mode {mode!r} is not concat, sum, ave, mul or None")
        return outputs + fwd[1:] + bwd[1:]

    def weights(self, inputs):
        forward, backward = self.pair()
        fwd_in, bwd_in = self.halves(inputs)
        return ([w._replace(name="forward_" + w.name) for w in forward.weights(fwd_in)]
                + [w._replace(name="backward_" + w.name) for w in backward.weights(bwd_in)])


CELLS = {"SimpleRNNCell": SimpleRNN, "LSTMCell": LSTM, "GRUCell": GRU}


@register("RNN")
class GenericRNN(KerasLayer):
    """keras.layers.RNN around one built-in cell: the same shapes and variables as the cell's layer."""

    def as_layer(self):
        cell = self.get("cell") or {}
        cls = CELLS.get(cell.get("class_name")) if isinstance(cell, dict) else None
        if cls is None or not isinstance(cell.get("config"), dict):
            raise self.error(f"RNN's cell {cell.get('class_name') if isinstance(cell, dict) else cell!r} is not "
                             "SimpleRNNCell, LSTMCell or GRUCell", fix="declare its output shape")
        config = dict(cell["config"], name=self.name, return_sequences=self.get("return_sequences", False),
                      return_state=self.get("return_state", False))
        return cls(cls.class_names[0], config, trainable=self.trainable, policy=self.policy,
                   flavour=self.flavour, path=self.path)

    def output_specs(self, inputs):
        return self.as_layer().output_specs(inputs)

    def weights(self, inputs):
        return self.as_layer().weights(inputs)
