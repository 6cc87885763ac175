"""GGL's Caffe (liu-xb/GGL 2ea1508, caffe/): a BVLC Caffe of mid-2016 with the layers of its vehicle
re-identification net (Group-Group Loss), as its sources shape them.

The layers its train.prototxt uses that BVLC's lacks: NormalizationL2 (each row scaled to unit L2 norm),
VarLoss (the spread of each identity's features around their mean) and SetLoss2 (a hinge between the
means of the identities of a batch). The rest is BVLC's of its time (src/caffe/layers/*.cpp are BVLC
c62e06b's files but for net.cpp's logging): its BasePrefetchingDataLayer keeps PREFETCH_COUNT = 3 batches
of data_ and label_ and copies them into the tops (base_data_layer.hpp:49-79), as the SSD fork's; its
Accuracy has CPU code only (no accuracy_layer.cu); its BatchNorm keeps the file's lr_mult for its three
statistics (no ParamSpec of lr_mult 0 added, batch_norm_layer.cpp:10-36). The repository's other layers
(SetLoss, the similarity losses, LocalFullyConnected, ...) are not in its net and have no rule here.

Both losses find the identities in the labels: im_per_cat_ is the number of leading images whose label is
the first image's (var_loss_layer.cpp:44-56, set_loss2_layer.cpp:44-59), so the batch must hold each
identity's images one after another. How many that is only the data says: protoaudit takes one image per
identity (the most identities, the most memory) unless `--define images_per_id=K`.

File:line references are to caffe/src/caffe/layers/ and caffe/include/caffe/layers/ at that commit.
"""
from . import enet, normalization, ssd, touch
from .base import Layer, carry, count, legacy_shape, register
from .losses import Loss

FORK = "ggl"
DEFINES = {"images_per_id": "VarLoss and SetLoss2: images of each identity, one after another in the batch"}

carry(__name__, FORK, ssd.SSDData, ssd.SSDImageData, ssd.SSDWindowData, enet.Accuracy)


@register("BatchNorm", fork=FORK)
class BatchNorm(normalization.BatchNorm):
    """BVLC's BatchNormLayer of mid-2016 (batch_norm_layer.cpp, .cu): the same buffers, but LayerSetUp adds
    no ParamSpec of lr_mult 0 for the mean, variance and factor (cpp:10-36): they keep the file's lr_mult, 1
    where it gives none, and the solver updates them as weights."""

    def param_shapes(self, bottoms):
        channels = bottoms[0][1]
        return [(channels,), (channels,), (1,)]

    def param_specs(self):
        return self.lp.param


