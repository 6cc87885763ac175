"""The loss of a training step: its ops, what its gradient keeps, and the gradient it hands back.

Keras computes a cross-entropy on a softmax (or sigmoid) output from the logits under it (tf_keras's
backend reads the Softmax op's input; Keras 3 keeps `_keras_logits`), so TensorFlow's fused
SoftmaxCrossEntropyWithLogits runs, keeps its `backprop` output (batch x classes) for the gradient,
and the gradient goes to the logits, not through the softmax.
"""
from math import prod

from ..layers.base import nbytes
from .rules import act_name

SPARSE_CE = {"sparse_categorical_crossentropy", "SparseCategoricalCrossentropy"}
CE = {"categorical_crossentropy", "CategoricalCrossentropy"}
BINARY_CE = {"binary_crossentropy", "BinaryCrossentropy"}
TAKES_LOGITS = SPARSE_CE | CE | BINARY_CE


def loss_name(loss):
    """The loss's name as a file stores it: a string, or a {"class_name": ...} dict."""
    if isinstance(loss, dict):
        return loss.get("class_name") or (loss.get("config") or {}).get("name")
    return loss if isinstance(loss, str) else None


def _by_output(loss):
    """Whether `loss` gives one loss per output: a list in the outputs' order, or a dict by output name
    (a serialized loss is a dict too, with its class_name)."""
    return isinstance(loss, (list, tuple)) or (isinstance(loss, dict) and "class_name" not in loss)


def of_output(loss, k, name):
    """The loss of the model's k-th output, named `name` (its layer's name), as Keras's compile reads a
    list or a dict of losses; None where that output is given none (it hands back no gradient)."""
    if isinstance(loss, (list, tuple)):
        return loss[k] if k < len(loss) else None
    if _by_output(loss):
        return loss.get(name, next(iter(loss.values())) if len(loss) == 1 else None)
    return loss


def describe(loss):
    """The loss as a report names it: one name, or each output's."""
    if isinstance(loss, (list, tuple)):
        return ", ".join(str(loss_name(x)) for x in loss)
    if _by_output(loss):
        return ", ".join(f"{k}: {loss_name(v)}" for k, v in loss.items())
    return loss_name(loss)


def labels_bytes(tensor, loss):
    """The bytes of the labels the batch carries for this output: class ids (int32, one per sample)
    for a sparse cross-entropy, else the output's own shape."""
    name = loss_name(loss)
    shape = tensor.spec.shape
    if name in SPARSE_CE:
        return prod(shape[:-1]) * 4
    return prod(shape) * 4


def loss_ops(s, tensor, y, loss):
    """The loss on output `tensor` (buffer `y`): its forward ops, then the gradient of `tensor` (or
    of the logits under it, see above) as a buffer id."""
    name = loss_name(loss)
    size = nbytes(tensor.spec)
    rows = prod(tensor.spec.shape[:-1]) if tensor.spec.shape else 1
    labels = s.one(f"labels for {tensor.name}", size=labels_bytes(tensor, loss), kind="input")
    s.prog.hold(labels)
    if name in SPARSE_CE and _on_probabilities(tensor, loss):
        return _sparse_ce_on_probabilities(s, y, labels, size, rows, prod(tensor.spec.shape))
    squash = "softmax" if name in CE else "sigmoid"
    if (name in CE or name in BINARY_CE) and _on_probabilities(tensor, loss, squash):
        s.undercounted.append((tensor.producer.layer.name if tensor.producer else tensor.name,
                               f"its {name} takes the output as probabilities (no {squash} made it, and the loss is "
                               "not from_logits): Keras clips it and takes logs, whose tensors of the output's size "
                               "are not counted"))
    if name in SPARSE_CE or name in CE:
        s.logits.add(id(tensor))
        # the sparse one's backprop takes the logits' memory where it reads them last (sparse_xent_op.cc;
        # xent_op.cc allocates its own)
        loss_vec, backprop = s.op("SoftmaxCrossEntropyWithLogits", [y, labels], [rows * 4, size],
                                  forward=[(1, y)] if name in SPARSE_CE else ())
        s.one("loss mean", [loss_vec], 4)
        return s.one("loss gradient", [backprop], size, forward=True, kind="gradient")
    if name in BINARY_CE:
        s.logits.add(id(tensor))
        return _logistic_loss(s, y, labels, size, prod(tensor.spec.shape))
    # mean squared error and the other element-wise losses: (y - t)^2's mean, gradient 2(y - t)/n. The
    # loss's value is read by no gradient, so TensorFlow's executor leaves its ops on its stack until the
    # backward pass is done, and what they read lives until then (program._build): tf_keras's
    # SquaredDifference reads the output and the labels (its gradient takes a difference of its own), Keras 3's
    # Square the difference its gradient reads too, whose gradient then takes a new buffer
    d = s.one("loss difference", [y, labels], size)
    s.loss_values.append((d if s.flavour == "keras3" else y, size))
    return s.one("loss gradient", [d], size, forward=s.flavour != "keras3", kind="gradient")


