"""Cascade R-CNN's Caffe (zhaoweicai/cascade-rcnn 2252f46): its schema, its layers' shapes and buffers,
and its example nets.

Expected values are derived by hand below from that commit's src/caffe/layers/*.cpp/.cu and
include/caffe/layers/*.hpp, cited by file and line. The nets are in tests/data/cascade
(tests/data/SOURCES.md).
"""
import glob
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit.memory.buffers import layer_touches
from protoaudit.read.load import load

NETS = os.path.join(DATA, "cascade")
F = 4  # bytes per float


def inputs(**shapes):
    return "".join(f'layer {{ name: "{n}" type: "Input" top: "{n}" input_param {{ shape {{ '
                   + " ".join(f"dim: {d}" for d in s) + " } } }\n" for n, s in shapes.items())


def build(tmp_path, body, **options):
    return build_text(tmp_path, "force_backward: true\n" + body, schema="cascade", **options)


def assumed(net):
    return [a.what for a in net.assumptions]


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "cascade.proto")).read()
    assert text.startswith("// zhaoweicai/cascade-rcnn, src/caffe/proto/caffe.proto at commit "
                           "2252f46158ea6555868ca6fa5c221ea71d9b5e6c,\n// copied verbatim below this header")
    # the fork's caffe.proto: its LayerParameter's own fields, ROIPooling's pad_ratio, Pooling's ceil_mode
    assert "  optional DetectionDataParameter detection_data_param = 151;\n" in text
    assert "  optional BoxGroupOutputParameter box_group_output_param = 158;\n" in text
    assert "  optional float pad_ratio = 4 [default = 0];\n" in text
    assert "  optional bool ceil_mode = 13 [default = true];\n" in text


DETECTION_DATA = """layer {{ name: "data" type: "DetectionData" top: "data" top: "label_a" top: "label_b" top: "gt"
  include {{ phase: TRAIN }}
  transform_param {{ mirror: true mean_value: 104 mean_value: 117 mean_value: 123 }}
  detection_data_param {{ source: "absent_window_file.txt" batch_size: 2 short_size: 600 long_size: 1000
    stride: 8 stride: 16 field_w: 32 field_w: 64 field_h: 32 field_h: 64 output_gt_boxes: true {extra} }} }}
layer {{ name: "s" type: "Silence" bottom: "data" bottom: "label_a" bottom: "label_b" bottom: "gt" }}
"""


def test_detection_data_tops_and_prefetch(tmp_path):
    """detection_data_layer.cpp:210-218: short_size and long_size give a template of width 600 and height 1000;
    the data top is (2, C, 1000, 600) (:228), C the window file's, 3 here from the 3 mean values. Labels
    (:236-247): 2 + coord_num (4) = 6 channels, round(1000 / 8) = 125 x round(600 / 8) = 75 and, at stride 16,
    round(62.5) = 63 x round(37.5) = 38. gt boxes (1, 8, 1, 1) at setup (:264), reshaped in load_batch to the
    batch's boxes (:949-961): one a image assumed, (2, 8, 1, 1). Prefetch: data_param.prefetch (default 4)
    batches of every top (base_data_layer.cpp:56-70), device and pinned host copies in GPU mode."""
    net = build(tmp_path, DETECTION_DATA.format(extra=""))
    data, a, b, gt = (2, 3, 1000, 600), (2, 6, 125, 75), (2, 6, 63, 38), (2, 8, 1, 1)
    assert tops(net, "data") == [data, a, b, gt]
    assert any("one ground-truth box per image" in w for w in assumed(net))
    held = layer_buffers(net, "data")
    per_batch = (2 * 3 * 1000 * 600 + 2 * 6 * 125 * 75 + 2 * 6 * 63 * 38 + 2 * 8) * F
    assert sum(v for (name, device), v in held.items() if name.startswith("prefetch") and device == "device") \
        == 4 * per_batch
    net = build(tmp_path, DETECTION_DATA.format(extra=""), defines={"gt_boxes": "5"})
    assert tops(net, "data")[3] == (10, 8, 1, 1)


