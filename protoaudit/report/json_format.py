"""`--format json`: the audit's facts, machine-readable. The schema is documented in docs/reports.md and
kept stable: fields may be added, never renamed or removed.

The command writes the report as it is made (`render_parts`): the per-layer lists are made a
layer at a time and let go once written, so a 100,000-layer net's report, some 200,000 buffers,
is never held whole, as dicts or as text. `to_dict` (the library's) holds it whole.
"""
import itertools
import json
import math

from .. import __version__

SCHEMA_VERSION = 1


def buffer_dict(b):
    return {"owner": b.owner, "kind": b.kind, "elements": b.elements, "itemsize": b.itemsize, "bytes": b.bytes,
            "touch": b.touch, "per_sample": b.per_sample, "device": b.device}


def fit_dict(fit):
    if fit is None:
        return None
    return {"budget_bytes": fit.budget, "total_bytes": fit.total, "fits": fit.fits, "headroom_bytes": fit.headroom,
            "batch": fit.batch, "largest_batch": fit.largest_batch, "effective_batch": fit.effective_batch,
            "suggested_batch": fit.suggested_batch, "suggested_iter_size": fit.suggested_iter_size,
            "largest_batch_limit": fit.limit}


def recipe_dict(r):
    if r is None:
        return None
    return {"activation_elements": r.activation_elements, "param_elements": r.param_elements,
            "activation_bytes": r.activation_bytes, "param_bytes": r.param_bytes, "total_bytes": r.total,
            "ratio": r.ratio, "misses": r.misses}


def frozen_dict(f):
    if f is None:
        return None
    return {"layers": f.layers, "param_elements": f.param_elements, "param_bytes": f.param_bytes,
            "param_diff_bytes": f.diff_bytes, "history_bytes": f.history_bytes, "top_diff_bytes": f.top_diff_bytes}


def sweep_dict(sweep):
    """--sweep's rows, one per batch, and how their totals were found."""
    if sweep is None:
        return None, None
    rows = [{"batch": r.batch, "total_bytes": r.total, "other_engine_total_bytes": r.other_engine_total,
             "per_sample_bytes": r.per_sample, "fixed_bytes": r.fixed, "fits": r.fits, "how": r.how, "refused": r.refused or None}
            for r in sweep.rows]
    basis = {"how": sweep.how, "base_batch": sweep.base_batch, "checked_at": sweep.checked_at, "engine": sweep.engine,
             "other_engine": sweep.other_engine, "budget_bytes": sweep.budget, "refused_at": sweep.refused_at,
             "description": sweep.describe(),
             "not_scaling": [{"net": net, "owner": owner, "kind": kind, "batch": batch, "expected_bytes": expected,
                              "audited_bytes": got} for net, owner, kind, batch, expected, got in sweep.broken]}
    return rows, basis


class Lazy:
    """A list written as it is made: `make()` gives its items afresh."""

    def __init__(self, make):
        self.make = make


def layer_dict(r, many=None):
    """A row of the per-layer table; `many`: how a row's long list of buffers is made (the solver
    state's row holds one per parameter blob), as to_dict's."""
    buffers = r.buffers
    return {"name": r.name, "type": r.type, "tops": [list(t) for t in r.tops], "bytes": r.total,
            "param_elements": r.param_count,
            "buffers": many(buffer_dict, buffers) if many and len(buffers) > MANY else list(map(buffer_dict, buffers))}


MANY = 1000  # buffers a row's list holds before it is made as it is written


def extra_dict(b):
    return buffer_dict(b) | {"net": b.net}


def listed(make, items):
    return list(map(make, items))


