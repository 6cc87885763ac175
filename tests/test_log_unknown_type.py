"""A Caffe log whose net has layer types protoaudit has no rule for (K1_EuclideanLoss and
K2_EuclideanLoss of whksmo/joint-hashing): Caffe's log records what it set up for them, so their top
shapes are taken from it and the net is audited around them. Every expected line is the real log's
own; a net file given alone with such a type is still refused. SSDH's Caffe (the fork ssdh) has rules
for both types now, so the tests of what a layer without a rule gets read the files as BVLC Caffe's
(--fork bvlc, which has none)."""
import html
import json
import os
import re

import pytest

import logparse
from conftest import DATA, run_in_process

FOLDER = os.path.join(DATA, "logs_unknown_type", "bone-finetune")
LOG = os.path.join(FOLDER, "log.txt")
NET = os.path.join(FOLDER, "train_val_bone.prototxt")
UNKNOWN = {"loss_1": "K1_EuclideanLoss", "loss_2": "K2_EuclideanLoss"}
BVLC = ("--fork", "bvlc")  # a Caffe with no rule for them


def _text():
    with open(LOG, errors="replace") as f:
        return f.read()


def test_the_log_holds_types_protoaudit_has_no_rule_for():
    """The premise: both types are in the printed nets, and Caffe set each up with a loss top."""
    nets = logparse.parse(_text())
    assert [n.phase for n in nets] == ["TRAIN", "TEST"]
    for net in nets:
        for name in UNKNOWN:
            assert net.layer(name).shapes == [()]  # "Top shape: (1)": LossLayer's 0-axis top
    assert all(f'type: "{t}"' in _text() for t in UNKNOWN.values())


def _loss_weights(text):
    """The "with loss weight W" lines, in order, without glog's prefix."""
    return [line.split("] ", 1)[-1].strip() for line in text.splitlines() if "with loss weight" in line]


def test_caffe_log_reproduces_every_line_of_the_log():
    """Top shapes and each cumulative Memory required for data, layer by layer, for both nets:
    the unknown layers' from the log, every other layer's from protoaudit's rules."""
    run = run_in_process(LOG, "--caffe-log")
    assert run.returncode == 0, run.stderr
    expected, got = logparse.parse(_text()), logparse.parse(run.stdout)
    assert [n.phase for n in got] == ["TRAIN", "TEST"]
    for want, have in zip(expected, got):
        assert logparse.first_difference(want, have) is None, logparse.first_difference(want, have)
        assert [layer.name for layer in have.layers] == [layer.name for layer in want.layers]
    # the log's own totals (net.cpp's last "Memory required for data" of each net)
    assert [n.memory for n in got] == [n.memory for n in expected] == [219568652, 343078416]
    # and the loss weights Caffe printed under each top (net.cpp:132)
    assert _loss_weights(run.stdout) == _loss_weights(_text())


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "csv", "html"])
def test_the_audit_lists_each_such_layer_as_an_assumption(fmt):
    run = run_in_process(LOG, "--format", fmt, *BVLC)
    assert run.returncode == 0, run.stderr
    out = html.unescape(run.stdout)
    for kind in UNKNOWN.values():
        assert f"type {kind}, no rule in protoaudit: its top shapes are Caffe's own, from the log" in out
        assert out.count(f"type {kind}, no rule") == 2  # the train net's and the test net's
    assert "its parameters and internal buffers are not counted" in out
    assert "--input" in out  # how to declare its tops otherwise


def test_the_assumption_and_the_gap_in_json():
    run = run_in_process(LOG, "--format", "json", *BVLC)
    report = json.loads(run.stdout)
    said = [(a["net"], a["layer"]) for a in report["assumptions"] if "no rule in protoaudit" in a["assumption"]]
    assert sorted(said) == sorted((net, name) for net in ("train", "test") for name in UNKNOWN)
    assert {(g["net"], g["layer"], g["type"]) for g in report["gaps"]} == {
        (net, name, kind) for net in ("train", "test") for name, kind in UNKNOWN.items()}
    assert all("--input 'loss: forcing-binary=1'" in a["override"] for a in report["assumptions"]
               if a["layer"] == "loss_1")


def _edited(tmp_path, edit):
    path = tmp_path / "log.txt"
    path.write_text(edit(_text()))
    return str(path)


def test_a_loss_weight_only_the_log_gives_is_taken(tmp_path):
    """A LossLayer's default weight (1) is in no prototxt: with loss_weight left out of the printed
    layers, the log's `with loss weight 1` lines (what Caffe prints for that default) still make them
    losses, so the backward pass, and the total, are those of the real log."""
    edited = _edited(tmp_path, lambda text: re.sub(
        r'(  type: "K[12]_EuclideanLoss"\n(?:  .*\n)*?)  loss_weight: 1\n', r"\1", text))
    with open(edited) as f:
        assert f.read().count("loss_weight: 1") == 2  # only SoftmaxWithLoss's, in each net
    real, without = (json.loads(run_in_process(p, "--format", "json").stdout) for p in (LOG, edited))
    assert without["total_bytes"] == real["total_bytes"]
    run = run_in_process(edited, "--caffe-log", "--phase", "train")
    lines = run.stdout.splitlines()
    at = lines.index("Setting up loss_1")
    assert lines[at + 1:at + 3] == ["Top shape: (1)", "    with loss weight 1"]


def test_param_blocks_say_its_weights_are_not_counted(tmp_path):
    """A layer of an unknown type with param { } blocks may hold weights, which Caffe's log does
    not show: the audit goes on (their blobs are unknown, not absent) and says they are left out."""
    edited = _edited(tmp_path, lambda text: text.replace(
        '  name: "loss_1"\n  type: "K1_EuclideanLoss"\n', '  name: "loss_1"\n  type: "K1_EuclideanLoss"\n'
        '  param {\n    lr_mult: 1\n  }\n'))
    run = run_in_process(edited, *BVLC)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("it has 1 param { } block: its weights are not counted") == 2


def test_without_its_log_the_unknown_losses_are_taken_as_caffes_loss_layers(tmp_path):
    """Without Caffe's log, nothing says what the layers make; no layer reads their tops and their
    types are named like losses, so each is taken as a LossLayer, a scalar top of loss weight 1, and
    said so (in the train and the test net): what the log beside it shows them to be ("Top shape: (1)",
    "with loss weight 1")."""
    import shutil

    alone = shutil.copy(NET, tmp_path)
    run = run_in_process(alone, "--caffe-log", *BVLC)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    for name in UNKNOWN:
        at = lines.index(f"Setting up {name}")
        assert lines[at + 1:at + 3] == ["Top shape: (1)", "    with loss weight 1"]
    run = run_in_process(alone, *BVLC)
    assert run.stdout.count("no layer reads its tops") == 4 and "taken as Caffe's LossLayer" in run.stdout


def test_a_net_file_with_its_log_given_or_beside_is_sized_as_the_log_set_it_up(tmp_path):
    """With the log given (--log) or beside the net in its folder, the unknown layers are Caffe's
    own: loss_1 and loss_2 each make the 0-axis loss top the log shows ("Top shape: (1)")."""
    import shutil

    alone = shutil.copy(NET, tmp_path)
    for path, extra in ((NET, ()), (alone, ("--log", LOG))):
        run = run_in_process(path, "--phase", "train", "--caffe-log", *extra)
        assert run.returncode == 0, (extra, run.stderr)
        (got,) = logparse.parse(run.stdout)
        for name in UNKNOWN:
            assert got.layer(name).shapes == [()]
