"""A log whose solver's type is a known one in other case ("sgd", a Windows SSD build's run): Caffe
prints the solver in Solver::Init, which the registry's creator calls only once it has made the
solver, so that Caffe took the type. BVLC's registry is case-sensitive (solver_factory.hpp:
`CHECK_EQ(registry.count(type), 1) << "Unknown solver type: "`): a solver file alone is still
refused so, with the name to write. Expected lines are the real log's."""
import os

import logparse
from conftest import DATA, run_in_process

LOG = os.path.join(DATA, "logs_solver_case", "sem_ssd.log")


def test_the_premise_the_log_printed_the_solver_with_its_type():
    with open(LOG, errors="replace") as f:
        text = f.read()
    assert 'type: "sgd"' in text and "Solver scaffolding done." in text


def test_the_run_is_audited_with_sgd_and_says_so():
    run = run_in_process(LOG)
    assert run.returncode == 0, run.stderr
    assert "with the SGD solver's state" in run.stdout
    assert "the solver's type 'sgd' is read as SGD: the log's Caffe created it" in run.stdout


def test_its_lines_are_reproduced():
    run = run_in_process(LOG, "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(LOG, errors="replace") as f:
        (expected,) = logparse.parse(f.read())
    (got,) = logparse.parse(run.stdout)
    assert logparse.first_difference(expected, got) is None, logparse.first_difference(expected, got)


def test_a_solver_file_with_it_is_refused_naming_the_type(tmp_path):
    (tmp_path / "net.prototxt").write_text('layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 '
                                           'dim: 3 } } }\nlayer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" '
                                           'inner_product_param { num_output: 2 } }\n')
    (tmp_path / "solver.prototxt").write_text('net: "net.prototxt"\ntype: "sgd"\nbase_lr: 0.01\n')
    run = run_in_process(str(tmp_path / "solver.prototxt"))
    assert run.returncode == 2 and "unknown solver type 'sgd' (did you mean 'SGD'?" in run.stderr
