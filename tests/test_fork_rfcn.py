"""py-R-FCN's Caffe (Microsoft/caffe at 1a2be8e): its schema, and its layers held against its source.

Expected values are derived by hand below from that commit's src/caffe/layers/*.cpp/.cu, cited
by file and line; the nets are py-R-FCN's own (YuwenXiong/py-R-FCN, tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text as build, run_protoaudit, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

FORKS = os.path.join(DATA, "forks")
NETS = ["rfcn_resnet50_train_agnostic.prototxt", "rfcn_resnet50_train_agnostic_ohem.prototxt",
        "rfcn_resnet50_test_agnostic.prototxt"]
F = 4  # bytes per float (and per int)


def owned(net, layer, mode="gpu"):
    """{(blob or buffer, kind): bytes} of what `layer` first touches (its buffers named without the
    layer's prefix)."""
    return {(b.owner.removeprefix(layer + "."), b.kind): b.bytes for b in net_buffers(net, mode=mode)
            if b.layer == layer}


@pytest.mark.parametrize("name", NETS)
def test_py_rfcn_nets_are_read_with_the_forks_schema(name):
    assert load(os.path.join(FORKS, name)).schema.name == "rfcn"


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "rfcn.proto")).read()
    assert text.startswith("// Microsoft/caffe, src/caffe/proto/caffe.proto at commit "
                           "1a2be8ecf9ba318d516d79187845e90ac6e73197")
    assert "optional PSROIPoolingParameter psroi_pooling_param = 149;" in text
    assert "optional BoxAnnotatorOHEMParameter box_annotator_ohem_param = 150;" in text


def test_py_faster_rcnn_nets_stay_caffe_fast_rcnns():
    """The fork descends from caffe-fast-rcnn: a file both read (ROIPooling, SmoothL1Loss) is the ancestor's."""
    path = os.path.join(DATA, "corpus", "nets", "faster_rcnn_vgg16_end2end_train.prototxt")
    assert load(path).schema.name == "fastrcnn"


HEAD = """
layer { name: "in" type: "Input" top: "maps" top: "rois"
        input_param { shape { dim: 1 dim: 72 dim: 10 dim: 12 } shape { dim: 5 dim: 5 } } }
"""


def psroi(params="spatial_scale: 0.0625 output_dim: 8 group_size: 3", extra=""):
    return HEAD + (f'layer {{ name: "ps" type: "PSROIPooling" bottom: "maps" bottom: "rois" top: "ps" {extra} '
                   f'psroi_pooling_param {{ {params} }} }}')


def test_psroi_pooling_top_and_mapping_channel(tmp_path):
    """psroi_pooling_layer.cpp:43-50: 72 = 8 x 3 x 3 channels; top and mapping_channel_ (int) are
    (rois 5, output_dim 8, 3, 3): 360 values, 1440 bytes each."""
    net = build(tmp_path, psroi())
    assert tops(net, "ps") == [(5, 8, 3, 3)]
    assert owned(net, "ps")[("mapping_channel_", "layer buffer")] == 5 * 8 * 9 * F


@pytest.mark.parametrize("params, message", [
    ("spatial_scale: 0.0625 output_dim: 8 group_size: 2", "input channel number does not match"),  # cpp:43-44
    ("spatial_scale: 0.0625 output_dim: 0 group_size: 3", "output_dim must be > 0"),  # cpp:28-29
])
def test_psroi_pooling_refuses_what_the_fork_checks(tmp_path, params, message):
    with pytest.raises(InputError, match=message):
        build(tmp_path, psroi(params))


def test_psroi_pooling_backward_zeroes_the_rois_diff_too(tmp_path):
    """cu:183-193: backward returns unless the maps need a diff; then it zeroes the rois' diff
    (5x5 floats) as well as the maps' (72x10x12), though the rois (an Input's) need none. Maps
    from a convolution that learns need a diff; from a frozen one (lr_mult 0) they do not. (loss_weight makes the top a loss, so backward runs.)"""
    def net(lr):
        return build(tmp_path, HEAD.replace('top: "maps"', 'top: "x"').replace("dim: 72", "dim: 4") + f"""
layer {{ name: "conv" type: "Convolution" bottom: "x" top: "maps" param {{ lr_mult: {lr} }} param {{ lr_mult: {lr} }}
        convolution_param {{ num_output: 72 kernel_size: 1 }} }}
layer {{ name: "ps" type: "PSROIPooling" bottom: "maps" bottom: "rois" top: "ps" loss_weight: 1
        psroi_pooling_param {{ spatial_scale: 0.0625 output_dim: 8 group_size: 3 }} }}""")

    got = owned(net(1), "ps")
    assert got[("rois", "top diff")] == 25 * F
    assert got[("maps", "top diff")] == 72 * 10 * 12 * F
    assert ("rois", "top diff") not in owned(net(0), "ps")


def test_cpu_mode_stops_at_the_first_layer_without_cpu_code():
    """psroi_pooling_layer.cpp:56: Forward_cpu is NOT_IMPLEMENTED."""
    path = os.path.join(FORKS, "rfcn_resnet50_test_agnostic.prototxt")
    r = run_protoaudit(path, "--mode", "cpu", "--inference")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "psroi_pooling_layer.cpp:56" in r.stderr


