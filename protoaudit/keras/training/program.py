"""One training step of a Keras model as TensorFlow runs it, written as a timeline program.

The step is `train_on_batch`'s traced function: the forward pass in the model's order, the loss,
the backward pass, then the optimizer's updates. A layer's gradient ops run only where a trainable
weight lies at or upstream of it: a frozen base runs no backward and keeps none of its activations.
The backward pass runs in the order of TensorFlow's executor on one thread (`_Executor`): one chain
of gradients depth first, with the weight gradients of Dense layers (and of convolutions in
tf_keras without a Dropout, or in Keras 3 where branches join: the rules' `grads_late`) and the
other branches of a fork set aside on a stack until the chain waits; what they read lives until then.
Whether a Dense or convolution weight gradient runs before its input gradient is the rules' guess, so
build_step also lays the step out with every one set aside and with every one in the chain: the range. Each layer's ops
and what their gradients keep are its rule's (rules.py); the optimizer's are optimizers.py's. A
tensor lives until its last reader, as TensorFlow's executor frees it; an op may write into an input
it reads last (buffer forwarding).
"""
import json
from collections import defaultdict
from dataclasses import dataclass, field

from ...memory.timeline import Program
from ..layers.base import nbytes
from . import losses, optimizers
from .rules import JOINS, RANKED, rule_for


@dataclass
class Step:
    """A built step: the program, the weight gradients by variable, and what was not modelled."""

    program: Program
    early: bool = False  # some update ops read no gradient and run at the step's start
    other: Program = None  # the same step in the other order TensorFlow's executor can take, where there is one
    # the same step with every Dense and convolution weight gradient set aside, and with every one in the chain:
    # the two orders the rules' guess (rules.weights_aside) chooses between
    orders: list = field(default_factory=list)
    unmodelled: list = field(default_factory=list)  # class names without a rule (taken as pass-through)
    undercounted: list = field(default_factory=list)  # layers whose rule leaves out what a setting adds: why


