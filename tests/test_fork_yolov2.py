"""YOLOv2's Caffe port (gklz1982/caffe-yolov2, ebb2702): its schema, BoxData, Reorg, RegionLoss and the
BVLC code of June 2016 it carries held against its source, and its nets (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/layers/box_data_layer.cpp,
base_data_layer.cpp/.cu, reorg_layer.cpp/.cu, region_loss_layer.cpp, loss_layer.cpp,
batch_norm_layer.cpp, src/caffe/data_transformer.cpp, data_reader.cpp, solver.cpp and
include/caffe/layers/*.hpp, cited by file and line.
"""
import os

import pytest

import datasets as ds
from conftest import DATA, ROOT, build_text, run_in_process, tops
from protoaudit import audit, build_nets
from protoaudit.errors import InputError
from protoaudit.layers.cxx import SHARED_PTR_BLOCK
from protoaudit.memory import host
from protoaudit.memory.buffers import layer_touches, net_buffers
from protoaudit.read.load import load

HERE = os.path.join(DATA, "forks", "yolov2")
INDOOR = os.path.join(HERE, "indoor_train.prototxt")
DARKNET = os.path.join(HERE, "gnet_region_train_darknet_v3.prototxt")
SOLVER = os.path.join(HERE, "gnet_region_solver_darknet_v3.prototxt")
F = 4  # bytes per float
IMAGE = 3 * 416 * 416  # an image of the fork's recipe (data/yolo/convert.sh: 416 x 416, colour)


def owned(net, layer, mode="gpu"):
    return {(b.owner, b.device): b.bytes for b in net_buffers(net, mode=mode) if b.layer == layer}


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "yolov2.proto")).read()
    assert text.startswith("// gklz1982/caffe-yolov2 (YOLOv2's Caffe port), src/caffe/proto/caffe.proto at commit "
                           "ebb27029db4ddc0d40e520634633b0fa9cdcc10d,\n")
    assert "  optional RegionLossParameter region_loss_param = 202;" in text
    assert "  optional ReorgParameter reorg_param = 147;" in text
    assert "  repeated uint32 side = 11;\n" in text  # DataParameter's, BoxData's label tops
    assert "round_mode" not in text  # a June 2016 BVLC caffe.proto


def test_its_nets_are_read_with_its_schema():
    for path in (INDOOR, DARKNET):
        assert load(path).schema.name == "yolov2"
    assert build_nets(SOLVER)[0].schema == "yolov2"  # the solver's net (the solver has no layer to tell)


# --- the real nets ---------------------------------------------------------------------------------

def test_the_indoor_net_audits_with_no_flags():
    """Its LMDBs are absent: 416 x 416 colour images, the fork's recipe. Five poolings (kernel 2, stride
    2, no pad: ceil((H - 2) / 2) + 1) halve 416 to 208, 104, 52, 26, 13. concat1 is scale13 alone, 512 x
    26 x 26; reorg1 (stride 2) makes it 512 x 4 = 2048 x 13 x 13 (reorg_layer.cpp:27-29); conv22 gives
    70 = 5 x (4 + 9 + 1) channels, so 13 x 13 x 70 = side^2 x num x (coords + num_class + 1) as
    region_loss_layer.cpp:181 CHECKs; the label is 30 boxes x 5 (box_data_layer.cpp:65) = 30 x num."""
    r = run_in_process(INDOOR)
    assert r.returncode == 0, r.stderr
    assert "Read with the caffe.proto of YOLOv2's Caffe port" in r.stdout
    assert "data/yolo/convert.sh" in r.stdout
    for net in (build_nets(INDOOR)[0], build_nets(INDOOR, phase="TEST")[0]):
        assert tops(net, "data") == [(1, 3, 416, 416), (1, 150)]
        assert tops(net, "reorg1") == [(1, 2048, 13, 13)]
        assert tops(net, "conv22_indoor") == [(1, 70, 13, 13)]
        assert tops(net, "region1") == [()]


