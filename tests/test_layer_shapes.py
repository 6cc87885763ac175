"""Every layer type BVLC Caffe master registers: its top shapes, its parameter blob shapes and the
CHECKs that refuse a bad net, on tiny nets written here.

Every expected shape is derived by hand in the test from the arithmetic of the layer's source in
BVLC master (src/caffe/layers/<name>_layer.cpp), never taken from protoaudit's output.
"""
import pytest

from protoaudit import InputError, audit, build_nets
from protoaudit.cli import main
from protoaudit.layers.base import REGISTRY

# REGISTER_LAYER_CLASS / REGISTER_LAYER_CREATOR in BVLC master's src/caffe (61 names).
BVLC_TYPES = """
AbsVal Accuracy ArgMax BNLL BatchNorm BatchReindex Bias Clip Concat ContrastiveLoss Convolution Crop
Data Deconvolution Dropout DummyData ELU Eltwise Embed EuclideanLoss Exp Filter Flatten HDF5Data
HDF5Output HingeLoss Im2col ImageData InfogainLoss InnerProduct Input LRN LSTM LSTMUnit Log MVN
MemoryData MultinomialLogisticLoss PReLU Parameter Pooling Power Python RNN ReLU Reduction Reshape
SPP Scale Sigmoid SigmoidCrossEntropyLoss Silence Slice Softmax SoftmaxWithLoss Split Swish TanH
Threshold Tile WindowData
""".split()


def test_every_bvlc_type_is_registered():
    assert len(BVLC_TYPES) == len(set(BVLC_TYPES)) == 61
    assert [t for t in BVLC_TYPES if t not in REGISTRY] == []


# --- building tiny nets ----------------------------------------------------------------------------
def inp(name, *dims):
    """An Input layer making one top of the given shape."""
    d = " ".join(f"dim: {x}" for x in dims)
    return f'layer {{ name: "{name}" type: "Input" top: "{name}" input_param {{ shape {{ {d} }} }} }}\n'


def layer(name, type_, bottoms=(), tops=None, body=""):
    tops = [name] if tops is None else tops
    text = f'layer {{ name: "{name}" type: "{type_}" '
    text += "".join(f'bottom: "{b}" ' for b in bottoms)
    text += "".join(f'top: "{t}" ' for t in tops)
    return text + body + " }\n"


@pytest.fixture
def build(tmp_path):
    """build(text, **options) -> the first net the text stands for (Caffe's TRAIN net)."""

    def run(text, **options):
        path = tmp_path / "net.prototxt"
        path.write_text('name: "t"\n' + text)
        return build_nets(str(path), **options)[0]

    return run


def tops(net, name):
    return list(net.layer(name).top_shapes)


def params(net, name):
    return [p.shape for p in net.layer(name).params]


def refused(build, text, *words, **options):
    """The net is refused with an InputError naming the layer and saying each of `words`."""
    with pytest.raises(InputError) as e:
        build(text, **options)
    message = str(e.value)
    for word in words:
        assert word in message, message
    return message


# --- neuron layers -----------------------------------------------------------------------------------
NEURONS = {
    "ReLU": "", "Sigmoid": "", "TanH": "", "AbsVal": "", "BNLL": "", "ELU": "", "Exp": "", "Log": "",
    "Power": "", "Threshold": "", "Swish": "", "Dropout": "", "Clip": "clip_param { min: 0 max: 6 }",
}


@pytest.mark.parametrize("type_", sorted(NEURONS))
def test_neuron_layers_keep_the_shape(build, type_):
    net = build(inp("data", 2, 3, 4, 5) + layer("act", type_, ["data"], body=NEURONS[type_]))
    assert tops(net, "act") == [(2, 3, 4, 5)]
    assert params(net, "act") == []


def test_neuron_layers_work_in_place_except_absval(build):
    net = build(inp("data", 2, 3) + layer("relu", "ReLU", ["data"], ["data"]))
    assert tops(net, "relu") == [(2, 3)]
    refused(build, inp("data", 2, 3) + layer("abs", "AbsVal", ["data"], ["data"]), "abs", "in-place")


def test_exp_and_log_refuse_a_bad_base(build):
    refused(build, inp("data", 2) + layer("e", "Exp", ["data"], body="exp_param { base: -2 }"), "base")
    refused(build, inp("data", 2) + layer("l", "Log", ["data"], body="log_param { base: 1 }"), "base")
    net = build(inp("data", 2) + layer("l", "Log", ["data"], body="log_param { base: 10 }"))
    assert tops(net, "l") == [(2,)]


def test_prelu_slopes(build):
    net = build(inp("data", 2, 3, 4, 5) + layer("p", "PReLU", ["data"]))
    assert tops(net, "p") == [(2, 3, 4, 5)]
    assert params(net, "p") == [(3,)]  # one slope per channel
    net = build(inp("data", 2, 3, 4, 5) + layer("p", "PReLU", ["data"], body="prelu_param { channel_shared: true }"))
    assert params(net, "p") == [()]  # a shared slope is a 0-axis blob: vector<int>(0)
    refused(build, inp("data", 7) + layer("p", "PReLU", ["data"]), "2 axes")


# --- convolution ---------------------------------------------------------------------------------
def conv(name, bottom, body, type_="Convolution", tops=None):
    return layer(name, type_, [bottom], tops, f"convolution_param {{ {body} }}")


def test_convolution_2d(build):
    net = build(inp("data", 2, 3, 227, 227) + conv("c", "data", "num_output: 96 kernel_size: 11 stride: 4"))
    # (227 + 2*0 - 11) / 4 + 1 = 55
    assert tops(net, "c") == [(2, 96, 55, 55)]
    assert params(net, "c") == [(96, 3, 11, 11), (96,)]


