"""Bad input: exit status 2, one line on stderr naming the file, the line and the layer (where there is
one) and what to do; never a traceback, never a hang. Every case runs the command as a user does."""
import os
import subprocess
import sys

import pytest

from conftest import ROOT

TIMEOUT = 30  # seconds: any bad input must be refused well within this

NET = """\
name: "tiny"
layer {
  name: "data"
  type: "Input"
  top: "data"
  input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } }
}
layer {
  name: "conv1"
  type: "Convolution"
  bottom: "data"
  top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 }
}
"""
# NET's layer "conv1" starts on line 8; its convolution_param is on line 13.

TWO_BOTTOMS = NET + """\
layer {
  name: "join"
  type: "Eltwise"
  bottom: "data"
  bottom: "conv1"
  top: "join"
}
"""
# "join" starts on line 15: data is 2x3x8x8, conv1 is 2x4x6x6 ((8 - 3) / 1 + 1 = 6, 4 outputs)


def write(tmp_path, name, content):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def refused(run):
    """The one line protoaudit printed for a refused input, after checking how it was refused."""
    assert run.returncode == 2, (run.returncode, run.stdout[-500:], run.stderr)
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("protoaudit: ")
    return lines[0]


def says_what_to_do(message):
    """Every message ends with the way out, in parentheses."""
    assert message.endswith(")") and " (" in message, message


@pytest.fixture
def cli(protoaudit, tmp_path):
    """Run protoaudit from tmp_path, where the test's files are."""
    return lambda *args: protoaudit(*args, cwd=tmp_path, timeout=TIMEOUT)


def test_syntax_error(cli, tmp_path):
    write(tmp_path, "net.prototxt", NET.replace("num_output: 4 kernel_size: 3", "num_output: 4 kernel_size: : 3"))
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:13: layer 'conv1': ")
    says_what_to_do(msg)


def test_unclosed_brace_names_the_last_line(cli, tmp_path):
    write(tmp_path, "net.prototxt", NET.rstrip("}\n") + "\n")
    msg = refused(cli("net.prototxt"))
    assert "net.prototxt:13: the file ends inside layer 'conv1', opened on line 8 (truncated?)" in msg
    says_what_to_do(msg)


def test_unknown_field(cli, tmp_path):
    write(tmp_path, "net.prototxt", NET.replace("kernel_size", "kernel_sise"))
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:13: layer 'conv1': ")
    assert '"kernel_sise"' in msg and "caffe.proto" in msg
    says_what_to_do(msg)


@pytest.mark.parametrize("line, says", [
    ("device_id: 0,1", "device_id names one GPU (caffe train --gpu 0,1 trains on several)"),
    ("stepvalue: 1000, 2000", "write `stepvalue: VALUE` once per value where caffe.proto repeats it"),
])
def test_values_listed_after_a_comma(cli, tmp_path, line, says):
    """HolmesShuan/ResNet-18-Caffemodel-on-ImageNet's solver ends with `device_id: 0,1`: the text
    format takes the comma for the end of the field and `1` for the name of the next one."""
    write(tmp_path, "net.prototxt", NET)
    write(tmp_path, "solver.prototxt", f'net: "net.prototxt"\nbase_lr: 0.1\n{line}\n')
    msg = refused(cli("solver.prototxt"))
    assert msg.startswith("protoaudit: solver.prototxt:3: ") and "no field named" in msg
    assert "Caffe's parser stops here too" in msg and says in msg
    says_what_to_do(msg)


def test_unknown_layer_type_suggests_the_near_one(cli, tmp_path):
    write(tmp_path, "net.prototxt", NET.replace('"Convolution"', '"Convolutoin"'))
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:8: layer 'conv1': ")
    assert "unknown layer type 'Convolutoin'" in msg and "did you mean 'Convolution'?" in msg
    assert "--input" not in msg  # declaring a typo's tops would only hide it
    says_what_to_do(msg)