def test_the_darknet_net_and_its_solver_audit_with_no_flags():
    """gnet_region_train_darknet_v3: batch 8 (TEST 4), conv_reg 125 = 5 x (4 + 20 + 1) channels at 13 x 13.
    Its solver has no test_iter (commented out), so Caffe builds no test net: the train net alone."""
    r = run_in_process(DARKNET)
    assert r.returncode == 0, r.stderr
    train, test = build_nets(DARKNET)[0], build_nets(DARKNET, phase="TEST")[0]
    assert tops(train, "data") == [(8, 3, 416, 416), (8, 150)] and tops(test, "data")[0][0] == 4
    assert tops(train, "conv_reg") == [(8, 125, 13, 13)]
    r = run_in_process(SOLVER)
    assert r.returncode == 0, r.stderr
    assert "the TRAIN net 'gnet_region_voc' (from " in r.stdout
    assert "gnet_region_train_darknet_v3.prototxt, batch 8" in r.stdout
    assert "TEST net" not in r.stdout
    assert [n.role for n in build_nets(SOLVER)] == ["train"]


def test_a_test_net_whose_output_is_not_detection_rows_is_said_to_stop_the_run():
    """The fork's Solver::Test CHECKs every output of a test net is 5 wide (solver.cpp:373), after
    its forward (solver.cpp:367-369): the indoor file's TEST net outputs region1, a scalar, whose legacy
    width is 1. Its figures stand; the report says Caffe stops at the first test."""
    r = run_in_process(INDOOR)
    assert "Solver::Test CHECKs that every output of a test net is 5 wide" in r.stdout
    assert "'region1' (a scalar)" in r.stdout and "--phase train" in r.stdout
    test = audit(INDOOR).nets[1]
    assert test.role == "test" and len(test.net.assumptions) == 2  # the test data's recipe, and this


# --- BoxData ---------------------------------------------------------------------------------------

def box_net(data_param, tops_=("data", "label"), transform="", phase="TRAIN"):
    top = "".join(f'top: "{t}" ' for t in tops_)
    return (f'layer {{ name: "d" type: "BoxData" {top}include {{ phase: {phase} }} '
            f'transform_param {{ {transform} }} data_param {{ {data_param} }} }}\n'
            'layer { name: "c" type: "Convolution" bottom: "data" top: "c" '
            'convolution_param { num_output: 2 kernel_size: 1 } }\n')


def test_boxdata_without_its_database_takes_the_forks_recipe(tmp_path):
    """source absent: the records data/yolo/convert.sh writes (416 x 416 colour JPEG), a crop cropping
    them (InferBlobShape, data_transformer.cpp:594-609), force_gray decoding them to 1 channel
    (cpp:159); two mean values say 2 channels, no such database: --input is asked for, the batch known."""
    net = build_text(tmp_path, box_net('source: "db" batch_size: 2 backend: LMDB'), schema="yolov2")
    assert tops(net, "d") == [(2, 3, 416, 416), (2, 150)]
    assert "data/yolo/convert.sh" in net.assumptions[0].what
    net = build_text(tmp_path, box_net('source: "db" batch_size: 2', transform="crop_size: 400 force_gray: true"),
                     schema="yolov2")
    assert tops(net, "d") == [(2, 1, 400, 400), (2, 150)]
    with pytest.raises(Exception, match="--input data=2x2xHxW"):
        build_text(tmp_path, box_net('source: "db" batch_size: 2', transform="mean_value: 1 mean_value: 2"),
                   schema="yolov2", strict=True)


def test_boxdata_gives_one_label_top_per_side_entry(tmp_path):
    """Each label top is (batch, 30 x 5) whatever the side (cpp:61-73); sides_ defaults to [7]
    (cpp:53-55) and must have one entry per label top (cpp:56-57)."""
    net = build_text(tmp_path, box_net('source: "db" batch_size: 3 side: 13 side: 26', ("data", "a", "b")),
                     schema="yolov2")
    assert tops(net, "d") == [(3, 3, 416, 416), (3, 150), (3, 150)]
    with pytest.raises(InputError, match="side num not equal to top size: 1 side entry for 2 label tops"):
        build_text(tmp_path, box_net('source: "db" batch_size: 3', ("data", "a", "b")), schema="yolov2")
    alone = build_text(tmp_path, box_net('source: "db" batch_size: 3', ("data",)), schema="yolov2")
    assert tops(alone, "d") == [(3, 3, 416, 416)]


