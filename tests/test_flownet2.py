"""FlowNet 2.0's Caffe (lmb-freiburg/flownet2 b92e198): its schema, its own layers held against its source, and
its FlowNet2-ss training net.

Expected values are derived by hand below from that commit's src/caffe/layers/{flow_warp,channel_norm,accum,
lpq_loss,data_augmentation}_layer.cpp/.cu, include/caffe/layers and src/caffe/net.cpp, cited by file and line.
The net is in tests/data/flownet2 (tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops, touched
from protoaudit.errors import InputError
from protoaudit.memory.buffers import layer_touches
from protoaudit.read.load import load

SS = os.path.join(DATA, "flownet2", "flownet2_ss_train.prototxt")
F = 4  # bytes per float

INPUTS = """
input: "img" input_shape { dim: 2 dim: 3 dim: 8 dim: 10 }
input: "flow" input_shape { dim: 2 dim: 2 dim: 8 dim: 10 }
input: "small" input_shape { dim: 2 dim: 2 dim: 4 dim: 5 }
layer { name: "c" type: "Convolution" bottom: "img" top: "c" convolution_param { num_output: 3 kernel_size: 1 } }
layer { name: "cf" type: "Convolution" bottom: "flow" top: "cf" convolution_param { num_output: 2 kernel_size: 1 } }
"""


def build(tmp_path, body):
    return build_text(tmp_path, INPUTS + body)


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "flownet2.proto")).read()
    assert text.startswith("// lmb-freiburg/flownet2, src/caffe/proto/caffe.proto at commit "
                           "b92e198b56b0e52e1ba0a5a98dc0e39fa5ae70cc,\n// copied verbatim below this header")
    # its own field numbers (caffe.proto:420-422)
    assert "optional LpqLossParameter lpq_loss_param = 158;" in text
    assert "optional FlowWarpParameter flow_warp_param = 159;" in text
    assert "optional AccumParameter accum_param = 160;" in text


def test_flowwarp_shape_and_transposed_image(tmp_path):
    """flow_warp_layer.cpp:50-51: the top is bottom 0's shape (2, 3, 8, 10); transposed_image_ (N, H, W, C) =
    2x8x10x3 floats, written by the GPU forward only (cu:369; the CPU forward, cpp:58-117, never touches it).
    The GPU backward writes both bottoms' diffs, zeroing the one that does not propagate (cu:512-513)."""
    net = build(tmp_path, 'layer { name: "w" type: "FlowWarp" bottom: "c" bottom: "cf" top: "w" }')
    assert tops(net, "w") == [(2, 3, 8, 10)]
    assert layer_buffers(net, "w") == {("transposed_image_", "device"): 2 * 8 * 10 * 3 * F}
    assert layer_buffers(net, "w", mode="cpu") == {}
    diffs = {(w, i) for w, i, part, stage, _ in touched(net, "w") if part == "diff" and w == "bottom"}
    assert diffs == {("bottom", 0), ("bottom", 1)}


@pytest.mark.parametrize("body, message", [
    ('layer { name: "w" type: "FlowWarp" bottom: "c" bottom: "c" top: "w" }', "2 channels"),
    ('layer { name: "w" type: "FlowWarp" bottom: "c" bottom: "small" top: "w" }', "Width of the inputs"),
])
def test_flowwarp_checks_are_caffes(tmp_path, body, message):
    """flow_warp_layer.cpp:46 (2 flow channels) and :47 (the same width: 10 vs 5)."""
    with pytest.raises(InputError, match=message):
        build(tmp_path, body)


def test_channelnorm_shape_and_host_backward(tmp_path):
    """channel_norm_layer.cpp:39: (N, 1, H, W) = (2, 1, 8, 10); it allocates nothing. Its GPU backward takes the
    top's data and diff and the bottom's data and diff with cpu_data()/mutable_cpu_diff() (cu:80-83): host copies."""
    net = build(tmp_path, 'layer { name: "n" type: "ChannelNorm" bottom: "c" top: "n" }')
    assert tops(net, "n") == [(2, 1, 8, 10)]
    assert layer_buffers(net, "n") == {}
    host = {(w, part) for w, _, part, stage, device in touched(net, "n") if device == "host" and stage == "backward"}
    assert host == {("top", "data"), ("top", "diff"), ("bottom", "data"), ("bottom", "diff")}


