"""DeconvNet's Caffe (HyeonwooNoh/caffe, d9e8494): its V1 schema, BN and UNPOOLING held against its source.

Expected values are derived by hand below from that commit's src/caffe/layers/unpooling_layer.cpp/.cu,
bn_layer.cpp and layer_factory.cpp, cited by line; the net is HyeonwooNoh/DeconvNet's own
(tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text as build, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

NET = os.path.join(DATA, "forks", "deconvnet_inference_deploy.prototxt")
F = 4  # bytes per float


def test_deconvnet_is_read_with_its_v1_schema():
    assert load(NET).schema.name == "deconvnet"


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "deconvnet.proto")).read()
    assert text.startswith("// HyeonwooNoh/caffe (branch master, the Caffe HyeonwooNoh/DeconvNet builds), "
                           "src/caffe/proto/caffe.proto at commit d9e8494a2832d67b25dee37194c7bcb9d52d0e42")
    assert "BN = 43;" in text and "UNPOOLING = 42;" in text


def test_the_net_unpools_through_its_pooling_masks():
    """pool5 (MAX, 2 tops: the data and BVLC's argmax mask) halves 14x14 to 7x7; fc6-deconv
    brings it back to 7x7; unpool5's unpool_size 14 gives (1, 512, 14, 14) (unpooling_layer.cpp:72-77,
    99-100). The V1 BN and UNPOOLING layers are the fork's BN and Unpooling (bn_layer.cpp:419,
    layer_factory.cpp:65-78)."""
    net = build_nets(NET)[0]
    assert tops(net, "pool5") == [(1, 512, 7, 7), (1, 512, 7, 7)]
    assert net.layer("unpool5").type == "Unpooling" and tops(net, "unpool5") == [(1, 512, 14, 14)]
    assert net.layer("debn5_1").type == "BN"
    assert [p.shape for p in net.layer("debn5_1").params] == [(1, 512, 1, 1)] * 2  # bn_layer.cpp:81-90


HEAD = """name: "u"
input: "x" input_dim: 2 input_dim: 3 input_dim: 6 input_dim: 6
force_backward: true
layers { name: "pool" type: POOLING bottom: "x" top: "p" top: "mask"
         pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
"""


def unpool(params):
    return HEAD + f'layers {{ name: "up" type: UNPOOLING bottom: "p" bottom: "mask" top: "up" unpooling_param {{ {params} }} }}'


@pytest.mark.parametrize("params, size", [
    ("unpool: MAX kernel_size: 2 stride: 2 unpool_size: 6", (6, 6)),
    ("unpool: MAX kernel_size: 2 stride: 2 unpool_h: 7 unpool_w: 5", (7, 5)),  # cpp:74-77
])
def test_unpooling_top_is_the_size_it_is_given(tmp_path, params, size):
    assert tops(build(tmp_path, unpool(params)), "up") == [(2, 3) + size]


@pytest.mark.parametrize("params, message", [
    ("kernel_size: 2 stride: 2", "Unpool is unpool_size OR unpool_h and unpool_w"),  # cpp:35-39
    ("kernel_size: 2 stride: 2 pad: 1 unpool_size: 6", "only zero padding"),  # cpp:56-57
    ("kernel_size: 2 kernel_h: 2 kernel_w: 2 unpool_size: 6", "kernel_size OR kernel_h and kernel_w"),  # cpp:21-23
])
def test_unpooling_refuses_what_the_fork_checks(tmp_path, params, message):
    with pytest.raises(InputError, match=message):
        build(tmp_path, unpool(params))


def test_unpooling_keeps_no_buffer_and_gives_the_mask_no_diff(tmp_path):
    """Forward writes the top (cu:113-114); backward (cu:245-253) writes bottom 0's diff only, so
    what the layer first touches is its top's data and diff (2x3x6x6 each) and the pooled data's
    diff (2x3x3x3), never the mask's."""
    net = build(tmp_path, unpool("kernel_size: 2 stride: 2 unpool_size: 6"))
    got = {(b.owner, b.kind): b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "up"}
    assert got == {("up", "top data"): 216 * F, ("up", "top diff"): 216 * F, ("p", "top diff"): 54 * F}
    assert not [b for b in net_buffers(net, mode="gpu") if b.owner == "mask" and b.kind == "top diff"]
