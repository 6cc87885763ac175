"""oftenliu's MTCNN Caffe (oftenliu/caffe ad8749e, the Caffe of oftenliu/caffe-mtcnn 6bb430c): its
schema, its five layers held against their source, and the repository's three real logs
(tests/data/python_mtcnn/oftenliu, tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/proto/caffe.proto and
include/caffe/layers/often_mtcnn_*_layer.hpp, src/caffe/layers/often_mtcnn_*_layer.cpp, cited by
file and line, or are the lines Caffe logged.
"""
import os
import re

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from logparse import parse
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers

HERE = os.path.join(DATA, "python_mtcnn", "oftenliu")
F = 4  # bytes per float
GLOG = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ [^\]]+\] ?")
LINES = re.compile(r"^(Creating Layer|Setting up|Top shape|Memory required for data)")
NETS = ("pnet", "rnet", "onet")


def log_lines(text):
    """The lines of Net::Init's set-up that a Caffe log and --caffe-log both print."""
    return [line for line in (GLOG.sub("", raw) for raw in text.splitlines()) if LINES.match(line)]


HEAD = ('input: "x" input_shape { dim: 8 dim: 6 }\n'
        'input: "label" input_shape { dim: 8 }\n'
        'input: "box" input_shape { dim: 8 dim: 4 }\n'
        'layer { name: "s" type: "InnerProduct" bottom: "x" top: "s" inner_product_param { num_output: 2 } }\n'
        'layer { name: "r" type: "InnerProduct" bottom: "x" top: "r" inner_product_param { num_output: 4 } }\n')
BRIDGE = ('layer { name: "bridge" type: "OftenMtcnnClassBridge" bottom: "s" bottom: "label" top: "sv" top: "lv" '
          'propagate_down: 1 propagate_down: 0 }\n')
LOSS = ('layer { name: "cls" type: "OftenMtcnnSoftmaxLoss" bottom: "sv" bottom: "lv" top: "cls" '
        'propagate_down: 1 propagate_down: 0 }\n')
ACC = 'layer { name: "acc" type: "OftenMtcnnAccuracy" bottom: "sv" bottom: "lv" top: "acc" %s}\n'
EUCLID = ('layer { name: "reg" type: "%s" bottom: "r" bottom: "box" %s top: "reg" loss_weight: 0.5 '
          'propagate_down: 1 propagate_down: 0 propagate_down: 0 }\n')


def net(tmp_path, text):
    return build_text(tmp_path, text, schema="oftenliu")


def test_the_proto_is_the_forks_verbatim():
    """oftenliu/caffe's caffe.proto: BVLC's of 2a1c552 with MTCNNBBox, MTCNNLandMark, MTCNNDatum,
    mtcnn_data_param = 148 and mtcnn_loss_param = 149 (MTCNNDataParameter, MtcnnLossParameter). Its 148
    is BVLC master's clip_param, which it does not have: that is why it is a schema of its own."""
    text = open(os.path.join(ROOT, "proto", "forks", "oftenliu.proto")).read()
    assert text.startswith("// oftenliu/caffe (the Caffe of oftenliu/caffe-mtcnn: BVLC Caffe of June 2018 with its "
                           "MTCNN layers), src/caffe/proto/caffe.proto at commit ad8749ea90d81a3f96fcb614546927102d1662b0,")
    for line in ("optional MTCNNDataParameter mtcnn_data_param = 148;",
                 "optional MtcnnLossParameter mtcnn_loss_param = 149;",
                 "optional float drop_loss_rate = 1 [default = 0]; // online hard mining drop rate"):
        assert line in text
    assert "clip_param" not in text and "round_mode" not in text


def test_class_bridge_tops_and_backward(tmp_path):
    """Reshape (classbridge_layer.cpp:31-36): top 0 is bottom 0's shape, (8, 2); top 1 is (bottom 1's
    shape(0),) = (8,). No buffer of its own; its backward writes bottom 0's diff, 8 x 2 floats
    (cpp:81-84), not the labels'."""
    n = net(tmp_path, HEAD + BRIDGE + LOSS)
    assert tops(n, "bridge") == [(8, 2), (8,)]
    assert layer_buffers(n, "bridge") == {}
    got = {b.owner: b.bytes for b in net_buffers(n, mode="gpu") if b.layer == "bridge"
           and b.kind == "top diff" and b.touch == "backward"}
    assert got == {"s": 8 * 2 * F}


def test_class_bridge_needs_its_second_top(tmp_path):
    """The header allows one top (hpp:29-30) but Reshape writes top[1] whatever the count (cpp:34-36)."""
    with pytest.raises(InputError, match="second top"):
        net(tmp_path, HEAD + BRIDGE.replace(' top: "lv"', "").replace("propagate_down: 1 propagate_down: 0 ", "")
            + LOSS.replace('"lv"', '"label"'))


