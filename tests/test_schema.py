"""The schemas shipped in the package are exactly what protoc makes of proto/, and they read as Caffe's."""
import importlib.util
import os

import pytest

from protoaudit.read.schema import SCHEMA_NAMES, described, load_schema

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


@pytest.mark.parametrize("schema", [*SCHEMA_NAMES, "user:my/caffe.proto"])
def test_unknown_type_names_the_caffe_that_read_the_net_in_one_clause(schema):
    """The schema's description (BVLC Caffe, a fork's own words, the user's file) is a noun phrase
    that ends its clause: '...: protoaudit has no rule for it in <description>; ...'."""
    from types import SimpleNamespace

    from protoaudit.net.build import _unknown_type

    layer = SimpleNamespace(type="Qzxv", name="odd", top=["q"], ListFields=list)  # (a LayerParameter's)
    message = _unknown_type(layer, schema).message
    said = described(schema)
    assert message.startswith(f"unknown layer type 'Qzxv': protoaudit has no rule for it in {said}; ")
    assert said.count("(") == said.count(")") and ";" not in said and not said.endswith(".")
    assert message.endswith("declaring its tops audits the rest of the net around it")
    assert ("--caffe-proto" in message) == (not schema.startswith("user:"))  # not offered to one who gave it
