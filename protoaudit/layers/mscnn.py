"""MS-CNN's Caffe (zhaoweicai/mscnn, 534bcac): its own layers, as its sources shape them.

File references are to that commit's include/caffe/layers/*.hpp and src/caffe/layers/*.cpp/.cu. The
fork is a 2016 BVLC Caffe (PREFETCH_COUNT batches, pooling without round_mode) with:
- ImageGtData, a window-file data layer whose batch holds a vector of label blobs;
- the detection layers: BoxOutput (proposals from the multi-scale maps), ProposalTarget, DecodeBBox,
  DetectionLoss, DetectionAccuracy, BboxAccuracy;
- ROIPooling (pad_ratio), ROIAlign and SmoothL1Loss.
Cascade R-CNN's Caffe grew from it. Where a file is the same in both (decode_bbox_layer.*, but an
include; roi_align_layer.*; accuracy_layer.cpp; deconv_layer.cpp) the class is Cascade R-CNN's,
carried; where it differs, the class here says how.

Counts that only the data decides (boxes kept by NMS, ground-truth boxes) are the largest the
layer's parameters allow, said as assumptions with the --define that changes them, as the layers'
forward reshapes their tops to them.
"""
from . import cascade, fastrcnn, touch
from .base import Layer, c_round, carry, count, legacy_shape, register
from .cxx import SHARED_PTR_BLOCK, grown
from .data import CopyingPrefetching

FORK = "mscnn"
SOURCE = "MS-CNN's Caffe"


# --- data layer ---------------------------------------------------------------------------------

class ForkPrefetching(CopyingPrefetching):
    """The fork's BasePrefetchingDataLayer, a 2016 BVLC one: PREFETCH_COUNT = 3 batches in an array
    (base_data_layer.hpp:72, :78), a Batch being data_ and a vector of label blobs, each new'd into a
    shared_ptr (hpp:49-52; image_gt_data_layer.cpp:231-233, :246-248), allocated at setup on the
    host and, in GPU mode, on the device (base_data_layer.cpp:53-72), and copied into the tops by
    each forward (cpp:111-131, .cu:7-29)."""

    PREFETCH_COUNT = 3
    BATCH_BLOBS = 1

    @property
    def BATCH_EXTRA_BYTES(self):
        """labels_, the vector in each Batch, its buffer of shared_ptrs and their control blocks."""
        labels = max(len(self.lp.top) - 1, 0)
        return 24 + 16 * grown(labels) + labels * SHARED_PTR_BLOCK


