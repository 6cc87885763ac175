"""Cysu's Caffe (Cysu/caffe, branch domain-guided-dropout, ab985827d63de737c5e05cbddb53c3a8484cd20f): BN,
GuidedDropout and its Data layer's crop_height/crop_width, held against that commit's sources, and
Cysu/dgd_person_reid's JSTL net (tests/data/SOURCES.md).

Expected values are derived by hand below from src/caffe/layers/bn_layer.cpp, cudnn_bn_layer.cpp/.cu,
guided_dropout_layer.cpp/.cu, data_layer.cpp, base_data_layer.cpp, data_transformer.cpp and
layer_factory.cpp, cited by file and line.
"""
import os

import pytest

from conftest import DATA, build_text, layer_buffers, run_protoaudit, tops
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers

HERE = os.path.join(DATA, "forks", "cysu")
F = 4  # bytes per float


def bn_net(n=2, c=8, h=6, w=5, bn="", engine=""):
    text = (f'input: "x" input_shape {{ dim: {n} dim: 3 dim: {h} dim: {w} }}\n'
            f'layer {{ name: "conv" type: "Convolution" bottom: "x" top: "conv" convolution_param {{ num_output: {c} '
            'kernel_size: 1 } }\n'
            f'layer {{ name: "bn" type: "BN" bottom: "conv" top: "bn" bn_param {{ {bn} {engine} }} }}\n'
            'layer { name: "ip" type: "InnerProduct" bottom: "bn" top: "ip" inner_product_param { num_output: 4 } }\n'
            'layer { name: "ipbn" type: "BN" bottom: "ip" top: "ipbn" }\n'
            'input: "label" input_shape { dim: 2 }\n'
            'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ipbn" bottom: "label" top: "loss" }\n')
    return text


def test_bn_shapes_and_params_by_hand(tmp_path):
    """LayerSetUp (bn_layer.cpp:20-41): four parameters of shape (1, C): slope, bias, running mean and
    variance. Reshape: top[0]->ReshapeLike(*bottom[0]) (cpp:54), so an InnerProduct's (N, C) stays 2-axis
    (the CUHK01 log, archived/individually_cuhk01.log:2796 and :2803: fc7 and fc7_bn both 'Top shape: 50 256')."""
    net = build_text(tmp_path, bn_net(), schema="cysu")
    assert tops(net, "bn") == [(2, 8, 6, 5)]
    assert tops(net, "ipbn") == [(2, 4)]
    assert [p.shape for p in net.layer("bn").params] == [(1, 8)] * 4


