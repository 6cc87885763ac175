"""PSPNet's Caffe (hszhao/PSPNet): deeplab-public-ver2 plus its own BN layer.

Interp, ImageSegData and SegAccuracy are deeplab-public-ver2's files unchanged (protoaudit.layers
.deeplab registers them for this fork too). Sources: hszhao/PSPNet at the commit named in
proto/forks/pspnet.proto.
"""
from . import touch
from .base import Layer, legacy_shape, register


@register("BN", fork="pspnet")
class BN(Layer):
    """BNLayer (bn_layer.cpp, bn_layer.cu): per-channel batch normalisation with four (1, C, 1, 1)
    parameters: slope, bias, and the moving mean and variance (LayerSetUp, :11-44).

    LayerSetUp gives the statistics lr_mult 0 in the layer's own copy of its parameters, and the
    slope and bias too when `frozen` (:48-66); Net::Init reads the file's own `param` entries, so
    a frozen layer whose file gives lr_mult 1 still has their diffs allocated by the solver.
    bn_param's `engine` names a cuDNN layer (cudnn_bn_layer.cpp) that the layer factory never
    makes (REGISTER_LAYER_CLASS(BN), :346, is the only creator): BN is always this code.

    Reshape (:70-92) fills spatial_sum_multiplier_ (H*W) and batch_sum_multiplier_ (N) with ones
    on the host. Forward (:95-209, .cu:11-123) writes through batch_statistic_ (C),
    spatial_statistic_ (N*C) and broadcast_buffer_ (the bottom's size) in every phase, frozen or
    not; unless frozen it also keeps x_norm_ (the bottom's size) and x_inv_std_ (C) for backward.
    Backward (:212-338, .cu:126-250): frozen, only the bottom's diff (if asked); otherwise the
    slope and bias diffs where their lr_mult asks, and the bottom's diff if asked."""

    exact_bottoms = 1
    exact_tops = 1

    def frozen(self):
        return self.lp.bn_param.frozen

    def host_members(self, node, lp_bytes):
        """BNLayer's host objects beyond Layer<Dtype>'s (bn_layer.hpp:43-61): frozen_, bn_momentum_, bn_eps_
        and num_, channels_, height_, width_ (28 bytes, aligned to 32) and seven Blobs, each reshaped with
        four axes (Reshape, :70-92); and the ParamSpecs LayerSetUp appends until it has four (:47-50).
        Measured on DAVSOD's Caffe, which carries this layer: 2,416 bytes a layer with no `param`, 2,160 with
        four (tests/data/fork_oracle/davsod)."""
        from ..memory import host

        return 32 + 7 * host.BLOB + 7 * host.blob(4) + host.param_specs_added(node, 4)

    def reshape(self, bottoms):
        return [legacy_shape(self, bottoms[0])]

    def param_shapes(self, bottoms):
        c = legacy_shape(self, bottoms[0])[1]
        return [(1, c, 1, 1)] * 4  # slope, bias, moving mean, moving variance

    def touches(self, run):
        n, c, h, w = legacy_shape(self, run.bottoms[0])
        size = n * c * h * w
        frozen = self.frozen()
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        t += [touch.buffer("spatial_sum_multiplier_", h * w, "setup", per_sample=False),
              touch.buffer("batch_sum_multiplier_", n, "setup", per_sample=True),
              touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward"),
              touch.buffer("batch_statistic_", c, "forward", per_sample=False),
              touch.buffer("spatial_statistic_", n * c, "forward", per_sample=True),
              touch.buffer("broadcast_buffer_", size, "forward", per_sample=True)]
        if not frozen:
            t += [touch.buffer("x_norm_", size, "forward", per_sample=True),
                  touch.buffer("x_inv_std_", c, "forward", per_sample=False)]
        if run.propagate_down[0] or (not frozen and any(run.param_propagate_down[:2])):
            t.append(touch.top(0, "diff", "backward"))
        if not frozen:
            t += [touch.param(k, "diff", "backward") for k in (0, 1) if run.param_propagate_down[k]]
        if run.propagate_down[0]:
            t.append(touch.bottom(0, "diff", "backward"))
        return t
