"""GLAD's Caffe (southatsouth/GLAD b0b88d9, caffe/): its schema, its one-bottom Crop with height and weight, its
BVLC layers of August 2016, and the repository's training net.

Expected values are derived by hand below from that commit's caffe/src/caffe/layers/crop_layer.cpp/.cu,
caffe/include/caffe/layers/crop_layer.hpp and caffe/src/caffe/proto/caffe.proto, cited by file and line. The net
is in tests/data/glad (tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops, touched
from protoaudit.audit import build_nets
from protoaudit.layers import layer_class
from protoaudit.read.load import load
from protoaudit.read.upgrade import BEFORE_BATCH_NORM_UPGRADE

NETS = os.path.join(DATA, "glad")
F = 4  # bytes per float
I = 4  # bytes per int (Blob<int>)


def inputs(**shapes):
    return "".join(f'layer {{ name: "{n}" type: "Input" top: "{n}" input_param {{ shape {{ '
                   + " ".join(f"dim: {d}" for d in s) + " } } }\n" for n, s in shapes.items())


def crop(params, bottoms=("x",)):
    return ('layer { name: "c" type: "Crop" ' + " ".join(f'bottom: "{b}"' for b in bottoms)
            + f' top: "c" crop_param {{ {params} }} }}\n')


def build(tmp_path, body, **options):
    return build_text(tmp_path, "force_backward: true\n" + body, schema="glad", **options)


def int_blobs(axes):
    """offsets, src_strides_, dest_strides_: Blob<int> of one entry per axis (crop_layer.cpp:46-48, :81-82),
    written on the host in Reshape (cpp:49, :84-85) and read on the GPU by Forward_gpu (.cu:60-62)."""
    names = ("offsets", "src_strides_", "dest_strides_")
    return ({(n, "device"): axes * I for n in names} | {(n + " (host)", "host"): axes * I for n in names})


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "glad.proto")).read()
    assert text.startswith("// southatsouth/GLAD, caffe/src/caffe/proto/caffe.proto at commit "
                           "b0b88d9ce9197102b0cd0567695ffb1e1c4cdfde,\n// copied verbatim below this header")
    # caffe.proto:623-626 of the fork's file: BVLC's axis and offset, then height and weight
    assert ("  optional int32 axis = 1 [default = 2];\n  repeated uint32 offset = 2;\n"
            "  optional int32 height = 3 [default = 0];\n  optional int32 weight = 4 [default = 0];\n}\n") in text


def test_its_bvlc_layers_are_of_august_2016():
    """BVLC 1464368's src/ and include/ are GGL's base's (c62e06b) but for loss_layer.cpp's message:
    base_data_layer.hpp:49-79 (PREFETCH_COUNT 3 batches, copied into the tops) is the SSD fork's base; no
    accuracy_layer.cu; batch_norm_layer.cpp:10-37 adds no ParamSpec, and upgrade_proto.cpp predates BVLC
    a8ec123's BatchNorm upgrade."""
    for kind, fork in (("Data", "ssd"), ("ImageData", "ssd"), ("WindowData", "ssd"), ("Accuracy", "enet"),
                       ("BatchNorm", "ggl")):
        assert issubclass(layer_class(kind, "glad"), layer_class(kind, fork)), kind
    assert "glad" in BEFORE_BATCH_NORM_UPGRADE


def test_batch_norm_statistics_keep_the_files_lr_mult(tmp_path):
    """Three params given lr_mult 1 stay 1 (no upgrade zeroes them, no ParamSpec added: cpp:22-36)."""
    body = inputs(x=(2, 3, 4, 4)) + ('layer { name: "bn" type: "BatchNorm" bottom: "x" top: "bn" param { lr_mult: 1 } '
                                     'param { lr_mult: 1 } param { lr_mult: 1 } }\n')
    net = build(tmp_path, body)
    assert [p.lr_mult for p in net.layer("bn").params] == [1, 1, 1]
    assert [tuple(p.shape) for p in net.layer("bn").params] == [(3,), (3,), (1,)]


def test_crop_to_height_and_weight(tmp_path):
    """x (2, 3, 10, 12), axis 2 (the default, caffe.proto:623), height 4, weight 5, offsets 1 and 2: axis 2 gets
    height, axis 3 weight (crop_layer.cpp:57-62); 10 - 1 >= 4 and 12 - 2 >= 5 (cpp:72). Top (2, 3, 4, 5).
    Three Blob<int> of 4 axes; backward reads the top's diff and writes the whole bottom's (cpp:146-151)."""
    net = build(tmp_path, inputs(x=(2, 3, 10, 12)) + crop("height: 4 weight: 5 offset: 1 offset: 2"))
    assert tops(net, "c") == [(2, 3, 4, 5)]
    assert layer_buffers(net, "c") == int_blobs(4)
    assert touched(net, "c") == {("bottom", 0, "data", "forward", "device"), ("top", 0, "data", "forward", "device"),
                                 ("top", 0, "diff", "backward", "device"), ("bottom", 0, "diff", "backward", "device")}


