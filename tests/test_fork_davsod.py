"""DAVSOD's ConvLSTM Caffe (DengPingFan/DAVSOD 769c91e, mycaffe-convlstm/): its schema, ConvLSTM's unrolled net,
ConvLSTMUnit, DummyForward, PSPNet's BN and Interp carried, and the nets of DAVSOD and PDB-ConvLSTM.

Expected values are derived by hand below from that commit's mycaffe-convlstm/src/caffe/layers/*.cpp/.cu and
mycaffe-convlstm/include/caffe/layers/*.hpp, cited by file and line. The nets are in tests/data/davsod
(tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops, touched
from protoaudit.audit import build_nets
from protoaudit.layers import deeplab, layer_class, pspnet
from protoaudit.read.load import load
from protoaudit.read.schema import DESCENDS_FROM

NETS = os.path.join(DATA, "davsod")
F = 4  # bytes per float


def inputs(**shapes):
    return "".join(f'layer {{ name: "{n}" type: "Input" top: "{n}" input_param {{ shape {{ '
                   + " ".join(f"dim: {d}" for d in s) + " } } }\n" for n, s in shapes.items())


LSTM = """layer {{ name: "enc" type: "ConvLSTM" bottom: "x" bottom: "cont" {extra_bottoms} top: "enc" {extra_tops}
  recurrent_param {{ expose_hidden: {expose} }}
  lstm_conv_param {{ num_output: 8 kernel_size: 3 pad: 1 weight_filler {{ type: "uniform" }} }} }}
layer {{ name: "loss" type: "EuclideanLoss" bottom: "enc" bottom: "t" }}
"""


def convlstm(tmp_path, expose):
    shapes = dict(x=(2, 1, 4, 5, 5), cont=(2, 1), t=(2, 1, 8, 5, 5))
    if expose:
        shapes.update(h0=(1, 1, 8, 5, 5), c0=(1, 1, 8, 5, 5))
    body = inputs(**shapes) + LSTM.format(
        extra_bottoms='bottom: "h0" bottom: "c0"' if expose else "",
        extra_tops='top: "hT" top: "cT"' if expose else "", expose="true" if expose else "false")
    return build_text(tmp_path, body, schema="davsod")


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "davsod.proto")).read()
    assert text.startswith("// DengPingFan/DAVSOD, mycaffe-convlstm/src/caffe/proto/caffe.proto at commit "
                           "769c91e06c092df5127776758be1a017c2e31dc1,\n// copied verbatim below this header")
    # caffe.proto:410-411 of the fork's file
    assert ("  repeated LSTMConvolutionParameter lstm_conv_param = 150;\n"
            "  optional LSTMDebugParameter lstm_debug_param = 151;\n") in text


def test_pspnets_layers_are_carried():
    """bn_layer.*, cudnn_bn_layer.* and interp_layer.* are hszhao/PSPNet 798bdc9's byte for byte."""
    assert DESCENDS_FROM["davsod"] == "pspnet"
    assert issubclass(layer_class("BN", "davsod"), pspnet.BN)
    assert issubclass(layer_class("Interp", "davsod"), deeplab.Interp)


def test_convlstm_exposed(tmp_path):
    """x (T 2, N 1, C 4, 5, 5), num_output 8, kernel 3 pad 1, expose_hidden. Tops: h (2, 1, 8, 5, 5) (the Concat of
    h_t on axis 0, cpp:255-259) and h_T, c_T (1, 1, 8, 5, 5) (RecurrentInputShapes, cpp:69-93).
    Parameters in Net::Init's order: x->transform's weight (4 x 8 = 32, 4, 3, 3) without bias (cpp:131-135);
    dummy_forward_c0's and _h0's (1) (dummy_forward.cpp:17-19; cpp:171-172); hidden->transform's (32, 8, 3, 3)
    and bias (32) (cpp:198-202), shared by name at t = 2; the Hadamard Scales on axis 3, 2 axes: (5, 5) each
    (cpp:205-216); dummy_forward_h's and _c's (1) (cpp:264-265).
    Buffers: x's transform (2, 1, 32, 5, 5) = 1,600 floats, its columns 4 x 9 x 25 = 900; each hidden
    transform's columns 8 x 9 x 25 = 1,800; each ConvLSTMUnit's X_acts_ like the gates, 32 x 25 = 800, data
    (.cu:63) and diff (.cu:145)."""
    net = convlstm(tmp_path, expose=True)
    assert tops(net, "enc") == [(2, 1, 8, 5, 5), (1, 1, 8, 5, 5), (1, 1, 8, 5, 5)]
    assert [tuple(p.shape) for p in net.layer("enc").params] == [
        (32, 4, 3, 3), (1,), (1,), (32, 8, 3, 3), (32,), (5, 5), (5, 5), (5, 5), (1,), (1,)]
    b = {k[0]: v for k, v in layer_buffers(net, "enc").items() if k[1] == "device"}
    assert b["unrolled x->transform data"] == 1600 * F and b["unrolled x->transform.col_buffer_"] == 900 * F
    assert b["unrolled hidden->transform->0.col_buffer_"] == b["unrolled hidden->transform->1.col_buffer_"] == 1800 * F
    for t in (1, 2):
        assert b[f"unrolled unit_t={t}.X_acts_"] == b[f"unrolled unit_t={t}.X_acts_ (diff)"] == 800 * F
        assert b[f"unrolled gate_input_{t} data"] == 800 * F
    # Reshape shares h_0's and c_0's diffs with the exposed bottoms, and the exposed tops' data and diffs with
    # h_t=T's and c_t=T's (cpp:11-22): no buffer of the layer's own for them
    assert not any(k.startswith(("unrolled h_t=T data", "unrolled c_t=T data", "unrolled h_t=0", "unrolled c_t=0 "))
                   for k in b)
    t = touched(net, "enc")
    assert {("top", 1, "diff", "backward", "device"), ("bottom", 2, "diff", "backward", "device")} <= t


