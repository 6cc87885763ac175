"""TextBoxes' Caffe (MhLiao/TextBoxes fd4d7a9): the SSD fork as of September 2016 (weiliu89/caffe
8cd3970) with a PriorBox that gives every prior a copy shifted half a cell down (f615ff6). Of its
sources only prior_box_layer.cpp differs from that SSD's; against the SSD fork protoaudit.layers.ssd
sizes (4817bf8, 2018), its permute, normalize and smooth_L1_loss layers are the same files, its
MultiBoxLoss mines negatives by do_neg_mining (MAX_NEGATIVE's count, multibox_loss_layer.cpp:
173-283), its DetectionOutput decodes into blobs local to each forward, and its DetectionEvaluate
sizes its top without reading the detections. File references are to fd4d7a9.
"""
from . import ssd, touch
from .base import carry, legacy_shape, register

FORK = "textboxes"

carry(__name__, FORK, ssd.AnnotatedData, ssd.SSDData, ssd.SSDImageData, ssd.SSDWindowData, ssd.Permute,
      ssd.Normalize, ssd.SmoothL1Loss)


@register("PriorBox", fork=FORK)
class PriorBox(ssd.PriorBox):
    """TextBoxes' PriorBoxLayer: one min_size and at most one max_size (its caffe.proto); priors =
    aspect ratios (1 first, each given ratio not already there to 1e-6 and, with flip, its inverse)
    plus one for a max_size (prior_box_layer.cpp:15-43), then doubled: each prior also has a copy
    centred half a cell lower (:59, :95-114). The top is (1, 2, H * W * priors * 4) (:65-76); the
    image's size is read from bottom 1 in forward (:84-85)."""

    def num_priors(self):
        p = self.fork_param("prior_box_param")
        self.check(p.HasField("min_size"), "must provide min_size")
        self.check(p.min_size > 0, "min_size must be positive")
        priors = len(self.ratios(p))
        if p.HasField("max_size"):
            self.check(p.max_size > p.min_size, "max_size must be greater than min_size")
            priors += 1
        self.check(len(p.variance) in (0, 1, 4), f"give 1 or 4 variances, not {len(p.variance)}")
        self.check(all(v > 0 for v in p.variance), "variances must be positive")
        return 2 * priors

    def reshape(self, bottoms):
        self.check(len(bottoms) >= 2, "PriorBox reads the image size from bottom 1",
                   fix="give the image (the data top) as the second bottom")
        _, _, height, width = legacy_shape(self, bottoms[0])
        return [(1, 2, width * height * self.num_priors() * 4)]


@register("MultiBoxLoss", fork=FORK)
class MultiBoxLoss(ssd.MultiBoxLoss):
    __doc__ = ssd.MultiBoxLoss.__doc__

    def mining(self, p):
        """do_neg_mining (default true): the negatives of MAX_NEGATIVE, at most neg_pos_ratio per
        matched prior (multibox_loss_layer.cpp:267-281); without it every prior's confidence row."""
        return ssd.MINING_MAX_NEGATIVE if p.do_neg_mining else ssd.MINING_NONE


@register("DetectionOutput", fork=FORK)
class DetectionOutput(ssd.DetectionOutput):
    """SSD's DetectionOutputLayer of September 2016: the same checks (but no nms eta) and the same
    top, (1, 1, 1, 7) at setup and (1, 1, kept, 7) on the host after each forward
    (detection_output_layer.cpp:135-149, cu:119-130). Its GPU forward decodes the boxes and
    permutes the confidences into Blobs local to the call (cu:27-47), freed before it returns: it
    keeps no buffer."""

    def reshape(self, bottoms):
        p = self.fork_param("detection_output_param")
        self.check(p.HasField("num_classes"), "Must specify num_classes")
        self.check(p.nms_param.nms_threshold >= 0, "nms_threshold must be non negative")
        loc, conf, num_priors = ssd.predictions(self, p, bottoms)
        if self.defined("detections") is None:
            self.assume(f"it keeps the most detections it can: {self.kept(loc[0], num_priors)} for the batch of "
                        f"{loc[0]}", "--define detections=K (detections kept per image)")
        return [(1, 1, 1, 7)]

    def touches(self, run):
        return [x for x in super().touches(run) if x.what != "buffer" or x.name.startswith("top")]


@register("DetectionEvaluate", fork=FORK)
class DetectionEvaluate(ssd.DetectionEvaluate):
    """SSD's DetectionEvaluateLayer of September 2016: its Reshape sizes the top
    (1, 1, classes + D, 5) from the detections' shape alone (detection_evaluate_layer.cpp:58), so
    the detections are first read in forward, on the host."""

    def touches(self, run):
        device = "host" if run.mode == "gpu" else "device"
        return [touch.bottom(0, "data", "forward", device=device), touch.bottom(1, "data", "forward", device=device),
                touch.top(0, "data", "forward", device=device)]
