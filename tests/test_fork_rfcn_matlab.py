"""R-FCN's MATLAB Caffe (daijifeng001/caffe-rfcn 4bcfcd1, the commit daijifeng001/R-FCN's submodule pins):
its schema, its layers held against its source, and R-FCN's own ResNet-50 train nets (tests/data/forks/
rfcn_matlab_*.prototxt, SOURCES.md). Expected values are derived by hand below from that commit's
src/caffe/layers/*.cpp/.cu and include/caffe/*.hpp, cited by file and line.

Also py-R-FCN's Caffe (Microsoft/caffe 1a2be8e) where it has the same code: its BatchNorm and Scale
(batch_norm_layer.cu, scale_layer.cu) and its CPU-only Accuracy.
"""
import json
import os

import pytest

from conftest import DATA, ROOT, build_text, run_in_process, tops
from protoaudit import build_nets
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

FORKS = os.path.join(DATA, "forks")
OHEM = os.path.join(FORKS, "rfcn_matlab_resnet50_ohem_res3a_train_val.prototxt")
PLAIN = os.path.join(FORKS, "rfcn_matlab_resnet50_res3a_train_val.prototxt")
PY_RFCN = os.path.join(FORKS, "rfcn_resnet50_train_agnostic.prototxt")
F = 4
# 300 RoIs of one 600 x 1000 image (the net's inputs are reshaped by R-FCN's MATLAB code at run time)
INPUTS = {"data": (1, 3, 600, 1000), "rois": (300, 5, 1, 1), "labels": (300, 1, 1, 1),
          "bbox_targets": (300, 8, 1, 1), "bbox_loss_weights": (300, 8, 1, 1)}


def owned(net, layer, mode="gpu"):
    """{buffer or blob: (stage, bytes, device)} of what `layer` first touches."""
    return {b.owner.removeprefix(layer + "."): (b.touch, b.bytes, b.device) for b in net_buffers(net, mode=mode)
            if b.layer == layer}


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "rfcn_matlab.proto")).read()
    assert text.startswith("// daijifeng001/caffe-rfcn, src/caffe/proto/caffe.proto at commit "
                           "4bcfcd104bb0b9f0862e127c71bd845ddf036f14")
    assert "optional PSROIPoolingParameter psroi_pooling_param = 10001;" in text


@pytest.mark.parametrize("path, refused", [(OHEM, "layer 'per_roi_loss_cls': takes at most 2 tops, got 3"),
                                           (PLAIN, "layer 'loss_bbox': if weights are used")])
