"""Two audits side by side: what changed, layer by layer and by category, and why, in plain words.

Every figure and sentence of `protoaudit diff` is made here; the reports only lay them out.
"""
from collections import Counter
from dataclasses import dataclass, field

from ..net.freeze import freeze_sentences
from .buffers import KINDS
from ..report.units import shape, size
from .summary import counted

NAMED_SHARE = 0.03  # name each buffer whose change is at least this share of the larger total
MOST = 6  # ... but no more than this many


@dataclass
class LayerDiff:
    net: str
    name: str
    status: str  # added | removed | changed | same
    type_a: str
    type_b: str
    tops_a: list
    tops_b: list
    bytes_a: int
    bytes_b: int

    @property
    def delta(self):
        return self.bytes_b - self.bytes_a


@dataclass
class BufferDiff:
    net: str
    layer: str
    owner: str
    kind: str
    a: object  # Buffer or None
    b: object

    @property
    def bytes_a(self):
        return self.a.bytes if self.a else 0

    @property
    def bytes_b(self):
        return self.b.bytes if self.b else 0

    @property
    def delta(self):
        return self.bytes_b - self.bytes_a


@dataclass
class Comparison:
    a: object  # Audit
    b: object
    summary_a: object
    summary_b: object
    layers: list  # LayerDiff, B's order with A's removed layers where they stood
    by_kind: dict  # kind -> (bytes in A, bytes in B)
    invariant: tuple  # (A, B): bytes that do not grow with the batch
    per_sample: tuple  # (A, B): bytes that grow with it
    causes: list  # BufferDiff, largest first
    sentences: list = field(default_factory=list)

    @property
    def delta(self):
        return self.summary_b.total - self.summary_a.total

    @property
    def fit_a(self):
        return self.a.fit

    @property
    def fit_b(self):
        return self.b.fit

    def explain(self):
        """Why B needs more (or less) than A, in plain words."""
        return list(self.sentences)

    def to_dict(self):
        """The JSON report of `protoaudit diff` (--format json) as dicts and lists."""
        from ..report.json_format import diff_dict

        return diff_dict(self, self.fit_a, self.fit_b)


def compare(a, b):
    """Compare audit `a` (the old net) with audit `b` (the new one)."""
    sa, sb = a.summary, b.summary
    layers = _align(sa.rows, sb.rows)
    by_kind = {k: (sa.by_kind.get(k, 0), sb.by_kind.get(k, 0)) for k in KINDS
               if sa.by_kind.get(k) or sb.by_kind.get(k)}
    causes = _buffer_changes(a, b)
    result = Comparison(a, b, sa, sb, layers, by_kind, (sa.invariant, sb.invariant),
                        (sa.per_sample, sb.per_sample), causes)
    result.sentences = _explain(result)
    return result


def _align(rows_a, rows_b):
    """Layers by (net, name): B's order, each of A's removed layers right after its predecessor."""
    in_a = {(r.net, r.name): r for r in rows_a}
    in_b = {(r.net, r.name): r for r in rows_b}
    order = [(r.net, r.name) for r in rows_b]
    for i, r in enumerate(rows_a):
        key = (r.net, r.name)
        if key in in_b:
            continue
        before = next(((p.net, p.name) for p in reversed(rows_a[:i]) if (p.net, p.name) in order), None)
        order.insert(order.index(before) + 1 if before else 0, key)
    out = []
    for key in order:
        ra, rb = in_a.get(key), in_b.get(key)
        if ra and rb:
            same = ra.tops == rb.tops and ra.total == rb.total and ra.type == rb.type
            status = "same" if same else "changed"
        else:
            status = "added" if rb else "removed"
        out.append(LayerDiff(key[0], key[1], status, ra.type if ra else "", rb.type if rb else "",
                             ra.tops if ra else [], rb.tops if rb else [], ra.total if ra else 0,
                             rb.total if rb else 0))
    return out


def _buffer_changes(a, b):
    """Buffers matched by (net, owner, kind), the largest changes first."""
    def index(audit):
        return {(x.net, x.owner, x.kind): x for x in audit.buffers if counted(audit, x)}

    ia, ib = index(a), index(b)
    diffs = []
    for key in list(ib) + [k for k in ia if k not in ib]:
        x, y = ia.get(key), ib.get(key)
        d = BufferDiff(key[0], (y or x).layer, key[1], key[2], x, y)
        if d.delta:
            diffs.append(d)
    diffs.sort(key=lambda d: -abs(d.delta))
    return diffs


def _node(audit, net_label, layer_name):
    for n in audit.nets:
        label = n.buffers[0].net if n.buffers else n.role
        if label == net_label:
            for node in n.net.layers:
                if node.name == layer_name:
                    return node
    return None


