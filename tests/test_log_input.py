"""A Caffe log as input: `protoaudit LOG` audits the nets the log initialised (their printed text,
the data shapes Caffe logged), `protoaudit NET --log LOG` takes the data shapes from the log, and a
run that died is told where, with what protoaudit says was held then.

Every expected shape and figure is the real log's own (tests/data/logs, PAIRS.tsv)."""
import json
import os
import re

import pytest

import logparse
from conftest import DATA, run_in_process
from test_caffe_logs import OLDER_CAFFE, PAIRS, _logged_nets

LOGS = os.path.join(DATA, "logs")
CUT = {"ducha_resnet56_bn.log", "ducha_thinresnet101_nobn.log"}  # glog cut their nets' text
LOG_FILES = sorted({log for log, _, _ in PAIRS})


@pytest.mark.parametrize("log", LOG_FILES)
def test_a_log_reproduces_its_own_lines(log):
    run = run_in_process(os.path.join(LOGS, log), "--caffe-log")
    if log in CUT:
        assert run.returncode == 2
        assert "glog cut the printed text" in run.stderr and "--log" in run.stderr
        return
    assert run.returncode == 0, run.stderr
    got = logparse.parse(run.stdout)
    expected = [n for n in _logged_nets(log)]
    assert len(got) == len(expected)
    headers = [line for line in run.stdout.splitlines() if line.startswith("Net ")]
    for k, (want, have) in enumerate(zip(expected, got)):
        assert headers[k].split(": ")[0].endswith(f"phase {want.phase}")
        if (log, want.phase) in OLDER_CAFFE:
            continue  # a 2015 Caffe: held in test_caffe_logs
        assert logparse.first_difference(want, have) is None, logparse.first_difference(want, have)


@pytest.mark.parametrize("log,phase,net", [p for p in PAIRS if (p[0], p[1]) not in OLDER_CAFFE],
                         ids=[f"{p[0][:-4]}-{p[1]}" for p in PAIRS if (p[0], p[1]) not in OLDER_CAFFE])
def test_a_net_with_its_log_needs_no_input(log, phase, net):
    """The data shapes come from the log: no --input, cut net text or not."""
    (want,) = [n for n in _logged_nets(log) if n.phase == phase][:1]
    run = run_in_process(net, "--log", os.path.join(LOGS, log), "--phase", phase.lower(), "--caffe-log")
    assert run.returncode == 0, run.stderr
    (got,) = logparse.parse(run.stdout)
    assert logparse.first_difference(want, got) is None, logparse.first_difference(want, got)


