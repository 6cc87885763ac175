"""JFDA's MTCNN loss for BVLC Caffe (luoyetx/Joint-Face-Detection-and-Alignment f4f843b): its schema,
JfdaLoss held against its source, and the repository's real log (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's layers/caffe.proto, jfda_loss_layer.hpp,
.cpp and .cu, cited by file and line, or are the lines Caffe logged (1130.log).
"""
import os
import re

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from logparse import parse
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers

HERE = os.path.join(DATA, "python_mtcnn")
LOG = os.path.join(HERE, "luoyetx", "1130_net_init.log")
F = 4  # bytes per float
GLOG = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ [^\]]+\] ?")
LINES = re.compile(r"^(Creating Layer|Setting up|Top shape|Memory required for data)")


def log_lines(text):
    """The lines of Net::Init's set-up that a Caffe log and --caffe-log both print."""
    return [line for line in (GLOG.sub("", raw) for raw in text.splitlines()) if LINES.match(line)]


def loss_net(n=6, bottoms=6, extra=""):
    """JfdaLoss on n samples: a 2-way score, 4 box and 10 landmark predictions, their targets, labels."""
    shapes = {"score": (n, 2), "bbox_pred": (n, 4), "landmark_pred": (n, 10), "bbox_target": (n, 4),
              "landmark_target": (n, 10), "label": (n,)}
    text = ""
    for name, shape in shapes.items():
        text += f'input: "{name}" input_shape {{ {" ".join(f"dim: {d}" for d in shape)} }}\n'
    # the three predictions come from InnerProducts, so the loss gets a backward
    text += ('layer { name: "s" type: "InnerProduct" bottom: "score" top: "s" inner_product_param { num_output: 2 } }\n'
             'layer { name: "b" type: "InnerProduct" bottom: "bbox_pred" top: "b" inner_product_param { num_output: 4 } }\n'
             'layer { name: "l" type: "InnerProduct" bottom: "landmark_pred" top: "l" '
             'inner_product_param { num_output: 10 } }\n')
    names = ["s", "b", "l", "bbox_target", "landmark_target", "label"][:bottoms]
    text += ('layer { name: "loss" type: "JfdaLoss" ' + " ".join(f'bottom: "{b}"' for b in names)
             + ' top: "c" top: "r" top: "m" top: "neg" top: "pos" loss_weight: 1 loss_weight: 0.5 loss_weight: 0.5 '
             f'loss_weight: 0 loss_weight: 0 {extra}}}\n')
    return text


def test_the_proto_is_bvlcs_with_the_repositorys_two_additions_verbatim():
    """layers/caffe.proto (f4f843b) holds two additions, its lines 6-7 and 10-12: the LayerParameter
    field jfda_loss_param = 23333 with its comment, and JfdaLossParameter's drop_loss_rate (default 0)."""
    text = open(os.path.join(ROOT, "proto", "forks", "jfda.proto")).read()
    assert text.startswith("// luoyetx/Joint-Face-Detection-and-Alignment (JFDA: MTCNN training with Caffe and "
                           "Python), layers/caffe.proto at commit f4f843bb0e968eb8e44006a9c767f86d6e15da9f:")
    body = text.split("\n", 2)[2].splitlines()
    bvlc = open(os.path.join(ROOT, "proto", "caffe.proto")).read().splitlines()
    added = ["  // 23333 may need to be changed due to caffe's proto", "  optional JfdaLossParameter jfda_loss_param = 23333;",
             "", "message JfdaLossParameter {",
             "  optional float drop_loss_rate = 1 [default = 0]; // online hard mining drop rate", "}"]
    assert [line for line in body if line not in bvlc] == [added[0], added[1], added[3], added[4]]
    assert len(body) == len(bvlc) + 6
    end = body.index(added[1])
    assert body[end + 1] == "}" and body[:end - 1] == bvlc[:end - 1]  # the field ends LayerParameter
    assert body[-4:] == added[2:]


def test_jfda_loss_tops_are_five_scalars(tmp_path):
    """Reshape (cpp:56-61): every top is reshaped to vector<int>(0), shape (), which Caffe logs as
    'Top shape: (1)'; the loss weights are the file's alone (a Layer, not a LossLayer, hpp:35)."""
    net = build_text(tmp_path, loss_net(), schema="jfda")
    assert tops(net, "loss") == [()] * 5
    assert tuple(net.layer("loss").loss_weights) == (1, 0.5, 0.5, 0, 0)
    bare = build_text(tmp_path, loss_net().replace("loss_weight: 1 loss_weight: 0.5 loss_weight: 0.5 "
                                                   "loss_weight: 0 loss_weight: 0 ", ""), schema="jfda")
    assert not any(bare.layer("loss").loss_weights)


