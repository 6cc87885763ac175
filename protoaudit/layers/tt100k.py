"""Tsinghua-Tencent 100K's Caffe (asyncbridge/tsinghua-tencent-100k ea8f399, code/caffe/): BVLC Caffe of
August 2015 (f1cc905, src/ and include/ file for file but for what follows) with DriveNet's layers for its
traffic-sign detector, as its sources shape them.

The layers its nets use that BVLC's lacks: DriveData (a DataLayer that reads DrivingData records, an image and
its boxes, and crops, resizes and labels them itself), Tiling (channels spread into t x t tiles) and L1Loss.
The prefetching base is the fork's own (data_layers.hpp:56-113, base_data_layer.cpp/.cu): PREFETCH_COUNT = 3
batches (hpp:102) in an array (hpp:108), a Batch being a vector of new'd Blobs, data() the first and label(i)
the (i + 2)th, grown on first use (hpp:56-83); every Blob of a batch is allocated at setup on the host and, in
GPU mode, on the device (base_data_layer.cpp:50-67), and a forward copies the batch into the tops
(cpp:106-126, .cu:8-27). Its DataReader holds the records as strings, not Datums (data_reader.hpp:28-43,
data_reader.cpp:47, :106-109): data_param.prefetch x batch_size of them (cpp:19-20).

The rest is BVLC's of its time: the cuDNN R2 layers (base.CUDNN_2015_FORKS), an Accuracy with CPU code only
and a per-class top (accuracy_layer.cpp:26-46; no accuracy_layer.cu), LossLayer's num() check. It has no
BatchNorm, no Input layer (both later): a net with one does not run on it.

SeokjuLee/VPGNet's Caffe (7a55b94) carries the same Tiling files and a DriveData cut down from this one (no
artificial marks, no masks), with the same tops.

File:line references are to code/caffe/src/caffe/layers/ and code/caffe/include/caffe/ at that commit.
"""
from . import enet, touch
from .base import Layer, carry, count, legacy_shape, register
from .cxx import POINTER, STRING, assigned, grown
from .data import THREAD_BYTES, THREAD_RNG_BYTES, CopyingPrefetching, ThroughDataReader
from .data import Data as BVLCData, ImageData as BVLCImageData, WindowData as BVLCWindowData
from .losses import Loss, legacy_num_pair

FORK = "tt100k"
BLOB_OBJECT = 80  # sizeof(Blob<float>) (protoaudit.memory.host.BLOB): each Blob a Batch news
REGRESSION_MASKS = 8  # kNumRegressionMasks (drive_data_layer.cpp:22): the label's channels
MARK_CHANNELS = 4  # picgen: the artificial mark's B, G, R and alpha planes (drive_data_layer.cpp:631-635)
LABEL_MATS = 3 + REGRESSION_MASKS  # box_mask, poly_mask, ellipse_mask and the 8 label planes (cpp:152-171)
DEFINES = {"image_height": "DriveData: the height of the images its records store",
           "image_width": "DriveData: the width of the images its records store"}

carry(__name__, FORK, enet.Accuracy)


class ForkPrefetching(CopyingPrefetching):
    """The fork's BasePrefetchingDataLayer (data_layers.hpp:85-113): PREFETCH_COUNT = 3 batches in an array
    (hpp:102, :108), each a vector of Blobs that Batch::resize news one by one as data() and label(i) are first
    asked for (hpp:59-82), so a layer of n tops has n of them; allocated at setup on the host (base_data_layer
    .cpp:50-56) and, in GPU mode, on the device (cpp:57-66); copied into the tops by each forward (cpp:106-126,
    .cu:8-27)."""

    PREFETCH_COUNT = 3
    BATCH_BLOBS = 0

    @property
    def BATCH_EXTRA_BYTES(self):
        """blobs, the vector in each Batch (its buffer of pointers, grown by push_back), and the Blobs it news."""
        blobs = len(self.lp.top)
        return 24 + POINTER * grown(blobs) + blobs * BLOB_OBJECT


class StringReader(ThroughDataReader):
    """The fork's DataReader: prefetch x batch_size strings (data_reader.cpp:19-20, :44-47), each assigned a
    record's bytes by the reader's thread (cpp:106-109), which runs ahead until all of them hold one."""

    def reader_touches(self, run):
        strings = self.lp.data_param.prefetch * run.tops[0][0]
        size = STRING + assigned(self.record_bytes(run))
        t = BVLCData.reader_touches(self, run)
        t.append(touch.buffer("DataReader strings", strings, "setup", per_sample=True, itemsize=size, kind="prefetch",
                              device="host", note=f"{strings} records of {size:,} bytes (prefetch x batch_size)"))
        t.append(touch.host("DataReader thread", THREAD_BYTES + THREAD_RNG_BYTES, "its boost::thread and RNG"))
        return t

    def record_bytes(self, run):
        """A record's bytes: the first record's data when read, else a raw image of the stored shape (or the
        data top's)."""
        if self.record is not None:
            return self.record.data_bytes
        return count(self.stored or run.tops[0][1:])


