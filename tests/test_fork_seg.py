"""The segmentation forks: PSPNet's Caffe, DeepLab v2 (deeplab-public-ver2), DeepLab v1
(DeepLab-Context) and caffe-enet: which schema reads each file, each fork layer's shape rule and
buffers, and every corpus net of these forks audited to the end.

No log of these forks running these nets was found (their repositories ship none; issue threads
quote none), so every expected figure below is derived by hand from the fork's own source, at the
commit named in proto/forks/NAME.proto, with file:line references.
"""
import json
import os

import pytest

from conftest import DATA, ROOT, build_text as build, run_in_process
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.layers import layer_class
from protoaudit.memory.buffers import host_objects, net_buffers, runs_backward
from protoaudit.read.load import load

import logparse

CORPUS = os.path.join(DATA, "corpus", "nets")
SAMPLES = os.path.join(ROOT, "samples")
F = 4  # bytes per float
VOC = ("--define", "NUM_LABELS=21")  # DeepLab's run scripts set NUM_LABELS=21 for PASCAL VOC 2012


def corpus(name):
    return os.path.join(CORPUS, name + ".prototxt")


def owners(buffers, layer):
    """{owner: bytes} of the buffers a layer touches first."""
    return {b.owner: b.bytes for b in buffers if b.layer == layer}


# --- which Caffe reads each file ----------------------------------------------------------------

