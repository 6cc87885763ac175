"""What the audit knows about the batch: each buffer either grows with it or does not.

A buffer that grows with the batch (Buffer.per_sample: its shape's first axis is the batch) holds
batch/b times what it holds at batch b, and every other buffer (parameters, their diffs, the
solver's state, column buffers, workspaces, the context) stays as it is. Caffe's shapes do not all
follow that rule (a shape that hard-codes a dimension or folds the batch into another axis, a
buffer sized max(batch, H*W) as the Scale layer sizes its sum_multiplier_, a workspace capped at a
limit), so the rule is used once an audit at another batch is seen to follow it, buffer by buffer:
by --sweep (protoaudit.memory.sweep) and by the largest-batch search (protoaudit.memory.fit).
"""
import functools
from collections import Counter

from .cuda_pages import beyond, floor, taken, tally
from .summary import counted_devices


def sizes(audit):
    """{(net, owner, kind): (bytes, grows with the swept batch)} of the buffers counted against the card.
    The swept net is the train (or only) net: --batch sets its batch, test nets keep theirs."""
    return merged(parts(audit))


def parts(audit):
    """sizes, net by net and then the extras' (solver state, context). Each net's part is worked out
    once (NetAudit.figure): a reaudit at another batch keeps its test nets, and the largest-batch
    search asks for their figures again."""
    swept = audit.train.buffers[0].net if audit.train is not None and audit.train.buffers else None
    devices = counted_devices(audit)
    work = functools.partial(_sizes, devices=devices, swept=swept)
    return [net.figure(("sizes", devices, swept), work) for net in audit.nets] + [work(audit.extra)]


def merged(parts):
    """The sizes `parts` as one: {key: (bytes, grows)}."""
    out = {}
    for part in parts:
        _merge(out, part)
    return out


def split(parts):
    """(bytes that do not grow with the batch, bytes that do) of the sizes `parts`, a key counted
    as growing when any of its buffers grows."""
    grows = fixed = 0
    for n, g in merged(parts).values():  # some 100,000 buffers on a 10,000-layer net: one pass
        if g:
            grows += n
        else:
            fixed += n
    return fixed, grows


def _sizes(buffers, devices, swept):
    """sizes' entries for `buffers`."""
    out = {}
    get = out.get
    for b in buffers:  # some 100,000 on a 10,000-layer net: one plain loop
        if b.device in devices:
            key = (b.net, b.owner, b.kind)
            n, grows = get(key, (0, False))
            out[key] = (n + b.elements * b.itemsize, grows or (b.per_sample and b.net == swept))
    return out


def _merge(out, part):
    """Add the sizes `part` to `out` (each net's buffers carry its label: they rarely share a key)."""
    shared = out.keys() & part.keys()
    if shared:
        part = dict(part)
        for key in shared:
            (n, grows), (m, more) = out[key], part[key]
            part[key] = (n + m, grows or more)
    out.update(part)


def misses(known, found, base, batch):
    """(net, owner, kind, batch, expected, audited) for each buffer the rule gets wrong at `batch`,
    from the sizes `known` at batch `base` to the sizes `found` audited at `batch`: one pass over
    the buffers known, then those found alone (None: no such buffer, or the rule's size is not a
    whole number of bytes, not linear)."""
    wrong = []
    absent = 0  # buffers known that the audit at `batch` does not have
    get = found.get
    for key, (n, grows) in known.items():
        got = get(key)
        if grows:
            n = None if n * batch % base else n * batch // base
        if got is None:
            absent += 1
            if n is not None:
                wrong.append((*key, batch, n, None))
        elif got[0] != n:
            wrong.append((*key, batch, n, got[0]))
    if len(found) != len(known) - absent:
        wrong += [(*key, batch, None, n) for key, (n, _) in found.items() if key not in known]
    return wrong


def scaled(known, base, batch):
    """The rule's sizes at `batch` (each growing buffer a whole multiple of the base batch: checked)."""
    return {key: (n * batch // base if grows else n, grows) for key, (n, grows) in known.items()}


def pages(known):
    """What cudaMalloc's pages take on the card beyond the bytes of the sizes `known` (GPU mode): one
    call per entry, in order, the context's none (protoaudit.memory.cuda_pages)."""
    return beyond(n for (_, _, kind), (n, _) in known.items() if kind != "context")


class OnCard:
    """What the sizes `known` (at batch `base`) take on the card at another batch, by the rule
    (scaled), with cudaMalloc's pages: exactly (`at`: every buffer packed into pages), or a floor
    under that which needs only the distinct sizes and so costs almost nothing (`at_least`:
    cuda_pages.floor). The entries are sorted out once for the many batches a search tries."""

    def __init__(self, known, base):
        self.base = base
        self.paged = [(n, grows) for (_, _, kind), (n, grows) in known.items() if kind != "context"]
        self.context = [(n, grows) for (_, _, kind), (n, grows) in known.items() if kind == "context"]
        self.fixed = tally(Counter(n for n, grows in self.paged if not grows))
        self.growing = Counter(n for n, grows in self.paged if grows)  # a few distinct sizes, even on 10,000 layers

    def at(self, batch):
        base = self.base
        return (taken([n * batch // base if grows else n for n, grows in self.paged])
                + sum(n * batch // base if grows else n for n, grows in self.context))

    def at_least(self, batch):
        scaled = Counter()
        for n, k in self.growing.items():
            scaled[n * batch // self.base] += k
        return (floor(self.fixed, tally(scaled))
                + sum(n * batch // self.base if grows else n for n, grows in self.context))
