"""DRML's Caffe (jellyDL/drml_caffe f508105, Deep Region and Multi-label Learning): its schema, Box, Splice,
ImageDataMultilabel and MultiSigmoidCrossEntropyLoss held against its source, and the fork's own nets.

Expected values are derived by hand below from that commit's src/box_layer.cpp/.cu, src/splice.cpp/.cu,
src/image_data_multilabel_layer.cpp, src/multi_sigmoid_cross_entropy_loss_layer.cpp/.cu and include/*.hpp,
cited by file and line. The nets are in tests/data/drml (tests/data/SOURCES.md).
"""
import math
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops, touched
from protoaudit.audit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import layer_touches
from protoaudit.read.load import load

NETS = os.path.join(DATA, "drml")
TRAIN = os.path.join(NETS, "DRML_train_val_bn.prototxt")
DEPLOY = os.path.join(NETS, "deploy_DRML.prototxt")
BATCH_NET = os.path.join(NETS, "DRML_train_val.prototxt")
F = 4  # bytes per float

INPUT = 'input: "x" input_shape { dim: 2 dim: 3 dim: 10 dim: 12 }\n'


def build(tmp_path, body, head=INPUT, **options):
    return build_text(tmp_path, head + body, schema="drml", **options)


def splice(count, xs, ys, side=10):
    """`count` bottoms of 1x2xsidexside pasted at (xs[i], ys[i])."""
    head = "".join(f'input: "b{i}" input_shape {{ dim: 1 dim: 2 dim: {side} dim: {side} }}\n' for i in range(count))
    coords = " ".join(f"xcoord: {x}" for x in xs) + " " + " ".join(f"ycoord: {y}" for y in ys)
    body = (f'layer {{ name: "s" type: "Splice" {" ".join(f"bottom: {chr(34)}b{i}{chr(34)}" for i in range(count))} '
            f'top: "s" splice_param {{ {coords} }} }}')
    return head, body


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "drml.proto")).read()
    assert text.startswith("// jellyDL/drml_caffe, caffe.proto at commit "
                           "f508105bb0f2d7d79305fcbd8f3efcde215d66eb,\n// copied verbatim below this header")
    # caffe.proto:408-409, :828 of the fork
    assert "  optional BoxParameter box_param = 147;\n  optional SpliceParameter splice_param = 148;\n" in text
    assert "  optional uint32 multilabel_num = 15 [default = 0];// DRML CVPR\n" in text


def test_box_shapes_and_host_touches(tmp_path):
    """box_layer.cpp:46-49: every top (num, channels, height, width) = (2, 3, 4, 5) of the 2x3x10x12 bottom.
    box_layer.cu:17, 27 run the CPU code: the bottom's host data, each top's host data (cpp:60, 67), and
    backward each top's host diff and the bottom's host diff (cpp:97, 104)."""
    body = """layer { name: "c" type: "Convolution" bottom: "x" top: "c"
      convolution_param { num_output: 3 kernel_size: 1 } }
    layer { name: "box" type: "Box" bottom: "c" top: "t0" top: "t1"
      box_param { width: 5 height: 4 xcoord: 0 xcoord: 7 ycoord: 0 ycoord: 6 } }
    layer { name: "l" type: "EuclideanLoss" bottom: "t0" bottom: "t1" top: "loss" }"""
    net = build(tmp_path, body)
    assert tops(net, "box") == [(2, 3, 4, 5)] * 2
    seen = touched(net, "box")
    assert ("bottom", 0, "data", "forward", "host") in seen and ("bottom", 0, "diff", "backward", "host") in seen
    assert {("top", j, "data", "forward", "host") for j in (0, 1)} <= seen
    assert {("top", j, "diff", "backward", "host") for j in (0, 1)} <= seen
    assert layer_buffers(net, "box") == {}  # box_layer.hpp:42-48: ints and vectors of ints, no Blob


def test_box_past_the_blob_is_refused(tmp_path):
    """cpp:76: bottom index b*c*H*W + c*H*W + h*W + x + i, at b = 1, c = 2 (the last) reaching
    2*2*120 + (y + 4 - 1)*12 + x + 5 - 1. With y = 16 (past the 10 rows, inside the blob's 720 elements for
    the second image only by the source's b*c index): 480 + 19*12 + 0 + 4 = 712 < 720, built. y = 17:
    480 + 240 + 4 = 724 >= 720: out of bounds."""
    body = """layer { name: "box" type: "Box" bottom: "x" top: "t0"
      box_param { width: 5 height: 4 xcoord: 0 ycoord: %d } }"""
    assert tops(build(tmp_path, body % 16), "box") == [(2, 3, 4, 5)]
    with pytest.raises(InputError, match="element 724 of a blob of 720"):
        build(tmp_path, body % 17)
    with pytest.raises(InputError, match="2 boxes, but 1 xcoord"):  # cpp:68-69 read xcoord_[n], n < 2 tops
        build(tmp_path, """layer { name: "box" type: "Box" bottom: "x" top: "t0" top: "t1"
          box_param { width: 5 height: 4 xcoord: 0 ycoord: 0 ycoord: 1 } }""")


