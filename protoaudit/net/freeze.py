"""`--freeze LAYER`: the net as a Caffe user freezes its front part, by editing the prototxt.

The frozen part is LAYER and every layer it depends on (its ancestors in the blob graph, inserted
Splits included): the feature extractor in front of a head that still trains. A layer elsewhere
that merely comes earlier in the file (another tower, a branch LAYER does not read) stays
trainable. Each frozen layer gets `param { lr_mult: 0 }` on every parameter blob, and each other
layer reading a blob the frozen part made gets `propagate_down: false` on that bottom; Net::Init
then decides what needs backward by its own rules (force_backward still overrides both).

What it does not save: net.cpp's AppendParam makes every param a layer owns "learnable" whatever
its lr_mult, so Solver::Step's ClearParamDiffs still gives each frozen param a diff and the
solver's update still touches its history (with a zero rate). Freezing saves the frozen part's
top diffs and backward buffers, not its parameter memory.
"""
from dataclasses import dataclass

from ..errors import InputError
from .netstate import included
from ..report.units import size

LISTED = 40  # layer names an unknown-layer error lists at most


def freeze(net_param, state, layers, build, path=None):
    """A copy of `net_param` with LAYER (each of `layers`) and its ancestors frozen, and the names
    of the frozen layers in net order. `build(param)` builds a NetParameter in `state`."""
    layers = [layers] if isinstance(layers, str) else list(layers)
    net = build(net_param)
    frozen = _frozen_indices(net, layers, path)
    where = _param_indices(net_param, state, net)
    _check_shared(net, frozen, path)
    param = type(net_param)()
    param.CopyFrom(net_param)
    for i in frozen:
        node = net.layers[i]
        if i in where and node.params:
            lp = param.layer[where[i]]
            while len(lp.param) < len(node.params):
                lp.param.add()
            for spec in lp.param:
                spec.lr_mult = 0
    after = build(param)  # what Net::Init makes of lr_mult 0 alone: the other bottoms' flags
    for node in after.layers:
        if node.index in frozen or node.index not in where:
            continue
        from_frozen = [_producer(after, node, j) in frozen for j in range(len(node.bottoms))]
        if any(from_frozen):
            lp = param.layer[where[node.index]]
            del lp.propagate_down[:]
            lp.propagate_down.extend(False if f else bool(nb)
                                     for f, nb in zip(from_frozen, node.bottom_need_backward))
    return param, [net.layers[i].name for i in sorted(frozen) if i in where]


def _frozen_indices(net, layers, path):
    import networkx as nx  # only here: importing it takes longer than auditing most nets

    g = net.graph
    out = set()
    for name in layers:
        found = [n.index for n in net.layers if n.name == name and not n.is_split]
        if not found:
            raise _unknown_layer(net, name, path)
        for i in found:
            out.add(i)
            out |= {node[1] for node in nx.ancestors(g, ("layer", i)) if node[0] == "layer"}
    return out


def _unknown_layer(net, name, path):
    import difflib

    names = [n.name for n in net.layers if not n.is_split]
    near = difflib.get_close_matches(name, names, n=1)
    listed = ", ".join(names[:LISTED]) + (f" and {len(names) - LISTED} more" if len(names) > LISTED else "")
    return InputError(f"--freeze {name}: the {net.phase} net has no layer of that name; its layers are {listed}",
                      file=path, fix=(f"did you mean '{near[0]}'? " if near else "") + "give a layer's name")


def _param_indices(net_param, state, net):
    """Built layer index -> index in net_param.layer, for the layers the file itself names (the
    state's layers, in order; inserted Splits are not in the file)."""
    kept = [k for k, lp in enumerate(net_param.layer) if included(lp, state)]
    out, k = {}, 0
    for node in net.layers:
        if k < len(kept) and net_param.layer[kept[k]].name == node.name:
            out[node.index] = kept[k]
            k += 1
    return out


def _check_shared(net, frozen, path):
    """A param shared by name has one lr_mult in Caffe (AppendParam CHECKs a mismatch)."""
    owners = {}
    for i in frozen:
        for p in net.layers[i].params:
            if p.name:
                owners.setdefault(p.name, net.layers[i].name)
    for node in net.layers:
        if node.index in frozen:
            continue
        for p in node.params:
            if p.name in owners:
                raise InputError(
                    f"--freeze: layer '{node.name}' shares param '{p.name}' with the frozen layer "
                    f"'{owners[p.name]}', and Caffe gives a shared param one lr_mult",
                    file=path, layer=node.name, fix=f"freeze it too: add --freeze {node.name}")


