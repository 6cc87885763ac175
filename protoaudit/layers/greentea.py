"""naibaf7's OpenCL Caffe (naibaf7/caffe at 2996015, June 2018: Greentea, the fork that became BVLC's
opencl branch), as its sources shape the layers its connectomics nets use: Pooling with dilation,
MergeCrop, MalisLoss, Affinity, ConnectedComponent, N-D MemoryData, and LibDNN's convolutions.

File and line references are to that commit's src/caffe/layers/*.cpp/.cu, include/caffe/layers/*.hpp
and src/caffe/layer_factory.cpp. What protoaudit counts is the fork's default build (CMakeLists.txt:
54-72: OpenCL, USE_LIBDNN on, USE_CUDNN off, USE_INDEX_64 off, so int_tp is 4 bytes): there the
layer factory makes every Convolution, Deconvolution and Pooling on a GPU device a LibDNN layer
(layer_factory.cpp:174-181, 300-303, 356-363), whatever --engine says; a build with cuDNN is not
counted. Its EuclideanLoss takes a third bottom, its cuDNN neurons 5-axis blobs; its other layers
(Softmax, SoftmaxWithLoss, Eltwise, DummyData...) are sized with BVLC's classes.
"""
import math

from . import touch
from .activations import Neuron
from .base import Assumption, Layer, canonical_axis, count, float32, fork_note, legacy_shape, register
from .conv import Convolution as BVLCConvolution, Deconvolution as BVLCDeconvolution
from .data import MemoryData as BVLCMemoryData
from .losses import EuclideanLoss as BVLCEuclideanLoss, Loss
from .pooling import Pooling as BVLCPooling

FORK = "greentea"
STACK = 0  # MergeCropParameter.MergeOp


@register("Pooling", fork=FORK)
class Pooling(BVLCPooling):
    """PoolingLayer, N-D and dilated (pooling_layer.cpp). The channel axis is pooling_param.axis
    (cpp:28-33); kernel_size, stride, pad and dilation are given once or once per spatial axis, or as
    _h/_w pairs for 2 axes (cpp:40-153). Each spatial axis pools an extended kernel (k - 1) x dilation
    + 1 (cpp:195-196) into ceil(float(size + 2 pad - extended) / stride) + 1 (cpp:197-199), and an axis
    that is padded drops a last window starting in its padding (cpp:200-209: the axis's own pad, not
    BVLC's either-axis test). Global pooling takes the whole of each axis (cpp:83-87).

    Its buffers are BVLC's: max_idx_ (int_tp, 4 bytes, per top element) for MAX with one top
    (cpp:218-221; written by LibDNNPoolingLayer's forward, libdnn_pool_layer.cpp:134-138), rand_idx_
    for STOCHASTIC in training (libdnn_pool_layer.cpp:140-146). The geometry Blob<int_tp>s are read on
    the host by LibDNN (libdnn_pool_layer.cpp:43-46) and are not counted."""

    def reshape(self, bottoms):
        shape = tuple(bottoms[0])
        axis, kernel, stride, pad, dilation = self.geometry(shape)
        out = list(shape)
        for i, (size, k, s, p, d) in enumerate(zip(shape[axis + 1:], kernel, stride, pad, dilation)):
            extended = (k - 1) * d + 1
            pooled = int(math.ceil(float32(float32(size + 2 * p - extended) / s))) + 1
            if p > 0:
                if (pooled - 1) * s >= size + p:
                    pooled -= 1
                self.check((pooled - 1) * s < size + p, f"the last pooling window on spatial axis {i} would start "
                           f"in the padding ({size} + pad {p}, stride {s}; CHECK_LT, pooling_layer.cpp:207-208)")
            self.check(pooled > 0, f"the extended kernel {extended} (kernel {k}, dilation {d}) is larger than "
                       f"spatial axis {i} ({size} + 2 x pad {p}): the pooled size would be {pooled}")
            out[axis + 1 + i] = pooled
        return [tuple(out)] * max(1, len(self.lp.top))

    def geometry(self, shape):
        """(axis, kernel, stride, pad, dilation), one value per spatial axis, with LayerSetUp's CHECKs."""
        p, has = self.lp.pooling_param, self.lp.pooling_param.HasField
        axis = canonical_axis(self, p.axis, len(shape))
        n = len(shape) - axis - 1
        if p.global_pooling:
            self.check(not p.kernel_size and not has("kernel_h") and not has("kernel_w"),
                       "With Global_pooling: true Filter size cannot specified (pooling_layer.cpp:45-47)",
                       fix="remove kernel_size / kernel_h / kernel_w")
            kernel = shape[axis + 1:]
        else:
            self.check(bool(p.kernel_size) != (has("kernel_h") and has("kernel_w")),
                       "Filter size is kernel_size OR kernel_h and kernel_w; not both (pooling_layer.cpp:50-55)")
            kernel = self.per_axis("kernel", n, None)
            self.check(all(k > 0 for k in kernel), "Filter dimensions must be nonzero.")
        stride = self.per_axis("stride", n, 1)
        self.check(all(s > 0 for s in stride), "Stride dimensions must be nonzero.")
        return axis, tuple(kernel), stride, self.per_axis("pad", n, 0), self.per_axis("dilation", n, 1)

    def per_axis(self, name, n, default):
        """A value per spatial axis: the _h/_w pair (2 axes only), else the repeated field given once
        or once per axis, else `default` (None: required)."""
        p, has = self.lp.pooling_param, self.lp.pooling_param.HasField
        field = "kernel_size" if name == "kernel" else name
        values = tuple(getattr(p, field))
        if name != "dilation" and (has(f"{name}_h") or has(f"{name}_w")):
            self.check(n == 2, f"{name}_h & {name}_w can only be used for 2D pooling; the bottom has {n} spatial axes")
            self.check(not values, f"Either {field} or {name}_h/w should be specified; not both.")
            return (getattr(p, f"{name}_h"), getattr(p, f"{name}_w"))
        allowed = (1, n) if default is None else (0, 1, n)
        self.check(len(values) in allowed, f"{field} must be specified once, or once per spatial dimension "
                   f"({field} specified {len(values)} times; {n} spatial dims)")
        return values * n if len(values) == 1 else values or (default,) * n

    def bottom_for(self, top_index, shape, bottom):
        return None

    def cudnn_2015(self, run):
        return False


