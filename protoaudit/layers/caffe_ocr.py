"""caffe_ocr's Caffe (senlinuc/caffe_ocr 81642f6, a Windows BVLC Caffe of 2017): the layers its OCR
nets (CNN + BLSTM + CTC, examples/ocr/) use, as its sources shape them.

Its README lists what it changed: multi-label Data and ImageData, Junhyuk Oh's Lstm made to read
(T, N, I) sequences, Baidu's warp-ctc as WarpCTCLoss (without sequence indicators), Tongcheng's
memory-efficient DenseBlock, Transpose and Reverse; CTCGreedyDecoder scores the test net. The rest
of a net is counted as BVLC's layers (the fork's base is the 2017 BVLC Caffe: prefetch_ of
data_param.prefetch batches, base_data_layer.cpp).

File and line references are to that commit's src/caffe/layers/*.cpp/.cu, include/caffe/layers/
*.hpp and src/caffe/layers/ctcpp_entrypoint.cpp (warp-ctc's workspace).
"""
from . import touch
from .base import Layer, carry, count, legacy_shape, refuse_in_place, register
from .ctpn import Lstm as CtpnLstm, Transpose
from .data import FIRST_TOKENS, Data as BvlcData, ImageData as BvlcImageData
from .densenet import DenseBlock as TongchengDenseBlock

FORK = "caffe_ocr"
# The labels per image the fork's README gives for its Chinese dataset ("每个样本固定10个字符": every
# sample is 10 characters), taken where the dataset is not on this machine.
ASSUMED_LABELS = 10
FLOAT = 4
INT = 4


class _MultiLabel:
    """The fork's data layers give (batch, K, 1, 1) labels, K the labels of the first record
    (data_layer.cpp:50-60: datum.label_size(), a repeated int32 in its caffe.proto) or of the list's
    first line (image_data_layer.cpp:84-92, 134-142; the regression branch alike, :146-208)."""

    label_origin = "the labels of the first record (one row of K labels per image)"

    def label_count(self):
        return None

    def label_shape(self, batch):
        k = self.label_count()
        if k is None:
            k = ASSUMED_LABELS
            top = self.lp.top[1] if len(self.lp.top) > 1 else "label"
            self.assume(f"top '{top}' holds {k} labels per image (the fork's README: its Chinese dataset has 10 "
                        "characters a sample); the labels per record are the dataset's, which is not on this machine",
                        f"--input {top}={batch}xKx1x1")
        return (batch, k, 1, 1)


@register("Data", fork=FORK)
class Data(_MultiLabel, BvlcData):
    """DataLayer with a label of datum.label_size() labels per record (data_layer.cpp:50-60, 137-143);
    the rest is BVLC's (a random skip of up to rand_skip records once, in load_batch, cpp:97-109). The
    record's label count is not read from the database here: it is assumed (ASSUMED_LABELS)."""


@register("ImageData", fork=FORK)
class ImageData(_MultiLabel, BvlcImageData):
    """ImageDataLayer whose list lines are "name label label ...": the name is the first token
    (`iss >> filename`, image_data_layer.cpp:86-87), the label top (batch, K, 1, 1), K the labels on the
    (shuffled) list's first line (cpp:134-139); lines of floats under image_data_param.regression, the
    same shape (cpp:146-205)."""

    def first_names(self, list_path):
        return [self.param().root_folder + FIRST_TOKENS(list_path, 1, "image list")[0]]

    def label_count(self):
        found = self.files.find(self.param().source)
        if found is None:
            return None
        with open(found.path, "rb") as f:
            tokens = f.readline().split()
        return max(0, len(tokens) - 1)


@register("Lstm", fork=FORK)
class Lstm(CtpnLstm):
    """LstmLayer (lstm_layer_Junhyuk.cpp) as this fork changed it: N = the bottom's shape(1), I = its
    shape(2) (cpp:21-23; CTPN's takes count(2)), T = shape(0), the top (T, N, H) (cpp:78-88); the
    blobs and buffers are Junhyuk Oh's (cpp:29-71, 90-127: pre_gate_, gate_ (T, N, 4, H), cell_
    (T, N, H), the (N, H) states, h_to_gate_ (N, 4, H), bias_multiplier_ of T*N ones), as
    protoaudit.layers.caffe_lstm counts them."""

    def _dims(self, bottoms):
        data = bottoms[0]
        self.check(len(data) >= 3, f"Lstm reads a (T, N, I) sequence, got {tuple(data)} (shape(2), "
                   "lstm_layer_Junhyuk.cpp:23)")
        return data[0], data[1], data[2], self.fork_param("lstm_param").num_output


