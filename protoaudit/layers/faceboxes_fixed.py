"""A FaceBoxes Caffe with fixed-size, densified anchors (zihaozhang9/FaceBoxes b895ea7, a copy of
zeusees/FaceBoxes with lippman1125's densification): the SSD fork (weiliu89 4817bf8) whose caffe.proto
adds PriorBoxParameter.fixed_size, fixed_ratio and density, read by its prior_box_layer.cpp alone. Its
nets use SSD's other layers (AnnotatedData, Permute, MultiBoxLoss, DetectionOutput), so every layer is
the SSD fork's (protoaudit.layers.ssd) or BVLC's, but PriorBox.

File:line references are to that commit's src/caffe/layers/prior_box_layer.cpp.
"""
from . import ssd
from .base import carry, float32, register

FORK = "faceboxes_fixed"

carry(__name__, FORK, ssd.AnnotatedData, ssd.SSDData, ssd.SSDImageData, ssd.SSDWindowData, ssd.Permute,
      ssd.Normalize, ssd.SmoothL1Loss, ssd.MultiBoxLoss, ssd.DetectionOutput, ssd.DetectionEvaluate)


@register("PriorBox", fork=FORK)
class PriorBox(ssd.PriorBox):
    """The fork's PriorBoxLayer: min_size is optional (:15-21); each fixed_size needs a density (:23-29);
    fixed_ratio and aspect_ratio exclude each other (:31-33). The aspect ratios are SSD's (1, then each
    new ratio and, with flip, its inverse, :42-60). priors = ratios * min sizes, or ratios * fixed sizes
    where fixed_size is given (:62-68); each density d then adds (fixed ratios, else ratios) * (d^2 - 1)
    (:70-80), and each max_size one, one per min_size and greater than it (:82-90). The top is
    (1, 2, H * W * priors * 4), which must not be empty (:145-160)."""

    def num_priors(self):
        p = self.fork_param("prior_box_param")
        self.check(all(s > 0 for s in p.min_size), "min_size must be positive")
        self.check(all(s > 0 for s in p.fixed_size), "fixed_size must be positive")
        self.check(not p.fixed_size or len(p.density) > 0, "if use fixed_size then you must provide density")
        self.check(not p.fixed_ratio or not p.aspect_ratio,
                   "can not provide fixed_ratio and aspect_ratio simultaneously")
        self.check(len(p.min_size) or len(p.fixed_size),
                   "give min_size or fixed_size: with neither the fork's num_priors_ is never set",
                   fix="give min_size or fixed_size")
        ratios = len(self.ratios(p))
        priors = ratios * len(p.fixed_size) if p.fixed_size else ratios * len(p.min_size)
        for d in p.density:
            self.check(d > 0, "density must be positive")
            d = float(float32(d))
            priors = int(priors + (len(p.fixed_ratio) if p.fixed_ratio else ratios) * (d * d - 1))
        priors += self.max_size_priors(p)
        self.check_variances_and_steps(p)
        return priors
