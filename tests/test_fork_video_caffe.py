"""video-caffe (chuckcho/video-caffe fc232b3): its schema, NdConvolution, NdPooling and VideoData held
against its source, and its C3D example (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/layers/cudnn_ndconv_layer.cpp/.cu,
cudnn_ndpooling_layer.cpp/.cu, video_data_layer.cpp, src/caffe/layer_factory.cpp and
src/caffe/data_transformer.cpp, cited by file and line.
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit import audit, build_nets
from protoaudit.errors import InputError
from protoaudit.read.load import load

HERE = os.path.join(DATA, "forks", "video_caffe")
NET = os.path.join(HERE, "c3d_ucf101_train_test.prototxt")
DEPLOY = os.path.join(HERE, "c3d_ucf101_deploy.prototxt")
F = 4  # bytes per float (and per int)


def clip_net(layer, shape=(1, 2, 3, 8, 8)):
    dims = " ".join(f"dim: {d}" for d in shape)
    return f'input: "x" input_shape {{ {dims} }}\n' + layer


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "video_caffe.proto")).read()
    assert text.startswith("// chuckcho/video-caffe (Caffe with cuDNN's N-D convolution and pooling and a VideoData "
                           "layer, C3D's nets), src/caffe/proto/caffe.proto at commit "
                           "fc232b3e3a90ea22dd041b9fc5c542f170581f20,\n")
    assert "  optional BlobShape kernel_shape = 7778;\n" in text
    assert "  optional VideoDataParameter video_data_param = 7777;\n" in text


def test_its_nets_are_read_with_its_schema():
    assert load(NET).schema.name == "video_caffe"


def test_the_c3d_example_audits_with_no_flags_as_a_cudnn_build():
    """Batch 50 clips of 16 frames cropped to 112 x 112, in colour (VideoData: new_length, crop_size,
    is_color; data_transformer.cpp:586-600). Each NdConvolution 3 x 3 x 3, pad 1, stride 1, keeps the
    clip; pool1 (1 x 2 x 2) halves height and width: ceil((112 - 2) / 2) + 1 = 56; pool2-pool4 (2 x 2 x 2)
    halve all three: 16 -> 8 -> 4 -> 2, 56 -> 28 -> 14 -> 7; pool5: ceil((2 - 2) / 2) + 1 = 1 and
    ceil((7 - 2) / 2) + 1 = 4, so fc6 reads 256 x 1 x 4 x 4 = 4,096. Parameters: the convolutions'
    (64 x 3, 128 x 64, 256 x 128, 256 x 256 twice) x 27 and their biases, fc6 2048 x 4096, fc7 2048 x 2048,
    fc8 101 x 2048 and theirs: 17,444,965. NdConvolution exists only in a cuDNN build (layer_factory.cpp:
    80-100): the audit is one, and says where Caffe's own engine stops."""
    r = run_in_process(NET)
    assert r.returncode == 0, r.stderr
    assert "GPU mode, cuDNN" in r.stdout and "Params: 17,444,965 " in r.stdout
    assert "with Caffe engine (im2col) instead: it stops at layer 'conv1a'" in r.stdout
    net = build_nets(NET)[0]
    assert tops(net, "data") == [(50, 3, 16, 112, 112), (50,)]
    assert tops(net, "conv1a") == [(50, 64, 16, 112, 112)]
    assert tops(net, "pool1") == [(50, 64, 16, 56, 56)]
    assert tops(net, "pool4") == [(50, 256, 2, 7, 7)]
    assert tops(net, "pool5") == [(50, 256, 1, 4, 4)]
    assert [p.shape for p in net.layer("fc6").params] == [(2048, 4096), (2048,)]
    assert audit(NET).engine == "cudnn"
    assert run_in_process(DEPLOY).returncode == 0


def test_without_cudnn_or_on_the_cpu_caffe_stops():
    for flags in (("--engine", "caffe"), ("--mode", "cpu")):
        r = run_in_process(NET, *flags)
        assert r.returncode == 2 and "registers NdConvolution only in a cuDNN build" in r.stderr


