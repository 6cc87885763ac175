"""Keras 3's later image augmentations, Pipeline, the spectrograms, HashedCrossing and tf_keras's
RandomHeight/RandomWidth: each layer's shape, dtype and variables against what the real Keras made
(tests/data/keras_oracle/layers/layers.tsv, written by oracle.py there), and models using them
audited end to end."""
import csv
import io
import json
import zipfile
from pathlib import Path

import pytest

from protoaudit.errors import InputError
from protoaudit.keras.layers import Spec, make_layer

from conftest import run_in_process

ORACLE = Path(__file__).parent / "data" / "keras_oracle" / "layers" / "layers.tsv"
COLUMNS = ["flavour", "class", "config", "input", "input_dtype", "outputs", "output_dtype", "declared", "weights"]


def _rows():
    with open(ORACLE) as f:
        return [dict(zip(COLUMNS, r)) for r in csv.reader(f, delimiter="\t")]


def _shape(text):
    return tuple(int(d) for d in text.split("x"))


@pytest.mark.parametrize("row", _rows(), ids=lambda r: f"{r['flavour']}-{r['class']}-{r['input']}-{r['input_dtype']}")
def test_layers_make_what_keras_made(row):
    config = json.loads(row["config"])
    layer = make_layer({"module": "keras.layers", "class_name": row["class"], "config": config},
                       flavour=row["flavour"], path=f"m/{config['name']}")
    inputs = [Spec(_shape(s), row["input_dtype"]) for s in row["input"].split("+")]
    [out] = layer.output_specs(inputs)
    seen = [_shape(s) for s in row["outputs"].split("|")]
    if len(seen) == 1:
        assert out.shape == seen[0]
    else:  # a random size over 400 training calls: the largest a draw can give, at most one over theirs
        axis = next(i for i in range(len(seen[0])) if len({s[i] for s in seen}) > 1)
        largest = max(s[axis] for s in seen)
        assert out.shape[:axis] + out.shape[axis + 1:] == seen[0][:axis] + seen[0][axis + 1:]
        assert largest <= out.shape[axis] <= largest + 1
    assert out.dtype == row["output_dtype"]
    made = [(w.name, "x".join(map(str, w.shape)), w.dtype, str(int(w.trainable))) for w in layer.weights(inputs)]
    assert made == [tuple(w.split(":")) for w in row["weights"].split(";") if w]


def test_random_height_and_width_take_the_largest_draw():
    """tf_keras: int(uniform(1 + lower, 1 + upper) * size), the draw below 1 + upper: 224 x 1.2 =
    268.8 -> 268; 31 x 2 = 62 is never drawn -> 61; a factor of (0.5, 0.5) draws 1.5 exactly -> 48."""
    for cls, factor, shape, expect in (("RandomHeight", 0.2, (8, 224, 100, 3), (8, 268, 100, 3)),
                                       ("RandomHeight", [0.0, 1.0], (8, 31, 8, 1), (8, 61, 8, 1)),
                                       ("RandomWidth", [0.5, 0.5], (8, 16, 32, 2), (8, 16, 48, 2)),
                                       ("RandomWidth", 0.3, (60, 77, 3), (60, 100, 3))):
        layer = make_layer({"class_name": cls, "config": {"name": "r", "factor": factor}}, path="m/r")
        assert layer.output_specs([Spec(shape, "uint8")]) == [Spec(expect, "float32")]
    with pytest.raises(InputError, match="factor"):
        make_layer({"class_name": "RandomHeight", "config": {"name": "r", "factor": [0.2, -0.1]}},
                   path="m/r").output_specs([Spec((2, 8, 8, 3), "float32")])


def _entry(cls, **config):
    return {"module": "keras.layers", "class_name": cls, "config": {"name": cls.lower(), **config},
            "registered_name": None}


def test_a_pipeline_with_an_unknown_layer_is_refused_naming_it():
    inner = [_entry("RandomFlip"), {"module": "my_augs", "class_name": "MyAugment", "config": {"name": "mine"},
                                    "registered_name": "Custom>MyAugment"}]
    with pytest.raises(InputError, match="its layer 'mine' has class 'MyAugment'") as e:
        make_layer({"class_name": "Pipeline", "config": {"name": "p", "layers": inner}}, flavour="keras3", path="m/p")
    assert "\n" not in str(e.value)


def _keras_file(tmp_path, layers, shape, name="model.keras"):
    config = {"module": "keras", "class_name": "Sequential", "build_config": {"input_shape": [None, *shape]},
              "config": {"name": "s", "layers": layers},
              "compile_config": {"optimizer": "adam", "loss": "mean_squared_error"}}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("config.json", json.dumps(config))
        z.writestr("metadata.json", json.dumps({"keras_version": "3.15.0"}))
    path = tmp_path / name
    path.write_bytes(buf.getvalue())
    return path


IMAGE_MODEL = [
    _entry("Pipeline", layers=[_entry("RandomFlip"), _entry("MixUp", alpha=0.2)]),
    _entry("RandomShear", x_factor=0.2), _entry("RandAugment", value_range=[0, 255]),
    _entry("ContrastLimitedAdaptiveHistogramEqualization", value_range=[0, 255]),
    _entry("Conv2D", filters=8, kernel_size=3, activation="relu"), _entry("Flatten"), _entry("Dense", units=10)]
AUDIO_MODELS = [
    ([_entry("STFTSpectrogram", mode="log", frame_length=256, frame_step=128),
      _entry("GlobalAveragePooling1D"), _entry("Dense", units=4)], [4000, 1]),
    ([_entry("MelSpectrogram", fft_length=512, sequence_stride=256, num_mel_bins=40),
      _entry("Flatten"), _entry("Dense", units=4)], [4000])]


@pytest.mark.parametrize("layers, shape", [(IMAGE_MODEL, [32, 32, 3]), *AUDIO_MODELS], ids=["image", "stft", "mel"])
def test_models_with_the_new_layers_audit_end_to_end(tmp_path, layers, shape):
    result = run_in_process(_keras_file(tmp_path, layers, shape), "--batch", "8", "--format", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["unmodelled"] == []


def test_an_unknown_layer_in_a_pipeline_exits_2_with_one_line(tmp_path):
    bad = [_entry("Pipeline", layers=[_entry("RandomFlip"), _entry("RandomSolarize")]), _entry("Dense", units=2)]
    result = run_in_process(_keras_file(tmp_path, bad, [8, 8, 3]), "--batch", "8")
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "'RandomSolarize'" in result.stderr
