"""Which Caffe fork a layer type protoaudit has no rule for most likely comes from: by the type's
name, else by the names of the fields its layer carries. Each entry was read in that fork's own
caffe.proto or layer sources; the words name the fork in messages."""

# type name -> fork
TYPES = {
    "DepthwiseConvolution": "a MobileNet fork (yonghenglh6/DepthwiseConvolution)",
    "ConvolutionDepthwise": "a MobileNet/ShuffleNet fork (eric612/MobileNet-YOLO, farmingyard/ShuffleNet)",
    "ReLU6": "MobileNet-YOLO's or an SSDLite port's Caffe (eric612/MobileNet-YOLO: relu6_param)",
    "PSROIPooling": "R-FCN's Caffe (daijifeng001/caffe-rfcn, py-R-FCN)",
    "ShuffleChannel": "ShuffleNet's layer (farmingyard/ShuffleNet)",
    "Axpy": "SENet's Caffe (hujie-frank/SENet)",
    "ImageLabelmapData": "HED's Caffe (s9xie/hed)",
    "Yolov3": "MobileNet-YOLO's Caffe (eric612/MobileNet-YOLO)",
    "Yolov3DetectionOutput": "MobileNet-YOLO's Caffe (eric612/MobileNet-YOLO)",
    "CenterLoss": "caffe-face (ydwen/caffe-face)",
    "GuidedDropout": "Cysu's dgd Caffe (Cysu/caffe, dgd_person_reid)",
    "Convolution3D": "C3D's Caffe (facebook/C3D)",
    "Pooling3D": "C3D's Caffe (facebook/C3D)",
    "VideoData": "a video fork: yjxiong/caffe (TSN) or C3D (facebook/C3D)",
    **dict.fromkeys(("GlobalLSEMargin", "MovingNormalize"),
                    "happynear's Caffe (happynear/caffe-windows, branch ms: NormFace, AM-Softmax)"),
    **dict.fromkeys(("LabelSpecificRescale", "LabelSpecificMargin", "LabelSpecificHardMargin",
                     "LabelSpecificAffine", "RadialRemovalMargin"),
                    "happynear's Caffe, branch experiment (happynear/caffe-windows)"),
    "NdConvolution": "video-caffe (chuckcho/video-caffe: cuDNN's N-D convolution, kernel_shape)",
    "NdPooling": "video-caffe (chuckcho/video-caffe: cuDNN's N-D pooling, kernel_shape)",
    "PoolingND": "3D-Caffe (yulequan/3D-Caffe, branch 3D-Caffe: N-D pooling)",
    "Lstm": "caffe_ocr (senlinuc/caffe_ocr: Junhyuk Oh's LSTM, lstm_param)",
    **dict.fromkeys(("WarpCTCLoss", "CTCGreedyDecoder"), "a CTC fork (senlinuc/caffe_ocr, with Baidu's warp-ctc)"),
    "ContinuationIndicator": "a CRNN fork (warrentdrew/Caffe_SSD_LSTM_LPR)",
    "MultiStageMeanfield": "CRF-as-RNN's Caffe (torrvision/crfasrnn)",
    "CosinAddm": "arcface-caffe (xialuxi/arcface-caffe)",
}
# types a shipped fork has a version of its own of, which protoaudit has no rule for (another fork's
# class of the same name does not size it): fork -> {type: its parameter message}, read in the fork's
# layer sources and caffe.proto
OWN_UNSIZED = {
    "yolov2": {"DetectionLoss": "DetectionLossParameter", "EvalDetection": "EvalDetectionParameter",
               "DetectionOutput": "DetectionOutputParameter", "DetectionEvaluate": "DetectionEvaluateParameter"},
}
# V1 enum names (a `layers` block's `type: NAME`) of forks' V1 schemas
V1_TYPES = {
    **dict.fromkeys(("CONVOLUTION3D", "POOLING3D", "VIDEO_DATA", "DECONVOLUTION3D", "VIDEO_SEGMENTATION_DATA",
                     "VOXEL_SOFTMAX", "VOXEL_SOFTMAX_LOSS"), "C3D v1.0's Caffe (facebook/C3D, C3D-v1.0)"),
    **dict.fromkeys(("BN", "UNPOOLING"), "DeconvNet's Caffe (HyeonwooNoh/caffe: BN = 43, UNPOOLING = 42)"),
}
# what to do instead, for a fork protoaudit reads a later version of
V1_INSTEAD = {
    V1_TYPES["VIDEO_DATA"]: "C3D v1.1's nets are read (the fork c3d): write the net as C3D v1.1's examples do "
                            '(layer { type: "VideoData" }, "Convolution3D" with convolution3d_param, "Pooling3D" with '
                            "pooling3d_param)",
}
# a layer's parameter field -> fork, for a type of another name
FIELDS = {
    "psroi_pooling_param": TYPES["PSROIPooling"],
    "yolov3_param": TYPES["Yolov3"],
    "relu6_param": TYPES["ReLU6"],
    "center_loss_param": TYPES["CenterLoss"],
    "guided_dropout_param": TYPES["GuidedDropout"],
    "convolution3d_param": TYPES["Convolution3D"],
    "pooling3d_param": TYPES["Pooling3D"],
    "video_data_param": TYPES["VideoData"],
    "unpooling_param": V1_TYPES["UNPOOLING"],
    "label_specific_rescale_param": TYPES["LabelSpecificRescale"],
    "label_specific_margin_param": TYPES["LabelSpecificMargin"],
}


def fork_of(layer):
    """The fork a layer (a LayerParameter) of an unknown type most likely comes from, or None."""
    if layer.type in TYPES:
        return TYPES[layer.type]
    return next((FIELDS[f.name] for f, _ in layer.ListFields() if f.name in FIELDS), None)
