"""Legacy nets (V0 `layers { layer { type: "conv" } }`, V1 `layers { type: CONVOLUTION }`) upgraded to
V2 as Caffe's UpgradeNetAsNeeded (src/caffe/util/upgrade_proto.cpp) does, so the net built is Caffe's.

Expectations come from real Caffe (the oracle runs of V1 nets, a 2014 log of the V1 LeNet), from the
same nets written in V2 (checked field by field to be the same net, differences listed where they
exist), and from hand derivations written out below.
"""
import json
import math
import os

import pytest
from google.protobuf import text_format

import logparse
from conftest import DATA, run_in_process
from protoaudit.read import load
from protoaudit.audit import build_nets
from protoaudit.errors import InputError
from protoaudit.read.schema import SCHEMA_NAMES, load_schema
from protoaudit.read.upgrade import V1_TYPES, upgrade, v1_type

NETS = os.path.join(DATA, "nets")
LEGACY = os.path.join(DATA, "legacy")
ORACLE = os.path.join(DATA, "oracle_v1")
BVLC = load_schema("bvlc")


def _net(text, schema=BVLC):
    return text_format.Parse(text, schema.NetParameter())


def _upgraded(text, schema=BVLC):
    net = _net(text, schema)
    upgrade(net, schema)
    return net


# ---------------------------------------------------------------- V1 -> V2, field by field


def test_blobs_lr_and_weight_decay_become_param_specs():
    net = _upgraded("""
        layers { name: "conv1" type: CONVOLUTION bottom: "data" top: "conv1"
                 blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
                 convolution_param { num_output: 96 kernel_size: 11 stride: 4 } }""")
    (layer,) = net.layer
    assert not net.layers
    assert layer.name == "conv1" and layer.type == "Convolution"
    assert [(p.lr_mult, p.decay_mult) for p in layer.param] == [(1, 1), (2, 0)]
    assert layer.convolution_param.num_output == 96
    assert list(layer.convolution_param.kernel_size) == [11]


def test_param_names_share_modes_and_uneven_lists_fill_specs_by_index():
    net = _upgraded("""
        layers { name: "ip" type: INNER_PRODUCT param: "w" param: "b"
                 blob_share_mode: PERMISSIVE blobs_lr: 3 }""")
    first, second = net.layer[0].param
    assert (first.name, first.lr_mult, first.share_mode) == ("w", 3, first.PERMISSIVE)
    assert second.name == "b"
    # nothing set the second spec's multipliers: they keep ParamSpec's defaults (not written)
    assert not second.HasField("lr_mult") and not second.HasField("decay_mult")
    assert not second.HasField("share_mode") and not first.HasField("decay_mult")


def test_no_blobs_lr_means_no_param_spec():
    net = _upgraded('layers { name: "r" type: RELU bottom: "x" top: "x" }')
    assert len(net.layer[0].param) == 0


def test_rules_loss_weight_and_net_fields_carry_over():
    net = _upgraded("""
        name: "n" force_backward: true state { phase: TEST stage: "s" }
        layers { name: "l" type: EUCLIDEAN_LOSS bottom: "a" bottom: "b" top: "loss"
                 loss_weight: 0.3 include { phase: TRAIN stage: "x" } exclude { min_level: 2 }
                 loss_param { normalize: false } }""")
    layer = net.layer[0]
    assert layer.type == "EuclideanLoss" and list(layer.bottom) == ["a", "b"] and list(layer.top) == ["loss"]
    assert list(layer.loss_weight) == [pytest.approx(0.3)]
    rule = layer.include[0]
    assert rule.HasField("phase") and rule.phase == 0 and list(rule.stage) == ["x"]  # caffe.Phase TRAIN = 0
    assert layer.exclude[0].min_level == 2
    assert layer.loss_param.HasField("normalize") and not layer.loss_param.normalize
    # UpgradeV1Net copies the whole net and only swaps the layers
    assert net.name == "n" and net.force_backward and list(net.state.stage) == ["s"]


# The *_param fields UpgradeV1LayerParameter copies one by one (upgrade_proto.cpp, BVLC 9b89154).
CAFFE_COPIED_PARAMS = {
    "accuracy_param", "argmax_param", "concat_param", "contrastive_loss_param", "convolution_param",
    "data_param", "dropout_param", "dummy_data_param", "eltwise_param", "exp_param",
    "hdf5_data_param", "hdf5_output_param", "hinge_loss_param", "image_data_param",
    "infogain_loss_param", "inner_product_param", "lrn_param", "memory_data_param", "mvn_param",
    "pooling_param", "power_param", "relu_param", "sigmoid_param", "softmax_param", "slice_param",
    "tanh_param", "threshold_param", "window_data_param", "transform_param", "loss_param",
}


