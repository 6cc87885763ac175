"""The Caffe schemas protoaudit reads nets with: BVLC master and the forks whose field numbers clash.

Each schema is a FileDescriptorSet compiled from `proto/` (see proto/build.py) and loaded into a
descriptor pool of its own, so `caffe.NetParameter` can mean BVLC's or a fork's in one process.
"""
import functools
import os
import re
from typing import NamedTuple

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

HERE = os.path.dirname(os.path.abspath(__file__))

# The forks protoaudit reads, each compiled from proto/forks/NAME.proto, in the order they are
# tried; the text says which Caffe it is in messages, as a noun phrase that may end a clause
# ("protoaudit has no rule for it in TEXT; ..."). Their layer types are registered with the
# layers (protoaudit.layers.base.register(..., fork=NAME)).
FORKS = {
    "segnet": "caffe-segnet (alexgkendall/caffe-segnet)",
    "ducha": "ducha-aiki's fork (caffenet-benchmark)",
    "fastrcnn": "caffe-fast-rcnn (rbgirshick/caffe-fast-rcnn, py-faster-rcnn's Caffe)",
    "sphereface": "SphereFace's Caffe (wy1iu/sphereface)",
    "tongcheng": "Tongcheng's memory-efficient DenseNet Caffe (Tongcheng/caffe)",
    "priv": "soeaver's caffe-priv (py-RFCN-priv), which has ceil_mode pooling",
    "ssd": "SSD (weiliu89/caffe, branch ssd)",
    "faceboxes": "FaceBoxes' Caffe (sfzhang15/FaceBoxes: SSD's, with densified small anchors)",
    "textboxes": "TextBoxes' Caffe (MhLiao/TextBoxes: SSD's of 2016, each prior doubled half a cell lower)",
    "refinedet": "RefineDet's Caffe (sfzhang15/RefineDet: SSD's, whose loss and detection output read the "
                 "anchor refinement module's outputs)",
    "enet": "caffe-enet (TimoSaemann/caffe-enet)",
    "deeplab_v2": "DeepLab v2 (deeplab-public-ver2)",
    "pspnet": "PSPNet's Caffe (hszhao/PSPNet)",
    "deeplab_v1": "DeepLab v1 (DeepLab-Context)",
    "mobilenet_yolo": "MobileNet-YOLO's Caffe (eric612/MobileNet-YOLO, the SSD fork with YOLO, "
                      "DepthwiseConvolution, ReLU6 and SENet's Axpy)",
    "shufflenet": "BVLC Caffe with farmingyard's ShuffleChannel and ConvolutionDepthwise "
                  "(ShuffleNet, caffe-mobilenet)",
    "rfcn": "py-R-FCN's Caffe (Microsoft/caffe at 1a2be8e)",
    "rfcn_matlab": "R-FCN's MATLAB Caffe (daijifeng001/caffe-rfcn, the Caffe of daijifeng001/R-FCN)",
    "caffe_face": "caffe-face (ydwen/caffe-face), which has CenterLoss",
    "hed": "HED's Caffe (s9xie/hed)",
    "lim0606": "lim0606's Caffe (lim0606/caffe, GoogLeNet-BN's)",
    "cysu": "Cysu's Caffe (Cysu/caffe, branch domain-guided-dropout)",
    "tsn": "TSN's Caffe (yjxiong/caffe, branch action_recog)",
    "intel": "Intel Caffe (intel/caffe)",
    "deconvnet": "DeconvNet's Caffe (HyeonwooNoh/caffe)",
    "happynear": "happynear's Caffe (happynear/caffe-windows, branch ms: NormFace's and AM-Softmax's)",
    "c3d": "C3D v1.1's Caffe (facebook/C3D, C3D-v1.1)",
    "rcf": "RCF's Caffe (yun-liu/rcf), which has AutoCrop",
    "caffe3d": "3D-Caffe (yulequan/3D-Caffe, branch 3D-Caffe: N-D pooling, HDF5Data cropping volumes)",
    "largemargin": "L-Softmax's Caffe (wy1iu/LargeMargin_Softmax_Loss: LargeMarginInnerProduct, BN)",
    "yolov2": "YOLOv2's Caffe port (gklz1982/caffe-yolov2: BoxData, Reorg, RegionLoss)",
    "general_pooling": "generalized pooling's Caffe (chl260/general-pooling: tree and gated max-average pooling)",
    "caffe_lstm": "Junhyuk Oh's caffe-lstm (junhyukoh/caffe-lstm: Lstm)",
    "ctpn": "CTPN's Caffe (tianzhi0549/CTPN: Junhyuk Oh's Lstm on (T, N) sequences, Transpose, Reverse)",
    "video_caffe": "video-caffe (chuckcho/video-caffe: cuDNN's NdConvolution and NdPooling, VideoData)",
    "ssdh": "SSDH's Caffe (kevinlin311tw/Caffe-DeepBinaryCode: K1_EuclideanLoss, K2_EuclideanLoss)",
    "video_triplet": "caffe-video_triplet (xiaolonw/caffe-video_triplet: Norm, RankHardLoss, ImageData's pair_size)",
    "triplet_loss": "wujiyang's Triplet-Loss Caffe (wujiyang/Triplet-Loss: caffe-video_triplet's layers on a 2017 BVLC Caffe)",
    "goodluckcwl": "Weiliang Chen's Caffe (goodluckcwl/custom-caffe: happynear's with ImageFloatData, WeightEuclideanLoss)",
    "ssd_focal": "SSD's Caffe with a focal loss (jiachen0212/ssd-focal_loss_caffe: FocalLoss, MultiBoxFocalLoss)",
    "caffeonspark": "CaffeOnSpark's Caffe (yahoo/caffe: MemoryData's source and share_in_parallel)",
    "crfrnn": "CRF-RNN's Caffe (torrvision/crfasrnn caffe-crfrnn, V1 layers only: MULTI_STAGE_MEANFIELD, FCN's CROP)",
    "crfrnn_v2": "CRF-RNN's later Caffe (torrvision/caffe, torrvision/crfasrnn's submodule: MultiStageMeanfield in V2 nets)",
    "posenet": "PoseNet's Caffe (alexgkendall/caffe-posenet: a Data label of the record's float_data, Dropout's "
               "sample_weights_test)",
    "caffe_pro": "caffe-pro (yihui-he/caffe-pro, channel pruning's Caffe: ImageData's new_dim and bicubic)",
    "hsmyy": "BVLC Caffe with hsmyy's CPU CenterLoss (hsmyy/CenterLoss_Caffe_Mnist: cluster_num, alpha, loss_weight)",
    "jfda": "BVLC Caffe with JFDA's MTCNN loss (luoyetx/Joint-Face-Detection-and-Alignment: JfdaLoss, jfda_loss_param)",
    "oftenliu": "oftenliu's MTCNN Caffe (oftenliu/caffe, of oftenliu/caffe-mtcnn: OftenMtcnnClassBridge, "
                "OftenMtcnnSoftmaxLoss, OftenMtcnnAccuracy, OftenMtcnnEuclideanLoss, OftenMtcnnLandMarkLoss)",
    "caffe_ocr": "caffe_ocr's Caffe (senlinuc/caffe_ocr: Baidu's warp-ctc as WarpCTCLoss, CTCGreedyDecoder, "
                 "multi-label Data and ImageData, Junhyuk Oh's Lstm on (T, N, I) sequences, Transpose, Reverse, "
                 "Tongcheng's DenseBlock)",
    "caffe_gan": "longriyao/caffe_GAN's Caffe (a 2016 BVLC Caffe whose ParamSpec.param_propagate_down says which "
                 "param diffs a layer's backward writes, over lr_mult)",
    "e2e_face": "e2e_face's Caffe (mikuhatsune/e2e_face: a 2017 BVLC Caffe with its caffe_modification/ files: "
                "SpatialTransformer, CenterLoss, HDF5Data's scale, mirror, mean_value and crop_size)",
    "nvcaffe": "NVIDIA's Caffe 0.15 (NVIDIA/caffe, branch caffe-0.15: DIGITS' DetectNet, with "
               "DetectNetTransformation and L1Loss)",
    "greentea": "naibaf7's OpenCL Caffe (naibaf7/caffe, Greentea: BVLC's opencl branch)",
    "affordance_net": "affordance-net's Caffe (nqanh/affordance-net, caffe-affordance-net: py-faster-rcnn's Caffe "
                      "with ROIAlignment)",
    "flownet": "liruoteng/FlowNet's Caffe (FlowNet's Correlation, L1Loss, Downsample and Mean on a 2016 BVLC "
               "Caffe, with FloData and a one-top ImageData)",
    "svs": "SVS's Caffe (lawy623/SVS: FlowNet 2.0's Caffe with DispNet's Correlation1D, NegReLU, L1LossKitti and "
           "a three-bottom L1Loss)",
    "liteflownet": "LiteFlowNet's Caffe (twhui/LiteFlowNet: FlowNet 2.0's Caffe with Warp, CustomData and the "
                   "augmentation layers)",
    "flownet2": "FlowNet 2.0's Caffe (lmb-freiburg/flownet2: FlowWarp, ChannelNorm, Accum, LpqLoss, Resample, "
                "CustomData and the augmentation layers)",
    "qnn": "caffe-quant-QNN (whitenightwu/caffe-quant-QNN: BVLC Caffe with QuanConvolution, "
           "QuanInnerProduct and Quantization)",
    "ristretto": "Ristretto (pmgysel/caffe: BVLC Caffe with ConvolutionRistretto, FcRistretto, "
                 "DeconvolutionRistretto and LRNRistretto)",
    "openvino": "OpenVINO's training toolbox Caffe (openvinotoolkit/training_toolbox_caffe: Intel's SSD Caffe with "
                "PriorBoxClustered and a normalizing InnerProduct)",
    "auto_pruning": "Auto_pruning's Caffe (NHZlX/Auto_pruning: BVLC Caffe with Dynamic Network Surgery's CConvolution "
                    "and CInnerProduct, pruned on a schedule, and ConvolutionDepthwise)",
    "drml": "DRML's Caffe (jellyDL/drml_caffe: BVLC Caffe 1.0 with Deep Region and Multi-label Learning's Box, "
            "Splice, ImageDataMultilabel and MultiSigmoidCrossEntropyLoss)",
    "picanet": "PiCANet's Caffe (nian-liu/PiCANet: a 2017 BVLC Caffe with DeepLab v2's layers, attentive pooling "
               "(AttPooling), ReNetLSTM and one col_buffer_ for every convolution)",
    "cascade": "Cascade R-CNN's Caffe (zhaoweicai/cascade-rcnn: a 2017 BVLC Caffe with DetectionData, EvalData, "
               "BoxGroupOutput, ProposalTarget, DecodeBBox, ROIAlign, ScaleRoute, FrcnnOutput and the detection "
               "losses)",
    "mscnn": "MS-CNN's Caffe (zhaoweicai/mscnn: a 2016 BVLC Caffe with ImageGtData, BoxOutput, ProposalTarget, "
             "DecodeBBox, ROIPooling, ROIAlign, DetectionLoss and DetectionAccuracy)",
    "pgcnn": "BVLC Caffe with PG-CNN's layers (mysee1989/PG-CNN: MultiLabelImageData, MultiROIPooling)",
    "dyndilation": "caffe-dynamic-dilation (SSAW14/LearnableDilationNetwork: DeepLab v2's Caffe whose Convolution "
                   "takes a dilation map as a second bottom, with Truncation and Duplicate)",
    "ggl": "GGL's Caffe (liu-xb/GGL: a 2016 BVLC Caffe with NormalizationL2, VarLoss and SetLoss2)",
    "jaanet": "BVLC Caffe with JAA-Net's layers (ZhiwenShao/JAANet: AlignDataTransform, AUMaskBasedLand, Division, "
              "Combination, DiceCoefLoss, EuclideanLoss2-5, and its Data and SoftmaxWithLoss)",
    "arl": "BVLC Caffe with ARL's layers (ZhiwenShao/ARL: JAA-Net's Division, Combination and EuclideanLoss2-4, "
           "MultiStageMeanfieldAU3, L2Norm, CosineSimilarityLoss, EuclideanLoss6 and its SigmoidCrossEntropyLoss)",
    "tl_ssd": "the traffic-light SSD's Caffe (julimueller/tl_ssd: SSD's with PriorBox offset_w/offset_h and "
              "per-prior traffic-light states in DetectionOutput)",
    "faceboxes_fixed": "a FaceBoxes Caffe with fixed-size anchors (zihaozhang9/FaceBoxes: SSD's with PriorBox "
                       "fixed_size, fixed_ratio and density)",
    "hrsod": "HRSOD's Caffe (yi94code/HRSOD caffe-master: a 2016 BVLC Caffe with OutputDecay, SmoothPooling and "
             "SigmoidMultiLabelLoss)",
    "davsod": "DAVSOD's ConvLSTM Caffe (DengPingFan/DAVSOD mycaffe-convlstm: a 2017 BVLC Caffe with PSPNet's BN and "
              "Interp, ConvLSTM and DummyForward)",
    "tt100k": "Tsinghua-Tencent 100K's Caffe (asyncbridge/tsinghua-tencent-100k code/caffe: an August 2015 BVLC Caffe "
              "with DriveNet's DriveData, Tiling and L1Loss)",
    "glad": "GLAD's Caffe (southatsouth/GLAD caffe/: an August 2016 BVLC Caffe whose Crop takes one bottom and "
            "crop_param's height and weight)",
    "jiangqh": "JiangQH's Caffe (JiangQH/caffe, of JiangQH/Hypercolumns-Based-Surface-Normal-Recovery: a May 2016 "
               "BVLC Caffe with ImageNormalData and HyperColumns)",
    "mixup": "BVLC Caffe with Bag-of-Tricks' Mixup (Wheatly2/Bag-of-Tricks-for-Image-Classification: a BVLC "
             "caffe.proto from before clip_param, with mixup_param, label_smooth_param and drop_block_param)",
    "chaidnn": "CHaiDNN (Xilinx/CHaiDNN, the FPGA library whose parser reads Caffe nets: a 2017 "
               "BVLC caffe.proto with SSD's parameters, quantization_param and the layers' precision_param)",
    "kcnet": "Chen Feng's Caffe (simbaforrest/caffe, tag kcnet, KCNet's: an April 2018 BVLC Caffe with "
             "TensorTranspose, MatrixMultiplication, KernelCorrelation and GraphPooling)",
    "drml_ejulio": "Kaili Zhao's DRML layers as ejulio/DRML ports them (a 2016 BVLC Caffe with MultilabelImageData, "
                   "Box, Splice and MultiSigmoidCrossEntropyLoss)",
}
SCHEMA_NAMES = ("bvlc",) + tuple(FORKS)