def test_bn_caffe_engine_buffers_by_hand(tmp_path):
    """Reshape (cpp:56-68): broadcast_buffer_ and x_norm_ like the bottom (2x8x6x5 = 480), spatial_statistic_
    N x C (16), batch_statistic_ and x_inv_std_ C (8), spatial_sum_multiplier_ H x W (30) and
    batch_sum_multiplier_ N (2). Engine DEFAULT is CAFFE (layer_factory.cpp:173-180), in a cuDNN build too."""
    net = build_text(tmp_path, bn_net(), schema="cysu")
    want = {"broadcast_buffer_": 480, "x_norm_": 480, "spatial_statistic_": 16, "batch_statistic_": 8,
            "x_inv_std_": 8, "spatial_sum_multiplier_": 30, "batch_sum_multiplier_": 2}
    for engine in ("caffe", "cudnn"):
        got = {name: b // F for (name, _), b in layer_buffers(net, "bn", engine=engine).items()}
        assert got == want


def test_frozen_bn_keeps_no_normalised_input(tmp_path):
    """frozen: the forward saves x_norm_ and x_inv_std_ only when not frozen (cpp:156-161), and the
    backward writes only the bottom's diff (cpp:189-212)."""
    net = build_text(tmp_path, bn_net(bn="frozen: true"), schema="cysu")
    got = {name for name, _ in layer_buffers(net, "bn")}
    assert "x_norm_" not in got and "x_inv_std_" not in got and "broadcast_buffer_" in got


def test_bn_cudnn_engine_by_hand(tmp_path):
    """engine: CUDNN, not frozen, gives CuDNNBNLayer (layer_factory.cpp:183-197), whose Reshape skips
    BNLayer's buffers (cudnn_bn_layer.cpp:40-58): TRAIN forward writes save_mean_ and save_inv_variance_
    (C each, cu:39-40), the backward scale_buf_'s and bias_buf_'s diffs (C each, cu:64-65). Frozen, the
    factory falls back to BNLayer (:183-187)."""
    net = build_text(tmp_path, bn_net(engine="engine: CUDNN"), schema="cysu")
    got = {name: b // F for (name, _), b in layer_buffers(net, "bn").items()}
    assert got == {"save_mean_": 8, "save_inv_variance_": 8, "scale_buf_ (diff)": 8, "bias_buf_ (diff)": 8}
    frozen = build_text(tmp_path, bn_net(bn="frozen: true", engine="engine: CUDNN"), schema="cysu")
    assert ("broadcast_buffer_", "device") in layer_buffers(frozen, "bn")


def dropout_net(kind="deterministic", guidance=(2, 4, 1, 1), phase=""):
    dims = " ".join(f"dim: {d}" for d in guidance)
    return (f'{phase}input: "x" input_shape {{ dim: 2 dim: 3 }}\n'
            f'input: "g" input_shape {{ {dims} }}\n'
            'layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip" inner_product_param { num_output: 4 } }\n'
            'layer { name: "drop" type: "GuidedDropout" bottom: "ip" bottom: "g" top: "ip" '
            f'guided_dropout_param {{ type: "{kind}" }} }}\n'
            'input: "label" input_shape { dim: 2 }\n'
            'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }\n')


def test_guided_dropout_by_hand(tmp_path):
    """NeuronLayer::Reshape: the top like bottom 0, here in place; Reshape (guided_dropout_layer.cpp:41-42)
    sizes rand_vec_ num x channels (2 x 4) and scale_ num (2), both written by a deterministic forward
    (cpp:58-76) in either phase; the backward writes bottom 0's diff (cpp:105-121)."""
    net = build_text(tmp_path, dropout_net(), schema="cysu")
    assert tops(net, "drop") == [(2, 4)]
    assert layer_buffers(net, "drop") == {("rand_vec_", "device"): 8 * F, ("scale_", "device"): 2 * F}


def test_stochastic_guided_dropout_in_test_copies(tmp_path):
    """"stochastic" in TEST copies the bottom (cpp:95-97, cu:108-110): no mask, no scale."""
    net = build_text(tmp_path, dropout_net("stochastic"), schema="cysu", phase="TEST")
    assert layer_buffers(net, "drop") == {}


@pytest.mark.parametrize("guidance", [(2, 4, 2, 1), (2, 5, 1, 1), (3, 4, 1, 1)])
def test_guided_dropout_checks_its_guidance(tmp_path, guidance):
    """CHECK_EQ of num and channels, and height and width 1 (cpp:36-39)."""
    with pytest.raises(InputError, match="guidance"):
        build_text(tmp_path, dropout_net(guidance=guidance), schema="cysu")


def test_guided_dropout_refuses_another_type(tmp_path):
    """LayerSetUp: LOG(FATAL) unless "deterministic" or "stochastic" (cpp:23-26)."""
    with pytest.raises(InputError, match="deterministic"):
        build_text(tmp_path, dropout_net("random"), schema="cysu")


def test_jstl_net_audits_with_no_flags():
    """Cysu/dgd_person_reid's JSTL net: its LMDBs are absent. The data top is 50x3x144x56 by crop_height and
    crop_width alone (InferBlobShape, data_transformer.cpp:20-31, data_layer.cpp:79-99), 3 channels by its
    three mean_values; the guidance, a Data layer of its own, is what GuidedDropout's CHECKs ask for beside
    fc7_bn (50, 256): 50x256x1x1 (cpp:36-39)."""
    run = run_protoaudit("jstl_trainval.prototxt", cwd=HERE, timeout=120)
    assert run.returncode in (0, 1), run.stderr
    assert "top 'data' 50x3x144x56" in run.stdout and "top 'data' 20x3x144x56" in run.stdout
    assert "top 'guidance' 50x256x1x1" in run.stdout and "top 'guidance' 20x256x1x1" in run.stdout
    assert "Cysu's Caffe" in run.stdout


def test_jstl_data_layer_holds_one_batch_on_the_host():
    """The 2015 BasePrefetchingDataLayer: prefetch_data_ and prefetch_label_, one batch each, on the host
    (base_data_layer.cpp:38-41, data_layer.cpp:146-151); the tops own their memory, a copy of it
    (base_data_layer.cu:13-23): 50 x 3 x 144 x 56 floats and 50 labels."""
    from protoaudit.audit import build_nets

    net = build_nets(os.path.join(HERE, "jstl_trainval.prototxt"), phase="TRAIN")[0]
    got = {(b.owner, b.device): b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "data"
           and b.kind == "prefetch"}
    assert got == {("data.prefetch_data_", "host"): 50 * 3 * 144 * 56 * F, ("data.prefetch_label_", "host"): 50 * F}
    assert tops(net, "conv1_bn") == [(50, 32, 144, 56)] and tops(net, "fc7_bn") == [(50, 256)]
