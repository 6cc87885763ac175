"""3D-Caffe (yulequan/3D-Caffe, branch 3D-Caffe, c033e87): its schema, its N-D pooling and its cropping
HDF5Data held against its source, and HeartSeg's nets (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/layers/pooling_layer.cpp/.cu,
pooling_nd_layer.cpp/.cu, hdf5_data_layer.cpp and include/caffe/layers/*.hpp, cited by file and line.
"""
import json
import os

import numpy as np
import pytest

import datasets as ds
from conftest import DATA, ROOT, build_text, run_in_process, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.layers.cxx import SHARED_PTR_BLOCK
from protoaudit.memory import host
from protoaudit.memory.buffers import layer_touches, net_buffers
from protoaudit.read.load import load

DEPLOY = os.path.join(DATA, "forks", "heartseg_densevoxnet_deploy.prototxt")
TRAIN = os.path.join(DATA, "forks", "heartseg_3d_dsn_train.prototxt")
F = 4  # bytes per float, and per int


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "caffe3d.proto")).read()
    assert text.startswith("// yulequan/3D-Caffe (branch 3D-Caffe, the Caffe yulequan/HeartSeg builds), "
                           "src/caffe/proto/caffe.proto at commit c033e870f630fd2af8caff9d087d33a2011fed68,\n")
    assert "// LayerParameter next available layer-specific ID: 148 (last added: pooling_nd_param)" in text
    assert "optional PoolingNDParameter pooling_nd_param = 147;" in text
    assert "  optional uint32 crop_size_l = 10 [default = 0];" in text
    assert "  repeated uint32 kernel_size = 3; // The kernel size (square)" in text  # PoolingParameter's, N-D
    assert "InputParameter" not in text and "round_mode" not in text  # a May 2016 BVLC caffe.proto


def test_heartsegs_nets_are_read_with_its_schema():
    assert load(DEPLOY).schema.name == "caffe3d"  # PoolingND
    assert load(TRAIN).schema.name == "caffe3d"  # transform_param's crop_size_l/h/w


# --- the deploy net (DenseVoxNet) -------------------------------------------------------------------

def test_the_deploy_net_audits_with_no_flags():
    """input_shape 1x1x64x64x64. Convolution1 (kernel 3, pad 1, stride 2): (64 + 2 - 3) / 2 + 1 = 32 on
    each axis; the dense block keeps 32 (kernel 3, pad 1) and grows to 160 channels; Pooling1 (PoolingND,
    MAX, kernel 2, stride 2, no pad): ceil((32 - 2) / 2) + 1 = 16 (pooling_nd_layer.cpp:171-177);
    Deconv2 (kernel 4, stride 2, pad 1): (32 - 1) * 2 + 4 - 2 = 64, back to the input's size."""
    r = run_in_process(DEPLOY)
    assert r.returncode == 0, r.stderr
    assert "Read with the caffe.proto of 3D-Caffe" in r.stdout
    net = build_nets(DEPLOY)[0]
    assert tops(net, "Convolution1") == [(1, 16, 32, 32, 32)]
    assert tops(net, "Pooling1") == [(1, 160, 16, 16, 16)]
    assert tops(net, "Deconv2") == [(1, 64, 64, 64, 64)]
    assert tops(net, "prob_1") == [(1, 3, 64, 64, 64)]
    pool = {b.owner: b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "Pooling1"}
    assert pool["Pooling1"] == pool["Pooling1.max_idx_"] == 160 * 16 ** 3 * F  # 2,621,440 each