def test_a_type_that_changes_a_word_is_no_misspelling():
    """Wheatly2/Bag-of-Tricks' SoftmaxCrossEntropyLoss (its mixup fork's loss), tried as a new user would,
    was offered SigmoidCrossEntropyLoss: of the same length, but six letters apart. A misspelling
    changes two at most (Convolutoin: two transposed; EuclidianLoss: one)."""
    from protoaudit.layers import suggest

    assert suggest("SoftmaxCrossEntropyLoss") is None
    assert suggest("Convolutoin") == "Convolution" and suggest("EuclidianLoss") == "EuclideanLoss"


def test_a_numbered_type_is_no_misspelling():
    """ARL's EuclideanLoss6 (tried as a new user would) was offered EuclideanLoss: a number added is a
    fork's numbered version of a type (JAA-Net's EuclideanLoss2 to EuclideanLoss5), not a slip."""
    from protoaudit.layers import suggest

    assert suggest("EuclideanLoss6") is None and suggest("Convolution2") is None
    assert suggest("Convolutio") == "Convolution"


def test_a_field_with_an_underscore_added_is_a_misspelling(cli, tmp_path):
    """param_str_ (a triplet loss's Python layer, tried as a new user would) was called a fork's field;
    a fork's own field adds a word (mean_value_file beside mean_value), an underscore alone is a slip."""
    python = NET + 'layer { name: "py" type: "Python" bottom: "conv1" top: "py" python_param { module: "m" ' \
                   'layer: "L" param_str_: "x" } }\n'
    write(tmp_path, "net.prototxt", python)
    msg = refused(cli("net.prototxt"))
    assert '"param_str_"' in msg and "did you mean 'param_str'?" in msg


def test_misspelt_field_suggests_the_near_one(cli, tmp_path):
    write(tmp_path, "net.prototxt", NET.replace("num_output: 4", "num_ouptut: 4"))
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:13: layer 'conv1': ")
    assert '"num_ouptut"' in msg and "did you mean 'num_output'?" in msg
    says_what_to_do(msg)


POOLED = NET + """layer {
  name: "pool1"
  type: "Pooling"
  bottom: "conv1"
  top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 }
}
"""
# "pool1" starts on line 15, its pooling_param is on line 20. caffe.proto's PoolMethod: MAX, AVE, STOCHASTIC.


@pytest.mark.parametrize("value, near", [("MAXX", "did you mean MAX? "), ("max", "did you mean MAX? "),
                                         ("STOCHASTC", "did you mean STOCHASTIC? "), ("QQQ", "")])
def test_enum_value_lists_the_valid_ones(cli, tmp_path, value, near):
    write(tmp_path, "net.prototxt", POOLED.replace("pool: MAX", f"pool: {value}"))
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:20: layer 'pool1': ") and value in msg
    assert msg.endswith(f"({near}PoolMethod is one of MAX, AVE, STOCHASTIC)")


def test_misspelt_bottom_suggests_the_near_one(cli, tmp_path):
    write(tmp_path, "net.prototxt", POOLED.replace('bottom: "conv1"', 'bottom: "conv_1"'))
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:15: layer 'pool1': ") and "'conv_1'" in msg
    assert "did you mean 'conv1'?" in msg
    says_what_to_do(msg)


@pytest.mark.parametrize("cut, line, layer, opened", [
    ('  name: "pool1"\n  type: "Pooling"\n  bottom: "conv1"\n  top: "pool1"\n  pooling_param { pool:', 20, "pool1", 15),
    ('  name: "pool1"\n  type: "Pool', 17, "pool1", 15),
    ('  name: "pool1"\n  type: "Pooling"\n  bottom:', 18, "pool1", 15),
    ('  name: "pool1"\n  type: "Pooling"\n  bottom: "conv1"\n  top: "pool1"\n  pooling_param { pool: MAX kern', 20,
     "pool1", 15),
], ids=["in-a-param", "in-a-string", "after-a-field-name", "in-a-field-name"])
def test_truncated_file_is_named_as_such(cli, tmp_path, cut, line, layer, opened):
    """A net cut short inside a layer: the file ends inside that layer, not protobuf's
    `Expected string but found: ''` or a field named by half its name."""
    write(tmp_path, "net.prototxt", NET + "layer {\n" + cut)
    msg = refused(cli("net.prototxt"))
    assert msg.startswith(f"protoaudit: net.prototxt:{line}: the file ends inside layer '{layer}', "
                          f"opened on line {opened} (truncated?)")
    says_what_to_do(msg)


