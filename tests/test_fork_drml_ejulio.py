"""Kaili Zhao's DRML layers as ejulio/DRML (f036320) ports them to a 2016 BVLC Caffe: its schema, MultilabelImageData
and its Box held against its sources, and cs123951/DRML_caffe_python's AlexNet net (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's caffe.proto, multilabel_image_data_layer.hpp/.cpp and
box_layer.hpp, cited by file and line; the Box, Splice and MultiSigmoidCrossEntropyLoss code is jellyDL/drml_caffe's
(tests/test_drml.py holds it to that source).
"""
import hashlib
import json
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit.audit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import layer_touches
from protoaudit.read.load import load
from protoaudit.read.schema import load_schema

HERE = os.path.join(DATA, "drml_ejulio")
NET = os.path.join(HERE, "AlexNet.prototxt")
F = 4  # bytes per float
COMMIT = "f036320a40b60cb3f98fe9a69b1df703c4479bcc"
# the repository's src/caffe/proto/caffe.proto (git blob 19d161c2295bfef8ce3d6d76f6f1df3dc034abf1), hashed as fetched
SOURCE_SHA256 = "397077adcefa5de6aa122baf1dfe6e9a1f3506a925dd730f59eb3a8d6ccb7e63"


def test_the_proto_is_the_repositorys():
    text = open(os.path.join(ROOT, "proto", "forks", "drml_ejulio.proto"), "rb").read()
    first, second, body = text.split(b"\n", 2)
    assert first.startswith(b"// ejulio/DRML") and COMMIT.encode() in first
    assert second.startswith(b"// copied verbatim")
    assert hashlib.sha256(body).hexdigest() == SOURCE_SHA256


def test_the_schemas_fields():
    """caffe.proto:365, :403 (box_param 147, splice_param 148), :548-553 (BoxParameter: width and height required,
    no default), :812 (ImageDataParameter.multilabel_num 13, jellyDL's being 15); :101 (SolverParameter's last
    field `type`: no layer_wise_reduce)."""
    s = load_schema("drml_ejulio")
    layer = {f.name: f.number for f in s.message("LayerParameter").DESCRIPTOR.fields}
    assert (layer["box_param"], layer["splice_param"]) == (147, 148)
    box = s.message("BoxParameter").DESCRIPTOR.fields_by_name
    assert box["width"].is_required and box["height"].is_required
    assert s.message("ImageDataParameter").DESCRIPTOR.fields_by_name["multilabel_num"].number == 13
    assert "layer_wise_reduce" not in s.message("SolverParameter").DESCRIPTOR.fields_by_name


def data_layer(tops_="top: \"data\" top: \"label\"", param="is_color: false"):
    return (f'layer {{ name: "d" type: "MultilabelImageData" {tops_} transform_param {{ crop_size: 8 }} '
            f'image_data_param {{ source: "absent.txt" batch_size: 2 multilabel_num: 5 {param} }} }}\n')


def test_multilabel_image_data(tmp_path):
    """cpp:79-81: a crop_size gives (batch, C, crop, crop), C 1 with is_color false; cpp:99-100: the label top
    (batch, multilabel_num, 1, 1); cpp:87-93, :102-104: PREFETCH_COUNT = 3 batches of each (the array of a
    2015-16 BVLC BasePrefetchingDataLayer), whose forward copies the current one into the tops."""
    net = build_text(tmp_path, data_layer(), schema="drml_ejulio")
    assert tops(net, "d") == [(2, 1, 8, 8), (2, 5, 1, 1)]
    held = layer_buffers(net, "d")
    assert held[("prefetch[3].data", "device")] == 3 * 2 * 1 * 8 * 8 * F
    assert held[("prefetch[3].label", "device")] == 3 * 2 * 5 * F


