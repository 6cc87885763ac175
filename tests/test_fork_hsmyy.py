"""hsmyy's CenterLoss for BVLC Caffe (hsmyy/CenterLoss_Caffe_Mnist, e4cbc98): its schema, its layer held
against its source, and its MNIST net (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's center_loss_layer.cpp and
center_loss_layer.hpp and its caffe.proto, cited by file and line.
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

HERE = os.path.join(DATA, "forks", "hsmyy")
NET = os.path.join(HERE, "train_center_loss.prototxt")
SOLVER = os.path.join(HERE, "solver_center_loss.prototxt")
CAFFE_FACE = os.path.join(DATA, "forks", "caffe_face_mnist_train_test.prototxt")
F = 4  # bytes per float

# The repository's caffe.proto, all eight lines of it: the additions to BVLC's.
FIELD_LINE = "\toptional CenterLossParameter center_loss_param = 200;\n"
MESSAGE = ("message CenterLossParameter{\n"
           "  optional float loss_weight = 1 [default = 0.003];\n"
           "  optional float alpha = 2 [default = 0.5];\n"
           "  required uint32 cluster_num = 3;\n"
           "}\n")


def center_net(param="cluster_num: 3", extra="", feature="InnerProduct"):
    """x (4 x 5) through an InnerProduct (so that bottom 0 needs a backward) into a CenterLoss."""
    if feature == "InnerProduct":
        first = 'layer { name: "f" type: "InnerProduct" bottom: "x" top: "f" inner_product_param { num_output: 6 } }\n'
    else:
        first = 'layer { name: "f" type: "Input" top: "f" input_param { shape { dim: 4 dim: 6 } } }\n'
    return ('input: "x" input_shape { dim: 4 dim: 5 }\n'
            'input: "y" input_shape { dim: 4 }\n' + first
            + f'layer {{ name: "c" type: "CenterLoss" bottom: "f" bottom: "y" top: "c" '
              f'center_loss_param {{ {param} }} {extra}}}\n')


def diffs_written(net, layer):
    return {(b.owner, b.device) for b in net_buffers(net, mode="gpu")
            if b.layer == layer and b.kind == "top diff" and b.touch == "backward"}


def test_the_proto_is_bvlcs_with_the_repositorys_additions_verbatim():
    """BVLC's caffe.proto with the field line before LayerParameter's closing brace and the message
    at the end, both exactly as the repository's caffe.proto has them (a tab, no space before '{')."""
    text = open(os.path.join(ROOT, "proto", "forks", "hsmyy.proto")).read()
    assert text.startswith("// hsmyy/CenterLoss_Caffe_Mnist (")
    assert "e4cbc985ff4926bf08894952968fc409c35e3dbc" in text.split("\n", 1)[0]
    body = text.split("\n", 2)[2]
    bvlc = open(os.path.join(ROOT, "proto", "caffe.proto")).read()
    assert body.endswith(MESSAGE)
    assert body.replace(FIELD_LINE, "", 1)[: -len(MESSAGE)] == bvlc
    assert body.index(FIELD_LINE) < body.index("message PoolingParameter") < body.index(MESSAGE)


def test_the_fields_decide_whose_a_file_is(tmp_path):
    """caffe-face's CenterLossParameter has num_output, center_filler and axis; hsmyy's loss_weight,
    alpha and cluster_num: neither reads the other's nets, so caffe-face's stay caffe-face's."""
    assert load(NET).schema.name == "hsmyy"
    assert build_nets(SOLVER)[0].schema == "hsmyy"
    assert load(CAFFE_FACE).schema.name == "caffe_face"
    net = tmp_path / "n.prototxt"
    net.write_text(center_net())
    assert load(str(net)).schema.name == "hsmyy"


def test_the_mnist_net_audits_with_no_flags():
    """Batch 64 of 1 x 28 x 28. 5 x 5 convolutions with pad 2 keep the size; 2 x 2 max pools of
    stride 2 take 28 -> 14 -> 7 -> 4 (ceil((7 - 2) / 2) + 1). Parameters: conv1_1 32*1*25 + 32 = 832;
    conv1_2 32*32*25 + 32 = 25,632; conv2_1 64*32*25 + 64 = 51,264; conv2_2 64*64*25 + 64 = 102,464;
    conv3_1 128*64*25 + 128 = 204,928; conv3_2 128*128*25 + 128 = 409,728; six PReLUs, one slope per
    channel, 32 + 32 + 64 + 64 + 128 + 128 = 448; ip1 128*4*4*2 + 2 = 4,098; ip2 2*10 + 10 = 30:
    799,424. The CenterLoss has none: its centres are no parameter (hpp:32-33)."""
    r = run_in_process(NET)
    assert r.returncode == 0, r.stderr
    assert "Read with the caffe.proto of BVLC Caffe with hsmyy's CPU CenterLoss" in r.stdout
    assert "Params: 799,424 " in r.stdout
    train, test = build_nets(SOLVER)
    assert tops(train, "pool3") == [(64, 128, 4, 4)]
    assert tops(train, "ip1") == [(64, 2)]
    assert tops(train, "center_loss") == [()]  # LossLayer's scalar
    assert tops(test, "center_loss") == [()]
    assert run_in_process(SOLVER).returncode == 0


def test_what_the_layer_allocates():
    """center_info_ is cluster_num x channels() = 10 x 2 (cpp:20), its data filled at setup
    (cpp:23) and its diff written by the forward (cpp:35): 80 bytes each; center_loss_ is num x
    channels() (cpp:21), written by the forward (cpp:41-43): 64 x 2 floats = 512 bytes, 100 x 2 = 800
    in the batch-100 test net. All on the host, as the GPU code calls the CPU code (cpp:73-83)."""
    train, test = build_nets(SOLVER)
    want = {("center_info_", "host"): 10 * 2 * F, ("center_info_.diff", "host"): 10 * 2 * F}
    assert layer_buffers(train, "center_loss") == want | {("center_loss_", "host"): 64 * 2 * F} \
        == {("center_info_", "host"): 80, ("center_info_.diff", "host"): 80, ("center_loss_", "host"): 512}
    assert layer_buffers(test, "center_loss") == want | {("center_loss_", "host"): 800}
    assert layer_buffers(train, "center_loss", mode="cpu") == layer_buffers(train, "center_loss")
    assert {b.device for b in net_buffers(train, mode="gpu")
            if b.layer == "center_loss" and b.touch == "forward"} == {"host"}


def test_the_solver_keeps_no_history_for_the_centres(tmp_path):
    """The centres are updated by the layer itself (Blob::Update, cpp:58), not by the solver: no
    parameter, so none of the solver's history either."""
    net = build_text(tmp_path, center_net())
    assert not [b for b in net_buffers(net, mode="gpu") if b.layer == "c" and b.kind.startswith("param")]


def test_the_backward_writes_bottom_0s_diff():
    """ip1 is read by ip2 and the CenterLoss, so Caffe's Split gives each its own top; the backward
    copies center_loss_ into bottom 0's diff (cpp:66-69), 64 x 2 floats, which the Split's GPU
    backward reads on the device. The labels never take a gradient (hpp:21-23)."""
    train = build_nets(SOLVER)[0]
    assert diffs_written(train, "center_loss") == {("ip1_ip1_0_split_1", "device")}
    got = {b.owner: b.bytes for b in net_buffers(train, mode="gpu") if b.layer == "center_loss"
           and b.kind == "top diff" and b.touch == "backward"}
    assert got == {"ip1_ip1_0_split_1": 64 * 2 * F}


def test_no_backward_where_no_bottom_needs_one(tmp_path):
    """Net::Init runs a layer's backward only where a bottom needs one; a CenterLoss on a blob with
    no learning below it (an Input) has none, and propagate_down: 0 turns it off."""
    assert diffs_written(build_text(tmp_path, center_net()), "c") == {("f", "device")}
    assert diffs_written(build_text(tmp_path, center_net(feature="Input")), "c") == set()
    net = build_text(tmp_path, center_net(extra="propagate_down: 0 propagate_down: 0 "))
    assert diffs_written(net, "c") == set()
    assert layer_buffers(net, "c") == {("center_info_", "host"): 3 * 6 * F, ("center_info_.diff", "host"): 3 * 6 * F,
                                       ("center_loss_", "host"): 4 * 6 * F}


def test_loss_weight_and_alpha_change_no_size(tmp_path):
    """loss_weight scales the loss (cpp:51), the centres' step (cpp:55) and the gradient (cpp:67);
    alpha the centres' step (cpp:55): neither sizes anything."""
    plain = layer_buffers(build_text(tmp_path, center_net()), "c")
    other = layer_buffers(build_text(tmp_path, center_net("cluster_num: 3 loss_weight: 1 alpha: 0.1")), "c")
    assert plain == other


def test_cluster_num_is_required(tmp_path):
    """cluster_num is `required` in the repository's caffe.proto: Caffe's parser refuses the net."""
    with pytest.raises(InputError, match="cluster_num"):
        build_text(tmp_path, center_net("alpha: 0.5"))
