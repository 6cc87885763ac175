"""What the audit knows about the batch: each buffer either grows with it or does not.

A buffer that grows with the batch (Buffer.per_sample: its shape's first axis is the batch) holds
batch/b times what it holds at batch b, and every other buffer (parameters, their diffs, the
solver's state, column buffers, workspaces, the context) stays as it is. Caffe's shapes do not all
follow that rule (a shape that hard-codes a dimension or folds the batch into another axis, a
buffer sized max(batch, H*W) as the Scale layer sizes its sum_multiplier_, a workspace capped at a
limit), so the rule is used once an audit at another batch is seen to follow it, buffer by buffer:
by --sweep (protoaudit.memory.sweep) and by the largest-batch search (protoaudit.memory.fit).
"""
from .summary import counted


def sizes(audit):
    """{(net, owner, kind): (bytes, grows with the swept batch)} of the buffers counted against the card.
    The swept net is the train (or only) net: --batch sets its batch, test nets keep theirs."""
    swept = audit.train.buffers[0].net if audit.train is not None and audit.train.buffers else None
    out = {}
    for b in audit.buffers:
        if counted(audit, b):
            key = (b.net, b.owner, b.kind)
            n, grows = out.get(key, (0, False))
            out[key] = (n + b.bytes, grows or (b.per_sample and b.net == swept))
    return out


def misses(known, found, base, batch):
    """(net, owner, kind, batch, expected, audited) for each buffer the rule gets wrong at `batch`,
    from the sizes `known` at batch `base` to the sizes `found` audited at `batch`."""
    wrong = []
    for key in list(known) + [k for k in found if k not in known]:
        expected = None
        if key in known:
            n, grows = known[key]
            expected = n * batch // base if grows else n
            if grows and n * batch % base:
                expected = None  # no whole number of bytes: not linear in the batch
        got = found[key][0] if key in found else None
        if expected != got:
            wrong.append((*key, batch, expected, got))
    return wrong


def scaled(known, base, batch):
    """The rule's sizes at `batch` (each growing buffer a whole multiple of the base batch: checked)."""
    return {key: (n * batch // base if grows else n, grows) for key, (n, grows) in known.items()}