def test_unknown_layer_type_of_another_fork(cli, tmp_path):
    """DeepLab's MatWrite, in a net whose Input layer DeepLab's caffe.proto cannot read and whose CRNN
    fork's ContinuationIndicator (with its continuation_indicator_param) no shipped fork reads (PiCANet's Caffe, which reads Input and DeepLab's Interp, has no
    MatWrite; a file it reads whole would borrow it)."""
    write(tmp_path, "net.prototxt", NET.replace('"Convolution"', '"MatWrite"').replace(
        "convolution_param { num_output: 4 kernel_size: 3 }", "") + (
        'layer { name: "boxes" type: "ContinuationIndicator" bottom: "data" top: "boxes" '
        'continuation_indicator_param { time_step: 2 } }\n'))
    msg = refused(cli("net.prototxt"))
    assert "layer 'conv1' (line 8): unknown layer type 'MatWrite'" in msg and "--fork deeplab_v2" in msg
    says_what_to_do(msg)


def test_a_type_a_shipped_fork_sizes_is_no_misspelling(cli, tmp_path):
    """Fast R-CNN's ROIPooling is one edit from Pooling, and DeepLab's ImageSegData from ImageData: in
    a net that no shipped fork reads whole (a CRNN fork's net; a MobileNet U-Net), the message names
    the forks that size the type, not a misspelling (tried as a new user would: both were called
    typos). Where the fork that sizes the type reads the file past the other's own fields, knowing
    more of its types, it is read with that fork's schema, and the type's own rule speaks: ROIPooling takes
    two bottoms (roi_pooling_layer.hpp, ExactNumBottomBlobs 2), ImageSegData none (PiCANet's Caffe reads
    the Input layer and sizes ImageSegData: image_seg_data_layer.hpp, ExactNumBottomBlobs 0)."""
    for kind, bottoms in (("ROIPooling", 2), ("ImageSegData", 0)):
        other = ('layer { name: "boxes" type: "ContinuationIndicator" bottom: "data" top: "boxes" '
                 'continuation_indicator_param { time_step: 2 } }\n')  # a CRNN fork's own layer, which no shipped fork reads
        write(tmp_path, "net.prototxt", NET.replace('"Convolution"', f'"{kind}"').replace(
            "convolution_param { num_output: 4 kernel_size: 3 }", "") + other)
        msg = refused(cli("net.prototxt"))
        assert "did you mean" not in msg
        assert f"layer 'conv1': takes exactly {bottoms} bottom blobs, got 1" in msg
        says_what_to_do(msg)


def test_a_type_named_after_the_one_it_extends_is_no_misspelling(cli, tmp_path):
    """arcface-caffe's CosinAddm and joint-hashing's K1_EuclideanLoss are their forks' own types:
    a misspelling keeps the length but for a letter, so neither is offered a BVLC type (EuclideanLoss);
    and two layers of one unknown type are told once, both named (tried as a new user would:
    cascade-rcnn's train net got 'did you mean Accuracy?' for its BboxAccuracy, its 45 layers 18 KB of
    message, before that fork was shipped; MS-CNN's DetectionAccuracy, offered no
    Accuracy, stood here until MS-CNN's was)."""
    layers = "".join(f'layer {{ name: "{name}" type: "{kind}" bottom: "conv1" top: "{name}" }}\n'
                     for name, kind in (("acc", "CosinAddm"), ("l1", "K1_EuclideanLoss"), ("l2", "K1_EuclideanLoss")))
    silence = 'layer { name: "s" type: "Silence" bottom: "acc" bottom: "l1" bottom: "l2" }\n'  # their tops are read
    write(tmp_path, "net.prototxt", NET + layers + silence)
    msg = refused(cli("net.prototxt"))
    assert "did you mean" not in msg and "3 layers need a top shape" in msg
    assert "layers 'l1' (line 16), 'l2' (line 17): unknown layer type 'K1_EuclideanLoss'" in msg
    says_what_to_do(msg)