class StepBuilder:
    """What the rules call: make ops, know sizes, the flavour of Keras."""

    def __init__(self, graph, flavour, threads=1, device="cpu"):
        self.graph = graph
        self.device = device
        self.flavour = flavour
        self.threads = threads
        # "late" or "chain": every Dense and convolution weight gradient so (build_step's other orders); None: the
        # rules' guess
        self.weight_order = None
        self.order_guessed = False  # a weight gradient's order was guessed (rules.weights_aside)
        self.prog = Program()
        self.batch = graph.batch
        self.logits = set()  # id(output tensor) whose loss took the logits under its softmax/sigmoid
        # (buffer, bytes) an element-wise loss's value reads: its square and mean run after the backward pass
        # (losses.loss_ops; traced: Keras 3's compile_loss/mse/Square of a user's BiLSTM model ran after the
        # LSTMs' backward loops, tf_keras's mean_squared_error/SquaredDifference of a user's CNN after every
        # gradient op)
        self.loss_values = []
        self.sparse = {}  # IndexedSlices gradient buffer -> its variable's bytes
        self.applied = set()  # weight gradient buffers already applied (streamed updates)
        self.shared_layers = {}  # id(layer) -> its calls, for a layer called more than once
        self.shared_grads = {}  # (id(layer), weight name) -> the gradients its calls have made so far
        self._weights = {}
        self.defer = None  # (group, every op?): weight-gradient ops (or every op) made now run after the chain
        self.deferred = {}  # step index -> group: steps that run after the input-gradient chain
        self.optimizer = None  # (name, config), or None: no updates
        self.need = ()  # for the node being laid out: whether each input's gradient is wanted
        self.undercounted = []  # (layer name, what its rule leaves out)
        self.merged_nodes = {}  # id(node) -> (rule, node) of a tf_keras TimeDistributed's wrapped layer (rules.py)
        # whether branches of the model join (Add, Concatenate, a scaled residual...): Keras 3's convolutions then set
        # their filter gradients aside (rules.Conv.grads_late)
        self.joins = any(node.layer.class_name in JOINS for node in graph.nodes)
        self.unread_outputs = set()  # id(output tensor) whose activation no op reads: not run (rules.act_forward)
        # whether an output the loss reads keeps spatial axes (an autoencoder's, a segmentation net's):
        # the convolutions then set their filter gradients aside in both flavours (rules.Conv.grads_late)
        self.spatial_loss = any(len(t.spec.shape) >= 3 for t in graph.outputs)
        # whether the model has a Dropout: tf_keras's convolutions then run their filter gradients in
        # the chain where the optimizer has update ops that read no gradient (rules.Conv.grads_late)
        first = next((k for k, node in enumerate(graph.nodes) if node.layer.class_name == "Dropout"), None)
        self.dropout = first is not None
        # the nodes after the first Dropout, in the graph's order: Keras 3's convolutions there set their
        # filter gradients aside (rules.Conv.grads_late)
        self.after_dropout = set() if first is None else {id(node) for node in graph.nodes[first + 1:]}
        # id(node) -> rank, in the forward order, of the Dense layers and convolutions that hand a gradient on
        # (rules.leads_chain)
        self.handing_on = {}

    def update_now(self, node, grads, read_later=False, chain=False):
        """Run the updates of these (Weight, gradient buffer) pairs now, before the rest of the
        layer's backward pass (where a trace shows TensorFlow's executor does so); `read_later`: the
        layer's input gradient, still to run, reads the variables; `chain`: a Dense layer's updates in
        the chain (optimizers.after_gradient)."""
        for w, g in grads:
            optimizers.after_gradient(self, node.layer, w, g, self.optimizer, read_later=read_later, chain=chain)

    def weights_of(self, node):
        """The layer's variables (Weight), as build() made them."""
        return self._weights.get(id(node.layer), ())

    def op(self, label, reads=(), makes=(), scratch=0, forward=(), kind="activation"):
        """An op that reads buffer ids and makes buffers of the given byte sizes (or (bytes, kind)
        pairs); `forward`: indexes of `makes` that may take the memory of a buffer the op reads for
        the last time (TensorFlow's forward_input_or_allocate_output), or (index, buffer id) pairs
        where only that buffer may be taken."""
        made = []
        for m in makes:
            size, what = (m if isinstance(m, tuple) else (m, kind))
            made.append((size, label, what))
        pairs = []
        reads = [r for r in reads if r is not None]
        for k in forward:  # an index (any read buffer), or (index, the one read buffer it may take)
            pairs += [k] if isinstance(k, tuple) else [(k, r) for r in reads]
        made_ids = self.prog.step(label, reads, made, scratch, pairs)
        if self.defer is not None and (kind == "weight gradient" or self.defer[1]):
            self.deferred[len(self.prog.steps) - 1] = self.defer[0]
        return made_ids

    def one(self, label, reads=(), size=0, scratch=0, forward=False, kind="activation"):
        return self.op(label, reads, [size], scratch, (0,) if forward else (), kind)[0]


def build_step(graph, *, flavour, optimizer, loss, weights, device="cpu", metrics=False):
    """The Step of one training step of `graph`, with the executor's range: the update ops that read
    no gradient run at the step's start (what the measurements show; the high end) or just before
    their update (the low end); and, where a layer's weight-gradient order is guessed, every one set
    aside and every one in the chain (`orders`). `optimizer`: (name, config); `loss`: as the file or --loss gives it;
    `weights`: {layer: [Weight]} of the graph; `device`: cpu (TensorFlow's CPU kernels' scratch) or gpu;
    `metrics`: whether the model was compiled with metrics, which read its outputs."""
    high, guessed = _build(graph, flavour, optimizer, loss, weights, device, metrics, early=True)
    if high.early:  # the other order exists only where some update op reads no gradient
        high.other = _build(graph, flavour, optimizer, loss, weights, device, metrics, early=False)[0].program
    if guessed:  # which of a layer's input and weight gradients the executor runs first is not derived
        high.orders = [_build(graph, flavour, optimizer, loss, weights, device, metrics, early=True,
                              weight_order=order)[0].program for order in ("late", "chain")]
    return high


