"""Element-wise (neuron) layers: the top has the bottom's shape; PReLU adds its slopes."""
from .base import Layer, register


class Neuron(Layer):
    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        return [tuple(bottoms[0])]


register("ReLU", "Sigmoid", "TanH", "AbsVal", "BNLL", "ELU", "Exp", "Log", "Power", "Threshold",
         "Clip", "Swish", "Dropout")(type("Elementwise", (Neuron,), {"__doc__": "Same shape out as in."}))


@register("PReLU")
class PReLU(Neuron):
    def param_shapes(self, bottoms):
        shape = bottoms[0]
        self.check(len(shape) >= 2, "PReLU needs a bottom with at least 2 axes")
        return [(1,)] if self.lp.prelu_param.channel_shared else [(shape[1],)]
