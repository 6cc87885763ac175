"""Saves the small Keras 3 models measured here (python models.py DIR): one per new step rule."""
import os
import sys

import keras
from keras import layers


def gqa():
    x = keras.Input((128, 128))
    y = layers.GroupQueryAttention(head_dim=32, num_query_heads=8, num_key_value_heads=2)(x, x)
    y = layers.GlobalAveragePooling1D()(y)
    return keras.Model(x, layers.Dense(10)(y)), "mse"


def reversible():
    ids = keras.Input((64,), dtype="int32")
    emb = layers.ReversibleEmbedding(1000, 64)
    h = layers.Dense(64, activation="relu")(emb(ids))
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return keras.Model(ids, emb(h, reverse=True)), loss


def adaptive(pool):
    x = keras.Input((64, 64, 8))
    y = pool((7, 7))(layers.Dense(16)(x))
    return keras.Model(x, layers.Dense(10)(layers.Flatten()(y))), "mse"


MODELS = {"gqa_block": gqa, "reversible_lm": reversible,
          "adaptive_max_cnn": lambda: adaptive(layers.AdaptiveMaxPooling2D),
          "adaptive_avg_cnn": lambda: adaptive(layers.AdaptiveAveragePooling2D)}

if __name__ == "__main__":
    for name, make in MODELS.items():
        model, loss = make()
        model.compile(optimizer="adam", loss=loss)
        model.save(os.path.join(sys.argv[1], name + ".keras"))
