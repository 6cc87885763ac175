"""ARL's layers for BVLC Caffe (ZhiwenShao/ARL 512c226: Shao, Liu, Cai, Wu and Ma's facial action unit
detection using attention and relation learning, IEEE Transactions on Affective Computing 2019), as
their sources shape them.

The repository is not a Caffe: its README has include/*.hpp and src/*.cpp/.cu merged into BVLC Caffe
with src/caffe.proto's additions (proto/forks/arl.proto). Its code "is mainly borrowed from JAA-Net"
(README.md), the fork jaanet (protoaudit.layers.jaanet), of which it keeps, unchanged, these:

- combination_layer.* and division_layer.* are ZhiwenShao/JAANet 0b8e87e's byte for byte: JAA-Net's
  Division and Combination, carried.
- euclidean_loss_layer.hpp, .cpp and .cu are JAANet's but for EuclideanLoss5, replaced by EuclideanLoss6,
  and three commented-out lines before EuclideanLoss4's weighting (cpp:155, cu:122 here): EuclideanLoss2
  to 4 are carried (their references are to JAANet's lines; EuclideanLoss4's cpp and cu lines after the
  removed comments are 3 lower here). Its EuclideanLoss is BVLC's.

It has none of JAA-Net's other layers (AlignDataTransform, AUMaskBasedLand, DiceCoefLoss, EuclideanLoss5)
nor its Data and SoftmaxWithLoss: a net of ARL's Caffe is read with BVLC's Data (no get_mirror_crop) and
SoftmaxWithLoss. New types: MultiStageMeanfieldAU3 (CRF-RNN's MultiStageMeanfield with image features
of any number of channels, protoaudit.layers.crfrnn), L2Norm, CosineSimilarityLoss, EuclideanLoss6;
changed: SigmoidCrossEntropyLoss (a weight bottom).

The datasets are the user's: tools/convert_data.cpp (JAANet's byte for byte) stores each line of a label
file as a Datum of channels 1, height data_num, width 1 (convert_data.cpp:82-89), and prep/face_transform.cpp
writes 200 x 200 colour faces (:16, :63) for Caffe's convert_imageset. The sources the repository's nets
name are taken, by name, for those databases (database()), said as an assumption.

File:line references are to that commit's include/, src/, tools/ and prep/ files.
"""
import os
import re

from . import crfrnn, jaanet, touch
from .base import carry, count, legacy_shape, register
from .activations import Neuron
from .data import Data as BvlcData
from .losses import LabelWeights, Loss
from .losses import SigmoidCrossEntropyLoss as BvlcSigmoidCrossEntropyLoss
from ..read.datasets.examples import Example

FORK = "arl"

carry(__name__, FORK, jaanet.Division, jaanet.Combination, jaanet.EuclideanLoss2, jaanet.EuclideanLoss3,
      jaanet.EuclideanLoss4)

_CONVERT = "tools/convert_data.cpp (channels 1, height data_num, width 1: cpp:82-84)"
# The databases the repository's nets name, by the last part of their path. AU detection
# (model/BP4D_train_val.prototxt): BP4D partitions combined by prep/combine2parts.m, their labels 12 AU
# occurrences a line (JAA-Net's data/examples/*_AUoccur.txt, the partitions ARL's README points to; the
# net's concat_fc of au1_fc to au12_fc, whose count the SigmoidCrossEntropyLoss CHECKs against the label's,
# sigmoid_cross_entropy_loss_layer.cpp:41) and their weights as many (prep/write_AU_weight.m, AU_weight one
# a column of the AUoccur file). AU intensity (model/FERA2015_train_val_intensity.prototxt): FERA 2015's 5
# AUs a line (the net's concat_fc of its five branches au4, au6, au7, au8 and au10_fc, whose count(1)
# EuclideanLoss6 CHECKs against the label's, euclidean_loss_layer.cpp:184), the weights as many
# (write_AU_weight.m's intensity part).
_DATABASE = re.compile(r"^BP4D_(combine_\d_\d|train|train_intensity)(?:_(AUoccur|weight))?_ldb$")


def database(source):
    """The Example an ARL database path names by its last part, or None."""
    name = os.path.basename(os.path.normpath(source.replace("\\", "/"))) if source else ""
    m = _DATABASE.match(name)
    if m is None or (m.group(1) == "train_intensity" and m.group(2) is None) \
            or (m.group(1) == "train" and m.group(2) is not None):
        return None  # the intensity databases are labels and weights; the faces' is BP4D_train_ldb
    if m.group(2) is None:
        return Example((3, 200, 200), "prep/face_transform.cpp's 200 x 200 colour faces (img_size, cpp:16; "
                                      "CV_LOAD_IMAGE_COLOR, cpp:63) through Caffe's convert_imageset")
    values = 5 if m.group(1) == "train_intensity" else 12
    what = "FERA 2015's 5 AU intensities" if values == 5 else "BP4D's 12 AU occurrences"
    if m.group(2) == "weight":
        what = f"prep/write_AU_weight.m's weights, one for each of {what}"
    return Example((1, values, 1), f"{_CONVERT} of lines of {values} values: {what}")


