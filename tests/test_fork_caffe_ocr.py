"""caffe_ocr's Caffe (senlinuc/caffe_ocr 81642f6): its schema, its OCR layers held against its source,
and two of its real nets (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/proto/caffe.proto,
src/caffe/layers/*.cpp/.cu, include/caffe/layers/*.hpp and src/caffe/layers/ctcpp_entrypoint.cpp
(warp-ctc's workspace), cited by file and line.
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit.audit import build_nets
from protoaudit.memory.buffers import net_buffers

HERE = os.path.join(DATA, "forks", "caffe_ocr")
INCEPTION = os.path.join(HERE, "inception-bn_train_val.prototxt")
DENSENET = os.path.join(HERE, "densenet-res-blstm_train-val.prototxt")
F = 4  # bytes per float (and per int)

# (T, N, C) of the inception-bn net's CTC input on the README's 280x32 images at batch 64; labels of 10.
T, N, C, L = 35, 64, 5990, 10


def ctc_net(t=T, n=N, c=C, labels=L):
    return (f'input: "x" input_shape {{ dim: {t} dim: {n} dim: 384 }}\n'
            f'input: "label" input_shape {{ dim: {n} dim: {labels} dim: 1 dim: 1 }}\n'
            f'layer {{ name: "fc" type: "InnerProduct" bottom: "x" top: "fc" '
            f'inner_product_param {{ num_output: {c} axis: 2 }} }}\n'
            'layer { name: "ctc" type: "WarpCTCLoss" bottom: "fc" bottom: "label" top: "loss" }\n'
            'layer { name: "acc" type: "CTCGreedyDecoder" bottom: "fc" bottom: "label" top: "acc" }\n'
            'layer { name: "dec" type: "CTCGreedyDecoder" bottom: "fc" top: "seq" }\n')


def test_the_forks_proto_has_its_own_fields():
    """caffe.proto (verbatim): ctc_decoder_param = 158, ctc_loss_param = 159, reverse_param = 160,
    transpose_param = 8266710, lstm_param = 8266711 (lines 408-417), a repeated int32 Datum label
    (line 36) and ImageData's regression = 14 (line 911)."""
    text = open(os.path.join(ROOT, "proto", "forks", "caffe_ocr.proto")).read()
    for line in ("optional CTCDecoderParameter ctc_decoder_param = 158;", "optional CTCLossParameter ctc_loss_param = 159;",
                 "optional ReverseParameter reverse_param = 160;", "optional TransposeParameter transpose_param=8266710;",
                 "optional LSTMParameter lstm_param = 8266711;", "repeated int32 label = 5;",
                 "optional bool regression = 14 [default = false];"):
        assert line in text


def test_ctc_tops_by_hand(tmp_path):
    """WarpCTCLoss: a scalar of 0 axes (cpp:70-71). CTCGreedyDecoder with two bottoms and one top: the
    (1, 2, 1, 1) accuracies (cpp:57-61, 91-94); with one bottom: the sequences (N, T, 1, 1) (cpp:81-84)."""
    net = build_text(tmp_path, ctc_net(), schema="caffe_ocr")
    assert tops(net, "ctc") == [()]
    assert tops(net, "acc") == [(1, 2, 1, 1)]
    assert tops(net, "dec") == [(N, T, 1, 1)]


def test_warp_ctc_workspace_by_hand(tmp_path):
    """get_workspace_size (ctcpp_entrypoint.cpp:78-159) at T = 35, N = 64, C = 5990, the longest label 10
    (S = 2*10 + 1 = 21). GPU (:100-131): 64*(2*4 + 4*4) + 4*10*64 + 4*21*64 + 4*21*35*64 + 4*35*64
    + 4*5990*35*64 = 1,536 + 2,560 + 5,376 + 188,160 + 8,960 + 53,670,400 = 53,876,992 bytes, on the
    device (mutable_gpu_data, warp_ctc_loss_layer.cu:104). CPU (:132-156): per sequence 4*5990 + 4*21*35
    + 4*21 + 3*4*21 = 27,236, times 64 = 1,743,104, plus 4*5990*35*64 = 53,670,400: 55,413,504 bytes on
    the host (cpp:165)."""
    net = build_text(tmp_path, ctc_net(), schema="caffe_ocr")
    assert layer_buffers(net, "ctc") == {("workspace_", "device"): 53_876_992}
    assert layer_buffers(net, "ctc", mode="cpu") == {("workspace_ (host)", "host"): 55_413_504}