class LibDNNConvolution:
    """BaseConvolutionLayer's geometry is BVLC's (dilation included, deconvolution's too). On a GPU
    the layer is LibDNN's (libdnn_conv_layer.cpp, libdnn_deconv_layer.cpp), which sets use_colbuffer_
    false (cpp:23) and keeps no col_buffer_ (Reshape only shapes it, base_conv_layer.cpp:287); the
    bias_multiplier_ (out_spatial_dim_ ones) is written on the host in Reshape
    (base_conv_layer.cpp:296-305) and only its first value read there (cpp:112). Forward reads the
    weights, bias and bottoms and writes the tops (cpp:104-136); backward takes the weight and bias
    diffs and every bottom's diff, whatever propagate_down says (cpp:139-170). In CPU mode it is
    Caffe's ConvolutionLayer, BVLC's buffers."""

    def uses_cudnn(self, run):
        return False

    def touches(self, run):
        if run.mode != "gpu":
            return super().touches(run)
        geo = self._setup(run.bottoms)[0]
        n_bottoms, n_tops = len(run.bottoms), len(run.tops)
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        if self.param.bias_term:
            t.append(touch.buffer("bias_multiplier_", count(run.tops[0], geo.axis + 1), "setup", per_sample=False,
                                  device="host"))
        t += [touch.bottom(j, "data", "forward") for j in range(n_bottoms)]
        t += [touch.top(j, "data", "forward") for j in range(n_tops)]
        t += [touch.param(k, "diff", "backward") for k in range(run.num_params)]
        t += [touch.top(j, "diff", "backward") for j in range(n_tops)]
        return t + [touch.bottom(j, "diff", "backward") for j in range(n_bottoms)]


@register("Convolution", fork=FORK)
class Convolution(LibDNNConvolution, BVLCConvolution):
    pass


@register("Deconvolution", fork=FORK)
class Deconvolution(LibDNNConvolution, BVLCDeconvolution):
    pass


@register("MemoryData", fork=FORK)
class MemoryData(BVLCMemoryData):
    """MemoryDataLayer with N-D shapes: `dim` (batch, channels, then any spatial axes) replaces
    batch_size, channels, height and width when given (memory_data_layer.cpp:17-30); one or two tops
    (memory_data_layer.hpp:28-29), the label (batch, 1, ..., 1) of the data's rank (cpp:38-47). Its
    buffers are BVLC's."""

    exact_tops = None
    min_tops = 1
    max_tops = 2

    def reshape(self, bottoms):
        p = self.lp.memory_data_param
        shape = tuple(p.dim) or (p.batch_size, p.channels, p.height, p.width)
        self.check(len(shape) >= 1 and count(shape) > 0, f"the MemoryData shape {shape} must have every dimension "
                   "positive", fix="set memory_data_param { dim: N dim: C ... } (or batch_size, channels, height, "
                                   "width)")
        data = self.override(0, shape)
        self.check_batch_axis(0, data)
        self.note_origin(0, data, "the layer's parameters")
        if len(self.lp.top) == 1:
            return [data]
        label = self.override(1, (data[0],) + (1,) * (len(data) - 1))
        self.note_origin(1, label, "the layer's batch size (a label per sample)")
        return [data, label]