def test_a_git_lfs_pointer_is_named_as_one(cli, tmp_path):
    """A repository that keeps its prototxt files in Git LFS, cloned without LFS, holds pointer files
    (the LFS spec: a `version https://git-lfs.github.com/spec/v1` line, the object's oid and size):
    tried as a new user would (DBC-Lab/Brain_MRI_Enhancement's solver), it was read as a net and
    refused for a field named 'version'."""
    write(tmp_path, "solver.prototxt", "version https://git-lfs.github.com/spec/v1\n"
          "oid sha256:cd2d440fdbc4444d97c68699a77581455ebbcf4a6a6367c02bc93d9dc2fad1ae\nsize 1512\n")
    msg = refused(cli("solver.prototxt"))
    assert "Git LFS pointer" in msg and "git lfs pull" in msg and "field" not in msg
    says_what_to_do(msg)


def test_missing_bottom(cli, tmp_path):
    write(tmp_path, "net.prototxt", NET.replace('bottom: "data"', 'bottom: "dat"'))
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:8: layer 'conv1': ")
    assert "'dat'" in msg
    says_what_to_do(msg)


def test_eltwise_shapes_differ(cli, tmp_path):
    write(tmp_path, "net.prototxt", TWO_BOTTOMS)
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:15: layer 'join': ")
    assert "(2, 3, 8, 8)" in msg and "(2, 4, 6, 6)" in msg
    says_what_to_do(msg)


def test_concat_shapes_differ_off_the_axis(cli, tmp_path):
    write(tmp_path, "net.prototxt", TWO_BOTTOMS.replace('"Eltwise"', '"Concat"'))
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:15: layer 'join': ")
    assert "(2, 3, 8, 8)" in msg and "(2, 4, 6, 6)" in msg
    says_what_to_do(msg)


def test_cycle_names_the_later_producer(cli, tmp_path):
    net = NET + """\
layer {
  name: "a"
  type: "ReLU"
  bottom: "b"
  top: "a"
}
layer {
  name: "b"
  type: "ReLU"
  bottom: "a"
  top: "b"
}
"""
    write(tmp_path, "net.prototxt", net)
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:15: layer 'a': ")  # "a" starts on line 15
    assert "'b'" in msg and "later" in msg and "cycle" in msg
    says_what_to_do(msg)


def test_include_and_exclude_in_one_layer(cli, tmp_path):
    write(tmp_path, "net.prototxt", NET.replace(
        '  name: "conv1"\n', '  name: "conv1"\n  include { phase: TRAIN }\n  exclude { phase: TEST }\n'))
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:8: layer 'conv1': ")
    assert "include" in msg and "exclude" in msg
    says_what_to_do(msg)


# A NetParameter in protobuf's binary wire format: name "tiny" (field 1), then a layer (field 100,
# tag 0xa2 0x06) holding name "conv1" (field 1) and an empty type (field 2, length 0: a NUL byte).
CAFFEMODEL = b"\x0a\x04tiny" + b"\xa2\x06\x09" + b"\x0a\x05conv1" + b"\x12\x00"


@pytest.mark.parametrize("content", [CAFFEMODEL, CAFFEMODEL[:6]], ids=["with-nul", "without-nul"])
def test_binary_caffemodel(cli, tmp_path, content):
    write(tmp_path, "bvlc_alexnet.caffemodel", content)
    msg = refused(cli("bvlc_alexnet.caffemodel"))
    assert msg.startswith("protoaudit: bvlc_alexnet.caffemodel: ")
    assert "binary" in msg and "prototxt" in msg
    says_what_to_do(msg)


@pytest.mark.parametrize("content", ["", "\n\n   \n", "# a comment, nothing else\n"],
                         ids=["empty", "blank", "comment-only"])
def test_empty_file(cli, tmp_path, content):
    write(tmp_path, "net.prototxt", content)
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt: ") and "empty" in msg
    says_what_to_do(msg)


def test_missing_file(cli):
    msg = refused(cli("no_such_net.prototxt"))
    assert msg.startswith("protoaudit: no_such_net.prototxt: ") and "no such file" in msg
    says_what_to_do(msg)


def test_folder_instead_of_file(cli, tmp_path):
    (tmp_path / "models").mkdir()
    msg = refused(cli("models"))
    assert msg.startswith("protoaudit: models: ") and "folder" in msg


