"""A solver's `net:` path, found as `caffe train` finds it: against the folder Caffe runs in (the
Caffe root, in every BVLC example: `net: "examples/mnist/lenet_train_test.prototxt"`), then
--root, then the solver's folder and the folders above it; the report names the file it read."""
import json
import os

from conftest import run_in_process

NET = """name: "tiny"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 4 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "ip" top: "loss" }
"""
SOLVER = 'net: "examples/tiny/tiny.prototxt"\nbase_lr: 0.01\nmax_iter: 10\n'


def caffe_tree(tmp_path):
    """A Caffe checkout's layout: the solver and its net under examples/tiny/."""
    folder = tmp_path / "caffe" / "examples" / "tiny"
    folder.mkdir(parents=True)
    (folder / "tiny.prototxt").write_text(NET)
    (folder / "solver.prototxt").write_text(SOLVER)
    return tmp_path / "caffe"


def net_files(run):
    assert run.returncode == 0, run.stderr
    return [n["file"] for n in json.loads(run.stdout)["nets"]]


def test_from_the_caffe_root_as_caffe_train_runs(tmp_path):
    root = caffe_tree(tmp_path)
    run = run_in_process("examples/tiny/solver.prototxt", "--format", "json", cwd=root)
    assert net_files(run) == ["examples/tiny/tiny.prototxt"]


def test_from_elsewhere_the_folders_above_the_solver_are_tried(tmp_path):
    root = caffe_tree(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = run_in_process(root / "examples" / "tiny" / "solver.prototxt", "--format", "json", cwd=elsewhere)
    assert net_files(run) == [str(root / "examples" / "tiny" / "tiny.prototxt")]


def test_root_names_the_caffe_root(tmp_path):
    root = caffe_tree(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    solver = elsewhere / "solver.prototxt"
    solver.write_text(SOLVER)
    run = run_in_process(solver, "--root", root, "--format", "json", cwd=elsewhere)
    assert net_files(run) == [str(root / "examples" / "tiny" / "tiny.prototxt")]


def test_the_text_report_names_the_net_file(tmp_path):
    root = caffe_tree(tmp_path)
    run = run_in_process("examples/tiny/solver.prototxt", cwd=root)
    assert run.returncode == 0, run.stderr
    assert "the TRAIN net 'tiny' (from examples/tiny/tiny.prototxt, batch 2, forward and backward)" in run.stdout


def test_a_net_found_nowhere_names_the_places_tried(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "solver.prototxt").write_text(SOLVER)
    run = run_in_process("solver.prototxt", cwd=elsewhere)
    assert run.returncode == 2
    (line,) = run.stderr.splitlines()
    assert line.startswith("protoaudit: solver.prototxt:1: the net file 'examples/tiny/tiny.prototxt' named in "
                           "the solver was not found (tried examples/tiny/tiny.prototxt, ")
    assert os.path.join(str(elsewhere), "examples/tiny/tiny.prototxt") in line
    assert line.endswith("(run protoaudit from the folder caffe train ran in, or give it with --root DIR)")
