"""Caffe's own C++ objects (protoaudit/memory/host.py) against real Caffe's heap.

The figures are real BVLC Caffe's (9b89154, CPU-only, the oracle kit's interposer), on small nets
that isolate one effect each, and the sizeof of Caffe's classes: tests/data/host_objects (README
says how they were taken). protoaudit's total is its buffers plus its host objects; every measured
net is held to the byte after setup, after a forward and after a backward, and the differences
between nets are derived by hand from the source below (net.cpp, layer.hpp, blob.cpp, libstdc++'s
string and vector, protobuf 3.21's repeated fields).
"""
import csv
import functools
import os

import pytest

from conftest import DATA
from protoaudit import build_nets
from protoaudit.memory import host
from protoaudit.memory.buffers import net_buffers, runs_backward
from protoaudit.read.schema import load_schema

HERE = os.path.join(DATA, "host_objects")
MEASURED = {r["net"]: r for r in csv.DictReader(open(os.path.join(HERE, "measurements.tsv")), delimiter="\t")}
SIZEOF = {r["class"]: int(r["sizeof"]) for r in csv.DictReader(open(os.path.join(HERE, "sizeof.tsv")), delimiter="\t")}
STAGES = ("init_live", "forward_live", "backward_live")


@functools.cache
def predicted(name):
    """protoaudit's bytes after setup, after one forward and after one backward (as measure.py runs)."""
    net = build_nets(os.path.join(HERE, "nets", name + ".prototxt"), phase=MEASURED[name]["phase"])[0]
    backward = runs_backward(net)
    buffers = net_buffers(net, mode="cpu", backward=backward)
    setup = sum(b.bytes for b in buffers if b.touch == "setup")
    forward = sum(b.bytes for b in buffers if b.touch == "forward")
    return {
        "init_live": host.host_bytes(net, forward=False) + setup,
        "forward_live": host.host_bytes(net, backward=False) + setup + forward,
        "backward_live": host.host_bytes(net, backward=backward) + sum(b.bytes for b in buffers),
    }


@pytest.mark.parametrize("name", sorted(MEASURED))
def test_every_measured_net_to_the_byte(name):
    want = {stage: int(MEASURED[name][stage]) for stage in STAGES}
    assert predicted(name) == want


def differs(a, b, stage="init_live"):
    """(real Caffe's, protoaudit's) bytes of net b less net a."""
    return int(MEASURED[b][stage]) - int(MEASURED[a][stage]), predicted(b)[stage] - predicted(a)[stage]


