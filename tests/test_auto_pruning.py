"""Auto_pruning's Caffe (NHZlX/Auto_pruning 237d8ed, Dynamic Network Surgery's compressed layers): its schema,
CConvolution, CInnerProduct and its ConvolutionDepthwise held against its source, and the fork's own nets.

Expected values are derived by hand below from that commit's src/caffe/layers/compress_conv_layer.cpp/.cu,
compress_inner_product_layer.cpp/.cu, conv_dw_layer.cpp and include/caffe/layers, cited by file and line.
The nets are in tests/data/auto_pruning (tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit.audit import build_nets
from protoaudit.memory.buffers import layer_touches
from protoaudit.memory.solver import solver_buffers
from protoaudit.read.load import load

NETS = os.path.join(DATA, "auto_pruning")
LENET = os.path.join(NETS, "lenet_pruning.prototxt")
MOBILENET = os.path.join(NETS, "mobilenet_deploy.prototxt_pruning")
F = 4  # bytes per float

INPUTS = 'input: "x" input_shape { dim: 2 dim: 3 dim: 10 dim: 12 }\n'
CCONV = """layer { name: "c" type: "CConvolution" bottom: "x" top: "c"
  convolution_param { num_output: 4 kernel_size: 3 pad: 1 stride: 2 %s } cconvolution_param { %s } }"""
CIP = """layer { name: "ip" type: "CInnerProduct" bottom: "x" top: "ip"
  inner_product_param { num_output: 7 transpose: true %s } }"""


def build(tmp_path, body, **options):
    return build_text(tmp_path, INPUTS + body, schema="auto_pruning", **options)


def params(net, layer):
    return [tuple(p.shape) for p in net.layer(layer).params]


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "auto_pruning.proto")).read()
    assert text.startswith("// NHZlX/Auto_pruning, src/caffe/proto/caffe.proto at commit "
                           "237d8edeae7d04f375bd73b18abccb76fa7ed99d,\n// copied verbatim below this header")
    # caffe.proto:408-409, :647 (Dynamic Network Surgery's own has them at 140-141, with gamma and c_rate)
    assert "  optional CConvolutionParameter cconvolution_param = 150;\n" in text
    assert "  optional float inter_iter = 7 [default = 1500];  \n" in text


def test_cconvolution_shapes_and_buffers(tmp_path):
    """compress_conv_layer.cpp:45-59: BVLC's output size, (10 + 2 - 3) / 2 + 1 = 5 by (12 + 2 - 3) / 2 + 1 = 6.
    cpp:17 gives BVLC's weight (4, 3, 3, 3) and bias (4); cpp:22-25 appends the mask, a Blob of the weight's
    shape, to blobs_; cpp:31 reshapes weight_tmp_ to it, written by the forward (cu:28, :70). The GEMMs are
    BaseConvolutionLayer's: col_buffer_ 3 x 3 x 3 x 5 x 6 for one image, bias_multiplier_ 5 x 6."""
    net = build(tmp_path, CCONV % ("", ""))
    assert tops(net, "c") == [(2, 4, 5, 6)]
    assert params(net, "c") == [(4, 3, 3, 3), (4,), (4, 3, 3, 3)]
    assert layer_buffers(net, "c") == {("weight_tmp_", "device"): 4 * 3 * 3 * 3 * F,
                                       ("col_buffer_", "device"): 3 * 3 * 3 * 5 * 6 * F,
                                       ("bias_multiplier_", "device"): 5 * 6 * F}
    assert layer_buffers(net, "c", mode="cpu") == {(name, "host"): size for (name, _), size in
                                                   layer_buffers(net, "c").items()}


def test_the_mask_is_a_learnable_param_no_backward_writes(tmp_path):
    """The mask is blobs_[blob_num_] (cpp:22-25): with no bias, blobs_[1]. Net::AppendParam makes every blob
    of blobs_ a learnable param, lr_mult 1 where no ParamSpec is given, so SGD keeps its diff and a history
    of its shape; Backward_gpu writes the weight's diff (times the mask) and the bias's, never the mask's
    (cu:89-122)."""
    net = build(tmp_path, CCONV % ("bias_term: false", ""))
    assert params(net, "c") == [(4, 3, 3, 3), (4, 3, 3, 3)]
    written = {(t.index, t.stage) for t in layer_touches(net.layer("c"), "gpu", "caffe")
               if t.what == "param" and t.part == "diff"}
    assert written == {(0, "backward")}
    history = {b.owner: b.bytes for b in solver_buffers(net, "SGD") if b.kind == "history" and b.layer == "c"}
    assert history == {"c.param0.history_[0]": 108 * F, "c.param1.history_[1]": 108 * F}


def test_a_zero_inter_iter_stops_the_train_forward(tmp_path):
    """inter_iter is a float read into an int (compress_convolution_layer.hpp:52, cpp:38); every TRAIN forward
    first takes iter_ % inter_iter_ (cu:37, cpp:76): 0.5 is 0, a division by zero."""
    net = build(tmp_path, CCONV % ("", "inter_iter: 0.5"))
    stops = [t for t in layer_touches(net.layer("c"), "gpu", "caffe") if t.what == "stop"]
    assert [(t.stage, t.name) for t in stops] == [("forward", "give cconvolution_param an inter_iter of 1 or more")]


