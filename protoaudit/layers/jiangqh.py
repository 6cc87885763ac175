"""JiangQH's Caffe (JiangQH/caffe 0843699, the submodule JiangQH/Hypercolumns-Based-Surface-Normal-Recovery
pins): BVLC Caffe of 18 May 2016 (e79bc8f, src/ and include/ file for file but for what follows) with the layers
of its surface-normal nets, as its sources shape them.

The layers its nets use that BVLC's lacks: ImageNormalData (an ImageData whose list pairs each image with a file
of float normals, both tops the image's shape) and HyperColumns (the features of six maps sampled at the same
points, bilinearly, one row per point). Its other additions change no size of a net that does not use them and
have no rule here: HyperDeploy, Normalize (norm_param) and LpNorm (no net of the repository uses them; its
self_defined/ folder holds older copies of the same files, not built). The data transformer gains
TransformImg and TransformNormal (data_transformer.cpp:329-430), which only ImageNormalData calls.

The rest is BVLC's of its time, as GGL's Caffe (BVLC c62e06b of July 2016) has it: e79bc8f and c62e06b differ in
src/ and include/ by the recurrent layers (LSTM, RNN: absent here), Net's stages and ImageData's check for an
empty list, nothing a size depends on. Its BasePrefetchingDataLayer keeps PREFETCH_COUNT = 3 batches of data_
and label_ and copies them into the tops (base_data_layer.hpp:48-82, base_data_layer.cpp:45-125), as the SSD
fork's; its Accuracy has CPU code only (no accuracy_layer.cu); its BatchNorm keeps the file's lr_mult for its
statistics (batch_norm_layer.cpp:10-36, the same file as GGL's).

File:line references are to src/caffe/layers/, include/caffe/layers/ and src/caffe/ at that commit.
"""
from . import enet, ggl, ssd, touch
from .base import Layer, carry, register
from .cxx import grown
from .data import OPENCV_RESIZE_BYTES, ImageData

FORK = "jiangqh"

carry(__name__, FORK, ssd.SSDData, ssd.SSDImageData, ssd.SSDWindowData, enet.Accuracy, ggl.BatchNorm)


def normal_pair_names(line):
    """An ImageNormalData list line: the image before the last space, the normal file after it
    (image_normal_data_layer.cpp:47-50; with no space both substr calls give the whole line)."""
    space = line.rfind(b" ")
    return [line[:space], line[space + 1:]] if space >= 0 else [line, line]


