"""Element-wise (neuron) layers: NeuronLayer's one bottom and one top of the bottom's shape."""
import numpy as np

from .base import Layer, legacy_shape, refuse_in_place, register


class Neuron(Layer):
    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        return [tuple(bottoms[0])]


register("ReLU", "Sigmoid", "TanH", "BNLL", "ELU", "Power", "Threshold", "Clip", "Swish", "Dropout")(
    type("Elementwise", (Neuron,), {"__doc__": "Same shape out as in; no checks in Caffe's setup."}))


@register("AbsVal")
class AbsVal(Neuron):
    def reshape(self, bottoms):
        refuse_in_place(self)
        return super().reshape(bottoms)


@register("Exp", "Log")
class ExpLog(Neuron):
    """base^x and log_base(x): the base is -1 (for e) or positive; Log also divides by log(base)."""

    def reshape(self, bottoms):
        p = self.lp.exp_param if self.lp.type == "Exp" else self.lp.log_param
        base = np.float32(p.base)
        self.check(base == -1 or base > 0, f"{self.lp.type} base {p.base} must be strictly positive",
                   fix="leave base out (or -1) for e")
        self.check(self.lp.type == "Exp" or base != 1, "Log base 1 gives 1/log(1) = inf",
                   fix="use another base")
        return super().reshape(bottoms)


@register("PReLU")
class PReLU(Neuron):
    """One slope per channel (axis 1), or a single scalar slope (a 0-axis blob) when shared."""

    def reshape(self, bottoms):
        self.check(len(bottoms[0]) >= 2, f"PReLU needs a bottom of at least 2 axes, got {tuple(bottoms[0])}")
        return super().reshape(bottoms)

    def param_shapes(self, bottoms):
        if self.lp.prelu_param.channel_shared:
            return [()]
        return [(legacy_shape(self, bottoms[0])[1],)]
