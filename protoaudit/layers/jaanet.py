"""JAA-Net's layers for BVLC Caffe (ZhiwenShao/JAANet 0b8e87e: Shao, Liu, Cai and Ma's joint facial action
unit detection and face alignment, ECCV 2018), as their sources shape them.

The repository is not a Caffe: its README has include/*.hpp and src/*.cpp/.cu merged into BVLC Caffe
with src/caffe.proto's additions (proto/forks/jaanet.proto). Its data_layer.cpp is BVLC's of 2017
(Skip(), offset_, no DataReader) but for the label, so the Caffe is BVLC 1.0 or later: the rest of a
net is BVLC's layers. New types: AlignDataTransform, AUMaskBasedLand, Division, Combination,
DiceCoefLoss, EuclideanLoss2 to EuclideanLoss5; changed: Data (get_mirror_crop), SoftmaxWithLoss (a
weight bottom); its EuclideanLoss is BVLC's. Division, Combination, AlignDataTransform and
AUMaskBasedLand run their CPU code in GPU mode (their .cu call Forward_cpu and Backward_cpu), so each
blob they read or write gets a host copy.

The datasets are the user's: tools/convert_data.cpp stores each line of a label file as a Datum of
channels 1, height data_num, width 1 (convert_data.cpp:82-89), and prep/face_transform.cpp writes
200 x 200 colour faces (:16, :63) for Caffe's convert_imageset. The sources the repository's
train net names (model/BP4D_train_val.prototxt) are taken, by name, for those databases, their
values per line those of data/examples/ and data/reflect_49.txt, said as an assumption.

File:line references are to that commit's include/, src/, tools/ and prep/ files.
"""
import math
import os
import re

from . import touch
from .base import Layer, count, float32, legacy_shape, register
from .data import Data as BvlcData
from .drml import _check_inside, _coords, _int, _written, host_paste_touches
from .losses import EuclideanLoss as BvlcEuclideanLoss
from .losses import LabelWeights, Loss
from .losses import SoftmaxWithLoss as BvlcSoftmaxWithLoss
from ..read.datasets.examples import Example

FORK = "jaanet"

_CONVERT = "tools/convert_data.cpp (channels 1, height data_num, width 1: cpp:82-84)"
# The databases model/BP4D_train_val.prototxt names, by the last part of their path: BP4D (or DISFA)
# partitions combined by prep/combine2parts.m, converted as the README says. data_num is the values per
# line of the repository's files: 12 AU occurrences and 12 AU weights (data/examples/*_AUoccur.txt,
# *_weight.txt), 98 landmark coordinates (49 points, *_land.txt), 1 inter-ocular distance
# (*_biocular.txt), 49 indices (data/reflect_49.txt).
_LABEL_VALUES = {"AUoccur": 12, "land": 98, "biocular": 1, "weight": 12}
_DATABASE = re.compile(r"^BP4D_combine_\d_\d(?:_(AUoccur|land|biocular|weight))?_ldb$")


def database(source):
    """The Example a JAA-Net database path names by its last part, or None."""
    name = os.path.basename(os.path.normpath(source.replace("\\", "/"))) if source else ""
    if name == "reflect_49_ldb":
        return Example((1, 49, 1), f"{_CONVERT} of data/reflect_49.txt, 49 values")
    m = _DATABASE.match(name)
    if m is None:
        return None
    if m.group(1) is None:
        return Example((3, 200, 200), "prep/face_transform.cpp's 200 x 200 colour faces (img_size, cpp:16; "
                                      "CV_LOAD_IMAGE_COLOR, cpp:63) through Caffe's convert_imageset")
    values = _LABEL_VALUES[m.group(1)]
    return Example((1, values, 1), f"{_CONVERT} of data/examples/BP4D_combine_1_2_{m.group(1)}.txt's lines, "
                                   f"{values} value{'s' if values > 1 else ''}")


