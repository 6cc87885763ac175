"""The mobile and detection forks' layers: MobileNet-YOLO's Caffe (eric612/MobileNet-YOLO 69b4441,
which carries yonghenglh6's DepthwiseConvolution and SENet's Axpy byte for byte) and farmingyard's
ShuffleChannel (ShuffleNet b962444) and ConvolutionDepthwise (caffe-mobilenet f7d7d13).

Expected values are derived by hand below from each fork's source, cited by file:line
(eric612's src/caffe/layers/ and src/caffe/proto/caffe.proto; farmingyard's files at the
repository root), and the real nets of tests/data/mobile_forks (SOURCES.md there) are read with
the schema of the fork they come from.
"""
import json
import os
import re

import pytest

from conftest import DATA, ROOT, build_text as build, run_protoaudit, tops
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

NETS = os.path.join(DATA, "mobile_forks")
F = 4  # bytes per float


def owners(net, layer, mode):
    """{buffer name: (bytes, device)} of a layer's own buffers, one forward and one backward."""
    return {b.owner[len(layer) + 1:]: (b.bytes, b.device) for b in net_buffers(net, mode=mode)
            if b.layer == layer and b.owner.startswith(layer + ".") and ".param" not in b.owner}


# --- the schemas and which fork a file is --------------------------------------------------------

def test_the_mobilenet_yolo_proto_is_the_forks_file_verbatim():
    """Header naming repository, path and commit; then eric612's caffe.proto, whose fields the
    nets use have the fork's numbers (caffe.proto:593-660)."""
    text = open(os.path.join(ROOT, "proto", "forks", "mobilenet_yolo.proto")).read()
    assert text.startswith("// MobileNet-YOLO's Caffe (eric612/MobileNet-YOLO)")
    assert "// Commit: 69b4441cb3ec8d553fbdef788ad033e246f901bd" in text
    for line in ("optional Yolov3Parameter yolov3_param = 603;", "optional ReLUParameter relu6_param = 211;",
                 "optional UpsampleParameter upsample_param = 150;",
                 "optional Yolov3DetectionOutputParameter yolov3_detection_output_param = 602;",
                 "repeated ResizeParameter resize_param = 8;"):
        assert line in text


def test_the_shufflenet_proto_is_bvlcs_with_the_readmes_two_additions():
    """farmingyard/ShuffleNet's README.md gives the field and the message; the rest is BVLC's file."""
    text = open(os.path.join(ROOT, "proto", "forks", "shufflenet.proto")).read()
    bvlc = open(os.path.join(ROOT, "proto", "caffe.proto")).read()
    field = "optional ShuffleChannelParameter shuffle_channel_param = 164;\n"
    message = "message ShuffleChannelParameter {\n  optional uint32 group = 1[default = 1]; // The number of group\n}\n"
    body = text[text.index("syntax"):]
    assert body.endswith(message)
    assert body[: -len(message)].replace(field, "", 1) == bvlc


@pytest.mark.parametrize("name, fork", [
    ("mobilenet_yolov3_lite_train", "mobilenet_yolo"),  # AnnotatedData's repeated resize_param, Yolov3
    ("mobilenet_yolov3_lite_deploy", "mobilenet_yolo"),  # BVLC's fields, DepthwiseConvolution
    ("darknet_yolov3_deploy", "mobilenet_yolo"),  # upsample_param
    ("se_resnet50_deploy", "mobilenet_yolo"),  # BVLC's fields, Axpy: the shipped Caffe that carries it
    ("depthwised_mobilenet_deploy", "mobilenet_yolo"),  # BVLC's fields, DepthwiseConvolution
    ("shufflenet_1x_g3_deploy", "shufflenet"),  # shuffle_channel_param
    ("mobilenet_1by2_deploy", "shufflenet"),  # BVLC's fields, ConvolutionDepthwise
])
def test_each_forks_net_is_read_with_its_schema(name, fork):
    assert load(os.path.join(NETS, name + ".prototxt")).schema.name == fork


def test_a_solver_with_stage_learning_rates_is_the_forks():
    """stagelr and stageiter are SolverParameter fields 50 and 51 of eric612's caffe.proto only."""
    assert load(os.path.join(NETS, "yolo_lite_solver.prototxt")).schema.name == "mobilenet_yolo"