def test_a_cudnn_build_takes_5_axis_relus(tmp_path):
    """The fork's CuDNNReLULayer describes its blob with an N-D descriptor (cudnn_relu_layer.cpp:24-26),
    where BVLC's stops on a 5-axis blob; its CuDNNSigmoidLayer keeps BVLC's 4-D one, and stops."""
    r = run_in_process(DEPLOY, "--engine", "cudnn")
    assert r.returncode == 0, r.stderr
    (tmp_path / "n.prototxt").write_text(open(DEPLOY).read().replace('type: "ReLU"', 'type: "Sigmoid"', 1))
    r = run_in_process("n.prototxt", "--engine", "cudnn", cwd=tmp_path)
    assert r.returncode == 2 and "layer 'ReLU1'" in r.stderr and "CuDNNSigmoidLayer" in r.stderr


# --- N-D pooling by hand -----------------------------------------------------------------------------

VOLUME = 'name: "v"\ninput: "x"\ninput_shape { dim: 1 dim: 2 dim: 4 dim: 7 dim: 9 }\nforce_backward: true\n'


def pool(tmp_path, params, kind="PoolingND", tops_=("y",)):
    field = "pooling_nd_param" if kind == "PoolingND" else "pooling_param"
    top = "".join(f'top: "{t}" ' for t in tops_)
    layer = f'layer {{ name: "p" type: "{kind}" bottom: "x" {top}{field} {{ {params} }} }}\n'
    loss = 'layer { name: "l" type: "EuclideanLoss" bottom: "y" bottom: "y" top: "loss" }\n'
    return build_text(tmp_path, VOLUME + layer + loss, schema="caffe3d")


def test_a_padded_pooling_drops_a_last_window_in_the_padding_on_every_axis(tmp_path):
    """(1, 2, 4, 7, 9), kernel 3, stride 3, pad 2 on the three spatial axes. ceil((size + 4 - 3) / 3) + 1:
    4 -> ceil(5/3) + 1 = 3, 7 -> ceil(8/3) + 1 = 4, 9 -> ceil(10/3) + 1 = 5; padded, so a last window
    starting at or past size + pad is dropped (pooling_nd_layer.cpp:178-186): (3 - 1) * 3 = 6 >= 4 + 2,
    (4 - 1) * 3 = 9 >= 7 + 2, (5 - 1) * 3 = 12 >= 9 + 2: (2, 3, 4)."""
    for kind in ("PoolingND", "Pooling"):
        net = pool(tmp_path, "pool: MAX kernel_size: 3 stride: 3 pad: 2", kind)
        assert tops(net, "p") == [(1, 2, 2, 3, 4)]


def test_a_kernel_and_stride_per_axis_round_up(tmp_path):
    """kernel (1, 2, 2), stride (1, 2, 2), no pad: (4 - 1) / 1 + 1 = 4, ceil((7 - 2) / 2) + 1 = 4,
    ceil((9 - 2) / 2) + 1 = 5 (cpp:171-177, in float)."""
    net = pool(tmp_path, "pool: AVE kernel_size: 1 kernel_size: 2 kernel_size: 2 stride: 1 stride: 2 stride: 2")
    assert tops(net, "p") == [(1, 2, 4, 4, 5)]


def test_global_pooling_and_another_channel_axis(tmp_path):
    """global_pooling: each spatial axis whole, (1, 2, 1, 1, 1) (cpp:159-164). With axis 2 the pooled
    axes are the last two, and kernel_h/kernel_w apply (two spatial axes): (7 - 2) + 1 = 6, (9 - 3) + 1 = 7."""
    assert tops(pool(tmp_path, "pool: AVE global_pooling: true"), "p") == [(1, 2, 1, 1, 1)]
    assert tops(pool(tmp_path, "axis: 2 kernel_h: 2 kernel_w: 3"), "p") == [(1, 2, 4, 6, 7)]