def _on_probabilities(tensor, loss, activation_name="softmax"):
    """Whether Keras takes the output as probabilities: no softmax (sigmoid) made it (a layer's
    activation, a Softmax layer or Activation("softmax")) and the loss is not from_logits."""
    config = (loss.get("config") or {}) if isinstance(loss, dict) else {}
    if config.get("from_logits"):
        return False
    layer = tensor.producer.layer if tensor.producer is not None else None
    if layer is None:
        return True
    config = layer.config
    while isinstance(config.get("layer"), dict):  # a wrapper's (TimeDistributed's) layer makes the output
        config = config["layer"].get("config") or {}
    activation = act_name(config.get("activation"))
    return not ((activation_name == "softmax" and layer.class_name == "Softmax") or activation == activation_name)


def _sparse_ce_on_probabilities(s, y, labels, size, rows, elems):
    """Both Kerases' sparse cross-entropy on probabilities (tf_keras backend.py, Keras 3's TensorFlow
    nn.py): clip_by_value(output, eps, 1 - eps), a Minimum then a Maximum, its Log, and the fused
    SparseSoftmaxCrossEntropyWithLogits on that, whose backprop takes the log's memory: the output, both
    clips and the log alive at once (traced: a language model whose tied reverse embedding gives
    16 x 32 x 5000 raw scores, four such tensors at the step's peak). The gradient goes back through
    Log (dy / x, reading the Maximum's output) and each clip (_MaximumMinimumGrad: a bool mask of the
    input's size, then a Select), which read the Minimum's output and the model's output."""
    low = s.one("loss clip (Minimum)", [y], size)
    high = s.one("loss clip (Maximum)", [low], size)
    log = s.one("loss log", [high], size)
    loss_vec, backprop = s.op("SparseSoftmaxCrossEntropyWithLogits", [log, labels], [rows * 4, size],
                              forward=[(1, log)])
    s.one("loss mean", [loss_vec], 4)
    d = s.one("loss gradient", [backprop], size, forward=True, kind="gradient")
    d = s.one("loss log gradient", [d, high], size, forward=True, kind="gradient")
    d = s.one("loss clip gradient (Maximum)", [d, low], size, scratch=elems, forward=True, kind="gradient")
    return s.one("loss clip gradient (Minimum)", [d, y], size, scratch=elems, forward=True, kind="gradient")


def _logistic_loss(s, x, z, size, elems):
    """tf.nn.sigmoid_cross_entropy_with_logits (nn_impl.py) on logits x and labels z: cond = x >= 0
    (bool), relu(x) = where(cond, x, 0), -|x| = where(cond, -x, x) written into -x, then exp, log1p and
    the sums in place. Its gradient: dy * z, a Select on cond for each where, and their sum, all
    alive at once with the forward's buffers (traced: a dense autoencoder's 256 x 784 output, six
    802,816-byte buffers and the bool one at the peak). Keras 3 makes dy * z first and computes the
    loss's value from the forward buffers at the end of the step, holding them until then."""
    keras3 = s.flavour == "keras3"
    dz = s.one("logistic loss gradient dy*z", [z], size, kind="gradient") if keras3 else None
    neg = s.one("logistic loss -x", [x], size)
    cond = s.one("logistic loss x >= 0", [x], elems)
    grad = s.one("logistic loss gradient", [], size, kind="gradient")
    first = s.one("logistic loss gradient select", [cond], size, kind="gradient")
    relu = s.one("logistic loss relu(x)", [x, cond], size)
    second = s.one("logistic loss gradient select", [cond], size, kind="gradient")
    if keras3:
        s.prog.hold(x, neg, relu)
    else:
        s.one("loss mean", [x, neg, relu, z, cond], 4)
        dz = s.one("logistic loss gradient dy*z", [z], size, kind="gradient")
    s.one("logistic loss gradient added", [grad, first, second, dz, cond], 0)
    return grad
