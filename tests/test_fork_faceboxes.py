"""FaceBoxes' Caffe (sfzhang15/FaceBoxes, b52cc92): the SSD fork with a PriorBox that densifies its small
anchors, and FaceBoxes' own nets (tests/data/forks/faceboxes_*.prototxt, SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/layers/prior_box_layer.cpp:
num_priors_ is 21 when min_size is given three times (:37-40), else SSD's count (aspect ratios times
min sizes), plus one per max_size (:41-49); the top is (1, 2, H * W * num_priors * 4) (:104-118).
"""
import json
import os

from conftest import DATA, ROOT, build_text, run_in_process, tops
from protoaudit import build_nets

TRAIN = os.path.join(DATA, "forks", "faceboxes_train.prototxt")
DEPLOY = os.path.join(DATA, "forks", "faceboxes_deploy.prototxt")


def test_the_proto_is_the_forks_file_verbatim_and_ssds():
    text = open(os.path.join(ROOT, "proto", "forks", "faceboxes.proto")).read()
    assert text.startswith("// sfzhang15/FaceBoxes, src/caffe/proto/caffe.proto at commit "
                           "b52cc92f9362d3adc08d54666aeb9ebb62fdb7da,\n")
    ssd = open(os.path.join(ROOT, "proto", "forks", "ssd.proto")).read()
    assert text.split("\n", 3)[3] == ssd.split("\n", 2)[2]


def test_three_min_sizes_make_21_priors_per_location_else_ssds_count(tmp_path):
    """A 4x5 feature map: min_size 32, 64, 128 gives 21 priors per location (32's anchors 4 x 4, 64's
    2 x 2, and one of 128), whatever the aspect ratios; with a max_size for each, 24. One min_size
    with aspect ratio 2 flipped keeps SSD's count: ratios 1, 2, 1/2 -> 3."""
    def priors(fields):
        net = build_text(tmp_path, f"""
            layer {{ name: "in" type: "Input" top: "f" top: "img"
              input_param {{ shape {{ dim: 1 dim: 8 dim: 4 dim: 5 }} shape {{ dim: 1 dim: 3 dim: 64 dim: 80 }} }} }}
            layer {{ name: "p" type: "PriorBox" bottom: "f" bottom: "img" top: "p" prior_box_param {{ {fields} }} }}
            """, schema="faceboxes")
        return tops(net, "p")[0][2] // (4 * 5 * 4)
    assert priors("min_size: 32 min_size: 64 min_size: 128 aspect_ratio: 2 flip: true") == 21
    assert priors("min_size: 32 min_size: 64 min_size: 128 max_size: 64 max_size: 128 max_size: 256") == 24
    assert priors("min_size: 32 aspect_ratio: 2 flip: true") == 3


def test_faceboxes_train_net_is_read_as_the_fork_with_no_flag():
    """FaceBoxes' train.prototxt trains at 1024 x 1024 (resize_param): 32 x 32 cells after the
    stride-32 stem take 21 priors each, conv3_2's 16 x 16 and conv4_2's 8 x 8 one each:
    21,504 + 256 + 64 = 21,824 priors, 87,296 coordinates, which its location layers predict
    (num_output 84, 4 and 4: 21, 1 and 1 priors x 4). SSD's PriorBox makes 3,392 and SSD's Caffe stops
    at MultiBoxLoss; read as SSD's (the same caffe.proto), the net is tried as FaceBoxes' and builds."""
    r = run_in_process(TRAIN, "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["nets"][0]["caffe_proto"] == "faceboxes"
    said = [a for a in out["assumptions"] if a["override"] == "--fork ssd"]
    assert len(said) == 1 and "3392 priors x 1 x 4 != 87296" in said[0]["assumption"]
    net = build_nets(TRAIN, schema="faceboxes")[0]
    assert tops(net, "inception_a3_concat_mbox_priorbox") == [(1, 2, 32 * 32 * 21 * 4)]
    assert tops(net, "mbox_priorbox") == [(1, 2, 21824 * 4)]
    refused = run_in_process(TRAIN, "--fork", "ssd")
    assert refused.returncode == 2 and "--fork faceboxes" in refused.stderr


def test_faceboxes_deploy_net_at_its_640_by_480_input():
    """The deploy net's input is 640 x 480: 20 x 15 cells at stride 32 (21 priors each), 10 x 8 at 64
    and 5 x 4 at 128: 6,300 + 80 + 20 = 6,400 priors (SSD's count: 900 + 100 = 1,000)."""
    r = run_in_process(DEPLOY, "--format", "json")
    assert r.returncode == 0, r.stderr
    net = build_nets(DEPLOY, schema="faceboxes", phase="TEST")[0]
    assert tops(net, "mbox_priorbox") == [(1, 2, 6400 * 4)]


def test_an_ssd_net_that_fails_for_another_reason_keeps_ssds_message(tmp_path):
    """The fork is tried only as a whole: an SSD net whose location layer is wrong for both forks'
    counts is refused with SSD's message (MobileNet-SSD's conv11_mbox_loc given 16 outputs for 12)."""
    text = open(os.path.join(DATA, "corpus", "nets", "mobilenet_ssd_deploy.prototxt")).read()
    at = text.index('name: "conv11_mbox_loc"')
    at = text.index("num_output: 12", at)
    (tmp_path / "n.prototxt").write_text(text[:at] + "num_output: 16" + text[at + len("num_output: 12"):])
    r = run_in_process("n.prototxt", cwd=tmp_path)
    assert r.returncode == 2
    assert "Number of priors must match number of location predictions: 1917 priors" in r.stderr
    assert "SSD's Caffe stops here too" in r.stderr