def test_convolution_h_w_forms(build):
    body = "num_output: 8 kernel_h: 3 kernel_w: 5 pad_h: 1 pad_w: 2 stride_h: 2 stride_w: 3"
    net = build(inp("data", 1, 4, 10, 12) + conv("c", "data", body))
    # H: (10 + 2*1 - 3) / 2 + 1 = 9/2 + 1 = 5;  W: (12 + 2*2 - 5) / 3 + 1 = 11/3 + 1 = 4
    assert tops(net, "c") == [(1, 8, 5, 4)]
    assert params(net, "c") == [(8, 4, 3, 5), (8,)]


def test_convolution_dilation_group_and_no_bias(build):
    body = "num_output: 6 kernel_size: 3 dilation: 2 group: 2 bias_term: false"
    net = build(inp("data", 1, 4, 9, 9) + conv("c", "data", body))
    # kernel extent 2*(3-1)+1 = 5: (9 - 5) / 1 + 1 = 5; weight (6, 4/2, 3, 3)
    assert tops(net, "c") == [(1, 6, 5, 5)]
    assert params(net, "c") == [(6, 2, 3, 3)]


def test_convolution_nd_with_per_axis_kernel(build):
    body = "num_output: 4 kernel_size: 3 kernel_size: 1 kernel_size: 2 stride: 2"
    net = build(inp("data", 1, 2, 5, 6, 7) + conv("c", "data", body))
    # D: (5-3)/2+1 = 2;  H: (6-1)/2+1 = 5/2+1 = 3;  W: (7-2)/2+1 = 5/2+1 = 3
    assert tops(net, "c") == [(1, 4, 2, 3, 3)]
    assert params(net, "c") == [(4, 2, 3, 1, 2), (4,)]


def test_convolution_axis(build):
    net = build(inp("data", 2, 5, 3, 8) + conv("c", "data", "num_output: 4 kernel_size: 3 axis: 2"))
    # channel axis 2 (3 channels), one spatial axis: (8 - 3) + 1 = 6; axes before the channel axis kept
    assert tops(net, "c") == [(2, 5, 4, 6)]
    assert params(net, "c") == [(4, 3, 3), (4,)]


def test_convolution_division_truncates_toward_zero(build):
    net = build(inp("data", 1, 1, 2, 2) + conv("c", "data", "num_output: 1 kernel_size: 3 stride: 2"))
    # (2 - 3) / 2 = -1/2, which C++ truncates to 0; + 1 = 1
    assert tops(net, "c") == [(1, 1, 1, 1)]


def test_convolution_one_top_per_bottom(build):
    text = inp("a", 1, 2, 5, 5) + inp("b", 1, 2, 5, 5)
    text += layer("c", "Convolution", ["a", "b"], ["ca", "cb"], "convolution_param { num_output: 3 kernel_size: 3 }")
    assert tops(build(text), "c") == [(1, 3, 3, 3), (1, 3, 3, 3)]


def test_convolution_checks(build):
    data = inp("data", 1, 4, 8, 8)
    refused(build, data + conv("c", "data", "num_output: 6 kernel_size: 3 group: 4"), "group")
    refused(build, data + conv("c", "data", "num_output: 6 kernel_size: 3 group: 3"), "group")
    refused(build, data + conv("c", "data", "num_output: 6 kernel_size: 3 kernel_h: 3 kernel_w: 3"), "not both")
    refused(build, data + conv("c", "data", "kernel_size: 3"), "num_output")
    refused(build, data + conv("c", "data", "num_output: 2 kernel_size: 3 kernel_size: 3 kernel_size: 3"),
            "kernel_size")


def test_deconvolution(build):
    net = build(inp("data", 1, 4, 5, 5) + conv("d", "data", "num_output: 6 kernel_size: 4 stride: 2 pad: 1 group: 2",
                                               type_="Deconvolution"))
    # 2 * (5 - 1) + 4 - 2*1 = 10; weight (C_in, num_output / group, k, k) = (4, 3, 4, 4)
    assert tops(net, "d") == [(1, 6, 10, 10)]
    assert params(net, "d") == [(4, 3, 4, 4), (6,)]
    net = build(inp("data", 1, 2, 5, 5) + conv("d", "data", "num_output: 2 kernel_size: 3 dilation: 2",
                                               type_="Deconvolution"))
    # 1 * (5 - 1) + (2*(3-1)+1) - 0 = 9
    assert tops(net, "d") == [(1, 2, 9, 9)]


def test_im2col(build):
    net = build(inp("data", 2, 3, 6, 6) + conv("i", "data", "kernel_size: 3", type_="Im2col"))
    # channels 3 * 3*3 = 27; (6 - 3) / 1 + 1 = 4
    assert tops(net, "i") == [(2, 27, 4, 4)]
    assert params(net, "i") == []


# --- pooling -----------------------------------------------------------------------------------------
def pool(name, bottom, body, tops=None):
    return layer(name, "Pooling", [bottom], tops, f"pooling_param {{ {body} }}")


def test_pooling_rounds_up(build):
    net = build(inp("data", 1, 1, 6, 6) + pool("p", "data", "pool: MAX kernel_size: 3 stride: 2"))
    # ceil((6 - 3) / 2) + 1 = ceil(1.5) + 1 = 3
    assert tops(net, "p") == [(1, 1, 3, 3)]
    net = build(inp("data", 1, 1, 6, 6) + pool("p", "data", "pool: MAX kernel_size: 3 stride: 2 round_mode: FLOOR"))
    # floor(1.5) + 1 = 2
    assert tops(net, "p") == [(1, 1, 2, 2)]


def test_pooling_pad_clip_rule(build):
    net = build(inp("data", 1, 1, 5, 5) + pool("p", "data", "pool: AVE kernel_size: 2 stride: 2 pad: 1"))
    # ceil((5 + 2 - 2) / 2) + 1 = ceil(2.5) + 1 = 4; the last window would start at (4-1)*2 = 6 >= 5 + 1,
    # inside the padding, so it is clipped: 3
    assert tops(net, "p") == [(1, 1, 3, 3)]


