"""Bring a net to the current (V2) format, as Caffe's UpgradeNetAsNeeded does before building it.

Caffe's order: V0 layers become V1 ones (padding layers folded into the conv/pool they feed), old
data-transformation fields move to transform_param, V1 `layers` become V2 `layer`, net inputs
become an Input layer, old BatchNorm params lose their learning rate. Every step works on the
messages of the schema the net was read with, so a fork's fields travel along.
"""
from ..errors import InputError
from .upgrade_v0 import upgrade_v0

# V1LayerParameter.LayerType -> the V2 type string (UpgradeV1LayerType)
V1_TYPES = {
    "NONE": "", "ABSVAL": "AbsVal", "ACCURACY": "Accuracy", "ARGMAX": "ArgMax", "BNLL": "BNLL",
    "CONCAT": "Concat", "CONTRASTIVE_LOSS": "ContrastiveLoss", "CONVOLUTION": "Convolution",
    "DECONVOLUTION": "Deconvolution", "DATA": "Data", "DROPOUT": "Dropout",
    "DUMMY_DATA": "DummyData", "EUCLIDEAN_LOSS": "EuclideanLoss", "ELTWISE": "Eltwise",
    "EXP": "Exp", "FLATTEN": "Flatten", "HDF5_DATA": "HDF5Data", "HDF5_OUTPUT": "HDF5Output",
    "HINGE_LOSS": "HingeLoss", "IM2COL": "Im2col", "IMAGE_DATA": "ImageData",
    "INFOGAIN_LOSS": "InfogainLoss", "INNER_PRODUCT": "InnerProduct", "LRN": "LRN",
    "MEMORY_DATA": "MemoryData", "MULTINOMIAL_LOGISTIC_LOSS": "MultinomialLogisticLoss",
    "MVN": "MVN", "POOLING": "Pooling", "POWER": "Power", "RELU": "ReLU", "SIGMOID": "Sigmoid",
    "SIGMOID_CROSS_ENTROPY_LOSS": "SigmoidCrossEntropyLoss", "SILENCE": "Silence",
    "SOFTMAX": "Softmax", "SOFTMAX_LOSS": "SoftmaxWithLoss", "SPLIT": "Split", "SLICE": "Slice",
    "TANH": "TanH", "WINDOW_DATA": "WindowData", "THRESHOLD": "Threshold",
}

# A fork's own V1 enum values -> the type names its layers register under. DeepLab v1's Caffe
# (DeepLab-Context) predates V2 and creates layers from the enum, each through
# REGISTER_LAYER_CLASS(ENUM, NameLayer) (e.g. image_seg_data_layer.cpp:235: IMAGE_SEG_DATA,
# ImageSegDataLayer); a V2 type is the class's name less "Layer", which is also how its V2
# successor deeplab-public-ver2 registers the same classes (REGISTER_LAYER_CLASS(ImageSegData),
# image_seg_data_layer.cpp:222; Interp, SegAccuracy, MatWrite, MatRead, BiasChannel...).
FORK_V1_TYPES = {
    "deeplab_v1": {
        "ADAPTIVE_BIAS_CHANNEL": "AdaptiveBiasChannel", "BIAS_CHANNEL": "BiasChannel", "CENSOR_LABEL": "CensorLabel",
        "CHANNEL_AGGREGATOR": "ChannelAggregator", "DENSE_CRF": "DenseCRF", "DOMINANT_CHANNEL": "DominantChannel",
        "GAIN_CHANNEL": "GainChannel", "HISTOGRAM": "Histogram", "IGNORE_OVERLAY": "IgnoreOverlay",
        "IMAGE_SEG_DATA": "ImageSegData", "INTERP": "Interp", "MAT_READ": "MatRead", "MAT_WRITE": "MatWrite",
        "ONEHOT": "OneHot", "PADDING": "Padding", "RELATIVE_ERROR": "RelativeError", "SEG_ACCURACY": "SegAccuracy",
        "UNIQUE_LABEL": "UniqueLabel",
    },
    # HyeonwooNoh/caffe (DeconvNet): REGISTER_LAYER_CLASS(BN, BNLayer), bn_layer.cpp:419; UNPOOLING's
    # creator makes UnpoolingLayer (layer_factory.cpp:65-78)
    "deconvnet": {"BN": "BN", "UNPOOLING": "Unpooling"},
    # torrvision/crfasrnn's caffe-crfrnn (650e988): REGISTER_LAYER_CLASS(MULTI_STAGE_MEANFIELD,
    # MultiStageMeanfieldLayer), multi_stage_meanfield.cpp:255, V2 type MultiStageMeanfield as the fork's later
    # Caffe registers it (torrvision/caffe d779ee3, multi_stage_meanfield.cpp:259); CROP, FCN's first CropLayer
    # (REGISTER_LAYER_CLASS(CROP, CropLayer), crop_layer.cpp:124), V2 type Crop as HED's Caffe calls it
    "crfrnn": {"MULTI_STAGE_MEANFIELD": "MultiStageMeanfield", "CROP": "Crop"},
    # torrvision/caffe d779ee3 (crfrnn_v2): UpgradeV1LayerType's CROP -> "Crop" (upgrade_proto.cpp:858-859), the same
    # FCN Crop (REGISTER_LAYER_CLASS(Crop), crop_layer.cpp:124)
    "crfrnn_v2": {"CROP": "Crop"},
    # xiaolonw/caffe-video_triplet's UpgradeV1LayerType (src/caffe/util/upgrade_proto.cpp:924-927)
    "video_triplet": {"RANK_HARD_LOSS": "RankHardLoss", "NORM": "Norm"},
}


