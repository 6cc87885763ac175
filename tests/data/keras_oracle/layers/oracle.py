"""Build each layer with the real Keras and write what it makes to layers.tsv (one row per layer call).

Run once with each Keras (see README.md); rows are appended, so delete layers.tsv before a full run.
Columns: flavour, class, config (get_config() as JSON), input shape and dtype, the output's shape and
dtype from a training call, compute_output_shape, and the variables (name:shape:dtype:trainable).
"""
import json
import os
import sys

import numpy as np

FLAVOUR = sys.argv[1]  # keras3 | tf_keras
if FLAVOUR == "keras3":
    import keras
    from keras import layers as L
else:
    import tf_keras as keras
    from tf_keras import layers as L
import tensorflow as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "layers.tsv")


def dims(shape):
    return "x".join("None" if d is None else str(d) for d in shape)


def row(layer, shape, dtype="float32", calls=1, inputs=None):
    if inputs is None:
        x = np.random.RandomState(0).uniform(0, 255, size=shape).astype(dtype)
    else:
        x = inputs
    outs = [layer(x, training=True) for _ in range(calls)]
    out_shapes = sorted({tuple(o.shape) for o in outs})
    y = outs[0]
    try:
        declared = layer.compute_output_shape([tuple(i.shape) for i in x] if isinstance(x, list) else shape)
        declared = dims(tuple(declared))
    except Exception as e:  # noqa: BLE001 (recorded, not fatal)
        declared = f"error:{type(e).__name__}"
    ws = ";".join(f"{w.name.split('/')[-1].split(':')[0]}:{dims(w.shape)}:"
                  f"{w.dtype.name if hasattr(w.dtype, 'name') else w.dtype}:{int(w.trainable)}" for w in layer.weights)
    in_shape = "+".join(dims(i.shape) for i in x) if isinstance(x, list) else dims(shape)
    line = [FLAVOUR, type(layer).__name__, json.dumps(layer.get_config(), sort_keys=True, default=str),
            in_shape, str(np.dtype(dtype)) if inputs is None else str(x[0].dtype.name),
            "|".join(dims(s) for s in out_shapes), tf.as_dtype(y.dtype).name, declared, ws]
    with open(OUT, "a") as f:
        f.write("\t".join(line) + "\n")


if FLAVOUR == "keras3":
    img = (2, 24, 20, 3)
    for make in (lambda: L.RandomColorDegeneration(0.5), lambda: L.RandomPerspective(),
                 lambda: L.RandomShear(x_factor=0.2, y_factor=0.2), lambda: L.RandomElasticTransform(),
                 lambda: L.AugMix(), lambda: L.CutMix(), lambda: L.MixUp(), lambda: L.RandAugment(),
                 lambda: L.ContrastLimitedAdaptiveHistogramEqualization(value_range=(0, 255), tile_grid_size=(4, 4))):
        row(make(), img)
        row(make(), img, "uint8")
    row(L.RandomShear(x_factor=0.2, data_format="channels_first"), (2, 3, 24, 20))
    row(L.Pipeline([L.RandomFlip(), L.RandomShear(x_factor=0.2), L.MixUp(), L.Resizing(16, 12)]), img)
    for kw, shape in ((dict(), (2, 16000)), (dict(sequence_stride=160, fft_length=512, num_mel_bins=40), (2, 16000)),
                      (dict(sequence_stride=100, fft_length=256), (3, 999)),
                      (dict(sequence_stride=100, fft_length=256, sequence_length=200), (3, 1000)),
                      (dict(sequence_stride=128, fft_length=255), (2, 1000)), (dict(), (16000,))):
        row(L.MelSpectrogram(**kw), shape)
    for kw, shape in ((dict(mode="log", frame_length=256, frame_step=128, fft_length=512), (2, 1000, 1)),
                      (dict(mode="magnitude", frame_length=200, padding="same"), (2, 1000, 2)),
                      (dict(mode="psd", frame_length=64, frame_step=32, expand_dims=True), (2, 500, 3)),
                      (dict(mode="real", frame_length=64, frame_step=16, data_format="channels_first"), (2, 2, 500)),
                      (dict(mode="imag", frame_length=64, expand_dims=True, data_format="channels_first"), (2, 2, 500)),
                      (dict(mode="stft", frame_length=100, fft_length=128), (2, 400, 2)),
                      (dict(mode="angle", frame_length=100, padding="same", trainable=False), (2, 401, 1))):
        row(L.STFTSpectrogram(**kw), shape)
else:
    for cls, kw, shape in ((L.RandomHeight, dict(factor=0.2), (2, 224, 100, 3)),
                           (L.RandomHeight, dict(factor=(-0.1, 0.35)), (2, 50, 40, 3)),
                           (L.RandomHeight, dict(factor=(0.0, 1.0)), (2, 31, 8, 1)),
                           (L.RandomWidth, dict(factor=0.3), (2, 60, 77, 3)),
                           (L.RandomWidth, dict(factor=(0.5, 0.5)), (2, 16, 32, 2))):
        row(cls(seed=1, **kw), shape, calls=400)
        row(cls(seed=1, **kw), shape, "uint8", calls=400)

for mode, shape, n in (("int", (4,), 100), ("int", (4, 1), 10), ("one_hot", (4,), 7), ("one_hot", (4, 1), 7)):
    ints = [tf.constant(np.arange(4).reshape(shape), tf.int64), tf.constant(["a", "b", "c", "d"][:4] if len(shape) == 1
                                                                            else [["a"], ["b"], ["c"], ["d"]])]
    row(L.HashedCrossing(num_bins=n, output_mode=mode), shape, inputs=ints)
