"""RefineDet's Caffe (sfzhang15/RefineDet 52b6fe2): the SSD fork (weiliu89 4817bf8) whose loss and
detection output also read the anchor refinement module's outputs. Its caffe.proto is SSD's with one
field more, objectness_score, in MultiBoxLossParameter and DetectionOutputParameter. Of its layer
sources only multibox_loss_layer.cpp and detection_output_layer.cpp/.cu differ from SSD's (with
bbox_util.cpp/.cu, the box arithmetic they call), in what they read, not in what they allocate;
detection_evaluate_layer.cpp and io.cpp differ in how they read boxes. So every layer is the SSD
fork's (protoaudit.layers.ssd), but those two take the refinement module's outputs as bottoms.
"""
from . import ssd, touch
from .base import carry, register

FORK = "refinedet"

carry(__name__, FORK, ssd.AnnotatedData, ssd.SSDData, ssd.SSDImageData, ssd.SSDWindowData, ssd.Permute,
      ssd.Normalize, ssd.SmoothL1Loss, ssd.PriorBox, ssd.DetectionEvaluate)


@register("MultiBoxLoss", fork=FORK)
class MultiBoxLoss(ssd.MultiBoxLoss):
    """RefineDet's MultiBoxLossLayer: SSD's, taking any number of bottoms (ExactNumBottomBlobs -1) and
    reading the first four as SSD's does. A fifth holds the refinement module's confidences: negatives
    whose objectness is at most objectness_score are not mined; a sixth its locations: the priors are
    refined by them before matching (multibox_loss_layer.cpp:152-217). Forward reads both; backward
    gives them no gradient (only bottoms 0 and 1 get one, :284-335). Its buffers are SSD's, whose
    counts these only lower: the most they can hold is what protoaudit counts."""

    exact_bottoms = None
    min_bottoms = 4

    def touches(self, run):
        extra = [touch.bottom(j, "data", "forward") for j in range(4, min(len(run.bottoms), 6))]
        return super().touches(run) + extra


@register("DetectionOutput", fork=FORK)
class DetectionOutput(ssd.DetectionOutput):
    """RefineDet's DetectionOutputLayer: SSD's, with a fourth bottom (the refinement module's
    confidences: a prior whose objectness is at most objectness_score scores as background) and a fifth
    (its locations, which refine the priors before decoding), read in forward by the CPU and the GPU
    code alike (detection_output_layer.cpp:186-235, .cu:24-64), where SSD's fourth bottom is an image
    read only to visualize. Its buffers are SSD's."""

    max_bottoms = 5

    def touches(self, run):
        extra = [touch.bottom(j, "data", "forward") for j in range(3, len(run.bottoms))]
        return super().touches(run) + extra
