"""Cascade R-CNN's Caffe (zhaoweicai/cascade-rcnn, 2252f46): its own layers, as its sources shape them.

File references are to that commit's include/caffe/layers/*.hpp and src/caffe/layers/*.cpp/.cu. The
fork is a 2017 BVLC Caffe with:
- two data layers that read a window file (DetectionData for training, EvalData for testing), each
  a BasePrefetchingDataLayer whose Batch holds a vector of label blobs (base_data_layer.hpp:49-50);
- the detection layers: BoxGroupOutput (RPN proposals), ProposalTarget, DecodeBBox, ScaleRoute,
  HardMining, FrcnnOutput, DetectionEvaluate, and the losses and accuracies of its groups;
- ROIAlign, its own ROIPooling (pad_ratio) and SmoothL1Loss (a per-item second top), R-FCN's
  PSROIPooling (the same three files as Microsoft/caffe 1a2be8e);
- BVLC layers it changed: SoftmaxWithLoss (a third, per-item top), Accuracy (CPU only, 2017's),
  Pooling (ceil_mode, field 13), Deconvolution (registered in deconv_layer.cpp: no cuDNN one).

Counts that only the data decides (boxes kept by NMS, ground-truth boxes, RoIs routed to a level)
are the largest the layer's parameters allow, said as assumptions with the --define that changes
them, as the published layers' forward reshapes their tops to them.
"""

from . import enet, fastrcnn, rfcn, touch
from .base import Layer, c_round, carry, count, legacy_shape, register
from .conv import Deconvolution
from .data import Prefetching
from .losses import SoftmaxWithLoss
from .pooling import CeilModePooling

FORK = "cascade"
SOURCE = "Cascade R-CNN's Caffe"


def round32(x):
    """round(x / 32.0) * 32, as both data layers snap an image side."""
    return c_round(x / 32.0) * 32


def rows(shape):
    """A blob's num() (Blob's legacy accessor)."""
    return tuple(shape)[0] if len(shape) else 1


# --- data layers --------------------------------------------------------------------------------

class _WindowData(Prefetching):
    """What both data layers share: a window file read whole at setup (the last entry's channels
    give the data's; cv::imread in colour fills them, detection_data_layer.cpp:451), the batch
    size of their own parameter, and a gt_boxes top of (boxes, 8, 1, 1) that load_batch reshapes
    to the batch's ground-truth boxes, (1, 8, 1, 1) at setup."""

    defines = {"gt_boxes": "DetectionData/EvalData: ground-truth boxes per image"}

    def param(self):
        raise NotImplementedError

    def batch_size(self):
        return self.param().batch_size

    def prefetch(self):
        return self.lp.data_param.prefetch  # base_data_layer.cpp: BVLC's prefetch_ count

    def channels(self, batch, size):
        """3 from the mean values or cv::imread's colour decode; said where nothing says it."""
        channels, _ = self.channels_from_parameters()
        if channels is None:
            channels = self.assume_colour(batch, size[0], size[1],
                                          f"the window file '{self.param().source}' is not read")
        return channels

    gt_width = 8  # the values of a ground-truth box's row

    def gt_top(self, j, batch):
        """(G, gt_width, 1, 1): G ground-truth boxes in the batch (each image's, one row each)."""
        name = self.lp.top[j]
        if name in self.ctx.inputs:
            return self.override(j, None)
        per_image = self.defined("gt_boxes")
        if per_image is None:
            per_image = 1
            self.assume(f"top '{name}' holds one ground-truth box per image ({batch} rows of {self.gt_width}): "
                        "load_batch reshapes it to the batch's boxes", "--define gt_boxes=K (boxes per image)")
        shape = (max(batch * per_image, 1), self.gt_width, 1, 1)
        self.note_origin(j, shape, "assumed: ground-truth boxes per image")
        return shape

    def maps_and_boxes(self, p, steps, what, need):
        """The data top, one label map per stride (N, 2 + coord_num, map_side), then with
        output_gt_boxes the ground-truth boxes."""
        data = self.image_top(self.batch_size())
        batch, h, w = data[0], data[-2], data[-1]
        tops = [data]
        for j, step in enumerate(steps, start=1):
            self.check(step > 0, f"every {what} must be > 0")
            shape = self.override(j, (batch, 2 + p.coord_num) + self.map_side(h, w, step))
            self.note_origin(j, shape, f"the data's size / {what} {step}")
            tops.append(shape)
        if p.output_gt_boxes:
            tops.append(self.gt_top(need - 1, batch))
        self.decodes = True
        return tops

    def image_top(self, batch):
        size, origin = self.image_size()
        channels = self.channels(batch, size)
        shape = self.override(0, (batch, channels) + tuple(size), own_batch=batch)
        self.check_batch_axis(0, shape)
        self.note_origin(0, shape, origin)
        return shape


