"""liruoteng/FlowNet's Caffe (e9321cb): its schema, its layers held against its source, and its nets.

Expected values are derived by hand below from that commit's src/caffe/layers/{l1loss,correlation,
downsample,mean,flo_data,image_data,eltwise}_layer.cpp/.cu, include/caffe/{loss,vision,data,common}_layers.hpp
and src/caffe/net.cpp, cited by file and line; the training log beside FlowNetSimple is the ground truth
of its shapes. The nets are in tests/data/flownet (tests/data/SOURCES.md).
"""
import os
import re
import struct

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit.errors import InputError
from protoaudit.memory.buffers import layer_touches
from protoaudit.read.load import load

HERE = os.path.join(DATA, "flownet")
LOG = os.path.join(HERE, "liruoteng_slave1_logfile")
SIMPLE = os.path.join(HERE, "liruoteng_model_simple_train.prototxt")
CORR = os.path.join(HERE, "liruoteng_model_corr_train.prototxt")
F = 4  # bytes per float

INPUTS = """
input: "a" input_shape { dim: 2 dim: 4 dim: 10 dim: 12 }
input: "b" input_shape { dim: 2 dim: 4 dim: 10 dim: 12 }
input: "gt" input_shape { dim: 2 dim: 2 dim: 10 dim: 12 }
layer { name: "ca" type: "Convolution" bottom: "a" top: "ca" convolution_param { num_output: 4 kernel_size: 1 } }
"""
CORRELATION = """
layer { name: "corr" type: "Correlation" bottom: "ca" bottom: "b" top: "corr"
        correlation_param { pad: 2 kernel_size: 3 max_displacement: 2 stride_1: 2 stride_2: 1 } }
layer { name: "pred" type: "Convolution" bottom: "corr" top: "pred" convolution_param { num_output: 2 kernel_size: 1 } }
layer { name: "down" type: "Downsample" bottom: "gt" bottom: "pred" top: "gt_small" }
"""


def build(tmp_path, body, fork="flownet"):
    """The net of INPUTS and `body`, read with that fork's schema (a file of layers both forks have is
    either's: protoaudit refuses to choose, as their Downsamples differ)."""
    return build_text(tmp_path, INPUTS + body, schema=fork)


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "flownet.proto")).read()
    assert text.startswith("// liruoteng/FlowNet, src/caffe/proto/caffe.proto at commit "
                           "e9321cb8464a1bfe54b7a97c36bb8ee89790b5f1,\n// copied verbatim below this header")
    # its own field numbers (FlowNet 2.0's caffe.proto numbers them 150-156)
    assert "optional CorrelationParameter correlation_param = 3004;" in text
    assert "optional L1LossParameter l1_loss_param = 3001;" in text


def test_its_nets_are_read_with_its_schema():
    assert load(SIMPLE).schema.name == "flownet"
    assert load(CORR).schema.name == "flownet"


def test_the_log_is_reproduced_line_for_line():
    """Every "Top shape" and "Memory required for data" line Caffe logged setting up FlowNetSimple
    (ImageData, FloData, Mean, a one-bottom Eltwise, Downsample to the predictions' sizes, L1Loss)."""
    run = run_in_process(LOG, "--caffe-log")
    assert run.returncode == 0, run.stderr
    pattern = re.compile(r"(Top shape: .*|Memory required for data: \d+)$")
    logged = [m.group(1) for line in open(LOG) if (m := pattern.search(line.rstrip()))]
    printed = [m.group(1) for line in run.stdout.splitlines() if (m := pattern.search(line.rstrip()))]
    assert len(logged) == 197 and printed == logged
    # the log's last line: the flow_loss2 scalar adds its 4 bytes to the 642,110,992 before it
    assert logged[-2:] == ["Top shape: (1)", "Memory required for data: 642110996"]


def test_the_log_audits():
    run = run_in_process(LOG)
    assert run.returncode == 0, run.stderr
    assert "liruoteng/FlowNet's Caffe" in run.stdout