def test_an_ssd_net_stays_the_ssd_forks():
    """MobileNet-YOLO's Caffe reads the SSD fork's nets too: a file both read is the ancestor's."""
    assert load(os.path.join(DATA, "corpus", "nets", "mobilenet_ssd_train.prototxt")).schema.name == "ssd"


@pytest.mark.parametrize("name", ["mobilenet_yolov3_lite_train", "mobilenet_yolov3_lite_deploy",
                                  "darknet_yolov3_deploy", "se_resnet50_deploy", "depthwised_mobilenet_deploy",
                                  "shufflenet_1x_g3_deploy", "mobilenet_1by2_deploy"])
def test_each_forks_net_audits_with_no_flags(name):
    done = run_protoaudit(os.path.join(NETS, name + ".prototxt"))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


# --- DepthwiseConvolution (yonghenglh6's, in eric612's Caffe) ---------------------------------------

INPUT = 'layer {{ name: "in" type: "Input" top: "x" input_param {{ shape {{ {dims} }} }} }}\n'


def dims(*shape):
    return " ".join(f"dim: {d}" for d in shape)


DW = "force_backward: true\n" + INPUT.format(dims=dims(2, 8, 9, 9)) + """
layer { name: "dw" type: "DepthwiseConvolution" bottom: "x" top: "y"
        convolution_param { num_output: 8 group: 8 kernel_size: 3 stride: 2 pad: 1 } }
"""


def test_depthwise_convolution_shapes_are_base_convolutions(tmp_path):
    """compute_output_shape (depthwise_conv_layer.cpp:6-20): (9 + 2 - 3) / 2 + 1 = 5; the weight
    (num_output, C / group, 3, 3) and the bias as BaseConvolutionLayer makes them."""
    net = build(tmp_path, DW)
    assert tops(net, "dw") == [(2, 8, 5, 5)]
    assert [p.shape for p in net.layer("dw").params] == [(8, 1, 3, 3), (8,)]


def test_depthwise_convolution_on_the_gpu_has_no_column_buffer_and_no_workspace(tmp_path):
    """Forward_gpu and Backward_gpu (.cu:66-107, 261-333) run its own kernels: no col_buffer_,
    and, registered by its own name, never cuDNN. bias_multiplier_ (Ho*Wo = 25) is set on the host."""
    net = build(tmp_path, DW)
    assert owners(net, "dw", "gpu") == {"bias_multiplier_": (25 * F, "host")}
    assert not [b for b in net_buffers(net, mode="gpu", engine="cudnn") if b.kind == "workspace"]


def test_depthwise_convolution_on_the_cpu_is_im2col(tmp_path):
    """Forward_cpu is BaseConvolutionLayer's forward_cpu_gemm (cpp:23-39): one image's column
    buffer, C * 3 * 3 x Ho * Wo = 8 * 9 * 25 floats, and bias_multiplier_ (25)."""
    net = build(tmp_path, DW)
    assert owners(net, "dw", "cpu") == {"bias_multiplier_": (25 * F, "host"), "col_buffer_": (8 * 9 * 25 * F, "host")}


# --- ConvolutionDepthwise (farmingyard's) -------------------------------------------------------

def conv_dw(params, bias=True):
    return "force_backward: true\n" + INPUT.format(dims=dims(2, 6, 7, 7)) + f"""
layer {{ name: "dw" type: "ConvolutionDepthwise" bottom: "x" top: "y"
        convolution_param {{ num_output: 99 {params} bias_term: {str(bias).lower()} }} }}
"""


def test_convolution_depthwise_keeps_the_bottoms_channels(tmp_path):
    """Reshape (conv_dw_layer.cpp:104-111): (N, C, Ho, Wo), num_output unread; the weight
    (C, 1, kh, kw) and bias (C) (cpp:75-98); kernel_h/kernel_w when both are set (cpp:12-14)."""
    net = build(tmp_path, conv_dw("kernel_size: 3 stride: 1 pad: 1"))
    assert tops(net, "dw") == [(2, 6, 7, 7)]
    assert [p.shape for p in net.layer("dw").params] == [(6, 1, 3, 3), (6,)]
    net = build(tmp_path, conv_dw("kernel_h: 3 kernel_w: 1 stride: 2 pad: 1", bias=False))
    assert tops(net, "dw") == [(2, 6, 4, 5)]  # (7 + 2 - 3) / 2 + 1, (7 + 2 - 1) / 2 + 1
    assert [p.shape for p in net.layer("dw").params] == [(6, 1, 3, 1)]