def test_splice_of_a_square_count(tmp_path):
    """splice.cpp:38-39: 4 bottoms of 1x2x10x10, sqrt(4) = 2.0: the top 1x2x20x20; host data of every
    bottom and of the top forward (cpp:49, 58), host diffs backward (cpp:92, 102)."""
    head, body = splice(4, [0, 10, 0, 10], [0, 0, 10, 10])
    net = build(tmp_path, body + '\nlayer { name: "r" type: "Reduction" bottom: "s" top: "r" loss_weight: 1 }',
                head="force_backward: true\n" + head)
    assert tops(net, "s") == [(1, 2, 20, 20)]
    seen = touched(net, "s")
    assert {("bottom", j, "data", "forward", "host") for j in range(4)} <= seen
    assert {("bottom", j, "diff", "backward", "host") for j in range(4)} <= seen
    assert ("top", 0, "data", "forward", "host") in seen and ("top", 0, "diff", "backward", "host") in seen
    assert layer_buffers(net, "s") == {}


def test_splice_truncates_the_double_as_the_source_does(tmp_path):
    """Two bottoms of 12x12: 12 * sqrt(2) = 16.97..., an int argument of Reshape: 16, not 17 (cpp:39, :54
    alike). The second bottom at (4, 4) reaches, for C = 2, N = 1, at c = 1: 1*1*16*16 + (4 + 12 - 1)*16 + 4
    + 12 - 1 = 256 + 240 + 15 = 511 < 2*16*16 = 512, inside: a count that is no square builds."""
    assert 12 * math.sqrt(2) > 16.9
    head, body = splice(2, [0, 4], [0, 4], side=12)
    assert tops(build(tmp_path, body, head=head), "s") == [(1, 2, 16, 16)]


def test_splice_out_of_bounds_is_refused(tmp_path):
    """Three bottoms: int(10 * 1.732...) = 17 (cpp:39). The third at (0, 10): at c = 1,
    1*1*17*17 + (10 + 10 - 1)*17 + 0 + 9 = 289 + 323 + 9 = 621 >= 2*17*17 = 578: cpp:74 writes past the top."""
    head, body = splice(3, [0, 10, 0], [0, 0, 10])
    with pytest.raises(InputError, match="element 621 of a blob of 578"):
        build(tmp_path, body, head=head)
    head, body = splice(3, [0, 10], [0, 0])
    with pytest.raises(InputError, match="3 boxes, but 2 xcoord"):  # cpp:60-61 read xcoord_[n], n < 3
        build(tmp_path, body, head=head)


def test_splice_reads_every_bottom_with_bottom_zeros_dimensions(tmp_path):
    """cpp:70: bottom n read at b*c*H*W + c*H*W + (h - y)*W + i with bottom 0's H, W, C: for 1x2x10x10, up to
    1*1*100 + 99 = 199; a second bottom of 1x1x10x10 holds 100."""
    head = ('input: "b0" input_shape { dim: 1 dim: 2 dim: 10 dim: 10 }\n'
            'input: "b1" input_shape { dim: 1 dim: 1 dim: 10 dim: 10 }\n')
    body = ('layer { name: "s" type: "Splice" bottom: "b0" bottom: "b1" top: "s" '
            'splice_param { xcoord: 0 xcoord: 0 ycoord: 0 ycoord: 0 } }')
    with pytest.raises(InputError, match="element 199 of a blob of 100"):
        build(tmp_path, body, head=head)


def test_multi_sigmoid_loss(tmp_path):
    """multi_sigmoid_cross_entropy_loss_layer.cpp:29: sigmoid_output_ like bottom 0, 2 x 7 floats on the
    device (the inner Sigmoid's Forward_gpu, cu:14) and its host copy read by Backward_cpu (cpp:69, cu:37);
    the label's host data (cu:20), bottom 0's host diff (cpp:71). The top's diff is never read (cpp:81)."""
    head = 'input: "p" input_shape { dim: 2 dim: 7 }\ninput: "y" input_shape { dim: 2 dim: 7 dim: 1 dim: 1 }\n'
    body = 'layer { name: "loss" type: "MultiSigmoidCrossEntropyLoss" bottom: "p" bottom: "y" top: "loss" }'
    net = build(tmp_path, body, head="force_backward: true\n" + head)
    assert tops(net, "loss") == [()]
    assert layer_buffers(net, "loss") == {("sigmoid_output_", "device"): 14 * F,
                                          ("sigmoid_output_ (host)", "host"): 14 * F}
    assert layer_buffers(net, "loss", mode="cpu") == {("sigmoid_output_", "host"): 14 * F}
    seen = touched(net, "loss")
    assert ("bottom", 1, "data", "forward", "host") in seen and ("bottom", 0, "diff", "backward", "host") in seen
    assert not any(t[0] == "top" and t[2] == "diff" for t in seen)
    with pytest.raises(InputError, match="same count"):  # cpp:27-28
        build(tmp_path, body, head=head.replace("dim: 7 dim: 1", "dim: 6 dim: 1"))


