"""DAVSOD's ConvLSTM Caffe against its own real heap (tests/data/fork_oracle/davsod).

The measured facts are real DengPingFan/DAVSOD 769c91e mycaffe-convlstm, built CPU-only and run in CPU
mode under the oracle kit's exact heap interposer (the folder's README says how). The two ConvLSTM nets
made there are held to the byte after construction, after one forward and after one backward, as
tests/test_recurrent_memory.py holds BVLC's RNN and LSTM: the unrolled net's C++ objects
(protoaudit/memory/host.py, sized as an LSTM's), ConvLSTMUnit's five-axis X_acts_ and the layer's
in_shape_ included. DAVSOD's published train net (at 97x97) is held to Caffe's own figure exactly, to
every layer's forward and backward bytes, and in total within 64 bytes.
"""
import csv
import functools
import json
import os

import pytest

from conftest import DATA
from protoaudit.audit import build_nets
from protoaudit.memory.buffers import net_buffers, runs_backward
from protoaudit.memory.host import SYNCED, host_bytes

HERE = os.path.join(DATA, "fork_oracle", "davsod")
RUNS = list(csv.DictReader(open(os.path.join(HERE, "measurements.tsv")), delimiter="\t"))
EXACT = ("convlstm_b2", "convlstm_b2_exposed")
STAGES = ("init_live", "forward_live", "backward_live")


def built(run):
    return _built(run["file"], run["phase"])


@functools.cache
def _built(path, phase):
    return build_nets(os.path.join(HERE, path), phase=phase, schema="davsod")[0]


def measured(run):
    with open(os.path.join(HERE, "runs", run["run"] + ".json")) as f:
        return json.load(f)


def predicted(net):
    """protoaudit's bytes after setup, after one forward and after one backward, as measure.py runs them."""
    backward = runs_backward(net)
    buffers = net_buffers(net, mode="cpu", backward=backward)
    setup = sum(b.bytes for b in buffers if b.touch == "setup")
    forward = sum(b.bytes for b in buffers if b.touch == "forward")
    return {"init_live": host_bytes(net, forward=False) + setup,
            "forward_live": host_bytes(net, backward=False) + setup + forward,
            "backward_live": host_bytes(net, backward=backward) + sum(b.bytes for b in buffers)}


def test_the_runs_are_those_the_readme_lists():
    assert [r["run"] for r in RUNS] == ["convlstm_b2", "convlstm_b2_exposed", "davsod_train_97"]
    readme = open(os.path.join(HERE, "README.md")).read()
    assert "769c91e" in readme and all(r["run"] in readme for r in RUNS)


@pytest.mark.parametrize("run", [r for r in RUNS if r["run"] in EXACT], ids=EXACT)
def test_a_convlstm_to_the_byte(run):
    """One ConvLSTM (3 timesteps of 2 streams of 4x6x6, 5 outputs, kernel 3), with and without
    expose_hidden: every stage to the byte, and Caffe's own figure."""
    net = built(run)
    assert net.memory_required_for_data == int(run["memory_required_for_data"])
    assert predicted(net) == {stage: int(run[stage]) for stage in STAGES}


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_each_layers_first_forward_and_backward(run):
    """Caffe's per-layer figures: what each layer's first forward and first backward left allocated.
    Split layers only free host objects (protoaudit counts them in its C++-object term). A forward is
    less the SyncedMemory objects it frees by sharing: a ConvLSTM's unrolled net's Splits', with
    expose_hidden its exposed tops', and, for a ConvLSTM or a Reshape, one per bottom that is an outer
    Split's top (shared at setup, the old storage lives until this layer shares it again)."""
    net = built(run)
    buffers = net_buffers(net, mode="cpu", backward=runs_backward(net))
    for logged in measured(run)["layers"]:
        if logged["type"] == "Split":
            continue
        node = net.layer(logged["name"])
        mine = [b for b in buffers if b.layer == node.name]
        frees = node.impl.inner_objects(node)[1] if logged["type"] == "ConvLSTM" else 0
        if logged["type"] in ("ConvLSTM", "Reshape"):
            frees += sum(1 for j in node.bottoms if net.layers[net.blobs[j].producer].is_split)
        forward = sum(b.bytes for b in mine if b.touch == "forward") - SYNCED * frees
        backward = sum(b.bytes for b in mine if b.touch == "backward")
        assert (forward, backward) == (logged["fwd_alloc"], logged["bwd_alloc"]), logged["name"]


def test_the_davsod_train_net_at_97():
    """tests/data/davsod/train.prototxt with its data layers as Input and 97x97 frames (the README
    says what was changed): four ConvLSTMs exposing their states (the same DummyData blob as h_0 and
    c_0 of each), 60 of PSPNet's BN, two Interps. Caffe's figure exactly; the total within 64 bytes at
    each stage, with each BN layer's members (32 bytes of scalars, seven 4-axis Blobs, the ParamSpecs its
    setup appends: 2,416 bytes with no `param`, 2,160 with four, as one-layer probes of this Caffe
    showed) and each Interp's ten ints counted; before them, 145,032 bytes short."""
    (run,) = [r for r in RUNS if r["run"] == "davsod_train_97"]
    net = built(run)
    assert net.memory_required_for_data == int(run["memory_required_for_data"])
    got = predicted(net)
    for stage in STAGES:
        want = int(run[stage])
        assert abs(got[stage] - want) <= 64, (stage, got[stage], want)