@register("ImageNormalData", fork=FORK)
class ImageNormalData(ssd.ForkPrefetching, ImageData):
    """ImageNormalDataLayer (image_normal_data_layer.cpp, hpp:24-44), a BasePrefetchingDataLayer with two tops
    (hpp:35-36) read with image_data_param (new_height/new_width, is_color, root_folder, shuffle, batch_size).

    Its list pairs an image with its normal file, split at the last space (cpp:47-50). DataLayerSetUp reads
    the first image, resized to new_height x new_width (cpp:63-65), and shapes both tops and both Blobs of
    each of the 3 batches alike: InferBlobShape's (1, C, H, W) with batch_size for its first axis (cpp:67-78;
    InferBlobShape is BVLC's, data_transformer.cpp:595-611: crop_size x crop_size, else the image's size; C
    is 3 with is_color, 1 without). So the normal top is the data top's shape: data_ and label_ of every batch
    are both (batch, C, H, W) (cpp:74-75, :116-117).

    load_batch writes each image through TransformImg and its normal through TransformNormal
    (cpp:141-146), which take no crop: they CHECK_EQ the image's height and width against the blob's
    (data_transformer.cpp:360-361, :407-408), so a crop_size below the image's size stops the prefetch
    thread on the first batch. The normal is a cv::Mat of 3 float channels whatever is_color says
    (util/io.cpp:100), checked against the blob's channels (data_transformer.cpp:399): is_color false
    (one channel) stops there too. TransformImg subtracts mean_value only (:346-357, :374-378): a mean_file
    is loaded by the transformer (:27-29) but not applied.

    Without the dataset the tops are the parameters' (is_color, new_height/new_width), as ImageData's; the
    list's entries (lines_, pairs of strings, hpp:42) are counted when the list is there. Transient per image,
    not held: ReadNormalToCVMat's buffer of rows x cols x channels floats on the prefetch thread's stack
    (util/io.cpp:93), and its cv::Mats."""

    def reshape(self, bottoms):
        p = self.param()
        batch = self.batch_size()
        self.check(p.is_color, "ImageNormalData with is_color: false: the normal map is read with 3 float channels "
                   "(util/io.cpp:100) and TransformNormal checks them against the image's one "
                   "(data_transformer.cpp:399)", fix="remove is_color: false")
        image, origin = self.data_shape(batch)
        data = self.override(0, (batch,) + tuple(image) if image else None, own_batch=batch)
        self.check_batch_axis(0, data)
        self.note_origin(0, data, origin)
        crop = self.crop()
        if crop and self.stored is not None:
            self.check(tuple(self.stored[1:]) == (crop, crop),
                       f"crop_size {crop} with images of {self.stored[1]}x{self.stored[2]}: TransformImg and "
                       "TransformNormal take no crop and CHECK_EQ the image's height and width against the "
                       "cropped blob's (data_transformer.cpp:360-361, :407-408)",
                       fix="remove crop_size (ImageNormalData resizes with new_height/new_width)")
        label = self.override(1, tuple(data))
        self.note_origin(1, label, "the data top's shape (image_normal_data_layer.cpp:72-78: one normal map of the "
                                   "image's shape per image)")
        return [data, label]

    def reader_touches(self, run):
        """lines_: pair<string, string> entries (hpp:42), DenseImageData's size; cv::resize's state."""
        t = self.list_touch("DenseImageData", normal_pair_names)
        if self.fixed_size():
            t.append(touch.host("cv::resize thread state", OPENCV_RESIZE_BYTES))
        return t


