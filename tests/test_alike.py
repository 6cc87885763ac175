"""Layers made alike share their touches and host objects (protoaudit.memory.alike): alike must
mean alike in everything a layer's buffers come from, and nothing else (not its names)."""
import os

import pytest

from conftest import CORPUS_AND_SAMPLES, audited, build_text, tops
from protoaudit.audit import split_at
from protoaudit.errors import InputError
from protoaudit.memory.alike import alike
from protoaudit.memory.buffers import net_buffers
from protoaudit.net.build import _Builder
from protoaudit.read import load

CONV = 'convolution_param {{ num_output: 3 kernel_size: {k} pad: {p} }}'
NET = """
layer {{ name: "data" type: "Input" top: "data" top: "target"
        input_param {{ shape {{ dim: 2 dim: 3 dim: 8 dim: 8 }} shape {{ dim: 2 dim: 3 dim: 4 dim: 4 }} }} }}
layer {{ name: "c1" type: "Convolution" bottom: "data" top: "x1" {k3} }}
layer {{ name: "c2" type: "Convolution" bottom: "x1" top: "x2" {k3} }}
layer {{ name: "a_longer_name_than_fifteen" type: "Convolution" bottom: "x2" top: "x3" {k3} }}
layer {{ name: "c4" type: "Convolution" bottom: "x3" top: "x4" {k5} }}
layer {{ name: "r1" type: "ReLU" bottom: "x4" top: "x4" }}
layer {{ name: "r2" type: "ReLU" bottom: "x4" top: "x5" }}
layer {{ name: "pool" type: "Pooling" bottom: "x5" top: "x6" pooling_param {{ pool: MAX kernel_size: 2 stride: 2 }} }}
layer {{ name: "c6" type: "Convolution" bottom: "x6" top: "x7" {k3} }}
layer {{ name: "loss" type: "EuclideanLoss" bottom: "x7" bottom: "target" top: "loss" }}
""".format(k3=CONV.format(k=3, p=1), k5=CONV.format(k=5, p=2))


def test_layers_differing_only_in_names_are_alike_and_no_others(tmp_path):
    net = build_text(tmp_path, NET)
    number = dict(zip((node.name for node in net.layers), alike(net)))
    assert number["c2"] == number["a_longer_name_than_fifteen"]  # names alone differ
    assert number["c1"] != number["c2"]  # c1's bottom (the input) takes no gradient
    assert number["c4"] != number["c2"]  # another kernel
    assert number["c6"] != number["c2"]  # another input shape
    assert number["r1"] != number["r2"]  # in place, or not
    assert len(set(number.values())) == len(number) - 1
    assert [list(node.bottom_need_backward) for node in net.layers[1:3]] == [[False], [True]]


def test_alike_layers_get_their_own_buffers_of_the_same_sizes(tmp_path):
    net = build_text(tmp_path, NET)
    buffers = net_buffers(net, mode="gpu")

    def private(layer):
        return {(b.owner.split(".", 1)[1], b.touch): b.bytes for b in buffers
                if b.layer == layer and b.kind == "layer buffer"}

    # im2col of one image: C_in x kernel x output (conv_layer.cpp, base_conv_layer.cpp:100-105)
    # and bias_multiplier_, the output's spatial size (base_conv_layer.cpp:181-185)
    def conv(kernel, spatial):
        return {("col_buffer_", "forward"): 4 * 3 * kernel * spatial, ("bias_multiplier_", "setup"): 4 * spatial}

    assert private("c2") == private("a_longer_name_than_fifteen") == conv(9, 64)
    assert private("c4") == conv(25, 64)
    assert private("c6") == conv(9, 16)
    assert {b.owner for b in buffers if b.layer == "a_longer_name_than_fifteen"} >= {
        "a_longer_name_than_fifteen.col_buffer_", "a_longer_name_than_fifteen.param0", "x3"}


def _audited_fully(path, batch):
    """Everything an audit (and split_at at `batch`, from the net made again) makes of a file:
    each net's layers (shapes, parameter shapes), its buffers, the totals; None where it refuses."""
    first = audited(path)
    if first is None:
        return None
    nets = [(n.role, [(node.name, node.bottom_shapes, node.top_shapes, [p.shape for p in node.params],
                       node.need_backward) for node in n.net.layers], n.buffers) for n in first.nets]
    again = split_at(first, batch(first)) if first.batch is not None and first.train is not None else None
    return first.total_bytes, nets, again


