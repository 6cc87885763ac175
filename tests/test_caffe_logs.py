"""protoaudit's --caffe-log against real Caffe training logs, layer by layer.

For each net a real log built (PAIRS.tsv names the prototxt that ran, per phase), protoaudit must
set up the same layers in the same order (Caffe's Split layers included), give every top the shape
Caffe logged, and log the same cumulative "Memory required for data" after each layer. The data
layers' top shapes come from the dataset, which no prototxt states: they are taken from the log and
given with --input, as a user holding protoaudit against their own log would.
"""
import json
import os

import pytest

import logparse
from conftest import DATA, run_in_process

LOGS = os.path.join(DATA, "logs")


def _pairs():
    """(log file, phase, net file) for every net PAIRS.tsv pairs with a log."""
    rows = []
    with open(os.path.join(LOGS, "PAIRS.tsv")) as f:
        for row in f:
            if not row.strip() or row.startswith("#"):
                continue
            log, *nets = row.rstrip("\n").split("\t")
            for phase, net in zip(("TRAIN", "TEST"), nets):
                if net != "-":
                    # the copies all sit beside the logs (PAIRS.tsv names two in ../nets_solver_embedded)
                    rows.append((log, phase, os.path.join(LOGS, os.path.basename(net))))
    return rows


# A log from a Caffe older than the one protoaudit reproduces (BVLC master): held separately below.
OLDER_CAFFE = {("bvlc_nb_detection_rcnn_1.log", "TEST")}


def _cases():
    for log, phase, net in _pairs():
        if (log, phase) not in OLDER_CAFFE:
            yield pytest.param(log, phase, net, id=f"{log[:-4]}-{phase}")


PAIRS = _pairs()


def _logged_nets(log):
    with open(os.path.join(LOGS, log), errors="replace") as f:
        return logparse.parse(f.read())


@pytest.mark.parametrize("log,phase,net", list(_cases()))
def test_protoaudit_reproduces_the_log(log, phase, net):
    logged = [n for n in _logged_nets(log) if n.phase == phase]
    if not logged:
        pytest.skip(f"{log} holds no {phase} net (the log was cut before Caffe built it)")
    expected = logged[0]
    inputs = [arg for value in expected.data_inputs() for arg in ("--input", value)]
    run = run_in_process(net, "--phase", phase.lower(), "--caffe-log", *inputs)
    assert run.returncode == 0, run.stderr
    got = logparse.parse(run.stdout)
    assert len(got) == 1, f"protoaudit printed {len(got)} nets for one --phase"
    assert logparse.first_difference(expected, got[0]) is None, logparse.first_difference(expected, got[0])


@pytest.mark.parametrize("log,phase,net", [c for c in _cases() if ".as_run." in c.values[2]])
def test_as_run_file_builds_in_its_own_phase(log, phase, net):
    """Caffe prints the net it built with its NetState (`state { phase: TEST }`): with no --phase,
    protoaudit builds that net alone, in that phase, as Caffe's Net does for a NetParameter."""
    (expected,) = [n for n in _logged_nets(log) if n.phase == phase][:1]
    inputs = [arg for value in expected.data_inputs() for arg in ("--input", value)]
    run = run_in_process(net, "--caffe-log", *inputs)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n", 1)[0].split(": ")[0].endswith(f", phase {phase}")
    (got,) = logparse.parse(run.stdout)
    assert logparse.first_difference(expected, got) is None, logparse.first_difference(expected, got)
    audit = run_in_process(net, "--format", "json", *inputs)
    assert audit.returncode == 0, audit.stderr
    nets = json.loads(audit.stdout)["nets"]
    assert [(n["phase"], n["forward_only"]) for n in nets] == [(phase, phase == "TEST")]


def test_older_caffe_log_differs_only_where_caffe_changed():
    """The R-CNN notebook log comes from a 2015 Caffe (net.cpp:42, before N-D blobs). Since then Caffe
    turns net-level `input:` into an Input layer whose top it counts, and InnerProduct makes 2-D tops
    where that Caffe made N x C x 1 x 1. Everything else must match."""
    log = "bvlc_nb_detection_rcnn_1.log"
    (expected,) = [n for n in _logged_nets(log) if n.phase == "TEST"]
    run = run_in_process(os.path.join(LOGS, "bvlc_nb_detection_rcnn_1.test.as_run.prototxt"),
                         "--phase", "test", "--caffe-log")
    assert run.returncode == 0, run.stderr
    (got,) = logparse.parse(run.stdout)
    assert got.layers[0].name == "input" and got.layers[0].shapes == [(10, 3, 227, 227)]
    rest = got.layers[1:]
    assert [l.name for l in rest] == [l.name for l in expected.layers]

    def squeezed(shapes):
        out = []
        for shape in shapes:
            while len(shape) > 2 and shape[-1] == 1:
                shape = shape[:-1]
            out.append(shape)
        return out

    assert [squeezed(l.shapes) for l in rest] == [squeezed(l.shapes) for l in expected.layers]
    assert got.layer("fc-rcnn").shapes == [(10, 200)]
    # the old Caffe's figure plus the input blob it did not count: 10*3*227*227 * 4 bytes = 6,183,480
    assert expected.memory == 62425920
    assert got.memory == expected.memory + 10 * 3 * 227 * 227 * 4


