"""Caffe's InsertSplits: a Split layer after every top that feeds more than one consumer.

A top with a non-zero loss_weight counts as one more consumer, as in insert_splits.cpp, and the
Split then carries the loss on its first top. Names follow Caffe: `<blob>_<layer>_<k>_split`.
"""


def split_layer_name(layer, blob, k):
    return f"{blob}_{layer}_{k}_split"


def split_blob_name(layer, blob, k, i):
    return f"{blob}_{layer}_{k}_split_{i}"


def insert_splits(layers, inputs, holder):
    """The layer list with splits inserted, and for each layer the index in `layers` it came from
    (None: a split). `layers` are the net's LayerParameters after filtering, `inputs` its legacy
    net-level input names. A layer Caffe changes (a bottom renamed to a split's top, a loss weight
    moved onto the split) is a copy, made in `holder` (a NetParameter: one arena for them all) with
    the splits; every other layer is the given message itself, which the net never changes."""
    # blob name -> (layer index, top index) of its latest producer; -1: a legacy net-level input
    last_top = {name: (-1, i) for i, name in enumerate(inputs)}
    source = {}  # (layer, bottom) -> (layer, top)
    consumers = {}  # (layer, top) -> count
    loss = {}
    for i, lp in enumerate(layers):
        for j, name in enumerate(lp.bottom):
            if name not in last_top:
                continue  # the net builder reports the unknown bottom, with its line
            source[(i, j)] = last_top[name]
            consumers[last_top[name]] = consumers.get(last_top[name], 0) + 1
        tops = lp.top
        for j, name in enumerate(tops):
            last_top[name] = (i, j)
        weights = lp.loss_weight
        for j in range(min(len(weights), len(tops))):
            top = last_top[tops[j]]
            loss[top] = weights[j]
            if loss[top]:
                consumers[top] = consumers.get(top, 0) + 1
    out, origin = [], []
    next_split = {}
    made = holder.layer
    for i, name in enumerate(inputs):  # old Caffe splits net-level inputs first, as layer "input"
        if consumers.get((-1, i), 0) > 1:
            out.append(made.add(name=split_layer_name("input", name, i), type="Split", bottom=[name],
                                top=[split_blob_name("input", name, i, k) for k in range(consumers[(-1, i)])]))
            origin.append(None)
    for i, original in enumerate(layers):
        renamed = {}
        for j, name in enumerate(original.bottom):
            top = source.get((i, j))
            if top is not None and consumers.get(top, 0) > 1:
                k = next_split.get(top, 0)
                next_split[top] = k + 1
                producer = layers[top[0]].name if top[0] >= 0 else "input"
                renamed[j] = split_blob_name(producer, name, top[1], k)
        splits = [(j, name, consumers[(i, j)]) for j, name in enumerate(original.top) if consumers.get((i, j), 0) > 1]
        moved = [j for j, _, _ in splits if loss.get((i, j), 0.0)]
        lp = original
        if renamed or moved:
            lp = made.add()
            lp.CopyFrom(original)
            for j, name in renamed.items():
                lp.bottom[j] = name
            if moved:
                del lp.loss_weight[:]
        out.append(lp)
        origin.append(i)
        for j, name, n in splits:
            weight = loss.get((i, j), 0.0)
            split = made.add(name=split_layer_name(lp.name, name, j), type="Split", bottom=[name],
                             top=[split_blob_name(lp.name, name, j, k) for k in range(n)])
            if weight:
                split.loss_weight.extend(weight if k == 0 else 0.0 for k in range(n))
                next_split[(i, j)] = next_split.get((i, j), 0) + 1
            out.append(split)
            origin.append(None)
    return out, origin
