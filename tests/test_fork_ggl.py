"""GGL's Caffe (liu-xb/GGL 2ea1508, caffe/): its schema, NormalizationL2, VarLoss, SetLoss2, its mid-2016
BatchNorm, and the repository's training net.

Expected values are derived by hand below from that commit's caffe/src/caffe/layers/*.cpp/.cu and
caffe/include/caffe/layers/*.hpp, cited by file and line. The net is in tests/data/ggl (tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops, touched
from protoaudit.audit import build_nets
from protoaudit.layers import layer_class
from protoaudit.memory.buffers import layer_touches
from protoaudit.read.load import load

NETS = os.path.join(DATA, "ggl")
F = 4  # bytes per float


def inputs(**shapes):
    return "".join(f'layer {{ name: "{n}" type: "Input" top: "{n}" input_param {{ shape {{ '
                   + " ".join(f"dim: {d}" for d in s) + " } } }\n" for n, s in shapes.items())


def build(tmp_path, body, **options):
    return build_text(tmp_path, "force_backward: true\n" + body, schema="ggl", **options)


def host(net, layer, mode="gpu"):
    return {k[0]: v for k, v in layer_buffers(net, layer, mode=mode).items() if k[1] == "host"}


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "ggl.proto")).read()
    assert text.startswith("// liu-xb/GGL, caffe/src/caffe/proto/caffe.proto at commit "
                           "2ea1508d65382723464e08d817a0e2fad4e25489,\n// copied verbatim below this header")
    # caffe.proto:311 and :441-443 of the fork's file
    assert "  optional SetLoss2Parameter set_loss2_param = 157;\n" in text
    assert "message SetLoss2Parameter {\n  optional float alpha = 1 [default = 1];\n}\n" in text


def test_its_bvlc_layers_are_of_mid_2016():
    """base_data_layer.hpp:49-79 (3 batches of data_ and label_, copied into the tops) is the SSD fork's base; no
    accuracy_layer.cu (CPU code only, as caffe-enet's)."""
    for kind, fork in (("Data", "ssd"), ("ImageData", "ssd"), ("WindowData", "ssd"), ("Accuracy", "enet")):
        assert issubclass(layer_class(kind, "ggl"), layer_class(kind, fork)), kind


L2 = 'layer { name: "n" type: "NormalizationL2" bottom: "x" top: "n" }\n'


def test_normalization_l2(tmp_path):
    """normalization_l2_layer.hpp:17-25: a NeuronLayer, top (4, 6) like the bottom; squared_ like the bottom at
    setup (cpp:16), written by Forward_gpu (.cu:20, :24): 24 floats. Backward_gpu writes the bottom's diff with
    no look at propagate_down (.cu:53); Forward_cpu calls Forward_gpu (cpp:32)."""
    body = inputs(x=(4, 6), t=(4, 6)) + L2 + 'layer { name: "loss" type: "EuclideanLoss" bottom: "n" bottom: "t" }\n'
    net = build(tmp_path, body)
    assert tops(net, "n") == [(4, 6)]
    assert layer_buffers(net, "n") == {("squared_", "device"): 24 * F}
    assert ("bottom", 0, "diff", "backward", "device") in touched(net, "n")
    stops = [t for t in layer_touches(net.layer("n"), "cpu", "caffe") if t.what == "stop"]
    assert len(stops) == 1 and "cpp:32" in stops[0].note


LOSSES = """layer {{ name: "var" type: "VarLoss" bottom: "f" bottom: "id" top: "var" }}
layer {{ name: "set" type: "SetLoss2" bottom: "f" bottom: "id" top: "set" set_loss2_param {{ alpha: 0.4 }} }}
"""


def test_the_identity_losses_at_one_image_per_identity(tmp_path):
    """Batch 20, code 1024 (num() and count(1), var_loss_layer.cpp:20-21, set_loss2_layer.cpp:22-23). One image
    per identity (im_per_cat_ 1, assumed): VarLoss news 20 / 1 = 20 mean arrays of 1024 floats a forward, never
    deleted (var_loss_layer.cpp:61-64), and holds temp_diff_ (1, 1024, 1, 1) (cpp:23); SetLoss2's cat_per_iter_
    20 / 1 = 20, cat_mean_ and cat_grad_ (1, 1, 20, 1024), temp_loss_ (1, 1, 1, 1024) (set_loss2_layer.cpp:54-58).
    All on the host (Forward_gpu runs the CPU code). Both tops scalars (cpp:29-30, set_loss2 cpp:25-26)."""
    net = build(tmp_path, inputs(f=(20, 1024), id=(20,)) + LOSSES.format())
    assert tops(net, "var") == [()] and tops(net, "set") == [()]
    assert host(net, "var") == {"temp_diff_": 1024 * F, "mean (new[], never deleted)": 20 * 1024 * F}
    assert host(net, "set") == {"temp_loss_": 1024 * F, "cat_mean_": 20 * 1024 * F, "cat_grad_": 20 * 1024 * F}
    assert sum("one image per identity in the batch of 20" in a.what for a in net.assumptions) == 2
    # VarLoss writes the features' diff in its forward (cpp:41, :80), SetLoss2 in its backward (cpp:131-140)
    assert ("bottom", 0, "diff", "forward", "device") in touched(net, "var")
    assert ("bottom", 0, "diff", "backward", "device") in touched(net, "set")


def test_the_identity_losses_with_images_per_id(tmp_path):
    """--define images_per_id=3 on a batch of 20: VarLoss's loop steps by 3 (cpp:61), 7 arrays (0, 3, ..., 18);
    SetLoss2's cat_per_iter_ is 20 / 3 = 6 (integer division, cpp:55), cat_mean_ 6 x 1024."""
    net = build(tmp_path, inputs(f=(20, 1024), id=(20,)) + LOSSES.format(), defines={"images_per_id": "3"})
    assert host(net, "var")["mean (new[], never deleted)"] == 7 * 1024 * F
    assert host(net, "set")["cat_mean_"] == host(net, "set")["cat_grad_"] == 6 * 1024 * F
    assert not net.assumptions
    with pytest.raises(Exception, match="batch holds 20"):
        build(tmp_path, inputs(f=(20, 1024), id=(20,)) + LOSSES.format(), defines={"images_per_id": "21"})


def test_batch_norm_statistics_keep_the_files_lr_mult(tmp_path):
    """batch_norm_layer.cpp:10-36 (BVLC's before it masked them): no ParamSpec of lr_mult 0 is added, and an
    lr_mult of 1 is no error, as BVLC's later CHECK makes it."""
    body = inputs(x=(2, 3, 4, 4)) + ('layer { name: "bn" type: "BatchNorm" bottom: "x" top: "bn" param { lr_mult: 1 } '
                                     'param { lr_mult: 1 } param { lr_mult: 1 } }\n')
    net = build(tmp_path, body)
    assert [p.lr_mult for p in net.layer("bn").params] == [1, 1, 1]
    assert [tuple(p.shape) for p in net.layer("bn").params] == [(3,), (3,), (1,)]
    net = build(tmp_path, body.replace(" param { lr_mult: 1 } param { lr_mult: 1 } param { lr_mult: 1 }", ""))
    assert [p.lr_mult for p in net.layer("bn").params] == [1, 1, 1]


def test_the_group_group_loss_net():
    """train.prototxt, TRAIN: ImageData 448 x 448, batch 20 (new_height, new_width). conv1 7/2: (448 - 7) / 2 + 1 =
    221; pool1 3/2 (ceil): 110; conv2 5/2 pad 1: 54; pool2: 27; conv3-5 keep 27; pool5 6/5: ceil(21 / 5) + 1 = 6.
    fc7 (20, 1024) into NormalizationL2; the part slices of conv5-2 on axis 2 (rows 0-14, 7-20, 13-27) pooled:
    ceil((14 - 6) / 5) + 1 = 3 and ceil((13 - 6) / 5) + 1 = 3 rows by 6; the
    concat of five 1024-wide features, (20, 5120), normalised. Six VarLoss and six SetLoss2 at one image per
    identity: each holds 20 x the feature width on the host (SetLoss2 twice)."""
    assert load(os.path.join(NETS, "train.prototxt")).schema.name == "ggl"
    net = build_nets(os.path.join(NETS, "train.prototxt"))[0]
    assert tops(net, "data") == [(20, 3, 448, 448), (20,)]
    assert tops(net, "conv1") == [(20, 96, 221, 221)] and tops(net, "pool1") == [(20, 96, 110, 110)]
    assert tops(net, "conv2") == [(20, 256, 54, 54)] and tops(net, "pool2") == [(20, 256, 27, 27)]
    assert tops(net, "pool5") == [(20, 512, 6, 6)] and tops(net, "rt-pool") == [(20, 512, 3, 6)] == tops(net, "rm-pool")
    assert tops(net, "fc7-l2") == [(20, 1024)] and tops(net, "concat-features-l2") == [(20, 5120)]
    assert layer_buffers(net, "concat-features-l2") == {("squared_", "device"): 20 * 5120 * F}
    assert host(net, "concat-set-loss")["cat_mean_"] == 20 * 5120 * F
    assert host(net, "concat-var-loss")["mean (new[], never deleted)"] == 20 * 5120 * F


def test_the_net_audits_with_no_flags():
    """Tried as a new user would: `protoaudit train.prototxt` in the repository's root (its solver names a
    cls.prototxt the repository does not have)."""
    r = run_in_process("train.prototxt", cwd=NETS, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout and "GGL's Caffe" in r.stdout