def test_what_boxdata_allocates():
    """The darknet net's train BoxData, batch 8. One prefetch batch (base_data_layer.hpp:74) of the
    data (8 x 3 x 416 x 416) and the label (8 x 150), allocated at setup on the host and the device
    (base_data_layer.cpp:55-82), copied into tops that own their buffers (.cu:12-22). Its DataReader
    holds prefetch (4, the default) x batch_size = 32 Datums (data_reader.cpp:18-20, 44-48), each the
    object (72), its string (32) and the image: 416 x 416 x 3 bytes bound the JPEG, assigned one more
    for the terminator. Training makes the transformer's RNG though it neither mirrors nor crops
    (data_transformer.cpp:629), and resizes each crop back (cpp:227): cv::resize's thread state."""
    net = build_nets(DARKNET)[0]
    got = owned(net, "data")
    assert got[("data.prefetch[1].data", "device")] == got[("data.prefetch[1].data (host)", "host")] == 8 * IMAGE * F
    assert got[("data.prefetch[1].label", "device")] == got[("data.prefetch[1].label (host)", "host")] == 8 * 150 * F
    assert got[("data", "device")] == 8 * IMAGE * F and got[("label", "device")] == 8 * 150 * F
    assert got[("data.DataReader datums", "host")] == 4 * 8 * (72 + 32 + IMAGE + 1)
    assert got[("data.RNGs", "host")] == 2704 + 2608  # the thread's, and the transformer's
    assert ("data.cv::resize thread state", "host") in got
    test = build_nets(DARKNET, phase="TEST")[0]  # no mirror: no transformer RNG, no crops to resize
    assert owned(test, "data")[("data.RNGs", "host")] == 2704
    assert ("data.cv::resize thread state", "host") not in owned(test, "data")


def box_datum(floats, encoded=True):
    """A Datum as convert_box_data writes it: a JPEG of 24 x 20 and 6 floats per box (io.cpp)."""
    d = ds.SCHEMA.message("Datum")()
    if encoded:
        d.encoded, d.data = True, ds.image_bytes(3, 20, 24, "JPEG")
    else:
        d.channels, d.height, d.width = 3, 20, 24
        d.data = bytes(3 * 20 * 24)
    d.float_data.extend([0.5] * floats)
    return d


@pytest.mark.parametrize("floats, encoded, message", [
    (12, False, "CHECKs that every record is an encoded image"),
    (0, True, "holds 0 label floats; Caffe CHECKs 6 per box"),
    (7, True, "holds 7 label floats"),
])
def test_boxdata_refuses_records_its_transformer_checks(tmp_path, monkeypatch, floats, encoded, message):
    """With labels the transformer CHECKs an encoded record (data_transformer.cpp:153) and a positive
    multiple of 6 floats (cpp:134-138), in the first batch the prefetch thread loads."""
    monkeypatch.chdir(tmp_path)
    ds.write_lmdb(str(tmp_path / "db"), [(b"00000000_a", box_datum(floats, encoded).SerializeToString())])
    with pytest.raises(InputError, match=message):
        build_text(tmp_path, box_net('source: "db" batch_size: 2 backend: LMDB'), schema="yolov2")


def test_boxdata_reads_its_first_record(tmp_path, monkeypatch):
    """A JPEG of 24 x 20 in colour: data (2, 3, 20, 24); each of the 4 x 2 Datums holds the JPEG's
    bytes (assigned: length + 1) and its 12 floats (8 bytes of header and 48)."""
    monkeypatch.chdir(tmp_path)
    datum = box_datum(12)
    ds.write_lmdb(str(tmp_path / "db"), [(b"00000000_a", datum.SerializeToString())])
    net = build_text(tmp_path, box_net('source: "db" batch_size: 2 backend: LMDB'), schema="yolov2")
    assert tops(net, "d") == [(2, 3, 20, 24), (2, 150)]
    assert owned(net, "d")[("d.DataReader datums", "host")] == 4 * 2 * (72 + 32 + len(datum.data) + 1 + 8 + 12 * F)


