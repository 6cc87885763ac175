"""Attention layers. MultiHeadAttention projects query, key and value per head with EinsumDense
kernels (dim, heads, key_dim) and back with (heads, value_dim, out); GroupQueryAttention the same
with fewer key and value heads; Attention and AdditiveAttention have at most a scale."""
from .base import KerasLayer, register


def _qvk(layer, inputs):
    if len(inputs) not in (2, 3):
        raise layer.error(f"takes query, value and optionally key, got {len(inputs)} inputs")
    query, value = inputs[0], inputs[1]
    return query, value, inputs[2] if len(inputs) == 3 else value


@register("MultiHeadAttention")
class MultiHeadAttention(KerasLayer):
    def out_dims(self, query):
        shape = self.get("output_shape")
        if shape is None:
            return (query.shape[-1],)
        return (shape,) if isinstance(shape, int) else tuple(shape)

    def output_specs(self, inputs):
        query, _, key = _qvk(self, inputs)
        out = [self.spec(query.shape[:-1] + self.out_dims(query), inputs)]
        if self.call_options.get("return_attention_scores"):  # (batch, heads, query axes, key axes)
            out.append(self.spec((query.shape[0], self.get("num_heads")) + query.shape[1:-1] + key.shape[1:-1],
                                 inputs))
        return out

    def weights(self, inputs):
        query, value, key = _qvk(self, inputs)
        heads, key_dim = self.get("num_heads"), self.get("key_dim")
        value_dim = self.get("value_dim", key_dim)
        bias = self.get("use_bias", True)
        out = []
        for name, x, dim in (("query", query, key_dim), ("key", key, key_dim), ("value", value, value_dim)):
            out.append(self.weight(f"{name}/kernel", (x.shape[-1], heads, dim)))
            if bias:
                out.append(self.weight(f"{name}/bias", (heads, dim)))
        dims = self.out_dims(query)
        out.append(self.weight("attention_output/kernel", (heads, value_dim, *dims)))
        if bias:
            out.append(self.weight("attention_output/bias", dims))
        return out


@register("GroupQueryAttention")
class GroupQueryAttention(KerasLayer):
    """Keras 3's grouped_query_attention.py: the output is the query's shape; build() makes the query,
    key, gate (use_gate), value and output EinsumDense layers in that order, key and value with
    num_key_value_heads heads."""

    def output_specs(self, inputs):
        query, _, key = _qvk(self, inputs)
        out = [self.spec(query.shape, inputs)]
        if self.call_options.get("return_attention_scores"):  # (batch, query heads, Tq, Tk)
            out.append(self.spec((query.shape[0], self.get("num_query_heads"), query.shape[1], key.shape[1]), inputs))
        return out

    def weights(self, inputs):
        query, value, key = _qvk(self, inputs)
        heads, groups, dim = self.get("num_query_heads"), self.get("num_key_value_heads"), self.get("head_dim")
        if not isinstance(groups, int) or groups < 1 or not isinstance(heads, int) or heads % groups:
            raise self.error(f"num_query_heads {heads!r} is not a multiple of num_key_value_heads {groups!r}")
        bias = self.get("use_bias", True)
        parts = [("query", query, heads), ("key", key, groups)]
        parts += [("gate", query, heads)] if self.get("use_gate", False) else []
        out = []
        for name, x, n in parts + [("value", value, groups)]:
            out.append(self.weight(f"{name}/kernel", (x.shape[-1], n, dim)))
            if bias:
                out.append(self.weight(f"{name}/bias", (n, dim)))
        out.append(self.weight("attention_output/kernel", (heads, dim, query.shape[-1])))
        if bias:
            out.append(self.weight("attention_output/bias", (query.shape[-1],)))
        return out


@register("Attention")
class Attention(KerasLayer):
    """Luong-style: (batch, Tq, dim of value); use_scale and score_mode='concat' add scalars."""

    def output_specs(self, inputs):
        query, value, key = _qvk(self, inputs)
        out = [self.spec(query.shape[:-1] + value.shape[-1:], inputs)]
        if self.call_options.get("return_attention_scores"):  # (batch, Tq, Tv)
            out.append(self.spec(query.shape[:-1] + key.shape[1:2], inputs))
        return out

    def weights(self, inputs):
        out = []
        if self.get("use_scale", False):
            out.append(self.weight("scale", ()))
        if self.get("score_mode", "dot") == "concat":
            out.append(self.weight("concat_score_weight", ()))
        return out


@register("AdditiveAttention")
class AdditiveAttention(Attention):
    """Bahdanau-style: use_scale adds a scale per feature (of the value in tf_keras, of the query in
    Keras 3; the two are the same size in any model that runs)."""

    def weights(self, inputs):
        query, value, _ = _qvk(self, inputs)
        dim = value.shape[-1] if self.flavour == "tf_keras" else query.shape[-1]
        return [self.weight("scale", (dim,))] if self.get("use_scale", True) else []
