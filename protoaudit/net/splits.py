"""Caffe's InsertSplits: a Split layer after every top that feeds more than one consumer.

A top with a non-zero loss_weight counts as one more consumer, as in insert_splits.cpp, and the
Split then carries the loss on its first top. Names follow Caffe: `<blob>_<layer>_<k>_split`.
"""


def split_layer_name(layer, blob, k):
    return f"{blob}_{layer}_{k}_split"


def split_blob_name(layer, blob, k, i):
    return f"{blob}_{layer}_{k}_split_{i}"


def wiring(lp):
    """(name, type, bottoms, tops, loss weights) of a LayerParameter, read from the message once."""
    return lp.name, lp.type, tuple(lp.bottom), tuple(lp.top), tuple(lp.loss_weight)


def insert_splits(layers, wires, inputs, holder):
    """The layer list with splits inserted: (LayerParameter, its wiring, the index in `layers` it
    came from or None for a split) each. `layers` are the net's LayerParameters after filtering,
    `wires` their wiring, `inputs` the net's legacy input names. A layer Caffe changes (a bottom
    renamed to a split's top, a loss weight moved onto the split) is a copy, made in `holder` (a
    NetParameter: one arena for them all) with the splits; every other layer is the given message
    itself, which the net never changes."""
    # blob name -> (layer index, top index) of its latest producer; -1: a legacy net-level input
    last_top = {name: (-1, i) for i, name in enumerate(inputs)}
    source = {}  # (layer, bottom) -> (layer, top)
    consumers = {}  # (layer, top) -> count
    loss = {}
    for i, (_, _, bottoms, tops, weights) in enumerate(wires):
        for j, name in enumerate(bottoms):
            top = last_top.get(name)
            if top is None:
                continue  # the net builder reports the unknown bottom, with its line
            source[(i, j)] = top
            consumers[top] = consumers.get(top, 0) + 1
        for j, name in enumerate(tops):
            last_top[name] = (i, j)
        for j in range(min(len(weights), len(tops))):
            top = last_top[tops[j]]
            loss[top] = weights[j]
            if loss[top]:
                consumers[top] = consumers.get(top, 0) + 1
    out = []
    next_split = {}
    made = holder.layer

    def split(layer, name, j, n, weight=0.0):
        tops = tuple(split_blob_name(layer, name, j, k) for k in range(n))
        weights = tuple(weight if k == 0 else 0.0 for k in range(n)) if weight else ()
        lp = made.add(name=split_layer_name(layer, name, j), type="Split", bottom=[name], top=tops,
                      loss_weight=weights)
        return lp, (lp.name, "Split", (name,), tops, weights), None

    for i, name in enumerate(inputs):  # old Caffe splits net-level inputs first, as layer "input"
        if consumers.get((-1, i), 0) > 1:
            out.append(split("input", name, i, consumers[(-1, i)]))
    for i, (lp, wire) in enumerate(zip(layers, wires)):
        layer, kind, bottoms, tops, weights = wire
        renamed = {}
        for j, name in enumerate(bottoms):
            top = source.get((i, j))
            if top is not None and consumers.get(top, 0) > 1:
                k = next_split.get(top, 0)
                next_split[top] = k + 1
                producer = wires[top[0]][0] if top[0] >= 0 else "input"
                renamed[j] = split_blob_name(producer, name, top[1], k)
        splits = [(j, name, consumers[(i, j)]) for j, name in enumerate(tops) if consumers.get((i, j), 0) > 1]
        moved = any(loss.get((i, j), 0.0) for j, _, _ in splits)
        if renamed or moved:
            original, lp = lp, made.add()
            lp.CopyFrom(original)
            for j, name in renamed.items():
                lp.bottom[j] = name
            if moved:
                del lp.loss_weight[:]
            wire = (layer, kind, tuple(lp.bottom), tops, () if moved else weights)
        out.append((lp, wire, i))
        for j, name, n in splits:
            weight = loss.get((i, j), 0.0)
            out.append(split(layer, name, j, n, weight))
            if weight:
                next_split[(i, j)] = next_split.get((i, j), 0) + 1
    return out
