"""SphereFace's MarginInnerProduct (wy1iu/sphereface f20b130, tools/caffe-sphereface/src/caffe/layers/
margin_inner_product_layer.cpp "cpp:" and .cu "cu:"), and the SphereFace-20 training net.

Ground truth: real logs of the fork training SphereFace-20 at batch 256 on 112x96 CASIA-WebFace
crops, as users posted them (wy1iu/sphereface#75 and #103, the same figures in both), and hand
derivations from the layer's source.
"""
import json
import os
import shutil

import pytest

from conftest import DATA, ROOT, run_in_process
from protoaudit import InputError, audit, build_nets
from protoaudit.read.schema import load_schema

NET = os.path.join(DATA, "corpus", "nets", "sphereface20_train.prototxt")
SAMPLE = os.path.join(ROOT, "samples", "sphereface20_train.prototxt")
SOLVER = os.path.join(DATA, "solvers", "sphereface_solver.prototxt")
INPUT = ("--input", "data=256x3x112x96")
M, N, K = 256, 10572, 512  # rows (the batch), num_output, features (fc5)


def caffe_log(*args):
    run = run_in_process(NET, *INPUT, "--caffe-log", *args)
    assert run.returncode == 0, run.stderr
    return run.stdout


def memory_after(log, layer):
    lines = log.splitlines()
    i = lines.index(f"Setting up {layer}")
    return int(next(line for line in lines[i:] if line.startswith("Memory required for data:")).split()[-1])


def test_schema():
    """sphereface's caffe.proto: margin_inner_product_param = 147 (caffe-priv carries the same
    message at 20008); MarginType SINGLE..QUADRUPLE; base 1, gamma 0, power 1, iteration 0,
    lambda_min 0, axis 1."""
    s = load_schema("sphereface")
    assert s.LayerParameter.DESCRIPTOR.fields_by_name["margin_inner_product_param"].number == 147
    assert load_schema("priv").LayerParameter.DESCRIPTOR.fields_by_name["margin_inner_product_param"].number == 20008
    p = s.message("MarginInnerProductParameter")()
    assert (p.type, p.base, p.gamma, p.power, p.iteration, p.lambda_min, p.axis) == (0, 1, 0, 1, 0, 0, 1)
    assert [v.name for v in p.DESCRIPTOR.enum_types_by_name["MarginType"].values] == [
        "SINGLE", "DOUBLE", "TRIPLE", "QUADRUPLE"]


def test_log_figures_before_the_margin_layer():
    """wy1iu/sphereface#75 (and #103): after relu1_3, the layer before res1_3, 'Memory required for
    data: 1442319360', after res1_3 1618480128 (Top shape: 256 64 56 48), after conv2_1 1706560512
    (256 128 28 24)."""
    log = caffe_log()
    assert (memory_after(log, "relu1_3"), memory_after(log, "res1_3"), memory_after(log, "conv2_1")) == (
        1442319360, 1618480128, 1706560512)


def test_margin_layer_shapes_and_log_line():
    """Reshape (cpp:53-75): top 0 is (M, num_output) for a (M, K) bottom with axis 1; top 1 (lambda)
    is (1); the weight (num_output, K) (cpp:40-43), no bias. Caffe's figure grows by (M*N + 1) * 4."""
    (net,) = build_nets(NET, inputs={"data": (256, 3, 112, 96)})
    fc6 = net.layer("fc6")
    assert list(fc6.top_shapes) == [(M, N), (1,)]
    assert [p.shape for p in fc6.params] == [(N, K)]
    log = caffe_log()
    assert "Top shape: 256 10572 (2706432)\nTop shape: 1 (1)\n" in log
    assert memory_after(log, "fc6") - memory_after(log, "fc5") == (M * N + 1) * 4


def layer_buffers(result, layer):
    """{name: buffer} of what one layer first touches: its own buffers by their Caffe names, blobs by name."""
    return {b["owner"].split(".", 1)[-1] if b["kind"] == "layer buffer" else b["owner"]: b
            for net in result["nets"] for row in net["layers"] if row["name"] == layer for b in row["buffers"]}


@pytest.mark.parametrize("kind,extra", [
    ("SINGLE", []),
    ("DOUBLE", ["cos_theta_quadratic_"]),
    ("TRIPLE", ["cos_theta_quadratic_", "cos_theta_cubic_", "sign_1_", "sign_2_"]),
    ("QUADRUPLE", ["cos_theta_quadratic_", "cos_theta_cubic_", "cos_theta_quartic_", "sign_3_", "sign_4_"]),
])
def test_buffers_by_margin_type(tmp_path, kind, extra):
    """Reshape (cpp:77-105) sizes x_norm_ (M), sign_0_ and cos_theta_ (M x N) and each type's (M x N)
    temporaries; Forward (cpp:130-188, cu:244-300) writes all of them, whatever the type."""
    text = open(NET).read().replace("type: QUADRUPLE", f"type: {kind}")
    path = tmp_path / "net.prototxt"
    path.write_text(text)
    run = run_in_process(path, *INPUT, "--format", "json")
    assert run.returncode == 0, run.stderr
    buffers = layer_buffers(json.loads(run.stdout), "fc6")
    own = {name: b["bytes"] for name, b in buffers.items() if b["kind"] == "layer buffer"}
    assert own == {"x_norm_": M * 4, **{name: M * N * 4 for name in ["cos_theta_", "sign_0_"] + extra}}
    assert all(buffers[name]["touch"] == "forward" for name in own)


