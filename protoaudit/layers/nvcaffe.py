"""NVIDIA's Caffe 0.15 (NVIDIA/caffe, branch caffe-0.15 at 4b8d54d, the Caffe that DIGITS 4 and 5 train
DetectNet with), as its sources shape it: DetectNetTransformation, L1Loss and its Data layer.

It is BVLC Caffe of May 2016 (f467ead) with NVIDIA's additions. What it does to every net, beyond
its layers, is said as an assumption of each net (fork_note below): its GPU memory comes from cub's
caching allocator, and its cuDNN convolutions share one workspace. Its other layers (Convolution,
Pooling, LRN, ReLU, Sigmoid, Dropout, Slice, Concat, Eltwise, EuclideanLoss) are counted as BVLC's:
their Caffe-engine code is BVLC's of that date. Its BatchNorm, five blobs and a cuDNN engine of its
own, has no rule yet: a net of this fork with one is refused rather than sized as BVLC's. DetectNet's
Python layers (python/caffe/layers/detectnet/) are in protoaudit.layers.python_detectnet.

File and line references are to that commit: include/caffe/layers/detectnet_transform_layer.hpp (hpp),
src/caffe/layers/detectnet_transform_layer.cpp and .cu (cpp, cu), include/caffe/util/detectnet_coverage.hpp
and src/caffe/util/detectnet_coverage_rectangular.cpp (coverage), l1_loss_layer.hpp/.cpp,
base_data_layer.hpp/.cpp/.cu, data_layer.cpp, data_reader.cpp, util/gpu_memory.cpp/.hpp,
cudnn_conv_layer.hpp/.cpp.
"""
from . import touch
from .base import Assumption, Layer, count, float32, fork_note, legacy_shape, register
from .cxx import STRING, assigned
from .data import THREAD_BYTES, CopyingPrefetching, Data as BVLCData, ThroughDataReader
from .losses import Loss

FORK = "nvcaffe"

AUGMENT_SELECTION_BYTES = 32  # sizeof(AugmentSelection), hpp:27-43: two floats, a bool (padded to 4), a
#                               cv::Size (2 ints), a float and a cv::Point (2 ints)
TRANSFORMED_LABEL_SIZE = 8  # coverage.hpp:112: foreground, the box's two corners, its inverse size, obj_norm
BBOX_VALUES = 16  # a BboxLabel_<float> (coverage.hpp:20-50), which blobToLabels CHECKs a row holds (cpp:210-212)
DIGITS_BOXES = 64  # DIGITS' pad_bbox/bbox_to_array default max_bboxes (digits/extensions/data/objectDetection/utils.py)
ASSUMED_IMAGE = "assumed: an image size"  # how data.assumed_image says where a shape protoaudit guessed came from


