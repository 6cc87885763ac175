"""How the third process of each configuration was measured (README.md): the oracle kit's `models.build`
given `saved=PATH` rebuilds a model from a `.keras` file of models/ (its config.json, no weights) and
makes its batch; the kit's measure.py then compiles it with the optimizer named on its command line and
measures three `train_on_batch` steps as for every other run:

    env TF_ENABLE_ONEDNN_OPTS=0 OMP_NUM_THREADS=1 PYTHONHASHSEED=0 LD_PRELOAD=$PWD/memtrack.so \
        python measure.py FLAVOUR saved=PATH OPT BATCH tob

`build_saved` is the branch added to the kit's models.py for it (K: tf_keras or keras).
"""
import json
import zipfile

import numpy as np


def build_saved(K, path):
    """(model, loss, make_batch): float inputs drawn from a normal distribution, integer inputs as ids
    below the first Embedding's input_dim, labels as each output's loss takes them (class ids for a
    sparse loss, else uniform floats of the output's shape)."""
    cfg = json.loads(zipfile.ZipFile(path).read("config.json"))
    if K.__name__ == "keras":
        model = K.saving.deserialize_keras_object(cfg)
    else:
        from tf_keras.src.saving import serialization_lib
        model = serialization_lib.deserialize_keras_object(cfg)
    model.compile_from_config(cfg["compile_config"])
    loss = model.loss
    names = list(getattr(model, "output_names", None) or [o.name for o in model.outputs])

    def sparse(k):
        one = loss.get(names[k]) if isinstance(loss, dict) else loss[k] if isinstance(loss, (list, tuple)) else loss
        return "sparse" in str(one if isinstance(one, str) else getattr(one, "name", one)).lower()

    ins, outs = model.inputs, model.outputs
    dims = [layer.input_dim for layer in model.layers if type(layer).__name__ == "Embedding"]

    def make_batch(rng, n):
        X = []
        for t in ins:
            shape = (n,) + tuple(int(d) for d in t.shape[1:])
            X.append(rng.integers(0, dims[0] if dims else 10, size=shape) if "int" in str(t.dtype)
                     else rng.standard_normal(shape).astype("float32"))
        Y = [rng.integers(0, int(o.shape[-1]), size=(n,) + tuple(int(d) for d in o.shape[1:-1])) if sparse(k)
             else rng.random((n,) + tuple(int(d) for d in o.shape[1:])).astype("float32") for k, o in enumerate(outs)]
        return (X if len(X) > 1 else X[0]), (Y if len(Y) > 1 else Y[0])

    return model, loss, make_batch
