"""ceil_mode pooling: BVLC/caffe pull request #3057 (dujianyi, never merged), as soeaver's caffe-priv
carries it, and BVLC's own rule beside it.

Shapes are derived by hand from pooling_layer.cpp Reshape: caffe-priv (soeaver/py-RFCN-priv ec89b86,
caffe-priv/src/caffe/layers/pooling_layer.cpp 91-114, the pull request's lines) and BVLC master
(9b89154, src/caffe/layers/pooling_layer.cpp 91-117): pooled = ceil or floor of the float
(size + 2*pad - kernel) / stride, plus 1; then, when the layer pads at all (`if (pad_h_ ||
pad_w_)`), a last window starting at or past size + pad is dropped, on each axis.
"""
import pytest

from conftest import DATA, ROOT, run_in_process
from protoaudit import build_nets
from protoaudit.layers.pooling import CeilModePooling, Pooling
from protoaudit.read.load import load
from protoaudit.read.schema import load_schema

CORPUS = f"{DATA}/corpus/nets"


def pool_net(size_h, size_w, params, schema_field=True):
    return f"""input: "data" input_shape {{ dim: 1 dim: 2 dim: {size_h} dim: {size_w} }}
layer {{ name: "pool" type: "Pooling" bottom: "data" top: "pool" pooling_param {{ {params} }} }}
"""


def pooled(tmp_path, size_h, size_w, params):
    path = tmp_path / "net.prototxt"
    path.write_text(pool_net(size_h, size_w, params))
    (net,) = build_nets(str(path))
    return net.layer("pool").top_shapes[0][2:], net.layer("pool").impl.ctx.schema


def test_the_field_is_the_pull_requests():
    """caffe-priv caffe.proto 1185 (the pull request's line): optional bool ceil_mode = 13 [default = true]."""
    field = load_schema("priv").message("PoolingParameter").DESCRIPTOR.fields_by_name["ceil_mode"]
    assert (field.number, field.type, field.default_value) == (13, field.TYPE_BOOL, True)
    assert "ceil_mode" not in load_schema("bvlc").message("PoolingParameter").DESCRIPTOR.fields_by_name


@pytest.mark.parametrize("size,kernel,stride,pad,ceil,floor", [
    # DenseNet's pool1: (112 + 2 - 3) / 2 = 55.5: ceil 56 + 1 = 57 (57 - 1) * 2 = 112 < 113 stays;
    # floor 55 + 1 = 56
    (112, 3, 2, 1, 57, 56),
    # (6 + 2 - 3) / 2 = 2.5: ceil 4, (4 - 1) * 2 = 6 < 7 stays; floor 3
    (6, 3, 2, 1, 4, 3),
    # the last window starting in the padding: (3 + 2 - 2) / 2 = 1.5, ceil 3, (3 - 1) * 2 = 4 >= 3 + 1:
    # dropped, 2; floor 1 + 1 = 2
    (3, 2, 2, 1, 2, 2),
    # no padding, no clip: (7 - 2) / 2 = 2.5: ceil 4, floor 3
    (7, 2, 2, 0, 4, 3),
    # an exact fit: (8 - 2) / 2 = 3 either way, 4
    (8, 2, 2, 0, 4, 4),
])
def test_ceil_mode_rounds_as_the_pull_request(tmp_path, size, kernel, stride, pad, ceil, floor):
    base = f"pool: MAX kernel_size: {kernel} stride: {stride} pad: {pad}"
    assert pooled(tmp_path, size, size, base + " ceil_mode: false") == ((floor, floor), "priv")
    assert pooled(tmp_path, size, size, base + " ceil_mode: true") == ((ceil, ceil), "priv")
    assert pooled(tmp_path, size, size, base) == ((ceil, ceil), "bvlc")  # BVLC always rounds up


