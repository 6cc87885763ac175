"""SSD's Caffe with a focal loss (jiachen0212/ssd-focal_loss_caffe, 071bfb3): its schema, FocalLoss and
MultiBoxFocalLoss held against their source, its SSD300 train net and the real log of that net's run
with SSD's MultiBoxLoss (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's caffe.proto, focal_loss_layer.hpp/.cpp/.cu
and multibox_focal_loss_layer.hpp/.cpp, cited by file and line, which differ from weiliu89/caffe
4817bf8's softmax_loss_layer.* and multibox_loss_layer.* only in names, in reading alpha and gamma, and
in the arithmetic of each element's loss and gradient.
"""
import difflib
import json
import os
import re

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.read.load import load

HERE = os.path.join(DATA, "forks", "ssd_focal")
NET = os.path.join(HERE, "train.prototxt")
LOG = os.path.join(HERE, "normal.log")
F = 4  # bytes per float
PRIORS = 38 * 38 * 4 + 19 * 19 * 6 + 10 * 10 * 6 + 5 * 5 * 6 + 3 * 3 * 4 + 1 * 1 * 4
GLOG = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ [^\]]+\] ?")
LINES = re.compile(r"^(Creating Layer|Setting up|Top shape|Memory required for data)")


def log_lines(text):
    """The lines of Net::Init's set-up that a Caffe log and --caffe-log both print."""
    return [line for line in (GLOG.sub("", raw) for raw in text.splitlines()) if LINES.match(line)]


def loss_net(extra="", axis=""):
    """A 1x1 convolution's 7 classes on a 3 x 4 map into a FocalLoss with its labels."""
    return ('input: "x" input_shape { dim: 2 dim: 5 dim: 3 dim: 4 }\n'
            'input: "y" input_shape { dim: 2 dim: 1 dim: 3 dim: 4 }\n'
            'layer { name: "s" type: "Convolution" bottom: "x" top: "s" '
            f'convolution_param {{ num_output: 7 kernel_size: 1 {extra}}} }}\n'
            'layer { name: "loss" type: "FocalLoss" bottom: "s" bottom: "y" top: "loss" '
            f'focal_loss_param {{ alpha: 0.5 gamma: 1 {axis}}} }}\n')


def test_the_proto_is_ssds_with_the_focal_loss_and_three_fields_no_code_reads():
    """caffe.proto at the repository's root, verbatim: SSD's (weiliu89 4817bf8) with focal_loss_param
    = 147 and relu6_param = 208 in LayerParameter, half_pad in ConvolutionParameter, reduce_boxes in
    PriorBoxParameter, FocalLossParameter (alpha 0.25, gamma 2, axis 1) and ReLU6Parameter; one
    comment changed (the next free LayerParameter ID)."""
    text = open(os.path.join(ROOT, "proto", "forks", "ssd_focal.proto")).read()
    assert text.startswith("// jiachen0212/ssd-focal_loss_caffe, caffe.proto at commit "
                           "071bfb33156be3630e74962f4c84bc88ebba7069 ")
    body = text.split("\n", 2)[2].splitlines()
    ssd = open(os.path.join(ROOT, "proto", "forks", "ssd.proto")).read().split("\n", 2)[2].splitlines()
    diff = [d for d in difflib.ndiff(ssd, body) if d[:2] in ("- ", "+ ")]
    assert [d for d in diff if d.startswith("- ")] == [
        "- // LayerParameter next available layer-specific ID: 147 (last added: recurrent_param)"]
    added = {d[2:].strip() for d in diff if d.startswith("+ ")}
    for line in ("optional FocalLossParameter focal_loss_param = 147;", "optional ReLU6Parameter relu6_param = 208;",
                 "optional bool half_pad = 19 [default = false];", "optional bool reduce_boxes = 14 [default = false];",
                 "message FocalLossParameter {", "optional float alpha = 3 [default = 0.25];",
                 "optional float gamma = 4 [default = 2.0];", "optional int32 axis = 2 [default = 1];",
                 "message ReLU6Parameter {"):
        assert line in added, line


