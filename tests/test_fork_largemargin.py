"""L-Softmax's Caffe (wy1iu/LargeMargin_Softmax_Loss c3e9f20): its schema, LargeMarginInnerProduct and
BN held against its sources, and its CIFAR-10 net and solver (tests/data/forks/largemargin_cifar10/,
SOURCES.md). Expected values are derived by hand below from that commit's
src/caffe/layers/largemargin_inner_product_layer.cpp/.cu, bn_layer.cpp/.cu and
src/caffe/layers/bn_layer.hpp (the header its Makefile's include path takes, :174), cited by line.
"""
import json
import os

import pytest

from conftest import DATA, ROOT, build_text, run_in_process, tops
from protoaudit import build_nets
from protoaudit.memory.buffers import net_buffers

HERE = os.path.join(DATA, "forks", "largemargin_cifar10")
NET = os.path.join(HERE, "model", "cifar_train_test.prototxt")
SOLVER = os.path.join(HERE, "cifar_solver.prototxt")
F = 4


def owned(net, layer, mode="gpu"):
    return {b.owner.removeprefix(layer + "."): (b.touch, b.elements, b.device) for b in net_buffers(net, mode=mode)
            if b.layer == layer and b.kind == "layer buffer"}


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "largemargin.proto")).read()
    assert text.startswith("// wy1iu/LargeMargin_Softmax_Loss, src/caffe/proto/caffe.proto at commit "
                           "c3e9f20e4f16e2b4daf7d358a614366b9b39a6ec,")
    assert "optional BNParameter bn_param = 201;" in text
    assert "optional LargeMarginInnerProductParameter largemargin_inner_product_param = 202;" in text


@pytest.mark.parametrize("path", [NET, SOLVER])
def test_the_cifar_net_is_the_forks_and_asks_only_for_its_missing_images(path):
    """Its ImageData list (myexamples/cifar10/data/train.txt) and mean file are not in the
    repository: the image is assumed (224 x 224 in colour, said), and under --strict protoaudit asks
    for the data top, as for any missing source; given it, the net and its solver audit."""
    r = run_in_process(path)
    assert r.returncode == 0 and "data 128x3x224x224" in r.stdout, r.stderr
    r = run_in_process(path, "--strict")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "--input data=128x3xHxW" in r.stderr and "BN" not in r.stderr and "LargeMargin" not in r.stderr
    r = run_in_process(path, "--input", "data=128x3x32x32", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert {n["caffe_proto"] for n in json.loads(r.stdout)["nets"]} == {"largemargin"}


def test_large_margin_inner_product_by_hand():
    """ip2 (train): bn_ip is (128, 512): M 128, K 512, N 10, type DOUBLE. The weight (10, 512)
    (cpp:38-41); tops (128, 10) and lambda (1,) on the host (cpp:62-69, cu:305); x_norm_ (M) and
    w_norm_ (N) (cpp:72-75); cos_theta_ and sign_0_ (M x N) and, for DOUBLE, cos_theta_quadratic_
    (cpp:77-86), all written by Forward_gpu (cu:314-340). The test net's ip2 (SINGLE, batch 100)
    has no quadratic."""
    train = build_nets(NET, inputs={"data": (128, 3, 32, 32)})[0]
    assert tops(train, "ip2") == [(128, 10), (1,)]
    assert [p.shape for p in train.layer("ip2").params] == [(10, 512)]
    assert owned(train, "ip2") == {"x_norm_": ("forward", 128, "device"), "w_norm_": ("forward", 10, "device"),
                                   "cos_theta_": ("forward", 1280, "device"), "sign_0_": ("forward", 1280, "device"),
                                   "cos_theta_quadratic_": ("forward", 1280, "device")}
    assert {b.owner: b.device for b in net_buffers(train, mode="gpu") if b.layer == "ip2"}["lambda"] == "host"
    test = build_nets(NET, inputs={"data": (100, 3, 32, 32)}, phase="test")[0]
    assert set(owned(test, "ip2")) == {"x_norm_", "w_norm_", "cos_theta_", "sign_0_"}
    assert owned(test, "ip2")["cos_theta_"][1] == 100 * 10


@pytest.mark.parametrize("kind, extra", [("TRIPLE", {"cos_theta_quadratic_", "cos_theta_cubic_", "sign_1_", "sign_2_"}),
                                         ("QUADRUPLE", {"cos_theta_quadratic_", "cos_theta_cubic_",
                                                        "cos_theta_quartic_", "sign_3_", "sign_4_"})])
def test_margin_types_temporaries(tmp_path, kind, extra):
    """cpp:87-98: TRIPLE and QUADRUPLE reshape these as the top (4 x 3 here)."""
    net = build_text(tmp_path, f"""
input: "x" input_shape {{ dim: 4 dim: 6 }} input: "l" input_shape {{ dim: 4 }}
layer {{ name: "ip" type: "LargeMarginInnerProduct" bottom: "x" bottom: "l" top: "ip" top: "lambda"
  largemargin_inner_product_param {{ num_output: 3 type: {kind} }} }}""", schema="largemargin")
    got = owned(net, "ip")
    assert set(got) == {"x_norm_", "w_norm_", "cos_theta_", "sign_0_"} | extra
    assert {got[k][1] for k in extra} == {12}


def test_one_top_is_refused(tmp_path):
    """Reshape reshapes top[1] whatever the top count (cpp:68-69): with one top it writes past the
    layer's tops."""
    path = tmp_path / "n.prototxt"
    path.write_text('input: "x" input_shape { dim: 4 dim: 6 } input: "l" input_shape { dim: 4 }\n'
                    'layer { name: "ip" type: "LargeMarginInnerProduct" bottom: "x" bottom: "l" top: "ip" '
                    'largemargin_inner_product_param { num_output: 3 } }')
    r = run_in_process(path, "--fork", "largemargin")
    assert r.returncode == 2 and "largemargin_inner_product_layer.cpp:69" in r.stderr


def test_bn_by_hand():
    """pre_bn on (128, 64, 32, 32): four (1, 64) parameters (cpp:22-42; PSPNet's are (1, C, 1, 1));
    broadcast_buffer_ and x_norm_ the bottom's size, spatial_statistic_ (N*C), batch_statistic_ and
    x_inv_std_ (C) (cpp:57-62, cu:96-100: x_norm_ kept since not frozen), spatial_sum_multiplier_
    (H*W) and batch_sum_multiplier_ (N) (cpp:64-69). The file gives two ParamSpecs and LayerSetUp
    adds none (cpp:12-45): the moving mean and variance keep Caffe's default lr_mult 1, so every
    parameter of the net learns."""
    net = build_nets(NET, inputs={"data": (128, 3, 32, 32)})[0]
    assert [p.shape for p in net.layer("pre_bn").params] == [(1, 64)] * 4
    size = 128 * 64 * 32 * 32
    assert {k: v[1] for k, v in owned(net, "pre_bn").items()} == {
        "broadcast_buffer_": size, "x_norm_": size, "spatial_statistic_": 128 * 64, "batch_statistic_": 64,
        "x_inv_std_": 64, "spatial_sum_multiplier_": 32 * 32, "batch_sum_multiplier_": 128}
    r = json.loads(run_in_process(NET, "--input", "data=128x3x32x32", "--format", "json").stdout)
    assert r["params"]["non_trainable"] == 0