def test_pooling_h_w_forms(build):
    body = "pool: MAX kernel_h: 3 kernel_w: 2 stride_h: 3 stride_w: 2"
    net = build(inp("data", 1, 1, 10, 7) + pool("p", "data", body))
    # H: ceil((10 - 3) / 3) + 1 = ceil(2.33) + 1 = 4;  W: ceil((7 - 2) / 2) + 1 = ceil(2.5) + 1 = 4
    assert tops(net, "p") == [(1, 1, 4, 4)]


def test_global_pooling_and_the_mask_top(build):
    net = build(inp("data", 2, 8, 7, 9) + pool("p", "data", "pool: AVE global_pooling: true"))
    assert tops(net, "p") == [(2, 8, 1, 1)]  # the kernel is the whole 7x9 image
    net = build(inp("data", 1, 2, 4, 4) + pool("p", "data", "pool: MAX kernel_size: 2 stride: 2", ["p", "mask"]))
    assert tops(net, "p") == [(1, 2, 2, 2), (1, 2, 2, 2)]  # MAX may output its argmax mask
    refused(build, inp("data", 1, 2, 4, 4) + pool("p", "data", "pool: AVE kernel_size: 2", ["p", "mask"]),
            "at most 1")


def test_pooling_checks(build):
    data = inp("data", 1, 1, 8, 8)
    refused(build, data + pool("p", "data", "kernel_size: 2 pad: 2"), "pad")
    refused(build, data + pool("p", "data", "global_pooling: true kernel_size: 2"), "global_pooling")
    refused(build, data + pool("p", "data", "kernel_size: 3 pad_h: 1"), "pad_h and pad_w")
    refused(build, data + pool("p", "data", "kernel_size: 3 kernel_h: 3 kernel_w: 3"), "not both")
    refused(build, data + pool("p", "data", "pool: STOCHASTIC kernel_size: 3 pad: 1"), "average and max")
    refused(build, inp("data", 8, 8) + pool("p", "data", "kernel_size: 2"), "4-axis")


def test_spp(build):
    net = build(inp("data", 2, 4, 7, 9) + layer("s", "SPP", ["data"], body="spp_param { pyramid_height: 2 }"))
    # level 0: one bin, kernel = the image, pad 0 -> 1x1.
    # level 1: 2 bins. H: kernel ceil(7/2) = 4, pad (4*2 - 7 + 1)/2 = 1, ceil((7+2-4)/4)+1 = 3, and
    #   (3-1)*4 = 8 >= 7+1 clips it to 2.  W: kernel 5, pad (10-9+1)/2 = 1, ceil((9+2-5)/5)+1 = 3, (3-1)*5 = 10
    #   >= 9+1 clips it to 2.  Flattened and concatenated: 4*1*1 + 4*2*2 = 20
    assert tops(net, "s") == [(2, 20)]
    net = build(inp("data", 2, 4, 7, 9) + layer("s", "SPP", ["data"], body="spp_param { pyramid_height: 1 }"))
    assert tops(net, "s") == [(2, 4, 1, 1)]  # a single Pooling layer straight into the top
    # level 2 of a 5x5 image: kernel ceil(5/4) = 2, pad (2*4 - 5 + 1)/2 = 2, not smaller than the kernel
    refused(build, inp("data", 1, 1, 5, 5) + layer("s", "SPP", ["data"], body="spp_param { pyramid_height: 3 }"),
            "pad")


# --- dense -------------------------------------------------------------------------------------------
def ip(name, bottom, body):
    return layer(name, "InnerProduct", [bottom], None, f"inner_product_param {{ {body} }}")


def test_inner_product(build):
    data = inp("data", 2, 3, 4, 5)
    net = build(data + ip("fc", "data", "num_output: 10"))
    assert tops(net, "fc") == [(2, 10)]
    assert params(net, "fc") == [(10, 60), (10,)]  # K = 3*4*5
    net = build(data + ip("fc", "data", "num_output: 10 axis: 2 bias_term: false"))
    assert tops(net, "fc") == [(2, 3, 10)]
    assert params(net, "fc") == [(10, 20)]  # K = 4*5
    net = build(data + ip("fc", "data", "num_output: 10 transpose: true"))
    assert params(net, "fc") == [(60, 10), (10,)]  # K x N when transposed
    net = build(data + ip("fc", "data", "num_output: 7 axis: -1"))
    assert tops(net, "fc") == [(2, 3, 4, 7)]
    assert params(net, "fc") == [(7, 5), (7,)]
    refused(build, data + ip("fc", "data", "axis: 4 num_output: 1"), "axis 4")


def test_embed(build):
    net = build(inp("words", 2, 5) + layer("e", "Embed", ["words"], body="embed_param { num_output: 8 input_dim: 100 }"))
    assert tops(net, "e") == [(2, 5, 8)]  # one num_output vector per index
    assert params(net, "e") == [(100, 8), (8,)]  # input_dim x num_output
    refused(build, inp("words", 2) + layer("e", "Embed", ["words"], body="embed_param { num_output: 8 }"), "input_dim")


# --- structure -----------------------------------------------------------------------------------------
def test_concat(build):
    net = build(inp("a", 2, 3, 4, 4) + inp("b", 2, 5, 4, 4) + layer("c", "Concat", ["a", "b"]))
    assert tops(net, "c") == [(2, 8, 4, 4)]  # default axis 1: 3 + 5
    net = build(inp("a", 2, 3, 4, 4) + inp("b", 2, 3, 6, 4)
                + layer("c", "Concat", ["a", "b"], body="concat_param { axis: -2 }"))
    assert tops(net, "c") == [(2, 3, 10, 4)]
    net = build(inp("a", 2, 3, 4, 4) + inp("b", 1, 3, 4, 4)
                + layer("c", "Concat", ["a", "b"], body="concat_param { concat_dim: 0 }"))
    assert tops(net, "c") == [(3, 3, 4, 4)]  # legacy concat_dim


