"""TSN's Caffe (yjxiong/caffe, action_recog, 9831a2b): its schema, VideoData and BN held against its source.

Expected values are derived by hand below from that commit's src/caffe/layers/video_data_layer.cpp,
bn_layer.cpp/.cu, cudnn_bn_layer.cpp/.cu, src/caffe/util/io.cpp and layer_factory.cpp, cited by
line; the nets are yjxiong/temporal-segment-networks' own (tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text as build, tops
from protoaudit import build_nets
from protoaudit.memory.buffers import net_buffers
from protoaudit.errors import InputError
from protoaudit.read.load import load

NET = os.path.join(DATA, "forks", "tsn_bn_inception_rgb_train_val.prototxt")
SOLVER = os.path.join(DATA, "forks", "tsn_bn_inception_rgb_solver.prototxt")
F = 4  # bytes per float


def test_tsn_net_and_solver_are_read_with_its_schema():
    """The solver's `device_id: [0,1,2,3]` is a repeated field in TSN's caffe.proto (field 18)."""
    assert load(NET).schema.name == "tsn"
    solver = load(SOLVER)
    assert solver.schema.name == "tsn" and list(solver.message.device_id) == [0, 1, 2, 3]


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "tsn.proto")).read()
    assert text.startswith("// yjxiong/caffe (branch action_recog, the Caffe yjxiong/temporal-segment-networks "
                           "pins as lib/caffe-action), src/caffe/proto/caffe.proto at commit "
                           "9831a2b4d67e3f99418b6f2f99b6dde716853672")
    assert "repeated int32 device_id = 18 ;" in text


def video(params, transform="crop_size: 224"):
    return (f'layer {{ name: "data" type: "VideoData" top: "data" top: "label" '
            f'video_data_param {{ source: "list.txt" batch_size: 4 {params} }} transform_param {{ {transform} }} }}')


@pytest.mark.parametrize("params, transform, shape", [
    # RGB: 3 channels per frame, new_length frames per segment (io.cpp:391-393)
    ("modality: RGB num_segments: 3", "crop_size: 224", (4, 9, 224, 224)),
    ("modality: RGB num_segments: 3 grayscale: true", "crop_size: 224", (4, 3, 224, 224)),
    # FLOW (the default modality): x and y per frame (io.cpp:450-451); TSN's flow nets: 5 x 3 x 2
    ("new_length: 5 num_segments: 3", "crop_size: 224", (4, 30, 224, 224)),
    # no crop: the frames resized to new_height x new_width (video_data_layer.cpp:86-88)
    ("modality: RGB new_height: 256 new_width: 340", "", (4, 3, 256, 340)),
])
def test_video_data_channels_stack_frames_and_segments(tmp_path, params, transform, shape):
    net = build(tmp_path, video(params, transform))
    assert tops(net, "data") == [shape, (4, 1, 1, 1)]  # the label: cpp:92


def test_video_data_without_a_size_asks_for_the_data_top(tmp_path):
    with pytest.raises(InputError, match="--input data=4x3x"):
        build(tmp_path, video("modality: RGB", ""))


def test_video_data_keeps_one_host_batch_and_owns_its_tops(tmp_path):
    """cpp:85-93 and base_data_layer.cpp:38-40: prefetch_data_ and prefetch_label_ on the host;
    the forward copies them into the tops on the device (base_data_layer.cu:13-22)."""
    net = build(tmp_path, video("modality: RGB num_segments: 3"))
    data = 4 * 9 * 224 * 224 * F
    got = {(b.owner, b.device): b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "data"}
    assert got[("data.prefetch_data_", "host")] == data and got[("data.prefetch_label_", "host")] == 4 * F
    assert got[("data", "device")] == data and got[("label", "device")] == 4 * F


BN_HEAD = """force_backward: true
input: "x" input_shape { dim: 2 dim: 3 dim: 4 dim: 5 }
"""  # (the fork predates the Input layer)


def bn(extra=""):
    """A net of a BN layer alone (which PSPNet's Caffe reads too: --fork tsn)."""
    return BN_HEAD + f'layer {{ name: "bn" type: "BN" bottom: "x" top: "y" bn_param {{ {extra} }} }}'


def owned(net, mode="gpu", engine="caffe"):
    return {b.owner.removeprefix("bn."): b.bytes for b in net_buffers(net, mode=mode, engine=engine)
            if b.layer == "bn" and b.kind == "layer buffer"}


def test_bn_has_four_channel_blobs_and_freezes_its_statistics_for_the_solver(tmp_path):
    """cpp:20-41: slope, bias, running mean and variance, each (1, C); cpp:46-63: the layer's own
    ParamSpecs (which the solver reads) get lr_mult 0 for the statistics, and for all four when frozen."""
    net = build(tmp_path, schema="tsn", text=bn())
    assert [p.shape for p in net.layer("bn").params] == [(1, 3)] * 4
    assert [p.lr_mult for p in net.layer("bn").params] == [1, 1, 0, 0]
    frozen = build(tmp_path, schema="tsn", text=bn("frozen: true"))
    assert [p.lr_mult for p in frozen.layer("bn").params] == [0, 0, 0, 0]


def test_bn_caffe_engine_buffers_by_hand(tmp_path):
    """Bottom (2, 3, 4, 5): batch_statistic_ C = 3, spatial_statistic_ N*C = 6, broadcast_buffer_
    and x_norm_ the bottom's 120, x_inv_std_ 3 (cpp:77-82); the multipliers H*W = 20 and N = 2,
    set on the host (cpp:84-89) and copied to the device by the GPU forward. Frozen, no x_norm_ or
    x_inv_std_ (cu:96-101)."""
    got = owned(build(tmp_path, schema="tsn", text=bn()))
    assert got == {"spatial_sum_multiplier_ (host)": 20 * F, "batch_sum_multiplier_ (host)": 2 * F,
                   "batch_statistic_": 3 * F, "spatial_statistic_": 6 * F, "broadcast_buffer_": 120 * F,
                   "spatial_sum_multiplier_": 20 * F, "batch_sum_multiplier_": 2 * F,
                   "x_norm_": 120 * F, "x_inv_std_": 3 * F}
    frozen = owned(build(tmp_path, schema="tsn", text=bn("frozen: true")))
    assert "x_norm_" not in frozen and "x_inv_std_" not in frozen and frozen["broadcast_buffer_"] == 120 * F


def test_bn_cudnn_engine_keeps_two_channel_vectors(tmp_path):
    """layer_factory.cpp:176-199: a cuDNN build runs CuDNNBNLayer; unfrozen, its Reshape sizes no
    statistics (cudnn_bn_layer.cpp:34-66) and the training call saves the mean and inverse
    variance, C each (cpp:20-21, cu:39-54). engine: CAFFE keeps BNLayer."""
    assert owned(build(tmp_path, schema="tsn", text=bn()), engine="cudnn") == {"save_mean_": 3 * F, "save_inv_variance_": 3 * F}
    assert "x_norm_" in owned(build(tmp_path, schema="tsn", text=bn("engine: CAFFE")), engine="cudnn")


def test_tsn_rgb_net_audits_with_what_its_parameters_say():
    """The train net's data: 32 videos x 3 segments x 1 RGB frame, 224 crops (32, 9, 224, 224),
    reshaped to (96, 3, 224, 224) for the network."""
    train = build_nets(NET)[0]
    assert tops(train, "data") == [(32, 9, 224, 224), (32, 1, 1, 1)]
    assert tops(train, "reshape_data") == [(96, 3, 224, 224)]


def test_a_net_whose_only_fork_layer_is_bn_stays_pspnets(tmp_path):
    """PSPNet's Caffe has the same BNLayer code and reads BN's fields alike, and was the fork
    such a net was read with before TSN's was known: it still is, unless --fork tsn."""
    path = tmp_path / "net.prototxt"
    path.write_text(bn("frozen: true"))
    assert load(str(path)).schema.name == "pspnet"