@register("Data", fork=FORK)
class Data(BvlcData):
    """DataLayer: BVLC's (the repository ships no data_layer.cpp). A source named as the repository's
    databases is taken for them (database())."""

    def of_example(self, source, batch, channels):
        known = database(source)
        shape = None if known is None else self.fitted(known.shape, channels)
        if shape is None:
            return super().of_example(source, batch, channels)
        self.assume_known(source, f"by its name it is the database ARL's README makes with {known.made_by}, "
                                  f"records {'x'.join(map(str, known.shape))}", [(self.lp.top[0], (batch, *shape))])
        return shape, f"assumed: ARL's database ({known.made_by})"


@register("MultiStageMeanfieldAU3", fork=FORK)
class MultiStageMeanfieldAU3(crfrnn.MultiStageMeanfield):
    """MultiStageMeanfieldAU3Layer: CRF-RNN's MultiStageMeanfield (protoaudit.layers.crfrnn, whose
    description holds here) with its own lines, and one change: the bilateral lattice's features are
    all of bottom 2's channels, feature_dim_ = bottom[2]->channels() (multi_stage_meanfield_au3.cpp:48),
    not an image's 3. Three bottoms, one top (hpp:32-33): the unaries, the first softmax input and the
    features.

    LayerSetUp (cpp:29-154), with the legacy accessors of bottom 0 (N, C, H, W; P = H x W): CHECK
    num_iterations > 1 (cpp:36); the top (N, C, H, W) (cpp:52); three parameters of (1, 1, C, C)
    (cpp:59-92), the first two read from spatial.par and bilateral.par in the folder Caffe runs in
    (cpp:70-82, CHECKed); the spatial lattice (2 dimensions, P points, cpp:95-98, its kernel a stack
    array of 2P floats, not counted) and spatial_norm_ (P) from norm_feed_ (P) (cpp:101-108);
    bilateral_kernel_buffer_ of (2 + feature_dim_) x P floats and bilateral_norms_ (N x P)
    (cpp:112-113); the SplitLayer of bottom 0 into num_iterations tops (cpp:117-130);
    num_iterations - 1 blobs of (N, C, H, W) (cpp:134-137); num_iterations MeanfieldIterations
    (cpp:140-149; meanfield_iteration.cpp:29-85, its blobs as CRF-RNN's, :49-58). Reshape does nothing
    (cpp:157-160).

    Forward (cpp:173-201): per image a bilateral lattice of 2 + feature_dim_ dimensions on P points
    (cpp:183-185), each pixel reading feature_dim_ values of bottom 2 from its image's offset, a plane
    of P apart (cpp:243-245, on the host); then the iterations (meanfield_iteration.cpp:108-167).
    Backward (cpp:207-233) as CRF-RNN's. There is no .cu: GPU mode runs this CPU code, the inner Split,
    Softmax and Eltwise on the GPU. The lattices are modified_permutohedral.cpp's, whose sizes are
    CRF-RNN's (:122-126, :264-267; hpp:19-23)."""

    param_name = "multi_stage_meanfield_au3_param"

    def features(self, bottoms):
        return legacy_shape(self, bottoms[2])[1]  # feature_dim_, cpp:48

    def reshape(self, bottoms):
        p = self.fork_param(self.param_name)
        self.check(p.num_iterations > 1, f"num_iterations is {p.num_iterations}: Caffe CHECKs it is greater than 1 "
                   "(multi_stage_meanfield_au3.cpp:36)", fix="give num_iterations: 2 or more (ARL's nets give 5)")
        n, c, h, w = legacy_shape(self, bottoms[0])
        fn, fd, fh, fw = legacy_shape(self, bottoms[2])
        # image n reads feature_dim_ planes of P values from offset(n) = n x fd x fh x fw (cpp:243-245)
        last = (n - 1) * fd * fh * fw + fd * h * w if n and fd else 0
        self.check(last <= fn * fd * fh * fw,
                   f"bottom 2 {tuple(bottoms[2])} is read as {fd} feature planes of the unaries' {h} x {w} pixels "
                   f"for each of the {n} images, up to element {last:,} (multi_stage_meanfield_au3.cpp:243-245): it "
                   f"holds {fn * fd * fh * fw:,}",
                   fix="give features of the unaries' height and width as the third bottom")
        if not len(self.lp.blobs):
            self.assume("Caffe's LayerSetUp reads the initial kernel weights from the files spatial.par and "
                        f"bilateral.par ({c} values each) in the folder it runs in, and stops where they are not there "
                        "(multi_stage_meanfield_au3.cpp:70-82); the repository ships both in model/, where "
                        "train_net.sh runs Caffe: protoaudit takes them as there",
                        "put spatial.par and bilateral.par where Caffe runs")
        return [(n, c, h, w)]