# Forks grown from another fork whose layers they keep: caffe-enet is caffe-segnet's BN, Upsample and
# DenseImageData ported to a 2017 BVLC Caffe, PSPNet's Caffe is deeplab-public-ver2 plus its BN
# layer (their sources are the same files elsewhere). A file both read is the ancestor's: the
# descendant is needed only for the fields and layer types it adds.
# MobileNet-YOLO's Caffe is the SSD fork with YOLO's and MobileNet's layers added; py-R-FCN's
# (Microsoft/caffe) keeps caffe-fast-rcnn's ROIPooling and SmoothL1Loss. RCF's Caffe is HED's
# ImageLabelmapData (and its prefetching base) ported to a 2016 BVLC Caffe, with AutoCrop added.
# R-FCN's MATLAB Caffe is the elder, but py-R-FCN's reads its nets' fields alike and keeps its layers
# (as the OHEM ones): a file both read and build is py-R-FCN's, as it always was here.
# CTPN's Caffe took Junhyuk Oh's Lstm and made it read (T, N, ...) blobs: a file both read (an Lstm and no
# Transpose or Reverse) is caffe-lstm's.
DESCENDS_FROM = {"enet": "segnet", "pspnet": "deeplab_v2", "ctpn": "caffe_lstm",
                 "mobilenet_yolo": "ssd", "faceboxes": "ssd", "refinedet": "ssd", "textboxes": "ssd",
                 "ssd_focal": "ssd", "tl_ssd": "ssd", "faceboxes_fixed": "ssd",
                 "rfcn": "fastrcnn", "rfcn_matlab": "rfcn",
                 "triplet_loss": "video_triplet",  # wujiyang/Triplet-Loss ports caffe-video_triplet's layers
                 "goodluckcwl": "happynear",  # goodluckcwl/custom-caffe is happynear/caffe-windows (ms) of early 2018
                 "rcf": "hed",
                 # senlinuc/caffe_ocr took Tongcheng's DenseBlock and CTPN's Lstm, Transpose and Reverse
                 "caffe_ocr": ("tongcheng", "ctpn"),
                 # mikuhatsune/e2e_face's caffe_modification/ took caffe-face's CenterLoss: a file both read
                 # (a CenterLoss and no SpatialTransformer) is caffe-face's
                 "e2e_face": "caffe_face",
                 # nqanh/affordance-net's Caffe keeps caffe-fast-rcnn's ROIPooling and SmoothL1Loss: a file
                 # both read (no ROIAlignment) is caffe-fast-rcnn's
                 "affordance_net": "fastrcnn",
                 # SVS's and LiteFlowNet's Caffes grew from FlowNet 2.0's, not the other way, but they were
                 # shipped first: a file one of the FlowNet forks reads stays theirs, and FlowNet 2.0's is
                 # taken only for its own types (FlowWarp, ChannelNorm, Accum, LpqLoss)
                 "flownet2": ("flownet", "svs", "liteflownet"),
                 # OpenVINO's training toolbox Caffe is Intel's port of SSD's layers to a 2017 BVLC Caffe: a
                 # file SSD's reads (no PriorBoxClustered, no field of its own) is SSD's
                 "openvino": "ssd",
                 # Auto_pruning's Caffe carries farmingyard's ConvolutionDepthwise (MobileNet-YOLO's files), as
                 # caffe-mobilenet's does: a file with no type of its own (no CConvolution) stays shufflenet's
                 "auto_pruning": "shufflenet"}