def test_jfda_loss_buffers_by_hand(tmp_path):
    """Reshape sizes mask_ like the label (6), prob_ like the score (6 x 2 = 12), bbox_diff_ like bottom 1
    (6 x 4 = 24) and landmark_diff_ like bottom 2 (6 x 10 = 60) (cpp:52-55). Forward_gpu calls
    Forward_cpu (.cu:8-11), which writes all four through mutable_cpu_data (cpp:101, 148, 180, 199):
    they are host memory in GPU mode too, and no device memory of the layer's own."""
    net = build_text(tmp_path, loss_net(), schema="jfda")
    want = {("prob_", "host"): 12 * F, ("bbox_diff_", "host"): 24 * F, ("landmark_diff_", "host"): 60 * F,
            ("mask_", "host"): 6 * F}
    assert layer_buffers(net, "loss") == want
    assert layer_buffers(net, "loss", mode="cpu") == want


def test_jfda_loss_backward_writes_the_three_predictions_diffs(tmp_path):
    """Backward_cpu (cpp:227-288) writes bottom 0's, 1's and 2's cpu_diff: 6 x 2, 6 x 4 and 6 x 10 floats,
    never the targets' or the label's (bottoms 3-5)."""
    net = build_text(tmp_path, loss_net(), schema="jfda")
    got = {b.owner: b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "loss"
           and b.kind == "top diff" and b.touch == "backward"}
    assert got == {"s": 12 * F, "b": 24 * F, "l": 60 * F}


def test_jfda_loss_takes_six_bottoms_exactly(tmp_path):
    """ExactNumBottomBlobs 6 (hpp:47)."""
    with pytest.raises(InputError, match="6"):
        build_text(tmp_path, loss_net(bottoms=5), schema="jfda")


def test_a_file_with_jfda_loss_is_read_as_jfda():
    """The repository's nets (and zyc3136/MTCNN's copy of the o net) use jfda_loss_param: read with
    the jfda schema, their drop_loss_rate is 0.3."""
    net = build_nets(os.path.join(HERE, "luoyetx", "proto", "r_train_val.prototxt"), phase="train")[0]
    assert net.schema == "jfda"
    assert net.layer("loss").lp.jfda_loss_param.drop_loss_rate == pytest.approx(0.3)


def test_the_real_log_is_reproduced_line_for_line():
    """1130.log (cut to the p net's set-up) ran proto/p_train_val.prototxt: both nets' Top shape lines
    and every "Memory required for data" figure come back, the loss's five '(1)' tops among them
    (20 bytes more than the layer before it)."""
    text = open(LOG).read()
    r = run_in_process(LOG, "--caffe-log")
    assert r.returncode == 0, r.stderr
    assert log_lines(r.stdout) == log_lines(text)
    nets = parse(text)
    for logged in nets:
        loss = logged.layer("loss")
        assert loss.shapes == [()] * 5
        before = logged.layers[logged.layers.index(loss) - 1]
        assert loss.memory == before.memory + 5 * F


def test_the_p_net_file_with_the_logs_batch_gives_the_logs_train_lines():
    """The log's setup batch is 4 (data_layer.py:48-55, tests/test_python_mtcnn.py): with --batch 4
    the net file itself prints the train net's lines of the log, every one, down to its last
    "Memory required for data"."""
    train = log_lines(open(LOG).read().split("Initializing net from parameters", 2)[1])
    r = run_in_process(os.path.join(HERE, "luoyetx", "proto", "p_train_val.prototxt"), "--caffe-log",
                       "--batch", "4", "--phase", "train")
    assert r.returncode == 0, r.stderr
    assert log_lines(r.stdout) == train
    assert train[-1].startswith("Memory required for data: ")


@pytest.mark.parametrize("folder, file", [(("luoyetx", "proto"), "r_train_val.prototxt"),
                                          (("zyc3136", "proto"), "o_train_val.prototxt")])
def test_the_nets_audit_with_no_flags(folder, file):
    """Refused before on JfdaLoss; now audited, read with the jfda schema."""
    r = run_in_process(file, cwd=os.path.join(HERE, *folder))
    assert r.returncode in (0, 1), r.stderr
    assert "JFDA's MTCNN loss" in r.stdout
