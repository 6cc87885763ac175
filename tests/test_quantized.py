"""The quantization forks: caffe-quant-QNN (whitenightwu/caffe-quant-QNN b4fc9ad) and Ristretto
(pmgysel/caffe 614963c): their schemas, their layers held against their sources, and their nets.

Expected values are derived by hand below from those commits' layer sources, cited by file and
line; caffe-quant-QNN's two training logs (tests/data/logs_repeated) are the ground truth of its
nets' shapes. The nets are in tests/data/quantized (tests/data/SOURCES.md).
"""
import os
import re

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit.audit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import layer_touches
from protoaudit.read.load import load

HERE = os.path.join(DATA, "quantized")
A8W8 = os.path.join(HERE, "qnn_a8w8_train_val.prototxt")
A4W8 = os.path.join(HERE, "qnn_a4w8_train_val.prototxt")
LENET = os.path.join(HERE, "ristretto_lenet_quantized.prototxt")
F = 4  # bytes per float

INPUT = 'input: "data" input_shape { dim: 2 dim: 3 dim: 10 dim: 12 }\n'
QNN = INPUT + """
layer { name: "qc" type: "QuanConvolution" bottom: "data" top: "qc"
        quan_convolution_param { num_output: 4 kernel_size: 3 pad: 1 bit_width: 8 } }
layer { name: "q" type: "Quantization" bottom: "qc" top: "q" quantization_param { bit_width: 8 range: 0 range: 6 } }
layer { name: "qf" type: "QuanInnerProduct" bottom: "q" top: "qf" quan_inner_product_param { num_output: 5 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "qf" bottom: "qf" top: "loss" }
"""
RISTRETTO = INPUT + """
layer { name: "rc" type: "ConvolutionRistretto" bottom: "data" top: "rc"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 } quantization_param { bw_params: 8 } }
layer { name: "lrn" type: "LRNRistretto" bottom: "rc" top: "lrn" quantization_param { precision: MINIFLOAT } }
layer { name: "rd" type: "DeconvolutionRistretto" bottom: "lrn" top: "rd"
        convolution_param { num_output: 2 kernel_size: 2 stride: 2 bias_term: false } }
layer { name: "rf" type: "FcRistretto" bottom: "rd" top: "rf" inner_product_param { num_output: 5 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "rf" bottom: "rf" top: "loss" }
"""


def test_the_protos_are_the_forks_files_verbatim():
    qnn = open(os.path.join(ROOT, "proto", "forks", "qnn.proto")).read()
    assert qnn.startswith("// whitenightwu/caffe-quant-QNN, src/caffe/proto/caffe.proto at commit "
                          "b4fc9ad76469d8875d9db7d2d6efb99d99377359,\n// copied verbatim below this header")
    assert "optional QuanConvolutionParameter quan_convolution_param = 181;" in qnn
    ristretto = open(os.path.join(ROOT, "proto", "forks", "ristretto.proto")).read()
    assert ristretto.startswith("// pmgysel/caffe (Ristretto), src/caffe/proto/caffe.proto at commit "
                                "614963cb612acdd3fe6cc827f99893b5ac8ce6e1,\n// copied verbatim below this header")
    assert "optional QuantizationParameter quantization_param = 149;" in ristretto


def test_the_nets_are_read_with_their_forks_schema():
    assert load(A8W8).schema.name == "qnn"
    assert load(A4W8).schema.name == "qnn"
    assert load(LENET).schema.name == "ristretto"


# --- caffe-quant-QNN ---------------------------------------------------------------------------

def test_quan_convolution_is_caffes_convolution_on_either_engine(tmp_path):
    """base_quan_conv_layer.cpp is base_conv_layer.cpp reading quan_convolution_param: pad 1, kernel 3
    keeps 10 x 12 (quan_conv_layer.cpp:97-99: (10 + 2 - 3) / 1 + 1 = 10, (12 + 2 - 3) / 1 + 1 = 12),
    weight 4 x 3 x 3 x 3, bias 4. col_buffer_ is one image's im2col, 3 x 3 x 3 x 10 x 12 = 3,240 floats;
    bias_multiplier_ one per output pixel, 120. The weight copies its forward quantizes are freed before
    it returns (quan_conv_layer.cu:182, 237, 260-261). A cuDNN build of the fork does not compile
    (layer_factory.cpp:108 names a CuDNNQuanConvolutionLayer it lacks): no workspace under either engine."""
    net = build_text(tmp_path, QNN, schema="qnn")
    assert tops(net, "qc") == [(2, 4, 10, 12)]
    assert [p.shape for p in net.layer("qc").params] == [(4, 3, 3, 3), (4,)]
    expected = {("col_buffer_", "device"): 3 * 3 * 3 * 10 * 12 * F, ("bias_multiplier_", "device"): 120 * F}
    assert layer_buffers(net, "qc") == expected
    assert layer_buffers(net, "qc", engine="cudnn") == expected


