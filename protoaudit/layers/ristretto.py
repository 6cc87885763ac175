"""Ristretto's layers (pmgysel/caffe 614963c), read from src/caffe/ristretto/layers and
include/ristretto/base_ristretto_layer.hpp.

Each is BVLC's layer of the same kind with the ristretto quantization_param read in its
constructor; each is registered as a class (REGISTER_LAYER_CLASS), so it never runs cuDNN. The
convolutions and FcRistretto keep weights_quantized_ (base_ristretto_layer.hpp:74), a copy of the
weight and the bias made in LayerSetUp, which each forward fills and quantizes and which the
backward multiplies by.
"""
from . import touch
from .base import count, register
from .conv import Convolution, Deconvolution
from .dense import InnerProduct
from .normalization import LRN

FORK = "ristretto"
MINIFLOAT = 1  # QuantizationParameter.Precision
ACROSS_CHANNELS = 0  # LRNParameter.NormRegion


def _quantized_copies(layer, run):
    """weights_quantized_[0] and [1]: Blobs of the weight's and the bias's shapes (LayerSetUp),
    first written by the forward's caffe_copy from blobs_ (conv_ristretto_layer.cu:20-25,
    fc_ristretto_layer.cu:19-23, deconv_ristretto_layer.cu alike)."""
    shapes = layer.param_shapes(run.bottoms)
    names = ("weights_quantized_[0]", "weights_quantized_[1]")
    return [touch.buffer(name, count(shape), "forward", per_sample=False, note="x".join(map(str, shape)))
            for name, shape in zip(names, shapes)]


class _Quantized:
    def uses_cudnn(self, run):
        return False

    def touches(self, run):
        return super().touches(run) + _quantized_copies(self, run)


@register("ConvolutionRistretto", fork=FORK)
class ConvolutionRistretto(_Quantized, Convolution):
    """ConvolutionLayer's setup from convolution_param (conv_ristretto_layer.cpp:42-213), plus
    weights_quantized_ (cpp:215-219); its forward and backward are ConvolutionLayer's GEMMs with the
    quantized weight (cu:10-82). Registered at cpp:302."""


@register("DeconvolutionRistretto", fork=FORK)
class DeconvolutionRistretto(_Quantized, Deconvolution):
    """DeconvolutionLayer with weights_quantized_ (deconv_ristretto_layer.cpp:42-219), registered at cpp:303."""


@register("FcRistretto", fork=FORK)
class FcRistretto(_Quantized, InnerProduct):
    """InnerProductLayer's setup from inner_product_param (fc_ristretto_layer.cpp:43-88), plus
    weights_quantized_ (cpp:89-97), its forward and backward the same GEMMs with the quantized weight
    (fc_ristretto_layer.cu)."""


@register("LRNRistretto", fork=FORK)
class LRNRistretto(LRN):
    """LRNLayer whose constructor refuses any precision but minifloat (lrn_ristretto_layer.cpp:14-28:
    the default, DYNAMIC_FIXED_POINT, included). Only ACROSS_CHANNELS has a forward (its own kernel
    into scale_, lrn_ristretto_layer.cu:80-90), and only on the GPU: Forward_cpu and Backward_cpu
    are LOG(FATAL) (cpp:32-43)."""

    def reshape(self, bottoms):
        self.check(self.fork_param("quantization_param").precision == MINIFLOAT, "LRN layer only supports minifloat",
                   fix="give it quantization_param { precision: MINIFLOAT }")
        return super().reshape(bottoms)

    def touches(self, run):
        if self.lp.lrn_param.norm_region != ACROSS_CHANNELS:
            return [touch.stop("forward", "LRNRistretto: Unsupported normalization region: WITHIN_CHANNEL "
                               "(lrn_ristretto_layer.cu:84-87)", fix="use ACROSS_CHANNELS")]
        if run.mode != "gpu":
            return [touch.stop("forward", "LRNRistrettoLayer not implemented on CPU yet. (lrn_ristretto_layer.cpp:35)")]
        t = [x for x in super().touches(run) if x.what != "buffer"]
        return t + [touch.buffer("scale_", count(run.bottoms[0]), "forward", per_sample=True)]
