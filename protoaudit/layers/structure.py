"""Layers that move, split, join or select data without learning: Split, Concat, Slice, Eltwise,
Flatten, Reshape, Crop, Tile, Reduction, ArgMax, Filter, BatchReindex, Parameter, Silence,
HDF5Output."""
from . import touch
from .base import Layer, canonical_axis, count, refuse_in_place, register
from .data import ASSUMED_CHANNELS


@register("Split")
class Split(Layer):
    exact_bottoms = 1
    min_tops = 1

    def reshape(self, bottoms):
        refuse_in_place(self)  # each Split top keeps its own diff
        return [tuple(bottoms[0])] * len(self.lp.top)

    def bottom_for(self, top_index, shape, bottom):
        return tuple(shape)

    def shares(self):
        """Every top is the bottom's data (ShareData); each keeps a diff of its own."""
        return [(j, 0, "data") for j in range(len(self.lp.top))]

    def touches(self, run):
        """Forward only shares the bottom's data; backward sums the tops' diffs into the bottom's."""
        return [x for x in super().touches(run) if x.stage != "forward"]


@register("Concat")
class Concat(Layer):
    min_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        p = self.lp.concat_param
        first = bottoms[0]
        self.check(not (p.HasField("axis") and p.HasField("concat_dim")),
                   "give either axis or concat_dim, not both")
        if p.HasField("concat_dim"):
            axis = p.concat_dim
            self.check(axis < len(first), f"concat_dim {axis} is out of range for {len(first)} axes")
        else:
            axis = canonical_axis(self, p.axis, len(first))
        total = 0
        for i, shape in enumerate(bottoms):
            if len(shape) != len(first):
                self.fail(f"all inputs must have the same number of axes: bottom 0 is {tuple(first)}, "
                          f"bottom {i} is {tuple(shape)}")
            for a, (d0, d) in enumerate(zip(first, shape)):
                if a != axis and d0 != d:
                    self.fail(f"all inputs must have the same shape except along axis {axis}: bottom 0 is "
                              f"{tuple(first)}, bottom {i} is {tuple(shape)}")
            total += shape[axis]
        return [tuple(first[:axis]) + (total,) + tuple(first[axis + 1:])]

    def axis_of(self, rank):
        """The axis joined for bottoms of `rank` axes, or None where the file's is out of range (the
        reshape's checks say why)."""
        p = self.lp.concat_param
        axis = p.concat_dim if p.HasField("concat_dim") else p.axis + rank if p.axis < 0 else p.axis
        return axis if 0 <= axis < rank else None

    def bottoms_for(self, top_index, shape, bottoms, labels):
        """The bottoms that join into `shape`: one that fits it beside the axis keeps its width unless
        it is a label; the others (labels whose dataset is absent, an image or as wide as fitting()
        made them) share what is left of the axis evenly (DeepFashion's x1, y1, x2 and y2 into one
        box of 4)."""
        axis = self.axis_of(len(shape))
        if axis is None:
            return None
        fits = [label != "label" and len(b) == len(shape)
                and all(d == w for a, (d, w) in enumerate(zip(b, shape)) if a != axis)
                for b, label in zip(bottoms, labels)]
        left = shape[axis] - sum(b[axis] for b, fit in zip(bottoms, fits) if fit)
        rest = fits.count(False)
        if not rest or left <= 0 or left % rest:
            return None
        width = tuple(shape[:axis]) + (left // rest,) + tuple(shape[axis + 1:])
        return [None if fit else width for fit in fits]

    def fitting(self, bottoms, kinds):
        """Labels joined beside the net's own bottoms: each the first other's shape, one wide along the
        axis (a gaze net's head pose beside its 500 features)."""
        first = next((b for b, kind in zip(bottoms, kinds) if kind != "label"), None)
        axis = None if first is None else self.axis_of(len(first))
        if axis is None:
            return None
        one = tuple(first[:axis]) + (1,) + tuple(first[axis + 1:])
        return [one if kind == "label" else None for kind in kinds], "one wide along the axis it is joined on"

    def shares(self):
        """With a single bottom Caffe shares its data and diff instead of copying."""
        return [(0, 0, "data"), (0, 0, "diff")] if len(self.lp.bottom) == 1 else []


@register("Slice")
class Slice(Layer):
    exact_bottoms = 1
    min_tops = 1

    def reshape(self, bottoms):
        p = self.lp.slice_param
        shape = bottoms[0]
        self.check(not (p.HasField("axis") and p.HasField("slice_dim")), "give either axis or slice_dim, not both")
        if p.HasField("slice_dim"):
            axis = p.slice_dim
            self.check(axis < len(shape), f"slice_dim {axis} is out of range for {len(shape)} axes")
        else:
            axis = canonical_axis(self, p.axis, len(shape))
        size, n = shape[axis], len(self.lp.top)
        if p.slice_point:
            points = list(p.slice_point)
            self.check(len(points) == n - 1, f"{len(points)} slice points make {len(points) + 1} tops, "
                       f"but the layer has {n}")
            self.check(n <= size, f"cannot slice axis {axis} of size {size} into {n} tops")
            sizes, prev = [], 0
            for point in points:
                self.check(point > prev, f"slice points {points} must strictly increase from above 0")
                sizes.append(point - prev)
                prev = point
            sizes.append(size - prev)  # may be 0 (an empty top); negative is a failed Reshape
            self.check(sizes[-1] >= 0, f"slice point {prev} lies beyond axis {axis} of size {size}")
        else:
            self.check(size % n == 0, f"axis {axis} of size {size} cannot be sliced into {n} equal parts")
            sizes = [size // n] * n
        return [tuple(shape[:axis]) + (s,) + tuple(shape[axis + 1:]) for s in sizes]

    def axis_of(self, rank):
        """The axis sliced for a bottom of `rank` axes, or None where the file's is out of range (the
        reshape's checks say why)."""
        p = self.lp.slice_param
        axis = p.slice_dim if p.HasField("slice_dim") else p.axis + rank if p.axis < 0 else p.axis
        return axis if 0 <= axis < rank else None

    def fitting(self, bottoms, kinds):
        """Absent data too narrow for its slices: as wide as its pieces need, the last (or each, in an
        even split) as wide as the narrowest given piece, or a label's one value and an image's colour
        channels (a CAPTCHA's 6 characters, 4 colour frames of a clip, 12 channels)."""
        p, n, shape = self.lp.slice_param, len(self.lp.top), bottoms[0]
        axis = self.axis_of(len(shape))
        if kinds[0] is None or axis is None:
            return None
        points = list(p.slice_point)
        widths = [b - a for a, b in zip([0] + points, points)]
        if points and min(widths) < 1:
            return None
        each = min(widths) if points else ASSUMED_CHANNELS if kinds[0] == "image" else 1
        total = points[-1] + each if points else n * each
        return ([tuple(shape[:axis]) + (total,) + tuple(shape[axis + 1:])],
                f"{total} wide along the axis its {n} slices are cut from")

    def bottom_for(self, top_index, shape, bottom):
        """The bottom whose slice `top_index` is `shape`: its width along the axis the pieces' widths
        (the slice points'; the last piece, unless it is this one, keeps its width in `bottom`, at least
        1), an even split's n times this one's."""
        p, n = self.lp.slice_param, len(self.lp.top)
        axis = self.axis_of(len(shape))
        if axis is None:
            return None
        points = list(p.slice_point)
        if not points:
            total = shape[axis] * n
        elif top_index == n - 1:
            total = points[-1] + shape[axis]
        elif shape[axis] != points[top_index] - (points[top_index - 1] if top_index else 0):
            return None  # no bottom gives this piece that width
        else:
            last = bottom[axis] - points[-1] if axis < len(bottom) else 0
            total = points[-1] + max(last, 1)
        return tuple(shape[:axis]) + (total,) + tuple(shape[axis + 1:])

    def shares(self):
        """With a single top Caffe shares the bottom's data and diff instead of copying."""
        return [(0, 0, "data"), (0, 0, "diff")] if len(self.lp.top) == 1 else []


@register("Eltwise")
class Eltwise(Layer):
    min_bottoms = 2
    exact_tops = 1

    def reshape(self, bottoms):
        p = self.lp.eltwise_param
        self.check(not p.coeff or len(p.coeff) == len(bottoms), "Eltwise takes one coefficient per bottom blob")
        self.check(not (p.coeff and p.operation == 0), "Eltwise PROD does not take coefficients")
        for i, shape in enumerate(bottoms[1:], 1):
            if tuple(shape) != tuple(bottoms[0]):
                self.fail(f"bottom {i} has shape {tuple(shape)}, but bottom 0 has {tuple(bottoms[0])}",
                          fix="Eltwise needs bottoms of identical shape")
        return [tuple(bottoms[0])]

    def fitting(self, bottoms, kinds):
        """Labels combined with the net's own blobs: the first other's shape (a coverage mask
        multiplied into a score map)."""
        other = next((b for b, kind in zip(bottoms, kinds) if kind != "label"), None)
        if other is None:
            return None
        return [tuple(other) if kind == "label" else None for kind in kinds], "the shape of the blob it is combined with"

    def touches(self, run):
        """MAX keeps the index of each output's winning bottom (max_idx_, int32)."""
        t = super().touches(run)
        if self.lp.eltwise_param.operation == 2:
            t.append(touch.buffer("max_idx_", count(run.tops[0]), "forward", per_sample=True))
        return t


@register("Flatten")
class Flatten(Layer):
    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        refuse_in_place(self)
        p = self.lp.flatten_param
        shape = bottoms[0]
        start = canonical_axis(self, p.axis, len(shape))
        end = canonical_axis(self, p.end_axis, len(shape))
        return [tuple(shape[:start]) + (count(shape, start, end + 1),) + tuple(shape[end + 1:])]

    def bottom_for(self, top_index, shape, bottom):
        """A bottom already as flat as `shape` (flattening from axis 1 to the end, the default, leaves
        an (N, K) blob as it is): a label flattened for its loss (a denoising autoencoder's target)."""
        p = self.lp.flatten_param
        return tuple(shape) if len(shape) == 2 and p.axis == 1 and p.end_axis == -1 else None

    def shares(self):
        return [(0, 0, "data"), (0, 0, "diff")]


@register("Reshape")
class Reshape(Layer):
    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        refuse_in_place(self)
        p = self.lp.reshape_param
        shape = tuple(bottoms[0])
        dims = list(p.shape.dim)
        self.check(dims.count(-1) <= 1, "new shape contains multiple -1 dims")
        start = p.axis if p.axis >= 0 else len(shape) + p.axis + 1
        self.check(0 <= start <= len(shape), f"axis {p.axis} out of range for {len(shape)} axes")
        self.check(p.num_axes >= -1, "num_axes must be >= 0, or -1 for all")
        end = len(shape) if p.num_axes == -1 else start + p.num_axes
        self.check(end <= len(shape), f"axis {p.axis} + num_axes {p.num_axes} exceeds {len(shape)} axes")
        top = list(shape[:start]) + dims + list(shape[end:])
        for i, d in enumerate(dims):
            if d == 0:
                self.check(start + i < len(shape), f"dim {i} is 0 (copy) but the bottom has no axis {start + i}")
                top[start + i] = shape[start + i]
        if -1 in dims:
            explicit = count([d for d in top if d != -1])
            self.check(explicit > 0 and count(shape) % explicit == 0,
                       f"cannot reshape {shape} ({count(shape)} elements) into {tuple(dims)}")
            top[start + dims.index(-1)] = count(shape) // explicit
        self.check(count(top) == count(shape),
                   f"output count {count(top)} of {tuple(top)} must match input count {count(shape)} of {shape}")
        return [tuple(top)]

    def fitting(self, bottoms, kinds):
        """A label reshaped to a given size: its batch by the values per item that size holds (MDNet's
        label, reshaped to (N, 1, 49, 1): (N, 49)); None where the size holds -1 or the axes it keeps
        (axis, num_axes) are not the whole blob."""
        p, shape = self.lp.reshape_param, bottoms[0]
        dims = list(p.shape.dim)
        if kinds[0] != "label" or -1 in dims or p.axis != 0 or p.num_axes != -1 or not dims:
            return None
        top = [shape[i] if d == 0 and i < len(shape) else d for i, d in enumerate(dims)]
        batch = shape[0]
        if any(d < 1 for d in top) or count(top) % batch:
            return None
        return [(batch, count(top) // batch)], f"{count(top) // batch} values an item, the size it is reshaped to"

    def shares(self):
        return [(0, 0, "data"), (0, 0, "diff")]


@register("Crop")
class Crop(Layer):
    exact_bottoms = 2
    exact_tops = 1

    def reshape(self, bottoms):
        p = self.lp.crop_param
        big, small = bottoms
        axis = canonical_axis(self, p.axis, len(big))
        self.check(len(small) >= len(big), f"bottom 1 {tuple(small)} needs at least the {len(big)} axes of "
                   f"bottom 0 {tuple(big)}: its sizes from axis {axis} on are the crop's")
        spatial = len(big) - axis
        offsets = list(p.offset)
        self.check(len(offsets) in (0, 1, spatial),
                   f"crop offset must be given 0, 1 or {spatial} times (once per cropped axis)")
        top = list(big)
        for i in range(axis, len(big)):
            offset = 0 if not offsets else offsets[0] if len(offsets) == 1 else offsets[i - axis]
            self.check(big[i] - offset >= small[i],
                       f"invalid crop on axis {i}: {big[i]} - offset {offset} is smaller than {small[i]}")
            top[i] = small[i]
        return [tuple(top)]

    def touches(self, run):
        """Reshape fills three int vectors of one entry per axis (offsets, src_strides_,
        dest_strides_); backward zeroes the bottom's diff before copying into it."""
        t = super().touches(run)
        return t + [touch.buffer(name, len(run.bottoms[0]), "setup", per_sample=False)
                    for name in ("offsets", "src_strides_", "dest_strides_")]


@register("Tile")
class Tile(Layer):
    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        p = self.lp.tile_param
        shape = list(bottoms[0])
        axis = canonical_axis(self, p.axis, len(shape))
        self.check(p.HasField("tiles"), "the number of tiles must be specified", fix="set tile_param { tiles: N }")
        self.check(p.tiles > 0, "the number of tiles must be positive")
        shape[axis] *= p.tiles
        return [tuple(shape)]


@register("Reduction")
class Reduction(Layer):
    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        axis = canonical_axis(self, self.lp.reduction_param.axis, len(bottoms[0]))
        return [tuple(bottoms[0][:axis])]

    def touches(self, run):
        """SUM and MEAN set sum_multiplier_ to ones in Reshape: one per element from the axis on
        (reduction_layer.cpp:28-35)."""
        t = super().touches(run)
        p = self.lp.reduction_param
        if p.operation in (1, 4):  # SUM, MEAN
            axis = canonical_axis(self, p.axis, len(run.bottoms[0]))
            t.append(touch.buffer("sum_multiplier_", count(run.bottoms[0], axis), "setup", per_sample=False))
        return t


@register("ArgMax")
class ArgMax(Layer):
    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        p = self.lp.argmax_param
        shape = tuple(bottoms[0])
        self.check(p.top_k >= 1, "top_k must be at least 1")
        if p.HasField("axis"):
            axis = canonical_axis(self, p.axis, len(shape))
            self.check(p.top_k <= shape[axis], f"top_k {p.top_k} must be at most the axis size {shape[axis]}")
            top = list(shape)
            top[axis] = p.top_k
        else:
            self.check(p.top_k <= count(shape, 1), f"top_k {p.top_k} must be at most {count(shape, 1)}")
            top = [1] * max(len(shape), 3)
            top[0] = shape[0]
            top[2] = p.top_k
            if p.out_max_val:
                top[1] = 2
        return [tuple(top)]


@register("Filter")
class Filter(Layer):
    """The number of items kept depends on the selector's values: Caffe sets up (and protoaudit
    counts) the worst case, every item kept."""

    min_bottoms = 2
    min_tops = 1

    def reshape(self, bottoms):
        self.check(len(self.lp.top) == len(bottoms) - 1, "Filter needs one top per bottom, less the selector")
        selector = bottoms[-1]
        self.check(all(d == 1 for d in selector[1:]), "selector dimensions must be singletons (1), except the first")
        for shape in bottoms[:-1]:
            self.check(shape[0] == selector[0], "each bottom must have the selector's first dimension")
        return [tuple(shape) for shape in bottoms[:-1]]


@register("BatchReindex")
class BatchReindex(Layer):
    exact_bottoms = 2
    exact_tops = 1

    def reshape(self, bottoms):
        self.check(len(bottoms[1]) == 1, "the index blob (bottom 1) must have one axis")
        return [(bottoms[1][0],) + tuple(bottoms[0][1:])]


@register("Parameter")
class Parameter(Layer):
    exact_bottoms = 0
    exact_tops = 1

    def reshape(self, bottoms):
        return [tuple(self.lp.parameter_param.shape.dim)]

    def param_shapes(self, bottoms):
        return [tuple(self.lp.parameter_param.shape.dim)]

    def touches(self, run):
        """None: no filler, and the forward only points the top at the blob (ShareData, ShareDiff;
        parameter_layer.hpp:27-42); what reads the top allocates the blob's data."""
        return []


@register("Silence")
class Silence(Layer):
    min_bottoms = 1
    exact_tops = 0

    def reshape(self, bottoms):
        return []


@register("HDF5Output")
class HDF5Output(Layer):
    exact_bottoms = 2
    exact_tops = 0

    def reshape(self, bottoms):
        return []
