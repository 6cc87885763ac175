"""TSN's Caffe's own layers (yjxiong/caffe, branch action_recog, commit 9831a2b, which
yjxiong/temporal-segment-networks pins): VideoData and BN, as its sources shape them.

File and line references are to that commit's src/caffe/layers/*.cpp/.cu, src/caffe/util/io.cpp,
src/caffe/layer_factory.cpp and include/caffe/*.hpp.
"""
from . import touch
from .base import Layer, count, layer_class, legacy_shape, register
from .data import OPENCV_BYTES, DataSource

FORK = "tsn"
RGB, FLOW = 0, 1  # VideoDataParameter.Modality


@register("VideoData", fork=FORK)
class VideoData(DataSource):
    """VideoDataLayer: num_segments snippets of new_length frames from each video of a "folder
    frames label" list, stacked along the channels: 3 per RGB frame (1 with grayscale), 2 per
    optical-flow frame (x and y) (video_data_layer.cpp:75-80; io.cpp:391-393, :450-451). The
    frames are resized to new_height x new_width when both are set (io.cpp:386-387, :442-444);
    the top is (batch, channels, crop, crop) with transform_param's crop_size, else the frames'
    size (cpp:81-88). The label top is (batch, 1, 1, 1) (cpp:92).

    Its 2015 BasePrefetchingDataLayer holds ONE batch, prefetch_data_ and prefetch_label_, the
    tops' sizes, on the host (cpp:85-93; base_data_layer.cpp:38-40), and each forward copies it
    into the tops, which own their memory (base_data_layer.cpp:69-79, base_data_layer.cu:13-22)."""

    exact_tops = 2

    def batch_size(self):
        batch = self.fork_param("video_data_param").batch_size
        self.check(batch > 0, "video_data_param needs a positive batch_size", fix="set video_data_param { batch_size: N }")
        return batch

    def data_shape(self, batch):
        p = self.fork_param("video_data_param")
        per_frame = 2 if p.modality == FLOW else 1 if p.grayscale else 3
        channels = per_frame * p.new_length * p.num_segments
        crop = self.lp.transform_param.crop_size
        if crop:
            return (channels, crop, crop), "the layer's parameters (modality, new_length, num_segments, crop_size)"
        if p.new_height and p.new_width:
            return (channels, p.new_height, p.new_width), "the layer's parameters (new_height, new_width)"
        if self.lp.top[0] in self.ctx.inputs:
            return None, "--input"
        self.need_input("VideoData layer: without crop_size or new_height/new_width its frames' size is the "
                        "videos'", tops=self.lp.top[:1], known={self.lp.top[0]: (batch, channels, None, None)})

    def label_shape(self, batch):
        return (batch, 1, 1, 1)

    def touches(self, run):
        t = [touch.top(j, "data", "forward") for j in range(len(run.tops))]
        t += [touch.buffer(f"prefetch_{name}", count(shape), "setup", per_sample=True, kind="prefetch", device="host")
              for name, shape in zip(("data_", "label_"), run.tops)]
        return t + [touch.process("OpenCV codec registry", OPENCV_BYTES, "initialised by the first frame decode")]


