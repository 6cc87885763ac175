"""C3D v1.1's Caffe's own layers (facebook/C3D at 71336a2, C3D-v1.1/): VideoData, Convolution3D,
Deconvolution3D and Pooling3D on 5-axis blobs (num, channels, length, height, width), L2Normalize
and BlackHole, and its Accuracy, which has no GPU code.

File and line references are to that commit's C3D-v1.1/src/caffe/layers/*.cpp/.cu,
src/caffe/util/image_io.cpp and src/caffe/data_transformer.cpp. The rest of the fork is a 2017
BVLC Caffe whose layers allocate as BVLC 9b89154's do (the same buffers; its BatchNorm, Eltwise,
InnerProduct and SoftmaxWithLoss differ only in arithmetic and messages), so its nets' other
layers are sized by protoaudit's BVLC classes; base_data_layer.cpp/.cu are 9b89154's files.
"""
import math

from ..read.datasets import lists
from . import enet, touch
from .base import Layer, count, float32, refuse_in_place, register
from .conv import cdiv
from .cxx import STRING, grown
from .data import FIRST_TOKENS, LIST_ENTRIES, OPENCV_RESIZE_BYTES, Prefetching

FORK = "c3d"
MAX, AVE, STOCHASTIC = 0, 1, 2  # Pooling3DParameter.PoolMethod


def five_axes(layer, shape):
    """(num, channels, length, height, width) of the bottom: the 3D layers read bottom[0]->shape(0..4)
    (Blob::shape CHECKs the axis exists)."""
    if len(shape) != 5:
        layer.fail(f"{layer.lp.type} reads its bottom as (num, channels, length, height, width), 5 axes; "
                   f"got {tuple(shape)}")
    return tuple(shape)


def kernel(layer, param, name):
    """kernel_size (spatial) and kernel_depth (temporal), which C3D's caffe.proto leaves without a default,
    and the strides, which Caffe divides by."""
    for field in ("kernel_size", "kernel_depth"):
        layer.check(getattr(param, field) > 0, f"{name} needs {field} (C3D's caffe.proto gives it no default)",
                    fix=f"set {name} {{ {field}: N }}")
    for field in ("stride", "temporal_stride"):
        layer.check(getattr(param, field) > 0, f"{name}.{field} must be positive (Caffe divides by it)")
    return param.kernel_depth, param.kernel_size


@register("Convolution3D", fork=FORK)
class Convolution3D(Layer):
    """Convolution3DLayer: kernel_depth x kernel_size x kernel_size filters over (length, height, width).

    LayerSetUp does everything (its Reshape is empty, convolution3d_layer.cpp:30-33): each output
    axis is (size + 2 * pad - kernel) / stride + 1 in ints, with temporal_pad and temporal_stride
    on the length (cpp:63-65). The weight is (num_output, C, kernel_depth, k, k), not divided by
    filter_group, and the bias (1, 1, 1, 1, num_output) (cpp:111-131). filter_group only splits the
    GEMM; num_output must divide by it (cpp:58)."""

    exact_bottoms = 1
    exact_tops = 1

    @property
    def param(self):
        return self.lp.convolution3d_param

    def geometry(self, bottoms):
        """(num, channels, output (L, H, W), (kernel_depth, k)), with LayerSetUp's CHECKs (cpp:55-58)."""
        n, c, *sizes = five_axes(self, bottoms[0])
        p = self.param
        kd, k = kernel(self, p, "convolution3d_param")
        self.check(p.num_output > 0, "convolution3d_param needs a positive num_output")
        self.check_groups(p)
        out = tuple(self.out_size(size, kk, s, pad) for size, kk, s, pad in
                    zip(sizes, (kd, k, k), (p.temporal_stride, p.stride, p.stride), (p.temporal_pad, p.pad, p.pad)))
        return n, c, out, (kd, k)

    def check_groups(self, p):
        self.check(p.filter_group > 0 and p.num_output % p.filter_group == 0,
                   f"num_output {p.num_output} is not divisible by filter_group {p.filter_group}")

    @staticmethod
    def out_size(size, kernel_size, stride, pad):
        return cdiv(size + 2 * pad - kernel_size, stride) + 1

    def reshape(self, bottoms):
        n, _, out, _ = self.geometry(bottoms)
        return [(n, self.param.num_output) + out]

    def param_shapes(self, bottoms):
        _, c, _, (kd, k) = self.geometry(bottoms)
        weight = self.weight_shape(c, self.param.num_output) + (kd, k, k)
        return [weight, (1, 1, 1, 1, self.param.num_output)] if self.bias_term() else [weight]

    @staticmethod
    def weight_shape(channels, num_output):
        return (num_output, channels)

    def bias_term(self):
        return self.param.bias_term

    def col_elements(self, run):
        """col_buffer_ (1, C * kernel_depth * k * k, L_out, H_out, W_out): one clip (cpp:72-80)."""
        _, c, out, (kd, k) = self.geometry(run.bottoms)
        return c * kd * k * k * count(out), f"{c}x{kd}x{k}x{k}x" + "x".join(map(str, out)) + " (one clip)"

    def touches(self, run):
        """bias_multiplier_ (a SyncedMemory of the output's L*H*W floats) is set to ones on the host
        in LayerSetUp (cpp:144-151); the GPU forward reads its device copy (cu:52-56). Forward fills
        col_buffer_ clip by clip (cu:31, 43). Backward takes the bottom's diff, col_buffer_'s diff
        and the weight's and bias's diffs as mutable before any check (cu:64-80, 93), so it writes
        them whenever Net::Init runs it."""
        elements, note = self.col_elements(run)
        multiplier = count(run.tops[0][2:])
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        if self.bias_term():
            t.append(touch.buffer("bias_multiplier_ (host)", multiplier, "setup", per_sample=False, device="host"))
            if run.mode == "gpu":
                t.append(touch.buffer("bias_multiplier_", multiplier, "forward", per_sample=False))
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward"),
              touch.buffer("col_buffer_", elements, "forward", per_sample=False, note=note)]
        t += [touch.top(0, "diff", "backward")] + [touch.param(k, "diff", "backward") for k in range(run.num_params)]
        return t + [touch.bottom(0, "diff", "backward"),
                    touch.buffer("col_buffer_ (diff)", elements, "backward", per_sample=False, note=note)]