@pytest.mark.parametrize("params, message", [
    ("kernel_size: 2 kernel_size: 2", "kernel_size must be specified once, or once per spatial dimension "
                                      "(kernel_size specified 2 times; 3 spatial dims)"),
    ("stride: 1", "kernel_size must be specified once"),  # no kernel at all: 0 given
    ("kernel_h: 2 kernel_w: 2", "kernel_h & kernel_w can only be used for 2D pooling"),
    ("kernel_size: 3 pad: 3", "pad 3 must be smaller than the kernel 3"),
    ("pool: STOCHASTIC kernel_size: 3 pad: 1", "Padding implemented only for average and max pooling."),
    ("global_pooling: true kernel_size: 2", "With Global_pooling: true Filter size cannot specified."),
    ("kernel_size: 2 stride: 0", "Stride dimensions must be nonzero."),
    ("axis: 4 kernel_size: 2", "pools the axes after axis 4"),
])
def test_pooling_refuses_what_its_setup_checks(tmp_path, params, message):
    """LayerSetUp's CHECKs (pooling_nd_layer.cpp:23, 41-44, 52-53, 61-64, 104, 109-113, 138; the
    fork's Pooling has the same, pooling_layer.cpp:23-137)."""
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pool(tmp_path, params)


def test_what_max_pooling_allocates(tmp_path):
    """The padded (1, 2, 2, 3, 4) top above, 48 elements: max_idx_ 48 ints for MAX with one top
    (cpp:201-204). In GPU mode the forward reads its geometry blobs on the device (.cu:408-413):
    input_shape_ holds the channels and the 3 spatial sizes (4 ints), output_shape_, kernel_shape_,
    stride_ and pad_ 3 ints each (cpp:25-32, 168-169). In CPU mode those stay host objects."""
    net = pool(tmp_path, "pool: MAX kernel_size: 3 stride: 3 pad: 2")
    gpu = {b.owner: b.bytes for b in net_buffers(net, mode="gpu") if b.owner.startswith("p.")}
    assert gpu == {"p.max_idx_": 48 * F, "p.input_shape_": 4 * F, "p.output_shape_": 3 * F,
                   "p.kernel_shape_": 3 * F, "p.stride_": 3 * F, "p.pad_": 3 * F}
    cpu = {b.owner: b.bytes for b in net_buffers(net, mode="cpu") if b.owner.startswith("p.")}
    assert cpu == {"p.max_idx_": 48 * F}
    masked = pool(tmp_path, "pool: MAX kernel_size: 3 stride: 3 pad: 2", tops_=("y", "mask"))
    assert tops(masked, "p") == [(1, 2, 2, 3, 4)] * 2  # the mask top replaces max_idx_
    assert not any(b.owner == "p.max_idx_" for b in net_buffers(masked, mode="gpu"))


def test_stochastic_pooling_has_gpu_code_only(tmp_path):
    """STOCHASTIC: rand_idx_, a float per top element, drawn in a training forward; its kernels take no
    pad_ (.cu:423-443). The CPU forward is NOT_IMPLEMENTED (cpp:407-408), as is any CPU pooling of
    other than 2 or 3 spatial axes (cpp:251, 276, 310-311)."""
    net = pool(tmp_path, "pool: STOCHASTIC kernel_size: 2 stride: 2")  # (1, 2, 2, 4, 5): 80 elements
    mine = {b.owner: b.bytes for b in net_buffers(net, mode="gpu") if b.owner.startswith("p.")}
    assert mine == {"p.rand_idx_": 80 * F, "p.input_shape_": 4 * F, "p.output_shape_": 3 * F,
                    "p.kernel_shape_": 3 * F, "p.stride_": 3 * F}
    with pytest.raises(InputError, match="no CPU code for STOCHASTIC pooling"):
        net_buffers(net, mode="cpu")
    flat = pool(tmp_path, "axis: 3 kernel_size: 2")  # one spatial axis, W
    assert tops(flat, "p") == [(1, 2, 4, 7, 8)]
    net_buffers(flat, mode="gpu")
    with pytest.raises(InputError, match="no CPU code for pooling over 1 spatial axes"):
        net_buffers(flat, mode="cpu")


