"""C3D v1.1's Caffe (facebook/C3D at 71336a2, C3D-v1.1/): its schema, and its layers held against its source.

Expected values are derived by hand below from that commit's C3D-v1.1/src/caffe/layers/*.cpp/.cu,
src/caffe/util/image_io.cpp and src/caffe/data_transformer.cpp, cited by file and line; the net is
C3D's own UCF101 training net (tests/data/SOURCES.md).
"""
import json
import os

import pytest

from conftest import DATA, ROOT, build_text as build, run_protoaudit, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

NET = os.path.join(DATA, "forks", "c3d_ucf101_train_simple.prototxt")
F = 4  # bytes per float


def owned(net, layer, mode="gpu"):
    """{(blob or buffer, kind, device): bytes} of what `layer` first touches, its own buffers named
    without the layer's prefix."""
    return {(b.owner.removeprefix(layer + "."), b.kind, b.device): b.bytes for b in net_buffers(net, mode=mode)
            if b.layer == layer}


def test_c3ds_net_is_read_with_its_schema():
    assert load(NET).schema.name == "c3d"


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "c3d.proto")).read()
    assert text.startswith("// facebook/C3D, C3D-v1.1/src/caffe/proto/caffe.proto at commit "
                           "71336a2202e7d605a138c239f56be7b8fcfaaf5b")
    assert "optional VideoDataParameter video_data_param = 6660;" in text
    assert "optional Convolution3DParameter convolution3d_param = 6661;" in text
    assert "optional Pooling3DParameter pooling3d_param = 6662;" in text