def _build(graph, flavour, optimizer, loss, weights, device, metrics, early, weight_order=None):
    """(the Step, whether a Dense or convolution weight-gradient order was guessed)."""
    s = StepBuilder(graph, flavour, device=device)
    s.weight_order = weight_order
    s._weights = {id(layer): list(ws) for layer, ws in weights.items()}
    s.optimizer = optimizer
    if not metrics:  # the outputs whose softmax or sigmoid Grappler prunes (rules.act_forward)
        s.unread_outputs = {id(t) for k, t in enumerate(graph.outputs) if losses.loss_name(
            losses.of_output(loss, k, graph.output_names[k])) in losses.TAKES_LOGITS}
    calls = defaultdict(int)
    for node in graph.nodes:
        calls[id(node.layer)] += 1
    s.shared_layers = {k: n for k, n in calls.items() if n > 1}
    prog = s.prog
    step = Step(prog)
    ids = {}
    s.early = optimizers.early(s, weights, optimizer) if early else {}
    step.early = bool(s.early)
    # the batch: train_on_batch's data adapter holds it (as tensors) for the whole step. Keras 3 holds
    # each input twice on the CPU, the array it passes and TensorFlow's copy, made where TensorFlow
    # cannot adopt the array (traced: its dense autoencoder and Dropout MLP; two runs of the MLP differ
    # by exactly one input). On a GPU the host's arrays are not the device's.
    for t in graph.inputs:
        ids[id(t)] = s.one(f"input {t.name}", size=nbytes(t.spec), kind="input")
        prog.hold(ids[id(t)])
        if flavour == "keras3" and device == "cpu":
            prog.hold(s.one(f"input copy {t.name}", size=nbytes(t.spec), kind="input"))
        elif device == "cpu":
            # tf_keras's data adapter copies the array once more and frees the copy before the forward pass
            # (traced: a user's one-Dense model on 2,400 features, two 307,200-byte TF_NewTensor blocks at the
            # step's start, one freed before its first op; a step that small peaks there)
            s.one(f"input {t.name} copy freed", [s.one(f"input copy {t.name}", size=nbytes(t.spec), kind="input")], 0)
    penalties = _penalties(s, graph)
    trainable_up = {}  # id(tensor): a trainable weight lies at or upstream of it
    for t in graph.inputs:
        trainable_up[id(t)] = False
    saved = {}
    same, merged = {}, {}  # id(a merged op's output) -> id(the first one's); the ops by _merge_key
    canon = lambda t: same.get(id(t), id(t))  # noqa: E731
    for node in graph.nodes:
        key = _merge_key(node, canon)
        twin = merged.get(key) if key is not None else None
        if twin is not None:  # one op with the first: its outputs are the first's buffers, its gradients theirs
            for t, u in zip(node.outputs, twin.outputs):
                ids[id(t)], trainable_up[id(t)], same[id(t)] = ids[id(u)], trainable_up[id(u)], id(u)
            continue
        if key is not None:
            merged[key] = node
        rule = rule_for(node.layer.class_name)
        if rule is None:
            step.unmodelled.append(node.layer.class_name)
            rule = rule_for("Identity")
        own = any(w.trainable for w in s.weights_of(node))
        s.need = [trainable_up.get(id(t), False) for t in node.inputs]
        up = own or any(s.need)
        xs = [ids[id(t)] for t in node.inputs]
        outs, keep = rule.forward(s, node, xs)
        for t, o in zip(node.outputs, outs):
            ids[id(t)] = o
            trainable_up[id(t)] = up
        saved[id(node)] = (rule, keep, own, up, s.need)
        if own and any(s.need) and node.layer.class_name in RANKED:
            s.handing_on[id(node)] = len(s.handing_on)
    grads = defaultdict(list)
    for k, t in enumerate(graph.outputs):
        its_loss = losses.of_output(loss, k, graph.output_names[k])
        if trainable_up.get(id(t)) and (its_loss is not None or loss is None):
            grads[canon(t)].append(losses.loss_ops(s, t, ids[id(t)], its_loss))
    weight_grads = []  # (layer, Weight, buffer id) in the order they are made
    start = len(prog.steps)
    order = _Executor(graph, saved, trainable_up, grads, canon)
    for k in order:
        order.flushed(len(prog.steps))
        node = graph.nodes[k]
        rule, keep, own, up, need = saved[id(node)]
        s.need = need
        dys = [_summed(s, grads.pop(canon(t), []), t) for t in node.outputs]
        if all(d is None for d in dys):
            continue
        later = rule.grads_late(s, node) and not s.shared_layers.get(id(node.layer))
        s.defer = (k, False) if later else None
        first = len(prog.steps)
        dxs, dws = rule.backward(s, node, keep, dys, need)
        aside = order.delivered(k, [(t, dx) for t, dx in zip(node.inputs, dxs)
                                    if dx is not None and trainable_up.get(id(t), False)], dys, later, not any(need))
        for i in range(first, len(prog.steps)):  # the op making a part set aside runs when it is taken
            for part in aside.intersection(prog.steps[i].makes):
                s.deferred[i] = ("part", part)
        s.defer = (k, True) if later else None
        dws = [(w, _penalized(s, node.layer, w, g, penalties)) for w, g in dws]
        for w, g in dws:
            weight_grads.append((node.layer, w, g))
            if g not in s.applied:  # (unless the rule ran it: update_now)
                optimizers.after_gradient(s, node.layer, w, g, optimizer, read_later=any(need) and not later)
        s.defer = None
    step.undercounted = s.undercounted
    _place_deferred(s, start, order.flush_at)
    for value, size in s.loss_values:
        s.one("loss mean", [s.one("loss square", [value], size)], 4)
    optimizers.apply(s, weight_grads, optimizer)
    return step, s.order_guessed