def test_correlation_shape_and_buffers(tmp_path):
    """correlation_layer.cpp:51-52: padded 10 + 2*2 = 14 by 12 + 2*2 = 16; :55-56 kernel_radius (3-1)/2 = 1,
    border 2 + 1 = 3; :58-59 top_w ceil((16 - 6) / 2) = 5, top_h ceil((14 - 6) / 2) = 4; :65-69 grid radius
    2 / 1 = 2, width 5, channels 25. rbot1_ and rbot2_ (cpp:77-78) are 2 x 14 x 16 x 4 floats each, written
    by the forward (cu:445-456); rtopdiff_ is never touched."""
    net = build(tmp_path, CORRELATION)
    assert tops(net, "corr") == [(2, 25, 4, 5)]
    held = layer_buffers(net, "corr")
    assert held == {("rbot1_", "device"): 2 * 14 * 16 * 4 * F, ("rbot2_", "device"): 2 * 14 * 16 * 4 * F}


@pytest.mark.parametrize("param, message", [
    ("kernel_size: 2 max_displacement: 2", "Odd kernel size required"),
    ("max_displacement: 2", "kernel_size is not set"),
    ("kernel_size: 1 max_displacement: 8", "Neighborhood and kernel don't fit"),  # 10 - 16 < 1
])
def test_correlation_checks_are_caffes(tmp_path, param, message):
    with pytest.raises(InputError, match=message):
        build(tmp_path, f'layer {{ name: "corr" type: "Correlation" bottom: "ca" bottom: "b" top: "corr" '
                        f'correlation_param {{ {param} }} }}')


def test_downsample_takes_bottom_1s_size_and_never_runs_backward(tmp_path):
    """downsample_layer.cpp:34-35, 46: (2, 2) of gt at pred's 4 x 5. AllowBackward() is false
    (vision_layers.hpp:445): Net::Init gives it no backward (net.cpp:188), though its bottom 1 needs one."""
    net = build(tmp_path, CORRELATION + 'layer { name: "loss" type: "L1Loss" bottom: "pred" bottom: "gt_small" }')
    assert tops(net, "down") == [(2, 2, 4, 5)]
    node = net.layer("down")
    assert not node.need_backward and node.bottom_need_backward == (False, True)
    assert layer_buffers(net, "down") == {}


def test_downsample_to_its_own_size_shares_the_bottom(tmp_path):
    """cpp:49-52: ShareData and ShareDiff where the size is unchanged, and the forward does nothing (cu:95)."""
    net = build(tmp_path, 'layer { name: "d" type: "Downsample" bottom: "gt" top: "g2" '
                          'downsample_param { top_height: 10 top_width: 12 } }')
    assert net.layer("d").impl.shares() == [(0, 0, "data"), (0, 0, "diff")]
    with pytest.raises(InputError, match="top_height > 0"):
        build(tmp_path, 'layer { name: "d" type: "Downsample" bottom: "gt" top: "g2" }')


