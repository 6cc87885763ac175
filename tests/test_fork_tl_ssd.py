"""The traffic-light SSD's Caffe (julimueller/tl_ssd, be5ae7f): its schema, its PriorBox and DetectionOutput
held against their source, and its deploy net (tests/data/forks/tl_ssd/deploy.prototxt, SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/layers/prior_box_layer.cpp: no
implicit aspect ratio 1, only the given ratios and, with flip, their inverses (:20-38); priors per location
= ratios * min sizes * offset_w's * offset_h's (:50); max_size must match min_size in number but adds none
(:51-59); the top is (1, 2, H * W * priors * 4) (:121-132). And from detection_output_layer.cpp:176-193 and
detection_output_layer.cu:49-59 for the states.
"""
import json
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit import build_nets
from protoaudit.errors import InputError

DEPLOY = os.path.join(DATA, "forks", "tl_ssd", "deploy.prototxt")
F = 4  # bytes per float


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "tl_ssd.proto")).read()
    assert text.startswith("// julimueller/tl_ssd, src/caffe/proto/caffe.proto at commit "
                           "be5ae7f7682a5b026fac5fed4d8b801c4d593210 ")
    body = text.split("\n", 2)[2]
    assert "  repeated float offset_w = 13;\n  repeated float offset_h = 14;\n" in body
    assert "optional float offset = 13" not in body


def priors(tmp_path, fields):
    """Priors per location of one PriorBox on a 4 x 5 map of a 64 x 80 image."""
    net = build_text(tmp_path, f"""
        layer {{ name: "in" type: "Input" top: "f" top: "img"
          input_param {{ shape {{ dim: 1 dim: 8 dim: 4 dim: 5 }} shape {{ dim: 1 dim: 3 dim: 64 dim: 80 }} }} }}
        layer {{ name: "p" type: "PriorBox" bottom: "f" bottom: "img" top: "p" prior_box_param {{ {fields} }} }}
        """, schema="tl_ssd")
    shape = tops(net, "p")[0]
    assert shape[:2] == (1, 2) and shape[2] % (4 * 5 * 4) == 0
    return shape[2] // (4 * 5 * 4)


def test_priors_are_ratios_times_sizes_times_offsets(tmp_path):
    """One ratio 0.3, seven min sizes, one offset each way: 1 * 7 * 1 * 1 = 7 (SSD would add ratio 1: 14).
    Ratios 2 flipped (2, 1/2) and 2 again, two min sizes, offset_w 0.25 and 0.75, offset_h 0.5: 2*2*2*1 = 8.
    Ratio 1 with flip (the proto's default) keeps 1 and its inverse, 1 again (:32-37, no check on the
    inverse): 2 ratios * 2 min sizes = 4, and the two max sizes add nothing; without flip, 2."""
    sizes = " ".join(f"min_size: {s}" for s in (7, 10, 15, 25, 35, 50, 70))
    assert priors(tmp_path, f"{sizes} aspect_ratio: 0.3 flip: false offset_w: 0.5 offset_h: 0.5") == 7
    assert priors(tmp_path, "min_size: 8 min_size: 16 aspect_ratio: 2 aspect_ratio: 2 flip: true "
                            "offset_w: 0.25 offset_w: 0.75 offset_h: 0.5") == 8
    assert priors(tmp_path, "min_size: 8 min_size: 16 max_size: 12 max_size: 24 aspect_ratio: 1 "
                            "offset_w: 0.5 offset_h: 0.5") == 4
    assert priors(tmp_path, "min_size: 8 min_size: 16 max_size: 12 max_size: 24 aspect_ratio: 1 flip: false "
                            "offset_w: 0.5 offset_h: 0.5") == 2


def test_no_offset_or_no_ratio_is_an_empty_top_and_refused(tmp_path):
    """With no offset_w (or no aspect_ratio) num_priors_ is 0 and Reshape's CHECK_GT(top_shape[2], 0) stops."""
    with pytest.raises(InputError, match="no priors per location"):
        priors(tmp_path, "min_size: 8 aspect_ratio: 1 offset_h: 0.5")
    with pytest.raises(InputError, match="no priors per location"):
        priors(tmp_path, "min_size: 8 offset_w: 0.5 offset_h: 0.5")
    with pytest.raises(InputError, match=r"offset_w must lie in \[0, 1\]"):
        priors(tmp_path, "min_size: 8 aspect_ratio: 1 offset_w: 1.5 offset_h: 0.5")


def test_deploy_net_audits_as_the_fork_with_no_flag():
    """The deploy net reads 1 x 3 x 512 x 2048. Its stem, by hand (Caffe's pooling rounds up):
    conv1 k3 s2 -> 255 x 1023; conv2 k3 -> 253 x 1021; conv3 k3 pad 1 -> same; pool1 k3 s2 -> 126 x 510;
    conv4 k3 -> 124 x 508; pool2 k3 s2 -> 62 x 254; reduction_a (pool k3 s2, conv k3 s2 pad 1) -> 31 x 127.
    The one PriorBox on inception_b4_concat_norm: 31 * 127 = 3,937 cells x 7 priors = 27,559 priors,
    which its location (28 = 7 x 4), confidence (14 = 7 x 2) and state (42 = 7 x 6) layers predict."""
    r = run_in_process(DEPLOY, "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {n["caffe_proto"] for n in out["nets"]} == {"tl_ssd"}
    net = build_nets(DEPLOY, phase="TEST")[0]
    cells = 31 * 127
    assert tops(net, "inception_b4_concat_norm_mbox_priorbox") == [(1, 2, cells * 7 * 4)]
    assert tops(net, "mbox_priorbox") == [(1, 2, 27559 * 4)]
    assert tops(net, "detection_out") == [(1, 1, 1, 7)]
    # on the GPU the states are permuted into state_permute_, the state scores' size (1 x 27,559 x 6)
    assert layer_buffers(net, "detection_out")[("state_permute_", "device")] == 27559 * 6 * F
    r = run_in_process(DEPLOY)
    assert r.returncode == 0, r.stderr


def test_state_count_is_checked_against_the_priors(tmp_path):
    """detection_output_layer.cpp:181-184: num_priors_ * num_states_ must equal bottom 3's channels."""
    text = open(DEPLOY).read().replace("num_states: 6", "num_states: 5")
    (tmp_path / "n.prototxt").write_text(text)
    r = run_in_process("n.prototxt", cwd=tmp_path)
    assert r.returncode == 2
    assert "Number of priors must match number of state predictions: 27559 priors x 5 states != 165354" in r.stderr


def test_multibox_loss_is_refused(tmp_path):
    """multibox_loss_layer.cpp:107-145 sets up a state loss layer whatever the fields say: not sized here."""
    with pytest.raises(InputError, match="adds a state loss layer"):
        build_text(tmp_path, """
            input: "loc" input_shape { dim: 2 dim: 8 }
            input: "conf" input_shape { dim: 2 dim: 4 }
            input: "pri" input_shape { dim: 1 dim: 2 dim: 8 }
            input: "gt" input_shape { dim: 1 dim: 1 dim: 2 dim: 8 }
            layer { name: "l" type: "MultiBoxLoss" bottom: "loc" bottom: "conf" bottom: "pri" bottom: "gt" top: "l"
              multibox_loss_param { num_classes: 2 } }
            """, schema="tl_ssd")