@register("Deconvolution3D", fork=FORK)
class Deconvolution3D(Convolution3D):
    """Deconvolution3DLayer: Convolution3D transposed. Each output axis is (size - 1) * stride -
    2 * pad + kernel (deconvolution3d_layer.cpp:57-59); the weight is (C, num_output,
    kernel_depth, k, k) and the bias (1, 1, 1, 1, num_output) (cpp:107-131). It reads bias_term
    from convolution_param, not convolution3d_param (cpp:79): a bias unless a convolution_param
    says bias_term: false. It has no filter_group."""

    def check_groups(self, p):
        pass  # (no CHECK on filter_group, which it never reads)

    @staticmethod
    def out_size(size, kernel_size, stride, pad):
        return (size - 1) * stride - 2 * pad + kernel_size

    @staticmethod
    def weight_shape(channels, num_output):
        return (channels, num_output)

    def bias_term(self):
        return self.lp.convolution_param.bias_term

    def col_elements(self, run):
        """col_buffer_ (1, num_output * kernel_depth * k * k, L, H, W) of the input: one clip (cpp:67-74).
        Backward takes it and its diff as Convolution3D's does (cu:62-70)."""
        _, _, *sizes = run.bottoms[0]
        _, _, _, (kd, k) = self.geometry(run.bottoms)
        c = self.param.num_output
        return c * kd * k * k * count(sizes), f"{c}x{kd}x{k}x{k}x" + "x".join(map(str, sizes)) + " (one clip)"


def pooled(size, pad, kernel_size, stride):
    """static_cast<int>(ceil(static_cast<float>(size + 2 * pad - kernel) / stride)) + 1."""
    return math.ceil(float32(float32(size + 2 * pad - kernel_size) / float32(stride))) + 1


