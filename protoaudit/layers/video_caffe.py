"""video-caffe (chuckcho/video-caffe fc232b3, the Caffe of its C3D nets): NdConvolution, NdPooling and
VideoData, as its sources shape them, and its cuDNN ReLU, which takes blobs of any rank.

The fork is BVLC Caffe (merged up to 99bd997, 2018) with those layers added. NdConvolution and NdPooling
are cuDNN's alone: the layer factory registers them only in a cuDNN build, and makes them cuDNN's for
engine DEFAULT and NOT_IMPLEMENTED for CAFFE (layer_factory.cpp:80-100, 218-236). So a build without
cuDNN, or CPU mode, stops on them. The rest of a net is counted as BVLC 9b89154's layers, as for the
other forks here.

File and line references are to that commit's src/caffe/layers/cudnn_nd{conv,pooling}_layer.cpp/.cu,
video_data_layer.cpp, src/caffe/util/io.cpp and src/caffe/data_transformer.cpp.
"""
import math

from . import touch
from .activations import Neuron
from .base import Layer, count, register
from .data import Prefetching
from .pooling import pooled_size

FORK = "video_caffe"
MAX, AVE, STOCHASTIC = 0, 1, 2  # PoolingParameter.PoolMethod
CAFFE = 1  # the engines' CAFFE value (ConvolutionParameter.Engine, PoolingParameter.Engine)
CUDNN_ONLY = ("video-caffe registers {type} only in a cuDNN build, and makes it cuDNN's "
              "(layer_factory.cpp:{lines}; its Forward_cpu is NOT_IMPLEMENTED): Caffe stops here")


def _shapes(layer, param):
    """(kernel, pad, stride) of kernel_shape, pad_shape and stride_shape, the first CHECKed present and
    the others of its length (cudnn_ndconv_layer.cpp:25-53, cudnn_ndpooling_layer.cpp:17-51)."""
    layer.check(param.HasField("kernel_shape"), f"{layer.lp.type} needs kernel_shape", fix="set kernel_shape { dim: ... }")
    kernel = tuple(param.kernel_shape.dim)
    for name in ("pad_shape", "stride_shape"):
        if param.HasField(name):
            layer.check(len(getattr(param, name).dim) == len(kernel),
                        f"{name} has {len(getattr(param, name).dim)} dims, kernel_shape {len(kernel)}")
    pad = tuple(param.pad_shape.dim) if param.HasField("pad_shape") else (0,) * len(kernel)
    stride = tuple(param.stride_shape.dim) if param.HasField("stride_shape") else (1,) * len(kernel)
    layer.check(all(s > 0 for s in stride), f"{layer.lp.type}'s stride_shape must be positive (Caffe divides by it)")
    return kernel, pad, stride


def _cudnn_only(layer, run, lines):
    """A stop where the layer does not exist or has no code: CPU mode, or a build without cuDNN."""
    if run.mode == "gpu" and run.engine == "cudnn" and layer.engine() != CAFFE:
        return None
    why = CUDNN_ONLY.format(type=layer.lp.type, lines=lines)
    if run.mode == "gpu" and run.engine == "cudnn":
        return touch.stop("setup", why, fix="leave its engine DEFAULT or CUDNN")
    return touch.stop("setup", why, fix="audit a cuDNN build in GPU mode: --mode gpu --engine cudnn")