def v1_type(enum_name, schema_name="bvlc"):
    """The V2 type name a V1 enum value upgrades to (BVLC's, or the fork's own), or None."""
    return FORK_V1_TYPES.get(schema_name, {}).get(enum_name) or V1_TYPES.get(enum_name)


# V1 data layers whose own *_param once held the transformation fields (UpgradeNetDataTransformation)
DATA_TRANSFORM_OWNERS = {"DATA": "data_param", "IMAGE_DATA": "image_data_param",
                         "WINDOW_DATA": "window_data_param"}
TRANSFORM_FIELDS = ("scale", "mean_file", "crop_size", "mirror")


def upgrade(net, schema, lines=()):
    """Upgrade `net` (a NetParameter of `schema`) in place, in Caffe's order.

    `lines` are the start lines of the file's layer blocks (its legacy `layers` blocks when it has
    any); returns the start line of each resulting V2 layer (None where Caffe made the layer up),
    and the V0 fields Caffe's upgrade dropped (upgrade_v0.Dropped), which it logs and goes on.
    """
    origins, dropped = list(range(len(net.layers) if net.layers else len(net.layer))), []
    try:
        if any(legacy.HasField("layer") for legacy in net.layers):
            origins, dropped = upgrade_v0(net)
        upgrade_data_transformation(net)
        if net.layers:
            upgrade_v1(net, schema.name)
    except InputError as e:
        index = getattr(e, "layer_index", None)
        raise e.located(line=lines[index] if index is not None and index < len(lines) else None) from None
    if schema.has_message("InputParameter") and upgrade_input(net):
        origins.insert(0, None)
    if schema.name not in BEFORE_BATCH_NORM_UPGRADE:
        upgrade_batch_norm(net)
    return [lines[i] if i is not None and i < len(lines) else None for i in origins], dropped


def upgrade_data_transformation(net):
    """scale/mean_file/crop_size/mirror set in a V1 data layer's own param move to transform_param."""
    types = net.DESCRIPTOR.fields_by_name["layers"].message_type.fields_by_name["type"].enum_type
    owners = {types.values_by_name[t].number: param for t, param in DATA_TRANSFORM_OWNERS.items()}
    for legacy in net.layers:
        owner = owners.get(legacy.type)
        if owner is None:
            continue
        param = getattr(legacy, owner)
        for name in TRANSFORM_FIELDS:
            if param.HasField(name):
                setattr(legacy.transform_param, name, getattr(param, name))
                param.ClearField(name)


def upgrade_v1(net, schema_name="bvlc"):
    """V1 `layers` (enum types, blobs_lr, weight_decay) become V2 `layer` (string types, ParamSpec)."""
    if net.layer:
        raise InputError(
            "the net has both `layer` and `layers` blocks; Caffe refuses to upgrade such a net",
            fix="write every layer in one form: V2 `layer { type: \"...\" }` or V1 `layers { type: ENUM }`",
        )
    for index, legacy in enumerate(net.layers):
        try:
            _upgrade_v1_layer(legacy, net.layer.add(), schema_name)
        except InputError as e:
            e.layer_index = index
            raise e.located(layer=legacy.name) from None
    del net.layers[:]


# V1 fields that fill the V2 layer's ParamSpecs, index by index, and the ParamSpec field each sets
SPEC_FIELDS = {"param": "name", "blob_share_mode": "share_mode", "blobs_lr": "lr_mult",
               "weight_decay": "decay_mult"}
# V1 fields copied as they are (every *_param message is copied too)
SAME_FIELDS = {"bottom", "top", "name", "include", "exclude", "blobs", "loss_weight"}