@register("Pooling3D", fork=FORK)
class Pooling3D(Layer):
    """Pooling3DLayer: MAX or AVE over kernel_depth x kernel_size x kernel_size windows.

    Height and width are ceil((size + 2 * pad - kernel) / stride) + 1 in float, with no clip of a
    window that starts in the padding; the length is ceil((length - kernel_depth) / temporal_stride)
    + 1, unpadded (pool3d_layer.cpp:62-67). Padding is for AVE only (cpp:51-55). It keeps no
    argmax: MAX backward compares the bottom with the top (pool3d_layer.cu:219-224); rand_idx_ is
    reshaped for STOCHASTIC but never touched (cpp:80-84), which has no CPU code (cpp:179-180,
    NOT_IMPLEMENTED) and does nothing on the GPU (cu:117-119, 233-235)."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        n, c, length, height, width = five_axes(self, bottoms[0])
        p = self.lp.pooling3d_param
        kd, k = kernel(self, p, "pooling3d_param")
        if p.pad:
            self.check(p.pool == AVE, "Pooling3D pads for average pooling only", fix="remove pad, or use pool: AVE")
        return [(n, c, pooled(length, 0, kd, p.temporal_stride), pooled(height, p.pad, k, p.stride),
                 pooled(width, p.pad, k, p.stride))]

    def touches(self, run):
        if run.mode == "cpu" and self.lp.pooling3d_param.pool == STOCHASTIC:
            return [touch.stop("forward", "C3D's Pooling3D has no CPU code for STOCHASTIC pooling "
                                          "(pool3d_layer.cpp:179-180, NOT_IMPLEMENTED): Caffe stops there in CPU mode")]
        return super().touches(run)


@register("VideoData", fork=FORK)
class VideoData(Prefetching):
    """VideoDataLayer: clips of new_length frames, each frame read in colour (3 channels, whatever
    is_color says: image_io.cpp:326, :150), resized to new_height x new_width when both are set
    (:342, :189), cropped to crop_size by the transformer. The data top is (batch, 3, new_length,
    crop or height, crop or width) (video_data_layer.cpp:170-180; data_transformer.cpp:611-629);
    the label top is (batch) (cpp:187-191), or (batch, num_of_labels) with use_multiple_label.
    Without crop_size or new_height/new_width the frames' size is read from the first frame of
    the list's first clip, when both are on disk (use_image), else --input is asked for.

    It is a BasePrefetchingDataLayer as BVLC 9b89154's (the same base_data_layer.cpp/.cu):
    data_param.prefetch batches (default 4), the tops pointed at the current one (Prefetching).
    transformed_data_ only points into the batch being filled (cpp:330). Not counted: a video
    decoder's state when frames are read from video files (use_image: false)."""

    exact_tops = 2

    @property
    def label_origin(self):
        return "the layer's batch size (" + ("num_of_labels per clip, use_multiple_label)"
                                             if self.param().use_multiple_label else "a label per clip)")

    def param(self):
        return self.lp.video_data_param

    def batch_size(self):
        batch = self.param().batch_size
        self.check(batch > 0, "VideoData needs a positive batch_size", fix="set video_data_param { batch_size: N }")
        return batch

    def fixed_size(self):
        """(H, W) the frames are resized to, or None (cpp:50-52: both or neither)."""
        p = self.param()
        self.check((p.new_height == 0) == (p.new_width == 0), "new_height and new_width must be set together")
        return (p.new_height, p.new_width) if p.new_height else None

    def data_shape(self, batch):
        p, tp = self.param(), self.lp.transform_param
        self.check(p.new_length > 0, "VideoData needs new_length, the frames of a clip (C3D's caffe.proto gives "
                   "it no default)", fix="set video_data_param { new_length: N }")
        self.check(not tp.mean_file or not len(tp.mean_value),
                   "Cannot specify mean_file and mean_value at the same time")
        self.check(len(tp.mean_value) in (0, 1, 3), f"{len(tp.mean_value)} mean_value entries for 3 channels "
                   "(Caffe: 'Specify either 1 mean_value or as many as channels')")
        self.check(not p.use_multiple_label or p.HasField("num_of_labels"),
                   "number of labels must be set together with use multiple labels", fix="set num_of_labels")
        fixed, crop = self.fixed_size(), tp.crop_size
        self.decodes = p.use_image  # cv::imread (image_io.cpp:337); videos go through cv::VideoCapture
        if fixed:
            self.check(min(fixed) >= crop, f"crop_size {crop} is larger than the frames ({fixed[0]}x{fixed[1]}) "
                       "(data_transformer.cpp:620-621)")
            self.stored = (3, p.new_length) + fixed
        if self.lp.top[0] in self.ctx.inputs:
            return None, "--input"
        if crop or fixed:
            hw = (crop, crop) if crop else fixed
            said = "new_length, " + ("crop_size" if crop else "new_height/new_width")
            return (3, p.new_length) + hw, f"the layer's parameters ({said}; C3D reads frames in colour, 3 channels)"
        if not p.use_image:
            self.missing(batch, (3, None, None), "VideoData layer: without crop_size or new_height/new_width its "
                         "frames' size is the videos' (use_image: false), which protoaudit does not decode")
        (h, w), origin, _ = self.first_image(p.source, self.first_frame, batch, 3, None)
        self.stored = (3, p.new_length, h, w)
        return (3, p.new_length, h, w), origin

    def first_frame(self, list_path):
        """The first frame of the list's first clip, "folder start_frame label" (video_data_layer.cpp:82-88),
        as ReadImageSequenceToVolumeDatum names it: root_folder + folder + "/%06d.jpg" (image_io.cpp:335).
        With use_temporal_jitter the start is drawn, from frame 1 on (cpp:290-297): frame 1. Caffe's first
        clip is a random line when the list is shuffled, and every clip of a batch must be the first's size
        (data_transformer.cpp:309-310), so the first line's is as good."""
        p = self.param()
        folder, start = FIRST_TOKENS(list_path, 2, "clip list")
        self.check(start.isdigit(), f"the clip list {list_path} does not start with 'folder start_frame label' "
                   f"(its second word is '{start}'), which Caffe's `infile >> filename >> start_frm` reads")
        return [f"{p.root_folder}{folder}/{1 if p.use_temporal_jitter else int(start):06d}.jpg"]

    def missing(self, batch, known, reason, absent=False):
        """need_input for the data top: (batch, 3, new_length, height, width)."""
        super().missing(batch, (known[0], self.param().new_length) + tuple(known[1:]), reason, absent)

    def label_shape(self, batch):
        p = self.param()
        return (batch, p.num_of_labels) if p.use_multiple_label else (batch,)

    def mean_elements(self):
        """The mean file's blob is (1, 3, new_length, H, W) of the resized frames, which VideoTransform
        CHECKs (data_transformer.cpp:156-160): known when new_height/new_width fix them."""
        if not self.lp.transform_param.mean_file or self.stored is None:
            return 0
        return count(self.stored)

    def rngs(self, run):
        """The transformer's RNG, and the shuffle's prefetch_rng_ (video_data_layer.cpp:131-132)."""
        return super().rngs(run) + int(self.param().shuffle)

    def reader_touches(self, run):
        """cv::resize's state in the prefetch thread, when frames are resized; and the clip list, when
        it is on disk: one entry per line in file_list_ (strings), start_frm_list_ (none for videos read
        with temporal jitter), label_list_ and shuffle_index_ (ints), each a vector grown by push_back
        (video_data_layer.cpp:73-89; multiple_label_list_'s vectors are not counted)."""
        p = self.param()
        t = [touch.host("cv::resize thread state", OPENCV_RESIZE_BYTES)] if self.fixed_size() else []
        found = self.files.find(p.source)
        if found is not None:
            e = LIST_ENTRIES(found.path, lists.name_label_names)
            ints = 2 if (not p.use_image and p.use_temporal_jitter) else 3
            t.append(touch.host("clip list", grown(e.count) * (STRING + 4 * ints) + e.name_bytes,
                                f"{e.count:,} clips" + ("" if e.exact else " (estimated from the list's size)")))
        return t


