"""CTPN's Caffe (tianzhi0549/CTPN f77ec9e, the repository's caffe/ folder): its Lstm, Transpose and
Reverse, as its sources shape them.

The fork is a 2015 BVLC Caffe with Fast R-CNN's ROIPooling and SmoothL1Loss (which have no rule
here) and three layers of its own, the ones its text detector's net reads Im2col's columns with:
Junhyuk Oh's Lstm changed to read (T, N, ...) sequences, Transpose and Reverse. The rest of a net is
counted as BVLC 9b89154's layers, as for the other forks here.

File and line references are to that commit's caffe/src/caffe/layers/{lstm,transpose,reverse}_layer
.cpp/.cu and caffe/include/caffe/common_layers.hpp.
"""
from . import touch
from .base import Layer, count, refuse_in_place, register
from .caffe_lstm import Lstm as JunhyukLstm

FORK = "ctpn"
MAX_AXES = 32  # kMaxBlobAxes (blob.hpp:13)


@register("Lstm", fork=FORK)
class Lstm(JunhyukLstm):
    """LstmLayer as CTPN changed it: T = the bottom's first axis, N = its second, I = count(2), and the
    top (T, N, H) (lstm_layer.cpp:21-23, 64-72); lstm_param's batch_size is not read. What it holds is
    Junhyuk Oh's layer's (protoaudit.layers.caffe_lstm), the .cu unchanged."""

    def _dims(self, bottoms):
        data = bottoms[0]
        self.check(len(data) >= 2, f"Lstm reads a (T, N, ...) sequence, got {tuple(data)} (lstm_layer.cpp:21)")
        return data[0], data[1], count(data, 2), self.fork_param("lstm_param").num_output

    def reshape(self, bottoms):
        (t_n, h), = super().reshape(bottoms)
        t, n, _, _ = self._dims(bottoms)
        return [(t, n, h)]


class _Counts(Layer):
    """What Transpose and Reverse share: one bottom, one top never the bottom (LayerSetUp CHECKs it),
    and small int Blobs set on the host in Reshape whose device copies the GPU kernels read."""

    exact_bottoms = 1
    exact_tops = 1
    int_blobs = ()  # (name, read in the forward, read in the backward)

    def touches(self, run):
        axes = len(run.bottoms[0])
        t = [touch.buffer(f"{name} (host)", axes, "setup", per_sample=False, device="host", note=f"{axes} ints")
             for name, _, _ in self.int_blobs]
        t += [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        if run.mode == "gpu":
            t += [touch.buffer(name, axes, "forward", per_sample=False, note=f"{axes} ints")
                  for name, forward, _ in self.int_blobs if forward]
            t += self.gpu_forward(run)
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
            if run.mode == "gpu":
                t += [touch.buffer(name, axes, "backward", per_sample=False, note=f"{axes} ints")
                      for name, forward, backward in self.int_blobs if backward and not forward]
        return t

    def gpu_forward(self, run):
        return []


@register("Transpose", fork=FORK)
class Transpose(_Counts):
    """TransposeLayer: top axis i is the bottom's axis transpose_param.dim(i) (transpose_layer.cpp:80-86),
    which must name as many axes as the bottom has, 1 to 32 (cpp:36-41). Reshape sets bottom_counts_,
    top_counts_, forward_map_ and backward_map_, one int per axis, on the host (cpp:47-71); the GPU
    kernels also take buf_, count x axes ints (cpp:73-75), in the forward and the backward (cu:33, 48).
    Backward only when asked (cpp:101-103, cu:40-42)."""

    int_blobs = (("bottom_counts_", True, True), ("top_counts_", True, True), ("forward_map_", True, False),
                 ("backward_map_", False, True))

    def reshape(self, bottoms):
        refuse_in_place(self)  # transpose_layer.cpp:26-27
        shape = tuple(bottoms[0])
        dims = list(self.fork_param("transpose_param").dim)
        self.check(0 < len(shape) <= MAX_AXES, f"the dimension of the transposed blob {shape} should be 1 to "
                   f"{MAX_AXES} (transpose_layer.cpp:36-39)")
        self.check(len(dims) == len(shape), f"transpose_param names {len(dims)} axes for a bottom of "
                   f"{len(shape)} {shape} (transpose_layer.cpp:40-41)", fix="give one dim per axis of the bottom")
        self.check(all(0 <= d < len(shape) for d in dims), f"transpose_param's dims {dims} must each name an axis "
                   f"of the bottom {shape}")
        return [tuple(shape[d] for d in dims)]

    def gpu_forward(self, run):
        elements = count(run.bottoms[0]) * len(run.bottoms[0])
        return [touch.buffer("buf_", elements, "forward", per_sample=True,
                             note=f"{count(run.bottoms[0])} x {len(run.bottoms[0])} ints")]


@register("Reverse", fork=FORK)
class Reverse(_Counts):
    """ReverseLayer: the bottom reversed along reverse_param.axis (default 0), the top of its shape
    (reverse_layer.cpp:21-30); bottom_counts_, one int per axis, set on the host in Reshape (cpp:31-38)
    and read on the device by both GPU kernels (cu:22, 35). Backward only when asked (cpp:51-53)."""

    int_blobs = (("bottom_counts_", True, True),)

    def reshape(self, bottoms):
        refuse_in_place(self)  # reverse_layer.cpp:16
        shape = tuple(bottoms[0])
        axis = self.fork_param("reverse_param").axis
        self.check(len(shape) > 0, "Reverse does not support 0 axes blob (reverse_layer.cpp:24)")
        self.check(0 <= axis < len(shape), f"reverse_param's axis {axis} must be an axis of the bottom {shape} "
                   "(reverse_layer.cpp:25-26)")
        return [shape]
