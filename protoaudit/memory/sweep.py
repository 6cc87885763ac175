"""`--sweep BATCHES`: the totals at each of several batches, for planning a batch size without a GPU.

What the audit knows comes first: the rule that a buffer either grows with the batch or does not
(protoaudit.memory.scaling). That rule is only used once it is seen to hold: the net is audited
again at the sweep's smallest and largest batches, for each engine, and every buffer is held to
what the rule predicts there. When each one agrees, every batch's total is the rule's ("scaled").

When one does not (a shape that hard-codes a dimension or folds the batch into another axis, a
buffer sized max(batch, H*W) as Caffe's Scale layer sizes its sum_multiplier_, a workspace capped
at a limit, a blob Caffe refuses as too large), the sweep says which, and audits the net where
the totals are not linear: between two audited batches it audits the one halfway; if every
buffer there lies on the straight line between the two ends, the batches between them are
read off that line ("interpolated"), else each half is taken the same way, down to auditing
each batch on its own ("audited").
"""
from dataclasses import dataclass, field

from ..errors import InputError
from .scaling import misses, pages, scaled, sizes

MOST_NAMED = 5  # buffers named when the rule fails


@dataclass
class SweepRow:
    batch: int
    total: int = None  # bytes against the card; None when Caffe refuses the net at this batch
    other_engine_total: int = None  # the same under the other engine (GPU mode)
    per_sample: int = None  # what grows with the swept batch
    fixed: int = None  # what does not
    fits: bool = None  # with a card
    how: str = "audited"  # scaled | interpolated | audited
    refused: str = ""  # why Caffe refuses the net at this batch


@dataclass
class Sweep:
    rows: list  # SweepRow, by batch
    base_batch: int  # the batch of the audit the rule starts from
    how: str  # "scaled": every row by the rule; else "audited" where it fails (rows say which)
    checked_at: list  # the batches audited to check the rule
    engine: str
    other_engine: str = None
    budget: int = None
    broken: list = field(default_factory=list)  # (net, owner, kind, batch, expected bytes, audited bytes)
    refused_at: int = None  # a probed batch Caffe refuses the net at: the rule could not be checked there
    paged: bool = False  # the card column counts cudaMalloc's pages (a card, on a GPU)

    def describe(self):
        """How the totals were found, in a sentence; and, on a GPU with a card, what the card column counts."""
        pages = (" The card column counts each row's cudaMalloc pages (2 MiB pages, 512-byte slots) beside its "
                 "total, as the verdict does." if self.paged else "")
        return self._how() + pages

    def _how(self):
        checked = " and ".join(str(b) for b in self.checked_at if b != self.base_batch)
        if self.how == "scaled":
            if self.checked_at == [self.base_batch]:
                return f"Totals from the audit at batch {self.base_batch}."
            return (f"Totals scaled from the audit at batch {self.base_batch}: every buffer that grows with the batch "
                    f"has it as its first axis and the rest stays the same, as audits at batch {checked} confirm.")
        why = []
        if self.refused_at is not None:
            why.append(f"Caffe refuses the net at batch {self.refused_at}, so the rule could not be checked there")
        if self.broken:
            named = "; ".join(f"{owner} ({kind}{'' if net == 'net' else ', ' + net + ' net'}): {_bytes(expected)} "
                              f"expected at batch {batch}, "
                              f"{_bytes(got)} audited"
                              for net, owner, kind, batch, expected, got in self.broken[:MOST_NAMED])
            more = f"; and {len(self.broken) - MOST_NAMED} more" if len(self.broken) > MOST_NAMED else ""
            why.append(f"buffers do not scale with the batch as their shapes say: {named}{more}")
        audited = ", ".join(str(r.batch) for r in self.rows if r.how == "audited")
        return (f"Not scaled from one audit ({'; '.join(why)}). Audited at batch {audited}; each other row is read "
                f"off the straight line between two audited batches, where the audit halfway lies on it.")


def _bytes(n):
    return "none" if n is None else f"{n:,} B"


@dataclass
class _Point:
    """One audited batch: each engine's buffers {(net, owner, kind): (bytes, grows)}, or why Caffe refuses it."""

    batch: int
    sizes: dict = None  # engine -> {key: (bytes, grows with the swept batch)}
    refused: str = ""


