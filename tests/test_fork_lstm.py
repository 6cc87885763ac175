"""Junhyuk Oh's caffe-lstm (junhyukoh/caffe-lstm 598d454) and CTPN's Caffe (tianzhi0549/CTPN f77ec9e):
their schemas, Lstm, Transpose and Reverse held against their sources, their nets (tests/data/SOURCES.md),
and a Python layer whose tops no layer reads.

Expected values are derived by hand below from caffe-lstm's src/caffe/layers/lstm_layer.cpp/.cu and
CTPN's caffe/src/caffe/layers/{lstm,transpose,reverse}_layer.cpp/.cu, cited by file and line.
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.read.load import load

LSTM = os.path.join(DATA, "forks", "caffe_lstm")
SHORT = os.path.join(LSTM, "lstm_short.prototxt")
DEEP = os.path.join(LSTM, "deep_lstm_short.prototxt")
CTPN = os.path.join(DATA, "forks", "ctpn", "models", "deploy.prototxt")
F = 4  # bytes per float (and per int)



def test_the_protos_are_the_forks_files_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "caffe_lstm.proto")).read()
    assert text.startswith("// junhyukoh/caffe-lstm (Junhyuk Oh's LSTM for Caffe), src/caffe/proto/caffe.proto at "
                           "commit 598d45456fa2a1b127a644f4aa38daa8fb9fc722,\n")
    assert "  optional LSTMParameter lstm_param = 201;\n" in text
    assert "  optional uint32 batch_size = 5 [default = 1];\n" in text
    text = open(os.path.join(ROOT, "proto", "forks", "ctpn.proto")).read()
    assert text.startswith("// tianzhi0549/CTPN (CTPN's Caffe, in the repository's caffe/ folder), "
                           "caffe/src/caffe/proto/caffe.proto at commit f77ec9e7c4c010c8834cf0f87111370b14a00f33,\n")
    assert "  optional LSTMParameter lstm_param = 140;\n" in text  # not caffe-lstm's number
    assert "  optional TransposeParameter transpose_param=142;\n" in text


def test_their_nets_are_read_with_their_schemas():
    assert load(SHORT).schema.name == "caffe_lstm"
    assert load(CTPN).schema.name == "ctpn"  # transpose_param is CTPN's alone


def test_the_lstm_sequence_examples_audit_with_no_flags():
    """lstm_short: 320 rows of one input, N = lstm_param's batch_size (default 1), so T = 320 / 1
    (cpp:21, 78); H = 15. The top is (T*N, H) = (320, 15) (cpp:83-86); the weights (4H, I) = (60, 1),
    (4H, H) = (60, 15) and the bias (60) (cpp:29-53): 60 + 900 + 60 = 1,020, with ip1's 15 + 1."""
    for path in (SHORT, os.path.join(LSTM, "lstm_short_solver.prototxt"), DEEP):
        r = run_in_process(path)
        assert r.returncode == 0, r.stderr
    r = run_in_process(SHORT)
    assert "Read with the caffe.proto of Junhyuk Oh's caffe-lstm" in r.stdout
    assert "Params: 1,036 " in r.stdout
    net = build_nets(SHORT)[0]
    assert tops(net, "lstm1") == [(320, 15)]
    assert [p.shape for p in net.layer("lstm1").params] == [(60, 1), (60, 15), (60,)]
    deep = build_nets(DEEP)[0]
    assert [p.shape for p in deep.layer("lstm2").params] == [(28, 7), (28, 7), (28,)]  # I = lstm1's H = 7


