"""What a Caffe solver adds to the train net (protoaudit.memory.solver), against real Caffe and its sources.

Measured: tests/data/solver_oracle (real BVLC Caffe 9b89154, CPU-only build, CPU mode, a malloc
interposer; see tests/data/SOURCES.md): one or two Solver::Step on lenet, cifar10_quick and
CaffeNet at batch 4. GPU figures are derived by hand from BVLC's solvers/*.cu (one fused kernel per
param: SGDUpdate(g, h), NesterovUpdate(g, h), AdaGradUpdate(g, h), RMSPropUpdate(g, h),
AdaDeltaUpdate(g, h, h2), AdamUpdate(g, m, v)) and the CPU paths from solvers/*_solver.cpp.
"""
import csv
import json
import os

import pytest
from google.protobuf import text_format

from conftest import DATA
from protoaudit.audit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.schema import load_schema
from protoaudit.memory.solver import added_to, solver_buffers, solver_options, solver_type_of

ORACLE = os.path.join(DATA, "solver_oracle")
RUNS = list(csv.DictReader(open(os.path.join(ORACLE, "measurements.tsv")), delimiter="\t"))

# lenet_train_test's params, by hand: conv1 20*1*5*5 + 20 = 520; conv2 50*20*5*5 + 50 = 25,050;
# ip1 500*800 + 500 = 400,500 (800 = 50*4*4 after pool2); ip2 10*500 + 10 = 5,010.
LENET_PARAM_BYTES = (520 + 25050 + 400500 + 5010) * 4  # = 1,724,320
LOSSES_BYTES = 4  # Solver::losses_ after one step with average_loss 1: one float, on the host


def record(run):
    with open(os.path.join(ORACLE, "runs", run["run"] + ".json")) as f:
        return json.load(f)


def oracle_net(run):
    name = run["run"].split("__")[0]
    return build_nets(os.path.join(ORACLE, "nets", f"{name}__TRAIN__b4.prototxt"), phase="TRAIN")[0]


def step_bytes(rec):
    """What the first Solver::Step allocated beyond the net, from the step's own records.

    A `__prewarm` run did one plain forward and backward before the step, so the net's blobs exist
    and the step's growth is the solver's alone. In the other runs the step's ForwardBackward is
    the net's first, so its growth also holds the net's first forward/backward allocations, which
    the plain run of the same net measured (plain_fwd_bwd_alloc). (`extra_vs_plain_fwd_bwd` is not
    this figure: it sets two processes' heaps side by side, whose baselines differ.)
    """
    s = rec["solver"]
    grown = s["steps"][0]["live_delta"]
    return grown if "prewarm_fwd_bwd_alloc" in s else grown - s["plain_fwd_bwd_alloc"]


def regularization(rec):
    return text_format.Parse(_solver_text(rec), load_schema("bvlc").SolverParameter()).regularization_type


def _solver_text(rec):
    return "\n".join(line for line in rec["solver_prototxt"].splitlines() if not line.startswith("net:"))


def cpu_step_prediction(run):
    """The buffers a CPU-mode step adds to a net that already ran forward and backward."""
    rec = record(run)
    net = oracle_net(run)
    param = text_format.Parse(_solver_text(rec), load_schema("bvlc").SolverParameter())
    added = solver_buffers(net, solver_type_of(param), mode="cpu", **solver_options(param))
    return added_to(net_buffers(net, mode="cpu", label="train"), added)


# --- against real Caffe ---------------------------------------------------------------------------

@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_prewarm_and_plain_runs_isolate_the_same_step(run):
    rec = record(run)
    s = rec["solver"]
    assert step_bytes(rec) == s["history_attributable"] == int(run["history_attributable"])
    assert s["steps"][1]["live_delta"] == 0  # the first step allocates all the solver will hold
    twin = "prewarm_fwd_bwd_alloc" in s
    assert twin == run["run"].endswith("__prewarm")


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_cpu_step_matches_real_caffe(run):
    want = step_bytes(record(run))
    got = sum(b.bytes for b in cpu_step_prediction(run))
    assert abs(got - want) <= max(0.005 * want, 64 * 1024), f"protoaudit {got:,}, Caffe {want:,}"
    assert got == want  # every figure here is k x the learnable bytes + losses_, to the byte


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_learnable_params_are_the_measured_ones(run):
    net = oracle_net(run)
    diffs = [b for b in solver_buffers(net, "SGD", mode="cpu") if b.kind == "param diff"]
    assert sum(b.bytes for b in diffs) == int(run["learnable_param_bytes"])


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_cpu_multiples_are_the_measured_ones(run):
    history = sum(b.bytes for b in cpu_step_prediction(run) if b.kind == "history" and b.device == "device")
    assert history == int(run["expected_cpu_multiple"]) * int(run["learnable_param_bytes"])


