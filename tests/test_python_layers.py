"""Python layers: declared (never imported or run), with built-in shapes for py-faster-rcnn's and
FCN's published layers, and the shapes file beside a net.

Every expected shape is derived by hand below from the layers' published Python source
(rbgirshick/py-faster-rcnn 781a917, shelhamer/fcn.berkeleyvision.org 1305c73), with file:line.
"""
import json
import os

import pytest

from conftest import DATA, run_in_process
from protoaudit import audit, build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers

CORPUS = os.path.join(DATA, "corpus")

# Every corpus net with Faster R-CNN layers or Python layers, and the help it needs to audit to
# the end (only --input, a shapes file, --define or --caffe-proto are allowed). With the built-in
# shapes, none needs any. (soeaver_faster_rcnn_air101_train needs caffe-priv's schema for its
# ceil_mode pooling: tests/test_fork_cls.py holds it.)
HELP = {
    "nets/faster_rcnn_vgg16_end2end_train.prototxt": [],
    "nets/faster_rcnn_vggcnnm1024_end2end_train.prototxt": [],
    "nets/faster_rcnn_vgg16_end2end_test.prototxt": [],
    "nets/fast_rcnn_vgg16_train.prototxt": [],
    "nets/voc-fcn32s_train.prototxt": [],
    "nets/voc-fcn8s_train.prototxt": [],
    "nets/voc-fcn8s-atonce_train.prototxt": [],
    "nets/voc-fcn-alexnet_train.prototxt": [],
    "nets/pascalcontext-fcn8s_train.prototxt": [],
    "nets/siftflow-fcn8s_trainval.prototxt": [],
    "nets/nyud-fcn32s-color-hha_trainval.prototxt": [],
}
ALLOWED_HELP = ("--input", "--shapes", "--define", "--caffe-proto")


def corpus(file):
    return os.path.join(CORPUS, file)


