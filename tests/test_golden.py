"""Golden outputs of seed 001 (samples/segnet_seed001_*.prototxt) in every format, held to figures
derived by hand from caffe-segnet's sources.

The files in tests/data/golden/ were written from the hand derivation below (`python
tests/test_golden.py` writes them again from it; tests/data/golden/README.md writes the key figures
out), never from protoaudit's output. Each test holds
a golden file to the hand figures, and protoaudit's whole output to the golden file.

Facts (from alexgkendall/caffe-segnet, src/caffe/...; Caffe allocates a buffer the first time
it is touched, host or device, and never frees it; a float is 4 bytes):
- net.cpp: Split layers are inserted for 'label' (loss and accuracy read it) and for
  'conv_classifier'; layers that need backward are those with learnable params or a bottom that
  needs backward, less those that feed no loss: so data, the label split, norm (LRN) and accuracy
  never run backward.
- solver.cpp (Step): every param diff is zeroed before the forward pass (the solver touches them
  first); SGD keeps history_ (one param-sized blob each) in ComputeUpdateValue; update_ and temp_
  are only touched for L1 regularisation.
- dummy_data_layer.cpp: LayerSetUp runs Forward once filling only the tops with a constant filler
  (label); the gaussian 'data' top is filled at every forward, the first at the first forward.
- lrn_layer.cu (ACROSS_CHANNELS): scale_, the bottom's size, in forward.
- base_conv_layer.cpp, conv_layer.cu: Reshape sets bias_multiplier_ (H_out*W_out) to ones;
  forward im2cols one image into col_buffer_ (C_in*kh*kw*H_out*W_out) unless the kernel is 1x1
  stride 1 pad 0; Backward_gpu takes the bottom's diff whenever the weights learn (even when
  propagate_down is false: conv0 writes norm's diff) and backward_gpu_gemm takes col_buffer_
  even for a 1x1 kernel (conv_classifier).
- bn_layer.cpp/.cu (LEARN): params scale and shift (1, C, 1, 1); Reshape fills
  spatial_sum_multiplier_ (H*W) and batch_sum_multiplier_ (N) and zeroes their diffs on the host
  only; forward uses buffer_blob_ and x_norm_ (bottom-sized), spatial_mean_ and spatial_variance_
  (N*C), batch_mean_ and batch_variance_ (C).
- pooling_layer.cu: MAX with a mask top writes both tops and keeps no max_idx_; backward writes
  the bottom's diff from top 0's diff only.
- upsample_layer.cu: forward writes its top; backward writes bottom 0's diff (never the mask's).
- split_layer.cu: forward shares the bottom's data; backward reads every top's diff (so the
  accuracy branch's diff is allocated) and writes the bottom's.
- softmax_loss_layer.cpp/.cu: the inner Softmax (engine CAFFE) writes prob_ and its scale_
  (N*H*W); SetLossWeights sets prob_'s diff (the copied loss_weight) and the loss top's diff at
  setup; forward borrows bottom 0's diff as scratch; sum_multiplier_ stays on the host.
- accuracy_layer.cpp: CPU code only (no .cu in the fork): its two tops stay in host memory.
- cuDNN build (layer_factory.cpp): convolutions are cuDNN's (no col_buffer_, bias_multiplier_
  stays on the host, a bottom diff only where propagate_down); poolings with a mask top and the
  CAFFE-engine softmax stay Caffe's. protoaudit's stated estimate of a cuDNN workspace in this
  fork is the algorithm limit kh*kw*C_in ints (docs/maintainers.md, "How exact it is").
- The CUDA context: protoaudit's default, 300 MiB (docs/caffe.md, "The CUDA context").
"""
import csv
import io
import json
import os
import sys
from dataclasses import dataclass

import pytest
from tabulate import tabulate

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import DATA, run_in_process  # noqa: E402

GOLDEN = os.path.join(DATA, "golden")
OLD, NEW = "samples/segnet_seed001_old.prototxt", "samples/segnet_seed001_new.prototxt"
CARD = 8 * 2**30  # --gpu-mem 8G
CONTEXT = 300 * 2**20


# --- the hand derivation -------------------------------------------------------------------------
@dataclass
class Alloc:
    kind: str
    elements: int
    touch: str  # setup | forward | backward | solver
    per_sample: bool  # its shape has the batch N as a factor
    pieces: tuple = ()  # where this is several buffers (one cudaMalloc each): their elements


