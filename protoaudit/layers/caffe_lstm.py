"""Junhyuk Oh's caffe-lstm (junhyukoh/caffe-lstm 598d454): its Lstm layer, as its source shapes it.

The fork is a 2015 BVLC Caffe with one layer added, Lstm (lstm_param: num_output, clipping_threshold,
the fillers and batch_size), the LSTM that CTPN's and caffe_ocr's Caffes copied and changed. Its
examples (examples/lstm_sequence) feed it a sequence of T x N rows with net inputs. The rest of a net
is counted as BVLC 9b89154's layers, as for the other forks here.

File and line references are to that commit's src/caffe/layers/lstm_layer.cpp/.cu and
include/caffe/common_layers.hpp.
"""
from . import touch
from .base import Layer, count, register

FORK = "caffe_lstm"


@register("Lstm", fork=FORK)
class Lstm(Layer):
    """LstmLayer: N = lstm_param.batch_size sequences (default 1) of T = num / N steps, the steps
    outermost, each of I = count / num inputs (the bottom's at setup); the top is (T*N, H) with
    H = num_output (cpp:21-23, 78-86). Reshape CHECKs that N divides num and that each row keeps I
    inputs (cpp:79-82). A second bottom, the clip (T*N values, one per row: the forward CHECKs
    num == count, cpp:122), says which rows continue a sequence; the layer gives it no gradient.
    It sets top[0] only (the header declares no blob counts).

    Parameters (cpp:29-53): the input-to-hidden weight (4H, I), the hidden-to-hidden one (4H, H) and
    the bias (4H). What it holds (cpp and .cu alike):
    - bias_multiplier_, T*N ones, set on the host in Reshape (cpp:107-110); the GPU forward reads its
      device copy (cu:156);
    - forward: pre_gate_ and gate_ (T, N, 4, H), cell_ (T, N, H) (cpp:90-101), h_to_gate_ (N, 4, H),
      c_0_ and h_0_ (N, H), and c_T_ and h_T_ (N, H), read first with a clip (cpp:133-136) and
      written last (cpp:189-190); top_ shares the top's data and diff (cpp:103-104);
    - backward: the diffs of pre_gate_, gate_ and cell_, c_T_'s diff (read, cpp:214), h_0_'s and
      c_0_'s (written at t = 0, cpp:221-222) and h_to_h_ (N, H) (cpp:265-267); the parameters' diffs
      each when it learns and the bottom's when asked (cpp:277-303).
    The (N, ...) buffers do not grow with the bottom's num: N is lstm_param's, T the num's share."""

    min_bottoms = 1
    max_bottoms = 2
    exact_tops = 1

    def _dims(self, bottoms):
        """(T, N, I, H) of the layer on these bottoms."""
        p = self.fork_param("lstm_param")
        data = bottoms[0]
        self.check(len(data) >= 1 and data[0] > 0, f"Lstm needs a bottom with rows, got {tuple(data)}")
        num, n = data[0], p.batch_size
        self.check(n > 0 and num % n == 0, f"Input size should be multiple of batch size: {num} rows, lstm_param "
                   f"batch_size {n} (lstm_layer.cpp:80)", fix="give lstm_param a batch_size that divides the rows")
        return num // n, n, count(data) // num, p.num_output

    def reshape(self, bottoms):
        t, n, _, h = self._dims(bottoms)
        if len(bottoms) > 1:
            clip = bottoms[1]
            self.check(len(clip) >= 1 and clip[0] == count(clip),
                       f"the clip {tuple(clip)} must hold one value per row (num == count, lstm_layer.cpp:122)")
        return [(t * n, h)]

    def param_shapes(self, bottoms):
        _, _, i, h = self._dims(bottoms)
        return [(4 * h, i), (4 * h, h), (4 * h,)]

    def touches(self, run):
        t, n, _, h = self._dims(run.bottoms)
        rows, gates, state = t * n, f"{t}x{n}x4x{h}", f"{n}x{h}"

        def each(names, elements, stage, per_sample, note):
            return [touch.buffer(name, elements, stage, per_sample=per_sample, note=note) for name in names]

        out = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        out.append(touch.buffer("bias_multiplier_ (host)", rows, "setup", per_sample=True, device="host",
                                note=f"{rows} ones (T*N)"))
        out += [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        out.append(touch.top(0, "data", "forward"))
        if run.mode == "gpu":
            out.append(touch.buffer("bias_multiplier_", rows, "forward", per_sample=True, note=f"{rows} ones (T*N)"))
        out += each(("pre_gate_", "gate_"), 4 * rows * h, "forward", True, gates)
        out += each(("cell_",), rows * h, "forward", True, f"{t}x{n}x{h}")
        out += each(("c_T_", "h_T_", "c_0_", "h_0_"), n * h, "forward", False, state)
        out += each(("h_to_gate_",), 4 * n * h, "forward", False, f"{n}x4x{h}")
        out.append(touch.top(0, "diff", "backward"))
        out += each(("pre_gate_ (diff)", "gate_ (diff)"), 4 * rows * h, "backward", True, gates)
        out += each(("cell_ (diff)",), rows * h, "backward", True, f"{t}x{n}x{h}")
        out += each(("c_T_ (diff)", "h_0_ (diff)", "c_0_ (diff)", "h_to_h_"), n * h, "backward", False, state)
        out += [touch.param(k, "diff", "backward") for k, learns in enumerate(run.param_propagate_down) if learns]
        if run.propagate_down and run.propagate_down[0]:
            out.append(touch.bottom(0, "diff", "backward"))
        return out