@register("Data", fork=FORK)
class Data(ForkPrefetching, StringReader, BVLCData):
    """DataLayer (data_layer.cpp): BVLC's, parsing each string the reader holds into a Datum of its own
    (cpp:33-34, :74-76, :93-94); every top after the data is a label of one value per image (cpp:50-55)."""


@register("ImageData", fork=FORK)
class ImageData(ForkPrefetching, BVLCImageData):
    pass


@register("WindowData", fork=FORK)
class WindowData(ForkPrefetching, BVLCWindowData):
    pass


@register("DriveData", fork=FORK)
class DriveData(ForkPrefetching, StringReader, BVLCData):
    """DriveDataLayer (drive_data_layer.cpp, data_layers.hpp:136-149), a DataLayer of up to three tops
    (hpp:146), whose DataLayerSetUp shapes them from drive_data_param alone (cpp:30-89):
    - data (batch_size, 3, cropped_height, cropped_width) (cpp:37-45);
    - with labels, label (batch_size, 8, tiling_height x label_resolution, tiling_width x label_resolution)
      (cpp:65-78) and label_type (batch_size, 1, tiling_height x catalog_resolution, tiling_width x
      catalog_resolution) (cpp:72-82): a layer of two tops stops on CHECK_GE(top.size(), 3) (cpp:81).
    load_batch keeps those shapes (cpp:570-577) and CHECKs the data has elements (cpp:561).

    Beyond the batches and the tops (ForkPrefetching), what it holds comes from the dataset:
    - the transformer's data_mean_, the mean file's blob (data_transformer.cpp:18-27), which load_batch reads
      at the stored images' size (drive_data_layer.cpp:580-582, :689-690): the mean file must be there, or
      cpu_data() of an empty Blob stops on CHECK(data_) (blob.cpp:72);
    - the reader's strings, each a DrivingData record: the stored image's raw bytes (cpp:619, :691-692) and
      its boxes;
    - in the prefetch thread, while a batch loads: v_mean, a copy of the mean (cpp:581), the parsed record
      (cpp:567, :603), one label Datum of 8 planes (cpp:618, :456-515), the eleven label maps of
      ReadBoundingBoxLabelToDatum (cpp:152-171), with genlist_file the four picgen planes of the crop's size
      (cpp:631-635), and for the image the warped mean and one channel in floats (cpp:682, :691-695).
    Without the mean file, the stored images are taken as the crop's size, said, unless --define
    image_height=H --define image_width=W gives them. The artificial marks genlist_file names are read at setup
    and held for the layer's life (cpp:49-62): not counted (their files are the user's)."""

    max_tops = 3
    defines = DEFINES

    def param(self):
        return self.fork_param("drive_data_param")

    def reshape(self, bottoms):
        p = self.param()
        tops = len(self.lp.top)
        self.check(tops != 2, "DriveData with labels shapes label_type as its third top: with two tops it stops on "
                   "CHECK_GE(top.size(), 3) (drive_data_layer.cpp:81)", fix="give it three tops: data, label and "
                   "label_type")
        tp = self.lp.transform_param
        self.check(bool(tp.mean_file), "DriveData reads the transformer's mean blob in every batch (drive_data_layer"
                   ".cpp:580-582); without mean_file that Blob is never shaped and cpu_data() stops on CHECK(data_) "
                   "(blob.cpp:72)", fix="give transform_param { mean_file } (the mean of the stored images)")
        self.read_mean()
        batch = self.batch_size()
        data = (3, p.cropped_height, p.cropped_width)
        label = (REGRESSION_MASKS, p.tiling_height * p.label_resolution, p.tiling_width * p.label_resolution)
        label_type = (1, p.tiling_height * p.catalog_resolution, p.tiling_width * p.catalog_resolution)
        self.check(min(label + label_type) >= 0, f"DriveData's label {label} or label_type {label_type} has a "
                   "negative axis (tiling_height, tiling_width, label_resolution, catalog_resolution): Blob::Reshape "
                   "stops on CHECK_GE(shape[i], 0) (blob.cpp:28)")
        shape = self.override(0, (batch,) + data, own_batch=batch)
        self.check_batch_axis(0, shape)
        self.check(count(shape) > 0, f"DriveData's data {shape} has no elements: load_batch stops on "
                   "CHECK(batch->data().count()) (drive_data_layer.cpp:561)", fix="give data_param { batch_size } "
                   "and drive_data_param { cropped_height cropped_width } above 0")
        batch = shape[0]
        self.note_origin(0, shape, "the layer's drive_data_param (3 x cropped_height x cropped_width, "
                                   "drive_data_layer.cpp:37-42)")
        out = [shape]
        if tops == 3:
            for j, (own, why) in enumerate(((label, "8 x tiling_height x label_resolution x tiling_width x "
                                                     "label_resolution, drive_data_layer.cpp:65-78"),
                                            (label_type, "1 x tiling_height x catalog_resolution x tiling_width x "
                                                         "catalog_resolution, drive_data_layer.cpp:72-82")), 1):
                top = self.override(j, (batch,) + own)
                self.note_origin(j, top, f"the layer's drive_data_param ({why})")
                out.append(top)
        self.stored = self.stored_image(data)
        return out

    def stored_image(self, crop):
        """(C, H, W) of the images the records store: the mean file's, --define image_height/image_width, or
        the crop's (said)."""
        if self.mean_shape is not None:
            return tuple(self.mean_shape)
        h, w = self.defined("image_height"), self.defined("image_width")
        if h and w:
            return (3, h, w)
        self.assume(f"the mean file '{self.lp.transform_param.mean_file}' and source "
                    f"'{self.lp.data_param.source}' are not on this machine: the images the records store are taken "
                    f"as the crop's {crop[1]}x{crop[2]} in colour, for the mean blob, the reader's records and "
                    "load_batch's copy of the mean", "--define image_height=H --define image_width=W (the stored "
                    "images' size)")
        return crop

    def record_bytes(self, run):
        """A DrivingData record: the stored image's raw bytes (its boxes, a few dozen bytes each, not counted)."""
        return count(self.stored)

    def reader_touches(self, run):
        t = super().reader_touches(run)
        p = self.param()
        h, w = run.tops[0][2:]
        labels = len(run.tops) == 3
        plane = count(run.tops[1][2:]) if labels else 0
        mean = count(self.stored)
        marks = MARK_CHANNELS * h * w if p.genlist_file else 0
        datum = REGRESSION_MASKS * plane
        peak = 4 * (mean + marks + datum + max(LABEL_MATS * plane, h * w + count(self.stored[1:])))
        peak += self.record_bytes(run)
        t.append(touch.host("load_batch working set", peak,
                            "v_mean, the parsed record, the label Datum, and the larger of the label maps and the "
                            "image's warp" + (", the artificial mark's planes" if marks else "")))
        return t


