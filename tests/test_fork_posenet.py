"""PoseNet's Caffe (alexgkendall/caffe-posenet, 62aafbd): its schema, its Data layer's float_data label
and its Dropout held against its source, and its PoseNet training net (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/layers/data_layer.cpp,
base_data_layer.cpp, data_reader.cpp, dropout_layer.cu and src/caffe/proto/caffe.proto, cited by
file and line.
"""
import os

import pytest

import datasets as ds
from conftest import DATA, ROOT, build_text, run_in_process, tops
from protoaudit import audit, build_nets
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

NET = os.path.join(DATA, "forks", "posenet", "train_posenet.prototxt")
F = 4  # bytes per float
STRING, DATUM = 32, 72  # sizeof(std::string) and sizeof(caffe::Datum), as protoaudit's other Data tests take them


def owned(net, layer, mode="gpu"):
    return {(b.owner, b.device): b.bytes for b in net_buffers(net, mode=mode) if b.layer == layer}


def float_datum(channels, height, width, floats):
    """A raw record with `floats` float_data values, as posenet/scripts/create_posenet_lmdb_dataset.py
    writes its pose (3 position and 4 quaternion values) beside the image."""
    d = ds.SCHEMA.message("Datum")()
    d.channels, d.height, d.width = channels, height, width
    d.data = bytes(channels * height * width)
    d.float_data.extend([0.25] * floats)
    return d.SerializeToString()


def pose_net(source, slice_point=3, wpqr="InnerProduct", extra=""):
    """PoseNet's wiring in small: Data, the label sliced on axis 1 at `slice_point`, two heads
    (InnerProducts of `slice_point` and 4 outputs, or a 1x1 Convolution for the second) and a EuclideanLoss each."""
    second = ('inner_product_param { num_output: 4 }' if wpqr == "InnerProduct"
              else 'convolution_param { num_output: 4 kernel_size: 1 }')
    return (f'layer {{ name: "d" type: "Data" top: "data" top: "label" transform_param {{ crop_size: 8 }} '
            f'data_param {{ source: "{source}" batch_size: 2 backend: LMDB }} }}\n'
            f'layer {{ name: "s" type: "Slice" bottom: "label" top: "xyz" top: "wpqr" '
            f'slice_param {{ slice_dim: 1 slice_point: {slice_point} }} }}\n'
            f'layer {{ name: "fx" type: "InnerProduct" bottom: "data" top: "fx" '
            f'inner_product_param {{ num_output: {slice_point} }} }}\n'
            f'layer {{ name: "fq" type: "{wpqr}" bottom: "data" top: "fq" {second} }}\n'
            'layer { name: "lx" type: "EuclideanLoss" bottom: "fx" bottom: "xyz" top: "lx" }\n'
            'layer { name: "lq" type: "EuclideanLoss" bottom: "fq" bottom: "wpqr" top: "lq" }\n' + extra)


def test_the_proto_is_the_forks_file_verbatim():
    """The fork's one addition to BVLC's caffe.proto of January 2016 (cff6f3d9): DropoutParameter's
    sample_weights_test = 2 (caffe.proto:601)."""
    text = open(os.path.join(ROOT, "proto", "forks", "posenet.proto")).read()
    assert text.startswith("// alexgkendall/caffe-posenet (PoseNet's Caffe: Kendall, Grimes and Cipolla, ICCV 2015), "
                           "src/caffe/proto/caffe.proto at commit 62aafbd7c45df91acdba14f5d1406d8295c2bc6f,\n")
    dropout = text.split("message DropoutParameter {\n", 1)[1].split("}", 1)[0]
    assert dropout == ("  optional float dropout_ratio = 1 [default = 0.5]; // dropout ratio\n"
                       "  optional bool sample_weights_test = 2 [default = false]; "
                       "// Sample weights for testing or use the mean\n")


def test_a_build_tells_the_fork_from_those_that_read_its_files(tmp_path):
    """Its caffe.proto reads BVLC's files, and caffe-segnet's (whose sample_weights_test it shares):
    reading chooses those, and PoseNet's is taken where their build stops and its own builds."""
    assert load(NET).schema.name == "bvlc"
    net = tmp_path / "bayesian.prototxt"
    net.write_text('input: "x" input_shape { dim: 2 dim: 5 }\n'
                   'layer { name: "d" type: "Dropout" bottom: "x" top: "x" dropout_param { sample_weights_test: true } }\n')
    assert load(str(net)).schema.name == "segnet"
    (said,) = [a for a in audit(NET).nets[0].net.assumptions if a.layer == "(file)"]
    assert said.override == "--fork bvlc" and "layer 'slice_label': slice_dim 1 is out of range" in said.what
    run = run_in_process(NET, "--fork", "bvlc")
    assert run.returncode == 2 and "one label per record as BVLC's Data layer makes it" in run.stderr