@register("DetectionData", fork=FORK)
class DetectionData(_WindowData):
    """DetectionDataLayer (detection_data_layer.cpp): the image batch (N, C, H, W) and, per stride,
    a label map (N, 2 + coord_num, round(H / stride), round(W / stride)) (cpp:236-257), then the
    ground-truth boxes with output_gt_boxes (cpp:260-273). The template H x W is resize_height x
    resize_width, or long_size x short_size, or crop's (cpp:189-225); load_batch swaps the two
    for a landscape image (cpp:501-523), the same count, and scales them by template_ratio rounded to
    32 (cpp:480, :520-521), where the largest ratio is taken."""

    min_tops = 2  # detection_data_layer.hpp:38-39

    def param(self):
        return self.fork_param("detection_data_param")

    def image_size(self):
        p = self.param()
        has = p.HasField
        if has("resize_width") and has("resize_height"):
            size, said = (p.resize_height, p.resize_width), "resize_height x resize_width"
        elif has("resize_ratio"):
            self.missing(self.batch_size(), (None, None, None),
                         "DetectionData with resize_ratio: its size is the window file's last image's, scaled")
        elif has("short_size") and has("long_size"):
            self.check(p.long_size > p.short_size, "long_size must be larger than short_size")
            size, said = (p.long_size, p.short_size), "long_size x short_size"
        else:
            self.missing(self.batch_size(), (None, None, None),
                         "DetectionData without resize or short/long sizes: its size is each image's")
        if has("crop_width") and has("crop_height"):
            self.check(p.crop_width > 0 and p.crop_height > 0, "crop_width and crop_height must be > 0")
            size, said = (p.crop_height, p.crop_width), "crop_height x crop_width"
        elif has("crop_short_size") and has("crop_long_size"):
            self.check(p.crop_long_size > p.crop_short_size, "crop_long_size must be larger than crop_short_size")
            size, said = (p.crop_long_size, p.crop_short_size), "crop_long_size x crop_short_size"
        need_reshape = not ((has("crop_width") and has("crop_height"))
                            or (has("resize_width") and has("resize_height")))
        if need_reshape and len(p.template_ratio):
            ratio = max(p.template_ratio)
            size = tuple(c_round(s * ratio / 32) * 32 for s in size)
            said += f" x template_ratio {ratio:g}, rounded to 32"
        return size, f"the layer's detection_data_param ({said})"

    def reshape(self, bottoms):
        p = self.param()
        strides = len(p.stride)
        self.check(strides == len(p.field_h) == len(p.field_w),
                   f"{strides} strides, {len(p.field_h)} field_h and {len(p.field_w)} field_w: give one of each per label")
        need = 1 + strides + (1 if p.output_gt_boxes else 0)
        self.check(len(self.lp.top) == need, f"DetectionData makes {need} tops (the data, {strides} label maps"
                   + (", the ground-truth boxes" if p.output_gt_boxes else "") + f"); {len(self.lp.top)} are named")
        return self.maps_and_boxes(p, p.stride, "stride", need)

    def map_side(self, h, w, stride):
        """A label map's height and width: the data's divided by the stride, rounded (cpp:236-257)."""
        return c_round(h / stride), c_round(w / stride)

    def rngs(self, run):
        """The transformer's RNG and the layer's own prefetch_rng_ (cpp:71-72)."""
        return super().rngs(run) + 1


@register("EvalData", fork=FORK)
class EvalData(_WindowData):
    """EvalDataLayer (eval_data_layer.cpp): the image (N, C, H, W), the ground-truth boxes (G, 8, 1,
    1) and, with a third top, each image's size (N, 2, 1, 1) (cpp:156-183). Without resize_width
    and resize_height the batch must be 1 (cpp:140-143). load_batch resizes the image so that its
    short side is short_size and its long side at most long_size, then rounds each side to a
    multiple of 32 and reshapes the batch to it (cpp:247-281): the largest is
    round32(long_size) x round32(short_size), which protoaudit takes (600 x 1000: 608 x 992)."""

    min_tops = 2
    max_tops = 3

    def param(self):
        return self.fork_param("eval_data_param")

    def image_size(self):
        p = self.param()
        has = p.HasField
        if not (has("resize_width") and has("resize_height")):
            self.check(p.batch_size == 1, "EvalData without resize_width and resize_height needs batch_size 1",
                       fix="set eval_data_param { batch_size: 1 }")
        if has("resize_width") and has("resize_height"):
            return ((round32(p.resize_height), round32(p.resize_width)),
                    "the layer's eval_data_param (resize_height x resize_width, each rounded to 32)")
        if has("short_size") and has("long_size"):
            return ((round32(p.long_size), round32(p.short_size)),
                    "the layer's eval_data_param (the largest load_batch makes: long_size x short_size, each "
                    "rounded to 32)")
        self.missing(self.batch_size(), (None, None, None),
                     "EvalData without resize or short/long sizes: its size is each image's")

    def reshape(self, bottoms):
        data = self.image_top(self.batch_size())
        tops = [data, self.gt_top(1, data[0])]
        if len(self.lp.top) > 2:
            shape = self.override(2, (data[0], 2, 1, 1))
            self.note_origin(2, shape, "the layer's batch size (height and width of each image)")
            tops.append(shape)
        self.decodes = True
        return tops


# --- proposals and their targets ------------------------------------------------------------------

