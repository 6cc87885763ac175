"""caffe-pro (yihui-he/caffe-pro a4f0a87, the Caffe yihui-he/channel-pruning pins as its submodule caffe): its
schema and channel-pruning's VGG-16, whose ImageData layers set new_dim and bicubic (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/proto/caffe.proto,
src/caffe/util/io.cpp, src/caffe/layers/image_data_layer.cpp, src/caffe/data_transformer.cpp and
src/caffe/layers/cudnn_conv_layer.cpp, cited by file and line, and from the net's own layers.
"""
import os

import pytest

import datasets as ds
from conftest import DATA, ROOT, layer_buffers, run_in_process, tops
from protoaudit import InputError, build_nets
from protoaudit.read.load import load
from protoaudit.read.schema import load_schema

NET = os.path.join(DATA, "forks", "caffe_pro", "vgg.prototxt")


def image_net(folder, params, transform="", name="net.prototxt"):
    path = folder / name
    path.write_text('layer { name: "data" type: "ImageData" top: "data" top: "label" '
                    f'transform_param {{ {transform} }} image_data_param {{ source: "list.txt" batch_size: 2 {params} }} }}\n'
                    'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" '
                    'inner_product_param { num_output: 2 } }\n')
    return str(path)


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "caffe_pro.proto")).read()
    assert text.startswith("// yihui-he/caffe-pro (the Caffe yihui-he/channel-pruning pins as its submodule caffe), "
                           "src/caffe/proto/caffe.proto at commit a4f0a8735fee43a5b59f20ad4de4135467256e67,\n")


def test_the_fields_are_where_the_fork_puts_them():
    """caffe.proto:808, 811: ImageDataParameter's new_dim (13, default 0) and bicubic (14, default false)."""
    fields = load_schema("caffe_pro").message("ImageDataParameter").DESCRIPTOR.fields_by_name
    assert (fields["new_dim"].number, fields["new_dim"].default_value) == (13, 0)
    assert (fields["bicubic"].number, fields["bicubic"].default_value) == (14, False)


def test_the_fields_choose_the_schema(tmp_path):
    """Only the fork reads new_dim; an ImageData net without it stays BVLC's."""
    assert load(NET).schema.name == "caffe_pro"
    assert load(image_net(tmp_path, "new_height: 8 new_width: 8")).schema.name == "bvlc"


def test_the_vgg_audits_with_no_flags():
    """With new_dim 256 the shorter side is 256 and the longer one at least that (io.cpp:100-109);
    InferBlobShape gives crop_size x crop_size, with the image's 3 channels (is_color, default true:
    CV_LOAD_IMAGE_COLOR, io.cpp:94-95; data_transformer.cpp:504-508): data 32x3x224x224 in TRAIN,
    10x3x224x224 in TEST, label (batch_size) (image_data_layer.cpp:86-99).

    Parameters: 3x3 convolutions with biases, 3->64, 64->64 (1,792 + 36,928), 64->128, 128->128
    (73,856 + 147,584), 128->256 and two 256->256 (295,168 + 2 * 590,080), 256->512 and two 512->512
    (1,180,160 + 2 * 2,359,808), three 512->512 (3 * 2,359,808): 14,714,688. fc6 512*7*7 -> 4096
    (102,764,544), fc7 4096 -> 4096 (16,781,312), fc8 4096 -> 1000 (4,097,000). 138,357,544 in all."""
    r = run_in_process(NET)
    assert r.returncode == 0, r.stderr
    assert "Read with the caffe.proto of caffe-pro" in r.stdout
    assert "Params: 138,357,544 (trainable 138,357,544, non-trainable 0)" in r.stdout
    train, test = build_nets(NET, phase="train")[0], build_nets(NET, phase="test")[0]
    assert tops(train, "data") == [(32, 3, 224, 224), (32,)]
    assert tops(test, "data") == [(10, 3, 224, 224), (10,)]


def test_the_mean_is_the_crops_and_the_cudnn_workspace_8_kib():
    """The transformer's mean blob is C x crop x crop (data_transformer.cpp:257-259): 3*224*224 floats,
    602,112 bytes (the repository's temp/bgr.binaryproto is 602,126 bytes: those and a BlobProto's
    header). cuDNN picks each algorithm under 8 KiB (cudnn_conv_layer.cpp:116) and keeps
    min(group, 1) * 3 workspaces (cpp:24-26, 192-193): conv1_1's need, 3*9*224*224*4 bytes, is over
    8,192, so 3 * 8,192 = 24,576 bytes. BVLC's limit of 8 MiB would keep 3 * 5,419,008."""
    train = build_nets(NET)[0]
    assert layer_buffers(train, "data")[("data_mean_", "host")] == 602_112
    assert layer_buffers(train, "conv1_1", engine="cudnn")[("workspace", "device")] == 24_576
    assert layer_buffers(train, "conv5_3", engine="cudnn")[("workspace", "device")] == 24_576


