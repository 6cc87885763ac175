"""Reading Keras files and laying models out as graphs: the oracle's saved models (their parameters and
weight bytes as TensorFlow measured them, tests/data/keras_oracle/shared/measurements.tsv), the same
graph from every format, the graph features (shared layers, nested models, several inputs and
outputs, the batch, declared shapes, dtype policies), and hostile files, each one line of InputError."""
import copy
import csv
import io
import json
import math
import sys
import zipfile
from pathlib import Path

import pytest

from protoaudit.errors import InputError
from protoaudit.keras.files import read_model
from protoaudit.keras.graph import build_graph
from protoaudit.keras.layers import nbytes

ORACLE = Path(__file__).parent / "data" / "keras_oracle" / "shared"
MODELS = sorted(p for p in (ORACLE / "models").rglob("*") if p.suffix in (".json", ".h5", ".keras"))


def _measured():
    with open(ORACLE / "measurements.tsv") as f:
        return {(r["name"], r["keras_flavour"]): r for r in csv.DictReader(f, delimiter="\t")}


def _key(path):
    """(configuration name, flavour) of a saved model NAME_OPTIMIZER[_k3].EXT."""
    stem = path.stem
    flavour = "keras3" if stem.endswith("_k3") else "tf_keras"
    return stem[:-3].rsplit("_", 1)[0] if flavour == "keras3" else stem.rsplit("_", 1)[0], flavour


@pytest.mark.parametrize("path", MODELS, ids=lambda p: str(p.relative_to(ORACLE / "models")))
def test_oracle_model_weights_match_tensorflow(path):
    row = _measured()[_key(path)]
    model = read_model(path)
    assert model.flavour == row["keras_flavour"]
    graph = build_graph(model)
    ws = [w for _, w in graph.weights]
    assert sum(math.prod(w.shape) for w in ws) == int(row["params"])
    assert sum(math.prod(w.shape) for w in ws if w.trainable) == int(row["trainable_params"])
    assert sum(nbytes(w) for w in ws) == int(row["weights_bytes"])
    assert sum(nbytes(w) for w in ws if w.trainable) == int(row["trainable_bytes"])


def _rows():
    with open(ORACLE / "measurements.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.mark.parametrize("row", _rows(),
                         ids=lambda r: f"{r['name']}-{r['keras_flavour']}-{r['optimizer']}-b{r['batch']}")
def test_oracle_output_shapes_match_kerass_own(row):
    # activation_bytes is measure.py's sum of every non-input layer output as Keras shaped it (each call,
    # nested models' layers included) at the row's batch; input_shape is the batch it trained on
    stem = f"{row['name']}_{row['optimizer']}" + ("_k3" if row["keras_flavour"] == "keras3" else "")
    graph = build_graph(read_model(ORACLE / "models" / f"{stem}.json"), batch=int(row["batch"]))
    assert "x".join(map(str, graph.inputs[0].spec.shape)) == row["input_shape"]
    assert sum(nbytes(t.spec) for n in graph.nodes for t in n.outputs) == int(row["activation_bytes"])


def _signature(graph):
    return ([(n.path, n.layer.class_name, n.call_index, [t.spec for t in n.outputs]) for n in graph.nodes],
            [(layer.path, w) for layer, w in graph.weights], [t.spec for t in graph.outputs])


def test_every_format_of_a_model_reads_to_the_same_graph():
    by_name = {}
    for path in MODELS:
        by_name.setdefault(path.stem, []).append(path)
    compared = 0
    for stem, paths in by_name.items():
        if len(paths) > 1:
            first = _signature(build_graph(read_model(paths[0]), batch=8))
            for other in paths[1:]:
                assert _signature(build_graph(read_model(other), batch=8)) == first, other
                compared += 1
    assert compared >= 20  # the .h5, .keras and config_only .keras beside each .json


def test_versions_optimizers_and_losses():
    lc1 = ORACLE / "models" / "lc1_F200_sgd"
    h5, keras, text = (read_model(lc1.with_suffix(s)) for s in (".h5", ".keras", ".json"))
    for m in (h5, keras, text):
        assert (m.flavour, m.keras_version) == ("tf_keras", "2.21.0")
    # tf_keras writes its SGD as "Custom>SGD" in .h5 files; both read as SGD with momentum 0, loss mse
    for m in (h5, keras):
        assert m.optimizer["class_name"] == "SGD" and m.optimizer["config"]["momentum"] == 0.0
        assert m.loss == "mse"
    assert text.optimizer is None and text.loss is None  # to_json() holds no compile config
    k3 = read_model(ORACLE / "models" / "resnet50_sgd_k3.json")  # Keras 3's to_json() does
    assert (k3.flavour, k3.keras_version, k3.optimizer["class_name"]) == ("keras3", None, "SGD")
    k3 = read_model(ORACLE / "models" / "config_only" / "resnet50_adam_k3.keras")
    assert (k3.flavour, k3.keras_version, k3.optimizer["class_name"]) == ("keras3", "3.15.1", "Adam")
    sgdm = read_model(ORACLE / "models" / "config_only" / "mlp_bn_dropout_sgdm.keras")
    assert sgdm.optimizer["config"]["momentum"] == pytest.approx(0.9)
    assert read_model(ORACLE / "models" / "config_only" / "resnet50_rmsprop.keras").optimizer["class_name"] == \
        "RMSprop"