def test_solver_naming_a_missing_net(cli, tmp_path):
    write(tmp_path, "solver.prototxt", 'base_lr: 0.01\nnet: "models/train_val.prototxt"\nmax_iter: 10\n')
    msg = refused(cli("solver.prototxt"))
    assert msg.startswith("protoaudit: solver.prototxt:2: ")  # the `net:` line
    assert "'models/train_val.prototxt'" in msg
    says_what_to_do(msg)


def test_solver_of_a_train_net_alone_whose_data_is_missing(cli, tmp_path):
    """A solver with no test net whose train net needs a shape: audited at the image size assumed for a
    dataset not on this machine, and under --strict the data layer's one message, not a crash."""
    write(tmp_path, "n.prototxt", 'name: "n"\nlayer { name: "data" type: "Data" top: "data" top: "label"\n'
          '  data_param { source: "missing_lmdb" batch_size: 4 backend: LMDB } }\n'
          'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 2 } }\n')
    write(tmp_path, "solver.prototxt", 'net: "n.prototxt"\n')
    run = cli("solver.prototxt")
    assert run.returncode == 0 and "top 'data' 4x3x224x224" in run.stdout, (run.stdout, run.stderr)
    msg = refused(cli("solver.prototxt", "--strict"))
    assert msg.startswith("protoaudit: n.prototxt:2: layer 'data': ")
    assert "'missing_lmdb'" in msg and "--input data=4xCxHxW" in msg
    says_what_to_do(msg)


def test_absurd_input_size(cli, tmp_path):
    write(tmp_path, "net.prototxt", NET)
    msg = refused(cli("net.prototxt", "--input", "data=100000x3x100000x100000"))
    assert msg.startswith("protoaudit: net.prototxt:2: layer 'data': ")
    # 100000 * 3 * 100000 * 100000 = 3e15 elements; a Caffe blob counts at most INT_MAX = 2147483647
    assert "3,000,000,000,000,000" in msg and "2,147,483,647" in msg
    says_what_to_do(msg)


def test_huge_input_dim_does_not_hang(cli, tmp_path):
    net = ('name: "huge"\ninput: "data"\ninput_dim: 100000\ninput_dim: 3\ninput_dim: 100000\n'
           'input_dim: 100000\nlayer { name: "fc" type: "InnerProduct" bottom: "data" top: "fc" '
           "inner_product_param { num_output: 1000000 } }\n")
    write(tmp_path, "deploy.prototxt", net)
    msg = refused(cli("deploy.prototxt"))
    assert msg.startswith("protoaudit: deploy.prototxt") and "3,000,000,000,000,000" in msg
    says_what_to_do(msg)


@pytest.mark.parametrize("value", ["data", "data=", "=2x3x8x8", "data=2xfoo", "data=2x3x-8x8", "data=2..3"])
def test_bad_input_option(cli, tmp_path, value):
    write(tmp_path, "net.prototxt", NET)
    msg = refused(cli("net.prototxt", "--input", value))
    assert f"--input '{value}'" in msg and "<input>" not in msg
    says_what_to_do(msg)


def test_input_naming_no_data_top(cli, tmp_path):
    write(tmp_path, "net.prototxt", NET)
    msg = refused(cli("net.prototxt", "--input", "image=2x3x8x8"))
    assert msg.startswith("protoaudit: net.prototxt: ") and "image" in msg
    says_what_to_do(msg)


@pytest.mark.parametrize("args", [["--phase", "val"], ["--batch", "many"], []], ids=["phase", "batch", "no-path"])
def test_usage_errors_are_one_line(cli, tmp_path, args):
    write(tmp_path, "net.prototxt", NET)
    msg = refused(cli(*(["net.prototxt"] if args else []), *args))
    says_what_to_do(msg)


# --- every flag's bad value ---------------------------------------------------------------------------
# Each is one line naming the flag, with what to write instead, and exit status 2, checked before any
# file is read. These run the commands' own main() in this process (what `python -m protoaudit` and the
# protoaudit-check script call), for speed: a traceback would fail the test as an exception here.