@register("Data", fork=FORK)
class Data(BvlcData):
    """DataLayer: BVLC's, but with data_param.get_mirror_crop its second top is (batch, 4, 1, 1), every
    prefetch batch's label too (data_layer.cpp:51-57), load_batch filling it from the transformer's
    mirror_crop_para_ (do_mirror, crop_size, h_off, w_off per image, data_transformer.cpp:57-58,
    100-101; cpp:131-136); else the label (batch,) (cpp:60-64). mirror_crop_para_ is cleared only
    in the transformer's constructor (data_transformer.cpp:39) and grows by 4 ints (16 bytes) an
    image for the layer's life, its first batch's values the ones copied: that growth, with the
    iterations run, is not counted. A source named as the repository's databases is taken for them
    (database())."""

    def label_shape(self, batch):
        return (batch, 4, 1, 1) if self.lp.data_param.get_mirror_crop else (batch,)

    @property
    def label_origin(self):
        if self.lp.data_param.get_mirror_crop:
            return "the layer's batch size and get_mirror_crop: 4 values an image (data_layer.cpp:51-57)"
        return BvlcData.label_origin

    def of_example(self, source, batch, channels):
        known = database(source)
        shape = None if known is None else self.fitted(known.shape, channels)
        if shape is None:
            return super().of_example(source, batch, channels)
        self.assume_known(source, f"by its name it is the database JAA-Net's README makes with {known.made_by}, "
                                  f"records {'x'.join(map(str, known.shape))}", [(self.lp.top[0], (batch, *shape))])
        return shape, f"assumed: JAA-Net's database ({known.made_by})"

    def reader_touches(self, run):
        t = super().reader_touches(run)
        if self.lp.data_param.get_mirror_crop:
            n = 4 * run.tops[0][0]
            t.append(touch.host("mirror_crop_para_", 4 * n, f"{n} ints: the first batch's (data_transformer.cpp:"
                                                              "57-58, 100-101), growing by 16 bytes an image"))
        return t


@register("AlignDataTransform", fork=FORK)
class AlignDataTransform(Layer):
    """AlignDataTransformLayer: the landmarks (bottom 0) moved by each image's crop offsets and mirrored,
    then reordered by the reflection indices (bottom 2), from the mirror_crop_para (bottom 1, 4 values
    an image) (align_data_transform_layer.cpp:35-53). Three bottoms (hpp:18); the top is bottom 0's
    (num, channels, height, width) (cpp:20-21). num_ and dim_ are LayerSetUp's (cpp:11-12); each image
    reads 4 values of bottom 1 and dim_ / 2 indices of bottom 2, which must lie in 1..dim_ / 2 (cpp:45).
    GPU mode runs the CPU code (cu:10, :18). Backward, where bottom 0 needs it, writes its host diff from
    the top's host diff (cpp:60-86). A vector<Dtype>(dim_) lives for each pass only."""

    exact_bottoms = 3
    exact_tops = 1

    def reshape(self, bottoms):
        shape = legacy_shape(self, bottoms[0])
        num = shape[0]
        dim = count(bottoms[0]) // num if num else 0
        self.check(count(bottoms[1]) >= 4 * num, f"bottom 1 {tuple(bottoms[1])} has {count(bottoms[1]):,} values but "
                   f"Forward reads 4 an image, {4 * num:,} for bottom 0's {num} (align_data_transform_layer.cpp:37-39)",
                   fix="give the data layer's mirror_crop_para (get_mirror_crop: true) as bottom 1")
        self.check(count(bottoms[2]) >= dim // 2, f"bottom 2 {tuple(bottoms[2])} has {count(bottoms[2]):,} values but "
                   f"a mirrored image reads {dim // 2} indices, one a point (cpp:45)",
                   fix="give one reflection index a landmark as bottom 2")
        return [shape]

    def touches(self, run):
        t = [touch.bottom(j, "data", "forward", device="host") for j in range(3)]
        t += _written(touch.top, 0, "data", "forward")
        if run.propagate_down[0]:  # cpp:60
            t += [touch.top(0, "diff", "backward", device="host")]
            t += _written(touch.bottom, 0, "diff", "backward")
        return t


@register("AUMaskBasedLand", fork=FORK)
class AUMaskBasedLand(Layer):
    """AUMaskBasedLandLayer: from the landmarks (bottom 0) the attention maps of 12 AUs (AU_num_, hardwired,
    au_mask_based_land_layer.cpp:18) and their maximum: 13 tops exactly, one bottom (hpp:18-19), each
    (num, 1, mask_size, mask_size), mask_size = round(img_size x spatial_scale) (cpp:23, :33-34), num
    LayerSetUp's (cpp:21). Reshape fills every top's host data with fill_value (cpp:36); Forward writes
    them on the host, reading landmark indices up to 45 x 2 + 1 = 91 of each image (cpp:51-134). GPU
    mode runs the CPU code (cu:10, :18); Backward does nothing (cpp:169). No buffer. The tops' device
    copies, which the layers after it read, are counted from setup with the host's (drml._written)."""

    exact_bottoms = 1
    exact_tops = 13

    def reshape(self, bottoms):
        p = self.fork_param("au_mask_based_land_param")
        num = legacy_shape(self, bottoms[0])[0]
        dim = count(bottoms[0]) // num if num else 0
        self.check(dim > 91, f"bottom 0 {tuple(bottoms[0])} has {dim} values an image, but Forward reads landmark "
                   "values up to index 91 (point 45's y, au_mask_based_land_layer.cpp:105)",
                   fix="give the 49 landmarks' 98 coordinates an image")
        size = math.floor(float32(float32(p.img_size) * float32(p.spatial_scale)) + 0.5)  # float round, cpp:23
        return [(num, 1, size, size)] * 13

    def touches(self, run):
        t = [x for j in range(13) for x in _written(touch.top, j, "data", "setup")]  # Reshape's caffe_set, cpp:36
        t += [touch.bottom(0, "data", "forward", device="host")]
        return t + [touch.top(j, "data", "forward", device="host") for j in range(13)]