@register("BN", fork=FORK)
class BN(Layer):
    """BNLayer: batch normalisation over (N, H, W) per channel with its own scale and shift.

    Four parameter blobs of (1, C): slope, bias, the running mean and variance (bn_layer.cpp:20-41).
    LayerSetUp then zeroes lr_mult and decay_mult of the running statistics in the layer's own
    copy of its ParamSpecs (adding specs up to four), and of slope and bias when `frozen`
    (cpp:46-63); the solver reads that copy, Net::Init the file's (`param_specs`).

    GetBNLayer (layer_factory.cpp:176-199) gives CuDNNBNLayer (cuDNN 5 or later) unless
    bn_param.engine is CAFFE, in a cuDNN build; `touches` follows the one that runs."""

    exact_bottoms = 1
    exact_tops = 1

    @classmethod
    def sized_as(cls, lp):
        """PSPNet's Caffe reads BN layers alike and has this BNLayer's code (protoaudit.layers.pspnet.BN),
        without the cuDNN one: a file both read, BN being its only fork layer (TSN's deploy nets),
        stays PSPNet's as before; VideoData makes a file TSN's."""
        return layer_class("BN", "pspnet")

    def reshape(self, bottoms):
        legacy_shape(self, bottoms[0])
        return [tuple(bottoms[0])]

    def param_shapes(self, bottoms):
        return [(1, legacy_shape(self, bottoms[0])[1])] * 4

    def param_specs(self):
        own = type(self.lp._msg)()
        own.CopyFrom(self.lp._msg)
        while len(own.param) < 4:
            own.param.add()
        for k in (2, 3) + ((0, 1) if self.fork_param("bn_param").frozen else ()):
            own.param[k].lr_mult = 0
            own.param[k].decay_mult = 0
        return own.param

    def touches(self, run):
        p = self.fork_param("bn_param")
        n, c, h, w = legacy_shape(self, run.bottoms[0])
        if run.mode == "gpu" and p.engine != 1 and (p.engine == 2 or run.engine == "cudnn"):
            return self.cudnn_touches(run, p.frozen, (n, c, h, w))
        return self.caffe_touches(run, p.frozen, (n, c, h, w), run.mode == "gpu")

    def multipliers(self, shape, gpu, stage):
        """spatial_sum_multiplier_ (H*W) and batch_sum_multiplier_ (N), set to ones on the host in
        Reshape (cpp:84-89); the GPU code reads their device copies."""
        n, _, h, w = shape
        t = [touch.buffer("spatial_sum_multiplier_ (host)", h * w, "setup", per_sample=False, device="host"),
             touch.buffer("batch_sum_multiplier_ (host)", n, "setup", per_sample=True, device="host")]
        if gpu:
            t += [touch.buffer("spatial_sum_multiplier_", h * w, stage, per_sample=False),
                  touch.buffer("batch_sum_multiplier_", n, stage, per_sample=True)]
        return t

    def statistics(self, shape, stage):
        """batch_statistic_ (C), spatial_statistic_ (N*C) and broadcast_buffer_ (the bottom's size)
        (cpp:77-79), which every pass that normalises writes."""
        n, c, h, w = shape
        return [touch.buffer("batch_statistic_", c, stage, per_sample=False),
                touch.buffer("spatial_statistic_", n * c, stage, per_sample=True),
                touch.buffer("broadcast_buffer_", n * c * h * w, stage, per_sample=True)]

    def caffe_touches(self, run, frozen, shape, gpu):
        """Forward (cpp:93-200; cu:12-124): the statistics and, unless frozen, x_norm_ (the bottom's
        size) and x_inv_std_ (C) kept for the backward (cu:96-101), also in a TEST net. Backward
        (cu:127-...): frozen, only the bottom's diff, and returns (cu:129-151); else the slope's and
        bias's diffs where param_propagate_down says, and the bottom's."""
        n, c, h, w = shape
        t = [touch.param(k, "data", "setup") for k in range(4)] + self.multipliers(shape, False, "setup")
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        t += self.statistics(shape, "forward") + (self.multipliers(shape, gpu, "forward")[2:] if gpu else [])
        if not frozen:
            t += [touch.buffer("x_norm_", n * c * h * w, "forward", per_sample=True),
                  touch.buffer("x_inv_std_", c, "forward", per_sample=False)]
        down = run.propagate_down[0]
        params = [] if frozen else [k for k in (0, 1) if run.param_propagate_down[k]]
        if down or params:
            t.append(touch.top(0, "diff", "backward"))
        t += [touch.param(k, "diff", "backward") for k in params]
        if down:
            t.append(touch.bottom(0, "diff", "backward"))
        return t

    def cudnn_touches(self, run, frozen, shape):
        """CuDNNBNLayer (cudnn_bn_layer.cpp/.cu): its Reshape sizes the statistics and sets the
        multipliers only when frozen (cpp:53-65). Forward: cuDNN's inference call (TEST or
        frozen: nothing more), else its training call with save_mean_ and save_inv_variance_ (C
        each, cpp:20-21; cu:39-54). Backward: frozen, BNLayer's (the bottom's diff through the
        statistics, cu:60-62); else one cuDNN call that writes the bottom's, the slope's and the
        bias's diffs whenever any of them is wanted (cu:64-90)."""
        n, c, h, w = shape
        t = [touch.param(k, "data", "setup") for k in range(4)]
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        if frozen:
            t += self.multipliers(shape, False, "setup")
            if run.propagate_down[0]:
                t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
                t += self.statistics(shape, "backward") + self.multipliers(shape, True, "backward")[2:]
            return t
        if self.ctx.phase == "TRAIN":
            t += [touch.buffer("save_mean_", c, "forward", per_sample=False),
                  touch.buffer("save_inv_variance_", c, "forward", per_sample=False)]
        if run.propagate_down[0] or run.param_propagate_down[0] or run.param_propagate_down[1]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward"),
                  touch.param(0, "diff", "backward"), touch.param(1, "diff", "backward")]
        return t