def test_accum_sizes(tmp_path):
    """accum_layer.cpp:26-43: with have_reference the last bottom gives only the size: c (3 ch) and cf (2 ch)
    accumulated at small's 4x5 -> (2, 5, 4, 5). Without (cpp:46-73): the largest sides 8x10; size_divisible_by 4
    rounds them to 8x12, but only a size larger on both sides replaces the largest (cpp:67): 8 is not > 8, so
    8x10 stays; top_height 9, top_width 11 exceed both: 9x11."""
    net = build(tmp_path, """
layer { name: "r" type: "Accum" bottom: "c" bottom: "cf" bottom: "small" top: "r" accum_param { have_reference: true } }
layer { name: "d" type: "Accum" bottom: "small" bottom: "c" top: "d" accum_param { size_divisible_by: 4 } }
layer { name: "t" type: "Accum" bottom: "small" bottom: "c" top: "t" accum_param { top_height: 9 top_width: 11 } }
""")
    assert tops(net, "r") == [(2, 5, 4, 5)]
    assert tops(net, "d") == [(2, 5, 8, 10)]
    assert tops(net, "t") == [(2, 5, 9, 11)]
    assert layer_buffers(net, "r") == {}
    # the reference (bottom 2) is neither read nor given a diff (cu:59-65, 160-167); the GPU backward reads the
    # top's diff and each accumulated bottom's diff on the host (cu:149, 209)
    seen = touched(net, "r")
    assert ("bottom", 2, "data", "forward", "device") not in seen
    assert {(i, device) for w, i, part, _, device in seen if w == "bottom" and part == "diff"} == \
        {(0, "device"), (0, "host"), (1, "device"), (1, "host")}
    assert ("top", 0, "diff", "backward", "host") in seen


def test_lpqloss_buffers(tmp_path):
    """Two bottoms of one shape, c and c2 (2, 3, 8, 10): lpq_loss_layer.cpp:149-170, N=2 C=3 H=8 W=10: diff_, mask_, sign_, p_output_, ones_ 2*3*8*10 = 480 floats each
    (ones_ on the host too, set at Reshape: cpp:166); sum_output_ and q_output_ 2x1x8x10 = 160; the 1x1
    convolution's weight 1x3x1x1 = 3 and bias 1, host and device; its bias_multiplier_ 8*10 = 80, host and device.
    Backward (cu:209-243): q_output_'s diff on host and device, sum_output_'s, p_output_'s, diff_'s and the
    convolution's weight and bias diffs."""
    net = build(tmp_path, """
layer { name: "c2" type: "Convolution" bottom: "img" top: "c2" convolution_param { num_output: 3 kernel_size: 1 } }
layer { name: "l" type: "LpqLoss" bottom: "c" bottom: "c2" top: "l" lpq_loss_param { p: 2 q: 0.2 } }
""")
    assert tops(net, "l") == [()]
    full, plane = 480 * F, 160 * F
    assert layer_buffers(net, "l") == {
        ("diff_", "device"): full, ("mask_", "device"): full, ("sign_", "device"): full,
        ("p_output_", "device"): full, ("ones_", "device"): full, ("ones_ (host)", "host"): full,
        ("sum_output_", "device"): plane, ("q_output_", "device"): plane,
        ("sum_layer_ weight", "device"): 3 * F, ("sum_layer_ weight (host)", "host"): 3 * F,
        ("sum_layer_ bias", "device"): F, ("sum_layer_ bias (host)", "host"): F,
        ("sum_layer_ bias_multiplier_", "device"): 80 * F, ("sum_layer_ bias_multiplier_ (host)", "host"): 80 * F,
        ("q_output_.diff", "device"): plane, ("q_output_.diff (host)", "host"): plane,
        ("sum_output_.diff", "device"): plane, ("p_output_.diff", "device"): full, ("diff_.diff", "device"): full,
        ("sum_layer_ weight.diff", "device"): 3 * F, ("sum_layer_ bias.diff", "device"): F}


