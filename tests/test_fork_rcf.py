"""RCF's Caffe (yun-liu/rcf, ce460ff): its schema, AutoCrop held against its source, and RCF's own nets.

Expected values are derived by hand below from that commit's src/caffe/layers/auto_crop_layer.cpp/.cu,
include/caffe/layers/auto_crop_layer.hpp, include/caffe/util/coords.hpp and the coord_map() of
include/caffe/layers/{conv,deconv,pooling}_layer.hpp, cited by file and line. The nets are RCF's
examples/rcf/test_resnet50.prototxt and train_vgg16.prototxt (tests/data/SOURCES.md).
"""
import json
import os

import pytest

from conftest import DATA, ROOT, build_text, run_protoaudit, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.layers import layer_class
from protoaudit.layers.hed import ImageLabelmapData
from protoaudit.memory.buffers import layer_touches, net_buffers
from protoaudit.read.load import load

RESNET = os.path.join(DATA, "forks", "rcf_test_resnet50.prototxt")
VGG = os.path.join(DATA, "forks", "rcf_train_vgg16.prototxt")
HED = os.path.join(DATA, "forks", "hed_train_val.prototxt")
F = 4  # bytes per float


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "rcf.proto")).read()
    assert text.startswith("// yun-liu/rcf, src/caffe/proto/caffe.proto at commit "
                           "ce460ff635c3a5379ead7c39952f1dc305e8ac00,\n// copied verbatim below this header")
    # a 2016 BVLC caffe.proto: before clip_param and swish_param, and PoolingParameter's round_mode
    assert "// LayerParameter next available layer-specific ID: 147 (last added: recurrent_param)" in text
    assert "round_mode" not in text and "SwishParameter" not in text


def test_rcfs_nets_are_read_with_its_schema():
    assert load(RESNET).schema.name == "rcf"  # AutoCrop
    assert load(VGG).schema.name == "rcf"  # AutoCrop and ImageLabelmapData


def test_hed_and_bvlc_nets_keep_their_schemas(tmp_path):
    """RCF's Caffe descends from HED's (read.schema.DESCENDS_FROM): HED's own net, which both read,
    stays HED's; a net of BVLC's layers alone is read with BVLC's schema."""
    assert load(HED).schema.name == "hed"
    plain = tmp_path / "plain.prototxt"
    plain.write_text('layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 8 '
                     'dim: 8 } } }\nlayer { name: "c" type: "Convolution" bottom: "data" top: "c" '
                     'convolution_param { num_output: 2 kernel_size: 3 } }\n'
                     'layer { name: "cr" type: "Crop" bottom: "c" bottom: "data" top: "cr" }\n')
    assert load(str(plain)).schema.name == "bvlc"


def test_image_labelmap_data_is_heds_class():
    """RCF's image_labelmap_data_layer.cpp and its BasePrefetchingLabelmapDataLayer are HED's (only
    whitespace, commented-out code and a float conversion of the label map differ)."""
    assert layer_class("ImageLabelmapData", "rcf") is layer_class("ImageLabelmapData", "hed") is ImageLabelmapData


