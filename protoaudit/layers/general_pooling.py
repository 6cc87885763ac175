"""Generalized pooling's Caffe (chl260/general-pooling c65d6a2: Lee, Gallagher and Tu, "Generalizing
Pooling Functions in Convolutional Neural Networks: Mixed, Gated, and Tree", AISTATS 2016), as its
sources shape its layers.

The fork is a March 2015 BVLC Caffe with four pooling layers added: TreepoolKernel1L and
TreepoolKernel2L (tree pooling of depth 1 and 2), TreepoolMaxAve (gated max-average pooling) and
GatedMaxAve (its lighter version). All four read convolution_param's kernel_size and stride, pad
nothing, and have GPU code only: Forward_cpu and Backward_cpu log "Enter CPU code ...." and compute
nothing. Its data layers' BasePrefetchingDataLayer holds ONE batch on the host and copies it into
the tops (ForkPrefetching). The rest of the net is counted as BVLC 9b89154's layers, as for the other
forks here.

File and line references are to that commit's src/caffe/layers/treepool_*.cpp/.cu,
base_data_layer.cpp/.cu and include/caffe/{vision,data}_layers.hpp.
"""
from . import touch
from .base import Layer, count, legacy_shape, register
from .data import RNG_BYTES, Data as BVLCData, ImageData as BVLCImageData

FORK = "general_pooling"


class ForkPrefetching:
    """The fork's BasePrefetchingDataLayer (data_layers.hpp:54-79): one batch, prefetch_data_ and
    prefetch_label_ (the tops' sizes), allocated on the host at setup before its thread starts
    (base_data_layer.cpp:38-41); each forward copies it into the tops, which own their buffers, on
    the host (cpp:59-80) or the device (base_data_layer.cu:8-26). So the device holds the tops
    alone. Its InternalThread (internal_thread.cpp) keeps no RNG of its own: the layer's RNGs are
    the transformer's and, for a shuffled list, ImageData's. Mixed in before a BVLC data-layer class, whose mean, decoding and list
    touches it keeps."""

    def touches(self, run):
        kept = [t for t in super().touches(run)
                if t.kind != "prefetch" and t.name != "RNGs" and not (t.what == "top" and t.stage == "setup")]
        t = [touch.top(j, "data", "forward") for j in range(len(run.tops))]
        t += [touch.buffer(f"prefetch_{name}", count(shape), "setup", per_sample=True, kind="prefetch", device="host",
                           note="x".join(map(str, shape)))
              for name, shape in zip(("data_", "label_"), run.tops)]
        rngs = self.rngs(run)
        if rngs:
            t.append(touch.host("RNGs", rngs * RNG_BYTES, "the transformer's" + (" and the list's shuffle" if rngs > 1 else "")))
        return t + kept


@register("Data", fork=FORK)
class Data(ForkPrefetching, BVLCData):
    """DataLayer (data_layer.cpp:19-70): a cursor of its own, the first record shaped as BVLC's."""


@register("ImageData", fork=FORK)
class ImageData(ForkPrefetching, BVLCImageData):
    pass


