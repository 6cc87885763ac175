"""LiteFlowNet's Caffe (twhui/LiteFlowNet at e7d6c43): Warp, and FlowNet 2.0's data layers it keeps,
CustomData, DataAugmentation, FlowAugmentation and GenerateAugmentationParameters, as its sources shape them.

File and line references are to that commit's src/caffe/layers/<name>_layer.cpp and .cu and
include/caffe/layers/<name>_layer.hpp. The augmentation layers' per-image coefficient caches are arrays of
the classes of augmentation_layer_base.hpp:17-127, all floats: tTransMat 6 (24 bytes), tChromaticCoeffs 6
(24), tChromaticEigenCoeffs 22 (88), tEffectCoeffs 9 (36), tChromaticEigenSpace 25 (100). An augmentation
coefficient vector is AugmentationCoeff's field count, 42 (caffe.proto). Their net.cpp never asks
AllowBackward(): the layers below a DataAugmentation whose parameters take the default lr_mult get a
gradient, as in that Caffe. The Correlation, L1Loss, Downsample and Eltwise it has are in
protoaudit.layers.flownet. FlowNet 2.0's Caffe (lmb-freiburg/flownet2 b92e198) has the same
custom_data_layer.cpp/.cu and .hpp byte for byte: CustomData serves both.
"""
from . import touch
from .base import Layer, count, legacy_shape, register
from .data import FIRST_RECORD, DatasetLayer, reader

FORK = "liteflownet"
NUM_PARAMS = 42  # AugmentationCoeff's fields: coeff.GetDescriptor()->field_count()
TRANS_MAT, CHROMATIC, CHROMATIC_EIGEN, EFFECT, EIGENSPACE = 24, 24, 88, 36, 100  # bytes, see above
BOOL1 = 3  # DataParameter.CHANNELENCODING: one bit a pixel, one channel (custom_data_layer.cpp:110-124)
EFFECT_FIELDS = ("fog_size", "fog_amount", "motion_blur_angle", "motion_blur_size", "shadow_angle",
                 "shadow_distance", "shadow_strength", "noise")  # data_augmentation_layer.cu, gen_effect_transform


@register("Warp", fork=FORK)
class Warp(Layer):
    """WarpLayer: bottom 0 sampled bilinearly at bottom 1's flow. Reshape (warp_layer.cpp:14-23) CHECKs
    two bottoms of one num, bottom 1 of 2 channels, and gives (num, channels of bottom 0, height and width
    of bottom 1). It allocates nothing: the forward writes the top (warp_layer.cu:54-66), the backward the
    diffs of the bottoms that propagate (cu:174-197)."""

    exact_bottoms = 2
    exact_tops = 1

    def reshape(self, bottoms):
        image, flow = (legacy_shape(self, s) for s in bottoms)
        self.check(image[0] == flow[0], "warp requires num to be the same for both bottom blobs "
                   f"(warp_layer.cpp:18-19): {tuple(bottoms[0])} and {tuple(bottoms[1])}")
        self.check(flow[1] == 2, "warp requires coords blob (bottom[1]) to have only 2 channels (warp_layer.cpp:20): "
                   f"{tuple(bottoms[1])}")
        return [(image[0], image[1], flow[2], flow[3])]


