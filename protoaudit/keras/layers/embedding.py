"""Embedding: a table of input_dim x output_dim looked up per integer of the input."""
from .base import KerasLayer, register


@register("Embedding")
class Embedding(KerasLayer):
    def output_specs(self, inputs):
        x = self.one(inputs)
        return [self.spec(x.shape + (self.get("output_dim"),))]  # float out, whatever the index dtype

    def weights(self, inputs):
        return [self.weight("embeddings", (self.get("input_dim"), self.get("output_dim")))]
