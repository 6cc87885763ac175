"""A FaceBoxes Caffe with fixed-size anchors (zihaozhang9/FaceBoxes, b895ea7): the SSD fork whose PriorBox
reads fixed_size, fixed_ratio and density, and its train and deploy nets
(tests/data/forks/faceboxes_fixed/, SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/layers/prior_box_layer.cpp: the
ratios are SSD's (1, then each new one and, with flip, its inverse, :42-60); priors = ratios * min sizes,
or ratios * fixed sizes where fixed_size is given (:62-68); each density d adds (fixed ratios, else
ratios) * (d^2 - 1) (:70-80); each max_size one (:82-90); the top is (1, 2, H * W * priors * 4) (:145-160).
"""
import json
import os

import pytest

from conftest import DATA, ROOT, build_text, run_in_process, tops
from protoaudit import build_nets
from protoaudit.errors import InputError

HERE = os.path.join(DATA, "forks", "faceboxes_fixed")
TRAIN = os.path.join(HERE, "train.prototxt")
DEPLOY = os.path.join(HERE, "faceboxes_deploy.prototxt")


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "faceboxes_fixed.proto")).read()
    assert text.startswith("// zihaozhang9/FaceBoxes, src/caffe/proto/caffe.proto at commit "
                           "b895ea789a61d611dd960d2427e26bcf5d84f41d,\n")
    body = text.split("\n", 2)[2]
    for field in ("repeated float fixed_size = 14;", "repeated float fixed_ratio = 15;",
                  "repeated float density = 16;"):
        assert field in body


def priors(tmp_path, fields):
    """Priors per location of one PriorBox on a 4 x 5 map of a 64 x 80 image."""
    net = build_text(tmp_path, f"""
        layer {{ name: "in" type: "Input" top: "f" top: "img"
          input_param {{ shape {{ dim: 1 dim: 8 dim: 4 dim: 5 }} shape {{ dim: 1 dim: 3 dim: 64 dim: 80 }} }} }}
        layer {{ name: "p" type: "PriorBox" bottom: "f" bottom: "img" top: "p" prior_box_param {{ {fields} }} }}
        """, schema="faceboxes_fixed")
    shape = tops(net, "p")[0]
    assert shape[:2] == (1, 2) and shape[2] % (4 * 5 * 4) == 0
    return shape[2] // (4 * 5 * 4)


def test_fixed_sizes_and_densities(tmp_path):
    """FaceBoxes' first layer: fixed sizes 32, 64, 128 with densities 4, 2, 1 and ratio 1 alone:
    1 * 3 + 1 * (16 - 1) + 1 * (4 - 1) + 1 * (1 - 1) = 21. Ratio 2 flipped (1, 2, 1/2) with fixed size 32,
    density 2: 3 * 1 + 3 * 3 = 12; with fixed_ratio 1 instead of aspect ratios, density 2: 1 + 1 * 3 = 4.
    min_size alone is SSD's count (1 * 2 + 2 max sizes = 4)."""
    assert priors(tmp_path, "fixed_size: 32 fixed_size: 64 fixed_size: 128 density: 4 density: 2 density: 1") == 21
    assert priors(tmp_path, "fixed_size: 32 density: 2 aspect_ratio: 2 flip: true") == 12
    assert priors(tmp_path, "fixed_size: 32 density: 2 fixed_ratio: 1") == 4
    assert priors(tmp_path, "min_size: 32 min_size: 64 max_size: 64 max_size: 128") == 4


def test_the_forks_checks(tmp_path):
    with pytest.raises(InputError, match="if use fixed_size then you must provide density"):
        priors(tmp_path, "fixed_size: 32")
    with pytest.raises(InputError, match="can not provide fixed_ratio and aspect_ratio simultaneously"):
        priors(tmp_path, "fixed_size: 32 density: 1 fixed_ratio: 1 aspect_ratio: 2")
    with pytest.raises(InputError, match="give min_size or fixed_size"):
        priors(tmp_path, "density: 1")


def test_train_net_audits_as_the_fork_with_no_flag():
    """The train net warps to 1024 x 1024. By hand: conv1 k7 s4 pad 3 -> 256; pool1 k3 s2 (rounding up) ->
    128; conv2 k5 s2 pad 3 -> 65; pool2 k3 s2 -> 32; conv3_2 k3 s2 pad 1 -> 16; conv4_2 the same -> 8.
    32 x 32 cells of 21 priors, 16 x 16 and 8 x 8 of one (fixed sizes 256 and 512, density 1):
    21,504 + 256 + 64 = 21,824 priors."""
    r = run_in_process(TRAIN, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["nets"][0]["caffe_proto"] == "faceboxes_fixed"
    net = build_nets(TRAIN)[0]
    assert tops(net, "inception3_priorbox") == [(1, 2, 32 * 32 * 21 * 4)]
    assert tops(net, "conv3_2_priorbox") == [(1, 2, 16 * 16 * 4)]
    assert tops(net, "mbox_priorbox") == [(1, 2, 21824 * 4)]
    assert run_in_process(TRAIN).returncode == 0


def test_deploy_net_audits_as_the_fork_with_no_flag():
    """The deploy net's input is 1 x 3 x 1024 x 1024, the same stem: 21,824 priors."""
    r = run_in_process(DEPLOY, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert {n["caffe_proto"] for n in json.loads(r.stdout)["nets"]} == {"faceboxes_fixed"}
    net = build_nets(DEPLOY, phase="TEST")[0]
    assert tops(net, "mbox_priorbox") == [(1, 2, 21824 * 4)]