@dataclass
class Row:
    name: str
    type: str
    tops: list
    allocs: list
    net: str = "net"


def conv(name, n, c_in, h, w, *, c_out=64, k=7, pad=3, writes_bottom_diff=True, engine="caffe"):
    """A stride-1 convolution of a (n, c_in, h, w) bottom; returns the row and its top's (h, w)."""
    ho, wo = h + 2 * pad - k + 1, w + 2 * pad - k + 1
    params = c_out * c_in * k * k + c_out
    blobs = (c_out * c_in * k * k, c_out)  # weights, bias
    a = [Alloc("param data", params, "setup", False, blobs), Alloc("top data", n * c_out * ho * wo, "forward", True),
         Alloc("param diff", params, "solver", False, blobs)]
    if engine == "caffe":
        one_by_one = k == 1 and pad == 0
        a += [Alloc("layer buffer", ho * wo, "setup", False),  # bias_multiplier_
              Alloc("layer buffer", c_in * k * k * ho * wo, "backward" if one_by_one else "forward", False)]
    else:
        a.append(Alloc("workspace", k * k * c_in, "forward", False))
    if writes_bottom_diff:
        a.append(Alloc("top diff", n * c_in * h * w, "backward", True))
    return Row(name, "Convolution", [(n, c_out, ho, wo)], a), (ho, wo)


def bn(name, n, h, w, c=64):
    """In place on its conv's top: the blob's diff is written first by the layer after it."""
    return Row(name, "BN", [(n, c, h, w)], [
        Alloc("param data", 2 * c, "setup", False, (c, c)), Alloc("param diff", 2 * c, "solver", False, (c, c)),
        Alloc("layer buffer", h * w, "setup", False), Alloc("layer buffer", n, "setup", True),
        Alloc("layer buffer", 2 * n * c * h * w, "forward", True, (n * c * h * w,) * 2),  # buffer_blob_, x_norm_
        Alloc("layer buffer", 2 * n * c, "forward", True, (n * c,) * 2),  # spatial_mean_, spatial_variance_
        Alloc("layer buffer", 2 * c, "forward", False, (c, c))])  # batch_mean_, batch_variance_


def relu(name, n, h, w):
    return Row(name, "ReLU", [(n, 64, h, w)], [])  # in place: no blob of its own