class _Treepool(Layer):
    """What the four layers share (each LayerSetUp and Reshape): KSIZE_ and STRIDE_ from
    convolution_param, no pad, and a top of (N, C, PH, PW) with PH = ceil((H - K) / S) + 1 (and
    PW alike), computed in float. The parameters are `weights` blobs of (1, 1, K, K), filled at
    setup. bias_multiplier2_, K*K ones, is a SyncedMemory set on the host at setup, and the GPU
    backward reads its device copy. Backward writes every parameter's diff and the bottom's diff
    whatever propagate_down says (none of them reads it)."""

    exact_bottoms = 1
    exact_tops = 1
    weights = 0  # parameter blobs
    multiplier2 = True  # bias_multiplier2_ (GatedMaxAve's is commented out)
    forward_buffers = ()  # Blobs of the top's shape the GPU forward writes
    backward_buffers = ()  # ... that the GPU backward first writes
    col_diff = True  # col_buffer_ (K*K x top count) and bottom_diff_buffer_ (bottom count x K*K)

    def geometry(self):
        p = self.lp.convolution_param  # the fork's singular fields, read as lists (base.View)
        k = p.kernel_size[0] if p.kernel_size else 0
        s = p.stride[0] if p.stride else 1  # the fork's default
        self.check(k > 0, f"{self.lp.type} reads convolution_param's kernel_size, which is not given",
                   fix="give convolution_param { kernel_size: K }")
        self.check(s > 0, f"{self.lp.type}'s stride must be positive (it divides by it)")
        return k, s

    def reshape(self, bottoms):
        n, c, h, w = legacy_shape(self, bottoms[0])
        k, s = self.geometry()
        return [(n, c, -((k - h) // s) + 1, -((k - w) // s) + 1)]

    def param_shapes(self, bottoms):
        k, _ = self.geometry()
        return [(1, 1, k, k)] * self.weights

    def touches(self, run):
        k, _ = self.geometry()
        pooled = count(run.tops[0])
        shape = "x".join(map(str, run.tops[0]))
        t = [touch.param(j, "data", "setup") for j in range(run.num_params)]
        t += self.host_touches(run)
        if run.mode != "gpu":  # Forward_cpu and Backward_cpu compute nothing
            return t
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        t += [touch.buffer(name, pooled, "forward", per_sample=True, note=shape) for name in self.forward_buffers]
        t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        t += [touch.buffer(name, pooled, "backward", per_sample=True, note=shape) for name in self.backward_buffers]
        if self.col_diff:
            t += [touch.buffer("col_buffer_", k * k * pooled, "backward", per_sample=True, note=f"{k}x{k}x{shape}"),
                  touch.buffer("bottom_diff_buffer_", count(run.bottoms[0]) * k * k, "backward", per_sample=True,
                               note="x".join(map(str, run.bottoms[0])) + f"x{k}x{k}")]
        t += [touch.param(j, "diff", "backward") for j in range(run.num_params)]
        if self.multiplier2:
            t.append(touch.buffer("bias_multiplier2_", k * k, "backward", per_sample=False, note=f"{k}x{k} ones"))
        return t

    def host_touches(self, run):
        if not self.multiplier2:
            return []
        k, _ = self.geometry()
        return [touch.buffer("bias_multiplier2_ (host)", k * k, "setup", per_sample=False, device="host",
                             note=f"{k}x{k} ones")]


@register("TreepoolKernel1L", fork=FORK)
class TreepoolKernel1L(_Treepool):
    """TreepoolKernel1LLayer (treepool_kernel_1layer.cpp/.cu): a tree of depth 1, two leaf filters
    v1, v2 and the gate weight1 (cpp:40-49). Its LayerSetUp also makes bias_multiplier_ of
    top[0]->count() floats (cpp:52-58), read before Reshape sizes the top: a fresh top's count is
    0, so it holds nothing. The GPU forward writes split_buffer1_/2_ and resp_buffer1_/2_ (cu:93-96),
    the backward mat_buffer_, col_buffer_ and bottom_diff_buffer_ (cu:202-204)."""

    weights = 3
    forward_buffers = ("split_buffer1_", "split_buffer2_", "resp_buffer1_", "resp_buffer2_")
    backward_buffers = ("mat_buffer_",)


@register("TreepoolKernel2L", fork=FORK)
class TreepoolKernel2L(_Treepool):
    """TreepoolKernel2LLayer (treepool_kernel_2layer.cpp/.cu): a tree of depth 2, four leaf filters
    and three gates (cpp:40-59). The GPU forward writes split_buffer1_-3_, split_buffer1c_-3c_ and
    resp_buffer1_-4_ (cu:108-117); the backward mat_buffer1_/2_, col_buffer_ and bottom_diff_buffer_."""

    weights = 7
    forward_buffers = ("split_buffer1_", "split_buffer2_", "split_buffer3_", "split_buffer1c_", "split_buffer2c_",
                       "split_buffer3c_", "resp_buffer1_", "resp_buffer2_", "resp_buffer3_", "resp_buffer4_")
    backward_buffers = ("mat_buffer1_", "mat_buffer2_")


@register("TreepoolMaxAve", fork=FORK)
class TreepoolMaxAve(_Treepool):
    """TreepoolMaxAveLayer (treepool_max_ave.cpp/.cu): max and average pooling mixed by a learned
    K x K gate (cpp:40-46). The GPU forward writes split_buffer1_/2_, top_buffer1_/2_, mat_buffer_
    and poolsize_buffer_ (cu:128-133); the backward col_buffer_ and bottom_diff_buffer_."""

    weights = 1
    forward_buffers = ("split_buffer1_", "split_buffer2_", "top_buffer1_", "top_buffer2_", "mat_buffer_",
                       "poolsize_buffer_")


@register("GatedMaxAve", fork=FORK)
class GatedMaxAve(_Treepool):
    """GatedMaxAveLayer (treepool_max_ave_efficient.cpp/.cu): TreepoolMaxAve's gate without its
    buffers (their Reshapes are commented out, cpp:70-77). LayerSetUp sets bias_multiplier1_,
    N*C*PH*PW ones (the top's size, from the bottom's shape at setup), on the host (cpp:42-47); the
    GPU backward reads its device copy and writes weight1_diff_buffer_, K*K x the top's count
    (cpp:78, cu:201-225)."""

    weights = 1
    multiplier2 = False
    col_diff = False

    def host_touches(self, run):
        return [touch.buffer("bias_multiplier1_ (host)", count(run.tops[0]), "setup", per_sample=True, device="host",
                             note="x".join(map(str, run.tops[0])) + " ones")]

    def touches(self, run):
        t = super().touches(run)
        if run.mode != "gpu":
            return t
        k, _ = self.geometry()
        pooled = count(run.tops[0])
        shape = "x".join(map(str, run.tops[0]))
        return t + [touch.buffer("weight1_diff_buffer_", k * k * pooled, "backward", per_sample=True,
                                 note=f"{k}x{k}x{shape}"),
                    touch.buffer("bias_multiplier1_", pooled, "backward", per_sample=True, note=shape + " ones")]