@register("CustomData", fork=(FORK, "flownet2"))
class CustomData(DatasetLayer):
    """CustomDataLayer: an LMDB's records sliced along the channels into the tops (slice_point, each
    slice decoded by its `encoding`), plus a label top (batch, 1, 1, 1) where there is one top more than
    slices (custom_data_layer.cpp:340-346, 509-571). Each top is (batch_size, its slice's channels,
    the record's height and width); a BOOL1 slice is one channel (its decoding writes one plane,
    cpp:110-124). Where the database is absent, the channels the slices fix are kept and the size is
    assumed as for any absent dataset.

    It is no prefetching layer of BVLC's: one host Blob per slice (and the label's), filled by a pthread
    (cpp:509-571, 623-629), data_mean_ (1, C, H, W) on the host (cpp:581-616, 630), and a forward (also
    the GPU one, custom_data_layer.cu) that copies each into its top on the host (cpp:677-686)."""

    min_tops = 1

    def param(self):
        return self.lp.data_param

    def batch_size(self):
        return self.param().batch_size

    def record(self):
        """(C, H, W) of the first record, or None where the database is not on this machine."""
        p = self.param()
        found = self.files.find(p.source) if p.source else None
        if found is None:
            return None
        what = f"source '{p.source}' (LMDB)"
        value = self.files.read(FIRST_RECORD["LMDB"], found.path, what=what)[1]
        return tuple(self.files.read(reader("datum").parse, value, what, False, False, what=what).shape)

    def reshape(self, bottoms):
        p = self.param()
        points = list(p.slice_point)
        slices = len(points) + 1
        tops = len(self.lp.top)
        self.check(tops in (slices, slices + 1), f"CustomDataLayer has {tops} top blobs, but {slices} slices. "
                   "(custom_data_layer.cpp:340-346)")
        self.check(p.crop_size == 0, "Cropping currently not supported (custom_data_layer.cpp:503-506)")
        self.check(p.backend == 1, "LevelDB not supported by CustomData (custom_data_layer.cpp:350-352)",
                   fix="give data_param { backend: LMDB }")
        batch = self.batch_size()
        widths = [b - a for a, b in zip([0] + points, points)]
        self.check(all(w > 0 for w in widths), "slice points must increase (custom_data_layer.cpp:519)")
        last = 1 if len(p.encoding) > len(points) and p.encoding[len(points)] == BOOL1 else None
        record = None if any(t in self.ctx.inputs for t in self.lp.top[:slices]) else self.record()
        if record is None:
            known = {t: (batch, c, None, None) for t, c in zip(self.lp.top, widths + [last])}
            missing = [t for t in self.lp.top[:slices] if t not in self.ctx.inputs]
            if missing:
                self.need_input(f"source '{p.source}' is not on this machine", missing, known=known, absent=True)
            shapes = [self.override(j, None) for j in range(slices)]
            origin = "--input"
        else:
            c, h, w = record
            self.check(c - sum(widths) >= 1 and tops <= c, f"the record has {c} channels, too few for slice points "
                       f"{points} (custom_data_layer.cpp:513-514)")
            shapes = [self.override(j, (batch, cw, h, w)) for j, cw in enumerate(widths + [c - sum(widths)])]
            origin = f"source '{p.source}', its first record ({c}x{h}x{w})"
        for j, shape in enumerate(shapes):
            self.note_origin(j, shape, origin)
        if tops > slices:
            label = self.override(slices, (shapes[0][0], 1, 1, 1))
            self.note_origin(slices, label, "the layer's batch size (a label per record)")
            shapes.append(label)
        return shapes

    def touches(self, run):
        slices = len(self.param().slice_point) + 1
        t = [touch.buffer(f"prefetch_data_blobs_[{j}]" if j < slices else "prefetch_label_", count(shape), "setup",
                          per_sample=True, device="host", kind="prefetch", note="x".join(map(str, shape)))
             for j, shape in enumerate(run.tops)]
        c = sum(shape[1] for shape in run.tops[:slices])
        _, _, h, w = run.tops[0]
        t.append(touch.buffer("data_mean_", c * h * w, "setup", per_sample=False, device="host", note=f"1x{c}x{h}x{w}"))
        t += [touch.top(j, "data", "forward", device="host") for j in range(len(run.tops))]
        return t


class Augmenting(Layer):
    """What the augmentation layers share: no CPU forward, and a backward that does nothing (or stops where
    a bottom propagates), so that no top's diff is touched by it."""

    def aug(self):
        return self.fork_param("augmentation_param")

    def crop(self, bottom):
        a = self.aug()
        return (a.crop_height, a.crop_width) if a.HasField("crop_width") and a.HasField("crop_height") else None