@pytest.mark.parametrize("file", sorted(HELP))
def test_corpus_net_audits_to_the_end_with_at_most_the_allowed_help(file):
    help_args = HELP[file]
    assert all(a.startswith(ALLOWED_HELP) for a in help_args[::2])
    r = run_in_process(corpus(file), *help_args, "--format", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    python = [g for g in report["gaps"] if g["type"] == "Python"]
    # every Python layer is a reported gap (its own Python objects), and its shapes an assumption
    assert python and {g["layer"] for g in python} <= {a["layer"] for a in report["assumptions"]}
    r = run_in_process(corpus(file), *help_args, "--gpu-mem", "12G")
    assert r.returncode in (0, 1), r.stderr


def shapes(file, **options):
    """{top: shape} of the one net `file` builds (train phase unless said)."""
    net = build_nets(corpus(file), phase=options.pop("phase", "train"), **options)[0]
    return {b.name: b.shape for b in net.blobs}, net


# --- py-faster-rcnn ---------------------------------------------------------------------------------

def test_roi_data_layer_end2end_by_hand():
    """RoIDataLayer with 3 tops is cfg.TRAIN.HAS_RPN (layer.py:100-107; faster_rcnn_end2end.yml:3):
    one image (yml:4 IMS_PER_BATCH 1; minibatch.py:34-35 asserts it), at most 600 on its short
    side and 1000 on its long one (config.py:38, :41; utils/blob.py:38-41 scales it so), so the
    blob holds at most 1x3x600x1000; im_info is [[height, width, scale]] (minibatch.py:42-44),
    gt_boxes one (x1, y1, x2, y2, class) row per object (minibatch.py:38-40): room for 64."""
    blobs, _ = shapes("nets/faster_rcnn_vgg16_end2end_train.prototxt")
    assert blobs["data"] == (1, 3, 600, 1000)
    assert blobs["im_info"] == (1, 3)
    assert blobs["gt_boxes"] == (64, 5)


def test_anchor_target_layer_by_hand():
    """AnchorTargetLayer (anchor_target_layer.py:51-63): A = 3 ratios (generate_anchors.py:37) x
    3 scales (8, 16, 32) (:28) = 9 anchors at each position of the score map. VGG16's four
    2x2/2 ceil poolings take 600x1000 to 38x63 (600, 300, 150, 75, 38; 1000, 500, 250, 125, 63),
    so labels are 1x1x(9*38)x63 and the three bbox blobs 1x(4*9)x38x63. VGG_CNN_M_1024's conv1
    7x7/2 (297x497), pool1 3x3/2 ceil (148x248), conv2 5x5/2 pad 1 (73x123) and pool2 3x3/2 ceil
    (36x61) give 1x1x324x61 and 1x36x36x61."""
    blobs, _ = shapes("nets/faster_rcnn_vgg16_end2end_train.prototxt")
    assert blobs["rpn_labels"] == (1, 1, 342, 63)
    for top in ("rpn_bbox_targets", "rpn_bbox_inside_weights", "rpn_bbox_outside_weights"):
        assert blobs[top] == (1, 36, 38, 63)
    blobs, _ = shapes("nets/faster_rcnn_vggcnnm1024_end2end_train.prototxt")
    assert blobs["rpn_labels"] == (1, 1, 324, 61)
    assert blobs["rpn_bbox_targets"] == (1, 36, 36, 61)


def test_proposal_layer_counts_by_phase_by_hand():
    """ProposalLayer keeps at most cfg[phase].RPN_POST_NMS_TOP_N boxes after NMS (proposal_layer.py:
    64-66, 145-147): 2000 in TRAIN (config.py:116), 300 in TEST (config.py:162); and no more than
    anchors: 9 per position. The test net's 224x224 input gives a 14x14 map: 9*14*14 = 1764."""
    blobs, _ = shapes("nets/faster_rcnn_vgg16_end2end_train.prototxt")
    assert blobs["rpn_rois"] == (2000, 5)  # 9 * 38 * 63 = 21,546 anchors: the 2000 cap holds
    blobs, _ = shapes("nets/faster_rcnn_vgg16_end2end_test.prototxt", phase="test")
    assert blobs["rois"] == (300, 5)
    assert blobs["cls_prob"] == (300, 21) and blobs["bbox_pred"] == (300, 84)
    blobs, _ = shapes("nets/faster_rcnn_vgg16_end2end_test.prototxt", phase="train")
    assert blobs["rois"] == (1764, 5)  # TRAIN's 2000 capped by the 1764 anchors


def test_proposal_target_layer_by_hand():
    """ProposalTargetLayer samples at most cfg.TRAIN.BATCH_SIZE = 128 RoIs for its one image
    (proposal_target_layer.py:58-59, config.py:47): rois 128x5, labels 128, and 128 x (4 * 21)
    for bbox_targets and both weights (num_classes 21 from param_str, :26)."""
    blobs, _ = shapes("nets/faster_rcnn_vgg16_end2end_train.prototxt")
    assert blobs["rois"] == (128, 5) and blobs["labels"] == (128,)
    for top in ("bbox_targets", "bbox_inside_weights", "bbox_outside_weights"):
        assert blobs[top] == (128, 84)
    assert blobs["pool5"] == (128, 512, 7, 7)  # ROIPooling: one 512x7x7 map per RoI


def test_a_known_layer_with_more_tops_than_its_code_makes_takes_them_all_declared(tmp_path):
    """affordance-net's own ProposalTargetLayer makes 10 tops where py-faster-rcnn's makes 5
    (proposal_target_layer.py:78-96): refused as stock code would be, naming both counts; with every
    top given (--input, or a log's shapes with --caffe-log) the run's own code made them, and the net
    is audited with them."""
    tops = ["rois", "labels", "bbox_targets", "bbox_inside_weights", "bbox_outside_weights", "mask_targets"]
    text = ('input: "rpn_rois" input_shape { dim: 300 dim: 5 }\ninput: "gt" input_shape { dim: 3 dim: 5 }\n'
            'layer { name: "roi-data" type: "Python" bottom: "rpn_rois" bottom: "gt" '
            + " ".join(f'top: "{t}"' for t in tops)
            + ' python_param { module: "rpn.proposal_target_layer" layer: "ProposalTargetLayer" '
              'param_str: "\'num_classes\': 2" } }\n')
    path = net_file(tmp_path, text)
    r = run_in_process(path)
    assert r.returncode == 2 and "ProposalTargetLayer makes 5 tops; 6 are named" in r.stderr, r.stderr
    given = ["rois=128x5", "labels=128", "bbox_targets=128x8", "bbox_inside_weights=128x8",
             "bbox_outside_weights=128x8", "mask_targets=128x244x244"]
    blobs, _ = shapes(path, inputs={top: tuple(map(int, dims.split("x"))) for top, dims in (g.split("=") for g in given)})
    assert blobs["mask_targets"] == (128, 244, 244)


def test_fast_rcnn_data_layer_by_hand():
    """Without an RPN the layer has 6 tops (layer.py:108-137): IMS_PER_BATCH 2 images (config.py:
    44) padded to the larger (utils/blob.py:18-20), at most 600x1000; 128 RoIs over both
    (minibatch.py:25 rois_per_image = 128 / 2, stacked at :61-66)."""
    blobs, _ = shapes("nets/fast_rcnn_vgg16_train.prototxt")
    assert blobs["data"] == (2, 3, 600, 1000)
    assert blobs["rois"] == (128, 5) and blobs["labels"] == (128,)
    assert blobs["bbox_targets"] == blobs["bbox_outside_weights"] == (128, 84)


def net_file(tmp_path, text, name="net.prototxt"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


RPN = """
input: "map" input_shape { dim: 1 dim: 18 dim: 10 dim: 12 }
input: "gt" input_shape { dim: 3 dim: 5 }
input: "info" input_shape { dim: 1 dim: 3 }
layer { name: "rpn-data" type: "Python" bottom: "map" bottom: "gt" bottom: "info"
  top: "labels" top: "targets" top: "inside" top: "outside"
  python_param { module: "rpn.anchor_target_layer" layer: "AnchorTargetLayer" param_str: "%s" } }
"""


def test_anchor_scales_from_param_str(tmp_path):
    """param_str is YAML (anchor_target_layer.py:27): 'scales' of 4 values make 3 x 4 = 12
    anchors (generate_anchors.py:45-47): labels 1x1x(12*10)x12, targets 1x48x10x12."""
    blobs, _ = shapes(net_file(tmp_path, RPN % "{'feat_stride': 16, 'scales': [4, 8, 16, 32]}"))
    assert blobs["labels"] == (1, 1, 120, 12) and blobs["targets"] == (1, 48, 10, 12)
    blobs, _ = shapes(net_file(tmp_path, RPN % "feat_stride: 16"))  # YAML, not only Python's dict syntax
    assert blobs["labels"] == (1, 1, 90, 12)


def test_anchor_ratios_from_param_str_as_pva_faster_rcnn_reads_them(tmp_path):
    """pva-faster-rcnn's AnchorTargetLayer reads 'ratios' as well as 'scales' (sanghoon/pva-faster-rcnn
    lib/rpn/anchor_target_layer.py:28-30); PVANet's train.prototxt:6453 gives 7 ratios and 6 scales:
    7 x 6 = 42 anchors (generate_anchors.py: one per ratio and scale), labels 1x1x(42*10)x12, targets
    1x(4*42)x10x12."""
    pva = "{'feat_stride': 16, 'ratios': [0.333, 0.5, 0.667, 1, 1.5, 2, 3], 'scales': [2, 3, 5, 9, 16, 32]}"
    blobs, _ = shapes(net_file(tmp_path, RPN % pva))
    assert blobs["labels"] == (1, 1, 420, 12) and blobs["targets"] == (1, 168, 10, 12)


def test_anchor_scales_as_a_python_tuple_are_read_without_running_anything(tmp_path):
    """affordance-net's param_str writes the scales as `!!python/tuple [2, 4, 8, 16, 32]`, which its layer's
    yaml.load builds (PyYAML's full loader): 3 ratios x 5 scales = 15 anchors, labels 1x1x(15*10)x12.
    A tag that would call code is still refused, in one line."""
    blobs, _ = shapes(net_file(tmp_path, RPN % "'feat_stride': 16 \\n'scales': !!python/tuple [2, 4, 8, 16, 32]"))
    assert blobs["labels"] == (1, 1, 150, 12) and blobs["targets"] == (1, 60, 10, 12)
    marker = tmp_path / "ran"
    r = run_in_process(net_file(tmp_path, RPN % f"'scales': !!python/object/apply:os.system ['touch {marker}']"))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "not YAML" in r.stderr, r.stderr
    assert not marker.exists()


def test_anchor_count_follows_the_score_map_where_the_repository_changed_its_defaults(tmp_path):
    """A rotated RPN's repository sets 10 scales in its own anchor_target_layer.py (30 anchors) and its
    net's rpn_cls_score says so with 60 channels, 2 per anchor; param_str names neither ratios nor
    scales. The labels are then 1x1x(30*10)x12 and the targets 1x(4*30)x10x12, and the count is said.
    A score map of 18 channels is stock py-faster-rcnn's 9 anchors."""
    blobs, net = shapes(net_file(tmp_path, RPN.replace("dim: 18", "dim: 60") % "'feat_stride': 16"))
    assert blobs["labels"] == (1, 1, 300, 12) and blobs["targets"] == (1, 120, 10, 12)
    assert any("30 anchors, as its score map's 60 channels (2 per anchor) say" in a.what for a in net.assumptions)
    blobs, _ = shapes(net_file(tmp_path, RPN % "'feat_stride': 16"))
    assert blobs["labels"] == (1, 1, 90, 12)


ORIGINAL_FAST_RCNN = """
layer { name: "data" type: "Python" top: "data" top: "rois" top: "labels" top: "bbox_targets"
  top: "bbox_loss_weights"
  python_param { module: "roi_data_layer.layer" layer: "RoIDataLayer" param_str: "'num_classes': 21" } }
"""


def test_original_fast_rcnn_data_layer_by_hand(tmp_path):
    """The original Fast R-CNN's RoIDataLayer (rbgirshick/fast-rcnn lib/roi_data_layer/layer.py:76-104,
    the data layer of its models/*/train.prototxt) makes 5 tops: with cfg.TRAIN.BBOX_REG,
    bbox_targets and bbox_loss_weights, (R, 4 * num_classes) each (minibatch.py:34-35). Its config
    (fast_rcnn/config.py:38-47) is py-faster-rcnn's: 2 images of at most 600x1000, 128 RoIs."""
    blobs, net = shapes(net_file(tmp_path, ORIGINAL_FAST_RCNN))
    assert blobs["data"] == (2, 3, 600, 1000)
    assert blobs["rois"] == (128, 5) and blobs["labels"] == (128,)
    assert blobs["bbox_targets"] == blobs["bbox_loss_weights"] == (128, 84)  # 4 * 21 classes
    assert any("original Fast R-CNN" in a.what for a in net.assumptions)


def test_a_check_that_fails_on_an_assumed_size_says_so(tmp_path):
    """A Concat of a convolution and a pooling that disagree at the assumed 600x1000: both 3x3, stride
    2, no padding, but a convolution rounds down, (600 - 3) // 2 + 1 = 299, and a pooling up,
    ceil((600 - 3) / 2) + 1 = 300 (Caffe's conv_layer.cpp and pooling_layer.cpp): the refusal names
    the size protoaudit assumed and the flag that gives the real one (--strict). Without --strict the
    largest size not above 600x1000 that protoaudit tries and the net takes is taken: an odd side,
    where both give (n - 3) / 2 + 1, 299x299."""
    text = (ORIGINAL_FAST_RCNN
            + 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" '
              'convolution_param { num_output: 2 kernel_size: 3 stride: 2 } }\n'
            + 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" '
              'pooling_param { pool: MAX kernel_size: 3 stride: 2 } }\n'
            + 'layer { name: "cat" type: "Concat" bottom: "c" bottom: "p" top: "cat" }\n')
    blobs, _ = shapes(net_file(tmp_path, text))
    assert blobs["data"] == (2, 3, 299, 299) and blobs["c"] == blobs["p"][:1] + (2,) + blobs["p"][2:] == (2, 2, 149, 149)
    r = run_in_process(net_file(tmp_path, text), "--strict")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "layer 'cat'" in r.stderr and "Caffe stops here too" not in r.stderr
    assert "assumed" in r.stderr and "--input data=2x3x600x1000" in r.stderr


def test_bad_param_str_is_one_clear_error(tmp_path):
    with pytest.raises(InputError, match="not YAML"):
        build_nets(net_file(tmp_path, RPN % "'feat_stride': [16"))
    r = run_in_process(net_file(tmp_path, RPN % "16"))
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "not a YAML mapping" in r.stderr


def test_python_layers_touch_their_tops_forward_and_nothing_backward():
    """PythonLayer runs the Python code: forward writes each top (`top[i].data[...] = ...`), and
    these layers' backward is `pass` (anchor_target_layer.py:251-253, proposal_layer.py:163-165,
    proposal_target_layer.py:98-100). So rpn_labels, whose only reader has propagate_down 0, gets
    no diff; rpn_bbox_targets does, 1*36*38*63 floats, written by SmoothL1Loss's GPU backward
    (smooth_L1_loss_layer.cu:87-96) because the layer above it needs backward."""
    _, net = shapes("nets/faster_rcnn_vgg16_end2end_train.prototxt")
    buffers = net_buffers(net, mode="gpu")
    diffs = {b.owner: b for b in buffers if b.kind == "top diff"}
    assert "rpn_labels" not in diffs
    targets = diffs["rpn_bbox_targets"]
    assert targets.bytes == 1 * 36 * 38 * 63 * 4 and targets.layer == "rpn_loss_bbox"
    assert "rpn_bbox_inside_weights" not in diffs and "rpn_bbox_outside_weights" not in diffs
    python = {node.name for node in net.layers if node.type == "Python"}
    assert python == {"input-data", "rpn-data", "proposal", "roi-data"}
    assert {b.touch for b in buffers if b.layer in python} == {"forward"}
    assert {b.kind for b in buffers if b.layer in python} == {"top data"}


def test_input_replaces_a_default_and_the_rest_follows():
    """--input data=1x3x600x800: VGG16 maps it to 38x50, so the anchor targets follow
    (9*38 = 342 rows of 50) while gt_boxes keeps its default."""
    blobs, net = shapes("nets/faster_rcnn_vgg16_end2end_train.prototxt", inputs={"data": (1, 3, 600, 800)})
    assert blobs["rpn_labels"] == (1, 1, 342, 50) and blobs["gt_boxes"] == (64, 5)
    said = {a.layer: a for a in net.assumptions}
    assert "data 1x3x600x1000" not in said["input-data"].what and "gt_boxes 64x5" in said["input-data"].what
    assert "--input gt_boxes=64x5" in said["input-data"].override


def test_every_default_is_an_assumption_in_every_format():
    file = corpus("nets/faster_rcnn_vgg16_end2end_train.prototxt")
    text = run_in_process(file).stdout
    assert "Assumed: the net, layer 'rpn-data'" in text and "--input rpn_labels=1x1x342x63" in text
    md = run_in_process(file, "--format", "markdown").stdout
    assert "layer `proposal`" in md and "`--input rpn_rois=2000x5" in md
    report = json.loads(run_in_process(file, "--format", "json").stdout)
    assert {a["layer"] for a in report["assumptions"]} == {"input-data", "rpn-data", "proposal", "roi-data"}
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(run_in_process(file, "--format", "csv").stdout)))
    assumed = {r["layer"]: r["assumed"] for r in rows if r["assumed"]}
    assert set(assumed) == {"input-data", "rpn-data", "proposal", "roi-data"}
    assert "--input rois=128x5" in assumed["roi-data"]


