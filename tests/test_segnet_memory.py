"""caffe-segnet's memory: protoaudit against the fork's measured heap, and its layers' buffers.

The totals come from real runs of the fork (alexgkendall/caffe-segnet 344c113, CPU-only, CPU
mode, no solver; tests/data/segnet_oracle/measurements.tsv, per-layer bytes in
tests/data/nets/segnet_oracle/*.json). The per-layer expectations are derived by hand from the
fork's bn_layer.cpp/.cu, upsample_layer.cpp/.cu, pooling_layer.cpp, accuracy_layer.cpp,
softmax_loss_layer.cpp, cudnn_conv_layer.cu, layer_factory.cpp and base_data_layer.cpp, and
where the fork measured a layer, also held against that measurement.
"""
import csv
import json
import os

import pytest

from conftest import DATA, by_layer
from protoaudit import build_nets
from protoaudit.memory.buffers import host_objects, net_buffers, run_of, runs_backward

NETS = os.path.join(DATA, "nets", "segnet_oracle")
RUNS = list(csv.DictReader(open(os.path.join(DATA, "segnet_oracle", "measurements.tsv")), delimiter="\t"))
F = 4  # bytes per float


def oracle_net(run):
    return build_nets(os.path.join(NETS, run["run"] + ".prototxt"), phase=run["phase"])[0]


def cpu_buffers(net):
    """What tests/test_oracle.py counts: CPU mode, no solver, one forward and one backward."""
    return net_buffers(net, mode="cpu", backward=runs_backward(net)) + [host_objects(net)]


def owners(buffers, layer):
    return {b.owner: b.bytes for b in buffers if b.layer == layer}


# --- the fork's measured heap ------------------------------------------------------------------

@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_total_matches_the_forks_heap(run):
    want = int(run["backward_live"])
    got = sum(b.bytes for b in cpu_buffers(oracle_net(run)))
    assert abs(got - want) <= max(0.005 * want, 64 * 1024), f"protoaudit {got:,}, the fork {want:,}"


def test_bvlc_rules_alone_would_miss_the_forks_bn_buffers():
    """SegNet-Basic at batch 4 holds 6,501,195,391 bytes; its 10 BN layers' buffer_blob_ and
    x_norm_ alone are 2 * 4*64*(360*480 + 180*240 + 90*120 + 45*60)*2 * 4 = 930,969,600 of them."""
    run = next(r for r in RUNS if r["run"] == "segnet_basic_train_b4")
    assert int(run["backward_live"]) == 6501195391
    bn = [b for b in cpu_buffers(oracle_net(run)) if b.owner.endswith((".buffer_blob_", ".x_norm_"))]
    assert sum(b.bytes for b in bn) == 2 * 4 * 64 * (360 * 480 + 180 * 240 + 90 * 120 + 45 * 60) * 2 * F


# --- per layer, against the fork's per-layer bytes ---------------------------------------------

def bn_bytes(n, c, h, w):
    """BNLayer (LEARN, CPU), bottom (N, C, H, W), in place:
    setup: scale and shift (C each), spatial_sum_multiplier_ data and diff (H*W each),
           batch_sum_multiplier_ data and diff (N each);
    forward: buffer_blob_ and x_norm_ (N*C*H*W each), spatial_mean_ and spatial_variance_
             (N*C each), batch_mean_ and batch_variance_ (C each); the top is the bottom;
    backward: scale and shift diffs (C each), spatial_variance_ and spatial_mean_ diffs (N*C
              each); the bottom's diff is the top's, which the ReLU after it wrote first."""
    return {"setup": (2 * c + 2 * h * w + 2 * n) * F,
            "forward": (2 * n * c * h * w + 2 * n * c + 2 * c) * F,
            "backward": (2 * c + 2 * n * c) * F}