def test_metrics_are_read_from_the_compile_config(tmp_path):
    # compile(metrics=["accuracy"]) is kept in the compile config (Keras 3, tf_keras's .keras) or the .h5
    # training_config; the oracle's models were compiled without metrics, Keras's default
    assert not read_model(ORACLE / "models" / "config_only" / "resnet50_adam_k3.keras").metrics
    doc = json.loads((ORACLE / "models" / "resnet50_sgd_k3.json").read_text())
    doc["compile_config"]["metrics"] = ["accuracy"]
    path = tmp_path / "with_metrics.json"
    path.write_text(json.dumps(doc))
    assert read_model(path).metrics


def test_stacked_models_nest_with_a_frozen_base():
    # seed 003: base (784-1024-1024-512, frozen) and head (512-...-10) as Sequentials inside a Functional
    graph = build_graph(read_model(ORACLE / "models" / "stack_mlp_frozen_adam.json"))
    assert [n.path for n in graph.nodes][:3] == ["stack_mlp_frozen/base/dense", "stack_mlp_frozen/base/dense_1",
                                                 "stack_mlp_frozen/base/dense_2"]
    assert all(not n.layer.trainable for n in graph.nodes if "/base/" in n.path)
    assert all(n.layer.trainable for n in graph.nodes if "/head/" in n.path)
    # 784*1024+1024 + 1024*1024+1024 + 1024*512+512 frozen parameters
    assert sum(math.prod(w.shape) for _, w in graph.weights if not w.trainable) == \
        784 * 1024 + 1024 + 1024 * 1024 + 1024 + 1024 * 512 + 512


# -- the graph ------------------------------------------------------------------------------------------
def _k2_layer(cls, name, inbound, **config):
    return {"class_name": cls, "name": name, "config": {"name": name, **config},
            "inbound_nodes": [[[n, i, t, {}] for n, i, t in call] for call in inbound]}


def _k2_input(name, shape):
    return {"class_name": "InputLayer", "name": name, "inbound_nodes": [],
            "config": {"name": name, "batch_input_shape": shape, "dtype": "float32"}}


def _k2_model(layers, inputs, outputs, name="m"):
    return {"class_name": "Functional", "keras_version": "2.21.0",
            "config": {"name": name, "layers": layers, "input_layers": inputs, "output_layers": outputs}}


