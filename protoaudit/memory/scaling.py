"""What the audit knows about the batch: each buffer either grows with it or does not.

A buffer that grows with the batch (Buffer.per_sample: its shape's first axis is the batch) holds
batch/b times what it holds at batch b, and every other buffer (parameters, their diffs, the
solver's state, column buffers, workspaces, the context) stays as it is. Caffe's shapes do not all
follow that rule (a shape that hard-codes a dimension or folds the batch into another axis, a
buffer sized max(batch, H*W) as the Scale layer sizes its sum_multiplier_, a workspace capped at a
limit), so the rule is used once an audit at another batch is seen to follow it, buffer by buffer:
by --sweep (protoaudit.memory.sweep) and by the largest-batch search (protoaudit.memory.fit).
"""
from .summary import counted_devices


def sizes(audit):
    """{(net, owner, kind): (bytes, grows with the swept batch)} of the buffers counted against the card.
    The swept net is the train (or only) net: --batch sets its batch, test nets keep theirs."""
    swept = audit.train.buffers[0].net if audit.train is not None and audit.train.buffers else None
    devices = counted_devices(audit)
    out = {}
    get = out.get
    for b in audit.buffers:  # some 100,000 on a 10,000-layer net: one plain loop
        if b.device in devices:
            key = (b.net, b.owner, b.kind)
            n, grows = get(key, (0, False))
            out[key] = (n + b.elements * b.itemsize, grows or (b.per_sample and b.net == swept))
    return out


def misses(known, found, base, batch):
    """(net, owner, kind, batch, expected, audited) for each buffer the rule gets wrong at `batch`,
    from the sizes `known` at batch `base` to the sizes `found` audited at `batch`."""
    rule = {key: ((None if n * batch % base else n * batch // base) if grows else n, grows)
            for key, (n, grows) in known.items()}  # None: no whole number of bytes, not linear
    if found == rule:  # the common answer, found in one comparison
        return []
    wrong = []
    for key, (expected, _) in rule.items():
        got = found.get(key)
        got = got[0] if got is not None else None
        if expected != got:
            wrong.append((*key, batch, expected, got))
    wrong += [(*key, batch, None, n) for key, (n, _) in found.items() if key not in rule]
    return wrong


def scaled(known, base, batch):
    """The rule's sizes at `batch` (each growing buffer a whole multiple of the base batch: checked)."""
    return {key: (n * batch // base if grows else n, grows) for key, (n, grows) in known.items()}
