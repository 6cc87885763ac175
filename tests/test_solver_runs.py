"""A solver's test nets are built, but run only if Solver::Step ever tests (solver.cpp: every
test_interval iterations, and at iteration 0 only with test_initialization)."""
import os
import shutil

from protoaudit.audit import audit

from conftest import DATA

SOLVER = """net: "segnet_basic_train.prototxt"
test_initialization: false
test_iter: 1
test_interval: {interval}
base_lr: 0.1
max_iter: 10000
"""


def _solver(tmp_path, interval):
    shutil.copy(os.path.join(DATA, "nets", "segnet_basic_train.prototxt"), tmp_path)
    path = tmp_path / "solver.prototxt"
    path.write_text(SOLVER.format(interval=interval))
    return str(path)


def _test_net(result):
    return next(n for n in result.nets if n.role == "test")


def test_a_test_net_the_solver_never_runs_holds_only_its_setup(tmp_path):
    # SegNet-Tutorial's own solver: test_interval 10,000,000 > max_iter 10,000, no initial test
    never = audit(_solver(tmp_path, 10000000), inputs={"data": (1, 3, 360, 480), "label": (1, 1, 360, 480)},
                  context=0)
    test = _test_net(never)
    assert not test.runs
    assert {b.touch for b in test.buffers} == {"setup"}
    assert not any(b.kind == "top data" for b in test.buffers)


def test_a_test_net_run_every_1000_iterations_holds_its_forward_pass(tmp_path):
    tested = audit(_solver(tmp_path, 1000), inputs={"data": (1, 3, 360, 480), "label": (1, 1, 360, 480)},
                   context=0)
    test = _test_net(tested)
    assert test.runs and test.forward_only
    conv1 = [b for b in test.buffers if b.owner == "conv1" and b.kind == "top data"]
    assert conv1 and conv1[0].elements == 1 * 64 * 360 * 480  # conv1 keeps 360x480 (7x7, pad 3)