FLAGS = [
    (["--context", "abc"], "--context abc: not a size"),
    (["--context", "-1"], "--context -1: a size cannot be negative"),
    (["--context", "300"], "--context 300: a size needs a unit (did you mean 300G?)"),
    (["--gpu-mem", "-8G"], "--gpu-mem -8G: a size cannot be negative"),
    (["--gpu-mem", "8"], "--gpu-mem 8: a size needs a unit (did you mean 8G?)"),
    (["--gpu-mem", "8000"], "--gpu-mem 8000: a size needs a unit (did you mean 8000M?)"),
    (["--gpu-mem", "1K"], "--gpu-mem 1K: no GPU has less than 1 MiB (did you mean 1G?)"),
    (["--gpu-mem", "0G"], "--gpu-mem 0G: the card must have some memory"),
    (["--gpu-mem", "8X"], "--gpu-mem 8X: not a size"),
    (["--batch", "0"], "--batch 0: must be at least 1"),
    (["--batch", "many"], "--batch many: not a whole number"),
    (["--test-batch", "0"], "--test-batch 0: must be at least 1"),
    (["--level", "x"], "--level x: not a whole number"),
    (["--level", str(2**31)], "--level 2147483648: more than Caffe's int32 holds"),
    (["--sweep", "foo"], "--sweep foo: 'foo' is not a batch"),
    (["--sweep", "0"], "--sweep 0: batches are whole numbers from 1 up"),
    (["--input", "foo"], "--input 'foo' is not TOP=SHAPE"),
    (["--define", "x"], "--define 'x' is not NAME=VALUE"),
    (["--format", "nope"], "--format: invalid choice: 'nope' (choose from 'text', 'json'"),
    (["--phase", "val"], "--phase: invalid choice: 'val'"),
    (["--engine", "x"], "--engine: invalid choice: 'x'"),
    (["--mode", "x"], "--mode: invalid choice: 'x'"),
    (["--solver-type", "sgd"], "--solver-type sgd: unknown solver type 'sgd' (did you mean 'SGD'?"),
    (["--fork", "nope"], "--fork nope: protoaudit knows bvlc, "),
    (["--root", "missing"], "--root missing: no such folder"),
    (["--log", "missing.log"], "--log missing.log: no such file"),
    (["--caffe-proto", "missing.proto"], "--caffe-proto missing.proto: no such file"),
    (["--shapes", "missing"], "missing: no such shapes file (check the path given to --shapes)"),
    (["--plot", "chart.txt"], "--plot chart.txt: the chart is drawn as .svg or .png"),
    (["--freeze", "conv"], "--freeze conv: the TRAIN net has no layer of that name"),
    (["--stage"], "--stage: expected one argument"),
]


def refused_in_process(main, argv, prog, capsys):
    try:
        status = main(argv)
    except SystemExit as e:  # argparse's own refusals
        status = e.code
    err = capsys.readouterr().err
    assert status == 2, (status, err)
    assert len(err.splitlines()) == 1 and err.startswith(prog), err
    says_what_to_do(err.strip())
    return err.strip()


@pytest.mark.parametrize("args, said", FLAGS, ids=[" ".join(a) for a, _ in FLAGS])
def test_every_flags_bad_value(tmp_path, monkeypatch, capsys, args, said):
    from protoaudit.cli import main

    write(tmp_path, "net.prototxt", NET)
    monkeypatch.chdir(tmp_path)
    assert said in refused_in_process(main, ["net.prototxt", *args], "protoaudit: ", capsys)


@pytest.mark.parametrize("args, said", [
    (["--batch-a", "0"], "--batch-a 0: must be at least 1"),
    (["--batch-b", "x"], "--batch-b x: not a whole number"),
    (["--input-b", "foo"], "--input-b 'foo' is not TOP=SHAPE"),
    (["--context", "-1"], "--context -1: a size cannot be negative"),
    (["--gpu-mem", "8"], "(did you mean 8G?)"),
    (["--sweep", "1"], "unrecognized arguments: --sweep 1"),
])
def test_every_diff_flags_bad_value(tmp_path, monkeypatch, capsys, args, said):
    from protoaudit.cli import main

    write(tmp_path, "net.prototxt", NET)
    monkeypatch.chdir(tmp_path)
    assert said in refused_in_process(main, ["diff", "net.prototxt", "net.prototxt", *args],
                                    "protoaudit", capsys)  # argparse's own start "protoaudit diff: "


