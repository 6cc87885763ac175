"""caffe-dynamic-dilation (SSAW14/LearnableDilationNetwork 4838c44, caffe-dynamic-dilation/): its schema, the
Convolution with a dilation map and its static column buffers, Truncation, Duplicate, the classes carried from
DeepLab v2, and the repository's training nets.

Expected values are derived by hand below from that commit's caffe-dynamic-dilation/src/caffe/layers/*.cpp/.cu,
src/caffe/util/im2col.cpp/.cu and include/caffe/layers/*.hpp, cited by file and line. The nets are in
tests/data/dyndilation (tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops, touched
from protoaudit.layers import layer_class
from protoaudit.memory.buffers import layer_touches, net_buffers
from protoaudit.memory.host import BLOB, _prefetching
from protoaudit.read.load import load

NETS = os.path.join(DATA, "dyndilation")
F = 4  # bytes per float


def inputs(**shapes):
    """Net inputs (the fork, a 2016 Caffe, has no Input layer)."""
    return "".join(f'input: "{n}" input_shape {{ ' + " ".join(f"dim: {d}" for d in s) + " }\n"
                   for n, s in shapes.items())


def build(tmp_path, body, schema="dyndilation", **options):
    return build_text(tmp_path, "force_backward: true\n" + body, schema=schema, **options)


def statics(net, mode="gpu", engine="caffe"):
    """{(owner, layer, stage): bytes} of the process's buffers the net holds."""
    return {(b.owner, b.layer, b.touch): b.bytes for b in net_buffers(net, mode=mode, engine=engine)
            if b.owner.startswith("process.") and b.kind == "layer buffer"}


COL = "process.BaseConvolutionLayer::col_buffer_"
COL_DILATION = "process.BaseConvolutionLayer::col_buffer_dilation_"


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "dyndilation.proto")).read()
    assert text.startswith("// SSAW14/LearnableDilationNetwork, caffe-dynamic-dilation/src/caffe/proto/caffe.proto "
                           "at commit 4838c440cb33fb012a267a0a1c9577642d64e9bb,\n// copied verbatim below this header")
    # caffe.proto:409, :413, :648, :650, :1036-1039, :1042-1045 of the fork's file
    assert "  optional DuplicateParameter duplicate_param = 155;\n" in text
    assert "  optional TruncationParameter truncation_param = 159;\n" in text
    assert "  optional bool force_back_propagation = 19 [default = false];\n" in text
    assert "  optional float dilation_back_threshold = 20 [default = 1.0];\n" in text
    assert "  optional float height    = 11 [default = 1];\n" in text
    assert "  optional float truncation_max    = 12 [default = 1];\n" in text


def test_deeplab_v2s_unchanged_files_are_its_classes():
    """interp_layer.cpp, seg_accuracy_layer.cpp, mat_write_layer.cpp, batch_norm_layer.cpp/.cu and
    image_seg_data_layer.cpp are deeplab-public-ver2 51750fa's byte for byte: DeepLab v2's classes; conv_layer.*,
    base_conv_layer.* and softmax_loss_layer.cu differ: classes of the fork's own."""
    for kind in ("Interp", "SegAccuracy", "MatWrite", "BatchNorm", "ImageSegData", "ImageData", "Data"):
        assert issubclass(layer_class(kind, "dyndilation"), layer_class(kind, "deeplab_v2")), kind
    for kind in ("Convolution", "Deconvolution", "SoftmaxWithLoss"):
        assert layer_class(kind, "dyndilation") is not layer_class(kind, "deeplab_v2"), kind


def test_a_deeplab_net_stays_deeplabs(tmp_path):
    """A file with nothing of the fork's own (an Interp and a SegAccuracy) is read as before it was shipped."""
    (tmp_path / "n.prototxt").write_text(inputs(x=(1, 3, 9, 9)) + (
        'layer { name: "i" type: "Interp" bottom: "x" top: "i" interp_param { shrink_factor: 2 } }\n'))
    assert load(str(tmp_path / "n.prototxt")).schema.name == "deeplab_v2"