def test_its_data_layer_copies_one_prefetched_batch(tmp_path):
    """The fork's Data is BVLC's of June 2016 on this base: PREFETCH_COUNT = 1 (base_data_layer.hpp:74),
    copied into the tops, which own their buffers."""
    text = ('layer { name: "d" type: "Data" top: "data" top: "t" data_param { source: "db" batch_size: 2 } }\n'
            'layer { name: "r" type: "Reorg" bottom: "data" top: "r" reorg_param { stride: 2 } }\n')
    (tmp_path / "net.prototxt").write_text(text)
    net = build_nets(str(tmp_path / "net.prototxt"), inputs={"data": (2, 3, 8, 8)})[0]
    got = owned(net, "d")
    assert got[("d.prefetch[1].data", "device")] == got[("data", "device")] == 2 * 3 * 8 * 8 * F
    assert [t for t in layer_touches(net.layer("d"), "gpu", "caffe") if t.what == "top" and not t.owns] == []


# --- Reorg -----------------------------------------------------------------------------------------

INPUT = 'input: "x"\ninput_shape {{ dim: 2 dim: {c} dim: {h} dim: {w} }}\nforce_backward: true\n'


def reorg(tmp_path, params, c=8, h=6, w=4, top="y"):
    layer = f'layer {{ name: "r" type: "Reorg" bottom: "x" top: "{top}" reorg_param {{ {params} }} }}\n'
    loss = f'layer {{ name: "l" type: "EuclideanLoss" bottom: "{top}" bottom: "{top}" top: "loss" }}\n'
    return build_text(tmp_path, INPUT.format(c=c, h=h, w=w) + layer + loss, schema="yolov2")


def test_reorg_folds_space_into_channels_and_back(tmp_path):
    """(2, 8, 6, 4), stride 2: (2, 8 x 4, 6 / 2, 4 / 2) = (2, 32, 3, 2); with reverse, (2, 8 / 4, 6 x 2,
    4 x 2) = (2, 2, 12, 8) (reorg_layer.cpp:22-30)."""
    assert tops(reorg(tmp_path, "stride: 2"), "r") == [(2, 32, 3, 2)]
    assert tops(reorg(tmp_path, "stride: 2 reverse: true"), "r") == [(2, 2, 12, 8)]


@pytest.mark.parametrize("params, shape, top, message", [
    ("stride: 2", (8, 5, 4), "y", "stride 2 does not divide the bottom"),
    ("stride: 2 reverse: true", (6, 6, 4), "y", "channels by stride x stride"),
    ("reverse: true", (8, 6, 4), "y", "Reorg Layer needs stride param"),
    ("stride: 0", (8, 6, 4), "y", "stride 0"),
    ("stride: 2", (8, 6, 4), "x", "does not allow in-place computation"),
])
def test_reorg_refuses_what_caffe_checks_or_writes_past(tmp_path, params, shape, top, message):
    """LayerSetUp's CHECKs (cpp:9-12); a stride that does not divide the bottom leaves a top smaller
    than the kernels write (.cu:5-36), and a stride of 0 divides by zero (cpp:23-29)."""
    c, h, w = shape
    with pytest.raises(InputError, match=message):
        reorg(tmp_path, params, c, h, w, top)


def test_reorg_backward_reads_its_own_diff_not_the_tops(tmp_path):
    """Backward reads diff_'s diff, the bottom's shape (cpp:20, .cu:55-56), never the top's, and writes
    the bottom's: 2 x 8 x 6 x 4 floats of diff_.diff on the device, in backward."""
    net = reorg(tmp_path, "stride: 2")
    got = {(b.owner, b.touch): b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "r"}
    assert got[("r.diff_.diff", "backward")] == 2 * 8 * 6 * 4 * F
    touched = layer_touches(net.layer("r"), "gpu", "caffe")
    assert not [t for t in touched if t.what == "top" and t.part == "diff"]


# --- RegionLoss ------------------------------------------------------------------------------------