class _Executor:
    """The order TensorFlow's executor runs the backward pass in, one thread (traced: ResNet50 and a
    small U-Net, both flavours). It runs one chain of gradients inline, depth first; where a gradient
    goes to several layers it goes on with the one made last in the forward pass and sets the others
    aside, as it sets aside each deferred weight gradient (a rule's `grads_late`), on one stack.
    When the chain waits (a tensor whose gradient still lacks a part), it takes work from the top
    of the stack until the chain can go on: so a U-Net's inner filter gradients run when the chain
    reaches a skip connection, and a ResNet stage's first block's when it reaches the shortcut's
    join, while a plain chain's run after it, in forward order, and the first layers' last.

    Iterating yields the nodes' indexes in execution order; `delivered` reports what a node's
    backward made; `flush_at` maps each deferred group to the step before which it runs (None: at
    the end)."""

    def __init__(self, graph, saved, trainable_up, grads, canon):
        self.graph, self.grads, self.canon = graph, grads, canon
        self.producer = {}
        for k, node in enumerate(graph.nodes):
            for t in node.outputs:
                self.producer.setdefault(canon(t), k)
        # the gradient parts each tensor waits for: one per (consumer that runs backward, input)
        self.expected = defaultdict(int)
        has_grad = {c for c in grads}
        self.runs = set()
        for k in reversed(range(len(graph.nodes))):
            node = graph.nodes[k]
            if id(node) not in saved or not saved[id(node)][3]:
                continue
            if not any(canon(t) in has_grad for t in node.outputs):
                continue
            self.runs.add(k)
            for t in node.inputs:
                if trainable_up.get(id(t), False):
                    self.expected[canon(t)] += 1
                    has_grad.add(canon(t))
        for c in grads:
            self.expected[c] += len(grads[c])
        self.arrived = defaultdict(int, {c: len(v) for c, v in grads.items()})
        self.done = set()
        self.stack = []  # ("group", k), ("node", k) or ("part", tensor, buffer)
        self.last = []  # the groups of layers that hand no gradient on (their indexes): after everything
        self.flush_at = {}
        self.pending_flush = []
        self.next = None

    def ready(self, k):
        return all(self.arrived[self.canon(t)] >= self.expected[self.canon(t)] for t in self.graph.nodes[k].outputs)

    def runnable(self, k):
        """Node k runs backward, has not yet, and has every part of its outputs' gradients."""
        return k in self.runs and k not in self.done and self.ready(k)

    def delivered(self, k, parts, dys, deferred, hands_nothing):
        """Node k's backward made these (input tensor, gradient buffer) parts from its output
        gradients `dys`. A part that is an output gradient itself (Add's) reaches its layer at once;
        of parts made by ops (Concatenate's slices), those for the layer made last go on and the
        others wait on the stack, their ops with them (returned: those parts' buffers, a set). Of the
        layers that become ready, the one made last runs next and the others wait on the stack."""
        self.done.add(k)
        if hands_nothing and deferred:
            self.last.append(k)
        elif deferred:
            self.stack.append(("group", k))
        producer = lambda p: self.producer.get(self.canon(p[0]), -1)  # noqa: E731
        made = sorted((p for p in parts if p[1] not in dys), key=producer, reverse=True)
        later = [p for p in made if producer(p) != producer(made[0])]
        now = [p for p in parts if p not in later]
        for t, dx in reversed(later):  # the next one made last in the forward pass on top
            self.stack.append(("part", t, dx))
        for t, dx in now:
            self._arrive(t, dx)
        ready = sorted(j for j in {self.producer.get(self.canon(t)) for t, _ in now} if self.runnable(j))
        self.next = ready[-1] if ready else None
        for j in ready[:-1]:
            self.stack.append(("node", j))
        return {dx for _, dx in later}

    def flushed(self, position):
        for k in self.pending_flush:
            self.flush_at[k] = position
        self.pending_flush = []

    def _arrive(self, t, dx):
        self.grads[self.canon(t)].append(dx)
        self.arrived[self.canon(t)] += 1

    def _pick(self):
        if self.next is not None and self.runnable(self.next):
            return self.next
        while self.stack:  # the chain waits: work from the top of the stack
            item = self.stack.pop()
            if item[0] == "group":
                self.pending_flush.append(item[1])
            elif item[0] == "node":
                if self.runnable(item[1]):
                    return item[1]
            else:
                self.pending_flush.append(("part", item[2]))
                self._arrive(item[1], item[2])
                k = self.producer.get(self.canon(item[1]))
                if self.runnable(k):
                    return k
        todo = [k for k in self.runs if k not in self.done]
        ready = [k for k in todo if self.ready(k)]
        if ready:
            return max(ready)
        waiting = [k for k in todo if any(self.arrived[self.canon(t)] for t in self.graph.nodes[k].outputs)]
        return max(waiting) if waiting else None

    def __iter__(self):
        while True:
            k = self._pick()
            if k is None:
                break
            self.next = None
            yield k
        self.pending_flush += sorted(self.last)  # the stack is empty by now
        for k in self.pending_flush:
            self.flush_at[k] = None
        self.pending_flush = []