def test_l1loss_per_location_buffers(tmp_path):
    """L1Loss of pred (2x2x4x5, 80 values) against gt_small, l2_per_location: diff_, mask_, sign_ and
    square_output_ are 80 floats (l1loss_layer.cpp:21, 35, 75-79), sum_output_ and sqrt_output_ 2x1x4x5 = 40
    (cpp:42, 56; a 1x1 convolution of one output), whose weight is 1x2x1x1 and bias 1 (cpp:44-46) and
    bias_multiplier_ 4 x 5 = 20 (base_conv_layer.cpp:235-238, set on the host, read on the device); the
    weight and bias are filled on the host at setup (cpp:44-51, the constant fillers) and read on the device.
    Reshape sets sign_ to ones on the host (cpp:87). Backward: the diffs of sqrt_output_, sum_output_,
    the convolution's weight and bias, square_output_ and diff_ (cu:156-168, 173-178)."""
    net = build(tmp_path, CORRELATION + 'layer { name: "loss" type: "L1Loss" bottom: "pred" bottom: "gt_small" '
                                        'top: "loss" l1_loss_param { l2_per_location: true } }')
    assert tops(net, "loss") == [()]
    full, plane, spatial = 80 * F, 40 * F, 20 * F
    assert layer_buffers(net, "loss") == {
        ("diff_", "device"): full, ("mask_", "device"): full, ("sign_", "device"): full, ("sign_ (host)", "host"): full,
        ("square_output_", "device"): full, ("sum_output_", "device"): plane, ("sqrt_output_", "device"): plane,
        ("sum_layer_ weight", "device"): 2 * F, ("sum_layer_ bias", "device"): F,
        ("sum_layer_ weight (host)", "host"): 2 * F, ("sum_layer_ bias (host)", "host"): F,
        ("sum_layer_ bias_multiplier_", "device"): spatial, ("sum_layer_ bias_multiplier_ (host)", "host"): spatial,
        ("sqrt_output_.diff", "device"): plane, ("sum_output_.diff", "device"): plane,
        ("sum_layer_ weight.diff", "device"): 2 * F, ("sum_layer_ bias.diff", "device"): F,
        ("square_output_.diff", "device"): full, ("diff_.diff", "device"): full}
    # the Correlation's backward writes both bottoms' diffs whatever propagate_down says (cu:513-514):
    # b, a net input no layer asks a gradient of, gets one (2x4x10x12 floats)
    from protoaudit.memory.buffers import net_buffers
    written = {b.owner for b in net_buffers(net, mode="gpu") if b.layer == "corr" and b.touch == "backward"}
    assert written == {"ca", "b"} and net.layer("corr").bottom_need_backward == (True, False)


def test_l1loss_plain_buffers_and_shape_check(tmp_path):
    """Without l2_per_location: diff_, mask_ and sign_ forward (cu:79-80, 134-135), diff_'s diff backward
    (cu:173-174); plateau_l2_ is shaped like the unused sum_output_ (empty, cpp:81)."""
    net = build(tmp_path, CORRELATION + 'layer { name: "loss" type: "L1Loss" bottom: "pred" bottom: "gt_small" '
                                        'top: "loss" }')
    full = 80 * F
    assert layer_buffers(net, "loss") == {("diff_", "device"): full, ("mask_", "device"): full,
                                          ("sign_", "device"): full, ("diff_.diff", "device"): full}
    with pytest.raises(InputError, match="eltwise_layer.cpp:34"):
        build(tmp_path, 'layer { name: "loss" type: "L1Loss" bottom: "ca" bottom: "gt" top: "loss" '
                        'l1_loss_param { epsilon: 0.01 } }')


def test_one_bottom_eltwise_and_mean(tmp_path):
    """The fork's Eltwise takes one bottom (common_layers.hpp:301). Mean keeps each
    bottom's shape (mean_layer.cpp:71-72) and CHECKs the channels are a multiple of its values (cpp:67-68)."""
    net = build(tmp_path, 'layer { name: "s" type: "Eltwise" bottom: "gt" top: "s" eltwise_param { coeff: 0.05 } }\n'
                          'layer { name: "m" type: "Mean" bottom: "a" top: "m" mean_param { operation: SUBTRACT '
                          'value: 0.4 value: 0.5 } }')
    assert tops(net, "s") == [(2, 2, 10, 12)] and tops(net, "m") == [(2, 4, 10, 12)]
    with pytest.raises(InputError, match="not divisible"):
        build(tmp_path, 'layer { name: "m" type: "Mean" bottom: "a" top: "m" mean_param { operation: SUBTRACT '
                        'value: 0.4 value: 0.5 value: 0.6 } }')


def test_flodata_reads_the_first_flo_header(tmp_path):
    """flo_data_layer.cpp:27-29, 94-109: (batch_size, 2, height, width) of the first file's header
    (202021.25, width, height); its batches are three (data_layers.hpp:81, 87), copied into the top."""
    (tmp_path / "a.flo").write_bytes(struct.pack("<fii", 202021.25, 12, 10) + bytes(12 * 10 * 8))
    (tmp_path / "list.txt").write_text("a.flo\n")
    net = build_text(tmp_path, f'layer {{ name: "f" type: "FloData" top: "flow" image_data_param {{ '
                               f'source: "{tmp_path}/list.txt" root_folder: "{tmp_path}/" batch_size: 3 }} }}\n'
                               'layer { name: "s" type: "Eltwise" bottom: "flow" top: "s" }')
    assert tops(net, "f") == [(3, 2, 10, 12)]
    held = layer_buffers(net, "f")
    assert held[("prefetch[3].flow", "device")] == 3 * 3 * 2 * 10 * 12 * F


