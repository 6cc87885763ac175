"""Pooling (MAX/AVE/STOCHASTIC, global, ceil or floor rounding and the pad clip rule) and SPP."""
import math

from . import touch
from ..errors import InputError
from .base import CUDNN_2015_FORKS, Layer, count, float32, register

MAX, AVE, STOCHASTIC = 0, 1, 2
CEIL, FLOOR = 0, 1


def pooling_geometry(layer, param, shape):
    """(kernel, stride, pad) as (h, w) pairs: PoolingLayer::LayerSetUp's rules and checks."""
    has = param.HasField
    if param.global_pooling:
        layer.check(not (has("kernel_size") or has("kernel_h") or has("kernel_w")),
                    "with global_pooling: true the filter size cannot be specified",
                    fix="remove kernel_size / kernel_h / kernel_w")
    else:
        layer.check(has("kernel_size") != (has("kernel_h") and has("kernel_w")),
                    "the filter size is kernel_size OR kernel_h and kernel_w; not both")
        layer.check(has("kernel_size") or (has("kernel_h") and has("kernel_w")),
                    "for non-square filters both kernel_h and kernel_w are required")
    for name in ("pad", "stride"):
        one, h, w = has(name), has(f"{name}_h"), has(f"{name}_w")
        layer.check((not one and h and w) or (not h and not w),
                    f"{name} is {name} OR {name}_h and {name}_w (both of them)")
    if len(shape) != 4:
        layer.fail(f"Pooling needs a 4-axis bottom (num, channels, height, width), got {tuple(shape)}",
                   fix="Caffe stops here too, but 3D-Caffe's Pooling pools any number of axes: if the net is that "
                       "fork's (yulequan/3D-Caffe), give --fork caffe3d", fork="caffe3d")
    if param.global_pooling:
        kernel = (shape[2], shape[3])
    elif has("kernel_size"):
        kernel = (param.kernel_size,) * 2
    else:
        kernel = (param.kernel_h, param.kernel_w)
    layer.check(kernel[0] > 0 and kernel[1] > 0, "filter dimensions cannot be zero")
    pad = (param.pad_h, param.pad_w) if has("pad_h") else (param.pad, param.pad)
    stride = (param.stride_h, param.stride_w) if has("stride_h") else (param.stride, param.stride)
    if param.global_pooling:
        layer.check(pad == (0, 0) and stride == (1, 1), "with global_pooling: true only pad 0 and stride 1 work")
    if pad != (0, 0):
        check_pad(layer, param.pool, kernel, pad)
    return kernel, stride, pad


def check_pad(layer, pool, kernel, pad):
    layer.check(pool in (MAX, AVE), "padding is implemented only for average and max pooling")
    if pad[0] >= kernel[0] or pad[1] >= kernel[1]:
        layer.fail(f"pad {pad} must be smaller than the kernel {kernel}")


def pooled_size(layer, size, kernel, stride, pad, round_mode=CEIL, padded=None):
    """Caffe's rounding (in float), then the clip that starts the last window inside the image.

    PoolingLayer::Reshape clips both axes when either is padded (`if (pad_h_ || pad_w_)`):
    `padded` says whether the layer pads at all (default: this axis's pad)."""
    layer.check(stride > 0, "stride must be positive")  # Caffe would divide by zero
    ratio = float32(float32(size + 2 * pad - kernel) / float32(stride))
    out = int(math.ceil(ratio) if round_mode == CEIL else math.floor(ratio)) + 1
    if pad if padded is None else padded:
        if (out - 1) * stride >= size + pad:
            out -= 1
        if (out - 1) * stride >= size + pad:
            layer.fail(f"the last pooling window would start in the padding ({size} + pad {pad}, stride {stride})")
    return out