def test_ndconvolution_drops_the_axes_of_size_one(tmp_path):
    """compute_output_shape pushes an output axis only when it is over 1 (cpp:239-251): 3 frames by a
    3 x 3 x 3 kernel, no pad, give one frame, and the top loses that axis: (1, 4, 6, 6). The weight is
    (num_output, C / group, 3, 3, 3) (cpp:65-79)."""
    net = build_text(tmp_path, clip_net('layer { name: "c" type: "NdConvolution" bottom: "x" top: "c" '
                                        'convolution_param { num_output: 4 kernel_shape { dim: 3 dim: 3 dim: 3 } } }\n'),
                     schema="video_caffe")
    assert tops(net, "c") == [(1, 4, 6, 6)]
    assert [p.shape for p in net.layer("c").params] == [(4, 2, 3, 3, 3), (4,)]
    with pytest.raises(InputError, match="needs kernel_shape"):
        build_text(tmp_path, clip_net('layer { name: "c" type: "NdConvolution" bottom: "x" top: "c" '
                                      'convolution_param { num_output: 4 } }\n'), schema="video_caffe")


def test_what_ndconvolution_holds():
    """conv2a of the example: 64 channels by 3 x 3 x 3. Its forward grows one workspace to the need of
    the algorithm cuDNN picks under 64 x 27 ints and a byte (cu:22-26): counted as that limit, 6,912 bytes;
    the backward uses none (cpp:130-136). bias_multiplier_, the top's 16 x 56 x 56 spatial size in ones,
    is set on the host in Reshape (cpp:189-193)."""
    got = layer_buffers(build_nets(NET)[0], "conv2a", engine="cudnn")
    assert got[("workspace", "device")] == 64 * 27 * F
    assert got[("bias_multiplier_", "host")] == 16 * 56 * 56 * F


def test_ndpooling_shapes_and_holds_nothing(tmp_path):
    """ceil((size + 2 pad - k) / s) + 1, one less where a padded window would start in the padding
    (cpp:95-108): 8 by 3, stride 2, pad 1: ceil(7 / 2) + 1 = 5, and 4 x 2 = 8 < 8 + 1 keeps it. cuDNN keeps
    no argmax: max_idx_ is sized and never touched."""
    net = build_text(tmp_path, clip_net('layer { name: "p" type: "NdPooling" bottom: "x" top: "p" pooling_param '
                                        '{ kernel_shape { dim: 1 dim: 3 dim: 3 } stride_shape { dim: 1 dim: 2 dim: 2 } '
                                        'pad_shape { dim: 0 dim: 1 dim: 1 } } }\n'), schema="video_caffe")
    assert tops(net, "p") == [(1, 2, 3, 5, 5)]
    assert layer_buffers(net, "p", engine="cudnn") == {}


def test_video_data_in_grey_and_without_a_size(tmp_path):
    """is_color false reads the frames in grey, one channel (io.cpp:222-223); new_height and new_width
    must come together (cpp:34-36); without them or a crop the frames' size is the videos'."""
    def video(params, transform=""):
        return (f'layer {{ name: "data" type: "VideoData" top: "data" top: "label" video_data_param {{ '
                f'source: "missing.lst" batch_size: 2 new_length: 8 {params} }} transform_param {{ {transform} }} }}\n'
                'layer { name: "c" type: "NdConvolution" bottom: "data" top: "c" convolution_param '
                '{ num_output: 2 kernel_shape { dim: 1 dim: 1 dim: 1 } } }\n')
    net = build_text(tmp_path, video("new_height: 64 new_width: 80 is_color: false"), schema="video_caffe")
    assert tops(net, "data") == [(2, 1, 8, 64, 80), (2,)]
    with pytest.raises(InputError, match="new_height and new_width to be set at the same time"):
        build_text(tmp_path, video("new_height: 64"), schema="video_caffe")
    with pytest.raises(InputError, match="--input data=2x3x8xHxW"):
        build_text(tmp_path, video(""), schema="video_caffe")
