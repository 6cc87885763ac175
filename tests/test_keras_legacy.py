"""Old Keras files as the Keras of their time loaded them (tests/data/keras_real: real files users
committed, tests/data/keras_real/SOURCES.md).

Keras 1 arguments follow keras/legacy/interfaces.py of Keras 2.0-2.2 (keras-team/keras at 2.2.4); the
parameter counts are Keras's own formulas, derived by hand in each test."""
import json
import math
from pathlib import Path

import pytest

from protoaudit.errors import InputError
from protoaudit.keras.audit import audit_keras
from protoaudit.keras.files import read_model
from protoaudit.keras.graph import build_graph
from protoaudit.keras.legacy import keras1_layer

REAL = Path(__file__).parent / "data" / "keras_real"
ORACLE = Path(__file__).parent / "data" / "keras_oracle" / "shared"


def _write(tmp_path, doc, name="model.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _params(graph, layer=None):
    return sum(math.prod(w.shape) for lay, w in graph.weights if layer is None or lay.name == layer)


def _shapes(graph):
    return {n.layer.name: n.outputs[0].spec.shape for n in graph.nodes}


# -- Keras 1 arguments ----------------------------------------------------------------------------------
def test_keras1_conv2d_arguments_are_converted_as_the_legacy_interface_did():
    # legacy_conv2d_support: conv2d_args_preprocessor joins nb_row and nb_col (from_config passes no
    # positional argument), dim_ordering 'th' is channels_first, then the renames
    config = {"name": "c", "nb_filter": 8, "nb_row": 3, "nb_col": 5, "border_mode": "same", "subsample": [2, 2],
              "dim_ordering": "th", "init": "he_normal", "W_regularizer": None, "bias": False}
    new, changed = keras1_layer("Convolution2D", config)
    assert changed and new == {"name": "c", "filters": 8, "kernel_size": [3, 5], "padding": "same",
                               "strides": [2, 2], "data_format": "channels_first",
                               "kernel_initializer": "he_normal", "kernel_regularizer": None, "use_bias": False}
    assert keras1_layer("Convolution2D", dict(config, dim_ordering="default"))[0]["data_format"] is None
    assert keras1_layer("Convolution2D", dict(config, dim_ordering="tf"))[0]["data_format"] == "channels_last"


def test_keras1_recurrent_pooling_dropout_and_embedding_arguments():
    lstm, _ = keras1_layer("LSTM", {"output_dim": 64, "inner_activation": "hard_sigmoid", "consume_less": "gpu",
                                    "forget_bias_init": "one", "dropout_W": 0.1, "dropout_U": 0.2,
                                    "input_dim": 32, "input_length": 10})
    # recurrent_args_preprocessor: forget_bias_init 'one' is unit_forget_bias, input_dim/input_length
    # the input shape; consume_less cpu/mem/gpu is implementation 0/1/2
    assert lstm == {"units": 64, "recurrent_activation": "hard_sigmoid", "implementation": 2,
                    "unit_forget_bias": True, "dropout": 0.1, "recurrent_dropout": 0.2,
                    "batch_input_shape": [None, 10, 32]}
    assert "forget_bias_init" not in keras1_layer("LSTM", {"output_dim": 4, "forget_bias_init": "zero"})[0]
    # Keras 2.0-2.2's GRU has no reset_after (2.1.3 added it, off): one bias of 3 x units
    assert keras1_layer("GRU", {"output_dim": 4})[0] == {"units": 4, "reset_after": False}
    assert keras1_layer("MaxPooling1D", {"pool_length": 3, "stride": 2, "border_mode": "valid"})[0] == \
        {"pool_size": 3, "strides": 2, "padding": "valid"}
    assert keras1_layer("Dropout", {"p": 0.5})[0] == {"rate": 0.5}
    # embedding_kwargs_preprocessor drops dropout ("use SpatialDropout1D"); output_dim keeps its name
    assert keras1_layer("Embedding", {"input_dim": 100, "output_dim": 8, "dropout": 0.2, "init": "uniform"})[0] == \
        {"input_dim": 100, "output_dim": 8, "embeddings_initializer": "uniform"}
    assert keras1_layer("ZeroPadding2D", {"padding": {"top_pad": 1, "left_pad": 2}})[0] == \
        {"padding": [[1, 0], [2, 0]]}
    assert keras1_layer("PReLU", {"init": "zero"})[0] == {"alpha_initializer": "zero"}
    # a Keras 2 config is left as it is
    assert keras1_layer("Dense", {"units": 3, "use_bias": True}) == ({"units": 3, "use_bias": True}, False)


def test_what_keras_refused_is_refused_in_one_line(tmp_path):
    for config, words in (({"output_dim": 4, "units": 4}, "both the legacy keyword argument `output_dim`"),
                          ({"mode": 2}, "`mode=1` and `mode=2` are no longer supported")):
        cls = "Dense" if "units" in config else "BatchNormalization"
        doc = {"class_name": "Sequential", "keras_version": "1.2.2",
               "config": [{"class_name": cls, "config": {"name": "x", "batch_input_shape": [None, 4], **config}}]}
        with pytest.raises(InputError, match="layer 'x': a Keras 1 argument Keras 2.0-2.2 refused") as e:
            read_model(_write(tmp_path, doc))
        assert words in str(e.value) and "\n" not in str(e.value)


def test_no_keras2_or_keras3_file_is_touched():
    for path in sorted((ORACLE / "models").rglob("*")):
        if path.suffix in (".json", ".h5", ".keras"):
            assert read_model(path).keras1_layers == 0, path.name


def test_keras1_mlp_54chen():
    # Keras 1.2.1: Dense(1024, input_dim=8), Dropout(p), Dense(512), Activation, Dropout, Dense(1)
    graph = build_graph(read_model(REAL / "54chen_deep_model.json"))
    assert [n.outputs[0].spec.shape for n in graph.nodes] == [(32, 1024), (32, 1024), (32, 512), (32, 512),
                                                               (32, 512), (32, 1)]
    assert _params(graph) == (8 * 1024 + 1024) + (1024 * 512 + 512) + (512 + 1)


def test_keras1_stacked_lstm_mark14wu():
    # Keras 1.2.2: LSTM(256, return_sequences) on batch_input_shape (100, 10, 32), LSTM(64), Dense(78):
    # an LSTM has 4 x (units x (features + units) + units) parameters
    model = read_model(REAL / "mark14wu_PythonTutorial_lstm_model.json")
    graph = build_graph(model)
    assert graph.batch == 100 and graph.batch_from == "input"
    assert _shapes(graph) == {"lstm_1": (100, 10, 256), "lstm_2": (100, 64), "dense_1": (100, 78),
                              "activation_1": (100, 78)}
    assert _params(graph, "lstm_1") == 4 * (256 * (32 + 256) + 256)
    assert _params(graph, "lstm_2") == 4 * (64 * (256 + 64) + 64)
    assert _params(graph) == 4 * (256 * 288 + 256) + 4 * (64 * 320 + 64) + 64 * 78 + 78
    assert model.keras1_layers == 3  # the two LSTMs and the Dense; Activation has no Keras 1 argument


def test_keras1_functional_lstm_gauravbh1010tt():
    # Keras 1.1.0 Model: Input (6,) int32 (input_dtype), Embedding(10000, 200), LSTM(128), Dense(10000)
    graph = build_graph(read_model(REAL / "GauravBh1010tt_Auto-correction_model.json"))
    assert graph.inputs[0].spec.dtype == "int32"
    assert _shapes(graph) == {"embedding_1": (32, 6, 200), "lstm_1": (32, 128), "dense_1": (32, 10000)}
    assert _params(graph) == 10000 * 200 + 4 * (128 * (200 + 128) + 128) + (128 * 10000 + 10000)


def test_keras1_channels_first_cnn_ingyn():
    # no keras_version, Keras 1 keys: Convolution2D(nb_filter, nb_row 5, nb_col 5, border_mode same,
    # dim_ordering th) on (1, 32, 32), BatchNormalization(mode 0, axis -1), PReLU, MaxPooling2D(th)
    graph = build_graph(read_model(REAL / "IngyN_HieroglyphClassifier_model_architecture.json"))
    shapes = _shapes(graph)
    assert shapes["convolution2d_1"] == (32, 30, 32, 32) and shapes["maxpooling2d_1"] == (32, 30, 16, 16)
    assert shapes["convolution2d_3"] == (32, 120, 8, 8) and shapes["flatten_1"] == (32, 120 * 4 * 4)
    assert _params(graph, "convolution2d_2") == 60 * 30 * 5 * 5 + 60
    # axis -1 of a channels_first output is the width, 32: gamma, beta, mean, variance of 32 each
    # (Keras 1's build: shape = (input_shape[self.axis],), and Keras 2 keeps the axis)
    assert _params(graph, "batchnormalization_1") == 4 * 32
    assert _params(graph, "prelu_1") == 30 * 32 * 32  # one alpha per input element (no shared_axes)
    convs = (30 * 25 + 30) + (60 * 30 * 25 + 60) + (120 * 60 * 25 + 120)
    norms = 4 * (32 + 16 + 8 + 2000 + 2000)
    prelus = 30 * 32 * 32 + 60 * 16 * 16 + 120 * 8 * 8 + 2000 + 2000
    dense = (1920 * 2000 + 2000) + (2000 * 2000 + 2000) + (2000 * 100 + 100)
    assert _params(graph) == convs + norms + prelus + dense


def test_the_report_says_keras1_arguments_were_converted():
    a = audit_keras(REAL / "54chen_deep_model.json", mode="cpu")
    assert a.keras1_layers == 5 and a.to_dict()["keras1_layers"] == 5  # three Dense, two Dropout
    from protoaudit.report.keras_format import headline

    assert any("Keras 1 arguments" in line and "5 layers" in line for line in headline(a))


# -- tf.keras 1.13's class names ------------------------------------------------------------------------
def test_batch_normalization_v2_is_batch_normalization_s_e_voting():
    # Keras 2.2.4-tf (TensorFlow 1.13) wrote "BatchNormalizationV2"; tf_keras's serialization maps it
    # (and V1) to BatchNormalization. A Sequential on (48, 48, 1): two 3x3 valid Conv2D(64) then BN
    # over axis 3; seven BNs, of 64, 128, 128, 256, 256, 512, 512 channels
    graph = build_graph(read_model(REAL / "S-FK_E_Voting_model_num.json"))
    norms = [n for n in graph.nodes if n.layer.name.startswith("batch_normalization_v2_")]
    assert len(norms) == 7 and {n.layer.class_name for n in norms} == {"BatchNormalization"}
    channels = [64, 128, 128, 256, 256, 512, 512]
    assert [_params(graph, n.layer.name) for n in norms] == [4 * c for c in channels]
    # gamma and beta train; the moving mean and variance do not
    assert sum(math.prod(w.shape) for _, w in graph.weights if not w.trainable) == 2 * sum(channels)
    assert _shapes(graph)["conv2d_9"] == (32, 46, 46, 64)
    assert _params(graph, "conv2d_8") == 64 * 3 * 3 * 1 + 64
    assert _params(graph, "dense_7") == 128 * 7 + 7


def test_batch_normalization_v1_too_but_not_a_keras3_or_user_class(tmp_path):
    bn = {"class_name": "BatchNormalizationV1", "config": {"name": "bn", "axis": -1}}
    doc = {"class_name": "Sequential", "keras_version": "2.2.4-tf",
           "config": {"name": "s", "layers": [{"class_name": "Dense", "config": {
               "name": "d", "units": 5, "batch_input_shape": [None, 3]}}, bn]}}
    assert _params(build_graph(read_model(_write(tmp_path, doc))), "bn") == 4 * 5
    bn["module"] = "my_package"
    with pytest.raises(InputError, match="BatchNormalizationV1"):
        build_graph(read_model(_write(tmp_path, doc)))


# -- Keras 2.0's nameless Sequentials ---------------------------------------------------------------------
def test_a_nameless_nested_sequential_is_named_as_keras_names_it_29takuya():
    # Keras 2.0.6 wrote Sequential([Sequential(encoder), ClusteringLayer]) as bare lists: no names.
    # Loading it, the outer model is made first (sequential_1), then the inner (sequential_2)
    model = read_model(REAL / "29Takuya_DEC-Keras_model.json")
    with pytest.raises(InputError, match="layer 'sequential_1/clustering': has class 'ClusteringLayer'"):
        build_graph(model)
    graph = build_graph(model, inputs={"clustering": (32, 100)})
    assert [n.path for n in graph.nodes] == [f"sequential_1/sequential_2/encoder_dense_{i}" for i in (1, 2, 3, 4)] \
        + ["sequential_1/clustering"]
    # the encoder: 39 -> 500 -> 500 -> 2000 -> 10
    assert _params(graph) == (39 * 500 + 500) + (500 * 500 + 500) + (500 * 2000 + 2000) + (2000 * 10 + 10)


def test_nameless_sequentials_are_numbered_in_the_order_keras_makes_them(tmp_path):
    def dense(name, units, shape=None):
        config = {"name": name, "units": units, **({"batch_input_shape": shape} if shape else {})}
        return {"class_name": "Dense", "config": config}

    inner = {"class_name": "Sequential", "config": [dense("a", 4, [None, 3])]}
    second = {"class_name": "Sequential", "config": [dense("b", 2)]}
    doc = {"class_name": "Sequential", "keras_version": "2.0.8",
           "config": {"name": "top", "layers": [inner, second]}}
    graph = build_graph(read_model(_write(tmp_path, doc)))
    # a named model takes no number: the first nameless one is sequential_1
    assert [n.path for n in graph.nodes] == ["top/sequential_1/a", "top/sequential_2/b"]


def test_a_layer_without_a_name_is_named_as_such(tmp_path):
    doc = {"class_name": "Sequential", "keras_version": "2.0.8",
           "config": [{"class_name": "Dense", "config": {"units": 4, "batch_input_shape": [None, 3]}}]}
    with pytest.raises(InputError, match="model 'sequential_1' has a Dense layer with no name"):
        build_graph(read_model(_write(tmp_path, doc)))


# -- the legacy Merge layer ---------------------------------------------------------------------------------
def _merge_model(tmp_path, shapes, **merge):
    layers = [{"class_name": "InputLayer", "name": f"i{k}", "inbound_nodes": [],
               "config": {"name": f"i{k}", "batch_input_shape": [None, *shape]}} for k, shape in enumerate(shapes)]
    config = {"name": "m", "mode": "sum", "mode_type": "raw", "concat_axis": -1, "dot_axes": -1,
              "output_shape": None, "output_shape_type": "raw", "output_mask": None, "output_mask_type": "raw",
              "arguments": {}, **merge}
    layers.append({"class_name": "Merge", "name": "m", "config": config,
                   "inbound_nodes": [[[f"i{k}", 0, 0, {}] for k in range(len(shapes))]]})
    inputs = [[f"i{k}", 0, 0] for k in range(len(shapes))]
    doc = {"class_name": "Model", "keras_version": "2.0.6",
           "config": {"name": "model_1", "layers": layers, "input_layers": inputs, "output_layers": [["m", 0, 0]]}}
    return build_graph(read_model(_write(tmp_path, doc)), batch=4)


def test_legacy_merge_modes_have_the_legacy_layers_output_shapes(tmp_path):
    # keras/legacy/layers.py (2.0-2.1) Merge.compute_output_shape: sum, mul, ave, max give the (one)
    # input shape; concat adds the concat_axis sizes; dot and cos drop dot_axes from each input and the
    # second's batch, and a single remaining axis gets a 1
    out = lambda shapes, **kw: _merge_model(tmp_path, shapes, **kw).outputs[0].spec.shape  # noqa: E731
    for mode in ("sum", "mul", "ave", "max"):
        assert out([(5, 3), (5, 3), (5, 3)], mode=mode) == (4, 5, 3)
    assert out([(5, 3), (5, 7)], mode="concat") == (4, 5, 10)
    assert out([(5, 3), (2, 3)], mode="concat", concat_axis=1) == (4, 7, 3)
    # dot_axes -1 on two (batch, 8): _arguments_validation makes it [1, 1]; (4,) + a 1
    assert out([(8,), (8,)], mode="dot") == (4, 1)
    assert out([(8,), (8,)], mode="cos") == (4, 1)
    # batch_dot of (4, 3, 8) and (4, 6, 8) over axes [2, 2]: (4, 3, 6)
    assert out([(3, 8), (6, 8)], mode="dot", dot_axes=[2, 2]) == (4, 3, 6)
    with pytest.raises(InputError, match="in mode sum, which takes inputs of one shape"):
        out([(5, 3), (5, 4)])
    with pytest.raises(InputError, match="merges exactly two inputs in mode dot"):
        out([(8,), (8,), (8,)], mode="dot")


def test_a_merge_whose_mode_is_python_code_is_never_run(tmp_path):
    with pytest.raises(InputError, match="layer 'model_1/m': is Keras's legacy Merge with a Python function as its "
                                         "mode .*declare its output shape"):
        _merge_model(tmp_path, [(3,), (3,)], mode="4wEAAAAAAAAAAAAAAAEAAABTAAAAcwgAAAB8AGQBGQBTACkCTukAAAAAqQCpAdoB",
                     mode_type="lambda")


def test_a_keras1_merge_concat_inside_a_nested_model_frankydbravo():
    # Keras 1.1.2: Embedding(20672, 20, input_length 56), Dropout, then a Model of two Convolution1D(3)
    # (filter_length 3 and 4, valid) each MaxPooling1D(2) and Flatten, merged by concat, then Dense(100)
    graph = build_graph(read_model(REAL / "FrankyDBravo_TwittSentimentAnalysis_model_architecture.json"))
    shapes = _shapes(graph)
    # 56 - 3 + 1 = 54 and 56 - 4 + 1 = 53; pooled by 2 (valid): 27 and 26; flattened 81 and 78
    assert shapes["convolution1d_1"] == (32, 54, 3) and shapes["convolution1d_2"] == (32, 53, 3)
    assert shapes["flatten_1"] == (32, 81) and shapes["flatten_2"] == (32, 78)
    assert shapes["merge_1"] == (32, 81 + 78)
    assert _params(graph) == 20672 * 20 + (3 * 3 * 20 + 3) + (3 * 4 * 20 + 3) + (159 * 100 + 100) + (100 + 1)
    a = audit_keras(REAL / "FrankyDBravo_TwittSentimentAnalysis_model_architecture.json", mode="cpu")
    assert "Merge" not in a.unmodelled


def test_a_merge_sum_in_keras_2_0_channelcs():
    # Keras 2.0.6: a Correlational Network, its two halves (392 -> 500 -> 300 -> 50) summed by a Merge
    # and decoded by two Dense(392); ZeroPadding and CorrnetCost are the user's own classes
    path = REAL / "channelCS_image-generate_model_arch.json"
    declared = {"zero_padding_3": (32, 392), "zero_padding_4": (32, 392), "corrnet_cost_2": (32, 1)}
    graph = build_graph(read_model(path), inputs=declared)
    merges = [n for n in graph.nodes if n.layer.name == "merge_2"]
    assert len(merges) == 2 and all(n.outputs[0].spec.shape == (32, 50) for n in merges)
    half = (392 * 500 + 500) + (500 * 300 + 300) + (300 * 50 + 50)
    assert _params(graph) == 2 * half + 2 * (50 * 392 + 392)


# -- Keras 3's comparison and logic operations ------------------------------------------------------------
def _op(cls, module="keras.src.ops.numpy"):
    from protoaudit.keras.layers import make_layer

    return make_layer({"module": module, "class_name": cls, "registered_name": cls, "config": {"name": "op"}},
                      path="m/op")


def test_comparisons_broadcast_their_tensors_into_bool():
    # keras.src.ops.numpy: Equal ... LogicalXor's compute_output_spec is
    # KerasTensor(broadcast_shapes(x1.shape, x2.shape), dtype="bool"); LogicalNot and Isnan keep x's shape
    from protoaudit.keras.layers import Spec

    x, y = Spec((2, 5, 3), "float32"), Spec((3,), "float32")
    for cls in ("Equal", "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual", "LogicalAnd", "LogicalOr",
                "LogicalXor"):
        assert _op(cls).output_specs([x, y]) == [Spec((2, 5, 3), "bool")]
    for cls in ("LogicalNot", "Isnan", "Isinf", "Isfinite"):
        assert _op(cls).output_specs([x]) == [Spec((2, 5, 3), "bool")]
    # not_equal(x, 0): the constant is no tensor, so the output is x's shape
    assert _op("NotEqual").output_specs([Spec((4, 34), "float32")]) == [Spec((4, 34), "bool")]
    with pytest.raises(InputError, match="cannot broadcast"):
        _op("Less").output_specs([x, Spec((4,), "float32")])
    # isclose computes float differences first: not read here
    with pytest.raises(InputError, match="operation keras.ops Isclose"):
        _op("Isclose")


def test_a_not_equal_mask_in_a_keras3_captioner_elrath017():
    # Keras 3: tokens (batch, 34) -> Embedding(8485, 256, mask_zero); ops.not_equal(tokens, 0) is the
    # LSTM's mask; image features (4096,) -> Dense(256); add; Dense(256); Dense(8485, softmax)
    path = REAL / "elrath017_Image-Caption-Generator_model_arch.json"
    graph = build_graph(read_model(path))
    mask = [n for n in graph.nodes if n.layer.name == "not_equal"][0]
    assert mask.outputs[0].spec == ((32, 34), "bool")
    assert len(mask.inputs) == 1  # the 0 is a constant
    assert _params(graph) == 8485 * 256 + (4096 * 256 + 256) + 4 * (256 * (256 + 256) + 256) + (256 * 256 + 256) \
        + (256 * 8485 + 8485)
    a = audit_keras(path, mode="cpu")
    assert a.unmodelled == []
    assert [r.output_bytes for r in a.rows if r.name == "not_equal"] == [32 * 34]  # one byte a bool


# -- every layer that must be declared, named at once -----------------------------------------------------
def test_all_the_custom_classes_are_named_in_one_line_channelcs():
    # ZeroPadding (twice) and CorrnetCost are the user's classes (Keras has only ZeroPadding1D/2D/3D);
    # one run names all three, with counts, and every --input to declare, each at its input's shape
    # (what a layer that keeps it outputs): zero_padding_3 reads input_4 and zero_padding_4 input_3,
    # both (None, 392), so 32x392 at the default batch; corrnet_cost_2 reads model_3's third output
    # (tensor index 2), merge_2, the sum of hid_l and hid_r (Dense(50) each): 32x50
    with pytest.raises(InputError) as e:
        build_graph(read_model(REAL / "channelCS_image-generate_model_arch.json"))
    text = str(e.value)
    assert "\n" not in text
    assert "3 layers cannot be read here: class 'ZeroPadding' x2 (zero_padding_3, zero_padding_4)" in text
    assert "class 'CorrnetCost' x1 (corrnet_cost_2)" in text
    assert "--input zero_padding_3=32x392 --input zero_padding_4=32x392 --input corrnet_cost_2=32x50" in text


def _lambda_model(tmp_path, n, input_shape):
    layers = [{"class_name": "InputLayer", "name": "x", "inbound_nodes": [],
               "config": {"name": "x", "batch_input_shape": input_shape}}]
    previous = "x"
    for k in range(n):
        layers.append({"class_name": "Lambda", "name": f"lam{k}", "inbound_nodes": [[[previous, 0, 0, {}]]],
                       "config": {"name": f"lam{k}", "function": ["4wEAAAAAAAAAAAAAAAAAAAA=", None, None]}})
        previous = f"lam{k}"
    doc = {"class_name": "Model", "keras_version": "2.2.4",
           "config": {"name": "m", "layers": layers, "input_layers": [["x", 0, 0]],
                      "output_layers": [[previous, 0, 0]]}}
    return read_model(_write(tmp_path, doc))


def test_an_unknown_input_and_a_lambda_are_named_together(tmp_path):
    # as an image captioner (Nada-ibrahim/Image_Captioning_Engine) holds them: tokens of unknown length
    # and a Lambda; each declared in turn, the other is refused alone, as before
    model = _lambda_model(tmp_path, 1, [None, None])
    with pytest.raises(InputError, match=r"input 'x' has shape \(None, None\), and 1 layer cannot be read here: "
                                         r"Lambda x1 \(lam0\): its Python code is never run .*--input x=32xD1 "
                                         r"--input lam0=32x10"):
        build_graph(model)
    with pytest.raises(InputError, match="layer 'm/lam0': is a Lambda"):
        build_graph(model, inputs={"x": (32, 7)})
    with pytest.raises(InputError, match="input 'x' has shape"):
        build_graph(model, inputs={"lam0": (32, 7)})
    assert build_graph(model, inputs={"x": (32, 7), "lam0": (32, 7)}).outputs[0].spec.shape == (32, 7)


def test_a_long_list_is_cut_in_the_fix_but_counted(tmp_path):
    # each Lambda reads the one before, the first x, (None, 4): in a trial build where each passes its
    # input on, every one's input is 32x4 at the default batch
    with pytest.raises(InputError) as e:
        build_graph(_lambda_model(tmp_path, 9, [None, 4]))
    text = str(e.value)
    assert "9 layers cannot be read here: Lambda x9 (lam0, lam1, lam2, lam3, lam4, lam5, lam6, lam7, lam8)" in text
    assert "--input lam5=32x4 ... (3 more)" in text and "a layer's input shape is given" in text


# -- a file with no keras_version -------------------------------------------------------------------------
def test_a_file_without_a_version_says_so(tmp_path):
    from conftest import run_protoaudit

    # Keras 3's to_json writes no keras_version: the text says which Keras it is read as, and that the
    # version is not in the file; JSON keeps keras_version null
    path = REAL / "elrath017_Image-Caption-Generator_model_arch.json"
    text = run_protoaudit(path, "--mode", "cpu")
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[0].endswith("Keras 3 (version not in the file), one training step at batch 32 "
                                                "(Keras fit's default), TensorFlow on the CPU")
    assert "Keras ?" not in text.stdout
    j = json.loads(run_protoaudit(path, "--mode", "cpu", "--format", "json").stdout)
    assert j["keras_version"] is None and j["flavour"] == "keras3"
    from protoaudit.report.keras_format import keras_named

    assert keras_named(audit_keras(REAL / "IngyN_HieroglyphClassifier_model_architecture.json", mode="cpu")) == \
        "Keras 1 (version not in the file)"
    doc = {"class_name": "Sequential", "config": {"name": "s", "layers": [
        {"class_name": "Dense", "config": {"name": "d", "units": 2, "batch_input_shape": [None, 3]}}]}}
    assert keras_named(audit_keras(_write(tmp_path, doc), mode="cpu")) == "Keras 2 (tf_keras, version not in the file)"


def test_one_custom_layer_is_offered_its_inputs_shape(tmp_path):
    # one layer of a class no Keras has, after a Dense(16) on (None, 8): its input is 32x16 at the
    # default batch, which it outputs if it keeps its input's shape (a custom dropout, a scaling)
    doc = {"class_name": "Sequential", "keras_version": "2.4.0", "config": {"name": "s", "layers": [
        {"class_name": "Dense", "config": {"name": "d", "units": 16, "batch_input_shape": [None, 8]}},
        {"class_name": "FixedDropout", "config": {"name": "drop", "rate": 0.2}}]}}
    with pytest.raises(InputError) as e:
        build_graph(read_model(_write(tmp_path, doc)))
    assert "e.g. --input drop=32x16 if it keeps its input's shape" in str(e.value)


def test_a_nested_sequential_built_on_its_input_counts_its_calls_from_node_1(tmp_path):
    # Keras 2.2's network.py get_config keeps node 0 of every nested Network for its own input-to-output
    # node (kept_nodes = 1), as tf_keras does for one built on an InputLayer (_should_skip_first_node): a
    # Siamese tower whose first layer has batch_input_shape, called on two inputs, is called at nodes 1
    # and 2 (tried as a new user would: a face-attendance model saved by tf.keras 2.2.4-tf, and a
    # TensorFlow.js phoneme model whose output is ['sequential_5', 1, 0]). Two Dense(8) calls on 4
    # features: two (32, 8) outputs, one set of weights, 4 x 8 + 8 = 40 parameters.
    tower = {"class_name": "Sequential", "config": {"name": "tower", "layers": [
        {"class_name": "Dense", "config": {"name": "d", "units": 8, "batch_input_shape": [None, 4]}}]},
        "name": "tower", "inbound_nodes": [[["a", 0, 0, {}]], [["b", 0, 0, {}]]]}
    doc = {"class_name": "Model", "keras_version": "2.2.4-tf", "config": {"name": "m", "layers": [
        *({"class_name": "InputLayer", "name": n, "inbound_nodes": [],
           "config": {"name": n, "batch_input_shape": [None, 4]}} for n in "ab"),
        tower], "input_layers": [["a", 0, 0], ["b", 0, 0]], "output_layers": [["tower", 1, 0], ["tower", 2, 0]]}}
    graph = build_graph(read_model(_write(tmp_path, doc)))
    assert [t.spec.shape for t in graph.outputs] == [(32, 8), (32, 8)]
    assert sum(w.shape[0] * (w.shape[1] if len(w.shape) > 1 else 1) for _, w in graph.weights) == 40
