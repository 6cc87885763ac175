"""Every allocation Caffe makes for a built net, from what its layers touch (protoaudit.layers.touch).

Caffe allocates a blob's data or diff, a parameter or a layer's buffer the first time it is
touched, and never frees or shrinks it. So the memory of a run is the set of buffers touched at
setup, in the forward pass (layers in order) and in the backward pass (layers in reverse, those
Net::Init marked as needing backward), each counted once, where sharing (in-place tops, Split,
Flatten, Reshape, shared params) makes two names one buffer.
"""
from dataclasses import dataclass

from ..errors import InputError, LayerStops
from ..layers import touch
from ..layers.base import count
from ..layers.touch import Run
from ..records import RECORD
from .alike import alike, forget
from .host import host_bytes

KINDS = ("top data", "top diff", "param data", "param diff", "history", "layer buffer", "workspace",
         "prefetch", "host objects", "library state", "context")

@dataclass(**RECORD)
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
    about: object = ""  # how its size comes about: a formula (str), or a blob's shape (tuple)

    @property
    def bytes(self):
        return self.elements * self.itemsize

    def first_touched(self, stage):
        """This buffer with its first touch at `stage` instead (as Solver::Step's ClearParamDiffs
        touches param diffs before any pass does): one constructor call, as many are."""
        return Buffer(self.net, self.layer, self.owner, self.kind, self.elements, self.itemsize, stage,
                      self.per_sample, self.device, self.about)

    @property
    def note(self):
        """How its size comes about, in words (a shape written NxCxHxW), for explanations: written
        only when one asks, as few buffers are ever explained."""
        return "x".join(map(str, self.about)) if isinstance(self.about, tuple) else self.about


def run_of(node, mode, engine):
    """The Run a layer gets: its shapes and the backward flags Net::Init settled (the node's own
    lists, which a layer reads and never changes)."""
    return Run(mode, engine, node.impl.ctx.phase, node.bottom_shapes, node.top_shapes, node.in_place,
               node.bottom_need_backward, [p.propagates for p in node.params], len(node.params))


def layer_touches(node, mode, engine):
    """node.impl.touches for this run, in the layer's own order."""
    return _staged(node, mode, engine)[0][3]


def _net_staged(net, mode, engine):
    """Each layer's touches for this run, staged (_staged). Made once per layer alike
    (protoaudit.memory.alike): one layer's touches, records only read, serve every layer alike.
    Kept on the net (a built net does not change) until forget_touches: most layers allocate the
    same under either engine and never ask which one runs, so their touches (kept under the engine
    None, the same object) serve the other engine's walk too."""
    kept = net.__dict__.get("_touches")
    if kept is None:
        kept = net._touches = {}
    out = []
    for node, number in zip(net.layers, alike(net)):
        staged = kept.get((number, mode, None)) or kept.get((number, mode, engine))
        if staged is None:
            staged, asked = _staged(node, mode, engine)
            kept[(number, mode, asked)] = staged
        out.append(staged)
    return out


def _staged(node, mode, engine):
    """The layer's touches for this run as (setup, forward, backward, all), the stages in the
    walk's form (_step), setup with the loss weights Layer::SetLossWeights writes into the top
    diffs; and the engine if the layer asked which one runs, else None."""
    run = run_of(node, mode, engine)
    touches = node.impl.touches(run)
    setup, forward, backward = [], [], []
    stages = {"setup": setup, "forward": forward, "backward": backward}
    cpu = mode == "cpu"
    for t in touches:
        steps = stages.get(t.stage)
        if steps is not None:
            steps.append(_step(t, cpu))
    setup += [_step(touch.top(j, "diff", "setup"), cpu) for j, weight in enumerate(node.loss_weights) if weight]
    return (setup, forward, backward, touches), engine if run.asked_engine else None


BOTTOM, TOP, PARAM, BUFFER, PROCESS, STOP = range(6)  # what a step touches (_step)


def _step(t, cpu):
    """A touch as the walk reads it, (what, a, b, device, t), worked out once per layer alike: a
    bottom's or top's (BOTTOM, TOP) index and 0 for its data or 1 for its diff; a parameter's
    (PARAM) index and part; a buffer's (BUFFER, or PROCESS for the process's) name and bytes; where
    it lives in this mode."""
    device = "host" if cpu else t.device
    if t.what == "bottom" or t.what == "top":
        return (BOTTOM if t.what == "bottom" else TOP), t.index, int(t.part == "diff"), device, t
    if t.what == "param":
        return PARAM, t.index, t.part, device, t
    if t.what == "stop":
        return STOP, None, None, device, t
    return (PROCESS if t.process else BUFFER), t.name, t.elements * t.itemsize, device, t


