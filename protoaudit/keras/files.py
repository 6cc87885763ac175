"""Reading the files Keras users save (`to_json()` text, `.h5`, `.keras` zips, and TensorFlow.js's
`model.json`, which carries the Keras model) down to their model config.

Only configuration is read: a `.keras` file's weights member and an `.h5` file's datasets are never
opened, so a 500 MB model reads as fast as a 5 KB one. Nothing in a file is run or unmarshalled:
JSON is parsed as data, and `Lambda` bytecode stays a string nobody looks at.
"""
import json
import os
import zipfile
from typing import NamedTuple, Optional

from ..errors import InputError
from . import legacy

MAX_MEMBER = 64 << 20  # a config.json of ResNet152 is ~0.5 MB; anything near this is not a config
MAX_RATIO = 200  # JSON compresses 5-20x; a member claiming more is a bomb, not a config
MAX_JSON = 256 << 20  # a .json / h5 attribute this large is not a model config either
MODEL_CLASSES = frozenset({"Functional", "Model", "Sequential"})


class ModelFile(NamedTuple):
    config: dict  # the model: {"class_name", "config", ...}
    flavour: str  # "tf_keras" (Keras 2.x, tf.keras, tf_keras) or "keras3"
    keras_version: Optional[str]
    optimizer: Optional[dict]  # {"class_name", "config"} as compiled, or None
    loss: object  # as stored (a name, a dict, a list), or None
    path: str
    metrics: bool = False  # whether it was compiled with metrics, which read its outputs (Keras's default: none)
    container: Optional[str] = None  # where the Keras model was found, when not in a file of Keras's own
    keras1_layers: int = 0  # layers whose Keras 1 arguments were converted as Keras 2.0-2.2 loaded them


def read_model(path):
    """The model config, flavour, version, optimizer and loss of a Keras file, by its content."""
    path = os.fspath(path)
    if os.path.isdir(path):
        what = "a TensorFlow SavedModel folder" if os.path.exists(os.path.join(path, "saved_model.pb")) else "a folder"
        raise InputError(f"{what}, not a Keras model file", file=path,
                         fix="save the model with model.save('NAME.keras'), or write model.to_json() to a file")
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError as e:
        raise InputError(f"cannot read the file: {e.strerror}", file=path) from None
    if head.startswith(b"PK"):
        return _read_keras_zip(path)
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return _read_h5(path)
    return _read_json_file(path)


JSON_STRING = "JSON string (json.dump of model.to_json()'s output)"


def _parse_json(text, path, what):
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InputError(f"{what} is not valid JSON ({str(e).splitlines()[0][:120]})", file=path,
                         fix="give the output of model.to_json(), or the .h5/.keras file model.save() wrote") from None


def _read_json_file(path):
    if os.path.getsize(path) > MAX_JSON:
        raise InputError(f"the file is over {MAX_JSON >> 20} MiB, too large for a model config", file=path)
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("this is a binary file, not a Keras model's JSON, .h5 or .keras", file=path) from None
    doc = _parse_json(text, path, "the file")
    container = None
    if isinstance(doc, str):  # json.dump(model.to_json(), f): the config as one JSON string, read once more
        doc, container = _parse_json(doc, path, "the JSON string the file holds"), JSON_STRING
    if isinstance(doc, dict) and "modelTopology" in doc:
        return _read_tfjs(doc, path)
    compile_config = _dict(doc).get("compile_config") or _keras1_compile(_dict(doc))
    return _model_file(doc, path, version=_dict(doc).get("keras_version"),
                       compile_config=compile_config, container=container)


def _keras1_compile(doc):
    """Keras 1.0's to_json() of a compiled model writes its optimizer (the class's name and settings in
    one dict: {"name": "SGD", "lr": 0.01, "momentum": 0.9, ...}) and its loss beside the config (a user's
    Keras 1.0.4 file); None where the file has neither."""
    optimizer, loss = doc.get("optimizer"), doc.get("loss")
    if isinstance(optimizer, dict) and isinstance(optimizer.get("name"), str):
        optimizer = {"class_name": optimizer["name"], "config": {k: v for k, v in optimizer.items() if k != "name"}}
    if optimizer is None and loss is None:
        return None
    return {"optimizer": optimizer, "loss": loss}


def _read_tfjs(doc, path):
    """TensorFlow.js's model.json. A layers model's modelTopology is the Keras model: as an .h5 file holds
    it (model_config, training_config) where tensorflowjs_converter wrote it from Keras, or as to_json()
    writes it where TensorFlow.js saved it (its training config then beside, as trainingConfig). A graph
    model holds a frozen TensorFlow graph, with no layers to read."""
    topology = doc["modelTopology"]
    if doc.get("format") == "graph-model" or (isinstance(topology, dict) and "node" in topology):
        raise InputError("a TensorFlow.js graph model: a frozen TensorFlow graph, with no Keras layers to read",
                         file=path, fix="give the Keras model it was converted from (model.to_json(), or the "
                                        ".h5/.keras file model.save() wrote)")
    topology = _dict(topology)
    if "model_config" in topology:
        config, training = topology["model_config"], topology.get("training_config")
    else:
        config, training = topology, doc.get("trainingConfig")
    return _model_file(config, path, version=topology.get("keras_version"),
                       compile_config=_training_compile(training), container="TensorFlow.js model.json")


def _read_keras_zip(path):
    try:
        with zipfile.ZipFile(path) as z:
            config = _zip_json(z, "config.json", path)
            try:
                z.getinfo("metadata.json")
                metadata = _zip_json(z, "metadata.json", path)
            except KeyError:
                metadata = {}
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, NotImplementedError) as e:
        raise InputError(f"not a readable .keras zip ({e})", file=path,
                         fix="the file may be truncated; save it again with model.save('NAME.keras')") from None
    return _model_file(config, path, version=_dict(metadata).get("keras_version"),
                       compile_config=_dict(config).get("compile_config"))


