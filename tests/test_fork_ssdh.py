"""SSDH's Caffe (kevinlin311tw/Caffe-DeepBinaryCode, 9eaa766): its schema, its two losses and its data
layer held against its source, and its AlexNet example (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/layers/K1_euclidean_loss_layer.cpp,
K2_euclidean_loss_layer.cpp, loss_layer.cpp, base_data_layer.cpp/.cu, accuracy_layer.cpp and
include/caffe/{loss_layers,layer,data_layers}.hpp, cited by file and line.
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

HERE = os.path.join(DATA, "forks", "ssdh")
NET = os.path.join(HERE, "train_val.prototxt")
SOLVER = os.path.join(HERE, "solver.prototxt")
HED = os.path.join(DATA, "forks", "hed_train_val.prototxt")
F = 4  # bytes per float


def loss_net(kind, a=(2, 48), b=(2, 48), extra=""):
    """Two InnerProducts (so that both bottoms need backward) into one K loss."""
    return ('input: "x" input_shape { dim: 2 dim: 5 }\n'
            + "".join(f'layer {{ name: "{n}" type: "InnerProduct" bottom: "x" top: "{n}" '
                      f'inner_product_param {{ num_output: {shape[1]} }} }}\n' for n, shape in (("a", a), ("b", b)))
            + f'layer {{ name: "k" type: "{kind}" bottom: "a" bottom: "b" top: "k" {extra}}}\n')


def diffs_written(net, layer):
    """The blobs whose diff the layer's backward is the first to write, and where."""
    return {(b.owner, b.device) for b in net_buffers(net, mode="gpu")
            if b.layer == layer and b.kind == "top diff" and b.touch == "backward"}


def test_the_proto_is_the_forks_file_verbatim():
    """The fork's caffe.proto is HED's (a BVLC Caffe of mid 2015) less the V1 value CROP = 40."""
    text = open(os.path.join(ROOT, "proto", "forks", "ssdh.proto")).read()
    assert text.startswith("// kevinlin311tw/Caffe-DeepBinaryCode (SSDH's Caffe: Yang, Lin and Chen, supervised "
                           "semantics-preserving deep hashing, TPAMI 2017), src/caffe/proto/caffe.proto at commit "
                           "9eaa7662be47d49f475ecbeea2bd51be105270d2,\n")
    hed = open(os.path.join(ROOT, "proto", "forks", "hed.proto")).read()
    assert text.split("\n", 2)[2] == hed.split("\n", 2)[2].replace("    CROP = 40;\n", "", 1)


def test_the_layer_types_decide_whose_a_file_is(tmp_path):
    """Both schemas read the SSDH net and HED's; only SSDH's Caffe has K1/K2_EuclideanLoss, only HED's
    ImageLabelmapData. A net of BVLC's layers alone stays BVLC's."""
    assert load(NET).schema.name == "ssdh"
    assert build_nets(SOLVER)[0].schema == "ssdh"
    assert load(HED).schema.name == "hed"
    plain = tmp_path / "plain.prototxt"
    plain.write_text(loss_net("EuclideanLoss"))
    assert load(str(plain)).schema.name == "bvlc"


def test_the_alexnet_example_audits_with_no_flags():
    """Batch 32 of 227 x 227 crops through CaffeNet to fc7, then latent (4096 -> 48), a sigmoid, and
    fc9 (48 -> 10). Parameters, weights + biases: conv1 96*3*11*11 + 96 = 34,944; conv2 (group 2)
    256*48*5*5 + 256 = 307,456; conv3 384*256*3*3 + 384 = 885,120; conv4 (group 2) 384*192*3*3 + 384
    = 663,936; conv5 (group 2) 256*192*3*3 + 256 = 442,624; fc6 9216*4096 + 4096 = 37,752,832; fc7
    4096*4096 + 4096 = 16,781,312; latent 4096*48 + 48 = 196,656; fc9 48*10 + 10 = 490: 57,065,370.
    The losses have none."""
    r = run_in_process(NET)
    assert r.returncode == 0, r.stderr
    assert "Read with the caffe.proto of SSDH's Caffe" in r.stdout
    assert "Params: 57,065,370 " in r.stdout
    net = build_nets(NET)[0]
    assert tops(net, "latent_sigmoid") == [(32, 48)]
    assert tops(net, "loss_1") == [()]  # LossLayer's scalar (loss_layer.cpp:27-28)
    # Reshape (0, 1, 1, -1): 32 x 1 x 1 x 48; pooling 1 x 48: one mean per code
    assert tops(net, "latent_sigmoid_avg") == [(32, 1, 1, 1)]
    assert tops(net, "loss_2") == [()]
    assert run_in_process(SOLVER).returncode == 0


