"""The caffe-segnet fork: its layers (BN, Upsample, DenseImageData), the seed-001 nets, real fork runs.

Expected shapes are derived by hand from the fork's sources (alexgkendall/caffe-segnet 344c113:
bn_layer.cpp, upsample_layer.cpp, dense_image_data_layer.cpp, pooling_layer.cpp, net.cpp), or come
from real runs of the fork (tests/data/nets/segnet_oracle) and the user's Caffe log (seed 001).
"""
import json
import math
import os

import pytest
from google.protobuf import text_format

from conftest import DATA, ROOT, build_text as build, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.read.load import load

NETS = os.path.join(DATA, "nets")
ORACLE = os.path.join(NETS, "segnet_oracle")
SAMPLES = os.path.join(ROOT, "samples")


def final_memory(stdout):
    """The last "Memory required for data" figure of a --caffe-log run."""
    return int([line for line in stdout.splitlines() if line.startswith("Memory required for data:")][-1].split()[-1])


# A net-level input (the fork has no Input layer), then a MAX pooling with its mask top.
HEAD = """
input: "data"
input_shape { dim: 2 dim: 3 dim: 5 dim: 7 }
layer { name: "pool" type: "Pooling" bottom: "data" top: "pool" top: "pool_mask"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
"""


def upsample(params):
    return HEAD + f"""
layer {{ name: "up" type: "Upsample" bottom: "pool" bottom: "pool_mask" top: "up"
        upsample_param {{ {params} }} }}
"""


# --- BN ----------------------------------------------------------------------------------------

def test_bn_keeps_the_shape_and_has_a_scale_and_a_shift_per_channel(tmp_path):
    # a bare BN reads as PSPNet's too (tests/test_fork_seg.py): these tests name caffe-segnet (--fork)
    net = build(tmp_path, HEAD + 'layer { name: "bn" type: "BN" bottom: "pool" top: "pool" }', schema="segnet")
    # pool: ceil((5 - 2) / 2) + 1 = 3, ceil((7 - 2) / 2) + 1 = 4
    assert tops(net, "bn") == [(2, 3, 3, 4)]
    assert list(net.layer("bn").in_place) == [True]
    # BNLayer::LayerSetUp: blobs_[0] (scale) and blobs_[1] (shift), each Blob(1, C, 1, 1)
    assert [p.shape for p in net.layer("bn").params] == [(1, 3, 1, 1), (1, 3, 1, 1)]


def test_bn_in_learn_mode_may_output_the_batch_mean_and_variance(tmp_path):
    net = build(tmp_path, HEAD + 'layer { name: "bn" type: "BN" bottom: "pool" top: "bn" top: "mean" top: "var" }',
                schema="segnet")
    # top[1] and top[2] are Reshape(1, C_, 1, 1)
    assert tops(net, "bn") == [(2, 3, 3, 4), (1, 3, 1, 1), (1, 3, 1, 1)]


def test_bn_in_inference_mode_has_one_top(tmp_path):
    text = HEAD + """layer { name: "bn" type: "BN" bottom: "pool" top: "bn" top: "mean"
                             bn_param { bn_mode: INFERENCE } }"""
    with pytest.raises(InputError, match="at most 1 top"):
        build(tmp_path, text)


def test_bn_reads_a_2_axis_bottom_as_n_c_1_1(tmp_path):
    text = HEAD + """
layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip" inner_product_param { num_output: 10 } }
layer { name: "bn" type: "BN" bottom: "ip" top: "bn" }
"""
    net = build(tmp_path, text, schema="segnet")
    # num() = 2, channels() = 10, height() and width() of a 2-axis blob read as 1 (LegacyShape)
    assert tops(net, "ip") == [(2, 10)]
    assert tops(net, "bn") == [(2, 10, 1, 1)]
    assert [p.shape for p in net.layer("bn").params] == [(1, 10, 1, 1)] * 2


# --- Upsample ----------------------------------------------------------------------------------