def test_segnet_basic_conv1_bn_by_hand():
    """conv1_bn at batch 1 normalises conv1, 1x64x360x480 (the fork measured 88,474,624 bytes
    forward and 1,024 backward)."""
    run = next(r for r in RUNS if r["run"] == "segnet_basic_train_b1")
    assert by_layer(cpu_buffers(oracle_net(run)))["conv1_bn"] == {
        "setup": (2 * 64 + 2 * 360 * 480 + 2 * 1) * 4,  # 1,382,920
        "forward": (2 * 64 * 360 * 480 + 2 * 64 + 2 * 64) * 4,  # 88,474,624
        "backward": (2 * 64 + 2 * 1 * 64) * 4,  # 1,024
    }


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_bn_and_upsample_layers_against_hand_derivation_and_the_fork(run):
    net = oracle_net(run)
    mine = by_layer(cpu_buffers(net))
    detail = json.load(open(os.path.join(NETS, run["run"] + ".json")))
    shape = dict((name, tuple(s)) for name, s in detail["blobs"])  # as the fork built them
    checked = 0
    for layer in detail["layers"]:
        node = net.layer(layer["name"])
        bottoms = [net.blobs[i].name for i in node.bottoms]
        if layer["type"] == "BN":
            assert list(node.in_place) == [True]
            want = bn_bytes(*shape[bottoms[0]])
            assert (want["forward"], want["backward"]) == (layer["fwd_alloc"], layer["bwd_alloc"]), layer["name"]
        elif layer["type"] == "Upsample":
            # forward: the top, N*C*H_out*W_out; backward: bottom 0's diff (the pooled top's, first
            # written here), N*C*H*W; the mask (bottom 1) gets none. Its top's diff came first
            # from the convolution after it.
            top = shape[net.blobs[node.tops[0]].name]
            data, mask = shape[bottoms[0]], shape[bottoms[1]]
            assert data == mask
            want = {"forward": count(top) * F, "backward": count(data) * F}
            assert (want["forward"], want["backward"]) == (layer["fwd_alloc"], layer["bwd_alloc"]), layer["name"]
            want["setup"] = 0
        else:
            continue
        assert mine[layer["name"]] == want, layer["name"]
        checked += 1
    assert checked == sum(1 for layer in detail["layers"] if layer["type"] in ("BN", "Upsample")) > 0


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_shared_layers_as_the_fork_runs_them(run):
    net = oracle_net(run)
    mine = by_layer(cpu_buffers(net))
    detail = json.load(open(os.path.join(NETS, run["run"] + ".json")))
    shape = dict((name, tuple(s)) for name, s in detail["blobs"])
    for layer in detail["layers"]:
        node = net.layer(layer["name"])
        tops = [shape[net.blobs[i].name] for i in node.tops]
        if layer["type"] == "Pooling":
            # MAX with a mask top: the top and the mask (same shape), no max_idx_
            assert len(tops) == 2 and tops[0] == tops[1]
            assert mine[layer["name"]]["forward"] == 2 * count(tops[0]) * F == layer["fwd_alloc"]
        elif layer["type"] == "Accuracy":
            # the scalar and the per-class top (C, 1, 1, 1); per-class counts live in std::vectors
            classes = tops[1][0]
            assert mine[layer["name"]]["forward"] == (1 + classes) * F == layer["fwd_alloc"]


def test_class_weighting_is_a_setup_buffer():
    run = RUNS[0]
    buffers = cpu_buffers(oracle_net(run))
    # weight_by_label_freqs with 11 class_weighting values: label_counts_ holds 11 floats
    assert owners(buffers, "loss")["loss.label_counts_"] == 11 * F


# --- layers and modes the fork's runs did not measure -------------------------------------------

HEAD = """
input: "data"
input_shape { dim: 2 dim: 3 dim: 8 dim: 10 }
"""


def build(tmp_path, text):
    path = tmp_path / "net.prototxt"
    path.write_text(text)
    return build_nets(str(path), schema="segnet")[0]


LOSS = """
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "%s" bottom: "label" top: "loss" }
input: "label"
input_shape { dim: 2 dim: 1 dim: %d dim: %d }
"""


