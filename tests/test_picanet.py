"""PiCANet's Caffe (nian-liu/PiCANet fee3a2f, caffe/): its schema, AttPooling, ReNetLSTM, the static column
buffers and the fork's own training nets.

Expected values are derived by hand below from that commit's caffe/src/caffe/layers/att_pooling_layer.cpp/.cu,
renet_lstm_layer.cpp/.cu, base_conv_layer.cpp, interp_layer.cpp and caffe/include/caffe/layers, cited by file
and line. The nets are in tests/data/picanet (tests/data/SOURCES.md).
"""
import json
import os

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit.audit import build_nets
from protoaudit.memory.buffers import layer_touches, net_buffers
from protoaudit.read.load import load

NETS = os.path.join(DATA, "picanet")
VGG = os.path.join(NETS, "VGG_8s_75G432LP_train_test.prototxt")
RES50 = os.path.join(NETS, "Res50_8s_54G321LP_train_test.prototxt")
F = 4  # bytes per float


def inputs(**shapes):
    return "".join(f'layer {{ name: "{n}" type: "Input" top: "{n}" input_param {{ shape {{ '
                   + " ".join(f"dim: {d}" for d in s) + " } } }\n" for n, s in shapes.items())


ATT = """layer {{ name: "{name}" type: "AttPooling" bottom: "{fm}" bottom: "{att}" top: "{name}"
  att_pooling_param {{ {p} }} }}
"""


def build(tmp_path, body):
    return build_text(tmp_path, "force_backward: true\n" + body, schema="picanet")


def statics(net, mode="gpu"):
    """{(owner, layer, stage): bytes} of the process's buffers the net holds."""
    return {(b.owner, b.layer, b.touch): b.bytes for b in net_buffers(net, mode=mode) if b.owner.startswith("process.")
            and b.kind == "layer buffer"}


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "picanet.proto")).read()
    assert text.startswith("// nian-liu/PiCANet, caffe/src/caffe/proto/caffe.proto at commit "
                           "fee3a2f044a6db614d78072a1485946956b2a71f,\n// copied verbatim below this header")
    # caffe.proto:398, :403, :1043 and :1155 of the fork's file
    assert "  optional AttPoolingParameter att_pooling_param = 151;\n" in text
    assert "  optional ReNetLSTMParameter renet_lstm_param = 147;  \n" in text
    assert "  optional AttMode att_mode = 1 [default = LOCAL];\n" in text
    assert "  optional bool peephole = 10 [default = true];\n" in text


def test_local_att_pooling_shapes_and_its_static_buffer(tmp_path):
    """att_pooling_layer.cpp:52-59: LOCAL, kernel 3, pad 1, dilation 1, stride 1 on an 8 x 8 map: extent 3,
    (8 + 2 - 3) / 1 + 1 = 8, the attention's 8 x 8; 3 x 3 = 9 of its channels (:62). Top (2, 5, 8, 8) (:73).
    col_buffer_ (base_picanet_layer.hpp:30, static) is 1 x 5*9 x 8 x 8 (cpp:77): 2880 floats, its data taken
    in Forward_gpu (cu:89) and its diff in Backward_gpu (cu:125). No buffer of the layer's own."""
    body = inputs(x=(2, 5, 8, 8), a=(2, 9, 8, 8)) + ATT.format(name="p", fm="x", att="a", p="kernel_size: 3 pad: 1")
    body += 'layer { name: "loss" type: "EuclideanLoss" bottom: "p" bottom: "x" top: "loss" }\n'
    net = build(tmp_path, body)
    assert tops(net, "p") == [(2, 5, 8, 8)]
    assert layer_buffers(net, "p") == {}
    assert statics(net) == {("process.BasePiCANetLayer::col_buffer_", "p", "forward"): 2880 * F,
                            ("process.BasePiCANetLayer::col_buffer_ diff", "p", "backward"): 2880 * F}
    diffs = {(t.what, t.index) for t in layer_touches(net.layer("p"), "gpu", "caffe") if t.part == "diff"}
    assert diffs == {("top", 0), ("bottom", 0), ("bottom", 1)}  # cu:121-130, whatever propagate_down says


