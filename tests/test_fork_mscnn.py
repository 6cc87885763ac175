"""MS-CNN's Caffe (zhaoweicai/mscnn 534bcac): its schema, its layers' shapes and buffers, and its
example nets.

Expected values are derived by hand below from that commit's src/caffe/layers/*.cpp/.cu and
include/caffe/layers/*.hpp, cited by file and line. The nets are in tests/data/mscnn
(tests/data/SOURCES.md).
"""
import glob
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit.layers import layer_class
from protoaudit.read.load import load

NETS = os.path.join(DATA, "mscnn")
F = 4  # bytes per float


def inputs(**shapes):
    return "".join(f'layer {{ name: "{n}" type: "Input" top: "{n}" input_param {{ shape {{ '
                   + " ".join(f"dim: {d}" for d in s) + " } } }\n" for n, s in shapes.items())


def build(tmp_path, body, **options):
    return build_text(tmp_path, "force_backward: true\n" + body, schema="mscnn", **options)


def assumed(net):
    return [a.what for a in net.assumptions]


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "mscnn.proto")).read()
    assert text.startswith("// zhaoweicai/mscnn, src/caffe/proto/caffe.proto at commit "
                           "534bcac5710a579d60827f192035f7eef6d8c585,\n// copied verbatim below this header")
    assert "  optional ImageGtDataParameter image_gt_data_param = 153;\n" in text
    assert "  optional BoxOutputParameter box_output_param = 151;\n" in text
    assert "  optional float pad_ratio = 4 [default = 0];\n" in text
    assert "ceil_mode" not in text  # pooling_layer.cpp:90-93: always ceil, as 2016 BVLC


def test_identical_files_share_cascades_classes():
    """decode_bbox_layer.cpp differs from Cascade R-CNN's by one #include, roi_align_layer.*, accuracy_layer.cpp
    and deconv_layer.cpp not at all: the classes are Cascade R-CNN's; ProposalTarget, BboxAccuracy, ROIPooling,
    SmoothL1Loss are files of their own."""
    for kind in ("DecodeBBox", "ROIAlign", "Accuracy", "Deconvolution"):
        assert issubclass(layer_class(kind, "mscnn"), layer_class(kind, "cascade"))
    for kind in ("ProposalTarget", "BboxAccuracy", "ROIPooling"):
        assert layer_class(kind, "mscnn") is not layer_class(kind, "cascade")
    assert layer_class("BoxOutput", "mscnn") is not None and layer_class("ImageGtData", "mscnn") is not None


IMAGE_GT = """layer {{ name: "data" type: "ImageGtData" top: "data" top: "l8" top: "l16" top: "l64" top: "gt"
  include {{ phase: TRAIN }}
  transform_param {{ mirror: true mean_value: 104 mean_value: 117 mean_value: 123 }}
  image_gt_data_param {{ source: "absent_window_file.txt" batch_size: 2 coord_num: 4 {size}
    downsample_rate: 8 downsample_rate: 16 downsample_rate: 64 field_w: 40 field_w: 80 field_w: 320
    field_h: 40 field_h: 80 field_h: 320 output_gt_boxes: true }} }}
layer {{ name: "s" type: "Silence" bottom: "data" bottom: "l8" bottom: "l16" bottom: "l64" bottom: "gt" }}
"""


def test_image_gt_data_tops_and_prefetch(tmp_path):
    """image_gt_data_layer.cpp:188-209: the template is resize_height x resize_width (384 x 1280), then the crop
    (384 x 512); the data top (2, 3, 384, 512), 3 from the mean values. Labels (:217-228): 2 + coord_num = 6
    channels, 384 / 8 = 48 x 512 / 8 = 64, 24 x 32 at 16, 6 x 8 at 64. gt boxes (1, 7) at setup (:244), (boxes,
    7) per batch (:820-838): one an image assumed, (2, 7, 1, 1). PREFETCH_COUNT = 3 batches of every top
    (base_data_layer.hpp:72, cpp:53-72), device copies in GPU mode."""
    net = build(tmp_path, IMAGE_GT.format(size="resize_width: 1280 resize_height: 384 crop_width: 512 "
                                               "crop_height: 384"))
    data, a, b, c, gt = (2, 3, 384, 512), (2, 6, 48, 64), (2, 6, 24, 32), (2, 6, 6, 8), (2, 7, 1, 1)
    assert tops(net, "data") == [data, a, b, c, gt]
    assert any("one ground-truth box per image" in w for w in assumed(net))
    held = layer_buffers(net, "data")
    per_batch = (2 * 3 * 384 * 512 + 2 * 6 * 48 * 64 + 2 * 6 * 24 * 32 + 2 * 6 * 6 * 8 + 2 * 7) * F
    assert sum(v for (name, device), v in held.items() if name.startswith("prefetch") and device == "device") \
        == 3 * per_batch
    net = build(tmp_path, IMAGE_GT.format(size="resize_width: 1280 resize_height: 384"), defines={"gt_boxes": "5"})
    assert tops(net, "data")[0] == (2, 3, 384, 1280) and tops(net, "data")[4] == (10, 7, 1, 1)


