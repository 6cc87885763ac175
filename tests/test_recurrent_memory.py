"""BVLC Caffe's RNN and LSTM layers against real Caffe: the unrolled net each builds and runs inside
itself (protoaudit/layers/recurrent_unrolled.py), counted to the byte.

The measured facts are real BVLC Caffe's (9b89154, CPU-only, CPU mode, the oracle kit's exact heap
interposer): tests/data/recurrent_oracle, whose README says how they were taken. Every run is held
to the byte after construction, after one forward and after one backward, and each recurrent
layer's own allocations in its first forward and backward. The unrolled net itself is held to a real
Caffe log that prints it (tests/data/logs_unrolled/hdsr_rnn: four LSTMs, each unrolled net's
NetParameter, every layer's top shapes and Caffe's running "Memory required for data" inside it),
and a small LSTM is derived by hand from lstm_layer.cpp.
"""
import csv
import functools
import json
import os
import re

import pytest
from google.protobuf import text_format

from conftest import DATA, build_text, layer_buffers, run_in_process
from protoaudit.audit import build_nets
from protoaudit.layers import recurrent_unrolled
from protoaudit.memory.buffers import net_buffers, runs_backward
from protoaudit.memory.host import SYNCED, host_bytes

HERE = os.path.join(DATA, "recurrent_oracle")
RUNS = list(csv.DictReader(open(os.path.join(HERE, "measurements.tsv")), delimiter="\t"))
STAGES = ("init_live", "forward_live", "backward_live")


@functools.cache
def built(net, phase):
    return build_nets(os.path.join(HERE, "nets", net + ".prototxt"), phase=phase)[0]


def predicted(run):
    """protoaudit's bytes after setup, after one forward and after one backward (as measure.py runs),
    as tests/test_oracle.py takes them."""
    net = built(run["net"], run["phase"])
    backward = runs_backward(net)
    buffers = net_buffers(net, mode="cpu", backward=backward)
    setup = sum(b.bytes for b in buffers if b.touch == "setup")
    forward = sum(b.bytes for b in buffers if b.touch == "forward")
    return {"init_live": host_bytes(net, forward=False) + setup,
            "forward_live": host_bytes(net, backward=False) + setup + forward,
            "backward_live": host_bytes(net, backward=backward) + sum(b.bytes for b in buffers)}


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_every_run_to_the_byte(run):
    assert predicted(run) == {stage: int(run[stage]) for stage in STAGES}


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_each_recurrent_layers_first_forward_and_backward(run):
    """Caffe's per-layer figures: what the layer's first forward and first backward left allocated.
    A forward's is also less the SyncedMemory objects it frees by sharing: its unrolled net's Splits',
    with expose_hidden its exposed tops', and one per bottom that is an outer Split's top: Reshape
    made an inner blob share that top's data at setup, so when the Split's forward shares the top
    anew the old storage lives on until this layer's forward shares again (a free protoaudit counts
    in the Split's forward: the same pass, so the same figures after it)."""
    net = built(run["net"], run["phase"])
    measured = json.load(open(os.path.join(HERE, "runs", run["run"] + ".json")))["layers"]
    buffers = net_buffers(net, mode="cpu", backward=runs_backward(net))
    for logged in measured:
        if logged["type"] not in ("RNN", "LSTM"):
            continue
        node = net.layer(logged["name"])
        mine = [b for b in buffers if b.layer == node.name]
        deferred = sum(1 for j in node.bottoms if net.layers[net.blobs[j].producer].is_split)
        forward = sum(b.bytes for b in mine if b.touch == "forward") - SYNCED * (node.impl.inner_objects(node)[1]
                                                                                 + deferred)
        backward = sum(b.bytes for b in mine if b.touch == "backward")
        assert (forward, backward) == (logged["fwd_alloc"], logged["bwd_alloc"]), logged["name"]


