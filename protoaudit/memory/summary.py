"""The figures the reports show, computed once from an audit: per-layer rows and totals.

Reports only format these; every sum is made here.
"""
from dataclasses import dataclass, field

from ..net.freeze import frozen_cost
from .buffers import KINDS

# the per-layer table's columns, by buffer kind
COLUMNS = {
    "params": ("param data",),
    "data": ("top data",),
    "diffs": ("top diff", "param diff"),
    "buffers": ("layer buffer", "prefetch", "host objects", "library state"),
    "workspace": ("workspace",),
}
COLUMN_OF = {kind: column for column, kinds in COLUMNS.items() for kind in kinds}


@dataclass
class LayerRow:
    net: str  # the net's label: train, test, net, ...
    name: str
    type: str
    tops: list  # shapes
    columns: dict  # column -> bytes
    total: int
    cumulative: int
    buffers: list = field(default_factory=list)  # the Buffers it first touches


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


def counted(audit, buffer):
    return audit.mode == "cpu" or buffer.device == "device"


def summarize(audit):
    rows, running = [], 0
    cpu = audit.mode == "cpu"  # counted(audit, b), written out in the loops over every buffer
    for net_audit in audit.nets:
        label = net_audit.buffers[0].net if net_audit.buffers else net_audit.role
        by_layer = {}
        for b in net_audit.buffers:
            if cpu or b.device == "device":
                by_layer.setdefault(b.layer, []).append(b)
        for node in net_audit.net.layers:
            mine = by_layer.get(node.name, [])
            columns, total = _columns(mine)
            running += total
            rows.append(LayerRow(label, node.name, node.type, list(node.top_shapes), columns, total, running, mine))
        names = {n.name for n in net_audit.net.layers}
        rest = [b for name, bs in by_layer.items() if name not in names for b in bs]
        if rest:
            total = sum(b.bytes for b in rest)
            running += total
            rows.append(LayerRow(label, rest[0].layer, "", [], {c: 0 for c in COLUMNS}, total, running, rest))
    extra = [b for b in audit.extra if counted(audit, b)]
    for kind in ("history", "param diff", "context"):
        mine = [b for b in extra if b.kind == kind]
        if mine:
            total = sum(b.bytes for b in mine)
            running += total
            name = {"history": f"{audit.solver_type} solver state", "param diff": "ClearParamDiffs",
                    "context": "CUDA context"}[kind]
            rows.append(LayerRow(mine[0].net, name, "", [], {c: 0 for c in COLUMNS}, total, running, mine))
    buffers = audit.buffers
    all_counted = [b for b in buffers if cpu or b.device == "device"]
    by_kind = dict.fromkeys(KINDS, 0)
    by_touch, by_net = {}, {}
    total = per_sample = 0
    for b in all_counted:  # one pass: a 10,000-layer net has some 200,000 buffers
        n = b.bytes
        total += n
        if b.per_sample:
            per_sample += n
        if b.kind in by_kind:
            by_kind[b.kind] += n
        key = "test" if b.net.startswith("test") and b.kind != "context" else b.touch
        by_touch[key] = by_touch.get(key, 0) + n
        by_net[b.net] = by_net.get(b.net, 0) + n
    return Summary(
        rows=rows,
        by_kind={k: v for k, v in by_kind.items() if v},
        by_touch=by_touch,
        by_net=by_net,
        total=total,
        host=sum(b.bytes for b in buffers if not (cpu or b.device == "device")),
        caffe_figure={n.buffers[0].net if n.buffers else n.role: n.net.memory_required_for_data for n in audit.nets},
        per_sample=per_sample,
        invariant=total - per_sample,
        gaps=[(n.role, node.name, node.type, node.impl.gap) for n in audit.nets for node in n.net.layers
              if getattr(node.impl, "gap", None)],
        recipe=recipe(audit, all_counted),
        frozen=frozen_cost(audit, counted),
        assumptions=_per_net(audit, "assumptions"),
        data_shapes=_per_net(audit, "origins"),
    )


def _per_net(audit, what):
    """(net label, item) for a list every built net keeps (assumptions, shape origins)."""
    return [(n.buffers[0].net if n.buffers else n.role, item) for n in audit.nets for item in getattr(n.net, what)]


def _columns(buffers):
    """A layer's bytes by column of the per-layer table, and in all."""
    columns = dict.fromkeys(COLUMNS, 0)
    total = 0
    for b in buffers:
        n = b.bytes
        total += n
        column = COLUMN_OF.get(b.kind)
        if column is not None:
            columns[column] += n
    return columns, total


def recipe(audit, all_counted):
    """The Recipe for `audit`'s train net (None when no net trains), with what it leaves out: the
    test nets, then by kind (column buffers apart from other layer buffers) for the rest."""
    train = audit.train
    if train is None or train.forward_only:
        return None
    params = sum(p.count for node in train.net.layers for p in node.params if p.owner is None)
    activations = train.net.memory_required_for_data // 4
    total = 4 * (2 * activations + 3 * params)
    misses = {"test nets": 0, "column buffers": 0, "other layer buffers": 0, "cuDNN workspace": 0,
              "data prefetch": 0, "CUDA context": 0, "C++ objects": 0}
    named = {"workspace": "cuDNN workspace", "prefetch": "data prefetch", "context": "CUDA context",
             "host objects": "C++ objects"}
    for b in all_counted:
        if b.net.startswith("test"):
            misses["test nets"] += b.bytes
        elif b.owner.endswith(".col_buffer_"):
            misses["column buffers"] += b.bytes
        elif b.kind == "layer buffer":
            misses["other layer buffers"] += b.bytes
        elif b.kind in named:
            misses[named[b.kind]] += b.bytes
    misses = dict(sorted(((k, v) for k, v in misses.items() if v), key=lambda kv: -kv[1]))
    total_counted = sum(b.bytes for b in all_counted)
    return Recipe(activations, params, total, total_counted / total if total else 0.0, misses)
