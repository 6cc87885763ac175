"""pva-faster-rcnn's nets: py-faster-rcnn's Python layers under pva-faster-rcnn's cfg.

PVANet's example train.prototxt (sanghoon/pva-faster-rcnn b0dc7d2, models/pvanet/example_train/,
copied to tests/data/python_layers/pva_example_train/) is trained, its README says, by
tools/train_net.py --cfg models/pvanet/cfgs/train.yml. Its RPN layers' param_str give anchor
'ratios', which only pva-faster-rcnn's AnchorTargetLayer and ProposalLayer read
(lib/rpn/anchor_target_layer.py:28-30, proposal_layer.py:29-31): so the net is pva-faster-rcnn's.

Hand derivation of the largest training image under that cfg (models/pvanet/cfgs/train.yml:11-28:
SCALES 416..864, MAX_SIZE 1440, SCALE_MULTIPLE_OF 32) and lib/utils/blob.py:31-45 (prep_im_for_blob:
the short side scaled to the scale, the long side held at MAX_SIZE, then each side floored to a
multiple of SCALE_MULTIPLE_OF): short side 864 // 32 * 32 = 864, long side 1440 // 32 * 32 = 1440,
so data is 1x3x864x1440 (one image: IMS_PER_BATCH 1, HAS_RPN). The score map is at 1/16
(feat_stride 16): 54x90, with 7 ratios x 6 scales = 42 anchors, so rpn_labels 1x1x(42*54)x90.

At py-faster-rcnn's 600x1000 (and pva's own config.py defaults: SCALES (600,), MAX_SIZE 1000,
SCALE_MULTIPLE_OF 1, lib/fast_rcnn/config.py:38-44), conv4_1/incep's Concat meets a 3x3/2
convolution (floor) beside a 3x3/2 pooling (ceil): 38x63 against 37x62, and Caffe stops.

The file's TEST-phase layers (a DummyData and a Softmax) make a TEST net whose RoIPooling reads
'rois', made only by the TRAIN-only ProposalTargetLayer: Caffe cannot build it, and the example's
solver.prototxt names train_net only (no test net), so the file is its TRAIN net alone.
"""
import json
import os
import shutil

from conftest import DATA, run_in_process
from protoaudit import build_nets

PVA = os.path.join(DATA, "python_layers", "pva_example_train", "train.prototxt")


def _blobs(path, **options):
    net = build_nets(path, phase="train", **options)[0]
    return {b.name: b.shape for b in net.blobs}, net


def test_pva_net_takes_its_example_cfg_image_by_hand():
    blobs, net = _blobs(PVA)
    assert blobs["data"] == (1, 3, 864, 1440)
    assert blobs["rpn_labels"] == (1, 1, 42 * 54, 90)
    assert blobs["rpn_bbox_targets"] == (1, 4 * 42, 54, 90)
    said = " ".join(a.what for a in net.assumptions if a.layer == "input-data")
    assert "models/pvanet/cfgs/train.yml" in said and "SCALE_MULTIPLE_OF 32" in said


def test_pva_net_audits_with_no_flags_as_its_train_net_alone():
    r = run_in_process(os.path.basename(PVA), "--format", "json", cwd=os.path.dirname(PVA))
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert [(n["role"], n["phase"]) for n in report["nets"]] == [("net", "TRAIN")]
    said = " ".join(a["assumption"] for a in report["assumptions"])
    assert "no TEST net" in said and "roi_pool_conv5" in said


def test_at_py_faster_rcnns_image_caffe_stops_at_the_inception_concat():
    r = run_in_process(PVA, "--phase", "train", "--input", "data=1x3x600x1000", "--input", "im_info=1x3",
                       "--input", "gt_boxes=64x5x1x1")
    assert r.returncode == 2 and "conv4_1/incep" in r.stderr, r.stderr
    assert "(1, 64, 38, 63)" in r.stderr and "(1, 128, 37, 62)" in r.stderr


def test_a_cfg_beside_the_net_is_read(tmp_path):
    """The repository's layout, models/pvanet/cfgs/ beside models/pvanet/example_train/: a cfg there with
    TRAIN.SCALES [640], MAX_SIZE 1000, SCALE_MULTIPLE_OF 32 gives 640 // 32 * 32 = 640 by
    1000 // 32 * 32 = 992; a TEST-only cfg (submit_1019.yml's kind) beside it is not a training cfg."""
    net_dir = tmp_path / "pvanet" / "example_train"
    net_dir.mkdir(parents=True)
    shutil.copy(PVA, net_dir / "train.prototxt")
    cfgs = tmp_path / "pvanet" / "cfgs"
    cfgs.mkdir()
    (cfgs / "train.yml").write_text("TRAIN:\n  HAS_RPN: True\n  SCALE_MULTIPLE_OF: 32\n  MAX_SIZE: 1000\n"
                                    "  SCALES:\n    - 512\n    - 640\n")
    (cfgs / "submit_1019.yml").write_text("TEST:\n  SCALE_MULTIPLE_OF: 32\n  MAX_SIZE: 2000\n  SCALES:\n    - 640\n")
    blobs, net = _blobs(str(net_dir / "train.prototxt"))
    assert blobs["data"] == (1, 3, 640, 992)
    said = " ".join(a.what for a in net.assumptions if a.layer == "input-data")
    assert os.path.join("..", "cfgs", "train.yml") in said


def test_a_net_without_ratios_keeps_py_faster_rcnns_image(tmp_path):
    """Without 'ratios' the RPN layers are py-faster-rcnn's: 600x1000 (config.py:38-41)."""
    text = open(PVA).read().replace("'ratios': [0.333, 0.5, 0.667, 1, 1.5, 2, 3], ", "")
    path = tmp_path / "train.prototxt"
    path.write_text(text)
    r = run_in_process(path, "--phase", "train")
    assert r.returncode == 2 and "conv4_1/incep" in r.stderr and "data=1x3x600x1000" in r.stderr, r.stderr
