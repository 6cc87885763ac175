"""`--plot FILE.svg|.png`: one stacked bar per layer, the running total, the card, and a plain
one-line refusal when matplotlib is missing. The net is BVLC's LeNet (tests/data/chart/, see
tests/data/SOURCES.md), run as users run it."""
import os
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from protoaudit import cli
from protoaudit.memory.fit import Fit
from protoaudit.report import chart
from protoaudit.memory.summary import LayerRow, Summary

from conftest import DATA, ROOT, run_protoaudit

LENET = os.path.join(DATA, "chart", "lenet_train_test.prototxt")
# LeNet's Data layers read their image size from the dataset: MNIST's 28x28 grey images, batch 64
SHAPES = ["--input", "data=64x1x28x28", "--input", "label=64"]
SVG = "{http://www.w3.org/2000/svg}"
MiB = 2**20

# The bars, by hand from the prototxt. TRAIN: mnist, conv1, pool1, conv2, pool2, ip1, relu1, ip2, loss
# (accuracy is TEST only; ip2 and label feed loss alone, so no splits): 9 layers. TEST: the same with
# accuracy, which with loss reads both ip2 and label, so Caffe's InsertSplits adds a Split after each
# producer, named blob_layer_topindex_split: 12 layers. Then the SGD solver's state and the CUDA
# context (default 300 MiB), each a bar of its own.
TRAIN = ["mnist", "conv1", "pool1", "conv2", "pool2", "ip1", "relu1", "ip2", "loss"]
TEST = ["mnist", "label_mnist_1_split", "conv1", "pool1", "conv2", "pool2", "ip1", "relu1", "ip2",
        "ip2_ip2_0_split", "accuracy", "loss"]
BARS = TRAIN + TEST + ["SGD solver state", "CUDA context"]


def plot(tmp_path, name, *extra):
    out = tmp_path / name
    return run_protoaudit(LENET, *SHAPES, "--plot", out, *extra, timeout=120), out


def groups(root):
    return {g.get("id"): g for g in root.iter(f"{SVG}g") if g.get("id")}


def left_edges(group):
    """The x where each piece of a bar collection starts (its path's first point)."""
    return [float(re.match(r"M\s*([-\d.e]+)", p.get("d").strip()).group(1)) for p in group.iter(f"{SVG}path")]


def x_labels(root):
    axis = groups(root)["matplotlib.axis_1"]
    return ["".join(t.itertext()) for g in axis.iter(f"{SVG}g") if re.fullmatch(r"xtick_\d+", g.get("id", ""))
            for t in g.iter(f"{SVG}text")]


def test_svg_has_one_stacked_bar_per_layer(tmp_path):
    run, out = plot(tmp_path, "lenet.svg")
    assert run.returncode == 0, run.stderr
    assert "Total:" in run.stdout  # the report is printed as without --plot
    root = ET.parse(out).getroot()
    assert root.tag == f"{SVG}svg"
    g = groups(root)
    layers = len(TRAIN) + len(TEST)
    for category in chart.STACK:  # every layer has a piece in every category (0 B ones are flat)
        assert len(left_edges(g[f"bars-{category}"])) == layers, category
    assert len(left_edges(g["bars-solver-state"])) == 1
    assert len(left_edges(g["bars-CUDA-context"])) == 1
    starts = {round(x, 3) for gid, group in g.items() if gid.startswith("bars-") for x in left_edges(group)}
    assert len(starts) == len(BARS)  # the pieces of one bar share its place: 23 bars
    assert x_labels(root) == BARS  # few enough bars for every one to be named, in the nets' order
    assert "card" not in g and "crossing" not in g  # no --gpu-mem, no card
    assert "cumulative" in g


def test_png_is_a_png_of_a_sensible_size(tmp_path):
    run, out = plot(tmp_path, "lenet.png")
    assert run.returncode == 0, run.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert 600 <= width <= 2000 and 400 <= height <= 1200, (width, height)


def test_gpu_mem_draws_the_card_and_where_the_total_passes_it(tmp_path):
    run, out = plot(tmp_path, "fits.svg", "--gpu-mem", "1G")
    assert run.returncode == 0, run.stderr
    g = groups(ET.parse(out).getroot())
    assert "card" in g and "crossing" not in g
    # the CUDA context alone (300 MiB by default) is more than a 100 MiB card
    run, out = plot(tmp_path, "too_small.svg", "--gpu-mem", "100M")
    assert run.returncode == 1, run.stderr
    root = ET.parse(out).getroot()
    g = groups(root)
    assert "card" in g and "crossing" in g
    assert "passes the card at" in "".join(g["crossing-label"].itertext())
    assert any("card: 100 MiB" in "".join(t.itertext()) for t in root.iter(f"{SVG}text"))  # in the legend


