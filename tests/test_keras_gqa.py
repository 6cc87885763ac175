"""Keras 3's GroupQueryAttention, ReversibleEmbedding and adaptive pooling against real Keras 3.15 and
TensorFlow 2.21 (tests/data/keras_oracle/layers/gqa: the layers' shapes and variables, and four small
models' training steps), and their step ops against derivations from Keras's and TensorFlow's source."""
import csv
import json
import os
from math import prod

import pytest

from protoaudit.keras.audit import audit_keras, layer_weights
from protoaudit.keras.layers import Spec, make_layer
from protoaudit.keras.training.program import build_step

FACTS = os.path.join(os.path.dirname(__file__), "data", "keras_oracle", "layers", "gqa")


def _facts():
    with open(os.path.join(FACTS, "facts.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    with open(os.path.join(FACTS, "facts_configs.json")) as f:
        return rows, json.load(f)


ROWS, CASES = _facts()


@pytest.mark.parametrize("case", sorted(CASES))
def test_shapes_and_variables_are_what_keras_builds(case):
    made = CASES[case]
    rows = [r for r in ROWS if r["case"] == case]
    layer = make_layer(made["entry"], flavour="keras3", path=case)
    assert layer.class_name == rows[0]["class_name"]
    dtype = "int32" if case == "rev_tied" else "float32"
    inputs = [Spec(tuple(s), dtype) for s in made["inputs"]]
    layer.call_options = made["call"]
    outs = [(str(s.shape), s.dtype) for s in layer.output_specs(inputs)]
    assert outs == [(r["shape"], r["dtype"]) for r in rows if r["what"] == "output"]
    weights = layer.weights(inputs)
    assert [(w.name, str(w.shape), w.dtype) for w in weights] == [
        (r["name"], r["shape"], r["dtype"]) for r in rows if r["what"] == "variable"]
    count = next(int(r["shape"]) for r in rows if r["what"] == "count_params")
    assert sum(prod(w.shape) for w in weights) == count


def _runs():
    runs = {}
    with open(os.path.join(FACTS, "runs.tsv")) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            runs.setdefault((r["model"], int(r["batch"])), []).extend(
                [int(r["step2_peak_extra"]), int(r["step3_peak_extra"])])
    return sorted(runs.items())


@pytest.mark.parametrize("model,batch,peaks", [(m, b, p) for (m, b), p in _runs()])
def test_step_peak_is_within_ten_percent_of_tensorflow(model, batch, peaks):
    a = audit_keras(os.path.join(FACTS, "models", model + ".keras"), batch=batch, mode="cpu")
    assert not a.unmodelled
    assert 0.9 * min(peaks) <= a.step_peak_bytes <= 1.1 * max(peaks), (a.step_peak_bytes, peaks, a.peak.step)


def _k3_file(tmp_path, layers, inputs):
    """A Keras 3 functional model of `layers`, each (class_name, config, inbound tensor names, call
    kwargs), on `inputs` {name: (shape, dtype)}, compiled with Adam and a mean squared error."""
    entries = [{"module": "keras.layers", "class_name": "InputLayer", "name": name,
                "config": {"name": name, "batch_shape": [None, *shape], "dtype": dtype}, "inbound_nodes": []}
               for name, (shape, dtype) in inputs.items()]
    for name, cls, config, inbound, kwargs in layers:
        args = [{"class_name": "__keras_tensor__", "config": {"keras_history": [t, 0, 0]}} for t in inbound]
        entries.append({"module": "keras.layers", "class_name": cls, "name": name, "config": {"name": name, **config},
                        "inbound_nodes": [{"args": args, "kwargs": kwargs}]})
    doc = {"module": "keras", "class_name": "Functional",
           "config": {"name": "m", "layers": entries, "input_layers": [[n, 0, 0] for n in inputs],
                      "output_layers": [[layers[-1][0], 0, 0]]},
           "compile_config": {"optimizer": {"module": "keras.optimizers", "class_name": "Adam", "config": {}},
                              "loss": "mean_squared_error"}}
    path = tmp_path / "model.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _program(path, batch=8):
    a = audit_keras(path, batch=batch, mode="cpu")
    assert not a.unmodelled
    return build_step(a.graph, flavour=a.flavour, optimizer=a.optimizer, loss=a.loss,
                      weights=layer_weights(a.graph, []), device="cpu").program


def _made(program, label):
    step = next(st for st in program.steps if st.label == label)
    return [program.bufs[m].bytes for m in step.makes], [program.bufs[r].label for r in step.reads]


GQA = ("gqa", "GroupQueryAttention", {"head_dim": 8, "num_query_heads": 6, "num_key_value_heads": 2}, ["x", "x"], {})
MODELS = {
    "gqa": ([GQA, ("flat", "Flatten", {}, ["gqa"], {}), ("out", "Dense", {"units": 3}, ["flat"], {})],
            {"x": ((10, 16), "float32")}),
    "reversible": ([("emb", "ReversibleEmbedding", {"input_dim": 50, "output_dim": 12, "tie_weights": False,
                                                   "logit_soft_cap": 30.0}, ["ids"], {}),
                    ("d", "Dense", {"units": 12}, ["emb"], {}),
                    ("logits", "ReversibleEmbedding", {"input_dim": 50, "output_dim": 12}, ["d"], {"reverse": True})],
                   {"ids": ((9,), "int32")}),
    "adaptive": ([("d", "Dense", {"units": 4}, ["x"], {}),
                  ("pool", "AdaptiveMaxPooling3D", {"output_size": [2, 3, 2], "data_format": "channels_first"},
                   ["d"], {}),
                  ("avg", "AdaptiveAveragePooling1D", {"output_size": 3}, ["d1"], {})],
                 {"x": ((3, 5, 6, 7), "float32")}),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_small_model_of_each_layer_is_audited_by_the_command(name, tmp_path, protoaudit):
    layers, inputs = MODELS[name]
    if name == "adaptive":  # a 1-D pooling after the 3-D one: (batch, 3 x 2 x 3, 2) through a Reshape
        layers = layers[:2] + [("d1", "Reshape", {"target_shape": [18, 2]}, ["pool"], {})] + layers[2:]
    result = protoaudit(_k3_file(tmp_path, layers, inputs), "--batch", "8")
    assert result.returncode == 0, result.stderr
    assert "not modelled" not in result.stdout


def test_group_query_attention_repeats_key_and_value_to_the_query_heads(tmp_path):
    # Keras 3 (grouped_query_attention.py): key and value are projected to 2 heads of 8 over 10 steps,
    # (8, 10, 2, 8) floats, 5,120 bytes, then ops.repeat(.., 3, axis=2) (tf.repeat: ExpandDims, Tile,
    # Reshape) makes them (8, 10, 6, 8), 15,360 bytes, the query's size. dot_product_attention's scores
    # are (8, 6, 10, 10), 19,200 bytes. Tile's gradient (array_grad.py _TileGrad) sums the repeated
    # gradient back to 5,120 bytes before the projection's own gradients.
    layers, inputs = MODELS["gqa"]
    program = _program(_k3_file(tmp_path, layers, inputs))
    assert _made(program, "gqa key")[0] == [5_120] and _made(program, "gqa value")[0] == [5_120]
    assert _made(program, "gqa query")[0] == [15_360]
    assert _made(program, "gqa key repeated (Tile)") == ([15_360], ["gqa key"])
    assert _made(program, "gqa scores")[0] == [19_200]
    for part in ("key", "value"):
        made, reads = _made(program, f"gqa {part} repeat gradient (Sum)")
        assert made == [5_120] and reads == [f"gqa {part} projection gradient"]


def test_one_key_value_head_per_query_head_repeats_nothing(tmp_path):
    # num_key_value_heads == num_query_heads: tf.repeat tiles by 1, and TensorFlow's Tile of multiples
    # all one hands its input on; the layer is MultiHeadAttention's ops.
    layers, inputs = MODELS["gqa"]
    layers = [GQA[:2] + ({**GQA[2], "num_key_value_heads": 6},) + GQA[3:]] + layers[1:]
    program = _program(_k3_file(tmp_path, layers, inputs))
    assert not [st for st in program.steps if "repeat" in st.label]
    assert _made(program, "gqa key")[0] == [15_360]


def test_reversible_embedding_reverse_call_is_a_matmul_by_the_transposed_table(tmp_path):
    # The reverse call (reversible_embedding.py): matmul(x, transpose(embeddings)) on x (8, 9, 12), the
    # logits (8, 9, 50), 14,400 bytes. Grappler folds the Transpose into the MatMul (traced on a tied
    # language model: FoldTransposeIntoMatMul_MatMul, no copy of the table), so the MatMul reads x and
    # the variable, and the table's gradient x^T dy is (50, 12), 2,400 bytes, in the table's layout.
    # The lookup's gradient is IndexedSlices of its output gradient; untied, reverse_embeddings
    # (12, 50) is a weight of its own that only the reverse call reads.
    layers, inputs = MODELS["reversible"]
    program = _program(_k3_file(tmp_path, layers, inputs))
    assert not [st for st in program.steps if "transpose" in st.label]
    assert _made(program, "logits MatMul") == ([14_400], ["d BiasAdd"])
    assert _made(program, "logits embeddings gradient")[0] == [2_400]
    # untied with a soft cap: x times reverse_embeddings (12, 50), no transpose; tanh(logits / 30) * 30
    # keeps tanh's output for its gradient
    capped = ("logits", "ReversibleEmbedding", layers[0][2], ["d"], {"reverse": True})
    program = _program(_k3_file(tmp_path, [layers[0], layers[1], capped], inputs))
    assert _made(program, "logits reverse_embeddings gradient")[0] == [2_400]
    assert "logits tanh(logits / cap)" in _made(program, "logits tanh gradient")[1]
    assert _made(program, "emb embeddings gradient (IndexedSlices)")[0] == [8 * 9 * 12 * 4]


def test_adaptive_pooling_pools_two_windows_concats_and_gathers_each_axis(tmp_path):
    # AdaptiveMaxPooling3D((2, 3, 2)), channels_first, on the Dense's (8, 3, 5, 6, 4) floats, 11,520
    # bytes: transposed to channels_last (8, 5, 6, 4, 3), then one axis after another
    # (backend/tensorflow/nn.py _adaptive_max_pool3d), stride 1, VALID:
    # depth 5 to 2: windows ceil(5/2) = 3 and 4, 3 and 2 positions of (8, 6, 4, 3) = 2,304 bytes:
    # pools of 6,912 and 4,608, concat 11,520, gather (8, 2, 6, 4, 3) = 4,608;
    # height 6 to 3: windows 2 and 3, 5 and 4 positions of 768 bytes: 3,840 and 3,072, gather 2,304;
    # width 4 to 2: windows 2 and 3, 3 and 2 positions of 576 bytes: 1,728 and 1,152, gather 1,152,
    # transposed back to (8, 3, 2, 3, 2). MaxPool3DGrad reads the stage's input and its pool's output;
    # Gather's gradient sums into the concat's shape.
    layers, inputs = MODELS["adaptive"]
    program = _program(_k3_file(tmp_path, layers[:2], inputs))
    assert _made(program, "pool transpose to channels_last")[0] == [11_520]
    assert [_made(program, f"pool axis 0 MaxPool window {w}")[0] for w in ("small", "big")] == [[6_912], [4_608]]
    assert _made(program, "pool axis 0 concat")[0] == [11_520]
    assert _made(program, "pool axis 0 gather")[0] == [4_608]
    assert [_made(program, f"pool axis 1 MaxPool window {w}")[0] for w in ("small", "big")] == [[3_840], [3_072]]
    assert _made(program, "pool axis 1 gather")[0] == [2_304]
    assert [_made(program, f"pool axis 2 MaxPool window {w}")[0] for w in ("small", "big")] == [[1_728], [1_152]]
    assert _made(program, "pool transpose to channels_first")[0] == [1_152]
    made, reads = _made(program, "pool axis 0 window big MaxPool3DGrad")
    assert made == [11_520] and reads[:2] == ["pool transpose to channels_last", "pool axis 0 MaxPool window big"]
    assert _made(program, "pool axis 0 gather gradient (UnsortedSegmentSum)")[0] == [11_520]


def test_adaptive_average_pooling_gradient_keeps_nothing(tmp_path):
    # AvgPoolGrad reads only its input's shape: no forward tensor of the layer reaches the backward
    # pass. AdaptiveAveragePooling1D(3) on (8, 18, 2): windows 6 and 7, 13 and 12 positions of 64 bytes.
    layers, inputs = MODELS["adaptive"]
    layers = layers[:2] + [("d1", "Reshape", {"target_shape": [18, 2]}, ["pool"], {})] + layers[2:]
    program = _program(_k3_file(tmp_path, layers, inputs))
    assert _made(program, "avg axis 0 AveragePool window small")[0] == [832]
    made, reads = _made(program, "avg axis 0 window small AvgPoolGrad")
    assert made == [8 * 18 * 2 * 4] and reads == ["avg axis 0 concat gradient small"]
