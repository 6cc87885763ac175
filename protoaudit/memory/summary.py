"""The figures the reports show, computed once from an audit: per-layer rows and totals.

Reports only format these; every sum is made here.
"""
from dataclasses import dataclass, field

from ..layers.recurrent_unrolled import PREFIX as UNROLLED  # how a recurrent layer's inner net's buffers are named
from ..net.freeze import frozen_cost
from ..records import RECORD
from .buffers import KINDS

# the per-layer table's columns, by buffer kind
COLUMNS = {
    "params": ("param data",),
    "data": ("top data",),
    "diffs": ("top diff", "param diff"),
    "buffers": ("layer buffer", "prefetch", "host objects", "library state"),
    "workspace": ("workspace",),
}
# a kind's place in a layer's figures: its column's, or the place after them (kinds no column shows)
PLACE_OF = {kind: i for i, kinds in enumerate(COLUMNS.values()) for kind in kinds}
UNSHOWN = len(COLUMNS)
NO_FIGURES = (0,) * len(COLUMNS)


@dataclass(**RECORD)
class LayerRow:
    """One row of the per-layer table. Its bytes by column are a tuple (rows with the same figures
    share one), read as the dict `columns`; its tops are the layer's own list in the built net, and
    its buffers are sorted out of its net's when first asked for (rows with a dict and two lists of
    their own held 10.7 MB for a 10,000-layer net, these 3.2 MB)."""

    net: str  # the net's label: train, test, net, ...
    name: str
    type: str
    tops: list  # shapes
    figures: tuple  # bytes by column, in COLUMNS' order
    total: int
    cumulative: int
    held: object  # its buffers: a list, or its net's LayerBuffers
    param_count: int = 0  # elements of the parameter blobs the layer owns (a shared one counts at its owner)

    @property
    def columns(self):
        """column -> bytes"""
        return dict(zip(COLUMNS, self.figures))

    @property
    def buffers(self):
        """The Buffers it first touches."""
        held = self.held
        return held if isinstance(held, list) else held.of(self.name)


class LayerBuffers:
    """One net's counted buffers by the layer that first touches them, sorted out the first time a
    row asks (the text report never does). Those of layers the net does not have (`rest`: its C++
    objects' "(net)") are one row's, named after the first of them."""

    def __init__(self, buffers, devices, rest):
        self.buffers, self.devices, self.rest = buffers, devices, rest
        self.lists = None

    def of(self, name):
        if self.lists is None:
            self.lists = {}
            for b in self.buffers:
                if b.device in self.devices:
                    self.lists.setdefault(b.layer, []).append(b)
        if self.rest and name == self.rest[0]:
            return [b for layer in self.rest for b in self.lists[layer]]
        return self.lists.get(name, [])

    def of_few(self, names):
        """{name: its buffers} for a few rows, read in one pass and not kept (`of` keeps every layer's)."""
        if self.lists is not None:
            return {name: self.of(name) for name in names}
        rest = set(self.rest) if self.rest and self.rest[0] in names else ()
        out = {name: [] for name in names}
        for b in self.buffers:
            layer = b.layer
            if layer in rest:
                layer = self.rest[0]
            if layer in out and b.device in self.devices:
                out[layer].append(b)
        return out


@dataclass
class Summary:
    rows: list
    by_kind: dict  # kind -> bytes, counted ones only
    by_touch: dict  # first touch -> bytes
    by_net: dict  # net label -> bytes
    total: int
    host: int  # host bytes not counted (gpu mode)
    caffe_figure: dict  # net label -> Caffe's "Memory required for data"
    per_sample: int  # bytes that grow with the batch
    invariant: int
    gaps: list = field(default_factory=list)  # (net, layer, type, what is not counted)
    assumptions: list = field(default_factory=list)  # (net, Assumption): guesses, each with its override
    data_shapes: list = field(default_factory=list)  # (net, ShapeOrigin): where each data top's shape came from
    recipe: object = None  # Recipe, for a net that trains
    frozen: object = None  # protoaudit.net.freeze.FrozenCost, with --freeze
    params: object = None  # ParamCount of the net that trains (else the first), as torchinfo counts a model's
    biggest: list = field(default_factory=list)  # Consumer: the rows that hold the most, with why


@dataclass
class ParamCount:
    """Parameter elements, each owned blob once: those the solver trains (lr_mult not 0) and the rest."""

    total: int
    trainable: int

    @property
    def frozen(self):
        return self.total - self.trainable


@dataclass
class Consumer:
    """One of the rows that hold the most bytes, and what in it holds them: (what, bytes), largest first."""

    row: LayerRow
    parts: list


