"""Every allocation Caffe makes for a built net, from what its layers touch (protoaudit.touch).

Caffe allocates a blob's data or diff, a parameter or a layer's buffer the first time it is
touched, and never frees or shrinks it. So the memory of a run is the set of buffers touched at
setup, in the forward pass (layers in order) and in the backward pass (layers in reverse, those
Net::Init marked as needing backward), each counted once, where sharing (in-place tops, Split,
Flatten, Reshape, shared params) makes two names one buffer.
"""
from dataclasses import dataclass

from .layers.base import count
from .touch import Run

KINDS = ("top data", "top diff", "param data", "param diff", "history", "layer buffer", "workspace",
         "prefetch", "host objects", "context")

# Caffe's own C++ objects (Layer, Blob and SyncedMemory objects, the copies Net::Init keeps of each
# LayerParameter, the vectors a pass builds) live in host memory. Fitted by least squares to real
# Caffe's heap after one forward and backward, less every buffer protoaudit counts, over the 314
# runs of tests/data/oracle (largest residual 51 KB): per layer, per parameter blob, and per byte
# of the layer's serialized LayerParameter.
HOST_BYTES_PER_LAYER = 2790
HOST_BYTES_PER_PARAM = 900
HOST_BYTES_PER_PARAM_BYTE = 5.6


@dataclass(frozen=True)
class Buffer:
    """One allocation: who first touches it, what it is, how big, when, and whether it grows with
    the batch."""

    net: str  # which net holds it: train, test, test#2, ...
    layer: str  # the layer that first touches it
    owner: str  # the blob, parameter or buffer: "conv1", "conv1.param0", "conv1.col_buffer_"
    kind: str
    elements: int
    itemsize: int
    touch: str  # setup | forward | backward | solver | test
    per_sample: bool
    device: str = "device"
    note: str = ""  # how its size comes about (a formula or a shape), for explanations

    @property
    def bytes(self):
        return self.elements * self.itemsize


def run_of(node, mode, engine):
    """The Run a layer gets: its shapes and the backward flags Net::Init settled."""
    return Run(
        mode=mode,
        engine=engine,
        phase=node.impl.ctx.phase,
        bottoms=list(node.bottom_shapes),
        tops=list(node.top_shapes),
        in_place=list(node.in_place),
        propagate_down=list(node.bottom_need_backward),
        param_propagate_down=[p.need_backward for p in node.params],
        num_params=len(node.params),
    )


class _Storage:
    """Which blob storages are one: in-place tops are one blob already; ShareData/ShareDiff join
    a top's data or diff to its bottom's."""

    def __init__(self, net):
        self.root = {}
        for node in net.layers:
            for top_j, bottom_j, part in node.impl.shares():
                self.root[(node.tops[top_j], part)] = self.find((node.bottoms[bottom_j], part))

    def find(self, key):
        while key in self.root:
            key = self.root[key]
        return key


def net_buffers(net, *, mode="gpu", engine="caffe", backward=True, label="net", shared_params=None, forward=True):
    """The buffers one forward (and, if `backward`, one backward) pass of `net` allocates; with
    `forward` false, what setting it up alone allocates (a test net a solver never runs).

    `shared_params` names layers whose parameter data belongs to another net (a solver's test net
    shares the train net's), so they are not counted here.
    """
    storage = _Storage(net)
    seen = set()
    out = []
    batch = net.batch
    # a blob grows with the batch when its first axis is the batch (Caffe keeps N first)
    batch_axis = {b.index: bool(b.shape) and b.shape[0] == batch for b in net.blobs}

    def add(key, layer, owner, kind, elements, itemsize, stage, per_sample, note="", device="device"):
        if key in seen:
            return
        seen.add(key)
        where = "host" if mode == "cpu" else device
        out.append(Buffer(label, layer, owner, kind, elements, itemsize, stage, per_sample, where, note))

    def blob(node, index, part, stage, device="device"):
        root_index, root_part = storage.find((index, part))
        if ("blob", root_index, root_part) in seen:  # most touches find it allocated: skip the strings
            return
        b = net.blobs[root_index]
        add(("blob", root_index, root_part), node.name, b.name, f"top {root_part}", b.count, 4, stage,
            batch_axis[root_index], "x".join(map(str, b.shape)), device)

    def param(node, k, part, stage):
        p = node.params[k]
        owner_layer, owner_k = p.owner or (node.index, k)
        if ("param", owner_layer, owner_k, part) in seen:
            return
        if part == "data" and shared_params and net.layers[owner_layer].name in shared_params:
            return
        owner = net.layers[owner_layer]
        shape = owner.params[owner_k].shape
        add(("param", owner_layer, owner_k, part), node.name, f"{owner.name}.param{owner_k}",
            f"param {part}", count(shape), 4, stage, False, "x".join(map(str, shape)))

    def apply(node, t):
        if t.what == "bottom":
            blob(node, node.bottoms[t.index], t.part, t.stage, t.device)
        elif t.what == "top":
            blob(node, node.tops[t.index], t.part, t.stage, t.device)
        elif t.what == "param":
            param(node, t.index, t.part, t.stage)
        else:
            add(("buffer", node.index, t.name), node.name, f"{node.name}.{t.name}", t.kind, t.elements,
                t.itemsize, t.stage, t.per_sample, t.note, t.device)

    touches = [(node, node.impl.touches(run_of(node, mode, engine))) for node in net.layers]
    for node, ts in touches:
        for t in ts:
            if t.stage == "setup":
                apply(node, t)
        for j, weight in enumerate(node.loss_weights):
            if weight:  # Layer::SetLossWeights writes the loss weight into the top's diff
                blob(node, node.tops[j], "diff", "setup")
    for node, ts in touches:
        for t in ts:
            if t.stage == "forward" and forward:
                apply(node, t)
    if backward and forward:
        for node, ts in reversed(touches):
            if node.need_backward:
                for t in ts:
                    if t.stage == "backward":
                        apply(node, t)
    return out


def host_objects(net, label="net"):
    """Caffe's C++ objects for this net, as one host-memory buffer (see HOST_BYTES_PER_*)."""
    size = sum(HOST_BYTES_PER_LAYER + HOST_BYTES_PER_PARAM * len(node.params)
               + HOST_BYTES_PER_PARAM_BYTE * node.lp.ByteSize() for node in net.layers)
    return Buffer(label, "(net)", "C++ objects", "host objects", int(size), 1, "setup", False, "host")


def runs_backward(net):
    """Whether Net::Backward does anything: some layer needs backward."""
    return any(node.need_backward for node in net.layers)