def test_quan_inner_product_is_caffes_inner_product(tmp_path):
    """quan_inner_product_layer.cpp:17-59, 87-106: K = 4 x 10 x 12 = 480, weight 5 x 480, bias 5, top
    (2, 5); bias_multiplier_ one per row, M = 2."""
    net = build_text(tmp_path, QNN, schema="qnn")
    assert tops(net, "qf") == [(2, 5)]
    assert [p.shape for p in net.layer("qf").params] == [(5, 480), (5,)]
    assert layer_buffers(net, "qf") == {("bias_multiplier_", "device"): 2 * F}


def test_quantization_runs_its_cpu_code_on_host_copies_in_gpu_mode(tmp_path):
    """quantization_layer.hpp:20 makes it a NeuronLayer (top = bottom's shape); it declares Forward_cpu
    and Backward_cpu only (hpp:49-65), so Layer's Forward_gpu and Backward_gpu call them: bottom data and
    top data on the host in forward (cpp:32-33), top diff and bottom diff in backward (cpp:128-129)."""
    net = build_text(tmp_path, QNN, schema="qnn")
    assert tops(net, "q") == [(2, 4, 10, 12)]
    node = net.layer("q")
    gpu = {(t.stage, t.what, t.part, t.device) for t in layer_touches(node, "gpu", "caffe")}
    assert gpu == {("forward", "bottom", "data", "host"), ("forward", "top", "data", "host"),
                   ("backward", "top", "diff", "host"), ("backward", "bottom", "diff", "host")}
    assert {t.device for t in layer_touches(node, "cpu", "caffe")} == {"device"}
    assert layer_buffers(net, "q") == {}


@pytest.mark.parametrize("layer, message", [
    ('type: "Quantization" bottom: "data" top: "q" quantization_param { bit_width: 8 range: 1 }',
     "unexpected number of range"),  # quantization_layer.cpp:21-22
    ('type: "Quantization" bottom: "data" top: "q" quantization_param { bit_width: 0 range: 0 range: 1 }',
     "unexpected negative bit width"),  # cpp:15
    ('type: "QuanInnerProduct" bottom: "data" top: "q" quan_inner_product_param { num_output: 2 bit_width: 0 }',
     "unexpected negative bit width"),  # quan_inner_product_layer.cpp:65
])
def test_qnn_checks_are_caffes(tmp_path, layer, message):
    with pytest.raises(InputError, match=message):
        build_text(tmp_path, INPUT + f'layer {{ name: "q" {layer} }}', schema="qnn")


def _logged(path):
    """The training net's layers as Caffe set them up: [(name, [top shapes])], a scalar as ()."""
    layers = []
    for line in open(path):
        if "Creating test net" in line:
            break
        if m := re.search(r"Setting up (\S+)$", line.rstrip()):
            layers.append((m.group(1), []))
        elif (m := re.search(r"Top shape: ([\d ]*)\(", line)) and layers:
            layers[-1][1].append(tuple(int(d) for d in m.group(1).split()))
    return layers


@pytest.mark.parametrize("net, log", [(A8W8, "a8w8.log"), (A4W8, "a4w8_6.log")])
def test_the_nets_top_shapes_are_those_their_logs_give(net, log):
    """Every layer of the training net, in Caffe's order, with the shapes its log set it up with (a8w8:
    batch 200; a4w8_6: batch 128, from a file that named its fc7 Quantization quantized_conv1 as the
    others, so only the shapes are compared)."""
    logged = _logged(os.path.join(DATA, "logs_repeated", log))
    built = build_nets(net)[0]
    got = [(node.name, [tuple(s) for s in node.top_shapes]) for node in built.layers]
    assert len(logged) == 46 and [s for _, s in got] == [s for _, s in logged]
    if log == "a8w8.log":
        assert got == logged
    assert dict(logged)["conv1"] == [(200 if log == "a8w8.log" else 128, 96, 55, 55)]