def test_the_posenet_net_audits_with_no_flags():
    """train_posenet.prototxt: Data of batch 64 (TEST: 1) and crop 224 from an LMDB that is not here.
    The label is sliced on axis 1 at 3 (label_xyz, 3 wide); label_wpqr goes to three EuclideanLosses
    against cls{1,2,3}_fc_wpqr, InnerProducts of num_output 4, whose Reshape CHECKs equal count(1)
    (euclidean_loss_layer.cpp): label_wpqr is 4 wide, so the record holds 3 + 4 = 7 float_data values
    and the label is (64, 7, 1, 1) (data_layer.cpp:54-57).

    Its Data layer (3 batches, copied into the tops): prefetch_ holds 3 x 64 x 7 label floats on the
    device and as many on the host (base_data_layer.cpp:53-67), and the top its own 64 x 7. The
    DataReader makes prefetch (4, caffe.proto's default) x batch_size Datums (data_reader.cpp:19-20,
    :44-49), each holding a record: the object, its data string (3 x 224 x 224 bytes, the crop's image,
    the record's own size being unknown, and its terminator) and its float_data (a repeated field's
    8-byte header and 7 floats)."""
    run = run_in_process(NET)
    assert run.returncode == 0, run.stderr
    train, test = (n.net for n in audit(NET).nets[:2])
    assert train.schema == "posenet" and test.schema == "posenet"
    assert tops(train, "data") == [(64, 3, 224, 224), (64, 7, 1, 1)]
    assert tops(train, "slice_label") == [(64, 3, 1, 1), (64, 4, 1, 1)]
    assert tops(test, "data") == [(1, 3, 224, 224), (1, 7, 1, 1)]
    (said,) = [a for a in train.assumptions if a.layer == "data" and "float_data" in a.what]
    assert said.override.startswith("--input label=64x7x1x1") and "3 + 4" in said.what
    got = owned(train, "data")
    assert got[("data.prefetch[3].label", "device")] == got[("data.prefetch[3].label (host)", "host")] == 3 * 64 * 7 * F
    assert got[("label", "device")] == 64 * 7 * F
    assert got[("data.DataReader datums", "host")] == 4 * 64 * (DATUM + STRING + 3 * 224 * 224 + 1 + 8 + 7 * F)
    given = audit(NET, inputs={"label": (64, 7, 1, 1)}).nets[0].net
    assert not [a for a in given.assumptions if "float_data" in a.what]


def test_the_label_is_the_records_float_data(tmp_path, monkeypatch):
    """With the database here the first record decides (data_layer.cpp:45-67): 5 float_data values give a
    (2, 5, 1, 1) label whatever the net's slices (here a Slice at 1 and a 4-wide head: Caffe stops on it);
    a record without float_data gives BVLC's (2,)."""
    monkeypatch.chdir(tmp_path)
    ds.write_lmdb(str(tmp_path / "floats"), [(b"00000000_a", float_datum(3, 8, 8, 5))])
    net = build_text(tmp_path, 'layer { name: "d" type: "Data" top: "data" top: "label" '
                               'data_param { source: "floats" batch_size: 2 backend: LMDB } }\n', schema="posenet")
    assert tops(net, "d") == [(2, 3, 8, 8), (2, 5, 1, 1)]
    assert owned(net, "d")[("d.DataReader datums", "host")] == 4 * 2 * (DATUM + STRING + 3 * 8 * 8 + 1 + 8 + 5 * F)
    ds.write_lmdb(str(tmp_path / "plain"), [(b"00000000_a", float_datum(3, 8, 8, 0))])
    net = build_text(tmp_path, 'layer { name: "d" type: "Data" top: "data" top: "label" '
                               'data_param { source: "plain" batch_size: 2 backend: LMDB } }\n', schema="posenet")
    assert tops(net, "d") == [(2, 3, 8, 8), (2,)]


def test_the_width_is_taken_from_the_net_only_where_it_is_exact(tmp_path):
    """Without the database: a cut at 2 (a 2-wide head for the first piece) and a 4-wide EuclideanLoss
    partner give K = 6; where the last
    piece's partner is a Convolution (whose width follows its own bottom's) or the pieces are read by
    no EuclideanLoss, nothing pins K and the label stays BVLC's, refused at the Slice as before."""
    path = tmp_path / "net.prototxt"
    path.write_text(pose_net("absent_lmdb", slice_point=2))
    net = build_nets(str(path), phase="TRAIN", schema="posenet")[0]
    assert tops(net, "d")[1] == (2, 6, 1, 1) and tops(net, "s") == [(2, 2, 1, 1), (2, 4, 1, 1)]
    for text in (pose_net("absent_lmdb", wpqr="Convolution"),
                 pose_net("absent_lmdb").replace('bottom: "wpqr" ', 'bottom: "fq2" ')
                 + 'layer { name: "f2" type: "InnerProduct" bottom: "data" top: "fq2" inner_product_param '
                   '{ num_output: 4 } }\n'):
        path.write_text(text)
        run = run_in_process(str(path))
        assert run.returncode == 2 and "one label per record as BVLC's Data layer makes it" in run.stderr, run.stderr


@pytest.mark.parametrize("phase, drawn", [("TRAIN", True), ("TEST", True)])
def test_dropout_draws_its_mask_in_test_under_sample_weights_test(tmp_path, phase, drawn):
    """dropout_layer.cu:23: with sample_weights_test the TEST forward draws rand_vec_ (a uint32 per
    bottom element) on the device as TRAIN does; without it a TEST net's GPU forward touches none."""
    text = ('input: "x" input_shape { dim: 2 dim: 5 }\n'
            'layer { name: "d" type: "Dropout" bottom: "x" top: "y" dropout_param { sample_weights_test: %s } }\n')
    for flag, expected in (("true", drawn), ("false", phase == "TRAIN")):
        net = build_text(tmp_path, text % flag, schema="posenet", phase=phase)
        assert (("d.rand_vec_", "device") in owned(net, "d")) == expected
        if expected:
            assert owned(net, "d")[("d.rand_vec_", "device")] == 2 * 5 * 4
