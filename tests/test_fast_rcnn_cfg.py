"""py-faster-rcnn's layers sized by the net's repository's own lib/fast_rcnn/config.py (read, never run),
and affordance-net's mask layout of its RoIDataLayer and ProposalTargetLayer.

The net is py-faster-rcnn's VGG16 end-to-end training net (tests/data/corpus), copied into a repository
laid out as py-faster-rcnn's: models/.../train.prototxt, lib/fast_rcnn/config.py. Every expected shape
is derived by hand below from rbgirshick/py-faster-rcnn 781a917 and nqanh/affordance-net 8db1b3f.
"""
import os
import shutil

from conftest import DATA
from protoaudit import build_nets

NET = os.path.join(DATA, "corpus", "nets", "faster_rcnn_vgg16_end2end_train.prototxt")


def _repository(tmp_path, config, net_text=None):
    net = tmp_path / "models" / "pascal_voc" / "VGG16" / "faster_rcnn_end2end" / "train.prototxt"
    net.parent.mkdir(parents=True)
    if net_text is None:
        shutil.copy(NET, net)
    else:
        net.write_text(net_text)
    cfg = tmp_path / "lib" / "fast_rcnn" / "config.py"
    cfg.parent.mkdir(parents=True)
    (cfg.parent / "__init__.py").write_text("")
    cfg.write_text("from easydict import EasyDict as edict\n__C = edict()\ncfg = __C\n__C.TRAIN = edict()\n"
                   "__C.TEST = edict()\n" + config)
    (net,) = build_nets(str(net), phase="train")
    return {b.name: b.shape for b in net.blobs}, net


def test_the_repositorys_scales_size_the_image_and_its_batch_the_rois(tmp_path):
    """An FPN repository's config.py (xraydetec/Xdet's): TRAIN.SCALES (768,), MAX_SIZE 1280. The
    short side is scaled to 768 unless the long side would pass 1280 (utils/blob.py:31-45): the
    largest blob is 1x3x768x1280. VGG16's four 2x2/2 ceil poolings: 768 -> 384, 192, 96, 48 and
    1280 -> 640, 320, 160, 80, so the RPN labels are 1x1x(9*48)x80. TRAIN.BATCH_SIZE 256 is the
    RoIs the ProposalTargetLayer samples (proposal_target_layer.py:58-59): rois 256x5, labels 256.
    TEST.RPN_POST_NMS_TOP_N is not the TRAIN net's; TRAIN's stays 2000 (config.py:116)."""
    blobs, net = _repository(tmp_path, "__C.TRAIN.SCALES = (768,)\n__C.TRAIN.MAX_SIZE = 1280  # FPN\n"
                             "__C.TRAIN.BATCH_SIZE = 256\n__C.TEST.RPN_POST_NMS_TOP_N = 100\n")
    assert blobs["data"] == (1, 3, 768, 1280)
    assert blobs["rpn_labels"] == (1, 1, 432, 80)
    assert blobs["rpn_rois"] == (2000, 5)
    assert blobs["rois"] == (256, 5) and blobs["labels"] == (256,)
    said = {a.layer: a.what for a in net.assumptions}
    assert "lib/fast_rcnn/config.py (cfg.TRAIN.SCALES at most 768" in said["input-data"]


def test_a_scale_above_the_largest_size_is_held_to_it(tmp_path):
    """A rotated-box repository's (arasharchor/py-faster-rcnn_rotated) SCALES (200, 600, 1000, 1800)
    with MAX_SIZE 1000: a square image scaled to 1800 would pass 1000 on its long side, so it is
    scaled to 1000 (blob.py:38-41); the largest blob is 1000x1000. A value only the running code has
    (np.arange) leaves py-faster-rcnn's own, as does a count that is no positive whole number (-1
    proposals); the last plain assignment of a key wins."""
    blobs, _ = _repository(tmp_path, "__C.TRAIN.SCALES = (200, 600, 1000, 1800)\n__C.TRAIN.MAX_SIZE = 900\n"
                           "__C.TRAIN.MAX_SIZE = 1000\n__C.TRAIN.BATCH_SIZE = np.arange(3)\n"
                           "__C.TRAIN.RPN_POST_NMS_TOP_N = -1\n")
    assert blobs["data"] == (1, 3, 1000, 1000)
    assert blobs["rois"] == (128, 5)  # config.py:47
    assert blobs["rpn_rois"] == (2000, 5)  # config.py:116


def test_py_faster_rcnns_own_values_are_kept_where_the_repository_keeps_them(tmp_path):
    """A repository that leaves the defaults (a copy of py-faster-rcnn's config.py lines): 600x1000,
    128 RoIs, as test_python_layers.py derives them."""
    blobs, _ = _repository(tmp_path, "__C.TRAIN.SCALES = (600,)\n__C.TRAIN.MAX_SIZE = 1000\n"
                           "__C.TRAIN.BATCH_SIZE = 128\n")
    assert blobs["data"] == (1, 3, 600, 1000) and blobs["rois"] == (128, 5)


def test_affordance_nets_mask_layout(tmp_path):
    """affordance-net's RoIDataLayer has 5 tops with HAS_RPN and MASK_REG (layer.py:100-113): data,
    im_info, gt_boxes, then seg_mask_inds, one (image, object) row per ground-truth box, and flipped
    1x1 (minibatch.py:131-147): room for 64 boxes, 64x2. Its ProposalTargetLayer has 7 (:53-65):
    with its config's TRAIN.BATCH_SIZE 32 (config.py:55), rois 32x5, labels 32, the bbox blobs
    32x(4*21) (VOC's 21 classes); mask_targets are one MASK_SIZE x MASK_SIZE map per foreground RoI (:108), at most
    round(FG_FRACTION 0.25 x 32) = 8 (:87, :462): 8x244x244 (config.py:44), and rois_pos 8x5 (:486).
    A Caffe log of its run shows the same layer set up so (ivalab/affordanceNet_Context, log line
    1826-1836: rois 1 5 ... mask_targets 1 244 244, rois_pos 1 5, before its forward grows them)."""
    with open(NET) as f:
        text = f.read()
    text = text.replace("  top: 'gt_boxes'\n", "  top: 'gt_boxes'\n  top: 'seg_mask_inds'\n  top: 'flipped'\n", 1)
    text = text.replace("  top: 'bbox_outside_weights'\n", "  top: 'bbox_outside_weights'\n  top: 'mask_targets'\n"
                        "  top: 'rois_pos'\n", 1)
    assert text.count("seg_mask_inds") == 1 and text.count("rois_pos") == 1
    text += ('layer { name: "silence" type: "Silence" bottom: "seg_mask_inds" bottom: "flipped" '
             'bottom: "mask_targets" bottom: "rois_pos" }\n')
    blobs, _ = _repository(tmp_path, "__C.TRAIN.MASK_REG = True\n__C.TRAIN.MASK_SIZE = 244\n"
                           "__C.TRAIN.BATCH_SIZE = 32\n__C.TRAIN.FG_FRACTION = 0.25\n", text)
    assert blobs["data"] == (1, 3, 600, 1000)
    assert blobs["seg_mask_inds"] == (64, 2) and blobs["flipped"] == (1, 1)
    assert blobs["rois"] == (32, 5) and blobs["bbox_targets"] == (32, 84)
    assert blobs["mask_targets"] == (8, 244, 244) and blobs["rois_pos"] == (8, 5)