def test_the_command_line_total_is_caffes():
    """The larger LSTM (20 timesteps of 8 streams of 64 features, 128 outputs): 4,911,386 bytes in
    real Caffe, where protoaudit counted 1,174,476 before its unrolled net was (its Concat's output
    and its parameters alone); the short report names the unrolled net's part."""
    path = os.path.join(HERE, "nets", "lstm_large.prototxt")
    run = run_in_process(path, "--mode", "cpu", "--solver-type", "none", "--format", "json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["total_bytes"] == 4911386
    text = run_in_process(path, "--mode", "cpu", "--solver-type", "none").stdout
    assert re.search(r"lstm1 .* LSTM: its unrolled net 3\.\d+ MiB", text), text


# --- the unrolled net as real Caffe logged it ----------------------------------------------------------
LOG = os.path.join(DATA, "logs_unrolled", "hdsr_rnn", "test_carb.log")
GLOG = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] ?")


def logged_unrolled_nets():
    """Each net the log builds inside another (depth 2): its printed NetParameter text and
    [layer name, top shapes, Memory required for data] per layer, in order."""
    nets, stack = [], []
    with open(LOG, errors="replace") as f:
        for line in f:
            m = GLOG.match(line)
            if m is None:
                if stack and stack[-1]["reading"]:
                    stack[-1]["text"].append(line)
                continue
            message = line[m.end():].rstrip("\n")
            if message.startswith("Initializing net from parameters"):
                stack.append({"text": [], "layers": [], "reading": True})
                if len(stack) == 2:
                    nets.append(stack[-1])
                continue
            if not stack:
                continue
            net = stack[-1]
            net["reading"] = False
            if message.startswith("Network initialization done"):
                stack.pop()
            elif message.startswith("Setting up "):
                net["layers"].append([message[len("Setting up "):], [], None])
            elif message.startswith("Top shape: "):
                dims = message[len("Top shape: "):].rsplit("(", 1)[0].split()
                net["layers"][-1][1].append(tuple(map(int, dims)))
            elif message.startswith("Memory required for data: "):
                net["layers"][-1][2] = int(message.rsplit(" ", 1)[1])
    return nets


def test_the_unrolled_nets_are_those_caffe_built():
    """hdsr_rnn's test net holds four LSTMs (T = 15, one stream; 512x6 features into the first pair,
    100 into the second): the NetParameter each builds is the one Caffe printed, field for field,
    and Net::Init of it (Splits inserted) sets up the layers Caffe set up, in order, with every top
    shape and Caffe's running figure inside the unrolled net."""
    net = build_nets(LOG)[0]
    lstms = [node for node in net.layers if node.type == "LSTM"]
    logged = logged_unrolled_nets()
    assert [node.name for node in lstms] == ["lstm1", "lstm2", "lstm3", "lstm4"] and len(logged) == 4
    for node, caffe in zip(lstms, logged):
        plan, inner = recurrent_unrolled.build_unrolled(node.impl, node.bottom_shapes, node.name)
        assert text_format.Parse("".join(caffe["text"]), type(plan.param)()) == plan.param, node.name
        mine = [[layer.name, list(layer.top_shapes), layer.memory_after] for layer in inner.layers]
        assert mine == caffe["layers"], node.name
        assert len(mine) == 97  # 68 layers and 29 Splits (the 15 conts, 14 hidden states)


# --- a small LSTM by hand ------------------------------------------------------------------------------
SMALL = """
layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 2 dim: 1 dim: 3 } } }
layer { name: "cont" type: "Input" top: "cont" input_param { shape { dim: 2 dim: 1 } } }
layer { name: "target" type: "Input" top: "target" input_param { shape { dim: 2 dim: 1 dim: 2 } } }
layer { name: "lstm" type: "LSTM" bottom: "x" bottom: "cont" top: "h" recurrent_param { num_output: 2 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "h" bottom: "target" top: "loss" }
"""