# soeaver's caffe-priv added V1 types and params its own upgrade_proto.cpp never handles: its
# UpgradeV1LayerType stops at LOG(FATAL) "Unknown V1LayerParameter layer type" for these types,
# and its UpgradeV1LayerParameter copies none of these params.
# V1 values and params a fork added that protoaudit has no rule for: a V1 net using one is refused,
# naming the type ("V1 layer type X has no V2 equivalent"), as for caffe-priv's
FORK_V1_EXTRAS = {
    "mobilenet_yolo": ({"RELU6"}, {"relu6_param"}),
    "hed": ({"CROP"}, set()),
    # torrvision/crfasrnn 650e988: caffe-crfrnn's enum names SIMPLE_FAST_MEANFIELD = 41, which no layer class
    # registers (only multi_stage_meanfield.cpp:255 and crop_layer.cpp:124 add to the V1 enum's classes)
    "crfrnn": ({"SIMPLE_FAST_MEANFIELD"}, set()),
    # torrvision/caffe d779ee3: FCN's CROP = 40 in its V1 enum, upgraded to its own Crop (upgrade_proto.cpp:858-859)
    "crfrnn_v2": ({"CROP"}, set()),
    "deconvnet": ({"BIN_ACCURACY", "CROP", "DROPOUT_CHANNEL", "ELTWISE_ACCURACY", "IMAGE_SEG_DATA", "RED_SOFTMAX_LOSS",
                   "RED_ACCURACY", "SELECT_SEG_BINARY", "WINDOW_CLS_DATA", "WINDOW_SEG_DATA", "WINDOW_SEG_BINARY",
                   "WINDOW_INST_SEG_DATA"}, set()),
    "priv": ({"RELUX", "FRCNN_ANCHOR_TARGET", "FRCNN_PROPOSAL", "FRCNN_PROPOSAL_TARGET", "DEFORMABLECONVOLUTION"},
             {"relux_param", "frcnn_anchor_target_param", "frcnn_proposal_param", "frcnn_proposal_target_param",
              "deformable_convolution_param", "boxes_obj_param"}),
    # happynear/caffe-windows 967eedf: its V1 enum gained LOCAL..ELTWISE_AFFINE (41-48) and its V1 layer
    # these params (43-51), but upgrade_proto.cpp's UpgradeV1LayerType ends at THRESHOLD (954-957:
    # LOG(FATAL)) and UpgradeV1LayerParameter copies none of them
    # gklz1982/caffe-yolov2 ebb2702: its V1LayerParameter gained detection_loss_param and
    # eval_detection_param (caffe.proto, 200-201) and no V1 type, and upgrade_proto.cpp copies neither
    "yolov2": (set(), {"detection_loss_param", "eval_detection_param"}),
    "happynear": ({"LOCAL", "BN", "NORMALIZE", "INSANITY", "TRIPLET_LOSS", "ROIPOOLING", "BATCH_NORM", "ELTWISE_AFFINE"},
                  {"bn_param", "local_param", "prelu_param", "insanity_param", "triplet_loss_param",
                   "roi_pooling_param", "eltwise_affine_param", "sub_region_param", "noise_param"}),
    # goodluckcwl/custom-caffe aa5345b: happynear's V1LayerParameter and upgrade_proto.cpp, unchanged
    "goodluckcwl": ({"LOCAL", "BN", "NORMALIZE", "INSANITY", "TRIPLET_LOSS", "ROIPOOLING", "BATCH_NORM", "ELTWISE_AFFINE"},
                    {"bn_param", "local_param", "prelu_param", "insanity_param", "triplet_loss_param",
                     "roi_pooling_param", "eltwise_affine_param", "sub_region_param", "noise_param"}),
    # xiaolonw/caffe-video_triplet c39ea1a: RANK_HARD_LOSS and NORM (40, 41), which its UpgradeV1LayerType
    # maps (upgrade_proto.cpp:924-927: protoaudit.read.upgrade.FORK_V1_TYPES), and rank_param (43), which
    # UpgradeV1LayerParameter does not copy
    "video_triplet": ({"RANK_HARD_LOSS", "NORM"}, {"rank_param"}),
    # naibaf7/caffe 2996015: its V1LayerParameter gained affinity_param (43) and no V1 type, and its
    # upgrade_proto.cpp's UpgradeV1LayerParameter does not copy it
    "greentea": (set(), {"affinity_param"}),
    # whitenightwu/caffe-quant-QNN b4fc9ad: its V1LayerParameter gained quan_convolution_param and
    # quan_inner_product_param (caffe.proto:1314-1315) and no V1 type, and its upgrade_proto.cpp copies neither
    "qnn": (set(), {"quan_convolution_param", "quan_inner_product_param"}),
    # jellyDL/drml_caffe f508105: its V1 enum gained IMAGE_DATA_MULTILABEL..SPLICE (40-43) and its V1 layer
    # box_param and splice_param (caffe.proto:1281-1284, 1328-1329), but it builds with BVLC 1.0's
    # upgrade_proto.cpp (complie_caffe.sh), whose UpgradeV1LayerType maps none of them and copies neither
    "drml": ({"IMAGE_DATA_MULTILABEL", "MULTI_SIGMOID_CROSS_ENTROPY_LOSS", "BOX", "SPLICE"},
             {"box_param", "splice_param"}),
    # SSAW14/LearnableDilationNetwork 4838c44: caffe-dynamic-dilation's V1 enum gained STOP..TRUNCATION
    # (42-48) and its V1 layer stop_param..truncation_param (caffe.proto:1448-1455), but its
    # upgrade_proto.cpp's UpgradeV1LayerType ends at THRESHOLD (932-935: LOG(FATAL)) and
    # UpgradeV1LayerParameter copies none of them
    "dyndilation": ({"STOP", "LINEARTRANSFORM", "NLU", "DUPLICATE", "CROP", "MANUALCROP", "TRUNCATION"},
                    {"stop_param", "linear_transform_param", "nlu_param", "duplicate_param", "crop_param",
                     "manual_crop_param", "euclidean_param", "truncation_param"}),
}


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_every_v1_param_is_copied(name):
    schema = load_schema(name)
    v1_params = {f.name for f in schema.message("V1LayerParameter").DESCRIPTOR.fields
                 if f.name.endswith("_param")} - FORK_V1_EXTRAS.get(name, ((), set()))[1]
    # a fork from before V2 (DeepLab v1) has its own V1 params: every one travels (schema._add_v2_layers)
    assert v1_params == CAFFE_COPIED_PARAMS or (schema.predates_v2 and v1_params > {"convolution_param"})
    net = schema.NetParameter()
    legacy = net.layers.add()
    legacy.type = legacy.RELU
    for field in sorted(v1_params):
        message = getattr(legacy, field)
        first = message.DESCRIPTOR.fields[0]  # set one field of each, so each is present
        if first.message_type is not None:
            (getattr(message, first.name).add() if first.is_repeated else getattr(message, first.name)).SetInParent()
        elif first.is_repeated:
            getattr(message, first.name).append(first.enum_type.values[0].number if first.enum_type else 1)
        elif first.enum_type is not None:
            setattr(message, first.name, first.enum_type.values[-1].number)
        else:
            setattr(message, first.name, type(first.default_value)(1) if first.type != first.TYPE_STRING else "x")
    upgrade(net, schema)
    layer = net.layer[0]
    for field in v1_params:
        assert getattr(layer, field) == getattr(legacy, field), field


