"""`--plot FILE.svg|.png`: memory by layer as a picture, from the summary's rows (with --sweep,
memory against the batch).

One stacked bar per row of the summary, in its order: every layer of every audited net, then the
rows held beside the nets (the solver's state, the CUDA context, host objects in CPU mode), each a
bar of its own colour. A second axis carries the running total and, with `--gpu-mem`, the card, so
the bar where the total passes the card can be seen. matplotlib is an optional extra: it is imported
here, only when a chart is asked for, and drawn without a display (Agg, or the SVG writer).
"""
import math
import os

from ..errors import InputError
from .units import size

FORMATS = (".svg", ".png")
INSTALL = "pip install 'protoaudit[plot]'"
# bottom to top in a layer's bar
STACK = ("data", "diffs", "buffers", "workspace", "params")
# a row held beside the nets (type "") has buffers of one kind; its bar's colour by that kind
BESIDE = {"history": "solver state", "param diff": "diffs", "context": "CUDA context", "host objects": "host objects"}
COLOURS = {"data": "#4e79a7", "diffs": "#f28e2b", "buffers": "#59a14f", "workspace": "#b07aa1", "params": "#9c755f",
           "solver state": "#bab0ac", "CUDA context": "#555555", "host objects": "#edc948"}
MAX_LABELS = 40  # tick labels on the layer axis, whatever the number of layers
LABEL_CHARS = 64  # a longer name is shown by its ends


def check(path):
    """Refuse at once (before the audit) a file type we cannot draw, a missing folder, or a missing
    matplotlib."""
    if os.path.splitext(path)[1].lower() not in FORMATS:
        raise InputError(f"--plot {path}: the chart is drawn as .svg or .png", fix="name the file chart.svg or chart.png")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise InputError(f"--plot {path}: there is no folder {folder}", fix="give a file in a folder that exists")
    _matplotlib(path)


def _matplotlib(path):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise InputError(f"--plot {path}: drawing a chart needs matplotlib, which is not installed",
                         fix=INSTALL) from None
    return Figure, FigureCanvasAgg


def draw(audit, summary, fit, path):
    """Write the chart of `summary` (and the card of `fit`, if any) to `path` (.svg or .png)."""
    check(path)
    save(sweep_figure(audit, audit.sweep, path) if audit.sweep is not None else figure(audit, summary, fit, path), path)


def save(fig, path):
    """Write a Figure as .svg (no date, fixed ids: the same chart gives the same file) or .png."""
    import matplotlib

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "protoaudit"}):
        try:
            fig.savefig(path, format=os.path.splitext(path)[1][1:].lower(), metadata=_metadata(path))
        except OSError as e:
            raise InputError(f"--plot {path}: cannot write the chart: {e.strerror or e}",
                             fix="give a file in a folder you can write") from None


def _metadata(path):
    return {"Date": None} if path.lower().endswith(".svg") else {"Software": "protoaudit"}


def categories(row):
    """{category: bytes} of one row: a layer's columns, or the whole of a row held beside the nets."""
    if row.type:
        columns = row.columns
        return {c: columns[c] for c in STACK}
    return {BESIDE.get(row.buffers[0].kind, "host objects") if row.buffers else "host objects": row.total}


def unit(largest):
    """The binary unit an axis reads best in: GiB from 1 GiB up, else MiB."""
    return ("GiB", 2**30) if largest >= 2**30 else ("MiB", 2**20)


def slots(rows):
    """(left, right) of each row's place on the layer axis: one unit per layer; the rows held
    beside the nets get a wider place in a long net, so they stay visible and their names readable."""
    layers = sum(1 for r in rows if r.type)
    beside = max(1.0, layers / MAX_LABELS)
    places, x = [], 0.0
    for r in rows:
        width = 1.0 if r.type else beside
        places.append((x, x + width))
        x += width
    return places


