"""HRSOD's Caffe (yi94code/HRSOD 166e6d7, caffe-master/): its schema, OutputDecay, the BVLC layers of its time,
and wdzhao123/FRD's test net, which needs OutputDecay.

Expected values are derived by hand below from that commit's caffe-master/src/caffe/layers/*.cpp/.cu and
caffe-master/include/caffe/layers/*.hpp, cited by file and line. The net is in tests/data/hrsod
(tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops, touched
from protoaudit.audit import build_nets
from protoaudit.layers import layer_class
from protoaudit.memory.buffers import layer_touches
from protoaudit.read.load import load

NETS = os.path.join(DATA, "hrsod")
F = 4  # bytes per float


def inputs(**shapes):
    return "".join(f'layer {{ name: "{n}" type: "Input" top: "{n}" input_param {{ shape {{ '
                   + " ".join(f"dim: {d}" for d in s) + " } } }\n" for n, s in shapes.items())


def build(tmp_path, body, force=True, **options):
    return build_text(tmp_path, ("force_backward: true\n" if force else "") + body, schema="hrsod", **options)


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "hrsod.proto")).read()
    assert text.startswith("// yi94code/HRSOD, caffe-master/src/caffe/proto/caffe.proto at commit "
                           "166e6d7f433277c1f55c08d145732b7219f675e5,\n// copied verbatim below this header")
    # caffe.proto:412 and :573-576 of the fork's file
    assert "  optional OutputDecayParameter output_decay_param = 202;\n" in text
    assert ('message OutputDecayParameter {\n  optional string regularization_type = 1 [default = "L2"];\n'
            "  optional float output_decay = 2 [default = 1.0];\n}\n") in text


def test_its_bvlc_layers_are_of_mid_2016():
    """base_data_layer.hpp:49-79 (PREFETCH_COUNT 3 batches of data_ and label_, copied into the tops) is the SSD
    fork's base; no accuracy_layer.cu (CPU code only, as caffe-enet's); batch_norm_layer.cpp:10-36 adds no
    ParamSpec (GGL's, the same file)."""
    for kind, fork in (("Data", "ssd"), ("ImageData", "ssd"), ("WindowData", "ssd"), ("Accuracy", "enet"),
                       ("BatchNorm", "ggl")):
        assert issubclass(layer_class(kind, "hrsod"), layer_class(kind, fork)), kind


DECAY = ('layer {{ name: "decay" type: "OutputDecay" bottom: "{b}" top: "{t}" '
         'output_decay_param {{ regularization_type: "{kind}" output_decay: 1e-10 }} }}\n')
LOSS = 'layer { name: "loss" type: "EuclideanLoss" bottom: "x" bottom: "y" }\n'


def test_output_decay_l1_keeps_the_signs_in_temp(tmp_path):
    """x (2, 3, 4, 5), in place. Reshape: temp_.ReshapeLike(*bottom[0]) (output_decay_layer.cpp:18), no top
    reshape (in place: the top is the bottom). Forward does nothing (output_decay_layer.hpp:29-32). Backward,
    propagate_down[0] (force_backward): reads the bottom's data, writes its diff (.cu:11-12); L1 writes
    caffe_gpu_sign into temp_ (.cu:18-20): 2 * 3 * 4 * 5 = 120 floats."""
    net = build(tmp_path, inputs(x=(2, 3, 4, 5), y=(2, 3, 4, 5)) + DECAY.format(b="x", t="x", kind="L1") + LOSS)
    assert tops(net, "decay") == [(2, 3, 4, 5)]
    assert layer_buffers(net, "decay") == {("temp_", "device"): 120 * F}
    assert touched(net, "decay") == {("bottom", 0, "data", "backward", "device"),
                                     ("bottom", 0, "diff", "backward", "device")}


def test_output_decay_l2_has_no_buffer(tmp_path):
    """L2: caffe_gpu_axpy(count, decay, bottom_data, bottom_diff) (.cu:15-16): temp_ is shaped, never
    allocated."""
    net = build(tmp_path, inputs(x=(2, 3, 4, 5), y=(2, 3, 4, 5)) + DECAY.format(b="x", t="x", kind="L2") + LOSS)
    assert layer_buffers(net, "decay") == {}
    assert ("bottom", 0, "diff", "backward", "device") in touched(net, "decay")


def test_output_decay_without_backward_touches_nothing(tmp_path):
    """A net input with no force_backward: Net::Init gives the layer no propagate_down, and Backward is all
    under `if (propagate_down[0])` (cpp:26, .cu:10); Forward is empty."""
    net = build(tmp_path, inputs(x=(2, 3, 4, 5), y=(2, 3, 4, 5)) + DECAY.format(b="x", t="x", kind="L1") + LOSS,
                force=False)
    assert layer_buffers(net, "decay") == {} and touched(net, "decay") == set()


def test_output_decay_must_be_in_place(tmp_path):
    """LayerSetUp: CHECK(bottom[0] == top[0]) (output_decay_layer.cpp:12)."""
    with pytest.raises(Exception, match="in-place"):
        build(tmp_path, inputs(x=(2, 3), y=(2, 3)) + DECAY.format(b="x", t="z", kind="L1"))


def test_output_decay_of_another_type_stops_its_backward(tmp_path):
    """Any regularization_type but L1 and L2 is a LOG(FATAL) in Backward (cpp:43, .cu:26): nothing before."""
    net = build(tmp_path, inputs(x=(2, 3), y=(2, 3)) + DECAY.format(b="x", t="x", kind="L3") + LOSS)
    stops = [t for t in layer_touches(net.layer("decay"), "gpu", "caffe") if t.what == "stop"]
    assert len(stops) == 1 and stops[0].stage == "backward" and "cpp:43" in stops[0].note


def test_data_with_multi_label_is_refused(tmp_path):
    """data_layer.cpp:50-60: with multi_label the label is (batch, label_size, 1, 1), not BVLC's (batch,)."""
    body = ('layer { name: "d" type: "Data" top: "d" top: "l" data_param { source: "nowhere" batch_size: 2 '
            'multi_label: true label_size: 5 } }\n')
    with pytest.raises(Exception, match="multi_label"):
        build(tmp_path, body, inputs={"d": (2, 3, 8, 8)})


def test_the_frd_net():
    """wdzhao123/FRD test.prototxt: Input 1x3x320x320; conv pad 1 kernel 3 keeps the size, the two 2/2 max
    pools halve it: conv3_score (1, 1, 80, 80), BatchNorm, Scale and OutputDecay in place on it; upscore2, a
    Deconvolution kernel 8 stride 4 pad 2: (80 - 1) * 4 - 2 * 2 + 8 = 320. No loss: nothing runs backward, so
    OutputDecay touches nothing (cpp:26)."""
    path = os.path.join(NETS, "frd_test.prototxt")
    assert load(path).schema.name == "hrsod"
    net = build_nets(path)[0]
    assert tops(net, "conv3_score") == [(1, 1, 80, 80)] and tops(net, "output_decay") == [(1, 1, 80, 80)]
    assert tops(net, "upscore2") == [(1, 1, 320, 320)]
    assert layer_buffers(net, "output_decay") == {} and touched(net, "output_decay") == set()


def test_the_frd_net_trained(tmp_path):
    """The same net with force_backward: true: OutputDecay is L1, so its backward fills temp_, the blob's
    80 x 80 = 6,400 floats (.cu:18-20)."""
    text = open(os.path.join(NETS, "frd_test.prototxt")).read()
    net = build_text(tmp_path, "force_backward: true\n" + text)
    assert layer_buffers(net, "output_decay") == {("temp_", "device"): 6400 * F}


def test_the_net_audits_with_no_flags():
    """Tried as a new user would: `protoaudit frd_test.prototxt`."""
    r = run_in_process("frd_test.prototxt", cwd=NETS, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout and "HRSOD's Caffe" in r.stdout


def test_batch_norm_statistics_keep_the_files_lr_mult(tmp_path):
    """HRSOD's upgrade_proto.cpp (BVLC 9e9e9ba, August 2016) predates BVLC a8ec123's BatchNorm upgrade (it
    names no BatchNorm): three params given lr_mult 1 stay 1, and its batch_norm_layer.cpp adds no ParamSpec."""
    body = inputs(x=(2, 3, 4, 4)) + ('layer { name: "bn" type: "BatchNorm" bottom: "x" top: "bn" param { lr_mult: 1 } '
                                     'param { lr_mult: 1 } param { lr_mult: 1 } }\n')
    net = build(tmp_path, body)
    assert [p.lr_mult for p in net.layer("bn").params] == [1, 1, 1]