def test_concat_checks(build):
    two = inp("a", 2, 3, 4, 4) + inp("b", 2, 3, 5, 4)
    refused(build, two + layer("c", "Concat", ["a", "b"]), "same shape except")
    refused(build, two + layer("c", "Concat", ["a", "b"], body="concat_param { axis: 2 concat_dim: 2 }"), "not both")
    refused(build, inp("a", 2, 3) + inp("b", 2, 3, 1) + layer("c", "Concat", ["a", "b"]), "number of axes")


def test_slice(build):
    data = inp("data", 2, 9, 4)
    net = build(data + layer("s", "Slice", ["data"], ["x", "y", "z"], "slice_param { slice_point: 2 slice_point: 5 }"))
    assert tops(net, "s") == [(2, 2, 4), (2, 3, 4), (2, 4, 4)]  # 2-0, 5-2, 9-5
    net = build(data + layer("s", "Slice", ["data"], ["x", "y", "z"]))
    assert tops(net, "s") == [(2, 3, 4)] * 3  # 9 / 3 tops
    net = build(data + layer("s", "Slice", ["data"], ["x", "y"], "slice_param { slice_dim: 2 }"))
    assert tops(net, "s") == [(2, 9, 2)] * 2  # legacy slice_dim
    net = build(data + layer("s", "Slice", ["data"], ["x", "y"], "slice_param { slice_point: 9 }"))
    assert tops(net, "s") == [(2, 9, 4), (2, 0, 4)]  # Caffe lets the last slice be empty


@pytest.mark.parametrize("join", [layer("c", "Concat", ["data"], ["data"]), layer("s", "Slice", ["data"], ["data"])],
                         ids=["Concat", "Slice"])
def test_one_bottom_concat_or_one_top_slice_in_place(tmp_path, join):
    """With one bottom (Concat) or one top (Slice) the top shares the bottom's data and diff
    (concat_layer.cpp:50-52, slice_layer.cpp:71-73); named in place, the blob shares with itself,
    which changes nothing. The audit once went round that share forever (found by
    tests/fuzz_corpus.py); the net is one 2x3x4x4 blob, its data counted once."""
    path = tmp_path / "net.prototxt"
    path.write_text('name: "t"\n' + inp("data", 2, 3, 4, 4) + join
                    + layer("loss", "EuclideanLoss", ["data", "data"]))
    result = audit(str(path), solver_type="none")
    assert list(result.nets[0].net.layer(join.split('"')[1]).top_shapes) == [(2, 3, 4, 4)]
    data = [b for b in result.nets[0].buffers if b.kind == "top data" and b.owner == "data"]
    assert [b.elements for b in data] == [2 * 3 * 4 * 4]


def test_slice_checks(build):
    data = inp("data", 2, 9, 4)
    refused(build, data + layer("s", "Slice", ["data"], ["x", "y"]), "equal parts")  # 9 % 2 != 0
    refused(build, data + layer("s", "Slice", ["data"], ["x", "y"], "slice_param { slice_point: 2 slice_point: 5 }"),
            "slice points")
    refused(build, data + layer("s", "Slice", ["data"], ["x", "y", "z"], "slice_param { slice_point: 5 slice_point: 2 }"),
            "increase")
    refused(build, data + layer("s", "Slice", ["data"], ["x", "y"], "slice_param { axis: 1 slice_dim: 1 }"), "not both")


def test_eltwise(build):
    two = inp("a", 2, 3, 4) + inp("b", 2, 3, 4)
    net = build(two + layer("e", "Eltwise", ["a", "b"], body="eltwise_param { operation: SUM coeff: 1 coeff: -1 }"))
    assert tops(net, "e") == [(2, 3, 4)]
    net = build(two + layer("e", "Eltwise", ["a", "b"], body="eltwise_param { operation: MAX }"))
    assert tops(net, "e") == [(2, 3, 4)]
    refused(build, inp("a", 2, 3, 4) + inp("b", 2, 4, 3) + layer("e", "Eltwise", ["a", "b"]), "bottom 1", "(2, 4, 3)")
    refused(build, two + layer("e", "Eltwise", ["a", "b"], body="eltwise_param { coeff: 1 }"), "coefficient")
    refused(build, two + layer("e", "Eltwise", ["a", "b"], body="eltwise_param { operation: PROD coeff: 1 coeff: 1 }"),
            "PROD")
    refused(build, inp("a", 2) + layer("e", "Eltwise", ["a"]), "at least 2")


def reshape(dims, extra=""):
    d = " ".join(f"dim: {x}" for x in dims)
    return f"reshape_param {{ shape {{ {d} }} {extra} }}"


def test_reshape(build):
    data = inp("data", 2, 3, 4, 5)  # 120 elements
    net = build(data + layer("r", "Reshape", ["data"], body=reshape([0, -1])))
    assert tops(net, "r") == [(2, 60)]  # 0 copies axis 0; -1 is 120 / 2
    net = build(data + layer("r", "Reshape", ["data"], body=reshape([0, 0, -1, 2])))
    assert tops(net, "r") == [(2, 3, 10, 2)]  # -1 is 120 / (2*3*2)
    net = build(data + layer("r", "Reshape", ["data"], body=reshape([-1], "axis: 1 num_axes: 2")))
    assert tops(net, "r") == [(2, 12, 5)]  # axes 1 and 2 (3*4) replaced
    net = build(data + layer("r", "Reshape", ["data"], body=reshape([1], "axis: -1 num_axes: 0")))
    assert tops(net, "r") == [(2, 3, 4, 5, 1)]  # axis -1 inserts after the last axis


def test_reshape_checks(build):
    data = inp("data", 2, 3, 4, 5)
    refused(build, data + layer("r", "Reshape", ["data"], body=reshape([7, -1])), "120")
    refused(build, data + layer("r", "Reshape", ["data"], body=reshape([-1, -1])), "-1")
    refused(build, data + layer("r", "Reshape", ["data"], body=reshape([2, 50])), "must match")
    refused(build, data + layer("r", "Reshape", ["data"], ["data"], reshape([2, 60])), "in-place")


