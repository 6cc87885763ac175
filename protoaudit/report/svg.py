"""The HTML report's charts, as inline SVG written here (no matplotlib: the page works without the
plot extra). Memory by layer: one stacked bar per row of the summary, by category, the running
total on a second scale and the card with `--gpu-mem`, as `--plot` draws them. Memory against the
batch for `--sweep`. Each category is one <path> (a bar is a few path commands), so a 700-layer
net stays small; every name is escaped, and each bar's name and figures are its <title>.
"""
from html import escape

from .chart import COLOURS, MAX_LABELS, STACK, categories, many_nets, row_name, short_name, slots, unit
from .units import size

WIDTH, HEIGHT = 960, 400
LEFT, RIGHT, TOP, BOTTOM = 64, 72, 16, 132  # margins: the axes' labels, the layer names below (at least)
SWEEP_HEIGHT, SWEEP_BOTTOM = 300, 44
CHAR_WIDTH = 5  # px, a generous average at font-size 10
HALO = ' paint-order="stroke" stroke="#fff" stroke-width="3" stroke-linejoin="round"'  # text readable over lines
ENGINE_COLOURS = ("#c00000", "#4e79a7")  # the audit's engine, the other one


def _n(x):
    """A coordinate, short: one decimal, no trailing zeros."""
    return f"{x:.1f}".rstrip("0").rstrip(".")


def ticks(top):
    """Round tick values from 0 to about `top` (at most 6 steps of 1, 2 or 5 times a power of ten)."""
    if top <= 0:
        return [0]
    step = 1.0
    while top / step > 6:
        step *= 10
    while top / step < 2:
        step /= 10
    for m in (1, 2, 5, 10):
        if top / (step * m) <= 6:
            step *= m
            break
    return [i * step for i in range(int(top / step + 1e-9) + 1)]


def _tick_label(v):
    return f"{v:g}"


def scales(rows, fit):
    """(tallest layer, top of the running total) of one chart: give two charts the larger of each to
    draw them on the same scales."""
    layers_top = max((r.total for r in rows if r.type), default=0) or max((r.total for r in rows), default=0)
    running_top = max([r.cumulative for r in rows] + ([fit.budget] if fit is not None else []) + [1])
    return layers_top, running_top


def layer_chart(rows, fit, label, shared=None):
    """The SVG of memory by layer for summary `rows` (and the card of `fit`); `label` names it for
    screen readers; `shared` is scales() of every chart drawn beside it."""
    return "".join(layer_chart_parts(rows, fit, label, shared))