def test_one_top_multilabel_data_stops(tmp_path):
    """image_data_multilabel_layer.cpp:100-107 shapes the prefetch labels only with a label top; load_batch
    takes batch->label_.mutable_cpu_data() anyway (cpp:147): Blob's CHECK(data_) on an unshaped label."""
    body = """layer { name: "d" type: "ImageDataMultilabel" top: "data" transform_param { crop_size: 8 }
      image_data_param { source: "absent.txt" batch_size: 2 multilabel_num: 3 } }"""
    net = build(tmp_path, body, head="")
    assert tops(net, "d") == [(2, 3, 8, 8)]
    stops = [t for t in layer_touches(net.layer("d"), "gpu", "caffe") if t.what == "stop"]
    assert [t.stage for t in stops] == ["setup"] and "CHECK(data_)" in stops[0].note


def test_multilabel_list_entries(tmp_path):
    """cpp:45-51: a (name, vector<float>) pair per entry, 56 bytes (32 + 24), pushed back into lines_ (3
    entries: capacity 4), each vector of multilabel_num = 3 floats on the heap (12 bytes), names of 15
    characters or fewer inline. The label top is (batch_size, multilabel_num, 1, 1) (cpp:101); the
    prefetch batches are BVLC 1.0's, data_param.prefetch = 4 of each top on the device and the host."""
    (tmp_path / "list.txt").write_text("a.png 1 0 1\nb.png 0 0 1\nc.png 1 1 0\n")
    body = f"""layer {{ name: "d" type: "ImageDataMultilabel" top: "data" top: "label"
      transform_param {{ crop_size: 8 }}
      image_data_param {{ source: "{tmp_path / 'list.txt'}" batch_size: 2 multilabel_num: 3 }} }}"""
    net = build(tmp_path, body, head="")  # the images are absent: crop_size gives the data top
    assert tops(net, "d") == [(2, 3, 8, 8), (2, 3, 1, 1)]
    held = layer_buffers(net, "d")
    assert held[("lines_", "host")] == 4 * 56 + 3 * 3 * F
    assert held[("prefetch[4].data", "device")] == 4 * 2 * 3 * 8 * 8 * F
    assert held[("prefetch[4].label", "device")] == 4 * 2 * 3 * F


def test_which_schema_reads_the_files():
    assert load(TRAIN).schema.name == "drml"
    assert load(DEPLOY).schema.name == "drml"


def test_the_drml_net_audits():
    """TRAIN batch 24 of 170x170 crops (its image_data_param, transform_param). conv1 11x11: 160x160x32;
    64 boxes of 20x20 at x, y in 0, 20, ..., 140 (box_param); each region's 3x3 pad-1 conv keeps 20x20;
    Splice of 64 bottoms: 20 * sqrt(64) = 160 (splice.cpp:39). Params: conv1 32*3*121 + 32 = 11,648; 64
    BatchNorms of 32 + 32 + 1 = 4,160; 64 region convs of 32*32*9 + 32 = 591,872; conv2 16*32*64 + 16 = 32,784
    (pool 80, out 73); conv3 16*16*64 + 16 = 16,400 (66); conv4 16*16*36 + 16 = 9,232 ((66 - 6)/2 + 1 = 31);
    conv5 16*16*25 + 16 = 6,416 (27); fc6 4096*(16*27*27) + 4096 = 47,779,840; fc7 4096*2048 + 2048 =
    8,390,656; fc8 2048*12 + 12 = 24,588: 56,867,596 in all, 4,160 of them not trained (lr_mult 0). The
    prefetch: 4 batches of 24x3x170x170 + 24x12 floats; the loss's sigmoid_output_ 24x12 floats."""
    run = run_in_process(TRAIN)
    assert run.returncode in (0, 1), run.stderr
    assert "DRML's Caffe" in run.stdout
    assert "Params: 56,867,596 (trainable 56,863,436, non-trainable 4,160)" in run.stdout
    net = build_nets(TRAIN)[0]
    assert tops(net, "clipping") == [(24, 32, 20, 20)] * 64
    assert tops(net, "Splice") == [(24, 32, 160, 160)]
    assert tops(net, "conv5") == [(24, 16, 27, 27)]
    held = layer_buffers(net, "data")
    assert held[("prefetch[4].data", "device")] == 4 * 24 * 3 * 170 * 170 * F
    assert held[("prefetch[4].label", "device")] == 4 * 24 * 12 * F
    assert layer_buffers(net, "loss")[("sigmoid_output_", "device")] == 24 * 12 * F


def test_the_deploy_net_audits():
    run = run_in_process(DEPLOY)
    assert run.returncode in (0, 1), run.stderr
    assert tops(build_nets(DEPLOY)[0], "Splice") == [(1, 32, 160, 160)]


def test_the_batch_layer_net_is_refused():
    """DRML_train_val.prototxt's `Batch` layers and batch_param are in neither the fork's caffe.proto nor its
    sources (the solver trains DRML_train_val_bn.prototxt, which has BatchNorm there): refused, naming them."""
    run = run_in_process(BATCH_NET)
    assert run.returncode == 2
    assert "unknown layer type 'Batch'" in run.stderr
