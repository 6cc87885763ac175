"""3D-Caffe's layers (yulequan/3D-Caffe, branch 3D-Caffe, commit c033e87: the Caffe yulequan/HeartSeg
builds), as its sources shape them: PoolingND, and its own Pooling, ReLU, HDF5Data, Data, ImageData
and WindowData.

The fork is BVLC Caffe at c858567 (May 2016) with 3-D segmentation added. What it changes that
protoaudit counts: Pooling is N-D (pooling_layer.cpp; PoolingParameter's kernel_size, pad and
stride repeated, with an axis), and PoolingND is the same code under another name; cuDNN's ReLU
takes blobs of any rank (cudnn_relu_layer.cpp:24-26); HDF5Data crops 5-axis volumes with
transform_param's crop_size_l/h/w (hdf5_data_layer.cpp:48-67, 183-345), which only it reads (the
DataTransformer's one addition, TransformImgAndSeg, data_transformer.cpp:330-483, serves the fork's
ImageSegData); a Batch holds a third Blob, addlabel_ (base_data_layer.hpp:50-53), filled for data
layers of three tops only. Its Convolution and Deconvolution are BVLC's with cuDNN code for N-D blobs
(cudnn_conv_layer.cpp:62-69, 96-137, cudnn_deconv_layer.cpp, the factory's GetDeconvolutionLayer,
layer_factory.cpp:77-114), whose buffers protoaudit's BVLC classes count alike; Dropout's rand_vec_
takes the bottom's shape as BVLC 9b89154's does (dropout_layer.cpp:28); LossLayer drops the CHECK
that data and label have the same num (loss_layer.cpp:19-20), which protoaudit does not make.
Its Sigmoid and TanH still describe blobs with cuDNN's 4-D descriptors (cudnn_sigmoid_layer.cpp:24-29),
where BVLC's classes stop on 5 axes. Its SegAccuracy is DeepLab's (the same CHECKs, (1, 1, 1, 3) top
and CPU code, seg_accuracy_layer.cpp), borrowed from protoaudit.layers.deeplab; Convupsample,
ImageSegData, ImageSegClassData and SoftmaxWithWeightedLoss have no rule here: their tops are given
with --input.

File and line references are to that commit's src/caffe/layers/*.cpp/.cu and include/caffe/layers/*.hpp.
"""
from . import touch
from .activations import Neuron
from .base import Layer, canonical_axis, count, register
from .data import CopyingPrefetching, Data as BVLCData, HDF5Data as BVLCHDF5Data, ThroughDataReader, \
    WindowData as BVLCWindowData
from .deeplab import ImageDataV2
from .pooling import CEIL, pooled_size

FORK = "caffe3d"
MAX, AVE, STOCHASTIC = 0, 1, 2  # PoolingParameter.PoolMethod and PoolingNDParameter.PoolMethod
CAFFE = 1  # PoolingParameter.Engine


