"""The Keras audit: a model file read, laid out with its shapes, and one training step's memory.

What lives across steps (weights, the optimizer's slots) is counted exactly; what one step holds on
top of it is the peak of the step's timeline (protoaudit.keras.training), the same memory model as
Caffe's (protoaudit.memory.timeline). On the CPU that is what TensorFlow allocates; on a GPU the
figures add TensorFlow's BFC rounding and the CUDA context, estimates until a device confirms them;
against a card, TensorFlow's reserve is held out of it too (protoaudit.keras.reserve).
"""
from collections import OrderedDict
from dataclasses import dataclass, field
from math import prod

from ..errors import InputError
from ..options import DEFAULT_CONTEXT_BYTES
from .cpu_kernels import cpu_stops
from .files import read_model
from .graph import build_graph
from .layers.base import nbytes
from .training import optimizers
from .training.program import build_step

# What one step holds beyond its tensors, by flavour: the executor's and the function call's own
# allocations, read off the traces and runs of the smallest oracle models (TensorFlow 2.21 on CPU, the
# 13-feature regression MLP with SGD and Adam): about 200 KB in tf_keras, among them a 131,968-byte
# block allocated at each step's start, and about 10 KB in Keras 3.
STEP_OVERHEAD = {"tf_keras": 200_000, "keras3": 10_000}
# On a GPU (estimates): TensorFlow's BFC allocator rounds every allocation up to 256 bytes; the CUDA
# context and cuDNN/cuBLAS handles take a few hundred MiB before the first tensor.
BFC_ROUNDING = 256
MAX_BATCH = 1 << 20
# what of the step's peak grows with the batch: tensors with a batch dimension (weight gradients,
# optimizer temporaries and kernel scratch do not)
GROWING = ("activation", "gradient", "input")


@dataclass
class LayerRow:
    """One call of a layer, as Keras's summary() shows it, then its memory."""

    name: str
    class_name: str
    output_shapes: list
    params: int
    trainable_params: int
    output_bytes: int
    weight_bytes: int
    gradient_bytes: int  # its trainable weights' gradients
    slot_bytes: int


@dataclass
class KerasAudit:
    path: str
    flavour: str
    keras_version: str
    batch: int
    batch_from: str
    optimizer: tuple  # (class name, config)
    optimizer_from: str  # "file" | "--optimizer" | "default (SGD)"
    loss: object
    loss_from: str
    mode: str
    container: str = None  # where the Keras model was read from, when not a file of Keras's own
    keras1_layers: int = 0  # layers whose Keras 1 arguments were read as Keras 2.0-2.2 converted them
    context: int = 0
    graph: object = field(default=None, repr=False)  # (its nodes and tensors refer to each other)
    weights_bytes: int = 0
    trainable_bytes: int = 0
    params: int = 0
    trainable_params: int = 0
    slots_per_variable: int = 0
    slot_bytes: int = 0
    step_peak_bytes: int = 0
    # the range of the executor's orders the step's model lays out (program.build_step); the verdict takes its high end
    step_peak_low_bytes: int = 0
    step_peak_high_bytes: int = 0
    grows: int = 0  # of the step's peak, the bytes that grow with the batch (a second audit at batch+1)
    peak: object = None  # protoaudit.memory.timeline.Peak
    program: object = field(default=None, repr=False)  # the step's timeline (Program), in the guess's order
    unmodelled: list = field(default_factory=list)
    undercounted: list = field(default_factory=list)  # (layer, what its rule leaves out): the peak is low
    cpu_stops: list = field(default_factory=list)  # (layer, kernel's message): the CPU without oneDNN refuses it
    rows: list = field(default_factory=list)
    recipe_bytes: int = 0  # the hand recipe: (outputs x batch + params) x 4 bytes
    frozen: list = field(default_factory=list)
    fit: object = None
    sweep: object = None
    reserve: object = None  # protoaudit.keras.reserve.Reserve: on a GPU with a card, what TensorFlow keeps off it
    again: dict = field(default_factory=dict, repr=False)

    @property
    def total_bytes(self):
        return self.context + self.weights_bytes + self.slot_bytes + self.step_peak_bytes

    @property
    def high_total_bytes(self):
        """The total with the step's peak at the high end of the executor's orders: what the verdict takes."""
        return self.total_bytes + self.step_peak_high_bytes - self.step_peak_bytes

    @property
    def reserve_bytes(self):
        """TensorFlow's reserve on the card (0 without a card, or on the CPU): held out of the card by the
        verdict, the largest batch and --sweep, as the context is."""
        return self.reserve.bytes if self.reserve is not None else 0

    @property
    def activation_bytes(self):
        return sum(r.output_bytes for r in self.rows)

    def to_dict(self):
        from ..report.keras_format import to_dict

        return to_dict(self)


