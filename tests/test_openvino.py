"""OpenVINO's training toolbox Caffe (openvinotoolkit/training_toolbox_caffe 5e543a4, its caffe/ folder): its
schema, its own layers held against its source, and the toolbox's training nets.

Expected values are derived by hand below from that commit's caffe/src/caffe/layers/{prior_box_clustered,
smooth_l1_loss,softmax_loss,cudnn_conv,base_data,annotated_data}_layer.* and include/caffe/layers, cited by
file and line. The nets are in tests/data/openvino (tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops, touched
from protoaudit.errors import InputError
from protoaudit.memory.buffers import layer_touches
from protoaudit.read.load import load

NETS = os.path.join(DATA, "openvino")
FACE_TRAIN = os.path.join(NETS, "face_detection_train.prototxt")
F = 4  # bytes per float

INPUTS = """
input: "feat" input_shape { dim: 2 dim: 8 dim: 5 dim: 7 }
input: "img" input_shape { dim: 2 dim: 3 dim: 80 dim: 112 }
input: "pred" input_shape { dim: 4 dim: 5 }
input: "label" input_shape { dim: 4 }
layer { name: "c" type: "Convolution" bottom: "feat" top: "c" convolution_param { num_output: 8 kernel_size: 1 } }
layer { name: "p" type: "Convolution" bottom: "pred" top: "q" convolution_param { num_output: 5 kernel_size: 1 } }
"""
PRIORS = """layer { name: "pb" type: "PriorBoxClustered" bottom: "c" bottom: "img" top: "pb"
  prior_box_param { width: 9.4 width: 25.1 width: 14.7 height: 15.0 height: 39.6 height: 25.5 %s } }"""


def build(tmp_path, body, **options):
    return build_text(tmp_path, INPUTS + body, schema="openvino", **options)


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "openvino.proto")).read()
    assert text.startswith("// openvinotoolkit/training_toolbox_caffe, caffe/src/caffe/proto/caffe.proto at commit "
                           "5e543a49c73190a091fe6ff364444a9714962ec0,\n// copied verbatim below this header")
    # PriorBoxClustered's sizes and InnerProduct's normalize (caffe.proto:1229, :1390-1393)
    assert "  repeated float width = 14;\n" in text and "  repeated float height = 15;\n" in text
    assert "  optional bool normalize = 7 [default = false];\n" in text


def test_priorboxclustered_shape(tmp_path):
    """prior_box_clustered_layer.cpp:125-136: (1, 2, W * H * num_priors * 4), num_priors the width count
    (cpp:67): bottom 0 is 5x7 and three widths, so 7 * 5 * 3 * 4 = 420. Its forward (cpp:140-205) writes
    only its top: no buffer, nothing read of the bottoms' data."""
    net = build(tmp_path, PRIORS % "")
    assert tops(net, "pb") == [(1, 2, 7 * 5 * 3 * 4)]
    assert layer_buffers(net, "pb") == {} and layer_buffers(net, "pb", mode="cpu") == {}
    assert touched(net, "pb") == {("top", 0, "data", "forward", "device")}


@pytest.mark.parametrize("body, message", [
    ('layer { name: "pb" type: "PriorBoxClustered" bottom: "c" bottom: "img" top: "pb" '
     'prior_box_param { width: 9.4 width: 25.1 height: 15.0 } }', "one height per width"),
    ('layer { name: "pb" type: "PriorBoxClustered" bottom: "c" bottom: "img" top: "pb" prior_box_param { } }',
     "must provide width"),
    ('layer { name: "pb" type: "PriorBoxClustered" bottom: "c" top: "pb" '
     'prior_box_param { width: 9.4 height: 15.0 } }', "reads the image size from bottom 1"),
])
def test_priorboxclustered_checks(tmp_path, body, message):
    """cpp:53 (a width), cpp:170-172 (a height read for every width: setup checks the counts only when heights
    are given, cpp:59-65), cpp:145-147 (bottom 1's size without img_size or img_h/img_w)."""
    with pytest.raises(InputError, match=message):
        build(tmp_path, body)


@pytest.mark.parametrize("param, message", [
    ("pool: MDS kernel_size: 2 stride: 2", "no rule for MDS pooling"),
    ("pool: MAX kernel_size: 2 stride: 2 dilation: 2", "Dilation implemented only for MDS pooling"),
])
def test_pooling_mds_and_dilation_are_refused(tmp_path, param, message):
    """pooling_layer.cpp:151-161 (MDS: C / (kh x kw) channels, no rule here) and :104-109 (dilation needs MDS)."""
    with pytest.raises(InputError, match=message):
        build(tmp_path, 'layer { name: "m" type: "Pooling" bottom: "c" top: "m" pooling_param { %s } }' % param)


def test_pooling_rounds_up(tmp_path):
    """pooling_layer.cpp:135-138: always ceil: a 2x2 window at stride 2 over 5x7 gives ceil(3 / 2) + 1 = 3 by
    ceil(5 / 2) + 1 = 4 (rounding down would give 2 by 3)."""
    net = build(tmp_path, 'layer { name: "m" type: "Pooling" bottom: "c" top: "m" '
                          'pooling_param { pool: MAX kernel_size: 2 stride: 2 } }')
    assert tops(net, "m") == [(2, 8, 3, 4)]


