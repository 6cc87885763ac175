"""R-FCN's MATLAB Caffe (daijifeng001/caffe-rfcn 4bcfcd1, the commit daijifeng001/R-FCN pins).

py-R-FCN's Caffe (protoaudit.layers.rfcn) grew its OHEM layers from this one's: this fork's
SoftmaxWithLoss and SmoothL1Loss are, renamed, that fork's SoftmaxWithLossOHEM and SmoothL1LossOHEM
(softmax_loss_layer.cpp/.cu and smooth_L1_loss_layer.cpp/.cu differ from softmax_loss_ohem_layer
and smooth_L1_loss_ohem_layer in names and layout only), with the per-item loss top OHEM reads and
no CPU code. Its PSROIPooling, BoxAnnotatorOHEM, Scale and Accuracy are that fork's code; its ROIPooling is
caffe-fast-rcnn's (branch faster-rcnn) byte for byte. Its BatchNorm is that fork's but for one line
(BatchNorm here). File references are to this fork's commit.
"""
from . import fastrcnn, rfcn
from .base import register

FORK = "rfcn_matlab"
SOURCE = "R-FCN's MATLAB Caffe"


def _same_code(cls, type_name, no_cpu_code=None, **extra):
    """`cls`, registered for this fork under `type_name`, citing this fork's lines."""
    attrs = {"__doc__": cls.__doc__, "source": SOURCE, **extra}
    if no_cpu_code:
        attrs["no_cpu_code"] = no_cpu_code
    return register(type_name, fork=FORK)(type(type_name, (cls,), attrs))


_same_code(rfcn.PSROIPooling, "PSROIPooling", "psroi_pooling_layer.cpp:55 and :61")
_same_code(rfcn.BoxAnnotatorOHEM, "BoxAnnotatorOHEM", "box_annotator_ohem_layer.cpp:68 and :74")
_same_code(rfcn.SoftmaxWithLossOHEM, "SoftmaxWithLoss", "softmax_loss_layer.cpp:98 and :104")
_same_code(rfcn.SmoothL1LossOHEM, "SmoothL1Loss", "smooth_L1_loss_layer.cpp:94 and :100")
_same_code(fastrcnn.ROIPooling, "ROIPooling", claims_files=False)
_same_code(rfcn.Scale, "Scale")
_same_code(rfcn.Accuracy, "Accuracy")


@register("BatchNorm", fork=FORK)
class BatchNorm(rfcn.BatchNorm):
    """py-R-FCN's Caffe's BatchNormLayer, except that Reshape gives x_norm_ the bottom's shape only
    with use_global_stats (batch_norm_layer.cpp:51-53): computing batch statistics, x_norm_ stays
    empty and its copies (cu:88-91, :99-108) move nothing; with global statistics the GPU code never
    touches it and the CPU code fills it (cpp:154-155, :166)."""

    def x_norm_shaped(self, run):
        return self.global_stats(run)