def test_corr_net_audits_with_its_images_assumed():
    """FlowNetCorr: its lists are absent, so the images are assumed; the FloData top keeps its 2 channels."""
    run = run_in_process(CORR)
    assert run.returncode == 0, run.stderr
    assert "flow_gt_aug 4x2x" in run.stdout


# --- SVS's Caffe (lawy623/SVS b7c7ae3): caffe/src/caffe/layers, caffe/include/caffe/layers ---

STEREO = os.path.join(HERE, "svs_stereo_train.prototxt")
SVS_NET = os.path.join(HERE, "svs_svs_train.prototxt")
CORR1D = """
layer { name: "c1" type: "Correlation1D" bottom: "ca" bottom: "b" top: "c1"
        correlation_param { pad: 3 kernel_size: 3 max_displacement: 3 stride_1: 1 stride_2: 1 } }
layer { name: "pred" type: "Convolution" bottom: "c1" top: "pred" convolution_param { num_output: 2 kernel_size: 1 } }
"""
RESAMPLED = """
layer { name: "rs" type: "Resample" bottom: "gt" bottom: "pred" top: "g" resample_param { type: NEAREST }
        propagate_down: false propagate_down: false }
"""


def test_svs_proto_is_verbatim_and_reads_its_nets():
    text = open(os.path.join(ROOT, "proto", "forks", "svs.proto")).read()
    assert text.startswith("// lawy623/SVS, caffe/src/caffe/proto/caffe.proto at commit "
                           "b7c7ae367c82a4797ff4a896a2ff304f02e7f724,\n// copied verbatim below this header")
    assert "optional int32 pad_shift = 8 [default = 0];" in text  # its Correlation1D's, where FlowNet 2.0 has single_direction
    assert load(STEREO).schema.name == "svs" and load(SVS_NET).schema.name == "svs"
    assert load(SIMPLE).schema.name == "flownet"  # FloData is liruoteng's alone


def test_correlation1d_shape_and_buffers(tmp_path):
    """correlation_layer1d.cpp:68-69 radius (3 - 1) / 2 = 1, border 3 + 1 = 4; :71-72 padded 10 + 2 = 12 high,
    12 + 6 = 18 wide; :74-75 top_w ceil((18 - 8) / 1) = 10, top_h ceil((12 - 2) / 1) = 10; :81-92 channels
    2 (3 / 1) + 1 = 7. rbot1_, rbot2_ (cpp:98-101): 2 x 12 x 18 x 4 floats each."""
    net = build(tmp_path, CORR1D, fork=None)
    assert load(str(tmp_path / "net.prototxt")).schema.name == "svs"
    assert tops(net, "c1") == [(2, 7, 10, 10)]
    assert layer_buffers(net, "c1") == {("rbot1_", "device"): 2 * 12 * 18 * 4 * F,
                                        ("rbot2_", "device"): 2 * 12 * 18 * 4 * F}


