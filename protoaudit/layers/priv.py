"""soeaver's caffe-priv's copies of Fast R-CNN's layers (ROIPooling, SmoothL1Loss).

soeaver/py-RFCN-priv ec89b86, caffe-priv/include/caffe/layers/roi_pooling_layer.hpp,
smooth_l1_loss_layer.hpp and src/caffe/layers/roi_pooling_layer.cpp/.cu,
smooth_l1_loss_layer.cpp/.cu: caffe-fast-rcnn's files split into BVLC's one-header-a-layer layout.
The .cu files and the shape rules are caffe-fast-rcnn's line for line (so every GPU buffer is the
same); the one difference is ROIPooling's CPU backward, which caffe-priv has and caffe-fast-rcnn
has not.

Both types are caffe-fast-rcnn's too, so they do not make a file caffe-priv's (`claims_files`):
a file whose only fork types are these is caffe-fast-rcnn's (py-faster-rcnn's own nets); one that
needs caffe-priv's schema for something else (ceil_mode pooling) gets these, and `--fork priv`
asks for them.
"""
from . import fastrcnn, touch
from .base import register

FORK = "priv"
SOURCE = "caffe-priv"


@register("ROIPooling", fork=FORK)
class ROIPooling(fastrcnn.ROIPooling):
    """caffe-fast-rcnn's ROIPoolingLayer with a CPU backward. The top and max_idx_ are
    (R, C, pooled_h, pooled_w) (roi_pooling_layer.cpp:34-37), written forward on the CPU
    (cpp:49-52) as on the GPU (cu:80-81)."""

    claims_files = False

    def backward_touches(self, run):
        """Backward_cpu (cpp:122-158) stops Caffe when the rois would take a gradient
        (cpp:125-128, LOG(FATAL)), else does what Backward_gpu (cu:163-180) does: returns unless
        bottom 0 needs a diff (cpp:129-131), then reads top 0's diff and max_idx_ and writes bottom
        0's diff (cpp:132-136). Backward_gpu never looks at propagate_down[1]."""
        if run.mode == "cpu" and run.propagate_down[1]:
            return [touch.stop("backward", f"{SOURCE}'s ROIPooling cannot backpropagate to its rois in CPU mode "
                               "(roi_pooling_layer.cpp:125-128, LOG(FATAL)): give the rois' bottom "
                               "propagate_down: false, or run in GPU mode")]
        return fastrcnn.into_the_map(run)


@register("SmoothL1Loss", fork=FORK)
class SmoothL1Loss(fastrcnn.SmoothL1Loss):
    """caffe-fast-rcnn's SmoothL1LossLayer unchanged: LayerSetUp (smooth_l1_loss_layer.cpp:7-17)
    never calls LossLayer's, Reshape (cpp:19-44) sizes diff_, errors_ and ones_ as bottom 0 and
    fills ones_ on the host, and the .cu is the same code; no CPU forward or backward (cpp:49,
    :55)."""

    claims_files = False
    source = SOURCE
    no_cpu_code = "smooth_l1_loss_layer.cpp:49 and :55"  # Forward_cpu, Backward_cpu