def test_a_log_audit_holds_the_solver_and_nets_it_printed():
    run = run_in_process(os.path.join(LOGS, "cifar_resnet20.log"), "--format", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    # the solver the log printed: type "Nesterov"; its train net at batch 128, its test net at 100
    assert report["solver_type"] == "Nesterov"
    assert [(n["role"], n["phase"], n["batch"], n["forward_only"]) for n in report["nets"]] == [
        ("train", "TRAIN", 128, False), ("test", "TEST", 100, True)]
    assert [n["memory_required_for_data"] for n in report["nets"]] == [551081480, 430532408]
    assert report["death"] is None


def test_a_run_that_died_out_of_memory_is_told_where():
    """ducha_squeezenet128.log: the first run died in iteration 0, in a Pooling layer's
    Backward_gpu (glog's stack), after a later run was cut off before it built a net."""
    run = run_in_process(os.path.join(LOGS, "ducha_squeezenet128.log"), "--format", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    death = report["death"]
    assert death["line"] == 3335 and "out of memory" in death["message"]
    assert death["where"] == "in the train net's backward pass of iteration 0"
    # held after the backward pass = held before it + every buffer the train net's backward allocates
    backward = sum(b["bytes"] for n in report["nets"] if n["role"] == "train" for layer in n["layers"]
                   for b in layer["buffers"] if b["touch"] == "backward" and b["device"] == "device")
    assert death["held_after_bytes"] - death["held_before_bytes"] == backward > 0
    text = run_in_process(os.path.join(LOGS, "ducha_squeezenet128.log"), "--gpu-mem", "4G").stdout
    assert "The run in the log died at line 3335" in text
    assert "the card (given with --gpu-mem) holds 4 GiB: more than the card." in text


SETUP_DEATH = """\
I0101 00:00:00.000000  1 caffe.cpp:222] GPU 0: GeForce GTX 970
I0101 00:00:00.000000  1 solver.cpp:48] Initializing solver from parameters: 
base_lr: 0.01
net: "net.prototxt"
I0101 00:00:00.000000  1 net.cpp:49] Initializing net from parameters: 
name: "tiny"
state {
  phase: TRAIN
}
layer {
  name: "data"
  type: "Input"
  top: "data"
  input_param { shape { dim: 64 dim: 3 dim: 224 dim: 224 } }
}
layer {
  name: "conv1"
  type: "Convolution"
  bottom: "data"
  top: "conv1"
  convolution_param { num_output: 96 kernel_size: 11 stride: 4 }
}
layer {
  name: "loss"
  type: "EuclideanLoss"
  bottom: "conv1"
  bottom: "conv1"
  top: "loss"
}
I0101 00:00:00.000000  1 net.cpp:100] Creating Layer data
I0101 00:00:00.000000  1 net.cpp:408] data -> data
I0101 00:00:00.000000  1 net.cpp:150] Setting up data
I0101 00:00:00.000000  1 net.cpp:157] Top shape: 64 3 224 224 (9633792)
I0101 00:00:00.000000  1 net.cpp:165] Memory required for data: 38535168
I0101 00:00:00.000000  1 net.cpp:100] Creating Layer conv1
F0101 00:00:00.000000  1 syncedmem.cpp:56] Check failed: error == cudaSuccess (2 vs. 0)  out of memory
"""


def test_a_run_that_died_setting_up_a_net(tmp_path):
    """Caffe died creating conv1 of the train net: held then is the context and what setup
    allocated before conv1 (an Input layer allocates nothing at setup: its top is first touched in
    the forward pass), and with conv1 its weights, 96x3x11x11 + 96 floats, and the bias multiplier
    Reshape fills with ones, H_out x W_out = 54 x 54 ((224 - 11) / 4 + 1 = 54)."""
    (tmp_path / "train.log").write_text(SETUP_DEATH)
    run = run_in_process("train.log", "--format", "json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    death = json.loads(run.stdout)["death"]
    assert death["where"] == "while setting up the TRAIN net, layer 'conv1'"
    context = 300 * 2**20
    assert death["held_before_bytes"] == context
    assert death["held_after_bytes"] == context + 4 * (96 * 3 * 11 * 11 + 96 + 54 * 54)
    # on the card (a GPU run): the three take 512-byte slots of one shared 2 MiB page
    # (tests/data/gpu_measured), the context no page
    assert death["held_after_pages_bytes"] == 2 * 2**20 - 4 * (96 * 3 * 11 * 11 + 96 + 54 * 54)
    assert death["card"] == "GeForce GTX 970" and death["card_bytes"] == 4 * 2**30


def test_a_log_with_no_net_is_refused_with_the_way_out(tmp_path):
    (tmp_path / "solver.log").write_text(SETUP_DEATH.split("I0101 00:00:00.000000  1 net.cpp:49]")[0])
    run = run_in_process("solver.log", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.startswith("protoaudit: solver.log: the log holds no net Caffe set up")
    assert "--log" in run.stderr


def test_a_garbled_number_in_a_log_line_is_passed_over(tmp_path):
    """A 'Memory required for data' line whose number is cut or garbled, and numbers longer than
    any Caffe prints (Python's int() refuses over 4,300 digits), are lines Caffe never wrote: they
    are passed over as other unknown lines are (found by tests/fuzz_corpus.py)."""
    from protoaudit.read import caffe_log

    garbled = SETUP_DEATH.replace("Memory required for data: 38535168", "Memory required for data: 3853\x0bR")
    garbled = garbled.replace("Creating Layer conv1", "Creating Layer conv1\nI0101 00:00:00.000000  1 solver.cpp:1] "
                              "Iteration " + "9" * 5000 + "\nI0101 00:00:00.000000  1 net.cpp:157] Top shape: "
                              + "7" * 5000 + " (1)")
    path = tmp_path / "train.log"
    path.write_text(garbled)
    net = caffe_log.read(str(path))[0].nets[0]
    assert net.memory is None and [layer.shapes for layer in net.layers] == [[(64, 3, 224, 224)]]
    run = run_in_process("train.log", cwd=tmp_path)
    assert run.returncode == 0, run.stderr


def test_a_phase_the_logged_run_never_built_is_refused():
    run = run_in_process(os.path.join(LOGS, "bvlc_nb_detection_rcnn_1.log"), "--phase", "train")
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1
    assert "bvlc_nb_detection_rcnn_1.log: the run in the log built no TRAIN net (only TEST) (--phase test" in run.stderr


def test_a_logged_data_top_with_no_axes_is_refused(tmp_path):
    """`Top shape: (1)` is what Caffe logs for a blob of no axes; a Data layer's top starts with its
    batch, so a log saying so of one does not belong to the net (found by tests/fuzz_corpus.py)."""
    with open(os.path.join(LOGS, "ducha_caffenet128_tanh_bs32.log")) as f:
        text = f.read()
    first = text.index("Top shape: ", text.index("Setting up data"))
    end = text.index("\n", first)
    (tmp_path / "run.log").write_text(text[:first] + "Top shape: (1)" + text[end:])
    run = run_in_process(os.path.join(LOGS, "ducha_caffenet128_tanh_bs32.train.as_run.prototxt"), "--log",
                         "run.log", cwd=tmp_path)
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
    assert "layer 'data': top 'data' is given no axes (Caffe's log run.log:" in run.stderr
    assert "--input data=NxCxHxW" in run.stderr


def test_intel_caffe_prints_the_net_as_a_message_of_its_own(tmp_path):
    """Intel Caffe (bobhuynh/Intel's caffe.log, 2017) logs `Initializing net from parameters:`,
    then the text as a second message whose first line is empty (`net.cpp:157] `). The same real
    log written that way reproduces the same lines."""
    with open(os.path.join(LOGS, "bvlc_nb_brewing_logreg_1.log")) as f:
        text = f.read()
    intel = text.replace("net.cpp:49] Initializing net from parameters: \n",
                         "net.cpp:49] Initializing net from parameters: \nI0224 00:32:03.392215   655 net.cpp:50] \n")
    assert intel.count("net.cpp:50] \n") == 2
    (tmp_path / "intel.log").write_text(intel)
    (tmp_path / "bvlc.log").write_text(text)
    want = run_in_process("bvlc.log", "--caffe-log", cwd=tmp_path)
    have = run_in_process("intel.log", "--caffe-log", cwd=tmp_path)
    assert want.returncode == have.returncode == 0, have.stderr
    assert have.stdout == want.stdout.replace("bvlc.log", "intel.log")


def test_a_net_printed_empty_is_refused_not_audited_as_nothing(tmp_path):
    """A log whose printed net text is empty but whose layers Caffe set up: no audit of an empty
    net (it would say the CUDA context alone), one refusal with the way out."""
    with open(os.path.join(LOGS, "bvlc_nb_brewing_logreg_1.log")) as f:
        lines = f.read().split("\n")
    start = next(i for i, line in enumerate(lines) if "Initializing net from parameters" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i][:1] == "I")
    (tmp_path / "empty.log").write_text("\n".join(lines[:start + 1] + lines[end:]))
    run = run_in_process("empty.log", cwd=tmp_path)
    assert run.returncode == 2
    assert "printed empty" in run.stderr and "--log" in run.stderr


def test_a_2015_caffe_that_logged_the_memory_once_kept_its_blobs_shapes():
    """qiexing/caffe-regression's log: its Caffe logged "Memory required for data" once, after
    "Network initialization done.", as the Caffe of 2014 did, but its blobs were N-D: the HDF5 label
    is "Top shape: 128 30 (3840)", not 128 30 1 1 (tried as a new user would). Every line matches."""
    path = os.path.join(DATA, "logs_early_2015", "qiexing_caffe_regression.log")
    run = run_in_process(path, "--caffe-log")
    assert run.returncode == 0, run.stderr
    assert "Top shape: 128 30 (3840)" in run.stdout and "Top shape: 128 30 1 1" not in run.stdout
    with open(path) as f:
        expected = logparse.parse(f.read())
    got = logparse.parse(run.stdout)
    assert len(got) == len(expected) == 2
    for want, have in zip(expected, got):
        assert logparse.first_difference(want, have) is None, logparse.first_difference(want, have)


def _net_lines(text):
    """Each net's "Top shape" and "Memory required" lines, as net.cpp logged them (glog's prefix
    taken off), in order."""
    nets = []
    for line in text.splitlines():
        m = re.match(r"^(?:[IWEF]\d{4} [\d:.]+\s+\d+ net\.cpp:\d+\] )?(Initializing net from parameters|Net |"
                     r"Top shape: .*|Memory required for data: .*)", line)
        if not m:
            continue
        if m.group(1).startswith(("Initializing", "Net ")):
            nets.append([])
        elif nets:
            nets[-1].append(m.group(1).strip())
    return nets


def test_a_2014_log_whose_data_layer_is_set_up_with_no_name_is_reproduced():
    """wateryym/authorship-recognition's log, from a Caffe of early 2014: the LeNet's DATA layer has no
    name, and its two "Top shape" lines (149-150: 8 3 28 28, 8 1 1 1) come right after the net's text
    with no "Creating Layer" before them. They are the first layer's with no bottom, so the data is
    the log's 8x3x28x28 and every line of both nets comes back."""
    path = os.path.join(DATA, "logs_early_2014", "authorship_output.log")
    run = run_in_process(path, "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(path) as f:
        expected = [net for net in _net_lines(f.read()) if net]
    got = [net for net in _net_lines(run.stdout) if net]
    assert len(expected) == 2 and expected[0][:2] == ["Top shape: 8 3 28 28 (18816)", "Top shape: 8 1 1 1 (8)"]
    assert got == expected


def test_a_run_that_died_setting_up_its_net_is_echoed_up_to_where_it_died():
    """PanJinquan/image_recognition_caffe's CaffeNet: Caffe set up its first layers (line 451: norm2,
    2 256 41 30), then the data layer's prefetch thread died on a smaller image than its crop (line
    457: "Check failed: height <= datum_height (666 vs. 318)"). --caffe-log gives the lines Caffe gave,
    every one of them, and ends where the run did, saying why."""
    path = os.path.join(DATA, "logs_died", "caffenet_spp_caffe.log")
    run = run_in_process(path, "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(path) as f:
        (expected,) = [net for net in _net_lines(f.read()) if net]
    (got,) = [net for net in _net_lines(run.stdout) if net]
    assert got == expected and expected[-2] == "Top shape: 2 256 41 30 (629760)"
    assert run.stdout.rstrip().endswith(
        "Caffe stopped here, the log's line 457: Check failed: height <= datum_height (666 vs. 318)")


def test_a_run_a_python_layer_ended_setting_up_is_echoed_up_to_where_it_died(tmp_path):
    """t2mhanh/caffe_convLSTM_WTA's WTA autoencoder: Caffe set up its layers through 'deconv' (line
    267: 100 1 28 28), began its Python loss layer (line 269, "Creating layer loss") and the process
    ended on the module's import (line 270, no glog prefix: "ImportError: No module named pyloss").
    --caffe-log gives every line Caffe gave and ends there, saying why; a Python exception in a log
    whose net's setup goes on after it ends nothing."""
    path = os.path.join(DATA, "logs_died", "mnist_wta_pyloss.log")
    run = run_in_process(path, "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(path) as f:
        text = f.read()
    (expected,) = [net for net in _net_lines(text) if net]
    (got,) = [net for net in _net_lines(run.stdout) if net]
    assert got == expected and expected[-2] == "Top shape: 100 1 28 28 (78400)"
    assert run.stdout.rstrip().endswith("Caffe stopped here, the log's line 270: ImportError: No module named pyloss")
    went_on = text.replace("ImportError: No module named pyloss\n", "").replace(
        "I0912 21:31:04.727059 31271 net.cpp:137] Memory required for data: 121363200\n",
        "I0912 21:31:04.727059 31271 net.cpp:137] Memory required for data: 121363200\n"
        "ValueError: a message a script printed\n", 1)
    assert went_on.count("ValueError") == 1
    (tmp_path / "went_on.log").write_text(went_on)
    run = run_in_process(str(tmp_path / "went_on.log"), "--caffe-log")
    assert run.returncode == 0 and "Caffe stopped here" not in run.stdout, run.stdout[-300:]


def test_layers_of_one_name_set_up_several_times_take_their_own_logged_shapes():
    """caffe-quant-QNN's quantized AlexNet-BN names each of its Quantization layers
    'quantized_conv1': a8w8.log sets up the first at line
    676 (200 96 27 27, after pool1), the second at 721 (200 256 13 13, after pool2), and so on. The k-th
    layer of the name takes the k-th the log set up, not the shapes of another log beside it
    (a4w8_6.log ran batch 128): --caffe-log gives every line the log gives, for both nets."""
    path = os.path.join(DATA, "logs_repeated", "a8w8.log")
    run = run_in_process(path, "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(path) as f:
        expected = [net for net in _net_lines(f.read()) if net]
    got = [net for net in _net_lines(run.stdout) if net]
    assert len(expected) == 2 and got == expected
    assert "Top shape: 200 256 13 13 (8652800)" in expected[0] and "Top shape: 128 " not in run.stdout
