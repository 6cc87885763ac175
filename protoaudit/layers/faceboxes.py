"""FaceBoxes' Caffe (sfzhang15/FaceBoxes b52cc92): the SSD fork (weiliu89 4817bf8) with a PriorBox
that densifies its small anchors. Its caffe.proto is SSD's byte for byte, and of its layer sources
only prior_box_layer.cpp and detection_output_layer.cpp differ (the latter in removing its output
folder, no memory); data_transformer.cpp, sampler.cpp and bbox_util.cpp change how boxes are
sampled, not what is allocated. So every layer is the SSD fork's (protoaudit.layers.ssd), but
PriorBox.
"""
from . import ssd
from .base import carry, register

FORK = "faceboxes"

carry(__name__, FORK, ssd.AnnotatedData, ssd.SSDData, ssd.SSDImageData, ssd.SSDWindowData, ssd.Permute,
      ssd.Normalize, ssd.SmoothL1Loss, ssd.MultiBoxLoss, ssd.DetectionOutput, ssd.DetectionEvaluate)


@register("PriorBox", fork=FORK)
class PriorBox(ssd.PriorBox):
    """FaceBoxes' PriorBoxLayer: with exactly three min_size values, 21 priors per location
    (prior_box_layer.cpp:37-40), whatever the aspect ratios: the anchors of min_size 32 tiled 4 x 4
    and those of 64 tiled 2 x 2 around each cell's centre (:140-165), plus one of the third size;
    each max_size adds one more (:41-49). Otherwise SSD's count. The top is (1, 2, H * W * priors * 4)."""

    def num_priors(self):
        ssd_count = super().num_priors()  # SSD's checks on the fields, which this fork keeps
        p = self.fork_param("prior_box_param")
        return 21 + len(p.max_size) if len(p.min_size) == 3 else ssd_count