@pytest.mark.parametrize("params,expected", [
    ("", (2, 3, 6, 8)),                                    # scale defaults to 2: 3*2, 4*2
    ("scale: 2", (2, 3, 6, 8)),
    ("scale: 2 pad_out_h: true", (2, 3, 5, 8)),            # 3*2 - 1 = 5: back to pool's 5
    ("scale: 2 pad_out_w: true", (2, 3, 6, 7)),            # 4*2 - 1 = 7
    ("scale: 2 pad_out_h: true pad_out_w: true", (2, 3, 5, 7)),
    ("scale: 3", (2, 3, 9, 12)),
    ("scale_h: 3 scale_w: 2", (2, 3, 9, 8)),
    ("upsample_h: 5 upsample_w: 7", (2, 3, 5, 7)),
    ("scale: 2 upsample_h: 5 upsample_w: 7", (2, 3, 5, 7)),  # both given: upsample_h/_w win
    ("upsample_h: 5", (2, 3, 6, 8)),  # upsample_h alone is not the exact-size path: scale 2 is used
])
def test_upsample_output_size(tmp_path, params, expected):
    net = build(tmp_path, upsample(params))
    assert tops(net, "pool") == [(2, 3, 3, 4), (2, 3, 3, 4)]
    assert tops(net, "up") == [expected]
    assert net.layer("up").params == ()


@pytest.mark.parametrize("params,message", [
    ("scale: 2 scale_h: 2 scale_w: 2", "upsample_h and upsample_w"),  # scale OR scale_h and scale_w
    ("scale_h: 2", "upsample_h and upsample_w"),                      # scale_h needs scale_w
    ("upsample_h: 5 scale_h: 2", "upsample_h and upsample_w"),        # neither path of the CHECK holds
    ("scale: 1", "must be > 1"),
    ("upsample_h: 1 upsample_w: 7", "must be > 1"),
    ("scale: 3 pad_out_h: true", "pad_out_h needs scale_h == 2"),
])
def test_upsample_bad_parameters(tmp_path, params, message):
    with pytest.raises(InputError, match=message):
        build(tmp_path, upsample(params))


def test_upsample_mask_must_match_its_input(tmp_path):
    text = HEAD + """
layer { name: "pool2" type: "Pooling" bottom: "pool" top: "pool2" top: "pool2_mask"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "up" type: "Upsample" bottom: "pool2" bottom: "pool_mask" top: "up" }
"""
    with pytest.raises(InputError, match="same shape"):
        build(tmp_path, text)


def test_upsample_takes_two_bottoms(tmp_path):
    """(Without --fork, a one-bottom Upsample is MobileNet-YOLO's: tests/test_fork_mobile.py.)"""
    text = HEAD + 'layer { name: "up" type: "Upsample" bottom: "pool" top: "up" }\n' \
                  'layer { name: "s" type: "Silence" bottom: "pool_mask" }'
    with pytest.raises(InputError, match="exactly 2 bottom"):
        build(tmp_path, text, schema="segnet")


# --- DenseImageData -----------------------------------------------------------------------------

def dense(params, transform=""):
    return f"""
layer {{ name: "data" type: "DenseImageData" top: "data" top: "label"
        {transform}
        dense_image_data_param {{ source: "train.txt" batch_size: 4 {params} }} }}
"""


@pytest.mark.parametrize("params,transform,data", [
    ("new_height: 360 new_width: 480", "", (4, 3, 360, 480)),
    ("new_height: 360 new_width: 480 is_color: false", "", (4, 1, 360, 480)),  # grey read: 1 channel
    ("new_height: 360 new_width: 480 crop_height: 224 crop_width: 300", "", (4, 3, 224, 300)),
    ("crop_height: 224 crop_width: 300", "", (4, 3, 224, 300)),
    ("crop_height: 224 crop_width: 300", "transform_param { crop_size: 200 }", (4, 3, 200, 200)),
])
def test_dense_image_data_tops(tmp_path, params, transform, data):
    net = build(tmp_path, dense(params, transform))
    n, _, h, w = data
    assert tops(net, "data") == [data, (n, 1, h, w)]  # the label image: 1 channel, the data's size


def test_dense_image_data_batch_override(tmp_path):
    net = build(tmp_path, dense("new_height: 360 new_width: 480"), batch=1)
    assert tops(net, "data") == [(1, 3, 360, 480), (1, 1, 360, 480)]


def test_dense_image_data_size_from_the_dataset_needs_input(tmp_path):
    with pytest.raises(InputError, match="--input data="):
        build(tmp_path, dense(""), strict=True)  # without --strict, 224 x 224 is assumed
    net = build(tmp_path, dense(""), inputs={"data": (2, 3, 10, 12)})
    assert tops(net, "data") == [(2, 3, 10, 12), (2, 1, 10, 12)]


