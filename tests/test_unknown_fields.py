"""Fields no shipped caffe.proto has (issue 17, item 2): read past with the closest schema where they
cannot change a shape or a byte, each listed as an assumption naming its fork; refused with both
ways out where a layer's shape could read one; refused as before under --strict. The files put real
forks' fields (see each file's comment for the fork's caffe.proto line) into small nets."""
import csv
import io
import json
import os

import pytest

from conftest import DATA, run_protoaudit

HERE = os.path.join(DATA, "unknown_fields")
INPUT = ("--input", "data=2x3x8x8")


def audit(*args):
    run = run_protoaudit(*args, cwd=HERE)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    return run.stdout


def refused(*args):
    run = run_protoaudit(*args, cwd=HERE)
    assert run.returncode == 2 and "Traceback" not in run.stderr, (run.returncode, run.stderr)
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def test_a_solver_and_a_data_layer_read_past_count_the_same_bytes():
    """min_lr, stagelr and stageiter (a solver's schedule) and shuffle (the order records are read in)
    change nothing counted: the totals are those of the same files without them."""
    skipping = json.loads(audit("solver.prototxt", *INPUT, "--format", "json"))
    plain = json.loads(audit("plain_solver.prototxt", *INPUT, "--format", "json"))
    assert skipping["total_bytes"] == plain["total_bytes"]
    said = [(a["layer"], a["assumption"].split(" (")[0]) for a in skipping["assumptions"]]
    # (stagelr and stageiter: MobileNet-YOLO's caffe.proto, shipped, has them too, and reads the solver)
    assert ("(file)", "SolverParameter.min_lr") in said and ("data", "DataParameter.shuffle") in said
    text = {a["assumption"].split(" (")[0]: a["assumption"] for a in skipping["assumptions"]}
    assert "Cysu's Caffe" in text["SolverParameter.min_lr"]
    assert "lim0606" in text["DataParameter.shuffle"]
    assert all("--caffe-proto" in a["override"] for a in skipping["assumptions"])


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv"])
def test_every_format_lists_the_fields_read_past(fmt):
    out = audit("solver.prototxt", *INPUT, "--format", fmt)
    for field in ("SolverParameter.min_lr", "DataParameter.shuffle"):
        assert field in out, fmt
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(out)))
        assert "SolverParameter.min_lr" in rows[0]["assumed"]


def test_strict_refuses_as_before():
    msg = refused("shuffle_train_val.prototxt", *INPUT, "--strict")
    assert msg.startswith("protoaudit: shuffle_train_val.prototxt:13: layer 'data': ")
    assert 'no field named "shuffle"' in msg


def test_engine_on_a_layer_that_allocates_alike_is_read_past():
    """InnerProduct has one implementation on the GPU, whatever Intel's engine says: audited with no flags."""
    out = json.loads(audit("engine.prototxt", "--format", "json"))
    assert [(a["layer"], a["assumption"].split(" (")[0]) for a in out["assumptions"]] == [
        ("ip", "LayerParameter.engine")]


def test_engine_on_a_layer_whose_memory_depends_on_it_is_refused(tmp_path):
    """The layer's name comes after the field: the field's layer is its block, read whole."""
    text = open(os.path.join(HERE, "engine.prototxt")).read().replace('"InnerProduct"', '"Convolution"').replace(
        "inner_product_param { num_output: 5 }", "convolution_param { num_output: 5 kernel_size: 3 }")
    (tmp_path / "conv.prototxt").write_text(text)
    run = run_protoaudit("conv.prototxt", cwd=tmp_path)
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
    assert run.stderr.startswith("protoaudit: conv.prototxt:7: layer 'ip': ")
    assert 'field "engine" of LayerParameter' in run.stderr and "Intel Caffe" in run.stderr
    assert "--caffe-proto" in run.stderr


def test_a_field_a_data_layers_shape_could_read_is_refused_with_both_ways_out():
    msg = refused("new_length.prototxt")
    assert msg.startswith("protoaudit: new_length.prototxt:9: layer 'data': ")
    assert 'field "new_length" of DataParameter' in msg
    assert "--caffe-proto" in msg and "--input data=NxCxHxW" in msg
    # the second way out: the layer's tops given, the rest of the net is audited
    out = json.loads(audit("new_length.prototxt", *INPUT, "--format", "json"))
    assert ("data", "DataParameter.new_length") in [(a["layer"], a["assumption"].split(" (")[0])
                                                     for a in out["assumptions"]]
    ip = next(layer for layer in out["nets"][0]["layers"] if layer["name"] == "ip")
    assert ip["tops"] == [[2, 5]]  # InnerProduct: N x num_output


def test_a_misspelt_solver_field_is_still_refused(tmp_path):
    (tmp_path / "n.prototxt").write_text(open(os.path.join(HERE, "plain_train_val.prototxt")).read())
    (tmp_path / "s.prototxt").write_text('net: "n.prototxt"\nbase_lrr: 0.1\n')
    run = run_protoaudit("s.prototxt", *INPUT, cwd=tmp_path)
    assert run.returncode == 2 and "'base_lr'" in run.stderr and "s.prototxt:2" in run.stderr, run.stderr


def test_tsns_solver_with_its_device_list_and_richness_audits():
    """TSN's solver (yjxiong/caffe: "repeated int32 device_id = 18", "optional int32 richness = 37"):
    the same totals as the plain solver's with the same schedule, both fields listed."""
    tsn = json.loads(audit("tsn_solver.prototxt", *INPUT, "--format", "json"))
    said = [a["assumption"] for a in tsn["assumptions"]]
    assert any(a.startswith("SolverParameter.device_id (tsn_solver.prototxt:32)") and "yjxiong/caffe" in a
               for a in said)
    assert any(a.startswith("SolverParameter.richness (tsn_solver.prototxt:33)") for a in said)
    refused_strict = refused("tsn_solver.prototxt", *INPUT, "--strict")
    assert "tsn_solver.prototxt:32" in refused_strict



def test_a_log_printed_by_a_fork_reads_past_its_fields_too(tmp_path):
    """A Caffe log prints the net as its Caffe parsed it: lim0606's would print DataParameter.shuffle.
    The log with that line added counts what the log without it counts."""
    log = os.path.join(DATA, "logs", "cifar_resnet20.log")
    lines = open(log).read().split("\n")
    at = lines.index('    source: "cifar-10-batches-py/train"')
    (tmp_path / "fork.log").write_text("\n".join(lines[:at + 1] + ["    shuffle: true"] + lines[at + 1:]))
    fork = json.loads(audit(str(tmp_path / "fork.log"), "--format", "json"))
    plain = json.loads(audit(log, "--format", "json"))
    assert fork["total_bytes"] == plain["total_bytes"]
    assert any(a["assumption"].startswith(f"DataParameter.shuffle ({tmp_path / 'fork.log'}:{at + 2})")
               for a in fork["assumptions"])
