"""Fields no shipped caffe.proto has (issue 17, item 2): read past with the closest schema where they
cannot change a shape or a byte, each listed as an assumption naming its fork; refused with both
ways out where a layer's shape could read one; refused as before under --strict. The files put real
forks' fields (see each file's comment for the fork's caffe.proto line) into small nets; where a fork's
schema is now shipped its file is read exactly, and the reading past is tested with fields no shipped
caffe.proto has (NVIDIA Caffe's max_epoch; one invented data-order field, shuffle_seed, so labelled)."""
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
    """max_epoch (NVIDIA Caffe's, a solver's schedule) and shuffle_seed (invented: the order records are
    read in) change nothing counted: the totals are those of the same files without them."""
    skipping = json.loads(audit("solver.prototxt", *INPUT, "--format", "json"))
    plain = json.loads(audit("plain_solver.prototxt", *INPUT, "--format", "json"))
    assert skipping["total_bytes"] == plain["total_bytes"]
    said = [(a["layer"], a["assumption"].split(" (")[0]) for a in skipping["assumptions"]]
    # (stagelr and stageiter: the shipped intel and MobileNet-YOLO caffe.protos have them, and read the solver)
    assert sorted(said) == [("(file)", "SolverParameter.max_epoch"), ("data", "DataParameter.shuffle_seed")]
    text = {a["assumption"].split(" (")[0]: a["assumption"] for a in skipping["assumptions"]}
    # neither is in lenient.FIELD_FORKS: no fork is named
    assert "(a fork's field)" in text["SolverParameter.max_epoch"]
    assert "(a fork's field)" in text["DataParameter.shuffle_seed"]
    assert all("--caffe-proto" in a["override"] for a in skipping["assumptions"])


def test_the_forks_fields_this_file_used_to_read_past_are_now_read_exactly():
    """Cysu's min_lr and lim0606's DataParameter.shuffle: their forks' schemas are shipped now, so each
    file is read exactly, nothing assumed, and counts what the file without the field counts."""
    plain = json.loads(audit("plain_solver.prototxt", *INPUT, "--format", "json"))
    cysu = json.loads(audit("cysu_solver.prototxt", *INPUT, "--format", "json"))
    assert cysu["assumptions"] == [] and cysu["total_bytes"] == plain["total_bytes"]
    audit("cysu_solver.prototxt", *INPUT, "--strict")
    shuffled = audit("shuffle_train_val.prototxt", *INPUT, "--strict")
    assert "Read with the caffe.proto of lim0606's Caffe" in shuffled and "Assumed" not in shuffled
    assert (json.loads(audit("shuffle_train_val.prototxt", *INPUT, "--format", "json"))["total_bytes"]
            == json.loads(audit("plain_train_val.prototxt", *INPUT, "--format", "json"))["total_bytes"])


@pytest.mark.parametrize("fmt", ["text", "markdown", "csv"])
def test_every_format_lists_the_fields_read_past(fmt):
    out = audit("solver.prototxt", *INPUT, "--format", fmt)
    for field in ("SolverParameter.max_epoch", "DataParameter.shuffle_seed"):
        assert field in out, fmt
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(out)))
        assert "SolverParameter.max_epoch" in rows[0]["assumed"]


def test_strict_refuses_as_before():
    msg = refused("order_train_val.prototxt", *INPUT, "--strict")
    assert msg.startswith("protoaudit: order_train_val.prototxt:14: layer 'data': ")
    assert 'no field named "shuffle_seed"' in msg
    msg = refused("solver.prototxt", *INPUT, "--strict")
    assert msg.startswith("protoaudit: solver.prototxt:7: ") and 'no field named "max_epoch"' in msg


def test_intels_engine_is_read_exactly_by_intels_schema():
    out = audit("engine.prototxt", "--strict")
    assert "Read with the caffe.proto of Intel Caffe" in out and "Assumed" not in out