def test_v1_type_names_are_caffes():
    # a few of UpgradeV1LayerType's names that a CamelCase rule would get wrong
    assert V1_TYPES["SOFTMAX_LOSS"] == "SoftmaxWithLoss"
    assert V1_TYPES["TANH"] == "TanH"
    assert V1_TYPES["ABSVAL"] == "AbsVal"
    assert V1_TYPES["IM2COL"] == "Im2col"
    assert V1_TYPES["HDF5_DATA"] == "HDF5Data"
    assert V1_TYPES["RELU"] == "ReLU"
    assert V1_TYPES["SIGMOID_CROSS_ENTROPY_LOSS"] == "SigmoidCrossEntropyLoss"


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_every_v1_enum_value_of_every_schema_has_a_v2_type(name):
    enum = load_schema(name).message("V1LayerParameter").DESCRIPTOR.fields_by_name["type"].enum_type
    extras = FORK_V1_EXTRAS.get(name, (set(), ()))[0]
    if load_schema(name).predates_v2:  # DeepLab v1's own enum values take its classes' names
        assert all(v1_type(v.name, name) is not None for v in enum.values if v.name not in extras)
        assert all(v1_type(v, name) is None for v in extras)
        if name == "deeplab_v1":
            assert v1_type("IMAGE_SEG_DATA", name) == "ImageSegData" and v1_type("ONEHOT", name) == "OneHot"
    else:
        assert {v.name for v in enum.values} - FORK_V1_EXTRAS.get(name, (set(), ()))[0] == set(V1_TYPES)


def test_a_v1_type_the_forks_own_upgrade_refuses_is_refused():
    net = load_schema("priv").NetParameter()
    text_format.Parse('layers { name: "a" type: RELUX }', net)
    with pytest.raises(InputError, match="V1 layer type RELUX has no V2 equivalent"):
        upgrade(net, load_schema("priv"))


def test_layer_and_layers_together_are_refused():
    net = _net('layer { name: "a" type: "ReLU" } layers { name: "b" type: RELU }')
    with pytest.raises(InputError, match="both `layer` and `layers`"):
        upgrade(net, BVLC)


def test_input_fields_of_a_v1_net_become_the_input_layer_caffe_names_input():
    net = _upgraded("""
        input: "data" input_dim: 10 input_dim: 3 input_dim: 224 input_dim: 224
        layers { name: "conv" type: CONVOLUTION bottom: "data" top: "c"
                 convolution_param { num_output: 2 kernel_size: 3 } }""")
    assert [(l.name, l.type) for l in net.layer] == [("input", "Input"), ("conv", "Convolution")]
    assert list(net.layer[0].input_param.shape[0].dim) == [10, 3, 224, 224]


# ---------------------------------------------------------------- old data-transformation fields


@pytest.mark.parametrize("v1_type,owner", [("DATA", "data_param"), ("IMAGE_DATA", "image_data_param"),
                                           ("WINDOW_DATA", "window_data_param")])
def test_transformation_fields_move_to_transform_param(v1_type, owner):
    net = _upgraded(f"""
        layers {{ name: "d" type: {v1_type} top: "data" top: "label"
                 {owner} {{ source: "s" batch_size: 8 scale: 0.5 mean_file: "m" crop_size: 227 mirror: true }}
                 transform_param {{ scale: 2 }} }}""")
    layer = net.layer[0]
    t = layer.transform_param
    assert (t.scale, t.mean_file, t.crop_size, t.mirror) == (0.5, "m", 227, True)
    own = getattr(layer, owner)
    assert not any(own.HasField(f) for f in ("scale", "mean_file", "crop_size", "mirror"))
    assert (own.source, own.batch_size) == ("s", 8)


def test_transformation_fields_of_other_layers_stay_where_they_are():
    # only V1 DATA, IMAGE_DATA and WINDOW_DATA layers are upgraded; a V2 layer never is
    net = _upgraded('layers { name: "d" type: MEMORY_DATA data_param { crop_size: 5 } }')
    assert net.layer[0].data_param.crop_size == 5 and not net.layer[0].HasField("transform_param")
    net = _upgraded('layer { name: "d" type: "Data" data_param { crop_size: 5 } }')
    assert net.layer[0].data_param.crop_size == 5 and not net.layer[0].HasField("transform_param")


def test_real_v1_net_with_old_transformation_fields():
    # examples/feature_extraction/imagenet_val.prototxt, Aug 2014: crop_size inside image_data_param.
    # ImageDataLayer crops to transform_param.crop_size: 50 x 3 (is_color) x 227 x 227, not the
    # new_height x new_width 256 x 256 it would be without the upgrade.
    (net,) = build_nets(os.path.join(LEGACY, "v1_feature_extraction_imagenet_val.prototxt"), phase="test")
    data = net.layer("data")
    assert data.lp.transform_param.crop_size == 227 and not data.lp.transform_param.mirror
    assert data.lp.transform_param.mean_file.endswith("imagenet_mean.binaryproto")
    assert data.top_shapes[0] == (50, 3, 227, 227)
    # conv1: (227 - 11) / 4 + 1 = 55
    assert net.layer("conv1").top_shapes[0] == (50, 96, 55, 55)