def test_a_cudnn_build_runs_average_pooling_as_cudnn_but_not_pooling_nd(tmp_path):
    """The factory makes AVE Pooling with one top a CuDNNPoolingLayer in a cuDNN build
    (layer_factory.cpp:128-146), which keeps its geometry on the host (cudnn_pooling_layer.cpp:13-33);
    PoolingND is always PoolingNDLayer (pooling_nd_layer.cpp:574)."""
    for kind, device_blobs in (("Pooling", False), ("PoolingND", True)):
        net = pool(tmp_path, "pool: AVE kernel_size: 2 stride: 2", kind)
        owners = {b.owner for b in net_buffers(net, mode="gpu", engine="cudnn")}
        assert ("p.kernel_shape_" in owners) is device_blobs
    stochastic = pool(tmp_path, "pool: STOCHASTIC kernel_size: 2 stride: 2", "Pooling")
    with pytest.raises(InputError, match="cuDNN has no stochastic pooling"):
        net_buffers(stochastic, mode="gpu", engine="cudnn")


def test_its_host_objects_by_hand(tmp_path):
    """PoolingNDLayer<float> (pooling_nd_layer.hpp:47-67): Layer<Dtype> (728), five Blob<int> (5 x 80),
    six ints (24), a bool padded to 8, rand_idx_ and max_idx_ (2 x 80): 1,320 bytes. Beyond that object:
    each geometry Blob<int> reshaped to one axis (shape_, shape_data_ and its int, the data and diff
    SyncedMemory objects), their ints (3 spatial axes: 4 x 3 + 4), and max_idx_ reshaped to the top's 5
    axes."""
    net = pool(tmp_path, "pool: MAX kernel_size: 3 stride: 3 pad: 2")
    node = net.layer("p")
    synced = 40 + SHARED_PTR_BLOCK  # a SyncedMemory (40) in a shared_ptr

    def blob(axes):
        return 4 * axes + synced + 4 * axes + 2 * synced

    assert 728 + 5 * 80 + 24 + 8 + 2 * 80 == 1320 == host.ND_POOLING_BYTES
    assert host.MEMBERS["PoolingND"](node, 0) == (1320 - 728) + 5 * blob(1) + (4 * 3 + 4) * F + blob(5)


# --- HDF5Data's crop ---------------------------------------------------------------------------------

def hdf5_net(crop, tops_=("data", "label")):
    top = "".join(f'top: "{t}" ' for t in tops_)
    return (f'layer {{ name: "d" type: "HDF5Data" {top}hdf5_data_param {{ source: "list.txt" batch_size: 2 }} '
            f'transform_param {{ {crop} }} }}\n'
            'layer { name: "c" type: "Convolution" bottom: "data" top: "c" '
            'convolution_param { num_output: 2 kernel_size: 1 } }\n')


@pytest.fixture
def volumes(tmp_path, monkeypatch):
    """A file of 3 volumes of 1 x 10 x 12 x 14 and their label maps, listed in list.txt."""
    monkeypatch.chdir(tmp_path)
    ds.write_h5(str(tmp_path / "a.h5"), data=np.zeros((3, 1, 10, 12, 14), "float32"),
                label=np.zeros((3, 1, 10, 12, 14), "float32"))
    ds.write_list(str(tmp_path / "list.txt"), ["a.h5"])
    return tmp_path


def test_hdf5data_crops_each_volume_and_keeps_the_cropped_file(volumes):
    """crop_size_w set: data and label are cropped to crop_size_l x crop_size_h x crop_size_w
    (hdf5_data_layer.cpp:195-202): tops (2, 1, 8, 6, 4); hdf_blobs_ holds the file's 3 rows cropped,
    3 x 192 floats a top (cpp:205-209); the whole file lives only while it is read (cpp:49-60)."""
    net = build_text(volumes, hdf5_net("crop_size_l: 8 crop_size_h: 6 crop_size_w: 4"))
    assert tops(net, "d") == [(2, 1, 8, 6, 4), (2, 1, 8, 6, 4)]
    held = {b.owner: b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "d"}
    assert held["d.hdf_blobs_"] == 2 * 3 * (8 * 6 * 4) * F