@register("DetectNetTransformation", fork=FORK)
class DetectNetTransformation(Layer):
    """DetectNetTransformationLayer: two bottoms, the images and DIGITS' bounding-box labels, two tops,
    exactly (hpp:74-75).

    Reshape (cpp:110-146) CHECKs 3 channels and as many labels as images (legacy accessors: at most 4
    axes), then gives top 0 (num, 3, image_size_y, image_size_x) and top 1 (num, classes + 8, grid H,
    grid W) whatever the bottoms' height and width (the images are cropped in TRAIN and scaled in TEST
    to that size, cpp:344-410). The grid is the CoverageGenerator's gridROI_ (coverage.hpp:124-129): a
    cv::Rect made from the image's size times (float)(1 / stride) (coverage cpp:45-48), each side rounded
    to the nearest integer (cv::saturate_cast, ties to even); the label's channels are the largest
    object_class dst plus 1 (one class, src 1 to dst 0, where none is given: coverage cpp:71-101) and
    the 8 values of a transformed label (coverage.hpp:112).

    What it keeps: with a mean_file (cpp:48-87, 119-123), data_mean_, the mean resized to the bottom's
    height and width, a cv::Mat of 3 floats a pixel, on the host; in GPU mode mean_blob_ (1, 3, H, W),
    filled on the host and read on the device by the forward (cu:397-400). In GPU mode Reshape reserves
    two GPUMemory workspaces (cpp:138-145): one AugmentSelection per image (32 bytes) and the
    bottom's count of floats (the colour-transformed images, cu:355-394). The GPU forward reads the
    images on the device and the labels on the host (blobToLabels, cu:419), writes top 0 on the device
    and top 1 on the host (cu:420-427), which the layers after it read on the device (that copy is the
    one counted; the labels' host copies are not). The CPU forward's per-image cv::Mats are freed when
    it returns: not counted. Backward does nothing (hpp:86-93)."""

    exact_bottoms = 2
    exact_tops = 2

    def g_param(self):
        return self.fork_param("detectnet_groundtruth_param")

    def grid(self):
        """(height, width) of gridROI_ (coverage cpp:45-48)."""
        g = self.g_param()
        self.check(g.stride > 0, "detectnet_groundtruth_param's stride is 0: the grid is the image size times "
                   "1 / stride (detectnet_coverage_rectangular.cpp:46-48)", fix="give a stride of 1 or more")
        inverse = float32(1.0 / g.stride)
        return tuple(round(float32(float32(side) * inverse)) for side in (g.image_size_y, g.image_size_x))

    def label_channels(self):
        """findNumLabels + TRANSFORMED_LABEL_SIZE (coverage cpp:52, 71-101)."""
        classes = [m.dst for m in self.g_param().object_class] or [0]
        return max(classes) + 1 + TRANSFORMED_LABEL_SIZE

    def reshape(self, bottoms):
        image, labels = (legacy_shape(self, shape) for shape in bottoms)
        self.check(image[1] == 3, f"accepts only three-channel images, CHECK_EQ(bottom[0]->channels(), 3) "
                   f"(detectnet_transform_layer.cpp:115); bottom 0 is {tuple(bottoms[0])}")
        self.check(image[0] == labels[0], f"takes as many labels as images, CHECK_EQ(bottom[0]->num(), "
                   f"bottom[1]->num()) (detectnet_transform_layer.cpp:117); bottoms {tuple(bottoms[0])} and "
                   f"{tuple(bottoms[1])}")
        self.refuse_a_guess(bottoms)
        g = self.g_param()
        grid_h, grid_w = self.grid()
        return [(image[0], image[1], g.image_size_y, g.image_size_x),
                (labels[0], self.label_channels(), grid_h, grid_w)]

    def wanted(self, bottoms):
        """The bottoms of a DIGITS object-detection dataset for this layer: images the size the layer
        crops or scales them to, and labels of DIGITS' format, a header row and DIGITS_BOXES rows of
        BBOX_VALUES (utils.py pad_bbox: (max_bboxes + 1, 16), one channel), each at its own batch."""
        g = self.g_param()
        return [(bottoms[0][0] if bottoms[0] else 1, 3, g.image_size_y, g.image_size_x),
                (bottoms[1][0] if bottoms[1] else 1, 1, DIGITS_BOXES + 1, BBOX_VALUES)]

    def refuse_a_guess(self, bottoms):
        """A bottom whose shape protoaudit guessed as an image (an absent dataset: data.assumed_image)
        that is not what wanted() gives is refused, so that the audit takes fitting()'s instead: this
        layer's parameters say what its data is (no CHECK of Caffe's; a given or read shape passes)."""
        for j, (shape, want) in enumerate(zip(bottoms, self.wanted(bottoms))):
            name = self.made_from(self.lp.bottom[j])
            if tuple(shape) != want and any(o.top == name and o.source.startswith(ASSUMED_IMAGE)
                                            for o in self.ctx.origins):
                self.fail(f"bottom {j} ('{name}') is {'x'.join(map(str, shape))}, an image size protoaudit assumed; "
                          f"this layer's parameters make it {'x'.join(map(str, want))}",
                          fix=f"give its shape: --input {name}={'x'.join(map(str, want))}")

    def made_from(self, name):
        """The blob a (split) bottom copies: Caffe names a Split's tops after the blob it splits."""
        by_top = {top: lp for lp in self.ctx.layers for top in lp.top}
        seen = set()
        while name in by_top and by_top[name].type == "Split" and name not in seen:
            seen.add(name)
            name = by_top[name].bottom[0]
        return name

    def fitting(self, bottoms, kinds):
        """The data whose dataset is absent: wanted()'s shapes, said with what they are; None where
        images given otherwise are not the three-channel images Reshape CHECKs (cpp:115)."""
        if not kinds[0] and legacy_shape(self, bottoms[0])[1] != 3:
            return None
        want = self.wanted(bottoms)
        g = self.g_param()
        said = [f"images the size it crops or scales them to, detectnet_groundtruth_param's image_size_y x "
                f"image_size_x ({g.image_size_y}x{g.image_size_x}, the size a DIGITS object-detection dataset is "
                "padded and resized to)",
                f"DIGITS' bounding-box labels, 1x{DIGITS_BOXES + 1}x{BBOX_VALUES} (a header row and room for "
                f"{DIGITS_BOXES} boxes of {BBOX_VALUES} values, bbox_to_array's default; DIGITS pads a dataset's "
                "labels to the most boxes one of its images has)"]
        shapes = [w if kind else None for w, kind in zip(want, kinds)]
        return shapes, " and ".join(words for words, kind in zip(said, kinds) if kind)

    def touches(self, run):
        n, c, h, w = legacy_shape(self, run.bottoms[0])
        gpu = run.mode == "gpu"
        t = [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"),
             touch.top(0, "data", "forward"), touch.top(1, "data", "forward")]
        if self.lp.transform_param.mean_file:
            t.append(touch.buffer("data_mean_", 3 * h * w, "setup", per_sample=False, device="host",
                                  note=f"the mean resized to 3x{h}x{w}, a cv::Mat of floats"))
            if gpu:
                t.append(touch.buffer("mean_blob_ (host)", 3 * h * w, "setup", per_sample=False, device="host",
                                      note=f"1x3x{h}x{w}"))
                t.append(touch.buffer("mean_blob_", 3 * h * w, "forward", per_sample=False, note=f"1x3x{h}x{w}"))
        if gpu:
            t.append(touch.buffer("gpu_workspace_augmentations_", AUGMENT_SELECTION_BYTES * n, "setup",
                                  per_sample=True, itemsize=1, note=f"{n} AugmentSelections of "
                                  f"{AUGMENT_SELECTION_BYTES} bytes"))
            t.append(touch.buffer("gpu_workspace_tmpdata_", count(run.bottoms[0]), "setup", per_sample=True,
                                  note=f"{n}x{c}x{h}x{w}, the images after the colour transformations"))
        return t