@dataclass
class Recipe:
    """Seed 002's hand recipe for training memory, "activations x2, params x3", for the train net.

    Activations are Caffe's own count (its "Memory required for data": every top of every layer,
    in-place and Split tops again), times 2 for data and gradient; params are Caffe's learnable
    params (each owned blob once, lr_mult 0 included), times 3 for weights, gradients and momentum.
    """

    activation_elements: int
    param_elements: int
    total: int  # bytes: 4 x (2 x activations + 3 x params)
    ratio: float  # the audit's total over the recipe's
    misses: dict  # what it leaves out: category -> bytes, largest first, nonzero only

    @property
    def activation_bytes(self):
        return 2 * 4 * self.activation_elements

    @property
    def param_bytes(self):
        return 3 * 4 * self.param_elements


def counted_devices(audit):
    """Where the bytes that count against the budget are: everything on the CPU, the device's on the GPU."""
    return ("device", "host") if audit.mode == "cpu" else ("device",)


def counted(audit, buffer):
    return buffer.device in counted_devices(audit)


def summarize(audit):
    """The per-layer rows and every total, from one pass over the audit's buffers (net by net, then
    the extras), which sums them by what the totals tell apart and by layer; the totals by first
    touch and by net keep the order their keys first appear in."""
    devices = counted_devices(audit)
    groups = {}
    rows, running = [], 0
    for net_audit in audit.nets:
        label = net_audit.buffers[0].net if net_audit.buffers else net_audit.role
        by_layer = _tally(net_audit.buffers, groups, devices)
        running = _layer_rows(rows, running, label, net_audit, by_layer, devices)
    _tally(audit.extra, groups)
    _beside_rows(rows, running, audit, devices)
    totals, misses = _totals(groups, devices)
    return Summary(
        rows=rows,
        **totals,
        caffe_figure={n.buffers[0].net if n.buffers else n.role: n.net.memory_required_for_data for n in audit.nets},
        gaps=[(n.role, node.name, node.type, node.impl.gap) for n in audit.nets for node in n.net.layers
              if getattr(node.impl, "gap", None)],
        recipe=recipe(audit, totals["total"], misses),
        frozen=frozen_cost(audit, counted),
        assumptions=_per_net(audit, "assumptions"),
        data_shapes=_per_net(audit, "origins"),
        params=param_count(audit),
        biggest=biggest(audit, rows),
    )


def param_count(audit):
    """The ParamCount of the net that trains, else of the first net (None without nets)."""
    net_audit = audit.train or (audit.nets[0] if audit.nets else None)
    if net_audit is None:
        return None
    owned = [p for node in net_audit.net.layers for p in node.params if p.owner is None]
    return ParamCount(sum(p.count for p in owned), sum(p.count for p in owned if p.lr_mult != 0))


BIGGEST = 3  # rows the short report names
# what a part of a row is called, by buffer kind, or by a layer buffer's member
PART_NAMES = {"col_buffer_": "column buffer (im2col)", "workspace": "cuDNN workspace", "history": "solver history",
              "context": "the CUDA runtime and library handles (--context)", "prefetch": "data prefetch"}


def biggest(audit, rows, n=BIGGEST):
    """The `n` rows that hold the most, each with its parts (buffer kinds; a layer buffer by its
    member) largest first. The buffers of those rows only are read, in one pass per net."""
    top = sorted(rows, key=lambda r: -r.total)[:n]
    found = {}
    for r in top:
        if isinstance(r.held, LayerBuffers) and id(r.held) not in found:
            found[id(r.held)] = r.held.of_few({x.name for x in top if x.held is r.held})
    out = []
    for r in top:
        parts = {}
        for b in (found[id(r.held)][r.name] if id(r.held) in found else r.held):
            if b.kind == "layer buffer" and b.owner.startswith(UNROLLED, len(b.layer) + 1):
                what = "its unrolled net"  # (hundreds of small buffers: one part)
            elif b.kind == "layer buffer":
                member = b.owner.rsplit(".", 1)[-1]
                what = PART_NAMES.get(member, f"buffer {member}")
            else:
                what = PART_NAMES.get(b.kind, b.kind)
            parts[what] = parts.get(what, 0) + b.elements * b.itemsize
        out.append(Consumer(r, sorted(((k, v) for k, v in parts.items() if v), key=lambda kv: -kv[1])))
    return [c for c in out if c.row.total]


def _tally(buffers, groups, devices=None):
    """Add the bytes of `buffers` into `groups`, {(net, kind, first touch, per sample, device, is a
    column buffer): bytes}, a few dozen keys however large the net (a 10,000-layer one has some
    200,000 buffers); with `devices`, also return the counted bytes by layer, each a list of its
    figures by column and, last, what no column shows."""
    by_layer = {}
    for b in buffers:
        n = b.elements * b.itemsize
        kind, device = b.kind, b.device
        key = (b.net, kind, b.touch, b.per_sample, device, b.owner.endswith(".col_buffer_"))
        groups[key] = groups.get(key, 0) + n
        if devices is not None and device in devices:
            figures = by_layer.get(b.layer)
            if figures is None:
                figures = by_layer[b.layer] = [0] * (UNSHOWN + 1)
            figures[PLACE_OF.get(kind, UNSHOWN)] += n
    return by_layer


