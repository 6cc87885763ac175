"""A log of a net with recurrent layers: each LSTM's setup builds its unrolled net, which Net::Init
prints as a net of its own (its text, its layers, "Network initialization done."), inside the
setup of the net that holds the layer, which then goes on. The log's outer net is the run's; its
layers after an unrolled net are still its own, so a type protoaudit has no rule for there (CRNN's
Reverse) is sized as Caffe logged it. Expected lines are the real log's."""
import os

import logparse
from conftest import DATA, run_in_process
from protoaudit.read.caffe_log import logged_nets

LOG = os.path.join(DATA, "logs_unrolled", "hdsr_rnn", "test_carb.log")


def _outer_lines():
    """The log's Top shape lines of its outer net: those outside every unrolled net's setup."""
    depth, lines = 0, []
    with open(LOG, errors="replace") as f:
        for line in f:
            if "Initializing net from parameters" in line:
                depth += 1
            elif "Network initialization done" in line:
                depth -= 1
            elif "Top shape:" in line and depth == 1:
                lines.append(line.split("] ", 1)[1].strip())
    return lines


def test_the_premise_four_unrolled_nets_are_printed_inside_the_outer_one():
    with open(LOG, errors="replace") as f:
        text = f.read()
    assert text.count("Initializing net from parameters") == 5 and text.count("Network initialization done") == 5
    assert "Creating Layer rev1" in text.split("Network initialization done")[2]  # after two unrolled nets


def test_the_run_is_the_outer_net_with_every_layer_it_set_up():
    (net,) = logged_nets(LOG)
    assert net.phase == "TEST" and net.done
    layers = net.by_name()
    assert layers["rev1"].shapes == [(15, 1, 512, 6)] and "rev2" in layers and "ctc_loss" in layers


def _logged_lines(text):
    """Every Top shape and Memory required line, in order, of glog lines or --caffe-log's."""
    out = []
    for line in text.splitlines():
        message = (line.split("] ", 1)[1] if "] " in line else line).strip()
        if message.startswith(("Top shape:", "Memory required for data:")):
            out.append(message)
    return out


def test_every_line_is_reproduced_the_unrolled_nets_within_their_layers_setup():
    """--caffe-log prints each LSTM's unrolled net where Caffe does, between the layer's "->" lines and
    its "Setting up": every Top shape and Memory line of the log, the four unrolled nets' and the
    outer net's (82 of them), in the log's order."""
    run = run_in_process(LOG, "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(LOG, errors="replace") as f:
        logged = _logged_lines(f.read())
    assert _logged_lines(run.stdout) == logged and len(logged) > 1000
    outer = [line for line in run.stdout.split("\n") if line.startswith("Top shape:")]
    assert len(_outer_lines()) == 82 and len(outer) == len([line for line in logged if line.startswith("Top")])