def test_real_v1_window_data_net_with_old_transformation_fields():
    # examples/pascal-finetuning/pascal_finetune_train.prototxt, Aug 2014: all four inside window_data_param
    (net,) = build_nets(os.path.join(LEGACY, "v1_pascal_finetune_train.prototxt"), phase="train")
    data = net.layer("data").lp
    t, w = data.transform_param, data.window_data_param
    assert (t.crop_size, t.mirror, t.mean_file) == (227, True, "../../data/ilsvrc12/imagenet_mean.binaryproto")
    assert not any(w.HasField(f) for f in ("scale", "mean_file", "crop_size", "mirror"))
    assert (w.batch_size, w.context_pad, w.crop_mode) == (128, 16, "warp")
    # WindowDataLayer: batch_size x 3 x crop_size x crop_size; conv1 (227 - 11) / 4 + 1 = 55
    assert net.layer("data").top_shapes[0] == (128, 3, 227, 227)
    assert net.layer("conv1").top_shapes[0] == (128, 96, 55, 55)


def test_real_v1_net_with_scale_in_data_param():
    # examples/mnist/lenet_train_test.prototxt, Aug 2014: scale inside data_param
    src = load.load(os.path.join(LEGACY, "v1_lenet_train_test_data_param_scale.prototxt"))
    upgrade(src.message, src.schema)
    for layer in src.message.layer[:2]:
        assert layer.transform_param.scale == pytest.approx(0.00390625)
        assert not layer.data_param.HasField("scale")
    # the same net as the current V2 LeNet but for the data sources and backend
    twin = load.load(os.path.join(NETS, "lenet_train_test.prototxt"))
    upgrade(twin.message, twin.schema)
    for layer in twin.message.layer[:2]:
        layer.data_param.ClearField("backend")
        layer.data_param.ClearField("source")
    for layer in src.message.layer[:2]:
        layer.data_param.ClearField("source")
    assert src.message == twin.message


# ---------------------------------------------------------------- V0 -> V1 -> V2


V0_CONV_PAD_POOL = """
    name: "v0"
    input: "data" input_dim: 2 input_dim: 3 input_dim: 9 input_dim: 9
    input: "label" input_dim: 2 input_dim: 1 input_dim: 1 input_dim: 1
    state { phase: TEST }
    force_backward: true
    layers { layer { name: "pad1" type: "padding" pad: 2 } bottom: "data" top: "pad1" }
    layers { layer { name: "conv1" type: "conv" num_output: 4 kernelsize: 3 stride: 2 group: 1
                     biasterm: false blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
                     weight_filler { type: "xavier" } }
             bottom: "pad1" top: "conv1" }
    layers { layer { name: "pad2" type: "padding" pad: 1 } bottom: "conv1" top: "pad2" }
    layers { layer { name: "pool1" type: "pool" pool: AVE kernelsize: 3 stride: 2 }
             bottom: "pad2" top: "pool1" }
    layers { layer { name: "loss" type: "softmax_loss" } bottom: "pool1" bottom: "label" }
"""


def test_v0_padding_layers_fold_into_the_conv_and_pool_they_feed():
    net = _net(V0_CONV_PAD_POOL)
    lines, dropped = upgrade(net, BVLC, [10, 20, 30, 40, 50])
    assert [l.name for l in net.layer] == ["input", "conv1", "pool1", "loss"]
    # the Input layer has no line; the padding layers' lines (10, 30) are gone with them
    assert lines == [None, 20, 40, 50] and dropped == []
    conv, pool = net.layer[1], net.layer[2]
    assert list(conv.bottom) == ["data"] and list(conv.convolution_param.pad) == [2]
    assert list(pool.bottom) == ["conv1"] and pool.pooling_param.pad == 1


def test_v0_fields_go_to_their_v1_params():
    net = _upgraded(V0_CONV_PAD_POOL)
    conv, pool, loss = net.layer[1:]
    c = conv.convolution_param
    assert conv.type == "Convolution"
    assert (c.num_output, list(c.kernel_size), list(c.stride), c.group) == (4, [3], [2], 1)
    assert c.HasField("bias_term") and not c.bias_term and c.weight_filler.type == "xavier"
    assert [(p.lr_mult, p.decay_mult) for p in conv.param] == [(1, 1), (2, 0)]
    assert pool.type == "Pooling" and pool.pooling_param.pool == pool.pooling_param.AVE
    assert (pool.pooling_param.kernel_size, pool.pooling_param.stride) == (3, 2)
    assert loss.type == "SoftmaxWithLoss" and list(loss.top) == []


def test_v0_net_keeps_only_name_inputs_and_force_backward():
    # UpgradeV0Net starts a new net: the `state` of a V0 file does not survive
    net = _upgraded(V0_CONV_PAD_POOL)
    assert net.name == "v0" and net.force_backward and not net.HasField("state")


