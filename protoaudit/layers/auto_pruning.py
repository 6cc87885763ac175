"""Auto_pruning's Caffe (NHZlX/Auto_pruning 237d8ed): a 2017 BVLC Caffe with Dynamic Network Surgery's
compressed layers, pruned on a schedule (upper_bound, iter_stop, inter_iter), as its sources shape them.

CConvolution and CInnerProduct are BVLC's Convolution and InnerProduct (base_conv_layer.cpp and
sgd_solver.cpp are BVLC's files) with two things more: the weight's mask, appended to blobs_ in
LayerSetUp and so a learnable parameter of the net (default lr_mult 1: the solver gives it a diff and
its history, though no backward writes its diff), and weight_tmp_, the masked weight each forward
writes and both GEMMs read. Every inter_iter-th TRAIN iteration until iter_stop the forward rebuilds
the mask on the host from the weight's host copy (made by the filler at setup) in a vector of
(value, index) pairs freed before it returns. Both are registered as classes: never cuDNN.

Its ConvolutionDepthwise is MobileNet-YOLO's reformatting of farmingyard's (conv_dw_layer.cu and .hpp
are goodluckcwl/custom-caffe's byte for byte), but for its Reshape filling bias_multiplier_ through
mutable_gpu_data (conv_dw_layer.cpp:128-129). File:line references are to src/caffe/layers/ there.
"""
from . import goodluckcwl, touch
from .base import carry, count, register
from .conv import Convolution
from .dense import InnerProduct

FORK = "auto_pruning"


class _Pruned:
    """What both compressed layers add to their base layer, the mask's index being `blob_num_`."""

    param_name = ""

    def param_shapes(self, bottoms):
        shapes = super().param_shapes(bottoms)
        return shapes + [shapes[0]]  # the mask: a Blob of blobs_[0]'s shape

    def pruning_touches(self, run):
        """weight_tmp_ (the weight's shape), and the integer `iter_ % inter_iter_` every TRAIN
        forward takes first (inter_iter is a float field read into an int)."""
        p = self.fork_param(self.param_name)
        if run.phase == "TRAIN" and int(p.inter_iter) == 0:
            return [touch.stop("forward", f"{self.lp.type}: inter_iter {p.inter_iter:g} is 0 as an int, and every "
                               "TRAIN forward takes iter_ % inter_iter_ (an integer division by zero)",
                               fix=f"give {self.param_name} an inter_iter of 1 or more")]
        shape = self.param_shapes(run.bottoms)[0]
        return [touch.buffer("weight_tmp_", count(shape), "forward", per_sample=False,
                             note="x".join(map(str, shape)) + " (the masked weight)")]


@register("CConvolution", fork=FORK)
class CConvolution(_Pruned, Convolution):
    """BaseConvolutionLayer's setup and shape rule (compress_conv_layer.cpp:17, :45-59), then the mask
    (cpp:22-28) and weight_tmp_ (cpp:31). Forward: weight_tmp_ = weight x mask (cu:66-72), BVLC's
    GEMMs and col_buffer_ with it (cu:75-85). Backward: BVLC's, reading weight_tmp_, then the weight's
    diff times the mask (cu:89-122); the mask's diff is never written."""

    param_name = "cconvolution_param"

    def uses_cudnn(self, run):
        return False

    def touches(self, run):
        return super().touches(run) + self.pruning_touches(run)


@register("CInnerProduct", fork=FORK)
class CInnerProduct(_Pruned, InnerProduct):
    """InnerProductLayer's setup without `transpose`: the weight is always (num_output, K)
    (compress_inner_product_layer.cpp:37-40), then the mask (cpp:58-64) and weight_tmp_ (cpp:67);
    bias_multiplier_ (M) set to ones on the host in Reshape (cpp:99-103). Forward and backward as
    CConvolution's (cu:26-119). Its CPU code takes the mask as blobs_[2] (cpp:111, 158): without a
    bias there is no such blob."""

    param_name = "cinner_product_param"

    def param_shapes(self, bottoms):
        _, k, n = self._dims(bottoms)
        shapes = [(n, k), (n,)] if self.param.bias_term else [(n, k)]
        return shapes + [shapes[0]]

    def touches(self, run):
        if run.mode == "cpu" and not self.param.bias_term:
            return [touch.stop("forward", "CInnerProduct's Forward_cpu reads the mask as blobs_[2] "
                               "(compress_inner_product_layer.cpp:111), which a layer without a bias does not have",
                               fix="audit it in GPU mode (--mode gpu), whose code finds the mask, or give it a bias")]
        mask = run.num_params - 1
        t = [x for x in super().touches(run) if not (x.what == "param" and x.part == "diff" and x.index == mask)]
        return t + self.pruning_touches(run)


class ConvolutionDepthwise(goodluckcwl.ConvolutionDepthwise):
    """goodluckcwl's ConvolutionDepthwise, but with a bias Reshape's caffe_set (a host loop) writes
    bias_multiplier_'s device pointer (conv_dw_layer.cpp:128-129): in any mode, Caffe stops there.
    It claims files, so that the fork's MobileNets (CConvolution beside it) read whole, but is not lent
    to another fork's reading; a file only shufflenet's types name stays shufflenet's
    (read.schema.DESCENDS_FROM)."""

    claims_files = True
    lent = False

    def touches(self, run):
        if self.lp.convolution_param.bias_term:
            return [touch.stop("setup", "ConvolutionDepthwise's Reshape fills bias_multiplier_ with a host "
                               "caffe_set on its mutable_gpu_data (conv_dw_layer.cpp:128-129): a host write to "
                               "device memory", fix="give it bias_term: false (add the bias with a Scale or Bias "
                               "layer)")]
        return super().touches(run)


carry(__name__, FORK, ConvolutionDepthwise)