def test_softmax_loss_buffers_by_hand(tmp_path):
    """The loss is a scalar (LossLayer). prob_ (8 x 2 = 16 floats, the inner Softmax's top, cpp:34)
    and its diff, filled with the loss weight by the inner Softmax's SetUp (cpp:27-35: the copied
    parameters already carry LossLayer's weight 1); the inner Softmax's scale_ (8) in Caffe's engine
    and sum_multiplier_ (2, host); loss_buffer_, 8 (Dtype, int) pairs of 8 bytes on the host (cpp:70,
    hpp:45-50). The forward reads prob_ on the host (cpp:171) after the inner Softmax wrote it on the
    device: a host copy of 16 floats in GPU mode."""
    n = net(tmp_path, HEAD + BRIDGE + LOSS)
    assert tops(n, "cls") == [()]
    assert layer_buffers(n, "cls") == {
        ("prob_", "device"): 16 * F, ("prob_.diff", "device"): 16 * F, ("prob_ (host copy)", "host"): 16 * F,
        ("scale_", "device"): 8 * F, ("sum_multiplier_", "host"): 2 * F, ("loss_buffer_", "host"): 8 * 8}
    assert layer_buffers(n, "cls", engine="cudnn") == {
        ("prob_", "device"): 16 * F, ("prob_.diff", "device"): 16 * F, ("prob_ (host copy)", "host"): 16 * F,
        ("sum_multiplier_", "host"): 2 * F, ("loss_buffer_", "host"): 8 * 8}


def test_softmax_loss_label_count(tmp_path):
    """CHECK_EQ(batch_size, bottom[1]->count()) (cpp:58-64): 8 predictions, 4 labels."""
    text = HEAD.replace('input_shape { dim: 8 }', 'input_shape { dim: 8 dim: 1 }') + (
        'input: "few" input_shape { dim: 4 }\n'
        'layer { name: "cls" type: "OftenMtcnnSoftmaxLoss" bottom: "s" bottom: "few" top: "cls" }\n')
    with pytest.raises(InputError):
        net(tmp_path, text)


def test_accuracy_is_bvlcs_shape_on_the_host(tmp_path):
    """Reshape (accuracy_layer.cpp:36-44): a scalar, and with a second top (C,) = (2,) and nums_buffer_
    of 2, written on the host (CPU code only)."""
    n = net(tmp_path, HEAD + BRIDGE + LOSS + ACC % 'top: "per_class" ')
    assert tops(n, "acc") == [(), (2,)]
    assert layer_buffers(n, "acc") == {("nums_buffer_", "host"): 2 * F}


@pytest.mark.parametrize("kind", ["OftenMtcnnEuclideanLoss", "OftenMtcnnLandMarkLoss"])
def test_euclidean_losses_by_hand(tmp_path, kind):
    """LossLayer's scalar; diff_ like bottom 0, 8 x 4 floats, filled on the host by the forward
    (euclidean_loss_layer.cpp:15, 27-44; landmark_loss_layer.cpp:17, 30-47); the backward writes
    bottom 0's diff (propagate_down 1), 8 x 4 floats, not the targets' nor the labels'."""
    n = net(tmp_path, HEAD + EUCLID % (kind, 'bottom: "label"'))
    assert tops(n, "reg") == [()]
    assert layer_buffers(n, "reg") == {("diff_", "host"): 8 * 4 * F}
    got = {b.owner: b.bytes for b in net_buffers(n, mode="gpu") if b.layer == "reg"
           and b.kind == "top diff" and b.touch == "backward"}
    assert got == {"r": 8 * 4 * F}


@pytest.mark.parametrize("kind", ["OftenMtcnnEuclideanLoss", "OftenMtcnnLandMarkLoss"])
def test_euclidean_losses_need_the_labels(tmp_path, kind):
    """MinBottomBlobs 2 (hpp:48-49), but the forward reads bottom[2] (cpp:23): two are refused."""
    with pytest.raises(InputError, match="3"):
        net(tmp_path, HEAD + (EUCLID % (kind, "")).replace(" propagate_down: 0 }", " }"))


@pytest.mark.parametrize("name", NETS)
def test_the_real_logs_are_reproduced_line_for_line(name):
    """Each log (cut to its train net's set-up) comes back line for line: every Top shape line and
    every "Memory required for data" figure, the five layers of the fork among them."""
    text = open(os.path.join(HERE, f"{name}.log")).read()
    r = run_in_process(os.path.join(HERE, f"{name}.log"), "--caffe-log")
    assert r.returncode == 0, r.stderr
    assert log_lines(r.stdout) == log_lines(text)
    assert build_nets(os.path.join(HERE, f"{name}.log"))[0].schema == "oftenliu"


@pytest.mark.parametrize("name", NETS)
def test_the_net_files_give_the_logs_train_lines_with_no_flags(name):
    """train_<net>.prototxt with no flags (batch 384 from its param_str) prints its log's train-net
    lines, every one, down to the log's last "Memory required for data"; the fork's layers log
    (384, 2, 1, 1) and (384,) for the bridge and '(1)' for the losses and the accuracy."""
    logged = log_lines(open(os.path.join(HERE, f"{name}.log")).read())
    r = run_in_process(f"train_{name}.prototxt", "--caffe-log", "--phase", "train", cwd=HERE)
    assert r.returncode == 0, r.stderr
    assert log_lines(r.stdout) == logged
    net = parse(open(os.path.join(HERE, f"{name}.log")).read())[0]
    assert net.layer("cls_bridge").shapes[1] == (384,)
    for layer in ("cls_loss", "cls_Acc", "bbox_loss", "landmark_loss"):
        assert net.layer(layer).shapes == [()]
    r = run_in_process(f"train_{name}.prototxt", cwd=HERE)
    assert r.returncode in (0, 1), r.stderr