def _producer(net, node, j):
    """The layer whose output node's bottom j is, looking through inserted Splits (None: a net input)."""
    index = node.bottoms[j]
    layer = node
    while True:
        blob = next(b for b in net.graph.predecessors(("layer", layer.index)) if b[1] == index)
        made_by = list(net.graph.predecessors(blob))
        if not made_by:
            return None
        layer = net.layers[made_by[0][1]]
        if not layer.is_split:
            return layer.index
        index = layer.bottoms[0]


@dataclass
class FrozenCost:
    """What the frozen part of a trained net still holds."""

    layers: list  # names, in net order
    param_elements: int  # the frozen layers' own (learnable) params
    param_bytes: int  # their data
    diff_bytes: int  # their diffs (ClearParamDiffs)
    history_bytes: int  # the solver's blobs for them
    top_diff_bytes: int  # diffs of the frozen part's tops that backward still touches


def frozen_cost(audit, counted):
    """The FrozenCost of `audit`'s train net, or None when nothing is frozen."""
    train = audit.train
    names = getattr(train.net, "frozen", None) if train is not None else None
    if not names:
        return None
    frozen = set(names)
    nodes = [n for n in train.net.layers if n.name in frozen]
    owned = {f"{n.name}.param{k}": p.count for n in nodes for k, p in enumerate(n.params) if p.owner is None}
    tops = {train.net.blobs[i].name for n in nodes for i in n.tops}
    label = train.buffers[0].net if train.buffers else train.role
    mine = [b for b in audit.buffers if b.net == label and counted(audit, b)]

    def of(kind, owners, prefix=False):
        return sum(b.bytes for b in mine if b.kind == kind
                   and (b.owner.rsplit(".", 1)[0] in owners if prefix else b.owner in owners))

    return FrozenCost(names, sum(owned.values()), of("param data", owned), of("param diff", owned),
                      of("history", owned, prefix=True), of("top diff", tops))


def frozen_lines(cost, solver_type):
    """Plain words on what the frozen part still costs (for the reports)."""
    if cost is None:
        return []
    first, last = cost.layers[0], cost.layers[-1]
    text = (f"Frozen ({len(cost.layers)} layers, {first} .. {last}): lr_mult 0 and no backward into them. "
            f"Their {cost.param_elements:,} params still hold {size(cost.param_bytes)} of data")
    if solver_type == "none":
        return [text + "; without a solver they get no diffs."]
    text += (f", {size(cost.diff_bytes)} of diffs and {size(cost.history_bytes)} of {solver_type} history: "
             f"Caffe's solver keeps every param learnable, lr_mult 0 included (ClearParamDiffs zeroes its "
             f"diff and each update touches its history with a zero rate).")
    if cost.top_diff_bytes:
        text += (f" Backward still writes {size(cost.top_diff_bytes)} of diffs into the frozen part's tops "
                 f"(a Caffe Convolution takes its bottom's diff even when nothing propagates into it).")
    return [text]


def freeze_sentences(c):
    """For `protoaudit diff` (c: protoaudit.memory.explain.Comparison): what freezing changed, and why the
    frozen part's params cost as much as before."""
    out = []
    for side, cost, other, audit in (("A", c.summary_a.frozen, c.summary_b.frozen, c.a),
                                     ("B", c.summary_b.frozen, c.summary_a.frozen, c.b)):
        if cost is None or (other is not None and other.layers == cost.layers):
            continue
        changes = [f"{kind} {'+' if y > x else '-'}{size(abs(y - x))}" for kind, (x, y) in c.by_kind.items() if x != y]
        text = (f"{side} freezes {len(cost.layers)} layers ({cost.layers[0]} .. {cost.layers[-1]}): with lr_mult 0 "
                f"and propagate_down false, Caffe runs no backward into them, so their tops need no diffs"
                + (f" (B against A: {', '.join(changes)})" if changes else "") + ".")
        if cost.top_diff_bytes:
            text += (f" {size(cost.top_diff_bytes)} of diffs are still written into their tops: a Caffe "
                     f"Convolution takes its bottom's diff even when nothing propagates into it.")
        out.append(text)
        if audit.solver_type != "none":
            out.append(
                f"The frozen part's {cost.param_elements:,} params still cost {size(cost.param_bytes)} of data, "
                f"{size(cost.diff_bytes)} of diffs and {size(cost.history_bytes)} of {audit.solver_type} history "
                f"in {side}, as much as when they train: Caffe's solver treats every param a layer owns as "
                f"learnable, lr_mult 0 included, so ClearParamDiffs gives each a diff and each update touches its "
                f"history (with a zero rate). Only taking the frozen layers out of the net (running them once and "
                f"training on their stored outputs) saves that.")
    return out
