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


# A repository's layout (huangzehao/caffe-vdsr's Train/): the solver names its net from the Caffe
# root, where `caffe train` ran (`net: "examples/VDSR/VDSR_net.prototxt"`), but the repository keeps
# the net beside the solver. The net is then found by the last parts of that path, longest first,
# beside the solver and in each folder above it, and the report says which file it read and why.
ROOT_RELATIVE = 'net: "examples/tiny/tiny.prototxt"\ntest_iter: 1\ntest_interval: 10\nbase_lr: 0.01\n'


def repository(tmp_path, *nets):
    """repo/Train/solver.prototxt naming examples/tiny/tiny.prototxt, with the net at each of `nets`
    (paths under repo/); and a folder to run from that is not the Caffe root."""
    (tmp_path / "repo" / "Train").mkdir(parents=True)
    (tmp_path / "repo" / "Train" / "solver.prototxt").write_text(ROOT_RELATIVE)
    for net in nets:
        (tmp_path / "repo" / net).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "repo" / net).write_text(NET)
    (tmp_path / "elsewhere").mkdir()
    return tmp_path / "repo" / "Train" / "solver.prototxt"


def test_a_root_relative_net_beside_the_solver_is_read_and_said(tmp_path):
    solver = repository(tmp_path, "Train/tiny.prototxt")
    run = run_in_process(solver, "--format", "json", cwd=tmp_path / "elsewhere")
    beside = str(tmp_path / "repo" / "Train" / "tiny.prototxt")
    assert net_files(run) == [beside, beside]  # the train net and the test net: one `net:` for both
    said = [a for a in json.loads(run.stdout)["assumptions"] if a["layer"] == "(file)"]
    assert [a["net"] for a in said] == ["train", "test"]
    assert "'examples/tiny/tiny.prototxt'" in said[0]["assumption"] and beside in said[0]["assumption"]
    assert "--root" in said[0]["override"]


def test_the_longest_last_parts_win(tmp_path):
    # tiny/tiny.prototxt above the solver (two parts of the path) before tiny.prototxt beside it (one)
    solver = repository(tmp_path, "Train/tiny.prototxt", "tiny/tiny.prototxt")
    run = run_in_process(solver, "--phase", "train", "--format", "json", cwd=tmp_path / "elsewhere")
    assert net_files(run) == [str(tmp_path / "repo" / "tiny" / "tiny.prototxt")]


def test_a_file_name_alone_is_looked_for_beside_the_solver_only(tmp_path):
    # repo/tiny.prototxt shares only the file name, and lies above the solver: some other net
    solver = repository(tmp_path, "tiny.prototxt")
    run = run_in_process(solver, cwd=tmp_path / "elsewhere")
    assert run.returncode == 2 and "was not found" in run.stderr


def test_a_net_found_as_named_is_no_assumption(tmp_path):
    root = caffe_tree(tmp_path)
    run = run_in_process("examples/tiny/solver.prototxt", "--format", "json", cwd=root)
    assert net_files(run) == ["examples/tiny/tiny.prototxt"]
    assert [a for a in json.loads(run.stdout)["assumptions"] if a["layer"] == "(file)"] == []


def test_a_root_relative_net_found_nowhere_names_its_last_parts_too(tmp_path):
    solver = repository(tmp_path, "Train/other.prototxt")
    run = run_in_process(solver, cwd=tmp_path / "elsewhere")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    (line,) = run.stderr.splitlines()
    assert f"protoaudit: {solver}:1: the net file 'examples/tiny/tiny.prototxt' named in the solver was not found" in line
    assert ("and the folders above the solver's; then tiny/tiny.prototxt beside the solver and above it, "
            "tiny.prototxt beside it)") in line
