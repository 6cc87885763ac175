"""Optimizers: the slots they keep across steps and the temporaries of their updates in a step.

Slots, per trainable variable (tf_keras 2.x's optimizers and Keras 3's, TensorFlow backend): tf_keras's
SGD makes a momentum slot for every variable even at momentum 0 (its `build` does not look at the
momentum); Keras 3's SGD makes one only when momentum is set. Measured: ../shared/oracle/keras.

Updates are written as the ops of each optimizer's `update_step`: an element-wise op makes a new
buffer unless it reads its input for the last time (then TensorFlow writes into it).

When: every update runs as soon as its gradient is made. An update's ops that do not read the
gradient run at the very start of the step, as soon as TensorFlow's executor can (tf_keras's SGD
`m * momentum`, made even at momentum 0, and RMSprop's `rho * velocity`; Keras 3's SGD with momentum):
their results, one per trainable variable, are alive through the whole forward and backward pass.
Measured on the oracle: tf_keras SGD and RMSprop hold about the trainable weights more than Adam at
the same batch (ResNet50 b4: 463 MB against 363 MB), Keras 3 plain SGD about that less than tf_keras SGD.
"""
import math
import re
from collections import OrderedDict

from ...errors import InputError

# slots per trainable variable: flavour -> class -> (slots, extra slots by config flag)
_NAMES = {
    "sgd": "SGD", "adam": "Adam", "rmsprop": "RMSprop", "adagrad": "Adagrad", "adadelta": "Adadelta",
    "adamax": "Adamax", "nadam": "Nadam", "adamw": "AdamW", "ftrl": "Ftrl", "lion": "Lion",
    "adafactor": "Adafactor", "lamb": "Lamb",
}
_TWO = {"Adam", "Adadelta", "Adamax", "Nadam", "AdamW", "Ftrl", "Lamb"}
_ONE = {"Adagrad", "Lion"}


def canonical(optimizer):
    """(class name, config) of an optimizer given as a name, a {"class_name", "config"} dict, or None."""
    if optimizer is None:
        return None
    if isinstance(optimizer, str):
        m = _GIVEN.fullmatch(optimizer)
        name = _NAMES.get(m.group(1).lower()) if m else None
        if name is None:
            raise InputError(f"--optimizer {optimizer}: not a Keras optimizer",
                             fix="one of " + ", ".join(sorted(_NAMES)) + ", with settings as Keras takes them: "
                                 "sgd(momentum=0.9), rmsprop(centered=true)")
        return name, _settings(optimizer, m.group(2) or "")
    if isinstance(optimizer, dict):
        name = optimizer.get("class_name")
        config = optimizer.get("config") or {}
        if isinstance(name, str):
            name = _NAMES.get(name.lower(), name)
            return name, config if isinstance(config, dict) else {}
    raise InputError("the file's optimizer is neither a name nor a {class_name, config} entry")


# --optimizer NAME or NAME(key=value, ...): the settings that decide its slots (momentum, centered, amsgrad)
_GIVEN = re.compile(r"\s*(\w+)\s*(?:\((.*)\))?\s*", re.DOTALL)