def test_detection_data_counts_its_tops(tmp_path):
    """One top per stride and the gt boxes (cpp:247, :264): one fewer is a top Caffe would index past."""
    text = DETECTION_DATA.format(extra="").replace(' top: "gt"\n', "\n").replace(' bottom: "gt"', "")
    with pytest.raises(Exception, match="makes 4 tops"):
        build(tmp_path, text)


def test_eval_data_takes_the_largest_batch_load_batch_makes(tmp_path):
    """eval_data_layer.cpp:152-156: (1, 3, 1000, 600) at setup; load_batch (:252-263) scales the short side to 600,
    the long one at most 1000, then rounds each to 32: round(1000 / 32) = 31 -> 992, round(600 / 32) = 19 -> 608,
    and reshapes the batch to it (:280). image_sizes (1, 2, 1, 1) (:178)."""
    body = ('layer { name: "data" type: "EvalData" top: "data" top: "gt" top: "sizes"\n'
            '  transform_param { mean_value: 104 mean_value: 117 mean_value: 123 }\n'
            '  eval_data_param { source: "absent.txt" batch_size: 1 short_size: 600 long_size: 1000 } }\n'
            'layer { name: "s" type: "Silence" bottom: "data" bottom: "gt" bottom: "sizes" }\n')
    net = build(tmp_path, body)
    assert tops(net, "data") == [(1, 3, 992, 608), (1, 8, 1, 1), (1, 2, 1, 1)]


BOXES = """layer {{ name: "p" type: "BoxGroupOutput" bottom: "prob" bottom: "deltas" top: "rois"
  box_group_output_param {{ fg_thr: 0.05 iou_thr: 0.7 box_group_param {{ field_w: 16 field_w: 32 field_h: 16
    field_h: 32 stride: 16 }} {limits} }} }}
"""


def test_box_group_output_keeps_the_most_its_limits_allow(tmp_path):
    """box_group_output_layer.cpp:85-108: scores (N x G, C, H, W), deltas (N x G, 4, H, W), G = 2 fields; rois (1, 5)
    at Reshape, (kept, 5) after Forward (:188-210). Per image the boxes pass fg_thr, at most max_nms_num before
    NMS (:166-172) and max_post_nms_num after (:176-180). bbox_preds_[0] is the deltas' size (:49-51), 2*4*6*8
    floats, written on the device and read back on the host (cu:18-37)."""
    body = inputs(prob=(2, 2, 6, 8), deltas=(2, 4, 6, 8))
    net = build(tmp_path, body + BOXES.format(limits="max_nms_num: 50 max_post_nms_num: 20"))
    assert tops(net, "p") == [(20, 5, 1, 1)]  # one image (N x G = 2), 20 after NMS
    assert layer_buffers(net, "p")[("bbox_preds_[0]", "device")] == 2 * 4 * 6 * 8 * F
    net = build(tmp_path, body + BOXES.format(limits=""))
    assert tops(net, "p") == [(2 * 6 * 8, 5, 1, 1)]  # no limit: every position of both fields
    net = build(tmp_path, body + BOXES.format(limits=""), defines={"proposals": "7"})
    assert tops(net, "p") == [(7, 5, 1, 1)]


def test_proposal_target_tops(tmp_path):
    """proposal_target_layer.cpp:24-31: without cls_aware the targets are 8 wide; Reshape (:39-66) gives batch_size
    rows to each top, the most Forward keeps (:186-220). In GPU mode gt_boxes_ takes bottom 1 on the device (cu:60)."""
    body = inputs(rois=(300, 5), gt=(3, 8)) + (
        'layer { name: "t" type: "ProposalTarget" bottom: "rois" bottom: "gt" top: "r" top: "l" top: "tg" top: "iw"'
        ' top: "ow" top: "m" proposal_target_param { cls_num: 21 batch_size: 128 } bbox_reg_param { cls_aware: false } }\n'
        'layer { name: "s" type: "Silence" bottom: "r" bottom: "l" bottom: "tg" bottom: "iw" bottom: "ow" bottom: "m" }\n')
    net = build(tmp_path, body)
    assert tops(net, "t") == [(128, 5, 1, 1), (128, 1, 1, 1), (128, 8, 1, 1), (128, 8, 1, 1), (128, 8, 1, 1),
                              (128, 6, 1, 1)]
    assert layer_buffers(net, "t")[("gt_boxes_", "device")] == 3 * 8 * F
    net = build(tmp_path, body.replace("batch_size: 128", "batch_size: -1"))
    assert tops(net, "t")[0] == (303, 5, 1, 1)  # every RoI and the 3 ground-truth boxes appended (:142-147)