TRUNC_DUP = """layer {{ name: "t" type: "Truncation" bottom: "b" top: "t" truncation_param {{ truncation_min: 1
  truncation_max: 4 }} }}
layer {{ name: "d" type: "Duplicate" bottom: "t" top: "d" duplicate_param {{ height: {h} width: {w} }} }}
layer {{ name: "loss" type: "EuclideanLoss" bottom: "d" bottom: "target" top: "loss" }}
"""


def test_truncation_keeps_the_shape_and_duplicate_spreads_it(tmp_path):
    """truncation_layer.hpp:21: a NeuronLayer, the top (2, 6, 1, 1) like its bottom, no buffer. duplicate_layer.cpp:
    13-16, :22: (num, channels, int(height), int(width)) = (2, 6, 5, 7), 41.9 read as 41 (a float field into an
    int). Its GPU backward takes the bottom's diff on the host too (.cu:64): 2 x 6 = 12 floats; the CPU backward
    holds nothing beyond the blobs (cpp:41-49)."""
    net = build(tmp_path, inputs(b=(2, 6, 1, 1), target=(2, 6, 5, 7)) + TRUNC_DUP.format(h=5, w=7))
    assert tops(net, "t") == [(2, 6, 1, 1)] and tops(net, "d") == [(2, 6, 5, 7)]
    assert layer_buffers(net, "t") == {}
    assert layer_buffers(net, "d") == {("bottom diff (host)", "host"): 12 * F}
    assert layer_buffers(net, "d", mode="cpu") == {}
    net = build(tmp_path, inputs(b=(2, 6, 1, 1), target=(2, 6, 41, 41)) + TRUNC_DUP.format(h=41.9, w=41))
    assert tops(net, "d") == [(2, 6, 41, 41)]


def test_duplicate_reads_the_legacy_num_and_channels(tmp_path):
    """num() and channels() (duplicate_layer.cpp:13-14) CHECK that the blob has at most 4 axes."""
    with pytest.raises(Exception, match="4 axes|legacy"):
        build(tmp_path, inputs(b=(2, 6, 1, 1, 1), target=(2, 6, 5, 7)) + TRUNC_DUP.format(h=5, w=7))


DYN = """layer {{ name: "conv" type: "Convolution" bottom: "x" bottom: "dil" top: "conv"
  convolution_param {{ num_output: 4 kernel_size: 3 {p} }} }}
layer {{ name: "loss" type: "EuclideanLoss" bottom: "conv" bottom: "target" top: "loss" }}
"""


def test_a_convolution_with_a_dilation_map(tmp_path):
    """base_conv_layer.cpp:203-231: the top is bottom 0's convolution, one top for two bottoms: (2, 8, 9, 9),
    kernel 3, pad 2, dilation 2: (9 + 4 - 5) / 1 + 1 = 9, (2, 4, 9, 9); weight (4, 8, 3, 3), bias (4).
    col_buffer_shape_ (cpp:253-262) 8 x 3 x 3 x 9 x 9 = 5832 floats, in the static col_buffer_, allocated by the
    forward (base_conv_layer.cpp:420-428, conv_layer.cu:28-38), and col_buffer_dilation_, allocated by the GPU
    backward (base_conv_layer.cpp:482-487, conv_layer.cu:117), of the same shape. On the GPU bottom 1's diff is
    zeroed whatever propagate_down says (conv_layer.cu:77-78); the CPU backward neither touches it nor
    col_buffer_dilation_ (conv_layer.cpp:60-111)."""
    body = inputs(x=(2, 8, 9, 9), dil=(2, 8, 9, 9), target=(2, 4, 9, 9)) + DYN.format(p="pad: 2 dilation: 2")
    net = build(tmp_path, body)
    assert tops(net, "conv") == [(2, 4, 9, 9)]
    assert [tuple(p.shape) for p in net.layer("conv").params] == [(4, 8, 3, 3), (4,)]
    assert statics(net) == {(COL, "conv", "forward"): 5832 * F, (COL_DILATION, "conv", "backward"): 5832 * F}
    assert statics(net, mode="cpu") == {(COL, "conv", "forward"): 5832 * F}
    assert ("bottom", 1, "diff", "backward", "device") in touched(net, "conv")
    assert ("bottom", 1, "diff", "backward", "device") not in touched(net, "conv", mode="cpu")
    assert layer_buffers(net, "conv") == {("bias_multiplier_", "device"): 81 * F}  # 9 x 9 (cpp:266-272)


