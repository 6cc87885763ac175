"""The traffic-light SSD's Caffe (julimueller/tl_ssd be5ae7f), as its sources shape its layers.

The repository publishes its Caffe's caffe.proto and the SSD files it changed: prior_box_layer,
detection_output_layer (.cpp/.cu), multibox_loss_layer, detection_evaluate_layer and bbox_util. Its
caffe.proto is the SSD fork's (weiliu89 4817bf8) with a state and a pictogram per box,
PriorBoxParameter.offset_w and offset_h for offset, DetectionOutputParameter.do_state_prediction and
num_states, MultiBoxLossParameter's state loss fields, FocalLossParameter and InterpParameter (no Interp
layer is published). PriorBox counts its priors anew; DetectionOutput takes a fourth bottom of per-prior
state scores; MultiBoxLoss always sets up a state loss layer and is refused here. Every other layer is
the SSD fork's (protoaudit.layers.ssd) or BVLC's.

File:line references are to that commit's files, at the repository's root.
"""
from . import ssd, touch
from .base import carry, count, legacy_shape, register

FORK = "tl_ssd"

carry(__name__, FORK, ssd.AnnotatedData, ssd.SSDData, ssd.SSDImageData, ssd.SSDWindowData, ssd.Permute, ssd.Normalize,
      ssd.SmoothL1Loss, ssd.DetectionEvaluate)


@register("PriorBox", fork=FORK)
class PriorBox(ssd.PriorBox):
    """The fork's PriorBoxLayer: no implicit aspect ratio 1, only the given ratios (each once, to 1e-6)
    and, with flip, their inverses (src/caffe/layers/prior_box_layer.cpp:20-38); a prior per ratio, min
    size, offset_w and offset_h: priors = ratios * min sizes * offset_w's * offset_h's (:50). Offsets lie
    in [0, 1] (:39-49); max_size must be given once per min_size but adds no prior (:51-59, the addition
    commented out). The top is (1, 2, H * W * priors * 4), which must not be empty (:121-132); Reshape
    reads bottom 1's size whatever img_size says (:119-120)."""

    implicit = ()  # no ratio 1 of its own (:20-38)

    def num_priors(self):
        p = self.fork_param("prior_box_param")
        self.check(len(p.min_size) > 0, "must provide min_size")
        self.check(all(s > 0 for s in p.min_size), "min_size must be positive")
        for name in ("offset_w", "offset_h"):
            self.check(all(0 <= o <= 1 for o in getattr(p, name)), f"each {name} must lie in [0, 1]")
        if len(p.max_size):
            self.check(len(p.max_size) == len(p.min_size),
                       f"give one max_size per min_size ({len(p.min_size)} min_size, {len(p.max_size)} max_size)")
        self.check_variances_and_steps(p)
        priors = len(self.ratios(p)) * len(p.min_size) * len(p.offset_w) * len(p.offset_h)
        self.check(priors > 0, "no priors per location: the fork counts aspect_ratio (no implicit 1), min_size, "
                   "offset_w and offset_h, and one of them is empty",
                   fix="give at least one aspect_ratio, offset_w and offset_h")
        return priors

    def reshape(self, bottoms):
        self.check(len(bottoms) >= 2, f"{self.lp.type} reads bottom 1's size in Reshape, whatever img_size says",
                   fix="give the image (the data top) as the second bottom")
        return super().reshape(bottoms)


@register("DetectionOutput", fork=FORK)
class DetectionOutput(ssd.DetectionOutput):
    """The fork's DetectionOutputLayer: SSD's, but with do_state_prediction bottom 3 holds num_states
    scores per prior, checked against the prior count (detection_output_layer.cpp:176-184); the setup top
    stays (1, 1, 1, 7) (:186-193). Its GPU code permutes the states into state_permute_ (bottom 3's size,
    detection_output_layer.cu:49-59) and writes 7 + num_states floats per detection kept (:127-162); its
    CPU code reads no state and writes 7."""

    def reshape(self, bottoms):
        p = self.fork_param("detection_output_param")
        if p.do_state_prediction:
            self.check(len(bottoms) == 4, "do_state_prediction reads the states from bottom 3",
                       fix="give the state scores as the fourth bottom")
            num_priors = legacy_shape(self, bottoms[2])[2] // 4
            states = legacy_shape(self, bottoms[3])[1]
            self.check(num_priors * p.num_states == states,
                       f"Number of priors must match number of state predictions: {num_priors} priors x "
                       f"{p.num_states} states != {states} (bottom 3 {tuple(bottoms[3])})")
        return super().reshape(bottoms)

    def touches(self, run):
        p = self.fork_param("detection_output_param")
        if not p.do_state_prediction:
            return super().touches(run)
        gpu = run.mode == "gpu"
        width = 7 + p.num_states if gpu else 7
        num = run.bottoms[0][0]
        rows = self.kept(num, legacy_shape(self, run.bottoms[2])[2] // 4)
        device = "host" if gpu else "device"
        t = [touch.bottom(j, "data", "forward") for j in range(4 if gpu else 3)]
        t.append(touch.top(0, "data", "forward", device=device))
        if rows * width > 7:
            t.append(touch.buffer("top (kept detections)", rows * width - 7, "forward", per_sample=True,
                                  device=device, note=f"the top grows to 1x1x{rows}x{width} ({width} floats per "
                                                      "detection kept)"))
        if gpu:
            t += [touch.buffer("bbox_preds_", count(run.bottoms[0]), "forward", per_sample=True),
                  touch.buffer("conf_permute_", count(run.bottoms[1]), "forward", per_sample=True),
                  touch.buffer("state_permute_", count(run.bottoms[3]), "forward", per_sample=True)]
            if not p.share_location:
                t.append(touch.buffer("bbox_permute_", count(run.bottoms[0]), "forward", per_sample=True))
        return t


@register("MultiBoxLoss", fork=FORK)
class MultiBoxLoss(ssd.MultiBoxLoss):
    """The fork's MultiBoxLossLayer sets up a third inner loss layer, on the traffic lights' states, with
    buffers of its own (multibox_loss_layer.cpp:107-145), whatever its fields say: protoaudit does not size
    it, and refuses the layer."""

    def reshape(self, bottoms):
        self.fail("the traffic-light fork's MultiBoxLoss adds a state loss layer and its buffers "
                  "(multibox_loss_layer.cpp:107-145), which protoaudit does not size",
                  fix="audit the deploy net")
