"""caffe-quant-QNN's layers (whitenightwu/caffe-quant-QNN b4fc9ad: BVLC's Caffe of November 2017 with
quantized weights and activations), read from its src/caffe/layers and include/caffe/layers.

QuanConvolution and QuanInnerProduct are BVLC's Convolution and InnerProduct read from their own
parameters: their forward quantizes a copy of the weights made in a malloc'd array (and, on the GPU,
a cudaMalloc'd one) that it frees before returning, so they keep no buffer BVLC's layers do not.
"""
import functools

from . import touch
from .activations import Neuron
from .base import register
from .conv import Convolution
from .dense import InnerProduct

FORK = "qnn"


@register("QuanConvolution", fork=FORK)
class QuanConvolution(Convolution):
    """BaseQuanConvolutionLayer is base_conv_layer.cpp with quan_convolution_param read in its place
    (base_quan_conv_layer.cpp:15, 118-174; same geometry, weight and bias, col_buffer_ and
    bias_multiplier_), and QuanConvolutionLayer is conv_layer.cpp's shape rule (quan_conv_layer.cpp:88-102).
    Forward_cpu quantizes a malloc'd copy of the weights (quan_conv_layer.cpp:130-151, freed at :173),
    Forward_gpu a host copy then a cudaMalloc'd one (quan_conv_layer.cu:182-238, freed at :260-261).
    Always Caffe's engine: the factory's cuDNN branch names a CuDNNQuanConvolutionLayer the fork
    does not have (layer_factory.cpp:108), so only a build without cuDNN compiles."""

    @functools.cached_property
    def param(self):
        return self.fork_param("quan_convolution_param")

    def uses_cudnn(self, run):
        return False


@register("QuanInnerProduct", fork=FORK)
class QuanInnerProduct(InnerProduct):
    """inner_product_layer.cpp read from quan_inner_product_param (quan_inner_product_layer.cpp:15-107:
    the same weight, bias and bias_multiplier_), registered as a class (cpp:375). LayerSetUp checks
    bit_width > 0 (cpp:65). Its forward quantizes a malloc'd copy of the weights (cpp:272-302, freed
    at :323; cu:94-139, freed at :167-168); its backward is BVLC's (cu:174-215)."""

    @functools.cached_property
    def param(self):
        return self.fork_param("quan_inner_product_param")

    def reshape(self, bottoms):
        self.check(self.param.bit_width > 0, "QuanInnerProduct Layer has unexpected negative bit width")
        return super().reshape(bottoms)


@register("Quantization", fork=FORK)
class Quantization(Neuron):
    """A NeuronLayer (quantization_layer.hpp:20): the top is the bottom's shape (in place or not).
    LayerSetUp checks bit_width > 0 and exactly two `range` values (quantization_layer.cpp:14-22).
    The header declares CPU code only (hpp:49-65: the GPU functions commented out), so in a GPU
    run Layer's Forward_gpu and Backward_gpu run Forward_cpu (bottom data in, top data out, cpp:30-49)
    and Backward_cpu (nothing unless the bottom wants a gradient, then top diff to bottom diff,
    cpp:123-136) on host copies. (The tree's quantization_layer.cu defines GPU members that header
    does not declare.)"""

    def reshape(self, bottoms):
        p = self.fork_param("quantization_param")
        self.check(p.bit_width > 0, "Quantization Layer has unexpected negative bit width")
        self.check(len(p.range) == 2, "Quantization Layer has unexpected number of range")
        return super().reshape(bottoms)

    def touches(self, run):
        device = "host" if run.mode == "gpu" else "device"
        t = [touch.bottom(0, "data", "forward", device=device), touch.top(0, "data", "forward", device=device)]
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward", device=device), touch.bottom(0, "diff", "backward", device=device)]
        return t