OHEM = """force_backward: true
layer { name: "in" type: "Input" top: "score" top: "labels" top: "pred" top: "target" top: "w"
        input_param { shape { dim: 6 dim: 3 } shape { dim: 6 } shape { dim: 6 dim: 8 dim: 1 dim: 1 }
                      shape { dim: 6 dim: 8 dim: 1 dim: 1 } shape { dim: 6 dim: 8 dim: 1 dim: 1 } } }
layer { name: "sm" type: "SoftmaxWithLossOHEM" bottom: "score" bottom: "labels" top: "l" top: "p" top: "per"
        loss_weight: 1 loss_weight: 0 loss_weight: 0 propagate_down: true propagate_down: false }
layer { name: "sl" type: "SmoothL1LossOHEM" bottom: "pred" bottom: "target" bottom: "w" top: "l1" top: "per1"
        loss_weight: 1 loss_weight: 0 propagate_down: true propagate_down: false propagate_down: false }
"""


def test_ohem_losses_have_a_per_item_top(tmp_path):
    """softmax_loss_ohem_layer.cpp:54-62: top 1 is bottom 0's shape, top 2 bottom 1's;
    smooth_L1_loss_ohem_layer.cpp:53-56: top 1 is (N, 1, H, W)."""
    net = build(tmp_path, OHEM)
    assert tops(net, "sm") == [(), (6, 3), (6,)]
    assert tops(net, "sl") == [(), (6, 1, 1, 1)]


def test_smooth_l1_ohem_buffers_by_hand(tmp_path):
    """cpp:47-50: diff_ and errors_ are bottom 0's size, 6x8 floats each; no ones_."""
    got = owned(build(tmp_path, OHEM), "sl")
    assert got[("diff_", "layer buffer")] == 48 * F and got[("errors_", "layer buffer")] == 48 * F
    assert not [k for k in got if k[0].startswith("ones_")]


def test_box_annotator_ohem_tops_by_hand(tmp_path):
    """box_annotator_ohem_layer.cpp:61-63: labels (R, 1, H, W), weights (R, box channels, H, W)."""
    text = """
layer { name: "in" type: "Input" top: "rois" top: "loss" top: "labels" top: "w"
        input_param { shape { dim: 7 dim: 5 dim: 1 dim: 1 } shape { dim: 7 dim: 1 dim: 1 dim: 1 }
                      shape { dim: 7 dim: 1 dim: 1 dim: 1 } shape { dim: 7 dim: 8 dim: 1 dim: 1 } } }
layer { name: "ohem" type: "BoxAnnotatorOHEM" bottom: "rois" bottom: "loss" bottom: "labels" bottom: "w"
        top: "l" top: "bw" box_annotator_ohem_param { roi_per_img: 128 } }
"""
    assert tops(build(tmp_path, text), "ohem") == [(7, 1, 1, 1), (7, 8, 1, 1)]
    with pytest.raises(InputError, match="5 channels"):  # cpp:40
        build(tmp_path, text.replace("dim: 7 dim: 5", "dim: 7 dim: 4"))


def test_the_ohem_net_audits_with_py_rfcns_4_axis_targets():
    """py-R-FCN's lib/rpn/proposal_target_layer.py:80-105 reshapes every top to 4 axes, so the
    Eltwise that sums the two per-RoI losses gets (128, 1, 1, 1) from both."""
    net = build_nets(os.path.join(FORKS, "rfcn_resnet50_train_agnostic_ohem.prototxt"))[0]
    assert tops(net, "per_roi_loss") == [(128, 1, 1, 1)]
    assert tops(net, "roi-data")[1] == (128, 1, 1, 1)


def test_a_roi_pooling_net_with_an_input_layer_is_py_rfcns(tmp_path):
    """caffe-fast-rcnn's caffe.proto has no Input layer; py-R-FCN's (a 2016 Caffe) has, and its
    ROIPooling is caffe-fast-rcnn's: such a net is read with it. The top is (rois, C, pooled_h,
    pooled_w) (roi_pooling_layer.cpp:34-37)."""
    text = ('layer { name: "in" type: "Input" top: "x" top: "rois" '
            'input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } shape { dim: 4 dim: 5 } } }\n'
            'layer { name: "roi" type: "ROIPooling" bottom: "x" bottom: "rois" top: "r" '
            'roi_pooling_param { pooled_h: 2 pooled_w: 2 } }\n')
    net = build(tmp_path, text)
    assert load(str(tmp_path / "net.prototxt")).schema.name == "rfcn"
    assert tops(net, "roi") == [(4, 3, 2, 2)]


def test_py_rfcns_roi_data_layer_makes_4_axis_tops_but_im_info():
    """py-R-FCN's lib/roi_data_layer/layer.py:146-156 reshapes a 1- or 2-axis blob to 4 axes, im_info
    excepted: gt_boxes (64 boxes of 5) is (64, 5, 1, 1) where py-faster-rcnn's is (64, 5)."""
    net = build_nets(os.path.join(FORKS, "rfcn_resnet50_train_agnostic.prototxt"))[0]
    assert tops(net, "input-data") == [(1, 3, 600, 1000), (1, 3), (64, 5, 1, 1)]
