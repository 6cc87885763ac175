"""Cysu's Caffe (Cysu/caffe, branch domain-guided-dropout, commit ab98582, the Caffe Cysu/dgd_person_reid
pins as external/caffe): its own BN and GuidedDropout, as its sources shape them.

File and line references are to that commit's src/caffe/layers/*.cpp/.cu, src/caffe/layer_factory.cpp
and include/caffe/*.hpp.
"""
from . import data, largemargin, touch
from .base import Layer, count, layer_class, legacy_shape, register

FORK = "cysu"
CUDNN = 2  # BNParameter.Engine: DEFAULT 0, CAFFE 1, CUDNN 2 (caffe.proto:469-474)


@register("Data", fork=FORK)
class Data(data.Data):
    """DataLayer (data_layer.cpp) on the fork's 2015 BasePrefetchingDataLayer, with TransformationParameter's
    crop_height and crop_width (caffe.proto:419-420), which replace crop_size on their own axis where set
    (data_transformer.cpp:20-21 of InferBlobShape(Datum), :410-411): the data top is (batch, the record's
    channels, crop_height or the record's height, crop_width or its width), the record being at least that
    large (CHECK_GE, InferBlobShape). DataLayerSetUp shapes the tops so (data_layer.cpp:66-71, 79-99), the
    label (batch,) (:104-108).

    Its prefetching base holds ONE batch, prefetch_data_ and prefetch_label_ (data_layers.hpp:76-77), on
    the host: LayerSetUp touches their cpu_data before the thread starts (base_data_layer.cpp:38-41), which
    fills them through cpu pointers (data_layer.cpp:146-151). Each forward copies the batch into the tops,
    which own their buffers (base_data_layer.cpp:65-76; base_data_layer.cu:13-23, into mutable_gpu_data in
    GPU mode). Its transformer draws random numbers to mirror, or in TRAIN to crop by any of the three
    crop fields (data_transformer.cpp:610-620). With data_param.shuffle_pool_size P > 1 the thread keeps
    P x batch Datums in shuffle_pool_ (a vector<Datum> it pushes each record read onto until full, then
    swaps through; data_layer.cpp:153-170) and shuffle_pool_index_, P x batch ints (:110-118)."""

    def crop_hw(self):
        tp = self.lp.transform_param
        size = tp.crop_size
        return tp.crop_height or size, tp.crop_width or size

    def data_shape(self, batch):
        tp, source = self.lp.transform_param, self.lp.data_param.source
        height, width = self.crop_hw()
        if not (tp.crop_height or tp.crop_width):
            return super().data_shape(batch)
        if self.declared():
            return None, "--input"
        if height and width and self.files.find(source) is None:
            self.read_mean()
            channels, why = self.channels_from_parameters()
            origin = "the layer's parameters (crop_height, crop_width" + (f"; {why})" if why else ")")
            if channels is None:
                channels = self.assume_colour(batch, height, width, f"source '{source}' is not on disk")
                origin += "; 3 channels assumed"
            return (channels, height, width), origin
        shape, origin = super().data_shape(batch)
        if shape is None or self.stored is None:
            return shape, origin
        c, h, w = self.stored
        self.check(h >= height and w >= width, f"crop {height}x{width} is larger than the first record ({h}x{w})")
        return (c, height or h, width or w), origin + f"; crop {height or h}x{width or w}"

    def transformer_draws(self):
        tp = self.lp.transform_param
        return bool(tp.mirror or (self.ctx.phase == "TRAIN" and (tp.crop_size or tp.crop_height or tp.crop_width)))

    def prefetch(self):
        return 1

    def touches(self, run):
        """BVLC's Data's host objects, thread, RNGs, mean and database handle; its one batch on the host
        and tops that own their memory, written by each forward."""
        t = [x for x in super().touches(run)
             if x.kind != "prefetch" and not (x.what == "top" and x.stage == "setup")]
        t += [touch.buffer(f"prefetch_{name}", count(shape), "setup", per_sample=True, kind="prefetch", device="host")
              for name, shape in zip(("data_", "label_"), run.tops)]
        t += [touch.top(j, "data", "forward") for j in range(len(run.tops))]
        pool = self.fork_param("data_param").shuffle_pool_size
        if pool > 1:
            n = pool * run.tops[0][0]
            size = data.ThroughDataReader.datum_bytes(self, run)
            t += [touch.buffer("shuffle_pool_index_", n, "setup", per_sample=True, device="host",
                               note=f"{pool} x batch ints"),
                  touch.buffer("shuffle_pool_", n, "forward", per_sample=True, itemsize=size, kind="prefetch",
                               device="host", note=f"{n} Datums of {size:,} bytes (shuffle_pool_size x batch_size)")]
        return t


