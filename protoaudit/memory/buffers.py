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
from ..records import RECORD
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
               node.bottom_need_backward, [p.need_backward for p in node.params], len(node.params))


def layer_touches(node, mode, engine):
    """node.impl.touches for this run, in the layer's own order."""
    return _staged(node, mode, engine)[3]


def _staged(node, mode, engine):
    """The layer's touches for this run as (setup, forward, backward, all): setup with the loss
    weights Layer::SetLossWeights writes into the top diffs. Kept on the node (a built net does
    not change): most layers allocate the same under either engine and never ask which one runs,
    so their touches serve the other engine's audit too."""
    kept = node.touches_kept
    if kept is None:
        kept = node.touches_kept = {}
    staged = kept.get((mode, None)) or kept.get((mode, engine))
    if staged is None:
        run = run_of(node, mode, engine)
        touches = node.impl.touches(run)
        setup, forward, backward = [], [], []
        for t in touches:
            stage = t.stage
            if stage == "setup":
                setup.append(t)
            elif stage == "forward":
                forward.append(t)
            elif stage == "backward":
                backward.append(t)
        setup += [touch.top(j, "diff", "setup") for j, weight in enumerate(node.loss_weights) if weight]
        staged = (setup, forward, backward, touches)
        kept[(mode, engine if run.asked_engine else None)] = staged
    return staged


def forget_touches(net):
    """Drop the touches kept on `net`'s layers (once every engine of an audit has walked them)."""
    for node in net.layers:
        node.touches_kept = None


def _shared_storage(net):
    """Which blob storages are one: in-place tops are one blob already; ShareData/ShareDiff join
    a top's data or diff to its bottom's (a blob shared with itself, as a one-bottom Concat or a
    one-top Slice computed in place does, stays as it was). {(blob, part): (blob it is, part)}"""
    root = {}
    for node in net.layers:
        for top_j, bottom_j, part in node.impl.shares():
            if node.tops[top_j] == node.bottoms[bottom_j]:
                continue
            at = (node.bottoms[bottom_j], part)
            while at in root:
                at = root[at]
            root[(node.tops[top_j], part)] = at
    return root


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
    blobs_seen, params_seen, buffers_seen = set(), set(), set()
    only_mine, only_theirs = set(), set()
    change = 0
    out = []
    total = 0
    batch = net.batch
    blobs, layers = net.blobs, net.layers
    # a blob grows with the batch when its first axis is the batch (Caffe keeps N first)
    batch_axis = [bool(b.shape) and b.shape[0] == batch for b in blobs]
    staged = [_staged(node, mode, engine) for node in layers]
    if other is None:
        theirs = staged
    else:  # most layers' touches serve both engines (kept under the engine None)
        both = (mode, None)
        theirs = [node.touches_kept.get(both) or _staged(node, mode, other) for node in layers]
    steps = [(0, range(len(layers)))]
    if forward:
        steps.append((1, range(len(layers))))
        if backward:
            steps.append((2, [i for i in reversed(range(len(layers))) if layers[i].need_backward]))
    cpu = mode == "cpu"
    for stage, order in steps:
        for i in order:
            node = layers[i]
            mine = staged[i][stage]
            if theirs[i] is staged[i]:
                sides = ((0, mine),)
            else:  # 1: this engine's touches alone, 2: the other engine's alone
                sides = ((1, mine), (2, theirs[i][stage]))
            for side, touches in sides:
                for t in touches:  # one loop, no calls per touch: a 10,000-layer net has some 100,000
                    what = t.what
                    if what == "bottom" or what == "top":
                        at = ((node.bottoms if what == "bottom" else node.tops)[t.index], t.part)
                        while at in root:
                            at = root[at]
                        seen, key = blobs_seen, at
                    elif what == "param":
                        owner_layer, owner_k = node.params[t.index].owner or (node.index, t.index)
                        owner = layers[owner_layer]
                        if t.part == "data" and shared_params and owner.name in shared_params:
                            continue
                        seen, key = params_seen, (owner_layer, owner_k, t.part)
                    elif what == "stop":
                        raise InputError(t.note, file=net.path, line=node.line, layer=node.name,
                                         fix="audit it where Caffe has that code: GPU mode (--mode gpu)")
                    else:
                        seen, key = buffers_seen, t.name if t.process else (node.index, t.name)
                    first = key not in seen
                    if not first and side != 2 and not (side == 0 and only_mine and key in only_mine):
                        continue  # allocated already, under both engines
                    if what == "bottom" or what == "top":
                        b = blobs[at[0]]
                        device = "host" if cpu else t.device
                        n = 4 * b.count if t.owns else 0
                    elif what == "param":
                        device = "host" if cpu else "device"
                        n = 4 * count(owner.params[owner_k].shape)
                    else:
                        device = "host" if cpu else t.device
                        n = t.elements * t.itemsize
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
                        key = (("top " + at[1], batch_axis[at[0]]) if what == "bottom" or what == "top"
                               else ("param " + t.part, False) if what == "param" else (t.kind, t.per_sample))
                        tally[key] = tally.get(key, 0) + on_device
                    if not make or (what == "bottom" or what == "top") and not t.owns:
                        continue  # (a top that points into a buffer its layer counts: a data layer's prefetch batch)
                    if what == "bottom" or what == "top":
                        out.append(Buffer(label, node.name, b.name, "top " + at[1], b.count, 4, t.stage,
                                          batch_axis[at[0]], device, b.shape))
                    elif what == "param":
                        shape = owner.params[owner_k].shape
                        out.append(Buffer(label, node.name, f"{owner.name}.param{owner_k}", "param " + t.part,
                                          count(shape), 4, t.stage, False, device, shape))
                    else:
                        owner = f"process.{t.name}" if t.process else f"{node.name}.{t.name}"
                        out.append(Buffer(label, node.name, owner, t.kind, t.elements, t.itemsize, t.stage,
                                          t.per_sample, device, t.note))
    if not make:
        return total
    return (out, change) if other is not None else out


def host_objects(net, label="net", *, forward=True, backward=True, shared_params=(), rng_made=False, copies=None):
    """Caffe's C++ objects for this net (protoaudit.memory.host), as one host-memory buffer."""
    size = host_bytes(net, forward=forward, backward=backward, shared_params=shared_params, rng_made=rng_made,
                      copies=copies)
    return Buffer(label, "(net)", "C++ objects", "host objects", size, 1, "setup", False, "host")


def runs_backward(net):
    """Whether Net::Backward does anything: some layer needs backward."""
    return any(node.need_backward for node in net.layers)