def test_engine_on_a_layer_that_allocates_alike_is_read_past():
    """InnerProduct has one implementation on the GPU, whatever Intel's engine says: audited with no
    flags, the file read with ShuffleNet's schema (its ShuffleChannel), which has no engine."""
    run = run_protoaudit("engine_shufflenet.prototxt", cwd=HERE)
    assert run.returncode == 0, run.stderr
    assert "Read with the caffe.proto of BVLC Caffe with farmingyard's ShuffleChannel" in run.stdout, run.stdout
    out = json.loads(audit("engine_shufflenet.prototxt", "--format", "json"))
    assert [(a["layer"], a["assumption"].split(" (")[0]) for a in out["assumptions"]] == [
        ("ip", "LayerParameter.engine")]
    assert "Intel Caffe" in out["assumptions"][0]["assumption"]
    ip = next(layer for layer in out["nets"][0]["layers"] if layer["name"] == "ip")
    assert ip["tops"] == [[2, 5]]  # InnerProduct: N x num_output
    assert refused("engine_shufflenet.prototxt", "--strict").startswith("protoaudit: engine_shufflenet.prototxt:")


def test_engine_on_a_layer_whose_memory_depends_on_it_is_refused(tmp_path):
    """The layer's name comes after the field: the field's layer is its block, read whole."""
    text = open(os.path.join(HERE, "engine_shufflenet.prototxt")).read().replace(
        '"InnerProduct"', '"Convolution"').replace(
        "inner_product_param { num_output: 5 }", "convolution_param { num_output: 5 kernel_size: 3 }")
    (tmp_path / "conv.prototxt").write_text(text)
    run = run_protoaudit("conv.prototxt", cwd=tmp_path)
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
    assert run.stderr.startswith("protoaudit: conv.prototxt:9: layer 'ip': ")
    assert 'field "engine" of LayerParameter' in run.stderr and "Intel Caffe" in run.stderr
    assert "--caffe-proto" in run.stderr


def test_a_field_a_data_layers_shape_could_read_is_read_past_where_its_dataset_is_absent(tmp_path):
    """no_such_lmdb is not on this machine: the data top's shape is assumed whatever new_length says, so
    the field is read past, said so; with a database of that name beside the net (here a folder: only
    its being there is asked), the field could shape what is read, and the net is refused, naming it."""
    out = json.loads(audit("new_length.prototxt", "--format", "json"))
    said = {a["assumption"].split(" (")[0]: a["assumption"] for a in out["assumptions"]}
    assert "the layer's dataset is not on this machine" in said["DataParameter.new_length"]
    (tmp_path / "n.prototxt").write_text(open(os.path.join(HERE, "new_length.prototxt")).read())
    (tmp_path / "no_such_lmdb").mkdir()
    run = run_protoaudit("n.prototxt", cwd=tmp_path)
    assert run.returncode == 2 and 'field "new_length" of DataParameter' in run.stderr, run.stderr


def test_a_data_layers_field_read_past_is_named_where_the_net_then_stops(tmp_path):
    """Kevin35Day/deep-residual-networks' multi-label ImageData: a fork's `label_dim: 3` makes the label
    3 wide, which a Slice on axis 1 cuts. Read past (the list is absent), the label is BVLC's one value
    per image, on which the Slice stops: the refusal names the field, not the Slice."""
    (tmp_path / "n.prototxt").write_text(
        'layer { name: "data" type: "ImageData" top: "data" top: "label"\n'
        '  image_data_param { source: "absent.txt" batch_size: 2 new_height: 8 new_width: 8 label_dim: 3 } }\n'
        'layer { name: "slice" type: "Slice" bottom: "label" top: "a" top: "b" slice_param { axis: 1 slice_point: 1 } }\n'
        'layer { name: "s" type: "Silence" bottom: "data" bottom: "a" bottom: "b" }\n')
    run = run_protoaudit("n.prototxt", cwd=tmp_path)
    assert run.returncode == 2 and 'field "label_dim" of ImageDataParameter' in run.stderr, run.stderr
    assert "--caffe-proto" in run.stderr


def test_a_field_a_data_layers_shape_could_read_is_refused_with_both_ways_out(tmp_path):
    (tmp_path / "new_length.prototxt").write_text(open(os.path.join(HERE, "new_length.prototxt")).read())
    (tmp_path / "no_such_lmdb").mkdir()  # the database is there (only its being there is asked)
    run = run_protoaudit("new_length.prototxt", cwd=tmp_path)
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
    msg = run.stderr.strip()
    assert msg.startswith("protoaudit: new_length.prototxt:9: layer 'data': ")
    assert 'field "new_length" of DataParameter' in msg
    assert "--caffe-proto" in msg and "--input data=NxCxHxW" in msg
    # the second way out: the layer's tops given, the rest of the net is audited
    out = json.loads(audit("new_length.prototxt", *INPUT, "--format", "json"))
    assert ("data", "DataParameter.new_length") in [(a["layer"], a["assumption"].split(" (")[0])
                                                     for a in out["assumptions"]]
    ip = next(layer for layer in out["nets"][0]["layers"] if layer["name"] == "ip")
    assert ip["tops"] == [[2, 5]]  # InnerProduct: N x num_output