def test_an_unpadded_axis_is_clipped_when_the_other_is_padded(tmp_path):
    """pad_h 0, pad_w 1: Reshape's clip runs on both axes. Height 10, kernel_h 1, stride 4:
    ceil(9 / 4) + 1 = 4, and (4 - 1) * 4 = 12 >= 10 + 0 drops the last: 3 (unpadded it stays 4).
    Width 10, kernel 3, stride 4, pad 1: ceil(9 / 4) + 1 = 4, 12 >= 11: 3. With ceil_mode false both
    round down, floor(9 / 4) + 1 = 3, and nothing is clipped."""
    hw = "kernel_h: 1 kernel_w: 3 stride_h: 4 stride_w: 4"
    assert pooled(tmp_path, 10, 10, f"pool: MAX {hw} pad_h: 0 pad_w: 1") == ((3, 3), "bvlc")
    assert pooled(tmp_path, 10, 10, f"pool: MAX {hw}") == ((4, 3), "bvlc")
    assert pooled(tmp_path, 10, 10, f"pool: MAX {hw} pad_h: 0 pad_w: 1 ceil_mode: false") == ((3, 3), "priv")


def test_keeping_ceil_mode_is_sized_as_bvlc():
    """The fork's Pooling differs from BVLC's only where ceil_mode is false: the loader compares forks
    with this (protoaudit.read.load._refuse_ambiguous)."""
    pool = load_schema("priv").LayerParameter()
    assert CeilModePooling.sized_as(pool) is Pooling
    pool.pooling_param.ceil_mode = True
    assert CeilModePooling.sized_as(pool) is Pooling
    pool.pooling_param.ceil_mode = False
    assert CeilModePooling.sized_as(pool) is CeilModePooling


@pytest.mark.parametrize("file,shapes", [
    # conv1 7x7 stride 2 pad 3 on 224: (224 + 6 - 7) / 2 + 1 = 112; pool1 MAX 3/2/1, ceil_mode false:
    # floor(111 / 2) + 1 = 56 (BVLC: 57); pool2..pool4 AVE 2/2: 28, 14, 7; pool5 global AVE: 1.
    ("densenet121_deploy.prototxt", {"pool1": (1, 64, 56, 56), "pool2": (1, 128, 28, 28),
                                     "pool3": (1, 256, 14, 14), "pool4": (1, 512, 7, 7), "pool5": (1, 1024, 1, 1)}),
    ("densenet161_deploy.prototxt", {"pool1": (1, 96, 56, 56), "pool4": (1, 1056, 7, 7), "pool5": (1, 2208, 1, 1)}),
    # ResNeXt-50 / WRN-50-2 (soeaver): conv1 7x7/2/3 on 224 is 112, pool1 MAX 3/2/1 ceil_mode false 56
    ("soeaver_resnext50_32x4d_deploy.prototxt", {"pool1": (1, 64, 56, 56), "pool_ave": (1, 2048, 1, 1)}),
    ("soeaver_wrn50_2_deploy.prototxt", {"pool1": (1, 64, 56, 56), "pool_ave": (1, 2048, 1, 1)}),
])
def test_corpus_nets_pool_with_floor(file, shapes):
    (net,) = build_nets(f"{CORPUS}/{file}")
    assert net.layer("pool1").impl.ctx.schema == "priv"
    assert {name: net.layer(name).top_shapes[0] for name in shapes} == shapes


def test_bvlc_refuses_the_field_and_the_loader_picks_the_fork():
    """BVLC's schema fails on ceil_mode; of the forks, only caffe-priv's reads the file."""
    source = load(f"{CORPUS}/densenet121_deploy.prototxt")
    assert source.schema.name == "priv"
    run = run_in_process(f"{CORPUS}/densenet121_deploy.prototxt", "--fork", "bvlc")
    assert run.returncode == 2 and 'has no field named "ceil_mode"' in run.stderr


def test_sample_audits(protoaudit):
    run = protoaudit(f"{ROOT}/samples/densenet121_ceil_mode_deploy.prototxt", "--inference", "--caffe-log")
    assert run.returncode == 0, run.stderr
    assert "Top shape: 1 64 56 56 (200704)" in run.stdout  # pool1, as derived above