def test_image_gt_data_side_no_multiple_of_a_rate_is_refused(tmp_path):
    """Setup divides ints (cpp:226: 600 / 16 = 37), load_batch rounds the float (cpp:642: round(37.5) = 38) and
    CHECKs they agree (cpp:649): the prefetch thread would stop."""
    with pytest.raises(Exception, match="no multiple of downsample_rate 16"):
        build(tmp_path, IMAGE_GT.format(size="resize_width: 800 resize_height: 600"))


BOX_OUTPUT = ('layer {{ name: "p" type: "BoxOutput" bottom: "m1" bottom: "m2" top: "rois" top: "scored"\n'
              '  box_output_param {{ field_w: 40 field_w: 80 field_h: 40 field_h: 80 downsample_rate: 8 '
              'downsample_rate: 16 {extra} }} }}\n')


def test_box_output_keeps_the_most_its_limits_allow(tmp_path):
    """box_output_layer.cpp:107-190: each image gives at most a box per position of each map (12 x 16 + 6 x 8
    = 240), cut to max_nms_num before NMS (:176-179); tops (boxes, 5) and (boxes, 6) (:201, :221)."""
    body = inputs(m1=(2, 6, 12, 16), m2=(2, 6, 6, 8))
    net = build(tmp_path, body + BOX_OUTPUT.format(extra=""))
    assert tops(net, "p") == [(480, 5, 1, 1), (480, 6, 1, 1)]
    net = build(tmp_path, body + BOX_OUTPUT.format(extra="max_nms_num: 100"))
    assert tops(net, "p") == [(200, 5, 1, 1), (200, 6, 1, 1)]
    assert any("100 per image (max_nms_num 100)" in w for w in assumed(net))
    net = build(tmp_path, body + BOX_OUTPUT.format(extra=""), defines={"proposals": "7"})
    assert tops(net, "p")[0] == (14, 5, 1, 1)
    assert not {k for k in layer_buffers(net, "p")}  # no buffer of its own


def test_box_output_needs_a_field_per_bottom(tmp_path):
    body = inputs(m1=(2, 6, 12, 16), m2=(2, 6, 6, 8), m3=(2, 6, 3, 4))
    with pytest.raises(Exception, match="3 bottoms but 2 field_h"):
        build(tmp_path, body + BOX_OUTPUT.format(extra="").replace('bottom: "m2"', 'bottom: "m2" bottom: "m3"'))


def test_detection_loss_and_accuracy(tmp_path):
    """detection_loss_layer.cpp:44-60, :93-113: bottom 0 (2, cls_num 2 + coord_num 4, 12, 16), the labels (2, 6,
    12, 16); top (1, 1, 1, 2). cls_bottom_ and prob_ 2 x 2 x 192 = 768 floats, coord_bottom_ and coord_diff_
    2 x 4 x 192 = 1536, bootstrap_map_ and weight_map_ 2 x 192 = 384, bbox_mean_ and bbox_std_ 4 each. In GPU
    mode coord_diff_'s diff holds the counts (cu:292) and the two maps are written on the host and read on the
    device (cu:131, :207, :267-268). detection_accuracy_layer.cpp:37-50: (1, 1, 1, 2) and (1, 1, 1, 1), no
    buffer."""
    body = inputs(m=(2, 6, 12, 16), lab=(2, 6, 12, 16)) + (
        'layer { name: "loss" type: "DetectionLoss" bottom: "m" bottom: "lab" top: "loss"'
        ' detection_loss_param { cls_num: 2 coord_num: 4 field_h: 40 field_w: 40 downsample_rate: 8 } }\n'
        'layer { name: "acc" type: "DetectionAccuracy" bottom: "m" bottom: "lab" top: "acc" top: "iou"'
        ' detection_accuracy_param { cls_num: 2 coord_num: 4 field_h: 40 field_w: 40 downsample_rate: 8 } }\n')
    net = build(tmp_path, body)
    assert tops(net, "loss") == [(1, 1, 1, 2)] and tops(net, "acc") == [(1, 1, 1, 2), (1, 1, 1, 1)]
    held = layer_buffers(net, "loss")
    device = {k[0]: v for k, v in held.items() if k[1] == "device"}
    assert device["cls_bottom_"] == device["prob_"] == device["prob_.diff"] == 768 * F
    assert device["coord_bottom_"] == device["coord_diff_"] == device["coord_diff_.diff"] == 1536 * F
    assert device["bootstrap_map_"] == device["weight_map_"] == 384 * F
    host = {k[0]: v for k, v in held.items() if k[1] == "host"}
    assert host["bootstrap_map_ (host)"] == host["weight_map_ (host)"] == 384 * F
    assert not layer_buffers(net, "acc")
    with pytest.raises(Exception, match="cls_num \\+ coord_num = 7"):
        build(tmp_path, body.replace("cls_num: 2 coord_num: 4 field_h: 40 field_w: 40 downsample_rate: 8 } }\n"
                                     "layer { name: \"acc\"", "cls_num: 3 coord_num: 4 field_h: 40 field_w: 40 "
                                     "downsample_rate: 8 } }\nlayer { name: \"acc\""))