def test_unknown_python_layer_still_asks_for_its_tops(tmp_path):
    """Where a later layer reads them (tests/test_fork_lstm.py: where none does)."""
    text = """input: "data" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }
layer { name: "mine" type: "Python" bottom: "data" top: "out"
  python_param { module: "my_layers" layer: "Mine" } }
layer { name: "after" type: "ReLU" bottom: "out" top: "out" }"""
    r = run_in_process(net_file(tmp_path, text))
    assert r.returncode == 2 and "my_layers.Mine" in r.stderr and "--input out=" in r.stderr
    r = run_in_process(net_file(tmp_path, text), "--input", "out=1x5")
    assert r.returncode == 0, r.stderr


# --- FCN --------------------------------------------------------------------------------------------

def test_fcn_data_layers_by_hand():
    """Each FCN layer reshapes its tops to one image, batch 1 (`top[i].reshape(1, *shape)`):
    voc_layers.py:70-71 and :185-186 (image 3xHxW, label 1xHxW), at PASCAL VOC's largest,
    500x500; siftflow_layers.py:71-73 (image, semantic and geometric labels) at 256x256;
    nyud_layers.py:78-80, one top per param_str 'tops' entry (color and hha 3 channels,
    :110-123 and :147-156; label 1), at 425x560; pascalcontext_layers.py:79-80 at 500x500."""
    blobs, _ = shapes("nets/voc-fcn8s_train.prototxt")
    assert blobs["data"] == (1, 3, 500, 500) and blobs["label"] == (1, 1, 500, 500)
    blobs, _ = shapes("nets/siftflow-fcn8s_trainval.prototxt")
    assert (blobs["data"], blobs["sem"], blobs["geo"]) == ((1, 3, 256, 256), (1, 1, 256, 256), (1, 1, 256, 256))
    blobs, _ = shapes("nets/nyud-fcn32s-color-hha_trainval.prototxt")
    assert (blobs["color"], blobs["hha"], blobs["label"]) == ((1, 3, 425, 560), (1, 3, 425, 560), (1, 1, 425, 560))
    blobs, _ = shapes("nets/pascalcontext-fcn8s_train.prototxt")
    assert blobs["data"] == (1, 3, 500, 500)