def pool(name, n, h, w, k, s):
    """MAX with a mask top; returns the row and the pooled (h, w): ceil((h - k) / s) + 1."""
    ho, wo = -(-(h - k) // s) + 1, -(-(w - k) // s) + 1
    return Row(name, "Pooling", [(n, 64, ho, wo)] * 2, [
        Alloc("top data", 2 * n * 64 * ho * wo, "forward", True, (n * 64 * ho * wo,) * 2),
        Alloc("top diff", n * 64 * h * w, "backward", True)]), (ho, wo)


def upsample(name, n, h, w):
    return Row(name, "Upsample", [(n, 64, 2 * h, 2 * w)], [
        Alloc("top data", n * 64 * 2 * h * 2 * w, "forward", True),
        Alloc("top diff", n * 64 * h * w, "backward", True)])


def seed001(new, n, engine="caffe"):
    """The train net's rows as Caffe runs it (setup, forward, backward), then the solver and context."""
    h, w = (769, 1025) if new else (384, 512)
    hw = 384 * 512  # the label's and the classifier's size in both nets
    rows = [Row("data", "DummyData", [(n, 4, h, w), (n, 1, 384, 512)], [
                Alloc("top data", n * hw, "setup", True), Alloc("top data", n * 4 * h * w, "forward", True)]),
            Row("label_data_1_split", "Split", [(n, 1, 384, 512)] * 2, []),
            Row("norm", "LRN", [(n, 4, h, w)], [
                Alloc("top data", n * 4 * h * w, "forward", True), Alloc("layer buffer", n * 4 * h * w, "forward", True)])]
    c_in = 4
    stages = ["0", "1", "2", "3", "4"] if new else ["1", "2", "3", "4"]
    sizes = []
    for i, s in enumerate(stages):
        row, (h, w) = conv(f"conv{s}", n, c_in, h, w, writes_bottom_diff=engine == "caffe" or i > 0, engine=engine)
        rows += [row, bn(f"conv{s}_bn", n, h, w), relu(f"relu{s}", n, h, w)]
        sizes.append((h, w))
        row, (h, w) = pool(f"pool{s}", n, h, w, 3 if s == "0" else 2, 2)
        rows.append(row)
        c_in = 64
    for s in ["4", "3", "2", "1"]:
        rows.append(upsample(f"upsample{s}", n, h, w))
        row, (h, w) = conv(f"conv_decode{s}", n, 64, 2 * h, 2 * w, engine=engine)
        rows += [row, bn(f"conv_decode{s}_bn", n, h, w)]
    assert (h, w) == (384, 512)
    row, _ = conv("conv_classifier", n, 64, h, w, c_out=3, k=1, pad=0, engine=engine)
    rows += [row,
             Row("conv_classifier_conv_classifier_0_split", "Split", [(n, 3, 384, 512)] * 2, [
                 # the accuracy top's, conv_classifier's
                 Alloc("top diff", 2 * n * 3 * hw, "backward", True, (n * 3 * hw,) * 2)]),
             Row("loss", "SoftmaxWithLoss", [()], [
                 Alloc("layer buffer", n * 3 * hw, "setup", True),  # prob_'s diff
                 Alloc("top diff", 1, "setup", False),  # the loss weight
                 Alloc("layer buffer", n * 3 * hw + n * hw, "forward", True, (n * 3 * hw, n * hw)),  # prob_, scale_
                 Alloc("top diff", n * 3 * hw, "forward", True),  # the split top's diff, as scratch
                 Alloc("top data", 1, "forward", False)]),
             Row("accuracy", "Accuracy", [(), (3, 1, 1, 1)], [])]  # host memory only
    blobs = [p for r in rows for a in r.allocs if a.kind == "param data" for p in a.pieces or (a.elements,)]
    rows += [Row("SGD solver state", "", [], [Alloc("history", sum(blobs), "solver", False, tuple(blobs))]),
             Row("CUDA context", "", [], [Alloc("context", CONTEXT // 4, "setup", False)], net="process")]
    return rows


def caffe_figure(rows):
    """Net::Init's 'Memory required for data': every top's count (split and in-place tops too) x 4."""
    return 4 * sum(count(t) for r in rows for t in r.tops)


def count(shape):
    out = 1
    for d in shape:
        out *= d
    return out


COLUMNS = {"params": ("param data",), "data": ("top data",), "diffs": ("top diff", "param diff"),
           "buffers": ("layer buffer",), "workspace": ("workspace",)}
KINDS = ("top data", "top diff", "param data", "param diff", "history", "layer buffer", "workspace", "context")


def column(row, name):
    return 4 * sum(a.elements for a in row.allocs if a.kind in COLUMNS[name])


def total(rows, test=lambda a: True):
    return 4 * sum(a.elements for r in rows for a in r.allocs if test(a))


def by_kind(rows):
    return {k: total(rows, lambda a, k=k: a.kind == k) for k in KINDS if total(rows, lambda a, k=k: a.kind == k)}


def by_touch(rows):
    return {t: total(rows, lambda a, t=t: a.touch == t) for t in ("setup", "forward", "backward", "solver")}


def col_buffers(rows):
    """Each Caffe-engine convolution's col_buffer_ (its largest 'layer buffer'), by layer."""
    return {r.name: 4 * max(a.elements for a in r.allocs if a.kind == "layer buffer")
            for r in rows if r.type == "Convolution"}


STAGES = ("setup", "forward", "backward", "solver")
PAGE, SLOT = 2 * 2**20, 512  # tests/data/gpu_measured/README.md


def pages(rows):
    """What cudaMalloc takes beyond the bytes asked for, one call per buffer but the context's, as
    measured on an H200: above 2 MiB whole pages of its own; below, 512-byte slots, each into the
    fullest 2 MiB page with room (a new page where none has). Caffe's order: each stage in turn,
    layers in order (backward in reverse), the solver's state last."""
    sizes = []
    for stage in STAGES:
        for r in (reversed(rows) if stage == "backward" else rows):
            sizes += [4 * p for a in r.allocs if a.touch == stage and a.kind != "context"
                      for p in (a.pieces or (a.elements,))]
    taken, room = 0, []  # room: the free bytes of each shared page
    for n in sizes:
        if n > PAGE:
            taken += -(-n // PAGE) * PAGE
            continue
        slot = -(-n // SLOT) * SLOT
        fits = [r for r in room if r >= slot]
        if fits:
            room.remove(min(fits))
            room.append(min(fits) - slot)
        else:
            taken += PAGE
            room.append(PAGE - slot)
    return taken - sum(sizes)


def pages_clause(rows):
    return (f"cudaMalloc's 2 MiB pages take {size(pages(rows))} more on the card (measured on an H200 and an "
            "H100; in the verdict, not in the total)")


def on_card(rows):
    """What the card holds: the total and cudaMalloc's pages (the verdict's figure)."""
    return total(rows) + pages(rows)


def largest_batch(new):
    b = 1
    while on_card(seed001(new, b + 1)) <= CARD:
        b += 1
    return b if on_card(seed001(new, b)) <= CARD else 0


# --- the hand figures that matter, each written out ---------------------------------------------
def test_hand_model_holds_the_known_figures():
    old, new = seed001(False, 4), seed001(True, 1)
    # Caffe's own figures, from the user's logs (seeds/001)
    assert caffe_figure(old) == 1_800_929_300
    assert caffe_figure(new) == 1_175_184_180
    # the user's parameter counts (the first param blob of every layer): conv weights and BN scales
    assert 64 * 4 * 49 + 7 * 64 * 64 * 49 + 3 * 64 + 8 * 64 == 1_418_176
    assert 64 * 4 * 49 + 8 * 64 * 64 * 49 + 3 * 64 + 9 * 64 == 1_618_944
    # all params (with biases and BN shifts): conv0 12,608 + 8 x 200,768 + 195 + 9 x 128 floats
    assert total(new, lambda a: a.kind == "param data") == (12_608 + 8 * 200_768 + 195 + 9 * 128) * 4 == 6_480_396
    # SGD's history is the params' size again, and so are the param diffs
    assert by_kind(new)["history"] == by_kind(new)["param diff"] == by_kind(new)["param data"]
    # conv1's column buffer in the new net: 64 x 7 x 7 x 384 x 512 floats = 2,466,250,752 B = 2.30 GiB
    assert col_buffers(new)["conv1"] == 64 * 7 * 7 * 384 * 512 * 4 == 2_466_250_752
    assert col_buffers(old)["conv1"] == 4 * 7 * 7 * 384 * 512 * 4 == 154_140_672  # 147 MiB
    assert col_buffers(new)["conv0"] == 4 * 7 * 7 * 769 * 1025 * 4 == 617_968_400  # 589 MiB
    # conv0's top: 1 x 64 x 769 x 1025 floats (pad 3, kernel 7: 769 + 6 - 7 + 1 = 769)
    assert column(new[3], "data") == 64 * 769 * 1025 * 4 == 201_785_600
    # pool0: ceil((769 - 3) / 2) + 1 = 384, ceil((1025 - 3) / 2) + 1 = 512
    assert new[6].tops[0] == (1, 64, 384, 512)
    assert new[-1].allocs[0].elements * 4 == 314_572_800  # the context, 300 MiB
    # cudaMalloc's pages for every buffer, against what an H200 took for the same buffers
    measured = json.load(open(os.path.join(DATA, "gpu_measured", "h200_cuda13.json")))["malloc"]["nets"]
    for rows, run in ((new, "segnet_seed001_new_b1_caffe"), (old, "segnet_seed001_old_b4_caffe")):
        assert total(rows) - CONTEXT == measured[run]["requested"]
        assert pages(rows) == measured[run]["drop"] - measured[run]["requested"]
    # the new net does not fit 8 GiB even at batch 1; the old one fits up to batch 5
    assert total(new) > CARD and largest_batch(True) == 0
    assert on_card(seed001(False, 5)) <= CARD < total(seed001(False, 6)) and largest_batch(False) == 5


# --- how the reports write figures (the display rules, applied to the hand figures) ------------------
def size(n):
    """Binary units, three significant figures (1000 and over: no decimals)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale:
            v = n / scale
            return f"{v:.3g} {unit}" if abs(v) < 1000 else f"{v:.0f} {unit}"
    return f"{n} B"


def shapes(tops):
    return ", ".join("x".join(map(str, t)) if t else "scalar" for t in tops)


def signed(n):
    return ("+" if n > 0 else "-" if n < 0 else "") + (size(abs(n)) if n else "0")


def describe(name, batch):
    return (f"GPU mode, Caffe engine (im2col): the TRAIN net '{name}' (batch {batch}, forward and backward), "
            "with the SGD solver's state, held at once. Read with the caffe.proto of caffe-segnet "
            "(alexgkendall/caffe-segnet).")


def table_rows(rows):
    """The per-layer table: bytes per column, the row's total and the running total."""
    out, running = [], 0
    for r in rows:
        t = total([r])
        running += t
        out.append((r, {c: column(r, c) for c in COLUMNS}, t, running))
    return out


def per_sample(rows):
    return total(rows, lambda a: a.per_sample), total(rows, lambda a: not a.per_sample)


def verdict(rows, new):
    t = on_card(rows)
    if t <= CARD:
        return [f"FITS a 8 GiB card: {size(t)} needed, {size(CARD - t)} to spare.",
                f"Largest batch that fits: {largest_batch(new)} (audited at batch {4 if not new else 1})."]
    return [f"DOES NOT FIT a 8 GiB card: {size(t)} needed, {size(t - CARD)} too much.", "Even batch 1 does not fit."]


# --- the audit of the new net ----------------------------------------------------------------------
WIDTH = 120  # the text table's width: the widest of the layer, type and top shapes columns loses a
NARROWEST = {0: 14, 1: 10, 2: 14}  # character at a time (down to these) until the table fits


def ends(cell, width):
    """A cell shortened to `width` characters: its ends around "..." (the head the longer)."""
    if len(cell) <= width:
        return cell
    head = (width - 2) // 2
    return cell[:head] + "..." + cell[len(cell) - (width - 3 - head):]


def fitted(table, head):
    """The table as the text report lays it out in WIDTH columns: a cell of several top shapes is
    written as the first and "(+n)", and long names by their ends."""
    widths = [max(len(h) + 2, *(len(row[i]) for row in table)) for i, h in enumerate(head)]
    while sum(widths) + 2 * (len(widths) - 1) > WIDTH:
        _, i = max((widths[i], i) for i, least in NARROWEST.items() if widths[i] > least)
        widths[i] -= 1
    out = []
    for row in table:
        row = list(row)
        for i in NARROWEST:
            shown = row[i].split(", ")
            if len(row[i]) > widths[i] and i == 2 and len(shown) > 1:
                more = f" (+{len(shown) - 1})"
                row[i] = ends(shown[0], widths[i] - len(more)) + more
            row[i] = ends(row[i], widths[i])
        out.append(row)
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in [head] + out]
    return "\n".join(lines[:1] + ["  ".join("-" * w for w in widths)] + lines[1:])


def param_count(row):
    """Parameter elements a layer owns: its 'param data' (every layer of seed 001 owns its own)."""
    return sum(a.elements for a in row.allocs if a.kind == "param data")


def audit_text(rows, cudnn_total):
    """`--table`: the per-layer table (a single net: no net column; no cuDNN: no workspace column,
    which is empty on every row), torchinfo's parameter lines, the categories, then the short answer."""
    grows, fixed = per_sample(rows)
    shown = [c for c in COLUMNS if c != "workspace"]
    table = [[r.name, r.type, shapes(r.tops), f"{param_count(r):,}" if param_count(r) else ""]
             + [size(cols[c]) if cols[c] else "" for c in shown] + [size(rt)] for r, cols, rt, run in table_rows(rows)]
    params = sum(param_count(r) for r in rows)
    out = [f"protoaudit: {NEW}", describe("segnet_seed001_new", 1), "",
           fitted(table, ["layer", "type", "top shapes", "param #", *shown, "total"]), "",
           # every ParamSpec of the file has lr_mult 1 or 2: all trainable
           f"Total params: {params:,}", f"Trainable params: {params:,}", "Non-trainable params: 0", "",
           "By category:"]
    out += [f"  {k:14s} {size(b):>11s}  {b:>16,} B" for k, b in by_kind(rows).items()]
    out += ["By first touch:"] + [f"  {k:14s} {size(b):>11s}  {b:>16,} B" for k, b in by_touch(rows).items()]
    out.append(f"Grows with the batch: {size(grows)}; does not: {size(fixed)}")
    out += recipe_lines(rows)
    out.append(f"Caffe's own 'Memory required for data' for the TRAIN net: {caffe_figure(rows):,} bytes "
               f"({size(caffe_figure(rows))})")
    return "\n".join(out + [""] + answer(rows, cudnn_total))


def answer(rows, cudnn_total):
    """The short answer: the total, the verdict, the three largest rows (ties in the net's order)
    with their parts of a tenth of the row or more, the parameters, the data shapes."""
    t = total(rows)
    out = [f"Total: {size(t)} ({t:,} bytes) on the device", f"  with cuDNN instead: {size(cudnn_total)}",
           f"  {pages_clause(rows)}"]
    out += verdict(rows, True) + ["Most memory:"]
    largest = sorted(rows, key=lambda r: -total([r]))[:3]
    cols = col_buffers(rows)
    cells = []
    for r in largest:
        parts = {"column buffer (im2col)": cols.get(r.name, 0)}
        for a in r.allocs:
            if a.kind != "layer buffer":
                parts[a.kind] = parts.get(a.kind, 0) + 4 * a.elements
        parts = sorted(((k, v) for k, v in parts.items() if v * 10 >= total([r])), key=lambda kv: -kv[1])
        cells.append([f"  {r.name}", size(total([r])), f"{100 * total([r]) / t:.0f}%",
                      f"{r.type}: " + ", ".join(f"{k} {size(v)}" for k, v in parts)])
    widths = [max(len(c[i]) for c in cells) for i in range(3)]
    out += [f"{c[0]:<{widths[0]}}  {c[1]:>{widths[1]}}  {c[2]:>{widths[2]}}  {c[3]}" for c in cells]
    params = sum(param_count(r) for r in rows)
    out.append(f"Params: {params:,} (trainable {params:,}, non-trainable 0)")
    out += [f"Data shape: the net, layer '{top}' top '{top}' {shapes([shape])}: the layer's dummy_data_param"
            .replace(f"layer '{top}' top", "layer 'data', top") for top, shape in data_tops(rows)]
    return out


def audit_short(rows, cudnn_total):
    """The default text report: what ran, the short answer, and the flag for the rest."""
    return "\n".join([f"protoaudit: {NEW}", describe("segnet_seed001_new", 1), ""] + answer(rows, cudnn_total)
                     + ["", "The per-layer table, the parameter counts, the categories and the hand recipe: --table"])


def data_tops(rows):
    """The DummyData layer's tops (data, label) and their shapes, which its dummy_data_param states."""
    return list(zip(("data", "label"), rows[0].tops))


def recipe_lines(rows):
    """Seed 002's hand recipe, 4 bytes x (2 x Caffe's activation count + 3 x the params), and what
    it leaves out: 4 x (2 x 293,796,045 + 3 x 1,620,099) = 2,369,809,548 B = 2.21 GiB."""
    acts, params = caffe_figure(rows) // 4, total(rows, lambda a: a.kind == "param data") // 4
    recipe = 4 * (2 * acts + 3 * params)
    cols = sum(col_buffers(rows).values())
    others = total(rows, lambda a: a.kind == "layer buffer") - cols
    assert cols > others > CONTEXT  # the order they are listed in: largest first
    return [f"Hand recipe (activations x2 + params x3, 4 bytes each): {size(recipe)} = 2 x {acts:,} activations "
            f"(Caffe's count) + 3 x {params:,} params; the total is {total(rows) / recipe:.2f}x that.",
            f"  It leaves out: column buffers {size(cols)}, other layer buffers {size(others)}, "
            f"CUDA context {size(CONTEXT)}."]


def md_table(head, rows, right):
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(head))) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def audit_markdown(rows, cudnn_total):
    grows, fixed = per_sample(rows)
    t, fig = total(rows), caffe_figure(rows)
    v = verdict(rows, True)
    out = [f"**protoaudit** `{NEW}`", "", describe("segnet_seed001_new", 1), "",
           f"- **Total: {size(t)}** ({t:,} bytes) on the device; with cuDNN instead: {size(cudnn_total)}; "
           f"{pages_clause(rows)}.",
           f"- **{v[0]}**", f"- {v[1]}",
           f"- Caffe's own \"Memory required for data\": {fig:,} bytes ({size(fig)}).",
           f"- Grows with the batch: {size(grows)}; does not: {size(fixed)}."]
    out += [f"- Data shape (the net, layer `data`, top `{top}`): {shapes([shape])}, from the layer's dummy_data_param"
            for top, shape in data_tops(rows)] + [""]
    kinds = [[k, size(b), f"{b:,}"] for k, b in by_kind(rows).items()] + [["total", size(t), f"{t:,}"]]
    out += md_table(["category", "size", "bytes"], kinds, (1, 2)) + [""]
    layers = [[r.net, r.name, r.type, shapes(r.tops)] + [size(cols[c]) if cols[c] else "" for c in COLUMNS]
              + [size(rt), size(run)] for r, cols, rt, run in table_rows(rows)]
    out += [f"<details><summary>Per layer ({len(rows)} rows)</summary>", ""]
    out += md_table(["net", "layer", "type", "top shapes", "params", "data", "diffs", "buffers", "workspace",
                     "total", "cumulative"], layers, range(4, 11))
    return "\n".join(out + ["", "</details>"])


def audit_csv(rows):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["net", "layer", "type", "top_shapes", "params_bytes", "data_bytes", "diffs_bytes", "buffers_bytes",
                "workspace_bytes", "total_bytes", "cumulative_bytes", "assumed"])
    for r, cols, rt, run in table_rows(rows):
        w.writerow([r.net, r.name, r.type, shapes(r.tops)] + [cols[c] for c in COLUMNS] + [rt, run, ""])
    return out.getvalue().rstrip("\n")


# --- the diff of the pair ---------------------------------------------------------------------------
def aligned(old, new):
    """B's rows in order (A has no layer B lacks): (name, A's row or None, B's row, status)."""
    a = {r.name: r for r in old}
    out = []
    for rb in new:
        ra = a.get(rb.name)
        same = ra is not None and ra.tops == rb.tops and total([ra]) == total([rb])
        out.append((rb, ra, "added" if ra is None else "same" if same else "changed"))
    return out


def sentences(old, new, cudnn_old, cudnn_new):
    ta, tb = total(old), total(new)
    ga, fa = per_sample(old)
    gb, fb = per_sample(new)
    ca, cb = col_buffers(old), col_buffers(new)
    ranked = sorted(cb, key=lambda name: -cb[name])[:6]  # Python's sort keeps conv1 before conv_decode1
    assert ranked == ["conv1", "conv_decode1", "conv0", "conv2", "conv_decode2", "conv3"]
    was = {"conv1": f"A: {size(ca['conv1'])}", "conv0": "new"}
    largest = ", ".join(f"{name} {size(cb[name])} ({was.get(name, 'the same in A')})" for name in ranked)
    return [
        f"B needs {size(tb - ta)} more than A: {size(tb)} against {size(ta)}.",
        "What does not grow with the batch (parameters and their diffs, solver state, column buffers, workspaces, "
        f"the context): {size(fb)} in B against {size(fa)} in A. What grows with it (tops, their diffs, per-sample "
        f"buffers): {size(gb)} against {size(ga)}.",
        "B runs batch 1 against A's 4: only the second part scales with it.",
        # the buffers whose change is at least 3% of B's total: these two (the next, conv0's top and
        # its diff, BN's buffers, are 201,785,600 B each, under 0.03 x 9.3 GB = 279 MB)
        f"conv1's im2col buffer holds one image: 64x7x7x384x512 floats = {size(cb['conv1'])} in B against "
        f"4x7x7x384x512 = {size(ca['conv1'])} in A, because its input now has 64 channels instead of 4.",
        f"conv0's im2col buffer holds one image: 4x7x7x769x1025 floats = {size(cb['conv0'])}, a layer A does not have.",
        f"Column buffers hold one image each, so they do not shrink with the batch: {size(sum(cb.values()))} in B "
        f"({sum(cb.values()) / tb:.0%} of its total) against {size(sum(ca.values()))} in A. The largest: {largest}. "
        f"A cuDNN build allocates none (each convolution keeps a small workspace instead): B would need "
        f"{size(cudnn_new)} and A {size(cudnn_old)}."]


def diff_layers(old, new):
    return [[rb.net, rb.name, rb.type, shapes(ra.tops) if ra else "", shapes(rb.tops),
             size(total([ra]) if ra else 0), size(total([rb])), signed(total([rb]) - (total([ra]) if ra else 0)),
             status] for rb, ra, status in aligned(old, new)]


def kind_rows(old, new):
    ka, kb = by_kind(old), by_kind(new)
    rows = [[k, size(ka[k]), size(kb[k]), signed(kb[k] - ka[k])] for k in ka]
    return rows + [["total", size(total(old)), size(total(new)), signed(total(new) - total(old))]]


def diff_text(old, new, cudnn_old, cudnn_new):
    out = [f"A: {OLD}", "   " + describe("segnet_seed001_old", 4), f"B: {NEW}", "   " + describe("segnet_seed001_new", 1),
           "", tabulate(diff_layers(old, new), headers=["net", "layer", "type", "tops in A", "tops in B", "A", "B",
                                                         "change", ""], tablefmt="simple", disable_numparse=True),
           "", tabulate(kind_rows(old, new), headers=["category", "A", "B", "change"], tablefmt="simple",
                        disable_numparse=True), "", "Why:"]
    out += [f"- {s}" for s in sentences(old, new, cudnn_old, cudnn_new)] + [""]
    out += ["A: " + x for x in verdict(old, False)] + ["B: " + x for x in verdict(new, True)]
    return "\n".join(out)


def diff_markdown(old, new, cudnn_old, cudnn_new):
    fa, fb = caffe_figure(old), caffe_figure(new)
    va, vb = verdict(old, False), verdict(new, True)
    out = ["**protoaudit diff**", "", f"- A: `{OLD}`: {describe('segnet_seed001_old', 4)}",
           f"- B: `{NEW}`: {describe('segnet_seed001_new', 1)}", ""]
    out += md_table(["category", "A", "B", "change"], kind_rows(old, new), (1, 2, 3)) + [""]
    out += [f"- Caffe's own \"Memory required for data\": A {fa:,} bytes ({size(fa)}); B {fb:,} bytes ({size(fb)}).",
            f"- A: **{va[0]}**", f"- A: {va[1]}", f"- B: **{vb[0]}**", f"- B: {vb[1]}", "", "**Why**", ""]
    out += [f"- {s}" for s in sentences(old, new, cudnn_old, cudnn_new)] + [""]
    layers = diff_layers(old, new)
    out += [f"<details><summary>Per layer ({len(layers)} rows)</summary>", ""]
    out += md_table(["net", "layer", "type", "tops in A", "tops in B", "A", "B", "change", "status"], layers, (5, 6, 7))
    return "\n".join(out + ["", "</details>"])


def diff_csv(old, new):
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["net", "layer", "status", "type_a", "type_b", "tops_a", "tops_b", "bytes_a", "bytes_b", "change_bytes"])
    for rb, ra, status in aligned(old, new):
        a = total([ra]) if ra else 0
        w.writerow([rb.net, rb.name, status, ra.type if ra else "", rb.type, shapes(ra.tops) if ra else "",
                    shapes(rb.tops), a, total([rb]), total([rb]) - a])
    return out.getvalue().rstrip("\n")


# --- the golden files ------------------------------------------------------------------------------
def expected():
    """Every golden file's text, from the hand figures alone."""
    old, new = seed001(False, 4), seed001(True, 1)
    cudnn_old, cudnn_new = total(seed001(False, 4, "cudnn")), total(seed001(True, 1, "cudnn"))
    return {
        "seed001_new.txt": audit_text(new, cudnn_new),
        "seed001_short.txt": audit_short(new, cudnn_new),
        "seed001_new.md": audit_markdown(new, cudnn_new),
        "seed001_new.csv": audit_csv(new),
        "seed001_diff.txt": diff_text(old, new, cudnn_old, cudnn_new),
        "seed001_diff.md": diff_markdown(old, new, cudnn_old, cudnn_new),
        "seed001_diff.csv": diff_csv(old, new),
    }


COMMANDS = {
    "seed001_new": [NEW, "--gpu-mem", "8G", "--table"],
    "seed001_short": [NEW, "--gpu-mem", "8G"],
    "seed001_diff": ["diff", OLD, NEW, "--gpu-mem", "8G"],
}
FORMATS = {"txt": "text", "md": "markdown", "csv": "csv"}
NAMES = sorted(expected())


def golden(name):
    with open(os.path.join(GOLDEN, name), encoding="utf-8") as f:
        return f.read()


def tool_output(name):
    stem, ext = name.rsplit(".", 1)
    r = run_in_process(*COMMANDS[stem], "--format", FORMATS[ext])
    assert r.returncode == 1, r.stderr  # the new net does not fit 8 GiB
    return r.stdout


@pytest.mark.parametrize("name", NAMES)
def test_golden_file_holds_the_hand_figures(name):
    assert golden(name) == expected()[name] + "\n"


@pytest.mark.parametrize("name", NAMES)
def test_protoaudit_writes_the_golden_file(name):
    assert tool_output(name) == golden(name)


if __name__ == "__main__":
    os.makedirs(GOLDEN, exist_ok=True)
    for name, text in expected().items():
        with open(os.path.join(GOLDEN, name), "w", encoding="utf-8") as f:
            f.write(text + "\n")
