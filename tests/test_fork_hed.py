"""HED's Caffe (s9xie/hed, 912632b): its schema, and ImageLabelmapData held against its source.

Expected values are derived by hand below from src/caffe/layers/image_labelmap_data_layer.cpp,
base_data_layer.cpp/.cu and include/caffe/data_layers.hpp at that commit, cited by line.
"""
import os

from conftest import DATA, ROOT, tops
from protoaudit import build_nets
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

NET = os.path.join(DATA, "forks", "hed_train_val.prototxt")
F = 4  # bytes per float


def test_hed_net_is_read_with_its_schema():
    assert load(NET).schema.name == "hed"


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "hed.proto")).read()
    assert text.startswith("// s9xie/hed, src/caffe/proto/caffe.proto at commit 912632b986acc6dd6cc33b95603b2f279d7bd9f2")


def test_label_map_follows_the_data_top():
    """cpp:70-107: the ground truth is read grey at the image's size, so the label top is
    (batch, 1, H, W) of the data top (batch 1 in HED's train_val; a BSDS image is 320x480)."""
    train = build_nets(NET, inputs={"data": (1, 3, 320, 480)})[0]
    assert tops(train, "data") == [(1, 3, 320, 480), (1, 1, 320, 480)]


def test_three_prefetch_batches_of_image_and_label_map():
    """data_layers.hpp:115-121: PREFETCH_COUNT = 3 LabelmapBatches (data_ and labelmap_), made at
    setup on the host and, in GPU mode, on the device (base_data_layer.cpp:143-152); each forward
    copies one into the tops, which own their memory (base_data_layer.cu:30-41).
    One batch: 3x320x480 + 1x320x480 = 614,400 floats."""
    train = build_nets(NET, inputs={"data": (1, 3, 320, 480)})[0]
    buffers = [b for b in net_buffers(train, mode="gpu") if b.layer == "data"]
    device = sum(b.bytes for b in buffers if b.kind == "prefetch" and b.device == "device")
    host = sum(b.bytes for b in buffers if b.kind == "prefetch" and b.device == "host")
    assert device == host == 3 * 614_400 * F
    assert sum(b.bytes for b in buffers if b.kind == "top data") == 614_400 * F