@pytest.mark.parametrize("args, said", [
    (["--context", "abc"], "--context abc: not a size"),
    (["--gpu-mem", "-8G"], "--gpu-mem -8G: a size cannot be negative"),
    (["--gpu-mem", "8"], "(did you mean 8G?)"),
    (["--batch", "0"], "--batch 0: must be at least 1"),
    (["--format", "json"], "unrecognized arguments: --format json"),
])
def test_every_check_flags_bad_value_is_one_line_for_the_run(tmp_path, monkeypatch, capsys, args, said):
    """protoaudit-check with two files: the flag's line once, not once per file."""
    from protoaudit.check import main

    write(tmp_path, "a.prototxt", NET)
    write(tmp_path, "b.prototxt", NET)
    monkeypatch.chdir(tmp_path)
    assert said in refused_in_process(main, ["a.prototxt", "b.prototxt", *args], "protoaudit-check: ", capsys)


@pytest.mark.parametrize("args, said", [
    (["--gpu-mem", "8"], "--gpu-mem 8: a size needs a unit (did you mean 8G?)"),
    (["--sweep", "0"], "--sweep 0: batches are whole numbers from 1 up"),
    (["--context", "-1"], "--context -1: a size cannot be negative"),
])
def test_a_keras_models_flags_are_checked_alike(data_dir, capsys, args, said):
    from protoaudit.cli import main

    model = os.path.join(data_dir, "keras_oracle", "shared", "models", "vgg16_sgd.json")
    assert said in refused_in_process(main, [model, *args], "protoaudit: ", capsys)


def test_a_bad_flag_is_told_before_a_bad_file(cli, tmp_path):
    """The flag is checked first: the run says what is wrong with it, not with the file."""
    msg = refused(cli("no_such_net.prototxt", "--context", "-1"))
    assert msg.startswith("protoaudit: --context -1: a size cannot be negative")


@pytest.mark.parametrize("escape, shown", [("\\r", "\\r"), ("\\n", "\\n"), ("\\v", "\\x0b"), ("\\302\\205", "\\x85"),
                                           ("\r", "\\r")])
def test_a_name_holding_a_line_break_is_told_on_one_line(cli, tmp_path, escape, shown):
    """protobuf unescapes a quoted "\\r" (or "\\n", U+0085 as UTF-8...) into the name itself, and a
    quoted string may hold a bare carriage return: the message about that name is still one line,
    the break written as its escape (found by tests/fuzz_corpus.py)."""
    write(tmp_path, "net.prototxt", NET.replace('bottom: "data"', f'bottom: "da{escape}ta"'))
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:8: layer 'conv1': ") and f"'da{shown}ta'" in msg
    says_what_to_do(msg)


def test_negative_shape_in_the_net(cli, tmp_path):
    write(tmp_path, "net.prototxt", NET.replace("dim: 2 dim: 3", "dim: -2 dim: 3"))
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:2: layer 'data': ") and "(-2, 3, 8, 8)" in msg
    says_what_to_do(msg)


def test_kernel_larger_than_input(cli, tmp_path):
    write(tmp_path, "net.prototxt", NET.replace("kernel_size: 3", "kernel_size: 11"))
    msg = refused(cli("net.prototxt"))
    # (8 - 11) / 1 + 1 = -2
    assert msg.startswith("protoaudit: net.prototxt:8: layer 'conv1': ") and "-2" in msg
    says_what_to_do(msg)


def test_unsigned_field_given_a_negative_value(cli, tmp_path):
    write(tmp_path, "net.prototxt", NET.replace("kernel_size: 3", "kernel_size: 3 pad: -1"))
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:13: layer 'conv1': ") and "-1" in msg
    says_what_to_do(msg)


@pytest.mark.parametrize("text", ["layer { " * 20000 + "}" * 20000, "{" * 200000, "a { " * 5000],
                         ids=["layers-in-layers", "braces", "unknown-blocks"])