# TransposeLayer (transpose_layer.cpp/.cu) is CTPN's: the same Reshape (cpp:32-77: bottom_counts_,
# top_counts_, forward_map_, backward_map_ and buf_ of count x axes ints, which both GPU passes use,
# cu:32-33, 47-48).
carry(__name__, FORK, Transpose)


@register("Reverse", fork=FORK)
class Reverse(Layer):
    """ReverseLayer, a NeuronLayer (reverse_layer.hpp:22): the top shaped like the bottom, never the
    bottom itself (cpp:18-19); reverse_param.axis must be >= 0 (cpp:11) and an axis of the bottom
    (cpp:21-22). The copies are caffe_copy's (cpp:26-72, cu:9-54): no buffer of its own. The backward
    writes the bottom's diff only when asked (cpp:51, cu:34)."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        refuse_in_place(self)
        shape = tuple(bottoms[0])
        axis = self.fork_param("reverse_param").axis
        self.check(axis >= 0, f"reverse_param's axis {axis} must be >= 0 (reverse_layer.cpp:11)")
        self.check(axis < len(shape), f"reverse_param's axis {axis} must be less than the bottom's {len(shape)} axes "
                   f"{shape} (reverse_layer.cpp:21-22)")
        return [shape]

    def touches(self, run):
        t = [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t


@register("DenseBlock", fork=FORK)
class DenseBlock(TongchengDenseBlock):
    """Tongcheng's DenseBlock (Tongcheng/caffe 1625bb3) with this fork's changes: initChannel is the
    bottom's channels, whatever denseblock_param says (DenseBlock_layer.cpp:60, "modified by jxs"); the
    GPU buffers are made in LayerSetUp (cpp:221-224) rather than at the first pass, and Reshape makes
    them anew only where a larger bottom needs more (cpp:229-238, cu:1058-1095); the sizes at one
    shape are Tongcheng's."""

    def _check(self, bottoms):
        if len(bottoms[0]) == 4:
            self.c0 = bottoms[0][1]
        return super()._check(bottoms)


def ctc_workspace_bytes(t, n, c, max_label, gpu):
    """warp-ctc's get_workspace_size (ctcpp_entrypoint.cpp:78-159) for float, every sequence T steps
    long and the longest label `max_label`: S = 2L + 1 (:96); on the GPU (:100-131) 2 floats and 4
    ints per sequence, L + S ints, S*T + T floats (alphas, denominators) and C*T floats (probs) per
    sequence; on the CPU (:132-156) C + S*T + S floats and 3S ints per sequence, and C*T*N floats."""
    s = 2 * max_label + 1
    if gpu:
        return n * (2 * FLOAT + 4 * INT) + INT * max_label * n + INT * s * n + FLOAT * s * t * n \
            + FLOAT * t * n + FLOAT * c * t * n
    return n * (FLOAT * c + FLOAT * s * t + FLOAT * s + 3 * INT * s) + FLOAT * c * t * n