def test_roi_align_decode_bbox_and_frcnn_output(tmp_path):
    """roi_align_layer.cpp:31-46: a grid of (7 + 1) x (7 + 1) points, no buffer. decode_bbox_layer.cpp:47-58: deltas
    (R, 8) and RoIs (R, 5), the top the RoIs' shape, bbox_pred_ the deltas' size on the host. frcnn_output_layer.cpp:
    133-147, :269: every RoI (300) in each class but the background (20), and one more: (6001, 7)."""
    body = inputs(fm=(1, 256, 38, 63), rois=(300, 5), deltas=(300, 8), scores=(300, 21), sizes=(1, 2)) + (
        'layer { name: "al" type: "ROIAlign" bottom: "fm" bottom: "rois" top: "al"'
        ' roi_pooling_param { pooled_w: 7 pooled_h: 7 spatial_scale: 0.0625 } }\n'
        'layer { name: "dec" type: "DecodeBBox" bottom: "deltas" bottom: "rois" top: "dec" }\n'
        'layer { name: "out" type: "FrcnnOutput" bottom: "scores" bottom: "deltas" bottom: "dec" bottom: "sizes"'
        ' top: "out" bbox_reg_param { cls_aware: false } }\n'
        'layer { name: "s" type: "Silence" bottom: "al" bottom: "out" }\n')
    net = build(tmp_path, body)
    assert tops(net, "al") == [(300, 256, 8, 8)]
    assert layer_buffers(net, "al") == {}
    assert tops(net, "dec") == [(300, 5)]
    assert layer_buffers(net, "dec")[("bbox_pred_", "host")] == 300 * 8 * F
    assert tops(net, "out") == [(6001, 7, 1, 1)]


def test_detection_group_loss_buffers(tmp_path):
    """detection_group_loss_layer.cpp:60-67 and :145-152 on scores (2, 2, 10, 12) (one image, G = 2 fields):
    keep_map_, weight_map_, gt_label_, gt_overlap_ N x 1 x H x W = 240 floats; bbox_diff_, gt_bbox_ 4 x 240; its
    inner Softmax's prob_ the scores' size (480), its diff filled at setup (a loss weight of 1). In GPU mode the
    forward also takes gt_bbox_'s and weight_map_'s diffs on the device (cu:318, :331) and keep_map_'s on the host
    (cu:140). Top (1, 1, 1, 2) (cpp:144)."""
    body = inputs(sc=(2, 2, 10, 12), dl=(2, 4, 10, 12), lb=(2, 6, 10, 12)) + (
        'layer { name: "loss" type: "DetectionGroupLoss" bottom: "sc" bottom: "dl" bottom: "lb" top: "loss"'
        ' detection_group_loss_param { cls_num: 2 field_h: 16 field_h: 32 field_w: 16 field_w: 32 stride: 16 } }\n')
    net = build(tmp_path, body)
    assert tops(net, "loss") == [(1, 1, 1, 2)]
    held = layer_buffers(net, "loss")
    m = 2 * 10 * 12
    for name, size in (("gt_label_", m), ("gt_overlap_", m), ("keep_map_", m), ("weight_map_", m),
                       ("weight_map_.diff", m), ("bbox_diff_", 4 * m), ("gt_bbox_", 4 * m), ("gt_bbox_.diff", 4 * m),
                       ("prob_", 2 * m), ("prob_.diff", 2 * m)):
        assert held[(name, "device")] == size * F, name
    assert held[("keep_map_.diff", "host")] == m * F