class NDPooling(Layer):
    """The fork's PoolingLayer and PoolingNDLayer: MAX, AVE or STOCHASTIC pooling over every axis after
    `axis` (the channels, default 1), with a kernel, pad and stride given once or once per spatial axis
    (kernel_h/w, pad_h/w, stride_h/w for two only).

    Lines are pooling_nd_layer.cpp/.cu's (pooling_layer.cpp's are within a line of them). Each output
    axis is ceil((size + 2 * pad - kernel) / stride) + 1 in float; when the layer pads at all, a last
    window that would start in the padding is dropped (cpp:171-186). Global pooling takes the whole of
    each spatial axis (cpp:159-163). The CHECKs are LayerSetUp's (cpp:14-145).

    It keeps its geometry in five Blob<int>s: kernel_shape_, pad_, stride_ and output_shape_ (an int
    per spatial axis) and input_shape_ (the channels too), written on the host; every GPU forward reads
    them on the device (.cu:408-443), so GPU mode gives each a device copy (four for STOCHASTIC, which
    reads no pad_). max_idx_ is an int per top element for MAX with one top, rand_idx_ a float per top
    element for STOCHASTIC in training (cpp:201-209, .cu:405, 426-435). The CPU code has no STOCHASTIC
    pooling (cpp:407-408) and pools 2 or 3 spatial axes only (cpp:251, 276, 311, 397); the GPU kernels
    take any number. Backward reads the first top's diff only."""

    exact_bottoms = 1
    min_tops = 1
    geometry_blobs = True  # protoaudit.memory.host: the members above
    FIELD = None  # the LayerParameter field it reads

    @property
    def param(self):
        return self.fork_param(self.FIELD)

    @property
    def max_tops(self):
        """A mask top for MAX pooling, as pooling_param says: PoolingNDLayer asks pooling_param too
        (pooling_nd_layer.hpp:32-35), whose pool is MAX unless the layer sets it."""
        return 2 if self.lp.pooling_param.pool == MAX else 1

    def spatial_axes(self, shape):
        """The axes it pools: those after `axis` (the channels)."""
        return len(shape) - canonical_axis(self, self.param.axis, len(shape)) - 1

    def geometry(self, shape):
        """(axis, kernel, pad, stride), one value per spatial axis, with LayerSetUp's CHECKs."""
        p, has = self.param, self.param.HasField
        axis = canonical_axis(self, p.axis, len(shape))
        n = self.spatial_axes(shape)
        self.check(n >= 1, f"{self.lp.type} pools the axes after axis {axis}; the bottom {tuple(shape)} has none "
                   "(CHECK_GE(num_spatial_axes_, 1))")
        if p.global_pooling:
            self.check(not p.kernel_size and not (has("kernel_h") and has("kernel_w")),
                       "With Global_pooling: true Filter size cannot specified.",
                       fix="remove kernel_size / kernel_h / kernel_w")
            kernel = tuple(shape[axis + 1:])
            # LayerSetUp fills kernel_shape_ from the channel axis on (cpp:38-47), checks those, and
            # Reshape puts the spatial sizes in (cpp:159-163)
            checked = tuple(shape[axis:axis + n])
        else:
            kernel = checked = self.per_axis("kernel", p.kernel_size, n, None)
        self.check(all(k > 0 for k in checked), "Filter dimensions must be nonzero.")
        pad = self.per_axis("pad", p.pad, n, 0)
        if not (has("pad_h") or has("pad_w")):  # only the repeated pad is checked (cpp:89-99)
            if p.global_pooling:
                self.check(not any(pad), "With Global_pooling: true; pad must be 0")
            for size, k in zip(pad, checked):
                self.check(size < k, f"pad {size} must be smaller than the kernel {k} (CHECK_LT(pad, kernel))")
        if any(pad):
            self.check(p.pool in (MAX, AVE), "Padding implemented only for average and max pooling.")
        stride = self.per_axis("stride", p.stride, n, 1)
        self.check(all(s > 0 for s in stride), "Stride dimensions must be nonzero.")
        if p.global_pooling:
            self.check(all(s == 1 for s in stride), "With Global_pooling: true; stride must be 1")
        return axis, kernel, pad, stride

    def per_axis(self, name, values, n, default):
        """One value per spatial axis: name_h and name_w (2-D only, and not with `name`), else
        `values` given once or once per axis, else `default` (None: it must be given)."""
        p, has = self.param, self.param.HasField
        field = "kernel_size" if name == "kernel" else name
        if has(f"{name}_h") or has(f"{name}_w"):
            self.check(n == 2, f"{name}_h & {name}_w can only be used for 2D pooling; the bottom has {n} spatial axes")
            self.check(not values, f"Either {field} or {name}_h/w should be specified; not both.")
            return (getattr(p, f"{name}_h"), getattr(p, f"{name}_w"))
        values = tuple(values)
        allowed = (1, n) if default is None else (0, 1, n)
        self.check(len(values) in allowed, f"{field} must be specified once, or once per spatial dimension "
                   f"({field} specified {len(values)} times; {n} spatial dims)")
        return values * n if len(values) == 1 else values or (default,) * n

    def reshape(self, bottoms):
        shape = bottoms[0]
        axis, kernel, pad, stride = self.geometry(shape)
        padded = any(pad)
        out = tuple(pooled_size(self, size, k, s, q, CEIL, padded)
                    for size, k, s, q in zip(shape[axis + 1:], kernel, stride, pad))
        return [tuple(shape[:axis + 1]) + out] * max(1, len(self.lp.top))

    def uses_cudnn(self, run):
        """Whether the layer factory makes it a CuDNNPoolingLayer (PoolingNDLayer is never one)."""
        return False

    def touches(self, run):
        t = [x for x in super().touches(run) if not (x.what == "top" and x.part == "diff" and x.index > 0)]
        p = self.param
        if self.uses_cudnn(run):
            if p.pool == STOCHASTIC:
                t.append(touch.stop("setup", "cuDNN has no stochastic pooling: the fork's createNdPoolingDesc "
                                    "stops on 'Unknown pooling method.' (util/cudnn.hpp:214-223)",
                                    fix="set engine: CAFFE in its pooling_param, or audit with --engine caffe"))
            return t  # cuDNN keeps no argmax and reads the geometry on the host
        n = self.spatial_axes(run.bottoms[0])
        if run.mode == "cpu" and (p.pool == STOCHASTIC or n not in (2, 3)):
            what = "STOCHASTIC pooling" if p.pool == STOCHASTIC else f"pooling over {n} spatial axes"
            t.append(touch.stop("forward", f"the fork's {self.lp.type} has no CPU code for {what} (its "
                                           "Forward_cpu is NOT_IMPLEMENTED there): Caffe stops there in CPU mode"))
            return t
        if run.mode == "gpu":
            names = ("input_shape_", "output_shape_", "kernel_shape_", "stride_")
            names += ("pad_",) if p.pool != STOCHASTIC else ()
            t += [touch.buffer(name, n + (name == "input_shape_"), "forward", per_sample=False,
                               note="Blob<int>, its device copy") for name in names]
        if p.pool == MAX and len(run.tops) == 1:
            t.append(touch.buffer("max_idx_", count(run.tops[0]), "forward", per_sample=True))
        elif p.pool == STOCHASTIC and run.phase == "TRAIN":
            t.append(touch.buffer("rand_idx_", count(run.tops[0]), "forward", per_sample=True))
        return t


@register("Pooling", fork=FORK)
class Pooling(NDPooling):
    """The fork's PoolingLayer. In a cuDNN build (engine DEFAULT or CUDNN) with one top, AVE and
    STOCHASTIC pooling run as CuDNNPoolingLayer, MAX as this class (layer_factory.cpp:118-153);
    CuDNNPoolingLayer hands the geometry to cuDNN from the host (cudnn_pooling_layer.cpp:13-33)."""

    FIELD = "pooling_param"

    def uses_cudnn(self, run):
        p = self.param
        return (run.mode == "gpu" and p.pool != MAX and len(run.tops) == 1 and p.engine != CAFFE
                and run.engine == "cudnn")


@register("PoolingND", fork=FORK)
class PoolingND(NDPooling):
    """PoolingNDLayer: the fork's PoolingLayer under another name (pooling_nd_layer.cpp/.cu are
    pooling_layer.cpp/.cu with pooling_nd_param), made by REGISTER_LAYER_CLASS whatever the engine
    (cpp:574). It fills input_shape_ in LayerSetUp (cpp:25-31), where Pooling does in Reshape."""

    FIELD = "pooling_nd_param"


@register("ReLU", fork=FORK)
class ReLU(Neuron):
    """The fork's ReLU: its CuDNNReLULayer describes the bottom with cudnnSetTensorNdDescriptor
    (cudnn_relu_layer.cpp:14-15, 24-26), so a cuDNN build takes 5-axis blobs too; it allocates what
    BVLC's does."""


