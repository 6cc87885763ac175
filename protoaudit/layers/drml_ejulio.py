"""Kaili Zhao's DRML layers as ejulio/DRML ports them (f036320): layer files and a whole caffe.proto to merge into a
BVLC Caffe of 2016, as their sources shape them: MultilabelImageData, Box, Splice and MultiSigmoidCrossEntropyLoss,
and that Caffe's data layers.

The layers are jellyDL/drml_caffe's (the fork drml) but for the data layer's name and base and Box's top count:
box_layer.cpp, splice_layer.cpp/.cu, box_layer.cu and multi_sigmoid_cross_entropy_loss_layer.cpp/.cu are its files
but for includes, whitespace and a stray semicolon, so protoaudit.layers.drml's classes size them; box_layer.hpp
asks two tops or more (MinTopBlobs 2, hpp:28) where jellyDL's asks one. MultilabelImageData
(multilabel_image_data_layer.cpp) is the ImageData of the BVLC Caffe the files were written against: it shapes
`this->PREFETCH_COUNT` batches of an array `prefetch_[i]` (cpp:87-93, :102-104), with `load_batch(Batch*)` and
`StopInternalThread` (cpp:20, :117), which BVLC's BasePrefetchingDataLayer has only from mid-2015 to January 2017
(then a vector of batches, data_param.prefetch of them); the caffe.proto is BVLC's of that time (SolverParameter's
`type` its last field, before `layer_wise_reduce`). That Caffe's BasePrefetchingDataLayer keeps PREFETCH_COUNT = 3
batches of data_ and label_ and copies the current one into the tops; its DataLayer reads through a DataReader;
its ImageData reads "name label" pairs: its Data, ImageData and WindowData are sized so. File:line references are
to that commit's src/caffe/layers/ and include/caffe/layers/ files.
"""
from . import drml
from .base import carry, register
from .data import LIST_ENTRY_BYTES, CopyingPrefetching, Data as BVLCData, ThroughDataReader, \
    WindowData as BVLCWindowData
from .deeplab import ImageDataV2

FORK = "drml_ejulio"
LIST_ENTRY_BYTES.setdefault("MultilabelImageData", 56)  # sizeof(pair<string, vector<float>>), cpp:48

carry(__name__, FORK, drml.Splice, drml.MultiSigmoidCrossEntropyLoss)


class ForkPrefetching(CopyingPrefetching):
    """BVLC's BasePrefetchingDataLayer of mid-2015 to January 2017, which the layer's code is written against
    (cpp:87-93): PREFETCH_COUNT = 3 batches of data_ and label_ in an array, copied into the tops."""

    PREFETCH_COUNT = 3
    BATCH_BLOBS = 2


@register("Data", fork=FORK)
class Data(ForkPrefetching, ThroughDataReader, BVLCData):
    """That Caffe's DataLayer, reading through a DataReader."""


@register("ImageData", fork=FORK)
class ImageData(ForkPrefetching, ImageDataV2):
    """That Caffe's ImageDataLayer: its list read as "name label" pairs."""


@register("WindowData", fork=FORK)
class WindowData(ForkPrefetching, BVLCWindowData):
    pass


@register("Box", fork=FORK)
class Box(drml.Box):
    """jellyDL's BoxLayer code (protoaudit.layers.drml.Box) whose header asks two tops or more (box_layer.hpp:26,
    :28); BoxParameter's width and height are `required` (caffe.proto:548-553), so Caffe's parser refuses a
    box_param without them."""

    min_tops = 2


@register("MultilabelImageData", fork=FORK)
class MultilabelImageData(ForkPrefetching, drml.ImageDataMultilabel):
    """MultilabelImageDataLayer: list entries of a name and image_data_param.multilabel_num floats, read token by
    token (`infile >> filename`, then the floats, cpp:43-49). The data top is (batch, C, crop, crop) with a
    crop_size, else (batch, C, H, W) of the list's first image resized to new_height x new_width (cpp:70-85),
    C 3 in colour, 1 with is_color false; in each of the PREFETCH_COUNT batches too (cpp:87-93). With a label top
    it is (batch, multilabel_num, 1, 1), and each batch's label_ too (cpp:99-105); at most two tops (hpp:29).
    With one top load_batch still takes the batch label's mutable_cpu_data (cpp:144), a Blob never shaped:
    Blob's CHECK(data_) stops the prefetch thread."""

    label_origin = "the layer's batch size and image_data_param.multilabel_num (cpp:100)"
    label_taken_at = "multilabel_image_data_layer.cpp:144"  # (its lines_ read as jellyDL's, cpp:40-49)
    label_shaped_at = "cpp:99-105"