# Sizes from the source: a shared_ptr<T>(new T) block 24; std::string 32, its heap n + 1 beyond 15
# characters when copied; a map<string, int> node 72; Blob 80 (sizeof.tsv); SyncedMemory 40 + 24.
# A Blob reshaped to k axes: shape_ 4k, shape_data_'s SyncedMemory 64 and its 4k bytes, data and diff
# SyncedMemory 2 x 64: 4 axes 224, 1 axis 200.
DIFFERENCES = [
    # one more layer (ReLU, "r1" on "data"): the object 728 + 24; its LayerParameter: name, type
    # (32 each), bottom and top (an 8-byte array header, a pointer, a string: 48 each) = 160;
    # layers_ 16 and layer_names_ 32 (capacity 1 -> 2), layer_names_index_ 72, the six per-layer
    # vectors resized (5 x 24 + 40) = 160, its bottom pointer, id and flag (8 + 4 + 8) and top
    # pointer and id (8 + 4); one more blob: blobs_ 16, blob_names_ 32, blob_names_index_ 72,
    # blob_loss_weights_ 4 (resized to 2), the Blob 80 + 24 + 224
    ("input", "relu", 752 + 160 + 16 + 32 + 72 + 160 + 20 + 12 + 16 + 32 + 72 + 4 + 328),
    # the same, but layers_/layer_names_ and blobs_/blob_names_ grow from capacity 2 to 4 (48 more
    # each) and blob_loss_weights_ from 2 to 4 floats (4 more)
    ("relu", "relu_x2", 1676 + 48 + 48 + 4),
    # the same with those vectors' capacity already 4
    ("relu_x2", "relu_x3", 1676 - 48 - 48 - 4),
    # an in-place top makes no blob: the Blob (328), blobs_ 16, blob_names_ 32, the map node 72,
    # blob_loss_weights_ 4
    ("relu", "relu_inplace", -(328 + 16 + 32 + 72 + 4)),
    # one more top of the Input layer ("label", one axis): the Blob 80 + 24 + 200, blobs_ 16,
    # blob_names_ 32, the map node 72, blob_loss_weights_ 4, net_input_blob_indices_ and
    # net_input_blobs_ 12, net_output_blob_* 12, its top pointer and id 12; in the LayerParameter a
    # top (a pointer and a string, 40) and a BlobShape (a pointer, the object 40, its dims 16)
    ("input", "input_2tops", 304 + 16 + 32 + 72 + 4 + 12 + 12 + 12 + 40 + 64),
    # a 16-character layer name is copied three times, 17 bytes each: layer_names_,
    # layer_names_index_, the layer's LayerParameter
    ("relu_name15", "relu_name16", 3 * 17),
    ("relu_name15", "relu_name40", 3 * 41),
    # a 16-character top name: blob_names_ and blob_names_index_ copy it (17 each); the
    # LayerParameter's repeated top assigns it into an empty string, whose capacity doubles to 30 (31)
    ("relu_top15", "relu_top16", 31 + 17 + 17),
    ("relu_top15", "relu_top29", 31 + 30 + 30),
    ("relu_top29", "relu_top30", 2),  # 31 + 31 + 31
    # relu_param { negative_slope }: a ReLUParameter object (has-bits and cached size 8, a float and
    # an enum 8, vptr and metadata 16)
    ("relu", "relu_slope", 32),
    # loss_weight: 0: a float array of 8 bytes of header and 2 floats (no loss set)
    ("relu", "relu_lossw", 16),
    # bias_term: a parameter Blob of one axis 304, blobs_ 16, its param id 4; the Net's params_,
    # param_display_names_, param_layer_indices_, param_owners_, learnable_param_ids_ grow from 1 to
    # 2 (16 + 32 + 8 + 4 + 4), learnable_params_, params_lr_, params_weight_decay_ (8 + 4 + 4);
    # bias_multiplier_ 200; a bias_filler (FillerParameter 64, its type 32); buffers: the bias (3
    # floats) and the multiplier (2 floats)
    ("ip_nobias", "ip_bias", 304 + 16 + 4 + 64 + 16 + 200 + 96 + 12 + 8),
    # two ParamSpecs (48 each) in an array of 8 + 2 pointers
    ("ip_bias", "ip_bias_params", 8 + 16 + 2 * 48),
    # two named ParamSpecs (48 + a name 32 each), and param_names_index_'s two nodes
    ("ip_bias", "ip_bias_named", 8 + 16 + 2 * (48 + 32) + 2 * 72),
    # a gaussian weight filler makes Caffe's random generator: an RNG and its Generator (16 each),
    # a boost::mt19937 (2,504), three shared_ptr blocks; the net gives no bias_filler (less its
    # FillerParameter and type string, 96)
    ("ip_bias", "ip_gaussian", 16 + 16 + 2504 + 3 * 24 - 96),
    # the conv's bias as the InnerProduct's (304 + 16 + 4 + 64 + 16 + 200 + 96), buffers: the bias (4
    # floats) and its multiplier (4 x 4 outputs)
    ("conv_nobias", "conv", 700 + 16 + 64),
    # BatchNorm adds a ParamSpec { lr_mult: 0 } for each of its 3 blobs the net leaves out: the array
    # grows to 1, then 3 pointers (8 + 24) and takes 3 ParamSpecs (144): as much as copying 3 given
    ("bn", "bn_params", 0),
    # bias_term: the inner Bias layer 1,408 (its object 824 + 24; its copy of this LayerParameter with
    # a BiasParameter and a filler 320; its blobs_, flags, bias_multiplier_ 224; bias_bottom_vec_ and
    # bias_propagate_down_ 16), the Blob it shares 304, blobs_ 16, a param id 4, the Net's param
    # vectors 80, scale_param in the LayerParameter 56; buffers: the bias (3) and its multiplier (36)
    ("scale", "scale_bias", 1408 + 304 + 16 + 4 + 80 + 56 + 12 + 144),
]


@pytest.mark.parametrize("a,b,derived", DIFFERENCES, ids=[f"{a}->{b}" for a, b, _ in DIFFERENCES])
def test_each_difference_derived(a, b, derived):
    assert differs(a, b) == (derived, derived)


def test_a_split_top_gives_up_its_data_in_the_forward():
    """split_layer.cpp:29: each Split top takes the bottom's data, freeing its own SyncedMemory (64)."""
    real, mine = differs("split", "split3", "forward_live")
    setup_real, setup_mine = differs("split", "split3")
    assert real - setup_real == mine - setup_mine == 864 - 64  # the third ReLU's top data, less one


def test_sizes_measured_are_the_models():
    assert SIZEOF["Net<float>"] == host.NET_BYTES
    assert SIZEOF["Blob<float>"] == SIZEOF["Blob<int>"] == host.BLOB
    assert SIZEOF["SyncedMemory"] == host.SYNCED_MEMORY
    assert SIZEOF["Layer<float>"] == host.LAYER
    assert SIZEOF["std::string"] == host.STRING
    assert SIZEOF["caffe.LayerParameter"] == host.LAYER_PARAMETER
    assert {t: SIZEOF[t + "Layer"] for t in host.LAYER_BYTES} == host.LAYER_BYTES
    assert SIZEOF["GaussianFiller"] == host.FILLER_BYTES["gaussian"]
    assert all(SIZEOF[f] == host.FILLER for f in ("ConstantFiller", "UniformFiller", "XavierFiller", "MSRAFiller"))


def test_message_sizes_derived_from_the_schema():
    """protoc 3.21's layout, derived from each message's fields, for every message of BVLC's caffe.proto."""
    pool = load_schema("bvlc").pool
    measured = {k[len("caffe."):]: v for k, v in SIZEOF.items() if k.startswith("caffe.")}
    assert len(measured) == 63  # every message of caffe.proto
    assert {name: host.message_size(pool.FindMessageTypeByName("caffe." + name)) for name in measured} == measured


def test_string_rules():
    """libstdc++: a copy allocates n + 1 past 15 characters; assigning into an empty string grows its
    capacity to max(n, 2 x 15)."""
    assert [host.copied(n) for n in (15, 16, 40)] == [0, 17, 41]
    assert [host.assigned(n) for n in (15, 16, 29, 30, 40)] == [0, 31, 31, 31, 41]