def _settings(given, text):
    """{key: number or bool} of `key=value, ...`, values read as numbers or true/false, never evaluated."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = (x.strip() for x in part.partition("="))
        low = value.lower()
        if not eq or not key.isidentifier():
            value = None
        elif low in ("true", "false"):
            value = low == "true"
        else:
            try:
                value = float(value)
            except ValueError:
                value = None
        if value is None:
            raise InputError(f"--optimizer {given}: '{part}' is not a setting of the form key=number or "
                             "key=true/false", fix="write it as Keras takes it: sgd(momentum=0.9)")
        out[key] = value
    return out


def slots_per_variable(flavour, optimizer):
    """How many variable-sized slots the optimizer keeps per trainable variable."""
    name, config = optimizer
    momentum = float(config.get("momentum") or 0)
    if name == "SGD":
        return 1 if flavour == "tf_keras" or momentum else 0
    if name == "RMSprop":
        return 1 + bool(momentum) + bool(config.get("centered"))
    if name in ("Adam", "AdamW"):
        return 2 + bool(config.get("amsgrad"))
    if name in _TWO:
        return 2
    if name in _ONE:
        return 1
    if name == "Adafactor":
        return 0  # factored: a row and a column vector per matrix (counted as none here)
    return 2


def reads_no_gradient(flavour, optimizer):
    """The op of each update that reads no gradient (its label), or None where there is none."""
    if optimizer is None:
        return None
    name, config = optimizer
    if name == "SGD" and (flavour == "tf_keras" or float(config.get("momentum") or 0)):
        return "m*momentum"
    if name == "RMSprop":
        return "rho*v"
    return None


def early(s, weights, optimizer):
    """The updates' ops that read no gradient, run at the step's start: {(id(layer), weight name): buffer}."""
    what = reads_no_gradient(s.flavour, optimizer)
    if what is None:
        return {}
    from ..layers.base import nbytes

    out = {}
    for layer, ws in weights.items():
        if layer.class_name == "Embedding" and s.flavour == "tf_keras":
            # a sparse (IndexedSlices) gradient: tf_keras assigns m * momentum (SGD) or rho * v
            # (RMSprop) to the slot before its scatter_add, and the variable adopts the buffer:
            # nothing is left alive. Keras 3 adds it to the gradient's term first, so it stays
            # alive until the update, as every other variable's (traced: its transformer block with
            # RMSprop, `rm_sprop/Mul` of the 5000 x 128 embedding alive at the peak)
            continue
        for w in ws:
            if w.trainable:
                out[(id(layer), w.name)] = s.one(f"{layer.name}/{w.name} {what}", [], nbytes(w),
                                                 kind="optimizer temporary")
    return out


def after_gradient(s, layer, weight, grad, optimizer, read_later=False, chain=False):
    """An update run as soon as the gradient is made. `read_later`: the layer's input gradient still
    reads the variable's old value (MatMul's and Conv2D's input gradients read the weights). Keras 3
    updates the variable before that gradient runs, so its AssignAdd/AssignSub, the update's last op,
    writes a copy of the variable once the update's temporaries are gone (traced: Keras 3's MNIST MLP with
    momentum, AssignAddVariableOp_2 made after the kernel gradient it consumed was freed), and the old
    buffer is freed once the input gradient is made (traced on ResNet50: 8,981,504
    bytes of such copies at the peak); tf_keras's order leaves that copy to chance (524,288 bytes in
    a traced MLP, none on VGG16's 411 MB fc1 kernel), and it is not counted. A layer called more
    than once adds its calls' gradients and updates once the last call's gradient is made (traced: the
    siamese MLP's tower, both flavours, AddN and the update right after the second call's kernel
    gradient); a call that runs no backward leaves its layer to `apply`. `chain`: a Dense layer's update run
    before its input gradient (Dense.updates_in_chain)."""
    if optimizer is None:
        return
    grads = [grad]
    calls = s.shared_layers.get(id(layer))
    if calls:
        grads = s.shared_grads.setdefault((id(layer), weight.name), [])
        grads.append(grad)
        if len(grads) < calls:
            return
    _update(s, layer, weight, grads, optimizer, chain)
    if read_later and s.flavour == "keras3" and weight.name in ("kernel", "depthwise_kernel", "recurrent_kernel"):
        from ..layers.base import nbytes

        copy = s.one(f"{layer.name}/{weight.name} copy of the variable", [], nbytes(weight),
                     kind="optimizer temporary")
        s.one(f"{layer.name}/{weight.name} old value released", [copy], 0)
    s.applied.update(grads)


def apply(s, weight_grads, optimizer):
    """The updates not yet run: every variable's, in variable order, after the backward pass."""
    if optimizer is None:
        return
    groups = OrderedDict()
    for layer, weight, grad in weight_grads:
        if grad in s.applied:
            continue
        groups.setdefault((id(layer), weight.name), (layer, weight, []))[2].append(grad)
    for layer, weight, grads in reversed(list(groups.values())):
        _update(s, layer, weight, grads, optimizer)