# PiCANet's Caffe carries DeepLab v2's ImageSegData and Interp: a file with no type of its own (no
# AttPooling or ReNetLSTM) stays DeepLab v2's
DESCENDS_FROM["picanet"] = "deeplab_v2"
# Cascade R-CNN's Caffe carries R-FCN's PSROIPooling (the same files as Microsoft/caffe 1a2be8e) and has a
# ROIPooling and a SmoothL1Loss of its own: a file with none of its own types or fields (a py-faster-rcnn or
# R-FCN net) stays caffe-fast-rcnn's or py-R-FCN's, and one with ceil_mode pooling and no type of its own
# stays caffe-priv's, the fork shipped first for that field. It grew from MS-CNN's Caffe: a file both read
# (MS-CNN's types only) is MS-CNN's
DESCENDS_FROM["cascade"] = ("mscnn", "fastrcnn", "rfcn", "priv")
# MS-CNN's Caffe has a ROIPooling (pad_ratio) and a SmoothL1Loss of its own: a file with none of its own types
# or fields (a py-faster-rcnn net) stays caffe-fast-rcnn's or py-R-FCN's
DESCENDS_FROM["mscnn"] = ("fastrcnn", "rfcn")
# caffe-dynamic-dilation is deeplab-public-ver2 with a learnable dilation: a file with none of its own types or
# fields (no Truncation, Duplicate, truncation_param) stays DeepLab v2's
DESCENDS_FROM["dyndilation"] = "deeplab_v2"
# DAVSOD's ConvLSTM Caffe carries PSPNet's BN and Interp (bn_layer, cudnn_bn_layer and interp files byte for byte):
# a file with none of its own types or fields (no ConvLSTM, lstm_conv_param) stays PSPNet's
DESCENDS_FROM["davsod"] = "pspnet"
# ARL's layers are JAA-Net's Division and Combination (the same files) and EuclideanLoss2-4 (the same code) with
# layers of its own: a file with none of its own types or fields (no MultiStageMeanfieldAU3, L2Norm,
# CosineSimilarityLoss, EuclideanLoss6, multi_stage_meanfield_au3_param) stays JAA-Net's
DESCENDS_FROM["arl"] = "jaanet"
# CHaiDNN's caffe.proto carries SSD's PriorBox, Normalize, Permute and DetectionOutput parameters (SSD's messages, field
# for field): a file SSD's reads (no precision_param, quantization_param or xcustom_param) stays SSD's
DESCENDS_FROM["chaidnn"] = "ssd"
# Chen Feng's Caffe carries SSD's Permute (its permute_layer files and PermuteParameter): a file SSD's caffe.proto reads
# (a Permute, no TensorTranspose or field of its own) stays SSD's
DESCENDS_FROM["kcnet"] = "ssd"
# ejulio/DRML's Box, Splice and MultiSigmoidCrossEntropyLoss are jellyDL/drml_caffe's files: a file both read (no
# MultilabelImageData) stays drml's
DESCENDS_FROM["drml_ejulio"] = "drml"
# Descendants whose caffe.proto reads a file as their ancestor's does (FaceBoxes' is SSD's byte for
# byte; TextBoxes' is SSD's of 2016, fewer fields; R-FCN's MATLAB Caffe's has py-R-FCN's fields by the
# same names), so that only a build tells
# them apart: where the ancestor's layers stop on one of Caffe's checks and the descendant's build the
# net, the file is the descendant's (protoaudit.audit, said as an assumption with the --fork that shows
# the ancestor's refusal).
# PoseNet's Caffe is a January 2016 BVLC Caffe whose Data layer gives the record's float_data as the label,
# and whose Dropout takes caffe-segnet's sample_weights_test (both are Alex Kendall's; caffe-enet took it
# too): its caffe.proto reads their files, and only a build tells it from them. A fork listed here is never
# chosen by reading where the fork it is listed under reads the file too (protoaudit.read.load).
# affordance-net's caffe.proto has no field py-R-FCN's lacks but roi_alignment_param and roi_alignment2_param:
# a file py-R-FCN's reads (pva-faster-rcnn's BatchNorm nets with ROIPooling) is py-R-FCN's.
# NVIDIA's Caffe 0.15 and FlowNet's Caffes each have an L1Loss, of other code: a file whose only fork type is
# L1Loss, with no l1_loss_param, is read by all of them and stays NVIDIA's, as it was before FlowNet's were
# shipped; FlowNet's nets carry l1_loss_param or a type of their own. Tsinghua-Tencent 100K's Caffe has a third
# L1Loss (with GPU code), and its nets carry DriveData or Tiling: a file with L1Loss alone stays NVIDIA's.
SAME_FIELDS = {"ssd": ("faceboxes", "textboxes"), "rfcn": ("rfcn_matlab", "affordance_net"),
               "bvlc": ("posenet",), "segnet": ("posenet",), "enet": ("posenet",),
               "nvcaffe": ("flownet", "svs", "liteflownet", "flownet2", "tt100k"),
               # Greentea's and OpenVINO's toolbox Caffe each have a PoolingParameter.dilation (of other code:
               # OpenVINO's stops on one other than 1 outside MDS pooling): a file whose only field of theirs is
               # that stays Greentea's, as it was before the toolbox was shipped
               "greentea": ("openvino",)}