def test_deeply_nested_file(cli, tmp_path, text):
    write(tmp_path, "net.prototxt", text)
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt:1: ")
    says_what_to_do(msg)


def test_gigantic_file(cli, tmp_path):
    path = tmp_path / "net.prototxt"
    with open(path, "w") as f:
        line = 'layer { name: "r" type: "ReLU" bottom: "data" top: "data" }\n'
        f.write(line * (17 * 2**20 // len(line) + 1))  # a little over 17 MiB
    msg = refused(cli("net.prototxt"))
    assert msg.startswith("protoaudit: net.prototxt: ") and "MiB" in msg
    says_what_to_do(msg)


def test_truncated_net_is_refused_or_read_never_crashes(cli, tmp_path, data_dir):
    """A real net cut anywhere: protoaudit reads it (a cut between layers is a valid, shorter net)
    or refuses it with one line; it never fails inside."""
    with open(f"{data_dir}/logs/cvgj_alexnet_test.train.as_run.prototxt") as f:
        text = f.read()
    for k in range(1, 16):
        cut = len(text) * k // 16
        write(tmp_path, "cut.prototxt", text[:cut])
        run = cli("cut.prototxt", "--input", "data=2x3x227x227", "--input", "label=2")
        assert "Traceback" not in run.stderr
        assert run.returncode in (0, 2), (cut, run.stderr)
        if run.returncode == 2:
            refused(run)



def test_unknown_type_in_a_forks_net_names_that_fork(cli, tmp_path):
    """A net only caffe-priv's schema reads (ceil_mode) with a type protoaudit has no rule for."""
    write(tmp_path, "net.prototxt", NET.replace('"Convolution"', '"Qzxv"').replace(
        "convolution_param { num_output: 4 kernel_size: 3 }", "pooling_param { ceil_mode: false }"))
    msg = refused(cli("net.prototxt"))
    assert ("unknown layer type 'Qzxv': protoaudit has no rule for it in soeaver's caffe-priv (py-RFCN-priv), "
            "which has ceil_mode pooling; ") in msg
    says_what_to_do(msg)


def test_an_unknown_type_no_fork_has_takes_the_fork_of_the_files_other_types(cli, tmp_path):
    """A ReverseTime beside an Lstm on an Input layer: caffe_ocr's Caffe, now shipped, reads the file (its
    Lstm on (T, N, I) sequences, and the Input layer, which caffe-lstm's and CTPN's Caffes do not read),
    so the message says its layers have no rule for the type, and asks for its top."""
    write(tmp_path, "net.prototxt", """name: "ocr"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 32 dim: 96 } } }
layer { name: "t" type: "ReverseTime" bottom: "data" top: "t" }
layer { name: "l1" type: "Lstm" bottom: "t" top: "l1" }
layer { name: "l2" type: "Lstm" bottom: "l1" top: "l2" }
""")
    msg = refused(cli("net.prototxt"))
    assert "unknown layer type 'ReverseTime': protoaudit has no rule for it in caffe_ocr's Caffe (senlinuc/caffe_ocr" in msg
    assert "give --input t=NxCxHxW" in msg and "'Lstm'" not in msg
    says_what_to_do(msg)


def test_a_python_without_the_dependencies_is_told_to_install_them(tmp_path):
    """`python -m protoaudit` run from the project's folder with a Python that lacks protobuf (here
    a `google` package without it stands first on the path): one line, exit status 2, and what to
    do; imported by a program, the ModuleNotFoundError says the same."""
    (tmp_path / "google").mkdir()
    (tmp_path / "google" / "__init__.py").write_text("")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
    run = subprocess.run([sys.executable, "-m", "protoaudit", "samples/segnet_seed001_new.prototxt"],
                         capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT, env=env)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [run.stderr.strip()] and "Traceback" not in run.stderr
    assert "no module named 'google.protobuf'" in run.stderr and "install protoaudit with pip" in run.stderr
    imported = subprocess.run([sys.executable, "-c", "import protoaudit"], capture_output=True, text=True,
                              timeout=TIMEOUT, cwd=str(tmp_path), env=env)
    assert imported.returncode == 1
    assert "ModuleNotFoundError: protoaudit: the packages it needs are not installed" in imported.stderr
