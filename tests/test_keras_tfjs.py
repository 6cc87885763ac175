"""TensorFlow.js's model.json: a layers model carries the Keras model (tests/data/keras_tfjs, real files).

The ground truth is the converter's own: its weightsManifest lists each weight of the real model with
its shape and dtype, and its modelTopology is the .h5 file's model_config and training_config."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from protoaudit.keras.audit import audit_keras
from protoaudit.keras.files import read_model

DATA = Path(__file__).parent / "data" / "keras_tfjs"
ORACLE = Path(__file__).parent / "data" / "keras_oracle" / "shared"
LAYERS_MODELS = ["1217pond_SazaeJyanken.json", "furged_web_model.json", "AffanKhurram_tfjs_model.json"]
ITEMSIZE = {"float32": 4, "int32": 4, "float16": 2}


@pytest.mark.parametrize("name", LAYERS_MODELS)
def test_weights_are_the_converters_manifest(name):
    doc = json.loads((DATA / name).read_text())
    shapes = [(w["shape"], w["dtype"]) for group in doc["weightsManifest"] for w in group["weights"]]
    a = audit_keras(DATA / name, mode="cpu")
    assert a.params == sum(math.prod(s) for s, _ in shapes)
    assert a.weights_bytes == sum(math.prod(s) * ITEMSIZE[d] for s, d in shapes)


def test_version_optimizer_and_loss_come_from_the_topology():
    model = read_model(DATA / "AffanKhurram_tfjs_model.json")
    assert (model.keras_version, model.flavour) == ("2.5.0", "tf_keras")
    assert model.optimizer["class_name"] == "RMSprop" and model.loss == "categorical_crossentropy"
    assert model.container == "TensorFlow.js model.json"
    k3 = read_model(DATA / "furged_web_model.json")
    assert (k3.keras_version, k3.flavour) == ("3.13.2", "keras3")
    assert k3.optimizer["class_name"] == "Adam" and k3.loss == "sparse_categorical_crossentropy"


def test_a_converted_model_audits_as_its_h5_file(tmp_path):
    # tensorflowjs_converter --input_format keras copies the .h5 file's attributes into modelTopology
    h5py = pytest.importorskip("h5py")
    h5 = ORACLE / "models" / "lc1_F200_sgd.h5"
    with h5py.File(h5, "r") as f:
        attrs = {k: f.attrs[k] for k in ("keras_version", "backend", "model_config", "training_config")}
    text = {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}
    doc = {"format": "layers-model", "generatedBy": f"keras v{text['keras_version']}",
           "convertedBy": "TensorFlow.js Converter", "weightsManifest": [],
           "modelTopology": {"keras_version": text["keras_version"], "backend": text["backend"],
                             "model_config": json.loads(text["model_config"]),
                             "training_config": json.loads(text["training_config"])}}
    path = tmp_path / "model.json"
    path.write_text(json.dumps(doc))
    a, b = audit_keras(path, batch=8), audit_keras(h5, batch=8)
    assert (a.weights_bytes, a.slot_bytes, a.step_peak_bytes, a.optimizer, a.loss) == \
           (b.weights_bytes, b.slot_bytes, b.step_peak_bytes, b.optimizer, b.loss)
    assert a.container and not b.container


def test_a_tfjs_saved_model_keeps_its_training_config_beside_the_topology(tmp_path):
    # tfjs-layers' model.save(): modelTopology is model.toJSON(), the training config is trainingConfig
    topology = json.loads((ORACLE / "models" / "lc1_F200_sgd.json").read_text())
    doc = {"modelTopology": topology, "format": "layers-model", "generatedBy": "TensorFlow.js tfjs-layers v4.22.0",
           "convertedBy": None, "weightsManifest": [],
           "trainingConfig": {"loss": "mean_absolute_error", "optimizer_config": {"class_name": "Adam", "config": {}}}}
    path = tmp_path / "model.json"
    path.write_text(json.dumps(doc))
    model = read_model(path)
    assert model.optimizer["class_name"] == "Adam" and model.loss == "mean_absolute_error"
    assert audit_keras(path, batch=8).slots_per_variable == 2


def test_a_graph_model_is_refused_in_one_line():
    run = subprocess.run([sys.executable, "-m", "protoaudit", str(DATA / "07subhadip_graph_model.json")],
                         capture_output=True, text=True)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and "TensorFlow.js graph model" in run.stderr
    assert "Traceback" not in run.stderr


def test_the_report_says_where_the_model_was_read(tmp_path):
    run = subprocess.run([sys.executable, "-m", "protoaudit", str(DATA / "1217pond_SazaeJyanken.json"),
                          "--format", "json", "--mode", "cpu"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["container"] == "TensorFlow.js model.json"
    text = subprocess.run([sys.executable, "-m", "protoaudit", str(DATA / "1217pond_SazaeJyanken.json")],
                          capture_output=True, text=True).stdout
    assert "TensorFlow.js model.json" in text.splitlines()[1]