SCHEMAS = {
    # PSPNet's BN says slope_filler and frozen: only hszhao/PSPNet's caffe.proto has them
    "pspnet101_voc2012_473_deploy": "pspnet",
    "pspnet101_cityscapes_713_deploy": "pspnet",
    # TransformationParameter.scale_factors (8) and ImageDataParameter.label_type (4): deeplab-public-
    # ver2's caffe.proto, which PSPNet's Caffe keeps whole; it descends from DeepLab v2, so v2 is taken
    "soeaver_pspnet_resnet101v2_train": "deeplab_v2",
    "deeplabv2_vgg16_largefov_train": "deeplab_v2",
    "deeplabv2_resnet101_msc_test": "deeplab_v2",
    # V1 `type: IMAGE_SEG_DATA` (39) and conv `hole` (17): DeepLab-Context's caffe.proto alone
    "v1_deeplab_v1_vgg128_noup_train": "deeplab_v1",
    "v1_deeplab_v1_vgg128_noup_test": "deeplab_v1",
    # dense_image_data_param.label_divide_factor (13), and an Input layer caffe-segnet lacks
    "enet_train_encoder": "enet",
    "enet_deploy_final": "enet",
    # SegNet's files read with caffe-segnet's schema still: caffe-enet reads them too, but descends from it
    "segnet_train": "segnet",
    "segnet_basic_train": "segnet",
    "bayesian_segnet_basic_train": "segnet",
    "segnet_inference": "segnet",
    "segnet_basic_inference": "segnet",
    "segnet_pascal_deploy": "segnet",
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_each_corpus_file_is_read_with_its_forks_schema(name):
    assert load(corpus(name), defines={"NUM_LABELS": "21"}).schema.name == SCHEMAS[name]


def test_segnet_files_are_read_by_caffe_enet_too_but_taken_as_segnets():
    """caffe-enet's schema reads segnet_train.prototxt as well (it is caffe-segnet's plus fields):
    the file is caffe-segnet's, as the fork caffe-enet grew from."""
    assert load(corpus("segnet_train"), "enet").schema.name == "enet"
    assert load(corpus("segnet_train")).schema.name == "segnet"


def test_a_bare_bn_is_refused_naming_segnet_and_pspnet(tmp_path):
    """BN with no bn_param reads as caffe-segnet's (scale and shift, 2 params) and as PSPNet's (slope,
    bias, mean, variance: 4 params): the two would size it differently."""
    path = tmp_path / "net.prototxt"
    path.write_text('input: "data" input_dim: 1 input_dim: 2 input_dim: 4 input_dim: 4\n'
                    'layer { name: "bn" type: "BN" bottom: "data" top: "bn" }\n')
    with pytest.raises(InputError) as e:
        load(str(path))
    assert "segnet (" in str(e.value) and "pspnet (" in str(e.value) and "--fork" in e.value.fix
    assert len(build_nets(str(path), schema="pspnet")[0].layer("bn").params) == 4
    assert len(build_nets(str(path), schema="segnet")[0].layer("bn").params) == 2


def test_pspnet_keeps_deeplab_v2s_layers():
    """hszhao/PSPNet differs from deeplab-public-ver2 only in its BN layer (and a cuDNN BN and
    common.cuh): Interp, ImageSegData and SegAccuracy are one class for both forks."""
    for name in ("Interp", "ImageSegData", "SegAccuracy", "MatWrite"):
        assert layer_class(name, "pspnet") is layer_class(name, "deeplab_v2")
    assert layer_class("BN", "deeplab_v2") is None


def test_enet_layers_subclass_segnets_where_the_source_is_segnets():
    from protoaudit.layers import segnet

    for name in ("BN", "Upsample", "DenseImageData"):
        assert issubclass(layer_class(name, "enet"), getattr(segnet, name))


# --- DeepLab v1's pre-V2 schema and its upgrade -----------------------------------------------------

V1_NET = """
layers { name: "data" type: IMAGE_SEG_DATA top: "data" top: "label"
         image_data_param { source: "list.txt" batch_size: 2 label_type: PIXEL }
         transform_param { crop_size: 9 } }
layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv" blobs_lr: 1 blobs_lr: 2
         convolution_param { num_output: 4 kernel_size: 3 pad: 2 hole: 2 } }
layers { name: "interp" type: INTERP bottom: "conv" top: "interp" interp_param { shrink_factor: 2 } }
layers { name: "label_shrink" type: INTERP bottom: "label" top: "label_shrink" interp_param { shrink_factor: 2 } }
layers { name: "loss" type: SOFTMAX_LOSS bottom: "interp" bottom: "label_shrink"
         softmaxloss_param { ignore_label: 255 } }
"""


def test_deeplab_v1_upgrades_its_own_v1_types(tmp_path):
    """DeepLab-Context's Caffe creates IMAGE_SEG_DATA, INTERP, SEG_ACCURACY and MAT_WRITE from its
    V1 enum (image_seg_data_layer.cpp:235 REGISTER_LAYER_CLASS(IMAGE_SEG_DATA, ...)); upgraded,
    they take the names its V2 successor registers them under (ImageSegData, Interp, ...)."""
    net = build(tmp_path, V1_NET)
    assert [layer.type for layer in net.layers if not layer.is_split] == \
        ["ImageSegData", "Convolution", "Interp", "Interp", "SoftmaxWithLoss"]
    # blobs_lr 1, 2 became the ParamSpecs' lr_mult
    assert [p.lr_mult for p in net.layer("conv").params] == [1, 2]


def test_deeplab_v1_hole_convolution(tmp_path):
    """conv_layer.cpp:123-126: kernel_eff = 3 + (3 - 1)(2 - 1) = 5; out = (9 + 2*2 - 5) / 1 + 1 = 9.
    col_buffer_ (:138) is C_in*kh*kw x H_out*W_out = 3*3*3 x 9*9 = 2,187 floats, one image."""
    net = build(tmp_path, V1_NET)
    assert list(net.layer("conv").top_shapes) == [(2, 4, 9, 9)]
    got = owners(net_buffers(net, mode="cpu"), "conv")
    assert got["conv.col_buffer_"] == 3 * 3 * 3 * 9 * 9 * F


def test_deeplab_v1_data_layer_holds_one_host_batch_and_its_tops_are_its_own(tmp_path):
    """image_seg_data_layer.cpp:88-111: data (2, 3, 9, 9), label (2, 1, 9, 9), and the third top
    Caffe adds (AutoTopBlobs), data_dim (2, 1, 1, 2); base_data_layer.cpp:94-100: one prefetch
    batch of each, on the host (also in GPU mode); .cu:33-41 copies it into the tops."""
    net = build(tmp_path, V1_NET)
    assert list(net.layer("data").top_shapes) == [(2, 3, 9, 9), (2, 1, 9, 9), (2, 1, 1, 2)]
    gpu = [b for b in net_buffers(net, mode="gpu") if b.layer == "data"]
    prefetch = {b.owner: (b.bytes, b.device) for b in gpu if b.kind == "prefetch"}
    assert prefetch == {"data.prefetch_data_": (2 * 3 * 9 * 9 * F, "host"),
                        "data.prefetch_label_": (2 * 9 * 9 * F, "host"),
                        "data.prefetch_data_dim_": (2 * 2 * F, "host")}
    assert {b.owner for b in gpu if b.kind == "top data" and b.device == "device"} >= {"data", "label"}


def test_deeplab_v1_softmax_loss_computes_the_loss_on_the_host(tmp_path):
    """softmax_loss_layer.cu:11-22: Forward_gpu and Backward_gpu call the CPU code; the inner
    SoftmaxLayer (loss_layers.hpp:738) runs on the device: prob_ (2, 4, 5, 5) and scale_ N*H*W."""
    net = build(tmp_path, V1_NET)
    gpu = [b for b in net_buffers(net, mode="gpu") if b.layer == "loss"]
    device = {b.owner: b.bytes for b in gpu if b.device == "device"}
    assert device["loss.prob_"] == 2 * 4 * 5 * 5 * F and device["loss.scale_"] == 2 * 5 * 5 * F
    # the loss top (its anonymous name) lives on the host; no bottom diff serves as forward scratch
    assert all(b.device == "host" for b in gpu if b.kind == "top data")
    assert not [b for b in gpu if b.kind == "top diff" and b.touch == "forward"]


def test_deeplab_v1_cudnn_build(tmp_path):
    """DeepLab v1's factory in a cuDNN build (layer_factory.cpp:10-56): every convolution is cuDNN's
    R1 layer (no workspace, no col_buffer_; cudnn_conv_layer.cu asks before each diff), and MAX
    pooling without padding goes to cuDNN too (no max_idx_)."""
    pool = ('layers { name: "pool" type: POOLING bottom: "conv" top: "pool" '
            'pooling_param { pool: MAX kernel_size: 3 stride: 1 } }\n')
    net = build(tmp_path, V1_NET.replace('layers { name: "interp"', pool + 'layers { name: "interp"'))
    caffe = {b.owner for b in net_buffers(net, mode="gpu", engine="caffe")}
    cudnn = {b.owner for b in net_buffers(net, mode="gpu", engine="cudnn")}
    assert {"conv.col_buffer_", "pool.max_idx_"} <= caffe
    assert not {"conv.col_buffer_", "pool.max_idx_"} & cudnn
    assert not [b for b in net_buffers(net, mode="gpu", engine="cudnn") if b.kind == "workspace"]


def test_deeplab_v1_interp_takes_exactly_one_size(tmp_path):
    """DeepLab v1's interp_layer.cpp:14-19 CHECKs one spec; v2's takes both factors (shrink, then zoom)."""
    text = V1_NET.replace("interp_param { shrink_factor: 2 } }\nlayers { name: \"label_shrink\"",
                          "interp_param { shrink_factor: 2 zoom_factor: 3 } }\nlayers { name: \"label_shrink\"")
    with pytest.raises(InputError, match="one way"):
        build(tmp_path, text)


# --- Interp (deeplab-public-ver2, also PSPNet's) ------------------------------------------------------

INPUT = 'input: "data" input_shape { dim: 1 dim: 2 dim: %d dim: %d }\n'


def interp(tmp_path, h, w, params):
    text = INPUT % (h, w) + f'layer {{ name: "i" type: "Interp" bottom: "data" top: "i" interp_param {{ {params} }} }}'
    return build(tmp_path, text, schema="deeplab_v2").layer("i").top_shapes[0][2:]


@pytest.mark.parametrize("size,params,expected", [
    # zoom alone (interp_layer.cpp:36-41): 60 + (60 - 1)(8 - 1) = 473, PSPNet-101's conv6_interp at 473
    ((60, 60), "zoom_factor: 8", (473, 473)),
    # shrink alone (:30-35): (321 - 1) / 8 + 1 = 41, DeepLab-LargeFOV's label_shrink at crop 321
    ((321, 321), "shrink_factor: 8", (41, 41)),
    # both (:45-54): (513 - 1) / 4 + 1 = 129, then 129 + 128 * 2 = 385, the MSC net's 0.75 scale
    ((513, 513), "shrink_factor: 4 zoom_factor: 3", (385, 385)),
    ((513, 513), "shrink_factor: 2", (257, 257)),
    # height and width (:42-44), PSPNet's pyramid levels back to 60x60
    ((6, 6), "height: 60 width: 60", (60, 60)),
    # a factor outranks height/width; pad crops first: H_eff = 10 - 1 - 2 = 7, (7 - 1) / 2 + 1 = 4
    ((10, 12), "shrink_factor: 2 height: 99 width: 99 pad_beg: -1 pad_end: -2", (4, 5)),
    # C++ integer division: (10 - 1) / 4 + 1 = 3
    ((10, 10), "shrink_factor: 4", (3, 3)),
])
def test_interp_output_size(tmp_path, size, params, expected):
    assert interp(tmp_path, *size, params) == expected


@pytest.mark.parametrize("params,message", [
    ("pad_beg: 1", "only crops"),
    ("height: 5", "zoom_factor, shrink_factor, or height and width"),
    ("zoom_factor: 0", "zoom_factor 0 must be positive"),
    ("pad_beg: -5 pad_end: -5 zoom_factor: 2", "is empty"),
])
def test_interp_checks(tmp_path, params, message):
    with pytest.raises(InputError, match=message):
        interp(tmp_path, 8, 8, params)


def test_interp_keeps_no_buffer_and_writes_the_bottom_diff_only_when_asked(tmp_path):
    """interp_layer.cpp:74-81: backward returns at once unless propagate_down[0], else zeroes and
    fills the bottom's diff; the interp2 kernels (util/interp.cpp, .cu) allocate nothing."""
    text = INPUT % (6, 6) + """
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 3 kernel_size: 1 } }
layer { name: "i" type: "Interp" bottom: "conv" top: "i" interp_param { zoom_factor: 2 } }
input: "label" input_shape { dim: 1 dim: 1 dim: 11 dim: 11 }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "i" bottom: "label" top: "loss" }
"""
    net = build(tmp_path, text, schema="deeplab_v2")
    got = {(b.owner, b.kind): b.bytes for b in net_buffers(net, mode="cpu") if b.layer == "i"}
    # top 1x3x11x11 (6 + 5 = 11); backward: conv's diff 1x3x6x6
    assert got == {("i", "top data"): 3 * 11 * 11 * F, ("conv", "top diff"): 3 * 6 * 6 * F}


# --- ImageSegData and SegAccuracy (deeplab-public-ver2) ---------------------------------------------

SEG_DATA = """
layer { name: "data" type: "ImageSegData" top: "data" top: "label" %s
        transform_param { %s } image_data_param { source: "list.txt" batch_size: 2 %s } }
"""


def test_image_seg_data_v2_prefetches_five_batches_of_its_three_tops(tmp_path):
    """image_seg_data_layer.cpp:100-135: data (N, 3, crop_h, crop_w), label (N, 1, crop_h, crop_w),
    data_dim (N, 1, 1, 2), the third added by Caffe when the file names two (AutoTopBlobs);
    base_data_layer.hpp:71 PREFETCH_COUNT = 5, each batch allocated at setup (:136-157)."""
    net = build(tmp_path, SEG_DATA % ("", "crop_height: 5 crop_width: 7", ""), schema="deeplab_v2")
    assert list(net.layer("data").top_shapes) == [(2, 3, 5, 7), (2, 1, 5, 7), (2, 1, 1, 2)]
    prefetch = {b.owner: (b.bytes, b.device) for b in net_buffers(net, mode="gpu") if b.kind == "prefetch"}
    expected = {"data_": 5 * 2 * 3 * 5 * 7 * F, "label_": 5 * 2 * 5 * 7 * F, "dim_": 5 * 2 * 2 * F}
    # in GPU mode each batch has its device copy and its (pinned) host copy
    assert prefetch == {**{f"data.prefetch[5].{k}": (v, "device") for k, v in expected.items()},
                        **{f"data.prefetch[5].{k} (host)": (v, "host") for k, v in expected.items()}}
    # forward copies the batch into the tops, which are blobs of their own (:160-174)
    tops = {b.owner for b in net_buffers(net, mode="gpu") if b.kind == "top data"}
    assert {"data", "label"} <= tops and len(tops) == 3


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "csv"])
def test_image_seg_data_third_top_is_caffes_automatic_blob_in_every_format(tmp_path, fmt):
    """The top Caffe adds is named "(automatic)" (net.cpp:364, AppendTop); every report says
    where its shape came from under that name (markdown once failed on the nameless top: found by
    tests/fuzz_corpus.py)."""
    path = tmp_path / "net.prototxt"
    path.write_text(SEG_DATA % ("", "crop_height: 5 crop_width: 7", ""))
    run = run_in_process(str(path), "--fork", "deeplab_v2", "--format", fmt)
    assert run.returncode == 0, run.stderr
    if fmt == "json":
        origins = {o["top"]: o["shape"] for o in json.loads(run.stdout)["data_shapes"]}
        assert origins == {"data": [2, 3, 5, 7], "label": [2, 1, 5, 7], "(automatic)": [2, 1, 1, 2]}