def test_bn_inference_mode_keeps_no_x_norm_nor_batch_statistics(tmp_path):
    text = HEAD + """
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "bn" type: "BN" bottom: "conv" top: "conv" bn_param { bn_mode: INFERENCE } }
""" + LOSS % ("conv", 8, 10)
    net = build(tmp_path, text)
    got = owners(net_buffers(net, mode="cpu"), "bn")
    # N, C, H, W = 2, 4, 8, 10: buffer_blob_ 2*4*8*10 = 640; spatial_mean_/variance_ 2*4 = 8
    assert got["bn.buffer_blob_"] == 640 * F
    assert got["bn.spatial_mean_"] == got["bn.spatial_variance_"] == 8 * F
    assert got["bn.spatial_sum_multiplier_"] == got["bn.spatial_sum_multiplier_.diff"] == 80 * F
    assert got["bn.batch_sum_multiplier_"] == got["bn.batch_sum_multiplier_.diff"] == 2 * F
    assert got["bn.spatial_mean_.diff"] == got["bn.spatial_variance_.diff"] == 8 * F
    assert not {"bn.x_norm_", "bn.batch_mean_", "bn.batch_variance_"} & set(got)


def test_bn_on_the_gpu_has_no_host_only_diffs(tmp_path):
    text = HEAD + """
layer { name: "bn" type: "BN" bottom: "data" top: "bn" }
""" + LOSS % ("bn", 8, 10)
    net = build(tmp_path, text)
    got = owners(net_buffers(net, mode="gpu"), "bn")
    # the multipliers' diffs are zeroed on the host only; the GPU backward sums through
    # spatial_mean_/spatial_variance_'s data, not their diffs
    assert not [name for name in got if name.endswith(".diff") and name.startswith("bn.")]
    # LEARN: buffer_blob_ and x_norm_, 2*3*8*10 = 480 each; the top (not in place) 480 too
    assert got["bn.buffer_blob_"] == got["bn.x_norm_"] == got["bn"] == 480 * F
    assert got["bn.batch_mean_"] == got["bn.batch_variance_"] == 3 * F
    # backward still writes the bottom's diff (no propagate_down check) and both param diffs
    backward = {b.owner for b in net_buffers(net, mode="gpu") if b.touch == "backward"}
    assert {"data", "bn.param0", "bn.param1"} <= backward


POOL_UP = HEAD + """
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool" top: "mask"
        pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "up" type: "Upsample" bottom: "pool" bottom: "mask" top: "up" upsample_param { scale: 2 } }
""" + LOSS % ("up", 8, 10)


def test_upsample_writes_only_its_data_bottoms_diff(tmp_path):
    net = build(tmp_path, POOL_UP)
    buffers = net_buffers(net, mode="cpu")
    up = sorted((b.owner, b.kind, b.touch, b.bytes) for b in buffers if b.layer == "up")
    # forward: the top, 2*4*8*10 = 640 floats; backward: pool's diff, 2*4*4*5 = 160 floats (its
    # top's diff came first from the loss's backward)
    assert up == [("pool", "top diff", "backward", 160 * F), ("up", "top data", "forward", 640 * F)]
    assert not [b for b in buffers if b.owner == "mask" and b.kind == "top diff"]


def test_upsample_backward_asks_only_bottom_0(tmp_path):
    """Backward_cpu/gpu do everything under `if (propagate_down[0])`."""
    node = build(tmp_path, POOL_UP).layer("up")
    run = run_of(node, "cpu", "caffe")
    assert list(run.propagate_down) == [True, True]  # the mask comes from a layer that learns
    assert [t.part for t in node.impl.touches(run) if t.stage == "backward"] == ["diff", "diff"]
    run.propagate_down = [False, True]
    assert not [t for t in node.impl.touches(run) if t.stage == "backward"]


def test_dense_image_data_keeps_one_prefetch_batch(tmp_path):
    text = """
layer { name: "data" type: "DenseImageData" top: "data" top: "label"
        dense_image_data_param { source: "train.txt" batch_size: 4 new_height: 360 new_width: 480 } }
"""
    net = build(tmp_path, text)
    prefetch = {b.owner: b.bytes for b in net_buffers(net, mode="cpu") if b.kind == "prefetch"}
    # one batch of each top: data 4*3*360*480 = 2,073,600 floats, label 4*1*360*480 = 691,200
    assert prefetch == {"data.prefetch[1].data": 2073600 * F, "data.prefetch[1].label": 691200 * F}
    assert all(b.touch == "setup" for b in net_buffers(net, mode="cpu") if b.kind == "prefetch")


