"""`--format csv`: one row per layer, every figure an integer number of bytes, for a spreadsheet
(with --sweep, one row per batch instead).

The rows are the per-layer table's (the nets' layers, then the solver's state and the CUDA
context), so the last cumulative figure is the total. Shapes are written as in the text report.
The last column holds the guesses protoaudit made for that layer (a Python layer's built-in
shapes), each with the flag that changes it.
"""
import csv
import io

from .units import shapes

AUDIT_HEAD = ["net", "layer", "type", "top_shapes", "params_bytes", "data_bytes", "diffs_bytes", "buffers_bytes",
              "workspace_bytes", "total_bytes", "cumulative_bytes", "assumed"]
SWEEP_HEAD = ["batch", "total_bytes", "other_engine_total_bytes", "per_sample_bytes", "fixed_bytes", "fits", "how",
              "refused"]
DIFF_HEAD = ["net", "layer", "status", "type_a", "type_b", "tops_a", "tops_b", "bytes_a", "bytes_b", "change_bytes"]


def _write(head, rows):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(head)
    writer.writerows(rows)
    return out.getvalue().rstrip("\n")


def render(audit, summary, fit=None):
    if audit.sweep is not None:  # --sweep: one row per batch instead of per layer
        return _write(SWEEP_HEAD, [
            [r.batch, r.total, r.other_engine_total, r.per_sample, r.fixed, "" if r.fits is None else str(r.fits).lower(),
             r.how, r.refused] for r in audit.sweep.rows])
    assumed = {}
    named = {(r.net, r.name) for r in summary.rows}
    first = {}  # each net's first row, which takes what was assumed of no layer of it (a solver's field)
    for r in summary.rows:
        first.setdefault(r.net, r.name)
    for net, a in summary.assumptions:
        layer = a.layer if (net, a.layer) in named else first.get(net)
        assumed.setdefault((net, layer), []).append(f"{a.what} (to change it: {a.override})")
    return _write(AUDIT_HEAD, [
        [r.net, r.name, r.type, shapes(r.tops)]
        + list(r.figures) + [r.total, r.cumulative]
        + ["; ".join(assumed.get((r.net, r.name), ()))]
        for r in summary.rows])


def render_diff(c, fit_a=None, fit_b=None):
    return _write(DIFF_HEAD, [
        [d.net, d.name, d.status, d.type_a, d.type_b, shapes(d.tops_a), shapes(d.tops_b), d.bytes_a, d.bytes_b,
         d.delta] for d in c.layers])