def described(name):
    """How messages name a schema: BVLC Caffe, the fork's own words, or the user's file."""
    if name.startswith(USER_PREFIX):
        return f"your caffe.proto ({user_path(name)})"
    if "+" in name:  # a fork's layers with another's added (protoaudit.layers.base.fork_layers)
        first, *others = name.split("+")
        return f"{described(first)} with layer types of {' and of '.join(described(o) for o in others)}"
    return "BVLC Caffe" if name == "bvlc" else FORKS.get(name, name)


USER_PREFIX = "user:"  # a schema compiled from --caffe-proto FILE is named "user:FILE"
_USER_SCHEMAS = {}


def _user_name(proto_path):
    """The schema name of a user's caffe.proto: "user:" and its path, a "+" in it escaped ("A+B" names a
    fork with another's layer types) and so "%" too."""
    return USER_PREFIX + proto_path.replace("%", "%25").replace("+", "%2B")


def user_path(name):
    """The path of the user's caffe.proto a schema name holds (_user_name)."""
    return name[len(USER_PREFIX):].replace("%2B", "+").replace("%25", "%")


_CLASSES = {}  # (id of a schema's pool, message name) -> its message class; the pools live as long


class Schema(NamedTuple):
    """One Caffe dialect: its message classes, by their names in caffe.proto. (An immutable
    record: a NamedTuple costs a start a fifth of what a frozen dataclass's generated methods do.)"""

    name: str
    pool: descriptor_pool.DescriptorPool
    dialect: str = None  # whose layers the nets it reads use: its own name, or for a user's file the closest
    predates_v2: bool = False  # its caffe.proto has V1 layers only (the V2 ones are protoaudit's, _add_v2_layers)

    @property
    def layers(self):
        """The name layers are registered under for nets read with this schema."""
        return self.dialect or self.name

    def message(self, type_name):
        """The message class `caffe.<type_name>` of this schema (made once: protobuf's
        GetMessageClass makes a class anew at each call, nested messages and all)."""
        key = (id(self.pool), type_name)
        found = _CLASSES.get(key)
        if found is None:
            found = _CLASSES[key] = message_factory.GetMessageClass(self.pool.FindMessageTypeByName(f"caffe.{type_name}"))
        return found

    def has_message(self, type_name):
        try:
            self.pool.FindMessageTypeByName(f"caffe.{type_name}")
        except KeyError:
            return False
        return True

    @property
    def NetParameter(self):
        return self.message("NetParameter")

    @property
    def SolverParameter(self):
        return self.message("SolverParameter")

    @property
    def LayerParameter(self):
        return self.message("LayerParameter")


