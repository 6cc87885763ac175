"""Chen Feng's Caffe (simbaforrest/caffe, tag kcnet, 3d42ec5, the Caffe merlresearch/KCNet builds): its schema,
TensorTranspose and its versions of Reduction and SoftmaxWithLoss held against its sources, and kanuore/lstm-in-mnist's
LSTM net (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's caffe.proto, tensor_transpose_layer.hpp/.cpp/.cu,
reduction_layer.cpp/.cu and softmax_loss_layer.hpp/.cpp/.cu, cited by file and line.
"""
import hashlib
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops, touched
from protoaudit.audit import build_nets
from protoaudit.errors import InputError
from protoaudit.read.load import load
from protoaudit.read.schema import load_schema

HERE = os.path.join(DATA, "kcnet")
NET = os.path.join(HERE, "mnist_train_v3.prototxt")
F = 4  # bytes per float, and per unsigned int
COMMIT = "3d42ec54eade6243fe84b068ba049340acd3b687"
# the repository's src/caffe/proto/caffe.proto (git blob 6f3de2df3dc094bb7284a2d55c5f1dcf8a03fe89), hashed as fetched
SOURCE_SHA256 = "f099b4c7ca9328156f4404fb33a1e641184adff549faaa82c9b037ad01a3fdff"


def test_the_proto_is_the_repositorys():
    text = open(os.path.join(ROOT, "proto", "forks", "kcnet.proto"), "rb").read()
    first, second, body = text.split(b"\n", 2)
    assert first.startswith(b"// simbaforrest/caffe") and COMMIT.encode() in first
    assert second.startswith(b"// copied verbatim")
    assert hashlib.sha256(body).hexdigest() == SOURCE_SHA256


def test_the_schemas_fields():
    """caffe.proto:425 (tensor_transpose_param 151), :1231-1233 (TensorTransposeParameter: repeated order 1),
    :423 (swish_param moved to 153), :483 (LossParameter.label_weight 4, repeated), :1035 (ReductionOp PROD = 5),
    :1058 (ReductionParameter.group 4, default -1)."""
    s = load_schema("kcnet")
    layer = {f.name: f.number for f in s.message("LayerParameter").DESCRIPTOR.fields}
    assert (layer["tensor_transpose_param"], layer["swish_param"]) == (151, 153)
    assert [(f.name, f.number) for f in s.message("TensorTransposeParameter").DESCRIPTOR.fields] == [("order", 1)]
    loss = s.message("LossParameter").DESCRIPTOR.fields_by_name["label_weight"]
    assert loss.number == 4 and loss.is_repeated
    reduction = s.message("ReductionParameter").DESCRIPTOR
    assert reduction.enum_types_by_name["ReductionOp"].values_by_name["PROD"].number == 5
    assert (reduction.fields_by_name["group"].number, reduction.fields_by_name["group"].default_value) == (4, -1)


def inputs(**shapes):
    return "".join(f'layer {{ name: "{n}" type: "Input" top: "{n}" input_param {{ shape {{ '
                   + " ".join(f"dim: {d}" for d in s) + " } } }\n" for n, s in shapes.items())


def transpose(*order, bottom="x", top="t"):
    return (f'layer {{ name: "t" type: "TensorTranspose" bottom: "{bottom}" top: "{top}" tensor_transpose_param {{ '
            + " ".join(f"order: {o}" for o in order) + " } }\n")


def build(tmp_path, body, **options):
    return build_text(tmp_path, body, schema="kcnet", **options)


def test_tensor_transpose_shapes(tmp_path):
    """cpp:51-58: top axis n is the bottom's axis order(n): (2, 3, 5, 7) by (2, 0, 3, 1) is (5, 2, 7, 3); (4, 6)
    by (1, 0) is (6, 4)."""
    assert tops(build(tmp_path, inputs(x=(2, 3, 5, 7)) + transpose(2, 0, 3, 1)), "t") == [(5, 2, 7, 3)]
    assert tops(build(tmp_path, inputs(x=(4, 6)) + transpose(1, 0)), "t") == [(6, 4)]


def test_tensor_transpose_buffers(tmp_path):
    """hpp:52-54: order_, Xstride_ and Ystride_ are Blob<unsigned int> of one entry an axis (4 for a 4-axis
    bottom, 16 bytes each), written on the host at setup (cpp:28-31, :46-53); in GPU mode the kernels read their
    device copies (cu:64-66, :88-90); in CPU mode only the host ones. No other buffer."""
    text = inputs(x=(2, 3, 5, 7)) + transpose(2, 0, 3, 1)
    host = {(name, "host"): 4 * F for name in ("order_", "Xstride_", "Ystride_")}
    device = {(f"{name} (device)", "device"): 4 * F for name in ("order_", "Xstride_", "Ystride_")}
    net = build(tmp_path, text)
    assert layer_buffers(net, "t") == {**host, **device}
    assert layer_buffers(net, "t", mode="cpu") == host