def asked_engine(net, mode):
    """Whether a layer of `net`, walked in `mode`, asked which engine runs (its touches then are the
    engine's): a layer that walks a net of its own (an RNN's or LSTM's unrolled net) asks only then."""
    return any(asked is not None for _, walked, asked in net.__dict__.get("_touches", {}) if walked == mode)


def forget_touches(net):
    """Drop the touches and likenesses kept on `net` (once every engine of an audit has walked it)."""
    net.__dict__.pop("_touches", None)
    forget(net)


def _shared_storage(net):
    """Which blob storages are one: in-place tops are one blob already; ShareData/ShareDiff join
    a top's data or diff to its bottom's (a blob shared with itself, as a one-bottom Concat or a
    one-top Slice computed in place does, stays as it was). {storage: the storage it is}, a blob's
    data or diff named by one int (_storage)."""
    root = {}
    for node in net.layers:
        for top_j, bottom_j, part in node.impl.shares():
            if node.tops[top_j] == node.bottoms[bottom_j]:
                continue
            at = _storage(node.bottoms[bottom_j], part)
            while at in root:
                at = root[at]
            root[_storage(node.tops[top_j], part)] = at
    return root


def _storage(blob, part):
    """A blob's data (2 * blob) or diff (2 * blob + 1): one int, as the walk looks it up per touch."""
    return 2 * blob + (part == "diff")


_TOP_KINDS = ("top data", "top diff")  # by a blob step's part (_step)
_PARAM_KINDS = {"data": "param data", "diff": "param diff"}


def net_buffers(net, *, mode="gpu", engine="caffe", backward=True, label="net", shared_params=None, forward=True,
                other=None):
    """The buffers one forward (and, if `backward`, one backward) pass of `net` allocates; with
    `forward` false, what setting it up alone allocates (a test net a solver never runs).

    `shared_params` names layers whose parameter data belongs to another net (a solver's test net
    shares the train net's), so they are not counted here. With `other` (an engine), also how many
    bytes more the same run holds on the device under that engine: (buffers, that difference).
    """
    return _walk(net, mode, engine, backward, forward, shared_params, label, True, other)


def device_bytes(net, *, mode="gpu", engine="caffe", backward=True, shared_params=None, forward=True, tally=None):
    """sum(b.bytes for b in net_buffers(...) if b.device == "device"), without making the Buffers;
    `tally` (a dict) gets those bytes by (kind, per_sample) too."""
    return _walk(net, mode, engine, backward, forward, shared_params, "net", False, tally=tally)