def test_the_dilation_map_and_the_pad_are_checked(tmp_path):
    """im2col.cu:120 reads a dilation per input channel and position, 8 x 9 x 9 = 648 an image: a map of 81 is
    too short. im2col.cu:160-163 sizes the columns with pad as the dilation: pad 1 with dilation 2 gives
    (9 + 2 - 3) / 1 + 1 = 9 columns but a (9 + 2 - 5) / 1 + 1 = 7 top. One top only (the fork's forward writes
    top[0], conv_layer.cpp:34)."""
    base = inputs(x=(2, 8, 9, 9), target=(2, 4, 9, 9))
    for dil, p, words in (((2, 1, 9, 9), "pad: 2 dilation: 2", "648"),
                          ((2, 8, 9, 9), "pad: 1 dilation: 2", "pad as the largest dilation"),
                          ((3, 8, 9, 9), "pad: 2 dilation: 2", "2 images")):
        with pytest.raises(Exception, match=words):
            build(tmp_path, base + inputs(dil=dil) + DYN.format(p=p))
    with pytest.raises(Exception):
        build(tmp_path, base + inputs(dil=(2, 8, 9, 9)) + DYN.format(p="pad: 2 dilation: 2").replace(
            'top: "conv"\n', 'top: "conv" top: "more"\n'))


def test_cudnn_has_no_top_for_the_map(tmp_path):
    """layer_factory.cpp:40-57: no dilation > 1 and a cuDNN build, CuDNNConvolutionLayer, whose forward loops over
    the bottoms writing top[i] (cudnn_conv_layer.cu:14-16)."""
    body = inputs(x=(2, 8, 9, 9), dil=(2, 8, 9, 9), target=(2, 4, 9, 9)) + DYN.format(p="pad: 1")
    net = build(tmp_path, body)
    stops = [t for t in layer_touches(net.layer("conv"), "gpu", "cudnn") if t.what == "stop"]
    assert len(stops) == 1 and "cudnn_conv_layer.cu:14-16" in stops[0].note
    assert not [t for t in layer_touches(net.layer("conv"), "gpu", "caffe") if t.what == "stop"]


def test_every_convolution_grows_both_static_buffers(tmp_path):
    """base_conv_layer.hpp:249-250, cpp:14-18, :260-264: one col_buffer_ and one col_buffer_dilation_ for every
    convolution, grown by each Reshape. a: 1x1 on (2, 64, 10, 10), 64 x 10 x 10 = 6400, never touching them (a
    1x1 forward skips im2col, base_conv_layer.cpp:404-405; its backward takes col_buffer_ only for a bottom
    diff, and x needs none); b: 3x3 pad 2 dilation 2 with a map, 4 x 9 x 10 x 10 = 3600, touching col_buffer_ in
    its forward and col_buffer_dilation_ in its backward. Each static Blob: 6400 floats."""
    body = inputs(x=(2, 64, 10, 10), dil=(2, 4, 10, 10), target=(2, 4, 10, 10)) + """
    layer { name: "a" type: "Convolution" bottom: "x" top: "a" convolution_param { num_output: 4 kernel_size: 1 } }
    layer { name: "b" type: "Convolution" bottom: "a" bottom: "dil" top: "b"
      convolution_param { num_output: 4 kernel_size: 3 pad: 2 dilation: 2 } }
    layer { name: "loss" type: "EuclideanLoss" bottom: "b" bottom: "target" top: "loss" }\n"""
    net = build_text(tmp_path, body, schema="dyndilation")
    assert statics(net) == {(COL, "b", "forward"): 6400 * F, (COL_DILATION, "b", "backward"): 6400 * F}


