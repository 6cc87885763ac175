"""CHaiDNN's caffe.proto (Xilinx/CHaiDNN ad3be78, software/xtract/caffe.proto): its schema, how a net that carries
precision_param is read, and a deploy net of pptnz/aes-identification (tests/data/SOURCES.md).

CHaiDNN is an FPGA library, not a Caffe: its parser (software/xtract/caffe_network_parser.cpp) reads a Caffe net
with this caffe.proto and takes each layer's precision_param (or quantization_param) as the fixed-point format
of the FPGA's run (docs/QUANTIZATION.md). The repository has no Caffe layer source: the layer types its parser
takes (caffe_layer_map.hpp) are BVLC's, SSD's and Ristretto's, and a net of BVLC's types is sized as BVLC Caffe
sizes it, where precision_param is a field no layer reads. Expected values are derived by hand below from the
net's own numbers and BVLC's layer sources (conv_layer.cpp, base_conv_layer.cpp, pooling_layer.cpp,
inner_product_layer.cpp, net.cpp), cited where used.
"""
import hashlib
import json
import os

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit.audit import build_nets
from protoaudit.read.load import load
from protoaudit.read.schema import load_schema

HERE = os.path.join(DATA, "chaidnn")
NET = os.path.join(HERE, "deploy.prototxt")
F = 4  # bytes per float
COMMIT = "ad3be785efe3b3137a4025859eff5315a8cc0ce1"
# the repository's software/xtract/caffe.proto (git blob ddd700112c15ec5ad45184e5e248557802b37292), hashed as fetched
SOURCE_SHA256 = "d2356cafb212d673b6da1545c2ad186fccfe7ebbf46142bf11ae66ff0a6138f7"


def test_the_proto_is_the_repositorys():
    """The two-line header, then the repository's caffe.proto byte for byte."""
    text = open(os.path.join(ROOT, "proto", "forks", "chaidnn.proto"), "rb").read()
    first, second, body = text.split(b"\n", 2)
    assert first.startswith(b"// Xilinx/CHaiDNN") and COMMIT.encode() in first
    assert second.startswith(b"// copied verbatim")
    assert hashlib.sha256(body).hexdigest() == SOURCE_SHA256


def test_the_schemas_fields():
    """caffe.proto:415-416 (precision_param 997, xcustom_param 998), :317 (user_defined_layer 999), :400
    (quantization_param 147), :373, :392, :394, :398 (SSD's detection_output_param 204, norm_param 206,
    permute_param 202, prior_box_param 203); :430-460 (PrecisionParameter: no defaults but quant_type's
    "DynamicFixed"). BVLC's clip_param, swish_param and pooling's round_mode are not in it (a 2017 BVLC file)."""
    s = load_schema("chaidnn")
    layer = {f.name: f.number for f in s.message("LayerParameter").DESCRIPTOR.fields}
    assert (layer["precision_param"], layer["xcustom_param"], layer["user_defined_layer"]) == (997, 998, 999)
    assert layer["quantization_param"] == 147
    assert [layer[n] for n in ("permute_param", "prior_box_param", "detection_output_param", "norm_param")] == [
        202, 203, 204, 206]
    assert "clip_param" not in layer and "swish_param" not in layer
    assert "round_mode" not in {f.name for f in s.message("PoolingParameter").DESCRIPTOR.fields}
    precision = {f.name: (f.number, f.default_value) for f in s.message("PrecisionParameter").DESCRIPTOR.fields}
    assert precision["bw_layer_in"] == (3, 0) and precision["fl_params"] == (8, 0)
    assert precision["quant_type"] == (22, "DynamicFixed") and precision["th_params"][0] == 21


INPUT = 'layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 10 dim: 10 } } }\n'
CONV = ('layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 4 '
        'kernel_size: 3 pad: 1 } %s}\n')
PRECISION = ("precision_param { bw_layer_in: 8 bw_layer_out: 8 bw_params: 8 fl_layer_in: 0 fl_layer_out: 2 "
             "fl_params: 7 } ")