def test_warp_ctc_writes_the_gradient_in_the_forward(tmp_path):
    """Forward_gpu writes bottom 0's mutable_gpu_diff (cu:20): T*N*C floats = 35*64*5990*4 = 53,670,400
    bytes in the forward, even in a forward-only net; it reads the label on the host (cpu_data, cu:28):
    64*10 floats = 2,560 bytes."""
    net = build_text(tmp_path, ctc_net(), schema="caffe_ocr")
    got = {(b.owner, b.kind, b.touch, b.device): b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "ctc"}
    assert [v for (owner, kind, stage, device), v in got.items()
            if kind == "top diff" and stage == "forward" and device == "device"] == [T * N * C * F]
    assert got[("label", "top data", "forward", "host")] == N * L * F


def test_warp_ctc_refuses_a_label_of_another_batch(tmp_path):
    """With two bottoms the label's num must be N, the activations' channels (cpp:56)."""
    from protoaudit.errors import InputError
    with pytest.raises(InputError, match="cpp:56"):
        build_text(tmp_path, ctc_net().replace("dim: 64 dim: 10", "dim: 32 dim: 10"), schema="caffe_ocr")


def test_lstm_reverse_transpose_by_hand(tmp_path):
    """Lstm (lstm_layer_Junhyuk.cpp:21-23, 35-54, 78-88): on (35, 64, 384) with num_output 256 the top is
    (35, 64, 256), the parameters (1024, 384), (1024, 256), (1024,). Reverse keeps the shape; Transpose
    with dims 3 0 1 2 makes (1, 64, 384, 35) into (35, 1, 64, 384) (transpose_layer.cpp:80-86)."""
    text = ('input: "p" input_shape { dim: 1 dim: 64 dim: 384 dim: 35 }\n'
            'layer { name: "t" type: "Transpose" bottom: "p" top: "t" transpose_param { dim: 3 dim: 0 dim: 1 dim: 2 } }\n'
            'layer { name: "r" type: "Reshape" bottom: "t" top: "x" reshape_param { shape { dim: 35 dim: 64 dim: 384 } } }\n'
            'layer { name: "l" type: "Lstm" bottom: "x" top: "h" lstm_param { num_output: 256 } }\n'
            'layer { name: "rev" type: "Reverse" bottom: "h" top: "hr" reverse_param { axis: 0 } }\n')
    net = build_text(tmp_path, text, schema="caffe_ocr")
    assert tops(net, "t") == [(35, 1, 64, 384)]
    assert tops(net, "l") == [(35, 64, 256)]
    assert [tuple(p.shape) for p in net.layer("l").params] == [(1024, 384), (1024, 256), (1024,)]
    assert tops(net, "rev") == [(35, 64, 256)]
    assert layer_buffers(net, "rev") == {}


def test_the_real_nets_are_read_as_the_forks():
    """Both nets name WarpCTCLoss, which only this fork has; the densenet one also scale_param and
    the fork's transpose_param and lstm_param."""
    for path in (INCEPTION, DENSENET):
        nets = build_nets(path, phase="train", inputs={"data": (32, 3, 32, 280)})
        assert nets[0].schema == "caffe_ocr"


def test_the_inception_net_at_the_readmes_image_size():
    """On 280x32 colour images (the README: "图片分辨率统一为280x32") at batch 64: the CTC input is
    (T, N, C) = (35, 64, 5990), so the workspace is the 53,876,992 bytes above."""
    net = build_nets(INCEPTION, phase="train", inputs={"data": (64, 3, 32, 280)})[0]
    assert tops(net, "fc1x5990") == [(T, N, C)]
    assert layer_buffers(net, "ctcloss") == {("workspace_", "device"): 53_876_992}


def test_at_the_assumed_224_image_the_ctc_check_refuses_and_a_32_high_image_fits():
    """At 224x224 the CNN leaves 28 columns of 25 rows: N = 64*25 = 1,600 sequences against 64 label
    rows, which cpp:56's CHECK refuses (so at 227, 299 and in grey); under --strict's --input at that
    size the message says so. A 32x32 image, 32 high as the README's 280x32 text lines, leaves one
    row: N = 64, one sequence per label row, and the net audits, said as assumed."""
    r = run_in_process(INCEPTION, "--input", "data=64x3x224x224")
    assert r.returncode == 2 and "cpp:56" in r.stderr
    r = run_in_process(INCEPTION)
    assert r.returncode == 0, r.stderr
    assert "top 'data' is 64x3x32x32" in r.stdout and "3x224x224 stops layer 'ctcloss'" in r.stdout
