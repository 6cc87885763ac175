"""The SSD fork's own layers (weiliu89/caffe, branch ssd, commit 4817bf8), as its sources shape them.

AnnotatedData, Permute, PriorBox, Normalize, MultiBoxLoss (with the SmoothL1Loss it runs inside),
DetectionOutput and DetectionEvaluate. File and line references are to that commit's
src/caffe/layers/*.cpp and *.cu.

Two counts only the data decides are taken at their worst by default, each with a flag:
- MultiBoxLoss's buffers hold one row per matched prior and per mined negative of the batch, which
  depends on where the ground-truth boxes lie. Caffe never shrinks a blob, so over a training run
  they grow to the largest batch seen; protoaudit takes every prior of every image (the most the
  fork's code can use). `--define matched_priors=K` gives K matched priors per image instead.
- DetectionOutput keeps keep_top_k detections per image at most; `--define detections=K` says how
  many it keeps per image.
"""
from . import touch
from .base import Layer, count, float32, layer_class, legacy_shape, register
from .data import CopyingPrefetching, Data, ImageData, Prefetching, ThroughDataReader, WindowData
from .touch import Run

FORK = "ssd"


# --- data --------------------------------------------------------------------------------------

class ForkPrefetching(CopyingPrefetching):
    """The fork's BasePrefetchingDataLayer (base_data_layer.hpp:71-80, base_data_layer.cpp:46-125),
    older than BVLC 9b89154's: PREFETCH_COUNT = 3 batches in an array (hpp:71, :77), a Batch being
    data_ and label_ (hpp:48-51), and a forward that copies them into the tops
    (CopyingPrefetching). AnnotatedData's DataReader (of AnnotatedDatum records) is not counted."""

    PREFETCH_COUNT = 3
    BATCH_BLOBS = 2


@register("AnnotatedData", fork=FORK)
class AnnotatedData(ForkPrefetching, Prefetching):
    """AnnotatedDataLayer: images with their boxes, from an LMDB of AnnotatedDatum.

    The data top is (batch, C, H, W): H x W from transform_param's crop (crop_size, or crop_h x
    crop_w), else resize_param's height x width (WARP and FIT_LARGE_SIZE_AND_PAD give those;
    FIT_SMALL_SIZE follows each image's aspect), else the dataset's image size
    (data_transformer.cpp:1024-1050, im_transforms.cpp:100-125). C is the images' own: 1 with
    force_gray, 3 with force_color, else the dataset's (colour for every public SSD dataset).
    protoaudit does not read AnnotatedDatum records: without a crop or resize_param, --input gives
    the data top.

    The label top holds every ground-truth box of the batch, one row of 8 per box:
    (1, 1, boxes, 8) (annotated_data_layer.cpp:78-96 at setup, for the first image alone; 256-263
    each batch). Its size is the dataset's; protoaudit takes one box per image, the fewest an image of
    a detection dataset has: each further box is 32 bytes per prefetch batch and per top, and
    `--input label=1x1xBOXESx8` gives the real count."""

    min_tops = 1
    max_tops = 2

    def batch_size(self):
        return self.lp.data_param.batch_size

    def data_shape(self, batch):
        """((C, H, W), origin) as DataTransformer::InferBlobShape gives it from the parameters."""
        t = self.lp.transform_param
        self.check(not (t.force_color and t.force_gray), "cannot set both force_color and force_gray")
        crop = (t.crop_size, t.crop_size) if t.crop_size else (t.crop_h, t.crop_w)
        resized = None
        if t.HasField("resize_param"):
            r = t.resize_param
            if r.resize_mode == 2:  # FIT_SMALL_SIZE: each image's own aspect ratio
                self.check(self.batch_size() == 1, "Only support batch size of 1 for FIT_SMALL_SIZE",
                           fix="set data_param { batch_size: 1 }, or another resize_mode")
            else:
                self.check(r.height > 0 and r.width > 0, "resize_param needs height and width",
                           fix="set resize_param { height: H width: W }")
                resized = (r.height, r.width)
        if resized and all(crop):
            self.check(resized[0] >= crop[0] and resized[1] >= crop[1],
                       f"the crop {crop[0]}x{crop[1]} is larger than the resized image {resized[0]}x{resized[1]}")
        if self.declared():
            return None, "--input"
        size = crop if all(crop) else resized
        channels = 3 if t.force_color else 1 if t.force_gray else None
        if size is None:
            self.missing(batch, (channels, None, None),
                         "AnnotatedData layer: its image size is in the dataset (no crop, no resize_param)")
        origin = "the layer's transform_param"
        if channels is None:
            channels = self.assume_colour(batch, size[0], size[1], "the dataset's images are not read")
            origin += "; 3 channels assumed"
        return (channels,) + tuple(size), origin

    def reshape(self, bottoms):
        batch = self.batch_size()
        image, origin = self.data_shape(batch)
        data = self.override(0, (batch,) + tuple(image) if image else None, own_batch=batch)
        self.note_origin(0, data, origin)
        return [data] + ([self.label_top(data[0])] if len(self.lp.top) > 1 else [])

    def label_top(self, batch):
        """(1, 1, boxes, 8): --input gives it whole (the batch does not apply to it), else one
        box per image."""
        name = self.lp.top[1]
        if name in self.ctx.inputs:
            self.ctx.used_inputs.add(name)
            shape = tuple(self.ctx.inputs[name])
            self.check(len(shape) == 4 and shape[:2] == (1, 1) and shape[3] == 8,
                       f"--input {name}={'x'.join(map(str, shape))}: the label holds one row of 8 per box, "
                       "(1, 1, boxes, 8)", fix=f"write it as --input {name}=1x1xBOXESx8")
            self.note_origin(1, shape, "--input")
            return shape
        shape = (1, 1, max(batch, 1), 8)
        self.assume(f"top '{name}' holds one ground-truth box per image ({shape[2]} boxes, "
                    f"{'x'.join(map(str, shape))})", f"--input {name}=1x1xBOXESx8")
        self.note_origin(1, shape, "assumed: one box per image")
        return shape