def test_lambda_lives_on_the_host_and_the_label_gets_no_diff():
    """Forward writes lambda with top[1]->mutable_cpu_data() in GPU mode too (cu:232); backward
    writes the weight's diff and bottom 0's (cu:341-349), never the label's."""
    result = audit(NET, inputs={"data": (256, 3, 112, 96)})
    (lam,) = [b for b in result.buffers if b.owner == "lambda"]
    assert (lam.kind, lam.device, lam.bytes) == ("top data", "host", 4)
    diffs = {b.owner for b in result.buffers if b.kind == "top diff"}
    assert "fc5" in diffs and "lambda" not in diffs
    assert not any(owner.startswith("label") for owner in diffs)


def test_force_backward_still_gives_the_label_no_diff(tmp_path):
    path = tmp_path / "net.prototxt"
    path.write_text("force_backward: true\n" + open(NET).read())
    result = audit(str(path), inputs={"data": (256, 3, 112, 96)})
    (fc6,) = [n for n in result.nets[0].net.layers if n.name == "fc6"]
    assert list(fc6.bottom_need_backward) == [True, True]  # Net::Init asks (AllowForceBackward is true)
    assert not any(b.owner.startswith("label") for b in result.buffers if b.layer == "fc6" and b.kind == "top diff")


def test_one_top_is_refused(tmp_path):
    """Forward writes top[1] unconditionally (cpp:118, cu:232): with one top Caffe writes past its
    top vector."""
    path = tmp_path / "net.prototxt"
    path.write_text(open(NET).read().replace('  top: "lambda"\n', ""))
    with pytest.raises(InputError, match="writes lambda into a second top"):
        build_nets(str(path), inputs={"data": (256, 3, 112, 96)})


def test_labels_must_match_the_rows(tmp_path):
    """LayerSetUp (cpp:15-20): CHECK_EQ(bottom[0]->num(), bottom[1]->num())."""
    path = tmp_path / "net.prototxt"
    path.write_text("""name: "m"
layer { name: "in" type: "Input" top: "x" top: "label" input_param { shape { dim: 4 dim: 8 } shape { dim: 3 } } }
layer { name: "fc6" type: "MarginInnerProduct" bottom: "x" bottom: "label" top: "fc6" top: "lambda"
        margin_inner_product_param { num_output: 5 } }
""")
    with pytest.raises(InputError, match="one value per sample"):
        build_nets(str(path))


def test_solver_audits_with_its_net_where_caffe_finds_it(tmp_path):
    """The solver names code/sphereface_model.prototxt, relative to where `caffe train` ran (the
    repository's train/ folder): placed there, the solver audits with the data top given."""
    (tmp_path / "code").mkdir()
    shutil.copy(NET, tmp_path / "code" / "sphereface_model.prototxt")
    shutil.copy(SOLVER, tmp_path / "code" / "sphereface_solver.prototxt")
    run = run_in_process("code/sphereface_solver.prototxt", *INPUT, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "with the SGD solver's state" in run.stdout


def test_sample_audits():
    run = run_in_process(SAMPLE, *INPUT, "--caffe-log")
    assert run.returncode == 0, run.stderr
    # fc5's figure (as the log's chain gives it), plus fc6's two tops and the loss (1 float)
    assert memory_after(run.stdout, "softmax_loss") == memory_after(run.stdout, "fc5") + (M * N + 1 + 1) * 4


# --- the fork's measured heap (tests/data/fork_oracle/sphereface, CPU mode, no solver) ---------------

ORACLE = os.path.join(DATA, "fork_oracle", "sphereface")


@pytest.mark.parametrize("kind", ["SINGLE", "QUADRUPLE"])
def test_each_layer_allocates_what_the_fork_allocated(kind):
    """fc6, M = 8 rows, N = 1000 outputs, K = 16: forward 8*1000*4 (fc6) + 4 (lambda) + 8*4 (x_norm_)
    + 32 (the label's data, first read here) + 32,000 per (M, N) temporary: 2 for SINGLE (96,068
    bytes), 7 for QUADRUPLE (256,068); backward the weight's diff 1000*16*4 and fc5's diff 8*16*4
    (64,512). protoaudit gives every layer the fork's bytes, and the total within 0.5%."""
    from protoaudit.memory.buffers import host_objects, net_buffers, runs_backward

    with open(os.path.join(ORACLE, f"margin_{kind}.json")) as f:
        run = json.load(f)
    (net,) = build_nets(os.path.join(ORACLE, f"margin_{kind}.prototxt"), phase="TRAIN")
    buffers = net_buffers(net, mode="cpu", backward=runs_backward(net))
    mine = {}
    for b in buffers:
        mine.setdefault(b.layer, {"forward": 0, "backward": 0, "setup": 0})[b.touch] += b.bytes
    for layer in run["layers"]:
        got = mine.get(layer["name"], {"forward": 0, "backward": 0})
        if layer["type"] in ("Input", "Split"):
            continue  # no buffer of their own (the Split's -128 bytes are C++ objects freed)
        assert (got["forward"], got["backward"]) == (layer["fwd_alloc"], layer["bwd_alloc"]), layer["name"]
    assert run["layers"][5]["fwd_alloc"] == 8 * 1000 * 4 + 4 + 8 * 4 + 8 * 4 + 32000 * (2 if kind == "SINGLE" else 7)
    want = run["heap"]["backward_live"]
    got = sum(b.bytes for b in buffers) + host_objects(net).bytes
    assert abs(got - want) <= 0.005 * want, f"protoaudit {got:,}, the fork {want:,}"