def test_tensor_transpose_backward_writes_the_bottoms_diff(tmp_path):
    """Backward_gpu reads the top's diff and writes the bottom's (cu:86-87), every entry once."""
    text = "force_backward: true\n" + inputs(x=(2, 3, 5, 7)) + transpose(2, 0, 3, 1)
    got = touched(build(tmp_path, text), "t")
    assert ("top", 0, "diff", "backward", "device") in got and ("bottom", 0, "diff", "backward", "device") in got


def test_tensor_transpose_checks(tmp_path):
    """cpp:17: never in place; cpp:26: one order an axis; cpp:40: 2 axes or more; cpp:55: Blob::shape refuses an
    order past the last axis; cpp:85-89: a repeated order that makes a top smaller than the bottom would be
    written past its end."""
    with pytest.raises(InputError, match="in-place"):
        build(tmp_path, inputs(x=(4, 6)) + transpose(1, 0, top="x"))
    with pytest.raises(InputError, match="one an axis"):
        build(tmp_path, inputs(x=(2, 3, 5, 7)) + transpose(1, 0))
    with pytest.raises(InputError, match="2 or more"):
        build(tmp_path, inputs(x=(4,)) + transpose(0))
    with pytest.raises(InputError, match="names no axis"):
        build(tmp_path, inputs(x=(4, 6)) + transpose(2, 0))
    with pytest.raises(InputError, match="past the top"):
        build(tmp_path, inputs(x=(4, 6)) + transpose(0, 0))
    assert tops(build(tmp_path, inputs(x=(4, 6)) + transpose(1, 1)), "t") == [(6, 6)]  # larger: Caffe runs it


def reduction(param, bottom="x"):
    return (f'layer {{ name: "r" type: "Reduction" bottom: "{bottom}" top: "r" reduction_param {{ {param} }} }}\n'
            'layer { name: "loss" type: "EuclideanLoss" bottom: "r" bottom: "r" top: "loss" }\n')


def test_reduction_prod(tmp_path):
    """reduction_layer.cpp:19-29: PROD takes (N, M) and gives (N, 1) (group -1, the default) or (N, M / group);
    it returns before sum_multiplier_ (cpp:30): no buffer of its own. In GPU mode Forward_gpu and Backward_gpu
    ask the top's host data and diff first (cu:56, :124)."""
    net = build(tmp_path, inputs(x=(4, 6)) + reduction("operation: PROD"))
    assert tops(net, "r") == [(4, 1)]
    assert layer_buffers(net, "r") == {}
    assert {("top", 0, "data", "forward", "host"), ("top", 0, "diff", "backward", "host")} <= touched(net, "r")
    assert tops(build(tmp_path, inputs(x=(4, 6)) + reduction("operation: PROD group: 3")), "r") == [(4, 2)]


def test_reduction_checks(tmp_path):
    """cpp:13: group 0 is refused whatever the operation; cpp:21: group must divide M; cpp:25: PROD takes 2 axes."""
    with pytest.raises(InputError, match="group is 0"):
        build(tmp_path, inputs(x=(4, 6)) + reduction("operation: SUM group: 0"))
    with pytest.raises(InputError, match="divisible"):
        build(tmp_path, inputs(x=(4, 6)) + reduction("operation: PROD group: 4"))
    with pytest.raises(InputError, match="matrix"):
        build(tmp_path, inputs(x=(4, 6, 2)) + reduction("operation: PROD"))


def test_reduction_sum_is_bvlcs(tmp_path):
    """Every other operation is BVLC's code (cpp:33-), the same shape and sum_multiplier_ (the count from the
    axis on: 6 floats for (4, 6) at axis 1)."""
    net = build(tmp_path, inputs(x=(4, 6)) + reduction("operation: SUM axis: 1"))
    assert tops(net, "r") == [(4,)]
    assert layer_buffers(net, "r") == {("sum_multiplier_", "device"): 6 * F}


def softmax_loss(param=""):
    return (inputs(p=(4, 3, 2, 2), y=(4, 1, 2, 2)) + 'layer { name: "s" type: "SoftmaxWithLoss" bottom: "p" '
            f'bottom: "y" top: "loss" {param}}}\n')