@register("Data", fork=FORK)
class SSDData(ForkPrefetching, ThroughDataReader, Data):
    """Its DataReader<Datum> (data_layer.hpp:34) is deeplab-public-ver2's code, templated
    (data_reader.cpp:29-33, :55-60)."""


@register("ImageData", fork=FORK)
class SSDImageData(ForkPrefetching, ImageData):
    pass


@register("WindowData", fork=FORK)
class SSDWindowData(ForkPrefetching, WindowData):
    pass


# --- shape layers ------------------------------------------------------------------------------

@register("Permute", fork=FORK)
class Permute(Layer):
    """PermuteLayer: the bottom's axes in permute_param's order (the unnamed axes follow in their
    own order). An order that changes nothing shares the bottom's data and diff
    (permute_layer.cpp:52-61, 110-113, 129-132)."""

    exact_bottoms = 1
    exact_tops = 1

    def orders(self, shape):
        n = len(shape)
        orders = []
        for order in self.fork_param("permute_param").order:
            self.check(order < n, f"order {order} should be less than the input's {n} axes")
            self.check(order not in orders, f"there are duplicate orders ({order})")
            orders.append(order)
        return orders + [i for i in range(n) if i not in orders]

    def needs_permute(self, shape):
        return self.orders(shape) != list(range(len(shape)))

    def reshape(self, bottoms):
        shape = tuple(bottoms[0])
        self._identity = not self.needs_permute(shape)
        return [tuple(shape[i] for i in self.orders(shape))]

    def shares(self):
        """Asked after reshape, which knows whether the order changes anything."""
        return [(0, 0, "data"), (0, 0, "diff")] if self.__dict__.get("_identity") else []

    def touches(self, run):
        """permute_order_, old_steps_ and new_steps_ (one int per axis) are filled on the host at
        setup and read on the device by the GPU kernels. Backward writes the bottom's diff without
        looking at propagate_down (permute_layer.cpp:117-128)."""
        if not self.needs_permute(run.bottoms[0]):
            return []
        n = len(run.bottoms[0])
        gpu = run.mode == "gpu"
        t = [touch.buffer(name, n, "forward" if gpu else "setup", per_sample=False)
             for name in ("permute_order_", "old_steps_", "new_steps_")]
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward"),
              touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t