@register("NdConvolution", fork=FORK)
class NdConvolution(Layer):
    """CudnnNdConvolutionLayer: a convolution over every axis after the channels. Each output axis is
    (size + 2 * pad - kernel) / stride + 1 in ints, and an axis where that is 1 is DROPPED from the top
    (compute_output_shape, cpp:239-251); the weight is (num_output, C / group, *kernel), the bias
    (num_output) (cpp:65-90). num_output > 0, and group divides C and num_output (cpp:58-62); every
    bottom has the first's shape (cpp:157-170).

    Its forward grows ONE workspace to what the forward algorithm cuDNN picks needs, under a limit of
    C x prod(kernel) ints and a byte (cu:22-26, 36-67): protoaudit takes that limit, less the byte, as
    for the 2015 forks' cuDNN convolution; the backward's algorithms are left at 0 with no workspace
    (cpp:130-136). Reshape sets bias_multiplier_, the top's spatial size in ones, on the host
    (cpp:189-193), which cuDNN never reads. Backward writes the weight's and bias's diffs where they
    learn and each bottom's where asked (cu:107-190)."""

    min_bottoms = 1
    equal_bottoms_tops = True

    def engine(self):
        return self.lp.convolution_param.engine

    def _setup(self, bottoms):
        p = self.lp.convolution_param
        kernel, pad, stride = _shapes(self, p)
        self.check(all(k > 0 for k in kernel), "Filter dimensions cannot be zero.")
        self.check(p.num_output > 0, "NdConvolution needs num_output > 0")
        shape = tuple(bottoms[0])
        self.check(len(shape) == 2 + len(kernel), f"kernel_shape has {len(kernel)} dims for a bottom of "
                   f"{len(shape)} axes {shape} (the spatial axes after num and channels)")
        group = p.group
        self.check(shape[1] % group == 0, f"group {group} does not divide the {shape[1]} channels")
        self.check(p.num_output % group == 0, "Number of output should be multiples of group.")
        for other in bottoms[1:]:
            self.check(tuple(other) == shape, f"Inputs must have same shape: {tuple(other)} against {shape}")
        return shape, kernel, pad, stride, group

    def reshape(self, bottoms):
        shape, kernel, pad, stride, _ = self._setup(bottoms)
        out = [(size + 2 * q - k) // s + 1 for size, k, q, s in zip(shape[2:], kernel, pad, stride)]
        top = (shape[0], self.lp.convolution_param.num_output) + tuple(d for d in out if d > 1)
        return [top] * len(bottoms)

    def param_shapes(self, bottoms):
        shape, kernel, _, _, group = self._setup(bottoms)
        p = self.lp.convolution_param
        weight = (p.num_output, shape[1] // group) + kernel
        return [weight, (p.num_output,)] if p.bias_term else [weight]

    def touches(self, run):
        stop = _cudnn_only(self, run, "80-100")
        if stop is not None:
            return [stop]
        shape, kernel, _, _, _ = self._setup(run.bottoms)
        limit = shape[1] * math.prod(kernel)
        t = super().touches(run)  # the blobs, and the diffs asked for
        if self.lp.convolution_param.bias_term:
            spatial = count(run.tops[0], 2)
            t.append(touch.buffer("bias_multiplier_", spatial, "setup", per_sample=False, device="host",
                                  note=f"{spatial} ones (the top's spatial size)"))
        t.append(touch.buffer("workspace", limit, "forward", per_sample=False, kind="workspace",
                              note=f"{shape[1]} channels x {'x'.join(map(str, kernel))} ints, the limit it is picked under"))
        return t


@register("NdPooling", fork=FORK)
class NdPooling(Layer):
    """CudnnNdPoolingLayer: pooling over every axis after the channels, kernel_shape, pad_shape and
    stride_shape (or the whole extent with global_pooling) (cpp:13-51). Each output axis is
    ceil((size + 2 * pad - kernel) / stride) + 1, one less where a padded last window would start in
    the padding, which Caffe then CHECKs does not (cpp:95-108); an axis of size 0 or less is dropped
    from the top. Reshape sizes max_idx_ or rand_idx_ (cpp:79-88), which cuDNN never touches; the
    GPU code reads and writes the blobs alone (cu:14-45), backward only where asked."""

    exact_bottoms = 1
    exact_tops = 1

    def engine(self):
        return self.lp.pooling_param.engine

    def reshape(self, bottoms):
        p = self.lp.pooling_param
        shape = tuple(bottoms[0])
        self.check(len(shape) >= 3, f"NdPooling pools the axes after num and channels; the bottom is {shape}")
        if p.global_pooling:
            kernel = shape[2:]
            pad = tuple(p.pad_shape.dim) if p.HasField("pad_shape") else (0,) * len(kernel)
            stride = tuple(p.stride_shape.dim) if p.HasField("stride_shape") else (1,) * len(kernel)
        else:
            kernel, pad, stride = _shapes(self, p)
            self.check(all(k > 0 for k in kernel), "Filter dimensions cannot be zero.")
        self.check(len(kernel) == len(shape) - 2 and len(pad) == len(kernel) and len(stride) == len(kernel),
                   f"kernel_shape has {len(kernel)} dims for a bottom of {len(shape)} axes {shape}")
        # BVLC's rounding in float and clip of a window that starts in an axis's padding (cpp:95-108)
        out = (pooled_size(self, size, k, s, q) for size, k, q, s in zip(shape[2:], kernel, pad, stride))
        return [shape[:2] + tuple(dim for dim in out if dim >= 1)]

    def touches(self, run):
        stop = _cudnn_only(self, run, "218-236")
        if stop is not None:
            return [stop]
        return super().touches(run)


@register("ReLU", fork=FORK)
class ReLU(Neuron):
    """The fork's ReLU: its CuDNNReLULayer describes the bottom with cudnnSetTensorNdDescriptor
    (cudnn_relu_layer.cpp:24-25), so a cuDNN build takes the 5-axis clips too; it allocates what
    BVLC's does."""


@register("VideoData", fork=FORK)
class VideoData(Prefetching):
    """VideoDataLayer: clips of new_length frames from a "path start_frame label" list, each a video
    file or a folder of image_%04d.jpg frames, read in colour (3 channels) or, with is_color false, in
    grey (1) (io.cpp:159-230), resized to new_height x new_width when both are set (which Caffe
    CHECKs go together, cpp:34-36) and cropped to crop_size by the transformer. The data top is
    (batch, channels, new_length, crop or height, crop or width) (data_transformer.cpp:586-600,
    cpp:93-103), the label top (batch) (cpp:108-110). Without crop_size or a new size the frames' size
    is the videos', which protoaudit does not decode: --input is asked for.

    It is BVLC's BasePrefetchingDataLayer (data_param.prefetch batches, default 4, the tops pointed at
    the current one: Prefetching). Not counted: the list Caffe keeps (lines_) and a video decoder's
    state; a shuffled list adds its RNG (cpp:54-58)."""

    exact_tops = 2
    label_origin = "the layer's batch size (a label per clip)"

    def param(self):
        return self.lp.video_data_param

    def batch_size(self):
        batch = self.param().batch_size
        self.check(batch > 0, "Positive batch size required", fix="set video_data_param { batch_size: N }")
        return batch

    def data_shape(self, batch):
        p, crop = self.param(), self.lp.transform_param.crop_size
        self.check((p.new_height == 0) == (p.new_width == 0), "Current implementation requires new_height and "
                   "new_width to be set at the same time.")
        self.check(p.new_length > 0, "VideoData needs new_length > 0, the frames of a clip")
        channels = 3 if p.is_color else 1
        self.decodes = True
        if p.new_height and crop:
            self.check(min(p.new_height, p.new_width) >= crop, f"crop_size {crop} is larger than the frames "
                       f"({p.new_height}x{p.new_width})")
        if self.lp.top[0] in self.ctx.inputs:
            return None, "--input"
        if crop or p.new_height:
            hw = (crop, crop) if crop else (p.new_height, p.new_width)
            said = "crop_size" if crop else "new_height/new_width"
            return (channels, p.new_length) + hw, (f"the layer's parameters (new_length, {said}, is_color: "
                                                   f"{channels} channels)")
        self.missing(batch, (channels, p.new_length, None, None), "VideoData layer: without crop_size or "
                     "new_height/new_width its frames' size is the videos', which protoaudit does not decode")

    def rngs(self, run):
        """The transformer's RNG, and the shuffle's prefetch_rng_ (cpp:54-58)."""
        return super().rngs(run) + int(self.param().shuffle)