def test_image_seg_data_without_a_crop_asks_for_the_image_size(tmp_path):
    path = tmp_path / "net.prototxt"
    path.write_text(SEG_DATA % ("", "mirror: true", "label_type: PIXEL"))
    run = run_in_process(str(path), "--strict")  # without it, 224 x 224 is assumed
    assert run.returncode == 2 and "--input data=2x3x" in run.stderr
    net = build_nets(str(path), inputs={"data": (2, 3, 40, 50)})[0]
    assert list(net.layer("data").top_shapes) == [(2, 3, 40, 50), (2, 1, 40, 50), (2, 1, 1, 2)]


def test_seg_accuracy_is_host_only_with_a_confusion_matrix(tmp_path):
    """seg_accuracy_layer.cpp:14-40: top (1, 1, 1, 3); a C x C confusion matrix of unsigned long
    (util/confusion_matrix.hpp:67); no .cu, so in GPU mode nothing of it is on the device."""
    text = SEG_DATA % ("", "crop_size: 8", "") + """
layer { name: "conv" type: "Convolution" bottom: "data" top: "score" convolution_param { num_output: 21 kernel_size: 1 } }
layer { name: "acc" type: "SegAccuracy" bottom: "score" bottom: "label" top: "acc" }
"""
    net = build(tmp_path, text, schema="deeplab_v2")
    assert list(net.layer("acc").top_shapes) == [(1, 1, 1, 3)]
    acc = [b for b in net_buffers(net, mode="gpu") if b.layer == "acc"]
    assert {b.owner: (b.bytes, b.device) for b in acc} == {"acc.confusion_matrix_": (21 * 21 * 8, "host"),
                                                           "acc": (3 * F, "host")}


