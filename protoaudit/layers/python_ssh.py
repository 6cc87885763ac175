"""SSH's (Single Stage Headless face detector) Python anchor target layer: its tops' shapes from
its published source, never imported or run (see python_layers).

Source: mahyarnajibi/SSH 9389c2be3f09291a5c6934ab0b25c828a414660d, SSH/layers/anchor_target_layer.py
and SSH/layers/generate_anchors.py, cited file:line below.
"""
from .python_layers import AnchorTargetLayer, anchors, known


@known("SSH.layers.anchor_target_layer", "AnchorTargetLayer")
class SSHAnchorTargetLayer(AnchorTargetLayer):
    """py-faster-rcnn's layer as SSH changed it. Setup reads param_str as YAML (:25-28): 'scales'
    (default 8, 16, 32, :34), 'ratios' (default 0.5, 1, 2, :35) and 'feat_stride', which it needs
    (:40). generate_anchors makes one anchor per ratio and scale (generate_anchors.py:18-21), A in
    all, and the tops are shaped from the score map bottom 0 (H, W) (:46-56; forward :195-220, the
    same): labels (1, 1, A*H, W), bbox targets and the inside and outside weights (1, 4A, H, W).
    With a fifth bottom (OHEM scores, :32-33) forward reads it too (:134, :159); bottom 3 (the
    image, in SSH's train net) is never read."""

    tops = 4

    def defaults(self, bottoms):
        params = self.yaml_params()
        self.param(params, "feat_stride", "anchor_target_layer.py:40")
        a, _ = anchors(self, params)
        self.check(len(bottoms[0]) >= 2, f"bottom 0 {tuple(bottoms[0])} needs height and width axes")
        h, w = bottoms[0][-2:]
        return [(1, 1, a * h, w)] + [(1, 4 * a, h, w)] * 3, (
            f"{a} anchors (its ratios times its scales) at each of the {h}x{w} positions of the score map (bottom 0)")

    def reads(self, bottoms):
        return [j for j in range(bottoms) if j in (0, 1, 2) or (j == 4 and bottoms == 5)]
