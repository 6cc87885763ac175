"""The figures the reports show, computed once from an audit: per-layer rows and totals.

Reports only format these; every sum is made here.
"""
from dataclasses import dataclass, field

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
COLUMN_OF = {kind: column for column, kinds in COLUMNS.items() for kind in kinds}


@dataclass(**RECORD)
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


def counted_devices(audit):
    """Where the bytes that count against the budget are: everything on the CPU, the device's on the GPU."""
    return ("device", "host") if audit.mode == "cpu" else ("device",)


def counted(audit, buffer):
    return buffer.device in counted_devices(audit)


def summarize(audit):
    """One pass over the audit's buffers, net by net then the extras, in order (the totals by first
    touch and by net keep the order their keys first appear in): the per-layer rows and every total."""
    rows, running = [], 0
    devices = counted_devices(audit)
    by_kind = dict.fromkeys(KINDS, 0)
    by_touch, by_net = {}, {}
    total = per_sample = host = 0
    misses = dict.fromkeys(("test nets", "column buffers", "other layer buffers", "cuDNN workspace", "data prefetch",
                            "CUDA context", "C++ objects"), 0)

    def tally(buffers, by_layer=None):  # a 10,000-layer net has some 200,000 buffers
        nonlocal total, per_sample, host
        for b in buffers:
            n = b.elements * b.itemsize
            if b.device not in devices:
                host += n
                continue
            if by_layer is not None:
                entry = by_layer.get(b.layer)
                if entry is None:
                    entry = by_layer[b.layer] = [dict.fromkeys(COLUMNS, 0), 0, []]
                entry[1] += n
                entry[2].append(b)
                column = COLUMN_OF.get(b.kind)
                if column is not None:
                    entry[0][column] += n
            total += n
            if b.per_sample:
                per_sample += n
            kind = b.kind
            if kind in by_kind:
                by_kind[kind] += n
            test = b.net.startswith("test")
            key = "test" if test and kind != "context" else b.touch
            by_touch[key] = by_touch.get(key, 0) + n
            by_net[b.net] = by_net.get(b.net, 0) + n
            miss = ("test nets" if test else "column buffers" if b.owner.endswith(".col_buffer_")
                    else MISSED.get(kind))
            if miss is not None:
                misses[miss] += n

    for net_audit in audit.nets:
        label = net_audit.buffers[0].net if net_audit.buffers else net_audit.role
        by_layer = {}
        tally(net_audit.buffers, by_layer)
        empty = None
        for node in net_audit.net.layers:
            entry = by_layer.get(node.name)
            if entry is None:
                entry = empty = empty or (dict.fromkeys(COLUMNS, 0), 0, [])
            running += entry[1]
            rows.append(LayerRow(label, node.name, node.type, list(node.top_shapes), entry[0], entry[1], running,
                                 entry[2]))
        names = {n.name for n in net_audit.net.layers}
        rest = [b for name, entry in by_layer.items() if name not in names for b in entry[2]]
        if rest:
            rest_total = sum(b.bytes for b in rest)
            running += rest_total
            rows.append(LayerRow(label, rest[0].layer, "", [], dict.fromkeys(COLUMNS, 0), rest_total, running, rest))
    tally(audit.extra)
    extra = [b for b in audit.extra if counted(audit, b)]
    for kind in ("history", "param diff", "context"):
        mine = [b for b in extra if b.kind == kind]
        if mine:
            kind_total = sum(b.bytes for b in mine)
            running += kind_total
            name = {"history": f"{audit.solver_type} solver state", "param diff": "ClearParamDiffs",
                    "context": "CUDA context"}[kind]
            rows.append(LayerRow(mine[0].net, name, "", [], dict.fromkeys(COLUMNS, 0), kind_total, running, mine))
    return Summary(
        rows=rows,
        by_kind={k: v for k, v in by_kind.items() if v},
        by_touch=by_touch,
        by_net=by_net,
        total=total,
        host=host,
        caffe_figure={n.buffers[0].net if n.buffers else n.role: n.net.memory_required_for_data for n in audit.nets},
        per_sample=per_sample,
        invariant=total - per_sample,
        gaps=[(n.role, node.name, node.type, node.impl.gap) for n in audit.nets for node in n.net.layers
              if getattr(node.impl, "gap", None)],
        recipe=recipe(audit, total, misses),
        frozen=frozen_cost(audit, counted),
        assumptions=_per_net(audit, "assumptions"),
        data_shapes=_per_net(audit, "origins"),
    )


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
