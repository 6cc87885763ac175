"""What a Caffe solver adds to the train net's memory: its per-parameter state and the param diffs.

Read from BVLC Caffe's solver sources. SGDSolver::PreSolve makes three blobs per learnable param
(history_, update_, temp_) and AdaDelta and Adam add a second history_ half (history_[N + i]);
like every blob they get memory only when touched, and the first Solver::Step touches all the
solver will ever hold (the next steps allocate nothing). Which blobs a step touches depends on the
code path: the CPU code builds each update with update_ or temp_ as scratch, while BVLC's GPU code
runs one fused kernel per param that reads and writes the param's diff and history_ only. L1
regularisation writes sign(data) into temp_ on both paths, but only for params whose decay
(weight_decay x decay_mult) is not zero. Step also starts with Net::ClearParamDiffs, which gives
every learnable param a diff, lr_mult 0 included (a plain forward and backward does not).

Forks differ: ducha-aiki's fork and caffe-segnet run the CPU sequence with GPU calls (no fused
kernels), so their GPU path touches what the CPU path does; caffe-segnet's solver also walks every
param blob of the net (a blob shared by name included: it has its own diff there) and knows only
SGD, Nesterov and AdaGrad; Tongcheng's DenseBlock fork rewrote Nesterov's CPU step without update_.
"""
from typing import NamedTuple

from ..errors import InputError
from ..layers.base import count
from .buffers import Buffer

SOLVER_TYPES = ("SGD", "Nesterov", "AdaGrad", "RMSProp", "AdaDelta", "Adam")
REGULARIZATIONS = ("L1", "L2")

# The deprecated `solver_type` enum, as upgrade_proto.cpp's UpgradeSolverType names it.
_ENUM_NAMES = {"SGD": "SGD", "NESTEROV": "Nesterov", "ADAGRAD": "AdaGrad", "RMSPROP": "RMSProp",
               "ADADELTA": "AdaDelta", "ADAM": "Adam"}

# Per param, the solver blobs each type's ComputeUpdateValue touches: (CPU path, fused GPU kernel).
# "history_+N" is the second history half AdaDelta and Adam keep at history_[N + i].
_UPDATE_TOUCHES = {
    "SGD": (("history_",), ("history_",)),  # axpby into history_, copied to the diff / SGDUpdate
    "Nesterov": (("history_", "update_"), ("history_",)),  # update_ keeps the old history_
    "AdaGrad": (("history_", "update_"), ("history_",)),  # update_: squared gradient, then the step
    "RMSProp": (("history_", "update_"), ("history_",)),
    "AdaDelta": (("history_", "history_+N", "update_", "temp_"), ("history_", "history_+N")),
    "Adam": (("history_", "history_+N", "temp_"), ("history_", "history_+N")),  # m, v; val_t = temp_
}


class _Fork(NamedTuple):
    fused_gpu: bool  # BVLC's .cu kernels: the GPU path touches the diff and history_ only
    every_param: bool  # the solver walks every param blob, not only the owned (learnable) ones
    types: tuple = SOLVER_TYPES
    cpu_paths: tuple = ()  # (type, blobs): where the fork's CPU code touches other blobs than BVLC's


_FORKS = {
    "bvlc": _Fork(fused_gpu=True, every_param=False),
    "ducha": _Fork(fused_gpu=False, every_param=False),
    "segnet": _Fork(fused_gpu=False, every_param=True, types=("SGD", "Nesterov", "AdaGrad")),
    # Tongcheng/caffe's nesterov_solver.cpp (1625bb3, lines 22-45) folds the step into the param's
    # diff and no longer keeps the old history in update_
    "tongcheng": _Fork(fused_gpu=True, every_param=False, cpu_paths=(("Nesterov", ("history_",)),)),
}


def solver_type_of(solver_param=None, given=None):
    """The solver Caffe would create: `given` (a command-line choice) if any, else the
    SolverParameter's `type` string or its deprecated `solver_type` enum (default SGD)."""
    if given is not None:
        return _known_type(given)
    if solver_param is None:
        return "SGD"
    fields = solver_param.DESCRIPTOR.fields_by_name
    has_string = "type" in fields and solver_param.HasField("type")
    if solver_param.HasField("solver_type"):
        if has_string:
            raise InputError("the solver sets both `type` and the deprecated `solver_type`; Caffe refuses that",
                             fix="keep `type` only")
        name = fields["solver_type"].enum_type.values_by_number[solver_param.solver_type].name
        return _ENUM_NAMES[name]
    return _known_type(solver_param.type) if "type" in fields else "SGD"


def in_other_case(name):
    """The solver type `name` writes in other case ("sgd": SGD), or None."""
    return next((t for t in SOLVER_TYPES if t.lower() == str(name).lower() and t != name), None)


def _known_type(name):
    if name in SOLVER_TYPES:
        return name
    near = in_other_case(name)
    hint = f"did you mean '{near}'? " if near else ""
    raise InputError(f"unknown solver type '{name}'",
                     fix=f"{hint}Caffe's solver types are {', '.join(SOLVER_TYPES)} (case matters)")