@register("NormalizationL2", fork=FORK)
class NormalizationL2(Layer):
    """NormalizationL2Layer, a NeuronLayer (normalization_l2_layer.hpp:17-25): one bottom, one top of its
    shape (in place allowed), each of its num() rows divided by its L2 norm. LayerSetUp shapes squared_ like
    the bottom (cpp:16). Forward_gpu writes the squares there and the top (.cu:18-29); Backward_gpu reads the
    top's data and diff and the bottom, and writes the bottom's diff whatever propagate_down says
    (.cu:50-64). Forward_cpu calls Forward_gpu (cpp:32): a CPU_ONLY build stops there (STUB_GPU's NO_GPU),
    and a GPU build runs it on the GPU."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        legacy_shape(self, bottoms[0])  # num() (.cu:22)
        return [tuple(bottoms[0])]

    def touches(self, run):
        if run.mode == "cpu":
            return [touch.stop("forward", "NormalizationL2's Forward_cpu calls Forward_gpu (normalization_l2_layer."
                               "cpp:32): a CPU_ONLY build stops there, a GPU build runs it on the GPU")]
        shape = run.bottoms[0]
        return [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward"),
                touch.buffer("squared_", count(shape), "forward", per_sample=True,
                             note="x".join(map(str, shape)) + " (the bottom's shape at setup)"),
                touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]


class _IdentityLoss(Loss):
    """A LossLayer (two bottoms, a scalar top, loss weight 1 by default) with Reshape of its own, no num()
    check; batch_size_ is bottom 0's num() and code_length_ its count(1) (LayerSetUp). Its label must get no
    gradient (LOG(FATAL) in Backward_cpu). Forward_gpu and Backward_gpu run the CPU code, so all of it is on
    the host."""

    defines = DEFINES

    def reshape(self, bottoms):
        batch = legacy_shape(self, bottoms[0])[0]
        self.check(batch > 0, f"bottom 0 {tuple(bottoms[0])} has no rows")
        self._per_id = self.images_per_id(batch)
        return [()]

    def images_per_id(self, batch):
        """im_per_cat_: --define images_per_id, else 1 (said)."""
        k = self.defined("images_per_id")
        if k is None:
            self.assume(f"one image per identity in the batch of {batch} (the labels decide: the first label's "
                        "run of equal labels)", "--define images_per_id=K (images of each identity, in a row)")
            return 1
        self.check(1 <= k <= batch, f"--define images_per_id={k}: the batch holds {batch} images")
        return k

    def dims(self, run):
        return legacy_shape(self, run.bottoms[0])[0], count(run.bottoms[0], 1), self._per_id


@register("VarLoss", fork=FORK)
class VarLoss(_IdentityLoss):
    """VarLossLayer (var_loss_layer.cpp; hpp:22-43). LayerSetUp shapes temp_diff_ (1, code_length_, 1, 1)
    (cpp:23). Forward (cpp:34-85; Forward_gpu calls it, :143-147) reads the top's diff (its loss weight),
    the label and the data, writes bottom 0's diff itself (:41, :80), and for each identity news an array of
    code_length_ floats for its mean that is never deleted (:64): ceil(batch / images_per_id) arrays a
    forward, more host memory every iteration. Backward writes nothing (cpp:89-140)."""

    def touches(self, run):
        batch, code, per_id = self.dims(run)
        groups = -(-batch // per_id)
        return [touch.buffer("temp_diff_", code, "setup", per_sample=False, device="host", note=f"1x{code}x1x1"),
                touch.bottom(0, "data", "forward", device="host"), touch.bottom(1, "data", "forward", device="host"),
                touch.top(0, "data", "forward", device="host"),
                touch.bottom(0, "diff", "forward"),
                touch.buffer("mean (new[], never deleted)", groups * code, "forward", per_sample=True, device="host",
                             note=f"{groups} arrays of {code} floats, one per identity: leaked, as many again every "
                                  "forward (var_loss_layer.cpp:64)")]


@register("SetLoss2", fork=FORK)
class SetLoss2(_IdentityLoss):
    """SetLoss2Layer (set_loss2_layer.cpp; hpp:22-48): LayerSetUp makes the top a scalar (cpp:25-26) and
    Reshape does nothing (:30-31). Forward (:34-117, Layer's Forward_gpu runs it: the .cu is all comments)
    reshapes temp_loss_ (1, 1, 1, code_length_), cat_mean_ and cat_grad_ (1, 1, cat_per_iter_,
    code_length_), cat_per_iter_ = batch / images_per_id (:54-58), and writes them on the host. Backward
    (:121-143) scales cat_grad_ into bottom 0's diff (whatever propagate_down[0] says)."""

    def touches(self, run):
        batch, code, per_id = self.dims(run)
        cats = batch // per_id
        note = f"1x1x{cats}x{code} ({cats} identities)"
        t = [touch.bottom(0, "data", "forward", device="host"), touch.bottom(1, "data", "forward", device="host"),
             touch.buffer("temp_loss_", code, "forward", per_sample=False, device="host", note=f"1x1x1x{code}"),
             touch.buffer("cat_mean_", cats * code, "forward", per_sample=True, device="host", note=note),
             touch.buffer("cat_grad_", cats * code, "forward", per_sample=True, device="host", note=note),
             touch.top(0, "data", "forward", device="host"), touch.bottom(0, "diff", "backward")]
        return t