def layer_chart_parts(rows, fit, label, shared=None):
    """layer_chart's text in pieces, as they are made: at 100,000 layers it is 25 MB."""
    layers_top, running_top = shared or scales(rows, fit)
    labels, many = _labelled(rows), many_nets(rows)
    bottom = max(BOTTOM, 16 + CHAR_WIDTH * max((len(short_name(rows[i].name)) for i in labels), default=0))
    height = HEIGHT - BOTTOM + bottom
    name, scale = unit(layers_top)
    ceiling = layers_top / scale * 1.15 or 1
    rname, rscale = unit(running_top)
    rceiling = running_top / rscale * 1.08
    places = slots(rows)
    span = places[-1][1] if places else 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    x = lambda v: LEFT + v / span * plot_w  # noqa: E731
    y = lambda v: TOP + plot_h - min(v / ceiling, 1) * plot_h  # noqa: E731
    ry = lambda v: TOP + plot_h - v / rceiling * plot_h  # noqa: E731
    yield (f'<svg class="chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{escape(label)}" '
           f'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="10">')
    yield from _axes(ticks(ceiling), ceiling, name, "memory of each layer", LEFT, TOP, plot_h, left=True)
    yield from _axes(ticks(rceiling), rceiling, rname, "running total", WIDTH - RIGHT, TOP, plot_h, left=False)
    margin = 0.0 if len(rows) > 200 else 0.1
    bottoms = [0.0] * len(rows)
    per_row = [categories(r) for r in rows]
    for category in list(STACK) + [c for c in COLOURS if c not in STACK]:
        d = []
        for i, cats in enumerate(per_row):
            value = cats.get(category, 0) / scale
            if value > 0:
                low, high = bottoms[i], bottoms[i] + value
                bottoms[i] = high
                x0, x1 = x(places[i][0] + margin), x(places[i][1] - margin)
                y0, y1 = y(low), y(high)
                if y0 - y1 >= 0.05:
                    d.append(f"M{_n(x0)} {_n(y0)}H{_n(x1)}V{_n(y1)}H{_n(x0)}z")
        if d:
            yield (f'<path class="bars" data-category="{escape(category)}" fill="{COLOURS[category]}" '
                   f'd="{"".join(d)}"/>')
    for i, r in enumerate(rows):  # a row beside the nets taller than every layer is cut, and says its size
        if r.total / scale > ceiling:
            cx = x((places[i][0] + places[i][1]) / 2)
            yield (f'<text x="{_n(cx)}" y="{TOP + 4}" transform="rotate(90 {_n(cx)} {TOP + 4})" '
                   f'dominant-baseline="middle">{escape(size(r.total))} \u2191</text>')
    yield from _nets(rows, places, x, TOP, plot_h)
    if rows:  # the running total, as steps over the bars
        yield '<polyline class="running" fill="none" stroke="#c00000" stroke-width="1.5" points="'
        for i, r in enumerate(rows):
            level = _n(ry(r.cumulative / rscale))
            yield f"{' ' if i else ''}{_n(x(places[i][0]))},{level} {_n(x(places[i][1]))},{level}"
        yield '"/>'
    if fit is not None:
        cy = ry(fit.budget / rscale)
        yield (f'<line class="card" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{_n(cy)}" y2="{_n(cy)}" stroke="#000" '
               f'stroke-dasharray="6 4" stroke-width="1.2"/>')
        # on the right, beside the running total's scale, which the card is drawn on
        yield (f'<text class="card-label" x="{WIDTH - RIGHT - 4}" y="{_n(cy - 4)}" text-anchor="end"{HALO}>'
               f'card: {escape(size(fit.budget))}</text>')
        crossing = next((i for i, r in enumerate(rows) if r.cumulative > fit.budget), None)
        if crossing is not None:
            cx = x((places[crossing][0] + places[crossing][1]) / 2)
            right = cx > LEFT + plot_w / 2
            yield (f'<line class="crossing" x1="{_n(cx)}" x2="{_n(cx)}" y1="{TOP}" y2="{TOP + plot_h}" '
                   f'stroke="#c00000" stroke-dasharray="2 3"/>')
            # in the band above the tallest layer (the scale's top is 1.15 times it), under the nets' labels
            yield (f'<text class="crossing-label" x="{_n(cx + (-4 if right else 4))}" y="{TOP + 24}" '
                   f'fill="#c00000" text-anchor="{"end" if right else "start"}"{HALO}>passes the card at '
                   f'{escape(row_name(rows[crossing], many))}</text>')
    yield from _names(rows, places, x, TOP + plot_h, labels)
    for i, r in enumerate(rows):  # each bar's name and figures on hover
        x0, x1 = x(places[i][0]), x(places[i][1])
        detail = ", ".join(f"{c} {size(v)}" for c, v in per_row[i].items() if v)
        yield (f'<rect class="hit" x="{_n(x0)}" y="{TOP}" width="{_n(max(x1 - x0, 0.1))}" height="{plot_h}" '
               f'fill-opacity="0"><title>{escape(row_name(r, many))}: {escape(size(r.total))}'
               f'{" (" + escape(detail) + ")" if detail else ""}; running total '
               f'{escape(size(r.cumulative))}</title></rect>')
    yield "</svg>"


def _axes(values, ceiling, unit_name, what, at, top, plot_h, left):
    """A vertical axis at x `at`: its ticks, their values and its title."""
    out = [f'<line x1="{at}" x2="{at}" y1="{top}" y2="{top + plot_h}" stroke="#888"/>']
    for v in values:
        ty = top + plot_h - v / ceiling * plot_h
        dx = -4 if left else 4
        out.append(f'<line x1="{at}" x2="{at + dx}" y1="{_n(ty)}" y2="{_n(ty)}" stroke="#888"/>'
                   f'<text x="{at + 2 * dx}" y="{_n(ty)}" text-anchor="{"end" if left else "start"}" '
                   f'dominant-baseline="middle">{_tick_label(v)}</text>')
    tx = at - 48 if left else at + 58
    cy = top + plot_h / 2
    out.append(f'<text x="{tx}" y="{_n(cy)}" transform="rotate(-90 {tx} {_n(cy)})" text-anchor="middle">'
               f'{what} ({unit_name})</text>')
    return out


def _nets(rows, places, x, top, plot_h):
    """A dotted line where one net's layers end and the next begin, with the net's label (none for
    a file's only net)."""
    out, start, many = [], 0, many_nets(rows)
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i].net != rows[start].net or bool(rows[i].type) != bool(rows[start].type):
            if rows[start].type and many:
                mid = x((places[start][0] + places[i - 1][1]) / 2)
                out.append(f'<text x="{_n(mid)}" y="{top + 10}" text-anchor="middle" fill="#333">'
                           f'{escape(rows[start].net)}</text>')
            if i < len(rows):
                lx = x(places[i][0])
                out.append(f'<line x1="{_n(lx)}" x2="{_n(lx)}" y1="{top}" y2="{top + plot_h}" stroke="#999" '
                           f'stroke-dasharray="1 2"/>')
            start = i
    return out