def test_dense_image_data_on_the_gpu_holds_only_its_tops(tmp_path):
    """The fork's BasePrefetchingDataLayer keeps prefetch_data_ and prefetch_label_ on the host
    (base_data_layer.cpp:38-41 touches only their cpu_data; data_layers.hpp:76-77), and
    Forward_gpu copies prefetch_data_.cpu_data() into top[0]->mutable_gpu_data()
    (base_data_layer.cu:13-22; dense_image_data_layer has no .cu). So in GPU mode the device holds
    the tops, written by the first forward: 4*3*360*480 + 4*1*360*480 floats; the batch is host
    memory, malloc'd (syncedmem.hpp:24-27)."""
    text = """
layer { name: "data" type: "DenseImageData" top: "data" top: "label"
        dense_image_data_param { source: "train.txt" batch_size: 4 new_height: 360 new_width: 480 } }
"""
    net = build(tmp_path, text)
    gpu = [b for b in net_buffers(net, mode="gpu") if b.layer == "data"]
    device = {b.owner: (b.touch, b.bytes) for b in gpu if b.device == "device"}
    assert device == {"data": ("forward", 2073600 * F), "label": ("forward", 691200 * F)}
    host = {b.owner: b.bytes for b in gpu if b.kind == "prefetch"}
    assert host == {"data.prefetch[1].data": 2073600 * F, "data.prefetch[1].label": 691200 * F}
    assert {b.device for b in gpu if b.kind == "prefetch"} == {"host"}


def test_forks_cudnn_convolution_has_a_small_forward_workspace_and_asks_before_each_diff(tmp_path):
    text = HEAD + """
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 7 pad: 3 } }
""" + LOSS % ("conv", 8, 10)
    net = build(tmp_path, text)
    got = [b for b in net_buffers(net, mode="gpu", engine="cudnn") if b.layer == "conv"]
    # one workspace, grown in Forward_gpu, at most the limit kh*kw*C_in ints: 7*7*3*4 = 588 bytes
    assert [(b.owner, b.bytes, b.touch) for b in got if b.kind == "workspace"] == [("conv.workspace", 588, "forward")]
    assert not [b for b in got if b.owner == "conv.col_buffer_"]
    # the net input needs no gradient, and cuDNN's backward asks propagate_down: no data diff
    assert not [b for b in got if b.owner == "data" and b.kind == "top diff"]
    # Caffe's engine writes the bottom's diff regardless
    caffe = net_buffers(net, mode="gpu", engine="caffe")
    assert [b.bytes for b in caffe if b.owner == "data" and b.kind == "top diff"] == [2 * 3 * 8 * 10 * F]


def test_forks_cudnn_takes_max_pooling_without_padding_or_mask(tmp_path):
    text = HEAD + """
layer { name: "pool" type: "Pooling" bottom: "data" top: "pool" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "padded" type: "Pooling" bottom: "data" top: "padded"
        pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 } }
"""
    net = build(tmp_path, text)
    cudnn = {b.owner for b in net_buffers(net, mode="gpu", engine="cudnn", backward=False)}
    assert "pool.max_idx_" not in cudnn  # cuDNN pooling
    assert "padded.max_idx_" in cudnn  # cuDNN refuses padding: Caffe's pooling
    caffe = {b.owner for b in net_buffers(net, mode="gpu", engine="caffe", backward=False)}
    assert {"pool.max_idx_", "padded.max_idx_"} <= caffe


def test_forks_lrn_and_deconvolution_have_no_cudnn_version(tmp_path):
    text = HEAD + """
layer { name: "norm" type: "LRN" bottom: "data" top: "norm" lrn_param { local_size: 3 } }
layer { name: "deconv" type: "Deconvolution" bottom: "norm" top: "deconv"
        convolution_param { num_output: 2 kernel_size: 2 stride: 2 } }
"""
    net = build(tmp_path, text)
    got = {b.owner: b.bytes for b in net_buffers(net, mode="gpu", engine="cudnn", backward=False)}
    # LRN's scale_, the bottom's size 2*3*8*10 = 480 floats
    assert got["norm.scale_"] == 480 * F
    # Deconvolution's column buffer (deconv_layer.cpp has no cuDNN twin in the fork),
    # C_out*kh*kw*H_in*W_in = 2*2*2*8*10 = 640 floats
    assert got["deconv.col_buffer_"] == 640 * F
    assert "deconv.workspace" not in got


def count(shape):
    n = 1
    for d in shape:
        n *= d
    return n
