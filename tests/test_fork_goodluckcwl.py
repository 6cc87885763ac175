"""Weiliang Chen's Caffe (goodluckcwl/custom-caffe, aa5345b): its schema, its own layers held against
its source, and Face-alignment-mobilenet-v2's train net (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/layers/image_float_data_layer.cpp,
weight_euclidean_loss_layer.cpp/.cu, conv_dw_layer.cpp/.cu, noise_layer.cpp/.cu, base_data_layer.cpp
and include/caffe/layers/*.hpp, cited by file and line.
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

NET = os.path.join(DATA, "forks", "goodluckcwl", "train_val.prototxt")
F = 4  # bytes per float


def loss_net(outputs=136, label=136, extra=""):
    """An InnerProduct and a label from Input into a WeightEuclideanLoss."""
    return ('input: "x" input_shape { dim: 2 dim: 5 }\n'
            f'input: "y" input_shape {{ dim: 2 dim: {label} }}\n'
            f'layer {{ name: "fc" type: "InnerProduct" bottom: "x" top: "fc" inner_product_param {{ num_output: {outputs} }} }}\n'
            f'layer {{ name: "loss" type: "WeightEuclideanLoss" bottom: "fc" bottom: "y" top: "loss" {extra}}}\n')


def data_net(extra_tops="", float_param="label_dim: 10", transform=""):
    return ('layer { name: "data" type: "ImageFloatData" top: "data" top: "label" ' + extra_tops
            + f'transform_param {{ {transform} }} '
            'image_data_param { source: "absent/list.txt" batch_size: 8 new_height: 40 new_width: 30 } '
            f'image_float_data_param {{ {float_param} }} }}\n')


def test_the_proto_is_the_forks_file_under_its_header():
    text = open(os.path.join(ROOT, "proto", "forks", "goodluckcwl.proto"), encoding="utf-8").read()
    assert text.startswith("// goodluckcwl/custom-caffe (")
    assert "commit aa5345b9d659622a8efbb89d00282389ef0db666,\n// copied verbatim" in text
    body = text.split("\n", 2)[2]
    assert body.startswith('syntax = "proto2";')
    assert "optional ImageFloatDataParameter image_float_data_param = 245;" in body
    assert "optional float pad_ratio = 11 [default = 0];" in body


def test_the_face_alignment_net_is_the_forks_and_audits_with_no_flags():
    """Batch 64 of 64 x 64 colour images (is_color's default, new_height/new_width: 64), 136 landmark
    floats (label_dim). conv1 (3x3, pad 1, stride 2): (64 + 2 - 3) / 2 + 1 = 32; Convolution1 (1x1)
    keeps 32 x 32 with 96 channels; ConvolutionDepthwise1 (3x3, pad 1, stride 2): (32 + 2 - 3) / 2 + 1
    = 16, keeping the 96 channels (conv_dw_layer.cpp:91-100)."""
    assert load(NET).schema.name == "goodluckcwl"
    r = run_in_process(NET)
    assert r.returncode == 0, r.stderr
    assert "Read with the caffe.proto of Weiliang Chen's Caffe" in r.stdout
    train = build_nets(NET)[0]
    assert tops(train, "data") == [(64, 3, 64, 64), (64, 136)]
    assert tops(train, "conv1") == [(64, 16, 32, 32)]
    assert tops(train, "ConvolutionDepthwise1") == [(64, 96, 16, 16)]
    assert tops(train, "landmarkloss") == [()]
    assert "the TEST net" in r.stdout


def test_the_data_layer_holds_prefetch_batches_of_both_tops():
    """data_param.prefetch (default 4) Batches (base_data_layer.cpp:45-50), each with its device copy
    in GPU mode (:72-80): 4 x 64 x 3 x 64 x 64 floats of data and 4 x 64 x 136 of labels."""
    got = layer_buffers(build_nets(NET)[0], "data")
    assert got[("prefetch[4].data", "device")] == 4 * 64 * 3 * 64 * 64 * F == 12_582_912
    assert got[("prefetch[4].landmark", "device")] == 4 * 64 * 136 * F == 139_264


def test_the_depthwise_multipliers_are_filled_on_the_host():
    """ConvolutionDepthwise1: weight_multiplier_ (N, Ho, Wo) = 64 x 16 x 16 floats set by caffe_set on
    the host (cpp:109-115) and copied to the device by the GPU backward (cu:204); weight_buffer_
    C x kh x kw x N x Ho x Wo = 96 x 3 x 3 x 64 x 16 x 16 floats (cpp:101-108, cu:193). No bias
    (bias_term: false), so no bias buffers."""
    got = layer_buffers(build_nets(NET)[0], "ConvolutionDepthwise1")
    assert got == {("weight_multiplier_ (host)", "host"): 64 * 16 * 16 * F,
                   ("weight_multiplier_", "device"): 64 * 16 * 16 * F,
                   ("weight_buffer_", "device"): 96 * 9 * 64 * 16 * 16 * F}
    assert got[("weight_buffer_", "device")] == 56_623_104


def test_the_noise_layer_keeps_no_mask():
    """The fork's Noise makes its mask a Blob local to the forward (noise_layer.cpp:17-18), freed on
    return; its top is NeuronLayer's, the bottom's shape."""
    net = build_nets(NET)[0]
    noise = [layer for layer in net.layers if layer.type == "Noise"][0]
    assert list(noise.top_shapes) == [(64, 3, 64, 64)]
    assert not [b for b in net_buffers(net, mode="gpu") if b.layer == noise.name and b.kind == "layer buffer"]


def test_the_loss_keeps_four_host_buffers_of_bottom_0s_shape(tmp_path):
    """l2_weight_ (LayerSetUp, cpp:21), diff_, wdiff_ and pupil_dis_ (Reshape, cpp:65-67), each 2 x 136
    floats, all written by the CPU code the GPU functions call (cu:11, 32): host memory."""
    net = build_text(tmp_path, loss_net())
    assert layer_buffers(net, "loss") == {(name, "host"): 2 * 136 * F
                                          for name in ("l2_weight_", "diff_", "wdiff_", "pupil_dis_")}
    assert tops(net, "loss") == [()]


def test_the_loss_needs_136_values_per_sample(tmp_path):
    """LayerSetUp writes 2 x 68 weights per sample into l2_weight_ (cpp:26-49); Reshape CHECKs equal
    count(1) (cpp:63)."""
    with pytest.raises(InputError, match="2 x 68 landmark weights"):
        build_text(tmp_path, loss_net(outputs=10, label=10))
    with pytest.raises(InputError, match="same dimension"):
        build_text(tmp_path, loss_net(outputs=136, label=138))


def test_landmarks_from_an_absent_dataset_are_taken_as_the_loss_takes_them(tmp_path):
    """An HDF5Data layer whose list is not here, its landmarks read by the loss: one value per value
    of bottom 0 (Reshape's CHECK of count(1), cpp:62-64), so 8 x 136 beside a prediction of 136, said
    as an assumption (tried as a new user would: a 98-point face alignment net was refused, its
    landmarks taken for images)."""
    (tmp_path / "n.prototxt").write_text(
        'layer { name: "d" type: "HDF5Data" top: "x" top: "y" hdf5_data_param { source: "absent.txt" batch_size: 8 } }\n'
        'layer { name: "fc" type: "InnerProduct" bottom: "x" top: "fc" inner_product_param { num_output: 136 } }\n'
        'layer { name: "loss" type: "WeightEuclideanLoss" bottom: "fc" bottom: "y" top: "loss" }\n')
    run = run_in_process("n.prototxt", "--fork", "goodluckcwl", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "top 'y' 8x136: assumed: what the layer reading it takes" in run.stdout


def test_image_float_data_tops(tmp_path):
    """The label is (batch, label_dim) (cpp:137-140), a third top the weight (batch) (cpp:146-147);
    with_heatmap merges one grey channel into the image (cpp:104-117): 3 + 1 channels."""
    net = build_text(tmp_path, data_net())
    assert tops(net, "data") == [(8, 3, 40, 30), (8, 10)]
    net = build_text(tmp_path, data_net('top: "w" ', "label_dim: 10 hard_sample: true"))
    assert tops(net, "data") == [(8, 3, 40, 30), (8, 10), (8,)]
    net = build_text(tmp_path, data_net(float_param="label_dim: 4 with_heatmap: true"))
    assert tops(net, "data") == [(8, 4, 40, 30), (8, 4)]
    with pytest.raises(InputError, match="crop_h"):
        build_text(tmp_path, data_net(transform="crop_h: 20 crop_w: 20"))
