"""AffordanceNet's Caffe (nqanh/affordance-net 8db1b3f, folder caffe-affordance-net): ROIAlignment and
ROIAlignment2, as its sources shape them and allocate for them.

File and line references are to caffe-affordance-net/include/caffe/roi_alignment_layer.hpp,
roi_alignment2_layer.hpp and src/caffe/layers/roi_alignment_layer.cpp/.cu, roi_alignment2_layer.cpp/.cu
at that commit (fast_rcnn_layers.hpp:95-134 holds an older ROIAlignment declaration, commented out).
Its ROIPooling and SmoothL1Loss are caffe-fast-rcnn's (branch faster-rcnn, 4115385): roi_pooling_layer.cu,
smooth_L1_loss_layer.cpp/.cu and the loss's declaration are that commit's byte for byte,
roi_pooling_layer.cpp differs in whitespace alone; they are carried from protoaudit.layers.fastrcnn.
"""
from . import fastrcnn, touch
from .base import Layer, carry, count, legacy_shape, register

FORK = "affordance_net"
SOURCE = "AffordanceNet's Caffe"

carry(__name__, FORK, fastrcnn.ROIPooling, fastrcnn.SmoothL1Loss)


@register("ROIAlignment", fork=FORK)
class ROIAlignment(Layer):
    """ROIAlignmentLayer: each region of interest (bottom 1, R rows of (batch index, x1, y1, x2, y2))
    of the feature map (bottom 0) sampled at each of pooled_h x pooled_w bin centres by bilinear
    interpolation of its four neighbours.

    LayerSetUp CHECKs pooled_h and pooled_w > 0 (roi_alignment_layer.cpp:27-30); Reshape makes the
    top (R, C, pooled_h, pooled_w): R the rois' num(), C the map's channels() (cpp:40-43), both
    through Blob's legacy accessors; two bottoms and one top (roi_alignment_layer.hpp:33-36)."""

    exact_bottoms = 2
    exact_tops = 1
    param_name = "roi_alignment_param"
    # (name, note) of the buffers Reshape gives the top's shape (cpp:46-51): four Blob<int> and two
    # Blob<float> (hpp:52-57), 4 bytes an element whatever the net's Dtype
    buffers = (("max_idx_topleft", "int32, the top's size: each output's top-left neighbour"),
               ("max_idx_topright", "int32, the top's size: each output's top-right neighbour"),
               ("max_idx_bottomleft", "int32, the top's size: each output's bottom-left neighbour"),
               ("max_idx_bottomright", "int32, the top's size: each output's bottom-right neighbour"),
               ("dh_ratio", "float, the top's size: each output's vertical weight"),
               ("dw_ratio", "float, the top's size: each output's horizontal weight"))
    # the passes with no CPU code, and where: Backward_cpu is NOT_IMPLEMENTED (cpp:182)
    no_cpu = {"backward": "roi_alignment_layer.cpp:182"}

    def reshape(self, bottoms):
        p = self.fork_param(self.param_name)
        self.check(p.pooled_h > 0, "pooled_h must be > 0", fix=f"set {self.param_name} {{ pooled_h: 7 }}")
        self.check(p.pooled_w > 0, "pooled_w must be > 0", fix=f"set {self.param_name} {{ pooled_w: 7 }}")
        channels = legacy_shape(self, bottoms[0])[1]
        rois = legacy_shape(self, bottoms[1])[0]
        return [(rois, channels, p.pooled_h, p.pooled_w)]

    def touches(self, run):
        """Forward (CPU, cpp:56-176; GPU, cu:127-154) reads the map and the rois and writes the top
        and every buffer (each the top's size, so per sample as the RoIs are). Backward, on the GPU
        only (cu:277-309), returns at once unless bottom 0 needs a diff (cu:280-282); then it reads
        the rois, top 0's diff and the buffers and writes bottom 0's diff. The rois never get one."""
        t = []
        if run.mode != "cpu" or "forward" not in self.no_cpu:
            size = count(run.tops[0])
            t += [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"),
                  touch.top(0, "data", "forward")]
            t += [touch.buffer(name, size, "forward", per_sample=True, note=note) for name, note in self.buffers]
        if run.mode == "cpu":
            return t + [touch.stop(stage, f"{SOURCE}'s {self.lp.type} has no CPU {stage} ({where}, "
                                   f"NOT_IMPLEMENTED): Caffe stops at its first {stage} pass in CPU mode")
                        for stage, where in self.no_cpu.items()]
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t


@register("ROIAlignment2", fork=FORK)
class ROIAlignment2(ROIAlignment):
    """ROIAlignment2Layer: the same shapes and checks (roi_alignment2_layer.cpp:27-30, 40-43), read from
    roi_alignment2_param, but each output is the largest of the bilinear samples at whole-pixel steps
    over its bin (cu:27-117), whose position it keeps in two Blob<Dtype> the top's size, max_idx_x and
    max_idx_y (hpp:52-53, cpp:45-46). It has no CPU code: Forward_cpu and Backward_cpu are
    NOT_IMPLEMENTED (cpp:52, :59). The GPU forward (cu:120-141) and backward (cu:243-269, which returns
    unless bottom 0 needs a diff) touch what ROIAlignment's do."""

    param_name = "roi_alignment2_param"
    buffers = (("max_idx_x", "the net's Dtype, the top's size: each output's sampled x"),
               ("max_idx_y", "the net's Dtype, the top's size: each output's sampled y"))
    no_cpu = {"forward": "roi_alignment2_layer.cpp:52", "backward": "roi_alignment2_layer.cpp:59"}