@register("L2Normalize", fork=FORK)
class L2Normalize(Layer):
    """L2NormalizeLayer: each item (axis 0) scaled to unit L2 norm. The top and squared_ are the
    bottom's shape (l2_normalize_layer.cpp:31-37), not in place (cpp:33); forward fills squared_
    (cu:31); backward writes the bottom's diff without asking propagate_down (cu:50)."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        refuse_in_place(self)
        return [tuple(bottoms[0])]

    def touches(self, run):
        return [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward"),
                touch.buffer("squared_", count(run.bottoms[0]), "forward", per_sample=True),
                touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]


@register("BlackHole", fork=FORK)
class BlackHole(Layer):
    """BlackHoleLayer: swallows its bottoms, like Silence, but reshapes its first top to (1, 1, 1, 1, 1)
    in LayerSetUp (black_hole_layer.cpp:27-31) and has no blob counts; its passes do nothing
    (cpp:39-47, black_hole_layer.cu), so it touches nothing, nor writes its bottoms' diffs."""

    exact_tops = 1  # top[0] is reshaped (without it Caffe reads past the vector); more tops would stay
    # empty Blobs, which no net uses and protoaudit does not model

    def reshape(self, bottoms):
        return [(1, 1, 1, 1, 1)]

    def touches(self, run):
        return []


@register("Accuracy", fork=FORK)
class Accuracy(enet.Accuracy):
    """C3D v1.1's AccuracyLayer is 2017 BVLC's with CPU code only (no accuracy_layer.cu), as
    caffe-enet's: in GPU mode its bottoms are read and its tops and nums_buffer_ written on the host."""

