"""TextBoxes' Caffe (MhLiao/TextBoxes fd4d7a9): the SSD fork of September 2016 whose PriorBox doubles
every prior, and TextBoxes' own deploy net (tests/data/forks/textboxes_deploy.prototxt, SOURCES.md;
the repository has no train net: examples/TextBoxes/train_icdar13.py writes one with pycaffe).

Expected values are derived by hand below from that commit's src/caffe/layers/prior_box_layer.cpp:
one min_size and at most one max_size; priors = aspect ratios (1 first, each given ratio and, with
flip, its inverse) + 1 with a max_size (:15-43), then twice that (:59: each prior has a copy
centred half a cell lower, :95-114); the top is (1, 2, H * W * priors * 4) (:65-76).
"""
import json
import os

from conftest import DATA, ROOT, build_text, run_in_process, tops
from protoaudit import build_nets
from protoaudit.memory.buffers import net_buffers

DEPLOY = os.path.join(DATA, "forks", "textboxes_deploy.prototxt")
F = 4


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "textboxes.proto")).read()
    assert text.startswith("// MhLiao/TextBoxes, src/caffe/proto/caffe.proto at commit "
                           "fd4d7a96dce686938a8485ea5c2e895df592610a,")
    assert "  optional float min_size = 1;" in text and "  optional bool do_neg_mining = 11 [default = true];" in text


def test_the_deploy_net_is_read_as_the_fork_with_no_flag():
    """The deploy net takes 700 x 700 images; its six PriorBox layers (min_size 30, then 60-276 with
    max_size 114-330; aspect ratios 2, 3, 5, 7, 10 unflipped) on maps of 88, 44, 22, 11, 6 and 1:
    conv4_3: 6 ratios, doubled 12 per location: 88*88*12 = 92,928 priors; the others 7, doubled
    14: (44^2 + 22^2 + 11^2 + 6^2 + 1) * 14 = 36,092. 129,020 priors, 516,080 coordinates, which its
    location layers predict (num_output 48 and 56: 12 and 14 priors x 4). SSD's PriorBox makes half,
    64,510, and SSD's Caffe stops at DetectionOutput; read as SSD's, the net is tried as TextBoxes'."""
    r = run_in_process(DEPLOY, "--format", "json", "--inference")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["nets"][0]["caffe_proto"] == "textboxes"
    said = [a for a in out["assumptions"] if a["override"] == "--fork ssd"]
    assert len(said) == 1 and "64510 priors x 1 x 4 != 516080" in said[0]["assumption"]
    net = build_nets(DEPLOY, schema="textboxes", phase="TEST")[0]
    assert tops(net, "conv4_3_norm_mbox_priorbox") == [(1, 2, 88 * 88 * 12 * 4)]
    assert tops(net, "fc7_mbox_priorbox") == [(1, 2, 44 * 44 * 14 * 4)]
    assert tops(net, "mbox_priorbox") == [(1, 2, 129020 * 4)]
    refused = run_in_process(DEPLOY, "--fork", "ssd")
    assert refused.returncode == 2 and "--fork textboxes" in refused.stderr


def test_detection_output_keeps_no_buffer():
    """detection_output_layer.cu:27-47: the decoded boxes and permuted confidences are Blobs local
    to Forward_gpu, freed when it returns; SSD's of 2018 keeps them as members (bbox_preds_,
    conf_permute_). The top, 200 detections of 7 floats at most (keep_top_k), is on the host."""
    net = build_nets(DEPLOY, schema="textboxes", phase="TEST")[0]
    mine = {b.owner: (b.bytes, b.device) for b in net_buffers(net, mode="gpu") if b.layer == "detection_out"}
    assert not [k for k in mine if "bbox_preds_" in k or "conf_permute_" in k]
    assert mine["detection_out"] == (7 * F, "host")
    assert mine["detection_out.top (kept detections)"] == (199 * 7 * F, "host")