def load_schema(name):
    """The schema of that name: compiled as protoaudit/read/schemas/<name>.desc, or a user's
    file compiled with user_schema. "A+B" (fork A with layer types borrowed from B: fork_layers) is
    A's: B lends classes, not fields."""
    name = name.split("+", 1)[0]
    if name in _USER_SCHEMAS:
        return _USER_SCHEMAS[name]
    return _shipped(name)


@functools.cache
def _shipped(name):
    with open(os.path.join(HERE, "schemas", f"{name}.desc"), "rb") as f:
        return _schema(name, f.read())


def _schema(name, descriptor_set, dialect=None):
    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set)
    pool = descriptor_pool.DescriptorPool()
    old = False
    for proto in files.file:
        if name != "bvlc" and _predates_v2(proto):
            _add_v2_layers(proto)
            old = True
        pool.Add(proto)
    return Schema(name, pool, dialect, old)


@functools.cache
def differing_names(name, accepted_only=False):
    """What a text would have to use for schema `name` to read it otherwise than BVLC's does: the
    names of fields one has and the other lacks or types differently, and of enum values one has
    and the other lacks, in each message and enum both have (a message or enum only one has is
    reached through such a field); and (field, number) for such a value given as its number. A
    file that uses none of them reads the same with both. `accepted_only`: only what schema `name`
    accepts where BVLC's does not (a strict reading BVLC's fails can succeed with `name` only if
    the text uses one): not a field or value only BVLC's has, nor a field BVLC's repeats where
    `name` has it once, of the same type."""
    def walk(pool):
        found = {}
        file = pool.FindFileContainingSymbol("caffe.NetParameter")
        stack = list(file.message_types_by_name.values())
        found.update((e.full_name, e) for e in file.enum_types_by_name.values())
        while stack:
            m = stack.pop()
            found[m.full_name] = m
            stack += m.nested_types
            found.update((e.full_name, e) for e in m.enum_types)
        return found

    ours, theirs = walk(load_schema(name).pool), walk(load_schema("bvlc").pool)
    names, numbers = set(), set()
    enum_fields = {}  # enum name -> the fields of that type, in either schema
    for found in (ours, theirs):
        for m in found.values():
            for f in getattr(m, "fields", ()):
                if f.enum_type is not None:
                    enum_fields.setdefault(f.enum_type.full_name, set()).add(f.name)
    for full_name in ours.keys() & theirs.keys():
        a, b = ours[full_name], theirs[full_name]
        if hasattr(a, "fields_by_name"):
            fa, fb = dict(a.fields_by_name), dict(b.fields_by_name)
            names.update(fa.keys() - fb.keys() if accepted_only else fa.keys() ^ fb.keys())
            names.update(f for f in fa.keys() & fb.keys() if _field_kind(fa[f]) != _field_kind(fb[f])
                         and not (accepted_only and _field_kind(fa[f]) == _field_kind(fb[f], repeated=False)))
        else:
            ours_values, theirs_values = {(v.name, v.number) for v in a.values}, {(v.name, v.number) for v in b.values}
            for value, number in (ours_values - theirs_values if accepted_only else ours_values ^ theirs_values):
                names.add(value)
                numbers.update((f, str(number)) for f in enum_fields.get(full_name, ()))
    return frozenset(names), frozenset(numbers)