@register("BoxGroupOutput", fork=FORK)
class BoxGroupOutput(Layer):
    """BoxGroupOutputLayer: RPN proposals from pairs of (scores, box deltas) bottoms, one pair per
    box_group_param (box_group_output_layer.cpp:29-31). Each pair: scores (N * G, C, H, W) and
    deltas (N * G, 4, H, W) of G fields (cpp:91-101). Reshape gives rois (1, 5) and, with a second
    top, rois with scores (1, 6) (cpp:103-107); Forward reshapes them to every box the batch keeps
    (cpp:188-246): per image, the boxes over fg_thr, at most max_nms_num before NMS and
    max_post_nms_num after it. protoaudit takes that most (every position of every field where a
    limit is 0), or --define proposals=K per image.

    Memory: bbox_preds_, one per pair the deltas' size (cpp:49-51), written on the device in GPU
    mode and read back on the host (cu:18-37); the field sizes, means, stds and bounds (a few
    floats). Backward: none (hpp:42-55, NOT_IMPLEMENTED where asked)."""

    min_bottoms = 1
    min_tops = 1
    max_tops = 2
    defines = {"proposals": "BoxGroupOutput: proposals kept per image"}

    def groups(self):
        p = self.fork_param("box_group_output_param")
        return [len(g.field_h) for g in p.box_group_param]

    def kept(self, bottoms):
        """(proposals per image, images, why)."""
        p = self.fork_param("box_group_output_param")
        groups = self.groups()
        num = rows(bottoms[0]) // groups[0]
        per_image = self.defined("proposals")
        if per_image is not None:
            return per_image, num, None
        candidates = sum(count(legacy_shape(self, bottoms[2 * i])[2:]) * g for i, g in enumerate(groups))
        per_image, why = candidates, f"every one of its {candidates} anchors"
        if p.max_nms_num > 0 and p.max_nms_num < per_image:
            per_image, why = p.max_nms_num, f"max_nms_num {p.max_nms_num}"
        if p.max_post_nms_num > 0 and p.max_post_nms_num < per_image:
            per_image, why = p.max_post_nms_num, f"max_post_nms_num {p.max_post_nms_num}"
        return per_image, num, why

    def reshape(self, bottoms):
        p = self.fork_param("box_group_output_param")
        self.check(len(bottoms) % 2 == 0, "BoxGroupOutput takes pairs of bottoms (scores, box deltas)")
        pairs = len(bottoms) // 2
        self.check(pairs == len(p.box_group_param),
                   f"{pairs} pairs of bottoms but {len(p.box_group_param)} box_group_param")
        groups = self.groups()
        for g in p.box_group_param:
            self.check(len(g.field_h) == len(g.field_w), "each box_group_param needs as many field_w as field_h")
        shapes = [legacy_shape(self, b) for b in bottoms]
        self.check(groups[0] > 0 and shapes[0][0] % groups[0] == 0,
                   f"bottom 0 {tuple(bottoms[0])}: its num must be images x {groups[0]} fields")
        num = shapes[0][0] // groups[0]
        for i in range(pairs):
            s, b = shapes[2 * i], shapes[2 * i + 1]
            self.check(groups[i] > 0 and s[0] // groups[i] == num and s[1] == shapes[0][1],
                       f"bottom {2 * i} {tuple(bottoms[2 * i])}: {num} images x {groups[i]} fields of "
                       f"{shapes[0][1]} classes")
            self.check(b[1] == 4 and b[0] == s[0] and b[2:] == s[2:],
                       f"bottom {2 * i + 1} {tuple(bottoms[2 * i + 1])} must be bottom {2 * i}'s num, 4 channels "
                       "and its height and width")
        per_image, num, why = self.kept(bottoms)
        total = max(per_image * num, 1)
        if why is not None:
            self.assume(f"it keeps the most proposals it can: {per_image} per image ({why}), {total} for the "
                        f"batch of {num}", "--define proposals=K (proposals kept per image)")
        return [(total, 5, 1, 1), (total, 6, 1, 1)][:len(self.lp.top)]

    def touches(self, run):
        gpu = run.mode == "gpu"
        pairs = len(run.bottoms) // 2
        t = [touch.buffer("fields, means, stds, bounds", 2 * sum(self.groups()) + 12, "setup",
                          per_sample=False, device="host")]
        for i in range(pairs):
            size = count(run.bottoms[2 * i + 1])
            t.append(touch.bottom(2 * i + 1, "data", "forward"))
            t.append(touch.buffer(f"bbox_preds_[{i}]", size, "forward", per_sample=True,
                                  note="decoded boxes, the deltas' size"))
            if gpu:
                t.append(touch.buffer(f"bbox_preds_[{i}] (host)", size, "forward", per_sample=True, device="host",
                                      note="read back for NMS"))
            t.append(touch.bottom(2 * i, "data", "forward", device="host"))
        t += [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))]
        return t


