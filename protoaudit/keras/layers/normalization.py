"""Normalization layers: the output is the input's shape; the variables are per-channel along `axis`."""
from .base import KerasLayer, make_layer, register


class _Axes(KerasLayer):
    def axes(self, shape, default=-1):
        axis = self.get("axis", default)
        axis = list(axis) if isinstance(axis, (list, tuple)) else [axis]
        return sorted(self.axis_of(a, len(shape)) for a in axis)

    def param_shape(self, inputs, default=-1):
        shape = self.one(inputs).shape
        return tuple(shape[a] for a in self.axes(shape, default))


@register("BatchNormalization", "SyncBatchNormalization")
class BatchNormalization(_Axes):
    """gamma and beta (trainable), moving mean and variance (never trained); renorm adds two more."""

    def weights(self, inputs):
        shape = self.param_shape(inputs)
        out = []
        if self.get("scale", True):
            out.append(self.weight("gamma", shape))
        if self.get("center", True):
            out.append(self.weight("beta", shape))
        out += [self.weight("moving_mean", shape, trainable=False),
                self.weight("moving_variance", shape, trainable=False)]
        if self.get("renorm", False):
            out += [self.weight("renorm_mean", shape, trainable=False),
                    self.weight("renorm_stddev", shape, trainable=False)]
        return out


@register("LayerNormalization")
class LayerNormalization(_Axes):
    """gamma and beta over the normalized axes (Keras 3's rms_scaling has no beta)."""

    def weights(self, inputs):
        shape = self.param_shape(inputs)
        out = []
        if self.get("scale", True) or self.get("rms_scaling", False):
            out.append(self.weight("gamma", shape))
        if self.get("center", True) and not self.get("rms_scaling", False):
            out.append(self.weight("beta", shape))
        return out


@register("GroupNormalization")
class GroupNormalization(_Axes):
    """gamma and beta per channel."""

    def weights(self, inputs):
        shape = self.param_shape(inputs)
        groups = self.get("groups", 32)
        if groups == -1:
            groups = shape[0]
        if not isinstance(groups, int) or groups <= 0 or shape[0] % groups:
            raise self.error(f"{shape[0]} channels do not split into {groups} groups")
        out = []
        if self.get("scale", True):
            out.append(self.weight("gamma", shape))
        if self.get("center", True):
            out.append(self.weight("beta", shape))
        return out


@register("UnitNormalization")
class UnitNormalization(KerasLayer):
    pass


@register("RMSNormalization")
class RMSNormalization(_Axes):
    """Keras 3: a scale over the normalized axes."""

    def weights(self, inputs):
        return [self.weight("scale", self.param_shape(inputs))]


@register("SpectralNormalization")
class SpectralNormalization(KerasLayer):
    """Keras 3's wrapper: the wrapped layer's shapes and variables, plus a power-iteration vector
    u (1, the kernel's last axis), never trained."""

    def inner(self):
        entry = self.get("layer")
        return make_layer(entry, trainable=self.trainable, policy=self.policy, flavour=self.flavour,
                          path=f"{self.path}/{(entry or {}).get('config', {}).get('name', 'layer')}")

    def output_specs(self, inputs):
        return self.inner().output_specs(inputs)

    def weights(self, inputs):
        inner = self.inner().weights(inputs)
        kernels = [w for w in inner if w.name.endswith("kernel")]
        if not kernels:
            raise self.error("wraps a layer with no kernel")
        return inner + [self.weight("vector_u", (1, kernels[0].shape[-1]), trainable=False)]