@register("Division", fork=FORK)
class Division(Layer):
    """DivisionLayer: one bottom (hpp:23), each of its num_ = top.size() tops (division_layer.cpp:22) a
    height x width box of it at (xcoord[n], ycoord[n]) (cpp:62-63), shaped (num, channels, height, width)
    (cpp:42-44). Forward copies each box row by row on the host (cpp:51-80), index b*C*H*W + c*H*W +
    h*W + w (cpp:70); Backward, where the bottom needs it (cpp:88), copies each top's host diff into
    the box of the bottom's host diff, the rest never written (cpp:90-114). GPU mode runs the CPU code
    (cu:15, :25). No buffer."""

    exact_bottoms = 1
    min_tops = 1

    def reshape(self, bottoms):
        n, c, h, w = legacy_shape(self, bottoms[0])
        p = self.fork_param("division_param")
        height, width = _int(p.height), _int(p.width)
        for x, y in _coords(self, p, len(self.lp.top)):
            if n and c and height > 0 and width > 0:
                _check_inside(self, (y * w + x, ((n - 1) * c + c - 1) * h * w + (y + height - 1) * w + x + width - 1),
                              n * c * h * w, f"box at x {x}, y {y} of {width}x{height}",
                              f"the bottom {n}x{c}x{h}x{w}, division_layer.cpp:70")
        return [(n, c, height, width)] * len(self.lp.top)

    def touches(self, run):
        tops = range(len(run.tops))
        t = [touch.bottom(0, "data", "forward", device="host")]
        t += [x for j in tops for x in _written(touch.top, j, "data", "forward")]
        if run.propagate_down[0]:
            t += [touch.top(j, "diff", "backward", device="host") for j in tops]
            t += _written(touch.bottom, 0, "diff", "backward")
        return t


@register("Combination", fork=FORK)
class Combination(Layer):
    """CombinationLayer: num_ = bottom.size() bottoms (combination_layer.cpp:14), bottom n pasted at
    (xcoord[n], ycoord[n]) into one top (num, channels of bottom 0, ycoord[last] + the last bottom's
    height, xcoord[last] + its width) (cpp:28-29, :37-38), its size fixed at LayerSetUp. Each bottom is
    read with its own height and width and bottom 0's channels (cpp:64-65). Forward and Backward run
    on the host (cpp:44-111; GPU mode calls them, cu:15, :24); Backward returns unless bottom 0 needs
    a diff (cpp:81) and then writes every bottom's. No buffer."""

    min_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        k = len(bottoms)
        shapes = [legacy_shape(self, b) for b in bottoms]
        coords = _coords(self, self.fork_param("combination_param"), k)
        n, c = shapes[0][:2]
        height, width = coords[-1][1] + shapes[-1][2], coords[-1][0] + shapes[-1][3]
        top = n * c * height * width
        for i, ((x, y), s) in enumerate(zip(coords, shapes)):
            bh, bw = s[2], s[3]
            if not (n and c and bh and bw):
                continue
            _check_inside(self, (0, ((n - 1) * c + c - 1) * bh * bw + bh * bw - 1), count(bottoms[i]), f"bottom {i}",
                          f"bottom {i} read with bottom 0's num {n} and channels {c}, combination_layer.cpp:64")
            last = ((n - 1) * c + c - 1) * height * width + (y + bh - 1) * width + x + bw - 1
            _check_inside(self, (y * width + x, last), top, f"bottom {i} pasted at x {x}, y {y}",
                          f"the top {n}x{c}x{height}x{width}, combination_layer.cpp:65")
        return [(n, c, height, width)]

    def touches(self, run):
        return host_paste_touches(run)