def test_cinner_product_shapes_and_buffers(tmp_path):
    """compress_inner_product_layer.cpp:37-40: the weight is (num_output, K) whatever `transpose` says, here
    (7, 3 x 10 x 12); bias (7), then the mask of the weight's shape (cpp:58-61), weight_tmp_ (cpp:67) and
    bias_multiplier_ of M = 2 (cpp:99-103). The top is (2, 7) (cpp:94-97)."""
    net = build(tmp_path, CIP % "")
    assert tops(net, "ip") == [(2, 7)]
    assert params(net, "ip") == [(7, 360), (7,), (7, 360)]
    assert layer_buffers(net, "ip") == {("weight_tmp_", "device"): 7 * 360 * F, ("bias_multiplier_", "device"): 2 * F}
    written = {t.index for t in layer_touches(net.layer("ip"), "gpu", "caffe") if t.what == "param" and t.part == "diff"}
    assert written == {0, 1}  # Backward_gpu: weight (cu:95-104) and bias (cu:106-110), not the mask


def test_cinner_product_without_bias_stops_on_the_cpu(tmp_path):
    """Forward_cpu takes the mask as blobs_[2] (cpp:111); without a bias blobs_ has two entries (cpp:34, 59).
    Forward_gpu finds it at blob_num_ (cu:38, 65)."""
    net = build(tmp_path, CIP % "bias_term: false")
    cpu = layer_touches(net.layer("ip"), "cpu", "caffe")
    assert [(t.what, t.stage) for t in cpu] == [("stop", "forward")]
    assert "blobs_[2]" in cpu[0].note
    assert layer_buffers(net, "ip") == {("weight_tmp_", "device"): 7 * 360 * F}


def test_depthwise_with_a_bias_stops_in_reshape(tmp_path):
    """conv_dw_layer.cpp:128-129: caffe_set (a host loop) on bias_multiplier_.mutable_gpu_data()."""
    body = """layer { name: "dw" type: "ConvolutionDepthwise" bottom: "x" top: "dw"
      convolution_param { num_output: 3 group: 3 kernel_size: 3 pad: 1 stride: 1 %s } }"""
    touches = layer_touches(build(tmp_path, body % "").layer("dw"), "gpu", "caffe")
    assert [(t.what, t.stage) for t in touches] == [("stop", "setup")]
    plain = layer_touches(build(tmp_path, body % "bias_term: false").layer("dw"), "gpu", "caffe")
    assert not any(t.what == "stop" for t in plain)


def test_which_schema_reads_the_files(tmp_path):
    """The MobileNet names CConvolution beside ConvolutionDepthwise: Auto_pruning's; a file with only
    ConvolutionDepthwise stays caffe-mobilenet's (shufflenet)."""
    assert load(MOBILENET).schema.name == "auto_pruning"
    assert load(LENET).schema.name == "auto_pruning"
    path = tmp_path / "dw.prototxt"
    path.write_text(INPUTS + """layer { name: "dw" type: "ConvolutionDepthwise" bottom: "x" top: "dw"
      convolution_param { num_output: 3 group: 3 kernel_size: 3 pad: 1 stride: 1 bias_term: false } }""")
    assert load(str(path)).schema.name == "shufflenet"


def test_the_pruning_lenet_audits():
    """mnist's 28 x 28 by 64: conv1 5 x 5 gives 24, pool 12, conv2 8, pool 4, so ip1's K = 50 x 4 x 4 = 800:
    its weight_tmp_ is 500 x 800 floats (compress_inner_product_layer.cpp:37-40, :67); conv2's is
    50 x 20 x 5 x 5 (compress_conv_layer.cpp:31), and its mask a third param of that shape."""
    run = run_in_process(LENET)
    assert run.returncode in (0, 1), run.stderr
    assert "Auto_pruning's Caffe" in run.stdout
    net = build_nets(LENET)[0]
    assert tops(net, "conv2") == [(64, 50, 8, 8)]
    assert layer_buffers(net, "ip1")[("weight_tmp_", "device")] == 500 * 800 * F
    assert layer_buffers(net, "conv2")[("weight_tmp_", "device")] == 50 * 20 * 5 * 5 * F
    assert params(net, "conv2")[2] == (50, 20, 5, 5)


def test_the_pruning_mobilenet_audits():
    """224 x 224 crops, 10 a batch; fc7_oxford is a 1x1 CConvolution of pool6's 1024 channels (conv6/sep's
    num_output) to 102, bias given: weight (102, 1024, 1, 1), bias, mask (compress_conv_layer.cpp:22-25); its
    weight_tmp_ 102 x 1024 floats (cpp:31). conv6/sep has no bias: its mask is blobs_[1]."""
    run = run_in_process(MOBILENET)
    assert run.returncode in (0, 1), run.stderr
    net = build_nets(MOBILENET)[0]
    assert tops(net, "fc7_oxford") == [(10, 102, 1, 1)]
    assert params(net, "fc7_oxford") == [(102, 1024, 1, 1), (102,), (102, 1024, 1, 1)]
    assert layer_buffers(net, "fc7_oxford")[("weight_tmp_", "device")] == 102 * 1024 * F
    assert params(net, "conv6/sep") == [(1024, 1024, 1, 1), (1024, 1024, 1, 1)]
