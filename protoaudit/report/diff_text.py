"""`protoaudit diff` in the terminal: the layers side by side, the categories, the explanation."""
from .table import simple_table
from .text import describe, verdict_lines
from .units import shapes, size


def signed(n):
    return ("+" if n > 0 else "-" if n < 0 else "") + (size(abs(n)) if n else "0")


def layer_table(c):
    rows = []
    for d in c.layers:
        rows.append([d.net, d.name, d.type_b or d.type_a, shapes(d.tops_a) if d.status != "added" else "",
                     shapes(d.tops_b) if d.status != "removed" else "", size(d.bytes_a), size(d.bytes_b),
                     signed(d.delta), d.status])
    return simple_table(rows, ["net", "layer", "type", "tops in A", "tops in B", "A", "B", "change", ""])


def kind_table(c):
    rows = [[kind, size(x), size(y), signed(y - x)] for kind, (x, y) in c.by_kind.items()]
    rows.append(["total", size(c.summary_a.total), size(c.summary_b.total), signed(c.delta)])
    return simple_table(rows, ["category", "A", "B", "change"])


def render(c, fit_a=None, fit_b=None):
    out = [f"A: {c.a.path}", "   " + describe(c.a), f"B: {c.b.path}", "   " + describe(c.b), "",
           layer_table(c), "", kind_table(c), "", "Why:"]
    out += [f"- {s}" for s in c.sentences]
    if fit_a or fit_b:
        out.append("")
        out += ["A: " + line for line in verdict_lines(fit_a, c.a)]
        out += ["B: " + line for line in verdict_lines(fit_b, c.b)]
    return "\n".join(out)