def to_dict(audit, summary, fit=None, many=listed):
    """The JSON report as plain data (dicts and lists): also the library's `Audit.to_dict()`.
    `many(make, items)`: a list of one item per layer or buffer, made by `make` (a list, or a
    Lazy where the report is written as it is made)."""
    nets = []
    for net_audit in audit.nets:
        label = net_audit.buffers[0].net if net_audit.buffers else net_audit.role
        rows = [r for r in summary.rows if r.net == label]
        nets.append({
            "name": net_audit.name,
            "file": net_audit.net.path,
            "caffe_proto": _schema_said(getattr(net_audit.net, "schema", "bvlc")),
            "label": label,
            "role": net_audit.role,
            "phase": net_audit.phase,
            "batch": net_audit.batch,
            "forward_only": net_audit.forward_only,
            "total_bytes": summary.by_net.get(label, 0),
            "memory_required_for_data": net_audit.net.memory_required_for_data,
            "layers": many(lambda r: layer_dict(r, many), rows),
        })
    sweep, sweep_basis = sweep_dict(audit.sweep)
    return {
        "protoaudit": __version__,
        "schema": SCHEMA_VERSION,
        "path": audit.path,
        "mode": audit.mode,
        "engine": audit.engine,
        "solver_type": audit.solver_type,
        "iter_size": audit.iter_size,
        "total_bytes": summary.total,
        "other_engine_total_bytes": audit.other_engine_total,
        # (only where the run stops under the other engine: its total is then null)
        **({} if audit.other_engine_stops is None else {"other_engine_stops": {
            "layer": audit.other_engine_stops.layer, "line": audit.other_engine_stops.line,
            "message": audit.other_engine_stops.message, "fix": audit.other_engine_stops.fix}}),
        "uncounted_host_bytes": summary.host,
        "cudamalloc_pages_bytes": audit.cudamalloc_pages,
        "by_kind": summary.by_kind,
        "by_touch": summary.by_touch,
        "params": None if summary.params is None else {
            "total": summary.params.total, "trainable": summary.params.trainable,
            "non_trainable": summary.params.frozen},
        "biggest": [{"net": c.row.net, "layer": c.row.name, "type": c.row.type, "bytes": c.row.total,
                     "parts": [{"what": what, "bytes": n} for what, n in c.parts]} for c in summary.biggest],
        "nets": nets,
        "extra": many(extra_dict, audit.extra),  # the solver's state: a buffer per parameter blob
        "fit": fit_dict(fit),
        "recipe": recipe_dict(summary.recipe),
        "frozen": frozen_dict(summary.frozen),
        "gaps": [{"net": net, "layer": layer, "type": kind, "not_counted": what}
                 for net, layer, kind, what in summary.gaps],
        "death": None if audit.death is None else {
            "line": audit.death.line, "message": audit.death.message, "where": audit.death.where,
            "held_before_bytes": audit.death.before, "held_after_bytes": audit.death.after,
            "held_after_pages_bytes": audit.death.after_pages,
            "card_bytes": audit.death.card, "card": audit.death.card_name},
        "assumptions": [{"net": net, "layer": a.layer, "assumption": a.what, "override": a.override}
                        for net, a in summary.assumptions],
        "data_shapes": [{"net": net, "layer": o.layer, "top": o.top, "shape": list(o.shape), "source": o.source}
                        for net, o in summary.data_shapes],
        "sweep": sweep,
        "sweep_basis": sweep_basis,
    }


def _lazy(make, items):
    return Lazy(lambda: map(make, items))


def render(audit, summary, fit=None):
    return "".join(render_parts(audit, summary, fit))


def render_parts(audit, summary, fit=None):
    """The report's text in pieces, as json.dumps(to_dict(...), indent=1) writes it whole."""
    return parts(to_dict(audit, summary, fit, _lazy))


def render_diff(c, fit_a=None, fit_b=None):
    return "".join(render_diff_parts(c, fit_a, fit_b))


def render_diff_parts(c, fit_a=None, fit_b=None):
    return parts(diff_dict(c, fit_a, fit_b, _lazy))


def parts(value, level=0):
    """json.dumps(value, indent=1)'s text in pieces: the dicts and lists that hold a Lazy are
    written item by item, a Lazy's items as they are made; the rest by json.dumps."""
    if isinstance(value, Lazy):
        yield from _items("[]", iter(value.make()), level)
        return
    try:  # (one pass: a dict or list that holds a Lazy is written item by item once text meets it)
        whole = text(value, level)
    except _HoldsLazy:
        brackets, items = ("{}", iter(value.items())) if isinstance(value, dict) else ("[]", iter(value))
        yield from _items(brackets, items, level)
        return
    yield whole


