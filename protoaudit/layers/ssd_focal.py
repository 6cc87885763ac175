"""SSD's Caffe with a focal loss (jiachen0212/ssd-focal_loss_caffe 071bfb3), as its sources shape its layers.

The repository publishes its Caffe's caffe.proto and the files of the two layers it adds, FocalLoss
(focal_loss_layer.hpp/.cpp/.cu, after chuanqi305/FocalLoss) and MultiBoxFocalLoss
(multibox_focal_loss_layer.hpp/.cpp), and names weiliu89/caffe's ssd branch as the rest. Its
caffe.proto is the SSD fork's with FocalLossParameter (alpha, gamma, axis) added, and three fields no
published code reads: relu6_param (no ReLU6 layer is published), ConvolutionParameter.half_pad and
PriorBoxParameter.reduce_boxes. The two layers are SSD's MultiBoxLoss and SoftmaxWithLoss with the
loss's arithmetic changed, line for line otherwise: diffed against weiliu89 4817bf8's
multibox_loss_layer.cpp and softmax_loss_layer.cpp/.cu, they differ only in names, in reading alpha
and gamma, and in the loss and gradient each element gets. So they allocate what SSD's do, and every
other layer is the SSD fork's (protoaudit.layers.ssd) or BVLC's.

File:line references are to that commit's files, at the repository's root.
"""
from . import conv, ssd
from .base import carry, register
from .losses import SoftmaxWithLoss, check_label_count

FORK = "ssd_focal"

carry(__name__, FORK, ssd.AnnotatedData, ssd.SSDData, ssd.SSDImageData, ssd.SSDWindowData, ssd.Permute, ssd.Normalize,
      ssd.SmoothL1Loss, ssd.MultiBoxLoss, ssd.DetectionOutput, ssd.DetectionEvaluate)

NO_CODE = ("the repository publishes its caffe.proto and its two focal loss layers only, and no code that reads "
           "{field}: protoaudit cannot tell what it does")


@register("FocalLoss", fork=FORK)
class FocalLoss(SoftmaxWithLoss):
    """FocalLossLayer: SoftmaxWithLossLayer with each label's loss -alpha (1 - p)^gamma log p.
    It builds the same inner Softmax from a copy of its own LayerParameter (focal_loss_layer.cpp:14-21,
    so softmax_param and its engine pick it as SoftmaxWithLoss's), keeps prob_ the bottom's size, a
    second top sharing it (:55-58, :90-92), borrows the bottom's diff for the per-label losses and
    prob_'s diff for the counts on the GPU (.cu:44-47, :117-123): SoftmaxWithLoss's buffers. The
    label count is checked along focal_loss_param.axis (cpp:45-54), the softmax runs along
    softmax_param.axis.

    Caffe-priv's and happynear's caffe.proto have a FocalLossParameter too, for layers of their own
    that protoaudit does not size: a file whose only fork type is FocalLoss is this fork's only with
    --fork ssd_focal."""

    claims_files = False

    def check_bottoms(self, bottoms):
        check_label_count(self, bottoms, self.fork_param("focal_loss_param").axis)


@register("MultiBoxFocalLoss", fork=FORK)
class MultiBoxFocalLoss(ssd.MultiBoxLoss):
    """MultiBoxFocalLossLayer: SSD's MultiBoxLossLayer whose SOFTMAX confidence loss is a FocalLoss,
    named NAME_focal_conf, loss weight 1, normalization NONE, focal_loss_param axis 1 and the layer's
    own alpha and gamma (multibox_focal_loss_layer.cpp:98-119), where SSD's is a SoftmaxWithLoss. The
    header declares SSD's blobs (loc_pred_, loc_gt_, loc_loss_, conf_pred_, conf_gt_, conf_loss_) and
    the same match lists, and the code fills and grows them as SSD's does (cpp:152-259, 262-376, no
    .cu): with mining_type NONE, as the repository's net trains, conf_pred_ shares the confidences'
    data (cpp:229-234) and gives them its diff after backward (:366-369)."""

    def softmax_conf(self):
        focal = self.fork_param("focal_loss_param")

        def setup(lp):
            lp.focal_loss_param.axis = 1
            lp.focal_loss_param.alpha, lp.focal_loss_param.gamma = focal.alpha, focal.gamma
        return self.inner("FocalLoss", "_focal_conf", 1.0, softmax=True, setup=setup)


@register("PriorBox", fork=FORK)
class PriorBox(ssd.PriorBox):
    """SSD's PriorBoxLayer: the fork's caffe.proto adds reduce_boxes (PriorBoxParameter field 14), and
    no published code reads it, so a layer that sets it is refused."""

    def num_priors(self):
        self.check(not self.fork_param("prior_box_param").reduce_boxes,
                   "reduce_boxes: true: " + NO_CODE.format(field="reduce_boxes"),
                   fix="drop reduce_boxes, or give the Caffe's own caffe.proto with --caffe-proto and the tops "
                       "of the layers after it with --input")
        return super().num_priors()


@register("Convolution", fork=FORK)
class Convolution(conv.Convolution):
    """BVLC's ConvolutionLayer: the fork's caffe.proto adds half_pad (ConvolutionParameter field 19),
    and no published code reads it, so a layer that sets it is refused; one that does not is BVLC's."""

    @classmethod
    def sized_as(cls, lp):
        return cls if lp.convolution_param.half_pad else conv.Convolution

    def reshape(self, bottoms):
        self.check(not self.lp.convolution_param.half_pad, "half_pad: true: " + NO_CODE.format(field="half_pad"),
                   fix="drop half_pad, or give the Caffe's own caffe.proto with --caffe-proto and the tops of the "
                       "layers after it with --input")
        return super().reshape(bottoms)