NYUD = """layer { name: "data" type: "Python" top: "a" top: "b"
  python_param { module: "nyud_layers" layer: "NYUDSegDataLayer" param_str: "%s" } }"""


def test_nyud_tops_follow_param_str_without_running_it(tmp_path):
    """param_str is evaluated by the layer (nyud_layers.py:40); protoaudit reads it as a literal
    (ast.literal_eval), so code in it never runs."""
    blobs, _ = shapes(net_file(tmp_path, NYUD % "{'tops': ['depth', 'hha'], 'split': 'train'}"))
    assert blobs["a"] == (1, 1, 425, 560) and blobs["b"] == (1, 3, 425, 560)
    r = run_in_process(net_file(tmp_path, NYUD % "__import__('os').system('false')"))
    assert r.returncode == 2 and "not a Python dict of plain values" in r.stderr
    r = run_in_process(net_file(tmp_path, NYUD % "{'tops': ['color']}"))
    assert r.returncode == 2 and "names 1 outputs; the layer has 2 tops" in r.stderr


def test_fcn_batch_replaces_the_first_dimension():
    blobs, _ = shapes("nets/voc-fcn8s_train.prototxt", batch=2)
    assert blobs["data"] == (2, 3, 500, 500) and blobs["label"] == (2, 1, 500, 500)


