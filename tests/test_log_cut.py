"""A log whose nets' printed text glog cut (a message ends at 30,000 bytes): the nets are read from
the files the log says they came from, found beside the log, and only when those files hold the
very layers the log set up. Every expected line is the real log's own."""
import os
import shutil

import pytest

import logparse
from conftest import DATA, run_in_process

REPO = os.path.join(DATA, "logs_cut", "res18_ssd")
LOG = os.path.join("job", "res18_coco_SSD_512x512.log")


def _logged():
    with open(os.path.join(REPO, LOG), errors="replace") as f:
        return logparse.parse(f.read())


def test_the_log_names_absolute_paths_of_another_machine():
    """The premise: the solver named /home/.../models/resnet18/own/train.prototxt, which is not
    here; only its last part matches the file kept beside the log."""
    with open(os.path.join(REPO, LOG)) as f:
        head = f.read(4000)
    assert 'train_net: "/home/zhongchong/repos/caffe-ssd/models/resnet18/own/train.prototxt"' in head
    assert not os.path.exists("/home/zhongchong/repos/caffe-ssd/models/resnet18/own/train.prototxt")


def test_a_cut_log_is_reproduced_from_the_net_files_beside_it():
    run = run_in_process(os.path.join(REPO, LOG), "--caffe-log")
    assert run.returncode == 0, run.stderr
    expected, got = _logged(), logparse.parse(run.stdout)
    assert [n.phase for n in expected] == ["TRAIN", "TEST"] == [n.phase for n in got]
    for want, have in zip(expected, got):
        assert logparse.first_difference(want, have) is None, logparse.first_difference(want, have)
    # the log's own totals (net.cpp's last "Memory required for data" of each net)
    assert [n.memory for n in got] == [3695489572, 1232681636]


def test_the_report_says_where_the_net_was_read_from():
    run = run_in_process(os.path.join(REPO, LOG))
    assert run.returncode == 0, run.stderr
    assert "glog cut the TRAIN net's printed text" in run.stdout
    assert os.path.join("job", "train.prototxt") in run.stdout


def _copy(tmp_path, edit=None):
    shutil.copytree(REPO, tmp_path / "repo")
    if edit:
        path = tmp_path / "repo" / "job" / "train.prototxt"
        path.write_text(edit(path.read_text()))
    return str(tmp_path / "repo" / LOG)


def test_a_file_with_other_layers_is_not_taken(tmp_path):
    """The same name, another net (a layer renamed): refused, naming the file and the first layer
    that differs from those the log set up."""
    log = _copy(tmp_path, lambda text: text.replace('name: "conv1"', 'name: "conv1_renamed"', 1))
    run = run_in_process(log, "--caffe-log")
    assert run.returncode == 2
    assert "is not the net Caffe ran" in run.stderr and "'conv1_renamed' where the log set up 'conv1'" in run.stderr
    assert "Traceback" not in run.stderr


def test_without_the_files_the_cut_is_refused_with_both_ways_out(tmp_path):
    log = _copy(tmp_path)
    os.remove(os.path.join(os.path.dirname(log), "train.prototxt"))
    run = run_in_process(log, "--caffe-log")
    assert run.returncode == 2
    assert "glog cut the printed text of the TRAIN net" in run.stderr
    assert "found neither as named nor beside the log" in run.stderr and "--log" in run.stderr


@pytest.mark.parametrize("phase,memory", [("train", 3695489572), ("test", 1232681636)])
def test_one_phase_of_a_cut_log(phase, memory):
    run = run_in_process(os.path.join(REPO, LOG), "--caffe-log", "--phase", phase)
    assert run.returncode == 0, run.stderr
    (got,) = logparse.parse(run.stdout)
    assert got.memory == memory


def test_every_run_of_a_restarted_job_is_reproduced(tmp_path):
    """A job restarted into the same file logs its nets once per run: --caffe-log gives each run's,
    in order, and the audit is of the last. (The real cifar_resnet20.log written twice.)"""
    with open(os.path.join(DATA, "logs", "cifar_resnet20.log"), errors="replace") as f:
        text = f.read()
    log = tmp_path / "restarted.log"
    log.write_text(text + text)
    run = run_in_process(log, "--caffe-log")
    assert run.returncode == 0, run.stderr
    expected, got = logparse.parse(text), logparse.parse(run.stdout)
    assert len(expected) == 2 and len(got) == 4
    for want, have in zip(expected + expected, got):
        assert logparse.first_difference(want, have) is None, logparse.first_difference(want, have)
    audit = run_in_process(log, "--format", "json")
    assert audit.returncode == 0 and audit.stdout.count('"role": "train"') == 1


def test_a_logged_path_of_thousands_of_parts_is_looked_up_in_its_last_few(tmp_path):
    """A log whose solver names a net file by a path of 5,000 folders: refused at once, in one line."""
    with open(os.path.join(REPO, LOG), errors="replace") as f:
        text = f.read()
    deep = "/" + "/".join(["d"] * 5000) + "/train.prototxt"
    log = tmp_path / "deep.log"
    log.write_text(text.replace("/home/zhongchong/repos/caffe-ssd/models/resnet18/own/train.prototxt", deep))
    run = run_in_process(log, "--caffe-log", "--phase", "train", timeout=30)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