def _explain(c):
    a, b = c.summary_a, c.summary_b
    more = "more" if c.delta >= 0 else "less"
    out = [f"B needs {size(abs(c.delta))} {more} than A: {size(b.total)} against {size(a.total)}."]
    out.append(
        f"What does not grow with the batch (parameters and their diffs, solver state, column buffers, "
        f"workspaces, the context): {size(c.invariant[1])} in B against {size(c.invariant[0])} in A. "
        f"What grows with it (tops, their diffs, per-sample buffers): {size(c.per_sample[1])} against "
        f"{size(c.per_sample[0])}.")
    batch_a, batch_b = c.a.batch, c.b.batch
    if batch_a and batch_b and batch_a != batch_b:
        out.append(f"B runs batch {batch_b} against A's {batch_a}: only the second part scales with it.")
    biggest = max(a.total, b.total, 1)
    named = [d for d in c.causes if abs(d.delta) >= NAMED_SHARE * biggest][:MOST] or c.causes[:3]
    out += [_why(c, d) for d in named]
    out += _replaced(c)
    out += freeze_sentences(c)
    out += _column_buffers(c)
    return out


def _replaced(c):
    """Layers one net has and the other lacks (a run of plain layers traded for one fork layer that
    does their work, say): how many of each type, and what each side's hold."""
    gone = [d for d in c.layers if d.status == "removed"]
    new = [d for d in c.layers if d.status == "added"]
    if not (gone and new):
        return []

    def kinds(diffs, type_of):
        counts = Counter(type_of(d) for d in diffs)
        return ", ".join(f"{n} {t}" for t, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    held_a, held_b = sum(d.bytes_a for d in gone), sum(d.bytes_b for d in new)
    return [f"The {len(gone)} layers only A has ({kinds(gone, lambda d: d.type_a)}) hold {size(held_a)}; "
            f"the {len(new)} only B has ({kinds(new, lambda d: d.type_b)}) hold {size(held_b)}."]


def _column_buffers(c):
    """Caffe's im2col buffers: one image each, the same at any batch, and none in a cuDNN build."""
    def cols(audit):
        return {x.layer: x.bytes for x in audit.buffers if x.owner.endswith(".col_buffer_") and counted(audit, x)}

    ca, cb = cols(c.a), cols(c.b)
    if not (ca or cb):
        return []
    total_b = sum(cb.values())
    listed = []
    for layer in sorted(cb, key=lambda name: -cb[name])[:MOST]:
        before = ca.get(layer)
        was = "new" if before is None else "the same in A" if before == cb[layer] else f"A: {size(before)}"
        listed.append(f"{layer} {size(cb[layer])} ({was})")
    largest = f" The largest: {', '.join(listed)}." if listed else (
        " The largest in A: " + ", ".join(f"{layer} {size(ca[layer])}" for layer in sorted(ca, key=lambda n: -ca[n])[:MOST]) + ".")
    text = (f"Column buffers hold one image each, so they do not shrink with the batch: {size(total_b)} in B "
            f"({total_b / max(c.summary_b.total, 1):.0%} of its total) against {size(sum(ca.values()))} in A."
            + largest)
    if c.a.other_engine_total is not None and c.b.other_engine_total is not None and c.b.engine == "caffe":
        text += (f" A cuDNN build allocates none (each convolution keeps a small workspace instead): "
                 f"B would need {size(c.b.other_engine_total)} and A {size(c.a.other_engine_total)}.")
    return [text]


def _why(c, d):
    """One sentence on one buffer's change."""
    layer = d.layer
    if d.owner.endswith(".col_buffer_"):
        note_a = d.a.note.split(" (")[0] if d.a else ""
        note_b = d.b.note.split(" (")[0] if d.b else ""
        text = f"{layer}'s im2col buffer holds one image: "
        if d.b and d.a:
            text += (f"{note_b} floats = {size(d.bytes_b)} in B against {note_a} = {size(d.bytes_a)} in A"
                     + _conv_cause(c, d) + ".")
        elif d.b:
            text += f"{note_b} floats = {size(d.bytes_b)}, a layer A does not have."
        else:
            text += f"{note_a} floats = {size(d.bytes_a)} in A; B has no such layer."
        return text
    what = {"top data": "top", "top diff": "gradient (diff) of top", "param data": "parameters",
            "param diff": "parameter gradient", "history": "solver state"}.get(d.kind, d.kind)
    grows = " (grows with the batch)" if (d.b or d.a).per_sample else ""
    if d.a and d.b:
        return (f"{layer}: {what} {d.owner} is {size(d.bytes_b)} in B ({d.b.note or 'x'}) against "
                f"{size(d.bytes_a)} in A ({d.a.note or 'x'}){grows}.")
    about = "; ".join(x for x in ((d.b or d.a).note, "grows with the batch" if (d.b or d.a).per_sample else "") if x)
    about = f" ({about})" if about else ""
    if d.b:
        return f"{layer}: {what} {d.owner}, {size(d.bytes_b)}{about}, is new in B."
    return f"{layer}: {what} {d.owner}, {size(d.bytes_a)}{about}, is gone in B."


def _conv_cause(c, d):
    na, nb = _node(c.a, d.net, d.layer), _node(c.b, d.net, d.layer)
    if not (na and nb and na.bottom_shapes and nb.bottom_shapes):
        return ""
    sa, sb = na.bottom_shapes[0], nb.bottom_shapes[0]
    if len(sa) > 1 and len(sb) > 1 and sa[1] != sb[1]:
        return f", because its input now has {sb[1]} channels instead of {sa[1]}"
    if sa[2:] != sb[2:]:
        return f", because its input is now {shape(sb[2:])} instead of {shape(sa[2:])}"
    return ""
