"""Caffe's InsertSplits: a Split layer after every top that feeds more than one consumer.

A top with a non-zero loss_weight counts as one more consumer, as in insert_splits.cpp, and the
Split then carries the loss on its first top. Names follow Caffe: `<blob>_<layer>_<k>_split`.
"""
import sys

from .netstate import layer_phase


def split_layer_name(layer, blob, k):
    return f"{blob}_{layer}_{k}_split"


def split_blob_name(layer, blob, k, i):
    return f"{blob}_{layer}_{k}_split_{i}"


def wiring(lp):
    """(name, type, bottoms, tops, loss weights, propagate_down, its own phase or None) of a
    LayerParameter, read from the message once (a net's layers share one string per type)."""
    return (lp.name, sys.intern(lp.type), tuple(lp.bottom), tuple(lp.top), tuple(lp.loss_weight),
            tuple(lp.propagate_down), layer_phase(lp))


def insert_splits(layers, wires, inputs, holder):
    """The layer list with splits inserted: (LayerParameter, its wiring, the index in `layers` it
    came from or None for a split) each. `layers` are the net's LayerParameters after filtering,
    `wires` their wiring, `inputs` the net's legacy input names. A layer Caffe changes (a bottom
    renamed to a split's top, a loss weight moved onto the split) is a copy, made in `holder` (a
    NetParameter: one arena for them all) with the splits; every other layer is the given message
    itself, which the net never changes."""
    # every top is numbered in net order, the legacy inputs first: `producer[t]` is top t's
    # (layer index, top index), -1 for a legacy net-level input; `consumers[t]` counts its readers
    last_top = {name: t for t, name in enumerate(inputs)}  # blob name -> its latest top
    producer = [(-1, i) for i in range(len(inputs))]
    consumers = [0] * len(inputs)
    sources = []  # per layer: the top each bottom reads (None: unknown, the net builder says so)
    first_top = []  # per layer: the number of its top 0
    loss = {}  # top -> loss weight, where one is given
    for i, wire in enumerate(wires):
        bottoms, tops, weights = wire[2:5]
        read = []
        for name in bottoms:
            top = last_top.get(name)
            if top is not None:
                consumers[top] += 1
            read.append(top)
        sources.append(read)
        first = len(consumers)
        first_top.append(first)
        for j, name in enumerate(tops):
            last_top[name] = first + j
            producer.append((i, j))
            consumers.append(0)
        for j in range(min(len(weights), len(tops))):
            top = last_top[tops[j]]
            loss[top] = weights[j]
            if weights[j]:
                consumers[top] += 1
    out = []
    next_split = [0] * len(consumers)  # per top: the splits of it named so far
    made = holder.layer

    def split(layer, name, j, n, weight=0.0):
        tops = tuple(split_blob_name(layer, name, j, k) for k in range(n))
        weights = tuple(weight if k == 0 else 0.0 for k in range(n)) if weight else ()
        split_name = split_layer_name(layer, name, j)
        lp = made.add(name=split_name, type="Split", bottom=[name], top=tops, loss_weight=weights)
        return lp, (split_name, "Split", (name,), tops, weights, (), None), None

    for i, name in enumerate(inputs):  # old Caffe splits net-level inputs first, as layer "input"
        if consumers[i] > 1:
            out.append(split("input", name, i, consumers[i]))
    for i, (lp, wire) in enumerate(zip(layers, wires)):
        layer, kind, bottoms, tops, weights = wire[:5]
        renamed = {}
        for j, top in enumerate(sources[i]):
            if top is not None and consumers[top] > 1:
                k = next_split[top]
                next_split[top] = k + 1
                source, index = producer[top]
                renamed[j] = split_blob_name(wires[source][0] if source >= 0 else "input", bottoms[j], index, k)
        first = first_top[i]
        splits = [(j, name, consumers[first + j]) for j, name in enumerate(tops) if consumers[first + j] > 1]
        moved = bool(splits) and any(loss.get(first + j, 0.0) for j, _, _ in splits)
        if renamed or moved:
            original, lp = lp, made.add()
            lp.CopyFrom(original)
            for j, name in renamed.items():
                lp.bottom[j] = name
            if moved:
                del lp.loss_weight[:]
            wire = (layer, kind, tuple(lp.bottom), tops, () if moved else weights) + wire[5:]
        out.append((lp, wire, i))
        for j, name, n in splits:
            weight = loss.get(first + j, 0.0)
            out.append(split(layer, name, j, n, weight))
            if weight:
                next_split[first + j] += 1
    return out