@register("ReLU", "Sigmoid", "TanH", fork=FORK)
class NdNeuron(Neuron):
    """The fork's cuDNN ReLU, Sigmoid and TanH describe blobs with cudnnSetTensorNdDescriptor of the
    bottom's own rank (cudnn_relu_layer.cpp:26-29, cudnn_sigmoid_layer.cpp:25-28,
    cudnn_tanh_layer.cpp:25-28), so a cuDNN build takes 5-axis blobs, where BVLC's stops; they
    allocate what BVLC's do."""


@register("EuclideanLoss", fork=FORK)
class EuclideanLoss(BVLCEuclideanLoss):
    """EuclideanLossLayer with an optional third bottom (euclidean_loss_layer.hpp:57-59): a scale of
    bottom 0's count that diff_ is multiplied by, element by element, in forward (cpp:26-29,
    cu:18-21). Backward writes the diffs of bottoms 0 and 1 only (cpp:40-51, cu:34-44)."""

    exact_bottoms = None
    min_bottoms, max_bottoms = 2, 3

    def touches(self, run):
        return [t for t in super().touches(run) if not (t.what == "bottom" and t.part == "diff" and t.index > 1)]


@register("MergeCrop", fork=FORK)
class MergeCrop(Layer):
    """MergeCropLayer: U-Net's skip, bottom 1 centre-cropped to bottom 0's spatial size and stacked
    on its channels (STACK: C0 + C1 channels) or added (ADD: equal channels), mergecrop_layer.cpp:
    42-59; the top takes bottom 0's shape but for the channels. shape_a_ and shape_b_ hold the two
    bottoms' spatial sizes (Blob<int_tp>, one int a spatial axis, cpp:61-70), which the GPU kernels
    read on the device (mergecrop_layer.cu:228-229, 278-279). It has no CPU code (cpp:78-90).
    Backward returns unless bottom 0 needs a diff (cu:261-263), then takes both bottoms' diffs as
    mutable (cu:267-268) and writes zeros where `backward` is false."""

    exact_bottoms = 2  # mergecrop_layer.hpp:29-31
    exact_tops = 1  # Reshape shapes top[0] alone (cpp:59)

    def reshape(self, bottoms):
        a, b = tuple(bottoms[0]), tuple(bottoms[1])
        self.check(len(a) >= 2 and len(b) >= 2, f"MergeCrop reads the channels of both bottoms: {a}, {b}")
        self.check(a[0] == b[0], f"the bottoms' batch sizes differ ({a[0]} vs {b[0]}: CHECK_EQ, "
                   "mergecrop_layer.cpp:43)")
        if self.lp.mergecrop_param.operation == STACK:
            channels = a[1] + b[1]
        else:
            self.check(a[1] == b[1], f"ADD needs the same channels in both bottoms ({a[1]} vs {b[1]}: CHECK_EQ, "
                       "mergecrop_layer.cpp:51)")
            channels = a[1]
        return [(a[0], channels) + a[2:]]

    def touches(self, run):
        if run.mode != "gpu":
            return [touch.stop("forward", "MergeCrop has no CPU code: 'Foward_cpu() not implemented for "
                               "MergeCropLayer.' (mergecrop_layer.cpp:81)")]
        axes = max(len(run.tops[0]) - 2, 0)
        t = [touch.buffer(name, axes, "forward", itemsize=4, per_sample=False, note="Blob<int_tp>, its device copy")
             for name in ("shape_a_", "shape_b_")]
        t += [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"), touch.top(0, "data", "forward")]
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward"),
                  touch.bottom(1, "diff", "backward")]
        return t


