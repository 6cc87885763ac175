"""Regularization layers: no variables, the input's shape out (Dropout's mask is a training-step
tensor, which the memory model counts, not a weight)."""
from .base import KerasLayer, register


@register("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
          "GaussianDropout", "AlphaDropout", "ActivityRegularization")
class Regularizer(KerasLayer):
    pass