@register("DiceCoefLoss", fork=FORK)
class DiceCoefLoss(Loss):
    """DiceCoefLossLayer: BVLC's LossLayer (two bottoms, a scalar top) whose bottoms have the same
    count(1) (dice_coef_loss_layer.cpp:12). Reshape sizes multiplier_ (count(1)), result_ and
    result_tmp_ (num) and tmp_ (bottom 0's shape) (cpp:17-22) and fills the first three on the host
    (cpp:24-26); the GPU forward uses all four on the device (cu:13-29), the CPU forward on the host.
    Backward writes each bottom's diff that needs it (cu:50-60)."""

    label_either = True

    def allow_force_backward(self, bottom_index):
        return True  # hpp: AllowForceBackward for either bottom

    def check_bottoms(self, bottoms):
        self.check(count(bottoms[0], 1) == count(bottoms[1], 1),
                   f"inputs must have the same dimension (dice_coef_loss_layer.cpp:12): {bottoms[0]} vs {bottoms[1]}")

    def label_for(self, prediction):
        return tuple(prediction)

    def touches(self, run):
        num, dim = run.bottoms[0][0], count(run.bottoms[0], 1)
        t = super().touches(run)
        small = [("multiplier_", dim, False), ("result_", num, True), ("result_tmp_", num, True)]
        for name, n, per in small:
            t.append(touch.buffer(name + " (host)", n, "setup", per_sample=per, device="host"))
            if run.mode == "gpu":
                t.append(touch.buffer(name, n, "forward", per_sample=per))
        t.append(touch.buffer("tmp_", count(run.bottoms[0]), "forward", per_sample=True))
        return t


class _EuclideanLossN(BvlcEuclideanLoss):
    """EuclideanLoss2 to 5 (euclidean_loss_layer.hpp:105-301): BVLC's EuclideanLoss (its diff_, its
    CHECK on count(1), cpp:50-56 and alike) with a third or fourth bottom read on the host, never
    written."""

    extra = ()  # the host-read bottoms past the first two, and each one's reading line
    host_diff = False  # the GPU forward weights diff_ element by element on the host

    def touches(self, run):
        t = super().touches(run)
        t += [touch.bottom(j, "data", "forward", device="host") for j in self.extra]
        if self.host_diff and run.mode == "gpu":
            t.append(touch.buffer("diff_ (host)", count(run.bottoms[0]), "forward", per_sample=True, device="host"))
        return t


@register("EuclideanLoss2", fork=FORK)
class EuclideanLoss2(_EuclideanLossN):
    """EuclideanLoss2Layer: BVLC's loss divided by bottom 2's first value, the inter-ocular distance
    (euclidean_loss_layer.cpp:68, :78; cu:52, :62, its host copy): three bottoms (hpp:114)."""

    exact_bottoms = 3
    extra = (2,)


@register("EuclideanLoss3", fork=FORK)
class EuclideanLoss3(_EuclideanLossN):
    """EuclideanLoss3Layer: EuclideanLoss2 with diff_ weighted by bottom 3 on the host (cpp:108-111; in GPU
    mode too, cu:84-86, so diff_ has a host copy): four bottoms (hpp:180)."""

    exact_bottoms = 4
    extra = (2, 3)
    host_diff = True


@register("EuclideanLoss4", fork=FORK)
class EuclideanLoss4(_EuclideanLossN):
    """EuclideanLoss4Layer: BVLC's with diff_ weighted by bottom 2 on the host (cpp:153-159; cu:121-126,
    diff_'s host copy): three bottoms (hpp:246)."""

    exact_bottoms = 3
    extra = (2,)
    host_diff = True


@register("EuclideanLoss5", fork=FORK)
class EuclideanLoss5(_EuclideanLossN):
    """EuclideanLoss5Layer: BVLC's with diff_ weighted on the host by bottom 2, 6 weights a value, read at
    j*6 + round(label*5) (cpp:203-212; cu:160-168, reading bottom 1 and diff_ on the host too): three
    bottoms (hpp:312) and bottom 2's count(1) six times bottom 0's (cpp:189)."""

    exact_bottoms = 3
    extra = (1, 2)
    host_diff = True

    def check_bottoms(self, bottoms):
        super().check_bottoms(bottoms)
        self.check(count(bottoms[0], 1) * 6 == count(bottoms[2], 1),
                   f"weights must have the dimension of all intensities (euclidean_loss_layer.cpp:189): bottom 2 "
                   f"{bottoms[2]} must have 6 x {count(bottoms[0], 1)} values an item")


@register("SoftmaxWithLoss", fork=FORK)
class SoftmaxWithLoss(LabelWeights, BvlcSoftmaxWithLoss):
    """SoftmaxWithLossLayer: BVLC's with an optional third bottom, one weight a label (2 or 3 bottoms,
    softmax_loss_layer.hpp:66-68; CHECK_EQ of its count with the label's, cpp:57-59). Reshape keeps
    bottom 2's host data pointer (cpp:61), which both the CPU loops (cpp:115-117, :155-158) and, in GPU
    mode, the kernels read (cu:26-27, :93-95): a host pointer dereferenced on the device, which works
    where bottom 2 is a data layer's top, pointing into its pinned prefetch batch (mapped under
    unified addressing). Never written."""

    weights_check = "softmax_loss_layer.cpp:58"

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1  # BVLC's LossLayer