@pytest.mark.parametrize("params", ["new_height: 360", "crop_width: 300"])
def test_dense_image_data_sizes_come_in_pairs(tmp_path, params):
    with pytest.raises(InputError, match="together"):
        build(tmp_path, dense(params))


def test_dense_image_data_through_the_cli(protoaudit, tmp_path):
    path = tmp_path / "net.prototxt"
    path.write_text(dense(""))
    run = protoaudit(path, "--caffe-log", "--strict")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "--input data=" in run.stderr


# --- The fork's Net::Init: net-level inputs -------------------------------------------------------

def test_net_inputs_are_not_counted_and_are_split_like_layers(tmp_path):
    text = """
input: "data"
input_shape { dim: 1 dim: 2 dim: 4 dim: 4 }
input: "label"
input_shape { dim: 1 dim: 1 dim: 4 dim: 4 }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "data" bottom: "label" top: "loss" }
layer { name: "acc" type: "Accuracy" bottom: "data" bottom: "label" top: "acc" }
layer { name: "bn" type: "BN" bottom: "data" top: "bn" }
"""
    net = build(tmp_path, text, schema="segnet")
    # InsertSplits: a net input read by several layers gets a Split named after layer "input",
    # put before every layer; data feeds 3 layers, label 2.
    assert [layer.name for layer in net.layers] == [
        "data_input_0_split", "label_input_1_split", "loss", "acc", "bn"]
    assert tops(net, "label_input_1_split") == [(1, 1, 4, 4)] * 2
    # net.cpp adds only layer tops to memory_used_: 3*32 + 2*16 (splits) + 1 + 1 + 32 (bn) = 162
    assert net.memory_required_for_data == 4 * (3 * 32 + 2 * 16 + 1 + 1 + 32)


# --- Real fork runs ------------------------------------------------------------------------------

ORACLE_RUNS = sorted(name[:-5] for name in os.listdir(ORACLE) if name.endswith(".json"))


def legacy(shape):
    """The oracle records every blob as (num, channels, height, width), 1 for a missing axis."""
    return list(shape) + [1] * (4 - len(shape))


@pytest.mark.parametrize("run", ORACLE_RUNS)
def test_shapes_and_figure_match_the_fork(run):
    with open(os.path.join(ORACLE, run + ".json")) as f:
        measured = json.load(f)
    net = build_nets(os.path.join(ORACLE, run + ".prototxt"))[0]
    assert [[b.name, legacy(b.shape)] for b in net.blobs] == measured["blobs"]
    assert [layer.name for layer in net.layers] == [layer["name"] for layer in measured["layers"]]
    assert [[legacy(p.shape) for p in layer.params] for layer in net.layers] == \
        [layer["param_nchw"] for layer in measured["layers"]]
    assert net.memory_required_for_data == measured["memory_required_for_data_fork"]


# --- The corpus SegNet nets (DenseImageData reads CamVid's 360x480 images) ------------------------

CORPUS = {
    # file: (--input, the net's last layer and its top shapes)
    "segnet_basic_train.prototxt": ({"data": (4, 3, 360, 480)}, "accuracy", [(), (11, 1, 1, 1)]),
    "segnet_train.prototxt": ({"data": (4, 3, 360, 480)}, "accuracy", [(), (11, 1, 1, 1)]),
    "segnet_bayesian_basic_train.prototxt": ({"data": (4, 3, 360, 480)}, "accuracy", [(), (11, 1, 1, 1)]),
    "segnet_inference.prototxt": ({"data": (1, 3, 360, 480)}, "prob", [(1, 11, 360, 480)]),
    "segnet_basic_inference.prototxt": ({"data": (1, 3, 360, 480)}, "prob", [(1, 11, 360, 480)]),
    "segnet_pascal_deploy.prototxt": ({}, "prob", [(1, 21, 224, 224)]),  # input_dim 1x3x224x224
}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_nets_get_every_top_shape(name):
    inputs, last, last_tops = CORPUS[name]
    net = build_nets(os.path.join(NETS, name), inputs=inputs)[0]
    assert all(len(layer.top_shapes) == len(layer.tops) for layer in net.layers)
    assert net.layers[-1].name == last and list(net.layers[-1].top_shapes) == last_tops


