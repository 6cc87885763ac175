"""`--freeze LAYER`: the net trained with LAYER and everything it depends on frozen, as a Caffe user
writes it (param { lr_mult: 0 }, propagate_down: false), and what Caffe still allocates for it.

Expected values are derived by hand below, from Caffe's sources: net.cpp (need-backward from
lr_mult and propagate_down; AppendParam keeps every owned param in learnable_params_ whatever its
lr_mult), solver.cpp (Step starts with ClearParamDiffs over learnable_params_), sgd_solver.cpp
(PreSolve makes history_ for each learnable param; the GPU update touches it), and
conv_layer.cpp (Backward takes its bottom's diff when it computes the weight gradient, even
with propagate_down false).
"""
import json
import os

import pytest

from conftest import DATA, run_in_process
from protoaudit.audit import audit
from protoaudit.errors import InputError
from protoaudit.memory.explain import compare
from protoaudit.memory.summary import summarize

FREEZE = os.path.join(DATA, "freeze")
TWO_STAGE = os.path.join(FREEZE, "two_stage.prototxt")
FLICKR = os.path.join(FREEZE, "bvlc_finetune_flickr_style_train_val.prototxt")

# two_stage.prototxt at batch 2, 8x8 images, every conv 3x3 pad 1 (so 8x8 stays 8x8):
DATA_FLOATS = 2 * 3 * 8 * 8  # 384
CONV1_FLOATS = CONV2_FLOATS = 2 * 4 * 8 * 8  # 512
CONV1_PARAMS = (4 * 3 * 3 * 3, 4)  # weights 108, bias 4
CONV2_PARAMS = (4 * 4 * 3 * 3, 4)  # weights 144, bias 4
FROZEN_PARAMS = sum(CONV1_PARAMS) + sum(CONV2_PARAMS)  # 260


def _buffers(result, kind):
    return {b.owner: b for b in result.buffers if b.kind == kind and b.net == "net"}


@pytest.fixture(scope="module")
def joint():
    return audit(TWO_STAGE, context=0)


@pytest.fixture(scope="module")
def frozen():
    return audit(TWO_STAGE, context=0, freeze=["relu2"])


def test_the_frozen_part_is_the_layer_and_its_ancestors(frozen):
    assert frozen.train.net.frozen == ["input", "conv1", "relu1", "conv2", "relu2"]


def test_the_prototxt_is_edited_as_a_caffe_user_would(frozen):
    layers = {n.name: n for n in frozen.train.net.layers}
    for name in ("conv1", "conv2"):
        assert [p.lr_mult for p in layers[name].lp.param] == [0, 0]  # weights and bias
    # conv3 reads conv2 (frozen); the loss reads label from the frozen Input layer, fc from the head
    assert list(layers["conv3"].lp.propagate_down) == [False]
    assert list(layers["loss"].lp.propagate_down) == [True, False]
    assert not layers["fc"].lp.propagate_down and not layers["conv3"].lp.param  # the head is untouched
    # Net::Init: no frozen layer needs backward, every head layer does
    assert [layers[n].need_backward for n in ("conv1", "relu1", "conv2", "relu2")] == [False] * 4
    assert all(layers[n].need_backward for n in ("conv3", "relu3", "pool", "fc", "loss"))


def test_no_top_diffs_in_the_frozen_part_but_the_one_conv3_takes(joint, frozen):
    diffs_joint, diffs_frozen = _buffers(joint, "top diff"), _buffers(frozen, "top diff")
    # joint training: conv1's backward takes data's diff (384 floats), conv2's takes conv1's
    assert diffs_joint["data"].bytes == DATA_FLOATS * 4 == 1536
    assert diffs_joint["conv1"].bytes == CONV1_FLOATS * 4 == 2048
    assert "data" not in diffs_frozen and "conv1" not in diffs_frozen
    # conv3 (trained) computes its weight gradient, and Caffe's conv backward takes its bottom's
    # diff then, propagate_down false or not: conv2's 512 floats
    assert diffs_frozen["conv2"].bytes == CONV2_FLOATS * 4 == 2048
    assert diffs_frozen["conv2"].layer == "conv3"


def test_frozen_params_get_their_diffs_and_history_from_the_solver_only(frozen):
    diffs, history = _buffers(frozen, "param diff"), _buffers(frozen, "history")
    for layer, sizes in (("conv1", CONV1_PARAMS), ("conv2", CONV2_PARAMS)):
        for k, n in enumerate(sizes):
            assert diffs[f"{layer}.param{k}"].bytes == n * 4
            assert diffs[f"{layer}.param{k}"].touch == "solver"  # ClearParamDiffs, not backward
    # SGD's GPU update keeps one history_ blob per learnable param, in learnable_params_ order
    assert history["conv1.param0.history_[0]"].bytes == 108 * 4
    assert history["conv2.param1.history_[3]"].bytes == 4 * 4
    # Solver::Step zeroes every learnable param's diff before its first forward: trained ones too
    assert _buffers(frozen, "param diff")["conv3.param0"].touch == "solver"


