"""Bag-of-Tricks' Mixup for BVLC Caffe (Wheatly2/Bag-of-Tricks-for-Image-Classification 9661ccc): its schema,
the layer's shapes, touches, bytes and refusals held against its source, and the repository's train net
(tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's caffe.proto, mixup_layer.hpp and
mixup_layer.cpp, cited by file and line.
"""
import hashlib
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops, touched
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.read.load import load
from protoaudit.read.schema import load_schema

HERE = os.path.join(DATA, "mixup")
NET = os.path.join(HERE, "train.prototxt")
F = 4  # bytes per float
COMMIT = "9661ccc9913d00bd670285b4bfda8996a0d61dee"
# the repository's caffe.proto (git blob 950fe5aa0b66fa012f78db78eafa472b5bae98bc), hashed as fetched
SOURCE_SHA256 = "e6a3cc45eafc4c6c80d3f71ad6d555f3340c17f0def93781503396f12eaa2bdc"
# caffe.proto:1471 as the repository has it: no label, which protoc refuses in proto2
UNLABELLED = "  DropMode drop_mode = 3 [default = LINEAR];"


def test_the_proto_is_the_repositorys_but_one_label():
    """The two-line header, then the repository's caffe.proto byte for byte (SOURCE_SHA256), but for
    drop_mode's `optional` (caffe.proto:1471)."""
    text = open(os.path.join(ROOT, "proto", "forks", "mixup.proto"), "rb").read().decode("utf-8")
    first, second, body = text.split("\n", 2)
    assert first.startswith("// Wheatly2/Bag-of-Tricks-for-Image-Classification, caffe.proto at commit " + COMMIT)
    assert "optional" in second and "drop_mode" in second
    assert body.count("\n  optional" + UNLABELLED[1:] + "\n") == 1 and UNLABELLED + "\n" not in body
    theirs = body.replace("\n  optional" + UNLABELLED[1:] + "\n", "\n" + UNLABELLED + "\n")
    assert hashlib.sha256(theirs.encode("utf-8")).hexdigest() == SOURCE_SHA256


def test_the_schemas_fields():
    """caffe.proto:436-438 (LayerParameter 148-150, BVLC's clip_param absent), :1459-1462 (MixupParameter:
    alpha 1.0, cls_num 0), :258-270 (the solver's warm-up and cosine fields, 43-48)."""
    s = load_schema("mixup")
    layer = {f.name: f.number for f in s.message("LayerParameter").DESCRIPTOR.fields}
    assert (layer["label_smooth_param"], layer["mixup_param"], layer["drop_block_param"]) == (148, 149, 150)
    assert "clip_param" not in layer
    assert "round_mode" not in {f.name for f in s.message("PoolingParameter").DESCRIPTOR.fields}
    mixup = s.message("MixupParameter").DESCRIPTOR
    assert {f.name: f.default_value for f in mixup.fields} == {"alpha": 1.0, "cls_num": 0}
    solver = {f.name: f.number for f in s.message("SolverParameter").DESCRIPTOR.fields}
    assert [solver[n] for n in ("warm_up", "warm_up_mode", "warm_up_lr", "warm_up_iter", "cyclesize",
                                "cos_min_lr")] == [43, 44, 45, 46, 47, 48]


def inputs(**shapes):
    return "".join(f'layer {{ name: "{n}" type: "Input" top: "{n}" input_param {{ shape {{ '
                   + " ".join(f"dim: {d}" for d in s) + " } } }\n" for n, s in shapes.items())


def mixup(param="cls_num: 10 alpha: 0.2", **shapes):
    shapes = shapes or {"data": (4, 3, 8, 8), "label": (4,)}
    return (inputs(**shapes) + 'layer { name: "m" type: "Mixup" bottom: "data" bottom: "label" '
            f'top: "md" top: "ml" mixup_param {{ {param} }} }}\n')


def build(tmp_path, body, **options):
    return build_text(tmp_path, body, schema="mixup", **options)