@register("MalisLoss", fork=FORK)
class MalisLoss(Loss):
    """MalisLossLayer (malis_loss_layer.cpp, CPU code only: a GPU run runs it on the host). Bottoms:
    predicted affinities (N, edges, (Z), (Y), X), their ground truth, the components, and optionally
    the neighbourhood (hpp:26-27). LossLayer's Reshape CHECKs bottoms 0 and 1 have the same first
    axis and makes top 0 one value (loss_layer.cpp:19-25); a second top takes bottom 0's shape
    (cpp:295-297) and, in forward, bottom 0's data (ShareData, cpp:427-429).

    Reshape sizes affinity_pos_, affinity_neg_, dloss_pos_ and dloss_neg_ like bottom 0 (cpp:329-332),
    written on the host every forward (cpp:368-419); backward writes bottom 0's diff on the host
    from the dloss buffers, if propagate_down asks for it (cpp:436-447), and a GPU layer below reads it
    on the device. Not counted: Malis() (cpp:41-271) builds host vectors per sample and per call, freed
    on return: overlap (a std::map per voxel), rank and parent (8 bytes a voxel), and the sorted edge
    queue (8 bytes an edge) - data dependent, and not Caffe blobs."""

    exact_bottoms = None
    min_bottoms, max_bottoms = 3, 4  # malis_loss_layer.hpp:25-27
    exact_tops = None
    min_tops, max_tops = 1, 2  # hpp:28-30

    def reshape(self, bottoms):
        self.check(len(bottoms[0]) and len(bottoms[1]) and bottoms[0][0] == bottoms[1][0],
                   f"the data {tuple(bottoms[0])} and label {tuple(bottoms[1])} should have the same first dimension "
                   "(CHECK_EQ, loss_layer.cpp:22)")
        self.check(2 <= len(bottoms[0]) <= 5, f"MALIS takes (batch, edges, (Z), (Y), X) affinities; bottom 0 is "
                   f"{tuple(bottoms[0])} (malis_loss_layer.cpp:299-321)")
        return [(1,), tuple(bottoms[0])][:max(1, len(self.lp.top))]

    def shares(self):
        return [(1, 0, "data")] if len(self.lp.top) > 1 else []

    def touches(self, run):
        n = count(run.bottoms[0])
        note = "x".join(map(str, run.bottoms[0]))
        t = [touch.bottom(j, "data", "forward", device="host") for j in range(len(run.bottoms))]
        t += [touch.buffer(name, n, "forward", per_sample=True, device="host", note=note)
              for name in ("affinity_pos_", "affinity_neg_", "dloss_pos_", "dloss_neg_")]
        t += [touch.top(0, "data", "forward", device="host"), touch.top(0, "diff", "backward", device="host")]
        if run.propagate_down[0]:
            t += [touch.bottom(0, "diff", "backward", device="host"), touch.bottom(0, "diff", "backward")]
        return t


@register("Affinity", fork=FORK)
class Affinity(Layer):
    """AffinityLayer: for each bottom (N, C, H, W) a (1, 2, H, W) top of the y and x affinities of its
    channel `offset` (affinity_layer.cpp:34-50, read through the legacy height() and width()), with
    min_index_, a Blob of the same (1, 2, H, W) per bottom (cpp:42-48): not per sample, the code reads
    the first image only. CPU code only: bottoms, tops and min_index_ on the host (cpp:53-94);
    backward reads min_index_'s diff (cpp:104, allocating it) and writes each bottom's diff that
    propagate_down asks for (cpp:100-130)."""

    min_bottoms = 1
    equal_bottoms_tops = True

    def reshape(self, bottoms):
        return [(1, 2) + legacy_shape(self, b)[2:] for b in bottoms]

    def touches(self, run):
        t = []
        for j, top in enumerate(run.tops):
            elements = count(top)
            t += [touch.bottom(j, "data", "forward", device="host"), touch.top(j, "data", "forward", device="host"),
                  touch.buffer(f"min_index_[{j}]", elements, "forward", per_sample=False, device="host")]
            if run.propagate_down[j]:
                t += [touch.top(j, "diff", "backward", device="host"),
                      touch.buffer(f"min_index_[{j}] diff", elements, "backward", per_sample=False, device="host"),
                      touch.bottom(j, "diff", "backward", device="host"), touch.bottom(j, "diff", "backward")]
        return t


@register("ConnectedComponent", fork=FORK)
class ConnectedComponent(Layer):
    """ConnectedComponentLayer: labels each (num x channels) image's connected regions with OpenCV;
    the top takes the bottom's shape (connected_component_layer.cpp:50-53). CPU code only: the bottom
    read and the top written on the host (cpp:56-85); backward does nothing (cpp:88-93). The cv::Mat
    images it makes per image live only during the forward and are not counted."""

    exact_bottoms = 1  # connected_component_layer.hpp:30-35
    exact_tops = 1

    def reshape(self, bottoms):
        legacy_shape(self, bottoms[0])  # num(), channels(), height(), width() (cpp:63-70)
        return [tuple(bottoms[0])]

    def touches(self, run):
        return [touch.bottom(0, "data", "forward", device="host"), touch.top(0, "data", "forward", device="host")]


@fork_note(FORK)
def default_build(layers):
    """Which build of the fork the GPU figures are, said once per net."""
    return [Assumption(
        "(file)", "naibaf7's Caffe is counted as its default build (CMakeLists.txt:54-72: OpenCL with LibDNN, no "
        "cuDNN): on a GPU its Convolution, Deconvolution and Pooling are LibDNN layers (layer_factory.cpp:174-181, "
        "300-303, 356-363), which keep no im2col buffer, under either --engine; a build with cuDNN is not counted",
        "--mode cpu (Caffe's own layers, with their im2col buffers)")]