REGION = ('input: "x"\ninput_shape {{ dim: 2 dim: {c} dim: 2 dim: 2 }}\ninput: "lab"\n'
          'input_shape {{ dim: 2 dim: {labels} }}\n'
          'layer {{ name: "c" type: "Convolution" bottom: "x" top: "p" convolution_param {{ num_output: {c} '
          'kernel_size: 1 }} }}\n'
          'layer {{ name: "r" type: "RegionLoss" bottom: "p" bottom: "lab" top: "loss" '
          'region_loss_param {{ side: 2 num: {num} num_class: 1 coords: 4 }} }}\n')


def test_regionloss_checks_its_predictions_and_labels(tmp_path):
    """side 2, num 1, coords 4, num_class 1: 2 x 2 x 1 x 6 = 24 predictions per image, so 6 channels at
    2 x 2 (region_loss_layer.cpp:179-181), and 30 x 1 label values (cpp:180-182)."""
    net = build_text(tmp_path, REGION.format(c=6, labels=30, num=1), schema="yolov2")
    assert tops(net, "r") == [()] and net.layer("r").loss_weights == (1.0,)
    with pytest.raises(InputError, match="hold 28 values per image; side x side x num"):
        build_text(tmp_path, REGION.format(c=7, labels=30, num=1), schema="yolov2")
    with pytest.raises(InputError, match="hold 30 values per image; the layer CHECKs 30 x num = 60"):
        build_text(tmp_path, REGION.format(c=12, labels=30, num=2), schema="yolov2")


def test_what_regionloss_allocates(tmp_path):
    """CPU code only (layer.hpp:341-364). diff_ and real_diff_, each the predictions' 2 x 24 floats,
    filled on the host in forward (cpp:201, 435): host memory in GPU mode, counted in CPU mode. The
    loss goes to the device as Layer::Forward reads it (layer.hpp:474); the predictions' diff,
    written on the host (cpp:487-492), is read on the device by the convolution below."""
    net = build_text(tmp_path, REGION.format(c=6, labels=30, num=1), schema="yolov2")
    gpu, cpu = owned(net, "r"), owned(net, "r", "cpu")
    assert gpu[("r.diff_", "host")] == gpu[("r.real_diff_", "host")] == 2 * 24 * F
    assert cpu[("r.diff_", "host")] == cpu[("r.real_diff_", "host")] == 2 * 24 * F
    assert gpu[("loss", "device")] == F and gpu[("p", "device")] == 2 * 24 * F  # the loss; the predictions' diff


def test_regionloss_stops_on_a_label_that_takes_a_gradient(tmp_path):
    """A label made by a layer that learns takes a gradient: Backward_cpu's LOG(FATAL) (cpp:477-479)."""
    text = REGION.format(c=6, labels=30, num=1).replace('bottom: "lab" top: "loss"', 'bottom: "lab2" top: "loss"')
    text = text.replace('layer { name: "r"', 'layer { name: "i" type: "InnerProduct" bottom: "lab" top: "lab2" '
                        'inner_product_param { num_output: 30 } }\nlayer { name: "r"')
    net = build_text(tmp_path, text, schema="yolov2")
    with pytest.raises(InputError, match="cannot backpropagate to label inputs"):
        net_buffers(net, mode="gpu")


# --- host objects ----------------------------------------------------------------------------------

def test_host_objects_by_hand(tmp_path):
    """ReorgLayer<float> (reorg_layer.hpp:51-58): Layer<Dtype> (728), stride_ and reverse_ (8), seven ints
    (28, padded to 32), Blob diff_ (80): 848; beyond the object, diff_ reshaped to 4 axes (shape_ and
    shape_data_'s 4 ints, three SyncedMemory objects in shared_ptrs). RegionLossLayer<float>
    (region_loss_layer.hpp:74-99): 728, six ints (24), softmax_tree_ (32), jitter_ and rescore_ (8),
    four floats (16), absolute_, thresh_, random_ (12, padded to 16), biases_ (24), diff_ and real_diff_
    (160), t_ (tree.hpp:13-24: seven vectors and two ints padded to 8 each, 184), class_map_ (32),
    cls_map_ (48): 1,272; beyond it, two Blobs of 4 axes and no biases."""
    synced = 40 + SHARED_PTR_BLOCK

    def blob(axes):
        return 4 * axes + synced + 4 * axes + 2 * synced

    assert host.REORG_BYTES == 728 + 8 + 32 + 80 == 848
    assert host.REGION_LOSS_BYTES == 728 + 24 + 32 + 8 + 16 + 16 + 24 + 160 + 184 + 32 + 48 == 1272
    net = reorg(tmp_path, "stride: 2")
    assert host.MEMBERS["Reorg"](net.layer("r"), 0) == 848 - 728 + blob(4)
    net = build_text(tmp_path, REGION.format(c=6, labels=30, num=1), schema="yolov2")
    assert host.MEMBERS["RegionLoss"](net.layer("r"), 0) == 1272 - 728 + 2 * blob(4)