def test_convolution_depthwise_buffers_by_hand(tmp_path):
    """N * Ho * Wo = 2 * 7 * 7 = 98. Reshape fills weight_multiplier_ and bias_multiplier_ (98 each)
    on the device (cpp:120-139); the GPU backward adds bias_buffer_ (C x 98 = 588, .cu:172) and
    weight_buffer_ (C x 3 x 3 x 98 = 5292, .cu:186); the CPU backward none (cpp:208-275)."""
    net = build(tmp_path, conv_dw("kernel_size: 3 stride: 1 pad: 1"))
    assert owners(net, "dw", "gpu") == {"weight_multiplier_": (98 * F, "device"), "bias_multiplier_": (98 * F, "device"),
                                        "bias_buffer_": (588 * F, "device"), "weight_buffer_": (5292 * F, "device")}
    assert owners(net, "dw", "cpu") == {"weight_multiplier_": (98 * F, "host"), "bias_multiplier_": (98 * F, "host")}


def test_convolution_depthwise_needs_stride_and_pad(tmp_path):
    """It reads stride(0) and pad(0) even when none is given (conv_dw_layer.cpp:31-56)."""
    with pytest.raises(InputError, match="reads stride"):
        build(tmp_path, conv_dw("kernel_size: 3 pad: 1"))


# --- ShuffleChannel, ReLU6, Axpy, Upsample --------------------------------------------------------

def shuffle(group):
    return INPUT.format(dims=dims(2, 6, 4, 4)) + f"""
layer {{ name: "s" type: "ShuffleChannel" bottom: "x" top: "y" shuffle_channel_param {{ group: {group} }} }}
"""


def test_shuffle_channel_keeps_the_shape_and_needs_a_dividing_group(tmp_path):
    """shuffle_channel_layer.cpp:33-41 (same shape), :56 (channels = group x column)."""
    assert tops(build(tmp_path, shuffle(3)), "s") == [(2, 6, 4, 4)]
    assert owners(build(tmp_path, shuffle(3)), "s", "gpu") == {}
    with pytest.raises(InputError, match="Wrong group size"):
        build(tmp_path, shuffle(4))


def test_relu6_is_a_neuron_of_the_fork(tmp_path):
    """ReLU6Layer is a NeuronLayer (relu6_layer.hpp:18): the bottom's shape, in place allowed."""
    text = INPUT.format(dims=dims(2, 3, 5, 5)) + 'layer { name: "r" type: "ReLU6" bottom: "x" top: "x" }\n'
    assert tops(build(tmp_path, text), "r") == [(2, 3, 5, 5)]
    assert owners(build(tmp_path, text), "r", "gpu") == {}
    assert load(str(tmp_path / "net.prototxt")).schema.name == "mobilenet_yolo"


AXPY = "force_backward: true\n" + INPUT.format(dims=dims(2, 6, 1, 1)).replace('"in"', '"a"').replace('"x"', '"a"') \
    + INPUT.format(dims=dims(2, 6, 4, 5)) + INPUT.format(dims=dims(2, 6, 4, 5)).replace('"in"', '"yi"').replace('"x"', '"y"') \
    + 'layer { name: "axpy" type: "Axpy" bottom: "a" bottom: "x" bottom: "y" top: "z" }\n'


def test_axpy_takes_xs_shape_and_one_multiplier(tmp_path):
    """axpy_layer.cpp:13-28: top like x (2, 6, 4, 5); spatial_sum_multiplier_ H*W = 20 ones on the
    host, which only the CPU backward reads."""
    net = build(tmp_path, AXPY)
    assert tops(net, "axpy") == [(2, 6, 4, 5)]
    assert owners(net, "axpy", "gpu") == {"spatial_sum_multiplier_": (20 * F, "host")}


def test_axpy_refuses_a_scale_per_pixel(tmp_path):
    with pytest.raises(InputError, match=re.escape("must be (N, C, 1, 1)")):
        build(tmp_path, AXPY.replace("dim: 2 dim: 6 dim: 1 dim: 1", "dim: 2 dim: 6 dim: 4 dim: 5"))


def upsample(shape, scale=2):
    return INPUT.format(dims=dims(*shape)) + f"""
layer {{ name: "up" type: "Upsample" bottom: "x" top: "y" upsample_param {{ scale: {scale} }} }}
"""