def figure(audit, summary, fit, path=""):
    """The matplotlib Figure: bars on the left axis, the running total and the card on the right."""
    Figure, FigureCanvasAgg = _matplotlib(path)
    rows = summary.rows
    places = slots(rows)
    fig = Figure(figsize=(min(16, max(9, 4 + 0.16 * len(rows))), 6.5), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    cum = ax.twinx()
    layers_top = max((r.total for r in rows if r.type), default=0) or max((r.total for r in rows), default=0)
    name, scale = unit(layers_top)
    ceiling = layers_top / scale * 1.15 or 1
    _bars(ax, [categories(r) for r in rows], places, scale, thin=len(rows) > 200)
    for i, r in enumerate(rows):  # a row beside the nets taller than every layer is cut, and says its size
        if r.total / scale > ceiling:
            ax.annotate(f"{size(r.total)} \u2191", (_centre(places[i]), ceiling), xytext=(0, -3),
                        textcoords="offset points", ha="center", va="top", rotation=90, fontsize=8, gid=f"cut-{i}",
                        bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "linewidth": 0})
    ax.set_ylim(0, ceiling)
    ax.set_xlim(0, places[-1][1] if places else 1)
    ax.set_ylabel(f"memory of each layer ({name})")
    ax.set_xlabel("layers in the order of the audited nets, then what is held beside them")
    _layer_ticks(ax, rows, places)
    _nets(ax, rows, places)
    _running_total(cum, rows, places, fit)
    where = "on the device" if audit.mode == "gpu" else "of host memory"
    title = f"{audit.path}: {size(summary.total)} {where}"
    if fit is not None:
        title += f", {'fits' if fit.fits else 'does not fit'} a {size(fit.budget)} card"
    fig.suptitle(title, fontsize=10)
    handles = ax.get_legend_handles_labels()[0] + cum.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.01), ncol=min(len(handles), 6) or 1,
              fontsize=8, frameon=False)
    return fig


def sweep_figure(audit, sweep, path=""):
    """--sweep's chart: the total against the batch for each engine, the part that does not grow
    with it, and the card. A batch Caffe refuses has no point."""
    Figure, FigureCanvasAgg = _matplotlib(path)
    rows = [r for r in sweep.rows if not r.refused]
    fig = Figure(figsize=(9, 5.5), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    top = max([r.total for r in rows] + [r.other_engine_total or 0 for r in rows] + [sweep.budget or 0, 1])
    scale = unit(top)[1]
    batches = [r.batch for r in rows]
    ax.plot(batches, [r.total / scale for r in rows], marker="o", markersize=3, color="#c00000",
            label=f"total ({sweep.engine})", gid="sweep-total")
    if sweep.other_engine:
        ax.plot(batches, [r.other_engine_total / scale for r in rows], color="#4e79a7",
                label=f"with {sweep.other_engine}", gid="sweep-other")
    ax.plot(batches, [r.fixed / scale for r in rows], color="#888888", linestyle="--",
            label="does not grow with the batch", gid="sweep-fixed")
    return against_batch(fig, ax, audit.path, sweep.budget, top, "upper left")


def against_batch(fig, ax, path, budget, top, legend):
    """The frame of a chart against the batch (Caffe's and Keras's --sweep): the card, the axes, the
    legend at `legend`, the title."""
    name, scale = unit(top)
    if budget is not None:
        ax.axhline(budget / scale, color="#000000", linestyle="--", linewidth=1.2, label=f"card: {size(budget)}",
                   gid="card")
    ax.set_ylim(0, top / scale * 1.08)
    ax.set_xlabel("batch")
    ax.set_ylabel(f"memory ({name})")
    ax.legend(loc=legend, fontsize=8, frameon=False)
    fig.suptitle(f"{path}: memory against the batch", fontsize=10)
    return fig


def _centre(place):
    return (place[0] + place[1]) / 2


def _bars(ax, per_row, places, scale, thin):
    """One stacked bar per row. Each category is one collection (thousands of bars draw in a
    second) with the gid bars-<category> and one piece per row that has the category, so the
    bars can be counted in an SVG. Thin bars touch, drawn without antialiasing (no moire)."""
    from matplotlib.collections import PolyCollection

    bottoms = [0.0] * len(per_row)
    margin = 0.0 if thin else 0.1
    for category in list(STACK) + [c for c in COLOURS if c not in STACK]:
        pieces = []
        for i, cats in enumerate(per_row):
            if category in cats:
                left, right = places[i][0] + margin, places[i][1] - margin
                low, high = bottoms[i], bottoms[i] + cats[category] / scale
                pieces.append([(left, low), (left, high), (right, high), (right, low)])
                bottoms[i] = high
        if pieces:
            shown = any(cats.get(category) for cats in per_row)
            ax.add_collection(PolyCollection(pieces, facecolors=COLOURS[category], linewidths=0, antialiaseds=not thin,
                                             label=category if shown else "_nolegend_",
                                             gid=f"bars-{category.replace(' ', '-')}"), autolim=False)


def _layer_ticks(ax, rows, places):
    """Each bar's name while they can be read; past MAX_LABELS, evenly spaced ones, and always
    the rows held beside the nets."""
    step = max(1, math.ceil(sum(1 for r in rows if r.type) / MAX_LABELS))
    ticks = [i for i, r in enumerate(rows) if not r.type or i % step == 0]
    ax.set_xticks([_centre(places[i]) for i in ticks], [short_name(rows[i].name) for i in ticks], rotation=90,
                  fontsize=7 if len(ticks) > 20 else 8)


def short_name(name):
    """A name whole up to LABEL_CHARS characters, else its ends around an ellipsis (both charts)."""
    if len(name) <= LABEL_CHARS:
        return name
    head = (LABEL_CHARS - 1) // 2
    return name[:head] + "\u2026" + name[len(name) - (LABEL_CHARS - 1 - head):]


def row_name(row, many):
    """A row's name, after its net's where the chart holds more than one net (`many`)."""
    return f"{row.net} {row.name}" if many and row.type else row.name


def many_nets(rows):
    return len({r.net for r in rows if r.type}) > 1


def _nets(ax, rows, places):
    """A dotted line where one net's layers end and the next begin, with the net's label (none for
    a file's only net)."""
    start, many = 0, many_nets(rows)
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i].net != rows[start].net or bool(rows[i].type) != bool(rows[start].type):
            if rows[start].type and many:
                ax.text((places[start][0] + places[i - 1][1]) / 2, 0.98, rows[start].net, ha="center", va="top",
                        transform=ax.get_xaxis_transform(), fontsize=8, color="#333333")
            if i < len(rows):
                ax.axvline(places[i][0], color="#999999", linestyle=":", linewidth=0.8)
            start = i


