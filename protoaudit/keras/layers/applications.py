"""Layers that Keras's applications define in their own modules rather than in keras.layers:
ConvNeXt's LayerScale (applications/convnext.py) and InceptionResNetV2's CustomScaleLayer
(applications/inception_resnet_v2.py), the same in tf_keras and Keras 3. A file names them by
class; they are taken as Keras's own only where the entry says so (base.APPLICATION_LAYERS): a
user's class of the same name is custom code, never run."""
from .base import KerasLayer, broadcast, register


@register("LayerScale")
class LayerScale(KerasLayer):
    """`x * gamma`: build() makes gamma, a trainable vector of `projection_dim` (the last axis)."""

    def output_specs(self, inputs):
        x = self.one(inputs)
        if x.shape[-1] != self.get("projection_dim"):
            raise self.error(f"projection_dim {self.get('projection_dim')!r} does not match its input's "
                             f"last axis {x.shape[-1]}")
        return [self.spec(x.shape, inputs)]

    def weights(self, inputs):
        return [self.weight("gamma", (self.get("projection_dim"),))]


@register("CustomScaleLayer")
class CustomScaleLayer(KerasLayer):
    """`inputs[0] + inputs[1] * scale` (a residual added to its shortcut, scaled by a constant)."""

    def output_specs(self, inputs):
        if len(inputs) != 2:
            raise self.error(f"adds a scaled residual to a shortcut: two inputs, got {len(inputs)}")
        return [self.spec(broadcast(self, inputs), inputs)]