def test_one_col_buffer_for_every_att_pooling_the_largest(tmp_path):
    """The static Blob is reshaped by both layers at setup (cpp:77) before the first forward allocates it:
    one buffer of the larger count, first touched by the first layer (its diff by the last: backward runs in
    reverse). Layer a: LOCAL kernel 3 pad 1 on
    (2, 1, 8, 8): 1*9 x 8 x 8 = 576. Layer b: GLOBAL without kernel_size on a 6 x 6 map: k = W0 = 6
    (cpp:44-46), (6 - 6) / 1 + 1 = 1 (:48-51), 36 attention channels; col 20*36 x 1 x 1 = 720."""
    body = inputs(x=(2, 1, 8, 8), a=(2, 9, 8, 8), y=(2, 20, 6, 6), g=(2, 36, 8, 8))
    body += ATT.format(name="pa", fm="x", att="a", p="kernel_size: 3 pad: 1")
    body += ATT.format(name="pb", fm="y", att="g", p="att_mode: GLOBAL")
    net = build(tmp_path, body)
    assert tops(net, "pb") == [(2, 20, 8, 8)]
    assert statics(net) == {("process.BasePiCANetLayer::col_buffer_", "pa", "forward"): 720 * F,
                            ("process.BasePiCANetLayer::col_buffer_ diff", "pb", "backward"): 720 * F}


def test_att_pooling_checks_and_cpu(tmp_path):
    """cpp:37 (GLOBAL stride 1), :58 (LOCAL output must be the attention's), :62 (k*k channels); Forward_cpu is
    NOT_IMPLEMENTED (cpp:84)."""
    base = inputs(x=(2, 5, 8, 8), a=(2, 9, 8, 8))
    for p, words in (("att_mode: GLOBAL stride: 2", "stride must be 1"), ("kernel_size: 3", "give 6x6"),
                     ("kernel_size: 5 pad: 2", "needs 25")):
        path = tmp_path / "n.prototxt"
        path.write_text(base + ATT.format(name="p", fm="x", att="a", p=p))
        run = run_in_process(str(path))
        assert run.returncode == 2 and words in run.stderr and "Traceback" not in run.stderr, (p, run.stderr)
    net = build(tmp_path, base + ATT.format(name="p", fm="x", att="a", p="kernel_size: 3 pad: 1"))
    stops = [t for t in layer_touches(net.layer("p"), "cpu", "caffe") if t.what == "stop"]
    assert [t.stage for t in stops] == ["forward"] and "cpp:84" in stops[0].note


def test_renet_lstm_shapes_params_and_buffers(tmp_path):
    """renet_lstm_layer.cpp:152-230, Y_DIR, num_output 5, 2 x 3 patches of a (2, 3, 4, 6) bottom: patch_ny 2,
    patch_nx 2 (:160-161); Y_DIR: R = patch_nx = 2 RNNs of S = patch_ny = 2 steps (:163-165); P = 3*2*3 = 18
    (:27). Top (2, 10, 2, 2) (:219-224). Per direction 4 x (5, 23), 3 x (5, 5), 4 x (5) (:76-123).
    Per direction (:167-208): X_H_data_ S R N (P+5) = 2*2*2*23 = 184; gi, ci, go, gf, cstate 2*2*2*5 = 40;
    hidden_data_ and the nine diff blobs R N 5 = 20; X_H_diff_ R N (P+5) = 92. bias_multiplier_ R N = 4, set on
    the host (:226-229), read on the device (cu:159). Backward_gpu: bottom and blob diffs through their host
    pointers (cu:604-613): 2*3*4*6 = 144 and 2 (4*115 + 3*25 + 4*5) = 1110 floats."""
    body = inputs(x=(2, 3, 4, 6)) + """layer { name: "r" type: "ReNetLSTM" bottom: "x" top: "r"
      renet_lstm_param { direction: Y_DIR num_output: 5 patch_height: 2 patch_width: 3 peephole: false } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "r" bottom: "r" top: "loss" }\n"""
    net = build(tmp_path, body)
    assert tops(net, "r") == [(2, 10, 2, 2)]
    assert [tuple(p.shape) for p in net.layer("r").params] == 2 * (4 * [(5, 23)] + 3 * [(5, 5)] + 4 * [(5,)])
    want = {("bias_multiplier_ (host)", "host"): 4 * F, ("bias_multiplier_", "device"): 4 * F,
            ("bottom diff (host)", "host"): 144 * F, ("blobs_ diff (host)", "host"): 1110 * F}
    for d in (0, 1):
        want[(f"X_H_data_[{d}]", "device")] = 184 * F
        want[(f"X_H_diff_[{d}]", "device")] = 92 * F
        want.update({(f"{g}_data_[{d}]", "device"): 40 * F for g in ("gi", "ci", "go", "gf", "cstate")})
        want.update({(f"{g}_[{d}]", "device"): 20 * F for g in (
            "hidden_data", "hidden_diff", "gi_diff", "gi_next_diff", "ci_diff", "go_diff", "gf_diff", "gf_next_diff",
            "cstate_diff", "cstate_next_diff")})
    assert layer_buffers(net, "r") == want
    # ComputeParamDiff_gpu (cu:524-551): W_i..W_f and the biases; the peephole ones only with peephole
    written = {t.index for t in layer_touches(net.layer("r"), "gpu", "caffe") if t.what == "param" and t.part == "diff"}
    assert written == set(range(22)) - {4, 5, 6, 15, 16, 17}