def test_hdf5data_without_crop_size_w_reads_whole_volumes(volumes):
    """Only has_crop_size_w() turns the crop on (cpp:48): with crop_size_l and crop_size_h alone the
    tops are the volumes whole, and transform_param is read no further."""
    net = build_text(volumes, hdf5_net("crop_size_l: 8 crop_size_h: 6"), schema="caffe3d")
    assert tops(net, "d") == [(2, 1, 10, 12, 14)] * 2
    held = {b.owner: b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "d"}
    assert held["d.hdf_blobs_"] == 2 * 3 * (10 * 12 * 14) * F


@pytest.mark.parametrize("crop, tops_, message", [
    ("crop_size_l: 11 crop_size_h: 6 crop_size_w: 4", ("data", "label"), "the crop 11x6x4 is larger than the volumes"),
    ("crop_size_l: 8 crop_size_h: 6 crop_size_w: 4", ("data",), "with 1 its hdf_blobs_ stay empty"),
    ("crop_size_w: 4", ("data", "label"), "each must be set and positive"),
])
def test_hdf5data_refuses_a_crop_its_code_cannot_make(volumes, crop, tops_, message):
    with pytest.raises(InputError, match=message):
        build_text(volumes, hdf5_net(crop, tops_))


def test_heartsegs_train_net_asks_for_its_volumes_then_audits():
    """3D-DSN's train net reads ../train.list, not here: under --strict the data and label tops are asked
    for, their crop known (batch 4, 64 x 64 x 64), and without it their channels are assumed; given them,
    it audits. conv1a (3x3x3, pad 1) keeps 64; pool1-3 (the fork's N-D Pooling, kernel 2, stride 2)
    halve it: 32, 16, 8."""
    r = run_in_process(TRAIN)
    assert r.returncode == 0 and "data 4x3x64x64x64" in r.stdout, r.stderr
    r = run_in_process(TRAIN, "--strict")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "source '../train.list' is not found" in r.stderr
    assert "--input data=4xCx64x64x64 --input label=4xCx64x64x64" in r.stderr and "did you mean" not in r.stderr
    r = run_in_process(TRAIN, "--input", "data=4x1x64x64x64", "--input", "label=4x1x64x64x64")
    assert r.returncode == 0, r.stderr
    net = build_nets(TRAIN, inputs={"data": (4, 1, 64, 64, 64), "label": (4, 1, 64, 64, 64)})[0]
    assert [tops(net, p)[0][2:] for p in ("pool1", "pool2", "pool3")] == [(32,) * 3, (16,) * 3, (8,) * 3]


# --- the fork's data layers --------------------------------------------------------------------------

def test_its_data_layers_copy_three_prefetched_batches(tmp_path):
    """BVLC c858567's BasePrefetchingDataLayer: PREFETCH_COUNT = 3 batches (base_data_layer.hpp:72, 78),
    copied into the tops, which own their buffers (base_data_layer.cpp:122-149)."""
    text = (VOLUME.replace('input: "x"\ninput_shape { dim: 1 dim: 2 dim: 4 dim: 7 dim: 9 }\n', "")
            + 'layer { name: "d" type: "Data" top: "x" top: "t" data_param { source: "db" batch_size: 1 } }\n'
            'layer { name: "p" type: "PoolingND" bottom: "x" top: "y" pooling_nd_param { kernel_size: 2 } }\n')
    (tmp_path / "net.prototxt").write_text(text)
    net = build_nets(str(tmp_path / "net.prototxt"), inputs={"x": (1, 2, 4, 7, 9)})[0]
    got = {(b.owner, b.kind, b.device): b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "d"}
    assert got[("d.prefetch[3].x", "prefetch", "device")] == 3 * 2 * 4 * 7 * 9 * F
    assert got[("x", "top data", "device")] == 2 * 4 * 7 * 9 * F
    assert [t for t in layer_touches(net.layer("d"), "gpu", "caffe") if t.what == "top" and not t.owns] == []