def test_svs_l1loss_third_bottom_is_a_mask_that_gets_no_diff(tmp_path):
    """SVS l1loss_layer.cpp:97-100: the three bottoms go to the Eltwise's Reshape (one shape); the backward
    hands the Eltwise bottoms 0 and 1 only (cu:259). pred is 2x2x10x10: diff_, mask_, sign_ 400 floats."""
    net = build(tmp_path, CORR1D + RESAMPLED + 'layer { name: "loss" type: "L1Loss" bottom: "pred" bottom: "g" '
                                   'bottom: "g" top: "loss" l1_loss_param { normalize_by_num_entries: true } }\n'
                                   'layer { name: "nr" type: "NegReLU" bottom: "pred" top: "nr" }', fork="svs")
    full = 2 * 2 * 10 * 10 * F
    assert layer_buffers(net, "loss") == {("diff_", "device"): full, ("mask_", "device"): full,
                                          ("sign_", "device"): full, ("diff_.diff", "device"): full}
    assert tops(net, "nr") == [(2, 2, 10, 10)]
    # with force_backward every bottom propagates (l1_loss_layer.hpp:41), yet bottom 2's diff is never written
    forced = build_text(tmp_path, "force_backward: true\n" + INPUTS + CORR1D + RESAMPLED + 'layer { name: "loss" '
                        'type: "L1Loss" bottom: "pred" bottom: "g" bottom: "g" top: "loss" l1_loss_param { epsilon: 0.01 } }')
    node = forced.layer("loss")
    assert node.bottom_need_backward == (True, True, True)
    written = {t.index for t in layer_touches(node, "gpu", "caffe") if t.what == "bottom" and t.part == "diff"}
    assert written == {0, 1}
    with pytest.raises(InputError, match="bottom\\[2\\]->shape"):
        build(tmp_path, CORR1D + RESAMPLED + 'layer { name: "loss" type: "L1Loss" bottom: "pred" bottom: "g" '
                                 'bottom: "a" top: "loss" l1_loss_param { normalize_by_num_entries: true } }', fork="svs")


def test_resample_and_downsample_stop_only_where_a_bottom_propagates(tmp_path):
    """resample_layer.cpp:40-49: bottom 0's (num, channels) at bottom 1's size; AREA is refused (cpp:17-20).
    SVS's net.cpp never asks AllowBackward(): a Downsample or Resample whose bottom 1 needs a gradient gets a
    backward that stops (downsample_layer.cu and resample_layer.cu:212-214), unless propagate_down says not."""
    body = CORR1D + ('layer { name: "r" type: "Resample" bottom: "gt" bottom: "pred" top: "r" '
                     'resample_param { type: NEAREST } DOWN }\n'
                     'layer { name: "loss" type: "L1Loss" bottom: "pred" bottom: "r" top: "loss" '
                     'l1_loss_param { epsilon: 0.01 } }')
    net = build(tmp_path, body.replace("DOWN", "propagate_down: false propagate_down: false"), fork="svs")
    # its bottom pred needs a gradient, so Net::Init asks its backward, which propagates nothing and returns
    assert tops(net, "r") == [(2, 2, 10, 10)] and net.layer("r").need_backward
    assert net.layer("r").bottom_need_backward == (False, False)
    run = run_in_process(str(tmp_path / "net.prototxt"))
    assert run.returncode == 0, run.stderr
    (tmp_path / "net.prototxt").write_text(INPUTS + body.replace("DOWN", ""))
    run = run_in_process(str(tmp_path / "net.prototxt"))
    assert run.returncode != 0 and "ResampleLayer cannot do backward" in run.stdout + run.stderr
    with pytest.raises(InputError, match="only CUBIC, LINEAR and NEAREST"):
        build(tmp_path, CORR1D + 'layer { name: "r" type: "Resample" bottom: "gt" bottom: "pred" top: "r" '
                                 'resample_param { type: AREA } }', fork="svs")


def test_svs_nets_audit():
    for path in (STEREO, SVS_NET):
        run = run_in_process(path)
        assert run.returncode == 0, run.stderr
        assert "SVS's Caffe" in run.stdout


# --- LiteFlowNet's Caffe (twhui/LiteFlowNet e7d6c43): src/caffe/layers, include/caffe/layers ---

STRUPY = os.path.join(HERE, "strupynet_train.prototxt")
AUGMENT = """
layer { name: "aug0" type: "DataAugmentation" bottom: "a" top: "a_aug" top: "a_params"
        augmentation_param { crop_width: 6 crop_height: 4 recompute_mean: 1000 mean_per_pixel: false
                             noise { rand_type: "uniform_bernoulli" exp: false mean: 0 spread: 0.04 prob: 1 } }
        propagate_down: false }
layer { name: "gen" type: "GenerateAugmentationParameters" bottom: "a_params" bottom: "a" bottom: "a_aug"
        top: "b_params" augmentation_param { augment_during_test: true } }
layer { name: "aug1" type: "DataAugmentation" bottom: "b" bottom: "b_params" top: "b_aug"
        augmentation_param { crop_width: 6 crop_height: 4 } propagate_down: false propagate_down: false }
layer { name: "flow" type: "FlowAugmentation" bottom: "gt" bottom: "a_params" bottom: "b_params" top: "gt_aug"
        augmentation_param { crop_width: 6 crop_height: 4 } }
layer { name: "w" type: "Warp" bottom: "b_aug" bottom: "gt_aug" top: "warped" }
"""


