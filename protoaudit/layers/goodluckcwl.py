"""Weiliang Chen's Caffe (goodluckcwl/custom-caffe aa5345b), the Caffe Face-alignment-mobilenet-v2
trains on, as its sources shape its layers.

The fork is happynear's caffe-windows (branch ms) of early 2018 with his layers added: its
BatchNorm, Eltwise, base data layer and layer factory are the files of happynear 504d8a8 (Eltwise's
byte for byte; BatchNorm's re-indented, with the same disable_mean, disable_variance and CUDNN
lines), its InnerProduct happynear's without the weight taken from bottom 1, its Noise an older one,
and farmingyard's ConvolutionDepthwise as MobileNet-YOLO reformatted it. ImageFloatData (a list of
images with float labels) and WeightEuclideanLoss (68 facial landmarks, weighted) are its own.

File and line references are to that commit's src/caffe/layers/ and include/caffe/layers/.
"""
from . import happynear, shufflenet, touch
from .base import count, register
from .data import LIST_ENTRY_BYTES, ImageData
from .losses import Loss, legacy_num_pair

FORK = "goodluckcwl"
POINTS = 68  # the landmarks WeightEuclideanLoss weighs: x then y, 2 x 68 values per sample
LIST_ENTRY_BYTES.setdefault("ImageFloatData", 56)  # sizeof(pair<string, vector<float>>)


@register("BatchNorm", fork=FORK)
class BatchNorm(happynear.BatchNorm):
    """happynear's BatchNormLayer, re-indented (batch_norm_layer.cpp:17-18, 39, 112-199: the same
    disable_mean, disable_variance and CUDNN engine), sized and refused as happynear's."""


@register("Eltwise", fork=FORK)
class Eltwise(happynear.Eltwise):
    """happynear's EltwiseLayer: eltwise_layer.cpp/.cu are its files byte for byte (SORT included)."""


@register("InnerProduct", fork=FORK)
class InnerProduct(happynear.InnerProduct):
    """happynear's InnerProductLayer with `normalize` (weight_norm_, inner_product_layer.cpp:98-101,
    111) but without the weight taken from bottom 1: its backward has no branch for a second bottom
    (cpp:139, cu:79) and writes a weight diff the layer never sized. One bottom only."""

    max_bottoms = 1


@register("Noise", fork=FORK)
class Noise(happynear.Noise):
    """The fork's NoiseLayer is happynear's before its mask became a member: it keeps NeuronLayer's
    Reshape (noise_layer.hpp:17, no Reshape of its own), so the top takes the bottom's shape, in
    place or not. In TRAIN each forward makes a Blob mask local to the call, the bottom's size
    (cpp:17-18, cu:15-16), and frees it when the call returns: no buffer is kept, and the mask adds
    the bottom's size only while the layer runs, at the start of the forward, below the net's peak.
    The backward shares the top's diff with the bottom (cpp:42-44, cu:38-40)."""

    def reshape(self, bottoms):
        return [tuple(bottoms[0])]

    def touches(self, run):
        return [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]


@register("ConvolutionDepthwise", fork=FORK)
class ConvolutionDepthwise(shufflenet.ConvolutionDepthwise):
    """farmingyard's ConvolutionDepthwiseLayer as MobileNet-YOLO reformatted it (conv_dw_layer.cpp/.cu):
    the same geometry, parameters and GPU buffers, but Reshape fills weight_multiplier_ and
    bias_multiplier_ (N, Ho, Wo) with ones on the host (cpp:109-129, caffe_set on mutable_cpu_data).
    In GPU mode their device copies are made by the backward that reads them, each only when its
    parameter learns (cu:186, 204)."""

    claims_files = False  # shufflenet's and MobileNet-YOLO's nets have it too: they stay theirs

    def touches(self, run):
        t = super().touches(run)
        if run.mode != "gpu":
            return t
        learns = run.param_propagate_down
        out = []
        for x in t:
            if x.what == "buffer" and x.name in ("weight_multiplier_", "bias_multiplier_"):
                out.append(touch.buffer(x.name + " (host)", x.elements, "setup", per_sample=True, note=x.note,
                                        device="host"))
                if learns[0 if x.name == "weight_multiplier_" else 1]:
                    out.append(touch.buffer(x.name, x.elements, "backward", per_sample=True, note=x.note))
            else:
                out.append(x)
        return out