def test_upsample_multiplies_the_last_two_axes(tmp_path):
    """upsample_layer.cpp:14-23; one bottom (hpp:23-25), no buffer."""
    net = build(tmp_path, upsample((1, 4, 13, 13)))
    assert tops(net, "up") == [(1, 4, 26, 26)]
    assert owners(net, "up", "gpu") == {}
    with pytest.raises(InputError, match=re.escape("(N, C, H, W)")):
        build(tmp_path, upsample((4, 13, 13)))


def test_a_one_bottom_upsample_is_mobilenet_yolos_and_a_two_bottom_one_enets(tmp_path):
    """caffe-enet's Upsample (caffe-segnet's) takes the pooling mask as bottom 1; eric612's takes
    one bottom (upsample_layer.hpp:23-25): each file is the fork whose layer takes its bottoms
    (caffe-enet, not caffe-segnet, for a net with an Input layer)."""
    head = INPUT.format(dims=dims(2, 3, 6, 6)) + ('layer { name: "pool" type: "Pooling" bottom: "x" top: "pool" '
                                                  'top: "mask" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n')
    one = head + 'layer { name: "up" type: "Upsample" bottom: "pool" top: "up" upsample_param { scale: 2 } }\n'
    (tmp_path / "one.prototxt").write_text(one + 'layer { name: "s" type: "Silence" bottom: "mask" }')
    (tmp_path / "two.prototxt").write_text(one.replace('bottom: "pool" top: "up"', 'bottom: "pool" bottom: "mask" top: "up"'))
    assert load(str(tmp_path / "one.prototxt")).schema.name == "mobilenet_yolo"
    assert load(str(tmp_path / "two.prototxt")).schema.name == "enet"


def test_darknet_yolov3_upsamples_13_to_26_and_26_to_52():
    """models/darknet_yolov3/yolov3.prototxt: 416 / 32 = 13 and 416 / 16 = 26, each scale 2."""
    from protoaudit import build_nets

    net = build_nets(os.path.join(NETS, "darknet_yolov3_deploy.prototxt"))[0]
    ups = [n for n in net.layers if n.type == "Upsample"]
    assert [tuple(n.top_shapes[0][2:]) for n in ups] == [(26, 26), (52, 52)]


# --- Yolov3 and Yolov3DetectionOutput --------------------------------------------------------------

def yolo_loss(channels=75, extra=""):
    return ("force_backward: true\n" + INPUT.format(dims=dims(2, channels, 13, 13))
            + INPUT.format(dims=dims(2, 1, 300, 5)).replace('"in"', '"lab"').replace('"x"', '"label"')
            + f"""layer {{ name: "loss" type: "Yolov3" bottom: "x" bottom: "label" top: "loss"
        propagate_down: true propagate_down: false yolov3_param {{ num: 3 num_class: 20 {extra} }} }}
""")


def test_yolov3_loss_checks_the_predictions_size(tmp_path):
    """LayerSetUp (yolov3_layer.cpp:435-440): 13 * 13 * 3 * (4 + 20 + 1) = 75 channels of 13 x 13."""
    net = build(tmp_path, yolo_loss())
    assert tops(net, "loss") == [()]
    with pytest.raises(InputError, match="75 channels per cell"):
        build(tmp_path, yolo_loss(channels=76))


def test_yolov3_loss_buffers_by_hand(tmp_path):
    """diff_ and swap_ are the predictions' size, 2 * 75 * 169 = 25350 floats. CPU: both in the
    forward (cpp:473-487). GPU: swap_ filled on the device (.cu:19) and read on the host with diff_
    by the CPU forward it calls (.cu:32); the backward reads diff_ on the device (.cu:47-52)."""
    size = 2 * 75 * 169 * F
    net = build(tmp_path, yolo_loss())
    assert owners(net, "loss", "cpu") == {"diff_": (size, "host"), "swap_": (size, "host")}
    assert owners(net, "loss", "gpu") == {"swap_": (size, "device"), "swap_ (host)": (size, "host"),
                                          "diff_ (host)": (size, "host"), "diff_": (size, "device")}
    logic = build(tmp_path, yolo_loss(extra="use_logic_gradient: true"))
    assert "diff_" not in owners(logic, "loss", "gpu")  # its backward is the CPU one (.cu:41-42)


def detection_output(extra=""):
    return (INPUT.format(dims=dims(1, 75, 13, 13)) + INPUT.format(dims=dims(1, 75, 26, 26)).replace('"in"', '"in2"')
            .replace('"x"', '"x2"') + f"""layer {{ name: "det" type: "Yolov3DetectionOutput" bottom: "x" bottom: "x2"
        top: "det" yolov3_detection_output_param {{ num_classes: 20 num_box: 3 {extra} }} }}
""")