def _update(s, layer, weight, grads, optimizer, chain=False):
    from ..layers.base import nbytes

    size = nbytes(weight)
    label = f"{layer.name}/{weight.name}"
    if len(grads) > 1:  # a layer called more than once: its gradients added up first
        g = s.one(f"AddN {label} gradient", grads, size, forward=True, kind="gradient")
    else:
        g = grads[0]
    name = optimizer[0]
    config = optimizer[1]
    if g in s.sparse and s.flavour == "tf_keras":
        g = _deduplicated(s, label, weight, g)
    if g in s.sparse and name == "SGD" and s.flavour == "keras3" and float(config.get("momentum") or 0):
        # m.assign(m * momentum - lr * g): the subtraction makes the IndexedSlices dense (UnsortedSegmentSum,
        # the variable's size) while m * momentum, made at the step's start, is alive (traced: the fastText
        # model at batch 128, both 5,120,000 bytes beside the 6,553,600-byte output gradient at the peak)
        u = _no_gradient_op(s, layer, weight, "m*momentum", size)
        d = s.one(f"{label} -lr*g made dense", [g], size, kind="optimizer temporary")
        t = s.one(f"{label} m*momentum - lr*g", [u, d], size, forward=True, kind="optimizer temporary")
        s.one(f"{label} assign m", [t], 0)
        return
    if g in s.sparse and name == "SGD":  # IndexedSlices: -values * lr, scatter_add into m, m into the variable
        t = s.one(f"{label} -values*lr", [g], s.prog.bufs[g].bytes, forward=True, kind="optimizer temporary")
        s.one(f"{label} scatter_add", [t], 0)
        if s.flavour == "tf_keras":
            # variable.assign_add(m): the scatter left m copied on every read, and AssignAdd writes a
            # new buffer for the variable before the old one goes (traced, tf_keras GRU text model
            # with SGD at batch 16: ReadVariableOp_1 and AssignAddVariableOp, 2,560,000 bytes each)
            s.one(f"{label} assign_add m", [], 0, scratch=2 * size, kind="optimizer temporary")
        return
    if name == "SGD":
        momentum = float(config.get("momentum") or 0)
        if s.flavour == "tf_keras" or momentum:
            t = s.one(f"{label} -g*lr", [g], size, forward=True, kind="optimizer temporary")
            u = _no_gradient_op(s, layer, weight, "m*momentum", size)
            t = s.one(f"{label} -g*lr + m*momentum", [t, u], size, forward=True, kind="optimizer temporary")
            s.one(f"{label} assign m", [t], 0)
        else:
            # into the gradient's buffer (traced: VGG16's, every sgd/Mul), or, where a Dense layer's update runs
            # before its input gradient (chain), a new buffer beside it (traced: Keras 3's tanh MLP and a user's
            # 6,120-way Dense, each sgd/Mul allocating its output while its gradient was alive)
            t = s.one(f"{label} g*lr", [g], size, forward=not chain, kind="optimizer temporary")
            s.one(f"{label} assign_sub", [t], 0)
        return
    if name == "RMSprop" and g in s.sparse and s.flavour == "tf_keras":
        _sparse_rmsprop(s, label, g, size, float(config.get("momentum") or 0))
        return
    if name == "RMSprop":
        a = _no_gradient_op(s, layer, weight, "rho*v", size)
        b = s.one(f"{label} square(g)", [g], size, kind="optimizer temporary")
        c = s.one(f"{label} v update", [a, b], size, forward=True, kind="optimizer temporary")
        s.one(f"{label} assign v", [c], 0)
        d = s.one(f"{label} v+eps", [], size, kind="optimizer temporary")
        e = s.one(f"{label} lr*g", [g], size, forward=True, kind="optimizer temporary")
        f = s.one(f"{label} increment", [e, d], size, forward=True, kind="optimizer temporary")
        s.one(f"{label} assign_sub", [f], 0)
        return
    if g in s.sparse and s.flavour == "keras3":
        _sparse_two_moments(s, label, g, size)
        return
    # Adam and the two-moment family: (g - m) * c, square(g), then (m * alpha) / (sqrt(v) + eps)
    a = s.one(f"{label} g-m", [g], size, kind="optimizer temporary")
    s.one(f"{label} assign_add m", [a], 0)
    b = s.one(f"{label} square(g)", [g], size, forward=True, kind="optimizer temporary")
    s.one(f"{label} assign_add v", [b], 0)
    c = s.one(f"{label} m*alpha", [], size, kind="optimizer temporary")
    d = s.one(f"{label} sqrt(v)", [], size, kind="optimizer temporary")
    e = s.one(f"{label} step", [c, d], size, forward=True, kind="optimizer temporary")
    s.one(f"{label} assign_sub", [e], 0)


def _deduplicated(s, label, weight, g):
    """tf_keras's optimizers sum an IndexedSlices gradient's repeated ids first (optimizer.py,
    _deduplicate_sparse_grad): Unique of the N ids, which makes their positions (N int32) and the
    unique ids, through a hash map reserved for 2N entries (unique_op.cc: absl::flat_hash_map<int32,
    int32>, uniq.reserve(2 * N)); then UnsortedSegmentSum of the values into one row per unique id.
    How many ids are unique is the batch's own: counted as N ids drawn evenly from the variable's rows
    give on average, rows * (1 - (1 - 1/rows)^N), the most any spread of ids gives on average (and
    the oracle's, whose ids are drawn so). Traced (an Embedding and a GlobalAveragePooling1D with Adam
    at batch 512, 256 ids a sample): the 4,718,608-byte map alive at the peak beside the 8.4 MB values."""
    from ..layers.base import DTYPE_BYTES, elements

    rows, width = weight.shape[0], elements(weight.shape[1:])
    item = DTYPE_BYTES.get(weight.dtype, 4)
    ids = s.prog.bufs[g].bytes // (width * item)
    unique = min(ids, math.ceil(rows * -math.expm1(ids * math.log1p(-1 / rows)))) if rows > 1 else min(ids, rows)
    positions = s.one(f"{label} Unique of the ids", [g], 4 * (ids + unique), scratch=unique_map_bytes(ids),
                      kind="optimizer temporary")
    summed = s.one(f"{label} gradient deduplicated (UnsortedSegmentSum)", [g, positions], unique * width * item,
                   kind="gradient")
    s.sparse[summed] = s.sparse[g]
    return summed