def _zip_json(z, member, path):
    """One JSON member of a zip, refusing a zip bomb before inflating anything."""
    try:
        info = z.getinfo(member)
    except KeyError:
        raise InputError(f"the .keras zip has no {member}", file=path,
                         fix="save the model with model.save('NAME.keras')") from None
    if info.file_size > MAX_MEMBER:
        raise InputError(f"the .keras zip's {member} declares {info.file_size} bytes, over "
                         f"{MAX_MEMBER >> 20} MiB: refused (a zip bomb, or not a Keras file)", file=path)
    if info.compress_size and info.file_size / info.compress_size > MAX_RATIO:
        raise InputError(f"the .keras zip's {member} compresses {info.file_size / info.compress_size:.0f}x, "
                         "refused as a zip bomb", file=path)
    with z.open(info) as f:
        data = f.read(MAX_MEMBER + 1)
    if len(data) > MAX_MEMBER:
        raise InputError(f"the .keras zip's {member} inflates past {MAX_MEMBER >> 20} MiB: refused", file=path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"the .keras zip's {member} is not UTF-8 JSON", file=path) from None
    return _parse_json(text, path, f"the .keras zip's {member}")


def _read_h5(path):
    try:
        import h5py
    except ImportError:
        raise InputError("reading .h5 models needs h5py", file=path,
                         fix="pip install 'protoaudit[keras]'") from None
    try:
        with h5py.File(path, "r") as f:
            attrs = {k: _attr_text(f.attrs[k]) for k in ("model_config", "training_config", "keras_version")
                     if k in f.attrs}
    except (OSError, ValueError, KeyError) as e:
        raise InputError(f"not a readable HDF5 file ({str(e).splitlines()[0][:120]})", file=path) from None
    if "model_config" not in attrs:
        raise InputError("the .h5 file has no model_config attribute: it holds weights only, not a model",
                         file=path, fix="save with model.save('NAME.h5'), not save_weights")
    config = _parse_json(attrs["model_config"], path, "the .h5 model_config")
    training = _parse_json(attrs["training_config"], path, "the .h5 training_config") \
        if "training_config" in attrs else None
    return _model_file(config, path, version=attrs.get("keras_version"), compile_config=_training_compile(training))


def _training_compile(training):
    """A training_config (.h5, TensorFlow.js) as the compile config the other files keep."""
    if not isinstance(training, dict):
        return None
    return {"optimizer": training.get("optimizer_config"), "loss": training.get("loss"),
            "metrics": training.get("metrics"), "weighted_metrics": training.get("weighted_metrics")}


def _attr_text(value):
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if not isinstance(value, str) or len(value) > MAX_JSON:
        return "\x00"  # not JSON: reported by the parser as such
    return value


def _dict(value):
    return value if isinstance(value, dict) else {}


def _model_file(doc, path, *, version, compile_config, container=None):
    if not isinstance(doc, dict) or not isinstance(doc.get("class_name"), str) \
            or doc["class_name"] not in MODEL_CLASSES \
            or not isinstance(doc.get("config"), (dict, list)) \
            or (isinstance(doc["config"], list) and doc["class_name"] != "Sequential"):
        named = isinstance(doc, dict) and isinstance(doc.get("class_name"), str)
        what = f"a {doc['class_name']!r} object" if named else "JSON"
        fix = "give the output of model.to_json(), or the .h5/.keras file model.save() wrote"
        if named and isinstance(doc.get("config"), dict) and "layers" not in doc["config"]:
            fix = ("a subclassed model's graph is Python code, which is never run: build it as a Functional or "
                   "Sequential model, or " + fix)
        raise InputError(f"{what} that is not a Keras model (expected class_name Sequential, Functional or Model "
                         "with a config)", file=path, fix=fix)
    compile_config = _dict(compile_config)
    metrics = any(compile_config.get(k) for k in ("metrics", "weighted_metrics"))
    optimizer = _optimizer(compile_config.get("optimizer"))
    version = version if isinstance(version, str) else None
    flavour = _flavour(doc, version)
    doc, keras1_layers = legacy.upgrade(doc, path, flavour)
    return ModelFile(config=doc, flavour=flavour, keras_version=version,
                     optimizer=optimizer, loss=compile_config.get("loss"), path=path, metrics=metrics,
                     container=container, keras1_layers=keras1_layers)


def _optimizer(value):
    """{"class_name", "config"}; tf_keras writes its built-in optimizers as "Custom>SGD" in .h5 files."""
    if isinstance(value, str):
        return {"class_name": value, "config": {}}
    if not isinstance(value, dict) or not isinstance(value.get("class_name"), str):
        return None
    name = value["class_name"]
    if name.startswith("Custom>"):
        name = name[len("Custom>"):]
    return {"class_name": name, "config": _dict(value.get("config"))}


def _flavour(doc, version):
    """tf_keras for Keras 2.x, keras3 from 3.0; without a version, from what only Keras 3 writes."""
    if version:
        major = version.split(".")[0]
        if major.isdigit():
            return "keras3" if int(major) >= 3 else "tf_keras"
    text = json.dumps(doc["config"])
    if '"batch_shape"' in text or '"DTypePolicy"' in text or '"__keras_tensor__"' in text:
        return "keras3"
    if doc.get("module") == "keras" and "batch_input_shape" not in text:
        return "keras3"
    return "tf_keras"