class ForkPrefetching(CopyingPrefetching):
    """The fork's BasePrefetchingDataLayer (BVLC c858567's): PREFETCH_COUNT = 3 batches in an array
    (base_data_layer.hpp:72, 78), each Batch of three Blobs, data_, label_ and the fork's addlabel_
    (hpp:50-53), the last allocated only for a layer of three tops (base_data_layer.cpp:28-32, 67-69,
    78-80), which none of Data, ImageData or WindowData takes; a forward copies the batch into the tops
    (cpp:122-149, .cu:8-29)."""

    PREFETCH_COUNT = 3
    BATCH_BLOBS = 3


@register("Data", fork=FORK)
class Data(ForkPrefetching, ThroughDataReader, BVLCData):
    """DataLayer reads through a DataReader (data_layer.hpp:34)."""


@register("ImageData", fork=FORK)
class ImageData(ForkPrefetching, ImageDataV2):
    """ImageDataLayer reads its list as "name label" pairs, `infile >> filename >> label`
    (image_data_layer.cpp:41-43), as deeplab-public-ver2's does."""


@register("WindowData", fork=FORK)
class WindowData(ForkPrefetching, BVLCWindowData):
    pass


@register("HDF5Data", fork=FORK)
class HDF5Data(BVLCHDF5Data):
    """The fork's HDF5DataLayer takes a transform_param (its CHECK is commented out,
    hdf5_data_layer.cpp:98-100). With crop_size_w set (has_crop_size_w, cpp:48), each file's volumes
    (5 axes: num, channels, length, height, width) are cropped once as the file is read, data and
    one or two label tops alike, to crop_size_l x crop_size_h x crop_size_w (cpp:61-67, 187-214), at
    a random offset in training and the centre in testing (cpp:243-256): each top is
    (batch_size, channels, crop_size_l, crop_size_h, crop_size_w), and hdf_blobs_ holds the
    cropped file. The file read whole (hdf_input_blobs, cpp:49-60) lives only while it is cropped.
    Without crop_size_w it is BVLC's HDF5Data, transform_param unread."""

    def crop(self):
        """(length, height, width) of the crop, or None."""
        tp = self.lp.transform_param
        return (tp.crop_size_l, tp.crop_size_h, tp.crop_size_w) if tp.HasField("crop_size_w") else None

    def reshape(self, bottoms):
        crop = self.crop()
        if crop:
            self.check(len(self.lp.top) in (2, 3), f"with crop_size_w the fork crops a data top and one or two "
                       f"label tops (hdf5_data_layer.cpp:62-66); with {len(self.lp.top)} its hdf_blobs_ stay empty "
                       "and Caffe stops on 'Input must have at least 1 axis.' (cpp:74)")
            self.check(all(crop), f"crop_size_l, crop_size_h and crop_size_w give the volume's size after the crop "
                       f"({'x'.join(map(str, crop))}): each must be set and positive",
                       fix="set transform_param { crop_size_l: L crop_size_h: H crop_size_w: W }")
        return self.dataset_tops()

    def row_dims(self):
        crop = self.crop()
        return (None,) + crop if crop else super().row_dims()

    def row_shape(self, shape):
        """(channels,) + the crop, for a dataset of 5 axes whose volumes hold the crop."""
        crop = self.crop()
        if not crop:
            return super().row_shape(shape)
        self.check(len(shape) == 5, f"the fork crops 5-axis volumes (num, channels, length, height, width) "
                   f"(hdf5_data_layer.cpp:196-201, 216-220); a dataset is {tuple(shape)}")
        self.check(all(c <= size for c, size in zip(crop, shape[2:])),
                   f"the crop {'x'.join(map(str, crop))} is larger than the volumes ({'x'.join(map(str, shape[2:]))}): "
                   "the fork's crop offsets (cpp:248-256) would fall outside them")
        return (shape[1],) + crop

    def held_elements(self):
        if not self.crop():
            return super().held_elements()
        return sum(d.shape[0] * count(self.row_shape(d.shape)) for d in self.sets)