def text(value, level=0):
    """json.dumps(value, indent=1) at `level`, made without json's indenting encoder, which is
    pure Python and builds closures that refer to each other on every call: garbage only the
    cycle collector frees, and the command pauses it (protoaudit.collector)."""
    if isinstance(value, str):
        return _string(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):  # (json.dumps writes any int as int's own repr: a subclass's too)
        return int.__repr__(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        pad = "\n" + " " * (level + 1)
        return ("{" + ",".join(pad + _string(_key(k)) + ": " + text(v, level + 1)
                               for k, v in value.items()) + "\n" + " " * level + "}")
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        pad = "\n" + " " * (level + 1)
        return "[" + ",".join(pad + text(v, level + 1) for v in value) + "\n" + " " * level + "]"
    if isinstance(value, Lazy):
        raise _HoldsLazy
    return json.dumps(value)  # refused as json.dumps refuses it


class _HoldsLazy(Exception):
    """text met a Lazy: the value holding it is written in pieces (parts)."""


_string = json.encoder.encode_basestring_ascii


def _number(x):
    """A float as json.dumps writes it: float's repr, or NaN, Infinity, -Infinity."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return float.__repr__(x)


def _key(k):
    """A dict key as json.dumps writes one that is not a str."""
    if isinstance(k, str):
        return k
    if k is None or isinstance(k, (bool, float)):
        return json.dumps(k)
    if isinstance(k, int):
        return int.__repr__(k)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")


def _items(brackets, items, level):
    """A list's items or a dict's (key, value) pairs between `brackets`, one a line."""
    first = next(items, _END)
    if first is _END:
        yield brackets
        return
    pad = "\n" + " " * (level + 1)
    yield brackets[0]
    for i, item in enumerate(itertools.chain([first], items)):
        yield ("," if i else "") + pad
        if brackets == "{}":
            yield _string(_key(item[0])) + ": "
            item = item[1]
        yield from parts(item, level + 1)
    yield "\n" + " " * level + brackets[1]


_END = object()


def diff_dict(c, fit_a=None, fit_b=None, many=listed):
    """`protoaudit diff --format json` as plain data: both audits in full, the aligned layers, the
    explanation (also the library's `Comparison.to_dict()`)."""
    return {
        "protoaudit": __version__,
        "schema": SCHEMA_VERSION,
        "a": to_dict(c.a, c.summary_a, fit_a, many),
        "b": to_dict(c.b, c.summary_b, fit_b, many),
        "change_bytes": c.delta,
        "by_kind": {k: {"a": x, "b": y, "change": y - x} for k, (x, y) in c.by_kind.items()},
        "batch_invariant": {"a": c.invariant[0], "b": c.invariant[1]},
        "per_sample": {"a": c.per_sample[0], "b": c.per_sample[1]},
        "layers": [{"net": d.net, "name": d.name, "status": d.status, "type_a": d.type_a, "type_b": d.type_b,
                    "tops_a": [list(t) for t in d.tops_a], "tops_b": [list(t) for t in d.tops_b],
                    "bytes_a": d.bytes_a, "bytes_b": d.bytes_b, "change": d.delta} for d in c.layers],
        "causes": [{"net": d.net, "layer": d.layer, "owner": d.owner, "kind": d.kind, "bytes_a": d.bytes_a,
                    "bytes_b": d.bytes_b, "change": d.delta} for d in c.causes],
        "explanation": c.sentences,
    }


def _schema_said(name):
    """A net's schema as the report names it: a shipped one's name, or "user:" and the path of the
    user's caffe.proto as given."""
    from ..read.schema import USER_PREFIX, user_path

    return USER_PREFIX + user_path(name) if name.startswith(USER_PREFIX) else name