@register("ProposalTarget", fork=FORK)
class ProposalTarget(Layer):
    """ProposalTargetLayer: samples the RoIs (bottom 0, (R, 5)) against the ground truth (bottom 1)
    into rois (B, 5), labels (B, 1), targets and both weights (B, D) (D = 4 x cls_num with
    cls_aware, else 8), the matched boxes (B, 6) and, with a seventh top, weights (B, 1)
    (proposal_target_layer.cpp:39-67). B is batch_size; with -1, Reshape takes the RoIs' count
    (cpp:41-44) and Forward every RoI kept, the ground-truth boxes appended (append_gtbox,
    cpp:142-147, :188-190): protoaudit takes R + G. Forward reads and writes on the host; in GPU
    mode it copies bottom 1 into gt_boxes_ on the device first (cu:60-61). No backward (hpp:42-53)."""

    exact_bottoms = 2
    min_tops = 6  # tops 0-5 are written whatever (cpp:316-337); hpp:35 says 5
    max_tops = 7

    def reshape(self, bottoms):
        p = self.fork_param("proposal_target_param")
        cls_aware = self.fork_param("bbox_reg_param").cls_aware
        dim = 4 * p.cls_num if cls_aware else 8
        rois, gt = legacy_shape(self, bottoms[0]), legacy_shape(self, bottoms[1])
        self.check(rois[1] == 5, f"the rois (bottom 0) must have 5 channels; got {tuple(bottoms[0])}")
        if p.batch_size == -1:
            b = max(rois[0] + (gt[0] if p.append_gtbox else 0), 1)
            self.assume(f"batch_size -1 samples every RoI: {b} ({rois[0]} RoIs"
                        + (f" and {gt[0]} ground-truth boxes appended" if p.append_gtbox else "") + ")",
                        "--define proposals=K and --define gt_boxes=K (per image)")
        else:
            self.check(p.batch_size > 0, "batch_size must be > 0 (or -1: every RoI)")
            b = p.batch_size
        tops = [(b, 5, 1, 1), (b, 1, 1, 1), (b, dim, 1, 1), (b, dim, 1, 1), (b, dim, 1, 1), (b, 6, 1, 1),
                (b, 1, 1, 1)]
        return tops[:len(self.lp.top)]

    def touches(self, run):
        t = [touch.bottom(j, "data", "forward", device="host") for j in range(2)]
        if run.mode == "gpu":
            t += [touch.bottom(1, "data", "forward"),
                  touch.buffer("gt_boxes_", count(run.bottoms[1]), "forward", per_sample=True,
                               note="bottom 1 copied on the device, read on the host"),
                  touch.buffer("gt_boxes_ (host)", count(run.bottoms[1]), "forward", per_sample=True,
                               device="host")]
        return t + [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))]


@register("DecodeBBox", fork=FORK)
class DecodeBBox(Layer):
    """DecodeBBoxLayer: box deltas (bottom 0, (R, 8)) applied to the RoIs (bottom 1, (R, 5)), with
    the matched ground truth (bottom 2) in TRAIN (decode_bbox_layer.cpp:47-58). The top is the
    RoIs' shape at Reshape and at most that many rows after Forward (cpp:110): Reshape's is the
    most. CPU code only (hpp:39-51): bbox_pred_, bottom 0's size (cpp:56), and the top on the host."""

    min_bottoms = 2
    max_bottoms = 3
    exact_tops = 1

    def reshape(self, bottoms):
        b0, b1 = legacy_shape(self, bottoms[0]), legacy_shape(self, bottoms[1])
        self.check(b0[0] == b1[0], f"bottoms 0 {tuple(bottoms[0])} and 1 {tuple(bottoms[1])} need the same num")
        if len(bottoms) > 2:
            self.check(b0[0] == legacy_shape(self, bottoms[2])[0], "bottom 2 needs bottom 0's num")
            self.check(self.ctx.phase == "TRAIN", "DecodeBBox takes a third bottom in TRAIN only")
        self.check(b0[1] == 8, f"bottom 0 must have 8 channels (class-agnostic deltas); got {tuple(bottoms[0])}")
        self.check(b1[1] == 5, f"bottom 1 must have 5 channels (the RoIs); got {tuple(bottoms[1])}")
        return [tuple(bottoms[1])]

    def touches(self, run):
        t = [touch.buffer("bbox_mean_, bbox_std_", 8, "setup", per_sample=False, device="host")]
        t += [touch.bottom(j, "data", "forward", device="host") for j in range(len(run.bottoms))]
        return t + [touch.buffer("bbox_pred_", count(run.bottoms[0]), "forward", per_sample=True, device="host"),
                    touch.top(0, "data", "forward", device="host")]


@register("ScaleRoute", fork=FORK)
class ScaleRoute(Layer):
    """ScaleRouteLayer: the rows of every bottom whose RoI (bottom 0) has a scale in [low_scale,
    high_scale) (scale_route_layer.cpp:79-120), one row (the RoI nearest the range's middle) where
    none does (cpp:104-109). Reshape gives each top (1, C, H, W) (cpp:35-48); Forward reshapes it to
    the rows kept. The FPN nets route one set of RoIs to L levels of disjoint ranges and concatenate
    what each pools: protoaudit takes the RoIs split evenly, ceil(R / L) a level (L: the ScaleRoute
    layers reading the same RoIs), so the concatenation holds them all, or --define routed_rois=K.
    CPU code only, no backward (hpp:42-53); every propagate_down is false (cpp:20-28)."""

    min_bottoms = 1
    min_tops = 1
    defines = {"routed_rois": "ScaleRoute: RoIs each level keeps"}

    def allow_force_backward(self, bottom_index):
        return False

    def levels(self):
        """The ScaleRoute layers of the net that read this one's RoIs (through Caffe's splits)."""
        origin = {}
        for lp in self.ctx.layers:
            if lp.type == "Split" and lp.bottom:
                for t in lp.top:
                    origin[t] = origin.get(lp.bottom[0], lp.bottom[0])
        mine = origin.get(self.lp.bottom[0], self.lp.bottom[0])
        return max(1, sum(1 for lp in self.ctx.layers if lp.type == "ScaleRoute" and lp.bottom
                          and origin.get(lp.bottom[0], lp.bottom[0]) == mine))

    def reshape(self, bottoms):
        self.check(len(bottoms) == len(self.lp.top), "ScaleRoute needs as many tops as bottoms")
        self.check(legacy_shape(self, bottoms[0])[1] == 5, f"bottom 0 must be the RoIs (R, 5); got {tuple(bottoms[0])}")
        num = rows(bottoms[0])
        for j, b in enumerate(bottoms):
            self.check(rows(b) == num, f"bottom {j} {tuple(b)} must have the RoIs' num {num}")
        kept = self.defined("routed_rois")
        if kept is None:
            levels = self.levels()
            kept = -(-num // levels)
            self.assume(f"the {num} RoIs are split evenly over the {levels} levels that route them: {kept} here "
                        f"(one level may keep up to all {num} in a forward)", "--define routed_rois=K (RoIs each level keeps)")
        kept = max(1, min(kept, num))
        return [(kept,) + tuple(legacy_shape(self, b)[1:]) for b in bottoms]

    def touches(self, run):
        return ([touch.bottom(j, "data", "forward", device="host") for j in range(len(run.bottoms))]
                + [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))])