def test_what_the_lstm_holds():
    """lstm1 of lstm_short, T = 320, N = 1, H = 15. Forward: pre_gate_ and gate_ (T, N, 4, H) = 19,200
    floats, cell_ (T, N, H) = 4,800 (cpp:90-101), h_to_gate_ (N, 4, H) = 60, c_0_, h_0_, c_T_, h_T_
    (N, H) = 15 each; bias_multiplier_, T*N = 320 ones, set on the host in Reshape (cpp:107-110) and
    read on the device by the GPU forward (cu:156). Backward: the diffs of pre_gate_, gate_ and cell_,
    of c_T_, h_0_ and c_0_, and h_to_h_ (N, H) (cpp:214-267)."""
    got = layer_buffers(build_nets(SHORT)[0], "lstm1")
    gates, cells, state = 320 * 4 * 15 * F, 320 * 15 * F, 15 * F
    assert got[("bias_multiplier_ (host)", "host")] == got[("bias_multiplier_", "device")] == 320 * F
    for name in ("pre_gate_", "gate_", "pre_gate_ (diff)", "gate_ (diff)"):
        assert got[(name, "device")] == gates
    assert got[("cell_", "device")] == got[("cell_ (diff)", "device")] == cells
    for name in ("c_0_", "h_0_", "c_T_", "h_T_", "c_T_ (diff)", "h_0_ (diff)", "c_0_ (diff)", "h_to_h_"):
        assert got[(name, "device")] == state
    assert got[("h_to_gate_", "device")] == 4 * state
    cpu = layer_buffers(build_nets(SHORT)[0], "lstm1", mode="cpu")
    assert ("bias_multiplier_", "device") not in cpu and cpu[("bias_multiplier_ (host)", "host")] == 320 * F


def test_the_lstm_checks_its_batch_size(tmp_path):
    """T = num / N, and Reshape CHECKs that N divides num (cpp:78-80); the clip holds one value per row
    (the forward's CHECK_EQ(num, count), cpp:122)."""
    def net(batch, clip="dim: 6 dim: 1"):
        return ('input: "x" input_shape { dim: 6 dim: 2 } input: "c" input_shape { ' + clip + ' }\n'
                'layer { name: "l" type: "Lstm" bottom: "x" bottom: "c" top: "l" '
                f'lstm_param {{ num_output: 3 batch_size: {batch} }} }}\n')
    assert tops(build_text(tmp_path, net(2), schema="caffe_lstm"), "l") == [(6, 3)]
    with pytest.raises(InputError, match="Input size should be multiple of batch size: 6 rows, lstm_param batch_size 4"):
        build_text(tmp_path, net(4), schema="caffe_lstm")
    with pytest.raises(InputError, match="one value per row"):
        build_text(tmp_path, net(2, "dim: 6 dim: 2"), schema="caffe_lstm")


def test_ctpns_deploy_net_audits_with_no_flags():
    """data 1 x 3 x 600 x 900 through VGG16's four ceil-mode poolings: 600 -> 300 -> 150 -> 75 -> 38 and
    900 -> 450 -> 225 -> 113 -> 57, so conv5_3 is 1 x 512 x 38 x 57 and Im2col (3 x 3, pad 1) 1 x 4608 x 38
    x 57. Transpose (3, 2, 0, 1) gives (57, 38, 1, 4608) (transpose_layer.cpp:80-86); the Reshape
    (57, 38, 4608); CTPN's Lstm reads T = 57, N = 38, I = 4608 off the axes (lstm_layer.cpp:21-23, 64-72)
    and gives (57, 38, 128), its weights (512, 4608), (512, 128), (512); Reverse keeps the shape.
    The Python proposal layer's module is found under the repository's src/: its setup reshapes rois to
    (1, 4) and scores to (1, 1, 1, 1) (text_proposal_layer.py:16-17), which Net::Init allocates; its
    forward reshapes them to the proposals each image makes (line 40), which only running it would tell:
    the setup's shapes are taken, said as an assumption."""
    r = run_in_process(CTPN)
    assert r.returncode == 0, r.stderr
    assert "Read with the caffe.proto of CTPN's Caffe" in r.stdout
    assert ("tops rois 1x4, scores 1x1x1x1: read off its source, ../src/layers/text_proposal_layer.py (line 16, 17), "
            "never run; its forward (line 40) reshapes them to what each batch makes") in r.stdout
    net = build_nets(CTPN)[0]
    assert tops(net, "conv5_3") == [(1, 512, 38, 57)]
    assert tops(net, "im2col_transpose") == [(57, 38, 1, 4608)]
    assert tops(net, "lstm") == [(57, 38, 128)]
    assert [p.shape for p in net.layer("lstm").params] == [(512, 4608), (512, 128), (512,)]
    assert tops(net, "lstm-reverse1") == [(57, 38, 4608)]
    assert tops(net, "proposal") == [(1, 4), (1, 1, 1, 1)]