def test_v0_data_layer_fields():
    net = _upgraded("""
        layers { layer { name: "d" type: "images" source: "list.txt" batchsize: 16 cropsize: 99
                         mirror: true scale: 0.5 meanfile: "m" rand_skip: 3 shuffle_images: true
                         new_height: 128 new_width: 112 new_num: 7 } top: "data" top: "label" }
        layers { layer { name: "w" type: "window_data" source: "w.txt" batchsize: 4
                         det_fg_threshold: 0.6 det_bg_threshold: 0.4 det_fg_fraction: 0.3
                         det_context_pad: 16 det_crop_mode: "square" } top: "wd" top: "wl" }""")
    images, window = net.layer
    p, t = images.image_data_param, images.transform_param
    assert images.type == "ImageData"
    assert (p.source, p.batch_size, p.rand_skip, p.shuffle, p.new_height, p.new_width) == \
        ("list.txt", 16, 3, True, 128, 112)
    assert (t.crop_size, t.mirror, t.scale, t.mean_file) == (99, True, 0.5, "m")
    w = window.window_data_param
    assert window.type == "WindowData"
    assert (w.source, w.batch_size, w.context_pad, w.crop_mode) == ("w.txt", 4, 16, "square")
    assert (w.fg_threshold, w.bg_threshold, w.fg_fraction) == pytest.approx((0.6, 0.4, 0.3))


def test_v0_lrn_dropout_concat_and_hdf5_output_fields():
    net = _net("""
        input: "x"
        layers { layer { name: "n" type: "lrn" local_size: 3 alpha: 0.5 beta: 0.25 k: 2 } bottom: "x" top: "n" }
        layers { layer { name: "d" type: "dropout" dropout_ratio: 0.3 } bottom: "n" top: "n" }
        layers { layer { name: "c" type: "concat" concat_dim: 0 } bottom: "n" bottom: "x" top: "c" }
        layers { layer { name: "o" type: "hdf5_output" hdf5_output_param { file_name: "f.h5" } }
                 bottom: "c" bottom: "x" }""")
    upgrade(net, BVLC)
    lrn, drop, concat, out = net.layer
    assert lrn.type == "LRN"
    assert (lrn.lrn_param.local_size, lrn.lrn_param.alpha, lrn.lrn_param.beta, lrn.lrn_param.k) == (3, 0.5, 0.25, 2)
    assert drop.type == "Dropout" and drop.dropout_param.dropout_ratio == pytest.approx(0.3)
    assert concat.type == "Concat" and concat.concat_param.HasField("concat_dim")
    assert concat.concat_param.concat_dim == 0
    assert out.type == "HDF5Output" and out.hdf5_output_param.file_name == "f.h5"


def test_v0_fields_a_type_does_not_own_are_dropped_as_caffe_drops_them():
    """UpgradeV0LayerParameter (upgrade_proto.cpp, BVLC 9b89154) logs "Unknown parameter P for layer
    type T" for each field the layer's type does not own, in the order of its checks (shuffle_images
    is logged as "shuffle"), and upgrades the rest of the layer; UpgradeNetAsNeeded logs "continuing
    anyway", and ReadNetParamsFromTextFileOrDie ignores its result. So the net is built without them."""
    net = _net("""
        input: "x"
        layers { layer { name: "d" type: "data" source: "db" batchsize: 8 cropsize: 5 det_context_pad: 16
                         shuffle_images: true det_fg_threshold: 0.5 } top: "data" top: "label" }
        layers { layer { name: "r" type: "relu" pad: 1 num_output: 3 } bottom: "x" top: "x" }""")
    _, dropped = upgrade(net, BVLC)
    # Caffe's order of checks, not the fields' numbers (det_fg_threshold 54, det_context_pad 58, shuffle_images 64)
    assert [(d.layer, d.logged) for d in dropped] == [
        ("d", "Unknown parameter shuffle for layer type data"),
        ("d", "Unknown parameter det_fg_threshold for layer type data"),
        ("d", "Unknown parameter det_context_pad for layer type data"),
        ("r", "Unknown parameter num_output for layer type relu"),
        ("r", "Unknown parameter pad for layer type relu"),
    ]
    data, relu = net.layer
    assert (data.type, data.data_param.source, data.data_param.batch_size, data.transform_param.crop_size) == \
        ("Data", "db", 8, 5)
    assert relu.type == "ReLU" and not relu.HasField("convolution_param") and list(relu.bottom) == ["x"]


@pytest.mark.parametrize("text,message", [
    ('layers { layer { name: "a" type: "sparkle" } bottom: "x" top: "y" }', "unknown V0 layer type 'sparkle'"),
    ('layers { layer { name: "a" } bottom: "x" top: "y" }', "unknown V0 layer type ''"),
    ('layers { layer { name: "p" type: "padding" pad: 1 } bottom: "x" top: "p" }'
     'layers { layer { name: "a" type: "relu" } bottom: "p" top: "p" }', "feeds this 'relu' layer"),
    ('layers { layer { name: "a" type: "relu" } bottom: "nowhere" top: "y" }', "bottom 'nowhere'"),
    ('layers { layer { name: "a" type: "relu" } bottom: "x" top: "x" }'
     'layers { name: "b" type: RELU bottom: "x" top: "x" }', "in V1 form in a net of V0 layers"),
])
def test_v0_nets_caffe_cannot_upgrade_are_input_errors(text, message):
    """Each stops Caffe: UpgradeV0LayerType LOG(FATAL)s on an unknown type; a layer without one (or
    in V1 form: only its bottoms and tops are kept) upgrades to type "", on which LayerRegistry's
    CHECK fails; UpgradeV0PaddingLayers CHECKs a padding layer's use and LOG(FATAL)s on an unknown
    bottom."""
    net = _net('input: "x" ' + text)
    with pytest.raises(InputError, match=message.replace("(", r"\(")) as caught:
        upgrade(net, BVLC, [5, 9])
    assert caught.value.layer in ("a", "b") and caught.value.line in (5, 9) and caught.value.fix


