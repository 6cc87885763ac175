"""RCF's Caffe's own layer (yun-liu/rcf at ce460ff): AutoCrop, as its source shapes and checks it.

File and line references are to include/caffe/layers/auto_crop_layer.hpp,
src/caffe/layers/auto_crop_layer.cpp/.cu, include/caffe/util/coords.hpp and the coord_map() of
include/caffe/layers/*.hpp at that commit. AutoCrop is FCN's first Crop layer (the one HED's Caffe
still calls Crop): it crops bottom 0 to bottom 1's height and width at the offset that aligns them,
found by composing the coordinate maps of the layers between the two bottoms and the blob they
come from. The fork's ImageLabelmapData is HED's (protoaudit.layers.hed).
"""
from . import touch
from .base import Layer, canonical_axis, float32, legacy_shape, register
from .conv import geometry
from .pooling import pooling_geometry

FORK = "rcf"
SOURCE = "RCF's Caffe"

# The layer types whose coord_map() RCF's Caffe defines as the identity: concat_layer.hpp:30-32,
# eltwise_layer.hpp:32-34, lrn_layer.hpp:36-38, mvn_layer.hpp:29-31, slice_layer.hpp:32-34,
# softmax_layer.hpp:29-31, split_layer.hpp:30-32, and NeuronLayer's (neuron_layer.hpp:29-31), which
# these types derive from (their cuDNN versions derive from them). Any other type's is Layer's,
# NOT_IMPLEMENTED (layer.hpp:322-326): Caffe stops where AutoCrop's walk meets one.
IDENTITY_TYPES = frozenset({
    "Concat", "Eltwise", "LRN", "MVN", "Slice", "Softmax", "Split",
    "AbsVal", "BNLL", "Dropout", "ELU", "Exp", "Log", "Power", "PReLU", "ReLU", "Sigmoid", "TanH", "Threshold",
})
IDENTITY = ((1.0, 0.0), (1.0, 0.0))  # DiagonalAffineMap::identity(2) (coords.hpp:15-17)
AXES = ("height", "width")


def compose(left, right):
    """DiagonalAffineMap::compose (coords.hpp:19-26, 37-41): (a, b) then (c, d) is (ac, ad + b) per
    axis, in float (Dtype)."""
    return tuple((float32(a * c), float32(float32(a * d) + b)) for (a, b), (c, d) in zip(left, right))


def inverse(m):
    """DiagonalAffineMap::inv (coords.hpp:27-32, 42-44): (1 / a, -b / a) per axis, in float."""
    return tuple((float32(1 / a), float32(-b / a)) for a, b in m)


def filter_map(kernel, stride, pad):
    """FilterMap (coords.hpp:48-57): (stride, (kernel - 1) / 2 - pad) per axis, in float."""
    return tuple((float32(s), float32(float32((k - 1) / 2) - p)) for k, s, p in zip(kernel, stride, pad))


