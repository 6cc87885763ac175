"""Every allocation Caffe makes for a built net, from what its layers touch (protoaudit.layers.touch).

Caffe allocates a blob's data or diff, a parameter or a layer's buffer the first time it is
touched, and never frees or shrinks it. So the memory of a run is the set of buffers touched at
setup, in the forward pass (layers in order) and in the backward pass (layers in reverse, those
Net::Init marked as needing backward), each counted once, where sharing (in-place tops, Split,
Flatten, Reshape, shared params) makes two names one buffer.
"""
from dataclasses import dataclass

from ..errors import InputError
from ..layers import touch
from ..layers.base import count
from ..layers.touch import Run
from .host import host_bytes

KINDS = ("top data", "top diff", "param data", "param diff", "history", "layer buffer", "workspace",
         "prefetch", "host objects", "library state", "context")

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


_BUFFER_FIELDS = tuple(Buffer.__dataclass_fields__)


def _buffer(*values):
    """Buffer(*values) (every field given, in order), made without the frozen dataclass's
    field-by-field __init__: half the cost, and a 10,000-layer net makes 100,000 of them."""
    b = object.__new__(Buffer)
    b.__dict__.update(zip(_BUFFER_FIELDS, values))
    return b


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


class _Probe(Run):
    """A Run that notes whether the layer asked which engine it runs on."""

    asked_engine = False

    @property
    def engine(self):
        self.asked_engine = True
        return self._engine

    @engine.setter
    def engine(self, value):
        self._engine = value


def layer_touches(node, mode, engine):
    """node.impl.touches for this run. Most layers allocate the same under either engine and never
    ask which one runs: their touches, kept on the node, serve the other engine's audit too."""
    key = (mode, node.impl.ctx.phase, tuple(node.bottom_shapes), tuple(node.top_shapes), tuple(node.in_place),
           tuple(node.bottom_need_backward), tuple(p.need_backward for p in node.params))
    kept = node.__dict__.get("_touches")
    if kept is not None and kept[0] == key and (kept[1] == engine or not kept[3]):
        return kept[2]
    run = _Probe(mode, engine, node.impl.ctx.phase, list(node.bottom_shapes), list(node.top_shapes),
                 list(node.in_place), list(node.bottom_need_backward), [p.need_backward for p in node.params],
                 len(node.params))
    touches = node.impl.touches(run)
    node._touches = (key, engine, touches, run.asked_engine)
    return touches


class _Storage:
    """Which blob storages are one: in-place tops are one blob already; ShareData/ShareDiff join
    a top's data or diff to its bottom's (a blob shared with itself, as a one-bottom Concat or a
    one-top Slice computed in place does, stays as it was)."""

    def __init__(self, net):
        self.root = {}
        for node in net.layers:
            for top_j, bottom_j, part in node.impl.shares():
                if node.tops[top_j] != node.bottoms[bottom_j]:
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

    # every touch in Caffe's order: setup (with the loss weights written into top diffs), the
    # forward pass, then the backward pass in reverse over the layers that need it
    touches = [(node, layer_touches(node, mode, engine)) for node in net.layers]
    order = []
    for node, ts in touches:
        order += [(node, t) for t in ts if t.stage == "setup"]
        # Layer::SetLossWeights writes the loss weight into the top's diff
        order += [(node, touch.top(j, "diff", "setup")) for j, weight in enumerate(node.loss_weights) if weight]
    if forward:
        order += [(node, t) for node, ts in touches for t in ts if t.stage == "forward"]
    if backward and forward:
        order += [(node, t) for node, ts in reversed(touches) if node.need_backward for t in ts if t.stage == "backward"]
    cpu = mode == "cpu"
    root = storage.root
    blobs, layers = net.blobs, net.layers
    for node, t in order:  # one loop, no calls per touch: a 10,000-layer net has some 100,000
        what = t.what
        if what == "bottom" or what == "top":
            at = ((node.bottoms if what == "bottom" else node.tops)[t.index], t.part)
            while at in root:  # storage.find, written out
                at = root[at]
            root_index, root_part = at
            key = ("blob", root_index, root_part)
            if key in seen:
                continue
            seen.add(key)
            if not t.owns:  # the blob points into a buffer its layer counts (a data layer's prefetch batch)
                continue
            b = blobs[root_index]
            out.append(_buffer(label, node.name, b.name, f"top {root_part}", b.count, 4, t.stage,
                               batch_axis[root_index], "host" if cpu else t.device, "x".join(map(str, b.shape))))
        elif what == "param":
            owner_layer, owner_k = node.params[t.index].owner or (node.index, t.index)
            key = ("param", owner_layer, owner_k, t.part)
            if key in seen:
                continue
            owner = layers[owner_layer]
            if t.part == "data" and shared_params and owner.name in shared_params:
                continue
            seen.add(key)
            shape = owner.params[owner_k].shape
            out.append(_buffer(label, node.name, f"{owner.name}.param{owner_k}", f"param {t.part}", count(shape), 4,
                               t.stage, False, "host" if cpu else "device", "x".join(map(str, shape))))
        elif what == "stop":
            raise InputError(t.note, file=net.path, line=node.line, layer=node.name,
                             fix="audit it where Caffe has that code: GPU mode (--mode gpu)")
        else:
            key = ("process", t.name) if t.process else ("buffer", node.index, t.name)
            if key in seen:
                continue
            seen.add(key)
            owner = f"process.{t.name}" if t.process else f"{node.name}.{t.name}"
            out.append(_buffer(label, node.name, owner, t.kind, t.elements, t.itemsize, t.stage,
                               t.per_sample, "host" if cpu else t.device, t.note))
    return out


def host_objects(net, label="net", *, forward=True, backward=True, shared_params=(), rng_made=False):
    """Caffe's C++ objects for this net (protoaudit.memory.host), as one host-memory buffer."""
    size = host_bytes(net, forward=forward, backward=backward, shared_params=shared_params, rng_made=rng_made)
    return Buffer(label, "(net)", "C++ objects", "host objects", size, 1, "setup", False, "host")


def runs_backward(net):
    """Whether Net::Backward does anything: some layer needs backward."""
    return any(node.need_backward for node in net.layers)