def test_seg_accuracy_needs_the_label_at_the_scores_size(tmp_path):
    text = SEG_DATA % ("", "crop_size: 8", "") + """
layer { name: "conv" type: "Convolution" bottom: "data" top: "score" convolution_param { num_output: 21 kernel_size: 3 } }
layer { name: "acc" type: "SegAccuracy" bottom: "score" bottom: "label" top: "acc" }
"""
    with pytest.raises(InputError, match="same height and width"):
        build(tmp_path, text, schema="deeplab_v2")


def test_deeplab_v2_batch_norm_keeps_no_x_norm_and_no_forced_lr(tmp_path):
    """batch_norm_layer.cpp (deeplab-public-ver2), for N, C, H, W = 1, 2, 6, 5 in place:
    mean_ and variance_ C = 2, num_by_chans_ N*C = 2, temp_ 60, the multipliers H*W = 30 and
    N = 1; no x_norm_ (Reshape leaves it unshaped, :53); the GPU backward writes the bottom's diff
    (.cu:100-103). Its statistics keep the file's lr_mult (here none given: 1, so they learn)."""
    text = INPUT % (6, 5) + """
layer { name: "bn" type: "BatchNorm" bottom: "data" top: "data" }
input: "label" input_shape { dim: 1 dim: 1 dim: 6 dim: 5 }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "data" bottom: "label" top: "loss" }
"""
    path = tmp_path / "net.prototxt"
    path.write_text(text)
    (net,) = build_nets(str(path), schema="deeplab_v2")
    assert [p.lr_mult for p in net.layer("bn").params] == [1, 1, 1]
    got = {k: v // F for k, v in owners(net_buffers(net, mode="gpu"), "bn").items() if k.startswith("bn.")
           and "param" not in k}
    assert got == {"bn.spatial_sum_multiplier_": 30, "bn.batch_sum_multiplier_": 1, "bn.mean_": 2,
                   "bn.variance_": 2, "bn.num_by_chans_": 2, "bn.temp_": 60}
    with pytest.raises(InputError, match="cannot run in CPU mode"):
        net_buffers(net, mode="cpu")


