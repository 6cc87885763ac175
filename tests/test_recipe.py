"""The hand recipe of seed 002 ("activations x2, params x3", 4 bytes each) beside the real total.

Activations are Caffe's own count (the train net's "Memory required for data" / 4: every top of
every layer, in-place and Split tops again); params are Caffe's learnable params (each owned blob
once, lr_mult 0 included). Expected values are derived by hand below, or read off a real Caffe log.
"""
import json
import os

import logparse
from conftest import DATA, run_in_process
from protoaudit.audit import audit
from protoaudit.memory.summary import summarize

TWO_STAGE = os.path.join(DATA, "freeze", "two_stage.prototxt")
FLICKR = os.path.join(DATA, "freeze", "bvlc_finetune_flickr_style_train_val.prototxt")
LOGS = os.path.join(DATA, "logs")

# two_stage.prototxt, batch 2, 8x8, convs 3x3 pad 1; every top as Caffe counts it:
TWO_STAGE_ACTIVATIONS = (
    2 * 3 * 8 * 8 + 2  # input: data 384, label 2
    + 2 * 4 * 8 * 8 * 2  # conv1 512, relu1 in place 512 again
    + 2 * 4 * 8 * 8 * 2  # conv2, relu2
    + 2 * 8 * 8 * 8 * 2  # conv3 1024, relu3 1024
    + 2 * 8  # pool: AVE 8x8 over 8x8 -> (8 - 8) / 1 + 1 = 1
    + 2 * 5  # fc
    + 1  # loss
)  # 4,509
TWO_STAGE_PARAMS = (
    (4 * 3 * 3 * 3 + 4)  # conv1 112
    + (4 * 4 * 3 * 3 + 4)  # conv2 148
    + (8 * 4 * 3 * 3 + 8)  # conv3 296
    + (5 * 8 + 5)  # fc 45
)  # 601
# im2col buffers, one image each: C_in x 3 x 3 x 8 x 8 floats
TWO_STAGE_COLUMNS = 4 * (3 * 9 * 64 + 4 * 9 * 64 + 4 * 9 * 64)  # 6,912 + 9,216 + 9,216


def test_two_stage_recipe_by_hand():
    result = audit(TWO_STAGE, context=0)
    summary = summarize(result)
    r = summary.recipe
    assert TWO_STAGE_ACTIVATIONS == 4509 and TWO_STAGE_PARAMS == 601
    assert r.activation_elements == TWO_STAGE_ACTIVATIONS
    assert r.param_elements == TWO_STAGE_PARAMS
    assert r.activation_bytes == 4509 * 2 * 4 == 36_072
    assert r.param_bytes == 601 * 3 * 4 == 7_212
    assert r.total == 43_284
    assert r.ratio == summary.total / 43_284
    assert r.misses["column buffers"] == TWO_STAGE_COLUMNS == 25_344
    assert list(r.misses) == sorted(r.misses, key=lambda k: -r.misses[k])
    assert "CUDA context" not in r.misses and "test nets" not in r.misses


def test_the_context_and_test_nets_are_among_what_it_misses():
    r = summarize(audit(FLICKR)).recipe
    assert r.misses["CUDA context"] == 300 * 2**20
    assert r.misses["test nets"] > 0  # the TEST net runs beside the TRAIN net in `caffe train`
    # CaffeNet's params with a 20-way fc8: conv1..conv5 2,334,080 (see test_freeze.py),
    # fc6 9216*4096 + 4096 = 37,752,832; fc7 4096*4096 + 4096 = 16,781,312; fc8_flickr 4096*20 + 20 = 81,940
    assert r.param_elements == 2_334_080 + 37_752_832 + 16_781_312 + 81_940 == 56_950_164


def test_activations_are_the_figure_of_a_real_caffe_log():
    with open(os.path.join(LOGS, "ducha_caffenet128_tanh_bs32.log"), errors="replace") as f:
        logged = next(n for n in logparse.parse(f.read()) if n.phase == "TRAIN")
    inputs = {top: tuple(int(d) for d in shape.split("x"))
              for top, shape in (value.split("=") for value in logged.data_inputs())}
    net = os.path.join(LOGS, "ducha_caffenet128_tanh_bs32.train.as_run.prototxt")
    r = summarize(audit(net, phase="train", inputs=inputs, context=0)).recipe
    assert logged.memory == 62_366_852
    assert r.activation_elements * 4 == logged.memory


def test_shared_params_count_once(tmp_path):
    path = tmp_path / "shared.prototxt"
    path.write_text("""
layer { name: "input" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } shape { dim: 2 } } }
layer { name: "convA" type: "Convolution" bottom: "data" top: "a"
        param { name: "w" } convolution_param { num_output: 2 kernel_size: 1 bias_term: false } }
layer { name: "convB" type: "Convolution" bottom: "data" top: "b"
        param { name: "w" } convolution_param { num_output: 2 kernel_size: 1 bias_term: false } }
layer { name: "cat" type: "Concat" bottom: "a" bottom: "b" top: "cat" }
layer { name: "fc" type: "InnerProduct" bottom: "cat" top: "fc" inner_product_param { num_output: 3 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
""")
    r = summarize(audit(str(path), context=0)).recipe
    # w: 2x3x1x1 = 6 once; fc: cat is 2x4x4x4, so 3 x 64 weights + 3 biases = 195
    assert r.param_elements == 6 + 195


def test_text_and_json_show_it():
    text = run_in_process(TWO_STAGE, "--context", "0")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("Hand recipe"))
    assert "2 x 4,509 activations" in lines[at] and "3 x 601 params" in lines[at]
    assert f"{summarize(audit(TWO_STAGE, context=0)).total / 43_284:.2f}x" in lines[at]
    assert lines[at + 1].startswith("  It leaves out: column buffers 24.8 KiB")
    out = json.loads(run_in_process(TWO_STAGE, "--context", "0", "--format", "json").stdout)
    assert out["recipe"]["total_bytes"] == 43_284
    assert out["recipe"]["activation_elements"] == 4509 and out["recipe"]["param_elements"] == 601
    assert out["recipe"]["misses"]["column buffers"] == 25_344
    assert out["recipe"]["ratio"] == out["total_bytes"] / 43_284


def test_no_recipe_for_a_forward_only_run():
    assert summarize(audit(TWO_STAGE, inference=True, phase="train")).recipe is None
    out = json.loads(run_in_process(TWO_STAGE, "--inference", "--format", "json").stdout)
    assert out["recipe"] is None
