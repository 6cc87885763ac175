"""HED's own data layer (s9xie/hed, commit 912632b): ImageLabelmapData, as its source shapes it.

File and line references are to src/caffe/layers/image_labelmap_data_layer.cpp,
base_data_layer.cpp/.cu and include/caffe/data_layers.hpp at that commit.

RCF's Caffe (yun-liu/rcf at ce460ff, the fork rcf) carries the same layer, ported to a 2016 BVLC
Caffe: its image_labelmap_data_layer.cpp differs from HED's only in whitespace, commented-out code
and the label map converted to float before it is scaled (cpp:242-243, a transient cv::Mat), and its
BasePrefetchingLabelmapDataLayer (include/caffe/layers/base_data_layer.hpp:54-58, 90-119,
base_data_layer.cpp:127-211, .cu:29-46) is HED's: the class below sizes both.
"""
from .base import register
from .data import CopyingPrefetching, ImageData


@register("ImageLabelmapData", fork=("hed", "rcf"))
class ImageLabelmapData(CopyingPrefetching, ImageData):
    """ImageLabelmapDataLayer: ImageData's image list, each line an image and its ground-truth map
    (cpp:44-46), read with image_data_param (is_color, new_height/new_width, root_folder).

    The data top is ImageData's; the label map is read grey and resized like the image, so the
    label top is (batch, 1, H, W) at the data's batch, height and width (cpp:70-107: one channel
    and the image's size are CHECKed, both go through InferBlobShape). Its prefetching base
    (BasePrefetchingLabelmapDataLayer) keeps PREFETCH_COUNT = 3 batches of data and label map in an
    array (data_layers.hpp:115-121), allocated at setup, with their device copies in GPU mode
    (base_data_layer.cpp:143-152), and each forward copies the batch into the tops
    (base_data_layer.cpp:193-206, base_data_layer.cu:30-41)."""

    PREFETCH_COUNT = 3
    BATCH_BLOBS = 2

    def reshape(self, bottoms):
        batch = self.batch_size()
        image, origin = self.data_shape(batch)
        data = self.override(0, (batch,) + tuple(image) if image else None, own_batch=batch)
        self.check_batch_axis(0, data)
        self.note_origin(0, data, origin)
        label = self.override(1, (data[0], 1) + tuple(data[2:]))
        self.note_origin(1, label, "the data top's batch, height and width (one grey label map per image)")
        return [data, label]