# lstm_layer.cpp for T = 2 timesteps of N = 1 stream, 3 features, D = 2 outputs (gates 4D = 8), the
# layer named "lstm": Net::Init's blobs in order (InsertSplits puts a Split after the layer that
# makes a blob read twice, its tops named blob_layer_topindex_split_k, k in the readers' order).
SMALL_BLOBS = [
    ("x", (2, 1, 3)), ("cont", (2, 1)),  # the Input of RecurrentLayer::LayerSetUp
    ("c_0", (1, 1, 2)), ("h_0", (1, 1, 2)),  # LSTM's Input: c_0 before h_0
    ("cont_1", (1, 1)), ("cont_2", (1, 1)),  # cont_slice; each cont_t read by h_conted and unit_t
    ("cont_1_lstm_cont_slice_0_split_0", (1, 1)), ("cont_1_lstm_cont_slice_0_split_1", (1, 1)),
    ("cont_2_lstm_cont_slice_1_split_0", (1, 1)), ("cont_2_lstm_cont_slice_1_split_1", (1, 1)),
    ("W_xc_x", (2, 1, 8)), ("W_xc_x_1", (1, 1, 8)), ("W_xc_x_2", (1, 1, 8)),  # x_transform, its slice
    ("h_conted_0", (1, 1, 2)), ("W_hc_h_0", (1, 1, 8)), ("gate_input_1", (1, 1, 8)),
    ("c_1", (1, 1, 2)), ("h_1", (1, 1, 2)),  # unit_1; h_1 read by h_conted_1 and h_concat
    ("h_1_lstm_unit_1_1_split_0", (1, 1, 2)), ("h_1_lstm_unit_1_1_split_1", (1, 1, 2)),
    ("h_conted_1", (1, 1, 2)), ("W_hc_h_1", (1, 1, 8)), ("gate_input_2", (1, 1, 8)),
    ("c_2", (1, 1, 2)), ("h_2", (1, 1, 2)),  # unit_2: h_2 is h_T, read by h_concat alone
    ("c_T", (1, 1, 2)),  # the unnamed Split copying c_2
    ("h", (2, 1, 2)),  # h_concat: the output, the layer's top
    ("h_pseudoloss", ()),  # Reduction SUM of h, loss weight 1, never run
]

# What the layer holds of its own, in CPU mode (bytes, first touch); x, cont and h are the outer
# net's (x's data and diff, cont's data, h's data and diff: Reshape shares them), W_xc, b_c and W_hc
# its parameters. Setup: LayerSetUp zeroes the recurrent outputs' diffs (h_2, c_T), InnerProduct's
# bias_multiplier_ (T*N), each Scale's sum_multiplier_ (D), the pseudoloss's sum_multiplier_ (T*N*D)
# and its top's diff (the loss weight). Forward, up to the pseudoloss: every blob but the Split tops
# (their bottom's data) and c_T (c_2's). Backward from h_concat: the Split of c_2 and the h_conted_0
# Scale (of h_0 and cont_1, an Input's tops) add nothing to the loss, so their backward never runs
# and transform_1 writes no diff for h_conted_0; each LSTMUnit reads its tops' diffs (c_2's) and
# writes both c_{t-1}'s and the gates', c_0's too, which Net::Init never asks for.
SMALL_OWN = {
    "c_T diff": (8, "setup"), "h_2 diff": (8, "setup"), "x_transform.bias_multiplier_": (8, "setup"),
    "h_conted_0.sum_multiplier_": (8, "setup"), "h_conted_1.sum_multiplier_": (8, "setup"),
    "h_pseudoloss.sum_multiplier_": (16, "setup"), "h_pseudoloss diff": (4, "setup"),
    "cont_1 data": (4, "forward"), "cont_2 data": (4, "forward"), "W_xc_x data": (64, "forward"),
    "W_xc_x_1 data": (32, "forward"), "W_xc_x_2 data": (32, "forward"), "h_0 data": (8, "forward"),
    "h_conted_0 data": (8, "forward"), "W_hc_h_0 data": (32, "forward"), "gate_input_1 data": (32, "forward"),
    "c_0 data": (8, "forward"), "c_1 data": (8, "forward"), "h_1 data": (8, "forward"),
    "h_conted_1 data": (8, "forward"), "W_hc_h_1 data": (32, "forward"), "gate_input_2 data": (32, "forward"),
    "c_2 data": (8, "forward"), "h_2 data": (8, "forward"),
    "h_1_lstm_unit_1_1_split_1 diff": (8, "backward"), "c_2 diff": (8, "backward"), "c_1 diff": (8, "backward"),
    "gate_input_2 diff": (32, "backward"), "W_hc_h_1 diff": (32, "backward"), "W_xc_x_2 diff": (32, "backward"),
    "h_conted_1 diff": (8, "backward"), "h_1_lstm_unit_1_1_split_0 diff": (8, "backward"),
    "h_1 diff": (8, "backward"), "c_0 diff": (8, "backward"), "gate_input_1 diff": (32, "backward"),
    "W_hc_h_0 diff": (32, "backward"), "W_xc_x_1 diff": (32, "backward"), "W_xc_x diff": (64, "backward"),
}


