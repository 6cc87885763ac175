"""A layer of a type protoaudit has no rule for at the net's end (no layer reads its tops): a custom
loss or metric. Nothing else depends on its tops, so the rest of the net is audited around it, and
the report says what was taken: a type named like a loss as Caffe's LossLayer (loss_layer.cpp: a
scalar top, loss weight 1 unless the file gives one, so the layers below it run backward), any other
top counted empty where the net has a loss beside it. Shapes by hand: a 3x3 convolution of an 8x8
input makes 6x6."""
import pytest

from conftest import build_text, run_in_process, tops
from protoaudit.errors import InputError

HEAD = ('layer { name: "in" type: "Input" top: "x" top: "y" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } '
        'shape { dim: 2 } } }\n'
        'layer { name: "conv" type: "Convolution" bottom: "x" top: "c" convolution_param { num_output: 4 kernel_size: 3 } }\n')


def test_an_unknown_loss_at_the_end_is_a_loss_layer_and_the_net_runs_backward(tmp_path):
    net = build_text(tmp_path, HEAD + 'layer { name: "l" type: "FancyLoss" bottom: "c" bottom: "y" top: "loss" }\n')
    node = net.layer("l")
    assert list(node.top_shapes) == [()] and list(node.loss_weights) == [1.0]
    assert next(b for b in net.blobs if b.name == "c").shape == (2, 4, 6, 6)
    assert next(b for b in net.blobs if b.name == "c").need_backward  # the convolution learns from it
    (said,) = net.assumptions
    assert "unknown layer type 'FancyLoss'" in said.what and "taken as Caffe's LossLayer" in said.what
    assert said.override.startswith("--input loss=NxCxHxW")


def test_an_unknown_metric_beside_a_loss_is_counted_empty(tmp_path):
    text = (HEAD + 'layer { name: "ip" type: "InnerProduct" bottom: "c" top: "p" inner_product_param { num_output: 5 } }\n'
            'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "p" bottom: "y" top: "loss" }\n'
            'layer { name: "m" type: "FancyMetric" bottom: "p" bottom: "y" top: "score" }\n')
    net = build_text(tmp_path, text)
    assert list(net.layer("m").top_shapes) == [(0,)]
    assert "counted empty" in net.assumptions[0].what


def test_an_unknown_layer_whose_top_is_read_or_in_a_net_without_a_loss_is_asked_for(tmp_path):
    with pytest.raises(InputError, match="unknown layer type 'FancyMetric'"):
        build_text(tmp_path, HEAD + 'layer { name: "m" type: "FancyMetric" bottom: "c" top: "score" }\n')
    with pytest.raises(InputError, match="unknown layer type 'FancyLoss'"):
        build_text(tmp_path, HEAD + 'layer { name: "l" type: "FancyLoss" bottom: "c" bottom: "y" top: "loss" }\n'
                   'layer { name: "s" type: "Silence" bottom: "loss" }\n')


def test_the_report_lists_it_as_not_counted(tmp_path):
    (tmp_path / "n.prototxt").write_text(HEAD + 'layer { name: "l" type: "FancyLoss" bottom: "c" bottom: "y" top: "loss" }\n')
    run = run_in_process("n.prototxt", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Not counted: layer 'l' (FancyLoss)" in run.stdout and "no layer reads its tops ('loss')" in run.stdout


def test_its_param_blocks_say_weights_that_are_not_counted(tmp_path):
    """e2e_face's MarginSoftmaxLoss (its own weights, a param { } block in the file; tried as a new user
    would): the blocks are not refused as more than the layer's blobs (which are unknown, not absent),
    and the assumption says its weights are left out."""
    net = build_text(tmp_path, HEAD + 'layer { name: "l" type: "FancyLoss" bottom: "c" bottom: "y" top: "loss" '
                     'param { lr_mult: 1 } }\n')
    assert list(net.layer("l").top_shapes) == [()] and net.layer("l").params == ()
    assert "its 1 param { } block says it has weights, which are not counted" in net.assumptions[0].what


def test_its_own_param_block_does_not_keep_a_fork_that_knows_the_other_types_from_reading_the_file(tmp_path):
    """A re-identification net: SSD's Normalize (no normalize_param: its defaults) and, at the end, a
    QuartetLoss with a quartet_loss_param no caffe.proto has. Every schema reads past that block
    alike; the one that knows more of the file's types (SSD's, which has Normalize) reads it, and the
    loss is audited around as above. Normalize keeps its bottom's shape (normalize_layer.cpp
    Reshape): 2x4x6x6."""
    text = (HEAD + 'layer { name: "n" type: "Normalize" bottom: "c" top: "n" }\n'
            'layer { name: "q" type: "QuartetLoss" bottom: "n" bottom: "y" top: "loss" '
            'quartet_loss_param { margin: 1.0 } }\n')
    net = build_text(tmp_path, text)
    assert tops(net, "n") == [(2, 4, 6, 6)] and tops(net, "q") == [()]
    run = run_in_process(str(tmp_path / "net.prototxt"))
    assert run.returncode == 0 and "Read with the caffe.proto of SSD" in run.stdout, run.stderr


def test_a_type_with_loss_inside_its_name_is_a_loss_layer_too(tmp_path):
    """A colorization net's EuclideanLossWithTV (a Euclidean loss with total variation): named like a
    loss, it is taken as Caffe's LossLayer at the net's end, as above."""
    net = build_text(tmp_path, HEAD + 'layer { name: "l" type: "EuclideanLossWithTV" bottom: "c" bottom: "y" '
                     'top: "loss" }\n')
    assert tops(net, "l") == [()] and list(net.layer("l").loss_weights) == [1.0]