@pytest.mark.parametrize("name,run", [
    ("segnet_basic_train.prototxt", "segnet_basic_train_b4"),
    ("segnet_train.prototxt", "segnet_train_b4"),
    ("segnet_bayesian_basic_train.prototxt", "bayesian_segnet_basic_train_b4"),
])
def test_corpus_train_nets_match_the_fork_run_of_the_same_net(name, run):
    """The oracle ran these nets with net-level inputs in place of DenseImageData: the same blobs,
    but the label's Split is named after layer "data" instead of "input", and a data layer's two
    tops (4x3x360x480 and 4x1x360x480) are counted where net inputs are not."""
    with open(os.path.join(ORACLE, run + ".json")) as f:
        measured = json.load(f)
    net = build_nets(os.path.join(NETS, name), inputs={"data": (4, 3, 360, 480)})[0]
    blobs = [[b.name.replace("label_data_1_split", "label_input_1_split"), legacy(b.shape)] for b in net.blobs]
    assert blobs == measured["blobs"]
    data_layer_tops = 4 * 3 * 360 * 480 + 4 * 1 * 360 * 480
    assert net.memory_required_for_data == measured["memory_required_for_data_fork"] + 4 * data_layer_tops


def test_segnet_basic_at_batch_1_gives_the_figure_users_report(protoaudit):
    run = protoaudit(os.path.join(NETS, "segnet_basic_train.prototxt"), "--caffe-log",
                     "--input", "data=1x3x360x480")
    assert run.returncode == 0, run.stderr
    # the fork's figure without the inputs (oracle segnet_basic_train_b1: 408161332) plus the data
    # layer's tops: 4 * (3*360*480 + 360*480) = 2764800
    assert final_memory(run.stdout) == 408161332 + 2764800 == 410926132


# --- Seed 001: the user's two nets ---------------------------------------------------------------

def stage(n, channels, h, w, copies):
    """`copies` tops of n x channels x h x w (in-place tops count again, as net.cpp adds them)."""
    return copies * n * channels * h * w


def pooled(size, kernel, stride):
    """PoolingLayer::Reshape without padding: ceil((size - kernel) / stride) + 1."""
    return math.ceil((size - kernel) / stride) + 1


def encoder_decoder(n):
    """Top counts of the SegNet-basic body at batch n, from pool1's input at 384x512 to the loss.

    Encoder stage: conv, BN and ReLU in place (3 tops), then MAX pooling 2x2/2 with its mask
    (2 tops). Decoder stage: Upsample, conv, BN in place (3 tops; no ReLU, as in SegNet-basic).
    """
    sizes = [(384, 512), (192, 256), (96, 128), (48, 64)]
    total = 0
    for h, w in sizes:
        total += stage(n, 64, h, w, 3) + stage(n, 64, pooled(h, 2, 2), pooled(w, 2, 2), 2)
    for h, w in reversed(sizes):
        total += stage(n, 64, h, w, 3)
    classifier = n * 3 * 384 * 512
    label = n * 1 * 384 * 512
    total += classifier + 2 * classifier  # conv_classifier, and its Split for loss and accuracy
    total += 2 * label  # the label's Split for loss and accuracy
    total += 1 + 1 + 3  # loss (one top), accuracy, per_class_accuracy (3 classes: 3x1x1x1)
    return total


def old_tops():
    n = 4
    data, label = n * 4 * 384 * 512, n * 1 * 384 * 512
    return data + label + data + encoder_decoder(n)  # data, label, the LRN "norm" on the data


def new_tops():
    n = 1
    data, label = n * 4 * 769 * 1025, n * 1 * 384 * 512
    assert (pooled(769, 3, 2), pooled(1025, 3, 2)) == (384, 512)  # ceil(766/2)+1, ceil(1022/2)+1
    conv0 = stage(n, 64, 769, 1025, 3)  # conv0, conv0_bn, relu0
    pool0 = stage(n, 64, 384, 512, 2)  # pool0 and its (unused) mask
    return data + label + data + conv0 + pool0 + encoder_decoder(n)


