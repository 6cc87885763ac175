"""Embedding: a table of input_dim x output_dim looked up per integer of the input."""
from .base import KerasLayer, register


@register("Embedding")
class Embedding(KerasLayer):
    def output_specs(self, inputs):
        x = self.one(inputs)
        return [self.spec(x.shape + (self.get("output_dim"),))]  # float out, whatever the index dtype

    def weights(self, inputs):
        return [self.weight("embeddings", (self.get("input_dim"), self.get("output_dim")))]


@register("ReversibleEmbedding")
class ReversibleEmbedding(Embedding):
    """Keras 3: an Embedding whose call with reverse=True gives logits over the vocabulary, the input
    times the embeddings' transpose (or times reverse_embeddings, (output_dim, input_dim), which
    build() adds where tie_weights is false), in reverse_dtype where given."""

    def output_specs(self, inputs):
        if not self.call_options.get("reverse"):
            return super().output_specs(inputs)
        x = self.one(inputs)
        if x.shape[-1] != self.get("output_dim"):
            raise self.error(f"reverses a last axis of {x.shape[-1]}, not output_dim {self.get('output_dim')}")
        spec = self.spec(x.shape[:-1] + (self.get("input_dim"),))
        dtype = self.get("reverse_dtype")
        return [spec._replace(dtype=dtype) if isinstance(dtype, str) else spec]

    def weights(self, inputs):
        out = super().weights(inputs)
        if self.get("tie_weights", True) is False:
            out.append(self.weight("reverse_embeddings", (self.get("output_dim"), self.get("input_dim"))))
        return out
