"""Element-wise (neuron) layers: NeuronLayer's one bottom and one top of the bottom's shape."""
from . import touch
from .base import Layer, count, float32, legacy_shape, refuse_in_place, register


class Neuron(Layer):
    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        return [tuple(bottoms[0])]


register("BNLL", "ELU", "Power", "Threshold", "Clip")(
    type("Elementwise", (Neuron,), {"__doc__": "Same shape out as in; no checks in Caffe's setup."}))

CUDNN = 2  # ReLUParameter/SigmoidParameter/TanHParameter's Engine: DEFAULT 0, CAFFE 1, CUDNN 2


@register("ReLU", "Sigmoid", "TanH")
class CudnnNeuron(Neuron):
    """Same shape out as in. A cuDNN build runs these as CuDNNReLULayer, CuDNNSigmoidLayer and
    CuDNNTanHLayer unless engine is CAFFE (layer_factory.cpp GetReLULayer: DEFAULT becomes CUDNN),
    whose Reshape reads the bottom through num(), channels(), height() and width()
    (cudnn_relu_layer.cpp:23-26), which CHECK that it has at most 4 axes (blob.hpp:152, "Cannot use
    legacy accessors on Blobs with > 4 axes"): on a 5-axis blob (C3D's clips) Caffe stops there."""

    PARAMS = {"ReLU": "relu_param", "Sigmoid": "sigmoid_param", "TanH": "tanh_param"}

    def touches(self, run):
        t = super().touches(run)
        # (the engine asked only for a blob of over 4 axes: every other layer's touches serve both engines)
        if run.mode == "gpu" and len(run.bottoms[0]) > 4 and run.engine == "cudnn" \
                and getattr(self.lp, self.PARAMS[self.lp.type]).engine in (0, CUDNN):
            t.append(touch.stop("setup", f"a cuDNN build runs {self.lp.type} as CuDNN{self.lp.type}Layer, which "
                                "takes blobs of at most 4 axes (\"Cannot use legacy accessors on Blobs with > 4 "
                                f"axes\"); this one has {len(run.bottoms[0])}, so Caffe stops here",
                                fix=f"set engine: CAFFE in its {self.PARAMS[self.lp.type]}, or audit with "
                                    "--engine caffe"))
        return t


@register("Swish")
class Swish(Neuron):
    def touches(self, run):
        """The forward copies beta * x into sigmoid_input_ and runs an inner Sigmoid into
        sigmoid_output_, both the bottom's size (swish_layer.cpp:30-39)."""
        size = count(run.bottoms[0])
        return super().touches(run) + [touch.buffer(name, size, "forward", per_sample=True)
                                       for name in ("sigmoid_input_", "sigmoid_output_")]


@register("Dropout")
class Dropout(Neuron):
    def touches(self, run):
        """Training draws a mask of uint32, one per bottom element (rand_vec_). The CPU forward
        takes the mask as mutable before it checks the phase, so there a test net allocates it too."""
        t = super().touches(run)
        if run.phase == "TRAIN" or run.mode == "cpu":
            t.append(touch.buffer("rand_vec_", count(run.bottoms[0]), "forward", per_sample=True))
        return t


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
        base = float32(p.base)
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

    def touches(self, run):
        """multiplier_ (one image) is set at setup; in place, forward copies the bottom into
        bottom_memory_; the GPU backward stages the slope gradient in backward_buff_."""
        per_image = count(run.bottoms[0], 1)
        t = super().touches(run) + [touch.buffer("multiplier_", per_image, "setup", per_sample=False)]
        if run.in_place[0]:
            t.append(touch.buffer("bottom_memory_", count(run.bottoms[0]), "forward", per_sample=True))
        if run.mode == "gpu":
            t.append(touch.buffer("backward_buff_", per_image, "backward", per_sample=False))
        return t