def test_seed_derivations():
    # old: 3145728 + 786432 + 3145728 (data, label, norm)
    #      + 150994944 + 25165824 + 37748736 + 6291456 + 9437184 + 1572864 + 2359296 + 393216 (encoder)
    #      + 2359296 + 9437184 + 37748736 + 150994944 (decoder)
    #      + 2359296 + 4718592 + 1572864 + 5 (classifier, splits, loss and accuracy) = 450232325
    assert old_tops() == 450232325 and 4 * old_tops() == 1800929300
    # new: 3152900 + 196608 + 3152900 + 151339200 (conv0 stage) + 25165824 (pool0)
    #      + the body at batch 1 (110788613) = 293796045
    assert new_tops() == 293796045 and 4 * new_tops() == 1175184180


@pytest.mark.parametrize("sample,figure,derivation", [
    ("segnet_seed001_old.prototxt", 1800929300, old_tops),
    ("segnet_seed001_new.prototxt", 1175184180, new_tops),
])
def test_seed_samples_print_the_users_figure(protoaudit, sample, figure, derivation):
    run = protoaudit(os.path.join(SAMPLES, sample), "--caffe-log")
    assert run.returncode == 0, run.stderr
    assert final_memory(run.stdout) == figure == 4 * derivation()


@pytest.mark.parametrize("sample,seed_count,weights,input_shape", [
    # conv1 64x4x7x7 = 12544; conv2..4 and conv_decode4..1 7 x 64x64x7x7 = 7 x 200704 = 1404928;
    # 8 BN scales of 64 = 512; conv_classifier 3x64x1x1 = 192: 1418176
    ("segnet_seed001_old.prototxt", 1418176, 12544 + 7 * 200704 + 8 * 64 + 192, (4, 4, 384, 512)),
    # conv0 64x4x7x7 = 12544 in front; conv1 now 64x64x7x7, so 8 x 200704 = 1605632; 9 BN scales
    # (conv0_bn too) = 576; conv_classifier 192: 1418176 - 12544 + 12544 + 200704 + 64 = 1618944
    ("segnet_seed001_new.prototxt", 1618944, 12544 + 8 * 200704 + 9 * 64 + 192, (1, 4, 769, 1025)),
])
def test_seed_samples_parameters_and_input(sample, seed_count, weights, input_shape):
    net = build_nets(os.path.join(SAMPLES, sample))[0]
    assert weights == seed_count
    # the user's script counted each layer's first param blob (conv weights, BN scales)
    assert sum(layer.params[0].count for layer in net.layers if layer.params) == weights
    assert tops(net, "data")[0] == input_shape
    assert tops(net, "conv_decode1") == [(input_shape[0], 64, 384, 512)]
    assert list(net.layer("loss").top_shapes) == [()]  # SoftmaxWithLoss with one top
    # in place: every BN and ReLU; the masks feed the Upsample layers
    for layer in net.layers:
        assert all(layer.in_place) == (layer.type in ("BN", "ReLU")), layer.name
    assert [layer.name for layer in net.layers if layer.is_split] == [
        "label_data_1_split", "conv_classifier_conv_classifier_0_split"]


def _with_dense_image_data(tmp_path, sample):
    """The sample with the data layer a stock fork would read images with (sizes from the images)."""
    src = load(os.path.join(SAMPLES, sample))
    net = src.message
    layer = net.layer[0]
    layer.ClearField("dummy_data_param")
    layer.type = "DenseImageData"
    layer.dense_image_data_param.source = "train.txt"
    layer.dense_image_data_param.batch_size = 4
    path = tmp_path / sample
    path.write_text(text_format.MessageToString(net))
    return str(path)


def test_old_net_with_dense_image_data_needs_the_4_channel_input(tmp_path):
    path = _with_dense_image_data(tmp_path, "segnet_seed001_old.prototxt")
    with pytest.raises(InputError, match="--input data="):
        build_nets(path, strict=True)
    # the user's 4-channel stacks: OpenCV's colour read would give 3, so the shape is declared
    net = build_nets(path, inputs={"data": (4, 4, 384, 512)})[0]
    assert net.memory_required_for_data == 1800929300


def test_new_net_cannot_be_fed_by_dense_image_data(tmp_path):
    path = _with_dense_image_data(tmp_path, "segnet_seed001_new.prototxt")
    # image and label share one size: a 769x1025 label has 788225 entries per image, not the
    # 384*512 = 196608 predictions, so SoftmaxWithLoss refuses it
    with pytest.raises(InputError, match="number of labels must match"):
        build_nets(path, inputs={"data": (1, 4, 769, 1025)})