def test_an_unfixable_legacy_net_exits_2_naming_file_line_and_layer(tmp_path):
    path = tmp_path / "bad.prototxt"
    path.write_text('name: "x"\ninput: "data"\nlayers {\n  layer { name: "odd" type: "sparkle" }\n'
                    '  bottom: "data"\n  top: "y"\n}\n')
    run = run_in_process(path)
    assert run.returncode == 2
    assert f"{path}:3: layer 'odd': unknown V0 layer type 'sparkle'" in run.stderr
    assert "Traceback" not in run.stderr


def test_v1_layers_keep_their_own_lines():
    path = os.path.join(NETS, "v1_lenet_train_test.prototxt")
    (net,) = build_nets(path, phase="test", inputs={"data": (100, 1, 28, 28)})
    text = open(path).read().splitlines()
    for layer in net.layers:
        if layer.is_split:
            assert layer.line is None
            continue
        assert text[layer.line - 1] == "layers {"
        block = text[layer.line:text.index("}", layer.line)]  # up to the block's first closing brace
        assert f'  name: "{layer.name}"' in block, layer.name


def test_v2_layers_in_a_v0_net_are_dropped_as_caffe_drops_them(tmp_path):
    # UpgradeV0Net builds a new net from the V0 `layers` only; lines follow the kept layers
    path = tmp_path / "mixed.prototxt"
    path.write_text('input: "data"\ninput_dim: 1\ninput_dim: 1\ninput_dim: 4\ninput_dim: 4\n'
                    'layer { name: "v2" type: "ReLU" bottom: "data" top: "data" }\n'
                    'layers {\n  layer { name: "r" type: "relu" }\n  bottom: "data"\n  top: "data"\n}\n')
    (net,) = build_nets(str(path))
    assert [(l.name, l.line) for l in net.layers] == [("input", None), ("r", 7)]


# CaffeNet deploy in V0 with padding layers (models/imagenet.prototxt, Feb 2014), input 10x3x227x227:
#   conv1  k11 s4:            (227 - 11) / 4 + 1 = 55
#   pool1  MAX k3 s2:         ceil((55 - 3) / 2) + 1 = 27
#   conv2  pad 2 (pad2) k5:   (27 + 2*2 - 5) / 1 + 1 = 27, group 2: weights 256 x 96/2 x 5 x 5
#   pool2:                    ceil((27 - 3) / 2) + 1 = 13
#   conv3/4/5 pad 1 k3:       (13 + 2*1 - 3) / 1 + 1 = 13
#   pool5:                    ceil((13 - 3) / 2) + 1 = 6
CAFFENET_DEPLOY = [
    ("input", (10, 3, 227, 227)), ("conv1", (10, 96, 55, 55)), ("relu1", (10, 96, 55, 55)),
    ("pool1", (10, 96, 27, 27)), ("norm1", (10, 96, 27, 27)), ("conv2", (10, 256, 27, 27)),
    ("relu2", (10, 256, 27, 27)), ("pool2", (10, 256, 13, 13)), ("norm2", (10, 256, 13, 13)),
    ("conv3", (10, 384, 13, 13)), ("relu3", (10, 384, 13, 13)), ("conv4", (10, 384, 13, 13)),
    ("relu4", (10, 384, 13, 13)), ("conv5", (10, 256, 13, 13)), ("relu5", (10, 256, 13, 13)),
    ("pool5", (10, 256, 6, 6)), ("fc6", (10, 4096)), ("relu6", (10, 4096)), ("drop6", (10, 4096)),
    ("fc7", (10, 4096)), ("relu7", (10, 4096)), ("drop7", (10, 4096)), ("fc8", (10, 1000)),
    ("prob", (10, 1000)),
]


def test_real_v0_net_with_padding_layers_builds_caffenet():
    path = os.path.join(LEGACY, "v0_caffenet_deploy_padding_layers.prototxt")
    (net,) = build_nets(path, phase="test")
    assert [(l.name, l.top_shapes[0]) for l in net.layers] == CAFFENET_DEPLOY
    # Caffe's figure: 4 bytes per element of every top, in-place tops counted again
    assert net.memory_required_for_data == 4 * sum(math.prod(s) for _, s in CAFFENET_DEPLOY)
    assert [p.shape for p in net.layer("conv2").params] == [(256, 48, 5, 5), (256,)]
    assert [p.shape for p in net.layer("conv4").params] == [(384, 192, 3, 3), (384,)]
    assert [(p.lr_mult, p.decay_mult) for p in net.layer("conv1").params] == [(1, 1), (2, 0)]
    # each layer keeps the line of its own `layers {` block; the folded padding layers leave none
    text = open(path).read().splitlines()
    for layer in net.layers[1:]:
        block = next(i for i, t in enumerate(text) if t.strip() == f'name: "{layer.name}"') - 1
        assert text[block - 1] == "layers {" and layer.line == block


def test_padding_layers_and_pads_in_conv_upgrade_to_the_same_net():
    # the same file one commit later, with the padding layers folded by hand (2848aa1f8)
    nets = []
    for name in ("v0_caffenet_deploy_padding_layers", "v0_caffenet_deploy_pad_in_conv"):
        src = load.load(os.path.join(LEGACY, f"{name}.prototxt"))
        upgrade(src.message, src.schema)
        nets.append(src.message)
    assert nets[0] == nets[1]