@register("L2Norm", fork=FORK)
class L2Norm(Neuron):
    """L2NormLayer: a NeuronLayer (one bottom, one top of its shape, lp_norm_layer.hpp:18, :33-34;
    cpp:20), each item scaled to unit L2 norm; in place allowed (its CHECK commented out, cpp:13-14).
    Reshape allocates inv_lpnorm_, num = shape(0) floats on the host, with new[] (cpp:21-22), and
    Layer::Forward calls Reshape every pass, so each pass leaks the previous one (the destructor frees
    only the last, hpp:22-26): one is counted, the growth, num floats a pass, is not. The GPU forward
    writes each item's norm into it through caffe_gpu_dot's host result (cu:18-27); the backward, where
    bottom 0 needs it (cpp:49; cu:33), also rescales the top's diff in place (cpp:64; cu:48), memory it
    reads anyway."""

    def touches(self, run):
        num = run.bottoms[0][0] if run.bottoms[0] else 1
        t = super().touches(run)
        t.append(touch.buffer("inv_lpnorm_", num, "setup", per_sample=True, device="host",
                              note=f"{num} floats, new[] at every Reshape (lp_norm_layer.cpp:22)"))
        return t


@register("CosineSimilarityLoss", fork=FORK)
class CosineSimilarityLoss(Loss):
    """CosineSimilarityLossLayer: BVLC's LossLayer (two bottoms of the same num, a scalar top) whose
    bottoms have the same count(1) (cosine_similarity_loss_layer.cpp:12); either may take a gradient
    (AllowForceBackward, hpp:53-55), the backward writing each one's diff that needs it from the other's
    data (cpp:39-47; cu:33-42). No buffer: the GPU forward sums caffe_gpu_dot's host results (cu:17-22)."""

    label_either = True

    def allow_force_backward(self, bottom_index):
        return True

    def check_bottoms(self, bottoms):
        self.check(count(bottoms[0], 1) == count(bottoms[1], 1),
                   f"inputs must have the same dimension (cosine_similarity_loss_layer.cpp:12): {bottoms[0]} vs "
                   f"{bottoms[1]}")

    def label_for(self, prediction):
        return tuple(prediction)


@register("EuclideanLoss6", fork=FORK)
class EuclideanLoss6(jaanet._EuclideanLossN):
    """EuclideanLoss6Layer: BVLC's diff_ (bottom 0's shape, euclidean_loss_layer.cpp:186) and CHECK on
    count(1) (cpp:184), three bottoms (hpp:312), either of the first two may take a gradient
    (hpp:317-319). Forward weights diff_ element by element on the host by bottom 2 and zeroes it
    where bottom 1 is 9, the missing label (cpp:199-208); in GPU mode too (cu:158-167), so bottoms 1 and
    2 and diff_ are read on the host and diff_ has a host copy. Bottom 2 is read at every index below
    bottom 0's count (cpp:205; cu:164), which no CHECK ties to its own count."""

    exact_bottoms = 3
    extra = (1, 2)
    host_diff = True

    def check_bottoms(self, bottoms):
        super().check_bottoms(bottoms)
        self.check(count(bottoms[2]) >= count(bottoms[0]),
                   f"bottom 2 {tuple(bottoms[2])} has {count(bottoms[2]):,} weights, but the forward reads one for each "
                   f"of bottom 0's {count(bottoms[0]):,} values (euclidean_loss_layer.cpp:205, cu:164)",
                   fix="give one weight a predicted value as bottom 2")


@register("SigmoidCrossEntropyLoss", fork=FORK)
class SigmoidCrossEntropyLoss(LabelWeights, BvlcSigmoidCrossEntropyLoss):
    """SigmoidCrossEntropyLossLayer: BVLC's of November 2016 (ignore_label, normalization) with an optional
    third bottom, one weight a label (2 or 3 bottoms, sigmoid_cross_entropy_loss_layer.hpp:58-60; CHECK_EQ
    of its count with the label's, cpp:46-48). Reshape keeps bottom 2's host data pointer (cpp:50), which
    the CPU loops read (cpp:107, :135) and, in GPU mode, the kernels (cu:67, :103; the backward's only
    where ignore_label is set, cu:100-104): a host pointer dereferenced on the device, which works where
    bottom 2 is a data layer's top, pointing into its pinned prefetch batch (mapped under unified
    addressing). Never written."""

    weights_check = "sigmoid_cross_entropy_loss_layer.cpp:47"
