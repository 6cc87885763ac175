"""longriyao/caffe_GAN's Caffe (09a7321, a BVLC Caffe of late 2016): its schema, its
ParamSpec.param_propagate_down held against its net.cpp, and its GAN colorization nets and a real
log of one (tests/data/SOURCES.md).

Expected values are derived by hand below from caffe_GAN/src/caffe/net.cpp and
caffe_GAN/src/caffe/proto/caffe.proto at that commit, cited by file and line, and from the log's
own "Top shape:" and "Memory required for data:" lines.
"""
import os
import re

from conftest import DATA, ROOT, build_text, run_in_process
from protoaudit.memory.buffers import run_of
from protoaudit.read.load import load

HERE = os.path.join(DATA, "forks", "caffe_gan")
GAN = os.path.join(HERE, "gan_example", "model")
COLORIZER = os.path.join(HERE, "colorizer")


def test_the_proto_is_the_forks_file_verbatim():
    """The fork's one field over BVLC's caffe.proto of its time: ParamSpec's param_propagate_down = 6
    (caffe.proto:304-306)."""
    text = open(os.path.join(ROOT, "proto", "forks", "caffe_gan.proto")).read()
    assert text.splitlines()[0].endswith("caffe_GAN/src/caffe/proto/caffe.proto at commit "
                                         "09a7321a5248c0677b7ca990fb8c8125cec17a69,")
    spec = text.split("message ParamSpec {\n", 1)[1].split("\n}\n", 1)[0]
    assert ("  //Control the param propagate down\n  //It doesn't affect the backward\n"
            "  optional bool param_propagate_down = 6;\n") in spec


def test_the_forks_nets_are_read_with_its_schema():
    """BVLC's ParamSpec has no param_propagate_down: the GAN nets are caffe_GAN's."""
    for path in (os.path.join(GAN, "train_val.prototxt"),
                 os.path.join(COLORIZER, "model", "train_loss_g_author.prototxt")):
        assert load(path).schema.name == "caffe_gan"


NET = """
input: "data" input_shape { dim: 2 dim: 3 dim: 8 dim: 8 }
layer { name: "g" type: "Convolution" bottom: "data" top: "g" propagate_down: false
  param { lr_mult: 1 param_propagate_down: false } param { lr_mult: 2 param_propagate_down: false }
  convolution_param { num_output: 4 kernel_size: 3 } }
layer { name: "d" type: "Convolution" bottom: "g" top: "d"
  param { lr_mult: 0 param_propagate_down: true } param { lr_mult: 0 }
  convolution_param { num_output: 4 kernel_size: 3 } }
layer { name: "e" type: "InnerProduct" bottom: "d" top: "e" param { lr_mult: 1 }
  inner_product_param { num_output: 1 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "e" bottom: "e" top: "loss" }
"""


def test_param_propagate_down_sets_the_layers_flag_but_not_its_backward(tmp_path):
    """net.cpp:174-175: a layer needs backward where a param's lr_mult is not 0, whatever
    param_propagate_down says ("It doesn't affect the backward", caffe.proto:305); net.cpp:178-184:
    the layer's param_propagate_down_ flag for that param is the field where the file gives it, else
    lr_mult != 0. So 'g' (lr_mult 1 and 2, both false) runs backward, writing neither param's diff;
    'd' (lr_mult 0 and 0, the weight's true) needs backward only as 'g' below it does, and writes its
    weight's diff and not its bias's; 'e' (no field) is BVLC's."""
    net = build_text(tmp_path, NET)
    g, d, e = net.layer("g"), net.layer("d"), net.layer("e")
    assert g.need_backward and [p.need_backward for p in g.params] == [True, True]
    assert run_of(g, "gpu", "caffe").param_propagate_down == [False, False]
    assert d.need_backward  # its bottom 'g' needs backward (net.cpp:126-135 of BVLC, unchanged)
    assert run_of(d, "gpu", "caffe").param_propagate_down == [True, False]
    assert run_of(e, "gpu", "caffe").param_propagate_down == [True, True]


def test_force_backward_sets_every_params_flag(tmp_path):
    """net.cpp:266-270: force_backward sets every param's flag, param_propagate_down false included."""
    net = build_text(tmp_path, "force_backward: true\n" + NET)
    assert run_of(net.layer("g"), "gpu", "caffe").param_propagate_down == [True, True]


PATTERN = re.compile(r"\] ((?:Top shape|Memory required for data): .*)$")


def log_nets(text):
    nets = []
    for line in text.splitlines():
        if "net.cpp:" in line and "Initializing net from parameters" in line:
            nets.append([])
        m = PATTERN.search(line)
        if m and "net.cpp:" in line:
            nets[-1].append(m.group(1).strip())
    return nets


def printed_nets(text):
    nets = []
    for line in text.splitlines():
        if line.startswith("Net "):
            nets.append([])
        m = re.search(r"((?:Top shape|Memory required for data): .*)$", line)
        if m:
            nets[-1].append(m.group(1).strip())
    return nets


def test_the_colorizer_log_is_reproduced(tmp_path):
    """caffe_colorizer's log (lines up to "Solver scaffolding done.") ran model/train_loss_g.prototxt in a
    Caffe with caffe_GAN's param_propagate_down and caffe-segnet's Upsample (caffe_colorizer's
    lib/upsample_layer.cpp and lib/caffe.proto, whose UpsampleParameter is caffe-enet's, field 147 of
    LayerParameter): its caffe.proto is caffe_GAN's with that message added, as written here. Every
    Top shape and Memory line of both nets comes back, the TEST net's last too: the Python layer
    'output' (lib/gen_image.py:22, top[0].reshape(1)) whose top no layer reads, which the audit counts
    empty, is printed as the log shows its setup made it."""
    gan = open(os.path.join(ROOT, "proto", "forks", "caffe_gan.proto")).read()
    enet = open(os.path.join(ROOT, "proto", "forks", "enet.proto")).read()
    start = enet.index("message UpsampleParameter {")
    upsample = enet[start:enet.index("\n}\n", start) + 3]
    anchor = "  optional RecurrentParameter recurrent_param = 146;\n"
    proto = tmp_path / "caffe.proto"
    proto.write_text(gan.replace(anchor, anchor + "  optional UpsampleParameter upsample_param = 147;\n") + upsample)
    log = os.path.join(COLORIZER, "log_net_init.log")
    done = run_in_process(log, "--caffe-log", "--caffe-proto", str(proto), cwd=COLORIZER)
    assert done.returncode == 0, done.stderr
    expected, printed = log_nets(open(log).read()), printed_nets(done.stdout)
    assert [len(n) for n in expected] == [241, 84] == [len(n) for n in printed]
    assert printed == expected
    assert printed[1][-2:] == ["Top shape: 1 (1)", "Memory required for data: 13205524"]