def test_liteflownet_proto_is_verbatim_and_reads_strupynet():
    text = open(os.path.join(ROOT, "proto", "forks", "liteflownet.proto")).read()
    assert text.startswith("// twhui/LiteFlowNet, src/caffe/proto/caffe.proto at commit "
                           "e7d6c43b3e5d36bf4d071c75abb79bcd7ce6cd59,\n// copied verbatim below this header")
    assert load(STRUPY).schema.name == "liteflownet"


def test_augmentation_shapes_and_buffers(tmp_path):
    """a, b are 2x4x10x12 and gt 2x2x10x12. DataAugmentation: (2, 4, crop_height 4, crop_width 6) and the
    coefficients (2, 42, 1, 1) (data_augmentation_layer.cpp:103-122; 42 AugmentationCoeff fields); with
    recompute_mean its parameters are the iteration count (1,1,1,1), the mean (1,4,4,6) and per channel (1,4,1,1)
    (cpp:46-60, 139-140); GenerateAugmentationParameters (2, 42, 1, 1) (cpp:102); FlowAugmentation
    (2, 2, 4, 6) (cpp:56); Warp (2, 4, 4, 6): bottom 0's num and channels at bottom 1's size (warp_layer.cpp:21-22).
    aug0's caches, one per image (cpp:127-133, augmentation_layer_base.hpp: 6, 6, 22, 9 floats, and 25 once),
    on host and device; ones_ 4x6 (cpp:137-138); noise_ one image, 4x4x6 floats (cpp:153). aug1 takes its
    coefficients from bottom 1, and its noise_ too (they may carry an effect); it has no recompute_mean, so no ones_."""
    net = build(tmp_path, AUGMENT, fork=None)
    assert load(str(tmp_path / "net.prototxt")).schema.name == "liteflownet"
    assert tops(net, "aug0") == [(2, 4, 4, 6), (2, 42, 1, 1)]
    assert [p.shape for p in net.layer("aug0").params] == [(1, 1, 1, 1), (1, 4, 4, 6), (1, 4, 1, 1)]
    assert tops(net, "gen") == [(2, 42, 1, 1)] and tops(net, "flow") == [(2, 2, 4, 6)]
    assert tops(net, "w") == [(2, 4, 4, 6)]
    caches = {}
    for name, size in (("coeff_matrices_", 2 * 24), ("coeff_chromatic_", 2 * 24), ("coeff_chromatic_eigen_", 2 * 88),
                       ("coeff_effect_", 2 * 36), ("chromatic_eigenspace_", 100)):
        caches[(name, "device")] = caches[(name + " (host)", "host")] = size
    assert layer_buffers(net, "aug0") == {**caches, ("ones_", "device"): 24 * F, ("ones_ (host)", "host"): 24 * F,
                                          ("noise_", "device"): 4 * 4 * 6 * F}
    assert layer_buffers(net, "aug1") == {**caches, ("noise_", "device"): 4 * 4 * 6 * F}
    # FlowAugmentation: coeff_matrices1_ and 2_, a tTransMat per image (cpp:71-72)
    assert layer_buffers(net, "flow") == {(f"coeff_matrices{k}_{h}", d): 2 * 24 for k in (1, 2)
                                          for h, d in (("", "device"), (" (host)", "host"))}
    assert layer_buffers(net, "gen") == {} and layer_buffers(net, "w") == {}


