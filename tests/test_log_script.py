"""A Caffe log that a training script wrote around Caffe's own lines: thousands of lines of its own
output before Caffe's first, then its worker processes building their nets at once, their lines
interleaved. Every expected line is the real log's own (tests/data/logs_script, SOURCES.md)."""
import json
import os

import pytest

import logparse
from conftest import DATA, run_in_process
from protoaudit.read import glog
from protoaudit.read.glog import GLOG, HEAD_BYTES, is_log_file

LOG = os.path.join(DATA, "logs_script", "1130.log")


def _text():
    with open(LOG, errors="replace") as f:
        return f.read()


def test_the_log_starts_with_the_scripts_output_and_interleaves_its_workers():
    """The premise: no glog line in the first 200 lines nor the first 64 KiB (a look at the head
    finds none), and a worker's net is begun while another's is still being set up."""
    lines = _text().splitlines()
    first = next(k for k, line in enumerate(lines) if GLOG.match(line))
    assert first == 4184 and lines[0] == "Generate Data for pNet"
    assert len("\n".join(lines[:first]).encode()) > HEAD_BYTES
    threads = [GLOG.match(line).group(2) for line in lines if GLOG.match(line) and "net.cpp" in line]
    # thread 11664 logs on after 11665 began its net
    assert threads.index("11665") < len(threads) - 1 - threads[::-1].index("11664")


def test_every_net_of_every_process_is_reproduced():
    """The solver's train and test nets, then each of four workers' deploy net, line for line as
    each thread logged it."""
    run = run_in_process(LOG, "--caffe-log")
    assert run.returncode == 0, run.stderr
    expected, got = logparse.parse_by_thread(_text()), logparse.parse(run.stdout)
    headers = [line.split(": ")[0] for line in run.stdout.splitlines() if line.startswith("Net ")]
    assert [n.phase for n in expected] == ["TRAIN"] + ["TEST"] * 5
    assert headers == [f"Net pNet, phase {n.phase}" for n in expected]
    assert len(got) == len(expected)
    for want, have in zip(expected, got):
        assert logparse.first_difference(want, have) is None, logparse.first_difference(want, have)
    # the workers' nets: one 1x3x12x12 input each (the log's "Top shape: 1 3 12 12 (432)")
    assert [n.layers[0].shapes for n in got[2:]] == [[(1, 3, 12, 12)]] * 4


def test_the_audit_is_of_the_last_process_alone():
    """The last net begun is a worker's, a process of its own with no solver: its one net is
    audited, not added to the solver's run."""
    run = run_in_process(LOG, "--format", "json")
    assert run.returncode == 0, run.stderr
    nets = json.loads(run.stdout)["nets"]
    assert [(n["role"], n["phase"], n["batch"]) for n in nets] == [("net", "TEST", 1)]


def test_a_prototxt_is_not_read_past_its_head(tmp_path, monkeypatch):
    """A file that starts as a prototxt is one, whatever comes further on: it is never scanned for
    Caffe's lines, and is read as a prototxt (refused at the line where the log's text begins)."""
    path = tmp_path / "net.prototxt"
    path.write_text('name: "pNet"\n' + _text())
    with monkeypatch.context() as m:
        m.setattr(glog, "_initialises_further", lambda *a: pytest.fail("a prototxt was scanned past its head"))
        assert not is_log_file(str(path))
    run = run_in_process(path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert f"{path}:2: " in run.stderr


def test_a_scripts_output_without_caffes_lines_is_no_log(tmp_path):
    """The script's output alone (the log up to Caffe's first line) holds no initialisation: it is
    not a log, and the prototxt reader refuses it in one line."""
    lines = _text().splitlines(keepends=True)
    path = tmp_path / "out.log"
    path.write_text("".join(lines[:4184]))
    assert not is_log_file(str(path))
    run = run_in_process(path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