def test_flatten(build):
    data = inp("data", 2, 3, 4, 5)
    assert tops(build(data + layer("f", "Flatten", ["data"])), "f") == [(2, 60)]
    net = build(data + layer("f", "Flatten", ["data"], body="flatten_param { axis: 2 }"))
    assert tops(net, "f") == [(2, 3, 20)]
    net = build(data + layer("f", "Flatten", ["data"], body="flatten_param { axis: 1 end_axis: 2 }"))
    assert tops(net, "f") == [(2, 12, 5)]
    refused(build, data + layer("f", "Flatten", ["data"], ["data"]), "in-place")


def test_crop(build):
    two = inp("big", 1, 3, 10, 12) + inp("small", 1, 3, 6, 8)
    net = build(two + layer("c", "Crop", ["big", "small"], body="crop_param { axis: 2 offset: 2 offset: 3 }"))
    assert tops(net, "c") == [(1, 3, 6, 8)]  # 10-2 >= 6 and 12-3 >= 8
    net = build(inp("big", 2, 3, 10, 12) + inp("small", 1, 1, 6, 8, 7) + layer("c", "Crop", ["big", "small"]))
    assert tops(net, "c") == [(2, 3, 6, 8)]  # default axis 2 on: bottom 1's sizes; its extra axis is not read
    refused(build, two + layer("c", "Crop", ["big", "small"], body="crop_param { axis: 2 offset: 5 }"), "axis 2")
    refused(build, two + layer("c", "Crop", ["big", "small"], body="crop_param { offset: 0 offset: 0 offset: 0 }"), "offset")


def test_tile(build):
    net = build(inp("data", 2, 3, 4) + layer("t", "Tile", ["data"], body="tile_param { tiles: 3 }"))
    assert tops(net, "t") == [(2, 9, 4)]
    net = build(inp("data", 2, 3, 4) + layer("t", "Tile", ["data"], body="tile_param { axis: -1 tiles: 2 }"))
    assert tops(net, "t") == [(2, 3, 8)]
    refused(build, inp("data", 2, 3, 4) + layer("t", "Tile", ["data"]), "tiles")


def test_reduction(build):
    data = inp("data", 2, 3, 4)
    assert tops(build(data + layer("r", "Reduction", ["data"])), "r") == [()]  # default axis 0: a scalar
    net = build(data + layer("r", "Reduction", ["data"], body="reduction_param { operation: MEAN axis: 1 }"))
    assert tops(net, "r") == [(2,)]
    net = build(data + layer("r", "Reduction", ["data"], body="reduction_param { axis: -1 }"))
    assert tops(net, "r") == [(2, 3)]


def test_argmax(build):
    data = inp("data", 2, 10)
    # without axis: max(2 axes, 3) axes of 1s, then (N, 1 or 2 with out_max_val, top_k)
    assert tops(build(data + layer("a", "ArgMax", ["data"])), "a") == [(2, 1, 1)]
    net = build(data + layer("a", "ArgMax", ["data"], body="argmax_param { top_k: 3 out_max_val: true }"))
    assert tops(net, "a") == [(2, 2, 3)]
    net = build(inp("data", 2, 10, 4) + layer("a", "ArgMax", ["data"], body="argmax_param { axis: 1 top_k: 2 }"))
    assert tops(net, "a") == [(2, 2, 4)]
    refused(build, data + layer("a", "ArgMax", ["data"], body="argmax_param { top_k: 11 }"), "top_k")


def test_filter_counts_the_worst_case(build):
    text = inp("data", 6, 3, 4) + inp("label", 6) + inp("keep", 6, 1)
    net = build(text + layer("f", "Filter", ["data", "label", "keep"], ["fd", "fl"]))
    # which items pass is known only at run time; the first Reshape keeps them all
    assert tops(net, "f") == [(6, 3, 4), (6,)]
    text = inp("data", 6, 3, 4) + inp("keep", 6, 2)
    refused(build, text + layer("f", "Filter", ["data", "keep"], ["fd"]), "singleton")


def test_batch_reindex(build):
    net = build(inp("data", 5, 3, 4) + inp("idx", 7) + layer("b", "BatchReindex", ["data", "idx"]))
    assert tops(net, "b") == [(7, 3, 4)]  # one item per index
    refused(build, inp("data", 5, 3) + inp("idx", 7, 1) + layer("b", "BatchReindex", ["data", "idx"]), "one axis")


def test_parameter(build):
    net = build(layer("p", "Parameter", body="parameter_param { shape { dim: 3 dim: 4 } }"))
    assert tops(net, "p") == [(3, 4)]
    assert params(net, "p") == [(3, 4)]


def test_split_silence_and_hdf5_output(build):
    net = build(inp("data", 2, 3) + layer("s", "Split", ["data"], ["s1", "s2"])
                + layer("out", "HDF5Output", ["s1", "s2"], [], 'hdf5_output_param { file_name: "x.h5" }'))
    assert tops(net, "s") == [(2, 3), (2, 3)]
    assert tops(net, "out") == []
    net = build(inp("data", 2, 3) + layer("q", "Silence", ["data"], []))
    assert tops(net, "q") == []
    refused(build, inp("data", 2, 3) + layer("s", "Split", ["data"], ["data", "s2"]), "in-place")


# --- normalisation and affine --------------------------------------------------------------------------
def test_batch_norm(build):
    net = build(inp("data", 2, 3, 4, 5) + layer("bn", "BatchNorm", ["data"], ["data"]))
    assert tops(net, "bn") == [(2, 3, 4, 5)]
    assert params(net, "bn") == [(3,), (3,), (1,)]  # mean, variance, moving-average factor
    assert [p.lr_mult for p in net.layer("bn").params] == [0, 0, 0]  # Caffe masks them from learning
    refused(build, inp("data", 2, 3) + layer("bn", "BatchNorm", ["data"], body="param { lr_mult: 1 }"),
            "batch normalization statistics")