def layer_weights(graph, frozen=()):
    """{layer: [Weight]} in the model's order (a shared layer once), `frozen` layers' made non-trainable."""
    out = OrderedDict()
    for layer, w in graph.weights:
        if layer in frozen and w.trainable:
            w = w._replace(trainable=False)
        out.setdefault(layer, []).append(w)
    return out


def frozen_layers(graph, names):
    """The layers --freeze names, with every layer they depend on (their ancestors in the graph)."""
    if not names:
        return set()
    by_name = {}
    for node in graph.nodes:
        by_name.setdefault(node.layer.name, []).append(node)
        by_name.setdefault(node.path, []).append(node)
        for part in node.path.split("/")[1:-1]:  # a nested model: every layer inside it
            by_name.setdefault(part, []).append(node)
    frozen = set()
    for name in names:
        nodes = by_name.get(name)
        if not nodes:
            raise InputError(f"--freeze {name}: the model has no layer of that name",
                             fix="give a layer name as model.summary() shows it")
        todo = list(nodes)
        while todo:
            node = todo.pop()
            if node.layer in frozen and node not in nodes:
                continue
            frozen.add(node.layer)
            todo.extend(t.producer for t in node.inputs if t.producer is not None)
    return frozen


def audit_keras(path, *, batch=None, optimizer=None, loss=None, mode="cpu", inputs=None, freeze=(),
                context=None, _model=None):
    """Audit a Keras model file for one training step at `batch` (default: the file's, else 32)."""
    if mode not in ("cpu", "gpu"):
        raise InputError(f"--mode {mode}: choose cpu or gpu")
    model = _model or read_model(path)
    graph = build_graph(model, batch=batch, inputs=inputs)
    if optimizer is not None:
        opt, opt_from = optimizers.canonical(optimizer), "--optimizer"
    elif model.optimizer is not None:
        opt, opt_from = optimizers.canonical(model.optimizer), "the file's compile config"
    else:
        opt, opt_from = optimizers.canonical("sgd"), "default (SGD; give --optimizer)"
    if loss is not None:
        the_loss, loss_from = loss, "--loss"
    elif model.loss is not None:
        the_loss, loss_from = model.loss, "the file's compile config"
    else:
        the_loss, loss_from = None, "default (mean squared error; give --loss)"
    frozen = frozen_layers(graph, freeze)
    weights = layer_weights(graph, frozen)
    result = KerasAudit(path, model.flavour, model.keras_version, graph.batch, graph.batch_from, opt, opt_from,
                        the_loss, loss_from, mode, container=model.container, graph=graph,
                        keras1_layers=model.keras1_layers,
                        frozen=sorted(layer.name for layer in frozen))
    result.again = dict(path=path, optimizer=optimizer, loss=loss, mode=mode, inputs=inputs, freeze=freeze,
                        context=context, _model=model)
    for ws in weights.values():
        for w in ws:
            n = prod(w.shape)
            result.params += n
            result.weights_bytes += nbytes(w)
            if w.trainable:
                result.trainable_params += n
                result.trainable_bytes += nbytes(w)
    result.slots_per_variable = optimizers.slots_per_variable(model.flavour, opt)
    result.slot_bytes = result.slots_per_variable * result.trainable_bytes
    step = build_step(graph, flavour=model.flavour, optimizer=opt, loss=the_loss, weights=weights,
                      device=mode, metrics=model.metrics)
    rounding = BFC_ROUNDING if mode == "gpu" else 1
    peak = step.program.peak(rounding=rounding)
    others = [p.peak(rounding=rounding).bytes for p in ([step.other] if step.other is not None else []) + step.orders]
    result.peak = peak
    result.program = step.program
    result.unmodelled = sorted(set(step.unmodelled))
    result.undercounted = step.undercounted
    if mode == "cpu":
        result.cpu_stops = cpu_stops(graph, model.flavour)
    result.step_peak_bytes = peak.bytes + STEP_OVERHEAD[model.flavour]
    result.step_peak_low_bytes = result.step_peak_bytes - (peak.bytes - min([peak.bytes] + others))
    result.step_peak_high_bytes = result.step_peak_bytes + (max([peak.bytes] + others) - peak.bytes)
    result.grows = sum(peak.live.get(kind, 0) for kind in GROWING)
    if mode == "gpu":
        result.context = DEFAULT_CONTEXT_BYTES if context is None else int(context)
    result.rows = _rows(graph, weights, result.slots_per_variable)
    result.recipe_bytes = (result.activation_bytes + result.params * 4)
    return result


