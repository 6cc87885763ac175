"""A log whose run printed its net and died before setting up its first layer (a dataset it could not
open): the printed net is the net Caffe ran, so it is audited as its file would be, and the report says
that the log set up none of it and where the run died. Tried as a new user would on two real logs of
such runs (an LMDB missing; a log cut at the data layer). The log here is the first 60 lines of
Caffe's own brewing-logreg run (tests/data/logs, through "Creating layer data") and one fatal line of
hdf5_data_layer.cpp, as Caffe prints it where the source list names no file."""
import os

from conftest import DATA, run_in_process

REAL = os.path.join(DATA, "logs", "bvlc_nb_brewing_logreg_1.log")
FATAL = "F0224 00:32:03.393000   655 hdf5_data_layer.cpp:84] Check failed: !this->hdf_filenames_.empty() \n"


def _log(tmp_path, lines, fatal=FATAL):
    with open(REAL) as f:
        head = f.readlines()[:lines]
    path = tmp_path / "died.log"
    path.write_text("".join(head) + fatal)
    return path


def test_the_printed_net_of_a_run_that_died_at_its_data_layer_is_audited(tmp_path):
    path = _log(tmp_path, 60)
    run = run_in_process(path)
    assert run.returncode == 0, run.stderr
    # the printed net's one InnerProduct: num_output 2 on the 4 features of the notebook's data, 4 x 2 + 2
    assert "Params: 10 (trainable 10" in run.stdout
    assert "the log prints this net but sets up none of its layers (it stops creating layer 'data')" in run.stdout
    assert "died at line 61 (Check failed: !this->hdf_filenames_.empty())" in run.stdout


def test_a_log_with_no_printed_net_is_still_refused(tmp_path):
    path = _log(tmp_path, 18)  # the solver's lines only
    run = run_in_process(path)
    assert run.returncode == 2
    assert "the log holds no net Caffe set up" in run.stderr


def test_a_log_of_a_cpu_run_is_audited_in_cpu_mode(tmp_path):
    """caffe.cpp prints "Use CPU." before a CPU run's solver (the brewing notebook's run, line 1): the
    log's nets are audited as host memory, said; --mode gpu audits the device (tried as a new user
    would: a `caffe test` log of a CPU run was audited as 2.16 GiB of GPU memory)."""
    run = run_in_process(REAL, "--format", "json")
    assert run.returncode == 0, run.stderr
    report = __import__("json").loads(run.stdout)
    assert report["mode"] == "cpu"
    assert any("the log's run used the CPU ('Use CPU.', line 1)" in a["assumption"] for a in report["assumptions"])
    gpu = __import__("json").loads(run_in_process(REAL, "--format", "json", "--mode", "gpu").stdout)
    assert gpu["mode"] == "gpu" and not any("used the CPU" in a["assumption"] for a in gpu["assumptions"])