# --- the shapes file --------------------------------------------------------------------------------

FCN_TEXT = open(corpus("nets/voc-fcn32s_train.prototxt")).read()


def test_shapes_file_beside_the_net_is_read(tmp_path):
    path = net_file(tmp_path, FCN_TEXT, "train.prototxt")
    (tmp_path / "train.prototxt.shapes").write_text(
        "# SBD at 375x500\n\ndata = 1x3x375x500\nlabel=1x1x375x500  # label\n")
    blobs, net = shapes(path)
    assert blobs["data"] == (1, 3, 375, 500) and blobs["label"] == (1, 1, 375, 500)
    assert not net.assumptions  # every top declared: nothing guessed
    (tmp_path / "train.prototxt.shapes").write_text("data=1x3x300x300\nlabel=1x1x375x500\n")
    blobs, _ = shapes(path, inputs={"data": (1, 3, 375, 500)})  # --input wins over the file
    assert blobs["data"] == (1, 3, 375, 500) and blobs["label"] == (1, 1, 375, 500)
    blobs, _ = shapes(path, shapes=False)
    assert blobs["data"] == (1, 3, 500, 500)


def test_shapes_option_names_another_file(tmp_path):
    path = net_file(tmp_path, FCN_TEXT, "train.prototxt")
    other = tmp_path / "sizes.txt"
    other.write_text("data=1x3x200x200\nlabel=1x1x200x200\n")
    r = run_in_process(path, "--shapes", str(other), "--caffe-log")
    assert r.returncode == 0, r.stderr
    assert "Top shape: 1 3 200 200 (120000)" in r.stdout
    result = audit(path, shapes=str(other), phase="train")
    assert result.nets[0].net.layer("data").top_shapes[0] == (1, 3, 200, 200)