def c_remainder(a, b):
    """C's a % b (the sign of a)."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


@register("HyperColumns", fork=FORK)
class HyperColumns(Layer):
    """HyperColumnsLayer (hypercolumns_layer.cpp, .cu; hpp:20-85): bottom 0 the normal map (N, K, H, W), the
    others feature maps; at sampled points of the H x W grid, each feature map's channels read bilinearly at
    that point scaled to the map's size. At least one bottom (hpp:34), exactly two tops (hpp:35).

    LayerSetUp (cpp:79-121) reads N, K, H, W by shape(0..3) of bottom 0 and each other bottom's shape(2),
    shape(3) and channels(): every bottom has exactly 4 axes (shape(3) needs 4, channels() at most 4).
    skip_ratio is lowered until it divides H*W (cpp:93-98; 0 divides by zero). sample_num is
    hypercolumns_param.sample_num in training (is_train, the default), else H*W / skip_ratio (cpp:99-102).
    total_channels_ is the sum of bottoms 1.. channels (cpp:110-120).

    Reshape (cpp:124-141): top 0 (N * sample_num, total_channels_, 1, 1), top 1 (N * sample_num, K): two axes.
    In training, generate_list takes up to sample_num points of each image whose normal is not NaN nor all
    zero (cpp:34-72); fewer leave rows of zeros, the shapes stay.

    What it holds: selected_points_, one int per sampled point (cpp:24-72, cleared and refilled each forward:
    its capacity stays); width_, height_, scalef_, channels_ (ints) and padf_ (floats), one entry per bottom
    (cpp:105-119). In GPU mode the first forward cudaMallocs (cuda_instanced_, .cu:113-116): the widths,
    heights and channels, one int per bottom each (.cu:278-283); the bilinear map of 6 doubles per pixel of
    H x W per feature bottom (.cu:305-307), also built on the host in mappings_ by push_back and kept
    (.cu:329-334); the sample list, one int per sampled point (.cu:115), sized by that first forward (a later
    forward that samples more copies past it, .cu:118). Training reads the normal map on the host
    (cpu_data, cpp:41) in GPU mode too. Forward_gpu passes bottoms 1 to 6 to its kernels (.cu:163-167, :67-75):
    on the GPU it takes exactly seven bottoms. Per forward in training, generate_list also makes a vector of
    H*W ints and frees it (cpp:36-39): not held.

    Backward (cpp:251-341, .cu:251-273) reads top 0's diff and zeroes then writes the diff of every bottom but
    the first, whatever propagate_down says; top 1's diff and bottom 0's diff are never touched. No blobs."""

    min_bottoms = 1
    exact_tops = 2

    def _param(self):
        return self.fork_param("hypercolumns_param")

    def _setup(self, bottoms):
        for j, shape in enumerate(bottoms):
            self.check(len(shape) == 4, f"bottom {j} {tuple(shape)} has {len(shape)} axes: HyperColumns reads "
                       "shape(2), shape(3) and channels() of each bottom (hypercolumns_layer.cpp:88-91, :105-115), "
                       "which need exactly 4")
        p = self._param()
        n, k, h, w = bottoms[0]
        skip = p.skip_ratio
        self.check(skip != 0, "skip_ratio 0: LayerSetUp divides H*W by it (hypercolumns_layer.cpp:94)")
        while c_remainder(h * w, skip) != 0:
            skip -= 1
        if p.is_train:
            samples = p.sample_num
        else:
            self.check(skip > 0, f"skip_ratio {p.skip_ratio} outside training: sample_num H*W / skip_ratio "
                       "(hypercolumns_layer.cpp:102) is negative and Blob::Reshape stops on it")
            samples = h * w // skip
        self.check(samples >= 0, f"sample_num {samples}: top 0 would have a negative first axis "
                   "(hypercolumns_layer.cpp:131), which Blob::Reshape refuses")
        channels = sum(b[1] for b in bottoms[1:])
        return n, k, h, w, samples, channels

    def reshape(self, bottoms):
        n, k, _, _, samples, channels = self._setup(bottoms)
        return [(samples * n, channels, 1, 1), (samples * n, k)]

    def touches(self, run):
        n, k, h, w, samples, _ = self._setup(run.bottoms)
        b = len(run.bottoms)
        points = n * samples
        gpu = run.mode == "gpu"
        train = self._param().is_train
        t = [touch.bottom(j, "data", "forward") for j in range(b)]
        if gpu and train:
            t.append(touch.bottom(0, "data", "forward", device="host"))
        t += [touch.top(0, "data", "forward"), touch.top(1, "data", "forward")]
        t.append(touch.host("width_, height_, scalef_, channels_, padf_", 5 * 4 * grown(b),
                            f"{b} entries each, one per bottom (hypercolumns_layer.cpp:105-119)"))
        t.append(touch.buffer("selected_points_", grown(points), "forward", per_sample=True, device="host",
                              note=f"{n} x {samples} sampled points (hypercolumns_layer.cpp:24-72)"))
        if gpu:
            if b != 7:
                t.append(touch.stop("forward", f"HyperColumns' Forward_gpu passes bottoms 1 to 6 to its kernels "
                                    f"(hypercolumns_layer.cu:163-167, :67-75): it takes exactly 7 bottoms, not {b}",
                                    fix="give it the normal map and six feature maps, or audit it in CPU mode "
                                        "(--mode cpu)"))
                return t
            pixels = h * w
            maps = 6 * (b - 1) * pixels
            note = f"6 x {b - 1} feature bottoms x {h}x{w} pixels, doubles"
            t += [touch.buffer(f"cuda_{name}_", b, "forward", per_sample=False, note=f"{b} ints (cudaMalloc, "
                               f"hypercolumns_layer.cu:{line})") for name, line in
                  (("widths", 278), ("heights", 280), ("channels", 282))]
            t.append(touch.buffer("cuda_map_lists_", maps, "forward", per_sample=False, itemsize=8,
                                  note=note + " (cudaMalloc, hypercolumns_layer.cu:307)"))
            t.append(touch.buffer("mappings_", grown(maps), "forward", per_sample=False, itemsize=8, device="host",
                                  note=note + ", by push_back (hypercolumns_layer.cu:329-334)"))
            t.append(touch.buffer("cuda_samplelist_", points, "forward", per_sample=True,
                                  note=f"{n} x {samples} ints (cudaMalloc, hypercolumns_layer.cu:115)"))
        t.append(touch.top(0, "diff", "backward"))
        t += [touch.bottom(j, "diff", "backward") for j in range(1, b)]
        return t