def test_scale_route_splits_the_rois_over_its_levels(tmp_path):
    """scale_route_layer.cpp:35-48 gives (1, 5) at Reshape, Forward the RoIs in range (:97-120). Two levels read
    the same 300 RoIs (Caffe splits them): 150 each assumed, 300 with --define routed_rois=300."""
    body = inputs(rois=(300, 5)) + "".join(
        f'layer {{ name: "r{k}" type: "ScaleRoute" bottom: "rois" top: "r{k}" scale_route_param {{ {p} }} }}\n'
        for k, p in ((0, "high_scale: 112"), (1, "low_scale: 112"))) + \
        'layer { name: "s" type: "Silence" bottom: "r0" bottom: "r1" }\n'
    net = build(tmp_path, body)
    assert tops(net, "r0") == tops(net, "r1") == [(150, 5, 1, 1)]  # Reshape(num, C, H, W): 4 axes (:112)
    net = build(tmp_path, body, defines={"routed_rois": "300"})
    assert tops(net, "r1") == [(300, 5, 1, 1)]


def test_smooth_l1_per_item_top_and_softmax_third_top(tmp_path):
    """smooth_L1_loss_layer.cpp:54-57: a second top (N, 1, H, W); diff_, errors_, ones_ bottom 0's size (:43-51).
    softmax_loss_layer.cpp:58-61: a third top bottom 1's shape; its inner Softmax has no loss weight (:15-16), so
    prob_'s diff is first written by the forward (cu:41), never at setup."""
    body = inputs(p=(64, 8), t=(64, 8), sc=(64, 21), lb=(64,)) + (
        'layer { name: "l1" type: "SmoothL1Loss" bottom: "p" bottom: "t" top: "l1" top: "each" loss_weight: 1'
        ' loss_weight: 0 }\n'
        'layer { name: "sm" type: "SoftmaxWithLoss" bottom: "sc" bottom: "lb" top: "sm" top: "prob" top: "per"'
        ' loss_weight: 1 loss_weight: 0 loss_weight: 0 }\n')
    net = build(tmp_path, body)
    assert tops(net, "l1") == [(), (64, 1, 1, 1)]
    assert {k: v for k, v in layer_buffers(net, "l1").items() if k[1] == "device"} == {
        ("diff_", "device"): 512 * F, ("errors_", "device"): 512 * F, ("ones_", "device"): 512 * F}
    assert tops(net, "sm") == [(), (64, 21), (64,)]
    stages = {t.name: t.stage for t in layer_touches(net.layer("sm"), "gpu", "caffe") if t.what == "buffer"}
    assert stages["prob_.diff"] == "forward"


def test_a_roi_pooling_net_without_its_types_is_not_cascades(tmp_path):
    """A file with a ROIPooling and nothing of Cascade R-CNN's is read as before it was shipped (py-R-FCN's,
    which carries caffe-fast-rcnn's layers), not with this fork's schema."""
    (tmp_path / "n.prototxt").write_text(inputs(fm=(1, 8, 10, 10), rois=(4, 5)) + (
        'layer { name: "p" type: "ROIPooling" bottom: "fm" bottom: "rois" top: "p"'
        ' roi_pooling_param { pooled_w: 2 pooled_h: 2 spatial_scale: 0.0625 } }\n'))
    assert load(str(tmp_path / "n.prototxt")).schema.name == "rfcn"


NET_FILES = sorted(glob.glob(os.path.join(NETS, "*", "*", "*.prototxt")))


@pytest.mark.parametrize("path", [p for p in NET_FILES if not p.endswith("solver.prototxt")],
                         ids=lambda p: os.path.relpath(p, NETS))
def test_each_example_net_audits_with_no_flags(path):
    """Tried as a new user would: `protoaudit FILE` in the net's folder, read with the fork's schema."""
    assert load(path).schema.name == "cascade"
    r = run_in_process(os.path.basename(path), cwd=os.path.dirname(path), timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout
