"""JFDA's MTCNN loss for BVLC Caffe (luoyetx/Joint-Face-Detection-and-Alignment f4f843b), as its source
shapes it.

The repository is not a Caffe: layers/copy.sh copies jfda_loss_layer.hpp, .cpp and .cu into a BVLC
Caffe, and layers/caffe.proto gives the two additions to its caffe.proto (jfda_loss_param = 23333 and
JfdaLossParameter's drop_loss_rate: proto/forks/jfda.proto). drop_loss_rate only decides which
samples' classification gradients are kept (online hard example mining), no size. The rest of the
net is counted as BVLC's layers; its data layer is the repository's Python FaceDataLayer
(protoaudit.layers.python_mtcnn).

File and line references are to that commit's layers/jfda_loss_layer.hpp, .cpp and .cu.
"""
from . import touch
from .base import Layer, count, legacy_shape, register

FORK = "jfda"


@register("JfdaLoss", fork=FORK)
class JfdaLoss(Layer):
    """JfdaLossLayer: a plain Layer (not a LossLayer, hpp:35), so only the file's loss_weight lines
    make its tops losses. Six bottoms (score, bbox_pred, landmark_pred, bbox_target, landmark_target,
    label) and five tops exactly, which Caffe adds if the file names fewer (hpp:47-49). Reshape
    (cpp:50-62) makes every top a scalar (shape (), "Top shape: (1)" in the log) and sizes four
    private blobs like its bottoms: mask_ like the label (bottom 5), prob_ like the score (bottom 0),
    bbox_diff_ like bottom 1 and landmark_diff_ like bottom 2.

    Forward_gpu and Backward_gpu call the CPU code (.cu:8-17), so in either mode everything is on the
    host: the forward reads every bottom's cpu_data, counts the labels with num() and offsets the
    targets and predictions with Blob::offset (the legacy 4-axis accessors, on bottoms 1 to 5),
    writes prob_, bbox_diff_ and landmark_diff_ (cpp:101-189) and mask_ (cpp:199-205), and the tops.
    The backward reads prob_, mask_ and the two diff blobs and the first three tops' diffs, and writes
    the diffs of bottoms 0, 1 and 2 (cpp:227-288) whatever propagate_down says; never the targets' or
    the label's."""

    exact_bottoms = 6
    exact_tops = 5
    auto_top_blobs = True

    def reshape(self, bottoms):
        for j in range(1, 6):  # num(), channels() and offset(n) on bottoms 1-5 (cpp:89, 135-181)
            legacy_shape(self, bottoms[j])
        return [()] * 5

    def touches(self, run):
        b = run.bottoms
        t = [touch.bottom(j, "data", "forward", device="host") for j in range(6)]
        t += [touch.buffer("prob_", count(b[0]), "forward", per_sample=True, device="host",
                           note="like the score, bottom 0"),
              touch.buffer("bbox_diff_", count(b[1]), "forward", per_sample=True, device="host",
                           note="like bbox_pred, bottom 1"),
              touch.buffer("landmark_diff_", count(b[2]), "forward", per_sample=True, device="host",
                           note="like landmark_pred, bottom 2"),
              touch.buffer("mask_", count(b[5]), "forward", per_sample=True, device="host",
                           note="like the label, bottom 5")]
        t += [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))]
        if any(run.propagate_down):
            t += [touch.top(j, "diff", "backward", device="host") for j in range(3)]
            t += [touch.bottom(j, "diff", "backward") for j in range(3)]
        return t
