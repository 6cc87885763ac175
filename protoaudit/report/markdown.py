"""`--format markdown`: GitHub-flavoured markdown for a code review comment.

A reviewer reads the few lines that decide (the total, the verdict, Caffe's own figure, the
categories, and for a diff why B differs from A) and opens the per-layer table only if needed, so
that table sits in a collapsed <details> block. Every name from the net is escaped: a layer called
`a|b` or `<x>` must not break the table or turn into HTML.
"""
import re

from .diff_text import signed
from .text import (assumed_clause, death_lines, describe, net_name, other_engine_clause, pages_clause, refused_lines,
                   sweep_table, verdict_lines)
from .units import shapes, size

# HTML's own characters, and ~ (GFM's strikethrough, which not every renderer lets a backslash escape)
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "~": "&#126;"}
# markdown punctuation that could start emphasis, a link or code, or end a table cell
_PUNCTUATION = set("\\`*[]|")
# an underscore between two letters or digits (conv_decode1_bn) never starts emphasis
_LONE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")

LAYER_HEAD = ["net", "layer", "type", "top shapes", "params", "data", "diffs", "buffers", "workspace", "total",
              "cumulative"]
DIFF_HEAD = ["net", "layer", "type", "tops in A", "tops in B", "A", "B", "change", "status"]


def escape(text):
    """Plain text as inline markdown that renders as itself, in a table cell or a paragraph."""
    text = " ".join(str(text).split())  # a newline would end a table row
    out = []
    for i, ch in enumerate(text):
        if ch in _ENTITIES:
            out.append(_ENTITIES[ch])
        elif ch in _PUNCTUATION or (ch == "_" and _LONE_UNDERSCORE.match(text, i)):
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def code(text):
    """A path as inline code, unless a backtick in it would end the span early."""
    return f"`{text}`" if "`" not in text and "\n" not in text else escape(text)


def table(head, rows, right=()):
    """A GFM table; the columns numbered in `right` (figures) are right-aligned."""
    lines = ["| " + " | ".join(escape(h) for h in head) + " |",
             "|" + "|".join("---:" if i in right else "---" for i in range(len(head))) + "|"]
    lines += ["| " + " | ".join(escape(c) for c in row) + " |" for row in rows]
    return lines


def details(summary_line, body):
    """A collapsed block; the blank lines around the body let GitHub render the markdown in it."""
    return [f"<details><summary>{escape(summary_line)}</summary>", ""] + body + ["", "</details>"]


def _total(audit, summary):
    where = "on the device" if audit.mode == "gpu" else "of host memory"
    line = f"**Total: {size(summary.total)}** ({summary.total:,} bytes) {where}"
    for clause in (assumed_clause(summary), other_engine_clause(audit), pages_clause(audit)):
        if clause:
            line += f"; {clause}"
    return line + "."


def _verdict(fit, audit):
    """The verdict's first line in bold, then the largest batch and the iter_size."""
    lines = [escape(x) for x in verdict_lines(fit, audit)]
    return [f"**{lines[0]}**"] + lines[1:] if lines else []


def _figures(summary):
    """Caffe's own figure per net; the net is named only when the audit holds several."""
    items = summary.caffe_figure.items()
    return [(f"{escape(label)} net: " if len(items) > 1 else "") + f"{figure:,} bytes ({size(figure)})"
            for label, figure in items]


def _type(d):
    if d.type_a and d.type_b and d.type_a != d.type_b:
        return f"{d.type_a} → {d.type_b}"
    return d.type_b or d.type_a


def render(audit, summary, fit=None):
    bullets = [_total(audit, summary)] + _verdict(fit, audit)
    bullets.append("Caffe's own \"Memory required for data\": " + ", ".join(_figures(summary)) + ".")
    bullets.append(f"Grows with the batch: {size(summary.per_sample)}; does not: {size(summary.invariant)}.")
    bullets += [escape(line.strip()) for line in death_lines(audit.death)]
    bullets += [f"Assumed ({escape(net_name(net))}, layer {code(a.layer)}): {escape(a.what)}; to change it: "
                f"{code(a.override)}" for net, a in summary.assumptions]
    bullets += [f"Data shape ({escape(net_name(net))}, layer {code(o.layer)}, top {code(o.top)}): {shapes([o.shape])}, "
                f"from {escape(o.source)}" for net, o in summary.data_shapes]
    rows = [[kind, size(b), f"{b:,}"] for kind, b in summary.by_kind.items()]
    rows.append(["total", size(summary.total), f"{summary.total:,}"])
    layers = [[r.net, r.name, r.type, shapes(r.tops)]
              + [size(n) if n else "" for n in r.figures]
              + [size(r.total), size(r.cumulative)] for r in summary.rows]
    out = [f"**protoaudit** {code(audit.path)}", "", escape(describe(audit)), ""]
    out += [f"- {b}" for b in bullets] + [""]
    out += table(["category", "size", "bytes"], rows, right=(1, 2)) + [""]
    out += _sweep(audit.sweep)
    out += details(f"Per layer ({len(summary.rows)} rows)", table(LAYER_HEAD, layers, right=range(4, 11)))
    return "\n".join(out)


def _sweep(sweep):
    """--sweep's table (one row per batch) and how its totals were found."""
    if sweep is None:
        return []
    head, rows = sweep_table(sweep)
    card = f" on a {size(sweep.budget)} card" if sweep.budget is not None else ""
    figures = len(head) - (sweep.budget is not None)
    out = [f"**Batch sweep{card}**", ""] + table(head, rows, right=range(1, figures)) + [""]
    return out + [escape(sweep.describe()), ""] + [f"- {escape(line)}" for line in refused_lines(sweep)] + [""]


def render_diff(c, fit_a=None, fit_b=None):
    rows = [[kind, size(x), size(y), signed(y - x)] for kind, (x, y) in c.by_kind.items()]
    rows.append(["total", size(c.summary_a.total), size(c.summary_b.total), signed(c.delta)])
    bullets = ["Caffe's own \"Memory required for data\": A " + ", ".join(_figures(c.summary_a))
               + "; B " + ", ".join(_figures(c.summary_b)) + "."]
    bullets += [f"{side}: {line}" for side, fit, audit in (("A", fit_a, c.a), ("B", fit_b, c.b))
                for line in _verdict(fit, audit)]
    layers = [[d.net, d.name, _type(d), shapes(d.tops_a), shapes(d.tops_b), size(d.bytes_a), size(d.bytes_b),
               signed(d.delta), d.status] for d in c.layers]
    out = ["**protoaudit diff**", "",
           f"- A: {code(c.a.path)}: {escape(describe(c.a))}", f"- B: {code(c.b.path)}: {escape(describe(c.b))}", ""]
    out += table(["category", "A", "B", "change"], rows, right=(1, 2, 3)) + [""]
    out += [f"- {b}" for b in bullets] + [""]
    out += ["**Why**", ""] + [f"- {escape(s)}" for s in c.sentences] + [""]
    out += details(f"Per layer ({len(c.layers)} rows)", table(DIFF_HEAD, layers, right=(5, 6, 7)))
    return "\n".join(out)