def test_a_field_is_judged_in_its_own_layer_where_names_repeat(tmp_path):
    """A data layer of a type no fork has, carrying a field no schema has, and an in-place layer after
    it of the same name (as goodluckcwl/Face-alignment-mobilenet-v2's data layer and Noise, before its
    fork was shipped): the field is the unknown layer's, so the refusal names that type, not the ReLU's
    shape."""
    (tmp_path / "n.prototxt").write_text(
        'layer { name: "data" type: "ImageLandmarkData" top: "data" transform_param { shift_ratio: 0.1 } }\n'
        'layer { name: "data" type: "ReLU" bottom: "data" top: "data" }\n')
    run = run_protoaudit("n.prototxt", cwd=tmp_path)
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
    assert "unknown layer type 'ImageLandmarkData'" in run.stderr and "ReLU" not in run.stderr, run.stderr


def test_a_field_of_another_shipped_schema_is_no_forks_field(tmp_path):
    """Andrew-Qibin/DSS's ResNet net: HED's ImageLabelmapData (reading an image_data_param `normalize`
    no shipped schema has) beside BVLC's BatchNorm, whose batch_norm_param HED's older schema lacks.
    RCF's caffe.proto (HED's ImageLabelmapData in a 2016 BVLC Caffe) has both: the file is read with
    it, and only `normalize` is named (tried as a new user would: the refusal said batch_norm_param
    was in no caffe.proto protoaudit ships). (Before RCF's Caffe was shipped, BVLC's caffe.proto read
    it and ImageLabelmapData was borrowed from HED, the same class.)"""
    (tmp_path / "n.prototxt").write_text(
        'layer { name: "data" type: "ImageLabelmapData" top: "data" top: "label"\n'
        '  image_data_param { source: "absent.lst" batch_size: 1 normalize: true } }\n'
        'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"\n'
        '  convolution_param { num_output: 4 kernel_size: 3 } }\n'
        'layer { name: "bn" type: "BatchNorm" bottom: "conv" top: "conv"\n'
        '  batch_norm_param { use_global_stats: false } }\n')
    (tmp_path / "absent.lst").write_text("a.jpg a.png\n")  # the list is here: the field could shape what it reads
    run = run_protoaudit("n.prototxt", cwd=tmp_path)
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
    assert 'field "normalize" of ImageDataParameter' in run.stderr and "batch_norm_param" not in run.stderr
    run = run_protoaudit("n.prototxt", "--input", "data=1x3x8x8", "--input", "label=1x1x8x8",
                         "--format", "json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    said = " ".join(a["assumption"] for a in out["assumptions"])
    assert "ImageDataParameter.normalize" in said
    assert out["nets"][0]["caffe_proto"] == "rcf"


def test_a_params_propagate_down_beside_another_forks_field_names_its_fork_and_is_refused(tmp_path):
    """longriyao/caffe_GAN's ParamSpec.param_propagate_down (its caffe.proto: `optional bool
    param_propagate_down = 6`; net.cpp sets the parameter's gradient flag from it, over lr_mult) is read
    with that fork's schema (tests/test_fork_caffe_gan.py); beside a field of another fork (caffe-segnet's
    Upsample, as caffe_colorizer's Caffe had) no shipped schema reads the file, and as a layer's memory can
    depend on it, it is refused, naming the fork, and it is no misspelling of propagate_down."""
    (tmp_path / "n.prototxt").write_text(
        'input: "x" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
        'layer { name: "c" type: "Convolution" bottom: "x" top: "c" param { lr_mult: 1 param_propagate_down: 0 }\n'
        '  convolution_param { num_output: 4 kernel_size: 3 } }\n')
    assert run_protoaudit("n.prototxt", cwd=tmp_path).returncode == 0
    (tmp_path / "n.prototxt").write_text(
        'input: "x" input_shape { dim: 1 dim: 3 dim: 8 dim: 8 }\n'
        'layer { name: "p" type: "Pooling" bottom: "x" top: "p" top: "m"\n'
        '  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n'
        'layer { name: "c" type: "Convolution" bottom: "p" top: "c" param { lr_mult: 1 param_propagate_down: 0 }\n'
        '  convolution_param { num_output: 3 kernel_size: 1 } }\n'
        'layer { name: "u" type: "Upsample" bottom: "c" bottom: "m" top: "u" upsample_param { scale: 2 } }\n')
    run = run_protoaudit("n.prototxt", cwd=tmp_path)
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
    assert 'field "param_propagate_down" of ParamSpec' in run.stderr and "longriyao/caffe_GAN" in run.stderr
    assert "did you mean" not in run.stderr


def test_a_fillers_fork_field_is_read_with_its_forks_schema(tmp_path):
    """mikuhatsune/e2e_face's InnerProduct fills its weights from `weight_filler { values: ... }`, a
    repeated field of its fork's FillerParameter (caffe_modification/caffe.proto); BVLC's has `value`.
    Read past before that fork was shipped (as a misspelling would be refused), it is now read with
    e2e_face's caffe.proto: the same total as the net without it, no assumption, and --strict takes it."""
    net = ('input: "x" input_shape { dim: 2 dim: 6 }\n'
           'layer { name: "ip" type: "InnerProduct" bottom: "x" top: "y" inner_product_param { num_output: 6 '
           'weight_filler { type: "constant" %s } } }\n')
    (tmp_path / "fork.prototxt").write_text(net % "values: 1 values: 0 values: 0")
    (tmp_path / "plain.prototxt").write_text(net % "value: 1")
    fork = run_protoaudit("fork.prototxt", "--format", "json", cwd=tmp_path)
    plain = run_protoaudit("plain.prototxt", "--format", "json", cwd=tmp_path)
    assert fork.returncode == 0, fork.stderr
    assert json.loads(fork.stdout)["total_bytes"] == json.loads(plain.stdout)["total_bytes"]
    assert not [a for a in json.loads(fork.stdout)["assumptions"] if "FillerParameter.values" in a["assumption"]]
    assert run_protoaudit("fork.prototxt", "--strict", cwd=tmp_path).returncode == 0


def test_a_misspelt_solver_field_is_still_refused(tmp_path):
    (tmp_path / "n.prototxt").write_text(open(os.path.join(HERE, "plain_train_val.prototxt")).read())
    (tmp_path / "s.prototxt").write_text('net: "n.prototxt"\nbase_lrr: 0.1\n')
    run = run_protoaudit("s.prototxt", *INPUT, cwd=tmp_path)
    assert run.returncode == 2 and "'base_lr'" in run.stderr and "s.prototxt:2" in run.stderr, run.stderr


def test_tsns_solver_with_its_device_list_and_richness_audits():
    """TSN's solver (yjxiong/caffe: "repeated int32 device_id = 18", "optional int32 richness = 37"):
    read exactly by the shipped tsn schema, nothing assumed, even under --strict."""
    tsn = json.loads(audit("tsn_solver.prototxt", *INPUT, "--format", "json"))
    assert tsn["assumptions"] == []
    strict = json.loads(audit("tsn_solver.prototxt", *INPUT, "--strict", "--format", "json"))
    assert strict["total_bytes"] == tsn["total_bytes"]


def test_a_device_list_is_read_past_where_no_schema_reads_the_solver():
    """The same TSN solver with NVIDIA Caffe's max_epoch added: no shipped schema reads it, so the
    device list is read past as one id, and max_epoch too; the totals are the exact reading's."""
    exact = json.loads(audit("tsn_solver.prototxt", *INPUT, "--format", "json"))
    both = json.loads(audit("tsn_nv_solver.prototxt", *INPUT, "--format", "json"))
    assert both["total_bytes"] == exact["total_bytes"]
    said = [a["assumption"] for a in both["assumptions"]]
    assert any(a.startswith("SolverParameter.device_id (tsn_nv_solver.prototxt:32)") and "yjxiong/caffe" in a
               for a in said)
    assert any(a.startswith("SolverParameter.max_epoch (tsn_nv_solver.prototxt:35)") for a in said)
    assert not any("richness" in a for a in said)  # (the tsn schema, the closest, reads it)
    refused_strict = refused("tsn_nv_solver.prototxt", *INPUT, "--strict")
    assert "tsn_nv_solver.prototxt:35" in refused_strict and 'no field named "max_epoch"' in refused_strict



def test_a_log_printed_by_a_fork_reads_past_its_fields_too(tmp_path):
    """A Caffe log prints the net as its Caffe parsed it: a fork's would print its own data fields
    (shuffle_seed: invented, in no fork protoaudit knows; lim0606's shuffle is read exactly now).
    The log with that line added counts what the log without it counts."""
    log = os.path.join(DATA, "logs", "cifar_resnet20.log")
    lines = open(log).read().split("\n")
    at = lines.index('    source: "cifar-10-batches-py/train"')
    (tmp_path / "fork.log").write_text("\n".join(lines[:at + 1] + ["    shuffle_seed: 7"] + lines[at + 1:]))
    fork = json.loads(audit(str(tmp_path / "fork.log"), "--format", "json"))
    plain = json.loads(audit(log, "--format", "json"))
    assert fork["total_bytes"] == plain["total_bytes"]
    assert any(a["assumption"].startswith(f"DataParameter.shuffle_seed ({tmp_path / 'fork.log'}:{at + 2})")
               for a in fork["assumptions"])


def test_an_lstms_gradient_clip_is_read_past_and_it_counts_as_without_it(tmp_path):
    """recurrent_param's clipping_threshold (a recurrent fork's: junhyukoh's caffe-lstm has it in its
    LstmParameter) bounds the gradient's values: the LSTM counts the same bytes with it as without
    it, and the field is listed as read past; --strict refuses it."""
    net = ('layer { name: "in" type: "Input" top: "x" top: "cont" input_param { shape { dim: 5 dim: 3 dim: 7 } '
           'shape { dim: 5 dim: 3 } } }\n'
           'layer { name: "lstm" type: "LSTM" bottom: "x" bottom: "cont" top: "h" '
           'recurrent_param { num_output: 4 %s} }\n'
           'layer { name: "loss" type: "EuclideanLoss" bottom: "h" bottom: "h" top: "loss" }\n')
    (tmp_path / "clip.prototxt").write_text(net % "clipping_threshold: 0.1 ")
    (tmp_path / "plain.prototxt").write_text(net % "")
    clip = json.loads(run_protoaudit("clip.prototxt", "--format", "json", cwd=tmp_path).stdout)
    plain = json.loads(run_protoaudit("plain.prototxt", "--format", "json", cwd=tmp_path).stdout)
    assert clip["total_bytes"] == plain["total_bytes"]
    assert [a["assumption"].split(" (")[0] for a in clip["assumptions"]] == ["RecurrentParameter.clipping_threshold"]
    run = run_protoaudit("clip.prototxt", "--strict", cwd=tmp_path)
    assert run.returncode == 2 and "clipping_threshold" in run.stderr


def test_a_known_fields_name_with_a_word_added_is_a_forks_field_not_a_misspelling(tmp_path):
    """WenlongZhang0517/sar_script_caffe's fork writes `mean_value_file:` in transform_param, which Caffe
    prints first (field order) in its log: it is BVLC's mean_value with "_file" added, a fork's field, read
    past as any (its dataset is absent, so the data shape is assumed whatever it says). A misspelling
    (`mean_valeu`) is still refused."""
    net = ('layer { name: "data" type: "Data" top: "data" top: "label" transform_param { '
           'mean_value_file: "mean_std.txt" crop_size: 28 } data_param { source: "no_such_lmdb" batch_size: 4 '
           'backend: LMDB } }\n'
           'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 2 } }\n'
           'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }\n')
    (tmp_path / "n.prototxt").write_text(net)
    run = run_protoaudit("n.prototxt", "--format", "json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert any("TransformationParameter.mean_value_file" in a["assumption"] for a in json.loads(run.stdout)["assumptions"])
    (tmp_path / "n.prototxt").write_text(net.replace("mean_value_file", "mean_valeu"))
    run = run_protoaudit("n.prototxt", cwd=tmp_path)
    assert run.returncode == 2 and "did you mean 'mean_value'?" in run.stderr, run.stderr