def test_lrn(build):
    net = build(inp("data", 2, 3, 4, 5) + layer("n", "LRN", ["data"], body="lrn_param { local_size: 3 }"))
    assert tops(net, "n") == [(2, 3, 4, 5)]
    net = build(inp("data", 2, 3, 4, 5) + layer("n", "LRN", ["data"], body="lrn_param { norm_region: WITHIN_CHANNEL }"))
    assert tops(net, "n") == [(2, 3, 4, 5)]
    refused(build, inp("data", 2, 3, 4, 5) + layer("n", "LRN", ["data"], body="lrn_param { local_size: 4 }"), "odd")
    refused(build, inp("data", 2, 3, 4) + layer("n", "LRN", ["data"]), "4-axis")


def test_mvn_makes_a_4_axis_top(build):
    # MVNLayer::Reshape calls top->Reshape(num, channels, height, width): missing axes read as 1
    assert tops(build(inp("data", 2, 3) + layer("m", "MVN", ["data"])), "m") == [(2, 3, 1, 1)]
    assert tops(build(inp("data", 2, 3, 4, 5) + layer("m", "MVN", ["data"])), "m") == [(2, 3, 4, 5)]


def test_softmax(build):
    net = build(inp("data", 2, 3, 4) + layer("s", "Softmax", ["data"], body="softmax_param { axis: 2 }"))
    assert tops(net, "s") == [(2, 3, 4)]
    refused(build, inp("data", 2, 3, 4) + layer("s", "Softmax", ["data"], body="softmax_param { axis: 3 }"), "axis 3")


def test_scale(build):
    data = inp("data", 2, 3, 4, 5)
    net = build(data + layer("s", "Scale", ["data"], ["data"]))
    assert tops(net, "s") == [(2, 3, 4, 5)]
    assert params(net, "s") == [(3,)]  # axis 1, num_axes 1
    net = build(data + layer("s", "Scale", ["data"], body="scale_param { bias_term: true num_axes: -1 }"))
    assert params(net, "s") == [(3, 4, 5), (3, 4, 5)]  # scale, then the inner Bias layer's bias
    net = build(data + layer("s", "Scale", ["data"], body="scale_param { num_axes: 0 }"))
    assert params(net, "s") == [()]  # a scalar
    two = data + inp("w", 3, 4)
    net = build(two + layer("s", "Scale", ["data", "w"], body="scale_param { bias_term: true }"))
    assert tops(net, "s") == [(2, 3, 4, 5)]
    assert params(net, "s") == [(3, 4)]  # only the bias, spanning bottom 1's two axes from axis 1
    refused(build, data + inp("w", 3, 5) + layer("s", "Scale", ["data", "w"]), "must match")
    refused(build, data + layer("s", "Scale", ["data"], body="scale_param { axis: 2 num_axes: 3 }"), "beyond")


def test_bias(build):
    data = inp("data", 2, 3, 4, 5)
    net = build(data + layer("b", "Bias", ["data"], body="bias_param { axis: 0 num_axes: 2 }"))
    assert tops(net, "b") == [(2, 3, 4, 5)]
    assert params(net, "b") == [(2, 3)]
    net = build(data + inp("v", 4, 5) + layer("b", "Bias", ["data", "v"], body="bias_param { axis: 2 }"))
    assert tops(net, "b") == [(2, 3, 4, 5)]
    assert params(net, "b") == []  # the bias is bottom 1
    refused(build, data + inp("v", 4) + layer("b", "Bias", ["data", "v"]), "must match")


# --- losses and accuracy ----------------------------------------------------------------------------
def test_accuracy(build):
    two = inp("score", 4, 10) + inp("label", 4)
    net = build(two + layer("acc", "Accuracy", ["score", "label"], body="accuracy_param { top_k: 5 }"))
    assert tops(net, "acc") == [()]  # a scalar
    net = build(two + layer("acc", "Accuracy", ["score", "label"], ["acc", "per_class"]))
    assert tops(net, "acc") == [(), (10,)]  # one accuracy per class of axis 1
    net = build(inp("score", 2, 5, 3, 3) + inp("label", 2, 1, 3, 3)
                + layer("acc", "Accuracy", ["score", "label"], ["acc", "per_class"]))
    assert tops(net, "acc") == [(), (5,)]  # labels: 2*3*3 = 18, one per prediction
    refused(build, two + layer("acc", "Accuracy", ["score", "label"], body="accuracy_param { top_k: 11 }"), "top_k")
    refused(build, inp("score", 4, 10) + inp("label", 3) + layer("acc", "Accuracy", ["score", "label"]), "labels")


LOSSES = [
    ("SoftmaxWithLoss", [(4, 10), (4,)], ""),
    ("EuclideanLoss", [(4, 3), (4, 3)], ""),
    ("HingeLoss", [(4, 10), (4,)], ""),
    ("MultinomialLogisticLoss", [(4, 10), (4,)], ""),
    ("SigmoidCrossEntropyLoss", [(4, 5), (4, 5)], ""),
    ("InfogainLoss", [(4, 10), (4,), (10, 10)], ""),
    ("ContrastiveLoss", [(4, 8), (4, 8), (4,)], ""),
]


@pytest.mark.parametrize("type_, shapes, body", LOSSES, ids=[t for t, _, _ in LOSSES])
def test_losses_make_a_scalar_with_loss_weight_one(build, type_, shapes, body):
    names = [f"b{j}" for j in range(len(shapes))]
    text = "".join(inp(n, *s) for n, s in zip(names, shapes))
    net = build(text + layer("loss", type_, names, body=body))
    assert tops(net, "loss") == [()]
    assert list(net.layer("loss").loss_weights) == [1.0]
    net = build(text + layer("loss", type_, names, []))  # AutoTopBlobs: Caffe adds the top
    assert tops(net, "loss") == [()]