@register("ImageFloatData", fork=FORK)
class ImageFloatData(ImageData):
    """ImageFloatDataLayer: ImageData's list, images and transformer, but each line is a path and
    label_dim floats ("path f1 ... fK", image_float_data_layer.cpp:52-72), and with hard_sample one
    more, a weight per image (cpp:64-65).

    Tops: the data as ImageData's (the first image, resized to new_height x new_width when given,
    cpp:101, 122-131), with one more channel when with_heatmap merges a grey heat map into it
    (cpp:104-117); the label (batch, label_dim) (cpp:137-140); a third top, the weight, (batch)
    (cpp:146-147). The fork's DataTransformer pads and resizes back with pad_ratio in TRAIN
    (data_transformer.cpp:546-600), which keeps the size, and counts pad_ratio among what needs its
    RNG (cpp:979-981). Its prefetching base is happynear's, BVLC's of 2017 with a weight_ blob in each
    Batch (base_data_layer.hpp:48-50, base_data_layer.cpp:60-80): data_param.prefetch batches of
    every top, each forward pointing the tops into one."""

    min_tops = 2  # DataLayerSetUp reshapes top[1] whatever the count (cpp:140)
    max_tops = 3  # MaxTopBlobs (image_float_data_layer.hpp:34)
    exact_tops = None
    label_origin = "the layer's batch size and image_float_data_param.label_dim (cpp:137-147)"

    def fork_params(self):
        return self.fork_param("image_float_data_param")

    def reshape(self, bottoms):
        p, tp = self.param(), self.lp.transform_param
        self.check(not p.balance_class, "ImageFloatData with balance_class reads no line of its list "
                   "(image_float_data_layer.cpp:224-227 is empty)", fix="remove balance_class")
        self.check(not (tp.crop_h or tp.crop_w), "protoaudit has no rule for the fork's crop_h/crop_w",
                   fix="use crop_size, or declare the data top with --input")
        self._labels = iter([(self.fork_params().label_dim,), ()])
        return super().reshape(bottoms)

    def label_shape(self, batch):
        return (batch,) + next(self._labels)

    def data_shape(self, batch):
        shape, origin = super().data_shape(batch)
        if shape is None or not self.fork_params().with_heatmap:
            return shape, origin
        return (shape[0] + 1,) + tuple(shape[1:]), origin + ", and a heat map channel (with_heatmap)"

    def transformer_draws(self):
        return super().transformer_draws() or (self.ctx.phase == "TRAIN" and self.lp.transform_param.pad_ratio > 0)

    def reader_touches(self, run):
        """lines_: per entry its name and a vector of its floats (label_dim, + 1 with hard_sample)."""
        floats = self.fork_params().label_dim + int(self.fork_params().hard_sample)
        return self.float_list_touches("ImageFloatData", floats, lambda line: [line.split(b" ")[0]])


@register("WeightEuclideanLoss", fork=FORK)
class WeightEuclideanLoss(Loss):
    """WeightEuclideanLossLayer: (1/2N) sum w_i d_i (x_i - y_i)^2 over 68 landmarks, w the contour,
    main and coarse weights, d one over the inter-pupil (or box) distance with `normalized`.

    LayerSetUp sizes l2_weight_ like bottom 0 and writes 2 x 68 weights per sample into it on the
    host (cpp:21-50), so bottom 0 needs at least 136 values per sample. Reshape is LossLayer's (the
    same num(), a scalar top) and CHECKs equal count(1) (cpp:62-64); diff_, wdiff_ and pupil_dis_
    take bottom 0's shape (cpp:65-67). Forward_gpu and Backward_gpu run the CPU code (cu:9-11, 30-32),
    so all four buffers, the loss and its diff are host memory; the backward writes the cpu_diff of
    each bottom propagate_down asks for (cpp:146-157), which a GPU layer below reads on the device. A
    third bottom, per-value weights, is read on the host (cpp:134-135). AllowForceBackward is true
    (weight_euclidean_loss_layer.hpp:30-32)."""

    exact_bottoms = None
    min_bottoms = 2
    max_bottoms = 3  # weight_euclidean_loss_layer.hpp:35-36

    def reshape(self, bottoms):
        legacy_num_pair(self, bottoms)
        per = count(bottoms[0]) // bottoms[0][0]
        self.check(per == count(bottoms[1]) // bottoms[1][0], f"Inputs must have the same dimension: "
                   f"{tuple(bottoms[0])} vs {tuple(bottoms[1])} (weight_euclidean_loss_layer.cpp:63)")
        self.check(per >= 2 * POINTS, f"WeightEuclideanLoss writes 2 x {POINTS} landmark weights per sample into "
                   f"a blob of bottom 0's shape (cpp:21-50), which has {per}: it writes past its end",
                   fix=f"give it {2 * POINTS} values per sample (68 x, then 68 y)")
        return [()]

    def allow_force_backward(self, bottom_index):
        return True

    def label_for(self, prediction):
        """Its landmarks: one value per value of bottom 0 (the CHECK of count(1), cpp:62-64)."""
        return tuple(prediction)

    def touches(self, run):
        n = count(run.bottoms[0])
        shape = "x".join(map(str, run.bottoms[0]))
        buf = lambda name, stage: touch.buffer(name, n, stage, per_sample=True, device="host", note=shape)  # noqa: E731
        t = [buf("l2_weight_", "setup")]
        t += [touch.bottom(j, "data", "forward", device="host") for j in range(len(run.bottoms))]
        t += [buf("pupil_dis_", "forward"), buf("diff_", "forward"), buf("wdiff_", "forward"),
              touch.top(0, "data", "forward", device="host"), touch.top(0, "diff", "backward", device="host")]
        return t + [touch.bottom(j, "diff", "backward") for j, down in enumerate(run.propagate_down[:2]) if down]