@register("ImageGtData", fork=FORK)
class ImageGtData(ForkPrefetching, cascade._WindowData):
    """ImageGtDataLayer (image_gt_data_layer.cpp): the image batch (N, C, H, W), one label map per
    downsample_rate, (N, 2 + coord_num, H / rate, W / rate), then with output_gt_boxes the
    ground-truth boxes (G, 7, 1, 1) (cpp:208-253). H x W is resize_height x resize_width, else the
    window file's last image's, then crop_height x crop_width where > 0 (cpp:188-206); load_batch
    keeps that size (it copies each image into it, cpp:570-588). The label maps' sides are C++
    integer divisions at setup (`round(template_height/downsample_rates_[nn])`, both int, cpp:226-227),
    and load_batch CHECKs them against the float division rounded (cpp:642-649): a side that is no
    multiple of the rate stops the prefetch thread. The ground-truth top is (1, 7) at setup and
    (boxes in the batch, 7) after each batch (cpp:820-838). C comes from the mean values (three) or
    cv::imread's colour decode. With cache_images the encoded files are held on the host, not
    counted. Its own prefetch_rng_ besides the transformer's (cpp:68-69); transformed_data_ is
    never reshaped."""

    min_tops = 2  # image_gt_data_layer.hpp: MinTopBlobs 2
    gt_width = 7  # [image, x1, y1, x2, y2, label, ignored] for each box of the batch

    def param(self):
        return self.fork_param("image_gt_data_param")

    def image_size(self):
        p = self.param()
        has = p.HasField
        if has("resize_width") and has("resize_height"):
            h, w = p.resize_height, p.resize_width
            said = "resize_height x resize_width"
        else:
            h = w = None
        crop_h = p.crop_height if has("crop_width") and has("crop_height") else 0
        crop_w = p.crop_width if has("crop_width") and has("crop_height") else 0
        if h is None and not (crop_h > 0 and crop_w > 0):
            self.missing(self.batch_size(), (None, None, None),
                         "ImageGtData without resize_width and resize_height: its size is the window file's last "
                         "image's")
        if crop_w > 0:
            self.check(w is None or crop_w <= w, f"crop_width {crop_w} must be <= the template's width {w}")
            w = crop_w
        if crop_h > 0:
            self.check(h is None or crop_h <= h, f"crop_height {crop_h} must be <= the template's height {h}")
            h = crop_h
        self.check(h is not None and w is not None,
                   "ImageGtData with one crop side only: the other is the window file's last image's")
        if crop_h > 0 or crop_w > 0:
            said = "crop_height x crop_width"
        return (h, w), f"the layer's image_gt_data_param ({said})"

    def reshape(self, bottoms):
        p = self.param()
        rates = list(p.downsample_rate)
        self.check(len(rates) >= 1, "ImageGtData needs a downsample_rate (one per label map)")
        self.check(len(rates) == len(p.field_h) == len(p.field_w),
                   f"{len(rates)} downsample_rate, {len(p.field_h)} field_h and {len(p.field_w)} field_w: give "
                   "one of each per label map")
        need = 1 + len(rates) + (1 if p.output_gt_boxes else 0)
        self.check(len(self.lp.top) == need, f"ImageGtData makes {need} tops (the data, {len(rates)} label maps"
                   + (", the ground-truth boxes" if p.output_gt_boxes else "") + f"); {len(self.lp.top)} are named")
        self.check(p.coord_num == 4, f"coord_num must be 4: load_batch CHECKs 6 label channels (cpp:593); "
                   f"got {p.coord_num}")
        return self.maps_and_boxes(p, rates, "downsample_rate", need)

    def map_side(self, h, w, rate):
        """C++ integer divisions at setup, which load_batch CHECKs against the float ones rounded."""
        side = (h // rate, w // rate)
        rounded = (c_round(h / rate), c_round(w / rate))
        self.check(rounded == side, f"the data's {h} x {w} is no multiple of downsample_rate {rate}: setup makes a "
                   f"{side[0]} x {side[1]} label map, load_batch CHECKs its rounded {rounded[0]} x {rounded[1]} "
                   "(image_gt_data_layer.cpp:649)")
        return side

    def rngs(self, run):
        """The transformer's RNG and the layer's own prefetch_rng_ (cpp:68-69)."""
        return super().rngs(run) + 1


# --- proposals and their targets ----------------------------------------------------------------

@register("BoxOutput", fork=FORK)
class BoxOutput(Layer):
    """BoxOutputLayer: proposals from the detection maps, one bottom per field (N, cls_num + 4, H, W),
    as many as field_h, field_w and downsample_rate (box_output_layer.cpp:82-84). Reshape gives rois
    (1, 5) and, with a second top, rois with scores (1, 6) (cpp:29-36); Forward reshapes them to
    every box the batch keeps (cpp:194-233): per image, a box for each position over fg_thr, at
    most max_nms_num before NMS and max_post_nms_num after it (cpp:176-186). protoaudit takes that
    most (every position of every map, where a limit is 0), or --define proposals=K per image.
    CPU code only (hpp:37-52: no Forward_gpu, Caffe's calls Forward_cpu), no buffer; backward
    NOT_IMPLEMENTED where asked."""

    min_bottoms = 1
    min_tops = 1
    max_tops = 2
    defines = {"proposals": "BoxOutput: proposals kept per image"}

    def reshape(self, bottoms):
        p = self.fork_param("box_output_param")
        n = len(bottoms)
        self.check(n == len(p.field_h) == len(p.field_w) == len(p.downsample_rate),
                   f"{n} bottoms but {len(p.field_h)} field_h, {len(p.field_w)} field_w and "
                   f"{len(p.downsample_rate)} downsample_rate: give one of each per bottom (cpp:82-84)")
        shapes = [legacy_shape(self, b) for b in bottoms]
        num, channels = shapes[0][0], shapes[0][1]
        self.check(channels > 4, f"bottom 0 {tuple(bottoms[0])} must have the classes' scores and 4 box channels")
        for j, s in enumerate(shapes):
            self.check(s[0] == num and s[1] == channels,
                       f"bottom {j} {tuple(bottoms[j])} must have bottom 0's num {num} and channels {channels}")
        per_image = self.defined("proposals")
        if per_image is None:
            candidates = sum(count(s[2:]) for s in shapes)
            per_image, why = candidates, f"every one of its {candidates} positions"
            if 0 < p.max_nms_num < per_image:
                per_image, why = p.max_nms_num, f"max_nms_num {p.max_nms_num}"
            if 0 < p.max_post_nms_num < per_image:
                per_image, why = p.max_post_nms_num, f"max_post_nms_num {p.max_post_nms_num}"
            total = max(per_image * num, 1)
            self.assume(f"it keeps the most proposals it can: {per_image} per image ({why}), {total} for the "
                        f"batch of {num}", "--define proposals=K (proposals kept per image)")
        total = max(per_image * num, 1)
        return [(total, 5, 1, 1), (total, 6, 1, 1)][:len(self.lp.top)]

    def touches(self, run):
        return ([touch.bottom(j, "data", "forward", device="host") for j in range(len(run.bottoms))]
                + [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))])