def unique_map_bytes(ids):
    """The heap block of an absl::flat_hash_map<int32, int32> reserved for 2 * ids entries: capacity the
    least 2^k - 1 that holds 2 * ids at a load of 7/8 (growth + (growth - 1) // 7), 8-byte slots after
    the control bytes (capacity + 16, the cloned group's 15 and a sentinel) and an 8-byte GrowthInfo,
    rounded to the slots' alignment (absl raw_hash_set.h: AllocSize)."""
    growth = 2 * ids
    if growth == 0:
        return 0
    capacity = (1 << (growth + (growth - 1) // 7).bit_length()) - 1
    control = 8 + capacity + 16
    return (control + 3) // 4 * 4 + 8 * capacity


def _no_gradient_op(s, layer, weight, what, size):
    """The update's op that reads no gradient (`what`: m*momentum, rho*v): the one run at the step's
    start where there is one (`early`), else made now."""
    made = s.early.get((id(layer), weight.name))
    if made is None:
        made = s.one(f"{layer.name}/{weight.name} {what}", [], size, kind="optimizer temporary")
    return made


def _sparse_rmsprop(s, label, g, size, momentum):
    """tf_keras's RMSprop on an IndexedSlices gradient (rmsprop.py, update_step's sparse branch), the
    values summed per unique row (`g`): rho * v was assigned at the step's start; square(values) is
    scattered into v while the values live on; v + eps reads v whole (the scatter left it copied on
    every read) for a gather of the unique rows; the increment is made in the values' and the
    gather's memory and scattered into the variable. With momentum, -m is read whole for the
    variable's AssignAdd. Traced (an Embedding(10000, 16), Flatten and Dense(32) at batch 128): the
    Square, then ReadVariableOp_1 (640,000 bytes) beside the 462,080-byte sums and their GatherV2."""
    rows = s.prog.bufs[g].bytes
    sq = s.one(f"{label} square(values)", [g], rows, kind="optimizer temporary")
    s.one(f"{label} scatter_add v", [sq], 0)
    den = s.one(f"{label} v+eps (v read whole)", [], size, kind="optimizer temporary")
    rows_den = s.one(f"{label} gather v+eps at the rows", [den], rows, kind="optimizer temporary")
    inc = s.one(f"{label} increment", [g, rows_den], rows, forward=True, kind="optimizer temporary")
    if momentum:
        s.one(f"{label} scatter_add m", [inc], 0)
        s.one(f"{label} assign_add -m", [], 0, scratch=size, kind="optimizer temporary")
    else:
        s.one(f"{label} scatter_add", [inc], 0)


def _sparse_two_moments(s, label, g, size):
    """Keras 3's Adam on an IndexedSlices gradient (an Embedding's): each arithmetic op makes its
    operand dense (UnsortedSegmentSum into the variable's shape). Traced (a fastText model): the
    values squared, made dense and added into v; sqrt(v); the gradient made dense for m while the
    slices and sqrt(v) are alive, the step's peak; then m * alpha and the update."""
    sq = s.one(f"{label} square(values)", [g], s.prog.bufs[g].bytes, kind="optimizer temporary")
    dense_sq = s.one(f"{label} square(g) made dense", [sq], size, kind="optimizer temporary")
    s.one(f"{label} assign_add v", [dense_sq], 0)
    d = s.one(f"{label} sqrt(v)", [], size, kind="optimizer temporary")
    dense = s.one(f"{label} gradient made dense", [g], size, kind="optimizer temporary")
    s.one(f"{label} assign_add m", [dense], 0)
    c = s.one(f"{label} m*alpha", [], size, kind="optimizer temporary")
    e = s.one(f"{label} step", [c, d], size, forward=True, kind="optimizer temporary")
    s.one(f"{label} assign_sub", [e], 0)
