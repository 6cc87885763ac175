"""Keras's built-in layers, one module per family; importing this registers them all."""
from . import (activations, applications, attention, base, convolution, core, embedding, locally_connected,  # noqa: F401
               merging, normalization, pooling, preprocessing, recurrent, regularization, reshaping)
from .base import REGISTRY, KerasLayer, Spec, Weight, make_layer, nbytes  # noqa: F401