def _field_kind(field, repeated=None):
    """(type, repeated, message or enum type) of a field; `repeated` given stands for its own."""
    return (field.type, field.is_repeated if repeated is None else repeated,
            (field.message_type or field.enum_type).full_name if field.message_type or field.enum_type else "")


def ancestors(name):
    """The forks `name` descends from (a fork may have grown from several), nearest first."""
    found, todo = [], [name]
    while todo:
        parents = DESCENDS_FROM.get(todo.pop(0), ())
        for parent in (parents,) if isinstance(parents, str) else parents:
            if parent not in found:
                found.append(parent)
                todo.append(parent)
    return found


def _predates_v2(proto):
    """A caffe.proto from before V2 layers (late 2014): its LayerParameter is the V1 one."""
    net = next((m for m in proto.message_type if m.name == "NetParameter"), None)
    return net is not None and not any(f.name == "layer" for f in net.field)


def _add_v2_layers(proto):
    """Give a pre-V2 fork's schema what Caffe's V1-to-V2 upgrade writes into, as BVLC's schema has
    it: its LayerParameter is renamed V1LayerParameter (the text reads as before), and a V2
    LayerParameter is added with BVLC's common fields (name, type, bottom, top, phase, loss_weight,
    param, blobs, propagate_down, include, exclude) and every *_param message field of the fork's
    own V1 layer, so the fork's parameters (DeepLab v1's conv `hole`, interp_param...) travel along.
    NetParameter gets BVLC's `layer` field (100). Nothing of the fork's own text format changes."""
    bvlc = {m.name: m for m in _bvlc_file().message_type}
    old = ".caffe.LayerParameter"
    for message in _all_messages(proto.message_type):
        for f in message.field:
            if f.type_name == old or f.type_name.startswith(old + "."):
                f.type_name = ".caffe.V1LayerParameter" + f.type_name[len(old):]
    v1 = next(m for m in proto.message_type if m.name == "LayerParameter")
    v1.name = "V1LayerParameter"
    if not any(m.name == "ParamSpec" for m in proto.message_type):
        proto.message_type.add().CopyFrom(bvlc["ParamSpec"])
    layer = proto.message_type.add()
    layer.name = "LayerParameter"
    for f in bvlc["LayerParameter"].field:
        if f.name in V2_COMMON_FIELDS:
            layer.field.add().CopyFrom(f)
    for number, f in enumerate((f for f in v1.field if f.name.endswith("_param") and f.type_name), start=100):
        added = layer.field.add()
        added.CopyFrom(f)
        added.number = number
    net = next(m for m in proto.message_type if m.name == "NetParameter")
    net.field.add().CopyFrom(next(f for f in bvlc["NetParameter"].field if f.name == "layer"))


