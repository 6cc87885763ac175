"""The schemas shipped in the package are exactly what protoc makes of proto/, and they read as Caffe's."""
import importlib.util
import os

import pytest

from protoaudit.read.schema import SCHEMA_NAMES, load_schema

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _build_module():
    spec = importlib.util.spec_from_file_location("proto_build", os.path.join(ROOT, "proto", "build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_shipped_schema_matches_proto(name):
    pytest.importorskip("grpc_tools")
    build = _build_module()
    with open(os.path.join(ROOT, "protoaudit", "read", "schemas", f"{name}.desc"), "rb") as f:
        shipped = f.read()
    assert build.compile_schema(build.SCHEMAS[name]) == shipped, f"run: python proto/build.py ({name} is stale)"


def test_every_schema_is_built():
    assert set(_build_module().SCHEMAS) == set(SCHEMA_NAMES)


def test_bvlc_field_numbers_and_defaults():
    """Facts of the format, read off BVLC master's caffe.proto by hand."""
    s = load_schema("bvlc")
    layer = s.message("LayerParameter").DESCRIPTOR.fields_by_name
    assert layer["convolution_param"].number == 106
    assert layer["batch_norm_param"].number == 139
    net = s.NetParameter.DESCRIPTOR.fields_by_name
    assert net["layer"].number == 100 and net["layers"].number == 2
    pooling = s.message("PoolingParameter")()
    assert pooling.stride == 1 and pooling.pool == 0 and not pooling.global_pooling
    conv = s.message("ConvolutionParameter")()
    assert conv.group == 1 and conv.bias_term and conv.axis == 1
    assert s.message("SolverParameter")().type == "SGD"


def test_forks_keep_their_own_field_numbers():
    """caffe-segnet reuses numbers BVLC gave to other fields (137: embed_param vs upsample_param)."""
    bvlc = load_schema("bvlc").message("LayerParameter").DESCRIPTOR.fields_by_name
    segnet = load_schema("segnet").message("LayerParameter").DESCRIPTOR.fields_by_name
    assert bvlc["embed_param"].number == 137
    assert segnet["upsample_param"].number == 137
    assert segnet["bn_param"].number == 45
    loss = load_schema("segnet").message("LossParameter").DESCRIPTOR.fields_by_name
    assert loss["weight_by_label_freqs"].number == 3
