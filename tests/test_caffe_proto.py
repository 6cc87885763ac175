"""--caffe-proto FILE: a user's own fork schema, compiled at run time (grpcio-tools' protoc, no
system protoc); the nets' layers are sized as the closest shipped schema's."""
import json
import os

from conftest import ROOT, run_in_process

SEED = os.path.join(ROOT, "samples", "segnet_seed001_new.prototxt")

# BVLC's caffe.proto with a layer parameter of the user's own fork added to LayerParameter
FIELD = "  optional MyParameter my_param = 9999;\n"
MESSAGE = "message MyParameter {\n  optional uint32 width = 1 [default = 7];\n}\n"
NET = """name: "mine"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer { name: "odd" type: "MyLayer" bottom: "data" top: "odd" my_param { width: 3 } }
layer { name: "ip" type: "InnerProduct" bottom: "odd" top: "ip" inner_product_param { num_output: 5 } }
"""


def users_fork(tmp_path):
    with open(os.path.join(ROOT, "proto", "caffe.proto")) as f:
        text = f.read()
    start = text.index("message LayerParameter {")
    end = text.index("\n}\n", start)
    (tmp_path / "caffe.proto").write_text(text[:end + 1] + FIELD + text[end + 1:] + MESSAGE)
    (tmp_path / "net.prototxt").write_text(NET)


def test_a_users_fork_reads_its_own_fields(tmp_path):
    users_fork(tmp_path)
    refused = run_in_process("net.prototxt", "--input", "odd=2x3x8x8", "--strict", cwd=tmp_path)
    assert refused.returncode == 2 and 'no field named "my_param"' in refused.stderr
    # without --strict the field is read past, as the tops of its layer (a type none knows) are given
    read_past = run_in_process("net.prototxt", "--input", "odd=2x3x8x8", "--format", "json", cwd=tmp_path)
    assert read_past.returncode == 0, read_past.stderr
    assert [(a["layer"], a["assumption"].split(" (")[0]) for a in json.loads(read_past.stdout)["assumptions"]] == [
        ("odd", "LayerParameter.my_param")]
    run = run_in_process("net.prototxt", "--caffe-proto", "caffe.proto", "--input", "odd=2x3x8x8", "--format", "json",
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["nets"][0]["caffe_proto"] == "user:caffe.proto"
    assert [(g["layer"], g["type"]) for g in report["gaps"]] == [("odd", "MyLayer")]
    ip = next(layer for layer in report["nets"][0]["layers"] if layer["name"] == "ip")
    assert ip["tops"] == [[2, 5]]
    text = run_in_process("net.prototxt", "--caffe-proto", "caffe.proto", "--input", "odd=2x3x8x8", cwd=tmp_path)
    assert "Read with your caffe.proto (caffe.proto), its layers sized as BVLC Caffe's." in text.stdout


def test_a_copy_of_a_shipped_fork_sizes_as_that_fork(tmp_path):
    """The seed's SegNet net read with a copy of caffe-segnet's caffe.proto: the same bytes as with
    the shipped schema, its BN and Upsample layers sized as the fork's."""
    with open(os.path.join(ROOT, "proto", "forks", "segnet.proto")) as f:
        (tmp_path / "caffe.proto").write_text(f.read())
    shipped = json.loads(run_in_process(SEED, "--format", "json").stdout)
    mine = run_in_process(SEED, "--caffe-proto", tmp_path / "caffe.proto", "--format", "json")
    assert mine.returncode == 0, mine.stderr
    assert json.loads(mine.stdout)["total_bytes"] == shipped["total_bytes"]


def test_a_bad_proto_is_one_line(tmp_path):
    (tmp_path / "caffe.proto").write_text("syntax = \"proto2\";\npackage caffe;\nmessage NetParameter {\n  oops\n}\n")
    run = run_in_process(SEED, "--caffe-proto", tmp_path / "caffe.proto")
    assert run.returncode == 2
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"protoaudit: {tmp_path / 'caffe.proto'}:4: protoc could not compile it: ")
    (tmp_path / "other.proto").write_text("syntax = \"proto2\";\npackage caffe;\nmessage X { optional int32 a = 1; }\n")
    run = run_in_process(SEED, "--caffe-proto", tmp_path / "other.proto")
    assert run.returncode == 2 and "has no caffe.NetParameter or caffe.LayerParameter" in run.stderr
    run = run_in_process(SEED, "--caffe-proto", tmp_path / "missing.proto")
    # a missing file is refused with the other option values, before any file is read, naming its flag
    assert run.returncode == 2
    assert run.stderr.startswith(f"protoaudit: --caffe-proto {tmp_path / 'missing.proto'}: no such file")


def test_fork_and_caffe_proto_together_are_refused(tmp_path):
    users_fork(tmp_path)
    run = run_in_process("net.prototxt", "--caffe-proto", "caffe.proto", "--fork", "bvlc", cwd=tmp_path)
    assert run.returncode == 2 and "give --fork or --caffe-proto, not both" in run.stderr


def test_a_caffe_proto_in_a_folder_with_a_plus_in_its_name(tmp_path):
    """Tried as a new user would: the caffe.proto of a fork checked out in a folder named with a '+'
    (a schema read with another's layer types is named "A+B" inside protoaudit). It reads the net as
    from any other folder, and a layer of a type no rule sizes is refused without offering
    --caffe-proto again, naming the user's file."""
    folder = tmp_path / "caffe+mine"
    folder.mkdir()
    users_fork(folder)
    proto = str(folder / "caffe.proto")
    run = run_in_process(str(folder / "net.prototxt"), "--caffe-proto", proto, "--input", "odd=2x3x8x8",
                         "--format", "json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["nets"][0]["caffe_proto"] == "user:" + proto
    refused = run_in_process(str(folder / "net.prototxt"), "--caffe-proto", proto)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "unknown layer type 'MyLayer'" in refused.stderr and f"your caffe.proto ({proto})" in refused.stderr
    assert "(--caffe-proto) reads its fields" not in refused.stderr