def _labelled(rows):
    """The rows whose names are shown: each while they can be read; past MAX_LABELS, evenly spaced
    ones, and always the rows held beside the nets."""
    step = max(1, -(-sum(1 for r in rows if r.type) // MAX_LABELS))
    return [i for i, r in enumerate(rows) if not r.type or i % step == 0]


def _names(rows, places, x, base, labels):
    """Each labelled bar's name, below it."""
    out = []
    for i in labels:
        r = rows[i]
        cx = x((places[i][0] + places[i][1]) / 2)
        name = short_name(r.name)
        out.append(f'<text class="name" x="{_n(cx)}" y="{base + 6}" transform="rotate(-90 {_n(cx)} {base + 6})" '
                   f'text-anchor="end" dominant-baseline="middle">{escape(name)}</text>')
    return out


def legend_items(rows):
    """The categories a chart of `rows` shows, in stacking order (for the page's legend)."""
    shown = {c for r in rows for c, v in categories(r).items() if v}
    return [(c, COLOURS[c]) for c in list(STACK) + [c for c in COLOURS if c not in STACK] if c in shown]


def sweep_chart(sweep):
    """The SVG of memory against the batch: each engine's total, the fixed part, and the card."""
    rows = [r for r in sweep.rows if not r.refused]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, SWEEP_HEIGHT - TOP - SWEEP_BOTTOM
    top = max([max(r.total, r.other_engine_total or 0) for r in rows] + [sweep.budget or 0, 1])
    name, scale = unit(top)
    ceiling = top / scale * 1.08
    low = min((r.batch for r in sweep.rows), default=1)
    high = max((r.batch for r in sweep.rows), default=1)
    width = max(high - low, 1)
    x = lambda b: LEFT + (b - low) / width * plot_w if high > low else LEFT + plot_w / 2  # noqa: E731
    y = lambda v: TOP + plot_h - v / scale / ceiling * plot_h  # noqa: E731
    out = [f'<svg class="chart" viewBox="0 0 {WIDTH} {SWEEP_HEIGHT}" role="img" aria-label="memory against the '
           f'batch" xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="10">']
    out += _axes(ticks(ceiling), ceiling, name, "total", LEFT, TOP, plot_h, left=True)
    out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" stroke="#888"/>')
    labelled = [b for b in ticks(high) if low <= b <= high] if high - low > 10 else [r.batch for r in sweep.rows]
    for b in labelled:
        out.append(f'<text x="{_n(x(b))}" y="{TOP + plot_h + 14}" text-anchor="middle">{_tick_label(b)}</text>')
    out.append(f'<text x="{LEFT + plot_w / 2}" y="{SWEEP_HEIGHT - 8}" text-anchor="middle">batch</text>')
    lines = [(f"total ({sweep.engine})", [r.total for r in rows], ENGINE_COLOURS[0], "")]
    if sweep.other_engine:
        lines.append((f"with {sweep.other_engine}", [r.other_engine_total for r in rows], ENGINE_COLOURS[1], ""))
    lines.append(("does not grow with the batch", [r.fixed for r in rows], "#888", ' stroke-dasharray="4 3"'))
    for title, values, colour, dash in lines:
        points = " ".join(f"{_n(x(r.batch))},{_n(y(v))}" for r, v in zip(rows, values))
        out.append(f'<polyline class="sweep" data-line="{escape(title)}" fill="none" stroke="{colour}" '
                   f'stroke-width="1.5"{dash} points="{points}"><title>{escape(title)}</title></polyline>')
    for r in rows:
        out.append(f'<circle cx="{_n(x(r.batch))}" cy="{_n(y(r.total))}" r="2.5" fill="{ENGINE_COLOURS[0]}">'
                   f'<title>batch {r.batch}: {escape(size(r.total))}</title></circle>')
    if sweep.budget is not None:
        cy = y(sweep.budget)
        out.append(f'<line class="card" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{_n(cy)}" y2="{_n(cy)}" stroke="#000" '
                   f'stroke-dasharray="6 4" stroke-width="1.2"/>')
        out.append(f'<text x="{LEFT + 4}" y="{_n(cy - 4)}">card: {escape(size(sweep.budget))}</text>')
    out.append("</svg>")
    return "".join(out)