def test_one_top_multilabel_image_data_stops(tmp_path):
    """cpp:99-105 shapes the batches' labels only with a label top; load_batch takes the label's
    mutable_cpu_data anyway (cpp:144): Blob's CHECK(data_) stops the prefetch thread."""
    net = build_text(tmp_path, data_layer('top: "data"', ""), schema="drml_ejulio")
    assert tops(net, "d") == [(2, 3, 8, 8)]
    stops = [t for t in layer_touches(net.layer("d"), "gpu", "caffe") if t.what == "stop"]
    assert [t.stage for t in stops] == ["setup"] and "cpp:144" in stops[0].note


def test_box_takes_two_tops_and_its_size(tmp_path):
    """box_layer.hpp:28: MinTopBlobs 2 (jellyDL's asks 1); caffe.proto:549-550: width and height are required,
    so Caffe's parser refuses a box_param without them."""
    head = 'layer { name: "x" type: "Input" top: "x" input_param { shape { dim: 1 dim: 2 dim: 8 dim: 8 } } }\n'
    box = ('layer { name: "b" type: "Box" bottom: "x" %s box_param { width: 4 height: 4 xcoord: 0 ycoord: 0 '
           'xcoord: 4 ycoord: 4 } }\n')
    net = build_text(tmp_path, head + box % 'top: "b1" top: "b2"', schema="drml_ejulio")
    assert tops(net, "b") == [(1, 2, 4, 4)] * 2
    with pytest.raises(InputError, match="2"):
        build_text(tmp_path, head + box % 'top: "b1"', schema="drml_ejulio")
    with pytest.raises(InputError, match="requires"):
        build_text(tmp_path, head + 'layer { name: "b" type: "Box" bottom: "x" top: "b1" top: "b2" '
                                    'box_param { xcoord: 0 ycoord: 0 } }\n', schema="drml_ejulio")


def test_the_alexnet_by_hand():
    """AlexNet.prototxt: MultilabelImageData crop 227, batch 128 (TEST 64), multilabel_num 12, its list and mean
    absent (colour: 3 channels), AlexNet to fc8 of 12, MultiSigmoidCrossEntropyLoss. Caffe's 'Memory required for
    data' (every top's count, in-place ones again): data 128*3*227*227 = 19,787,136, label 1,536; conv1 and relu1
    128*96*55*55 = 37,171,200 each; pool1, norm1 128*96*27*27 = 8,957,952 each; conv2, relu2 128*256*27*27 =
    23,887,872 each; pool2, norm2 128*256*13*13 = 5,537,792 each; conv3, relu3, conv4, relu4 128*384*169 = 8,306,688
    each; conv5, relu5 5,537,792 each; pool5 128*256*36 = 1,179,648; fc6, relu6, drop6, fc7, relu7, drop7_k 524,288
    each; fc8 1,536; loss 1: 219,527,553 floats. The prefetch: 3 batches of data and label."""
    assert load(NET).schema.name == "drml_ejulio"
    net = build_nets(NET)[0]
    assert tops(net, "data") == [(128, 3, 227, 227), (128, 12, 1, 1)]
    assert tops(net, "fc8") == [(128, 12)]
    held = layer_buffers(net, "data")
    assert held[("prefetch[3].data", "device")] == 3 * 128 * 3 * 227 * 227 * F
    assert held[("prefetch[3].label", "device")] == 3 * 128 * 12 * F
    floats = (19_787_136 + 1_536 + 2 * 37_171_200 + 2 * 8_957_952 + 2 * 23_887_872 + 2 * 5_537_792
              + 4 * 8_306_688 + 2 * 5_537_792 + 1_179_648 + 6 * 524_288 + 1_536 + 1)
    assert floats == 219_527_553
    r = run_in_process("--format", "json", "AlexNet.prototxt", cwd=HERE, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(r.stdout)["nets"][0]["memory_required_for_data"] == floats * F


def test_the_alexnet_audits_with_no_flags():
    """Tried as a new user would: `protoaudit AlexNet.prototxt` in the net's folder."""
    r = run_in_process("AlexNet.prototxt", cwd=HERE, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout and "ejulio/DRML" in r.stdout