@pytest.mark.parametrize("param, message", [
    ("p: 2 q: 0.2 p: 1", "Incompatible sizes"),
    ("pq_episode_starts_at_iter: 10 p: 2 q: 0.2", "First entry"),
])
def test_lpqloss_schedule_checks_are_caffes(tmp_path, param, message):
    """lpq_loss_layer.cpp:41-46 (as many starts, p and q) and 66-69 (the first start is 0)."""
    with pytest.raises(InputError, match=message):
        build(tmp_path, f'layer {{ name: "l" type: "LpqLoss" bottom: "c" top: "l" lpq_loss_param {{ {param} }} }}')


def test_lpqloss_has_no_cpu_code(tmp_path):
    """lpq_loss_layer.cpp:177-180: Forward_cpu is NOT_IMPLEMENTED."""
    net = build(tmp_path, 'layer { name: "l" type: "LpqLoss" bottom: "c" top: "l" lpq_loss_param { p: 2 q: 0.2 } }')
    stops = [t for t in layer_touches(net.layer("l"), "cpu", "caffe") if t.what == "stop"]
    assert stops and stops[0].stage == "forward"


def test_augmentation_never_runs_backward_and_reads_its_images_on_the_host(tmp_path):
    """net.cpp:172-173, 182-183 ask AllowBackward(), false for DataAugmentation (data_augmentation_layer.hpp:29):
    it runs no backward, so the conv below it gets no gradient through it (where LiteFlowNet's net.cpp, never
    asking, gives it one: its bottom needs a gradient). Its GPU forward reads bottom 0 on the host (cu:339)."""
    net = build(tmp_path, 'layer { name: "aug" type: "DataAugmentation" bottom: "c" top: "aug" '
                          'augmentation_param { crop_width: 6 crop_height: 4 } }\n'
                          'layer { name: "l" type: "L1Loss" bottom: "aug" top: "l" l1_loss_param { l2_per_location: true } }')
    assert load(str(tmp_path / "net.prototxt")).schema.name == "liteflownet"  # no FlowNet 2.0 type: LiteFlowNet's
    net2 = build(tmp_path, 'layer { name: "aug" type: "DataAugmentation" bottom: "c" top: "aug" '
                           'augmentation_param { crop_width: 6 crop_height: 4 } }\n'
                           'layer { name: "n" type: "ChannelNorm" bottom: "aug" top: "n" }\n'
                           'layer { name: "l" type: "L1Loss" bottom: "n" top: "l" l1_loss_param { l2_per_location: true } }')
    assert load(str(tmp_path / "net.prototxt")).schema.name == "flownet2"
    assert not net2.layer("aug").need_backward
    assert ("bottom", 0, "data", "forward", "host") in touched(net2, "aug")
    assert net.layer("aug").need_backward
    assert ("bottom", 0, "data", "forward", "host") not in touched(net, "aug")


def test_flownet2_reads_only_what_the_other_flownet_forks_cannot():
    """schema.DESCENDS_FROM: FlowNet2-ss (Accum, FlowWarp, ChannelNorm) is FlowNet 2.0's; StruPyNet's (Warp)
    stays LiteFlowNet's and DispNetC's (Correlation1D) SVS's."""
    assert load(SS).schema.name == "flownet2"
    strupy = os.path.join(DATA, "flownet", "strupynet_train.prototxt")
    svs = os.path.join(DATA, "flownet", "svs_stereo_train.prototxt")
    assert load(strupy).schema.name == "liteflownet" and load(svs).schema.name == "svs"


def test_flownet2_ss_train_audits():
    """FlowNet2-ss's training template (no placeholders) reads with FlowNet 2.0's schema (Accum, FlowWarp,
    ChannelNorm) and audits with no flag: its LMDB absent, its frames are assumed; the 768x384 crop
    (data_augmentation_layer.cpp:103-104) refuses every smaller assumed size, and FlyingThings3D's 540x960 fits."""
    assert load(SS).schema.name == "flownet2"
    run = run_in_process(SS)
    assert run.returncode == 0, run.stderr
    assert "FlowNet 2.0's Caffe" in run.stdout and "blob0 8x3x540x960" in run.stdout