@pytest.mark.parametrize("path", CORPUS_AND_SAMPLES, ids=os.path.basename)
def test_layers_made_once_per_likeness_audit_as_layers_made_one_by_one(path, monkeypatch):
    """The net builder makes one layer object per likeness (_Builder._alike_key), in a build and in
    a net made again at another batch; made one by one instead, every layer, buffer and total
    of the audit, and the search's sums at another batch, come out the same."""
    batch = lambda audit: 2 * audit.batch + 1  # noqa: E731
    once = _audited_fully(path, batch)
    if once is None:
        pytest.skip("refused with no flags")
    monkeypatch.setattr(_Builder, "_alike_key", lambda *args: None)
    load.READINGS.clear()
    assert _audited_fully(path, batch) == once


# Layers alike in class, form and bottoms' shapes, that a layer object made once must not serve
# (_Builder._alike_key): each net's first layer of the pair is made, and the second must come out
# as it would alone.
INPUT = 'layer {{ name: "data" type: "Input" top: "x" top: "label" input_param {{ {} }} }}\n'


def test_a_layer_naming_more_tops_is_made_for_them(tmp_path):
    """pooling_layer.cpp Reshape: (N, C, ceil((H + 2 pad - k) / stride) + 1, likewise W); a MAX
    pooling's second top, the mask, is reshaped like the first."""
    pool = 'pooling_param { pool: MAX kernel_size: 2 stride: 2 }'
    net = build_text(tmp_path, INPUT.format("shape { dim: 1 dim: 1 dim: 4 dim: 4 } shape { dim: 1 }")
                     + f'layer {{ name: "p1" type: "Pooling" bottom: "x" top: "a" {pool} }}\n'
                     f'layer {{ name: "p2" type: "Pooling" bottom: "x" top: "b" top: "mask" {pool} }}\n')
    assert tops(net, "p1") == [(1, 1, 2, 2)]
    assert tops(net, "p2") == [(1, 1, 2, 2), (1, 1, 2, 2)]


def test_a_layer_in_place_is_refused_where_caffe_refuses_it(tmp_path):
    """absval_layer.cpp LayerSetUp: CHECK_NE(top[0], bottom[0]), 'does not allow in-place computation'."""
    with pytest.raises(InputError, match="a2.*in-place"):
        build_text(tmp_path, INPUT.format("shape { dim: 2 dim: 3 } shape { dim: 2 dim: 3 }")
                   + 'layer { name: "a1" type: "AbsVal" bottom: "x" top: "y" }\n'
                   'layer { name: "a2" type: "AbsVal" bottom: "y" top: "y" }\n'
                   'layer { name: "a3" type: "AbsVal" bottom: "label" top: "z" }\n')


def test_data_sources_alike_take_their_own_declared_shapes(tmp_path):
    """Two Input layers of one shape, the second's top declared (--input): it takes the declaration whole."""
    net = build_text(tmp_path, 'layer { name: "i1" type: "Input" top: "a" input_param { shape { dim: 1 dim: 3 } } }\n'
                     'layer { name: "i2" type: "Input" top: "b" input_param { shape { dim: 1 dim: 3 } } }\n',
                     inputs={"b": (4, 3)})
    assert (tops(net, "i1"), tops(net, "i2")) == ([(1, 3)], [(4, 3)])


def test_declared_layers_alike_take_their_own_declared_shapes(tmp_path):
    """Two Python layers of one module and class, each top declared (--input) with its own shape."""
    net = build_text(tmp_path, INPUT.format("shape { dim: 2 dim: 3 } shape { dim: 2 }")
                     + 'layer { name: "p1" type: "Python" bottom: "x" top: "a" python_param { module: "m" layer: "L" } }\n'
                     'layer { name: "p2" type: "Python" bottom: "x" top: "b" python_param { module: "m" layer: "L" } }\n',
                     inputs={"a": (2, 7), "b": (5, 3)})
    assert (tops(net, "p1"), tops(net, "p2")) == ([(2, 7)], [(5, 3)])


def test_layers_reading_a_define_each_note_what_they_assume(tmp_path):
    """SSD's DetectionOutput keeps at most every prior of every class (--define detections=K says
    how many): each such layer says so. Priors: bottom 2 is (1, 2, 4 x 4) for 4 priors; 4 x 1
    shared location x 4 = 16 location predictions, 4 x 2 classes = 8 confidences."""
    output = ('layer {{ name: "{0}" type: "DetectionOutput" bottom: "loc" bottom: "conf" bottom: "priors" top: "{0}" '
              'detection_output_param {{ num_classes: 2 share_location: true nms_param {{ nms_threshold: 0.45 }} }} }}\n')
    net = build_text(tmp_path, 'layer { name: "in" type: "Input" top: "loc" top: "conf" top: "priors" input_param {'
                     ' shape { dim: 1 dim: 16 } shape { dim: 1 dim: 8 } shape { dim: 1 dim: 2 dim: 16 } } }\n'
                     + output.format("d1") + output.format("d2"))
    assert [a.layer for a in net.assumptions] == ["d1", "d2"]
