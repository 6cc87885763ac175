"""Fully connected layers: InnerProduct and Embed."""
import functools

from . import touch
from .base import Layer, canonical_axis, count, register


@register("InnerProduct")
class InnerProduct(Layer):
    exact_bottoms = 1
    exact_tops = 1

    @functools.cached_property
    def param(self):
        return self.lp.inner_product_param

    def _dims(self, bottoms):
        p = self.param
        axis = canonical_axis(self, p.axis, len(bottoms[0]))
        self.check(p.num_output > 0, "num_output must be set and positive")
        return axis, count(bottoms[0], axis), p.num_output

    def reshape(self, bottoms):
        axis, _, n = self._dims(bottoms)
        return [tuple(bottoms[0][:axis]) + (n,)]

    def param_shapes(self, bottoms):
        _, k, n = self._dims(bottoms)
        p = self.param
        weight = (k, n) if p.transpose else (n, k)
        return [weight, (n,)] if p.bias_term else [weight]

    def touches(self, run):
        """bias_multiplier_ has one entry per row (the batch and the axes before `axis`)."""
        t = super().touches(run)
        if self.param.bias_term:
            axis = canonical_axis(self, self.param.axis, len(run.bottoms[0]))
            t.append(touch.buffer("bias_multiplier_", count(run.bottoms[0], 0, axis), "setup", per_sample=True))
        return t


@register("Embed")
class Embed(Layer):
    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        p = self.lp.embed_param
        self.check(p.num_output > 0 and p.input_dim > 0, "Embed needs num_output and input_dim")
        return [tuple(bottoms[0]) + (p.num_output,)]

    def param_shapes(self, bottoms):
        p = self.lp.embed_param
        weight = (p.input_dim, p.num_output)
        return [weight, (p.num_output,)] if p.bias_term else [weight]

    def touches(self, run):
        """With a bias, Reshape sets bias_multiplier_ to ones, one per index (embed_layer.cpp:56-61)."""
        t = super().touches(run)
        if self.lp.embed_param.bias_term:
            t.append(touch.buffer("bias_multiplier_", count(run.bottoms[0]), "setup", per_sample=True))
        return t