def _layer_rows(rows, running, label, net_audit, by_layer, devices):
    """Append a row per layer of the net (and one for the buffers of layers it does not have, its
    C++ objects); return the running total. Rows with the same figures share them."""
    layers = net_audit.net.layers
    names = {node.name for node in layers}
    rest = [name for name in by_layer if name not in names]
    held = LayerBuffers(net_audit.buffers, devices, rest)
    shared = {}
    for node in layers:
        found = by_layer.get(node.name)
        if found is None:
            figures, total = NO_FIGURES, 0
        else:
            key = tuple(found)
            kept = shared.get(key)
            if kept is None:
                kept = shared[key] = (key[:UNSHOWN], sum(key))
            figures, total = kept
        running += total
        count = sum(p.count for p in node.params if p.owner is None) if node.params else 0
        rows.append(LayerRow(label, node.name, node.type, node.top_shapes, figures, total, running, held, count))
    if rest:
        rest_total = sum(sum(by_layer[name]) for name in rest)
        running += rest_total
        rows.append(LayerRow(label, rest[0], "", [], NO_FIGURES, rest_total, running, held))
    return running


# the rows held beside the nets, in this order: buffer kind -> the row's name
BESIDE = {"history": "{solver} solver state", "param diff": "ClearParamDiffs", "context": "CUDA context"}


def _beside_rows(rows, running, audit, devices):
    """Append a row for each kind of counted buffer the audit holds beside its nets, after `running` bytes."""
    mine = {kind: [] for kind in BESIDE}
    for b in audit.extra:
        if b.kind in mine and b.device in devices:
            mine[b.kind].append(b)
    for kind, found in mine.items():
        if found:
            kind_total = sum(b.elements * b.itemsize for b in found)
            running += kind_total
            rows.append(LayerRow(found[0].net, BESIDE[kind].format(solver=audit.solver_type), "", [], NO_FIGURES,
                                 kind_total, running, found))


def _totals(groups, devices):
    """The Summary's totals from the summed groups (in the order their first buffers came), and the
    bytes the hand recipe leaves out, by category."""
    by_kind = dict.fromkeys(KINDS, 0)
    by_touch, by_net = {}, {}
    total = per_sample = host = 0
    misses = dict.fromkeys(("test nets", "column buffers", "other layer buffers", "cuDNN workspace", "data prefetch",
                            "CUDA context", "C++ objects"), 0)
    for (net, kind, touch, grows, device, column_buffer), n in groups.items():
        if device not in devices:
            host += n
            continue
        total += n
        if grows:
            per_sample += n
        if kind in by_kind:
            by_kind[kind] += n
        test = net.startswith("test")
        key = "test" if test and kind != "context" else touch
        by_touch[key] = by_touch.get(key, 0) + n
        by_net[net] = by_net.get(net, 0) + n
        miss = "test nets" if test else "column buffers" if column_buffer else MISSED.get(kind)
        if miss is not None:
            misses[miss] += n
    return {"by_kind": {k: v for k, v in by_kind.items() if v}, "by_touch": by_touch, "by_net": by_net, "total": total,
            "host": host, "per_sample": per_sample, "invariant": total - per_sample}, misses


# what the hand recipe leaves out, by buffer kind (test nets and column buffers are told apart first)
MISSED = {"layer buffer": "other layer buffers", "workspace": "cuDNN workspace", "prefetch": "data prefetch",
          "context": "CUDA context", "host objects": "C++ objects"}


def _per_net(audit, what):
    """(net label, item) for a list every built net keeps (assumptions, shape origins)."""
    return [(n.buffers[0].net if n.buffers else n.role, item) for n in audit.nets for item in getattr(n.net, what)]


def recipe(audit, total_counted, misses):
    """The Recipe for `audit`'s train net (None when no net trains), with what it leaves out
    (`misses`: bytes by category, as summarize counts them)."""
    train = audit.train
    if train is None or train.forward_only:
        return None
    params = sum(p.count for node in train.net.layers for p in node.params if p.owner is None)
    activations = train.net.memory_required_for_data // 4
    total = 4 * (2 * activations + 3 * params)
    misses = dict(sorted(((k, v) for k, v in misses.items() if v), key=lambda kv: -kv[1]))
    return Recipe(activations, params, total, total_counted / total if total else 0.0, misses)