@register("L1Loss", fork=FORK)
class L1Loss(Loss):
    """L1LossLayer: LossLayer's scalar top and two bottoms of one num() (loss_layer.cpp), whose
    count(1) must agree (l1_loss_layer.cpp:15-16); a gradient into either (AllowForceBackward,
    l1_loss_layer.hpp:30-32). diff_ and sign_ like bottom 0 (cpp:17-18).

    It has CPU code only (its Forward_gpu and Backward_gpu are commented out, hpp:38-43): in GPU mode
    Layer's GPU calls run the CPU code, so the forward reads both bottoms on the host, writes diff_,
    sign_ (cpp:26-31) and the loss (cpp:34) there, and the backward writes the bottoms' diffs on the host
    (cpp:41-52), which the layers below read on the device (that copy is the one counted; the bottoms'
    host copies are not)."""

    def allow_force_backward(self, bottom_index):
        return True

    def check_bottoms(self, bottoms):
        self.check(count(bottoms[0], 1) == count(bottoms[1], 1),
                   f"Inputs must have the same dimension (l1_loss_layer.cpp:15-16): {tuple(bottoms[0])} vs "
                   f"{tuple(bottoms[1])}")

    def label_for(self, prediction):
        return tuple(prediction)

    def touches(self, run):
        n = count(run.bottoms[0])
        t = [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"),
             touch.buffer("diff_", n, "forward", per_sample=True, device="host"),
             touch.buffer("sign_", n, "forward", per_sample=True, device="host"),
             touch.top(0, "data", "forward", device="host")]
        if any(run.propagate_down):
            t.append(touch.top(0, "diff", "backward", device="host"))
        t += [touch.bottom(j, "diff", "backward") for j, down in enumerate(run.propagate_down) if down]
        return t