def test_depthwise_convolution_pads_zero_by_default(tmp_path):
    """conv_dw_layer.cpp:74-88: no pad given is 0: a 3x3 stride-1 window over 5x7 gives 3x5 (the top keeps the
    8 channels, cpp:131-140). Reshape fills weight_multiplier_ (N x Ho x Wo = 2 x 3 x 5) with ones on the host
    (cpp:148-155); the GPU backward copies it over and sums the weight's gradient through weight_buffer_
    (C x kh x kw x N x Ho x Wo = 8 x 9 x 30, cpp:143-148, cu:201-240)."""
    net = build(tmp_path, 'force_backward: true layer { name: "dw" type: "ConvolutionDepthwise" bottom: "c" top: "dw" '
                          'convolution_param { num_output: 8 kernel_size: 3 stride: 1 bias_term: false } }')
    assert tops(net, "dw") == [(2, 8, 3, 5)]
    assert layer_buffers(net, "dw") == {("weight_multiplier_ (host)", "host"): 30 * F,
                                        ("weight_multiplier_", "device"): 30 * F,
                                        ("weight_buffer_", "device"): 8 * 9 * 30 * F}


def test_smoothl1loss_has_cpu_code(tmp_path):
    """smooth_l1_loss_layer.cpp:71-80: diff_, errors_ and ones_ are bottom 0's size (4 x 5 = 20 floats each);
    its Forward_cpu and Backward_cpu (cpp:84-167) run in CPU mode where caffe-fast-rcnn's stop. In GPU mode
    ones_ is filled on the host (cpp:79) and copied over by the .cu's dot product, as caffe-fast-rcnn's."""
    net = build(tmp_path, 'layer { name: "l" type: "SmoothL1Loss" bottom: "q" bottom: "pred" top: "l" '
                          'loss_weight: 1 }')
    assert layer_buffers(net, "l", mode="cpu") == {("ones_", "host"): 20 * F, ("diff_", "host"): 20 * F,
                                                   ("errors_", "host"): 20 * F}
    assert layer_buffers(net, "l") == {("ones_ (host)", "host"): 20 * F, ("ones_", "device"): 20 * F,
                                       ("diff_", "device"): 20 * F, ("errors_", "device"): 20 * F}
    assert not [t for t in layer_touches(net.layer("l"), "cpu", "caffe") if t.what == "stop"]


def test_softmaxwithloss_has_no_gpu_code(tmp_path):
    """softmax_loss_layer.cpp with no .cu: scores (4, 5), labels (4). The inner Softmax (cpp:54-62: a bare
    LayerParameter, no loss weight so no prob_ diff) keeps prob_ (20 floats), sum_multiplier_ (5, read by the
    CPU code only) and, under Caffe's engine, scale_ (4); valid_losses_ is outer x inner = 4 x 1 (cpp:159-162).
    In GPU mode the forward reads prob_ and the labels and writes the losses into bottom 0's diff, all on the
    host (cpp:261-271)."""
    net = build(tmp_path, 'layer { name: "l" type: "SoftmaxWithLoss" bottom: "q" bottom: "label" top: "l" }')
    assert layer_buffers(net, "l") == {("sum_multiplier_", "host"): 5 * F, ("scale_", "device"): 4 * F,
                                       ("prob_", "device"): 20 * F, ("prob_ (host)", "host"): 20 * F,
                                       ("valid_losses_", "host"): 4 * F}
    assert layer_buffers(net, "l", mode="cpu") == {("sum_multiplier_", "host"): 5 * F, ("scale_", "host"): 4 * F,
                                                   ("prob_", "host"): 20 * F, ("valid_losses_", "host"): 4 * F}
    host = touched(net, "l")
    assert {("bottom", 0, "diff", "forward", "host"), ("bottom", 1, "data", "forward", "host")} <= host


def test_softmaxwithloss_class_weights(tmp_path):
    """cpp:96-111: weight_by_label_freqs keeps class_weights_, one float per class (5), filled on the host from
    class_weighting, whose count must be the class count (cpp:103-104)."""
    loss = 'layer { name: "l" type: "SoftmaxWithLoss" bottom: "q" bottom: "label" top: "l" loss_param { %s } }'
    weights = "weight_by_label_freqs: true " + "class_weighting: 1 " * 5
    net = build(tmp_path, loss % weights)
    assert layer_buffers(net, "l")[("class_weights_", "host")] == 5 * F
    with pytest.raises(InputError, match="4 class_weighting values for 5 classes"):
        build(tmp_path, loss % ("weight_by_label_freqs: true " + "class_weighting: 1 " * 4))


