"""e2e_face's Caffe (mikuhatsune/e2e_face 11d506e): a 2017 BVLC Caffe with the repository's
caffe_modification/ files copied in, as their sources shape them: SpatialTransformer, its own
CenterLoss and its own HDF5Data (with scale, mirror, mean_value and crop_size).

The repository is not a Caffe: caffe_modification/ holds the files its author changed or added
(caffe.proto, the three layers' .hpp/.cpp/.cu, filler.hpp), proto/forks/e2e_face.proto being its
caffe.proto verbatim (st_param = 147, center_loss_param = 148: not caffe-face's numbers). The rest of
the net is counted as BVLC's layers. MarginSoftmaxLoss (train_test.prototxt) has no rule yet.

File and line references are to that commit's caffe_modification/ files.
"""
from . import touch
from .base import Layer, count, register
from .caffe_face import CenterLoss as CaffeFaceCenterLoss
from .data import HDF5Data as BVLCHDF5Data

FORK = "e2e_face"

# transform_type -> (theta's width, source_'s channels) (spatial_transformer_layer.cpp:12-35, 75-116);
# "grid" reads bottom 1 as the sampling grid itself, 2 values per output pixel, and has no source_
THETA = {"affine": (6, 2), "translation": (2, 2), "translation_scaling": (4, 2), "projective": (8, 3),
         "similarity": (4, 2), "similarity+": (5, 2), "grid": (None, 0)}


@register("SpatialTransformer", fork=FORK)
class SpatialTransformer(Layer):
    """SpatialTransformerLayer: two bottoms exactly (the image U and theta), one top at least
    (spatial_transformer_layer.hpp:29-30). The top is (N, C, output_H, output_W), each of output_H and
    output_W bottom 0's own height or width where unset (cpp:38-45, 119). Theta's axis 1 is the
    transform's width: 6 affine, 2 translation, 4 translation_scaling, 8 projective, 4 similarity, 5
    similarity+; grid takes 2 x output_H x output_W values per item (cpp:75-116, a CHECK each).

    Its own blobs, by mode (Reshape and LayerSetUp test Caffe::mode()):
    source_ (N, 2 or 3 for projective, output_H, output_W), every type but grid (cpp:81-115): written by
    the forward (cpp:143-290, .cu:464), read by the backward; the CPU backward also writes its diff
    (cpp:341, 386-387). In CPU mode only, target_ (1, 3, output_H, output_W), the grid of output
    coordinates, made in LayerSetUp on the host (cpp:50-64). In GPU mode only, theta_diff_cache_ (N,
    theta's width, output_H, output_W) per pixel (cpp:79-114), written by the backward (.cu:1017), and
    theta_diff_op_ (output_H x output_W ones, set through its cpu_data in Reshape, cpp:121-126, then
    read on the device by the backward's gemm, .cu:1041).

    The backward writes theta's diff always (cpp:298, .cu:999) and U's diff where propagate_down[0]
    (cpp:343-345, .cu:1021-1023), zeroed first."""

    exact_bottoms = 2
    min_tops = 1

    def kind(self):
        p = self.fork_param("st_param")
        self.check(p.transform_type in THETA, f"Transformation type: {p.transform_type} not supported! "
                   "(spatial_transformer_layer.cpp:33)", fix=f"transform_type is one of {', '.join(THETA)}")
        return p.transform_type

    def out_hw(self, bottoms):
        p = self.fork_param("st_param")
        u = bottoms[0]
        self.check(len(u) == 4, f"bottom 0 must be (N, C, H, W): the layer reads shape(2) and shape(3) "
                   f"(cpp:38, 42); got {tuple(u)}")
        return (p.output_H if p.HasField("output_H") else u[2], p.output_W if p.HasField("output_W") else u[3])

    def reshape(self, bottoms):
        kind = self.kind()
        h, w = self.out_hw(bottoms)
        theta = bottoms[1]
        width, _ = THETA[kind]
        if kind == "grid":
            self.check(count(theta, 1) == 2 * h * w, f"Second blob should be twice the size of output blob for "
                       f"grid (cpp:102): {tuple(theta)} for {h}x{w}")
        else:
            self.check(len(theta) >= 2 and theta[1] == width, f"Second blob should be {width}-dimension theta "
                       f"for {kind} (cpp:75-116): got {tuple(theta)}")
        u = bottoms[0]
        return [(u[0], u[1], h, w)]

    def touches(self, run):
        b = run.bottoms
        kind = self.kind()
        h, w = self.out_hw(b)
        n = b[0][0]
        width, channels = THETA[kind]
        gpu = run.mode == "gpu"
        t = super().touches(run)
        if channels:
            t.append(touch.buffer("source_", n * channels * h * w, "forward", per_sample=True,
                                  note=f"{n}x{channels}x{h}x{w}, the sampling grid's source coordinates"))
            if not gpu and any(run.propagate_down):
                t.append(touch.buffer("source_ (diff)", n * channels * h * w, "backward", per_sample=True))
        if any(run.propagate_down) and not run.propagate_down[1]:
            t.append(touch.bottom(1, "diff", "backward"))  # written whatever propagate_down says
        if not gpu and kind != "grid":
            t.append(touch.buffer("target_", 3 * h * w, "setup", per_sample=False, device="host",
                                  note=f"1x3x{h}x{w}, the output grid"))
        if gpu and kind != "grid":
            t.append(touch.buffer("theta_diff_op_ (host)", h * w, "setup", per_sample=False, device="host",
                                  note=f"{h}x{w} ones"))
            if any(run.propagate_down):
                t.append(touch.buffer("theta_diff_op_", h * w, "backward", per_sample=False, note=f"{h}x{w} ones"))
                t.append(touch.buffer("theta_diff_cache_", n * width * h * w, "backward", per_sample=True,
                                      note=f"{n}x{width}x{h}x{w}, theta's gradient per output pixel"))
        return t