def test_softmax_loss_label_weight(tmp_path):
    """softmax_loss_layer.cpp:45-46: with loss_param.label_weight given, label_weights_ is a Blob of bottom 0's
    shape (4 * 3 * 2 * 2 = 48 floats) written on the host; in GPU mode the forward and backward read its device
    copy (cu:50, :120). Without it the layer is BVLC's: no label_weights_."""
    weighted = build(tmp_path, softmax_loss("loss_param { label_weight: 1 label_weight: 2 } "))
    plain = build(tmp_path, softmax_loss())
    extra = {k: v for k, v in layer_buffers(weighted, "s").items() if k not in layer_buffers(plain, "s")}
    assert extra == {("label_weights_", "host"): 48 * F, ("label_weights_ (device)", "device"): 48 * F}
    cpu = {k: v for k, v in layer_buffers(weighted, "s", mode="cpu").items()
           if k not in layer_buffers(plain, "s", mode="cpu")}
    assert cpu == {("label_weights_", "host"): 48 * F}


def test_softmax_loss_label_weight_checks(tmp_path):
    """cpp:20-21: each weight must be positive; cpp:17-19: more weights than classes (3) are written past the
    vector of one a class."""
    with pytest.raises(InputError, match="positive"):
        build(tmp_path, softmax_loss("loss_param { label_weight: 0 } "))
    with pytest.raises(InputError, match="3 classes"):
        build(tmp_path, softmax_loss("loss_param { label_weight: 1 label_weight: 1 label_weight: 1 label_weight: 1 } "))


def test_the_lstm_net_by_hand():
    """mnist_train_v3.prototxt (its MNIST LMDB and HDF5 cont absent): data (128, 1, 28, 28), as its source's name
    says; trans_data, orders (2, 0, 3, 1): (28, 128, 28, 1); reshape_data (28, -1, 28): (28, 128, 28), T = 28 rows
    of N = 128 images. The LSTM takes cont as (T, N) = (28, 128) (recurrent_layer.cpp's CHECKs), so trans_cont's
    (1, 0) wants cont (128, 28), the shape the repository's generh5.py writes; lstm (28, 128, 128); slice at 27 on
    axis 0: (27, 128, 128) and (1, 128, 128); reduction axis 0 (SUM): a scalar; trans_out (1, 0, 2): (128, 1, 128);
    reshape_out (-1, 1, 1, 128): (128, 1, 1, 128); fc (128, 10). TensorTranspose's buffers: 4, 2 and 3 unsigned
    ints, each on the host and the device."""
    assert load(NET).schema.name == "kcnet"
    net = build_nets(NET)[0]
    assert tops(net, "cont") == [(128, 28)]
    expected = {"trans_data": (28, 128, 28, 1), "reshape_data": (28, 128, 28), "trans_cont": (28, 128),
                "lstm": (28, 128, 128), "reduction": (), "trans_out": (128, 1, 128), "reshape_out": (128, 1, 1, 128),
                "fc": (128, 10)}
    assert {name: tops(net, name)[0] for name in expected} == expected
    assert tops(net, "slice") == [(27, 128, 128), (1, 128, 128)]
    for name, axes in (("trans_data", 4), ("trans_cont", 2), ("trans_out", 3)):
        assert layer_buffers(net, name)[("order_", "host")] == axes * F
        assert layer_buffers(net, name)[("Ystride_ (device)", "device")] == axes * F


def test_the_lstm_net_audits_with_no_flags():
    """Tried as a new user would: `protoaudit mnist_train_v3.prototxt` in the net's folder."""
    r = run_in_process("mnist_train_v3.prototxt", cwd=HERE, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout and "simbaforrest/caffe" in r.stdout and "cont 128x28" in r.stdout


def test_permute_is_ssds(tmp_path):
    """permute_layer.cpp is weiliu89/caffe's (SSD's) but for one LOG(FATAL)'s case, with its blobs permute_order_,
    old_steps_ and new_steps_ (permute_layer.hpp:52-54): the layer is sized as SSD's fork sizes it, (2, 3, 4) by
    (1, 0) giving (3, 2, 4) and three ints an axis."""
    text = inputs(x=(2, 3, 4)) + ('layer { name: "p" type: "Permute" bottom: "x" top: "p" '
                                  'permute_param { order: 1 order: 0 } }\n')
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ours, ssds = build(tmp_path / "a", text), build_text(tmp_path / "b", text, schema="ssd")
    assert tops(ours, "p") == tops(ssds, "p") == [(3, 2, 4)]
    assert layer_buffers(ours, "p") == layer_buffers(ssds, "p") != {}