def solver_options(solver_param):
    """The keyword arguments of `solver_buffers` a SolverParameter sets, after the checks Caffe's
    Solver::Init and the solvers' constructors make on them."""
    kind = solver_type_of(solver_param)
    if solver_param.average_loss < 1:
        raise InputError(f"average_loss is {solver_param.average_loss}; Caffe needs at least 1",
                         fix="set average_loss: 1 (the default) or more")
    if kind in ("AdaGrad", "RMSProp") and solver_param.momentum != 0:
        raise InputError(f"Caffe's {kind} solver refuses momentum (it is {solver_param.momentum:g})",
                         fix="remove momentum from the solver")
    if kind == "RMSProp" and not 0 <= solver_param.rms_decay < 1:
        raise InputError(f"rms_decay is {solver_param.rms_decay:g}; Caffe's RMSProp needs 0 <= rms_decay < 1")
    return {"regularization": solver_param.regularization_type, "weight_decay": solver_param.weight_decay,
            "average_loss": solver_param.average_loss}


def solver_buffers(net, solver_type, *, mode="gpu", regularization="L2", weight_decay=None, average_loss=1,
                   label="train"):
    """What Solver::Step allocates for the train net `net` beyond its forward and backward.

    Every param diff ClearParamDiffs zeroes (kind "param diff", named as protoaudit.memory.buffers names
    them, so `added_to` can drop those a backward pass holds already), the solver's blobs (kind
    "history"), and the host vector `losses_` of the last `average_loss` losses (negligible).
    `weight_decay` matters only with L1; None means the solver sets a nonzero one.
    """
    kind = _known_type(solver_type)
    if mode not in ("gpu", "cpu"):
        raise InputError(f"mode {mode}: choose gpu or cpu")
    fork = _FORKS.get(_schema(net), _FORKS["bvlc"])
    if kind not in fork.types:
        raise InputError(f"the {_schema(net)} fork's Caffe has no {kind} solver",
                         fix=f"its solver types are {', '.join(fork.types)}")
    params = _solver_params(net, fork.every_param)
    decays = [decay * (1.0 if weight_decay is None else weight_decay) for _, _, decay in params]
    if regularization not in REGULARIZATIONS and any(decays):
        raise InputError(f"unknown regularization_type '{regularization}'; Caffe stops at the first step",
                         fix="use \"L2\" (the default) or \"L1\"")
    cpu_path, gpu_path = _UPDATE_TOUCHES[kind]
    cpu_path = dict(fork.cpu_paths).get(kind, cpu_path)
    touched = cpu_path if mode == "cpu" or not fork.fused_gpu else gpu_path
    out = [_buffer(label, node, f"{node.name}.param{k}", "param diff", node.params[k].shape)
           for node, k, _ in params]
    for i, ((node, k, _), decay) in enumerate(zip(params, decays)):
        blobs = touched + (("temp_",) if regularization == "L1" and decay and "temp_" not in touched else ())
        for name in blobs:
            owner = f"{node.name}.param{k}.{_slot(name, i, len(params))}"
            out.append(_buffer(label, node, owner, "history", node.params[k].shape))
    out.append(Buffer(label, "(solver)", "losses_", "history", _vector_capacity(average_loss), 4, "solver",
                      False, "host"))
    return out


def added_to(existing, buffers):
    """The `buffers` that `existing` does not hold already (same net, owner and kind): a train
    net's backward pass has given most params the diff ClearParamDiffs zeroes."""
    kinds = {b.kind for b in buffers}
    held = {(b.net, b.owner, b.kind) for b in existing if b.kind in kinds}
    return [b for b in buffers if (b.net, b.owner, b.kind) not in held]


def _slot(name, i, n):
    """Where Caffe keeps param i's blob: history_[i], update_[i], temp_[i], or history_[n + i]."""
    return f"history_[{n + i}]" if name == "history_+N" else f"{name}[{i}]"


def _buffer(label, node, owner, kind, shape):
    return Buffer(label, node.name, owner, kind, count(shape), 4, "solver", False)


def _schema(net):
    return net.layers[0].impl.ctx.schema if net.layers else "bvlc"


def _solver_params(net, every_param):
    """(layer, param index, decay_mult) of each blob the solver updates, in Caffe's order.

    BVLC: the learnable (owned) params; a shared param's decay_mult is the first one set among
    the owner and its sharers, as Net::AppendParam settles it. caffe-segnet: every param blob,
    each with its layer's own decay_mult.
    """
    out = []
    index = {}
    for node in net.layers:
        if not node.params:
            continue
        specs = node.impl.param_specs()
        for k, p in enumerate(node.params):
            spec = specs[k] if k < len(specs) else None
            has_decay = spec is not None and spec.HasField("decay_mult")
            decay = spec.decay_mult if spec is not None else 1.0
            if every_param or p.owner is None:
                index[(node.index, k)] = len(out)
                out.append([node, k, decay, has_decay])
            else:
                owned = out[index[p.owner]]
                if has_decay and not owned[3]:
                    owned[2], owned[3] = decay, True
    return [(node, k, decay) for node, k, decay, _ in out]


def _vector_capacity(n):
    """std::vector's capacity after n push_backs from empty (libstdc++ doubles it: 1, 2, 4, ...)."""
    capacity = 1
    while capacity < n:
        capacity *= 2
    return capacity