@register("HardMining", fork=FORK)
class HardMining(Layer):
    """HardMiningLayer (online hard example mining): the num_image x num_roi_per_image rows (at most
    the RoIs) of bottoms 1.. with the highest loss (bottom 0, one per RoI) (hard_mining_layer.cpp:
    36-53): top k is bottom k + 1's shape with that num, Forward's as Reshape's (cpp:84-99). CPU
    code only; no backward, every propagate_down false (cpp:20-29)."""

    min_bottoms = 2
    min_tops = 1

    def allow_force_backward(self, bottom_index):
        return False

    def reshape(self, bottoms):
        p = self.fork_param("hard_mining_param")
        self.check(len(bottoms) == len(self.lp.top) + 1, "HardMining needs one more bottom than tops")
        self.check(p.num_roi_per_image > 0 and p.num_image > 0, "num_roi_per_image and num_image must be > 0")
        num = count(bottoms[0])
        self.check(num == rows(bottoms[0]), f"bottom 0 {tuple(bottoms[0])} must hold one loss per RoI")
        self.check(legacy_shape(self, bottoms[1])[1] == 5, f"bottom 1 must be the RoIs (R, 5); got {tuple(bottoms[1])}")
        batch = min(p.num_image * p.num_roi_per_image, num)
        tops = []
        for j, b in enumerate(bottoms[1:], start=1):
            self.check(rows(b) == num, f"bottom {j} {tuple(b)} must have {num} rows")
            tops.append((batch,) + tuple(legacy_shape(self, b)[1:]))
        return tops

    def touches(self, run):
        return ([touch.bottom(j, "data", "forward", device="host") for j in range(len(run.bottoms))]
                + [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))])


# --- pooling of RoIs ----------------------------------------------------------------------------

@register("ROIAlign", fork=FORK)
class ROIAlign(Layer):
    """ROIAlignLayer: bilinear sampling of each RoI (bottom 1, R rows) of the map (bottom 0) on a
    grid of (pooled_h + 1) x (pooled_w + 1) points (roi_align_layer.cpp:31-46): the top is
    (R, C, pooled_h + 1, pooled_w + 1), and it keeps no buffer. Its CPU backward is NOT_IMPLEMENTED
    where asked (hpp:40-45); the GPU one returns unless the map needs a diff (cu:200-207)."""

    exact_bottoms = 2
    exact_tops = 1
    source = SOURCE

    def reshape(self, bottoms):
        p = self.fork_param("roi_pooling_param")
        self.check(p.pooled_h > 0, "pooled_h must be > 0", fix="set roi_pooling_param { pooled_h: 7 }")
        self.check(p.pooled_w > 0, "pooled_w must be > 0", fix="set roi_pooling_param { pooled_w: 7 }")
        return [(rows(bottoms[1]), legacy_shape(self, bottoms[0])[1], p.pooled_h + 1, p.pooled_w + 1)]

    def touches(self, run):
        t = [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"), touch.top(0, "data", "forward")]
        if run.propagate_down[0]:
            if run.mode == "cpu":
                return t + [touch.stop("backward", f"{self.source}'s ROIAlign has no CPU backward (roi_align_layer.hpp:"
                                       "40-45, NOT_IMPLEMENTED): Caffe stops at the first backward pass in CPU mode")]
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t


@register("ROIPooling", fork=FORK)
class ROIPooling(fastrcnn.ROIPooling):
    """caffe-fast-rcnn's ROIPoolingLayer with pad_ratio (each RoI widened by that share of its size,
    roi_pooling_layer.cpp:70-71, cu:36-37): the same top and max_idx_ (cpp:40-46), CPU backward
    NOT_IMPLEMENTED (cpp:136-138). The type is caffe-fast-rcnn's: it makes no file this fork's alone."""

    claims_files = False

    source = SOURCE
    no_cpu_backward = "roi_pooling_layer.cpp:138"  # NOT_IMPLEMENTED

    def backward_touches(self, run):
        if run.mode == "cpu" and run.propagate_down[0]:
            return [touch.stop("backward", f"{self.source}'s ROIPooling has no CPU backward ({self.no_cpu_backward}, "
                               "NOT_IMPLEMENTED): Caffe stops at the first backward pass in CPU mode")]
        return fastrcnn.into_the_map(run)


@register("PSROIPooling", fork=FORK)
class PSROIPooling(rfcn.PSROIPooling):
    """R-FCN's PSROIPoolingLayer: psroi_pooling_layer.hpp/.cpp/.cu are Microsoft/caffe 1a2be8e's."""

    source = SOURCE


@register("SmoothL1Loss", fork=FORK)
class SmoothL1Loss(fastrcnn.SmoothL1Loss):
    """caffe-fast-rcnn's SmoothL1LossLayer (2 or 4 bottoms, no loss weight by default, cpp:17-25;
    diff_, errors_ and ones_ as bottom 0, cpp:43-51; no CPU code, cpp:63, :69) with a second top,
    each item's loss (N, 1, H, W) (cpp:54-57, hpp:31), written on the device (cu:60-66). The type is
    caffe-fast-rcnn's: it makes no file this fork's alone."""

    claims_files = False
    exact_tops = None
    min_tops = 1
    max_tops = 2
    source = SOURCE
    no_cpu_code = "smooth_L1_loss_layer.cpp:63 and :69"

    def reshape(self, bottoms):
        tops = super().reshape(bottoms)
        if len(self.lp.top) > 1:
            n, _, h, w = legacy_shape(self, bottoms[0])
            tops.append((n, 1, h, w))
        return tops

    def touches(self, run):
        t = super().touches(run)
        if run.mode == "gpu" and len(run.tops) > 1:
            t.append(touch.top(1, "data", "forward"))
        return t


# --- losses, accuracies, outputs -----------------------------------------------------------------

def _group_shapes(layer, bottoms, cls_num, group_num):
    """The CHECKs both group layers make of (scores, deltas, labels) (detection_group_loss_layer.cpp:
    126-141, detection_group_accuracy_layer.cpp:63-75)."""
    s, b, g = (legacy_shape(layer, x) for x in bottoms)
    layer.check(group_num >= 1, "give field_h and field_w (one of each per field)")
    layer.check(s[0] % group_num == 0, f"bottom 0 {tuple(bottoms[0])}: its num must be images x {group_num} fields")
    layer.check(s[0] == b[0] == g[0] and s[2:] == b[2:] == g[2:],
                f"bottoms {tuple(bottoms[0])}, {tuple(bottoms[1])}, {tuple(bottoms[2])} need the same num, height "
                "and width")
    layer.check(s[1] == cls_num, f"bottom 0 must have cls_num {cls_num} channels; got {tuple(bottoms[0])}")
    layer.check(b[1] == 4, f"bottom 1 must have 4 channels (box deltas); got {tuple(bottoms[1])}")
    layer.check(g[1] == 6, f"bottom 2 must have 6 channels (the label map); got {tuple(bottoms[2])}")
    return s


@register("DetectionGroupLoss", fork=FORK)
class DetectionGroupLoss(Layer):
    """DetectionGroupLossLayer: the RPN's softmax and box losses over the fields of a group. Bottoms:
    scores (N * G, cls_num, H, W), deltas (N * G, 4, H, W), the label map (N * G, 6, H, W); its top
    is (1, 1, 1, 2) (detection_group_loss_layer.cpp:126-153). LayerSetUp calls LossLayer's (loss
    weight 1 by default) and sets propagate_down true, true, false when none is given (cpp:21-27).

    Memory (cpp:60-67, :145-152): an inner Softmax whose top prob_ is bottom 0's size, its diff
    filled by SetLossWeights at setup; keep_map_, weight_map_, gt_label_, gt_overlap_ (N * G x H x W
    each) and bbox_diff_, gt_bbox_ (4 times that). The GPU forward writes gt_label_, gt_bbox_ (data
    and diff), gt_overlap_, keep_map_ (data, and its diff on the host for ranking negatives),
    weight_map_ (data on the host, diff as counts), bbox_diff_, and borrows both bottoms' diffs as
    scratch (cu:104-371); backward writes the diffs of bottoms 0 and 1 (cu:406-453)."""

    exact_bottoms = 3
    exact_tops = 1
    auto_top_blobs = True
    loss_by_default = True

    def allow_force_backward(self, bottom_index):
        return bottom_index != 2

    def reshape(self, bottoms):
        p = self.fork_param("detection_group_loss_param")
        self.check(len(p.field_h) == len(p.field_w), "give as many field_w as field_h")
        if p.objectness:
            self.check(p.cls_num == 2, "objectness needs cls_num 2")
        _group_shapes(self, bottoms, p.cls_num, len(p.field_h))
        return [(1, 1, 1, 2)]

    def touches(self, run):
        p = self.fork_param("detection_group_loss_param")
        n, _, h, w = legacy_shape(self, run.bottoms[0])
        maps, probs = n * h * w, count(run.bottoms[0])
        gpu = run.mode == "gpu"
        host = "host" if gpu else "device"
        small = 2 * len(p.field_h) + 8 + (4 if p.HasField("field_xyr") and p.HasField("field_whr") else 0)
        t = [touch.buffer("fields, means, stds, bounds", small, "setup", per_sample=False, device="host"),
             touch.buffer("prob_.diff", probs, "setup", per_sample=True, note="the inner Softmax's loss weights"),
             touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"), touch.bottom(2, "data", "forward"),
             touch.buffer("prob_", probs, "forward", per_sample=True, note="the inner Softmax's top")]
        for name, size in (("gt_label_", maps), ("gt_bbox_", 4 * maps), ("gt_bbox_.diff", 4 * maps),
                           ("gt_overlap_", maps), ("keep_map_", maps), ("weight_map_", maps),
                           ("weight_map_.diff", maps), ("bbox_diff_", 4 * maps)):
            t.append(touch.buffer(name, size, "forward", per_sample=True))
        if gpu:
            for name, size in (("prob_ (host)", probs), ("gt_label_ (host)", maps), ("gt_overlap_ (host)", maps),
                               ("keep_map_ (host)", maps), ("weight_map_ (host)", maps)):
                t.append(touch.buffer(name, size, "forward", per_sample=True, device="host"))
            t += [touch.bottom(0, "diff", "forward"), touch.bottom(1, "diff", "forward")]
        t.append(touch.buffer("keep_map_.diff", maps, "forward", per_sample=True, device=host,
                              note="negatives' ranking, on the host"))
        t.append(touch.top(0, "data", "forward"))
        down = [j for j in (0, 1) if run.propagate_down[j]]
        if down:
            t += [touch.top(0, "diff", "backward")] + [touch.bottom(j, "diff", "backward") for j in down]
        return t


@register("DetectionGroupAccuracy", fork=FORK)
class DetectionGroupAccuracy(Layer):
    """DetectionGroupAccuracyLayer: the bottoms of DetectionGroupLoss; tops (1, 1, 1, 2) and, with a
    second, (1, 1, 1, 1) (detection_group_accuracy_layer.cpp:63-83). gt_label_, gt_overlap_ (N * G x
    H x W) and gt_bbox_ (4 times that) are written in forward, on the device in GPU mode and read
    back on the host (cu); no backward (hpp:46-56)."""

    exact_bottoms = 3
    min_tops = 1
    max_tops = 2

    def allow_force_backward(self, bottom_index):
        return False

    def reshape(self, bottoms):
        p = self.fork_param("detection_group_accuracy_param")
        self.check(len(p.field_h) == len(p.field_w), "give as many field_w as field_h")
        if p.objectness:
            self.check(p.cls_num == 2, "objectness needs cls_num 2")
        _group_shapes(self, bottoms, p.cls_num, len(p.field_h))
        return [(1, 1, 1, 2), (1, 1, 1, 1)][:len(self.lp.top)]

    def touches(self, run):
        n, _, h, w = legacy_shape(self, run.bottoms[0])
        maps = n * h * w
        t = [touch.bottom(j, "data", "forward") for j in range(3)]
        for name, size in (("gt_label_", maps), ("gt_bbox_", 4 * maps), ("gt_overlap_", maps)):
            t.append(touch.buffer(name, size, "forward", per_sample=True))
            if run.mode == "gpu":
                t.append(touch.buffer(name + " (host)", size, "forward", per_sample=True, device="host"))
        return t + [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))]


@register("BboxAccuracy", fork=FORK)
class BboxAccuracy(Layer):
    """BboxAccuracyLayer: the mean IoU of the decoded boxes (bottom 0, (R, 8) unless cls_aware), the
    RoIs and the matched boxes (bottoms 1, 2): tops (1, 1, 1, 1), one or two (bbox_accuracy_layer.cpp:
    26-38). CPU code only, no backward (hpp:40-50)."""

    exact_bottoms = 3
    min_tops = 1
    max_tops = 2

    def allow_force_backward(self, bottom_index):
        return False

    def reshape(self, bottoms):
        nums = [rows(b) for b in bottoms]
        self.check(len(set(nums)) == 1, f"bottoms {', '.join(str(tuple(b)) for b in bottoms)} need the same num")
        if not self.fork_param("bbox_reg_param").cls_aware:
            self.check(legacy_shape(self, bottoms[0])[1] == 8, f"bottom 0 must have 8 channels; got {tuple(bottoms[0])}")
        return [(1, 1, 1, 1)] * len(self.lp.top)

    def touches(self, run):
        return ([touch.bottom(j, "data", "forward", device="host") for j in range(3)]
                + [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))])


@register("FrcnnOutput", fork=FORK)
class FrcnnOutput(Layer):
    """FrcnnOutputLayer: per-class NMS of the detector's scores (bottom 0, (R, classes)), deltas
    (bottom 1) and RoIs (bottom 2) of one image (image_sizes, bottom 3, (1, 2)) (frcnn_output_layer.cpp:
    133-147). Reshape gives (1, 7); Forward reshapes it to the detections kept plus one per image
    (cpp:269): at most max_det_num, else every RoI in every class but the background. protoaudit takes
    that most, or --define detections=K per image. CPU code only, forward only (hpp:45-57)."""

    exact_bottoms = 4
    exact_tops = 1
    defines = {"detections": "FrcnnOutput: detections kept per image"}

    def allow_force_backward(self, bottom_index):
        return False

    def reshape(self, bottoms):
        p = self.fork_param("frcnn_output_param")
        s, b, r, sizes = (legacy_shape(self, x) for x in bottoms)
        self.check(s[0] == b[0] == r[0], "bottoms 0, 1 and 2 need the same num")
        self.check(r[1] in (5, 6), f"bottom 2 must be the RoIs (R, 5 or 6); got {tuple(bottoms[2])}")
        if self.fork_param("bbox_reg_param").cls_aware:
            self.check(b[1] == 4 * s[1], f"bottom 1 must have 4 x {s[1]} channels; got {tuple(bottoms[1])}")
        else:
            self.check(b[1] == 8, f"bottom 1 must have 8 channels; got {tuple(bottoms[1])}")
        self.check(sizes[0] == 1 and sizes[1] == 2, f"bottom 3 must be (1, 2): one image's size; got {tuple(bottoms[3])}")
        per_image = self.defined("detections")
        if per_image is None:
            per_image = p.max_det_num if p.max_det_num > 0 else (s[1] - 1) * s[0]
            why = f"max_det_num {p.max_det_num}" if p.max_det_num > 0 else \
                f"every one of {s[0]} RoIs in each of {s[1] - 1} classes"
            self.assume(f"it keeps the most detections it can: {per_image} ({why}) and the one it adds",
                        "--define detections=K (detections kept per image)")
        return [(per_image + 1, 7, 1, 1)]

    def touches(self, run):
        return ([touch.buffer("bbox_mean_, bbox_std_", 8, "setup", per_sample=False, device="host")]
                + [touch.bottom(j, "data", "forward", device="host") for j in range(4)]
                + [touch.top(0, "data", "forward", device="host")])