def test_what_the_losses_allocate():
    """diff_ is bottom 0's shape (cpp:17-18), written by the CPU forward, which is the GPU one too
    (no .cu; layer.hpp:341-345): on the host, 32 x 48 floats = 6,144 bytes for loss_1 and 32 x 1 x 1 x 1
    = 128 bytes for loss_2. Nothing of theirs is on the device."""
    net = build_nets(NET)[0]
    assert layer_buffers(net, "loss_1") == {("diff_", "host"): 32 * 48 * F} == {("diff_", "host"): 6_144}
    assert layer_buffers(net, "loss_2") == {("diff_", "host"): 32 * F}
    assert layer_buffers(net, "loss_1", mode="cpu") == {("diff_", "host"): 6_144}


def test_the_backward_writes_only_the_bottoms_propagate_down_asks_for():
    """The net gives each loss the same blob twice, with propagate_down 1 and 0; Caffe's split
    insertion gives each read its own Split top (latent_sigmoid is read four times: loss_1 twice,
    the Reshape and fc9). The backward writes bottom i's diff only where propagate_down[i]
    (cpp:39-49): loss_1 writes split 0's, 32 x 48 floats, and the Split's GPU backward reads it on
    the device; split 1's diff is the Split's own (it sums every top's diff)."""
    net = build_nets(NET)[0]
    assert diffs_written(net, "loss_1") == {("latent_sigmoid_latent_sigmoid_0_split_0", "device")}
    assert diffs_written(net, "loss_2") == {("latent_sigmoid_avg_latent_sigmoid_avg_0_split_0", "device")}
    got = {b.owner: b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "loss_1" and b.kind == "top diff"
           and b.touch == "backward"}
    assert got == {"latent_sigmoid_latent_sigmoid_0_split_0": 32 * 48 * F}


@pytest.mark.parametrize("kind", ["K1_EuclideanLoss", "K2_EuclideanLoss"])
def test_either_bottom_takes_a_gradient(tmp_path, kind):
    """AllowForceBackward is true for both bottoms (loss_layers.hpp:914-916, 946-948): without
    propagate_down both diffs are written (cpp:39-49), with propagate_down 0, 1 only b's."""
    assert diffs_written(build_text(tmp_path, loss_net(kind)), "k") == {("a", "device"), ("b", "device")}
    net = build_text(tmp_path, loss_net(kind, extra="propagate_down: 0 propagate_down: 1 "))
    assert diffs_written(net, "k") == {("b", "device")}
    assert layer_buffers(net, "k") == {("diff_", "host"): 2 * 48 * F}


def test_bottom_1_must_have_bottom_0s_shape(tmp_path):
    """Reshape CHECKs num() (loss_layer.cpp:25) and channels(), height(), width() (cpp:14-16)
    equal, though bottom 1 is never read."""
    with pytest.raises(InputError, match="same channels, height and width"):
        build_text(tmp_path, loss_net("K1_EuclideanLoss", b=(2, 24)))


def test_the_data_layer_holds_three_batches_and_copies_them():
    """PREFETCH_COUNT = 3 Batches of data_ and label_ (data_layers.hpp:56-60, 79, 85), host and
    device copies made at setup (base_data_layer.cpp:50-65); each forward copies one into the tops,
    which own their memory (base_data_layer.cu:8-25). One batch: 32 x 3 x 227 x 227 = 4,946,784 floats
    and 32 labels."""
    net = build_nets(NET)[0]
    got = layer_buffers(net, "data")
    assert got[("prefetch[3].data", "device")] == 3 * 4_946_784 * F
    assert got[("prefetch[3].label", "device")] == 3 * 32 * F
    tops_owned = {b.owner: b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "data" and b.kind == "top data"}
    assert tops_owned == {"data": 4_946_784 * F, "label": 32 * F}


def test_accuracy_runs_on_the_host():
    """accuracy_layer.cpp has no .cu: in the test net its scalar top is written by the CPU code."""
    test = build_nets(SOLVER)[1]
    assert {b.device for b in net_buffers(test, mode="gpu", backward=False)
            if b.layer == "accuracy" and b.kind == "top data"} == {"host"}