@register("PriorBox", fork=FORK)
class PriorBox(Layer):
    """PriorBoxLayer: the prior boxes of one feature map, (1, 2, H * W * priors * 4): box corners,
    then their variances (prior_box_layer.cpp:104-118).

    priors = (aspect ratios) * (min sizes) + (max sizes): aspect ratio 1 first, then each given
    ratio not already in the list (to 1e-6, in float) and, with flip, its inverse
    (prior_box_layer.cpp:17-45). The bottom count is not checked (the header misspells
    ExactNumBottomBlobs); bottom 1 (the image) is read only when img_size/img_h/img_w are not given.
    It computes its top on the CPU only, reads no bottom's data, and has no backward."""

    min_bottoms = 1
    exact_tops = 1

    implicit = (1.0,)  # the ratios every cell has before the given ones

    @classmethod
    def ratios(cls, p):
        """The aspect ratios of prior_box_param `p`: 1 first (`implicit`), then each given ratio not
        already there (to 1e-6) and, with flip, its inverse."""
        ratios = list(cls.implicit)
        for ar in p.aspect_ratio:
            ar = float32(ar)
            if any(abs(ar - r) < 1e-6 for r in ratios):
                continue
            ratios.append(ar)
            if p.flip:
                ratios.append(float32(1.0 / ar))
        return ratios

    def num_priors(self):
        p = self.fork_param("prior_box_param")
        self.check(len(p.min_size) > 0, "must provide min_size")
        self.check(all(s > 0 for s in p.min_size), "min_size must be positive")
        priors = len(self.ratios(p)) * len(p.min_size) + self.max_size_priors(p)
        self.check_variances_and_steps(p)
        return priors

    def max_size_priors(self, p):
        """One prior for each max_size, each above its min_size (prior_box_layer.cpp's CHECKs)."""
        if not len(p.max_size):
            return 0
        self.check(len(p.max_size) == len(p.min_size),
                   f"give one max_size per min_size ({len(p.min_size)} min_size, {len(p.max_size)} max_size)")
        for lo, hi in zip(p.min_size, p.max_size):
            self.check(hi > lo, f"max_size {hi} must be greater than min_size {lo}")
        return len(p.max_size)

    def check_variances_and_steps(self, p):
        """Setup's CHECKs on the variances, the image size and the step (prior_box_layer.cpp)."""
        self.check(len(p.variance) in (0, 1, 4), f"give 1 or 4 variances, not {len(p.variance)}")
        self.check(all(v > 0 for v in p.variance), "variances must be positive")
        has = p.HasField
        self.check(not ((has("img_h") or has("img_w")) and has("img_size")),
                   "Either img_size or img_h/img_w should be specified; not both")
        self.check(not ((has("step_h") or has("step_w")) and has("step")),
                   "Either step or step_h/step_w should be specified; not both")

    def reshape(self, bottoms):
        p = self.fork_param("prior_box_param")
        own_size = (p.HasField("img_h") or p.HasField("img_w") or p.HasField("img_size"))
        self.check(len(bottoms) >= 2 or (own_size and (p.img_size or (p.img_h and p.img_w))),
                   f"{self.lp.type} reads the image size from bottom 1 when img_size (or img_h and img_w) is "
                   "not given",
                   fix="give the image (the data top) as the second bottom")
        _, _, height, width = legacy_shape(self, bottoms[0])
        size = width * height * self.num_priors() * 4
        self.check(size > 0, "the feature map has no cells")
        return [(1, 2, size)]

    def touches(self, run):
        """Forward writes the top on the CPU (in GPU mode the next layer copies it over)."""
        return [touch.top(0, "data", "forward")]