def test_what_transpose_and_reverse_hold():
    """Transpose sets four Blob<int>s of one int per axis on the host in Reshape (transpose_layer.cpp:47-71);
    the GPU forward reads the device copies of bottom_counts_, top_counts_ and forward_map_ and writes
    buf_, count x axes ints (cpp:73-75, cu:33): im2col_transpose's bottom is 4608 x 38 x 57 = 9,980,928
    values of 4 axes. Reverse keeps bottom_counts_ (cpp:31-38), read on the device (cu:22). In this net
    nothing runs backward."""
    net = build_nets(CTPN)[0]
    got = layer_buffers(net, "im2col_transpose")
    for name in ("bottom_counts_", "top_counts_", "forward_map_", "backward_map_"):
        assert got[(name + " (host)", "host")] == 4 * F
    for name in ("bottom_counts_", "top_counts_", "forward_map_"):
        assert got[(name, "device")] == 4 * F
    assert ("backward_map_", "device") not in got
    assert got[("buf_", "device")] == 4608 * 38 * 57 * 4 * F
    got = layer_buffers(net, "lstm-reverse1")
    assert got == {("bottom_counts_ (host)", "host"): 3 * F, ("bottom_counts_", "device"): 3 * F}


def test_transpose_and_reverse_checks(tmp_path):
    def net(layer):
        return 'input: "x" input_shape { dim: 2 dim: 3 dim: 4 }\n' + layer
    t = net('layer { name: "t" type: "Transpose" bottom: "x" top: "t" transpose_param { dim: 2 dim: 0 dim: 1 } }\n')
    assert tops(build_text(tmp_path, t, schema="ctpn"), "t") == [(4, 2, 3)]
    with pytest.raises(InputError, match="transpose_param names 2 axes for a bottom of 3"):
        build_text(tmp_path, net('layer { name: "t" type: "Transpose" bottom: "x" top: "t" '
                                 'transpose_param { dim: 1 dim: 0 } }\n'), schema="ctpn")
    with pytest.raises(InputError, match="in-place"):
        build_text(tmp_path, net('layer { name: "t" type: "Reverse" bottom: "x" top: "x" }\n'), schema="ctpn")
    with pytest.raises(InputError, match="reverse_param's axis 3 must be an axis"):
        build_text(tmp_path, net('layer { name: "t" type: "Reverse" bottom: "x" top: "t" '
                                 'reverse_param { axis: 3 } }\n'), schema="ctpn")


def test_a_python_layer_whose_tops_nobody_reads(tmp_path):
    """A Python layer of a module protoaudit cannot read: its tops are asked for where a later layer reads
    them, and counted empty, said so, where none does (and none is declared)."""
    head = ('input: "x" input_shape { dim: 2 dim: 3 }\n'
            'layer { name: "p" type: "Python" bottom: "x" top: "y" python_param { module: "nowhere" layer: "L" } }\n')
    net = build_text(tmp_path, head)
    assert tops(net, "p") == [(0,)]
    assert "no layer of the net reads its tops (y)" in net.assumptions[0].what
    with pytest.raises(InputError, match="--input y="):
        build_text(tmp_path, head + 'layer { name: "r" type: "ReLU" bottom: "y" top: "z" }\n')
    declared = build_text(tmp_path, head, inputs={"y": (2, 5)})
    assert tops(declared, "p") == [(2, 5)]


def test_a_file_with_ctpns_transpose_and_a_later_bvlcs_scale_is_caffe_ocrs(tmp_path):
    """caffe_ocr's nets (senlinuc/caffe_ocr) carry CTPN's transpose_param and a 2016 BVLC's scale_param,
    which CTPN's 2015 schema lacks: caffe_ocr's caffe.proto, shipped, has both, and reads the file."""
    text = ('input: "x" input_shape { dim: 2 dim: 3 dim: 4 }\n'
            'layer { name: "t" type: "Transpose" bottom: "x" top: "t" transpose_param { dim: 2 dim: 0 dim: 1 } }\n'
            'layer { name: "s" type: "Scale" bottom: "t" top: "s" scale_param { bias_term: true } }\n')
    path = tmp_path / "net.prototxt"
    path.write_text(text)
    (net,) = build_nets(str(path))
    assert net.schema == "caffe_ocr" and tops(net, "t") == [(4, 2, 3)]