def test_missing_matplotlib_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    for name in ["matplotlib", *(m for m in sys.modules if m.startswith("matplotlib."))]:
        monkeypatch.setitem(sys.modules, name, None)  # `import matplotlib...` now raises ImportError,
        # even where a chart drawn earlier in this process has loaded it
    out = tmp_path / "lenet.svg"
    assert cli.main([LENET, *SHAPES, "--plot", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before the audit, not after the report
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("protoaudit: --plot ")
    assert "pip install 'protoaudit[plot]'" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize("name, says", [("lenet.pdf", ".svg or .png"), ("no_such_folder/lenet.svg", "no folder")])
def test_a_chart_that_cannot_be_written_is_refused_at_once(tmp_path, capsys, name, says):
    assert cli.main([LENET, *SHAPES, "--plot", str(tmp_path / name)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and says in captured.err and len(captured.err.splitlines()) == 1


def test_plain_run_does_not_import_matplotlib():
    code = ("import sys; from protoaudit import cli; cli.main(sys.argv[1:]); "
            "sys.stderr.write(str(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib')))")
    run = subprocess.run([sys.executable, "-c", code, LENET, *SHAPES, "--gpu-mem", "8G"], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert "Total:" in run.stdout, run.stderr
    assert run.stderr.strip() == "[]"


def row(name, type_, total, cumulative, net="train", kind=None, **columns):
    figures = tuple(columns.get(c, 0) * MiB for c in ("params", "data", "diffs", "buffers", "workspace"))
    buffers = [SimpleNamespace(kind=kind)] if kind else []
    return LayerRow(net, name, type_, [], figures, total * MiB, cumulative * MiB, buffers)


# A made-up summary with round figures (MiB): conv 1 + 2 + 2 + 3 = 8, running 8; relu 0, running 8;
# fc 1 + 1 + 4 = 6, running 14; the solver state 5, running 19; the context 300, running 319.
ROWS = [row("conv", "Convolution", 8, 8, params=1, data=2, diffs=2, buffers=3),
        row("relu", "ReLU", 0, 8),
        row("fc", "InnerProduct", 6, 14, data=1, diffs=1, params=4),
        row("SGD solver state", "", 5, 19, kind="history"),
        row("CUDA context", "", 300, 319, net="process", kind="context")]


def made_up_chart(budget_mib):
    summary = Summary(ROWS, {}, {}, {}, 319 * MiB, 0, {}, 0, 0)
    fit = Fit(budget_mib * MiB, 319 * MiB, budget_mib >= 319, 1, None, None, None, None)
    return chart.figure(SimpleNamespace(path="made_up.prototxt", mode="gpu"), summary, fit)


def pieces(ax, gid):
    """(left, bottom, top) of each piece of the collection `gid`."""
    coll = next(c for c in ax.collections if c.get_gid() == gid)
    out = []
    for path in coll.get_paths():
        xs, ys = path.vertices[:, 0], path.vertices[:, 1]
        out.append((round(float(xs.min()), 6), round(float(ys.min()), 6), round(float(ys.max()), 6)))
    return out


def test_bars_stack_data_diffs_buffers_workspace_params_in_mib():
    ax, total_axis = made_up_chart(16).axes
    assert ax.get_ylabel() == "memory of each layer (MiB)"  # the largest layer is 8 MiB
    assert total_axis.get_ylabel() == "running total (MiB)"  # 319 MiB
    # conv: data 0-2, diffs 2-4, buffers 4-7, workspace 7-7, params 7-8; relu: all flat at 0
    assert [p[1:] for p in pieces(ax, "bars-data")] == [(0, 2), (0, 0), (0, 1)]
    assert [p[1:] for p in pieces(ax, "bars-diffs")] == [(2, 4), (0, 0), (1, 2)]
    assert [p[1:] for p in pieces(ax, "bars-buffers")] == [(4, 7), (0, 0), (2, 2)]
    assert [p[1:] for p in pieces(ax, "bars-params")] == [(7, 8), (0, 0), (2, 6)]
    assert [p[1:] for p in pieces(ax, "bars-solver-state")] == [(0, 5)]
    # the context (300 MiB) is far above the tallest layer: cut at the axis top, its size written on it
    assert ax.get_ylim()[1] == pytest.approx(8 * 1.15)
    cut = [t for t in ax.texts if (t.get_gid() or "").startswith("cut-")]
    assert [t.get_text() for t in cut] == ["300 MiB \u2191"]


def test_the_crossing_is_the_first_bar_whose_running_total_is_over_the_card():
    # 16 MiB card: fc's running total is 14 (fits), the solver state's 19 (does not)
    total_axis = made_up_chart(16).axes[1]
    label = next(t for t in total_axis.texts if t.get_gid() == "crossing-label")
    assert label.get_text() == "passes the card at train SGD solver state"
    card = next(line for line in total_axis.lines if line.get_gid() == "card")
    assert list(card.get_ydata()) == [16, 16]
    # a 4 GiB card: everything fits, no crossing, and the running total axis reads in GiB
    total_axis = made_up_chart(4096).axes[1]
    assert not [t for t in total_axis.texts if t.get_gid() == "crossing-label"]
    assert total_axis.get_ylabel() == "running total (GiB)"


def test_thousands_of_layers_draw_with_a_readable_number_of_labels(tmp_path):
    layers = 3000
    net = ['name: "deep"', 'layer { name: "data" type: "Input" top: "x0" input_param { shape { dim: 1 dim: 4 } } }']
    net += [f'layer {{ name: "relu{i}" type: "ReLU" bottom: "x{i - 1}" top: "x{i}" }}' for i in range(1, layers)]
    path = tmp_path / "deep.prototxt"
    path.write_text("\n".join(net) + "\n")
    out = tmp_path / "deep.svg"
    run = run_protoaudit(path, "--plot", out, timeout=120)
    assert run.returncode == 0, run.stderr
    root = ET.parse(out).getroot()
    assert len(left_edges(groups(root)["bars-data"])) == layers
    labels = x_labels(root)
    # every 75th layer (3000 / 40) and the bars held beside the net, among them the CUDA context
    assert len(labels) <= chart.MAX_LABELS + 3 and labels[0] == "data" and "CUDA context" in labels
