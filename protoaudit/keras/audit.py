"""The Keras audit: a model file read, laid out with its shapes, and one training step's memory.

What lives across steps (weights, the optimizer's slots) is counted exactly; what one step holds on
top of it is the peak of the step's timeline (protoaudit.keras.training).
"""
from collections import OrderedDict
from dataclasses import dataclass, field

from ..errors import InputError
from .files import read_model
from .graph import build_graph
from .layers.base import nbytes
from .training import optimizers
from .training.program import build_step

# what one step holds beyond its peak's tensors, measured on the smallest oracle models (TensorFlow
# 2.21 on CPU): the executor's and the function call's own allocations
STEP_OVERHEAD = {"tf_keras": 330_000, "keras3": 330_000}


@dataclass
class KerasAudit:
    path: str
    flavour: str
    keras_version: str
    batch: int
    batch_from: str
    optimizer: tuple  # (class name, config) or None
    optimizer_from: str  # "file" | "--optimizer" | "default"
    loss: object
    mode: str
    graph: object = None
    weights_bytes: int = 0
    trainable_bytes: int = 0
    params: int = 0
    trainable_params: int = 0
    slots_per_variable: int = 0
    slot_bytes: int = 0
    step_peak_bytes: int = 0
    step_peak_low_bytes: int = 0
    peak: object = None  # protoaudit.memory.timeline.Peak
    unmodelled: list = field(default_factory=list)
    layers: list = field(default_factory=list)  # LayerRow-like dicts

    @property
    def total_bytes(self):
        return self.weights_bytes + self.slot_bytes + self.step_peak_bytes


def layer_weights(graph):
    """{layer: [Weight]} in the model's order (a shared layer once)."""
    out = OrderedDict()
    for layer, w in graph.weights:
        out.setdefault(layer, []).append(w)
    return out


def audit_keras(path, *, batch=None, optimizer=None, loss=None, mode="cpu", inputs=None):
    model = read_model(path)
    graph = build_graph(model, batch=batch, inputs=inputs)
    if optimizer is not None:
        opt, opt_from = optimizers.canonical(optimizer), "--optimizer"
    elif model.optimizer is not None:
        opt, opt_from = optimizers.canonical(model.optimizer), "file"
    else:
        opt, opt_from = optimizers.canonical("sgd"), "default"
    the_loss = loss if loss is not None else model.loss
    weights = layer_weights(graph)
    result = KerasAudit(path, model.flavour, model.keras_version, graph.batch, graph.batch_from, opt, opt_from,
                        the_loss, mode, graph)
    for layer, ws in weights.items():
        for w in ws:
            n = 1
            for d in w.shape:
                n *= d
            result.params += n
            result.weights_bytes += nbytes(w)
            if w.trainable:
                result.trainable_params += n
                result.trainable_bytes += nbytes(w)
    result.slots_per_variable = optimizers.slots_per_variable(model.flavour, opt)
    result.slot_bytes = result.slots_per_variable * result.trainable_bytes
    step = build_step(graph, flavour=model.flavour, optimizer=opt, loss=the_loss, weights=weights)
    peak = step.program.peak()
    result.peak = peak
    result.unmodelled = sorted(set(step.unmodelled))
    result.step_peak_bytes = peak.bytes + STEP_OVERHEAD.get(model.flavour, 0)
    result.step_peak_low_bytes = result.step_peak_bytes
    return result


def to_dict(a):
    return {
        "path": a.path, "framework": "keras", "flavour": a.flavour, "keras_version": a.keras_version,
        "batch": a.batch, "batch_from": a.batch_from, "mode": a.mode,
        "optimizer": a.optimizer[0] if a.optimizer else None, "optimizer_from": a.optimizer_from,
        "params": a.params, "trainable_params": a.trainable_params,
        "weights_bytes": a.weights_bytes, "trainable_bytes": a.trainable_bytes,
        "slots_per_variable": a.slots_per_variable, "slot_bytes": a.slot_bytes,
        "step_peak_bytes": a.step_peak_bytes, "step_peak_low_bytes": a.step_peak_low_bytes,
        "step_peak_at": a.peak.step if a.peak else None,
        "step_peak_live": a.peak.live if a.peak else {},
        "total_bytes": a.total_bytes, "unmodelled": a.unmodelled,
    }