@register("AutoCrop", fork=FORK)
class AutoCrop(Layer):
    """AutoCropLayer: bottom 0 cropped to bottom 1's height and width.

    Reshape: the top is (num, channels) of bottom 0 and (height, width) of bottom 1
    (auto_crop_layer.cpp:78-83), read through Blob's legacy accessors (at most 4 axes).
    LayerSetUp (cpp:13-76) walks back from each bottom along first bottoms (the layer that first
    made each blob: in-place layers are passed over) to the blob where the walks meet, composing the
    coordinate map of each layer passed (`coord_map`), and CHECKs that the map from bottom 0 to
    bottom 1 has scale 1 and a whole, non-negative offset on both axes, which is the crop
    (crop_h_, crop_w_). There is no CHECK that the crop fits inside bottom 0 (a crop that does not
    reads past its rows: cpp:85-99, cu:26-38); protoaudit, like Caffe, lets it be.

    It allocates nothing of its own: no parameters, no buffers (auto_crop_layer.hpp:50 holds two
    ints). Forward copies rows of bottom 0's data into the top (cpp:85-99, cu:25-38); backward takes
    bottom 0's diff before it asks whether bottom 0 needs it (cpp:104-105, cu:43-44), then zeroes
    it and copies the top's diff into it (cpp:106-117, cu:47-55). Bottom 1 gives only its shape:
    neither pass touches its data or diff."""

    exact_bottoms = 2  # auto_crop_layer.hpp:30-31
    exact_tops = 1
    walks_net = True
    crop = (0, 0)  # crop_h_, crop_w_, set by walk_net

    def walk_net(self, layers, blobs, bottoms):
        """AutoCropLayer::LayerSetUp (cpp:13-76)."""
        def maker(index):
            """down_map (cpp:16-27): the first layer with the blob among its tops (in-place layers
            after it are passed over); None for a legacy net input, which RCF's Caffe never has (it
            makes `input:` an Input layer: upgrade_proto.cpp:953-990)."""
            producer = blobs[index].producer
            return layers[producer] if producer >= 0 else None

        first, second = bottoms[0], bottoms[1]
        path = {first}  # cpp:28-41
        index = first
        while (node := maker(index)) is not None and node.bottoms:
            index = node.bottoms[0]
            path.add(index)
        meet = second  # cpp:42-51
        while meet not in path:
            node = maker(meet)
            self.check(node is not None and node.bottoms,
                       f"cannot align apparently disconnected blobs (Caffe's CHECK): walking back from bottom 1 "
                       f"('{blobs[second].name}') along first bottoms reaches '{blobs[meet].name}', "
                       + ("a net input" if node is None else f"made by layer '{node.name}', which has no bottoms")
                       + f", without meeting the blobs bottom 0 ('{blobs[first].name}') comes from",
                       fix="AutoCrop aligns bottom 0 to bottom 1 through the layers both come from: give it two "
                           "bottoms that share an input along their layers' first bottoms")
            meet = node.bottoms[0]
        maps = []
        for start in (first, second):  # cpp:52-61
            m, index = IDENTITY, start
            while index != meet:
                node = maker(index)
                m = compose(m, self.coord_map(node))
                index = node.bottoms[0]
            maps.append(m)
        crop_map = compose(maps[1], inverse(maps[0]))  # cpp:62-64
        for axis, (scale, offset) in zip(AXES, crop_map):  # cpp:65-73, CHECK_DOUBLE_EQ and CHECK_LE
            self.check(scale == 1, f"bottom 0 ('{blobs[first].name}') and bottom 1 ('{blobs[second].name}') are "
                       f"at different scales on the {axis} axis (bottom 1's coordinates are {scale:g} times "
                       "bottom 0's): AutoCrop aligns only blobs of the same scale (Caffe's CHECK_DOUBLE_EQ(scale, 1))",
                       fix="upsample bottom 0 back to bottom 1's scale (a Deconvolution with the stride the layers "
                           "between them reduce by) before cropping it")
            self.check(offset <= 0, f"Negative crop width (Caffe's CHECK): on the {axis} axis bottom 1 "
                       f"('{blobs[second].name}') starts {offset:g} pixels before bottom 0 "
                       f"('{blobs[first].name}'), so no crop of bottom 0 covers it",
                       fix="pad bottom 0's layers more, or crop the other way")
            self.check(offset == round(offset), f"the crop on the {axis} axis would be {-offset:g} pixels, not a "
                       "whole number (Caffe's CHECK_DOUBLE_EQ): the layers between the bottoms shift them by "
                       "half a pixel", fix="make the kernels, strides and pads between the bottoms align to whole "
                       "pixels")
        self.crop = tuple(-round(offset) for _, offset in crop_map)  # cpp:74-75

    def coord_map(self, node):
        """The coord_map() of the layer `node` (a LayerNode of the net built so far) as RCF's Caffe
        defines it for its type."""
        kind = node.type
        if kind in IDENTITY_TYPES:
            return IDENTITY
        if kind in ("Convolution", "Deconvolution"):
            # conv_layer.hpp:69-77 (inverted), deconv_layer.hpp:36-44: FilterMap of the dilated
            # kernel's extent, stride and pad of the first two spatial axes
            geo = geometry(node.impl, node.impl.lp.convolution_param, node.bottom_shapes[0])
            if len(geo.kernel) < 2:
                self.fail(f"layer '{node.name}' ({kind}), between the blobs AutoCrop aligns, has "
                          f"{len(geo.kernel)} spatial axis: its coord_map reads a second one it does not have "
                          "(conv_layer.hpp:69-77)", fix="AutoCrop aligns 2D blobs: crop with Crop and its offset")
            extent = [d * (k - 1) + 1 for k, d in zip(geo.kernel[:2], geo.dilation[:2])]
            m = filter_map(extent, geo.stride[:2], geo.pad[:2])
            return m if kind == "Deconvolution" else inverse(m)
        if kind == "Pooling":  # pooling_layer.hpp:37-40
            kernel, stride, pad = pooling_geometry(node.impl, node.impl.lp.pooling_param, node.bottom_shapes[0])
            return inverse(filter_map(kernel, stride, pad))
        if kind == "Crop":  # crop_layer.hpp:34-39: the offsets of axes 0 and 1 (crop_layer.cpp:40-64)
            p = node.impl.lp.crop_param
            shape = node.bottom_shapes[0]
            start = canonical_axis(node.impl, p.axis, len(shape))
            offsets = list(p.offset)
            out = []
            for i in (0, 1):
                offset = 0
                if i >= start and offsets:
                    offset = offsets[0] if len(offsets) == 1 else offsets[i - start]
                out.append((1.0, float32(-offset)))
            return tuple(out)
        if kind == "AutoCrop" and isinstance(node.impl, AutoCrop):  # auto_crop_layer.hpp:33-38
            return tuple((1.0, float32(-c)) for c in node.impl.crop)
        self.fail(f"layer '{node.name}' ({kind}) lies between the blobs AutoCrop aligns, and {SOURCE} has no "
                  f"coordinate map for a {kind} layer (Layer::coord_map is NOT_IMPLEMENTED, layer.hpp:322-326): "
                  "Caffe stops here",
                  fix=f"AutoCrop passes only layers of the types {SOURCE} maps (convolution, deconvolution, "
                      "pooling, crops, element-wise and neuron layers) and in-place layers: use Crop with its "
                      "offset instead")

    def reshape(self, bottoms):
        big = legacy_shape(self, bottoms[0])
        small = legacy_shape(self, bottoms[1])
        return [(big[0], big[1], small[2], small[3])]

    def touches(self, run):
        return [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward"),
                touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
