"""`--plot FILE.svg|.png` for a Keras model: one training step's memory over time, stacked by kind above
what lives across steps, with the step's peak and the card; with --sweep, the total against the batch.
The models are the oracle's saved ones (tests/data/keras_oracle) and the seed 002 sample."""
import os
import sys
import xml.etree.ElementTree as ET

import pytest

from protoaudit import cli
from protoaudit.library import audit
from protoaudit.report import chart, keras_chart

from conftest import DATA, ROOT, run_protoaudit

SVG = "{http://www.w3.org/2000/svg}"
SEED002 = os.path.join(ROOT, "samples", "keras", "seed002_cnn_adam.keras")
SMALL_CNN = os.path.join(DATA, "keras_oracle", "unseen", "models", "small_cnn_adam.keras")


def ids(path):
    return {g.get("id") for g in ET.parse(path).getroot().iter(f"{SVG}g") if g.get("id")}


def texts(path):
    return " ".join("".join(t.itertext()) for t in ET.parse(path).getroot().iter(f"{SVG}text"))


def test_the_step_is_drawn_with_its_peak_and_the_card(tmp_path):
    a = audit(SEED002)
    assert a.total_bytes < a.high_total_bytes  # its orders differ: a card between the two does not fit
    card = (a.total_bytes + a.high_total_bytes) // 2
    out = tmp_path / "step.svg"
    run = run_protoaudit(SEED002, "--plot", out, "--gpu-mem", f"{card}B", timeout=120)
    assert run.returncode == 1, run.stderr
    assert "DOES NOT FIT" in run.stdout  # the report is printed as without --plot
    g = ids(out)
    assert {"peak", "card", "stack-across-steps", "stack-tensorflow-s-own", "stack-activation", "stack-gradient",
            "stack-weight-gradient"} <= g
    words = texts(out)
    assert "card: " in words and "in another order of TensorFlow's executor, which the verdict takes" in words
    assert "conv2d" in words and "max_pooling2d" in words  # the layers along the step


def test_the_peak_marker_stands_at_the_total_and_the_base_is_what_lives_across_steps():
    a = audit(SMALL_CNN, batch=256, mode="cpu")
    fig = keras_chart.figure(a)
    ax = fig.axes[0]
    (peak,) = [line for line in ax.lines if line.get_gid() == "peak"]
    name, scale = chart.unit(a.total_bytes)
    assert abs(peak.get_ydata()[0] * scale - a.total_bytes) < 1
    labels = [label for label, _ in a.program.timeline()]
    assert labels[int(peak.get_xdata()[0])] == a.peak.step
    # the bottom band: weights and Adam's two slots, measured by TensorFlow (measurements.tsv: 900,136
    # bytes of weights, all trainable), under every step
    base = next(c for c in ax.collections if c.get_gid() == "stack-across-steps")
    top = max(y for path in base.get_paths() for _, y in path.vertices)
    assert abs(top * scale - 3 * 900_136) < 1


def test_layer_ticks_mark_where_the_ops_pass_to_another_layer():
    labels = ["input x", "conv2d Conv", "conv2d BiasAdd", "dense MatMul", "loss", "dense kernel gradient",
              "conv2d Conv2DBackpropFilter", "conv2d/kernel g-m", "conv2d/bias g-m", "dense/kernel g-m"]
    assert keras_chart.layer_ticks(labels) == [(0, "input"), (1, "conv2d"), (3, "dense"), (4, "loss"),
                                               (5, "dense"), (6, "conv2d"), (9, "dense")]
    many = [f"layer{k} op" for k in range(1000)]
    ticks = keras_chart.layer_ticks(many)
    assert len(ticks) <= chart.MAX_LABELS and ticks[0] == (0, "layer0")


def test_sweep_draws_the_total_against_the_batch(tmp_path):
    out = tmp_path / "sweep.svg"
    run = run_protoaudit(SMALL_CNN, "--sweep", "8,16,32", "--mode", "cpu", "--gpu-mem", "1G", "--plot", out,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert {"sweep-total", "card"} <= ids(out)
    assert "memory against the batch" in texts(out)


def test_missing_matplotlib_is_one_line_and_exit_2_before_the_audit(tmp_path, monkeypatch, capsys):
    for name in ["matplotlib", *(m for m in sys.modules if m.startswith("matplotlib."))]:
        monkeypatch.setitem(sys.modules, name, None)
    out = tmp_path / "step.svg"
    assert cli.main([SMALL_CNN, "--plot", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    assert "pip install 'protoaudit[plot]'" in captured.err and not out.exists()


@pytest.mark.parametrize("name", ["step.pdf", "no_such_folder/step.svg"])
def test_a_chart_that_cannot_be_written_is_refused_at_once(tmp_path, capsys, name):
    assert cli.main([SMALL_CNN, "--plot", str(tmp_path / name)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