TRAIN = """
layer { name: "in" type: "Input" top: "data" top: "label"
  input_param { shape { dim: 2 dim: 3 dim: 16 dim: 16 } shape { dim: 1 dim: 1 dim: 2 dim: 8 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "f" convolution_param { num_output: 4 kernel_size: 8 stride: 8 } }
layer { name: "loc" type: "Convolution" bottom: "f" top: "loc" convolution_param { num_output: 8 kernel_size: 1 } }
layer { name: "conf" type: "Convolution" bottom: "f" top: "conf" convolution_param { num_output: 4 kernel_size: 1 } }
layer { name: "loc_flat" type: "Flatten" bottom: "loc" top: "loc_flat" }
layer { name: "conf_flat" type: "Flatten" bottom: "conf" top: "conf_flat" }
layer { name: "prior" type: "PriorBox" bottom: "f" bottom: "data" top: "prior" prior_box_param { min_size: 4 } }
layer { name: "mbox_loss" type: "MultiBoxLoss" bottom: "loc_flat" bottom: "conf_flat" bottom: "prior" bottom: "label"
  top: "mbox_loss" multibox_loss_param { num_classes: 2 MINING } }
"""


def test_multibox_loss_mines_negatives_by_do_neg_mining(tmp_path):
    """A 2 x 2 map, min_size 4 alone: 1 prior doubled, 2 per location, 8 per image, batch 2.
    With one matched prior per image, do_neg_mining (the default) keeps at most neg_pos_ratio 3
    negatives per match (multibox_loss_layer.cpp:267-281): 2 matches and 6 negatives, 8 confidence
    rows of 2 classes (conf_pred_ 16 floats, conf_gt_ 8, cpp:347-359); without it every prior's row,
    16, with conf_pred_ sharing the confidences' data (cpp:343-346, 360-365)."""
    defines = {"matched_priors": "1"}
    net = build_text(tmp_path, TRAIN.replace("MINING", ""), schema="textboxes", defines=defines)
    assert tops(net, "prior") == [(1, 2, 2 * 2 * 2 * 4)]
    mine = {b.owner: b.elements for b in net_buffers(net, mode="gpu") if b.layer == "mbox_loss"}
    assert mine["mbox_loss.loc_pred_"] == 2 * 4 and mine["mbox_loss.conf_gt_"] == 8
    assert mine["mbox_loss.conf_pred_"] == 8 * 2
    net = build_text(tmp_path, TRAIN.replace("MINING", "do_neg_mining: false"), schema="textboxes", defines=defines)
    mine = {b.owner: b.elements for b in net_buffers(net, mode="gpu") if b.layer == "mbox_loss"}
    assert mine["mbox_loss.conf_gt_"] == 16 and "mbox_loss.conf_pred_" not in mine


def test_prior_box_counts_by_hand(tmp_path):
    """min_size 8, max_size 16, aspect ratio 2 flipped: 1, 2, 1/2 and the max: 4, doubled 8 per
    location; on a 3 x 5 map 3*5*8*4 = 480 coordinates. A max_size not above min_size is refused
    (cpp:41)."""
    text = """
layer { name: "in" type: "Input" top: "f" top: "img"
  input_param { shape { dim: 1 dim: 4 dim: 3 dim: 5 } shape { dim: 1 dim: 3 dim: 24 dim: 40 } } }
layer { name: "p" type: "PriorBox" bottom: "f" bottom: "img" top: "p"
  prior_box_param { min_size: 8 max_size: MAX aspect_ratio: 2 flip: true } }"""
    assert tops(build_text(tmp_path, text.replace("MAX", "16"), schema="textboxes"), "p") == [(1, 2, 480)]
    path = tmp_path / "bad.prototxt"
    path.write_text(text.replace("MAX", "8"))
    r = run_in_process(path, "--fork", "textboxes")
    assert r.returncode == 2 and "max_size must be greater than min_size" in r.stderr