def _write(tmp_path, doc, name="model.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _graph(tmp_path, doc, **kw):
    return build_graph(read_model(_write(tmp_path, doc)), **kw)


def _shared(tmp_path):
    return _k2_model([_k2_input("a", [None, 8]), _k2_input("b", [None, 8]),
                      _k2_layer("Dense", "d", [[("a", 0, 0)], [("b", 0, 0)]], units=4),
                      _k2_layer("Concatenate", "cat", [[("d", 0, 0), ("d", 1, 0)]], axis=-1),
                      _k2_layer("Dense", "side", [[("a", 0, 0)]], units=3)],
                     [["a", 0, 0], ["b", 0, 0]], [["cat", 0, 0], ["side", 0, 0]])


def test_a_shared_layer_has_one_set_of_weights_and_an_output_per_call(tmp_path):
    graph = _graph(tmp_path, _shared(tmp_path))
    assert [(n.path, n.call_index) for n in graph.nodes] == [("m/d", 0), ("m/d", 1), ("m/cat", 0), ("m/side", 0)]
    assert [w.shape for _, w in graph.weights] == [(8, 4), (4,), (8, 3), (3,)]
    assert [t.spec.shape for t in graph.outputs] == [(32, 8), (32, 3)]
    assert [t.name for t in graph.inputs] == ["a", "b"]
    assert graph.nodes[2].inputs == [graph.nodes[0].outputs[0], graph.nodes[1].outputs[0]]
    assert graph.outputs[0].producer is graph.nodes[2]


def test_a_nested_model_called_twice_shares_its_weights(tmp_path):
    # a siamese tf_keras model: one inner Functional on two inputs; node 0 is the inner model's own,
    # so the outer calls are nodes 1 and 2
    inner = _k2_model([_k2_input("x", [None, 6]), _k2_layer("Dense", "e", [[("x", 0, 0)]], units=5)],
                      [["x", 0, 0]], [["e", 0, 0]], name="tower")
    inner.update(name="tower", inbound_nodes=[[["a", 0, 0, {}]], [["b", 0, 0, {}]]])
    doc = _k2_model([_k2_input("a", [None, 6]), _k2_input("b", [None, 6]), inner,
                     _k2_layer("Subtract", "diff", [[("tower", 1, 0), ("tower", 2, 0)]])],
                    [["a", 0, 0], ["b", 0, 0]], [["diff", 0, 0]])
    graph = _graph(tmp_path, doc, batch=2)
    assert [(n.path, n.call_index) for n in graph.nodes] == [("m/tower/e", 0), ("m/tower/e", 1), ("m/diff", 0)]
    assert [w.shape for _, w in graph.weights] == [(6, 5), (5,)]
    assert graph.nodes[1].inputs[0] is graph.inputs[1]


def test_old_sequential_config_is_a_list_of_layers(tmp_path):
    doc = {"class_name": "Sequential", "keras_version": "2.1.6", "config": [
        {"class_name": "Dense", "config": {"name": "d", "units": 3, "batch_input_shape": [None, 5]}}]}
    assert _graph(tmp_path, doc).outputs[0].spec.shape == (32, 3)


def _kt(name, node=0, tensor=0):
    return {"class_name": "__keras_tensor__", "config": {"shape": None, "dtype": "float32",
                                                         "keras_history": [name, node, tensor]}}


def test_keras3_inbound_nodes_and_a_nested_functional_model(tmp_path):
    # Keras 3 numbers a nested Functional model's first outer call as node 0 in a layer's inbound
    # nodes (serialize_node leaves out the nodes of other models, its own input-to-output node among
    # them) but as node 1 in output_layers (get_config's node_reindexing_map starts a Functional at 1):
    # keras/src/models/functional.py, and Keras 3.15's own saving of a model built on MobileNetV2
    inner = {"module": "keras", "class_name": "Functional", "name": "inner", "registered_name": "Functional",
             "config": {"name": "inner", "trainable": False, "layers": [
                 {"class_name": "InputLayer", "name": "x", "config": {"batch_shape": [None, 6], "name": "x"},
                  "inbound_nodes": []},
                 {"class_name": "Dense", "name": "e", "config": {"name": "e", "units": 5},
                  "inbound_nodes": [{"args": [_kt("x")], "kwargs": {}}]}],
                 "input_layers": [["x", 0, 0]], "output_layers": [["e", 0, 0]]},
             "inbound_nodes": [{"args": [_kt("in")], "kwargs": {}}]}
    doc = {"module": "keras", "class_name": "Functional", "config": {"name": "outer", "layers": [
        {"class_name": "InputLayer", "name": "in", "config": {"batch_shape": [None, 6], "name": "in"},
         "inbound_nodes": []},
        inner,
        {"class_name": "Concatenate", "name": "cat", "config": {"name": "cat", "axis": -1},
         "inbound_nodes": [{"args": [[_kt("inner", 0), _kt("in")]], "kwargs": {"mask": None}}]}],
        "input_layers": {"features": ["in", 0, 0]}, "output_layers": ["cat", 0, 0]}}
    graph = _graph(tmp_path, doc, batch=3)
    assert graph.flavour == "keras3"
    assert [n.path for n in graph.nodes] == ["outer/inner/e", "outer/cat"]
    assert graph.outputs[0].spec.shape == (3, 11)
    assert [w.trainable for _, w in graph.weights] == [False, False]  # the inner model is frozen
    # the nested model as the outer model's output: node 1
    doc["config"]["output_layers"] = ["inner", 1, 0]
    assert _graph(tmp_path, doc, batch=3).outputs[0].spec.shape == (3, 5)


def test_batch_from_argument_input_or_default(tmp_path):
    doc = _k2_model([_k2_input("a", [None, 8]), _k2_layer("Dense", "d", [[("a", 0, 0)]], units=4)],
                    [["a", 0, 0]], [["d", 0, 0]])
    assert (_graph(tmp_path, doc).batch, _graph(tmp_path, doc).batch_from) == (32, "default")
    assert (_graph(tmp_path, doc, batch=5).batch, _graph(tmp_path, doc, batch=5).batch_from) == (5, "argument")
    fixed = copy.deepcopy(doc)
    fixed["config"]["layers"][0]["config"]["batch_input_shape"] = [7, 8]
    assert (_graph(tmp_path, fixed).batch, _graph(tmp_path, fixed).batch_from) == (7, "input")
    assert _graph(tmp_path, fixed, batch=2).outputs[0].spec.shape == (2, 4)


def test_an_unknown_axis_must_be_declared(tmp_path):
    doc = _k2_model([_k2_input("a", [None, None]), _k2_layer("Embedding", "e", [[("a", 0, 0)]], input_dim=100,
                                                               output_dim=4)], [["a", 0, 0]], [["e", 0, 0]])
    with pytest.raises(InputError, match="input 'a'.*declare it") as e:
        _graph(tmp_path, doc)
    assert "\n" not in str(e.value)
    assert "--input a=32xD1" in str(e.value)  # the default batch, a letter for the unknown axis
    graph = _graph(tmp_path, doc, inputs={"a": (16, 50)})
    assert (graph.batch, graph.batch_from, graph.outputs[0].spec.shape) == (16, "input", (16, 50, 4))
    # an image of unknown size (keras.applications.MobileNetV3Small(weights=None) saves (None, None, None, 3)):
    # the example keeps the channels and names the image's axes
    image = _k2_model([_k2_input("x", [None, None, None, 3]), _k2_layer("Conv2D", "c", [[("x", 0, 0)]], filters=2,
                                                                      kernel_size=3)], [["x", 0, 0]], [["c", 0, 0]])
    with pytest.raises(InputError, match=r"--input x=8xHxWx3\b"):
        _graph(tmp_path, image, batch=8)


def test_sequential_without_an_input_layer(tmp_path):
    # tf_keras: the first layer carries batch_input_shape; Keras 3: the model's build_config
    k2 = {"class_name": "Sequential", "config": {"name": "s", "layers": [
        {"class_name": "Dense", "config": {"name": "d", "units": 3, "batch_input_shape": [None, 5]}},
        {"class_name": "Dropout", "config": {"name": "drop", "rate": 0.5}}]}}
    graph = _graph(tmp_path, k2)
    assert [n.path for n in graph.nodes] == ["s/d", "s/drop"] and graph.outputs[0].spec.shape == (32, 3)
    assert graph.inputs[0].name == "d_input"
    k3 = {"module": "keras", "class_name": "Sequential", "build_config": {"input_shape": [None, 5]},
          "config": {"name": "s", "layers": [{"class_name": "Dense", "config": {"name": "d", "units": 3}}]}}
    assert _graph(tmp_path, k3).outputs[0].spec.shape == (32, 3)


def test_mixed_float16_policy_through_the_graph(tmp_path):
    mixed = {"class_name": "Policy", "config": {"name": "mixed_float16"}}
    doc = _k2_model([_k2_input("a", [None, 8]),
                     _k2_layer("Dense", "d", [[("a", 0, 0)]], units=4, dtype=mixed),
                     _k2_layer("Activation", "out", [[("d", 0, 0)]], activation="softmax", dtype="float32")],
                    [["a", 0, 0]], [["out", 0, 0]])
    graph = _graph(tmp_path, doc)
    assert [n.outputs[0].spec.dtype for n in graph.nodes] == ["float16", "float32"]
    assert {w.dtype for _, w in graph.weights} == {"float32"}
    assert graph.policy == "mixed_float16"


def test_a_lambda_layer_is_declared_not_run(tmp_path):
    doc = _k2_model([_k2_input("a", [None, 8]),
                     _k2_layer("Lambda", "lam", [[("a", 0, 0)]], function=["4wEAAAAAAAAAAAAAAAAAAAA=", None, None]),
                     _k2_layer("Dense", "d", [[("lam", 0, 0)]], units=2)], [["a", 0, 0]], [["d", 0, 0]])
    with pytest.raises(InputError, match="layer 'm/lam': is a Lambda: its Python code is never run") as e:
        _graph(tmp_path, doc)
    assert "--input lam=" in str(e.value) and "\n" not in str(e.value)
    graph = _graph(tmp_path, doc, inputs={"lam": (1, 6)}, batch=4)
    assert graph.gaps == ["m/lam"]
    assert [n.outputs[0].spec.shape for n in graph.nodes] == [(4, 6), (4, 2)]
    assert [w.shape for _, w in graph.weights] == [(6, 2), (2,)]


# -- hostile and broken files ---------------------------------------------------------------------------
def _one_line(path, match):
    with pytest.raises(InputError, match=match) as e:
        build_graph(read_model(path))
    text = str(e.value)
    assert "\n" not in text and str(path) in text
    return text


def _zip(tmp_path, members, name="model.keras"):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in members.items():
            z.writestr(member, data)
    path = tmp_path / name
    path.write_bytes(buf.getvalue())
    return path


def _declare_size(path, member, size):
    """Rewrite a member's uncompressed size in the zip's central directory (what zipfile believes)."""
    data = bytearray(path.read_bytes())
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        name_len = int.from_bytes(data[at + 28:at + 30], "little")
        if data[at + 46:at + 46 + name_len] == member.encode():
            data[at + 24:at + 28] = size.to_bytes(4, "little")
        at = data.find(b"PK\x01\x02", at + 4)
    path.write_bytes(bytes(data))


def _lc1_members():
    with zipfile.ZipFile(ORACLE / "models" / "lc1_F200_sgd.keras") as z:
        return {m: z.read(m) for m in ("config.json", "metadata.json")}


def test_zip_bombs_are_refused_before_inflating(tmp_path):
    bomb = _zip(tmp_path, {"config.json": b" " * (4 << 20)})
    _one_line(bomb, "compresses .*x, refused as a zip bomb")
    huge = _zip(tmp_path, {"config.json": b"{}"}, "huge.keras")
    _declare_size(huge, "config.json", 3 << 30)
    _one_line(huge, "declares 3221225472 bytes, over 64 MiB")


def test_the_weights_member_is_never_read(tmp_path):
    # a weights member that would be a bomb (or simply 500 MB) does not matter: only the config is read
    path = _zip(tmp_path, {**_lc1_members(), "model.weights.h5": b"\0" * (1 << 20)})
    _declare_size(path, "model.weights.h5", 3 << 30)
    assert sum(math.prod(w.shape) for _, w in build_graph(read_model(path)).weights) == 1213


def test_truncated_and_incomplete_zips(tmp_path):
    data = (ORACLE / "models" / "lc1_F200_sgd.keras").read_bytes()
    cut = tmp_path / "cut.keras"
    cut.write_bytes(data[: len(data) // 2])
    _one_line(cut, "not a readable .keras zip.*truncated")
    _one_line(_zip(tmp_path, {"metadata.json": _lc1_members()["metadata.json"]}), "has no config.json")
    _one_line(_zip(tmp_path, {"config.json": b"{not json"}, "bad.keras"), "config.json is not valid JSON")


@pytest.mark.parametrize("text, match", [
    ("{\"a\": 1}", "JSON that is not a Keras model"),
    ("[1, 2, 3]", "JSON that is not a Keras model"),
    ("{\"class_name\": \"Dense\", \"config\": {}}", "a 'Dense' object that is not a Keras model"),
    ("hello, world", "not valid JSON"),
    ("[" * 100000, "not valid JSON"),
])
def test_not_a_model(tmp_path, text, match):
    path = tmp_path / "x.json"
    path.write_text(text)
    _one_line(path, match)


def test_binary_garbage(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(bytes(range(256)) * 4)
    _one_line(path, "binary file")


def test_cyclic_inbound_nodes(tmp_path):
    doc = _k2_model([_k2_input("a", [None, 8]), _k2_layer("Add", "p", [[("a", 0, 0), ("q", 0, 0)]]),
                     _k2_layer("Dense", "q", [[("p", 0, 0)]], units=8)], [["a", 0, 0]], [["q", 0, 0]])
    _one_line(_write(tmp_path, doc), "layer 'm/p': its inbound_nodes form a cycle")


@pytest.mark.parametrize("layers, match", [
    ([_k2_input("a", [None, 2 ** 11]), _k2_layer("Dense", "d", [[("a", 0, 0)]], units=2 ** 30)],
     "layer 'm/d': gets shape .* over 2\\*\\*40 elements"),
    ([_k2_input("a", [None, 2 ** 21, 2 ** 21]), _k2_layer("Dense", "d", [[("a", 0, 0)]], units=2)],
     "'a': gets shape .* over 2\\*\\*40"),
    ([_k2_input("a", [None, 8]), _k2_layer("Dense", "d", [[("a", 0, 0)]])], "layer 'm/d': .*non-integer sizes"),
    ([_k2_input("a", [None, 8]), _k2_layer("Dense", "d", [[("a", 0, 0)]], units=float("inf"))],
     "layer 'm/d': .*non-integer sizes"),
    ([_k2_input("a", [None, 8]), _k2_layer("Permute", "d", [[("a", 0, 0)]], dims=5)],
     "layer 'm/d': its config does not fit"),
    ([_k2_input("a", [None, 8]), _k2_layer("Dense", "d", [[("nope", 0, 0)]], units=2)],
     "'nope', which is not a layer"),
    ([_k2_input("a", [None, 8]), _k2_layer("Dense", "d", [[("a", 3, 0)]], units=2)], "call 3 of 'a'"),
    ([_k2_input("a", [None, 8]), _k2_layer("Conv2D", "c", [[("a", 0, 0)]], filters=2, kernel_size=3)],
     "layer 'm/c': expects a rank-4 input"),
])
def test_absurd_and_malformed_configs(tmp_path, layers, match):
    doc = _k2_model(layers, [["a", 0, 0]], [[layers[-1]["name"], 0, 0]])
    _one_line(_write(tmp_path, doc), match)


def test_h5_without_a_model_or_without_h5py(tmp_path, monkeypatch):
    h5py = pytest.importorskip("h5py")
    weights_only = tmp_path / "w.h5"
    with h5py.File(weights_only, "w") as f:
        f.create_dataset("kernel", data=[1.0, 2.0])
    _one_line(weights_only, "no model_config attribute")
    monkeypatch.setitem(sys.modules, "h5py", None)
    _one_line(ORACLE / "models" / "lc1_F200_sgd.h5", r"needs h5py \(pip install 'protoaudit\[keras\]'\)")


def test_models_nested_absurdly_deep(tmp_path):
    doc = {"class_name": "Dense", "config": {"name": "d", "units": 2}}
    for i in range(200):
        doc = {"class_name": "Sequential", "config": {"name": f"s{i}", "layers": [doc]}}
    doc["config"]["layers"].insert(0, _k2_input("a", [None, 4]))
    _one_line(_write(tmp_path, doc), "models nest over 64 deep")


def test_a_subclassed_model_is_named_as_such(tmp_path):
    _one_line(_write(tmp_path, {"class_name": "MyModel", "config": {"units": 3}}), "subclassed model")


def test_tf_op_layers_name_functions_and_the_elementwise_ones_broadcast(tmp_path):
    # tf_keras MobileNetV3's hard_sigmoid: ReLU(6)(x + 3.0) * (1 / 6), saved as TFOpLambda layers
    # naming tf.__operators__.add and tf.math.multiply; a tensor argument comes as a kwargs reference.
    # tf_keras 2.21 keeps a TFOpLambda call's argument structure: its one argument is the node itself,
    # [["Conv/BatchNorm", 0, 0, {"y": 3.0, "name": null}]] in MobileNetV3Small's saved config
    doc = _k2_model([
        _k2_input("a", [None, 4, 4, 8]),
        _k2_layer("TFOpLambda", "plus", [], function="__operators__.add"),
        _k2_layer("ReLU", "relu", [[("plus", 0, 0)]], max_value=6.0),
        _k2_layer("TFOpLambda", "times", [], function="math.multiply"),
        _k2_layer("TFOpLambda", "mm", [], function="linalg.matmul")],
        [["a", 0, 0]], [["times", 0, 0]])
    layers = doc["config"]["layers"]
    layers[1]["inbound_nodes"] = [["a", 0, 0, {"y": 3.0, "name": None}]]
    layers[3]["inbound_nodes"] = [[["relu", 0, 0, {"y": ["a", 0, 0], "name": None}]]]
    layers[4]["inbound_nodes"] = [[["a", 0, 0, {"b": ["a", 0, 0], "name": None}]]]
    with pytest.raises(InputError, match="layer 'm/mm': is TensorFlow's tf.linalg.matmul.*declare"):
        _graph(tmp_path, doc)
    graph = _graph(tmp_path, doc, inputs={"mm": (1, 4, 4, 8)})
    assert [n.outputs[0].spec.shape for n in graph.nodes] == [(32, 4, 4, 8)] * 4
    assert [len(n.inputs) for n in graph.nodes] == [1, 1, 2, 2]
    assert graph.gaps == ["m/mm"]


def test_a_recurrent_layers_initial_state_is_its_input_after_the_sequence(tmp_path):
    # Keras's seq2seq example: LSTM(256, return_state=True) encodes; the decoder LSTM starts from its
    # states h and c. tf_keras 2.21 writes the decoder's node as [sequence, h, c]; Keras 3.15 keeps
    # them as kwargs["initial_state"] (both as saved by the kit's seq2seq_lstm). Either way the
    # decoder reads three tensors, and the encoder's states are (batch, 256) each.
    doc = _k2_model([
        _k2_input("enc", [None, 20, 70]), _k2_input("dec", [None, 25, 90]),
        _k2_layer("LSTM", "encoder", [[("enc", 0, 0)]], units=256, return_state=True),
        _k2_layer("LSTM", "decoder", [[("dec", 0, 0), ("encoder", 0, 1), ("encoder", 0, 2)]], units=256,
                  return_sequences=True)],
        [["enc", 0, 0], ["dec", 0, 0]], [["decoder", 0, 0]])
    graph = _graph(tmp_path, doc, batch=64)
    encoder, decoder = graph.nodes[-2:]
    assert [t.spec.shape for t in encoder.outputs] == [(64, 256)] * 3
    assert [t.spec.shape for t in decoder.inputs] == [(64, 25, 90), (64, 256), (64, 256)]
    assert decoder.outputs[0].spec.shape == (64, 25, 256)
    # the decoder's kernels are (90, 4 x 256) and (256, 4 x 256), whatever it starts from
    assert sum(math.prod(w.shape) for layer, w in graph.weights if layer.name == "decoder") == \
        90 * 1024 + 256 * 1024 + 1024
    keras3 = json.loads(json.dumps(doc))
    keras3["keras_version"] = "3.15.1"
    keras3["config"]["layers"][3]["inbound_nodes"] = [{"args": [_kt("dec")], "kwargs": {
        "initial_state": [_kt("encoder", 0, 1), _kt("encoder", 0, 2)]}}]
    for layer in keras3["config"]["layers"][2:3]:
        layer["inbound_nodes"] = [{"args": [_kt("enc")], "kwargs": {}}]
    graph3 = _graph(tmp_path, keras3, batch=64)
    assert [t.spec.shape for t in graph3.nodes[-1].inputs] == [(64, 25, 90), (64, 256), (64, 256)]
    doc["config"]["layers"][3]["inbound_nodes"][0].append(["encoder", 0, 1, {}])
    with pytest.raises(InputError, match="takes a sequence and 2 initial state"):
        _graph(tmp_path, doc)


def test_mutated_configs_give_a_graph_or_one_line(tmp_path):
    """Oracle configs with values replaced or removed at random: a graph or one InputError line,
    never another exception."""
    import random
    from protoaudit.keras.files import _model_file

    docs = [json.loads((ORACLE / "models" / name).read_text()) for name in
            ("lc1_F200_sgd.json", "mlp_bn_dropout_adam_k3.json", "stack_mlp_frozen_adam.json",
             "lstm_text_adam_k3.json")]
    values = [None, 0, -1, 1.5, "x", [], {}, [None], [1, 2, 3], True, 2 ** 62, float("nan"), ["a", 0, 0],
              {"class_name": "__keras_tensor__", "config": {}}, [[["zz", 0, 0, {}]]]]

    def paths(value, at=()):
        yield at
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, item in items:
            yield from paths(item, at + (key,))

    rng = random.Random(16)
    errors = 0
    for _ in range(400):
        doc = copy.deepcopy(rng.choice(docs))
        for _ in range(rng.randint(1, 3)):
            *parents, last = rng.choice(list(paths(doc))[1:])
            parent = doc
            for key in parents:
                parent = parent[key] if isinstance(parent, (dict, list)) else None
            if isinstance(parent, dict) and rng.random() < 0.3:
                parent.pop(last, None)
            elif isinstance(parent, (dict, list)):
                parent[last] = rng.choice(values)
        try:
            build_graph(_model_file(doc, "fuzz.json", version=None, compile_config=None), batch=rng.choice([None, 2]))
        except InputError as e:
            assert "\n" not in str(e) and str(e).startswith("fuzz.json: ")
            errors += 1
    assert 50 < errors < 400  # the mutations do break models, and not all of them


def test_a_saved_model_folder_says_how_to_save_a_keras_file(tmp_path):
    (tmp_path / "saved_model.pb").write_bytes(b"\x08\x01")
    with pytest.raises(InputError, match="a TensorFlow SavedModel folder.*model.save\\('NAME.keras'\\)"):
        read_model(tmp_path)


def test_attention_scores_come_back_when_the_call_asks(tmp_path):
    # tf_keras's MultiHeadAttention docstring: num_heads=2, key_dim=2, target (8, 16), source (4, 16),
    # return_attention_scores=True: output (None, 8, 16), scores (None, 2, 8, 4). tf_keras writes the
    # value tensor and the flag in the call's kwargs
    doc = _k2_model([_k2_input("t", [None, 8, 16]), _k2_input("s", [None, 4, 16]),
                     _k2_layer("MultiHeadAttention", "mha", [], num_heads=2, key_dim=2),
                     _k2_layer("Flatten", "f", [[("mha", 0, 1)]])],
                    [["t", 0, 0], ["s", 0, 0]], [["mha", 0, 0], ["f", 0, 0]])
    doc["config"]["layers"][2]["inbound_nodes"] = [[["t", 0, 0, {"value": ["s", 0, 0],
                                                                  "return_attention_scores": True}]]]
    graph = _graph(tmp_path, doc, batch=3)
    assert [s.shape for s in (t.spec for t in graph.nodes[0].outputs)] == [(3, 8, 16), (3, 2, 8, 4)]
    assert [t.spec.shape for t in graph.outputs] == [(3, 8, 16), (3, 64)]


def test_a_json_string_of_a_models_json_is_read_as_that_json(tmp_path):
    """Tried as a new user would (a stock-prediction app's model1.json): `json.dump(model.to_json(), f)`
    writes the config as one JSON string. It is read once more, as model.to_json() wrote it, and said so;
    its weights are the plain JSON's: Dense(3) on 5 features, 5 x 3 + 3 = 18 floats, 72 bytes."""
    from protoaudit.keras.audit import audit_keras

    doc = {"class_name": "Sequential", "keras_version": "2.3.1", "config": {"name": "s", "layers": [
        {"class_name": "Dense", "config": {"name": "d", "units": 3, "batch_input_shape": [None, 5]}}]}}
    plain, string = tmp_path / "plain.json", tmp_path / "string.json"
    plain.write_text(json.dumps(doc))
    string.write_text(json.dumps(json.dumps(doc)))
    assert string.read_text().startswith('"{\\"class_name\\"')
    a, b = audit_keras(plain, mode="cpu"), audit_keras(string, mode="cpu")
    assert a.weights_bytes == b.weights_bytes == 72 and a.step_peak_bytes == b.step_peak_bytes
    assert b.container and "json.dump of model.to_json()" in b.container and a.container is None
    from conftest import run_in_process

    run = run_in_process(string, "--mode", "cpu")  # the command tells it from a Caffe prototxt by its content
    assert run.returncode == 0 and "read as model.to_json() writes it" in run.stdout, run.stderr


def test_keras_1_writes_its_optimizer_and_loss_beside_the_config(tmp_path):
    """A user's Keras 1.0.4 file (a CNN's to_json() of a compiled model) holds, beside class_name and config,
    "loss": "categorical_crossentropy" and "optimizer": {"name": "SGD", "lr": 0.01, "momentum": 0.9,
    "nesterov": true, "decay": 1e-06}: the audit trains with them, as the file says. SGD with momentum
    keeps one slot a variable: Dense(3) on 5 features, 18 floats, 72 bytes of slots."""
    from protoaudit.keras.audit import audit_keras

    doc = {"class_name": "Sequential", "keras_version": "1.0.4", "loss": "categorical_crossentropy",
           "optimizer": {"name": "SGD", "lr": 0.01, "momentum": 0.9, "nesterov": True, "decay": 1e-06},
           "sample_weight_mode": None,
           "config": [{"class_name": "Dense", "config": {"name": "d", "output_dim": 3, "batch_input_shape": [None, 5],
                                                         "activation": "softmax"}}]}
    path = tmp_path / "model.json"
    path.write_text(json.dumps(doc))
    model = read_model(path)
    assert model.optimizer == {"class_name": "SGD", "config": {"lr": 0.01, "momentum": 0.9, "nesterov": True,
                                                               "decay": 1e-06}}
    assert model.loss == "categorical_crossentropy"
    a = audit_keras(path, mode="cpu")
    assert a.optimizer == ("SGD", {"lr": 0.01, "momentum": 0.9, "nesterov": True, "decay": 1e-06})
    assert a.slot_bytes == 72


def test_channels_first_layers_the_cpu_kernels_refuse_are_said_in_cpu_mode(tmp_path):
    """TensorFlow 2.21's CPU kernels without oneDNN take NHWC only for Conv2D's filter gradient and for
    MaxPool (tried here: one train_on_batch step of each layer in channels_first, TF_ENABLE_ONEDNN_OPTS=0,
    'Conv2DCustomBackpropFilterOp only supports NHWC.' and 'Default MaxPoolingOp only supports NHWC on
    device type CPU'; both trained with oneDNN on). A channels_first CNN saved by tf_keras: --mode cpu says
    both layers and the kernels' words; --mode gpu says nothing of it. Keras 3 transposes a channels_first
    MaxPooling2D itself: its model lists only the Conv2D."""
    from protoaudit.keras.audit import audit_keras

    first = {"data_format": "channels_first"}
    layers = [{"class_name": "Conv2D", "config": {"name": "c", "filters": 4, "kernel_size": [3, 3], **first,
                                                  "batch_input_shape": [None, 3, 8, 8]}},
              {"class_name": "MaxPooling2D", "config": {"name": "p", "pool_size": [2, 2], **first}},
              {"class_name": "Flatten", "config": {"name": "f"}},
              {"class_name": "Dense", "config": {"name": "d", "units": 1}}]
    path = tmp_path / "cf.json"
    for version, want in (("2.4.0", ["c", "p"]), ("3.3.3", ["c"])):
        path.write_text(json.dumps({"class_name": "Sequential", "keras_version": version,
                                    "config": {"name": "s", "layers": layers}}))
        cpu = audit_keras(path, mode="cpu")
        assert [layer for layer, _ in cpu.cpu_stops] == want
        assert dict(cpu.cpu_stops)["c"] == "Conv2DCustomBackpropFilterOp only supports NHWC."
        assert audit_keras(path, mode="gpu").cpu_stops == []
    path.write_text(json.dumps({"class_name": "Sequential", "keras_version": "2.4.0",
                                "config": {"name": "s", "layers": layers}}))
    from conftest import run_in_process

    run = run_in_process(path, "--mode", "cpu")
    assert run.returncode == 0 and "its kernels refuse layer 'c' (and 1 more channels_first layer)" in run.stdout