def test_the_train_net_audits_with_no_flags():
    """SSD300: priors on conv4_3 38 x 38 (4 each: aspect ratios 1, 2, 1/2 and one max_size), fc7
    19 x 19, conv6_2 10 x 10 and conv7_2 5 x 5 (6 each: 1, 2, 1/2, 3, 1/3 and a max_size), conv8_2
    3 x 3 and conv9_2 1 x 1 (4 each): 5,776 + 2,166 + 600 + 150 + 36 + 4 = 8,732 priors; 21 VOC
    classes; batch 16."""
    assert PRIORS == 8732
    r = run_in_process(NET)
    assert r.returncode == 0, r.stderr
    assert "Read with the caffe.proto of SSD's Caffe with a focal loss" in r.stdout
    net = build_nets(NET)[0]
    assert net.schema == "ssd_focal"
    assert tops(net, "mbox_priorbox") == [(1, 2, PRIORS * 4)]
    assert tops(net, "mbox_loc") == [(16, PRIORS * 4)]
    assert tops(net, "mbox_conf") == [(16, PRIORS * 21)]
    assert tops(net, "mbox_loss") == [()]  # LossLayer's scalar


def test_the_focal_loss_allocates_what_ssds_softmax_loss_does():
    """mining_type NONE (the repository's net): every prior of every image is a confidence row,
    K = 16 x 8,732 = 139,712 (cpp:209-211), and at most every prior is matched, M = K. loc_pred_,
    loc_gt_ and the SmoothL1Loss's diff_ and errors_ are (1, 4M) (cpp:190-194); conf_gt_ (K) and
    conf_pred_ (K, 21), which shares the confidences' data (cpp:229-234), so owns only its diff
    (the inner loss's bottom diff). The inner FocalLoss, NAME_focal_conf (cpp:103-119), keeps prob_
    (K, 21), whose diff holds the GPU counts (.cu:47), and its Softmax's scale_ (K) and 21 ones on the
    host. The match lists: 16 x (48 + 24) bytes on the host."""
    net = build_nets(NET)[0]
    k = m = 16 * PRIORS
    assert k == 139_712
    got = layer_buffers(net, "mbox_loss")
    assert got == {
        ("loc_pred_", "device"): 4 * m * F, ("loc_gt_", "device"): 4 * m * F, ("loc_pred_.diff", "device"): 4 * m * F,
        ("smooth_L1_loc.diff_", "device"): 4 * m * F, ("smooth_L1_loc.errors_", "device"): 4 * m * F,
        ("loc_loss_", "device"): F, ("loc_loss_.diff", "device"): F,
        ("conf_gt_", "device"): k * F, ("conf_loss_", "device"): F, ("conf_loss_.diff", "device"): F,
        ("focal_conf.prob_", "device"): k * 21 * F, ("focal_conf.prob_.diff", "device"): k * 21 * F,
        ("focal_conf.scale_", "device"): k * F, ("focal_conf.sum_multiplier_", "host"): 21 * F,
        ("all_match_indices_, all_neg_indices_", "host"): 16 * (48 + 24),
    }
    assert got[("focal_conf.prob_", "device")] == 11_735_808


def test_the_net_as_ssds_multibox_loss_allocates_the_same(tmp_path):
    """The log's net is this one with MultiBoxLoss, no focal_loss_param and MAX_NEGATIVE mining: with
    either mining, the focal loss's buffers are SSD's under its inner layer's other name."""
    text = open(NET).read()
    for mining in ("NONE", "MAX_NEGATIVE"):
        focal = text.replace("mining_type: NONE", f"mining_type: {mining}")
        ssd = re.sub(r"focal_loss_param \{[^}]*\}", "", focal.replace('"MultiBoxFocalLoss"', '"MultiBoxLoss"'))
        mine = build_text(tmp_path, focal)
        theirs = build_text(tmp_path, ssd)
        assert (mine.schema, theirs.schema) == ("ssd_focal", "ssd")
        renamed = {(name.replace("softmax_conf", "focal_conf"), device): size
                   for (name, device), size in layer_buffers(theirs, "mbox_loss").items()}
        assert layer_buffers(mine, "mbox_loss") == renamed


def test_the_real_log_reads_as_ssd_and_is_reproduced_line_for_line():
    """normal.log ran this net with SSD's MultiBoxLoss: read as SSD's, its two nets' set-up lines (107
    layers of the TRAIN net to 4,010,197,924 bytes, 111 of the TEST net to 2,022,982,528) come back
    every one."""
    text = open(LOG).read()
    r = run_in_process(LOG, "--caffe-log")
    assert r.returncode == 0, r.stderr
    assert log_lines(r.stdout) == log_lines(text)
    memory = [line for line in log_lines(text) if line.startswith("Memory required")]
    assert len(memory) == 218
    assert "Memory required for data: 4010197924" in memory and memory[-1].endswith(" 2022982528")
    assert build_nets(LOG)[0].schema == "ssd"