@register("ProposalTarget", fork=FORK)
class ProposalTarget(cascade.ProposalTarget):
    """ProposalTargetLayer (MS-CNN's, older than Cascade R-CNN's): samples the RoIs (bottom 0, (R,
    5)) against the ground truth (bottom 1, (G, 7): proposal_target_layer.cpp:63-64) into rois (B,
    5), labels (B, 1), targets and both weights (B, D) (D = 4 x cls_num with cls_aware, else 8),
    the matched boxes (B, 6) and, with a seventh top, weights (B, 1) (cpp:37-62). B is batch_size;
    with -1, Reshape takes the RoIs' count (cpp:40-43) and Forward every RoI and every ground-truth
    box, always appended (cpp:117-130): protoaudit takes R + G. CPU code only (hpp:40-53 comment out
    the GPU methods), no gt_boxes_ buffer; no backward."""

    def reshape(self, bottoms):
        p = self.fork_param("proposal_target_param")
        cls_aware = self.fork_param("bbox_reg_param").cls_aware
        dim = 4 * p.cls_num if cls_aware else 8
        rois, gt = legacy_shape(self, bottoms[0]), legacy_shape(self, bottoms[1])
        self.check(rois[1] == 5, f"the rois (bottom 0) must have 5 channels; got {tuple(bottoms[0])}")
        self.check(gt[1] == 7, f"the ground-truth boxes (bottom 1) must have 7 channels; got {tuple(bottoms[1])}")
        if p.batch_size == -1:
            b = max(rois[0] + gt[0], 1)
            self.assume(f"batch_size -1 samples every RoI: {b} ({rois[0]} RoIs and {gt[0]} ground-truth boxes "
                        "appended)", "--define proposals=K and --define gt_boxes=K (per image)")
        else:
            self.check(p.batch_size > 0, "batch_size must be > 0 (or -1: every RoI)")
            b = p.batch_size
        tops = [(b, 5, 1, 1), (b, 1, 1, 1), (b, dim, 1, 1), (b, dim, 1, 1), (b, dim, 1, 1), (b, 6, 1, 1),
                (b, 1, 1, 1)]
        return tops[:len(self.lp.top)]

    def touches(self, run):
        return ([touch.bottom(j, "data", "forward", device="host") for j in range(2)]
                + [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))])