def test_a_small_lstm_by_hand(tmp_path):
    net = build_text(tmp_path, SMALL)
    node = net.layer("lstm")
    _, inner = node.impl.unrolled(node.bottom_shapes)
    assert [(b.name, b.shape) for b in inner.blobs] == SMALL_BLOBS
    buffers = [b for b in net_buffers(net, mode="cpu") if b.layer == "lstm"]
    own = {b.owner[len("lstm.unrolled "):]: (b.bytes, b.touch) for b in buffers if b.owner.startswith("lstm.unrolled ")}
    assert own == SMALL_OWN
    assert sum(n for n, stage in SMALL_OWN.values() if stage == "setup") == 60
    assert sum(n for n, stage in SMALL_OWN.values() if stage == "forward") == 328
    assert sum(n for n, stage in SMALL_OWN.values() if stage == "backward") == 312
    outer = {(b.owner, b.kind): (b.bytes, b.touch) for b in buffers if not b.owner.startswith("lstm.unrolled ")}
    assert outer == {
        ("lstm.param0", "param data"): (96, "setup"), ("lstm.param1", "param data"): (32, "setup"),
        ("lstm.param2", "param data"): (64, "setup"), ("cont", "top data"): (8, "forward"),
        ("x", "top data"): (24, "forward"), ("h", "top data"): (16, "forward"),
        ("lstm.param2", "param diff"): (64, "backward"), ("x", "top diff"): (24, "backward"),
        ("lstm.param0", "param diff"): (96, "backward"), ("lstm.param1", "param diff"): (32, "backward"),
    }  # (h's diff is the loss's, which writes it first)


def test_in_gpu_mode_the_same_buffers_live_on_the_device(tmp_path):
    """The GPU code of the unrolled net touches what the CPU code does, plus LSTMUnit's X_acts_ (the
    gates' activations, data in forward and diff in backward: lstm_unit_layer.cu:61, 139); the
    recurrent outputs' diffs LayerSetUp zeroes with caffe_set on the host stay there (h_T's also on
    the device, where h_concat's backward writes it; c_T's only on the host)."""
    net = build_text(tmp_path, SMALL)
    cpu = layer_buffers(net, "lstm", mode="cpu")
    gpu = layer_buffers(net, "lstm", mode="gpu")
    host = {name: n for (name, device), n in gpu.items() if device == "host"}
    assert host == {"unrolled h_2 diff (host)": 8, "unrolled c_T diff (host)": 8}
    device = {name: n for (name, device), n in gpu.items() if device == "device"}
    x_acts = {f"unrolled unit_{t}.X_acts_{part}": 32 for t in (1, 2) for part in ("", " (diff)")}
    assert device == {**{name: n for (name, _), n in cpu.items() if name != "unrolled c_T diff"}, **x_acts}


# --- many timesteps: the pattern of one timestep -----------------------------------------------------
def sequence_net(kind, t, extra=""):
    """x (T, 3, 7) and cont (T, 3) into an RNN or LSTM of 4 outputs (with `extra` in its recurrent_param),
    a static input s (3, 6) and a loss."""
    return f"""
layer {{ name: "x" type: "Input" top: "x" input_param {{ shape {{ dim: {t} dim: 3 dim: 7 }} }} }}
layer {{ name: "cont" type: "Input" top: "cont" input_param {{ shape {{ dim: {t} dim: 3 }} }} }}
layer {{ name: "s" type: "Input" top: "s" input_param {{ shape {{ dim: 3 dim: 6 }} }} }}
layer {{ name: "h0" type: "Input" top: "h0" input_param {{ shape {{ dim: 1 dim: 3 dim: 4 }} }} }}
layer {{ name: "target" type: "Input" top: "target" input_param {{ shape {{ dim: {t} dim: 3 dim: 4 }} }} }}
layer {{ name: "rec9" type: "{kind}" bottom: "x" bottom: "cont" bottom: "s" {"bottom: 'h0'" if extra else ""}
  top: "y" {"top: 'hT'" if extra else ""} recurrent_param {{ num_output: 4 {extra} }} }}
layer {{ name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "target" top: "loss" }}
""".replace("'", '"')