def test_one_conv_col_buffer_sized_by_a_layer_that_never_touches_it(tmp_path):
    """base_conv_layer.cpp:12 (static) and :235-244: every convolution reshapes it. a: 1x1 on (2, 64, 10, 10),
    64 x 10 x 10 = 6400, never touched (a 1x1 forward skips im2col; nothing runs backward); b: 3x3 pad 1 on a's
    4 channels, 4*9 x 10 x 10 = 3600, touched in its forward (cpp:334). One buffer: 6400 floats, at b."""
    body = inputs(x=(2, 64, 10, 10)) + """
    layer { name: "a" type: "Convolution" bottom: "x" top: "a" convolution_param { num_output: 4 kernel_size: 1 } }
    layer { name: "b" type: "Convolution" bottom: "a" top: "b"
      convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }\n"""
    net = build(tmp_path, body)
    assert statics(net) == {("process.BaseConvolutionLayer::col_buffer_", "b", "forward"): 6400 * F}
    assert "col_buffer_" not in {name for name, _ in layer_buffers(net, "b")}


def test_seglabel_interp_has_no_backward(tmp_path):
    """interp_layer.cpp:78-79: is_seglabel with propagate_down[0] is LOG(FATAL)."""
    body = inputs(x=(2, 3, 9, 9)) + """layer { name: "i" type: "Interp" bottom: "x" top: "i"
      interp_param { shrink_factor: 2 is_seglabel: true } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "i" bottom: "i" top: "loss" }\n"""
    net = build(tmp_path, body)
    assert tops(net, "i") == [(2, 3, 5, 5)]  # (9 - 1) / 2 + 1 (DeepLab v2's rule)
    stops = [t for t in layer_touches(net.layer("i"), "gpu", "caffe") if t.what == "stop"]
    assert [t.stage for t in stops] == ["backward"]


def test_which_schema_reads_the_files(tmp_path):
    """The nets name AttPooling and ReNetLSTM: PiCANet's. A file with only DeepLab v2's types (and nothing
    DeepLab v2's 2016 caffe.proto lacks, such as the Input layer) stays DeepLab v2's."""
    assert load(VGG).schema.name == "picanet"
    assert load(RES50).schema.name == "picanet"
    path = tmp_path / "seg.prototxt"
    path.write_text('input: "x" input_shape { dim: 1 dim: 1 dim: 9 dim: 9 }\n' + """layer { name: "i" type: "Interp" bottom: "x" top: "i"
      interp_param { shrink_factor: 2 } }""")
    assert load(str(path)).schema.name == "deeplab_v2"


def _audit(path):
    """The net audited as a new user would: from its folder, no flag."""
    run = run_in_process(os.path.basename(path), "--format", "json", cwd=os.path.dirname(path))
    assert run.returncode in (0, 1), run.stderr
    return json.loads(run.stdout)


def test_the_vgg_net_audits():
    """The crop (224, transform_param) sizes ImageSegData's tops whatever the absent list holds: img 10 x 3 x
    224 x 224. The largest column buffer is pool_2_att_1's, a 7 x 7 convolution, dilation 2, pad 6, of
    fm_2_start's 128 channels at 112 x 112 (224 / 2): 128*49 x 112 x 112 = 78,675,968 floats; pool_2's
    AttPooling (kernel 7, pad 6, dilation 2, LOCAL) has 128*49 x 112 x 112 too. The TEST net (img 1 x 3 x
    224 x 224) reshapes both to no more, so it adds neither."""
    out = _audit(VGG)
    assert out["nets"][0]["caffe_proto"] == "picanet"
    shapes = {(d["net"], d["layer"], d["top"]): (d["shape"], d["source"]) for d in out["data_shapes"]}
    assert shapes[("train", "data", "img")] == ([10, 3, 224, 224], "the layer's parameters (is_color and its crop)")
    held = {(n["label"], b["owner"]): b["elements"] for n in out["nets"] for layer in n["layers"]
            for b in layer["buffers"] if b["owner"].startswith("process.") and b["kind"] == "layer buffer"}
    col = 128 * 49 * 112 * 112
    assert held == {("train", "process.BaseConvolutionLayer::col_buffer_"): col,
                    ("train", "process.BasePiCANetLayer::col_buffer_"): col,
                    ("train", "process.BasePiCANetLayer::col_buffer_ diff"): col}


def test_the_res50_net_audits():
    """Batch 8 of 224 x 224 crops (transform_param, image_data_param)."""
    out = _audit(RES50)
    net = build_nets(RES50)[0]
    assert tops(net, "data")[0] == (8, 3, 224, 224)
    assert out["total_bytes"] > 0