V2_COMMON_FIELDS = ("name", "type", "bottom", "top", "phase", "loss_weight", "param", "blobs", "propagate_down",
                    "include", "exclude")


def _all_messages(messages):
    for m in messages:
        yield m
        yield from _all_messages(m.nested_type)


@functools.cache
def _bvlc_file():
    with open(os.path.join(HERE, "schemas", "bvlc.desc"), "rb") as f:
        return descriptor_pb2.FileDescriptorSet.FromString(f.read()).file[0]


def user_schema(proto_path):
    """A user's own caffe.proto (--caffe-proto), compiled now with the protoc that grpcio-tools
    brings (no system protoc), loaded into a pool of its own. Its nets' layers are sized as the
    shipped schema closest to it sizes them (the most LayerParameter fields in common)."""
    from ..errors import InputError
    from . import special

    path = os.path.abspath(proto_path)
    name = _user_name(proto_path)
    if name in _USER_SCHEMAS:
        return _USER_SCHEMAS[name]
    special.refuse(proto_path, ".proto file")
    if not os.path.isfile(path):
        raise InputError("no such file", file=proto_path, fix="give the path of your Caffe's src/caffe/proto/caffe.proto")
    _check_proto_file(path, proto_path)
    try:
        from grpc_tools import protoc  # noqa: F401  (run below in a process of its own)
    except ImportError:
        raise InputError("--caffe-proto compiles your caffe.proto with protoc, which comes with grpcio-tools",
                         file=proto_path, fix="pip install 'protoaudit[caffe-proto]'") from None
    import tempfile

    folder, base = os.path.split(path)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "schema.desc")
        status, said = _protoc([f"-I{folder}", f"--descriptor_set_out={out}", base])
        if status is None:
            raise InputError(f"protoc did not finish compiling it within {PROTOC_SECONDS} s", file=proto_path,
                             fix="give the caffe.proto your Caffe was built with (does it import a pipe, a "
                             "device or a very large file?)")
        if status != 0 or not os.path.exists(out):
            errors = [m for m in map(_PROTOC_ERROR.match, said.splitlines()) if m]
            raise InputError("protoc could not compile it" + (f": {errors[0].group(2)}" if errors else ""),
                             file=proto_path, line=int(errors[0].group(1)) if errors else None,
                             fix="give the caffe.proto your Caffe was built with")
        with open(out, "rb") as f:
            compiled = f.read()
    schema = _schema(name, compiled)
    if not schema.has_message("NetParameter") or not schema.has_message("LayerParameter"):
        raise InputError("this .proto has no caffe.NetParameter or caffe.LayerParameter", file=proto_path,
                         fix="give Caffe's own caffe.proto (package caffe)")
    schema = Schema(name, schema.pool, _closest(schema), schema.predates_v2)
    _USER_SCHEMAS[name] = schema
    return schema