def test_a_label_of_one_axis(tmp_path):
    """cpp:29: top 0 like bottom 0 (4, 3, 8, 8); cpp:36-39: a label of 1 axis gives top 1 (N, cls_num_) =
    (4, 10), cls_num_ mixup_param's (cpp:20); lamda_ a Blob of N = 4 floats (cpp:41-42), its host data only
    (mutable_cpu_data, cpp:57): 16 bytes. A (4, 1, 1, 1) label is not of 2 axes: (4, 10) too."""
    net = build(tmp_path, mixup())
    assert tops(net, "m") == [(4, 3, 8, 8), (4, 10)]
    assert layer_buffers(net, "m") == {("lamda_", "host"): 4 * F}
    assert tops(build(tmp_path, mixup(data=(4, 3, 8, 8), label=(4, 1, 1, 1))), "m")[1] == (4, 10)


def test_a_one_hot_label(tmp_path):
    """cpp:17-18, :33: a label of 2 axes is one-hot, top 1 like it, cls_num_ its shape(1) (here 7, the
    param's 10 unread); a (4, 1) label has 1 class, which LayerSetUp's CHECK_GT(cls_num_, 1) refuses (cpp:22)."""
    net = build(tmp_path, mixup(data=(4, 3, 8, 8), label=(4, 7)))
    assert tops(net, "m") == [(4, 3, 8, 8), (4, 7)]
    with pytest.raises(InputError, match="larger than 1"):
        build(tmp_path, mixup(data=(4, 3, 8, 8), label=(4, 1)))


def test_the_checks(tmp_path):
    """cpp:15: alpha must be > 0; cpp:20-22: with a label of 1 axis, cls_num (default 0, caffe.proto:1461)
    must be > 1; two bottoms and two tops exactly (hpp:23-24). Forward reads one label an image (cpp:89-90)
    and mixes one row an image with a one-hot label (cpp:86-87): fewer than bottom 0's 4 are refused."""
    with pytest.raises(InputError, match="alpha"):
        build(tmp_path, mixup("cls_num: 10 alpha: 0"))
    with pytest.raises(InputError, match="larger than 1"):
        build(tmp_path, mixup("alpha: 0.2"))
    with pytest.raises(InputError, match="reads one an image"):
        build(tmp_path, mixup(data=(4, 3, 8, 8), label=(3,)))
    with pytest.raises(InputError, match="rows"):
        build(tmp_path, mixup(data=(4, 3, 8, 8), label=(3, 10)))
    with pytest.raises(InputError):
        build(tmp_path, inputs(data=(4, 3, 8, 8)) + 'layer { name: "m" type: "Mixup" bottom: "data" top: "md" '
                                                     'top: "ml" mixup_param { cls_num: 10 } }\n')


def test_gpu_mode_runs_the_cpu_code(tmp_path):
    """hpp:30-31: Forward_gpu is commented out, so Layer's default calls Forward_cpu: both bottoms' host data
    read (cpp:64, :67), both tops' host data written (cpp:65, :68) and their device copies, which the layers
    after it read; Backward_cpu is empty (hpp:28-29): no diff touched, even under force_backward."""
    net = build(tmp_path, "force_backward: true\n" + mixup())
    got = touched(net, "m")
    assert {("bottom", j, "data", "forward", "host") for j in range(2)} <= got
    assert {("top", j, "data", "forward", d) for j in range(2) for d in ("host", "device")} <= got
    assert not {t for t in got if t[2] == "diff"}


def test_the_train_net_by_hand():
    """train.prototxt: Data crop_size 32, 3 mean values, batch 256 (CIFAR-10's 32 x 32 colour images, its
    LMDB absent); Mixup cls_num 10: tops (256, 3, 32, 32) and (256, 10); lamda_ 256 floats on the host;
    fc10 (256, 10) into SoftmaxCrossEntropyLoss, which has no source in the repository: read by no layer,
    taken as a loss, said as an assumption."""
    assert load(NET).schema.name == "mixup"
    net = build_nets(NET)[0]
    assert tops(net, "mixup") == [(256, 3, 32, 32), (256, 10)]
    assert layer_buffers(net, "mixup") == {("lamda_", "host"): 256 * F}
    assert tops(net, "fc10") == [(256, 10)]
    assert any(a.layer == "loss" and "SoftmaxCrossEntropyLoss" in a.what for a in net.assumptions)


def test_the_train_net_audits_with_no_flags():
    """Tried as a new user would: `protoaudit train.prototxt` in the net's folder."""
    r = run_in_process("train.prototxt", cwd=HERE, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout and "Bag-of-Tricks' Mixup" in r.stdout