def test_lenet_params_by_hand():
    net = oracle_net(next(r for r in RUNS if r["run"].startswith("lenet")))
    assert sum(b.bytes for b in solver_buffers(net, "SGD") if b.kind == "param diff") == LENET_PARAM_BYTES


# --- code paths, by hand from the sources -----------------------------------------------------------

# Per learnable param, in units of its bytes. CPU (solvers/*_solver.cpp): SGD axpby into history_;
# Nesterov copies history_ to update_ first; AdaGrad and RMSProp square the diff into update_;
# AdaDelta uses history_[i], history_[N+i], update_ and temp_ (delta); Adam m = history_[i],
# v = history_[N+i] and val_t = temp_. GPU: the fused kernels' arguments besides the diff.
# L1 (SGDSolver::Regularize, both paths) writes sign(data) into temp_: +1 unless temp_ is already
# the update's scratch (CPU AdaDelta and Adam).
MULTIPLES = {  # type: (CPU, CPU with L1, GPU, GPU with L1)
    "SGD": (1, 2, 1, 2),
    "Nesterov": (2, 3, 1, 2),
    "AdaGrad": (2, 3, 1, 2),
    "RMSProp": (2, 3, 1, 2),
    "AdaDelta": (4, 4, 2, 3),
    "Adam": (3, 3, 2, 3),
}


@pytest.mark.parametrize("kind", sorted(MULTIPLES))
def test_history_multiples_by_code_path(kind):
    net = oracle_net(next(r for r in RUNS if r["run"].startswith("lenet")))
    got = []
    for mode in ("cpu", "gpu"):
        for reg in ("L2", "L1"):
            buffers = solver_buffers(net, kind, mode=mode, regularization=reg, weight_decay=0.0005)
            history = [b for b in buffers if b.kind == "history" and b.device == "device"]
            got.append(sum(b.bytes for b in history) / LENET_PARAM_BYTES)
            assert all(b.touch == "solver" and not b.per_sample for b in buffers)
    assert tuple(got) == MULTIPLES[kind]


def test_gpu_multiples_agree_with_the_oracle_readme():
    """The README's figures from the .cu sources: SGD/Nesterov/AdaGrad/RMSProp 1, Adam/AdaDelta 2, L1 +1."""
    for run in RUNS:
        l1 = run["run"].split("__")[3].endswith("_L1")
        assert MULTIPLES[run["solver"]][3 if l1 else 2] == int(run["expected_gpu_multiple"])
        assert MULTIPLES[run["solver"]][1 if l1 else 0] == int(run["expected_cpu_multiple"])


def test_gpu_history_lives_on_the_device_and_losses_on_the_host():
    net = oracle_net(next(r for r in RUNS if r["run"].startswith("lenet")))
    buffers = solver_buffers(net, "Adam", mode="gpu", average_loss=20)
    losses = [b for b in buffers if b.owner == "losses_"]
    # 20 push_backs into an empty std::vector<float>: capacity 1, 2, 4, 8, 16, 32 -> 32 * 4 bytes
    assert [(b.bytes, b.device) for b in losses] == [(128, "host")]
    assert {b.device for b in buffers if b is not losses[0]} == {"device"}
    owners = {b.owner for b in buffers if b.layer == "conv1"}
    # lenet has N = 8 learnable params; conv1's weight is learnable param 0
    assert {"conv1.param0", "conv1.param0.history_[0]", "conv1.param0.history_[8]"} <= owners


def test_solver_state_does_not_grow_with_the_batch(tmp_path):
    small = oracle_net(next(r for r in RUNS if r["run"].startswith("lenet")))
    path = os.path.join(ORACLE, "nets", "lenet_train_test__TRAIN__b4.prototxt")
    large = build_nets(path, phase="TRAIN", batch=64)[0]
    sizes = [sum(b.bytes for b in solver_buffers(n, "Adam", mode="gpu")) for n in (small, large)]
    assert sizes[0] == sizes[1]


# --- which params: lr_mult 0, shared, decay -----------------------------------------------------------

def build(tmp_path, text, **options):
    path = tmp_path / "net.prototxt"
    path.write_text(text)
    return build_nets(str(path), phase="TRAIN", **options)[0]