def test_proposal_target_reads_seven_wide_ground_truth(tmp_path):
    """proposal_target_layer.cpp:37-64: batch_size 64 rows; cls_aware (default true) targets of 4 x cls_num 5 =
    20; bottom 1 must have 7 channels (:64, ImageGtData's [image, x1, y1, x2, y2, label, ignored]). With -1, the
    RoIs and every ground-truth box (always appended, :117-130): 100 + 4."""
    pt = ('layer { name: "pt" type: "ProposalTarget" bottom: "rois" bottom: "gt" top: "r" top: "l" top: "t"'
          ' top: "wi" top: "wo" top: "m" proposal_target_param { cls_num: 5 batch_size: BS } }\n')
    net = build(tmp_path, inputs(rois=(100, 5), gt=(4, 7)) + pt.replace("BS", "64"))
    assert tops(net, "pt") == [(64, 5, 1, 1), (64, 1, 1, 1), (64, 20, 1, 1), (64, 20, 1, 1), (64, 20, 1, 1),
                               (64, 6, 1, 1)]
    assert not layer_buffers(net, "pt")  # CPU code only: no gt_boxes_ (proposal_target_layer.hpp:55-60)
    net = build(tmp_path, inputs(rois=(100, 5), gt=(4, 7)) + pt.replace("BS", "-1"))
    assert tops(net, "pt")[0] == (104, 5, 1, 1)
    with pytest.raises(Exception, match="must have 7 channels"):
        build(tmp_path, inputs(rois=(100, 5), gt=(4, 8)) + pt.replace("BS", "64"))


def test_smooth_l1_has_one_top(tmp_path):
    """smooth_L1_loss_layer.hpp:26-28: 2 to 4 bottoms, one top (no per-item top as Cascade R-CNN's has);
    diff_, errors_, ones_ bottom 0's size (cpp:45-54)."""
    body = inputs(p=(64, 8), t=(64, 8)) + (
        'layer { name: "l1" type: "SmoothL1Loss" bottom: "p" bottom: "t" top: "l1" loss_weight: 1 }\n')
    net = build(tmp_path, body)
    assert tops(net, "l1") == [()]
    assert {k: v for k, v in layer_buffers(net, "l1").items() if k[1] == "device"} == {
        ("diff_", "device"): 512 * F, ("errors_", "device"): 512 * F, ("ones_", "device"): 512 * F}
    with pytest.raises(Exception):
        build(tmp_path, body.replace('top: "l1" loss_weight: 1', 'top: "l1" top: "each" loss_weight: 1'))


def test_a_roi_pooling_net_without_its_types_is_not_mscnns(tmp_path):
    """A file with a ROIPooling and nothing of MS-CNN's is read as before it was shipped (py-R-FCN's)."""
    (tmp_path / "n.prototxt").write_text(inputs(fm=(1, 8, 10, 10), rois=(4, 5)) + (
        'layer { name: "p" type: "ROIPooling" bottom: "fm" bottom: "rois" top: "p"'
        ' roi_pooling_param { pooled_w: 2 pooled_h: 2 spatial_scale: 0.0625 } }\n'))
    assert load(str(tmp_path / "n.prototxt")).schema.name == "rfcn"


NET_FILES = sorted(glob.glob(os.path.join(NETS, "*", "*", "*.prototxt")))


@pytest.mark.parametrize("path", NET_FILES, ids=lambda p: os.path.relpath(p, NETS))
def test_each_example_net_audits_with_no_flags(path):
    """Tried as a new user would: `protoaudit FILE` in the net's folder, each net read with the fork's schema
    (a solver names its net, trainval_1st.prototxt, which is)."""
    if not path.endswith("solver_1st.prototxt"):
        assert load(path).schema.name == "mscnn"
    r = run_in_process(os.path.basename(path), cwd=os.path.dirname(path), timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout

