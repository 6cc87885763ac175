"""Keras's built-in layers, one module per family; importing this registers them all."""
from . import (activations, applications, attention, audio, augmentation, base, convolution, core,  # noqa: F401
               embedding, locally_connected, merging, normalization, pooling, preprocessing, recurrent,
               regularization, reshaping)
from .base import REGISTRY, KerasLayer, Spec, Weight, make_layer, nbytes  # noqa: F401