@register("Tiling", fork=FORK)
class Tiling(Layer):
    """TilingLayer (tiling_layer.cpp, vision_layers.hpp:522-560): one bottom, one top (hpp:536-540; Reshape's
    CHECK_EQ(top.size(), 1), cpp:31). tile_dim t must be above 0 (LayerSetUp, cpp:21-24). The bottom is read as
    (num, channels, height, width) (cpp:32-34); its channels must be a multiple of t x t (cpp:40-42), and the top
    is (num, channels / t^2, height x t, width x t) (cpp:43-44).

    Forward_gpu and Backward_gpu call the CPU code (tiling_layer.cu:13-22): in GPU mode the forward reads the
    bottom and writes the top on the host (cpp:50-51), and the backward, where propagate_down[0] (cpp:74-76),
    reads the top's diff and writes the bottom's on the host (cpp:77-78); the layers around it read them on the
    device."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        t = self.fork_param("tiling_param").tile_dim
        self.check(t > 0, f"tile_dim must be specified and positive (tiling_layer.cpp:23-24); it is {t}",
                   fix="give tiling_param { tile_dim: T }")
        n, c, h, w = legacy_shape(self, bottoms[0])
        self.check(c % (t * t) == 0, f"The number of input channels for tiling layer must be multiples of the "
                   f"tile_dim (squared: {c} channels, tile_dim {t}; tiling_layer.cpp:40-42)")
        return [(n, c // (t * t), h * t, w * t)]

    def touches(self, run):
        t = [touch.bottom(0, "data", "forward", device="host"), touch.top(0, "data", "forward", device="host")]
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward", device="host"), touch.bottom(0, "diff", "backward", device="host")]
        return t


@register("L1Loss", fork=FORK)
class L1Loss(Loss):
    """L1LossLayer (l1_loss_layer.cpp, .cu; loss_layers.hpp:772-863): LossLayer's scalar top and num() check
    (loss_layer.cpp:23-24), then bottom 0's channels, height and width must be bottom 1's (l1_loss_layer.cpp:
    14-16); a gradient into either bottom (AllowForceBackward, hpp). diff_ and sign_ are shaped like bottom 0
    (cpp:17-20) and written by the forward, on the device in GPU mode (.cu:16-23; cpp:27-32), which writes the
    loss on the host (.cu:25). The backward reads the top's diff on the host (.cu:34) and sign_, and writes the
    diff of each bottom with propagate_down (.cu:31-41, cpp:41-52)."""

    def allow_force_backward(self, bottom_index):
        return True

    def reshape(self, bottoms):
        data, label = legacy_num_pair(self, bottoms)
        self.check(data[1:] == label[1:], f"L1Loss's bottoms must agree in channels, height and width (l1_loss_layer"
                   f".cpp:14-16): {tuple(bottoms[0])} vs {tuple(bottoms[1])}")
        return [()]

    def label_for(self, prediction):
        return tuple(prediction)

    def touches(self, run):
        n = count(run.bottoms[0])
        t = [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"),
             touch.buffer("diff_", n, "forward", per_sample=True), touch.buffer("sign_", n, "forward", per_sample=True),
             touch.top(0, "data", "forward", device="host")]
        if any(run.propagate_down):
            t.append(touch.top(0, "diff", "backward", device="host"))
        return t + [touch.bottom(j, "diff", "backward") for j, down in enumerate(run.propagate_down) if down]
