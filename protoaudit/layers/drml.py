"""DRML's Caffe (jellyDL/drml_caffe f508105): BVLC Caffe 1.0 with the layers of Deep Region and
Multi-label Learning (Zhao, Chu and Zhang, CVPR 2016), as their sources shape them.

complie_caffe.sh copies the fork's caffe.proto, src/* and include/* into BVLC's 1.0 tree: the rest of
a net is BVLC's layers (1.0's base_data_layer and image_data_layer are the files protoaudit's data
layers were measured on). Box cuts a map into boxes, Splice puts boxes back into one map; both run
their CPU code in GPU mode (box_layer.cu:17, 27, splice.cu:16, 26), so each blob they read or write
gets a host copy. Their element indices are the source's, `b*c*H*W + c*H*W + ...` (box_layer.cpp:76,
splice.cpp:70-71): image b's channel c lands at (b+1)*c maps, so images overlap one another, and a
box past a map's edge is refused only where that index leaves the blob. File:line references are to
src/ and include/ of that commit.
"""
import math

from . import touch
from .base import Layer, count, legacy_shape, register
from .data import LIST_ENTRY_BYTES, FIRST_TOKENS, ImageData
from .losses import Loss

FORK = "drml"
LIST_ENTRY_BYTES.setdefault("ImageDataMultilabel", 56)  # sizeof(pair<string, vector<float>>)


def _int(value):
    """A uint32 field copied into an int (the layers' vector<int> and int members)."""
    return value - (1 << 32) if value >= 1 << 31 else value


def _coords(layer, p, n):
    """The (x, y) the layer reads for each of its n boxes: xcoord_[i] and ycoord_[i], i < n."""
    xs, ys = [_int(x) for x in p.xcoord], [_int(y) for y in p.ycoord]
    layer.check(len(xs) >= n and len(ys) >= n,
                f"{layer.lp.type} reads an xcoord and a ycoord for each of its {n} boxes, but {len(xs)} xcoord and "
                f"{len(ys)} ycoord are given: it would read past them", fix=f"give {n} of each")
    return list(zip(xs, ys))[:n]


def _span(num, channels, map_elements, first, last):
    """The lowest and highest element the source's loops index: b*c*M + c*M + offset over b < num and
    c < channels (M = map_elements), offset from `first` to `last`; None where a loop is empty."""
    if min(num, channels) <= 0 or last < first:
        return None
    return first, (channels - 1) * num * map_elements + last


def _written(blob, j, part, stage):
    """A blob the host code writes that the layers beside it in DRML's nets (Convolution, BatchNorm,
    Eltwise, InnerProduct) read on the device: both copies, the device's first, so that a blob counted
    once is counted where the GPU total holds it."""
    return [blob(j, part, stage), blob(j, part, stage, device="host")]


def _check_inside(layer, span, size, what, where):
    if span is not None and (span[0] < 0 or span[1] >= size):
        layer.fail(f"{layer.lp.type} {what} reaches element {span[1] if span[1] >= size else span[0]:,} of a "
                   f"blob of {size:,} ({where}): Caffe would read and write out of its bounds",
                   fix="give coordinates whose boxes lie inside the map")


@register("Box", fork=FORK)
class Box(Layer):
    """BoxLayer: one bottom, each top a height x width box of it at (xcoord[i], ycoord[i])
    (box_layer.hpp:29-30; box_layer.cpp:23-38); every top is (num, channels, height, width) (cpp:46-49).
    Forward copies each box row by row from the bottom's host data to the top's, and Backward, when the
    bottom needs it, copies each top's host diff into the box in the bottom's host diff (cpp:57-122);
    the rest of that diff is never written. No buffer of its own."""

    exact_bottoms = 1
    min_tops = 1

    def reshape(self, bottoms):
        n, c, h, w = legacy_shape(self, bottoms[0])
        p = self.fork_param("box_param")
        height, width = _int(p.height), _int(p.width)
        self.check(height >= 0 and width >= 0, f"box_param's height {height} and width {width} must not be negative")
        for x, y in _coords(self, p, len(self.lp.top)):  # cpp:68-81: bottom[b*c*H*W + c*H*W + h*W + x + i]
            span = _span(n, c, h * w, y * w + x, (y + height - 1) * w + x + width - 1)
            _check_inside(self, span if height and width else None, n * c * h * w,
                          f"box at x {x}, y {y} of {width}x{height}", f"the bottom {n}x{c}x{h}x{w}, box_layer.cpp:76")
        return [(n, c, height, width)] * len(self.lp.top)

    def touches(self, run):
        tops = range(len(run.tops))
        t = [touch.bottom(0, "data", "forward", device="host")]
        t += [x for j in tops for x in _written(touch.top, j, "data", "forward")]
        if run.propagate_down[0]:  # cpp:95
            t += [touch.top(j, "diff", "backward", device="host") for j in tops]
            t += _written(touch.bottom, 0, "diff", "backward")
        return t