def test_the_train_net_with_the_logs_data_gives_the_logs_lines():
    """The loss is the last layer Caffe sets up and its top is a scalar either way: with the log's
    data shapes (16 x 3 x 300 x 300 images, 1 x 1 x 5 x 8 boxes) the focal net prints the TRAIN net's
    lines of the log, every one."""
    train = log_lines(open(LOG).read().split("Initializing net from parameters", 2)[1])
    r = run_in_process(NET, "--caffe-log", "--input", "data=16x3x300x300", "--input", "label=1x1x5x8")
    assert r.returncode == 0, r.stderr
    assert log_lines(r.stdout) == train
    assert train[-1] == "Memory required for data: 4010197924"


def test_focal_loss_keeps_softmax_with_loss_buffers(tmp_path):
    """FocalLoss on (2, 7, 3, 4) along axis 1: 2 x 3 x 4 = 24 labels; prob_ and its diff (the GPU
    counts) 2 x 7 x 12 = 168 floats, the Softmax's scale_ 24 and its 7 ones on the host, as
    SoftmaxWithLoss's (focal_loss_layer.cpp:14-21, 55-58; .cu:44-47)."""
    net = build_text(tmp_path, loss_net(), schema="ssd_focal")
    assert tops(net, "loss") == [()]
    assert layer_buffers(net, "loss") == {("prob_", "device"): 168 * F, ("prob_.diff", "device"): 168 * F,
                                          ("scale_", "device"): 24 * F, ("sum_multiplier_", "host"): 7 * F}


def test_focal_loss_counts_labels_along_its_own_axis(tmp_path):
    """Reshape checks outer x inner along focal_loss_param.axis (cpp:45-54): along axis 2 the 2 x 7 x 4
    = 56 items do not match 24 labels."""
    with pytest.raises(InputError, match="number of labels must match"):
        build_text(tmp_path, loss_net(axis="axis: 2 "), schema="ssd_focal")


def test_a_file_whose_only_fork_type_is_focal_loss_is_read_with_the_fork_that_sizes_it(tmp_path):
    """caffe-priv's and happynear's caffe.proto also read focal_loss_param, for their own FocalLoss,
    which protoaudit does not size (they would build only around it, as an unknown type): the file is
    read with this fork, the one that sizes every layer, said with the others' --fork; the audit is
    the one --fork ssd_focal gives."""
    (tmp_path / "n.prototxt").write_text(loss_net())
    r = run_in_process("n.prototxt", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    said = [a for a in json.loads(r.stdout)["assumptions"] if "more than one Caffe fork" in a["assumption"]]
    assert len(said) == 1 and "ssd-focal_loss_caffe" in said[0]["assumption"] and "sizing every layer" in said[0]["assumption"]
    assert "--fork priv or --fork happynear" in json.dumps(said[0])
    chosen = run_in_process("n.prototxt", "--fork", "ssd_focal", "--format", "json", cwd=tmp_path)
    assert json.loads(chosen.stdout)["total_bytes"] == json.loads(r.stdout)["total_bytes"]


def test_ssds_nets_stay_ssds(tmp_path):
    """A net of SSD's types reads with both schemas and both size it: it stays SSD's (DESCENDS_FROM),
    as the log's nets and RefineDet's stay theirs."""
    text = re.sub(r"focal_loss_param \{[^}]*\}", "", open(NET).read().replace('"MultiBoxFocalLoss"', '"MultiBoxLoss"'))
    (tmp_path / "ssd.prototxt").write_text(text)
    assert load(str(tmp_path / "ssd.prototxt")).schema.name == "ssd"
    assert load(os.path.join(DATA, "forks", "refinedet_vgg16_512_train.prototxt")).schema.name == "refinedet"


@pytest.mark.parametrize("field, where", [("half_pad: true ", "convolution"), ("reduce_boxes: true ", "prior")])
def test_fields_no_published_code_reads_are_refused(tmp_path, field, where):
    """half_pad and reduce_boxes are in the fork's caffe.proto, but the repository publishes no code
    that reads them: a layer that sets one is refused, one that does not is sized as SSD's."""
    if where == "convolution":
        text = loss_net(extra=field)
    else:
        text = ('input: "x" input_shape { dim: 1 dim: 3 dim: 4 dim: 4 }\n'
                'layer { name: "p" type: "PriorBox" bottom: "x" bottom: "x" top: "p" '
                f'prior_box_param {{ min_size: 2 {field}}} }}\n')
    with pytest.raises(InputError, match=field.split(":")[0] + ": true: the repository publishes"):
        build_text(tmp_path, text, schema="ssd_focal")
    net = build_text(tmp_path, text.replace(field, ""), schema="ssd_focal")
    assert net.schema == "ssd_focal"