@register("ROIPooling", fork=FORK)
class ROIPooling(cascade.ROIPooling):
    """Cascade R-CNN's ROIPoolingLayer but for commented-out lines (roi_pooling_layer.cpp:76-81) and
    its GPU backward, which loops over every RoI for each element of the map (roi_pooling_layer.cu:
    106-187) where Cascade R-CNN's adds atomically from max_idx_: the same top, max_idx_ and CPU
    backward NOT_IMPLEMENTED (cpp:142-144)."""

    source = SOURCE
    no_cpu_backward = "roi_pooling_layer.cpp:144"


@register("SmoothL1Loss", fork=FORK)
class SmoothL1Loss(fastrcnn.SmoothL1Loss):
    """caffe-fast-rcnn's SmoothL1LossLayer (2 or 4 bottoms, smooth_L1_loss_layer.cpp:19-28; diff_,
    errors_ and ones_ as bottom 0, cpp:45-54; one top, hpp:26-28), with a sigma: no CPU code. The type is
    caffe-fast-rcnn's: it makes no file this fork's alone."""

    claims_files = False
    source = SOURCE
    no_cpu_code = "smooth_L1_loss_layer.cpp:60 and :66"  # Forward_cpu, Backward_cpu


# --- losses and accuracies ----------------------------------------------------------------------

def _map_shapes(layer, bottoms, cls_num, coord_num, objectness):
    """The CHECKs DetectionLoss and DetectionAccuracy make of (maps, labels) (detection_loss_layer.cpp:
    46, :95-106; detection_accuracy_layer.cpp:40-45)."""
    s, g = legacy_shape(layer, bottoms[0]), legacy_shape(layer, bottoms[1])
    layer.check(s[0] == g[0] and s[2:] == g[2:],
                f"bottoms {tuple(bottoms[0])} and {tuple(bottoms[1])} need the same num, height and width")
    layer.check(s[1] == cls_num + coord_num,
                f"bottom 0 must have cls_num + coord_num = {cls_num + coord_num} channels; got {tuple(bottoms[0])}")
    if objectness:
        layer.check(cls_num == 2, "objectness needs cls_num 2")
    return s