def ip(name, bottom, n, params=""):
    return (f'layer {{ name: "{name}" type: "InnerProduct" bottom: "{bottom}" top: "{name}" {params} '
            f'inner_product_param {{ num_output: {n} }} }}\n')


FROZEN = ('layer { name: "in" type: "Input" top: "data" top: "label" '
          'input_param { shape { dim: 4 dim: 10 } shape { dim: 4 } } }\n'
          + ip("ip1", "data", 6, "param { lr_mult: 0 } param { lr_mult: 0 }") + ip("ip2", "ip1", 3)
          + 'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" }\n')


def test_frozen_params_still_get_a_diff_and_history(tmp_path):
    """lr_mult 0 stops backward from computing ip1's gradient, not the solver: ClearParamDiffs and
    the update walk every learnable param (the update's rate is 0 for them)."""
    net = build(tmp_path, FROZEN)
    plain = net_buffers(net, mode="cpu", label="train")
    added = added_to(plain, solver_buffers(net, "SGD", mode="cpu"))
    # ip1: weight 6x10 = 60, bias 6; ip2: weight 3x6 = 18, bias 3; 87 floats learnable
    assert sorted((b.owner, b.elements) for b in added if b.kind == "param diff") == [
        ("ip1.param0", 60), ("ip1.param1", 6)]
    assert sum(b.elements for b in added if b.kind == "history" and b.owner != "losses_") == 87
    assert sum(b.bytes for b in added) == (66 + 87) * 4 + LOSSES_BYTES  # = 616


def test_batchnorm_statistics_are_learnable_params(tmp_path):
    """BatchNorm's mean, variance and factor are owned params with lr_mult 0 (Net::AppendParam puts
    every owned blob in learnable_params_): the solver gives them a diff and a history."""
    net = build(tmp_path, 'layer { name: "in" type: "Input" top: "data" top: "target" '
                'input_param { shape { dim: 4 dim: 2 dim: 3 dim: 3 } shape { dim: 4 dim: 2 } } }\n'
                'layer { name: "bn" type: "BatchNorm" bottom: "data" top: "bn" }\n' + ip("ip", "bn", 2)
                + 'layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "target" top: "loss" }\n')
    added = added_to(net_buffers(net, mode="gpu", label="train"), solver_buffers(net, "SGD"))
    # mean and variance per channel (2 each), the moving-average factor (1)
    assert sorted((b.owner, b.elements) for b in added if b.kind == "param diff") == [
        ("bn.param0", 2), ("bn.param1", 2), ("bn.param2", 1)]


SHARED = ('layer { name: "in" type: "Input" top: "data" top: "target" '
          'input_param { shape { dim: 4 dim: 10 } shape { dim: 4 dim: 10 } } }\n'
          + ip("ipa", "data", 10, 'param { name: "w" } param { name: "b" }')
          + ip("ipb", "ipa", 10, 'param { name: "w" {decay} } param { name: "b" }')
          + 'layer { name: "loss" type: "EuclideanLoss" bottom: "ipb" bottom: "target" top: "loss" }\n')


def test_shared_params_have_one_history(tmp_path):
    net = build(tmp_path, SHARED.replace("{decay}", ""))
    buffers = solver_buffers(net, "SGD", mode="gpu")
    # the owner's weight 10x10 and bias 10, once; ipb's are the same blobs
    assert sorted((b.owner, b.elements) for b in buffers if b.kind == "history" and b.owner != "losses_") == [
        ("ipa.param0.history_[0]", 100), ("ipa.param1.history_[1]", 10)]


def test_l1_scratch_only_for_decayed_params(tmp_path):
    """Regularize does nothing when weight_decay x decay_mult is 0. A shared param's decay_mult is
    the first one given, here by the sharer ipb (Net::AppendParam), so the weight is not decayed."""
    net = build(tmp_path, SHARED.replace("{decay}", "decay_mult: 0"))

    def temps(**options):
        return sorted(b.owner for b in solver_buffers(net, "SGD", mode="cpu", regularization="L1", **options)
                      if ".temp_" in b.owner)

    assert temps(weight_decay=0.0005) == ["ipa.param1.temp_[1]"]
    assert temps(weight_decay=0) == []


def test_unknown_regularization_fails_only_when_caffe_would_read_it(tmp_path):
    net = build(tmp_path, FROZEN)
    with pytest.raises(InputError, match="regularization"):
        solver_buffers(net, "SGD", regularization="L3", weight_decay=0.0005)
    assert solver_buffers(net, "SGD", regularization="L3", weight_decay=0)  # Regularize skips every param