# --- PSPNet's BN ----------------------------------------------------------------------------------

def bn_net(frozen):
    return INPUT % (6, 5) + f"""
layer {{ name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param {{ num_output: 4 kernel_size: 1 }} }}
layer {{ name: "bn" type: "BN" bottom: "conv" top: "conv"
        param {{ lr_mult: 1 }} param {{ lr_mult: 1 }} param {{ lr_mult: 0 }} param {{ lr_mult: 0 }}
        bn_param {{ frozen: {str(frozen).lower()} }} }}
input: "label" input_shape {{ dim: 1 dim: 1 dim: 6 dim: 5 }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "conv" bottom: "label" top: "loss" }}
"""


def test_pspnet_bn_buffers_when_it_learns(tmp_path):
    """bn_layer.cpp, for N, C, H, W = 1, 4, 6, 5: four (1, 4, 1, 1) params (:20-43);
    Reshape's multipliers H*W = 30 and N = 1 (:86-91); forward's broadcast_buffer_ and x_norm_
    (N*C*H*W = 120), spatial_statistic_ (N*C = 4), batch_statistic_ and x_inv_std_ (C = 4);
    backward: the slope and bias diffs (:244-268, lr_mult 1), the bottom's diff (in place: the top's)."""
    net = build(tmp_path, bn_net(False), schema="pspnet")
    assert [p.shape for p in net.layer("bn").params] == [(1, 4, 1, 1)] * 4
    got = owners(net_buffers(net, mode="gpu"), "bn")
    assert {k: v // F for k, v in got.items() if k.startswith("bn.")} == {
        "bn.param0": 4, "bn.param1": 4, "bn.param2": 4, "bn.param3": 4,
        "bn.spatial_sum_multiplier_": 30, "bn.batch_sum_multiplier_": 1, "bn.batch_statistic_": 4,
        "bn.spatial_statistic_": 4, "bn.broadcast_buffer_": 120, "bn.x_norm_": 120, "bn.x_inv_std_": 4}
    diffs = {b.owner for b in net_buffers(net, mode="gpu") if b.kind == "param diff" and b.layer == "bn"}
    assert diffs == {"bn.param0", "bn.param1"}