@register("Normalize", fork=FORK)
class Normalize(Layer):
    """NormalizeLayer: L2-normalises each position across channels (or each image across
    everything, across_spatial) and scales per channel (or by one shared scale)."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        self.check(len(bottoms[0]) >= 2, f"the bottom {tuple(bottoms[0])} needs at least 2 axes")
        legacy_shape(self, bottoms[0])
        return [tuple(bottoms[0])]

    def param_shapes(self, bottoms):
        """blobs_[0]: one scale per channel, or a scalar (a 0-axis blob) with channel_shared."""
        shared = self.fork_param("norm_param").channel_shared
        return [()] if shared else [(legacy_shape(self, bottoms[0])[1],)]

    def touches(self, run):
        """normalize_layer.cpp/.cu, with (N, C, H, W) the bottom's legacy shape:
        setup fills sum_channel_multiplier_ (C) and sum_spatial_multiplier_ (H*W) on the host;
        forward uses buffer_ (one image, C*H*W) and norm_ (N, or N*H*W unless across_spatial;
        across_spatial keeps it on the host in GPU mode); backward writes the bottom's diff
        (taken before propagate_down is read) and uses buffer_channel_ (C) and buffer_spatial_
        (H*W), and the scale's diff when it learns (on the host when the scale is shared).
        The GPU code reads sum_channel_multiplier_ forward and sum_spatial_multiplier_ backward."""
        n, c, h, w = legacy_shape(self, run.bottoms[0])
        p = self.fork_param("norm_param")
        gpu = run.mode == "gpu"
        host = "host" if gpu else "device"
        t = [touch.param(0, "data", "setup"),
             touch.buffer("sum_channel_multiplier_", c, "forward" if gpu else "setup", per_sample=False),
             touch.buffer("sum_spatial_multiplier_", h * w, "backward" if gpu else "setup", per_sample=False),
             touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward"),
             touch.buffer("buffer_", c * h * w, "forward", per_sample=False),
             touch.buffer("norm_", n if p.across_spatial else n * h * w, "forward", per_sample=True,
                          device=host if p.across_spatial else "device"),
             touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward"),
             touch.buffer("buffer_channel_", c, "backward", per_sample=False),
             touch.buffer("buffer_spatial_", h * w, "backward", per_sample=False)]
        if run.param_propagate_down and run.param_propagate_down[0]:
            if gpu and p.channel_shared:
                t.append(touch.buffer("scale.diff (host)", 1, "backward", per_sample=False, device="host"))
            else:
                t.append(touch.param(0, "diff", "backward"))
        return t


# --- losses ------------------------------------------------------------------------------------

@register("SmoothL1Loss", fork=FORK)
class SmoothL1Loss(Layer):
    """SmoothL1LossLayer (the fork's, modified from Fast R-CNN's): predictions, targets and
    optional weights of one shape; diff_ and errors_ the prediction's size; either of the first
    two bottoms may take a gradient (smooth_L1_loss_layer.cpp:19-34, .cu:73-92). Unlike Fast
    R-CNN's it calls LossLayer's setup, so its loss weight is 1 by default.

    caffe-fast-rcnn has a layer of the same name, sized differently, and SSD nets use this one
    inside MultiBoxLoss: a file whose only fork type is SmoothL1Loss is read as caffe-fast-rcnn's;
    `--fork ssd` makes it this one."""

    claims_files = False
    min_bottoms = 2
    max_bottoms = 3
    exact_tops = 1
    auto_top_blobs = True
    loss_by_default = True

    def reshape(self, bottoms):
        self.check(len(bottoms[0]) and len(bottoms[1]) and bottoms[0][0] == bottoms[1][0],
                   f"the predictions {tuple(bottoms[0])} and targets {tuple(bottoms[1])} should have the same "
                   "first dimension")
        first = legacy_shape(self, bottoms[0])
        for j, other in enumerate(bottoms[1:], 1):
            self.check(legacy_shape(self, other)[1:] == first[1:],
                       f"bottom {j} {tuple(other)} must match bottom 0 {tuple(bottoms[0])} past the first axis")
        return [()]

    def touches(self, run):
        size = count(legacy_shape(self, run.bottoms[0]))
        t = super().touches(run)
        return t + [touch.buffer("diff_", size, "forward", per_sample=True),
                    touch.buffer("errors_", size, "forward", per_sample=True)]


MINING_NONE, MINING_MAX_NEGATIVE, MINING_HARD_EXAMPLE = 0, 1, 2
STD_MAP_BYTES, STD_VECTOR_BYTES = 48, 24  # sizeof(std::map), sizeof(std::vector) in libstdc++ (64-bit)
MATCH_LISTS_BYTES_PER_IMAGE = STD_MAP_BYTES + STD_VECTOR_BYTES
LOC_L2, LOC_SMOOTH_L1 = 0, 1
CONF_SOFTMAX, CONF_LOGISTIC = 0, 1


def predictions(layer, p, bottoms):
    """The location and confidence predictions' shapes and the prior count, with the CHECKs
    MultiBoxLoss and DetectionOutput both make on them (multibox_loss_layer.cpp,
    detection_output_layer.cpp: Reshape): (loc, conf, num_priors)."""
    loc, conf, priors = (legacy_shape(layer, b) for b in bottoms[:3])
    layer.check(loc[0] == conf[0], f"the location {tuple(bottoms[0])} and confidence {tuple(bottoms[1])} "
                "predictions must have the same batch")
    num_priors = priors[2] // 4
    loc_classes = 1 if p.share_location else p.num_classes
    # the priors are counted as this fork's PriorBox makes them: a fork that makes more per location
    # from the same fields (FaceBoxes densifies its small anchors, TextBoxes doubles them) trains a net
    # that SSD's cannot
    fix = ("SSD's Caffe stops here too, counting the priors as its PriorBox makes them; FaceBoxes' Caffe makes "
           "21 per location from three min_size values (--fork faceboxes), TextBoxes' twice SSD's count "
           "(--fork textboxes); else check the PriorBox layers and the num_output of the layers that predict "
           "locations and confidences")
    layer.check(num_priors * loc_classes * 4 == loc[1],
                f"Number of priors must match number of location predictions: {num_priors} priors x "
                f"{loc_classes} x 4 != {loc[1]} (bottom 0 {tuple(bottoms[0])})", fix)
    layer.check(num_priors * p.num_classes == conf[1],
                f"Number of priors must match number of confidence predictions: {num_priors} priors x "
                f"{p.num_classes} classes != {conf[1]} (bottom 1 {tuple(bottoms[1])})", fix)
    return loc, conf, num_priors


@register("MultiBoxLoss", fork=FORK)
class MultiBoxLoss(Layer):
    """MultiBoxLossLayer: matches priors (bottom 2) to the ground-truth boxes (bottom 3), then runs
    a location loss on the matched priors and a confidence loss on the matched priors and the
    mined negatives, through two layers of its own (multibox_loss_layer.cpp:58-128).

    Bottoms: location predictions (N, priors*4), confidences (N, priors*classes), the priors
    (1, 2, priors*4) and the labels (1, 1, boxes, 8). Its code is CPU only (no .cu); the two inner
    layers run on the device in GPU mode, on copies of its buffers.

    Each batch, with M matched priors and K confidence rows (multibox_loss_layer.cpp:182-236):
    loc_pred_ and loc_gt_ (1, 4M) feed loc_loss_layer_ (SmoothL1Loss, or EuclideanLoss for L2);
    conf_pred_ (K, classes) and conf_gt_ (K) feed conf_loss_layer_ (SoftmaxWithLoss, or
    SigmoidCrossEntropyLoss with (1, K, classes) for both). With MAX_NEGATIVE mining
    K = M + negatives, at most neg_pos_ratio per matched prior (bbox_util.cpp:950-960). Without
    mining K = N * priors, conf_pred_ shares the confidences' data and, after backward, gives them its
    diff (multibox_loss_layer.cpp:223-228, 360-363), whose own diff is then freed.

    Not counted: the match lists each forward fills (per image a map node and one int per prior and
    per negative) live only until the end of backward, which empties them; in a GPU build the
    negative mining scores every prior on the device in a temporary blob the confidences' size
    (bbox_util.cu:573-612, ComputeConfLossGPU), freed before the layer's forward returns."""

    exact_bottoms = 4
    exact_tops = 1
    auto_top_blobs = True
    loss_by_default = True
    defines = {"matched_priors": "MultiBoxLoss: priors matched to a ground-truth box, per image"}

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1  # LossLayer's rule, which the fork keeps

    def reshape(self, bottoms):
        p = self.fork_param("multibox_loss_param")
        self.check(p.HasField("num_classes") and p.num_classes >= 1, "Must provide num_classes (1 or more)")
        loc, conf, num_priors = predictions(self, p, bottoms)
        if self.mining(p) != MINING_NONE:
            self.check(p.share_location, "Currently only support negative mining if share_location is true")
        if p.conf_loss_type == CONF_SOFTMAX:
            self.check(0 <= p.background_label_id < p.num_classes,
                       "background_label_id should be within [0, num_classes) for Softmax")
        if self.defined("matched_priors") is None:
            matches, rows = self.rows(loc[0], num_priors)
            self.assume(f"every prior of every image is matched: the most its buffers can hold ({matches} matched "
                        f"priors, {rows} confidence rows for the batch of {loc[0]})",
                        "--define matched_priors=K (priors matched per image)")
        else:
            self.rows(loc[0], num_priors)  # checks the count
        return [()]

    def mining(self, p):
        """How negatives are mined: MINING_NONE, MINING_MAX_NEGATIVE or MINING_HARD_EXAMPLE."""
        return p.mining_type

    def rows(self, num, num_priors):
        """(M, K): matched priors and confidence rows of the batch."""
        p = self.fork_param("multibox_loss_param")
        per_image = self.defined("matched_priors")
        if per_image is None:
            per_image = num_priors
        else:
            self.check(per_image <= num_priors,
                       f"--define matched_priors={per_image}: there are only {num_priors} priors per image")
        matches = num * per_image
        mining = self.mining(p)
        if mining == MINING_NONE:
            return matches, num * num_priors
        if mining == MINING_MAX_NEGATIVE:
            negatives = min(int(float32(per_image * float32(p.neg_pos_ratio))), num_priors - per_image)
        else:  # HARD_EXAMPLE: sample_size rows per image, positives and negatives alike
            negatives = max(min(p.sample_size, num_priors) - per_image, 0)
        return matches, matches + num * negatives

    def inner(self, type_name, name, weight, softmax=False, setup=None):
        """One of the layers LayerSetUp creates (multibox_loss_layer.cpp:72-125), as protoaudit's;
        `setup`, where given, fills in the rest of its LayerParameter (a fork's loss parameters)."""
        from ..read.schema import load_schema

        lp = load_schema(self.ctx.schema).LayerParameter()
        lp.name, lp.type = self.lp.name + name, type_name
        lp.loss_weight.append(weight)
        if softmax:
            lp.loss_param.normalization = 3  # NONE
            lp.softmax_param.axis = 1
        if setup is not None:
            setup(lp)
        return layer_class(type_name, self.ctx.schema)(lp, self.ctx)

    def softmax_conf(self):
        """The confidence loss LayerSetUp makes for SOFTMAX: a SoftmaxWithLoss over axis 1 that does not
        normalize (multibox_loss_layer.cpp:94-113); a fork may run another loss there."""
        return self.inner("SoftmaxWithLoss", "_softmax_conf", 1.0, softmax=True)

    def touches(self, run):
        p = self.fork_param("multibox_loss_param")
        num = run.bottoms[0][0]
        num_priors = legacy_shape(self, run.bottoms[2])[2] // 4
        matches, rows = self.rows(num, num_priors)
        t = [touch.bottom(j, "data", "forward") for j in range(4)] + [touch.top(0, "data", "forward")]
        # all_match_indices_ (a std::map per image) and all_neg_indices_ (a vector<int> per image):
        # each forward fills them (a map node and the priors' match indices, the negatives' indices,
        # per image); the end of backward empties them, which keeps the two per-image arrays
        t.append(touch.buffer("all_match_indices_, all_neg_indices_", num * MATCH_LISTS_BYTES_PER_IMAGE, "forward",
                              per_sample=True, itemsize=1, device="host",
                              note=f"{num} x (std::map {STD_MAP_BYTES} + std::vector {STD_VECTOR_BYTES}) bytes"))
        if run.propagate_down[0]:  # Backward_cpu zeroes then fills the diffs asked for
            t.append(touch.bottom(0, "diff", "backward"))
        if run.propagate_down[1]:
            t.append(touch.bottom(1, "diff", "backward"))
        classes = p.num_classes
        if matches >= 1:
            l2 = p.loc_loss_type == LOC_L2
            layer = self.inner("EuclideanLoss" if l2 else "SmoothL1Loss", "_l2_loc" if l2 else "_smooth_L1_loc",
                               p.loc_weight)
            t += self.inner_touches(run, layer, "loc", [(1, 4), (1, 4)], [(1, 4 * matches)] * 2)
        if rows >= 1:
            if p.conf_loss_type == CONF_SOFTMAX:
                layer = self.softmax_conf()
                fake, real = [(1, classes), (1,)], [(rows, classes), (rows,)]
            else:
                layer = self.inner("SigmoidCrossEntropyLoss", "_logistic_conf", 1.0)
                fake, real = [(1, classes)] * 2, [(1, rows, classes)] * 2
            shared = self.mining(p) == MINING_NONE  # conf_pred_ shares the confidences' data
            t += self.inner_touches(run, layer, "conf", fake, real, pred_is_bottom=1 if shared else None)
        return t

    def inner_touches(self, run, layer, kind, fake, real, pred_is_bottom=None):
        """The inner loss layer's touches on its bottoms {kind}_pred_ and {kind}_gt_ and its top
        {kind}_loss_, named as this layer's buffers. The inner layer is set up on a fake one-row
        shape; the first batch grows its blobs (Blob::Reshape frees the old memory), so what it
        touched at setup is made again, full-sized, in the first forward. Its loss top's diff holds
        the loss weight from setup; backward runs on the predictions only."""
        runs = [Run(run.mode, run.engine, run.phase, shapes, [()], [False], [True, False], [], 0)
                for shapes in (fake, real)]
        before = {self._key(x) for x in layer.touches(runs[0]) if x.stage == "setup"}
        elements = {"bottom": [count(s) for s in real], "top": [1]}
        names = {"bottom": [f"{kind}_pred_", f"{kind}_gt_"], "top": [f"{kind}_loss_"]}
        t = [touch.buffer(f"{kind}_loss_.diff", 1, "setup", per_sample=False)]
        for x in layer.touches(runs[1]):
            stage = x.stage
            if stage == "setup" and self._key(x) not in before:
                stage = "forward"
            if x.what == "param":
                continue
            if x.what in ("bottom", "top"):
                if x.what == "bottom" and x.index == 0 and pred_is_bottom is not None:
                    # conf_pred_ shares the confidences' data (ShareData) and the end of backward
                    # gives its diff to them (ShareDiff): one buffer each
                    if x.part == "diff":
                        t.append(touch.bottom(pred_is_bottom, "diff", stage))
                    continue
                name = names[x.what][x.index] + (".diff" if x.part == "diff" else "")
                t.append(touch.buffer(name, elements[x.what][x.index], stage, per_sample=True, device=x.device))
            else:
                t.append(touch.buffer(f"{layer.lp.name[len(self.lp.name):].lstrip('_')}.{x.name}", x.elements,
                                      stage, per_sample=x.per_sample, itemsize=x.itemsize, kind=x.kind,
                                      device=x.device, note=x.note))
        return t

    @staticmethod
    def _key(x):
        return (x.what, x.index, x.part, x.name, x.elements)