def test_convlstm_not_exposed(tmp_path):
    """Without expose_hidden the two layers before the pseudoloss, dummy_forward_h and dummy_forward_c, never run
    (last_layer_index_ two back, cpp:48-50): h_t=T and c_t=T are written only by Forward's host copy into h_0
    and c_0 (recurrent_layer.cpp:256-263), 8 x 25 = 200 floats each on the host, and in GPU mode h_0's and c_0's
    host copies beside them."""
    net = convlstm(tmp_path, expose=False)
    assert tops(net, "enc") == [(2, 1, 8, 5, 5)]
    host = {k[0]: v for k, v in layer_buffers(net, "enc").items() if k[1] == "host"}
    for name in ("h_t=T", "c_t=T", "h_t=0", "c_t=0"):
        assert host[f"unrolled {name} data (host)"] == 200 * F
    cpu = {k[0] for k in layer_buffers(net, "enc", mode="cpu")}
    assert "unrolled h_t=T data (host)" in cpu and "unrolled h_t=0 data (host)" not in cpu


def test_convlstm_checks(tmp_path):
    """cont must be (T, N) (recurrent_layer.cpp:23-26); x must have 5 axes (cpp:113, conv_lstm_unit_layer.cpp:33);
    at most 2 lstm_conv_param (cpp:30)."""
    body = inputs(x=(2, 1, 4, 5, 5), cont=(2, 3), t=(2, 1, 8, 5, 5)) + LSTM.format(
        extra_bottoms="", extra_tops="", expose="false")
    with pytest.raises(Exception, match="cont"):
        build_text(tmp_path, body, schema="davsod")
    body = inputs(x=(2, 1, 4, 25), cont=(2, 1), t=(2, 1, 8, 25)) + LSTM.format(
        extra_bottoms="", extra_tops="", expose="false")
    with pytest.raises(Exception, match=r"\(T, N, C, H, W\)"):
        build_text(tmp_path, body, schema="davsod")


def test_convlstm_unit_and_dummy_forward(tmp_path):
    """ConvLSTMUnit: c (1, 2, 3, 4, 4), gates (1, 2, 12, 4, 4), cont (1, 2) -> c_t, h_t like c (cpp:45-47);
    X_acts_ like the gates, 2 x 12 x 16 = 384 floats (cpp:48). DummyForward: CPU code only, the top like the
    bottom, one parameter of (1) (dummy_forward.cpp:17-21), host copies of the data it reads and writes."""
    body = "force_backward: true\n" + inputs(c=(1, 2, 3, 4, 4), g=(1, 2, 12, 4, 4), k=(1, 2)) + (
        'layer { name: "u" type: "ConvLSTMUnit" bottom: "c" bottom: "g" bottom: "k" top: "ct" top: "ht" }\n'
        'layer { name: "d" type: "DummyForward" bottom: "ht" top: "hd" }\n')
    net = build_text(tmp_path, body, schema="davsod")
    assert tops(net, "u") == [(1, 2, 3, 4, 4)] * 2 and tops(net, "d") == [(1, 2, 3, 4, 4)]
    assert layer_buffers(net, "u")[("X_acts_", "device")] == 384 * F
    assert [tuple(p.shape) for p in net.layer("d").params] == [(1,)]
    assert ("bottom", 0, "data", "forward", "host") in touched(net, "d")


def test_the_davsod_train_net():
    """train.prototxt, given --input data=3x3x473x473 (its Python layer's image): conv5_4 (3, 32, 60, 60) is
    reshaped to (3, 1, 32, 60, 60) (T 3, N 1); encode1's tops (3, 1, 32, 60, 60) and (1, 1, 32, 60, 60) twice;
    cont (3, 1) from the absent HDF5 list, the one shape its CHECKs take."""
    path = os.path.join(NETS, "train.prototxt")
    assert load(path).schema.name == "davsod"
    net = build_nets(path, inputs={"data": (3, 3, 473, 473)})[0]
    assert tops(net, "encode1") == [(3, 1, 32, 60, 60), (1, 1, 32, 60, 60), (1, 1, 32, 60, 60)]
    assert tops(net, "clip_markers") == [(3, 1)]
    assert [tuple(p.shape) for p in net.layer("encode1").params][:5] == [
        (128, 32, 3, 3), (1,), (1,), (128, 32, 3, 3), (128,)]


@pytest.mark.parametrize("name, steps", [("test.prototxt", 3), ("pdb_convlstm_test.prototxt", 5)])
def test_the_test_nets_audit_with_no_flags(name, steps):
    """Tried as a new user would: their HDF5 list of sequence markers is not in either repository; the marker
    top is taken as ConvLSTM's (T, N), said as an assumption, and --input gives it."""
    r = run_in_process(name, cwd=NETS, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout and "DAVSOD's ConvLSTM Caffe" in r.stdout and f"reshape-cm {steps}x1" in r.stdout
    r = run_in_process(name, "--input", f"reshape-cm={steps}x1", cwd=NETS, timeout=300)
    assert r.returncode in (0, 1), r.stderr


def test_the_train_net_audits_with_its_python_data_given():
    r = run_in_process("train.prototxt", "--input", "data=3x3x473x473", cwd=NETS, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout
