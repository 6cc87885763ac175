"""Layers made alike share their touches and host objects (protoaudit.memory.alike): alike must
mean alike in everything a layer's buffers come from, and nothing else (not its names)."""
from conftest import build_text

from protoaudit.memory.alike import alike
from protoaudit.memory.buffers import net_buffers

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
    assert [node.bottom_need_backward for node in net.layers[1:3]] == [[False], [True]]


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