def sums(net, mode):
    """{(layer, first touch, device, kind): bytes} of a net's buffers."""
    out = {}
    for b in net_buffers(net, mode=mode):
        key = (b.layer, b.touch, b.device, b.kind)
        out[key] = out.get(key, 0) + b.bytes
    return out


@pytest.mark.parametrize("kind,extra", [("LSTM", ""), ("RNN", ""), ("RNN", "expose_hidden: true")])
def test_many_timesteps_are_counted_from_the_pattern_of_one(tmp_path, monkeypatch, kind, extra):
    """Past STEPS_BUILT timesteps the unrolled net is not built whole: its buffers, read off the nets of
    8, 9 and 10 timesteps, are the whole net's to the byte (here 40 timesteps, the whole net built
    below a bound of 12), by layer, pass, device and kind; its C++ objects are near, and said to be."""
    text = sequence_net(kind, 40, extra)
    whole = build_text(tmp_path, text)
    figures = {mode: sums(whole, mode) for mode in ("cpu", "gpu")}
    exact = host_bytes(whole)
    monkeypatch.setattr(recurrent_unrolled, "STEPS_BUILT", 12)
    pattern = build_text(tmp_path, text)
    assert not whole.assumptions and "not built whole" in pattern.assumptions[0].what
    for mode in ("cpu", "gpu"):
        assert sums(pattern, mode) == figures[mode]
    near = host_bytes(pattern)
    assert near != exact and abs(near - exact) < 0.1 * exact
    names = {b.owner for b in net_buffers(pattern, mode="cpu") if b.layer == "rec9"}
    assert "rec9.unrolled h_conted_t data" in names  # one buffer for the timesteps alike


def test_a_million_timesteps_take_no_longer_than_ten(tmp_path):
    """A batch of a million timesteps (the largest-batch search tries such) is counted from the
    pattern, at once; one whose transform would hold more than INT_MAX elements is refused as Caffe's
    Blob::Reshape refuses it."""
    import time

    start = time.process_time()
    net = build_text(tmp_path, sequence_net("LSTM", 1000000))
    total = sum(b.bytes for b in net_buffers(net, mode="gpu") if b.device == "device")
    assert time.process_time() - start < 5 and total > 1000000 * 3 * 4 * 4 * 10
    with pytest.raises(Exception, match="W_xc_x would hold 2,160,000,000 elements"):
        build_text(tmp_path, sequence_net("LSTM", 45000000))


def test_an_absent_cont_takes_the_lstms_timesteps_and_streams(tmp_path):
    """RecurrentLayer::Reshape CHECKs cont (bottom 1) is (T, N), x's first two axes (recurrent_layer.cpp): an
    HDF5 cont whose list is not on this machine is given that shape, said as an assumption, where an assumed
    image of 4 axes would stop the layer."""
    text = ('layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 5 dim: 3 dim: 7 } } }\n'
            'layer { name: "cont" type: "HDF5Data" top: "cont" hdf5_data_param { source: "/nowhere/cont_h5.txt" '
            'batch_size: 5 } }\n'
            'layer { name: "lstm" type: "LSTM" bottom: "x" bottom: "cont" top: "h" '
            'recurrent_param { num_output: 4 } }\n')
    (tmp_path / "net.prototxt").write_text(text)
    net = build_nets(str(tmp_path / "net.prototxt"))[0]
    assert list(net.layer("cont").top_shapes) == [(5, 3)]
    assert any(a.layer == "cont" and "LSTM layer 'lstm'" in a.what for a in net.assumptions)