def test_yolov3_detection_output_grows_to_every_box_of_every_scale(tmp_path):
    """(1, 1, 1, 7) at setup (cpp:216-229); at most one box per cell and anchor of each scale,
    (13 * 13 + 26 * 26) * 3 = 2535 rows of 7 after a forward (cpp:352-373); swap_ grows to the
    larger bottom, 75 * 26 * 26 (cpp:255), on the device and the host in GPU mode (.cu:24, :52)."""
    net = build(tmp_path, detection_output())
    assert tops(net, "det") == [(1, 1, 1, 7)]
    swap = 75 * 26 * 26 * F
    assert owners(net, "det", "gpu") == {"swap_": (swap, "device"), "swap_ (host)": (swap, "host"),
                                         "top (kept detections)": (2534 * 7 * F, "host")}
    kept = build(tmp_path, detection_output(), defines={"detections": "10"})
    assert owners(kept, "det", "cpu")["top (kept detections)"] == (9 * 7 * F, "host")


def test_yolov3_detection_output_needs_one_bottom_per_mask_group(tmp_path):
    with pytest.raises(InputError, match="mask_group_num is 3"):
        build(tmp_path, detection_output("mask_group_num: 3"))


# --- the fork's AnnotatedData, on the real train net ----------------------------------------------

def test_annotated_data_trains_at_the_largest_size_with_yolo_labels():
    """models/yolov3/mobilenet_yolov3_lite_train.prototxt: ten resize_params (608, 416, 320, 352,
    384, 448, 480, 512, 544, 576; prob 0.1 each), batch_size 7, yolo_data_type 1. Every 10th batch
    draws one (annotated_data_layer.cpp:221-241), so the blobs grow to 608 x 608; the label is
    (7, 1, 300, 5) (cpp:116-120); the two loss inputs are 608 / 32 = 19 and 608 / 16 = 38 cells
    of 3 x (5 + 20) channels."""
    from protoaudit import build_nets

    net = build_nets(os.path.join(NETS, "mobilenet_yolov3_lite_train.prototxt"))[0]
    assert tops(net, "data") == [(7, 3, 608, 608), (7, 1, 300, 5)]
    losses = [n for n in net.layers if n.type == "Yolov3"]
    assert [tuple(n.bottom_shapes[0]) for n in losses] == [(7, 75, 19, 19), (7, 75, 38, 38)]


def test_annotated_data_names_the_size_it_assumed(protoaudit):
    done = protoaudit(os.path.join(NETS, "mobilenet_yolov3_lite_train.prototxt"))
    assert done.returncode == 0, done.stderr
    assert "trains at 10 sizes drawn at random; protoaudit takes the largest, 608x608" in done.stdout


# --- the real nets' shapes --------------------------------------------------------------------

def test_real_nets_shapes_by_hand():
    """ShuffleNet 1x g3 (its paper's table 1: stage 2 of 240 channels at 28 x 28, 960 channels into
    the classifier): the first unit's bottleneck, (240 - 24) / 4 = 54 channels, goes from 56 x 56
    to 28 x 28 in the stride-2 depthwise conv; the next units' is 240 / 4 = 60, shuffled in 3 groups. SE-ResNet-50: the first block's excitation scales 256 channels of 56 x 56.
    MobileNet 0.5 (caffe-mobilenet): conv2_1/dw keeps 16 channels of 112 x 112."""
    from protoaudit import build_nets

    def node(name, layer):
        net = build_nets(os.path.join(NETS, name + ".prototxt"))[0]
        return next(n for n in net.layers if n.name == layer)

    assert node("shufflenet_1x_g3_deploy", "resx1_conv2").top_shapes == ((1, 54, 28, 28),)
    assert node("shufflenet_1x_g3_deploy", "shuffle2").top_shapes == ((1, 60, 28, 28),)
    assert node("shufflenet_1x_g3_deploy", "fc1000").bottom_shapes == ((1, 960, 1, 1),)
    axpy = node("se_resnet50_deploy", "conv2_1")
    assert axpy.bottom_shapes == ((1, 256, 1, 1), (1, 256, 56, 56), (1, 256, 56, 56))
    assert axpy.top_shapes == ((1, 256, 56, 56),)
    assert node("mobilenet_1by2_deploy", "conv2_1/dw").top_shapes == ((1, 16, 112, 112),)