@register("CenterLoss", fork=FORK)
class CenterLoss(CaffeFaceCenterLoss):
    """CenterLossLayer (center_loss_layer.cpp/.cu/.hpp): caffe-face's shapes (centres (num_output, K), K
    bottom 0's count from `axis` on, cpp:13-33; labels (N, 1, 1, 1), cpp:41-43; LossLayer's scalar
    top, cpp:47). distance_ like bottom 0 (cpp:48), variation_sum_ like the centres (cpp:49), count_
    num_output ints (cpp:50-52). Unlike caffe-face's, the GPU code keeps all three on the device
    (.cu:57, 67-79): the backward writes variation_sum_, count_ and the centres' diff whatever
    param_propagate_down says (.cu:64-79); the CPU backward only where the centres learn (cpp:80-91)."""

    def touches(self, run):
        t = super(CaffeFaceCenterLoss, self).touches(run)  # LossLayer's: the buffers are this fork's own
        t.append(touch.buffer("distance_", count(run.bottoms[0]), "forward", per_sample=True))
        classes, k = self.param_shapes(run.bottoms)[0]
        gpu = run.mode == "gpu"
        if gpu or run.param_propagate_down[0]:
            t.append(touch.buffer("variation_sum_", classes * k, "backward", per_sample=False))
            t.append(touch.buffer("count_", classes, "backward", per_sample=False, note="ints"))
        if gpu and not run.param_propagate_down[0]:
            t.append(touch.param(0, "diff", "backward"))
        return t


@register("HDF5Data", fork=FORK)
class HDF5Data(BVLCHDF5Data):
    """The repository's HDF5DataLayer (hdf5_data_layer.cpp/.hpp). Each file's first dataset is
    cropped (crop_size), mean-subtracted (mean_value), mirrored (mirror) and scaled (scale) in place
    as the file is read (cpp:177-254): scale, mirror and mean_value change values, never sizes. Top 0
    is (batch_size x crop_num, C, crop_size, crop_size) where crop_size is set, crop_num doubled in
    testing with mirror (cpp:276-279, 372-376); without it every top is batch_size rows of its
    dataset, as in BVLC's.

    It holds two files at once: hdf_blobs_q[0] and [1] (hpp:59), the first read in LayerSetUp
    (cpp:322) and the next by its thread, started with need_data_ set (cpp:336-339, 44-73); a list of
    one file is read twice (cpp:298-302). The second file is not read here: it is counted as the
    first's size. It has no GPU code (Forward_gpu commented out, hpp:25-26): the tops are written on
    the host, and copied to the device where the next layer reads them there."""

    def crop(self):
        p = self.lp.hdf5_data_param
        return p.crop_size if p.HasField("crop_size") else None

    def crop_num(self):
        p = self.lp.hdf5_data_param
        return p.crop_num * (2 if self.ctx.phase == "TEST" and p.mirror else 1)

    def reshape(self, bottoms):
        self.check(not self.lp.HasField("transform_param"), "HDF5Data does not transform data (cpp:273-274)",
                   fix="remove transform_param")
        shapes = self.dataset_tops()
        crop = self.crop()
        if crop and self.sets is not None and not self.lp.top[0] in self.ctx.inputs:
            shape = shapes[0]
            self.check(len(shape) == 4, f"crop_size crops (N, C, H, W) images (cpp:177-205); top 0 is {shape}")
            self.check(crop <= min(shape[2:]), f"crop_size {crop} is larger than the images {shape[2]}x{shape[3]}")
            shapes[0] = (shape[0] * self.crop_num(), shape[1], crop, crop)
        return shapes

    def held_elements(self):
        """Two files' datasets as read (a crop is made in place, the blob keeping its size, cpp:195-204)."""
        return 2 * sum(count(d.shape) for d in self.sets)

    def touches(self, run):
        t = []
        for x in super().touches(run):
            if x.what == "buffer" and x.name == "hdf_blobs_":
                x = touch.buffer("hdf_blobs_q", x.elements, "setup", per_sample=False, device="host",
                                 note="two files' datasets (the second taken as the first's size)")
            t.append(x)
        t += [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))]
        return t