@register("DataAugmentation", fork=FORK)
class DataAugmentation(Augmenting):
    """DataAugmentationLayer: images (bottom 0), optionally the coefficients of another augmentation
    (bottom 1), cropped to crop_height x crop_width and transformed; top 1, where given, the coefficients
    used (data_augmentation_layer.cpp:74-124). Without both crop sizes the images are copied as they are
    (cu:209-210).

    Parameters (cpp:41-65): blobs_[0], one float, the iteration count; with recompute_mean also the mean
    image (1, C, crop) and per channel (1, C, 1, 1), all kept by the solver (the net's ParamSpecs, lr_mult 1
    unless the file says). Buffers: ones_ (1, 1, crop), set on the host at Reshape, with recompute_mean or
    three mean values (cpp:136-151) and read on the device; pixel_rgb_mean_from_proto_ (3 floats) with
    three mean values; when cropping, the coefficients of each image (all_coeffs_, (N, 42), on the host,
    unless bottom 1 gives them, cu:339-346), and the caches coeff_matrices_, coeff_chromatic_,
    coeff_chromatic_eigen_, coeff_effect_ (N of each class) and chromatic_eigenspace_ (one), written on
    the host and copied to the device by every forward (cu:445-485); noise_ (one image's floats, cpp:153)
    on the device where an image gets an effect (cu:530-539): counted where the layer generates effects,
    or takes its coefficients from bottom 1 (whose effects only the run knows). Top 1 is all_coeffs_'s
    memory (cu:341), on the host."""

    min_bottoms = 1
    max_bottoms = 2
    min_tops = 1
    max_tops = 2

    def reshape(self, bottoms):
        n, c, h, w = legacy_shape(self, bottoms[0])
        crop = self.crop(bottoms[0])
        if crop:
            self.check(w >= crop[1], f"crop width greater than original (data_augmentation_layer.cpp:103): {w} < "
                       f"{crop[1]}")
            self.check(h >= crop[0], f"crop height greater than original (data_augmentation_layer.cpp:104): {h} < "
                       f"{crop[0]}")
        top_h, top_w = crop or (h, w)
        coeffs = tuple(bottoms[1]) if len(bottoms) > 1 else (n, NUM_PARAMS, 1, 1)
        return [(n, c, top_h, top_w), coeffs][:len(self.lp.top)]

    def param_shapes(self, bottoms):
        _, c, h, w = legacy_shape(self, bottoms[0])
        top_h, top_w = self.crop(bottoms[0]) or (h, w)
        return [(1, 1, 1, 1)] + ([(1, c, top_h, top_w), (1, c, 1, 1)] if self.aug().recompute_mean else [])

    def touches(self, run):
        a = self.aug()
        n, c, h, w = run.tops[0]
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        per_channel = len(a.mean) == 3 and not a.mean_per_pixel
        if a.recompute_mean or per_channel:
            t += [touch.buffer("ones_ (host)", h * w, "setup", per_sample=False, device="host"),
                  touch.buffer("ones_", h * w, "forward", per_sample=False)]
        if per_channel and not a.recompute_mean:
            t += [touch.buffer("pixel_rgb_mean_from_proto_ (host)", 3, "setup", per_sample=False, device="host"),
                  touch.buffer("pixel_rgb_mean_from_proto_", 3, "forward", per_sample=False)]
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        cropping = self.crop(run.bottoms[0]) is not None
        given = len(run.bottoms) > 1
        if cropping:
            if given:
                t.append(touch.bottom(1, "data", "forward", device="host"))
            elif len(run.tops) > 1:
                t.append(touch.top(1, "data", "forward", device="host"))
            else:
                t.append(touch.buffer("all_coeffs_", n * NUM_PARAMS, "forward", per_sample=True, device="host",
                                      note=f"{n}x{NUM_PARAMS}"))
            for name, size in (("coeff_matrices_", TRANS_MAT), ("coeff_chromatic_", CHROMATIC),
                               ("coeff_chromatic_eigen_", CHROMATIC_EIGEN), ("coeff_effect_", EFFECT)):
                for device in ("host", "device"):
                    t.append(touch.buffer(name + (" (host)" if device == "host" else ""), n * size, "forward",
                                          per_sample=True, itemsize=1, device=device, note=f"{n} x {size} bytes"))
            t += [touch.buffer("chromatic_eigenspace_ (host)", EIGENSPACE, "forward", per_sample=False, itemsize=1,
                               device="host"),
                  touch.buffer("chromatic_eigenspace_", EIGENSPACE, "forward", per_sample=False, itemsize=1)]
            if given or any(a.HasField(f) for f in EFFECT_FIELDS):
                t.append(touch.buffer("noise_", c * h * w, "forward", per_sample=False, note=f"{c}x{h}x{w}"))
        elif len(run.tops) > 1 and not given:
            t.append(touch.top(1, "data", "forward", device="host"))
        if any(run.propagate_down):
            t.append(touch.stop("backward", "DataAugmentationLayer cannot do backward. (data_augmentation_layer.hpp:"
                                            "38-41)", fix="give the layer propagate_down: false for each bottom"))
        return t

    def shares(self):
        return [(1, 1, "data")] if len(self.lp.top) > 1 and len(self.lp.bottom) > 1 else []