@register("BN", fork=FORK)
class BN(largemargin.BN):
    """BNLayer: bn_layer.cpp and bn_layer.cu are L-Softmax's (wy1iu/LargeMargin_Softmax_Loss c3e9f20)
    line for line but for their includes (common_layers.hpp here, layers/bn_layer.hpp there) and the
    registration, and the class's members in common_layers.hpp:670-714 are that bn_layer.hpp's: four
    (1, C) parameters, slope, bias, running mean and variance (bn_layer.cpp:20-41), whose ParamSpecs
    LayerSetUp leaves as the file gives them (cpp:43), and the buffers protoaudit.layers.pspnet.BN lists.

    What differs is the factory: GetBNLayer (layer_factory.cpp:170-205) makes BNLayer for engine DEFAULT
    (its cuDNN choice is commented out, :175-179) and CAFFE, and CuDNNBNLayer only for engine: CUDNN in a
    cuDNN build, unless `frozen` (:183-187; without cuDNN that engine is a LOG(FATAL), :200-201)."""

    def reshape(self, bottoms):
        """top[0]->ReshapeLike(*bottom[0]) (cpp:54): the bottom's own axes (an InnerProduct's (N, C) stays
        2-axis), read through the legacy accessors (cpp:49-52)."""
        legacy_shape(self, bottoms[0])
        return [tuple(bottoms[0])]

    @classmethod
    def sized_as(cls, lp):
        """BNLayer's bytes are PSPNet's (as L-Softmax's); the cuDNN layer is this fork's own."""
        p = lp.bn_param
        return cls if p.engine == CUDNN and not p.frozen else layer_class("BN", "pspnet")

    def touches(self, run):
        p = self.fork_param("bn_param")
        if run.mode == "gpu" and p.engine == CUDNN and not p.frozen:
            return self.cudnn_touches(run)
        return super().touches(run)

    def cudnn_touches(self, run):
        """CuDNNBNLayer (cudnn_bn_layer.cpp/.cu, cuDNN 4 or later): its Reshape skips BNLayer's buffers
        (cpp:40-58); LayerSetUp shapes scale_buf_, bias_buf_, save_mean_ and save_inv_variance_ like the
        parameters, (1, C), without touching them (cpp:26-29). Forward: in TEST cuDNN's inference call on
        the four parameters (cu:24-35), else its training call, which writes the running statistics and
        save_mean_ and save_inv_variance_ (cu:36-52). Backward, when the bottom or the slope or bias wants
        a gradient (cu:58-59): one cuDNN call that writes the bottom's diff and the diffs of scale_buf_ and
        bias_buf_ (cu:60-81), then adds those into the slope's and bias's diffs where param_propagate_down
        says (cu:83-90)."""
        c = legacy_shape(self, run.bottoms[0])[1]
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        if run.phase == "TRAIN":
            t += [touch.buffer("save_mean_", c, "forward", per_sample=False),
                  touch.buffer("save_inv_variance_", c, "forward", per_sample=False)]
        params = [k for k in (0, 1) if run.param_propagate_down[k]]
        if run.propagate_down[0] or params:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward"),
                  touch.buffer("scale_buf_ (diff)", c, "backward", per_sample=False),
                  touch.buffer("bias_buf_ (diff)", c, "backward", per_sample=False)]
            t += [touch.param(k, "diff", "backward") for k in params]
        return t


@register("GuidedDropout", fork=FORK)
class GuidedDropout(Layer):
    """GuidedDropoutLayer (neuron_layers.hpp:211-245): a NeuronLayer of two bottoms exactly, the features
    and their guidance (one weight per feature unit), and one top like bottom 0 (NeuronLayer::Reshape),
    in place or not. Reshape (guided_dropout_layer.cpp:33-43) CHECKs that the guidance has the features'
    num and channels and height and width 1 (the legacy accessors), and sizes rand_vec_ (num x channels)
    and scale_ (num). LayerSetUp refuses a type other than "deterministic" or "stochastic" (cpp:22-26).

    Forward (cpp:46-99, cu:69-112): "deterministic", in either phase, and "stochastic" in TRAIN write the
    mask into rand_vec_ and the per-sample scale into scale_; "stochastic" in TEST copies the bottom and
    touches neither. Backward (cpp:102-135, cu:127-158), when the features want a gradient, reads them."""

    exact_bottoms = 2
    exact_tops = 1

    def masks(self):
        kind = self.fork_param("guided_dropout_param").type
        self.check(kind in ("deterministic", "stochastic"),
                   f"GuidedDropout type '{kind}': Cysu's layer takes \"deterministic\" or \"stochastic\" "
                   "(guided_dropout_layer.cpp:23-26)", fix='set guided_dropout_param { type: "deterministic" }')
        return kind == "deterministic" or self.ctx.phase == "TRAIN"

    def reshape(self, bottoms):
        self.masks()
        n, c, _, _ = legacy_shape(self, bottoms[0])
        gn, gc, gh, gw = legacy_shape(self, bottoms[1])
        self.check((gn, gc, gh, gw) == (n, c, 1, 1),
                   f"GuidedDropout's guidance (bottom 1) must be {n}x{c}x1x1 beside features {tuple(bottoms[0])} "
                   f"(the CHECKs of guided_dropout_layer.cpp:36-39); got {tuple(bottoms[1])}",
                   fix=f"give the guidance one value per feature unit: {n}x{c}x1x1")
        return [tuple(bottoms[0])]

    def label_for(self, prediction):
        """The guidance its CHECKs ask for beside features of that shape: (num, channels, 1, 1)."""
        if len(prediction) > 4:
            return None
        n, c, _, _ = tuple(prediction) + (1,) * (4 - len(prediction))
        return (n, c, 1, 1)

    def touches(self, run):
        n, c, _, _ = legacy_shape(self, run.bottoms[0])
        masks = self.masks()
        t = [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"), touch.top(0, "data", "forward")]
        if masks:
            t += [touch.buffer("rand_vec_", n * c, "forward", per_sample=True),
                  touch.buffer("scale_", n, "forward", per_sample=True)]
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t