@pytest.mark.parametrize("content, line, says", [
    ("data=1x3x200\nlabel 1x1x2x2\n", 2, "the line 'label 1x1x2x2' is not TOP=SHAPE"),
    ("data=1x3xHxW\n", 1, "the line 'data=1x3xHxW': the shape must be whole numbers joined by x"),
    ("data=1x3x-2x2\n", 1, "the line 'data=1x3x-2x2': dimensions cannot be negative"),
    ("# sizes\ndata=1x3x2x2\ndata=1x3x4x4\n", 3, "top 'data' is given twice (first at line 2)"),
])
def test_bad_shapes_file_is_one_line_naming_the_file_and_line(tmp_path, content, line, says):
    path = net_file(tmp_path, FCN_TEXT, "train.prototxt")
    (tmp_path / "train.prototxt.shapes").write_text(content)
    r = run_in_process(path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [r.stderr.strip()]
    assert r.stderr.startswith(f"protoaudit: {path}.shapes:{line}: {says}"), r.stderr


def test_missing_shapes_file_is_refused(tmp_path):
    r = run_in_process(net_file(tmp_path, FCN_TEXT), "--shapes", str(tmp_path / "nope.shapes"))
    assert r.returncode == 2 and "no such shapes file" in r.stderr


# --- samples ----------------------------------------------------------------------------------------

SAMPLES = os.path.join(os.path.dirname(DATA), "..", "samples")


@pytest.mark.parametrize("name", ["faster_rcnn_vgg16_end2end_train.prototxt", "voc-fcn8s_train.prototxt"])
def test_sample_is_the_published_net_and_audits_with_no_flag(name):
    """samples/README.md names the source; the file is the corpus's copy of it, byte for byte."""
    sample = os.path.join(SAMPLES, name)
    assert open(sample, "rb").read() == open(corpus("nets/" + name), "rb").read()
    r = run_in_process(sample, "--format", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["assumptions"] and report["nets"][0]["total_bytes"] > 0


def test_fcn_sample_at_a_typical_voc_size():
    """A 375x500 VOC image instead of the 500x500 default: the data blob shrinks by 375/500, the
    assumption goes, and the audit says where the shapes came from."""
    sample = os.path.join(SAMPLES, "voc-fcn8s_train.prototxt")
    r = run_in_process(sample, "--input", "data=1x3x375x500", "--input", "label=1x1x375x500", "--format", "json")
    report = json.loads(r.stdout)
    assert r.returncode == 0 and not report["assumptions"]
    data = next(layer for layer in report["nets"][0]["layers"] if layer["name"] == "data")
    assert data["tops"] == [[1, 3, 375, 500], [1, 1, 375, 500]]


def test_a_known_layers_image_that_stops_the_net_gives_way_to_the_first_size_it_takes(tmp_path):
    """FCN's VOC layer, reused by a net whose pooled image is added to a fixed 1x3x112x112 input
    (Eltwise needs identical shapes, eltwise_layer.cpp): the layer's 500x500 pools to 250x250 and
    stops it, so the first other size the net takes is taken, 224x224 (224 / 2 = 112), for the
    image and its label alike, each said as assumed. --strict keeps the refusal."""
    path = tmp_path / "net.prototxt"
    path.write_text('layer { name: "data" type: "Python" top: "data" top: "label" python_param { '
                    'module: "voc_layers" layer: "VOCSegDataLayer" param_str: "{\'split\': \'train\'}" } }\n'
                    'layer { name: "fixed" type: "Input" top: "fixed" input_param { shape { dim: 1 dim: 3 '
                    'dim: 112 dim: 112 } } }\n'
                    'layer { name: "half" type: "Pooling" bottom: "data" top: "half" pooling_param { pool: MAX '
                    'kernel_size: 2 stride: 2 } }\n'
                    'layer { name: "sum" type: "Eltwise" bottom: "half" bottom: "fixed" top: "sum" }\n'
                    'layer { name: "s" type: "Silence" bottom: "label" bottom: "sum" }\n')
    (net,) = build_nets(str(path))
    assert list(net.layer("data").top_shapes) == [(1, 3, 224, 224), (1, 1, 224, 224)]
    said = [a.what for a in net.assumptions if a.layer == "data"]
    assert len(said) == 2 and all("1x3x500x500" in w or "1x1x500x500" in w for w in said)
    assert all("stops layer 'sum'" in w and "224x224" in w for w in said)
    run = run_in_process(str(path), "--strict")
    assert run.returncode == 2 and "layer 'sum'" in run.stderr