def test_real_v0_train_net_with_padding_and_data_fields():
    # examples/imagenet/imagenet_train.prototxt, Feb 2014: cropsize/meanfile/mirror on the data layer
    path = os.path.join(LEGACY, "v0_caffenet_train_padding_layers.prototxt")
    (net,) = build_nets(path, phase="train", inputs={"data": (256, 3, 227, 227)})
    data = net.layer("data").lp
    assert (data.data_param.batch_size, data.transform_param.crop_size, data.transform_param.mirror) == (256, 227, True)
    assert net.layer("conv2").top_shapes[0] == (256, 256, 27, 27)
    assert net.layer("pool5").top_shapes[0] == (256, 256, 6, 6)
    # the V0 loss layer names no top: Net::Init gives SoftmaxWithLoss an automatic one, a scalar
    assert net.layers[-1].name == "loss" and list(net.layers[-1].top_shapes) == [()]


# ---------------------------------------------------------------- against real Caffe


def _log_layers(text):
    (net,) = [n for n in logparse.parse(text) if n.phase == "TRAIN"]
    return net


@pytest.mark.parametrize("net_file", ["nets/v1_lenet_train_test.prototxt", "nets/v0_lenet_train.prototxt"])
def test_legacy_lenet_gives_the_2014_logs_shapes(net_file):
    """docs/tutorial/solver.md's log of the V1 LeNet (Sept 2014); the V0 LeNet (v0.9) is the same
    train net (its loss top is automatic). The log abbreviates: the layers it shows must match.
    Caffe then logged 4-D blobs (a label was 64 1 1 1), so shapes are compared by element count."""
    with open(os.path.join(LEGACY, "bvlc_doc_solver_md_lenet_snippet.log")) as f:
        logged = _log_layers(f.read())
    run = run_in_process(os.path.join(DATA, net_file), "--caffe-log", "--phase", "train",
                         "--input", "data=64x1x28x28")
    assert run.returncode == 0, run.stderr
    got = _log_layers(run.stdout)
    names = [l.name for l in got.layers]
    assert names == ["mnist", "conv1", "pool1", "conv2", "pool2", "ip1", "relu1", "ip2", "loss"]
    for layer in logged.layers:
        mine = got.layer(layer.name)
        assert [math.prod(s) for s in mine.shapes] == [math.prod(s) for s in layer.shapes], layer.name
        if layer.memory is not None:
            assert mine.memory == layer.memory, layer.name
    assert got.layer("mnist").shapes[0] == (64, 1, 28, 28)
    assert got.memory == logged.memory == 5169924


CVPRW15 = os.path.join(LEGACY, "cvprw15_cifar10")


def _cvprw15_log():
    with open(os.path.join(CVPRW15, "log.txt")) as f:
        return f.read()


def _four_axes(shape):
    """A shape as the 2015 Caffe of the log printed it: its Blob was always num x channels x height x
    width, so a top of fewer axes (an InnerProduct's N x C, the loss's scalar) has the rest as 1."""
    return tuple(shape) + (1,) * (4 - len(shape))


@pytest.mark.parametrize("phase,net_file", [("TRAIN", "train_CIFAR10_48.prototxt"),
                                            ("TEST", "test_CIFAR10_48.prototxt")])
def test_v0_net_with_fields_caffe_drops_gives_its_logs_shapes(phase, net_file):
    """kevinlin311tw/caffe-cvprw15's V0 nets put window-data fields (det_*) on a 'data' layer: Caffe
    logged an error for each, went on, and trained. Built from the files, with the data layer's
    shapes (the dataset's) from the log, every layer and top shape and Caffe's figure are the log's."""
    (logged,) = [n for n in logparse.parse(_cvprw15_log()) if n.phase == phase]
    run = run_in_process(os.path.join(CVPRW15, net_file), "--log", os.path.join(CVPRW15, "log.txt"),
                         "--phase", phase.lower(), "--caffe-log")
    assert run.returncode == 0, run.stderr
    (got,) = logparse.parse(run.stdout)
    assert [l.name for l in got.layers] == [l.name for l in logged.layers]
    assert [[_four_axes(s) for s in l.shapes] for l in got.layers] == [l.shapes for l in logged.layers]
    assert got.memory == logged.memory == {"TRAIN": 219538180, "TEST": 219539460}[phase]


def test_a_2014_log_is_reprinted_as_its_caffe_printed_it():
    """The Caffe of the log (2015, before N-D blobs reached it) printed every top with four axes, no
    memory line per layer, and one "Memory required for data" after "Network initialization done.":
    `protoaudit LOG --caffe-log` prints each net's lines as that Caffe did, line for line."""
    import re
    kept = re.compile(r"^(Setting up |Top shape: |with loss weight |Memory required for data: |Network initialization done"
                      r"|\S+ (needs|does not need) backward computation)")

    def lines(text, glog):
        out = []
        for line in text.splitlines():
            line = (line.split("] ", 1)[1] if "] " in line else "") if glog else line
            if kept.match(line.strip()):
                out.append(line.strip())
        return out

    logged = lines(_cvprw15_log(), glog=True)
    run = run_in_process(os.path.join(CVPRW15, "log.txt"), "--caffe-log")
    assert run.returncode == 0, run.stderr
    assert lines(run.stdout, glog=False) == logged
    assert logged.count("Network initialization done.") == 2 and "Top shape: 1 1 1 1 (1)" in logged


def test_fields_caffe_drops_are_listed_as_assumptions():
    """Each field the log's Caffe dropped from the train net (its "Unknown parameter" lines before the
    net was printed) is an assumption of the audit, on its layer, with the line Caffe logs."""
    text = _cvprw15_log()
    first = text[:text.index("Initializing net from parameters")]
    caffe = [line.split("] ", 1)[1] for line in first.splitlines() if "] Unknown parameter " in line]
    assert len(caffe) == 5
    run = run_in_process(os.path.join(CVPRW15, "train_CIFAR10_48.prototxt"), "--format", "json")
    assert run.returncode == 0, run.stderr
    dropped = [a for a in json.loads(run.stdout)["assumptions"] if "Unknown parameter" in a["assumption"]]
    assert [a["layer"] for a in dropped] == ["data"] * 5
    assert [a["assumption"].split('"')[1] for a in dropped] == caffe
    for fmt in ("text", "markdown", "csv", "html"):
        out = run_in_process(os.path.join(CVPRW15, "train_CIFAR10_48.prototxt"), "--format", fmt).stdout
        assert all(line in out for line in caffe), fmt