def _rows(graph, weights, slots):
    rows = []
    seen = set()
    for node in graph.nodes:
        if node.layer.class_name == "InputLayer":
            continue
        ws = weights.get(node.layer, []) if node.layer not in seen else []
        seen.add(node.layer)
        params = sum(prod(w.shape) for w in ws)
        trainable = sum(prod(w.shape) for w in ws if w.trainable)
        wbytes = sum(nbytes(w) for w in ws)
        gbytes = sum(nbytes(w) for w in ws if w.trainable)
        name = node.path.split("/", 1)[1] if "/" in node.path else node.path or node.layer.name
        rows.append(LayerRow(name, node.layer.class_name,
                             [t.spec.shape for t in node.outputs], params, trainable,
                             sum(nbytes(t.spec) for t in node.outputs), wbytes, gbytes, gbytes * slots))
    return rows


def reaudit(result, batch):
    """The same model and options at another batch."""
    return audit_keras(batch=batch, **result.again)


def check_fit(result, budget):
    """The verdict on a card of `budget` bytes and the largest batch that fits, each batch audited
    (a step's peak is not always linear in the batch: a kernel's scratch is capped, LocallyConnected's
    gradients grow with the batch). On a GPU the card holds TensorFlow's reserve beside the total
    (result.reserve): the Fit's total is the two, as Caffe's is its total and cudaMalloc's pages."""
    from ..memory.fit import Fit

    held = result.reserve_bytes
    total = result.high_total_bytes + held
    fit = Fit(budget, total, total <= budget, result.batch, None, result.batch, None, None)
    totals = {result.batch: total}

    def fits(batch):
        if batch not in totals:
            totals[batch] = reaudit(result, batch).high_total_bytes + held
        return totals[batch] <= budget

    if not fits(1):
        fit.largest_batch = 0
        return fit
    lo, hi = 1, max(2, result.batch)
    while fits(hi):  # doubling until a batch does not fit
        lo, hi = hi, hi * 2
        if hi > MAX_BATCH:
            fit.largest_batch = MAX_BATCH
            return fit
    if fits(result.batch):
        lo = max(lo, result.batch)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    fit.largest_batch = lo
    if not fit.fits and lo:
        steps = -(-result.batch // lo)
        fit.suggested_iter_size = steps
        fit.suggested_batch = -(-result.batch // steps)
    return fit


def sweep(result, batches, budget=None):
    """(batch, total, fits) at each batch, the total at the high end of the executor's orders (as the
    verdict's); whether it fits holds TensorFlow's reserve out of the card, as the verdict does."""
    out = []
    for b in batches:
        total = (result if b == result.batch else reaudit(result, b)).high_total_bytes
        out.append((b, total, None if budget is None else total + result.reserve_bytes <= budget))
    return out