_PROTOC_ERROR = re.compile(r".*?\.proto:(\d+):\d+: (.*)$")  # protoc's "file.proto:LINE:COL: message"


# A caffe.proto is some 60 KB (the largest fork's, 200 KB); protoc takes seconds and hundreds of
# MB for a few MB of messages, and a .proto may import a pipe or a device, which it reads forever.
MAX_PROTO_BYTES = 2 * 2**20
PROTOC_SECONDS = 10
PROTOC_MEMORY = 2 * 2**30  # bytes of address space
_PROTOC = "import sys; from grpc_tools import protoc; sys.exit(protoc.main(sys.argv))"


_IMPORT = re.compile(rb'^[ \t]*import[ \t]+(?:(?:public|weak)[ \t]+)?"([^"\n]*)"', re.M)


def _check_proto_file(path, shown):
    """A .proto too large, or binary, or importing a pipe or a device (which protoc would read
    forever) is refused before protoc reads it."""
    from ..errors import InputError
    from . import special
    from .load import looks_binary

    if os.path.getsize(path) > MAX_PROTO_BYTES:
        raise InputError(f"the file is over {MAX_PROTO_BYTES // 2**20} MiB, far larger than any caffe.proto",
                         file=shown, fix="give the caffe.proto your Caffe was built with")
    with open(path, "rb") as f:
        data = f.read()
    if looks_binary(data[:65536]):
        raise InputError("this is a binary file, not a .proto", file=shown,
                         fix="give the caffe.proto your Caffe was built with (src/caffe/proto/caffe.proto)")
    for m in _IMPORT.finditer(data):
        imported = os.path.join(os.path.dirname(path), m.group(1).decode("utf-8", errors="replace"))
        found = special.kind(imported)
        if found is not None:
            raise InputError(f"it imports {m.group(1).decode('utf-8', errors='replace')}, which is {found}",
                             file=shown, line=data.count(b"\n", 0, m.start()) + 1, fix=special.FIX)


def _protoc(args):
    """(exit status, what it wrote on stderr) of grpcio-tools' protoc run in a process of its own,
    bounded in time and memory (status None: it did not finish), so nothing a .proto imports can
    hang or exhaust protoaudit; protoaudit says what went wrong in one line of its own."""
    import resource
    import subprocess
    import sys

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (PROTOC_MEMORY, PROTOC_MEMORY))

    try:
        run = subprocess.run([sys.executable, "-c", _PROTOC, *args], capture_output=True, timeout=PROTOC_SECONDS,
                             preexec_fn=limit, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, ""
    return run.returncode, run.stderr.decode("utf-8", errors="replace")


def _closest(schema):
    """The shipped schema whose LayerParameter shares the most fields (name and number) with this one."""
    def fields(s):
        return {(f.name, f.number) for f in s.pool.FindMessageTypeByName("caffe.LayerParameter").fields}

    mine = fields(schema)
    scores = {n: len(mine & fields(_shipped(n))) / len(mine | fields(_shipped(n))) for n in SCHEMA_NAMES}
    return max(SCHEMA_NAMES, key=lambda n: (scores[n], n == "bvlc"))