def _upgrade_v1_layer(v1, layer, schema_name):
    """UpgradeV1LayerParameter, in one pass over the fields the V1 layer sets."""
    specs = []
    for field, value in v1.ListFields():
        name = field.name
        if name in SPEC_FIELDS:
            specs.append((SPEC_FIELDS[name], value))
        elif name.endswith("_param"):
            getattr(layer, name).CopyFrom(value)
        elif name == "type":
            layer.type = _v2_type(field, value, schema_name)
        elif name not in SAME_FIELDS:
            continue  # a V0 `layer` left in: the V0 upgrade has already replaced every one
        elif field.is_repeated:
            getattr(layer, name).extend(value)
        else:
            setattr(layer, name, value)
    if specs:
        _fill_param_specs(layer, specs, v1.DESCRIPTOR.fields_by_name["blob_share_mode"].enum_type)


def _v2_type(field, value, schema_name):
    name = field.enum_type.values_by_number[value].name
    v2 = v1_type(name, schema_name)
    if v2 is None:
        raise InputError(
            f"V1 layer type {name} has no V2 equivalent in Caffe's upgrade",
            fix="rewrite the layer in the V2 form, layer { type: \"...\" }, with the type its fork registers",
        )
    return v2


def _fill_param_specs(layer, specs, v1_modes):
    """ParamSpec i gets the i-th param name, blob_share_mode, blobs_lr and weight_decay given."""
    for _ in range(max(len(values) for _, values in specs)):
        layer.param.add()
    for target, values in specs:
        if target == "share_mode":
            modes = layer.param[0].DESCRIPTOR.fields_by_name["share_mode"].enum_type.values_by_name
            values = [modes[v1_modes.values_by_number[v].name].number for v in values]
        for spec, value in zip(layer.param, values):
            setattr(spec, target, value)


def upgrade_input(net):
    """Net-level `input` + `input_shape`/`input_dim` become one Input layer named "input", first.

    Returns whether a layer was added (an `input` without shapes is simply dropped)."""
    if not net.input:
        return False
    added = bool(net.input_shape or net.input_dim)
    given, each = (len(net.input_shape), 1) if net.input_shape else (len(net.input_dim), 4)
    if added and given < each * len(net.input):
        # UpgradeNetInput reads input_dim(4i..4i+3) or input_shape(i) for every input, past the end of what
        # the file gives (undefined: protobuf checks no index in a release build)
        what, said = (("input_shape", "Exactly one input_shape must be specified per input") if net.input_shape
                      else ("input_dim values", "Incorrect input blob dimension specifications"))
        named = ", ".join(f"'{top}'" for top in net.input)
        raise InputError(f"{len(net.input)} net inputs ({named}) need {each * len(net.input)} {what} ({each} "
                         f"each), and the file gives {given}: Caffe's upgrade reads past them, so the shapes "
                         f"of the later inputs are whatever memory follows (Caffe's Net::Init before the Input "
                         f"layer stopped here: '{said}.')",
                         fix="give each input its own input_shape, or its four input_dim values (N, C, H, W)")
    if added:
        layer = net.layer.add()
        layer.name = "input"
        layer.type = "Input"
        for i, top in enumerate(net.input):
            layer.top.append(top)
            shape = layer.input_param.shape.add()
            if net.input_shape:
                shape.CopyFrom(net.input_shape[i])
            else:
                shape.dim.extend(net.input_dim[4 * i : 4 * i + 4])
        net.layer.insert(0, _copy(layer))
        del net.layer[-1]
    del net.input[:]
    del net.input_shape[:]
    del net.input_dim[:]
    return added


def _copy(message):
    clone = type(message)()
    clone.CopyFrom(message)
    return clone


# forks whose upgrade_proto.cpp predates BVLC a8ec123 (September 2016), which zeroes old BatchNorm
# definitions' param specs: YOLOv2's port (June 2016 BVLC), GGL's Caffe (July 2016 BVLC), GLAD's Caffe
# (BVLC 1464368 of August 2016), HRSOD's Caffe (BVLC 9e9e9ba of August 2016), JiangQH's Caffe (BVLC e79bc8f
# of May 2016) and caffe-dynamic-dilation (their upgrade_proto.cpp names no BatchNorm) keep the lr_mult the
# file gives
BEFORE_BATCH_NORM_UPGRADE = frozenset({"yolov2", "ggl", "glad", "hrsod", "jiangqh", "dyndilation"})


def upgrade_batch_norm(net):
    """Old BatchNorm definitions declared three params; Caffe zeroes their lr_mult and decay_mult."""
    for layer in net.layer:
        if layer.type == "BatchNorm" and len(layer.param) == 3:
            for spec in layer.param:
                spec.lr_mult = 0.0
                spec.decay_mult = 0.0
