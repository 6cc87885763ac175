"""DeconvNet's Caffe's own layers (HyeonwooNoh/caffe, commit d9e8494, the Caffe HyeonwooNoh/DeconvNet
builds): its V1 BN and UNPOOLING, as its sources shape them.

The fork predates V2 layers: its nets say `layers { type: BN }` and `type: UNPOOLING`, which its
layer factory creates as BNLayer and UnpoolingLayer (bn_layer.cpp:419, layer_factory.cpp:65-78),
V2 "BN" and "Unpooling" (protoaudit.read.upgrade.FORK_V1_TYPES). A MAX POOLING layer's second top
is BVLC's unpooling mask (the argmax of each output), which UNPOOLING takes as its second bottom.
File and line references are to that commit's src/caffe/layers/*.cpp/.cu and include/caffe/*.hpp.
"""
from . import segnet, touch
from .base import Layer, legacy_shape, register

FORK = "deconvnet"
MAX = 0  # UnpoolingParameter.UnpoolMethod


@register("BN", fork=FORK)
class BN(segnet.BN):
    """BNLayer: caffe-segnet's bn_layer.cpp and bn_layer.cu, the same code line for line (only a
    comment and the registration differ), with the same BNParameter."""


@register("Unpooling", fork=FORK)
class Unpooling(Layer):
    """UnpoolingLayer: scatters each input to the position its mask (bottom 1, MAX only) names in a
    larger map, or spreads it over its window (AVE, TILE).

    The top is (N, C, unpool_h, unpool_w) from unpool_size or unpool_h/unpool_w (cpp:72-77,
    99-100), one of which LayerSetUp requires (cpp:35-39: its fallback to a size computed from the
    kernel and stride, cpp:78-97, is never reached); only zero padding is allowed (cpp:56-57). One or two bottoms, two only for MAX (vision_layers.hpp:509-516).
    It keeps no buffer: forward writes the top (cpp:105-, cu:113-114); backward returns unless
    bottom 0 needs a diff, then writes it (cu:245-253), never the mask's."""

    min_bottoms = 1
    exact_tops = 1

    @property
    def max_bottoms(self):
        return 2 if self.fork_param("unpooling_param").unpool == MAX else 1

    def reshape(self, bottoms):
        p = self.fork_param("unpooling_param")
        has = p.HasField
        self.check(has("kernel_size") != (has("kernel_h") and has("kernel_w")),
                   "Filter size is kernel_size OR kernel_h and kernel_w; not both", fix="set kernel_size: 2")
        self.check((not has("pad") and has("pad_h") and has("pad_w")) or not (has("pad_h") or has("pad_w")),
                   "pad is pad OR pad_h and pad_w are required.")
        self.check((not has("stride") and has("stride_h") and has("stride_w")) or not (has("stride_h") or has("stride_w")),
                   "Stride is stride OR stride_h and stride_w are required.")
        self.check((not has("unpool_size") and has("unpool_h") and has("unpool_w"))
                   or (has("unpool_size") and not has("unpool_h") and not has("unpool_w")),
                   "Unpool is unpool_size OR unpool_h and unpool_w are required.",
                   fix="set unpool_size (the map's size before its pooling), or both unpool_h and unpool_w")
        kh, kw = (p.kernel_size, p.kernel_size) if has("kernel_size") else (p.kernel_h, p.kernel_w)
        self.check(kh > 0 and kw > 0, "Filter dimensions cannot be zero.")
        pad = (p.pad_h, p.pad_w) if has("pad_h") else (p.pad, p.pad)
        self.check(pad == (0, 0), "currently, only zero padding is allowed.", fix="remove pad")
        n, c = legacy_shape(self, bottoms[0])[:2]
        size = (p.unpool_size, p.unpool_size) if has("unpool_size") else (p.unpool_h, p.unpool_w)
        return [(n, c) + size]

    def touches(self, run):
        t = [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))] + [touch.top(0, "data", "forward")]
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t