@register("Pooling")
class Pooling(Layer):
    exact_bottoms = 1
    min_tops = 1

    @property
    def max_tops(self):
        return 2 if self.lp.pooling_param.pool == MAX else 1  # MAX pooling may output its mask

    def reshape(self, bottoms):
        shape = bottoms[0]
        p = self.lp.pooling_param
        kernel, stride, pad = pooling_geometry(self, p, shape)
        rounding, padded = self.rounding(), any(pad)
        h = pooled_size(self, shape[2], kernel[0], stride[0], pad[0], rounding, padded)
        w = pooled_size(self, shape[3], kernel[1], stride[1], pad[1], rounding, padded)
        top = (shape[0], shape[1], h, w)
        return [top] * max(1, len(self.lp.top))

    def bottom_for(self, top_index, shape, bottom):
        """The image whose windows tile exactly into `shape`, (out - 1) x stride + kernel - 2 x pad on
        each axis (a label pooled to its prediction's size: GoogLeNet's 7x7 map from 14x14); None for
        global pooling or where no bottom pools to it."""
        p = self.lp.pooling_param
        if p.global_pooling or len(shape) != 4:
            return None
        kernel, stride, pad = pooling_geometry(self, p, shape)
        sizes = tuple((out - 1) * s + k - 2 * q for out, k, s, q in zip(shape[2:], kernel, stride, pad))
        try:
            if min(sizes) < 1 or tuple(pooled_size(self, size, k, s, q, self.rounding(), any(pad)) for size, k, s, q
                                       in zip(sizes, kernel, stride, pad)) != tuple(shape[2:]):
                return None
        except InputError:
            return None
        return tuple(shape[:2]) + sizes

    def rounding(self):
        """CEIL or FLOOR: BVLC's round_mode (default CEIL)."""
        return self.lp.pooling_param.round_mode

    def touches(self, run):
        """MAX pooling keeps each output's argmax in max_idx_ (int32) unless a second top holds the
        mask (Caffe's engine even in cuDNN builds); STOCHASTIC keeps rand_idx_ in training.
        Backward reads only the first top's diff."""
        t = [x for x in super().touches(run) if not (x.what == "top" and x.part == "diff" and x.index > 0)]
        pool = self.lp.pooling_param.pool
        if self.cudnn_2015(run):
            return t  # cuDNN pooling keeps no argmax
        if pool == 0 and len(run.tops) == 1:
            t.append(touch.buffer("max_idx_", count(run.tops[0]), "forward", per_sample=True))
        elif pool == 2 and run.phase == "TRAIN":
            t.append(touch.buffer("rand_idx_", count(run.tops[0]), "forward", per_sample=True))
        return t

    def cudnn_2015(self, run):
        """The 2015 forks' factory (caffe-segnet's, caffe-fast-rcnn's), unlike BVLC's, gives MAX
        pooling to cuDNN too: any pooling in a cuDNN build without padding and with one top,
        unless it asks for the CAFFE engine."""
        p = self.lp.pooling_param
        return (self.ctx.schema in CUDNN_2015_FORKS and run.mode == "gpu" and run.engine == "cudnn"
                and p.engine != 1 and not (p.pad or p.pad_h or p.pad_w) and len(run.tops) == 1)


@register("Pooling", fork="priv")
class CeilModePooling(Pooling):
    """caffe-priv's PoolingLayer: BVLC's, with BVLC/caffe#3057's `ceil_mode` (field 13, default true)
    in place of BVLC's later `round_mode`. Its Reshape (caffe-priv src/caffe/layers/pooling_layer.cpp
    91-114, the pull request's lines) rounds (H + 2*pad - kernel) / stride, a float division, up
    with ceil_mode and down without, adds 1, then keeps BVLC's clip: when the layer pads at all, a
    last window that would start in the padding (at or past H + pad) is dropped, on both axes. Its
    buffers are BVLC's (max_idx_, rand_idx_); the layer factory is BVLC's too (cuDNN for AVE)."""

    def rounding(self):
        return CEIL if self.lp.pooling_param.ceil_mode else FLOOR

    @classmethod
    def sized_as(cls, lp):
        """BVLC's Pooling sizes a layer that keeps ceil_mode true (the default) the same way."""
        return Pooling if lp.pooling_param.ceil_mode else cls


@register("SPP")
class SPP(Layer):
    """Spatial pyramid pooling: level l pools into 2^l x 2^l bins, flattened and concatenated on axis 1.

    Each level is an internal Pooling layer whose kernel and stride are ceil(size / bins) and whose pad
    is (kernel * bins - size + 1) / 2, so Pooling's pad checks apply to it.
    """

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        shape = bottoms[0]
        self.check(len(shape) == 4, f"SPP needs a 4-axis bottom (num, channels, height, width), got {tuple(shape)}")
        n, c, h, w = shape
        self.check(h > 0 and w > 0, "input dimensions cannot be zero")
        levels = self.lp.spp_param.pyramid_height
        self.check(levels >= 1, "SPP needs pyramid_height of at least 1", fix="set spp_param { pyramid_height: N }")
        bins = [self._bins(level, h, w) for level in range(levels)]
        if levels == 1:
            return [(n, c) + bins[0]]
        return [(n, sum(c * ph * pw for ph, pw in bins))]

    def _bins(self, level, h, w):
        bins = 2 ** level
        kernels = [math.ceil(size / bins) for size in (h, w)]
        pads = [(k * bins - size + 1) // 2 for k, size in zip(kernels, (h, w))]
        if pads != [0, 0]:
            check_pad(self, self.lp.spp_param.pool, tuple(kernels), tuple(pads))
        return tuple(pooled_size(self, size, k, k, p, padded=any(pads)) for size, k, p in zip((h, w), kernels, pads))