def test_r_fcns_train_nets_are_read_as_the_fork_with_no_flag(path, refused):
    """py-R-FCN's caffe.proto reads the files alike, and is tried first; its SoftmaxWithLoss takes 2
    tops and its SmoothL1Loss 2 or 4 bottoms, where this fork's take 3 (softmax_loss_layer.hpp:28,
    fast_rcnn_layers.hpp:73-77): the nets are this fork's, said with --fork rfcn."""
    r = run_in_process(path, "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["nets"][0]["caffe_proto"] == "rfcn_matlab"
    said = [a for a in out["assumptions"] if a["override"] == "--fork rfcn"]
    assert len(said) == 1 and refused in said[0]["assumption"]
    assert run_in_process(path, "--fork", "rfcn").returncode == 2


def test_py_rfcns_nets_stay_py_rfcns():
    assert load(PY_RFCN).schema.name == "rfcn"


def test_ohem_losses_tops_and_buffers_by_hand():
    """300 RoIs, 21 classes, 8 box targets (class-agnostic):
    SoftmaxWithLoss per_roi_loss_cls (softmax_loss_layer.cpp:54-62): the loss, the probabilities
    (300, 21, 1, 1) and each RoI's loss, labels' shape (300, 1, 1, 1); its inner Softmax is set up
    without loss weights (cpp:14-16), so prob_'s diff, 300*21 floats, is first written by the GPU
    forward (cu:45), not at setup. SmoothL1Loss per_roi_loss_bbox (smooth_L1_loss_layer.cpp:51-59):
    diff_ and errors_ 300*8 floats, a per-RoI top (300, 1, 1, 1); no ones_."""
    net = build_nets(OHEM, inputs=INPUTS, schema="rfcn_matlab")[0]
    assert tops(net, "per_roi_loss_cls") == [(), (300, 21, 1, 1), (300, 1, 1, 1)]
    assert tops(net, "per_roi_loss_bbox") == [(), (300, 1, 1, 1)]
    assert tops(net, "annotator_detector") == [(300, 1, 1, 1), (300, 8, 1, 1)]
    sm = owned(net, "per_roi_loss_cls")
    assert sm["prob_.diff"] == ("forward", 300 * 21 * F, "device")
    assert sm["per_roi_loss_cls"] == ("forward", 300 * F, "device")
    sl = owned(net, "per_roi_loss_bbox")
    assert sl["diff_"] == sl["errors_"] == ("forward", 300 * 8 * F, "device")
    assert sl["per_roi_loss_bbox"] == ("forward", 300 * F, "device")
    assert not [k for k in sl if "ones_" in k]


def test_cpu_mode_stops_at_the_first_layer_without_cpu_code():
    """psroi_pooling_layer.cpp:55 (Forward_cpu) is NOT_IMPLEMENTED, as are SoftmaxWithLoss's
    (softmax_loss_layer.cpp:98) and SmoothL1Loss's (smooth_L1_loss_layer.cpp:94)."""
    r = run_in_process(OHEM, "--mode", "cpu")
    assert r.returncode == 2 and "psroi_pooling_layer.cpp:55" in r.stderr and "R-FCN's MATLAB Caffe" in r.stderr


BN = """
input: "x" input_shape { dim: 2 dim: 4 dim: 3 dim: 5 }
layer { name: "conv" type: "Convolution" bottom: "x" top: "c" convolution_param { num_output: 4 kernel_size: 1 } }
layer { name: "bn" type: "BatchNorm" bottom: "c" top: "c" batch_norm_param { use_global_stats: GLOBAL } }
layer { name: "sc" type: "Scale" bottom: "c" top: "c" scale_param { bias_term: true } param { lr_mult: LR } param { lr_mult: LR } }
layer { name: "loss" type: "EuclideanLoss" bottom: "c" bottom: "x" top: "loss" }
"""


def in_place(tmp_path, schema, mode, global_stats="true", lr=0):
    net = build_text(tmp_path, BN.replace("GLOBAL", global_stats).replace("LR", str(lr)), schema=schema)
    return {b.owner for b in net_buffers(net, mode=mode)}


@pytest.mark.parametrize("schema", ["rfcn", "rfcn_matlab"])
def test_batchnorm_with_global_stats_never_touches_x_norm_on_the_gpu(tmp_path, schema):
    """In place, a bottom of 2x4x3x5: both forks' Forward_gpu copy into x_norm_ only without global
    statistics (batch_norm_layer.cu:88-91) and Backward_gpu reads the top's diff itself with them
    (cu:99-104); BVLC's copies both whatever (x_norm_ and its diff, 120 floats each)."""
    assert not {"bn.x_norm_", "bn.x_norm_.diff"} & in_place(tmp_path, schema, "gpu")
    assert {"bn.x_norm_", "bn.x_norm_.diff"} <= in_place(tmp_path, "bvlc", "gpu")


def test_batchnorm_without_global_stats_py_rfcns_caches_this_forks_has_no_x_norm(tmp_path):
    """py-R-FCN's Reshape shapes x_norm_ always (batch_norm_layer.cpp:51), so batch statistics
    cache it (cu:88-91, :104-107); this fork's shapes it only with global statistics (cpp:51-53), so
    with batch statistics x_norm_ is empty and its copies move nothing, on the GPU as on the CPU."""
    assert {"bn.x_norm_", "bn.x_norm_.diff"} <= in_place(tmp_path, "rfcn", "gpu", "false")
    for mode in ("gpu", "cpu"):
        assert not {"bn.x_norm_", "bn.x_norm_.diff"} & in_place(tmp_path, "rfcn_matlab", mode, "false")


@pytest.mark.parametrize("schema", ["rfcn", "rfcn_matlab"])
def test_the_cpu_code_caches_x_norm_and_copies_the_scales_bottom_whatever(tmp_path, schema):
    """batch_norm_layer.cpp:152-155 and :164-166 copy into x_norm_ and its diff unconditionally
    (this fork's x_norm_ shaped by global statistics); scale_layer.cpp:114-121 copies the bottom
    into temp_ in place unconditionally."""
    assert {"bn.x_norm_", "bn.x_norm_.diff", "sc.temp_"} <= in_place(tmp_path, schema, "cpu")


@pytest.mark.parametrize("schema", ["rfcn", "rfcn_matlab"])
def test_scale_in_place_keeps_its_bottom_only_when_the_scale_learns(tmp_path, schema):
    """scale_layer.cu:34-43: in place, with its own scale, temp_ (2x4x3x5) is written only when
    that parameter takes a gradient (lr_mult 0: R-FCN's frozen Scales never touch it)."""
    assert "sc.temp_" not in in_place(tmp_path, schema, "gpu", lr=0)
    assert "sc.temp_" in in_place(tmp_path, schema, "gpu", lr=1)
    assert "sc.temp_" in in_place(tmp_path, "bvlc", "gpu", lr=0)


def test_r_fcns_frozen_batchnorm_and_scale_hold_no_copies():
    """ResNet-50 in R-FCN: 53 BatchNorm layers with use_global_stats and 53 Scales with lr_mult 0,
    all in place: none keeps x_norm_ or temp_ on the GPU, in this fork or py-R-FCN's."""
    for path, schema in ((OHEM, "rfcn_matlab"), (PY_RFCN, "rfcn")):
        net = build_nets(path, schema=schema)[0]
        kinds = {node.type for node in net.layers}
        assert {"BatchNorm", "Scale"} <= kinds
        assert sum(node.type == "BatchNorm" for node in net.layers) == 53
        assert not [b for b in net_buffers(net, mode="gpu") if b.owner.endswith(("x_norm_", "x_norm_.diff"))
                    or (b.owner.endswith(".temp_") and b.layer.startswith("scale"))]


@pytest.mark.parametrize("schema", ["rfcn", "rfcn_matlab"])
def test_accuracy_runs_on_the_host(tmp_path, schema):
    """accuracy_layer.cpp only (no .cu): in GPU mode the top is written on the host."""
    net = build_text(tmp_path, """
input: "p" input_shape { dim: 6 dim: 3 } input: "l" input_shape { dim: 6 }
layer { name: "acc" type: "Accuracy" bottom: "p" bottom: "l" top: "acc" }""", schema=schema)
    assert owned(net, "acc")["acc"] == ("forward", F, "host")