MIXED = """name: "mixed"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 8 dim: 16 dim: 16 } } }
layer { name: "dw" type: "ConvolutionDepthwise" bottom: "data" top: "dw"
  convolution_param { num_output: 8 group: 8 kernel_size: 3 pad: 1 stride: 1 } }
layer { name: "relu" type: "ReLU6" bottom: "dw" top: "dw" }
"""


def test_a_net_whose_types_no_one_fork_knows_borrows_the_missing_one(tmp_path):
    """ConvolutionDepthwise is caffe-mobilenet's (the shufflenet fork here), ReLU6 MobileNet-YOLO's;
    eric612's MnasNet-caffe uses both (its Caffe added one to the other). The file is read with the
    fork that lacks the fewest types, the one it lacks sized as the fork that has it defines it, and
    the report says so. Hand derivation: the depthwise top is (16 + 2*1 - 3)/1 + 1 = 16 a side, 8
    channels; its weights 8 x 1 x 3 x 3 = 72 and 8 biases: 80 parameters."""
    path = tmp_path / "mixed.prototxt"
    path.write_text(MIXED)
    r = run_protoaudit(str(path), "--format", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    (net,) = report["nets"]
    dw = next(layer for layer in net["layers"] if layer["name"] == "dw")
    assert dw["tops"] == [[1, 8, 16, 16]] and dw["param_elements"] == 80
    (said,) = [a["assumption"] for a in report["assumptions"] if "every layer type" in a["assumption"]]
    assert "MobileNet-YOLO" in said and "ConvolutionDepthwise as" in said and "farmingyard" in said
    r = run_protoaudit(str(path), "--fork", "mobilenet_yolo")  # a fork named is that fork alone
    assert r.returncode == 2
    assert "unknown layer type 'ConvolutionDepthwise'" in r.stderr and "--fork shufflenet" in r.stderr


def test_a_borrowing_reading_takes_the_bottoms_the_file_gives(tmp_path):
    """ChenYingpeng/caffe-yolov3's MobileNetV2-YOLOv3: ConvolutionDepthwise beside a one-bottom Upsample.
    SegNet's, ENet's and MobileNet-YOLO's Caffe each lack only ConvolutionDepthwise, but SegNet's and
    ENet's Upsample take the pooling mask as a second bottom: MobileNet-YOLO's reading is the one
    taken (tried as a new user would: SegNet's was, and the one-bottom Upsample was refused).
    MobileNet-YOLO's Upsample (upsample_layer.cpp) multiplies height and width by `scale`: 16 x 2."""
    path = tmp_path / "yolo.prototxt"
    path.write_text(MIXED.replace('layer { name: "relu" type: "ReLU6" bottom: "dw" top: "dw" }',
                                  'layer { name: "up" type: "Upsample" bottom: "dw" top: "up" upsample_param { scale: 2 } }'))
    r = run_protoaudit(str(path), "--format", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    up = next(layer for layer in report["nets"][0]["layers"] if layer["name"] == "up")
    assert up["tops"] == [[1, 8, 32, 32]]
    (said,) = [a["assumption"] for a in report["assumptions"] if "every layer type" in a["assumption"]]
    assert "MobileNet-YOLO" in said and "ConvolutionDepthwise as" in said


def test_the_fork_that_lacks_the_fewest_types_reads_the_file(tmp_path):
    """With ShuffleChannel too, MobileNet-YOLO would lack two types and the shufflenet fork one
    (ReLU6): the file is read with the shufflenet fork's, ReLU6 borrowed. ShuffleChannel keeps the
    shape: (1, 8, 16, 16) with group 2."""
    path = tmp_path / "shuffle.prototxt"
    path.write_text(MIXED + 'layer { name: "shuffle" type: "ShuffleChannel" bottom: "dw" top: "shuffle" '
                    'shuffle_channel_param { group: 2 } }\n')
    r = run_protoaudit(str(path), "--format", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    (net,) = report["nets"]
    shuffle = next(layer for layer in net["layers"] if layer["name"] == "shuffle")
    assert shuffle["tops"] == [[1, 8, 16, 16]]
    (said,) = [a["assumption"] for a in report["assumptions"] if "every layer type" in a["assumption"]]
    assert "read with the caffe.proto of BVLC Caffe with farmingyard's" in said and "ReLU6 as MobileNet-YOLO" in said
