"""`--format html`: one self-contained page to open in any browser or attach to an issue.

No network, no CDN, no server: the style, the charts (inline SVG, protoaudit.report.svg) and a
small script are in the file, and its Content-Security-Policy allows nothing else (no fetch, no
image, no font, and no script but this one, by its hash). The page reads fully without
JavaScript: every table is plain HTML; the script only adds sorting (click a column's head) and
filtering (by layer name or type); rows that tie keep the net's order. Every name from the prototxt is escaped (html.escape), and
the script never writes HTML, only moves rows and hides them.

Written with the standard library (html.escape and f-strings): the page is a handful of
sections and tables, and a templating library would add a dependency without removing any of
the escaping decisions, which are made cell by cell here.
"""
import base64
import hashlib
from html import escape

from .. import __version__
from ..net.freeze import frozen_lines
from .diff_text import signed
from .svg import ENGINE_COLOURS, layer_chart, layer_chart_parts, legend_items, scales, sweep_chart
from .text import (assumed_clause, death_lines, describe, gap_lines, other_engine_clause, pages_clause, recipe_lines,
                   refused_lines, shape_lines, sweep_table, verdict_lines)
from .units import shapes, size

CATEGORIES = ("params", "data", "diffs", "buffers", "workspace")

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;margin:0 auto;
max-width:1400px;padding:16px 24px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f3f4f6;padding:1px 4px;
border-radius:4px;word-break:break-all}
.describe{color:#57606a;margin:2px 0}
.total{font-size:18px;margin:12px 0 4px}
.verdict{font-weight:600;padding:6px 10px;border-radius:6px;display:inline-block;margin:4px 0}
.fits{background:#dafbe1;color:#116329}.nofit{background:#ffebe9;color:#a40e26}
ul{padding-left:20px;margin:6px 0}li{margin:3px 0}
.wrap{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}
th,td{border:1px solid #d0d7de;padding:3px 7px;text-align:left;white-space:nowrap}
th{background:#f6f8fa;position:sticky;top:0}thead tr.group th{top:auto;text-align:center}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
tbody tr:nth-child(even){background:#fafbfc}
tr.beside td{background:#f0f3f6;font-style:italic}
tr.changed td{background:#fff8c5}tr.added td{background:#dafbe1}tr.removed td{background:#ffebe9}
td.status{font-weight:600}
td.name,td.tops{white-space:normal;overflow-wrap:anywhere;min-width:8em;max-width:22em}
th.sortable{cursor:pointer;user-select:none}th.sortable:focus{outline:2px solid #0969da}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
.tools{margin:8px 0}.tools input{font:inherit;padding:4px 8px;width:400px;max-width:100%}
.count{color:#57606a;margin-left:8px}
svg.chart{width:100%;height:auto;max-width:1400px;border:1px solid #eaeef2;background:#fff}
.legend{display:flex;flex-wrap:wrap;gap:14px;font-size:12px;margin:4px 0 10px}
.legend span{display:inline-flex;align-items:center;gap:5px}
footer{color:#57606a;font-size:12px;margin:32px 0 8px}
"""

SCRIPT = """
(function () {
  "use strict";
  var collate = new Intl.Collator(undefined, {numeric: true, sensitivity: "base"}).compare;
  function key(cell, numeric) {
    if (numeric) {
      var v = cell ? cell.getAttribute("data-v") : null;
      return v === null || v === "" ? -Infinity : Number(v);
    }
    return cell ? cell.textContent : "";
  }
  function sortBy(table, heads, index) {
    var th = heads[index], numeric = th.getAttribute("data-type") === "num";
    var now = th.getAttribute("aria-sort");
    var descending = now === "descending" ? false : now === "ascending" ? true : numeric;
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[index], numeric), y = key(b.cells[index], numeric);
      var order = numeric ? (x < y ? -1 : x > y ? 1 : 0) : collate(x, y);
      return (descending ? -order : order) || a.protoauditIndex - b.protoauditIndex;
    });
    var frag = document.createDocumentFragment();
    rows.forEach(function (r) { frag.appendChild(r); });
    body.appendChild(frag);
    heads.forEach(function (h) { h.setAttribute("aria-sort", "none"); });
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }
  function filter(table, heads, input, count) {
    var words = input.value.trim().toLowerCase(), columns = [], shown = 0;
    heads.forEach(function (h, i) { if (h.hasAttribute("data-filter")) columns.push(i); });
    var rows = table.tBodies[0].rows;
    for (var r = 0; r < rows.length; r++) {
      var row = rows[r], hit = !words;
      for (var c = 0; !hit && c < columns.length; c++) {
        var cell = row.cells[columns[c]];
        hit = !!cell && cell.textContent.toLowerCase().indexOf(words) >= 0;
      }
      row.hidden = !hit;
      if (hit) shown++;
    }
    count.textContent = shown + " of " + rows.length + " rows";
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    var head = table.tHead.rows[table.tHead.rows.length - 1];
    var heads = Array.prototype.slice.call(head.cells);
    Array.prototype.forEach.call(table.tBodies[0].rows, function (r, i) { r.protoauditIndex = i; });
    heads.forEach(function (th, i) {
      th.classList.add("sortable");
      th.tabIndex = 0;
      th.setAttribute("aria-sort", "none");
      th.title = "sort by this column";
      th.addEventListener("click", function () { sortBy(table, heads, i); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(table, heads, i); }
      });
    });
    var tools = document.querySelector('[data-tools-for="' + table.id + '"]');
    if (tools) {
      var input = tools.querySelector("input"), count = tools.querySelector(".count");
      tools.hidden = false;
      input.addEventListener("input", function () { filter(table, heads, input, count); });
      filter(table, heads, input, count);
    }
  });
})();
"""


def _hash(text):
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


# nothing may be fetched or run but this page's own style and script
CSP = f"default-src 'none'; style-src {_hash(STYLE)}; script-src {_hash(SCRIPT)}; base-uri 'none'; form-action 'none'"


def page(title, body):
    """The whole file: `body` (already escaped HTML) with the style, the script and the policy."""
    return _head(title) + body + _tail()


def _head(title):
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<meta name="generator" content="protoaudit {escape(__version__)}">\n'
            f"<title>{escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n")


def _tail():
    return (f'\n<footer>Made by protoaudit {escape(__version__)}: what Caffe allocates, from its source, without a GPU. '
            f"Click a column's head to sort; the box above a table filters it by what its placeholder names.</footer>\n"
            f"<script>{SCRIPT}</script>\n</body>\n</html>")


# --- pieces ----------------------------------------------------------------------------------------
def _list(lines):
    lines = [line.strip() for line in lines if line.strip()]
    return "<ul>" + "".join(f"<li>{escape(line)}</li>" for line in lines) + "</ul>" if lines else ""


def _num(n, text=None):
    """A figure's cell: its bytes to sort by, its size to read (empty for 0 or none)."""
    if n is None:
        return '<td class="n"></td>'
    return f'<td class="n" data-v="{n}">{escape(size(n) if text is None else text) if n or text else ""}</td>'


def _th(text, numeric=False, filtered=False, span=None):
    attrs = (' class="n" data-type="num"' if numeric else "") + (" data-filter" if filtered else "")
    attrs += f' colspan="{span}"' if span else ""
    return f"<th{attrs}>{escape(text)}</th>"


def _tools(table_id, what, by="layer name or type"):
    """The filter box: hidden until the script runs (without it, it would do nothing)."""
    return (f'<div class="tools" data-tools-for="{table_id}" hidden><label>Filter {escape(what)}: '
            f'<input type="search" placeholder="{escape(by)}" aria-controls="{table_id}"></label>'
            f'<span class="count" aria-live="polite"></span></div>')


def _legend(rows):
    items = "".join(f'<span><svg width="11" height="11" aria-hidden="true"><rect width="11" height="11" '
                    f'fill="{colour}"/></svg>{escape(name)}</span>' for name, colour in legend_items(rows))
    return (f'<div class="legend">{items}<span><svg width="18" height="11" aria-hidden="true"><line x1="0" x2="18" '
            f'y1="6" y2="6" stroke="#c00000" stroke-width="2"/></svg>running total (right scale)</span></div>')


def _verdict(fit, audit, side=""):
    lines = verdict_lines(fit, audit)
    if not lines:
        return ""
    cls = "fits" if fit.fits else "nofit"
    return (f'<p class="verdict {cls}">{escape(side)}{escape(lines[0])}</p>' + _list(lines[1:]))


def _total_line(audit, summary):
    where = "on the device" if audit.mode == "gpu" else "of host memory"
    text = f"<b>Total: {escape(size(summary.total))}</b> ({summary.total:,} bytes) {where}"
    for clause in (assumed_clause(summary), other_engine_clause(audit), pages_clause(audit)):
        if clause:
            text += f"; {escape(clause)}"
    return f'<p class="total">{text}.</p>'


def _figures(summary):
    items = summary.caffe_figure.items()
    return [(f"{label} net: " if len(items) > 1 else "") + f"{figure:,} bytes ({size(figure)})" for label, figure in items]


def _kinds(summary):
    rows = "".join(f"<tr><td>{escape(kind)}</td>{_num(b)}<td class='n'>{b:,}</td></tr>"
                   for kind, b in summary.by_kind.items())
    rows += f"<tr><td><b>total</b></td>{_num(summary.total)}<td class='n'>{summary.total:,}</td></tr>"
    return ('<table id="kinds"><thead><tr><th>category</th><th class="n">size</th><th class="n">bytes</th></tr>'
            f"</thead><tbody>{rows}</tbody></table>")


def _chart(rows, fit, label, shared=None):
    return f"{_legend(rows)}{layer_chart(rows, fit, label, shared)}"


def _sweep(sweep):
    if sweep is None:
        return ""
    head, cells = sweep_table(sweep)
    body = ""
    for r, row in zip(sweep.rows, cells):
        figures = [r.batch, r.total] + ([r.other_engine_total] if sweep.other_engine else []) + [r.per_sample, r.fixed]
        tds = [_num(n, text) if n is not None else f'<td class="n">{escape(text)}</td>'
               for n, text in zip(figures, row)]
        if sweep.budget is not None:
            tds.append(f'<td class="{"fits" if r.fits else "nofit" if r.fits is not None else ""}">'
                       f"{escape(row[-1])}</td>")
        body += f"<tr>{''.join(tds)}</tr>"
    heads = "".join(_th(h, numeric=i < len(head) - (sweep.budget is not None)) for i, h in enumerate(head))
    refused = _list(refused_lines(sweep))
    card = f" on a {size(sweep.budget)} card" if sweep.budget is not None else ""
    return (f'<section id="sweep"><h2>Batch sweep{escape(card)}</h2><p>{escape(sweep.describe())}</p>'
            f'{_sweep_legend(sweep)}{sweep_chart(sweep)}<div class="wrap"><table id="sweep-table" class="sortable">'
            f"<thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table></div>{refused}</section>")


def _sweep_legend(sweep):
    items = [(f"total ({sweep.engine})", ENGINE_COLOURS[0], "")]
    if sweep.other_engine:
        items.append((f"with {sweep.other_engine}", ENGINE_COLOURS[1], ""))
    items.append(("does not grow with the batch", "#888", ' stroke-dasharray="4 3"'))
    if sweep.budget is not None:
        items.append((f"card: {size(sweep.budget)}", "#000", ' stroke-dasharray="6 4"'))
    return '<div class="legend">' + "".join(
        f'<span><svg width="22" height="11" aria-hidden="true"><line x1="0" x2="22" y1="6" y2="6" stroke="{colour}" '
        f'stroke-width="2"{dash}/></svg>{escape(name)}</span>' for name, colour, dash in items) + "</div>"


# --- the audit -------------------------------------------------------------------------------------
LAYER_HEAD = ["#", "net", "layer", "type", "top shapes", *CATEGORIES, "total", "cumulative"]


def _layer_table(summary):
    """The table in pieces, a row each: at 100,000 layers the rows are 60 MB of text, never held whole."""
    heads = "".join(_th(h, numeric=h in ("#", *CATEGORIES, "total", "cumulative"), filtered=h in ("layer", "type"))
                    for h in LAYER_HEAD)
    yield (_tools("layers", "the layers") + f'<div class="wrap"><table id="layers" class="sortable"><thead><tr>{heads}'
           f'</tr></thead><tbody>')
    for i, r in enumerate(summary.rows, start=1):
        cells = (f'<td class="n" data-v="{i}">{i}</td><td>{escape(r.net)}</td><td>{escape(r.name)}</td>'
                 f"<td>{escape(r.type)}</td><td>{escape(shapes(r.tops))}</td>"
                 + "".join(map(_num, r.figures)) + _num(r.total, size(r.total)) + _num(r.cumulative))
        yield f"<tr{'' if r.type else ' class=beside'}>{cells}</tr>"
    yield "</tbody></table></div>"


def render(audit, summary, fit=None):
    return "".join(render_parts(audit, summary, fit))


def render_parts(audit, summary, fit=None):
    """The page in pieces, as they are made (the command writes them so)."""
    figures = _figures(summary)
    facts = [f"Caffe's own \"Memory required for data\": {', '.join(figures)}.",
             f"Grows with the batch: {size(summary.per_sample)}; does not: {size(summary.invariant)}."]
    explanation = (recipe_lines(summary.recipe) + frozen_lines(summary.frozen, audit.solver_type) + gap_lines(summary)
                   + shape_lines(summary) + death_lines(audit.death))
    body = [f"<header><h1>protoaudit <code>{escape(audit.path)}</code></h1>",
            f'<p class="describe">{escape(describe(audit))}</p></header>',
            '<section id="summary"><h2>Summary</h2>', _total_line(audit, summary), _verdict(fit, audit), _list(facts),
            _kinds(summary), "</section>"]
    if explanation:
        body += ['<section id="explanation"><h2>Explanation</h2>', _list(explanation), "</section>"]
    body += ['<section id="chart"><h2>Memory by layer</h2>', _legend(summary.rows)]
    yield _head(f"protoaudit: {audit.path}") + "\n".join(b for b in body if b)
    yield from layer_chart_parts(summary.rows, fit, f"memory by layer of {audit.path}")
    after = ["</section>", _sweep(audit.sweep), f'<section id="per-layer"><h2>Per layer ({len(summary.rows)} rows)</h2>']
    yield "\n" + "\n".join(b for b in after if b) + "\n"
    yield from _layer_table(summary)
    yield "\n</section>" + _tail()


# --- the diff --------------------------------------------------------------------------------------
SIDE_HEAD = ["total", "cumulative"]  # per side: the categories' changes are the summary's table


def _diff_table(c):
    """The change and the status first, then the layer, then A's and B's totals: 1,400 px wide
    for a corpus net (a column per category and side made it 2,100)."""
    by_a = {(r.net, r.name): r for r in c.summary_a.rows}
    by_b = {(r.net, r.name): r for r in c.summary_b.rows}
    nets = len({d.net for d in c.layers} - {"process"}) > 1
    fixed = ["#", *(["net"] if nets else []), "layer", "type", "tops in A", "tops in B"]
    group = ('<tr class="group"><th colspan="2"></th>' + f'<th colspan="{len(fixed)}"></th>'
             + f'<th colspan="{len(SIDE_HEAD)}">A</th><th colspan="{len(SIDE_HEAD)}">B</th></tr>')
    heads = (_th("change", numeric=True) + _th("status", filtered=True)
             + "".join(_th(h, numeric=h == "#", filtered=h in ("layer", "type")) for h in fixed)
             + "".join(_th(h, numeric=True) for h in SIDE_HEAD) * 2)
    body = []
    for i, d in enumerate(c.layers, start=1):
        cells = [_num(d.delta, signed(d.delta)), f'<td class="status">{escape(d.status)}</td>',
                 f'<td class="n" data-v="{i}">{i}</td>', f"<td>{escape(d.net)}</td>" if nets else "",
                 f'<td class="name">{escape(d.name)}</td><td>{escape(_type(d))}</td>',
                 f"<td class=tops>{escape(shapes(d.tops_a)) if d.status != 'added' else ''}</td>",
                 f"<td class=tops>{escape(shapes(d.tops_b)) if d.status != 'removed' else ''}</td>"]
        for row in (by_a.get((d.net, d.name)), by_b.get((d.net, d.name))):
            if row is None:
                cells.append('<td class="n"></td>' * len(SIDE_HEAD))
            else:
                cells += [_num(row.total, size(row.total)), _num(row.cumulative)]
        body.append(f'<tr class="{d.status}">{"".join(cells)}</tr>')
    return (_tools("layers", "the layers", "layer, type or status (added, removed, changed)")
            + '<div class="wrap"><table id="layers" class="sortable"><thead>'
            f'{group}<tr>{heads}</tr></thead><tbody>{"".join(body)}</tbody></table></div>')


def _type(d):
    if d.type_a and d.type_b and d.type_a != d.type_b:
        return f"{d.type_a} \u2192 {d.type_b}"
    return d.type_b or d.type_a


def _diff_kinds(c):
    rows = "".join(f"<tr><td>{escape(kind)}</td>{_num(x, size(x))}{_num(y, size(y))}{_num(y - x, signed(y - x))}</tr>"
                   for kind, (x, y) in c.by_kind.items())
    a, b = c.summary_a.total, c.summary_b.total
    rows += f"<tr><td><b>total</b></td>{_num(a, size(a))}{_num(b, size(b))}{_num(c.delta, signed(c.delta))}</tr>"
    return ('<table id="kinds"><thead><tr><th>category</th><th class="n">A</th><th class="n">B</th>'
            f'<th class="n">change</th></tr></thead><tbody>{rows}</tbody></table>')


def render_diff(c, fit_a=None, fit_b=None):
    facts = ["Caffe's own \"Memory required for data\": A " + ", ".join(_figures(c.summary_a))
             + "; B " + ", ".join(_figures(c.summary_b)) + "."]
    shared = tuple(map(max, zip(scales(c.summary_a.rows, fit_a), scales(c.summary_b.rows, fit_b))))
    body = ["<header><h1>protoaudit diff</h1>",
            f'<p class="describe"><b>A</b>: <code>{escape(c.a.path)}</code>: {escape(describe(c.a))}</p>',
            f'<p class="describe"><b>B</b>: <code>{escape(c.b.path)}</code>: {escape(describe(c.b))}</p></header>',
            '<section id="summary"><h2>Summary</h2>',
            f'<p class="total"><b>Change: {escape(signed(c.delta))}</b> (B: {escape(size(c.summary_b.total))}, '
            f"A: {escape(size(c.summary_a.total))}).</p>",
            _verdict(fit_a, c.a, "A: "), _verdict(fit_b, c.b, "B: "), _list(facts), _diff_kinds(c), "</section>",
            '<section id="explanation"><h2>Why</h2>', _list(c.sentences), "</section>",
            '<section id="chart"><h2>Memory by layer</h2><h3>A</h3>',
            _chart(c.summary_a.rows, fit_a, f"memory by layer of A, {c.a.path}", shared), "<h3>B</h3>",
            _chart(c.summary_b.rows, fit_b, f"memory by layer of B, {c.b.path}", shared), "</section>",
            f'<section id="per-layer"><h2>Per layer, side by side ({len(c.layers)} rows)</h2>', _diff_table(c),
            "</section>"]
    return page(f"protoaudit diff: {c.a.path} / {c.b.path}", "\n".join(b for b in body if b))