# --- detection outputs -------------------------------------------------------------------------

@register("DetectionOutput", fork=FORK)
class DetectionOutput(Layer):
    """DetectionOutputLayer: decodes the boxes, runs per-class NMS and keeps the best; forward only.

    Its top is (1, 1, 1, 7) at setup (detection_output_layer.cpp:169-176) and (1, 1, kept, 7) after
    each forward (277-294; N rows when nothing is kept). kept is at most keep_top_k per image,
    else nms top_k per class, else every prior per class; protoaudit takes that most, or
    `--define detections=K` per image. The CPU code keeps no buffer; the GPU code decodes into
    bbox_preds_ (the locations' size), permutes into conf_permute_ (the confidences' size) and,
    without share_location, bbox_permute_, then reads them back on the host; its top stays on the
    host."""

    min_bottoms = 3
    max_bottoms = 4
    exact_tops = 1
    defines = {"detections": "DetectionOutput: detections kept per image"}

    def reshape(self, bottoms):
        p = self.fork_param("detection_output_param")
        self.check(p.HasField("num_classes"), "Must specify num_classes")
        self.check(p.nms_param.nms_threshold >= 0, "nms_threshold must be non negative")
        self.check(0 < p.nms_param.eta <= 1, "nms_param eta must be in (0, 1]")
        loc, conf, num_priors = predictions(self, p, bottoms)
        if self.defined("detections") is None:
            self.assume(f"it keeps the most detections it can: {self.kept(loc[0], num_priors)} for the batch of "
                        f"{loc[0]}", "--define detections=K (detections kept per image)")
        return [(1, 1, 1, 7)]

    def kept(self, num, num_priors):
        """Rows of the top after a forward: detections kept in the batch (N when none)."""
        p = self.fork_param("detection_output_param")
        per_image = self.defined("detections")
        if per_image is None:
            classes = p.num_classes - (1 if 0 <= p.background_label_id < p.num_classes else 0)
            per_class = min(p.nms_param.top_k, num_priors) if p.nms_param.HasField("top_k") else num_priors
            per_image = classes * per_class
            if p.keep_top_k > -1:
                per_image = min(per_image, p.keep_top_k)
        return max(num * per_image, num)

    def touches(self, run):
        p = self.fork_param("detection_output_param")
        num = run.bottoms[0][0]
        num_priors = legacy_shape(self, run.bottoms[2])[2] // 4
        gpu = run.mode == "gpu"
        device = "host" if gpu else "device"
        rows = self.kept(num, num_priors)
        t = [touch.bottom(j, "data", "forward") for j in range(3)]
        t.append(touch.top(0, "data", "forward", device=device))
        if rows > 1:
            t.append(touch.buffer("top (kept detections)", (rows - 1) * 7, "forward", per_sample=True, device=device,
                                  note=f"the top grows to 1x1x{rows}x7 (7 floats per detection kept)"))
        if gpu:
            t += [touch.buffer("bbox_preds_", count(run.bottoms[0]), "forward", per_sample=True),
                  touch.buffer("conf_permute_", count(run.bottoms[1]), "forward", per_sample=True)]
            if not p.share_location:
                t.append(touch.buffer("bbox_permute_", count(run.bottoms[0]), "forward", per_sample=True))
        return t