def test_normalized_inner_product(tmp_path):
    """inner_product_layer.cpp:137-141: with normalize and one bottom, Reshape keeps weight_norm_, one float per
    output (N_ = num_output, cpp:53): 6 here; the top is (4, 6) and the weight (6, 5) as BVLC's
    (cpp:80-86, 126-129). Without normalize it keeps none."""
    ip = 'layer { name: "ip" type: "InnerProduct" bottom: "pred" top: "ip" inner_product_param { num_output: 6 %s } }'
    net = build(tmp_path, ip % "normalize: true bias_term: false")
    assert tops(net, "ip") == [(4, 6)]
    assert layer_buffers(net, "ip") == {("weight_norm_", "device"): 6 * F}
    assert layer_buffers(build(tmp_path, ip % "bias_term: false"), "ip") == {}


def test_cudnn7_grouped_convolution_workspace(tmp_path):
    """cudnn_conv_layer.cpp:79-80 and :269-270 (cuDNN 7): 3 workspaces serve every group, where BVLC's keeps
    3 per group. A 3x3 group-4 convolution of the 8x5x7 map: one group's GEMM need is 2 channels x 9 x 35
    outputs floats, under the 8 MiB limit; x 3 streams, not x 4 groups x 3."""
    conv = ('layer { name: "g" type: "Convolution" bottom: "c" top: "g" '
            'convolution_param { num_output: 8 kernel_size: 3 pad: 1 group: 4 } }')
    net = build(tmp_path, conv)
    assert layer_buffers(net, "g", engine="cudnn")[("workspace", "device")] == 2 * 9 * 35 * F * 3


def test_annotated_data_prefetches_as_bvlc(tmp_path):
    """base_data_layer.cpp:76-80: data_param.prefetch batches (default 4, caffe.proto:978), where SSD's keeps
    3 (PREFETCH_COUNT). The face detector's data top is 8x3x300x300 (its crop, batch 8)."""
    net = load_and_build(FACE_TRAIN)
    prefetch = {b.owner: b.bytes for b in _buffers(net) if b.owner.startswith("data.prefetch") and b.device == "device"}
    assert prefetch["data.prefetch[4].data"] == 4 * 8 * 3 * 300 * 300 * F


def load_and_build(path):
    from protoaudit.audit import build_nets
    return build_nets(path)[0]


def _buffers(net):
    from protoaudit.memory.buffers import net_buffers
    return net_buffers(net, mode="gpu", engine="caffe")


def test_an_ssd_net_stays_ssds():
    """schema.DESCENDS_FROM: a file SSD's schema reads (no PriorBoxClustered) is SSD's."""
    assert load(os.path.join(DATA, "corpus", "nets", "mobilenet_ssd_train.prototxt")).schema.name == "ssd"
    assert load(FACE_TRAIN).schema.name == "openvino"


@pytest.mark.parametrize("name", ["crossroad_train", "face_detection_train", "face_detection_test"])
def test_the_toolbox_detectors_audit(name):
    """The crossroad and face detectors' nets read with the toolbox's schema and audit with no flag."""
    path = os.path.join(NETS, name + ".prototxt")
    assert load(path).schema.name == "openvino"
    run = run_in_process(path)
    assert run.returncode == 0, run.stderr
    assert "OpenVINO's training toolbox Caffe" in run.stdout


def test_face_detector_priors_by_hand():
    """face_detection/train.prototxt: fc7_mbox_priorbox has 9 widths (and 9 heights), so 9 priors per cell of
    fc7 (Concat10's top). fc7 is 19x19: the 300x300 image (its WARP resize) through Convolution1 (7x7, stride 2,
    pad 3: floor(299 / 2) + 1 = 150), Pooling1 (3x3, stride 2, rounding up: ceil(147 / 2) + 1 = 75), and the
    stride-2 1x1 squeezes of fire5 (floor(74 / 2) + 1 = 38) and fire9 (floor(37 / 2) + 1 = 19). So the top is
    (1, 2, 19 * 19 * 9 * 4) (prior_box_clustered_layer.cpp:134)."""
    text = open(FACE_TRAIN).read()
    layer = text[text.index('name: "fc7_mbox_priorbox"'):]
    layer = layer[:layer.index("\nlayer {")]
    assert layer.count("width:") == 9 and layer.count("height:") == 9
    net = load_and_build(FACE_TRAIN)
    assert tops(net, "Concat10")[0][2:] == (19, 19)
    assert tops(net, "fc7_mbox_priorbox") == [(1, 2, 19 * 19 * 9 * 4)]


def test_the_action_recognition_net_is_refused_naming_its_python_data_layer():
    """person_detection_action_recognition/train.prototxt reads its data in the toolbox's Python DataLayer
    (caffe.custom_layers.data_layer, whose size is in a data_config.json it reads at run time) and computes its
    losses in more Python layers: no size protoaudit tries fits its Reshape to a 25x43 map, so it is refused
    with the --input line for the data."""
    run = run_in_process(os.path.join(NETS, "person_detection_action_recognition_train.prototxt"))
    assert run.returncode == 2
    assert "its data comes from Python code" in run.stderr and "--input data=" in run.stderr