def test_c3ds_training_net_audits_with_no_flags():
    """train_simple.prototxt, by hand. VideoData: 10 clips of 3 x 16 frames cropped to 112 (image_io.cpp:326-327,
    data_transformer.cpp:623-628); the 3x3x3 convolutions pad 1 and keep their input's size
    ((n + 2 - 3) / 1 + 1 = n, convolution3d_layer.cpp:63-65); pool1 (kernel 2, depth 1) halves H and W
    only, pool2-5 (kernel 2, depth 2, strides 2) all three, rounding up (pool3d_layer.cpp:62-67):
    16x112 -> 16x56 -> 8x28 -> 4x14 -> 2x7 -> 1x4 (ceil(5 / 2) + 1 = 4)."""
    run = run_protoaudit(NET, "--format", "json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["assumptions"] == []
    shapes = {layer["name"]: layer["tops"] for layer in out["nets"][0]["layers"]}
    assert shapes["data"] == [[10, 3, 16, 112, 112], [10]]  # the label: (batch) (video_data_layer.cpp:187-191)
    assert shapes["conv1a"] == [[10, 64, 16, 112, 112]] and shapes["pool1"] == [[10, 64, 16, 56, 56]]
    assert shapes["pool2"] == [[10, 128, 8, 28, 28]] and shapes["pool3"] == [[10, 256, 4, 14, 14]]
    assert shapes["pool4"] == [[10, 256, 2, 7, 7]] and shapes["pool5"] == [[10, 256, 1, 4, 4]]
    # weights (num_output, C, 3, 3, 3) and biases (num_output): conv1a 5,248, conv2a 221,312, conv3a
    # 884,992, conv4a and conv5a 1,769,728 each; fc6 4,096 x 2,048 + 2,048 = 8,390,656, fc7 4,196,352,
    # fc8 2,048 x 101 + 101 = 206,949
    assert out["params"]["total"] == 17_444_965


def test_a_cudnn_build_stops_at_the_first_relu_of_a_clip(tmp_path):
    """C3D v1.1's layer factory runs ReLU as CuDNNReLULayer in a cuDNN build unless relu_param's engine
    is CAFFE (layer_factory.cpp:154-172); its Reshape reads num(), channels(), height() and width()
    (cudnn_relu_layer.cpp:23-26), which CHECK at most 4 axes (blob.hpp:152): relu1a's bottom is the
    5-axis conv1a (10x64x16x112x112), so such a run stops there (C3D issues #248, #269, #340)."""
    run = run_protoaudit(NET)
    assert run.returncode == 0, run.stderr
    line = next(x for x in run.stdout.splitlines() if "with cuDNN instead" in x)
    assert "it stops at layer 'relu1a'" in line and "this one has 5" in line
    out = json.loads(run_protoaudit(NET, "--format", "json").stdout)
    assert out["other_engine_total_bytes"] is None and out["other_engine_stops"]["layer"] == "relu1a"
    refused = run_protoaudit(NET, "--engine", "cudnn")
    assert refused.returncode == 2 and "layer 'relu1a'" in refused.stderr and "engine: CAFFE" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    # with engine: CAFFE on every ReLU (C3D's issues' fix), the cuDNN build runs: its total is shown
    with open(NET) as f:
        text = f.read().replace('type: "ReLU"', 'type: "ReLU" relu_param { engine: CAFFE }')
    (tmp_path / "net.prototxt").write_text(text)
    fixed = run_protoaudit(tmp_path / "net.prototxt", "--format", "json", cwd=os.path.dirname(NET))
    assert fixed.returncode == 0, fixed.stderr
    fixed = json.loads(fixed.stdout)
    assert fixed["other_engine_total_bytes"] is not None and "other_engine_stops" not in fixed


def test_the_data_shape_line_says_the_layers_parameters_gave_it():
    text = run_protoaudit(NET).stdout
    assert ("Data shape: the net, layer 'data', top 'data' 10x3x16x112x112: the layer's parameters (new_length, "
            "crop_size; C3D reads frames in colour, 3 channels)") in text


# --- Convolution3D and Deconvolution3D ------------------------------------------------------------

CLIP = """force_backward: true
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 20 dim: 20 } } }
"""


def conv(params, kind="Convolution3D", extra=""):
    return CLIP + (f'layer {{ name: "c" type: "{kind}" bottom: "x" top: "y" {extra} '
                   f'convolution3d_param {{ {params} }} }}')


def test_convolution3d_shapes_and_buffers_by_hand(tmp_path):
    """Input (2, 3, 8, 20, 20); kernel_depth 3, kernel_size 5, temporal_pad 1, pad 2, stride 2,
    num_output 6 in 2 filter groups (convolution3d_layer.cpp:63-131):
    L = (8 + 2 - 3) / 1 + 1 = 8, H = W = (20 + 4 - 5) / 2 + 1 = 10 (ints);
    weight (6, 3, 3, 5, 5), all 3 input channels whatever filter_group; bias (1, 1, 1, 1, 6);
    col_buffer_ 3 * 3 * 5 * 5 x 8 * 10 * 10 = 180,000 floats for one clip, and its diff in backward
    (cu:70); bias_multiplier_ 800 ones on the host (cpp:145-150), its device copy in forward (cu:55)."""
    net = build(tmp_path, conv("num_output: 6 kernel_depth: 3 kernel_size: 5 temporal_pad: 1 pad: 2 stride: 2 "
                               "filter_group: 2"))
    assert tops(net, "c") == [(2, 6, 8, 10, 10)]
    assert [p.shape for p in net.layer("c").params] == [(6, 3, 3, 5, 5), (1, 1, 1, 1, 6)]
    got = owned(net, "c")
    assert got[("col_buffer_", "layer buffer", "device")] == 180_000 * F
    assert got[("col_buffer_ (diff)", "layer buffer", "device")] == 180_000 * F
    assert got[("bias_multiplier_ (host)", "layer buffer", "host")] == 800 * F
    assert got[("bias_multiplier_", "layer buffer", "device")] == 800 * F
    assert ("bias_multiplier_", "layer buffer", "device") not in owned(net, "c", mode="cpu")


def test_convolution3d_backward_writes_the_inputs_diff_unasked(tmp_path):
    """Backward_gpu takes bottom[0]->mutable_gpu_diff() before any check (cu:68): an Input's clip,
    which needs no diff, gets one (2 x 3 x 8 x 20 x 20 floats) once the layer learns."""
    net = build(tmp_path, conv("num_output: 4 kernel_depth: 3 kernel_size: 3", extra="loss_weight: 1")
                .replace("force_backward: true", ""))
    assert owned(net, "c")[("x", "top diff", "device")] == 2 * 3 * 8 * 20 * 20 * F


@pytest.mark.parametrize("params, message", [
    ("num_output: 6 kernel_size: 3", "needs kernel_depth"),  # no default in the fork's caffe.proto
    ("num_output: 6 kernel_depth: 3 kernel_size: 3 filter_group: 4", "not divisible by filter_group"),  # cpp:58
    ("kernel_depth: 3 kernel_size: 3", "positive num_output"),  # cpp:55
])
def test_convolution3d_refuses_what_its_setup_checks(tmp_path, params, message):
    with pytest.raises(InputError, match=message):
        build(tmp_path, conv(params))


def test_convolution3d_needs_a_5_axis_bottom(tmp_path):
    """bottom[0]->shape(4) (cpp:52) on a 4-axis blob fails Blob::CanonicalAxisIndex's CHECK."""
    with pytest.raises(InputError, match="5 axes"):
        build(tmp_path, conv("num_output: 6 kernel_depth: 1 kernel_size: 3").replace("dim: 8 ", ""))


def test_deconvolution3d_shapes_by_hand_and_its_bias_from_convolution_param(tmp_path):
    """Input (2, 3, 8, 20, 20); kernel_depth 2, kernel_size 3, stride 2, pad 1, num_output 4
    (deconvolution3d_layer.cpp:57-131): L = (8 - 1) * 1 + 2 = 9, H = W = (20 - 1) * 2 - 2 + 3 = 39;
    weight (3, 4, 2, 3, 3); col_buffer_ 4 * 2 * 3 * 3 x 8 * 20 * 20 = 230,400 floats (cpp:67-74).
    bias_term is read from convolution_param (cpp:79), so convolution3d_param's does nothing."""
    params = "num_output: 4 kernel_depth: 2 kernel_size: 3 stride: 2 pad: 1 bias_term: false"
    net = build(tmp_path, conv(params, "Deconvolution3D"))
    assert tops(net, "c") == [(2, 4, 9, 39, 39)]
    assert [p.shape for p in net.layer("c").params] == [(3, 4, 2, 3, 3), (1, 1, 1, 1, 4)]
    assert owned(net, "c")[("col_buffer_", "layer buffer", "device")] == 230_400 * F
    # bias_multiplier_: the output's 9 x 39 x 39 = 13,689 floats (cpp:142)
    assert owned(net, "c")[("bias_multiplier_", "layer buffer", "device")] == 13_689 * F
    unbiased = build(tmp_path, conv(params, "Deconvolution3D", 'convolution_param { bias_term: false }'))
    assert [p.shape for p in unbiased.layer("c").params] == [(3, 4, 2, 3, 3)]


# --- Pooling3D --------------------------------------------------------------------------------------

def pool(params, clip="dim: 2 dim: 3 dim: 5 dim: 5 dim: 7"):
    return ('force_backward: true\n'
            f'layer {{ name: "in" type: "Input" top: "x" input_param {{ shape {{ {clip} }} }} }}\n'
            f'layer {{ name: "p" type: "Pooling3D" bottom: "x" top: "y" pooling3d_param {{ {params} }} }}')


def test_pooling3d_rounds_up_in_float_and_never_clips(tmp_path):
    """pool3d_layer.cpp:62-67 on (2, 3, 5, 5, 7), AVE, kernel 2, depth 2, strides 2, pad 1:
    H = ceil((5 + 2 - 2) / 2) + 1 = 4, W = ceil((7 + 2 - 2) / 2) + 1 = 5, where BVLC's Pooling would
    drop H's last window, which starts in the padding ((4 - 1) * 2 >= 5 + 1); the length is unpadded:
    ceil((5 - 2) / 2) + 1 = 3."""
    net = build(tmp_path, pool("pool: AVE kernel_size: 2 kernel_depth: 2 stride: 2 temporal_stride: 2 pad: 1"))
    assert tops(net, "p") == [(2, 3, 3, 4, 5)]


def test_pooling3d_max_keeps_no_argmax(tmp_path):
    """MAX backward compares the bottom with the top (pool3d_layer.cu:219-224): no max_idx_; its
    touches are its blobs' only."""
    net = build(tmp_path, pool("pool: MAX kernel_size: 2 kernel_depth: 1 stride: 2"))
    assert tops(net, "p") == [(2, 3, 5, 3, 4)]  # ceil(3 / 2) + 1 = 3, ceil(5 / 2) + 1 = 4; (5 - 1) / 1 + 1 = 5
    assert not [k for k in owned(net, "p") if k[1] == "layer buffer"]


def test_pooling3d_pads_for_average_pooling_only(tmp_path):
    with pytest.raises(InputError, match="average pooling only"):  # cpp:51-55
        build(tmp_path, pool("pool: MAX kernel_size: 2 kernel_depth: 1 pad: 1"))


def test_pooling3d_stochastic_stops_in_cpu_mode(tmp_path):
    """cpp:179-180: Forward_cpu's STOCHASTIC case is NOT_IMPLEMENTED."""
    path = tmp_path / "net.prototxt"
    path.write_text(pool("pool: STOCHASTIC kernel_size: 2 kernel_depth: 1"))
    r = run_protoaudit(str(path), "--mode", "cpu")
    assert r.returncode == 2 and "pool3d_layer.cpp:179-180" in r.stderr


# --- VideoData ----------------------------------------------------------------------------------------

def video(params, transform="crop_size: 112"):
    """A VideoData layer alone, as C3D writes it. TSN's Caffe reads such a file too (VideoData, no field
    only one of them has), and sizes it otherwise: the build says which (--fork c3d)."""
    return (f'layer {{ name: "data" type: "VideoData" top: "data" top: "label" '
            f'video_data_param {{ source: "missing.lst" batch_size: 4 {params} }} transform_param {{ {transform} }} }}')


@pytest.mark.parametrize("params, transform, shape", [
    # 3 channels whatever is_color says (image_io.cpp:326); crop wins (data_transformer.cpp:627-628)
    ("new_length: 16 new_height: 128 new_width: 171 is_color: false", "crop_size: 112", (4, 3, 16, 112, 112)),
    # no crop: the frames resized to new_height x new_width (image_io.cpp:342, :354-355)
    ("new_length: 8 new_height: 128 new_width: 171", "", (4, 3, 8, 128, 171)),
])
def test_video_data_shapes_from_the_layers_parameters(tmp_path, params, transform, shape):
    net = build(tmp_path, video(params, transform), schema="c3d")
    assert tops(net, "data") == [shape, (4,)]


def test_video_data_multiple_labels(tmp_path):
    """video_data_layer.cpp:189-191: the label top is (batch, num_of_labels) with use_multiple_label."""
    net = build(tmp_path, video("new_length: 16 use_multiple_label: true num_of_labels: 5"), schema="c3d")
    assert tops(net, "data") == [(4, 3, 16, 112, 112), (4, 5)]


def test_video_data_without_a_size_asks_for_the_data_top(tmp_path):
    with pytest.raises(InputError, match="--input data=4x3x16x"):
        build(tmp_path, video("new_length: 16", ""), schema="c3d")


@pytest.mark.parametrize("params, message", [
    ("new_height: 128 new_width: 171", "needs new_length"),  # data_transformer.cpp:619 (no default)
    ("new_length: 16 new_height: 128", "set together"),  # video_data_layer.cpp:50-52
    ("new_length: 16 new_height: 100 new_width: 171", "larger than the frames"),  # data_transformer.cpp:620
])
def test_video_data_refuses_what_caffe_checks(tmp_path, params, message):
    with pytest.raises(InputError, match=message):
        build(tmp_path, video(params), schema="c3d")


def test_video_data_prefetches_four_batches_and_owns_no_top(tmp_path):
    """BVLC 9b89154's base_data_layer.cpp/.cu, the fork's own files: data_param.prefetch (default 4,
    the fork's caffe.proto) batches on the device and pinned on the host (cpp:56-70); the tops point
    into the current batch (cu:15-20). A batch: 4 x 3 x 16 x 112 x 112 floats, and 4 labels."""
    net = build(tmp_path, video("new_length: 16"), schema="c3d")
    got = owned(net, "data")
    clip = 4 * 3 * 16 * 112 * 112 * F
    assert got[("prefetch[4].data", "prefetch", "device")] == 4 * clip
    assert got[("prefetch[4].data (host)", "prefetch", "host")] == 4 * clip
    assert got[("prefetch[4].label", "prefetch", "device")] == 4 * 4 * F
    assert ("data", "top data", "device") not in got


def test_video_data_mean_file_is_the_resized_clips_size(tmp_path):
    """VideoTransform CHECKs the mean blob is (3, new_length, H, W) of the resized frames
    (data_transformer.cpp:156-160): 3 x 16 x 128 x 171 floats, on the host."""
    net = build(tmp_path, video("new_length: 16 new_height: 128 new_width: 171",
                                'crop_size: 112 mean_file: "missing_mean.binaryproto"'), schema="c3d")
    assert owned(net, "data")[("data_mean_", "layer buffer", "host")] == 3 * 16 * 128 * 171 * F


def test_a_minimal_video_data_file_names_the_video_forks(tmp_path):
    """TSN's, C3D v1.1's and video-caffe's Caffes all read a bare VideoData layer and size it otherwise."""
    with pytest.raises(InputError, match=r"tsn .*c3d .*video_caffe .*--fork \(tsn, c3d, video_caffe\)"):
        build(tmp_path, video("new_length: 16"))


def test_accuracy_runs_on_the_host_in_gpu_mode():
    """The fork's accuracy_layer.cpp has no .cu: in GPU mode its bottoms are read and its top written
    on the host (Layer::Forward_gpu falls back to Forward_cpu)."""
    net = build_nets(NET, phase="TEST", stages=("test-on-val",))[0]
    # (the net's two Accuracy layers are both named "accuracy": top-1 and top-5, a scalar each)
    assert owned(net, "accuracy") == {("accuracy/top-1", "top data", "host"): F,
                                      ("accuracy/top-5", "top data", "host"): F}


def test_l2_normalize_keeps_a_squared_copy_and_writes_the_bottoms_diff(tmp_path):
    """l2_normalize_layer.cpp:31-37: top and squared_ are the bottom's shape (2 x 3 x 8 x 20 x 20),
    squared_ filled in forward (cu:31); backward writes the bottom's diff (cu:50)."""
    net = build(tmp_path, CLIP + 'layer { name: "n" type: "L2Normalize" bottom: "x" top: "y" }')
    assert tops(net, "n") == [(2, 3, 8, 20, 20)]
    got = owned(net, "n")
    assert got[("squared_", "layer buffer", "device")] == 2 * 3 * 8 * 20 * 20 * F
    assert got[("x", "top diff", "device")] == 2 * 3 * 8 * 20 * 20 * F
    with pytest.raises(InputError, match="in-place"):  # cpp:33
        build(tmp_path, CLIP + 'layer { name: "n" type: "L2Normalize" bottom: "x" top: "x" }')


def test_black_hole_swallows_its_bottoms_and_touches_nothing(tmp_path):
    """black_hole_layer.cpp:27-47: its top is (1, 1, 1, 1, 1); forward and backward do nothing."""
    net = build(tmp_path, CLIP + 'layer { name: "b" type: "BlackHole" bottom: "x" top: "void" }')
    assert tops(net, "b") == [(1, 1, 1, 1, 1)]
    assert owned(net, "b") == {}


def test_bvlcs_batch_norm_sizes_5_axis_clips(tmp_path):
    """C3D's ResNet-18 nets put BVLC's BatchNorm (the fork's batch_norm_layer.cpp, BVLC's buffers) on
    clips: spatial_dim = count / (C * N) = L * H * W (cpp:67-71), here 8 x 20 x 20 = 3,200;
    temp_ and x_norm_ the bottom's size (cpp:62-63), num_by_chans_ N * C (cpp:80)."""
    net = build(tmp_path, CLIP + 'layer { name: "bn" type: "BatchNorm" bottom: "x" top: "y" }'
                + 'layer { name: "c" type: "Convolution3D" bottom: "y" top: "z" '
                  'convolution3d_param { num_output: 2 kernel_depth: 1 kernel_size: 1 } }')
    got = owned(net, "bn")
    assert got[("spatial_sum_multiplier_", "layer buffer", "device")] == 3_200 * F
    assert got[("x_norm_", "layer buffer", "device")] == 2 * 3 * 3_200 * F
    assert got[("num_by_chans_", "layer buffer", "device")] == 2 * 3 * F


def test_the_forks_2d_deconvolution_is_always_caffes(tmp_path):
    """The fork's layer_factory.cpp has no GetDeconvolutionLayer and it has no cudnn_deconv_layer
    (deconv_layer.cpp:82 registers DeconvolutionLayer itself): in a cuDNN build a 2D Deconvolution
    keeps its im2col buffer, 4 x 2 x 2 x 5 x 6 floats for one image, and no workspace."""
    net = build(tmp_path, """force_backward: true
layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 2 dim: 3 dim: 5 dim: 6 } } }
layer { name: "up" type: "Deconvolution" bottom: "x" top: "up"
        convolution_param { num_output: 4 kernel_size: 2 stride: 2 } }
""", schema="c3d")
    kinds = {b.owner: (b.kind, b.bytes) for b in net_buffers(net, mode="gpu", engine="cudnn") if b.layer == "up"}
    assert kinds["up.col_buffer_"] == ("layer buffer", 4 * 2 * 2 * 5 * 6 * F)
    assert "workspace" not in {kind for kind, _ in kinds.values()}


def test_video_data_reads_the_first_frame_of_the_first_clip(tmp_path):
    """Without crop_size or new_height/new_width the clip is the frames' size: the list's first line
    "folder start_frame label" (video_data_layer.cpp:82-88) names frame root_folder + folder +
    "/%06d.jpg" (image_io.cpp:335), read in colour (:326). A 30x40 JPEG gives (4, 3, 16, 30, 40)."""
    import datasets as ds

    (tmp_path / "frames" / "clip1").mkdir(parents=True)
    (tmp_path / "frames" / "clip1" / "000017.jpg").write_bytes(ds.image_bytes(3, 30, 40, "JPEG"))
    (tmp_path / "clips.lst").write_text("clip1 17 5\n")
    text = video('new_length: 16 use_image: true root_folder: "frames/"', "").replace("missing.lst", "clips.lst")
    net = build(tmp_path, text, schema="c3d", root=str(tmp_path))
    assert tops(net, "data") == [(4, 3, 16, 30, 40), (4,)]
    with pytest.raises(InputError, match="--input data=4x3x16x"):  # frames from videos: not decoded
        build(tmp_path, text.replace("use_image: true", "use_image: false"), schema="c3d", root=str(tmp_path))


def test_video_data_keeps_its_clip_list_on_the_host(tmp_path):
    """video_data_layer.cpp:82-88: each "folder start label" line pushes the folder's name onto
    file_list_ and three ints onto start_frm_list_, label_list_ and shuffle_index_. Three lines:
    vectors grown to 4 entries, 4 x (32-byte std::string + 3 x 4) = 176 bytes, and each 24-character
    name on the heap, 25 bytes (libstdc++ keeps up to 15 inline): 251 bytes."""
    (tmp_path / "clips.lst").write_text("".join(f"v_ApplyEyeMakeup_g01_c0{i} 1 0\n" for i in range(1, 4)))
    text = video("new_length: 16 use_image: true").replace("missing.lst", "clips.lst")
    net = build(tmp_path, text, schema="c3d", root=str(tmp_path))
    assert owned(net, "data")[("clip list", "host objects", "host")] == 251


def test_the_label_shape_line_says_a_label_per_clip():
    text = run_protoaudit(NET).stdout
    assert "Data shape: the net, layer 'data', top 'label' 10: the layer's batch size (a label per clip)" in text


def test_c3d_resnet18_head_matches_caffes_own_log():
    """Caffe's log of C3D v1.1's ResNet-18 finetuning net at batch 16, as facebookarchive/C3D issue #269
    quotes it (https://github.com/facebookarchive/C3D/issues/269): scale_conv1's "Top shape: 16 64 8 56 56
    (25690112)" and "Memory required for data: 327548992", the running sum of every top so far (in-place
    ones too): data 16 x 3 x 8 x 112 x 112 = 4,816,896, label 16, then conv1, bn_conv1 and scale_conv1
    25,690,112 each, 81,887,248 floats. The file is that net's first four layers."""
    run = run_protoaudit(os.path.join(DATA, "forks", "c3d_resnet18_r2_head.prototxt"), "--format", "json")
    assert run.returncode == 0, run.stderr
    net = json.loads(run.stdout)["nets"][0]
    assert {layer["name"]: layer["tops"] for layer in net["layers"]}["scale_conv1"] == [[16, 64, 8, 56, 56]]
    assert net["memory_required_for_data"] == 327_548_992