def test_boxdatas_host_objects_beyond_datas():
    """BoxDataLayer (box_data_layer.hpp:36-37) is the DataLayer object (BVLC's 1,184 bytes, counted
    with the members of the fork's DataLayer) plus sides_ (a vector, 24), which holds one int (4) for
    the darknet net's one label top; its one batch's label is a new Blob in a shared_ptr (80 + 24)
    pushed into multi_label_ (one shared_ptr, 16) (cpp:48-73)."""
    node = build_nets(DARKNET)[0].layer("data")
    assert host.MEMBERS["BoxData"](node, 0) - host.MEMBERS["Data"](node, 0) == (1184 - 728 + 24) + 4 + (80 + 24 + 16)


# --- June 2016's BVLC layers in the fork ---------------------------------------------------------

BN = ('input: "x"\ninput_shape { dim: 2 dim: 3 dim: 4 dim: 4 }\n'
      'layer { name: "c" type: "Convolution" bottom: "x" top: "c" '
      'convolution_param { num_output: 3 kernel_size: 1 } }\n'
      'layer { name: "bn" type: "BatchNorm" bottom: "c" top: "c" param { lr_mult: 1 } param { lr_mult: 1 } '
      'param { lr_mult: 1 } }\n')


def test_its_batchnorm_keeps_the_statistics_lr_mult(tmp_path):
    """June 2016's BatchNorm adds no lr_mult-0 ParamSpecs and checks none (batch_norm_layer.cpp:10-37),
    and its upgrade_proto.cpp has no UpgradeNetBatchNorm (BVLC a8ec123, September 2016), which zeroes
    the lr_mult of a BatchNorm giving three param specs: the solver keeps the file's lr_mult 1. In
    BVLC 9b89154 they are zeroed, and a nonzero one given with fewer specs is refused."""
    assert [p.lr_mult for p in build_text(tmp_path, BN).layer("bn").params] == [0.0, 0.0, 0.0]
    with pytest.raises(InputError, match="cannot configure batch normalization statistics"):
        build_text(tmp_path, BN.replace(" param { lr_mult: 1 } }\n", " }\n"))
    net = build_text(tmp_path, BN, schema="yolov2")
    assert [p.lr_mult for p in net.layer("bn").params] == [1.0, 1.0, 1.0]


def test_its_deconvolution_is_never_cudnn(tmp_path):
    """The factory of June 2016 registers no Deconvolution creator (layer_factory.cpp) and
    deconv_layer.cpp:82 registers the class itself: no cuDNN workspace under --engine cudnn."""
    text = ('input: "x"\ninput_shape { dim: 1 dim: 2 dim: 4 dim: 4 }\n'
            'layer { name: "d" type: "Deconvolution" bottom: "x" top: "y" '
            'convolution_param { num_output: 2 kernel_size: 2 stride: 2 } }\n')
    net = build_text(tmp_path, text, schema="yolov2")
    kinds = {b.kind for b in net_buffers(net, mode="gpu", engine="cudnn") if b.layer == "d"}
    assert "workspace" not in kinds
    bvlc = build_text(tmp_path, text)
    assert "workspace" in {b.kind for b in net_buffers(bvlc, mode="gpu", engine="cudnn") if b.layer == "d"}


# --- which Caffe reads a net -----------------------------------------------------------------------