# --- forks ----------------------------------------------------------------------------------------

SEGNET_NET = ('input: "data" input_shape { dim: 4 dim: 10 }\ninput: "target" input_shape { dim: 4 dim: 10 }\n'
              + ip("ipa", "data", 10, 'param { name: "w" } param { name: "b" }')
              + ip("ipb", "ipa", 10, 'param { name: "w" } param { name: "b" }')
              + 'layer { name: "loss" type: "EuclideanLoss" bottom: "ipb" bottom: "target" top: "loss" }\n')


def test_segnet_fork_walks_every_param_and_has_no_fused_kernels(tmp_path):
    """caffe-segnet's solver.cpp: PreSolve and the update loop go over net_->params() (a shared blob
    has its own diff there, ShareData only), and its GPU branch calls the CPU sequence's GPU twins
    (Nesterov: caffe_gpu_copy of history_ into update_ first)."""
    net = build(tmp_path, SEGNET_NET, schema="segnet")
    buffers = solver_buffers(net, "Nesterov", mode="gpu")
    history = sorted(b.owner for b in buffers if b.kind == "history" and b.owner != "losses_")
    assert history == ["ipa.param0.history_[0]", "ipa.param0.update_[0]", "ipa.param1.history_[1]",
                       "ipa.param1.update_[1]", "ipb.param0.history_[2]", "ipb.param0.update_[2]",
                       "ipb.param1.history_[3]", "ipb.param1.update_[3]"]
    with pytest.raises(InputError, match="no Adam solver"):
        solver_buffers(net, "Adam")


# --- reading the solver's type ----------------------------------------------------------------------

def solver(text, schema="bvlc"):
    return text_format.Parse(text, load_schema(schema).SolverParameter())


@pytest.mark.parametrize("text,kind", [
    ("", "SGD"),
    ('type: "Adam"', "Adam"),
    ('type: "RMSProp"', "RMSProp"),
    ("solver_type: ADADELTA", "AdaDelta"),
    ("solver_type: NESTEROV", "Nesterov"),
    ("solver_type: SGD", "SGD"),
])
def test_type_string_or_deprecated_enum(text, kind):
    assert solver_type_of(solver(text)) == kind


def test_fork_schema_without_a_type_string():
    assert solver_type_of(solver("solver_type: ADAGRAD", "segnet")) == "AdaGrad"
    assert solver_type_of(solver("", "segnet")) == "SGD"


def test_bad_types_are_input_errors():
    with pytest.raises(InputError, match="did you mean 'Adam'"):
        solver_type_of(solver('type: "adam"'))  # the registry's lookup is case-sensitive
    with pytest.raises(InputError, match="both"):
        solver_type_of(solver('type: "Adam" solver_type: ADAM'))  # UpgradeSolverType's CHECK
    with pytest.raises(InputError, match="unknown solver type 'Lion'"):
        solver_type_of(None, "Lion")
    with pytest.raises(InputError, match="unknown solver type"):
        solver_buffers(build_nets(os.path.join(ORACLE, "nets", "lenet_train_test__TRAIN__b4.prototxt"),
                                  phase="TRAIN")[0], "Momentum")
    assert solver_type_of(solver('type: "Adam"'), "SGD") == "SGD"  # a given type wins


def test_a_solver_files_unknown_type_names_the_file(tmp_path):
    """The refusal is one line that names the solver file, as every bad input's does."""
    from conftest import run_in_process

    net = os.path.join(ORACLE, "nets", "lenet_train_test__TRAIN__b4.prototxt")
    (tmp_path / "solver.prototxt").write_text(f'net: "{net}"\ntype: "HDF5Data"\n')
    run = run_in_process("solver.prototxt", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.startswith("protoaudit: solver.prototxt: unknown solver type 'HDF5Data'"), run.stderr
    assert len(run.stderr.splitlines()) == 1


def test_solver_options_and_constructor_checks():
    assert solver_options(solver('regularization_type: "L1" weight_decay: 0.001 average_loss: 10')) == {
        "regularization": "L1", "weight_decay": pytest.approx(0.001), "average_loss": 10}
    assert solver_options(solver(""))["weight_decay"] == 0  # Caffe's default: no decay at all
    with pytest.raises(InputError, match="momentum"):
        solver_options(solver('type: "AdaGrad" momentum: 0.9'))
    with pytest.raises(InputError, match="average_loss"):
        solver_options(solver("average_loss: 0"))
    with pytest.raises(InputError, match="rms_decay"):
        solver_options(solver('type: "RMSProp" rms_decay: 1'))