@register("DetectionEvaluate", fork=FORK)
class DetectionEvaluate(Layer):
    """DetectionEvaluateLayer: true and false positives of the detections (bottom 0, (1, 1, D, 7))
    against the ground truth (bottom 1, (1, 1, boxes, 8)); CPU only, forward only.

    Its Reshape reads the detections' data to count the valid rows (detection_evaluate_layer.cpp:
    61-75): at setup they are still zero, so every row counts, and the top is
    (1, 1, classes + D, 5) (classes less the background). Later forwards reshape it to the valid
    detections of the batch: growth by 5 floats per detection beyond D, which protoaudit leaves
    out (at most keep_top_k per image of the DetectionOutput that feeds it)."""

    exact_bottoms = 2
    exact_tops = 1

    def reshape(self, bottoms):
        p = self.fork_param("detection_evaluate_param")
        self.check(p.HasField("num_classes"), "Must provide num_classes")
        self.check(p.overlap_threshold > 0, "overlap_threshold must be positive")
        det, gt = (legacy_shape(self, b) for b in bottoms)
        self.check(det[:2] == (1, 1) and det[3] == 7, f"the detections {tuple(bottoms[0])} must be (1, 1, D, 7)")
        self.check(gt[:2] == (1, 1) and gt[3] == 8, f"the ground truth {tuple(bottoms[1])} must be (1, 1, boxes, 8)")
        classes = p.num_classes if p.background_label_id == -1 else p.num_classes - 1
        return [(1, 1, classes + det[2], 5)]

    def touches(self, run):
        """Reshape reads the detections at setup; forward reads the ground truth and writes the
        top on the host."""
        device = "host" if run.mode == "gpu" else "device"
        return [touch.bottom(0, "data", "setup", device=device), touch.bottom(1, "data", "forward", device=device),
                touch.top(0, "data", "forward", device=device)]

