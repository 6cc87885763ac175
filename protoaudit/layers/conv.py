"""Convolution, Deconvolution and Im2col: BaseConvolutionLayer's geometry (N-D, groups, dilation)."""
import functools
from typing import NamedTuple

from . import touch
from .base import CUDNN_2015_FORKS, Layer, canonical_axis, count, register


def cdiv(a, b):
    """C++ integer division (truncates toward zero), as Caffe's shape arithmetic uses."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


class Geometry(NamedTuple):
    axis: int  # the channel axis
    kernel: tuple
    stride: tuple
    pad: tuple
    dilation: tuple

    def conv_out(self, sizes):
        return tuple(
            cdiv(size + 2 * p - (d * (k - 1) + 1), s) + 1
            for size, k, s, p, d in zip(sizes, self.kernel, self.stride, self.pad, self.dilation)
        )

    def deconv_out(self, sizes):
        return tuple(
            s * (size - 1) + (d * (k - 1) + 1) - 2 * p
            for size, k, s, p, d in zip(sizes, self.kernel, self.stride, self.pad, self.dilation)
        )


def geometry(layer, param, shape, *, kernel_required=True):
    """Kernel, stride, pad and dilation per spatial axis, with Caffe's checks and defaults."""
    axis = canonical_axis(layer, param.axis, len(shape))
    n = len(shape) - axis - 1
    layer.check(n >= 0, "the bottom has no spatial axes after the channel axis")
    kernel = _per_axis(layer, param, n, "kernel", param.kernel_size, None if kernel_required else 1)
    layer.check(all(k > 0 for k in kernel), "filter dimensions must be nonzero")
    stride = _per_axis(layer, param, n, "stride", param.stride, 1)
    layer.check(all(s > 0 for s in stride), "stride dimensions must be nonzero")
    pad = _per_axis(layer, param, n, "pad", param.pad, 0)
    dilation = _per_axis(layer, param, n, "dilation", param.dilation, 1)
    return Geometry(axis, kernel, stride, pad, dilation)


# the fields that give a value per axis: name -> (the repeated field, the 2D pair, if any)
_PER_AXIS = {"kernel": ("kernel_size", ("kernel_h", "kernel_w")), "stride": ("stride", ("stride_h", "stride_w")),
             "pad": ("pad", ("pad_h", "pad_w")), "dilation": ("dilation", None)}


def _per_axis(layer, param, n, name, values, default):
    """One of geometry's values for each of `n` spatial axes: the 2D pair (name_h, name_w) if
    set, else `values` (given once, or once per axis) or `default` (None: it must be given)."""
    field, pair = _PER_AXIS[name]
    if pair is not None and (param.HasField(pair[0]) or param.HasField(pair[1])):
        layer.check(n == 2, f"{name}_h and {name}_w can only be used for 2D convolution")
        layer.check(not values, f"either {name} or {name}_h/{name}_w should be specified; not both")
        return (getattr(param, pair[0]), getattr(param, pair[1]))
    values = tuple(values)
    if len(values) not in ((0, 1, n) if default is not None else (1, n)):
        layer.fail(f"{field} must be specified once, or once per spatial dimension ({field} given "
                   f"{len(values)} times; {n} spatial dimensions)")
    if not values:
        return (default,) * n
    return values * n if len(values) == 1 else values


CUDNN_WORKSPACE_LIMIT = 8 * 1024 * 1024  # cudnn_conv_layer.cpp: workspace_limit_bytes
CUDNN_STREAMS_PER_GROUP = 3