def _running_total(ax, rows, places, fit):
    """The running total as a step over the bars, the card as a level, and where one passes the other."""
    top = max([r.cumulative for r in rows] + ([fit.budget] if fit is not None else []) + [1])
    name, scale = unit(top)
    if rows:
        ys = [r.cumulative / scale for r in rows]
        ax.plot([p[0] for p in places] + [places[-1][1]], ys + ys[-1:], drawstyle="steps-post", color="#c00000",
                linewidth=1.4, label="running total", gid="cumulative")
    if fit is not None:
        ax.axhline(fit.budget / scale, color="#000000", linestyle="--", linewidth=1.2,
                   label=f"card: {size(fit.budget)}", gid="card")
        # its label at the right, beside the running total's scale, which the card is drawn on
        ax.annotate(f"card: {size(fit.budget)}", (1, fit.budget / scale), xycoords=("axes fraction", "data"),
                    xytext=(-4, 3), textcoords="offset points", ha="right", va="bottom", fontsize=8,
                    gid="card-label", bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "linewidth": 0})
        crossing = next((i for i, r in enumerate(rows) if r.cumulative > fit.budget), None)
        if crossing is not None:
            x = _centre(places[crossing])
            ax.axvline(x, color="#c00000", linestyle=":", linewidth=1, gid="crossing")
            right = x > places[-1][1] / 2  # the label on the side with room
            # in the band above the tallest layer (the left scale's top is 1.15 times it), under the nets' labels
            ax.annotate(f"passes the card at {row_name(rows[crossing], many_nets(rows))}", (x, 0.93),
                        xycoords=("data", "axes fraction"), xytext=(-4 if right else 4, 0),
                        textcoords="offset points", ha="right" if right else "left", va="top", fontsize=8,
                        color="#c00000", gid="crossing-label",
                        bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "linewidth": 0})
    ax.set_ylim(0, top / scale * 1.08)
    ax.set_ylabel(f"running total ({name})")