def test_pspnet_bn_frozen_keeps_no_x_norm_and_writes_no_param_diff(tmp_path):
    """frozen (the PSPNet-101 deploy nets' `frozen: true`): forward uses the moving statistics and
    skips x_norm_/x_inv_std_ (:181-186); backward writes only the bottom's diff (:214-241)."""
    net = build(tmp_path, bn_net(True), schema="pspnet")
    got = owners(net_buffers(net, mode="gpu"), "bn")
    assert "bn.x_norm_" not in got and "bn.x_inv_std_" not in got
    assert got["bn.broadcast_buffer_"] == 120 * F
    assert not [b for b in net_buffers(net, mode="gpu")
                if b.layer == "bn" and b.kind == "param diff" and b.touch == "backward"]


def test_pspnet_473_first_bn_by_hand():
    """conv1_1_3x3_s2/bn of pspnet101_VOC2012_473 (frozen, in place on 1x64x237x237):
    broadcast_buffer_ 64*237*237 = 3,594,816 floats; spatial_sum_multiplier_ 237*237 = 56,169;
    batch_sum_multiplier_ 1; spatial_statistic_ and batch_statistic_ 64 each."""
    (net,) = build_nets(corpus("pspnet101_voc2012_473_deploy"))
    got = owners(net_buffers(net, mode="gpu"), "conv1_1_3x3_s2/bn")
    name = "conv1_1_3x3_s2/bn."
    assert {k[len(name):]: v // F for k, v in got.items() if k.startswith(name) and "param" not in k} == {
        "spatial_sum_multiplier_": 56169, "batch_sum_multiplier_": 1, "batch_statistic_": 64,
        "spatial_statistic_": 64, "broadcast_buffer_": 3594816}


# --- caffe-enet -------------------------------------------------------------------------------------

def test_enet_label_divide_factor():
    """dense_image_data_layer.cpp:109-116: no crop, so the label is (N, 1, H / 8, W / 8) of the
    512 x 1024 images: 64 x 128 (enet_train_encoder.prototxt's data layer)."""
    (net,) = build_nets(corpus("enet_train_encoder"))
    assert list(net.layer("data").top_shapes) == [(4, 3, 512, 1024), (4, 1, 64, 128)]


def test_enet_a_crop_gives_the_label_the_crops_size(tmp_path):
    """:93-100: with crop_size the label is the crop's size, whatever label_divide_factor says."""
    text = """layer { name: "data" type: "DenseImageData" top: "data" top: "label" transform_param { crop_size: 32 }
        dense_image_data_param { source: "l.txt" batch_size: 2 new_height: 64 new_width: 64 label_divide_factor: 8 } }"""
    assert list(build(tmp_path, text, schema="enet").layer("data").top_shapes) == [(2, 3, 32, 32), (2, 1, 32, 32)]


def test_enet_spatial_dropout_is_sized_from_the_forks_python_source():
    """python/spatial_dropout.py: top = bottom's shape (:37-39); `vec` (C ones, :33) and each TRAIN
    forward's `vec_w` (:43-44) are NumPy int64 arrays of C on the host. drop1_0_3 of the encoder
    reads bn1_0_2, 4 x 64 x 128 x 256 (512 x 1024 halved twice by the initial block and pool1_0_4)."""
    (net,) = build_nets(corpus("enet_train_encoder"))
    node = net.layer("drop1_0_3")
    assert node.top_shapes == node.bottom_shapes == ((4, 64, 128, 256),)
    host = {b.owner: b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "drop1_0_3" and b.device == "host"}
    assert host == {"drop1_0_3.vec": 64 * 8, "drop1_0_3.vec_w": 64 * 8}
    assert not node.impl.gap


def test_enet_dropout_samples_in_test_when_asked(tmp_path):
    """caffe-enet's dropout_layer.cu: sample_weights_test draws rand_vec_ in TEST as in TRAIN."""
    text = INPUT % (4, 4) + """layer { name: "drop" type: "Dropout" bottom: "data" top: "data"
        dropout_param { sample_weights_test: true } }"""
    net = build(tmp_path, text, schema="enet", phase="TEST")
    buffers = [b for b in net_buffers(net, mode="gpu", backward=False) if b.kind == "layer buffer"]
    assert {b.owner: b.bytes for b in buffers} == {"drop.rand_vec_": 2 * 4 * 4 * F}
    net = build(tmp_path, text.replace("sample_weights_test: true", ""), schema="enet", phase="TEST")
    assert not [b for b in net_buffers(net, mode="gpu", backward=False) if b.kind == "layer buffer"]


