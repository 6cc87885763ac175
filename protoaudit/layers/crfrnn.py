"""CRF-RNN's Caffe (torrvision/crfasrnn 650e988, its caffe-crfrnn folder: Zheng, Jayasumana,
Romera-Paredes et al., ICCV 2015), as its sources shape its own layers.

The fork is a late-2014 Caffe with V1 layers only (longjon's FCN branch: DECONVOLUTION, CROP) plus
MULTI_STAGE_MEANFIELD, the CRF as a recurrent net: MultiStageMeanfieldLayer
(src/caffe/layers/multi_stage_meanfield.cpp) runs num_iterations MeanfieldIterations
(src/caffe/layers/meanfield_iteration.cpp) over permutohedral lattices
(src/caffe/util/modified_permutohedral.cpp, include/caffe/util/modified_permutohedral.hpp), all
declared in include/caffe/vision_layers.hpp:256-404. It has CPU code only. Its CROP is FCN's first
Crop, the code RCF's Caffe keeps as AutoCrop (protoaudit.layers.rcf), with the same coordinate maps
(vision_layers.hpp:168-171, 194-197, 563-566, 636-641; the identity for neuron, Concat, Eltwise,
LRN, MVN, Softmax, Split and Slice layers). The rest of the net is counted as BVLC 9b89154's layers,
as for the other forks here.

File and line references are to that commit's caffe-crfrnn/ files.
"""
from . import posenet, rcf, ssd, touch
from .base import Layer, carry, float32, legacy_shape, register

FORK = "crfrnn"
# torrvision/caffe d779ee3, the Caffe torrvision/crfasrnn pins as its submodule since 2017: an April 2016 BVLC
# Caffe with V2 layers whose multi_stage_meanfield.cpp, meanfield_iteration.cpp and modified_permutohedral.cpp
# are caffe-crfrnn's but for includes, whitespace and the registration (REGISTER_LAYER_CLASS(MultiStageMeanfield),
# cpp:259), and whose SoftmaxLayer and EltwiseLayer keep the same buffers (softmax_layer.cpp:11-25,
# eltwise_layer.cpp:41); its data layers are of their time, as SSDH's (include/caffe/data_layers.hpp:57-109:
# PREFETCH_COUNT = 3 batches copied into the tops, a DataReader), its ImageData reading "name label" pairs
# (image_data_layer.cpp:40), as PoseNet's. Its Crop is caffe-crfrnn's (crop_layer.cpp, but for REGISTER_LAYER_CLASS(Crop),
# :124): FCN's, with no crop_param.
FORK_V2 = "crfrnn_v2"
SOURCE = "CRF-RNN's Caffe"


@register("Crop", fork=FORK)
class Crop(rcf.AutoCrop):
    """CropLayer (crop_layer.cpp:10-73, vision_layers.hpp:622-650): bottom 0 cropped to bottom 1's
    height and width at the offset the layers between them give, as RCF's AutoCrop (the same code:
    protoaudit.layers.rcf), a Crop passed on the way mapping by its own offsets (vision_layers.hpp:636-641)."""

    def coord_map(self, node):
        if node.type == "Crop" and isinstance(node.impl, Crop):
            return tuple((1.0, float32(-c)) for c in node.impl.crop)
        if node.type in rcf.IDENTITY_TYPES or node.type in ("Convolution", "Deconvolution", "Pooling"):
            return super().coord_map(node)
        self.fail(f"layer '{node.name}' ({node.type}) lies between the blobs Crop aligns, and {SOURCE} has no "
                  f"coordinate map for a {node.type} layer (Layer::coord_map is NOT_IMPLEMENTED, layer.hpp:300): "
                  "Caffe stops here",
                  fix="Crop passes only convolution, deconvolution, pooling, crop, element-wise and neuron layers")


# sizeof(ModifiedPermutohedral::Neighbors), two ints (modified_permutohedral.hpp:17-21)
NEIGHBORS_BYTES = 8


