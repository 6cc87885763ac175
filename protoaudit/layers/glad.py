"""GLAD's Caffe (southatsouth/GLAD b0b88d9, caffe/): BVLC Caffe 1464368 of August 2016 (src/, include/, tools/,
python/ and cmake/ file for file but for the Crop layer and caffe.proto) with a Crop of its own, as its sources
shape it.

Its Crop takes one bottom, not BVLC's two: the sizes of the cropped axes are crop_param's height (axis 2) and
weight (every other cropped axis), two fields BVLC's CropParameter lacks (caffe.proto:625-626). GLAD's
train_val.prototxt cuts four parts (head, upper body, lower body, the whole) from one 512 x 512 image so.

The rest is BVLC's of its time, as GGL's Caffe (BVLC c62e06b of July 2016, the same src/ and include/ files but
for loss_layer.cpp's message and mkl_alternate.hpp) and HRSOD's (BVLC 9e9e9ba) have it: its
BasePrefetchingDataLayer keeps PREFETCH_COUNT = 3 batches of data_ and label_ and copies them into the tops
(base_data_layer.hpp:49-79), as the SSD fork's; its Accuracy has CPU code only (no accuracy_layer.cu); its
BatchNorm keeps the file's lr_mult for its three statistics (no ParamSpec of lr_mult 0 added,
batch_norm_layer.cpp:10-37), and its upgrade_proto.cpp (BVLC 1464368's) predates the BatchNorm param upgrade.

File:line references are to caffe/src/caffe/layers/, caffe/include/caffe/layers/ and
caffe/src/caffe/proto/caffe.proto at that commit.
"""
from . import enet, ggl, ssd, structure, touch
from .base import canonical_axis, carry, register

FORK = "glad"

carry(__name__, FORK, ssd.SSDData, ssd.SSDImageData, ssd.SSDWindowData, enet.Accuracy, ggl.BatchNorm)


@register("Crop", fork=FORK)
class Crop(structure.Crop):
    """CropLayer with one bottom (ExactNumBottomBlobs 1, crop_layer.hpp:31; CHECK_EQ(bottom.size(), 1),
    crop_layer.cpp:22). LayerSetUp: the axis must be below the bottom's axes (cpp:24-25), more than one offset
    must be one per axis from it on (cpp:26-32); height and weight are read as ints (cpp:33-34, caffe.proto:
    625-626, both default 0). Reshape (cpp:38-87): every axis from the axis on is cut to height where it is
    axis 2 and to weight otherwise (cpp:57-62), at offset(0) where one offset is given, offset(i - axis) where
    several, 0 where none (cpp:63-70), and CHECK_GE(bottom size - offset, new size) (cpp:72-74); the axes
    before it keep the bottom's sizes (cpp:45, :76).

    Its allocations are BVLC's Crop's of today: Reshape shapes three Blob<int> of one entry per axis, offsets,
    src_strides_ and dest_strides_, and writes them on the host (cpp:46-49, :77, :81-86); Forward_gpu and
    Backward_gpu read their gpu_data (.cu:58-63, :76-81), so in GPU mode each has a host and a device copy;
    Backward zeroes the whole bottom diff where propagate_down[0] before copying the top's diff into it
    (cpp:146-151, .cu:73-82)."""

    exact_bottoms = 1

    def reshape(self, bottoms):
        p = self.lp.crop_param
        big = tuple(bottoms[0])
        axis = canonical_axis(self, p.axis, len(big))
        self.check(axis < len(big), f"crop axis {axis} bigger than input dim {len(big)} (crop_layer.cpp:25)")
        offsets = list(p.offset)
        if len(offsets) > 1:
            self.check(axis + len(offsets) == len(big),
                       f"number of offset values specified ({len(offsets)}) must be equal to the number of "
                       f"dimensions following axis {axis} of bottom 0 {big} (crop_layer.cpp:26-32)")
        top = list(big)
        for i in range(axis, len(big)):
            size = p.height if i == 2 else p.weight
            offset = 0 if not offsets else offsets[0] if len(offsets) == 1 else offsets[i - axis]
            self.check(big[i] - offset >= size,
                       f"the crop for dimension {i} is out-of-bounds with size {size} and offset {offset} "
                       f"(bottom 0 {big}; crop_layer.cpp:72-74)")
            top[i] = size
        return [tuple(top)]

    def touches(self, run):
        t = super().touches(run)
        if run.mode == "cpu":
            return t
        axes = len(run.bottoms[0])
        return t + [touch.buffer(f"{name} (host)", axes, "setup", per_sample=False, device="host",
                                 note=f"Blob<int> of {axes}, written by mutable_cpu_data() in Reshape "
                                      f"(crop_layer.cpp:{line})")
                    for name, line in (("offsets", "49"), ("src_strides_", "84"), ("dest_strides_", "85"))]