@register("FlowAugmentation", fork=FORK)
class FlowAugmentation(Augmenting):
    """FlowAugmentationLayer: a flow field (bottom 0, two channels) and the coefficients the two images were
    augmented with (bottoms 1, 2); the top is the flow (num, 2, crop_height, crop_width), both crop sizes
    CHECKed positive (flow_augmentation_layer.cpp:33-56). coeff_matrices1_ and coeff_matrices2_, one
    tTransMat an image (cpp:71-72), are written on the host and read on the device by every forward, which
    reads the flow and the coefficients on the host too (cu:118-156). The backward does nothing (hpp:38-41)."""

    exact_bottoms = 3
    exact_tops = 1

    def reshape(self, bottoms):
        a = self.aug()
        self.check(a.crop_width > 0, "Please enter crop width if you want to perform augmentation "
                   "(flow_augmentation_layer.cpp:33)")
        self.check(a.crop_height > 0, "Please enter crop height if you want to perform augmentation "
                   "(flow_augmentation_layer.cpp:34)")
        n, c, _, _ = legacy_shape(self, bottoms[0])
        self.check(c == 2, f"Flow data must have two channels (flow_augmentation_layer.cpp:51): {tuple(bottoms[0])}")
        return [(n, 2, a.crop_height, a.crop_width)]

    def touches(self, run):
        n = run.tops[0][0]
        t = [touch.bottom(0, "data", "forward"), touch.bottom(0, "data", "forward", device="host"),
             touch.bottom(1, "data", "forward", device="host"), touch.bottom(2, "data", "forward", device="host"),
             touch.top(0, "data", "forward")]
        for name in ("coeff_matrices1_", "coeff_matrices2_"):
            t += [touch.buffer(name + " (host)", n * TRANS_MAT, "forward", per_sample=True, itemsize=1, device="host"),
                  touch.buffer(name, n * TRANS_MAT, "forward", per_sample=True, itemsize=1)]
        return t


@register("GenerateAugmentationParameters", fork=FORK)
class GenerateAugmentationParameters(Augmenting):
    """GenerateAugmentationParametersLayer: one bottom (any blob, for its num) or three (coefficients, the
    original images, the augmented ones); the top is (num, 42, 1, 1) (generate_augmentation_parameters_layer
    .cpp:49-102), written on the host from bottom 0 read on the host (cu:22, 58); crop sizes are CHECKed
    where no third bottom gives them (cpp:81). It allocates nothing; its backward does nothing (hpp:36-39)."""

    min_bottoms = 1
    max_bottoms = 3
    exact_tops = 1

    def reshape(self, bottoms):
        self.check(len(bottoms) in (1, 3), "Generate augmentation parameters layer takes one (...) or three (aug "
                   "params, orig data, augmented data) input blobs. (generate_augmentation_parameters_layer.cpp:49)")
        if len(bottoms) == 1:
            a = self.aug()
            self.check(a.HasField("crop_width") and a.HasField("crop_height"), "Need crop_width and crop_height if "
                       "there is no blob specifying these (generate_augmentation_parameters_layer.cpp:81)")
        return [(legacy_shape(self, bottoms[0])[0], NUM_PARAMS, 1, 1)]

    def touches(self, run):
        return [touch.bottom(0, "data", "forward", device="host"), touch.top(0, "data", "forward", device="host")]