# Layers with no variables and no randomness, each one TensorFlow op (or a few) of its input alone.
# Grappler's arithmetic optimizer merges ops that are the same op with the same settings on the same
# inputs (its dedup pass): NASNet applies Activation("relu") to one tensor in several branches, and
# TensorFlow runs one Relu (traced: Keras 3 NASNetMobile, one Relu of the stem's 2x111x111x32 output
# where the model has five), kept once for its gradient.
MERGEABLE = frozenset({
    "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax", "ThresholdedReLU",
    "ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D", "Cropping1D", "Cropping2D", "Cropping3D",
    "MaxPooling1D", "MaxPooling2D", "MaxPooling3D", "AveragePooling1D", "AveragePooling2D", "AveragePooling3D",
    "GlobalAveragePooling1D", "GlobalAveragePooling2D", "GlobalMaxPooling1D", "GlobalMaxPooling2D",
    "UpSampling1D", "UpSampling2D", "Flatten", "Reshape", "Permute"})


def _merge_key(node, canon):
    """What makes two calls one op after Grappler's dedup: a MERGEABLE layer's class, its settings
    but its name, and its inputs (as merged already); None for every other layer."""
    if node.layer.class_name not in MERGEABLE:
        return None
    settings = {k: v for k, v in node.layer.config.items() if k != "name"}
    return node.layer.class_name, json.dumps(settings, sort_keys=True, default=str), tuple(canon(t) for t in node.inputs)


