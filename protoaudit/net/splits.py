"""Caffe's InsertSplits: a Split layer after every top that feeds more than one consumer.

A top with a non-zero loss_weight counts as one more consumer, as in insert_splits.cpp, and the
Split then carries the loss on its first top. Names follow Caffe: `<blob>_<layer>_<k>_split`.
"""


def split_layer_name(layer, blob, k):
    return f"{blob}_{layer}_{k}_split"


def split_blob_name(layer, blob, k, i):
    return f"{blob}_{layer}_{k}_split_{i}"


def insert_splits(net):
    """The layer list with splits inserted, and for each layer the index it came from (None: split)."""
    # blob name -> (layer index, top index) of its latest producer; -1: a legacy net-level input
    last_top = {name: (-1, i) for i, name in enumerate(net.input)}
    source = {}  # (layer, bottom) -> (layer, top)
    consumers = {}  # (layer, top) -> count
    loss = {}
    for i, lp in enumerate(net.layer):
        for j, name in enumerate(lp.bottom):
            if name not in last_top:
                continue  # the net builder reports the unknown bottom, with its line
            source[(i, j)] = last_top[name]
            consumers[last_top[name]] = consumers.get(last_top[name], 0) + 1
        for j, name in enumerate(lp.top):
            last_top[name] = (i, j)
        for j in range(min(len(lp.loss_weight), len(lp.top))):
            top = last_top[lp.top[j]]
            loss[top] = lp.loss_weight[j]
            if loss[top]:
                consumers[top] = consumers.get(top, 0) + 1
    out, origin = [], []
    next_split = {}
    LayerParameter = type(net.layer.add())
    del net.layer[-1]
    for i, name in enumerate(net.input):  # old Caffe splits net-level inputs first, as layer "input"
        if consumers.get((-1, i), 0) > 1:
            split = LayerParameter(name=split_layer_name("input", name, i), type="Split", bottom=[name])
            split.top.extend(split_blob_name("input", name, i, k) for k in range(consumers[(-1, i)]))
            out.append(split)
            origin.append(None)
    for i, original in enumerate(net.layer):
        lp = LayerParameter()
        lp.CopyFrom(original)
        for j, name in enumerate(lp.bottom):
            top = source.get((i, j))
            if top is not None and consumers.get(top, 0) > 1:
                k = next_split.get(top, 0)
                next_split[top] = k + 1
                producer = net.layer[top[0]].name if top[0] >= 0 else "input"
                lp.bottom[j] = split_blob_name(producer, name, top[1], k)
        out.append(lp)
        origin.append(i)
        for j, name in enumerate(lp.top):
            n = consumers.get((i, j), 0)
            if n > 1:
                weight = loss.get((i, j), 0.0)
                split = LayerParameter()
                split.name = split_layer_name(lp.name, name, j)
                split.type = "Split"
                split.bottom.append(name)
                for k in range(n):
                    split.top.append(split_blob_name(lp.name, name, j, k))
                    if weight:
                        split.loss_weight.append(weight if k == 0 else 0.0)
                if weight:
                    del lp.loss_weight[:]
                    next_split[(i, j)] = next_split.get((i, j), 0) + 1
                out.append(split)
                origin.append(None)
    return out, origin
