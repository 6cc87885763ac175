"""SphereFace's MarginInnerProduct (A-Softmax's angular margin), as wy1iu/sphereface's Caffe has it.

Sources: wy1iu/sphereface f20b130, tools/caffe-sphereface/src/caffe/layers/
margin_inner_product_layer.cpp and .cu (soeaver's caffe-priv carries both files byte for byte).
"""
from . import touch
from .base import Layer, canonical_axis, count, legacy_shape, register

SINGLE, DOUBLE, TRIPLE, QUADRUPLE = 0, 1, 2, 3  # MarginInnerProductParameter.MarginType: m = 1..4

# The (M, N) temporaries each margin type's Forward fills, beyond x_norm_, cos_theta_ and sign_0_
# (Reshape, margin_inner_product_layer.cpp 84-105).
_BY_TYPE = {
    SINGLE: (),
    DOUBLE: ("cos_theta_quadratic_",),
    TRIPLE: ("cos_theta_quadratic_", "cos_theta_cubic_", "sign_1_", "sign_2_"),
    QUADRUPLE: ("cos_theta_quadratic_", "cos_theta_cubic_", "cos_theta_quartic_", "sign_3_", "sign_4_"),
}


@register("MarginInnerProduct", fork=("sphereface", "priv"))
class MarginInnerProduct(Layer):
    """An inner product without bias whose label-th output gets the angular margin m = type + 1.

    Bottoms: the features (flattened from `axis` on, K values per row, M rows) and the label (one
    per row: LayerSetUp checks num() of both). Tops: (rows..., num_output) and lambda, shape (1,),
    which every Forward writes (cpp:118, cu:232: `top[1]->mutable_cpu_data()[0] = lambda_`) however
    many tops the layer has: with one top Caffe writes past its top vector, so two are required.
    One parameter blob, the weight (num_output, K), normalised in place each forward.

    `iteration` seeds the layer's own counter iter_ (LayerSetUp, cpp:23), which each forward
    increments before lambda = max(base * (1 + gamma * iter_)^-power, lambda_min): a value, no memory.
    A test net's layer counts from `iteration` again.
    """

    exact_bottoms = 2
    max_tops = 2
    lambda_line = "margin_inner_product_layer.cpp:118"  # where every Forward writes top 1

    def param(self):
        return self.lp.margin_inner_product_param

    def _dims(self, bottoms):
        p = self.param()
        data, label = bottoms
        self.check(p.num_output > 0, "num_output must be set and positive")
        self.check(p.type in _BY_TYPE, f"unknown margin type {p.type}")
        n = legacy_shape(self, data)[0]
        self.check(n == legacy_shape(self, label)[0],
                   f"the label (bottom 1, {tuple(label)}) needs one value per sample of bottom 0 {tuple(data)}: "
                   "this version supports no multi-label", fix="give one label per sample")
        axis = canonical_axis(self, p.axis, len(data))
        return axis, count(data, 0, axis), count(data, axis), p.num_output

    def reshape(self, bottoms):
        self.check(len(self.lp.top) == 2, f"{self.lp.type} writes lambda into a second top in every "
                   f"forward ({self.lambda_line}); with one top Caffe writes past its tops",
                   fix='give it two tops, e.g. top: "lambda"')
        axis, _, _, n = self._dims(bottoms)
        return [tuple(bottoms[0][:axis]) + (n,), (1,)]

    def param_shapes(self, bottoms):
        _, _, k, n = self._dims(bottoms)
        return [(n, k)]

    def touches(self, run):
        """Forward (CPU and GPU alike) fills x_norm_ (M), cos_theta_ and sign_0_ (M x N each) and the
        margin type's temporaries, all Reshaped in Reshape and first written there; lambda goes to
        top 1's host memory (mutable_cpu_data, in GPU mode too). Backward reads top 0's diff only,
        writes the weight's diff when the weight learns (cpp:276) and bottom 0's when asked
        (cpp:282); the label never gets a diff."""
        _, m, _, n = self._dims(run.bottoms)
        kind = self.param().type
        t = [touch.param(0, "data", "setup"), touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"),
             touch.top(0, "data", "forward"), touch.top(1, "data", "forward", device="host")]
        t += self.norms(m, n)
        for name in ("cos_theta_", "sign_0_") + _BY_TYPE[kind]:
            t.append(touch.buffer(name, m * n, "forward", per_sample=True, note=f"{m}x{n} (rows x num_output)"))
        t.append(touch.top(0, "diff", "backward"))
        if run.param_propagate_down[0]:
            t.append(touch.param(0, "diff", "backward"))
        if run.propagate_down[0]:
            t.append(touch.bottom(0, "diff", "backward"))
        return t

    def norms(self, m, n):
        """x_norm_, one norm per row (the weight is normalised in place)."""
        return [touch.buffer("x_norm_", m, "forward", per_sample=True, note=f"{m} (one norm per row)")]