def _place_deferred(s, start, flush_at):
    """Move each deferred layer's weight gradients and updates (steps from `start` on) to where the
    executor runs them (`_Executor.flush_at`): before the first chain step at or after that position
    (the position may be a deferred step itself), or at the end, in the order they were taken."""
    steps = s.prog.steps
    groups = defaultdict(list)
    chain = []
    for i in range(start, len(steps)):
        (groups[s.deferred[i]] if i in s.deferred else chain).append(i)
    timed = sorted((at, n, g) for n, (g, at) in enumerate(flush_at.items()) if at is not None)
    out, k = [], 0
    for i in chain:
        while k < len(timed) and timed[k][0] <= i:
            out += groups.pop(timed[k][2], [])
            k += 1
        out.append(i)
    out += [j for _, _, g in timed[k:] for j in groups.pop(g, [])]
    out += [j for g, at in flush_at.items() if at is None for j in groups.pop(g, [])]
    assert not groups, "a deferred group the executor never took"
    steps[start:] = [steps[i] for i in out]


def _regularized(layer, weight):
    """The weight's regularizer in the layer's config (kernel_regularizer, recurrent_regularizer,
    depthwise_regularizer...), or None."""
    base = weight.name.split("/")[-1]
    key = {"recurrent_kernel": "recurrent", "depthwise_kernel": "depthwise", "pointwise_kernel": "pointwise"}.get(base, base)
    return layer.config.get(f"{key}_regularizer")


def _penalties(s, graph):
    """A regularized weight's penalty gradient, l2 * 2w or l1 * sign(w): it reads no activation and
    no loss gradient, so TensorFlow's executor makes it at the step's start and holds it until the
    weight's own gradient is added to it (traced: an L2-regularized CNN in tf_keras, the 16384 x 128
    Dense kernel's `Regularizer/mul`, 8 MB, alive at the step's peak in the convolutions' backward
    pass; an L2 MLP in both flavours, each kernel's made before the forward pass). Its loss is
    tf_keras's L2Loss, no temporary, or Keras 3's sum of a square, a transient the weight's size, not
    counted. Returns {(id(layer), weight name): gradient buffer}."""
    made = {}
    for node in graph.nodes:
        for w in s.weights_of(node):
            key = (id(node.layer), w.name)
            if w.trainable and key not in made and _regularized(node.layer, w):
                made[key] = s.one(f"{node.layer.name} {w.name} regularizer gradient", [], nbytes(w),
                                  kind="weight gradient")
    return made


def _penalized(s, layer, w, g, penalties):
    """The weight's gradient with its regularizer's added (AddN, into the gradient's memory)."""
    penalty = penalties.get((id(layer), w.name))
    if penalty is None:
        return g
    return s.one(f"{layer.name} {w.name} gradient + regularizer", [g, penalty], nbytes(w), forward=True,
                 kind="weight gradient")


def _summed(s, parts, tensor):
    """The gradient of a tensor read by several layers: their contributions added up (AddN) once all
    are made."""
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return s.one(f"AddN gradient of {tensor.name}", parts, nbytes(tensor.spec), forward=True, kind="gradient")