def test_enet_other_python_layers_are_still_declared(tmp_path):
    text = INPUT % (4, 4) + """layer { name: "p" type: "Python" bottom: "data" top: "p"
        python_param { module: "mine" layer: "Mine" } }
        layer { name: "r" type: "ReLU" bottom: "p" top: "r" }"""
    path = tmp_path / "net.prototxt"
    path.write_text(text)
    with pytest.raises(InputError, match="Python layer"):
        build_nets(str(path), schema="enet")


def test_enet_accuracy_is_bvlcs_of_2017_on_the_host(tmp_path):
    """accuracy_layer.cpp:36-44: a scalar and a per-class (C,) top with nums_buffer_ (C); no .cu."""
    (net,) = build_nets(corpus("enet_train_encoder"))
    assert net.layer("accuracy").top_shapes[1] == (net.layer("accuracy").bottom_shapes[0][1],)
    gpu = [b for b in net_buffers(net, mode="gpu") if b.layer == "accuracy"]
    assert gpu and all(b.device == "host" for b in gpu)
    assert "accuracy.nums_buffer_" in {b.owner for b in gpu}


# --- every corpus net of these forks, audited to the end --------------------------------------------

# file -> (the help it needs, {layer: top shapes, derived by hand})
CORPUS_RUNS = {
    # input_dim 1x3x473x473; conv1 stride 2: (473 + 2 - 3) / 2 + 1 = 237; pool 3/2 pad 1 (ceil):
    # 119; conv3 stride 2: 60 (dilated after); conv6_interp zoom 8: 60 + 59 * 7 = 473
    "pspnet101_voc2012_473_deploy": ((), {"conv1_1_3x3_s2": [(1, 64, 237, 237)], "conv5_3_pool1": [(1, 2048, 1, 1)],
                                          "conv5_3_pool1_interp": [(1, 512, 60, 60)],
                                          "conv6_interp": [(1, 21, 473, 473)]}),
    # 713 -> 357 -> 179 -> 90; 90 + 89 * 7 = 713
    "pspnet101_cityscapes_713_deploy": ((), {"conv5_3_pool6_interp": [(1, 512, 90, 90)],
                                             "conv6_interp": [(1, 19, 713, 713)]}),
    # crop 513, batch 1, two tops named (data_dim added); score map at 64 back to 513 by Interp
    "soeaver_pspnet_resnet101v2_train": ((), {"data": [(1, 3, 513, 513), (1, 1, 513, 513), (1, 1, 1, 2)],
                                              "score_map_interp": [(1, 21, 513, 513)]}),
    # crop 321, batch 10: 321 -> 161 -> 81 -> 41 (pools 3/2 pad 1), label_shrink (321 - 1) / 8 + 1 = 41
    "deeplabv2_vgg16_largefov_train": (VOC, {"data": [(10, 3, 321, 321), (10, 1, 321, 321), (10, 1, 1, 2)],
                                             "label_shrink": [(10, 1, 41, 41)], "fc8_${EXP}": [(10, 21, 41, 41)]}),
    # a test.prototxt (its data layer is TEST only): audited as the TEST net; crop 513
    "deeplabv2_resnet101_msc_test": (VOC, {"data_res05": [(1, 3, 257, 257)], "data_res075": [(1, 3, 385, 385)]}),
    # V1: crop 321, batch 30; fc8 at 41; label_shrink 41
    "v1_deeplab_v1_vgg128_noup_train": (VOC, {"data": [(30, 3, 321, 321), (30, 1, 321, 321), (30, 1, 1, 2)],
                                              "label_shrink": [(30, 1, 41, 41)]}),
    # crop 513: 513 -> 257 -> 129 -> 65 (pool4 and pool5 stride 1); fc8_interp 65 + 64 * 7 = 513
    "v1_deeplab_v1_vgg128_noup_test": (VOC, {"fc8_interp": [(1, 21, 513, 513)]}),
    "enet_train_encoder": ((), {"data": [(4, 3, 512, 1024), (4, 1, 64, 128)]}),
    # Input 1x3x512x1024; the decoder's two Upsample (scale 2) layers back to 256 x 512
    "enet_deploy_final": ((), {"upsample5_0_4": [(1, 16, 256, 512)]}),
}


@pytest.mark.parametrize("name", sorted(CORPUS_RUNS))
def test_corpus_net_audits_to_the_end_with_only_the_help_it_needs(name):
    help_, shapes = CORPUS_RUNS[name]
    run = run_in_process(corpus(name), *help_, "--caffe-log", timeout=120)
    assert run.returncode == 0, run.stderr
    (net,) = logparse.parse(run.stdout)
    for layer, expected in shapes.items():
        assert net.layer(layer).shapes == expected, layer
    assert run_in_process(corpus(name), *help_, timeout=120).returncode == 0


