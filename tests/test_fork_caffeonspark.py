"""CaffeOnSpark's Caffe (yahoo/caffe fc0a02e, the Caffe yahoo/CaffeOnSpark pins as caffe-public): its schema
and pynetbuilder's CIFAR-10 ResNet-110, which sets MemoryData's source and share_in_parallel
(tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/layers/memory_data_layer.cpp,
include/caffe/layers/memory_data_layer.hpp, src/caffe/net.cpp and src/caffe/proto/caffe.proto, cited by
file and line, and from the net's own layers.
"""
import os

from conftest import DATA, ROOT, run_in_process, tops
from protoaudit import build_nets
from protoaudit.read.load import load
from protoaudit.read.schema import load_schema

HERE = os.path.join(DATA, "forks", "caffeonspark")
NET = os.path.join(HERE, "test.prototxt")
SOLVER = os.path.join(HERE, "solver.prototxt")


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "caffeonspark.proto")).read()
    assert text.startswith("// yahoo/caffe (CaffeOnSpark's Caffe, the Caffe yahoo/CaffeOnSpark pins as its submodule "
                           "caffe-public), src/caffe/proto/caffe.proto at commit "
                           "fc0a02efd720bdc29b2f1d93e5354f19a2b9d559,\n")


def test_the_fields_are_where_the_fork_puts_them():
    """caffe.proto:867-872: MemoryDataParameter's share_in_parallel (10000, default true) and source
    (10001), read by CaffeOnSpark's Spark data sources, not by the layer; LayerParameter's
    source_class (355) names that source's class."""
    fields = load_schema("caffeonspark").message("MemoryDataParameter").DESCRIPTOR.fields_by_name
    assert fields["source"].number == 10001
    assert fields["share_in_parallel"].number == 10000
    assert fields["share_in_parallel"].default_value is True
    layer = load_schema("caffeonspark").message("LayerParameter").DESCRIPTOR.fields_by_name
    assert layer["source_class"].number == 10001


def test_the_fields_choose_the_schema(tmp_path):
    """Only the fork reads MemoryData's source; a MemoryData net without it stays BVLC's."""
    assert load(NET).schema.name == "caffeonspark"
    assert build_nets(SOLVER)[0].schema == "caffeonspark"
    plain = tmp_path / "plain.prototxt"
    plain.write_text('layer { name: "d" type: "MemoryData" top: "d" top: "l" '
                     'memory_data_param { batch_size: 2 channels: 3 height: 4 width: 4 } }\n')
    assert load(str(plain)).schema.name == "bvlc"


def test_the_resnet_110_audits_with_no_flags():
    """DataLayerSetUp (memory_data_layer.cpp:14-26) shapes the tops from memory_data_param alone, as
    BVLC's: data batch_size x channels x height x width = 16 x 3 x 32 x 32 in TRAIN, 1 x 3 x 32 x 32 in
    TEST, label (batch_size). share_in_parallel only says whether a non-root solver's net shares the
    layer with the root net's (memory_data_layer.hpp:30, net.cpp:76-78): one solver here.

    Parameters: conv_1 3 -> 16, 3x3: 16*3*9 + 16 = 448. Stage 0, 18 blocks of two 3x3 16 -> 16 convs:
    36 * (16*16*9 + 16) = 36 * 2,320 = 83,520. Stage 1: 16 -> 32 (32*16*9 + 32 = 4,640), a 1x1 projection
    16 -> 32 (32*16 + 32 = 544), then 35 convs 32 -> 32 of 32*32*9 + 32 = 9,248: 328,864. Stage 2: 32 -> 64
    (64*32*9 + 64 = 18,496), a projection 32 -> 64 (64*32 + 64 = 2,112), 35 convs of 64*64*9 + 64 = 36,928:
    1,313,088. fc 64*10 + 10 = 650. 37 Scales (with bias) on each width: 37 * 2 * (16 + 32 + 64) = 8,288.
    Trainable: 448 + 83,520 + 328,864 + 1,313,088 + 650 + 8,288 = 1,734,858. 37 BatchNorms on each width
    hold mean, variance (C each) and the scale factor (1), learning rate 0: 37 * (33 + 65 + 129) = 8,399.
    """
    r = run_in_process(NET)
    assert r.returncode == 0, r.stderr
    assert "Read with the caffe.proto of CaffeOnSpark's Caffe" in r.stdout
    assert "Params: 1,743,257 (trainable 1,734,858, non-trainable 8,399)" in r.stdout
    train, test = build_nets(SOLVER)[:2]
    assert tops(train, "data") == [(16, 3, 32, 32), (16,)]
    assert tops(test, "data") == [(1, 3, 32, 32), (1,)]
    assert run_in_process(SOLVER).returncode == 0