def _oracle_runs():
    return sorted(f[:-len(".json")] for f in os.listdir(os.path.join(ORACLE, "runs")))


@pytest.mark.parametrize("run", _oracle_runs())
def test_v1_oracle_nets_build_what_caffe_built(run):
    """V1 nets run by real Caffe (BVLC 9b89154, data layers replaced by DUMMY_DATA): every blob in
    Caffe's order (Split tops included), every layer and param shape, and Caffe's figure."""
    with open(os.path.join(ORACLE, "runs", f"{run}.json")) as f:
        caffe = json.load(f)
    (net,) = build_nets(os.path.join(ORACLE, "nets", f"{run}.prototxt"), phase=caffe["phase"].lower(),
                        stages=caffe["stages"])
    assert [(b.name, list(b.shape)) for b in net.blobs] == [(n, s) for n, s in caffe["blobs"]]
    assert [(l.name, l.type, [list(p.shape) for p in l.params]) for l in net.layers] == \
        [(l["name"], l["type"], l["param_shapes"]) for l in caffe["layers"]]
    assert net.memory_required_for_data == caffe["memory_required_for_data"]


# ---------------------------------------------------------------- V1 nets and their V2 twins

# (V1 file, V2 twin, {phase: (stages, --input)}, renames): read side by side at the corpus commits,
# the twins differ only in data sources and backends, the std of GoogLeNet's xavier fillers (unused
# by xavier), and these names (V2 name -> the V1 file's):
#   GoogLeNet train_val: the V1 file's second auxiliary loss writes the blob "loss2/loss1";
#   GoogLeNet deploy: the V1 file's `input: "data"` becomes Caffe's Input layer, named "input".
MNIST, CIFAR = (1, 28, 28), (3, 32, 32)
TWINS = [
    ("v1_lenet_train_test", "lenet_train_test",
     {"train": ((), {"data": (64,) + MNIST}), "test": ((), {"data": (100,) + MNIST})}, {}, {}),
    ("v1_cifar10_quick_train_test", "cifar10_quick_train_test",
     {"train": ((), {"data": (100,) + CIFAR}), "test": ((), {"data": (100,) + CIFAR})}, {}, {}),
    ("v1_cifar10_full_train_test", "cifar10_full_train_test",
     {"train": ((), {"data": (100,) + CIFAR}), "test": ((), {"data": (100,) + CIFAR})}, {}, {}),
    ("v1_bvlc_alexnet_train_val", "bvlc_alexnet_train_val",
     {"train": ((), {"data": (256, 3, 227, 227)}), "test": ((), {"data": (50, 3, 227, 227)})}, {}, {}),
    ("v1_bvlc_caffenet_train_val", "bvlc_caffenet_train_val",
     {"train": ((), {"data": (256, 3, 227, 227)}), "test": ((), {"data": (50, 3, 227, 227)})}, {}, {}),
    ("v1_mnist_siamese_train_test", "mnist_siamese_train_test",
     {"train": ((), {"pair_data": (64, 2, 28, 28)}), "test": ((), {"pair_data": (100, 2, 28, 28)})},
     {}, {}),
    ("v1_mnist_autoencoder", "mnist_autoencoder",
     {"train": ((), {"data": (100,) + MNIST}), "test": (("test-on-test",), {"data": (100,) + MNIST})},
     {}, {}),
    ("v1_bvlc_googlenet_train_val", "bvlc_googlenet_train_val",
     {"train": ((), {"data": (32, 3, 224, 224)}), "test": ((), {"data": (50, 3, 224, 224)})},
     {}, {"loss2/loss2": "loss2/loss1"}),
    ("v1_bvlc_googlenet_deploy", "bvlc_googlenet_deploy", {"train": ((), {})}, {"data": "input"}, {}),
]


def _summary(net, layer_names=None, blob_names=None):
    """Everything Net::Init decides per layer, with names mapped as given; and Caffe's figure."""
    layer_names, blob_names = layer_names or {}, blob_names or {}
    blob = lambda i: blob_names.get(net.blobs[i].name, net.blobs[i].name)  # noqa: E731
    layers = [(layer_names.get(l.name, l.name), l.type, [blob(i) for i in l.bottoms],
               [blob(i) for i in l.tops], l.top_shapes, [p.shape for p in l.params],
               [(p.lr_mult, p.decay_mult) for p in l.params])
              for l in net.layers]
    return layers, net.memory_required_for_data


@pytest.mark.parametrize("v1,v2,phase,stages,inputs,layer_names,blob_names", [
    pytest.param(v1, v2, phase, stages, inputs, layer_names, blob_names, id=f"{v1}-{phase}")
    for v1, v2, phases, layer_names, blob_names in TWINS for phase, (stages, inputs) in phases.items()])
def test_v1_net_builds_as_its_v2_twin(v1, v2, phase, stages, inputs, layer_names, blob_names):
    (old,) = build_nets(os.path.join(NETS, f"{v1}.prototxt"), phase=phase, stages=stages, inputs=inputs)
    (new,) = build_nets(os.path.join(NETS, f"{v2}.prototxt"), phase=phase, stages=stages, inputs=inputs)
    assert _summary(old) == _summary(new, layer_names, blob_names)