@register("WarpCTCLoss", fork=FORK)
class WarpCTCLoss(Layer):
    """WarpCTCLossLayer, a LossLayer (loss weight 1 by default) of 2 to 4 bottoms and one scalar top
    (warp_ctc_loss_layer.hpp:35-40; Reshape makes the top of 0 axes and skips LossLayer's check,
    cpp:67-72). The activations are (T, N, C) read as num, channels, height with width 1 (cpp:31-37);
    with two bottoms the label is (N, K, ...), N its num (cpp:53-57), each row's labels other than the
    blank (ctc_loss_param.blank_index, default 0) the target (cpp:84-103); three bottoms (sequence
    indicators (T, N), targets (T, N)) and four (sequence and label lengths, N each, and the labels
    (L, N)) as cpp:39-52 CHECK.

    The forward does everything (cpp:75-192, cu:14-135): it reads the labels on the host (cpu_data),
    asks warp-ctc for its workspace, grows workspace_ (a SyncedMemory, device memory in GPU mode via
    mutable_gpu_data, cu:92-104; host memory on the CPU, cpp:153-165) and writes the activations'
    gradient into bottom 0's diff (cu:20, cpp:78), unscaled by the loss weight. Backward only CHECKs
    that bottom 0 takes a gradient and no other does (cpp:195-213, cu:138-155).

    The workspace depends on the longest label of the batch (ctcpp_entrypoint.cpp:93); it is counted
    at its bound, every label of the row (K), the size it reaches once a batch holds one row of K
    labels (it only grows, cu:92). flat_labels_, the lengths and costs (N floats) are small host
    vectors, not counted."""

    min_bottoms = 2
    max_bottoms = 4
    exact_tops = 1
    auto_top_blobs = True
    loss_by_default = True

    def _dims(self, bottoms):
        data = legacy_shape(self, bottoms[0])
        t, n, c, w = data
        self.check(w == 1, f"WarpCTCLoss reads its activations {tuple(bottoms[0])} as (T, N, C): their width must be 1 "
                   "(warp_ctc_loss_layer.cpp:37)")
        return t, n, c

    def _max_label(self, bottoms):
        t, n, _ = self._dims(bottoms)
        if len(bottoms) == 2:
            label = legacy_shape(self, bottoms[1])
            return label[1]
        return t  # three or four bottoms: at most T labels a sequence (cpp:258-277)

    def reshape(self, bottoms):
        t, n, c = self._dims(bottoms)
        if len(bottoms) == 2:
            label = legacy_shape(self, bottoms[1])
            self.check(label[0] == n, f"the label {tuple(bottoms[1])} must have N = {n} rows, the activations' "
                       f"channels {tuple(bottoms[0])} (T, N, C) (warp_ctc_loss_layer.cpp:56)")
        elif len(bottoms) == 3:
            seq, lab = legacy_shape(self, bottoms[1]), legacy_shape(self, bottoms[2])
            self.check(seq[0] == t and seq[1] == n and lab[1] == n,
                       f"the sequence indicators {tuple(bottoms[1])} must be (T, N) = ({t}, {n}) and the targets "
                       f"{tuple(bottoms[2])} (.., N) (warp_ctc_loss_layer.cpp:42-44)")
        else:
            self.check(count(bottoms[1]) == n and count(bottoms[2]) == n and legacy_shape(self, bottoms[3])[1] == n,
                       f"the sequence and label lengths must hold N = {n} values each and the labels "
                       f"{tuple(bottoms[3])} have N channels (warp_ctc_loss_layer.cpp:49-51)")
        return [()]

    def allow_force_backward(self, bottom_index):
        return bottom_index == 0

    def touches(self, run):
        b = run.bottoms
        t, n, c = self._dims(b)
        max_label = self._max_label(b)
        gpu = run.mode == "gpu"
        size = ctc_workspace_bytes(t, n, c, max_label, gpu)
        out = [touch.bottom(0, "data", "forward")]
        out += [touch.bottom(j, "data", "forward", device="host") for j in range(1, len(b))]
        out.append(touch.buffer("workspace_" + ("" if gpu else " (host)"), size, "forward", per_sample=True,
                                itemsize=1, device="device" if gpu else "host",
                                note=f"warp-ctc's, T={t} N={n} C={c}, longest label {max_label} (its bound)"))
        out.append(touch.bottom(0, "diff", "forward"))  # the gradient, written in the forward
        out.append(touch.top(0, "data", "forward", device="host"))
        return out


@register("CTCGreedyDecoder", fork=FORK)
class CTCGreedyDecoder(Layer):
    """CTCGreedyDecoderLayer (ctc_decoder_layer.hpp:83-108, .cpp), CPU code only (no .cu: Caffe's
    Forward_gpu runs Forward_cpu, so every blob it reads or writes is on the host). 1 to 3 bottoms,
    1 to 3 tops (hpp:39-46); the probabilities (T, N, C), shape(0..2) (cpp:73-76). Two bottoms and one
    top: the top is the accuracy pair (1, 2, 1, 1) (edit-distance accuracy and whole-line accuracy,
    cpp:57-61, 91-94, 193-236), bottom 1 the (N, K) labels; otherwise top 0 is the decoded sequences
    (N, T, 1, 1) (cpp:62-66, 81-84). The backward writes nothing (cpp:243-251)."""

    min_bottoms = 1
    max_bottoms = 3
    exact_tops = 1

    def reshape(self, bottoms):
        data = tuple(bottoms[0])
        self.check(len(data) >= 3, f"CTCGreedyDecoder reads (T, N, C) probabilities, got {data} "
                   "(shape(2), ctc_decoder_layer.cpp:76)")
        legacy_shape(self, data)  # offset(t, n) (cpp:303-304)
        t, n = data[0], data[1]
        if len(bottoms) == 2:
            legacy_shape(self, bottoms[1])  # channels() and offset(n, t) (cpp:203-207)
            return [(1, 2, 1, 1)]
        return [(n, t, 1, 1)]

    def touches(self, run):
        t = [touch.bottom(j, "data", "forward", device="host") for j in range(len(run.bottoms))]
        t.append(touch.top(0, "data", "forward", device="host"))
        return t
