"""RefineDet's Caffe (sfzhang15/RefineDet, 52b6fe2): the SSD fork whose MultiBoxLoss and DetectionOutput
also read the anchor refinement module's outputs, and RefineDet's VGG16 at 512 x 512 as its scripts
write it (tests/data/forks/refinedet_vgg16_512_*.prototxt, SOURCES.md).

From that commit's sources: caffe.proto is SSD's with `objectness_score` added to MultiBoxLossParameter
and DetectionOutputParameter; MultiBoxLossLayer takes any number of bottoms (ExactNumBottomBlobs -1)
and reads a fifth (the module's confidences) and a sixth (its locations) in forward
(multibox_loss_layer.cpp:152-162), with no gradient for them; DetectionOutputLayer takes 3 to 5
(MinBottomBlobs 3, MaxBottomBlobs 5) and reads the fourth and fifth (detection_output_layer.cpp:190-197).
Neither allocates anything SSD's does not: their buffers are SSD's, which tests/test_fork_ssd.py holds
against the SSD fork's heap.
"""
import os
import re

from conftest import DATA, ROOT, build_text, by_layer, run_in_process, tops
from protoaudit import build_nets
from protoaudit.memory.buffers import layer_touches, net_buffers, runs_backward

TRAIN = os.path.join(DATA, "forks", "refinedet_vgg16_512_train.prototxt")
DEPLOY = os.path.join(DATA, "forks", "refinedet_vgg16_512_deploy.prototxt")
ADDED = "  //the objectness score is used for the anchor refinement module to filter easy negative anchor.\n" \
        "  optional float objectness_score = 24 [default = 0.01];\n"


def test_the_proto_is_ssds_with_objectness_score_in_two_messages():
    text = open(os.path.join(ROOT, "proto", "forks", "refinedet.proto")).read()
    assert text.startswith("// sfzhang15/RefineDet, src/caffe/proto/caffe.proto at commit "
                           "52b6fe23dc1a160fe710b7734576dca509bf4fae,\n")
    body = text.split("\n", 3)[3]
    ssd = open(os.path.join(ROOT, "proto", "forks", "ssd.proto")).read().split("\n", 2)[2]
    assert body.count(ADDED) == 2
    assert body.replace("\n\n" + ADDED, "\n").replace(ADDED, "") == ssd


def test_the_train_net_is_read_as_refinedet_with_no_flag():
    """At 512 x 512, the four PriorBox layers sit on 64 x 64, 32 x 32, 16 x 16 and 8 x 8 maps (strides
    8 to 64), each with min_size and aspect ratio 2 flipped: 3 priors per cell, so
    (4096 + 1024 + 256 + 64) x 3 = 16,320 priors; the refined detector's confidences are 16,320 x 81
    (COCO) per image."""
    r = run_in_process(TRAIN, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert '"caffe_proto": "refinedet"' in r.stdout
    net = build_nets(TRAIN, schema="refinedet")[0]
    assert tops(net, "arm_priorbox") == [(1, 2, 16320 * 4)]
    assert tops(net, "odm_conf") == [(10, 16320 * 81)]
    assert len(net.layer("odm_loss").bottom_shapes) == 6
    refused = run_in_process(TRAIN, "--fork", "ssd")
    assert refused.returncode == 2
    assert 'no field named "objectness_score"' in refused.stderr and "refinedet has the field" in refused.stderr


def _as_ssd(text):
    """The train net as SSD's fork writes it: no objectness_score, and the refined loss given only its
    first four bottoms (and four propagate_down)."""
    text = re.sub(r"\n\s*objectness_score: [\d.]+", "", text)
    at = text.index('name: "odm_loss"')
    head, block = text[:at], text[at:]
    block = block.replace('  bottom: "arm_conf_flatten"\n', "", 1).replace('  bottom: "arm_loc"\n', "", 1)
    block = block.replace("  propagate_down: false\n", "", 2)
    return head + block


def test_the_losses_allocate_what_ssds_multibox_loss_does(tmp_path):
    """Each MultiBoxLoss allocates what SSD's does on its first four bottoms (the extra two are read,
    never given a gradient, and only lower the counts of matched priors and negatives protoaudit
    takes at their most), and forward reads the fifth and sixth bottoms."""
    text = open(TRAIN).read()
    refinedet = build_nets(TRAIN, schema="refinedet")[0]
    ssd = build_text(tmp_path, _as_ssd(text), schema="ssd")
    mine = by_layer(net_buffers(refinedet, mode="cpu", backward=runs_backward(refinedet)))
    theirs = by_layer(net_buffers(ssd, mode="cpu", backward=runs_backward(ssd)))
    for loss in ("arm_loss", "odm_loss"):
        assert mine[loss] == theirs[loss] and mine[loss]["forward"] > 0
    touched = layer_touches(refinedet.layer("odm_loss"), "gpu", "caffe")
    read = {(x.index, x.part, x.stage) for x in touched if x.what == "bottom"}
    assert {(4, "data", "forward"), (5, "data", "forward")} <= read


def test_the_deploy_net_keeps_at_most_keep_top_k_detections():
    """detection_out reads five bottoms (the refined locations and confidences, the priors, the
    module's confidences and locations); keep_top_k 200 of 80 classes x top_k 400 per image."""
    r = run_in_process(DEPLOY, "--format", "json")
    assert r.returncode == 0, r.stderr
    net = build_nets(DEPLOY, schema="refinedet", phase="TEST")[0]
    out = net.layer("detection_out")
    assert len(out.bottom_shapes) == 5
    assert out.impl.kept(1, 16320) == 200


def test_a_refinedet_net_with_a_borrowed_layer_type_audits(tmp_path):
    """A RefineDet net whose Caffe added MobileNet-YOLO's DepthwiseConvolution (one more layer on
    conv6_2, 256 channels) is read with RefineDet's fields and that layer borrowed; its losses build
    their inner layers from RefineDet's schema."""
    text = open(TRAIN).read()
    extra = ('layer { name: "dw" type: "DepthwiseConvolution" bottom: "conv6_2" top: "dw"\n'
             '  convolution_param { num_output: 256 group: 256 kernel_size: 3 pad: 1 } }\n')
    (tmp_path / "n.prototxt").write_text(text + extra)
    r = run_in_process("n.prototxt", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "DepthwiseConvolution as MobileNet-YOLO's Caffe" in r.stdout


def test_a_check_names_only_the_assumptions_that_feed_its_layer(tmp_path):
    """arm_loss given three bottoms and four propagate_down fails Net::Init's check; the label size
    protoaudit assumed (one box per image) feeds no blob it reads, so the message does not blame it."""
    text = open(TRAIN).read()
    at = text.index('name: "arm_loss"')
    (tmp_path / "n.prototxt").write_text(text[:at] + text[at:].replace('  bottom: "label"\n', "", 1))
    r = run_in_process("n.prototxt", cwd=tmp_path)
    assert r.returncode == 2 and "propagate_down must be given either 0 or bottom_size times" in r.stderr
    assert "Caffe stops here too" in r.stderr and "assumed" not in r.stderr
