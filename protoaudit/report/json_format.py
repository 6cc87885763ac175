"""`--format json`: the audit's facts, machine-readable. The schema is documented in docs/reports.md and
kept stable: fields may be added, never renamed or removed."""
import json

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


def to_dict(audit, summary, fit=None):
    """The JSON report as plain data (dicts and lists): also the library's `Audit.to_dict()`."""
    nets = []
    for net_audit in audit.nets:
        label = net_audit.buffers[0].net if net_audit.buffers else net_audit.role
        rows = [r for r in summary.rows if r.net == label]
        nets.append({
            "name": net_audit.name,
            "file": net_audit.net.path,
            "caffe_proto": getattr(net_audit.net, "schema", "bvlc"),
            "label": label,
            "role": net_audit.role,
            "phase": net_audit.phase,
            "batch": net_audit.batch,
            "forward_only": net_audit.forward_only,
            "total_bytes": summary.by_net.get(label, 0),
            "memory_required_for_data": net_audit.net.memory_required_for_data,
            "layers": [{"name": r.name, "type": r.type, "tops": [list(t) for t in r.tops], "bytes": r.total,
                        "buffers": [buffer_dict(b) for b in r.buffers]} for r in rows],
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
        "uncounted_host_bytes": summary.host,
        "by_kind": summary.by_kind,
        "by_touch": summary.by_touch,
        "nets": nets,
        "extra": [buffer_dict(b) | {"net": b.net} for b in audit.extra],
        "fit": fit_dict(fit),
        "recipe": recipe_dict(summary.recipe),
        "frozen": frozen_dict(summary.frozen),
        "gaps": [{"net": net, "layer": layer, "type": kind, "not_counted": what}
                 for net, layer, kind, what in summary.gaps],
        "death": None if audit.death is None else {
            "line": audit.death.line, "message": audit.death.message, "where": audit.death.where,
            "held_before_bytes": audit.death.before, "held_after_bytes": audit.death.after,
            "card_bytes": audit.death.card, "card": audit.death.card_name},
        "assumptions": [{"net": net, "layer": a.layer, "assumption": a.what, "override": a.override}
                        for net, a in summary.assumptions],
        "data_shapes": [{"net": net, "layer": o.layer, "top": o.top, "shape": list(o.shape), "source": o.source}
                        for net, o in summary.data_shapes],
        "sweep": sweep,
        "sweep_basis": sweep_basis,
    }


def render(audit, summary, fit=None):
    return json.dumps(to_dict(audit, summary, fit), indent=1)


def render_diff(c, fit_a=None, fit_b=None):
    return json.dumps(diff_dict(c, fit_a, fit_b), indent=1)


def diff_dict(c, fit_a=None, fit_b=None):
    """`protoaudit diff --format json` as plain data: both audits in full, the aligned layers, the
    explanation (also the library's `Comparison.to_dict()`)."""
    return {
        "protoaudit": __version__,
        "schema": SCHEMA_VERSION,
        "a": to_dict(c.a, c.summary_a, fit_a),
        "b": to_dict(c.b, c.summary_b, fit_b),
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