def test_new_dim_resizes_the_shorter_side(tmp_path, monkeypatch):
    """Without a crop the top is the resized image (data_transformer.cpp:507-508). A 10x4 image
    (width x height) with new_dim 3: scale = 3/4 = 0.75 (float), the width round(0.75 * 10) = round(7.5) = 8,
    C's round taking halves away from zero (io.cpp:100-109): 2x3x3x8. new_dim 200 makes it 200 x
    round(50 * 10) = 500. A 5x9 image (portrait): width 3, height round(0.6 * 9) = round(5.4) = 5."""
    monkeypatch.chdir(tmp_path)
    names = ds.write_images(str(tmp_path), 1, 3, 4, 10)
    ds.write_list(str(tmp_path / "list.txt"), [f"{names[0]} 0"])
    assert tops(build_nets(image_net(tmp_path, "new_dim: 3 bicubic: true"))[0], "data")[0] == (2, 3, 3, 8)
    assert tops(build_nets(image_net(tmp_path, "new_dim: 200", name="b.prototxt"))[0], "data")[0] == (2, 3, 200, 500)
    (tmp_path / names[0]).write_bytes(ds.image_bytes(3, 9, 5))
    assert tops(build_nets(image_net(tmp_path, "new_dim: 3 is_color: false", name="c.prototxt"))[0],
                "data")[0] == (2, 1, 5, 3)


def test_what_the_fork_stops_on(tmp_path, monkeypatch):
    """new_dim below crop_size (data_transformer.cpp:501-502), new_dim beside new_height/new_width
    (image_data_layer.cpp:38-39), a mean file without a crop or at the image's size, not the crop's
    (data_transformer.cpp:257-259)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="crop_size 224 is larger than the image after new_dim"):
        build_nets(image_net(tmp_path, "new_dim: 200", "crop_size: 224"))
    with pytest.raises(InputError, match="new_dim and new_height/new_width cannot be set together"):
        build_nets(image_net(tmp_path, "new_dim: 8 new_height: 8 new_width: 8"))
    names = ds.write_images(str(tmp_path), 1, 3, 12, 16)
    ds.write_list(str(tmp_path / "list.txt"), [f"{names[0]} 0"])
    ds.write_mean(str(tmp_path / "crop.binaryproto"), 3, 8, 8)
    ds.write_mean(str(tmp_path / "image.binaryproto"), 3, 12, 16)
    net = build_nets(image_net(tmp_path, "new_dim: 12", 'crop_size: 8 mean_file: "crop.binaryproto"'))[0]
    assert tops(net, "data")[0] == (2, 3, 8, 8)
    with pytest.raises(InputError, match="the mean file is 3x12x16 but this Caffe wants it at the crop's size, 3x8x8"):
        build_nets(image_net(tmp_path, "new_dim: 12", 'crop_size: 8 mean_file: "image.binaryproto"'))
    with pytest.raises(InputError, match="a mean file needs a crop_size"):
        build_nets(image_net(tmp_path, "new_dim: 12", 'mean_file: "image.binaryproto"'))


DEPTHWISE = """name: "dw"
force_backward: true
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 8 dim: 10 dim: 12 } } }
layer { name: "dw" type: "Convolution" bottom: "data" top: "dw"
  convolution_param { num_output: 8 group: 8 kernel_size: 3 pad: 1 engine: CAFFE } }
layer { name: "loss" type: "EuclideanLoss" bottom: "dw" bottom: "dw" top: "loss" }
"""


def test_a_grouped_convolution_on_the_gpu_runs_the_forks_own_kernels(tmp_path):
    """A depthwise 3x3 convolution, group 8 on 8 channels of 10x12, batch 2, pad 1: the top is 2x8x10x12.
    Forward_gpu's spatial_conv_fwd_kernel needs no im2col buffer (conv_layer.cu:56-68). Backward_gpu
    (:188-216): sum_multiplier_ is the top's height x width, 10 * 12 = 120 floats, 480 bytes; `buffer`
    is (top count / num) x kh x kw = 8*10*12 * 9 = 8,640 floats, 34,560 bytes. The bias reaches the
    device only for its gradient (:179-184): bias_multiplier_ is the top's spatial size, 480 bytes.
    BVLC's path would keep an im2col buffer of 8*9 x 10*12 floats instead, and none of the two."""
    (tmp_path / "net.prototxt").write_text(DEPTHWISE)
    net = build_nets(str(tmp_path / "net.prototxt"), schema="caffe_pro")[0]
    held = layer_buffers(net, "dw")
    assert held[("sum_multiplier_", "device")] == 480
    assert held[("buffer", "device")] == 34_560
    assert held[("bias_multiplier_", "device")] == 480
    assert not any(name == "col_buffer_" for name, _ in held)
    # in CPU mode the fork runs BVLC's code: its im2col buffer, 72 x 120 floats
    assert layer_buffers(net, "dw", mode="cpu")[("col_buffer_", "host")] == 72 * 120 * 4