def test_loss_second_tops(build):
    two = inp("score", 4, 10) + inp("label", 4)
    for type_ in ("SoftmaxWithLoss", "InfogainLoss"):
        body = "loss_weight: 1 loss_weight: 0" + (' infogain_loss_param { source: "H" }' if type_ == "InfogainLoss" else "")
        net = build(two + layer("loss", type_, ["score", "label"], ["loss", "prob"], body))
        assert tops(net, "loss") == [(), (4, 10)]  # the softmax output
    net = build(inp("score", 2, 5, 3, 3) + inp("label", 2, 3, 3) + layer("loss", "SoftmaxWithLoss", ["score", "label"]))
    assert tops(net, "loss") == [()]  # 2*3*3 labels for 2*3*3 predictions along axis 1


def test_loss_checks(build):
    refused(build, inp("s", 4, 10) + inp("l", 3) + layer("loss", "SoftmaxWithLoss", ["s", "l"]), "first dimension")
    refused(build, inp("s", 4, 10, 2) + inp("l", 4) + layer("loss", "SoftmaxWithLoss", ["s", "l"]), "labels")
    refused(build, inp("s", 4, 3) + inp("t", 4, 4) + layer("loss", "EuclideanLoss", ["s", "t"]), "dimension")
    refused(build, inp("s", 4, 5) + inp("t", 4, 6) + layer("loss", "SigmoidCrossEntropyLoss", ["s", "t"]), "count")
    refused(build, inp("s", 4, 10) + inp("l", 4, 2) + layer("loss", "MultinomialLogisticLoss", ["s", "l"]), "label")
    refused(build, inp("s", 4, 10) + inp("l", 4) + layer("loss", "InfogainLoss", ["s", "l"]), "source")
    refused(build, inp("s", 4, 10) + inp("l", 4) + inp("h", 9, 9) + layer("loss", "InfogainLoss", ["s", "l", "h"]),
            "10x10")
    refused(build, inp("a", 4, 8) + inp("b", 4, 7) + inp("y", 4) + layer("loss", "ContrastiveLoss", ["a", "b", "y"]),
            "same C")
    # a loss with a second top needs a loss_weight per top
    refused(build, inp("s", 4, 10) + inp("l", 4) + layer("loss", "SoftmaxWithLoss", ["s", "l"], ["loss", "prob"]),
            "loss_weight")


# --- data sources --------------------------------------------------------------------------------------
def test_input_and_dummy_data(build):
    net = build(layer("in", "Input", [], ["a", "b"], "input_param { shape { dim: 2 dim: 3 } }"))
    assert tops(net, "in") == [(2, 3), (2, 3)]  # one shape for every top
    net = build(layer("in", "Input", [], ["a", "b"], "input_param { shape { dim: 2 } shape { dim: 4 dim: 5 } }"))
    assert tops(net, "in") == [(2,), (4, 5)]
    refused(build, layer("in", "Input", [], ["a"]), "--input a=")
    net = build(layer("in", "Input", [], ["a"]), inputs={"a": (8, 3)})
    assert tops(net, "in") == [(8, 3)]
    net = build(layer("d", "DummyData", [], ["x", "y"], "dummy_data_param { shape { dim: 2 dim: 3 } }"))
    assert tops(net, "d") == [(2, 3), (2, 3)]
    body = "dummy_data_param { num: 2 channels: 3 channels: 1 height: 4 width: 5 }"
    net = build(layer("d", "DummyData", [], ["x", "y"], body))
    assert tops(net, "d") == [(2, 3, 4, 5), (2, 1, 4, 5)]  # legacy fields: 4-axis tops
    refused(build, layer("d", "DummyData", [], ["x", "y", "z"], "dummy_data_param { num: 1 num: 2 channels: 1 "
                                                                 "height: 1 width: 1 }"), "num")
    refused(build, layer("d", "DummyData", [], ["x"], "dummy_data_param { num: 1 shape { dim: 1 } }"), "both")


def test_memory_data(build):
    body = "memory_data_param { batch_size: 4 channels: 3 height: 5 width: 6 }"
    net = build(layer("m", "MemoryData", [], ["data", "label"], body))
    assert tops(net, "m") == [(4, 3, 5, 6), (4,)]  # the label is (batch_size)
    net = build(layer("m", "MemoryData", [], ["data", "label"], body), batch=7)
    assert tops(net, "m") == [(7, 3, 5, 6), (7,)]
    refused(build, layer("m", "MemoryData", [], ["data", "label"], "memory_data_param { batch_size: 4 }"), "width")


def test_data_takes_its_image_size_from_the_user(build):
    text = layer("d", "Data", [], ["data", "label"], 'data_param { source: "db" batch_size: 16 }')
    refused(build, text, "--input data=", strict=True)  # without --strict, 224 x 224 in colour is assumed
    assert tops(build(text), "d") == [(16, 3, 224, 224), (16,)]
    net = build(text, inputs={"data": (16, 3, 32, 32)})
    assert tops(net, "d") == [(16, 3, 32, 32), (16,)]
    net = build(layer("d", "Data", [], ["data"], 'data_param { source: "db" batch_size: 16 }'),
                inputs={"data": (16, 1, 28, 28)})
    assert tops(net, "d") == [(16, 1, 28, 28)]


def test_image_data(build):
    body = 'image_data_param { source: "list.txt" batch_size: 8 new_height: 32 new_width: 40 is_color: false }'
    net = build(layer("d", "ImageData", [], ["data", "label"], body))
    assert tops(net, "d") == [(8, 1, 32, 40), (8,)]  # grey: 1 channel, resized to 32x40
    body = 'transform_param { crop_size: 28 } image_data_param { source: "list.txt" batch_size: 8 new_height: 32 new_width: 40 }'
    net = build(layer("d", "ImageData", [], ["data", "label"], body))
    assert tops(net, "d") == [(8, 3, 28, 28), (8,)]  # colour by default, cropped
    plain = 'image_data_param { source: "list.txt" batch_size: 8 }'
    refused(build, layer("d", "ImageData", [], ["data", "label"], plain), "--input data=", strict=True)
    refused(build, layer("d", "ImageData", [], ["data"], body), "exactly 2")
    refused(build, layer("d", "ImageData", [], ["data", "label"],
                         'image_data_param { source: "l" batch_size: 8 new_height: 32 }'), "together")