def sweep(audit, batches, audit_at, budget=None):
    """The Sweep of `audit` over `batches` (sorted, distinct). `audit_at(batch, engine)` audits the same
    file with the same options at another batch and engine; `budget` is the card's bytes, if any."""
    base = audit.batch
    if base is None:
        raise InputError("--sweep: the net has no batch to vary (no data layer or net input)",
                         fix="give the data layer's shape with --input TOP=NxCxHxW")
    other = None
    if audit.mode == "gpu" and audit.other_engine_total is not None:
        other = "cudnn" if audit.engine == "caffe" else "caffe"
    engines = [e for e in (audit.engine, other) if e]
    paged = budget is not None and audit.cudamalloc_pages is not None

    def fits(mine, total):  # a row on the card: on a GPU with its cudaMalloc pages, as --gpu-mem's verdict
        return total + (pages(mine) if paged else 0) <= budget

    card = fits if budget is not None else None
    points = {}

    def at(b):
        if b not in points:
            points[b] = _point(b, engines, audit_at)
        return points[b]

    start = _Point(base, {audit.engine: sizes(audit)})
    if other:
        start.sizes[other] = sizes(audit_at(base, other))
    points[base] = start
    probes = sorted({batches[0], batches[-1]} - {base})
    result = Sweep([], base, "scaled", sorted({base, *probes}), audit.engine, other, budget, paged=paged)
    for b in probes:
        p = at(b)
        if p.refused:
            result.refused_at = b if result.refused_at is None else result.refused_at
            continue
        for engine in engines:  # each buffer named once, under the first engine that shows it
            named = {miss[:3] for miss in result.broken}
            result.broken += [m for m in misses(start.sizes[engine], p.sizes[engine], base, b)
                              if m[:3] not in named]
    if result.refused_at is None and not result.broken:
        result.rows = [_row(_scaled(start, b), b, audit.engine, other, card, "scaled") for b in batches]
        return result
    result.how = "audited"
    rows = {}
    _between(batches, 0, len(batches) - 1, at, rows, audit.engine, other, card)
    result.rows = [rows[b] for b in batches]
    return result


def _point(batch, engines, audit_at):
    try:
        return _Point(batch, {engine: sizes(audit_at(batch, engine)) for engine in engines})
    except InputError as e:  # Caffe refuses the net at this batch (a blob over INT_MAX elements)
        return _Point(batch, refused=str(e).removeprefix("<input>: "))


def _scaled(start, batch):
    """The rule's sizes at `batch` for each engine."""
    return {engine: scaled(known, start.batch, batch) for engine, known in start.sizes.items()}


def _row(sizes, batch, engine, other, card, how):
    """A row from each engine's sizes at `batch`; `card(sizes, total)`: whether they fit (None: no card)."""
    mine = sizes[engine]
    total = sum(n for n, _ in mine.values())
    per_sample = sum(n for n, grows in mine.values() if grows)
    return SweepRow(batch, total, sum(n for n, _ in sizes[other].values()) if other else None, per_sample,
                    total - per_sample, None if card is None else card(mine, total), how)


def _between(batches, i, j, at, rows, engine, other, card):
    """Rows for batches[i..j]: both ends audited; the middle one audited, and the rest read off the
    straight line between the ends when the middle one lies on it, else each half the same way."""
    for k in (i, j):
        if batches[k] not in rows:
            p = at(batches[k])
            rows[batches[k]] = (SweepRow(batches[k], refused=p.refused) if p.refused
                                else _row(p.sizes, batches[k], engine, other, card, "audited"))
    if j - i < 2:
        return
    m = (i + j) // 2
    low, mid, high = at(batches[i]), at(batches[m]), at(batches[j])
    if not (low.refused or mid.refused or high.refused) and _on_line(low, mid, high):
        rows[batches[m]] = _row(mid.sizes, batches[m], engine, other, card, "audited")
        for k in range(i + 1, j):
            b = batches[k]
            if b not in rows:
                line = _line(low, high, b)
                rows[b] = (_row(line, b, engine, other, card, "interpolated") if line is not None
                           else _row(at(b).sizes, b, engine, other, card, "audited") if not at(b).refused
                           else SweepRow(b, refused=at(b).refused))
        return
    _between(batches, i, m, at, rows, engine, other, card)
    _between(batches, m, j, at, rows, engine, other, card)


def _on_line(low, mid, high):
    """Whether every buffer at `mid` is where the straight line from `low` to `high` puts it."""
    for engine, at_mid in mid.sizes.items():
        a, c = low.sizes[engine], high.sizes[engine]
        if set(a) != set(at_mid) or set(c) != set(at_mid):
            return False
        for key, (n, grows) in at_mid.items():
            if a[key][1] != grows or c[key][1] != grows:
                return False
            if n * (high.batch - low.batch) != a[key][0] * (high.batch - mid.batch) + c[key][0] * (mid.batch - low.batch):
                return False
    return True


def _line(low, high, batch):
    """Every buffer's size at `batch` on the straight line between two audited batches; None when one
    would not be a whole number of bytes."""
    out = {}
    span = high.batch - low.batch
    for engine, at_low in low.sizes.items():
        out[engine] = {}
        for key, (n, grows) in at_low.items():
            scaled = n * (high.batch - batch) + high.sizes[engine][key][0] * (batch - low.batch)
            if scaled % span:
                return None
            out[engine][key] = (scaled // span, grows)
    return out