@register("DetectionEvaluate", fork=FORK)
class DetectionEvaluate(Layer):
    """DetectionEvaluateLayer (this fork's, not SSD's): true and false positives of the detections
    (bottom 0, (D, 7)) against the ground truth (bottom 1, (G, 8)) and image sizes (bottom 2, (N, 2))
    (detection_evaluate_layer.cpp:42-62). Reshape reads the detections' data and counts the rows
    whose label is not -1: at setup they are zeros, so all count, and the top is (classes - 1 + D,
    5). LayerSetUp reads name_size_file whole (cpp:18-39), host memory not counted. CPU code only,
    forward only."""

    exact_bottoms = 3
    exact_tops = 1

    def allow_force_backward(self, bottom_index):
        return False

    def reshape(self, bottoms):
        p = self.fork_param("detection_evaluate_param")
        self.check(p.overlap_threshold > 0, "overlap_threshold must be > 0")
        self.check(p.name_size_file != "", "DetectionEvaluate needs name_size_file",
                   fix="set detection_evaluate_param { name_size_file: FILE }")
        d, g, s = (legacy_shape(self, x) for x in bottoms)
        self.check(d[1] == 7, f"bottom 0 must be detections (D, 7); got {tuple(bottoms[0])}")
        self.check(g[1] == 8, f"bottom 1 must be ground-truth boxes (G, 8); got {tuple(bottoms[1])}")
        self.check(s[1] == 2, f"bottom 2 must be image sizes (N, 2); got {tuple(bottoms[2])}")
        return [(p.num_classes - 1 + d[0], 5, 1, 1)]

    def touches(self, run):
        return ([touch.bottom(j, "data", "forward", device="host") for j in range(3)]
                + [touch.top(0, "data", "forward", device="host")])


# --- BVLC layers the fork changed --------------------------------------------------------------

@register("SoftmaxWithLoss", fork=FORK)
class CascadeSoftmaxWithLoss(SoftmaxWithLoss):
    """The fork's SoftmaxWithLossLayer: BVLC's with a third top, each item's loss, bottom 1's shape
    (softmax_loss_layer.cpp:58-61, hpp:64). Its inner Softmax is set up without the loss weights
    (cpp:15-16), so prob_'s diff is not filled at setup: the forward writes it, as the valid counts,
    and bottom 0's diff, as each item's loss, on the CPU (cpp:102-118) as on the GPU (cu:39-45)."""

    max_tops = 3

    def reshape(self, bottoms):
        tops = super().reshape(bottoms)
        return tops + [tuple(bottoms[1])] if len(self.lp.top) > 2 else tops

    def touches(self, run):
        shape = run.bottoms[0]
        t = [x for x in super().touches(run) if not (x.what == "top" and x.index == 2) and x.name != "prob_.diff"]
        t.append(touch.buffer("prob_.diff", count(shape), "forward", per_sample=True, note="the valid counts"))
        if run.mode == "cpu":
            t.append(touch.bottom(0, "diff", "forward"))
        return t + ([touch.top(2, "data", "forward")] if len(run.tops) > 2 else [])


@register("Accuracy", fork=FORK)
class Accuracy(enet.Accuracy):
    """The fork's AccuracyLayer is 2017 BVLC's, CPU code only (no accuracy_layer.cu; hpp:70-80)."""


@register("Deconvolution", fork=FORK)
class CascadeDeconvolution(Deconvolution):
    """Always Caffe's: deconv_layer.cpp:82 registers the class itself, and layer_factory.cpp has no
    cuDNN Deconvolution."""

    def uses_cudnn(self, run):
        return False


carry(__name__, FORK, CeilModePooling)  # pooling_layer.cpp:90-103: ceil_mode (field 13, default true)
