"""L-Softmax's Caffe (wy1iu/LargeMargin_Softmax_Loss c3e9f20): a BVLC Caffe of early 2017 with
LargeMarginInnerProduct and BN. File references are to that commit's src/caffe/layers/ and
include/caffe/layers/. Its Makefile puts ./src before ./include on the include path (:174), so
bn_layer.cpp builds against src/caffe/layers/bn_layer.hpp, PSPNet's header (the one in include/
declares other members and is never used); the layer factory registers BN alone (bn_layer.cpp:318),
never cudnn_bn_layer. Its BasePrefetchingDataLayer keeps PREFETCH_COUNT = 3 batches and copies them
into the tops (base_data_layer.hpp:71-79, base_data_layer.cu:8-26), as the SSD fork's; its Accuracy
has CPU code only (no accuracy_layer.cu).
"""
from . import enet, pspnet, ssd, sphereface, touch
from .base import carry, layer_class, legacy_shape, register

FORK = "largemargin"

carry(__name__, FORK, ssd.SSDData, ssd.SSDImageData, ssd.SSDWindowData, enet.Accuracy)


@register("LargeMarginInnerProduct", fork=FORK)
class LargeMarginInnerProduct(sphereface.MarginInnerProduct):
    """L-Softmax's inner product, SphereFace's MarginInnerProduct's forerunner: the same bottoms,
    tops, weight (num_output, K) and margin types (m = type + 1), whose temporaries Reshape sizes
    as SphereFace's do (largemargin_inner_product_layer.cpp:71-102): cos_theta_ and sign_0_
    (M x N), and cos_theta_quadratic_; + cos_theta_cubic_, sign_1_, sign_2_; or + cos_theta_cubic_,
    cos_theta_quartic_, sign_3_, sign_4_ for DOUBLE, TRIPLE, QUADRUPLE. Unlike SphereFace's it keeps
    the weight as it is and its norms in w_norm_ (N) beside x_norm_ (M) (cpp:72-75; cu:314-322).

    Every forward writes lambda = max(base * (1 + gamma * iter)^-power, lambda_min) into top 1 on the
    host (cpp:108-115, cu:298-305), iter_ counting from `iteration` (cpp:23): values, no memory. The
    CPU code's Blobs local to a pass (xw_norm_product_, M x N, forward, cpp:129-130; inv_w_norm_ and
    xw_norm_ratio_ backward, cpp:245-248) are freed when it returns; the GPU code has none."""

    lambda_line = "largemargin_inner_product_layer.cpp:69 and :115"

    def param(self):
        return self.fork_param("largemargin_inner_product_param")

    def norms(self, m, n):
        return [touch.buffer("x_norm_", m, "forward", per_sample=True, note=f"{m} (one norm per row)"),
                touch.buffer("w_norm_", n, "forward", per_sample=False, note=f"{n} (one norm per output)")]


@register("BN", fork=FORK)
class BN(pspnet.BN):
    """PSPNet's BNLayer (the same header, and the same buffers in bn_layer.cpp/.cu), but its four
    parameters are (1, C) (cpp:22-42) and its LayerSetUp leaves the ParamSpecs as the file gives
    them (cpp:12-45): the moving mean and variance learn unless the file says lr_mult: 0 (backward
    writes only the slope's and bias's diffs, cu:155-180; the solver updates all four). frozen
    keeps the moving statistics (cpp:83-103, cu:22-41)."""

    @classmethod
    def sized_as(cls, lp):
        """Its buffers and bytes are PSPNet's: a file whose only fork layer is BN stays PSPNet's."""
        return layer_class("BN", "pspnet")

    def param_shapes(self, bottoms):
        return [(1, legacy_shape(self, bottoms[0])[1])] * 4