@register("DetectionLoss", fork=FORK)
class DetectionLoss(Layer):
    """DetectionLossLayer: the softmax and box losses of one detection map. Bottoms: the map (N,
    cls_num + coord_num, H, W) and its label map (N, 6, H, W); the top is (1, 1, 1, 2)
    (detection_loss_layer.cpp:93-113). LayerSetUp calls LossLayer's (loss weight 1 by default) and
    sets up an inner Softmax with a copy of the layer's parameters, loss weight included, so
    SetLossWeights fills prob_'s diff (cpp:38-66); backward into the labels is fatal (cpp:388-390).

    Memory: prob_ and cls_bottom_ (N x cls_num x H x W), coord_bottom_ and coord_diff_ (N x coord_num x
    H x W), bootstrap_map_ and weight_map_ (N x H x W), bbox_mean_ and bbox_std_ (4 each, written at
    setup, cpp:75-89). The CPU forward writes them all on the host (cpp:115-384). The GPU forward
    reads both bottoms on the host to sample negatives, writes bootstrap_map_ and weight_map_ there
    and copies them to the device; on the device it writes cls_bottom_, coord_bottom_, prob_ (and its
    diff as counts), coord_diff_ (data, and its diff as counts), and borrows bottom 0's diff as
    scratch (cu:111-322). Backward writes bottom 0's diff (cpp:386-475, cu:374-440)."""

    exact_bottoms = 2
    exact_tops = 1
    auto_top_blobs = True
    loss_by_default = True

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1

    def reshape(self, bottoms):
        p = self.fork_param("detection_loss_param")
        _map_shapes(self, bottoms, p.cls_num, p.coord_num, p.objectness)
        return [(1, 1, 1, 2)]

    def touches(self, run):
        p = self.fork_param("detection_loss_param")
        n, _, h, w = legacy_shape(self, run.bottoms[0])
        maps, probs, coords = n * h * w, n * p.cls_num * h * w, n * p.coord_num * h * w
        gpu = run.mode == "gpu"
        t = [touch.buffer("bbox_mean_, bbox_std_", 8, "setup", per_sample=False, device="host"),
             touch.buffer("prob_.diff", probs, "setup", per_sample=True, note="the inner Softmax's loss weights"),
             touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward")]
        for name, size in (("cls_bottom_", probs), ("coord_bottom_", coords), ("prob_", probs),
                           ("coord_diff_", coords)):
            t.append(touch.buffer(name, size, "forward", per_sample=True))
        for name in ("bootstrap_map_", "weight_map_"):
            t.append(touch.buffer(name + (" (host)" if gpu else ""), maps, "forward", per_sample=True,
                                  device="host" if gpu else "device"))
            if gpu:
                t.append(touch.buffer(name, maps, "forward", per_sample=True, note="copied to the device"))
        if gpu:
            t += [touch.buffer("bbox_mean_, bbox_std_ (device)", 8, "forward", per_sample=False),
                  touch.buffer("coord_diff_.diff", coords, "forward", per_sample=True, note="the boxes' counts"),
                  touch.buffer("bottom 0 (host)", count(run.bottoms[0]), "forward", per_sample=True, device="host",
                               note="read to rank the negatives"),
                  touch.buffer("bottom 1 (host)", count(run.bottoms[1]), "forward", per_sample=True, device="host"),
                  touch.bottom(0, "diff", "forward")]
        t.append(touch.top(0, "data", "forward"))
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t


@register("DetectionAccuracy", fork=FORK)
class DetectionAccuracy(Layer):
    """DetectionAccuracyLayer: DetectionLoss's bottoms; tops (1, 1, 1, 2) and, with a second, (1, 1,
    1, 1) (detection_accuracy_layer.cpp:37-50). A LossLayer whose LayerSetUp does not call
    LossLayer's (cpp:18-35): no loss weight by default. CPU code only, no buffer, no backward
    (hpp:39-49)."""

    exact_bottoms = 2
    min_tops = 1
    max_tops = 2

    def allow_force_backward(self, bottom_index):
        return False

    def reshape(self, bottoms):
        p = self.fork_param("detection_accuracy_param")
        _map_shapes(self, bottoms, p.cls_num, p.coord_num, p.objectness)
        return [(1, 1, 1, 2), (1, 1, 1, 1)][:len(self.lp.top)]

    def touches(self, run):
        return ([touch.bottom(j, "data", "forward", device="host") for j in range(2)]
                + [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))])


@register("BboxAccuracy", fork=FORK)
class BboxAccuracy(cascade.BboxAccuracy):
    """BboxAccuracyLayer: Cascade R-CNN's without its 8-channel check (bbox_accuracy_layer.cpp:25-34:
    the three bottoms' nums only); tops (1, 1, 1, 1), one or two. CPU code only, no backward."""

    def reshape(self, bottoms):
        nums = [cascade.rows(b) for b in bottoms]
        self.check(len(set(nums)) == 1, f"bottoms {', '.join(str(tuple(b)) for b in bottoms)} need the same num")
        return [(1, 1, 1, 1)] * len(self.lp.top)


# decode_bbox_layer.hpp/.cpp (but an #include), roi_align_layer.hpp/.cpp/.cu, accuracy_layer.hpp/.cpp
# (CPU only) and deconv_layer.cpp (registered there; no cuDNN Deconvolution in layer_factory.cpp) are
# Cascade R-CNN's files
carry(__name__, FORK, cascade.DecodeBBox, cascade.Accuracy, cascade.CascadeDeconvolution)


@register("ROIAlign", fork=FORK)
class ROIAlign(cascade.ROIAlign):
    """Cascade R-CNN's ROIAlignLayer: roi_align_layer.hpp/.cpp/.cu are the same files."""

    source = SOURCE