def test_every_pair_is_checked():
    """Each (log, phase) PAIRS.tsv names is really in its log, so no pair is silently skipped."""
    missing = [(log, phase) for log, phase, _ in PAIRS
               if not any(n.phase == phase for n in _logged_nets(log))]
    assert missing == []


# Each net's last "Memory required for data", as corpus/SOURCES.md lists it (read there by hand).
SOURCES_MEMORY = {
    "bvlc_nb_brewing_logreg_1.log": (528, 528),
    "bvlc_nb_brewing_logreg_2.log": (3728, 3728),
    "cifar_resnet20.log": (551081480, 430532408),
    "cvgj_alexnet_test.log": (1311765508, 513009012),
    "cvgj_resnet10_test.log": (1092023428, 341377452),
    "ducha_caffenet128_1x3_half_bn.log": (995009540, 389476408),
    "ducha_caffenet128_bn_after_elu.log": (701965316, 137503008),
    "ducha_caffenet128_bs512.log": (997869572, 97848608),
    "ducha_caffenet128_tanh_bs128.log": (249467396, 97848608),
    "ducha_caffenet128_tanh_bs32.log": (62366852, 97848608),
    "ducha_caffenet128_tanh_bs64.log": (124733700, 97848608),
    "ducha_resnet56_bn.log": (3607149320, 1409042708),
    "ducha_squeezenet128.log": (8255424516, 806594208),
    "ducha_thinresnet101_nobn.log": (1308064004, 1022525612),
    "imagenet_resnet32_ethanhe.log": (6110433804,),
}


@pytest.mark.parametrize("log", sorted(SOURCES_MEMORY))
def test_reader_finds_the_figures_sources_md_lists(log):
    assert tuple(n.memory for n in _logged_nets(log)) == SOURCES_MEMORY[log]


# --- the reader itself, on lines written out here -------------------------------------------------

SAMPLE = """\
I0111 18:29:31.177498 12987 net.cpp:58] Initializing net from parameters: 
name: "tiny"
state {
  phase: TEST
}
layer {
  name: "data"
  include {
    phase: TRAIN
  }
}
I0111 18:29:31.2 12987 layer_factory.hpp:77] Creating layer data
I0111 18:29:31.2 12987 net.cpp:100] Creating Layer data
I0111 18:29:31.2 12987 net.cpp:408] data -> data
I0111 18:29:31.2 12987 net.cpp:408] data -> label
I0111 18:29:31.2 12987 net.cpp:150] Setting up data
I0111 18:29:31.2 12987 net.cpp:157] Top shape: 2 3 4 5 (120)
I0111 18:29:31.2 12987 net.cpp:157] Top shape: 2 (2)
I0111 18:29:31.2 12987 net.cpp:165] Memory required for data: 488
I0111 18:29:31.2 12987 net.cpp:100] Creating Layer relu
I0111 18:29:31.2 12987 net.cpp:434] relu <- data
I0111 18:29:31.2 12987 net.cpp:395] relu -> data (in-place)
I0111 18:29:31.2 12987 net.cpp:150] Setting up relu
I0111 18:29:31.2 12987 net.cpp:157] Top shape: 2 3 4 5 (120)
I0111 18:29:31.2 12987 net.cpp:165] Memory required for data: 968
I0111 18:29:31.2 12987 net.cpp:283] Network initialization done.
"""


def test_reader_takes_the_phase_from_the_top_level_state_only():
    (net,) = logparse.parse(SAMPLE)
    assert net.phase == "TEST"  # the layer's include { phase: TRAIN } is not the net's state


def test_reader_collects_layers_tops_shapes_and_memory():
    (net,) = logparse.parse(SAMPLE)
    assert [l.name for l in net.layers] == ["data", "relu"]
    assert net.layer("data").tops == ["data", "label"]
    assert net.layer("relu").bottoms == ["data"] and net.layer("relu").tops == ["data"]
    assert net.layer("data").shapes == [(2, 3, 4, 5), (2,)]
    # (120 + 2) * 4 = 488, then + 120 * 4 = 968: Caffe counts the in-place top again
    assert [l.memory for l in net.layers] == [488, 968]
    assert net.memory == 968
    assert net.data_inputs() == ["data=2x3x4x5", "label=2"]


def test_reader_rejects_a_top_shape_whose_count_does_not_add_up():
    with pytest.raises(ValueError):
        logparse.parse(SAMPLE.replace("Top shape: 2 (2)", "Top shape: 2 (3)"))


def test_difference_names_the_first_layer_that_differs():
    (expected,) = logparse.parse(SAMPLE)
    (got,) = logparse.parse(SAMPLE.replace("Top shape: 2 3 4 5 (120)\nI0111 18:29:31.2 12987 net.cpp:165] "
                                           "Memory required for data: 968",
                                           "Top shape: 2 3 4 6 (144)\nI0111 18:29:31.2 12987 net.cpp:165] "
                                           "Memory required for data: 1064"))
    assert "layer 'relu'" in logparse.first_difference(expected, got)
    assert logparse.first_difference(expected, expected) is None
