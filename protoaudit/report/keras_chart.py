"""`--plot FILE.svg|.png` for a Keras model: one training step's memory over time, as a picture
(with --sweep, the total against the batch).

The step is drawn as the timeline the audit walks (protoaudit.keras.training.program): one point per
op in the order TensorFlow's executor runs them, the live bytes stacked by kind above what lives
across steps (weights, the optimizer's slots and, on a GPU, the context), so the step's peak and what
makes it can be seen, with the card of --gpu-mem beside it. matplotlib is imported only here, as for
Caffe's chart (report/chart.py, whose checks, units and file writing this shares).
"""
from . import chart
from .units import size

# bottom to top above what lives across steps
KINDS = ("input", "activation", "gradient", "weight gradient", "optimizer temporary", "loop state", "scratch")
COLOURS = {"across steps": "#bab0ac", "TensorFlow's own": "#d4a6c8", "input": "#edc948", "activation": "#4e79a7",
           "gradient": "#f28e2b", "weight gradient": "#e15759", "optimizer temporary": "#9c755f",
           "loop state": "#76b7b2", "scratch": "#b07aa1", "other": "#555555"}


def draw(a, path):
    """Write the chart of the Keras audit `a` to `path` (.svg or .png)."""
    chart.check(path)
    fig = sweep_figure(a, path) if a.sweep else figure(a, path)
    chart.save(fig, path)


def layer_ticks(labels, most=chart.MAX_LABELS):
    """(step index, layer name) where the ops pass to another layer, at most `most` of them evenly
    taken: a step's label starts with its layer's name (or its variable's, layer/weight)."""
    ticks = []
    for k, label in enumerate(labels):
        name = label.split(" ", 1)[0].split("/", 1)[0]
        if not ticks or ticks[-1][1] != name:
            ticks.append((k, name))
    if len(ticks) > most:
        every = -(-len(ticks) // most)
        ticks = ticks[::every]
    return ticks


def figure(a, path=""):
    """The matplotlib Figure of the step's timeline."""
    Figure, FigureCanvasAgg = chart._matplotlib(path)
    rounding = 256 if a.mode == "gpu" else 1
    steps = a.program.timeline(rounding=rounding)
    base = a.context + a.weights_bytes + a.slot_bytes
    kinds = [k for k in KINDS if any(k in live for _, live in steps)]
    other = [sum(b for kind, b in live.items() if kind not in KINDS) for _, live in steps]
    fig = Figure(figsize=(min(16, max(9, 4 + 0.02 * len(steps))), 6.5), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    top = max([a.total_bytes, a.fit.budget if a.fit else 0, 1])
    name, scale = chart.unit(top)
    xs = list(range(len(steps)))
    own = a.step_peak_bytes - a.peak.bytes  # TensorFlow's own allocations of a step (audit.STEP_OVERHEAD)
    layers = [[base / scale] * len(steps), [own / scale] * len(steps)]
    layers += [[live.get(k, 0) / scale for _, live in steps] for k in kinds]
    keys = ["across steps", "TensorFlow's own"] + list(kinds)
    labels = ["weights and slots" + (" and the context" if a.context else ""), "TensorFlow's own"] + list(kinds)
    if any(other):
        layers.append([b / scale for b in other])
        keys.append("other")
        labels.append("other")
    areas = ax.stackplot(xs, *layers, labels=labels, colors=[COLOURS[k] for k in keys], step="mid", linewidth=0)
    for area, key in zip(areas, keys):
        area.set_gid("stack-" + "".join(c if c.isalnum() else "-" for c in key.lower()))
    at = next((k for k, (label, _) in enumerate(steps) if label == a.peak.step), None)
    if at is not None:
        height = base + own + sum(steps[at][1].values())  # the total: the peak's step, its scratch included
        ax.plot([at], [height / scale], marker="v", color="#000000", linestyle="none", gid="peak",
                label=f"the step's peak: {size(height)}")
        ax.annotate(a.peak.step, (at, height / scale), xytext=(4, 4), textcoords="offset points", fontsize=8)
    if a.fit is not None:
        ax.axhline(a.fit.budget / scale, color="#000000", linestyle="--", linewidth=1.2, gid="card",
                   label=f"card: {size(a.fit.budget)}")
        _reserve_line(ax, a, scale)
    ax.set_ylim(0, top / scale * 1.1)
    ax.set_xlim(0, max(len(steps) - 1, 1))
    ticks = layer_ticks([label for label, _ in steps])
    ax.set_xticks([k for k, _ in ticks], [chart.short_name(n) for _, n in ticks], rotation=90, fontsize=7)
    ax.set_xlabel("the step's ops in the order TensorFlow runs them: forward, loss, backward, updates")
    ax.set_ylabel(f"memory ({name})")
    where = "on the device" if a.mode == "gpu" else "of host memory"
    title = f"{a.path}: {size(a.total_bytes)} {where} at batch {a.batch}"
    if a.fit is not None:
        title += f", {'fits' if a.fit.fits else 'does not fit'} a {size(a.fit.budget)} card"
    if a.high_total_bytes > a.total_bytes:
        title += (f"\n(up to {size(a.high_total_bytes)} in another order of TensorFlow's executor, "
                  "which the verdict takes)")
    fig.suptitle(title, fontsize=10)
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.01), ncol=4, fontsize=8, frameon=False)
    return fig


def sweep_figure(a, path=""):
    """--sweep's chart: the total against the batch (at the high end of the executor's orders, as the
    verdict takes it), and the card."""
    Figure, FigureCanvasAgg = chart._matplotlib(path)
    fig = Figure(figsize=(9, 5.5), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    budget = a.fit.budget if a.fit is not None else None
    top = max([t for _, t, _ in a.sweep] + [budget or 0, 1])
    scale = chart.unit(top)[1]
    ax.plot([b for b, _, _ in a.sweep], [t / scale for _, t, _ in a.sweep], marker="o", markersize=3,
            color="#c00000", label="total (the high end of the executor's orders)", gid="sweep-total")
    if budget is not None:
        _reserve_line(ax, a, scale)
    return chart.against_batch(fig, ax, a.path, budget, top, "lower right")


def _reserve_line(ax, a, scale):
    """On a GPU with a card, the line the total must stay under: the card less TensorFlow's reserve."""
    if a.reserve is not None and a.reserve.bytes:
        below = a.reserve.card - a.reserve.bytes
        ax.axhline(below / scale, color="#000000", linestyle=":", linewidth=1.2, gid="card-less-reserve",
                   label=f"the card less TensorFlow's reserve: {size(below)}")