def test_softmax_loss_reads_its_scratch_on_the_host(tmp_path):
    """softmax_loss_layer.cu:54: Forward_gpu takes bottom[0]->cpu_diff(), a host copy of the scores' diff:
    2 x 19 x 5 x 5 = 950 floats; the CPU code has no such line."""
    body = inputs(s=(2, 19, 5, 5), label=(2, 1, 5, 5)) + (
        'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "s" bottom: "label" top: "loss" }\n')
    net = build(tmp_path, body)
    assert layer_buffers(net, "loss")[("bottom diff (host)", "host")] == 950 * F
    assert ("bottom diff (host)", "host") not in layer_buffers(net, "loss", mode="cpu")


SEG = """layer { name: "data" type: "ImageSegData" top: "data" top: "label" top: "dim"
  transform_param { crop_size: 9 mean_value: 104 mean_value: 117 mean_value: 123 }
  image_data_param { source: "absent_list.txt" batch_size: 2 label_type: PIXEL } }
layer { name: "s" type: "Silence" bottom: "data" bottom: "label" bottom: "dim" }
"""


def test_its_batches_hold_a_fourth_blob(tmp_path):
    """base_data_layer.hpp:51: Batch holds data_, depth_, label_ and dim_, in an array of PREFETCH_COUNT = 5
    (:71, :77): the layer object holds five Blobs more than DeepLab v2's, never shaped, and the same device
    bytes (the three tops, five batches of each: 5 x (2 x 3 x 9 x 9 + 2 x 81 + 2 x 2) = 5260 floats)."""
    ours, theirs = build(tmp_path, SEG), build(tmp_path, SEG, schema="deeplab_v2")
    assert _prefetching(ours.layer("data"), 0) - _prefetching(theirs.layer("data"), 0) == 5 * BLOB
    device = {k: v for k, v in layer_buffers(ours, "data").items() if k[1] == "device"}
    assert sum(device.values()) == 5 * (2 * 3 * 81 + 2 * 81 + 2 * 2) * F == sum(
        v for k, v in layer_buffers(theirs, "data").items() if k[1] == "device")


def test_the_learnable_dilation_net(tmp_path):
    """train.prototxt (DeepLab-LargeFOV with learnt dilations), TRAIN: the image crop 321, batch 10; pool1-3
    (kernel 3, stride 2, pad 1) make 161, 81, 41, pool4 and pool5 (stride 1) keep 41. The dilation branch: the
    zero image (crop 1, (10, 3, 1, 1)), hole_conv_5_1 1x1 to (10, 512, 1, 1), Truncation, Duplicate to
    (10, 512, 41, 41), conv5_1's map beside pool4's (10, 512, 41, 41). The static col_buffer_ is the largest
    column any convolution reshapes it to, conv1_2's 64 x 3 x 3 x 321 x 321 = 59,351,616 floats, first
    allocated by conv1_1's forward (Caffe engine); col_buffer_dilation_, of that size too, first by fc6_2's
    backward, the last convolution with a map (backward runs from the end)."""
    net = load(os.path.join(NETS, "train.prototxt"))
    assert net.schema.name == "dyndilation"
    from protoaudit.audit import build_nets
    net = build_nets(os.path.join(NETS, "train.prototxt"))[0]
    assert tops(net, "data")[0] == (10, 3, 321, 321) and tops(net, "data_zero")[0] == (10, 3, 1, 1)
    assert tops(net, "loc_dup_5_1") == [(10, 512, 41, 41)] and tops(net, "conv5_1") == [(10, 512, 41, 41)]
    assert tops(net, "fc6_2") == [(10, 1024, 41, 41)] and tops(net, "loc_truncation2") == [(10, 512, 1, 1)]
    col = 64 * 9 * 321 * 321
    assert col == 59_351_616
    assert statics(net) == {(COL, "conv1_1", "forward"): col * F, (COL_DILATION, "fc6_2", "backward"): col * F}


@pytest.mark.parametrize("name", ["train.prototxt", "train_fixed.prototxt", "solver.prototxt"])
def test_each_net_audits_with_no_flags(name):
    """Tried as a new user would: `protoaudit FILE` in the repository's root, where run.sh trains."""
    if name != "solver.prototxt":
        assert load(os.path.join(NETS, name)).schema.name == "dyndilation"
    r = run_in_process(name, cwd=NETS, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout and "caffe-dynamic-dilation" in r.stdout