def test_without_a_solver_frozen_params_get_no_diff():
    bare = audit(TWO_STAGE, context=0, freeze=["relu2"], solver_type="none")
    diffs = _buffers(bare, "param diff")
    assert not any(owner.startswith(("conv1.", "conv2.")) for owner in diffs)
    assert "conv3.param0" in diffs


def test_the_frozen_cost_says_what_the_solver_still_holds(frozen):
    cost = summarize(frozen).frozen
    assert cost.param_elements == FROZEN_PARAMS == 260
    assert cost.param_bytes == cost.diff_bytes == cost.history_bytes == 260 * 4
    assert cost.top_diff_bytes == CONV2_FLOATS * 4


def test_diff_of_joint_and_frozen_training_explains_the_numbers(joint, frozen):
    c = compare(joint, frozen)
    # what freezing saves: data's and conv1's diffs, 1536 + 2048 bytes; params, their diffs and
    # history cost the same (the solver holds the frozen params' diffs and history)
    assert c.delta == -(1536 + 2048)
    assert c.by_kind["top diff"][0] - c.by_kind["top diff"][1] == 3584
    for kind in ("param data", "param diff", "history"):
        assert c.by_kind[kind][0] == c.by_kind[kind][1]
    text = " ".join(c.sentences)
    assert "B freezes 5 layers (input .. relu2)" in text and "top diff -3.5 KiB" in text
    assert "260 params still cost 1.02 KiB of data, 1.02 KiB of diffs and 1.02 KiB of SGD history" in text
    assert "lr_mult 0 included" in text and "ClearParamDiffs" in text
    assert "2 KiB of diffs are still written into their tops" in text