@register("Splice", fork=FORK)
class Splice(Layer):
    """SpliceLayer: num_ bottoms (splice.cpp:17), bottom i pasted at (xcoord[i], ycoord[i]) into a top of
    (num, channels, height * sqrt(num_), width * sqrt(num_)) of bottom 0 (cpp:38-39): the int times
    a double sqrt, truncated to int by Reshape's int arguments, as cpp:54-55 truncate it. Every bottom is
    read with bottom 0's dimensions. A count that is no square still builds, where the boxes fit.
    Forward and Backward run on the host (cpp:45-126); Backward returns unless bottom 0 needs a diff
    (cpp:90) and then writes every bottom's. More tops than one are never shaped: refused. No buffer."""

    min_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        k = len(bottoms)
        n, c, h, w = legacy_shape(self, bottoms[0])
        top_h, top_w = int(h * math.sqrt(k)), int(w * math.sqrt(k))
        top = n * c * top_h * top_w
        for i, ((x, y), bottom) in enumerate(zip(_coords(self, self.fork_param("splice_param"), k), bottoms)):
            if not h * w:
                continue
            # cpp:70: bottom[b*c*H*W + c*H*W + (h - y)*W + i]; cpp:71: top[b*c*H'*W' + c*H'*W' + h*W' + x + i]
            _check_inside(self, _span(n, c, h * w, 0, h * w - 1), count(bottom), f"bottom {i}",
                          f"bottom {i} {'x'.join(map(str, bottom))} read as bottom 0's {n}x{c}x{h}x{w}, splice.cpp:70")
            _check_inside(self, _span(n, c, top_h * top_w, y * top_w + x, (y + h - 1) * top_w + x + w - 1), top,
                          f"bottom {i} pasted at x {x}, y {y}",
                          f"the top {n}x{c}x{top_h}x{top_w}, {h}x{w} times sqrt({k}), splice.cpp:71")
        return [(n, c, top_h, top_w)]

    def touches(self, run):
        return host_paste_touches(run)


def host_paste_touches(run):
    """A layer whose GPU code calls its CPU code: it reads every bottom on the host and writes its
    top there, then the device copy; backward, where bottom 0 wants a gradient, reads the top's diff
    on the host and writes every bottom's diff (Splice here; JAA-Net's Combination)."""
    bottoms = range(len(run.bottoms))
    t = [touch.bottom(j, "data", "forward", device="host") for j in bottoms]
    t += _written(touch.top, 0, "data", "forward")
    if run.propagate_down[0]:
        t.append(touch.top(0, "diff", "backward", device="host"))
        t += [x for j in bottoms for x in _written(touch.bottom, j, "diff", "backward")]
    return t