def test_window_data(build):
    body = 'transform_param { crop_size: 227 } window_data_param { source: "w.txt" batch_size: 128 }'
    net = build(layer("d", "WindowData", [], ["data", "label"], body))
    assert tops(net, "d") == [(128, 3, 227, 227), (128,)]
    refused(build, layer("d", "WindowData", [], ["data", "label"], 'window_data_param { source: "w" batch_size: 1 }'),
            "crop_size")


def test_hdf5_data(build):
    text = layer("h", "HDF5Data", [], ["data", "label"], 'hdf5_data_param { source: "files.txt" batch_size: 10 }')
    refused(build, text, "--input data=", strict=True)  # without --strict, images are assumed (test_assumed_images)
    net = build(text, inputs={"data": (10, 4), "label": (10, 1)})
    assert tops(net, "h") == [(10, 4), (10, 1)]
    refused(build, layer("h", "HDF5Data", [], ["data"], 'transform_param { scale: 2 } hdf5_data_param { source: "f" }'),
            "transform", inputs={"data": (1, 2)})


def test_python_layer_tops_come_from_the_user(build):
    text = (inp("data", 2, 3) + layer("py", "Python", ["data"], ["out"], 'python_param { module: "m" layer: "L" }')
            + layer("after", "ReLU", ["out"], ["r"]))  # a layer reads its top (tests/test_fork_lstm.py: none does)
    refused(build, text, "--input out=")
    assert tops(build(text, inputs={"out": (2, 7)}), "py") == [(2, 7)]


# --- recurrent -----------------------------------------------------------------------------------------
def rec(type_, bottoms, tops, extra=""):
    return layer("r", type_, bottoms, tops, f"recurrent_param {{ num_output: 4 {extra} }}")


SEQ = inp("x", 5, 2, 7) + inp("cont", 5, 2)  # T = 5 timesteps of N = 2 streams of 7 features


def test_rnn(build):
    net = build(SEQ + rec("RNN", ["x", "cont"], ["o"]))
    assert tops(net, "r") == [(5, 2, 4)]  # (T, N, num_output)
    # the unrolled net's own params in creation order: W_xh, b_h (x_transform over axes 2+: 7 inputs),
    # W_hh (first timestep's hidden transform), W_ho, b_o (first timestep's output transform)
    assert params(net, "r") == [(4, 7), (4,), (4, 4), (4, 4), (4,)]


def test_rnn_static_input_and_exposed_hidden_state(build):
    text = SEQ + inp("s", 2, 6) + inp("h0", 1, 2, 4)
    net = build(text + rec("RNN", ["x", "cont", "s", "h0"], ["o", "hT"], "expose_hidden: true"))
    assert tops(net, "r") == [(5, 2, 4), (1, 2, 4)]  # the output, and h_T (one timestep)
    # W_xh_static (over x_static's axes 1+: 6 inputs, no bias) follows b_h
    assert params(net, "r") == [(4, 7), (4,), (4, 6), (4, 4), (4, 4), (4,)]


def test_lstm(build):
    net = build(SEQ + rec("LSTM", ["x", "cont"], ["h"]))
    assert tops(net, "r") == [(5, 2, 4)]
    # W_xc, b_c with 4 gates * 4 outputs = 16 rows; W_hc (16, num_output)
    assert params(net, "r") == [(16, 7), (16,), (16, 4)]
    text = inp("x", 5, 2, 3, 2) + inp("cont", 5, 2) + inp("h0", 1, 2, 4) + inp("c0", 1, 2, 4)
    net = build(text + rec("LSTM", ["x", "cont", "h0", "c0"], ["h", "hT", "cT"], "expose_hidden: true"))
    assert tops(net, "r") == [(5, 2, 4), (1, 2, 4), (1, 2, 4)]
    assert params(net, "r") == [(16, 6), (16,), (16, 4)]  # x's axes 2+ give 3*2 = 6 inputs


def test_recurrent_checks(build):
    refused(build, inp("x", 5, 2, 7) + inp("cont", 5, 3) + rec("LSTM", ["x", "cont"], ["h"]), "cont")
    refused(build, SEQ + layer("r", "RNN", ["x", "cont"], ["o"]), "num_output")
    refused(build, SEQ + inp("h0", 1, 3, 4) + rec("RNN", ["x", "cont", "h0"], ["o", "hT"], "expose_hidden: true"),
            "h_0")
    refused(build, SEQ + rec("LSTM", ["x", "cont"], ["h", "hT"]), "exactly 1 top")
    refused(build, SEQ + rec("LSTM", ["x", "cont"], ["h"], "expose_hidden: true"), "at least 4")


def test_lstm_unit(build):
    text = inp("c", 1, 2, 4) + inp("gates", 1, 2, 16) + inp("cont", 1, 2)
    net = build(text + layer("u", "LSTMUnit", ["c", "gates", "cont"], ["c1", "h1"]))
    assert tops(net, "u") == [(1, 2, 4), (1, 2, 4)]
    assert params(net, "u") == []
    text = inp("c", 1, 2, 4) + inp("gates", 1, 2, 12) + inp("cont", 1, 2)
    refused(build, text + layer("u", "LSTMUnit", ["c", "gates", "cont"], ["c1", "h1"]), "4 x")


# --- through the command line -------------------------------------------------------------------------
def test_a_failed_check_exits_2_with_one_line(tmp_path, capsys):
    path = tmp_path / "bad.prototxt"
    path.write_text(inp("a", 2, 3) + inp("b", 2, 4) + layer("sum", "Eltwise", ["a", "b"]))
    assert main([str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "sum" in err and "bad.prototxt" in err
