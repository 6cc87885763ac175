"""HRSOD's Caffe (yi94code/HRSOD 166e6d7, caffe-master/): BVLC Caffe of August 2016 (9e9e9ba, src/ and
include/ file for file but for what follows) with the layers of its high-resolution saliency nets, as its
sources shape them.

OutputDecay is its layer that a net uses (wdzhao123/FRD's test.prototxt): a weight decay on a blob's values,
applied in place in the backward. Its other additions change no size of a net that does not use them and have
no rule here: SmoothPooling, SigmoidMultiLabelLoss, OverlapAccuracy and SoftmaxHardBoostrapLoss (no net of
either repository uses them), ReLU's upper_bound (a clip of the values: relu_layer.cpp:15-26, .cu:33-40; the
layer factory is BVLC's, cuDNN's ReLU ignores it), Eltwise's cross_channel (PROD of a map by one channel), and
Net::UpdateSmooth and set_net_phase (net.cpp:997-1010, solver calls). Data's multi_label makes its label
(batch, label_size, 1, 1) (data_layer.cpp:50-60): refused here rather than sized as BVLC's one label an image.

The rest is BVLC's of its time, as GGL's Caffe (liu-xb/GGL, BVLC c62e06b of July 2016) has it: the same
base_data_layer, batch_norm_layer, accuracy_layer, image_data_layer and window_data_layer files. Its
BasePrefetchingDataLayer keeps PREFETCH_COUNT = 3 batches of data_ and label_ and copies them into the tops
(base_data_layer.hpp:49-79, base_data_layer.cu:8-26), as the SSD fork's; its Accuracy has CPU code only (no
accuracy_layer.cu); its BatchNorm keeps the file's lr_mult for its statistics (batch_norm_layer.cpp:10-36).

File:line references are to caffe-master/src/caffe/layers/ and caffe-master/include/caffe/layers/ at that
commit.
"""
from . import enet, ggl, ssd, touch
from .base import Layer, carry, count, register

FORK = "hrsod"

carry(__name__, FORK, ssd.SSDImageData, ssd.SSDWindowData, enet.Accuracy, ggl.BatchNorm)


@register("Data", fork=FORK)
class Data(ssd.SSDData):
    """BVLC's DataLayer of August 2016 in the prefetching base above; with data_param.multi_label its label
    is (batch, label_size, 1, 1) from the records' multi_label (data_layer.cpp:29-32, :50-60, :105-115):
    refused, not sized."""

    def reshape(self, bottoms):
        p = self.lp._msg.data_param
        self.check(not p.multi_label, f"protoaudit has no rule for HRSOD's Data with multi_label (a label of "
                   f"(batch, label_size {p.label_size}, 1, 1): data_layer.cpp:50-60)",
                   fix="declare the layer's tops with --input")
        return super().reshape(bottoms)


@register("OutputDecay", fork=FORK)
class OutputDecay(Layer):
    """OutputDecayLayer, a NeuronLayer (output_decay_layer.hpp:15): one bottom, one top (neuron_layer.hpp:
    26-27), which must be the bottom itself (CHECK(bottom[0] == top[0]), output_decay_layer.cpp:12). Its
    Reshape only shapes temp_ like the bottom (cpp:18); Forward_cpu and Forward_gpu do nothing (hpp:29-32).

    Backward, where propagate_down[0] (cpp:26, .cu:10): adds output_decay times the values (L2) or their
    signs (L1) into the blob's diff (the top's, in place): it reads the bottom's data and writes its diff
    (cpp:27-28, .cu:11-12); L1 writes the signs into temp_ first (cpp:35-41, .cu:18-24), the one touch that
    allocates it, the bottom's size. Any other regularization_type is a LOG(FATAL) in that backward
    (cpp:43, .cu:26)."""

    exact_bottoms = 1
    exact_tops = 1

    def _param(self):
        return self.fork_param("output_decay_param")

    def reshape(self, bottoms):
        self.check(self.lp.top[0] == self.lp.bottom[0], "OutputDecayLayer conducts in-place computation: "
                   "CHECK(bottom[0] == top[0]) in LayerSetUp (output_decay_layer.cpp:12)",
                   fix=f"compute it in place: top: \"{self.lp.bottom[0]}\"")
        return [tuple(bottoms[0])]

    def touches(self, run):
        if not run.propagate_down[0]:
            return []
        kind = self._param().regularization_type
        if kind not in ("L1", "L2"):
            return [touch.stop("backward", f"Unknown Regularization type {kind!r}: OutputDecay's backward stops "
                               "on a LOG(FATAL) for any type but L1 and L2 (output_decay_layer.cpp:43, .cu:26)",
                               fix="give output_decay_param { regularization_type: \"L1\" } or \"L2\"")]
        t = [touch.bottom(0, "data", "backward"), touch.bottom(0, "diff", "backward")]
        if kind == "L1":
            shape = run.bottoms[0]
            t.append(touch.buffer("temp_", count(shape), "backward", per_sample=True,
                                  note="x".join(map(str, shape)) + " (the bottom's shape: the values' signs)"))
        return t