@register("BatchNorm", fork=FORK)
class BatchNorm(Layer):
    """NVIDIA's BatchNormLayer is not BVLC's: five blobs, scale, bias, mean, variance and an iteration
    count (batch_norm_layer.cpp:24-47), buffers of its own (:52-80), and in a cuDNN build a
    CuDNNBatchNormLayer by default (layer_factory.cpp's GetBatchNormLayer). protoaudit has no rule for
    it: BVLC's would count other parameters, so a net of this fork with one is refused."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        self.fail("NVIDIA's Caffe 0.15's BatchNorm keeps five parameter blobs (scale, bias, mean, variance, an "
                  "iteration count: batch_norm_layer.cpp:24-47) and buffers of its own, and a cuDNN build runs "
                  "CuDNNBatchNorm: protoaudit has no rule for it, and BVLC's would count other parameters",
                  fix="remove it to audit the rest of the net")


class NVPrefetching(CopyingPrefetching):
    """Its BasePrefetchingDataLayer: PREFETCH_COUNT = 3 batches (base_data_layer.hpp:76) in an array
    (hpp:82), each Batch data_, label_, a cudaEvent_t and random_vec_ (hpp:48-57, the last a Blob<int>
    shaped only under use_gpu_transform, data_layer.cpp:117-122), allocated at setup on the host and in
    GPU mode on the device (base_data_layer.cpp:53-68), and a forward that copies the batch into the
    tops (cpp:100-119, .cu:7-40)."""

    PREFETCH_COUNT = 3
    BATCH_BLOBS = 3
    BATCH_EXTRA_BYTES = 8  # copied_, a cudaEvent_t (protoaudit.memory.host)


@register("Data", fork=FORK)
class Data(NVPrefetching, ThroughDataReader, BVLCData):
    """DataLayer reads through a DataReader (data_layer.hpp:35) whose queue holds prefetch x batch_size
    std::strings (data_reader.cpp:19-20, 44-49), each assigned a record's bytes as stored
    (data_reader.cpp:105-109: `*datum = cursor->value()`), parsed later by the transforming threads.
    Those are a pool of data_param.threads boost threads, or where 0 one in CPU mode and the CPU
    count over the GPU count in GPU mode (data_layer.cpp:19-49; counted as one: host memory, which
    does not count against the card). use_gpu_transform (transform_param, off by default) is not
    modelled: its batches hold the uncropped records and 3 ints an image (data_layer.cpp:117-122)."""

    def reshape(self, bottoms):
        if self.lp.transform_param.use_gpu_transform:
            self.assume("transform_param.use_gpu_transform is counted as without it: its prefetch batches hold the "
                        "uncropped records and 3 ints an image, which protoaudit does not count",
                        "use_gpu_transform: false (the default)")
        return super().reshape(bottoms)

    def datum_bytes(self, run):
        """A std::string assigned one record as the database stores it: a serialized Datum, about its
        data bytes (the encoded image, or raw pixels; without the dataset, a raw record of the top's
        image), 5 bytes a float_data value and its header."""
        record = self.record
        if record is not None:
            data, floats = record.data_bytes, record.float_values
        else:
            data, floats = count(self.stored or run.tops[0][1:]), 0
        return STRING + assigned(data + 5 * floats + 16)

    def reader_touches(self, run):
        threads = self.lp.data_param.threads or 1
        return super().reader_touches(run) + [touch.host("transform thread pool", threads * THREAD_BYTES,
                                                         f"{threads} boost::thread{'s' if threads > 1 else ''}")]


@fork_note(FORK)
def gpu_memory(layers):
    """What NVIDIA's Caffe does to every net it runs in GPU mode, said once per net."""
    return [Assumption(
        "(file)", "NVIDIA's Caffe takes GPU memory from cub's caching allocator (caffe train's GPUMemory::Scope, "
        "gpu_memory.cpp:14-17, 35-47): a request of up to 4 MiB is given the power of two at or above it (64 bytes "
        "at least) and a freed block stays cached, so the card holds more than the device figures, which are the "
        "bytes Caffe asks for (up to twice each buffer under 4 MiB). In a cuDNN build its convolutions share one "
        "workspace, the largest any of them asks for, sized while cuDNN's algorithms are sought with up to 95% of "
        "the free memory (cudnn_conv_layer.hpp:34-38, cudnn_conv_layer.cpp:96-113, 196-223); the cuDNN figure "
        "counts BVLC's workspace per layer instead", "--mode cpu (host memory, which the pool does not hold)")]