def test_crop_on_the_channels_takes_weight(tmp_path):
    """axis 1: only axis 2 is height (cpp:57); axis 1 and 3 are weight (cpp:60-62). x (2, 6, 10, 12), height 4,
    weight 3, one offset 1 for all (cpp:63-65): (2, 3, 4, 3)."""
    net = build(tmp_path, inputs(x=(2, 6, 10, 12)) + crop("axis: 1 height: 4 weight: 3 offset: 1"))
    assert tops(net, "c") == [(2, 3, 4, 3)]


def test_crop_of_the_last_axis(tmp_path):
    """axis -1 is 3 (CanonicalAxisIndex, cpp:42): only axis 3 is cut, to weight 7 at offset 5: 12 - 5 >= 7;
    at offset 6 it is out of bounds (cpp:72-74)."""
    net = build(tmp_path, inputs(x=(2, 3, 10, 12)) + crop("axis: -1 weight: 7 offset: 5"))
    assert tops(net, "c") == [(2, 3, 10, 7)]
    with pytest.raises(Exception, match="out-of-bounds with size 7 and offset 6"):
        build(tmp_path, inputs(x=(2, 3, 10, 12)) + crop("axis: -1 weight: 7 offset: 6"))


def test_crop_sizes_default_to_zero(tmp_path):
    """height and weight default to 0 (caffe.proto:625-626) and nothing checks them: the cropped axes are 0."""
    net = build(tmp_path, inputs(x=(2, 3, 10, 12)) + crop(""))
    assert tops(net, "c") == [(2, 3, 0, 0)]


def test_crop_checks(tmp_path):
    """One bottom only (crop_layer.hpp:31, cpp:22); several offsets must be one per axis from the axis on
    (cpp:26-32); offset + size within the bottom (cpp:72-74)."""
    with pytest.raises(Exception, match="exactly 1 bottom"):
        build(tmp_path, inputs(x=(2, 3, 10, 12), y=(2, 3, 4, 5)) + crop("height: 4 weight: 5", ("x", "y")))
    with pytest.raises(Exception, match="number of offset values"):
        build(tmp_path, inputs(x=(2, 3, 10, 12)) + crop("height: 4 weight: 5 offset: 1 offset: 2 offset: 3"))
    with pytest.raises(Exception, match="dimension 2 is out-of-bounds with size 4 and offset 7"):
        build(tmp_path, inputs(x=(2, 3, 10, 12)) + crop("height: 4 weight: 5 offset: 7"))


def test_the_glad_net():
    """prototxt/train_val.prototxt, TRAIN: ImageData 512 x 512, batch 8 (new_height, new_width). Four crops on
    axis 2: head 96 x 96 at (0, 0), upper body 192 x 256 at (96, 0), lower body 224 x 256 at (288, 0: 512 - 288 =
    224, exactly), the whole 512 x 256 at (0, 256). Each branch's conv1 7/2 pad 3: (96 + 6 - 7) / 2 + 1 = 48,
    (192 - 1) / 2 + 1 = 96, (256 - 1) / 2 + 1 = 128, (512 - 1) / 2 + 1 = 256; the head's pool1 3/2 (ceil):
    ceil(45 / 2) + 1 = 24. Its BatchNorm layers give no param: the statistics keep lr_mult 1."""
    path = os.path.join(NETS, "train_val.prototxt")
    assert load(path).schema.name == "glad"
    net = build_nets(path)[0]
    assert tops(net, "data") == [(8, 3, 512, 512), (8,)]
    assert tops(net, "data/layer1") == [(8, 3, 96, 96)] and tops(net, "data/layer2") == [(8, 3, 192, 256)]
    assert tops(net, "data/layer3") == [(8, 3, 224, 256)] and tops(net, "data/full_data") == [(8, 3, 512, 256)]
    assert tops(net, "layer1/conv1/7x7_s2") == [(8, 64, 48, 48)]
    assert tops(net, "layer1/pool1/3x3_s2") == [(8, 64, 24, 24)]
    assert tops(net, "layer2/conv1/7x7_s2") == [(8, 64, 96, 128)] and tops(net, "conv1/7x7_s2") == [(8, 64, 256, 128)]
    assert [p.lr_mult for p in net.layer("layer1/conv1/7x7_s2/bn").params] == [1, 1, 1]
    assert layer_buffers(net, "data/layer1") == int_blobs(4)


def test_the_net_audits_with_no_flags():
    """Tried as a new user would: `protoaudit train_val.prototxt`."""
    r = run_in_process("train_val.prototxt", cwd=NETS, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout and "GLAD's Caffe" in r.stdout