def test_diff_command_freezes_one_side():
    run = run_in_process("diff", TWO_STAGE, TWO_STAGE, "--freeze-b", "relu2", "--context", "0", "--format", "json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["change_bytes"] == -3584
    assert out["a"]["frozen"] is None
    assert out["b"]["frozen"]["layers"] == ["input", "conv1", "relu1", "conv2", "relu2"]
    assert out["b"]["frozen"]["history_bytes"] == 260 * 4
    both = json.loads(run_in_process("diff", TWO_STAGE, TWO_STAGE, "--freeze", "relu2", "--context", "0",
                                     "--format", "json").stdout)
    assert both["change_bytes"] == 0 and both["a"]["frozen"] == both["b"]["frozen"]


def test_text_report_says_the_frozen_params_keep_diffs_and_history():
    run = run_in_process(TWO_STAGE, "--freeze", "relu2", "--context", "0")
    assert run.returncode == 0, run.stderr
    line = next(x for x in run.stdout.splitlines() if x.startswith("Frozen"))
    assert "260 params" in line and "1.02 KiB of diffs and 1.02 KiB of SGD history" in line
    assert "lr_mult 0 included" in line


def test_an_unknown_layer_is_bad_input_naming_the_layers():
    run = run_in_process(TWO_STAGE, "--freeze", "relu9")
    assert run.returncode == 2 and run.stdout == ""
    assert "--freeze relu9" in run.stderr and "input, conv1, relu1, conv2" in run.stderr
    assert "did you mean 'relu3'" in run.stderr and "Traceback" not in run.stderr
    with pytest.raises(InputError):
        audit(TWO_STAGE, freeze="nope")


TOWERS = """
name: "towers"
layer { name: "input" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } shape { dim: 2 } } }
layer { name: "convA" type: "Convolution" bottom: "data" top: "a"
        param { name: "%s" } convolution_param { num_output: 2 kernel_size: 1 bias_term: false } }
layer { name: "convB" type: "Convolution" bottom: "data" top: "b"
        param { name: "%s" } convolution_param { num_output: 2 kernel_size: 1 bias_term: false } }
layer { name: "cat" type: "Concat" bottom: "a" bottom: "b" top: "cat" }
layer { name: "fc" type: "InnerProduct" bottom: "cat" top: "fc" inner_product_param { num_output: 3 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
"""


def test_a_layer_written_earlier_but_not_an_ancestor_keeps_training(tmp_path):
    path = tmp_path / "towers.prototxt"
    path.write_text(TOWERS % ("wa", "wb"))
    # freezing convB: its ancestors are the Input layer only; convA, written before it, trains on
    result = audit(str(path), context=0, freeze=["convB"])
    layers = {n.name: n for n in result.train.net.layers}
    assert result.train.net.frozen == ["input", "convB"]
    assert layers["convA"].need_backward and not layers["convB"].need_backward
    assert list(layers["cat"].lp.propagate_down) == [True, False]
    # convA's backward writes its weight gradient, convB's never runs (both diffs exist: the
    # solver's ClearParamDiffs zeroes every learnable param's diff first)
    assert all(p.need_backward for p in layers["convA"].params)
    assert not any(p.need_backward for p in layers["convB"].params)
    assert {"convA.param0", "convB.param0"} <= set(_buffers(result, "param diff"))


def test_a_param_shared_with_a_trained_layer_is_refused(tmp_path):
    path = tmp_path / "shared.prototxt"
    path.write_text(TOWERS % ("w", "w"))
    run = run_in_process(path, "--freeze", "convB")
    assert run.returncode == 2
    assert "shares param 'w'" in run.stderr and "--freeze convA" in run.stderr
    both = audit(str(path), context=0, freeze=["convA", "convB"])
    assert both.train.net.frozen == ["input", "convA", "convB"]


def test_force_backward_overrides_freezing_as_in_caffe(tmp_path):
    path = tmp_path / "forced.prototxt"
    path.write_text("force_backward: true\n" + open(TWO_STAGE).read())
    result = audit(str(path), context=0, freeze=["relu2"])
    conv1 = result.train.net.layer("conv1")
    # Net::Init's force_backward pass sets every layer's need and every param's propagate_down
    assert conv1.need_backward and all(p.need_backward for p in conv1.params)
    # so conv1's backward runs, and takes its bottom's (data's) diff as every Caffe conv does
    assert "data" in _buffers(result, "top diff")


# The Flickr-style finetune net (CaffeNet with a 20-way fc8_flickr), batch 50, crop 227.
# Frozen up to pool5: conv1 96*3*11*11 + 96 = 34,944; conv2 256*48*5*5 + 256 = 307,456;
# conv3 384*256*3*3 + 384 = 885,120; conv4 384*192*3*3 + 384 = 663,936; conv5 256*192*3*3 + 256 = 442,624.
FLICKR_FROZEN_PARAMS = 34_944 + 307_456 + 885_120 + 663_936 + 442_624  # 2,334,080
# The tops whose diffs joint training holds and frozen training does not (floats, batch 50):
FLICKR_FROZEN_TOP_DIFFS = (
    50 * 3 * 227 * 227  # data (conv1's backward takes it)        7,729,350
    + 50 * 96 * 55 * 55  # conv1 (relu1 in place)                14,520,000
    + 50 * 96 * 27 * 27  # pool1: (55 - 3) / 2 + 1 = 27           3,499,200
    + 50 * 96 * 27 * 27  # norm1                                  3,499,200
    + 50 * 256 * 27 * 27  # conv2 (pad 2, kernel 5)               9,331,200
    + 50 * 256 * 13 * 13  # pool2: (27 - 3) / 2 + 1 = 13          2,163,200
    + 50 * 256 * 13 * 13  # norm2                                 2,163,200
    + 50 * 384 * 13 * 13  # conv3                                 3,244,800
    + 50 * 384 * 13 * 13  # conv4                                 3,244,800
    + 50 * 256 * 13 * 13  # conv5                                 2,163,200
    + 50 * 256 * 6 * 6  # pool5: (13 - 3) / 2 + 1 = 6                460,800
)  # 52,018,950 floats


def test_flickr_finetune_frozen_to_pool5():
    joint = audit(FLICKR, context=0)
    frozen = audit(FLICKR, context=0, freeze=["pool5"])
    assert frozen.train.net.frozen[0] == "data" and frozen.train.net.frozen[-1] == "pool5"
    cost = summarize(frozen).frozen
    assert cost.param_elements == FLICKR_FROZEN_PARAMS == 2_334_080
    assert cost.diff_bytes == cost.history_bytes == FLICKR_FROZEN_PARAMS * 4
    # fc6 is an InnerProduct: its backward takes its bottom's diff only when asked to
    assert cost.top_diff_bytes == 0
    c = compare(joint, frozen)
    assert FLICKR_FROZEN_TOP_DIFFS == 52_018_950
    assert c.delta == -FLICKR_FROZEN_TOP_DIFFS * 4
    assert c.by_kind["history"][0] == c.by_kind["history"][1]