@register("ImageDataMultilabel", fork=FORK)
class ImageDataMultilabel(ImageData):
    """ImageDataMultilabelLayer: BVLC 1.0's ImageData (image_data_multilabel_layer.cpp is its file but
    for the labels) whose list entries are a name and multilabel_num floats, read token by token
    (`infile >> filename`, cpp:45-51), and whose label top is (batch_size, multilabel_num, 1, 1)
    (cpp:100-106), in each prefetch batch too. One or two tops (hpp:32-33); with one, load_batch still
    takes the prefetch label's host data (cpp:147), a Blob never shaped: Blob's CHECK(data_) stops it."""

    exact_tops = None
    min_tops = 1
    max_tops = 2
    label_origin = "the layer's batch size and image_data_param.multilabel_num (cpp:101)"

    def label_shape(self, batch):
        return (batch, self.multilabel_num(), 1, 1)

    def multilabel_num(self):
        """0 where the net was read by a Caffe whose ImageDataParameter lacks the field (then unset)."""
        return getattr(self.param(), "multilabel_num", 0)

    def first_names(self, list_path):
        return [self.param().root_folder + FIRST_TOKENS(list_path, 1, "image list")[0]]

    # where its code takes the label's host data and where it shapes that Blob, cited where one top stops it
    label_taken_at = "image_data_multilabel_layer.cpp:147"
    label_shaped_at = "cpp:100"

    def touches(self, run):
        if len(run.tops) == 1:
            return [touch.stop("setup", f"{self.lp.type} with one top: load_batch takes the label's "
                               f"mutable_cpu_data ({self.label_taken_at}) of a Blob it never shaped "
                               f"({self.label_shaped_at}), and Blob's CHECK(data_) stops the prefetch thread",
                               fix=f"give it a label top ('{self.lp.top[0]}' and 'label')")]
        return super().touches(run)

    def reader_touches(self, run):
        """lines_: per entry its name and a vector of multilabel_num floats, one entry a line."""
        return self.float_list_touches(self.lp.type, self.multilabel_num(), lambda line: line.split()[:1])


@register("MultiSigmoidCrossEntropyLoss", fork=FORK)
class MultiSigmoidCrossEntropyLoss(Loss):
    """MultiSigmoidCrossEntropyLossLayer: LossLayer's bottoms and scalar top, bottoms of one count
    (multi_sigmoid_cross_entropy_loss_layer.cpp:26-28), and an inner SigmoidLayer built from the
    layer's own parameters (hpp:19-21) whose output sigmoid_output_ takes bottom 0's shape (cpp:29).
    Forward_gpu runs that Sigmoid on the device, then sums the loss over labels that are not 0 on the
    host, from both bottoms' host data, into the top's host data (cu:13-30). Backward_gpu is
    Backward_cpu (cu:37): sigmoid_output_'s and the label's host data, bottom 0's host diff; it never
    reads the top's diff (cpp:81), and stops on a label that needs a diff (cpp:61-63)."""

    def check_bottoms(self, bottoms):
        self.check(count(bottoms[0]) == count(bottoms[1]),
                   "MultiSigmoidCrossEntropyLoss inputs must have the same count (cpp:27-28)")

    def label_for(self, prediction):
        return tuple(prediction)

    def touches(self, run):
        size = count(run.bottoms[0])
        gpu = run.mode == "gpu"
        t = [touch.bottom(0, "data", "forward"), touch.buffer("sigmoid_output_", size, "forward", per_sample=True)]
        if self.lp.loss_weight and self.lp.loss_weight[0]:  # the inner Sigmoid is a loss too (its SetLossWeights)
            t.append(touch.buffer("sigmoid_output_.diff", size, "forward" if gpu else "setup", per_sample=True))
        t += [touch.bottom(0, "data", "forward", device="host"), touch.bottom(1, "data", "forward", device="host")]
        t += _written(touch.top, 0, "data", "forward")  # Layer::Forward's loss reads it on the device
        if len(run.propagate_down) > 1 and run.propagate_down[1]:
            t.append(touch.stop("backward", "MultiSigmoidCrossEntropyLoss cannot backpropagate to label inputs "
                                "(multi_sigmoid_cross_entropy_loss_layer.cpp:61-63)",
                                fix="give its label no diff (propagate_down: false for bottom 1)"))
        elif run.propagate_down[0]:
            if gpu:
                t.append(touch.buffer("sigmoid_output_ (host)", size, "backward", per_sample=True, device="host"))
            t += _written(touch.bottom, 0, "diff", "backward")
        return t