def lattice_bytes(d, n):
    """(exact, at most) bytes a ModifiedPermutohedral keeps after init on n points of d dimensions, SSE
    build (modified_permutohedral.cpp:4-7 defines SSE_PERMUTOHEDRAL wherever the compiler has __SSE__,
    as every x86-64 one does): offset_, barycentric_ and rank_ of (d+1)(n+16) ints or floats each
    (cpp:122-126), and blur_neighbors_, (d+1) x M Neighbors (cpp:264-267), M the lattice's vertices,
    which the features decide (the image, for the bilateral lattice): at most d+1 per point."""
    exact = 3 * (d + 1) * (n + 16) * 4
    return exact, exact + (d + 1) * (d + 1) * n * NEIGHBORS_BYTES


@register("MultiStageMeanfield", fork=FORK)
class MultiStageMeanfield(Layer):
    """MultiStageMeanfieldLayer: bottoms the unaries, the first softmax input and the RGB image
    (cpp:158-165), one top (vision_layers.hpp:370-371).

    LayerSetUp (cpp:25-149), with the legacy accessors of bottom 0 (N, C, H, W; P = H x W): CHECK
    num_iterations > 1 (cpp:32); the top (N, C, H, W) (cpp:47); three parameters of (1, 1, C, C), the
    spatial and bilateral kernel weights and the compatibility matrix (cpp:54-86), the first two read
    from the files spatial.par and bilateral.par in the folder Caffe runs in (cpp:63-77, CHECKed);
    the spatial lattice (2 dimensions, P points, cpp:89-93) and its norms spatial_norm_ (P) from
    norm_feed_ (P, cpp:95-103); bilateral_kernel_buffer_ (5P floats) and bilateral_norms_ (N x P)
    (cpp:107-108); a SplitLayer of bottom 0 into num_iterations tops (cpp:112-125), which share its
    data; num_iterations - 1 blobs of (N, C, H, W) for the iterations' outputs (cpp:129-132), the
    last one writing the top; and num_iterations MeanfieldIterations (cpp:135-144). Reshape does
    nothing (cpp:152-155).

    Each MeanfieldIteration (meanfield_iteration.cpp:29-85) keeps three (1, 1, C, C) copies of the
    parameters, pairwise_, spatial_out_blob_, bilateral_out_blob_ and message_passing_ of (N, C, H, W),
    prob_, the top of its SoftmaxLayer (sum_multiplier_ of C and scale_ of N x P,
    softmax_layer.cpp:15-20), and an EltwiseLayer SUM of the unaries and -pairwise_ into its output
    (no buffer of its own, eltwise_layer.cpp:48).

    Forward (cpp:167-196): the split, then per image a bilateral lattice (5 dimensions: position over
    theta_alpha, the image's first 3 channels over theta_beta, cpp:230-243, read with cpu_data) and
    its norms; per iteration the parameters copied in (CopyFrom, through gpu_data in GPU mode), the
    softmax, both lattices' filtering of prob_ into spatial_out_blob_ and bilateral_out_blob_, the
    gemms into message_passing_ and pairwise_ and the sum (meanfield_iteration.cpp:90-167). Backward
    (cpp:201-228, meanfield_iteration.cpp:171-281): every iteration's diffs, the split's backward into
    bottom 0's diff and the softmax's into bottom 1's (both whatever propagate_down says), and the
    parameters' diffs summed on the host.

    There is no .cu: in GPU mode Layer::Forward_gpu runs this CPU code, but the inner Split,
    Softmax and Eltwise layers run through Layer::Forward and Backward, hence on the GPU. So the
    blobs the inner layers touch and the CPU code reads hold both copies: prob_ and pairwise_ (data
    and diff), the iterations' parameter copies, the image bottom's data; the CPU code's own blobs
    (spatial_out_blob_, bilateral_out_blob_, message_passing_, the norms) and the lattices are host
    memory; the iterations' outputs, the split tops' diffs and the softmax's scale_ are the GPU's.

    Estimated, not exact: the lattices' blur_neighbors_ hold (d+1) entries per vertex, and how many
    vertices a lattice has depends on the features (for the bilateral lattice, the image): counted at
    their most, d+1 per pixel. Arrays the lattice makes and frees within a call (its hash table while
    it is built, the splat and blur values of each filtering, (M+2) x C floats twice) are not counted.
    The bilateral lattice of the next forward is built before the one it replaces is freed (cpp:179)."""

    exact_bottoms = 3
    exact_tops = 1
    param_name = "multi_stage_meanfield_param"  # the layer's message, and its source file's name

    def param_shapes(self, bottoms):
        n, c, h, w = legacy_shape(self, bottoms[0])
        return [(1, 1, c, c)] * 3

    def features(self, bottoms):
        """The image values a pixel gives the bilateral lattice: its first 3 channels (cpp:238-241)."""
        return 3

    def reshape(self, bottoms):
        p = self.lp.multi_stage_meanfield_param
        self.check(p.num_iterations > 1, f"num_iterations is {p.num_iterations}: Caffe CHECKs it is greater than 1 "
                   "(multi_stage_meanfield.cpp:32)", fix="give num_iterations: 2 or more (CRF-RNN trains with 5, tests with 10)")
        n, c, h, w = legacy_shape(self, bottoms[0])
        image = legacy_shape(self, bottoms[2])
        self.check(image[0] >= n and image[1] >= 3 and image[2] * image[3] >= h * w,
                   f"bottom 2 {tuple(bottoms[2])} is read as the RGB image of each of the {n} images, 3 x {h} x {w} "
                   "values (multi_stage_meanfield.cpp:238-241): it is smaller than that",
                   fix="give the image the unaries' height and width as its third bottom")
        if not len(self.lp.blobs):
            self.assume("Caffe's LayerSetUp reads the initial kernel weights from the files spatial.par and "
                        f"bilateral.par ({c} values each) in the folder it runs in, and stops where they are not there "
                        "(multi_stage_meanfield.cpp:63-77); protoaudit takes them as there",
                        "put spatial.par and bilateral.par where Caffe runs")
        return [(n, c, h, w)]

    def touches(self, run):
        n, c, h, w = legacy_shape(self, run.bottoms[0])
        T = getattr(self.lp, self.param_name).num_iterations
        d = 2 + self.features(run.bottoms)  # the bilateral lattice's dimensions: position and features
        P, X, NP, CC = h * w, n * c * h * w, n * h * w, c * c
        gpu = run.mode == "gpu"
        backward = any(run.propagate_down) or any(run.param_propagate_down)
        shape = f"{n}x{c}x{h}x{w}"
        t = [touch.param(k, "data", "setup") for k in range(3)]
        if gpu:  # made on the host at setup (cpp:57-86), the solver's on the device
            t.append(touch.buffer("blobs_ (host)", 3 * CC, "setup", per_sample=False, device="host",
                                  note=f"3 x {c}x{c}, the parameters' host copies"))
        t += [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward"),
              touch.bottom(2, "data", "forward", device="host" if gpu else "device"),
              touch.top(0, "data", "forward")]
        spatial_exact, spatial_most = lattice_bytes(2, P)
        bilateral_exact, bilateral_most = lattice_bytes(d, P)
        t += [touch.buffer("spatial_norm_", P, "setup", per_sample=False, device="host", note=f"{h}x{w}"),
              touch.buffer("norm_feed_", P, "setup", per_sample=False, device="host", note=f"{h}x{w} ones"),
              touch.buffer("bilateral_kernel_buffer_", d * P, "setup", per_sample=False, device="host",
                           note=f"{d} x {h}x{w} floats"),
              touch.buffer("spatial_lattice_", spatial_most, "setup", per_sample=False, itemsize=1, device="host",
                           note=f"2-D lattice of {P:,} points: {spatial_exact:,} bytes exact, blur_neighbors_ "
                                "estimated at its most (3 vertices per point)"),
              touch.buffer("bilateral_norms_", NP, "forward", per_sample=True, device="host", note=f"{n}x{h}x{w}"),
              touch.buffer("bilateral_lattices_", n * bilateral_most, "forward", per_sample=True, itemsize=1,
                           device="host", note=f"{n} x {d}-D lattice of {P:,} points: {n * bilateral_exact:,} bytes exact, "
                                           f"blur_neighbors_ estimated at its most ({d + 1} vertices per point)")]
        if T > 1:
            t.append(touch.buffer("iteration_output_blobs_", (T - 1) * X, "forward", per_sample=True,
                                  note=f"{T - 1} x {shape}"))
        # each MeanfieldIteration, all T together
        host_fwd = [("spatial_out_blob_", X), ("bilateral_out_blob_", X), ("message_passing_", X),
                    ("pairwise_", X), ("prob_", X)]
        for name, size in host_fwd:
            t.append(touch.buffer(f"{name} x{T}", T * size, "forward", per_sample=True, device="host",
                                  note=f"{T} x {shape}"))
        t.append(touch.buffer(f"blobs_ of the iterations x{T}", T * 3 * CC, "forward", per_sample=False,
                              device="host", note=f"{T} x 3 x {c}x{c}"))
        t.append(touch.buffer(f"softmax sum_multiplier_ x{T}", T * c, "setup", per_sample=False, device="host",
                              note=f"{T} x {c}"))
        t.append(touch.buffer(f"softmax scale_ x{T}", T * NP, "forward", per_sample=True, note=f"{T} x {n}x{h}x{w}"))
        if gpu:  # what the inner GPU layers read or write besides
            t += [touch.buffer(f"prob_ (device) x{T}", T * X, "forward", per_sample=True, note=f"{T} x {shape}"),
                  touch.buffer(f"pairwise_ (device) x{T}", T * X, "forward", per_sample=True, note=f"{T} x {shape}"),
                  touch.buffer(f"blobs_ of the iterations (device) x{T}", T * 3 * CC, "forward", per_sample=False,
                               note=f"{T} x 3 x {c}x{c}"),
                  touch.buffer("softmax sum_multiplier_ (device)", T * c, "forward", per_sample=False,
                               note=f"{T} x {c}")]
        if not backward:
            return t
        t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward"), touch.bottom(1, "diff", "backward")]
        t += [touch.param(k, "diff", "backward") for k in range(3)]
        if gpu:
            t.append(touch.buffer("blobs_ diff (host)", 3 * CC, "backward", per_sample=False, device="host",
                                  note=f"3 x {c}x{c}, summed on the host (cpp:213-227)"))
        t.append(touch.buffer("split tops' diffs", T * X, "backward", per_sample=True, note=f"{T} x {shape}"))
        if T > 1:
            t.append(touch.buffer("iteration_output_blobs_ diff", (T - 1) * X, "backward", per_sample=True,
                                  note=f"{T - 1} x {shape}"))
        for name in ("spatial_out_blob_", "bilateral_out_blob_", "message_passing_", "pairwise_", "prob_"):
            t.append(touch.buffer(f"{name} diff x{T}", T * X, "backward", per_sample=True, device="host",
                                  note=f"{T} x {shape}"))
        t.append(touch.buffer(f"blobs_ diff of the iterations x{T}", T * 3 * CC, "backward", per_sample=False,
                              device="host", note=f"{T} x 3 x {c}x{c}"))
        if gpu:
            t += [touch.buffer(f"prob_ diff (device) x{T}", T * X, "backward", per_sample=True, note=f"{T} x {shape}"),
                  touch.buffer(f"pairwise_ diff (device) x{T}", T * X, "backward", per_sample=True,
                               note=f"{T} x {shape}")]
        return t


carry(__name__, FORK_V2, MultiStageMeanfield, Crop, ssd.SSDData, ssd.SSDWindowData, posenet.ImageData)