def test_template_nets_take_num_labels_from_deeplabs_script():
    """Every other ${...} of DeepLab's files sits inside a string (names, paths), which Caffe reads
    as it is; ${NUM_LABELS} is a number (num_output). Left unset it is 21, the value DeepLab's
    run_pascal.sh gives it for PASCAL VOC 2012, said as assumed: the same audit as --define
    NUM_LABELS=21."""
    for name in ("deeplabv2_vgg16_largefov_train", "v1_deeplab_v1_vgg128_noup_train"):
        run = run_in_process(corpus(name), "--format", "json")
        given = run_in_process(corpus(name), "--format", "json", *VOC)
        assert run.returncode == 0 and given.returncode == 0, run.stderr
        plain, defined = json.loads(run.stdout), json.loads(given.stdout)
        assert plain["total_bytes"] == defined["total_bytes"]
        assert any("${NUM_LABELS}" in a["assumption"] and "21" in a["assumption"] for a in plain["assumptions"])


# --- samples/: one published net per fork family ------------------------------------------------------

SAMPLE_RUNS = {
    # the published deploy net: the same shapes as the corpus copy above
    "pspnet101_voc2012_473": ((), "pspnet", {"conv6_interp": [(1, 21, 473, 473)]}),
    "deeplab_v2_vgg16_largefov_train": (VOC, "deeplab_v2", {"label_shrink": [(10, 1, 41, 41)]}),
    # batch 3, 512 x 1024, label_divide_factor 1 (a full-size label); the decoder's last
    # Deconvolution (kernel 2, stride 2): 2 * (256 - 1) + 2 = 512 and 2 * (512 - 1) + 2 = 1024
    "enet_train_encoder_decoder": ((), "enet", {"data": [(3, 3, 512, 1024), (3, 1, 512, 1024)],
                                                "deconv6_0_0": [(3, 19, 512, 1024)]}),
}


@pytest.mark.parametrize("name", sorted(SAMPLE_RUNS))
def test_sample_audits_with_its_fork(name):
    help_, schema, shapes = SAMPLE_RUNS[name]
    path = os.path.join(SAMPLES, name + ".prototxt")
    with open(path) as f:
        head = f.read(600)
    assert "at commit" in head and "licen" in head.lower()  # its source and licence, in its first lines
    assert load(path, defines={"NUM_LABELS": "21"}).schema.name == schema
    run = run_in_process(path, *help_, "--caffe-log", timeout=120)
    assert run.returncode == 0, run.stderr
    (net,) = logparse.parse(run.stdout)
    for layer, expected in shapes.items():
        assert net.layer(layer).shapes == expected, layer
    assert run_in_process(path, *help_, timeout=120).returncode == 0


# --- PSPNet's Caffe, measured (tests/data/fork_oracle/pspnet) ------------------------------------------

FORK_ORACLE = os.path.join(DATA, "fork_oracle", "pspnet")
with open(os.path.join(FORK_ORACLE, "measurements.tsv")) as f:
    _rows = [line.rstrip("\n").split("\t") for line in f]
PSPNET_RUNS = [dict(zip(_rows[0], row)) for row in _rows[1:]]


@pytest.mark.parametrize("run", PSPNET_RUNS, ids=[r["run"] for r in PSPNET_RUNS])
def test_pspnet_fork_heap(run):
    """The real fork's heap after one forward and one backward in CPU mode (no solver), within
    the project's 0.5% (or 64 KiB); Caffe's own figure exactly; every layer's forward and backward
    bytes exactly (Split layers only free host objects, which protoaudit's fitted term holds).
    ImageSegData's host state (OpenCV's codec registry, its thread and RNGs, the list) is counted
    with the constants the shared data-layer oracle measured for BVLC's ImageData (data.py)."""
    (net,) = build_nets(os.path.join(FORK_ORACLE, run["file"]), phase=run["phase"])
    assert net.memory_required_for_data == int(run["memory_required_for_data"])
    buffers = net_buffers(net, mode="cpu", backward=runs_backward(net)) + [host_objects(net)]
    want = int(run["backward_live"])
    got = sum(b.bytes for b in buffers)
    assert abs(got - want) <= max(0.005 * want, 64 * 1024), f"protoaudit {got:,}, the fork {want:,}"
    with open(os.path.join(FORK_ORACLE, "runs", run["run"] + ".json")) as f:
        measured = json.load(f)
    for layer in measured["layers"]:
        if layer["type"] == "Split":
            continue
        mine = [b for b in buffers if b.layer == layer["name"]]
        assert sum(b.bytes for b in mine if b.touch == "forward") == layer["fwd_alloc"], layer["name"]
        assert sum(b.bytes for b in mine if b.touch == "backward") == layer["bwd_alloc"], layer["name"]
