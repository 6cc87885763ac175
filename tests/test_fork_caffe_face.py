"""caffe-face (ydwen/caffe-face, 48ff38e): its schema, and CenterLoss held against its source.

Expected values are derived by hand below from src/caffe/layers/center_loss_layer.cpp and .cu at
that commit, cited by line.
"""
import os

import pytest

from conftest import DATA, build_text as build, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

NET = os.path.join(DATA, "forks", "caffe_face_mnist_train_test.prototxt")
F = 4  # bytes per float


def owners(buffers, layer):
    return {b.owner[len(layer) + 1:]: (b.bytes, b.touch, b.device) for b in buffers
            if b.layer == layer and b.owner.startswith(layer + ".")}


HEAD = """force_backward: true
layer { name: "in" type: "Input" top: "x" top: "label"
        input_param { shape { dim: 8 dim: 3 dim: 2 dim: 2 } shape { dim: 8 } } }
"""


def centre(params="num_output: 5", bottoms='bottom: "x" bottom: "label"', lr=1):
    return HEAD + (f'layer {{ name: "c" type: "CenterLoss" {bottoms} top: "c" param {{ lr_mult: {lr} }} '
                   f'center_loss_param {{ {params} }} }}')


def test_the_forks_mnist_net_is_read_with_its_schema():
    assert load(NET).schema.name == "caffe_face"


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(DATA, "..", "..", "proto", "forks", "caffe_face.proto")).read()
    assert text.startswith("// ydwen/caffe-face, src/caffe/proto/caffe.proto at commit "
                           "48ff38e30dd303511ac6b5f9455474453fef2644")
    assert "optional CenterLossParameter center_loss_param = 147;" in text


@pytest.mark.parametrize("params, centres", [
    ("num_output: 5", (5, 12)),  # axis 1: K = 3*2*2 (cpp:15-18)
    ("num_output: 5 axis: 2", (5, 4)),  # K = 2*2
    ("num_output: 7 axis: -1", (7, 2)),
])
def test_centres_are_classes_by_the_flattened_features(tmp_path, params, centres):
    """cpp:13-29: blobs_[0] is (num_output, bottom[0]->count(axis)); the top is the scalar loss."""
    net = build(tmp_path, centre(params))
    assert [p.shape for p in net.layer("c").params] == [centres]
    assert tops(net, "c") == [()]


def test_buffers_by_hand_cpu_and_gpu(tmp_path):
    """Bottom (8, 3, 2, 2), 5 classes: distance_ is bottom 0's size, 8*12 floats, written forward
    (cpp:49, 65); variation_sum_ the centres' size, 5*12 floats, written backward on the host
    in either mode (cpp:80; cu:61). (A CPU run's buffers are all the host's.)"""
    net = build(tmp_path, centre())
    for mode in ("cpu", "gpu"):
        got = owners(net_buffers(net, mode=mode), "c")
        assert got["distance_"] == (8 * 12 * F, "forward", "device" if mode == "gpu" else "host")
        assert got["variation_sum_"] == (5 * 12 * F, "backward", "host")
        assert got["param0"][0] == 5 * 12 * F


def test_frozen_centres_skip_the_cpu_sum_but_not_the_gpu_one(tmp_path):
    """lr_mult 0 (and no force_backward, which would turn every param_propagate_down on): the CPU
    backward sums only when the centres learn (cpp:78-80); the GPU backward always does, and writes
    the centres' diff (cu:61-64). An InnerProduct below (6 outputs) makes the loss run backward."""
    text = HEAD.replace("force_backward: true", "") + """
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip" inner_product_param { num_output: 6 } }
layer { name: "c" type: "CenterLoss" bottom: "ip" bottom: "label" top: "c" param { lr_mult: 0 }
        center_loss_param { num_output: 5 } }"""
    net = build(tmp_path, text)
    cpu = [b for b in net_buffers(net, mode="cpu") if b.layer == "c"]
    assert not [b for b in cpu if b.owner.endswith("variation_sum_") or b.kind == "param diff"]
    gpu = {(b.owner, b.kind): b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "c"}
    assert gpu[("c.variation_sum_", "layer buffer")] == 5 * 6 * F
    assert gpu[("c.param0", "param diff")] == 5 * 6 * F


@pytest.mark.parametrize("params, bottoms, message", [
    ("num_output: 0", 'bottom: "x" bottom: "label"', "num_output"),
    ("num_output: 5", 'bottom: "x" bottom: "x"', r"labels must be \(N, 1, 1, 1\)"),  # cpp:42-44
])
def test_refuses_what_the_fork_checks(tmp_path, params, bottoms, message):
    with pytest.raises(InputError, match=message):
        build(tmp_path, centre(params, bottoms))


def test_the_forks_mnist_net_audits_with_its_data_given():
    """ip1 is (128, 2) (InnerProduct num_output 2) and 10 classes: centres (10, 2), distance_ 128*2."""
    net = build_nets(NET, inputs={"data": (128, 1, 28, 28)})[0]
    assert [p.shape for p in net.layer("center_loss").params] == [(10, 2)]
    got = owners(net_buffers(net, mode="gpu"), "center_loss")
    assert got["distance_"][0] == 128 * 2 * F and got["variation_sum_"][0] == 10 * 2 * F