def _walk(net, mode, engine, backward, forward, shared_params, label, make, other=None, tally=None):
    """Every touch in Caffe's order: setup (with the loss weights written into top diffs), the
    forward pass, then the backward pass in reverse over the layers that need it; the first touch
    of each buffer allocates it. `make`: the Buffers, else the bytes on the device.

    With `other`, the same walk under that engine too, in the same loop: most layers touch the
    same under both, and only the layers that ask which engine runs touch their own way (their
    touches under `engine` are walked as this engine's alone, those under `other` as the other's).
    The other engine's state is kept as its difference from this one's: the buffers only this
    engine has allocated so far (`only_mine`), those only the other has (`only_theirs`), and the
    bytes it holds more (`change`), so a touch both engines make costs no more than before."""
    root = _shared_storage(net)
    seen = set()  # what is allocated: a blob's data or diff (_storage), a parameter's
    # (owner layer, index, part), a layer's buffer (layer, name), a process's buffer (its name)
    only_mine, only_theirs = set(), set()
    change = 0
    out = []
    total = 0
    batch = net.batch
    blobs, layers = net.blobs, net.layers
    staged = _net_staged(net, mode, engine)
    theirs = staged if other is None else _net_staged(net, mode, other)
    largest = _largest(staged, theirs)
    passes = [(0, range(len(layers)))]
    if forward:
        passes.append((1, range(len(layers))))
        if backward:
            passes.append((2, [i for i in reversed(range(len(layers))) if layers[i].need_backward]))
    for stage, order in passes:
        for i in order:
            node = layers[i]
            mine = staged[i][stage]
            if theirs[i] is staged[i]:
                sides = ((0, mine),)
            else:  # 1: this engine's touches alone, 2: the other engine's alone
                sides = ((1, mine), (2, theirs[i][stage]))
            for side, steps in sides:
                for what, a, b, device, t in steps:  # one loop, no calls per touch: a 10,000-layer net has some 100,000
                    if what <= TOP:  # a bottom's or top's data or diff
                        key = 2 * (node.tops if what == TOP else node.bottoms)[a] + b
                        while key in root:
                            key = root[key]
                    elif what == BUFFER:
                        key = (i, a)
                    elif what == PARAM:
                        owner_layer, owner_k = node.params[a].owner or (i, a)
                        if b == "data" and shared_params and layers[owner_layer].name in shared_params:
                            continue
                        key = (owner_layer, owner_k, b)
                    elif what == PROCESS:
                        key = a
                    else:
                        raise LayerStops(t.note, file=net.path, line=node.line, layer=node.name, fix=t.name)
                    first = key not in seen
                    if not first and side != 2 and not (side == 0 and only_mine and key in only_mine):
                        continue  # allocated already, under both engines
                    if what <= TOP:
                        blob = blobs[key >> 1]
                        elements = blob.count
                        n = 4 * elements if t.owns else 0
                    elif what == PARAM:
                        shape = layers[owner_layer].params[owner_k].shape
                        elements = count(shape)
                        n = 4 * elements
                    else:
                        n = largest[a] if what == PROCESS else b
                    on_device = n if device == "device" else 0
                    if side == 2:  # the other engine's own touch
                        if key in only_theirs or not (first or key in only_mine):
                            continue
                        change += on_device
                        if first:
                            only_theirs.add(key)
                        else:
                            only_mine.discard(key)
                        continue
                    if not first:  # the other engine's first touch of what this one has
                        only_mine.discard(key)
                        change += on_device
                        continue
                    seen.add(key)
                    if only_theirs and key in only_theirs:  # the other engine has it already
                        only_theirs.discard(key)
                        change -= on_device
                    elif side == 1:
                        only_mine.add(key)
                        change -= on_device
                    total += on_device
                    if tally is not None and on_device:  # (kind, per_sample) as the Buffer would have them
                        kind = ((_TOP_KINDS[b], bool(blob.shape) and blob.shape[0] == batch) if what <= TOP
                                else (_PARAM_KINDS[b], False) if what == PARAM else (t.kind, t.per_sample))
                        tally[kind] = tally.get(kind, 0) + on_device
                    if not make:
                        continue
                    if what <= TOP:
                        if t.owns:  # (else a top that points into a buffer its layer counts: a data layer's prefetch batch)
                            out.append(Buffer(label, node.name, blob.name, _TOP_KINDS[b], elements, 4, t.stage,
                                              bool(blob.shape) and blob.shape[0] == batch, device, blob.shape))
                    elif what == PARAM:
                        out.append(Buffer(label, node.name, f"{layers[owner_layer].name}.param{owner_k}",
                                          _PARAM_KINDS[b], elements, 4, t.stage, False, device, shape))
                    else:
                        owner = ("process." if what == PROCESS else node.name + ".") + a
                        out.append(Buffer(label, node.name, owner, t.kind, n // t.itemsize, t.itemsize, t.stage,
                                          t.per_sample, device, t.note))
    if not make:
        return total
    return (out, change) if other is not None else out


def _largest(*nets_staged):
    """Each process buffer's bytes (touch.process, touch.static): the most any touch of it asks, at
    any stage (a static Blob is reshaped by every layer before one allocates it)."""
    out = {}
    for staged in nets_staged:
        for layer in staged:
            for t in layer[3]:
                if t.process:
                    out[t.name] = max(out.get(t.name, 0), t.elements * t.itemsize)
    return out


def host_objects(net, label="net", *, forward=True, backward=True, shared_params=(), rng_made=False, copies=None):
    """Caffe's C++ objects for this net (protoaudit.memory.host), as one host-memory buffer."""
    size = host_bytes(net, forward=forward, backward=backward, shared_params=shared_params, rng_made=rng_made,
                      copies=copies)
    return Buffer(label, "(net)", "C++ objects", "host objects", size, 1, "setup", False, "host")


def runs_backward(net):
    """Whether Net::Backward does anything: some layer needs backward."""
    return any(node.need_backward for node in net.layers)