def test_precision_param_changes_nothing_caffe_allocates(tmp_path):
    """A Convolution with precision_param, read with CHaiDNN's caffe.proto, is sized as the same layer without it
    read with BVLC's: BVLC's conv_layer.cpp and base_conv_layer.cpp never read the field. (2, 3, 10, 10), 4 outputs,
    3x3 pad 1: top (2, 4, 10, 10); col_buffer_ 3*3*3 x 10*10 = 2,700 floats and bias_multiplier_ 100 floats
    (base_conv_layer.cpp's Reshape)."""
    text = INPUT + CONV % PRECISION
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    theirs = build_text(tmp_path / "a", text)
    assert theirs.schema == "chaidnn"
    bvlc = build_text(tmp_path / "b", INPUT + CONV % "")
    assert bvlc.schema == "bvlc"
    assert tops(theirs, "c") == tops(bvlc, "c") == [(2, 4, 10, 10)]
    assert layer_buffers(theirs, "c") == layer_buffers(bvlc, "c") == {
        ("col_buffer_", "device"): 27 * 100 * F, ("bias_multiplier_", "device"): 100 * F}


def test_a_file_ssd_reads_stays_ssds(tmp_path):
    """CHaiDNN's caffe.proto carries SSD's PriorBox, Normalize, Permute and DetectionOutput parameters field for
    field: a net of SSD's Normalize with norm_param, which both read, is SSD's (DESCENDS_FROM)."""
    path = tmp_path / "n.prototxt"
    path.write_text(INPUT + 'layer { name: "n" type: "Normalize" bottom: "data" top: "n" '
                    'norm_param { across_spatial: false } }\n')
    assert load(str(path)).schema.name == "ssd"


def test_the_deploy_net_by_hand():
    """deploy.prototxt: Input 1x1x16x16; three Convolutions, 3x3 pad 1 stride 1 (the size kept), of 2, 4 and 8
    outputs, each with precision_param, each followed by a MAX Pooling 2x2 stride 2 (16 -> 8 -> 4 -> 2:
    ceil((H - 2) / 2) + 1, pooling_layer.cpp's Reshape) and an in-place ReLU; InnerProduct 8, in-place ReLU,
    InnerProduct 2, Softmax.
    Net::Init's 'Memory required for data' counts every top's count once a layer (in-place ones again, net.cpp):
    data 256, conv1 512, pool1 128, relu1 128, conv2 256, pool2 64, relu2 64, conv3 128, pool3 32, relu3 32,
    ip1 8, iprelu1 8, ip2 2, prob 2 = 1,620 floats, 6,480 bytes.
    Parameters: conv1 2*1*9 + 2, conv2 4*2*9 + 4, conv3 8*4*9 + 8, ip1 8*32 + 8, ip2 2*8 + 2 = 674.
    col_buffer_ of conv1, conv2, conv3: 1*9 x 256, 2*9 x 64, 4*9 x 16 floats."""
    assert load(NET).schema.name == "chaidnn"
    net = build_nets(NET)[0]
    assert [tops(net, n)[0] for n in ("conv1", "pool1", "conv2", "pool2", "conv3", "pool3", "ip1", "ip2", "prob")] == [
        (1, 2, 16, 16), (1, 2, 8, 8), (1, 4, 8, 8), (1, 4, 4, 4), (1, 8, 4, 4), (1, 8, 2, 2), (1, 8), (1, 2), (1, 2)]
    for name, floats in (("conv1", 9 * 256), ("conv2", 18 * 64), ("conv3", 36 * 16)):
        assert layer_buffers(net, name)[("col_buffer_", "device")] == floats * F
    r = run_in_process("--format", "json", "deploy.prototxt", cwd=HERE, timeout=120)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["nets"][0]["memory_required_for_data"] == 1620 * F
    params = sum(layer["param_elements"] for layer in report["nets"][0]["layers"] if layer.get("param_elements"))
    assert params == 18 + 2 + 72 + 4 + 288 + 8 + 256 + 8 + 16 + 2


def test_the_deploy_net_audits_with_no_flags():
    """Tried as a new user would: `protoaudit deploy.prototxt` in the net's folder."""
    r = run_in_process("deploy.prototxt", cwd=HERE, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout and "CHaiDNN" in r.stdout and not r.stderr