# --- which Caffe reads a net -------------------------------------------------------------------------

def test_a_net_of_bvlcs_fields_pooling_volumes_is_read_with_3d_caffe_and_says_so(tmp_path):
    """3D-DSN's deploy net uses only BVLC's fields and types, with Pooling on 5-axis blobs: BVLC's
    PoolingLayer reads num, channels, height and width and stops there, 3D-Caffe's pools them, so it
    is read with 3D-Caffe and the assumption says why; --fork bvlc refuses it as BVLC Caffe does, and
    the message names --fork caffe3d."""
    (tmp_path / "n.prototxt").write_text(
        VOLUME + 'layer { name: "p" type: "Pooling" bottom: "x" top: "y" pooling_param { kernel_size: 2 } }\n')
    r = run_in_process("n.prototxt", cwd=tmp_path)
    assert r.returncode == 0 and "read with the fork caffe3d: with BVLC Caffe's rules, layer 'p' stops" in r.stdout
    r = run_in_process("n.prototxt", "--fork", "bvlc", cwd=tmp_path)
    assert r.returncode == 2 and "Pooling needs a 4-axis bottom" in r.stderr and "--fork caffe3d" in r.stderr
    assert run_in_process("n.prototxt", "--fork", "caffe3d", cwd=tmp_path).returncode == 0


def test_pooling_nd_beside_a_layer_its_schema_lacks_is_refused_cleanly(tmp_path):
    """An Input layer (no input_param in 3D-Caffe's caffe.proto) keeps the file BVLC's; PoolingND, lent by
    the fork, finds no pooling_nd_param there: one message, no internal error."""
    (tmp_path / "n.prototxt").write_text(
        'layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 4 dim: 8 dim: 8 } } }\n'
        'layer { name: "p" type: "PoolingND" bottom: "x" top: "y" }\n')
    r = run_in_process("n.prototxt", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "not read with that fork's caffe.proto (it has no pooling_nd_param)" in r.stderr


VOLUME_NET = """name: "v"
input: "data"
input_shape { dim: 1 dim: 1 dim: 8 dim: 8 dim: 8 }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 2 kernel_size: 3 pad: 1 } }
layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
"""


def test_a_volume_net_of_bvlc_types_is_read_with_3d_caffe_where_bvlc_pooling_stops(tmp_path):
    """Only BVLC's types, but a 5-axis blob into Pooling: BVLC's CHECKs 4 axes (pooling_layer.cpp:
    'Input must have 4 axes'), 3D-Caffe's pools each spatial axis (tried as a new user would on a
    tumour segmentation net). Read with 3D-Caffe, said; with --fork bvlc, refused as BVLC Caffe does.
    By hand: N-D convolution, pad 1 kernel 3, keeps 8 x 8 x 8; pooling kernel 2 stride 2:
    ceil((8 - 2) / 2) + 1 = 4 on each axis."""
    path = tmp_path / "volume.prototxt"
    path.write_text(VOLUME_NET)
    run = run_in_process(path, "--format", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["nets"][0]["caffe_proto"] == "caffe3d"
    tops = {layer["name"]: layer["tops"] for layer in report["nets"][0]["layers"]}
    assert tops["pool"] == [[1, 2, 4, 4, 4]]
    assert any("read with the fork caffe3d: with BVLC Caffe's rules, layer 'pool' stops" in a["assumption"]
               for a in report["assumptions"])
    bvlc = run_in_process(path, "--fork", "bvlc")
    assert bvlc.returncode == 2 and "Pooling needs a 4-axis bottom" in bvlc.stderr