@pytest.mark.parametrize("path", [A8W8, A4W8])
def test_the_qnn_nets_audit(path):
    run = run_in_process(path)
    assert run.returncode == 0, run.stderr
    assert "caffe-quant-QNN" in run.stdout


# --- Ristretto ---------------------------------------------------------------------------------

def test_ristretto_layers_keep_quantized_copies_of_their_parameters(tmp_path):
    """conv_ristretto_layer.cpp:215-219, deconv_ristretto_layer.cpp:215-219, fc_ristretto_layer.cpp:89-97:
    weights_quantized_ holds a Blob of the weight's shape and one of the bias's, first written in forward
    (conv_ristretto_layer.cu:20-25). rc: weight 4 x 3 x 3 x 3 = 108, bias 4; col_buffer_ 3 x 9 x 10 x 12
    = 3,240; bias_multiplier_ 120. lrn: scale_, the bottom's size 2 x 4 x 10 x 12 = 960
    (lrn_ristretto_layer.cu:114). rd: deconvolution of kernel 2, stride 2: (10 - 1) x 2 + 2 = 20 by
    (12 - 1) x 2 + 2 = 24, weight 4 x 2 x 2 x 2 = 32 and no bias; its col_buffer_ is 2 x 2 x 2 x 10 x 12
    = 960. rf: K = 2 x 20 x 24 = 960, weight 5 x 960 = 4,800, bias 5, bias_multiplier_ 2. Each is
    registered as a class (conv_ristretto_layer.cpp:302, ...): no cuDNN workspace."""
    net = build_text(tmp_path, RISTRETTO, schema="ristretto")
    assert tops(net, "rd") == [(2, 2, 20, 24)]
    assert tops(net, "rf") == [(2, 5)]
    for engine in ("caffe", "cudnn"):
        assert layer_buffers(net, "rc", engine=engine) == {
            ("weights_quantized_[0]", "device"): 108 * F, ("weights_quantized_[1]", "device"): 4 * F,
            ("col_buffer_", "device"): 3240 * F, ("bias_multiplier_", "device"): 120 * F}
        assert layer_buffers(net, "lrn", engine=engine) == {("scale_", "device"): 960 * F}
        assert layer_buffers(net, "rd", engine=engine) == {
            ("weights_quantized_[0]", "device"): 32 * F, ("col_buffer_", "device"): 960 * F}
        assert layer_buffers(net, "rf", engine=engine) == {
            ("weights_quantized_[0]", "device"): 4800 * F, ("weights_quantized_[1]", "device"): 5 * F,
            ("bias_multiplier_", "device"): 2 * F}


def test_lrn_ristretto_needs_minifloat(tmp_path):
    """lrn_ristretto_layer.cpp:15-17: DYNAMIC_FIXED_POINT, the precision's default, is refused."""
    text = RISTRETTO.replace("quantization_param { precision: MINIFLOAT }", "")
    with pytest.raises(InputError, match="LRN layer only supports minifloat"):
        build_text(tmp_path, text, schema="ristretto")


def test_lrn_ristretto_stops_caffe_on_the_cpu(tmp_path):
    """lrn_ristretto_layer.cpp:32-36: its Forward_cpu is LOG(FATAL)."""
    net = build_text(tmp_path, RISTRETTO, schema="ristretto")
    cpu = layer_touches(net.layer("lrn"), "cpu", "caffe")
    assert [(t.what, t.stage) for t in cpu] == [("stop", "forward")]
    assert "not implemented on CPU" in cpu[0].note


def test_ristretto_lenet_audits():
    """LeNet as `ristretto quantize` writes it: mnist's 28 x 28 by 64 (train); conv1 5 x 5 gives 24 x 24,
    pool 12, conv2 8, pool 4: ip1's K = 50 x 4 x 4 = 800, so its weights_quantized_[0] is 500 x 800
    floats (fc_ristretto_layer.cpp:93)."""
    run = run_in_process(LENET)
    assert run.returncode == 0, run.stderr
    assert "Ristretto (pmgysel/caffe" in run.stdout
    net = build_nets(LENET)[0]
    assert tops(net, "conv2") == [(64, 50, 8, 8)]
    assert layer_buffers(net, "ip1")[("weights_quantized_[0]", "device")] == 500 * 800 * F