class _ConvolutionBase(Layer):
    min_bottoms = 1
    min_tops = 1
    equal_bottoms_tops = True
    transposed = False
    workspace_limit = CUDNN_WORKSPACE_LIMIT  # each cuDNN algorithm is picked under this many bytes
    workspace_groups = None  # the groups given streams and workspaces of their own: all (None), or at most this

    @functools.cached_property
    def param(self):
        return self.lp.convolution_param

    def _setup(self, bottoms):
        """Geometry and checks, worked out once for these bottoms: reshape, param_shapes and
        every pass's touches ask again."""
        bottoms = tuple(bottoms)  # (a list while building, the node's tuple afterwards)
        known = self.__dict__.get("_setup_for")
        if known is not None and known[0] == bottoms:
            return known[1]
        shape = bottoms[0]
        geo = geometry(self, self.param, shape)
        channels = shape[geo.axis]
        num_output = self.param.num_output
        group = self.param.group
        self.check(num_output > 0, "num_output must be set and positive")
        if group <= 0 or channels % group:
            self.fail(f"{channels} input channels are not divisible by group {group}")
        if num_output % group:
            self.fail(f"num_output {num_output} is not divisible by group {group}")
        for other in bottoms[1:]:
            self.check(tuple(other) == tuple(shape), "all bottoms must have the same shape")
        self._setup_for = bottoms, (geo, channels, num_output, group)
        return geo, channels, num_output, group

    def reshape(self, bottoms):
        geo, channels, num_output, group = self._setup(bottoms)
        spatial = bottoms[0][geo.axis + 1:]
        out = geo.deconv_out(spatial) if self.transposed else geo.conv_out(spatial)
        top = tuple(bottoms[0][: geo.axis]) + (num_output,) + out
        return [top for _ in bottoms]

    def param_shapes(self, bottoms):
        geo, channels, num_output, group = self._setup(bottoms)
        if self.transposed:
            weight = (channels, num_output // group) + geo.kernel
        else:
            weight = (num_output, channels // group) + geo.kernel
        return [weight, (num_output,)] if self.param.bias_term else [weight]

    # --- what it allocates ------------------------------------------------------------------
    def uses_cudnn(self, run):
        """Caffe's layer factory: cuDNN in a cuDNN build unless the layer asks for CAFFE or dilates.
        The 2015 forks' factory has no cuDNN Deconvolution, nor has caffe-priv's (its
        layer_factory.cpp registers a DeformableConvolution creator in its place), nor the SSD fork's
        (its layer_factory.cpp registers none, and it has no cudnn_deconv_layer), nor C3D v1.1's
        (deconv_layer.cpp:82 registers the class itself), nor YOLOv2's port's (June 2016 BVLC's
        deconv_layer.cpp:82 does the same): there it is always Caffe's."""
        if self.transposed and (self.ctx.schema in CUDNN_2015_FORKS
                                or self.ctx.schema in ("priv", "ssd", "c3d", "yolov2")):
            return False
        geo = self._setup(run.bottoms)[0]
        return (run.mode == "gpu" and run.engine == "cudnn" and self.param.engine != 1
                and all(d == 1 for d in geo.dilation))

    def touches(self, run):
        geo, channels, num_output, group = self._setup(run.bottoms)
        if self.ctx.schema in CUDNN_2015_FORKS and self.uses_cudnn(run):
            return self.cudnn_2015_touches(run, geo, channels)
        top_spatial = count(run.tops[0], geo.axis + 1)
        one_by_one = all(k == 1 for k in geo.kernel) and all(s == 1 for s in geo.stride) and not any(geo.pad)
        if self.uses_cudnn(run):
            # cuDNN adds the bias itself: the multiplier Reshape sets stays on the host; its
            # backward writes the diffs it is asked for, no more
            t = super().touches(run) + [self.workspace(run, geo, channels, num_output, group)]
            if self.param.bias_term:
                t.append(touch.buffer("bias_multiplier_", top_spatial, "setup", per_sample=False, device="host"))
            return t
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        if self.param.bias_term:  # set to ones in Reshape
            t.append(touch.buffer("bias_multiplier_", top_spatial, "setup", per_sample=False))
        t += [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        t += [touch.top(j, "data", "forward") for j in range(len(run.tops))]
        t += [touch.top(j, "diff", "backward") for j in range(len(run.tops))]
        t.append(touch.param(0, "diff", "backward"))  # taken as mutable before any check
        if self.param.bias_term and run.param_propagate_down[1]:
            t.append(touch.param(1, "diff", "backward"))
        t += [touch.bottom(j, "diff", "backward") for j in range(len(run.bottoms))]  # likewise
        return t + self.col_buffer_touches(run, geo, channels, num_output, one_by_one)

    def col_buffer_touches(self, run, geo, channels, num_output, one_by_one):
        """The im2col buffer, for one image: (C_in * prod(kernel)) x prod(out spatial) floats.

        The forward GEMM skips it for a 1x1, stride-1, unpadded kernel, but the backward-data GEMM
        takes it as mutable before that check, so such a layer allocates it in backward."""
        spatial = run.bottoms[0][geo.axis + 1:]
        out = geo.conv_out(spatial)
        elements = channels * count(geo.kernel) * count(out)
        note = "x".join(map(str, (channels,) + geo.kernel + out)) + " (C_in x kernel x output, one image)"
        col = lambda stage: touch.buffer("col_buffer_", elements, stage, per_sample=False, note=note)  # noqa: E731
        if not one_by_one:
            return [col("forward")]
        return [col("backward")] if any(run.propagate_down) else []

    def cudnn_2015_touches(self, run, geo, channels):
        """The 2015 forks' cuDNN (v2 API) convolution (caffe-segnet's, caffe-fast-rcnn's) differs from BVLC's: Forward_gpu grows ONE
        workspace per layer to what the forward algorithm needs, picked under a limit of
        kh*kw*C_in ints plus a byte (protoaudit takes that limit, less the byte); backward uses
        none, and writes the weight, bias and bottom diffs only where they are asked for. Its
        bias_multiplier_ (set on the host in Reshape) never reaches the device."""
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        t += [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        t += [touch.top(j, "data", "forward") for j in range(len(run.tops))]
        t.append(touch.buffer("workspace", channels * count(geo.kernel), "forward", per_sample=False,
                              kind="workspace"))
        t += [touch.top(j, "diff", "backward") for j in range(len(run.tops))]
        t += [touch.param(k, "diff", "backward") for k, down in enumerate(run.param_propagate_down) if down]
        t += [touch.bottom(j, "diff", "backward") for j, down in enumerate(run.propagate_down) if down]
        return t

    def workspace(self, run, geo, channels, num_output, group):
        """cuDNN's workspace: max of the forward, backward-data and backward-filter algorithms'
        needs, each picked under Caffe's 8 MiB limit (workspace_limit), times group (or
        workspace_groups, where a fork caps them) times 3 streams. protoaudit takes a GEMM
        algorithm's need (one group's im2col for one image) capped at the limit."""
        spatial = run.bottoms[0][geo.axis + 1:]
        out = geo.deconv_out(spatial) if self.transposed else geo.conv_out(spatial)
        per_group = (channels // group) * count(geo.kernel) * count(out if not self.transposed else spatial) * 4
        per_group = min(per_group, self.workspace_limit)
        groups = group if self.workspace_groups is None else min(group, self.workspace_groups)
        return touch.buffer("workspace", per_group * groups * CUDNN_STREAMS_PER_GROUP // 4, "setup",
                            per_sample=False, kind="workspace")


@register("Convolution")
class Convolution(_ConvolutionBase):
    pass


@register("Deconvolution")
class Deconvolution(_ConvolutionBase):
    transposed = True

    def col_buffer_touches(self, run, geo, channels, num_output, one_by_one):
        """Deconvolution's forward is convolution's backward-data GEMM: its column buffer,
        (C_out * prod(kernel)) x prod(in spatial) floats for one image, is taken even for 1x1."""
        spatial = run.bottoms[0][geo.axis + 1:]
        elements = num_output * count(geo.kernel) * count(spatial)
        note = "x".join(map(str, (num_output,) + geo.kernel + tuple(spatial))) + " (C_out x kernel x input, one image)"
        return [touch.buffer("col_buffer_", elements, "forward", per_sample=False, note=note)]


@register("Im2col")
class Im2col(Layer):
    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        shape = bottoms[0]
        geo = geometry(self, self.lp.convolution_param, shape)
        self.check(len(shape) - geo.axis - 1 >= 1, f"Im2col needs a spatial axis after the channel axis "
                   f"{geo.axis}; the bottom is {tuple(shape)}")
        channels = shape[geo.axis]
        out = geo.conv_out(shape[geo.axis + 1:])
        return [tuple(shape[: geo.axis]) + (channels * count(geo.kernel),) + out]
