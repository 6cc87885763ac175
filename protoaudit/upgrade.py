"""Bring a net to the current (V2) format, as Caffe's UpgradeNetAsNeeded does before building it.

Caffe's order: V0 layers become V1 ones (padding layers folded into the conv/pool they feed), old
data-transformation fields move to transform_param, V1 `layers` become V2 `layer`, net inputs
become an Input layer, old BatchNorm params lose their learning rate. Every step works on the
messages of the schema the net was read with, so a fork's fields travel along.
"""
from .errors import InputError
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

# V1 data layers whose own *_param once held the transformation fields (UpgradeNetDataTransformation)
DATA_TRANSFORM_OWNERS = {"DATA": "data_param", "IMAGE_DATA": "image_data_param",
                         "WINDOW_DATA": "window_data_param"}
TRANSFORM_FIELDS = ("scale", "mean_file", "crop_size", "mirror")


def upgrade(net, schema, lines=()):
    """Upgrade `net` (a NetParameter of `schema`) in place, in Caffe's order.

    `lines` are the start lines of the file's layer blocks (its legacy `layers` blocks when it has
    any); returns the start line of each resulting V2 layer, None where Caffe made the layer up.
    """
    origins = list(range(len(net.layers) if net.layers else len(net.layer)))
    try:
        if any(legacy.HasField("layer") for legacy in net.layers):
            origins = upgrade_v0(net)
        upgrade_data_transformation(net)
        if net.layers:
            upgrade_v1(net, schema)
    except InputError as e:
        index = getattr(e, "layer_index", None)
        raise e.located(line=lines[index] if index is not None and index < len(lines) else None)
    if schema.has_message("InputParameter") and upgrade_input(net):
        origins.insert(0, None)
    upgrade_batch_norm(net)
    return [lines[i] if i is not None and i < len(lines) else None for i in origins]


def _type_name(v1_layer):
    return v1_layer.DESCRIPTOR.fields_by_name["type"].enum_type.values_by_number[v1_layer.type].name


def upgrade_data_transformation(net):
    """scale/mean_file/crop_size/mirror set in a V1 data layer's own param move to transform_param."""
    for legacy in net.layers:
        owner = DATA_TRANSFORM_OWNERS.get(_type_name(legacy))
        if owner is None:
            continue
        param = getattr(legacy, owner)
        for name in TRANSFORM_FIELDS:
            if param.HasField(name):
                setattr(legacy.transform_param, name, getattr(param, name))
                param.ClearField(name)


def upgrade_v1(net, schema):
    """V1 `layers` (enum types, blobs_lr, weight_decay) become V2 `layer` (string types, ParamSpec)."""
    if net.layer:
        raise InputError(
            "the net has both `layer` and `layers` blocks; Caffe refuses to upgrade such a net",
            fix="write every layer in one form: V2 `layer { type: \"...\" }` or V1 `layers { type: ENUM }`",
        )
    legacy_layers = list(net.layers)
    del net.layers[:]
    for index, legacy in enumerate(legacy_layers):
        try:
            _upgrade_v1_layer(legacy, net.layer.add())
        except InputError as e:
            e.layer_index = index
            raise e.located(layer=legacy.name) from None


def _upgrade_v1_layer(v1, layer):
    layer.bottom.extend(v1.bottom)
    layer.top.extend(v1.top)
    if v1.HasField("name"):
        layer.name = v1.name
    for rule in v1.include:
        layer.include.add().CopyFrom(rule)
    for rule in v1.exclude:
        layer.exclude.add().CopyFrom(rule)
    if v1.HasField("type"):
        layer.type = _v2_type(v1)
    for blob in v1.blobs:
        layer.blobs.add().CopyFrom(blob)
    _upgrade_param_specs(v1, layer)
    layer.loss_weight.extend(v1.loss_weight)
    for field, value in v1.ListFields():
        if field.name.endswith("_param"):
            getattr(layer, field.name).CopyFrom(value)


def _v2_type(v1):
    name = _type_name(v1)
    if name not in V1_TYPES:
        raise InputError(
            f"V1 layer type {name} has no V2 equivalent in Caffe's upgrade",
            fix="rewrite the layer in the V2 form, layer { type: \"...\" }, with the type its fork registers",
        )
    return V1_TYPES[name]


def _upgrade_param_specs(v1, layer):
    """param (names), blob_share_mode, blobs_lr and weight_decay fill ParamSpecs index by index."""

    def spec(i):
        while len(layer.param) <= i:
            layer.param.add()
        return layer.param[i]

    spec_fields = layer.DESCRIPTOR.fields_by_name["param"].message_type.fields_by_name
    share_modes = spec_fields["share_mode"].enum_type.values_by_name
    v1_modes = v1.DESCRIPTOR.fields_by_name["blob_share_mode"].enum_type.values_by_number
    for i, name in enumerate(v1.param):
        spec(i).name = name
    for i, mode in enumerate(v1.blob_share_mode):
        spec(i).share_mode = share_modes[v1_modes[mode].name].number
    for i, lr in enumerate(v1.blobs_lr):
        spec(i).lr_mult = lr
    for i, decay in enumerate(v1.weight_decay):
        spec(i).decay_mult = decay


def upgrade_input(net):
    """Net-level `input` + `input_shape`/`input_dim` become one Input layer named "input", first.

    Returns whether a layer was added (an `input` without shapes is simply dropped)."""
    if not net.input:
        return False
    added = bool(net.input_shape or net.input_dim)
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


def upgrade_batch_norm(net):
    """Old BatchNorm definitions declared three params; Caffe zeroes their lr_mult and decay_mult."""
    for layer in net.layer:
        if layer.type == "BatchNorm" and len(layer.param) == 3:
            for spec in layer.param:
                spec.lr_mult = 0.0
                spec.decay_mult = 0.0