def test_another_forks_regionloss_is_not_sized_with_the_ports(tmp_path):
    """MobileNet-YOLO's caffe.proto has region_loss_param: its RegionLoss is its own (300 boxes, no CHECKs),
    not the port's. A file of ReLU6 and RegionLoss borrows neither fork's class for the other's type:
    refused, naming both; with --fork mobilenet_yolo the RegionLoss top is asked for, never --fork yolov2."""
    (tmp_path / "n.prototxt").write_text(
        'input: "x"\ninput_shape { dim: 1 dim: 125 dim: 13 dim: 13 }\ninput: "lab"\ninput_shape { dim: 1 dim: 150 }\n'
        'layer { name: "a" type: "ReLU6" bottom: "x" top: "x" }\n'
        'layer { name: "r" type: "RegionLoss" bottom: "x" bottom: "lab" top: "loss" }\n'
        'layer { name: "s" type: "Silence" bottom: "loss" }\n')  # a layer reads its top: it is not the net's end
    r = run_in_process("n.prototxt", cwd=tmp_path)
    assert r.returncode == 2 and "mobilenet_yolo lacks RegionLoss" in r.stderr and "yolov2 lacks ReLU6" in r.stderr
    r = run_in_process("n.prototxt", "--fork", "mobilenet_yolo", cwd=tmp_path)
    assert r.returncode == 2 and "unknown layer type 'RegionLoss'" in r.stderr and "--fork yolov2" not in r.stderr


def test_its_own_unsized_layers_are_named_as_its_own(tmp_path):
    """The port's DetectionOutput (detection_output_param of side, num_box, biases) is not SSD's:
    the message does not send the user to --fork ssd."""
    text = ('input: "x"\ninput_shape { dim: 1 dim: 125 dim: 13 dim: 13 }\n'
            'layer { name: "r" type: "Reorg" bottom: "x" top: "y" reorg_param { stride: 1 } }\n'
            'layer { name: "o" type: "DetectionOutput" bottom: "y" top: "out" detection_output_param { side: 13 } }\n')
    (tmp_path / "n.prototxt").write_text(text)
    r = run_in_process("n.prototxt", cwd=tmp_path)
    assert r.returncode == 2 and "no rule for the DetectionOutput of YOLOv2's Caffe port" in r.stderr
    assert "--fork ssd" not in r.stderr


def test_another_caffes_detection_loss_is_not_the_ports(tmp_path):
    """MS-CNN's DetectionLoss carries detection_loss_param { cls_num ... }, a field the port's
    DetectionLossParameter (side, num_class, num_object...) lacks: it is not the port's layer. MS-CNN's
    Caffe is shipped, so the file is read with its schema and its layer, whose maps-and-labels check
    (a LossLayer: ExactNumBottomBlobs 2, loss_layer.hpp:32) refuses a single bottom, as that Caffe would."""
    (tmp_path / "n.prototxt").write_text(
        'input: "x"\ninput_shape { dim: 1 dim: 6 dim: 4 dim: 4 }\n'
        'layer { name: "l" type: "DetectionLoss" bottom: "x" top: "loss" detection_loss_param { cls_num: 2 } }\n')
    assert load(str(tmp_path / "n.prototxt")).schema.name == "mscnn"
    r = run_in_process("n.prototxt", cwd=tmp_path)
    assert r.returncode == 2 and "exactly 2 bottom blobs" in r.stderr and "YOLOv2" not in r.stderr


def test_only_outputs_five_wide_pass_the_forks_test(tmp_path):
    """Solver::Test reads each output's legacy width (LegacyShape(3), 1 past the last axis) and CHECKs 5
    (solver.cpp:373): (1, 1, 3, 5) passes, (1, 1, 3, 4) does not (the indoor net's scalar neither)."""
    from protoaudit.layers.yolov2 import first_test_stops

    def net(shape):
        dims = " ".join(f"dim: {d}" for d in shape)
        return build_text(tmp_path, f'input: "x"\ninput_shape {{ {dims} }}\n'
                          'layer { name: "r" type: "Reorg" bottom: "x" top: "y" reorg_param { stride: 1 } }\n')

    assert first_test_stops(net((1, 1, 3, 5))) is None
    assert "'y' (1x1x3x4) is not" in first_test_stops(net((1, 1, 3, 4))).what