def test_resnet50_test_net_audits_with_no_flags():
    """test_resnet50.prototxt declares its input (input: "data", 1x3x224x224), which RCF's Caffe
    makes an Input layer (upgrade_proto.cpp:953-990). Each AutoCrop's top is (num, channels) of the
    upsampled score and (height, width) of the image: (1, 1, 224, 224) (auto_crop_layer.cpp:78-83)."""
    run = run_protoaudit(RESNET, "--format", "json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["assumptions"] == []
    shapes = {layer["name"]: layer["tops"] for layer in out["nets"][0]["layers"]}
    for k in range(1, 6):
        assert shapes[f"crop{k}"] == [[1, 1, 224, 224]]
    # the upsampled side outputs, 2 (h - 1) + 4, 4 (h - 1) + 8, 8 (h - 1) + 16 (deconv's rule), are
    # cropped back to the image: res2 at 112, res3 at 56, res4 and res5 (dilated) at 28
    assert shapes["upsample_2"] == [[1, 1, 226, 226]] and shapes["upsample_4"] == [[1, 1, 228, 228]]
    assert shapes["upsample_8"] == shapes["upsample_8_5"] == [[1, 1, 232, 232]]


def crops(net):
    return {n.name: n.impl.crop for n in net.layers if n.type == "AutoCrop"}


def test_crop_offsets_are_the_coordinate_maps_composed():
    """LayerSetUp (auto_crop_layer.cpp:52-75) composes each layer's coord_map from the blob both
    bottoms come from (the image) to bottom 0, and crops by minus the offset of
    crop_map = map(bottom 1) o map(bottom 0)^-1; map(bottom 1) is the identity (only a Split).
    FilterMap(k, s, p) = (s, (k - 1) / 2 - p) (coords.hpp:48-57); a convolution's or pooling's map is
    its inverse (1 / s, -((k - 1) / 2 - p) / s) (conv_layer.hpp:69-77, pooling_layer.hpp:37-40), a
    deconvolution's is FilterMap itself (deconv_layer.hpp:36-44); compose (a, b) o (c, d) = (ac, ad + b).
    Every 3x3 convolution pads 1 and every 1x1 pads 0: (1, 0). VGG16: pool1..3 (k 2, s 2) map to
    (1/2, -1/4), pool4 (k 2, s 1) to (1, -1/2); the dilated conv5 (extent 5, pad 2) to (1, 0).
      dsn2: deconv (k 4, s 2) (2, 3/2) o pool1 (1/2, -1/4) = (1, 1): crop 1
      dsn3: deconv (k 8, s 4) (4, 7/2) o pool2 = (2, 5/2); o pool1 = (1, 2): crop 2
      dsn4: deconv (k 16, s 8) (8, 15/2) o pool3, pool2, pool1: (4, 11/2), (2, 9/2), (1, 4): crop 4
      dsn5: (8, 15/2) o pool4 (1, -1/2) = (8, 7/2), then three pools: (4, 3/2), (2, 1/2), (1, 0): crop 0
    as RCF's README says (offsets 1, 2, 4 and 0 for a Crop layer instead). ResNet-50: conv1 (7x7,
    pad 3) is (1, 0), pool1 (k 2, s 2) (1/2, -1/4), and res3a and res4a halve with 1x1 stride-2
    branches (1/2, 0): dsn2 (2, 3/2) o pool1 = (1, 1); dsn3 (4, 7/2) o res3a (2, 7/2) o pool1 = (1, 3);
    dsn4 and dsn5 (8, 15/2) o res4a o res3a = (2, 15/2) o pool1 = (1, 7)."""
    vgg = build_nets(VGG, inputs={"data": (1, 3, 320, 480)})[0]
    assert crops(vgg) == {"crop2": (1, 1), "crop3": (2, 2), "crop4": (4, 4), "crop5": (0, 0)}
    resnet = build_nets(RESNET)[0]
    assert crops(resnet) == {"crop1": (0, 0), "crop2": (1, 1), "crop3": (3, 3), "crop4": (7, 7), "crop5": (7, 7)}


def test_vgg16_training_net_asks_for_its_image_and_audits_with_it():
    """ImageLabelmapData reads the image list's first image (image_labelmap_data_layer.cpp:69-73),
    absent here: the data shape is asked for; with it, the label map follows (cpp:102-117) and
    each crop comes back to the image's size (a BSDS image, 320x480)."""
    refused = run_protoaudit(VGG, "--strict")  # without it, 224 x 224 is assumed
    assert refused.returncode == 2 and "--input data=1x3xHxW" in refused.stderr
    run = run_protoaudit(VGG, "--input", "data=1x3x320x480", "--format", "json")
    assert run.returncode == 0, run.stderr
    train = json.loads(run.stdout)["nets"][0]
    shapes = {layer["name"]: layer["tops"] for layer in train["layers"]}
    assert shapes["data"] == [[1, 3, 320, 480], [1, 1, 320, 480]]
    # pool1..3 ceil-halve 320x480 to 160x240, 80x120, 40x60; pool4 (k 2, s 1) makes 39x59
    assert shapes["upsample_2"] == [[1, 1, 322, 482]] and shapes["upsample_4"] == [[1, 1, 324, 484]]
    assert shapes["upsample_8"] == [[1, 1, 328, 488]] and shapes["upsample_8_5"] == [[1, 1, 320, 480]]
    for k in range(2, 6):
        assert shapes[f"crop{k}"] == [[1, 1, 320, 480]]


def test_autocrop_allocates_its_top_and_bottom_0s_diff_only():
    """auto_crop_layer.hpp:50: two ints, no parameters or buffers. Forward writes the top
    (cpp:89, cu:29): crop2's 1x1x320x480 = 153,600 floats. Backward takes bottom 0's diff before it
    looks at propagate_down (cpp:105, cu:44): score-dsn2-up's, 1x1x322x482 = 155,204 floats, first
    touched here (the Deconvolution below it reads it after). Bottom 1, the image, gives only its
    shape: neither its data nor its diff is touched."""
    train = build_nets(VGG, inputs={"data": (1, 3, 320, 480)})[0]
    owned = {(b.owner, b.kind, b.touch): b.bytes for b in net_buffers(train, mode="gpu") if b.layer == "crop2"}
    assert owned == {("upscore-dsn2", "top data", "forward"): 153_600 * F,
                     ("score-dsn2-up", "top diff", "backward"): 155_204 * F}
    touched = {(t.stage, t.what, t.index, t.part) for t in layer_touches(train.layer("crop2"), "gpu", "caffe")}
    assert touched == {("forward", "bottom", 0, "data"), ("forward", "top", 0, "data"),
                       ("backward", "top", 0, "diff"), ("backward", "bottom", 0, "diff")}


NET = '''layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }
'''


def build(tmp_path, body):
    return build_text(tmp_path, NET + body)


def test_a_top_is_bottom_0s_num_and_channels_at_bottom_1s_height_and_width(tmp_path):
    """cpp:81-82, with the crop (2, 2) of a 5x5 convolution padded 4 (FilterMap (1, 2 - 4) inverted:
    (1, 2); crop_map (1, -2)): 12x12 cropped to 8x8."""
    net = build(tmp_path, 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" '
                          'convolution_param { num_output: 5 kernel_size: 5 pad: 4 } }\n'
                          'layer { name: "a" type: "AutoCrop" bottom: "c" bottom: "data" top: "a" }\n')
    assert tops(net, "c") == [(1, 5, 12, 12)] and tops(net, "a") == [(1, 5, 8, 8)]
    assert net.layer("a").impl.crop == (2, 2)


@pytest.mark.parametrize("layers, message", [
    # pooling (k 2, s 2) halves: crop_map = (2, 1/2) (CHECK_DOUBLE_EQ(scale, 1), cpp:68)
    ('layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n'
     'layer { name: "a" type: "AutoCrop" bottom: "p" bottom: "data" top: "a" }\n', "different scales on the height"),
    # an unpadded 3x3 convolution starts a pixel in: crop_map = (1, 1) (CHECK_LE(offset, 0), cpp:69)
    ('layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 1 kernel_size: 3 } }\n'
     'layer { name: "a" type: "AutoCrop" bottom: "c" bottom: "data" top: "a" }\n', "Negative crop width"),
    # a 2x2 deconvolution, stride 1: FilterMap (1, 1/2), crop_map = (1, -1/2) (cpp:71-72)
    ('layer { name: "d" type: "Deconvolution" bottom: "data" top: "d" convolution_param { num_output: 1 kernel_size: 2 } }\n'
     'layer { name: "a" type: "AutoCrop" bottom: "d" bottom: "data" top: "a" }\n', "not a whole number"),
    # a BatchNorm with a top of its own lies on the path: Layer::coord_map is NOT_IMPLEMENTED (layer.hpp:322-326)
    ('layer { name: "bn" type: "BatchNorm" bottom: "data" top: "bn" }\n'
     'layer { name: "a" type: "AutoCrop" bottom: "bn" bottom: "data" top: "a" }\n', "no coordinate map for a BatchNorm"),
    # two inputs share no blob (cpp:45-49)
    ('layer { name: "in2" type: "Input" top: "other" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }\n'
     'layer { name: "a" type: "AutoCrop" bottom: "data" bottom: "other" top: "a" }\n', "disconnected blobs"),
])
def test_its_setup_checks_are_caffes(tmp_path, layers, message):
    with pytest.raises(InputError) as e:
        build(tmp_path, layers)
    assert e.value.layer == "a" and message in str(e.value)


def test_in_place_layers_are_passed_over(tmp_path):
    """down_map keeps the first layer that made each blob (cpp:16-27): an in-place BatchNorm is
    not on the path, and the crop is the convolution's."""
    net = build(tmp_path, 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" '
                          'convolution_param { num_output: 1 kernel_size: 1 pad: 1 } }\n'
                          'layer { name: "bn" type: "BatchNorm" bottom: "c" top: "c" }\n'
                          'layer { name: "a" type: "AutoCrop" bottom: "c" bottom: "data" top: "a" }\n')
    assert net.layer("a").impl.crop == (1, 1)


def test_each_autocrop_is_checked_on_its_own_path(tmp_path):
    """Two AutoCrops alike (the same parameters and bottom shapes) on different paths: pool k 2 and
    pool k 3 (stride 2) both make 4x4 of 8x8 and the 4x4 deconvolutions (stride 2) 10x10 of it, but
    (2, 3/2) o (1/2, -1/4) = (1, 1) aligns and (2, 3/2) o (1/2, -1/2) = (1, 1/2) does not."""
    pools = ('layer { name: "p%d" type: "Pooling" bottom: "data" top: "p%d" '
             'pooling_param { pool: MAX kernel_size: %d stride: 2 } }\n'
             'layer { name: "d%d" type: "Deconvolution" bottom: "p%d" top: "d%d" '
             'convolution_param { num_output: 1 kernel_size: 4 stride: 2 } }\n')
    body = (pools % (2, 2, 2, 2, 2, 2) + pools % (3, 3, 3, 3, 3, 3)
            + 'layer { name: "a2" type: "AutoCrop" bottom: "d2" bottom: "data" top: "a2" }\n'
            + 'layer { name: "a3" type: "AutoCrop" bottom: "d3" bottom: "data" top: "a3" }\n')
    with pytest.raises(InputError) as e:
        build(tmp_path, body)
    assert e.value.layer == "a3" and "not a whole number" in str(e.value)
    net = build(tmp_path, body.rsplit("layer {", 1)[0])  # without a3
    assert net.layer("a2").impl.crop == (1, 1) and tops(net, "d3") == tops(net, "d2") == [(1, 1, 10, 10)]