@pytest.mark.parametrize("body, message", [
    ('layer { name: "w" type: "Warp" bottom: "a" bottom: "b" top: "w" }', "only 2 channels"),
    ('layer { name: "f" type: "FlowAugmentation" bottom: "gt" bottom: "a" bottom: "a" top: "f" '
     'augmentation_param { crop_width: 6 } }', "crop height"),
    ('layer { name: "d" type: "DataAugmentation" bottom: "a" top: "d" augmentation_param { crop_width: 16 '
     'crop_height: 4 } }', "crop width greater than original"),
])
def test_augmentation_checks_are_caffes(tmp_path, body, message):
    with pytest.raises(InputError, match=message):
        build(tmp_path, body, fork="liteflownet")


def test_customdata_slices_and_an_absent_lmdb(tmp_path):
    """custom_data_layer.cpp:512-538: one top per slice of the record's channels, batch_size first; slice
    points 3, 6, 8 give 3, 3, 2 and, the last slice BOOL1, 1 channel (cpp:110-124). Its LMDB absent, the
    height and width are assumed; each slice is a host Blob and data_mean_ (1, 9, H, W) is on the host."""
    (tmp_path / "net.prototxt").write_text(
        'layer { name: "cd" type: "CustomData" top: "i0" top: "i1" top: "f" top: "aux" data_param { '
        'source: "/nonexistent/chairs_lmdb" batch_size: 2 backend: LMDB slice_point: 3 slice_point: 6 slice_point: 8 '
        'encoding: UINT8 encoding: UINT8 encoding: UINT16FLOW encoding: BOOL1 } }\n'
        'layer { name: "w" type: "Warp" bottom: "i0" bottom: "f" top: "w" }\n')
    run = run_in_process(str(tmp_path / "net.prototxt"), "--input", "i0=2x3x8x10", "--input", "i1=2x3x8x10",
                         "--input", "f=2x2x8x10", "--input", "aux=2x1x8x10", "--format", "json")
    assert run.returncode == 0, run.stderr
    refused = run_in_process(str(tmp_path / "net.prototxt"), "--strict")
    assert refused.returncode == 2 and "i0=2x3x" in refused.stderr and "aux=2x1x" in refused.stderr
    net = build_text(tmp_path, (tmp_path / "net.prototxt").read_text(),
                     inputs={"i0": (2, 3, 8, 10), "i1": (2, 3, 8, 10), "f": (2, 2, 8, 10), "aux": (2, 1, 8, 10)})
    held = layer_buffers(net, "cd")
    assert held[("data_mean_", "host")] == 9 * 8 * 10 * F
    assert held[("prefetch_data_blobs_[3]", "host")] == 2 * 1 * 8 * 10 * F


def test_strupynet_audits():
    """StruPyNet's FlyingChairs LMDB is absent: its images are assumed (each of the assumed images smaller
    than the augmentation's 448x320 crop stops it: data_augmentation_layer.cpp:103-104)."""
    run = run_in_process(STRUPY)
    assert run.returncode == 0, run.stderr
    assert "LiteFlowNet's Caffe" in run.stdout and "aux 8x1x" in run.stdout


def test_an_l1loss_file_without_flownets_fields_stays_nvidias(tmp_path):
    """NVIDIA's Caffe 0.15 has an L1Loss too (read.schema.SAME_FIELDS): a file whose only fork type is an
    L1Loss with no l1_loss_param stays NVIDIA's; one with l1_loss_param (a FlowNet Caffe's field) is not: the
    three FlowNet Caffes read it, and it is audited with the first that builds it, said as an assumption."""
    net = build_text(tmp_path, INPUTS + 'layer { name: "loss" type: "L1Loss" bottom: "a" bottom: "b" }')
    assert net.schema == "nvcaffe"
    (tmp_path / "net.prototxt").write_text(INPUTS + 'layer { name: "loss" type: "L1Loss" bottom: "a" bottom: "b" '
                                                    'l1_loss_param { l2_per_location: true } }')
    run = run_in_process(str(tmp_path / "net.prototxt"))
    assert run.returncode == 0, run.stderr
    assert "Read with the caffe.proto of liruoteng/FlowNet's Caffe" in run.stdout
    assert "more than one Caffe fork reads this file" in run.stdout and "--fork svs or --fork liteflownet" in run.stdout
