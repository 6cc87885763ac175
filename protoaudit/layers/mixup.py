"""Bag-of-Tricks' Mixup layer for BVLC Caffe (Wheatly2/Bag-of-Tricks-for-Image-Classification 9661ccc),
as its source shapes it.

The repository is not a Caffe: it holds a whole caffe.proto (BVLC's, before clip_param and pooling's
round_mode, with mixup_param, label_smooth_param, drop_block_param and the solver's warm-up and cosine
fields: proto/forks/mixup.proto), mixup_layer.hpp/.cpp and math_functions.cpp/.hpp (caffe_rng_beta),
to merge into that BVLC Caffe: the rest of a net is BVLC's layers. The caffe.proto names LabelSmooth's
and DropBlock's parameters, but the repository has no source for those layers: they have no rule here.
Its train.prototxt ends with a SoftmaxCrossEntropyLoss, of no source in the repository either: at the
net's end, read by no layer, it is taken as a loss (data.Unread), said as an assumption.

File:line references are to that commit's mixup_layer.hpp and mixup_layer.cpp.
"""
from . import touch
from .base import Layer, count, register
from .drml import _written

FORK = "mixup"


@register("Mixup", fork=FORK)
class Mixup(Layer):
    """MixupLayer: two bottoms, two tops exactly (mixup_layer.hpp:23-24). LayerSetUp reads alpha and
    CHECKs it > 0 (cpp:14-15); cls_num_ is bottom 1's shape(1) where bottom 1 has 2 axes (a one-hot
    label), else mixup_param.cls_num (default 0), and must be > 1 (cpp:17-22). Reshape: top 0 like
    bottom 0 (cpp:29); top 1 like bottom 1 where it has 2 axes, else (N, cls_num_), N bottom 0's
    shape(0) (cpp:30-40); lamda_, a Blob of N (cpp:41-42, hpp:37). Forward_cpu (cpp:46-111) shuffles a
    vector<int>(N) of indices (cpp:51-55, living for the pass only), fills lamda_'s host data
    (cpp:57-61), copies bottom 0's host data into top 0's and bottom 1's into top 1's, or zeroes top 1
    (cpp:74-79), then mixes image i with image batch_idx[i] (cpp:80-94): bottom 1's rows 0..N-1 with
    2 axes, its values 0..N-1 else. Forward_gpu is commented out (hpp:30-31), so GPU mode runs Layer's
    default, the CPU code: every blob it reads or writes gets a host copy, its tops' device copies
    those the layers after it read. Backward_cpu is empty (hpp:28-29): it writes no bottom diff."""

    exact_bottoms = 2
    exact_tops = 2

    def cls_num(self, label):
        if len(label) == 2:
            return label[1]  # cpp:17-18
        return self.fork_param("mixup_param").cls_num  # cpp:20

    def reshape(self, bottoms):
        data, label = (tuple(b) for b in bottoms)
        p = self.fork_param("mixup_param")
        self.check(p.alpha > 0, f"mixup_param.alpha is {p.alpha:g}: LayerSetUp CHECKs it is larger than 0 "
                   "(mixup_layer.cpp:15)", fix="give mixup_param an alpha above 0 (the Beta distribution's)")
        classes = self.cls_num(label)
        where = "bottom 1's shape(1), a one-hot label of 2 axes" if len(label) == 2 else "mixup_param.cls_num"
        self.check(classes > 1, f"the class number is {classes} ({where}): LayerSetUp CHECKs it is larger than 1 "
                   "(mixup_layer.cpp:22)", fix="give mixup_param.cls_num, the number of classes"
                   if len(label) != 2 else "give a one-hot label of (N, classes) as bottom 1")
        self.check(len(data) >= 1 and len(label) >= 1, "Reshape reads shape(0) of bottom 0 (mixup_layer.cpp:30), "
                   "which Blob's CHECK refuses on a blob of no axes", fix="give bottoms of a batch axis")
        n = data[0]
        if len(label) == 2:
            self.check(label[0] >= n, f"bottom 1 {label} has {label[0]} rows but Forward mixes one a image, "
                       f"{n} for bottom 0's batch (mixup_layer.cpp:86-87): Caffe would read and write past it",
                       fix="give one label row an image")
            return [data, label]  # cpp:29, :33
        self.check(count(label) >= n, f"bottom 1 {label} has {count(label):,} values but Forward reads one an image, "
                   f"{n} for bottom 0's batch (mixup_layer.cpp:89-90): Caffe would read past it",
                   fix="give one label an image")
        return [data, (n, classes)]  # cpp:29, :36-39

    def touches(self, run):
        n = run.bottoms[0][0]
        t = [touch.bottom(j, "data", "forward", device="host") for j in range(2)]  # cpp:64, :67
        t += _written(touch.top, 0, "data", "forward") + _written(touch.top, 1, "data", "forward")  # cpp:65, :68
        t.append(touch.buffer("lamda_", n, "forward", per_sample=True, device="host",
                              note="one lambda an image, its host data only (mixup_layer.cpp:41-42, :57-61)"))
        return t  # Backward_cpu is empty (hpp:28-29)
