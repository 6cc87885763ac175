"""hsmyy's CenterLoss for BVLC Caffe (hsmyy/CenterLoss_Caffe_Mnist e4cbc98), as its source shapes it.

The repository is not a Caffe: it gives center_loss_layer.cpp and .hpp to copy into a BVLC Caffe
and the two additions to caffe.proto (proto/forks/hsmyy.proto). Its CenterLoss is not caffe-face's
(protoaudit.layers.caffe_face): the centres are a private blob, not a parameter (no solver history,
not saved), sized by center_loss_param's cluster_num and bottom 0's channels() only; it has CPU code
only; and center_loss_param's loss_weight scales the loss and the gradients (cpp:51, 55, 67), no
shape or size. The rest of the net is counted as BVLC's layers.

File and line references are to that commit's center_loss_layer.cpp and center_loss_layer.hpp.
"""
from . import touch
from .base import legacy_shape, register
from .losses import Loss, legacy_num_pair

FORK = "hsmyy"


@register("CenterLoss", fork=FORK)
class CenterLoss(Loss):
    """CenterLossLayer: LossLayer's scalar top, two bottoms (hpp:19), never a gradient for the
    labels (hpp:21-23). LayerSetUp (cpp:8-24) CHECKs equal num() and shapes, with the legacy
    accessors, center_info_ (cluster_num, channels, 1, 1) and center_loss_ (num, channels, 1, 1),
    and fills center_info_'s data on the host (cpp:23). cluster_num is a required field: Caffe's
    parser refuses a net without it.

    Forward_gpu and Backward_gpu call the CPU code (cpp:73-83), so in either mode everything is on
    the host: the forward reads both bottoms' cpu_data, writes center_info_'s diff (cpp:35, 45-47),
    center_loss_'s data (cpp:41-43) and the loss into the top's cpu_data (cpp:52), and updates the
    centres on the host (Blob::Update with the data's head on the CPU, cpp:58). The backward never
    reads the top's diff: it scales center_loss_ and copies it into bottom 0's cpu_diff (cpp:66-69),
    which the layer below reads with gpu_diff in GPU mode (the device copy is the one counted). It
    runs whenever Net::Init says the layer needs a backward, and writes bottom 0's diff whatever
    propagate_down says."""

    def reshape(self, bottoms):
        p = self.fork_param("center_loss_param")
        self.check(p.HasField("cluster_num"), "center_loss_param needs cluster_num, the number of classes "
                   "(a required field: Caffe's parser refuses the net without it)",
                   fix="set center_loss_param { cluster_num: CLASSES }")
        legacy_num_pair(self, bottoms, same="the same num() (cpp:11)")
        return super().reshape(bottoms)

    def touches(self, run):
        n, channels = legacy_shape(self, run.bottoms[0])[:2]
        centres = self.fork_param("center_loss_param").cluster_num * channels
        t = [touch.buffer("center_info_", centres, "setup", per_sample=False, device="host",
                          note=f"{self.fork_param('center_loss_param').cluster_num}x{channels}"),
             touch.bottom(0, "data", "forward", device="host"), touch.bottom(1, "data", "forward", device="host"),
             touch.buffer("center_info_.diff", centres, "forward", per_sample=False, device="host"),
             touch.buffer("center_loss_", n * channels, "forward", per_sample=True, device="host",
                          note=f"{n}x{channels}"),
             touch.top(0, "data", "forward", device="host")]
        if any(run.propagate_down):
            t.append(touch.bottom(0, "diff", "backward"))
        return t
