"""The "unrolled" net a BVLC RNN or LSTM layer builds and runs inside itself, as recurrent_layer.cpp,
rnn_layer.cpp and lstm_layer.cpp make it (BVLC Caffe 9b89154), and what running it allocates.

RecurrentLayer::LayerSetUp (recurrent_layer.cpp:13-180) writes a NetParameter: an Input layer of x,
cont and (with a static input) x_static shaped as the bottoms (:54-79), the subclass's
FillUnrolledNet (an Input of the recurrent inputs, Slices, InnerProducts, Scales, Eltwise sums,
TanHs or LSTMUnits, a Concat of the outputs), every layer's name prefixed with the layer's own
(:84-91), and one Reduction "pseudoloss" of loss weight 1 per output (:93-104); it builds
`new Net<Dtype>(net_param)` from it (:108; phase TRAIN: the NetParameter has no state), so Net::Init
inserts Splits and decides which diffs backward writes, and every blob and layer buffer of that net
is allocated by the same lazy rules as any net's. Forward runs it up to the pseudolosses
(ForwardTo, :267), backward from there (BackwardFrom, :287), whole, whatever propagate_down says.

What the layer shares with it: the net's parameters are the layer's blobs_ (:144-154); Reshape
(:182-234) makes x share the data and diff of bottom 0, cont the data of bottom 1, x_static the
data and diff of bottom 2, the recurrent inputs (with expose_hidden) the data of the exposed
bottoms, and top 0 the data and diff of the output blob; with expose_hidden each Forward makes the
exposed tops share the data of the recurrent outputs (:268-273). LayerSetUp zeroes the recurrent
outputs' diffs on the host (:166-171). The layer's own memory is the rest: every other blob's data
and diff and every inner layer's buffers.

`build_unrolled` builds that net with protoaudit's own Net::Init (protoaudit.net.build) in the
schema of the layer's net; `unrolled_touches` walks it with protoaudit.memory.buffers and says each
buffer as a touch of the outer layer: those it shares as the outer blob's touch (a bottom's, a
top's, a parameter's), the others as the layer's own buffers, named after the inner blob or layer
("unrolled h_conted_1 data", "unrolled x_transform.bias_multiplier_"); `objects` sizes its C++
objects with protoaudit.memory.host. tests/test_recurrent_memory.py holds it to real Caffe.
"""
import dataclasses
import functools
import re

from google.protobuf import message_factory

from . import touch

PREFIX = "unrolled "


@dataclasses.dataclass
class Plan:
    """A NetParameter FillUnrolledNet-style, with the names RecurrentLayer reads back from it."""

    param: object  # the NetParameter
    recur_inputs: tuple  # RecurrentInputBlobNames: h_0 (RNN); h_0, c_0 (LSTM)
    recur_outputs: tuple  # RecurrentOutputBlobNames: h_T (RNN); h_T, c_T (LSTM)
    outputs: tuple  # OutputBlobNames: o (RNN), h (LSTM)
    static: bool
    timesteps: int


@functools.cache
def _classes(pool_file):
    """NetParameter and NetState of the schema that holds `pool_file`'s messages."""
    pool = pool_file.pool
    return tuple(message_factory.GetMessageClass(pool.FindMessageTypeByName("caffe." + name))
                 for name in ("NetParameter", "NetState"))


def _schema_of(lp):
    """The message classes of the schema that read the layer, or BVLC's where that schema has no
    Input layer (a fork older than the recurrent layers: never in practice)."""
    pool = lp.DESCRIPTOR.file.pool
    try:
        pool.FindMessageTypeByName("caffe.InputParameter")
        return _classes(lp.DESCRIPTOR.file)
    except KeyError:
        from ..read.schema import load_schema

        return _classes(load_schema("bvlc").LayerParameter.DESCRIPTOR.file)


def _copy(message, into):
    """`message` (a FillerParameter of the layer's schema) into `into` (one of the net's), set even
    where `message` is empty, as C++'s mutable_weight_filler()->CopyFrom(...) leaves it."""
    into.SetInParent()
    into.MergeFromString(message.SerializeToString())


def plan(layer, bottoms, name=None):
    """The NetParameter RecurrentLayer::LayerSetUp builds for `layer` (an RNN or LSTM layer object) on
    bottoms of these shapes, with the names it reads back; `name`: the layer's name, if not its
    object's (layers alike share one object: protoaudit.net.build)."""
    NetParameter, _ = _schema_of(layer.lp._msg)
    net = NetParameter()
    raw = layer.lp._msg
    name = raw.name if name is None else name
    exposed = layer.num_exposed
    static = len(bottoms) > 2 + exposed
    inputs = net.layer.add()  # (recurrent_layer.cpp:54-79)
    inputs.type = "Input"
    for top, shape in zip(("x", "cont", "x_static"), bottoms[:3 if static else 2]):
        inputs.top.append(top)
        inputs.input_param.shape.add().dim.extend(shape)
    t, n = bottoms[0][0], bottoms[0][1]
    num_output = layer.lp.recurrent_param.num_output
    names = layer.fill_unrolled(net, t, n, num_output, static, raw.recurrent_param)
    if name:  # (:84-91)
        for lp in net.layer:
            lp.name = name + "_" + lp.name
    for output in names[2]:  # (:93-104)
        loss = net.layer.add()
        loss.name = output + "_pseudoloss"
        loss.type = "Reduction"
        loss.bottom.append(output)
        loss.top.append(loss.name)
        loss.loss_weight.append(1)
    return Plan(net, *names, static, t)


def _transform(net, name, num_output, rp, bias, axis=2):
    """An InnerProduct of the hidden_param (bias_term false) or biased_hidden_param kind, axis 2
    unless said, with the recurrent_param's fillers."""
    lp = net.layer.add()
    lp.name = name
    lp.type = "InnerProduct"
    ip = lp.inner_product_param
    ip.num_output = num_output
    ip.bias_term = bias
    ip.axis = axis
    _copy(rp.weight_filler, ip.weight_filler)
    if bias:
        _copy(rp.bias_filler, ip.bias_filler)
    return lp


def _layer(net, name, type_, bottoms=(), tops=()):
    lp = net.layer.add()
    if name is not None:
        lp.name = name
    lp.type = type_
    lp.bottom.extend(bottoms)
    lp.top.extend(tops)
    return lp


def _common(net, t, n, num_output, rows, static, rp, recur_inputs, w, b):
    """What rnn_layer.cpp:85-146 and lstm_layer.cpp:90-155 both write: the recurrent inputs' Input,
    cont_slice, x_transform (W x + b, propagate_down true), the static input's transform and its
    Reshape to (1, N, rows), and the slice of the transform by timestep; cont_slice and that slice
    (their tops added timestep by timestep)."""
    inputs = _layer(net, None, "Input", (), recur_inputs)
    for _ in recur_inputs:
        inputs.input_param.shape.add().dim.extend((1, n, num_output))
    cont_slice = _layer(net, "cont_slice", "Slice", ("cont",))
    cont_slice.slice_param.axis = 0
    x = _transform(net, "x_transform", rows, rp, True)
    x.param.add().name = w
    x.param.add().name = b
    x.bottom.append("x")
    x.top.append(w + "_x")
    x.propagate_down.append(True)
    if static:
        s = _transform(net, w + "_x_static", rows, rp, False, axis=1)
        s.param.add().name = w + "_static"
        s.bottom.append("x_static")
        s.top.append(w + "_x_static_preshape")
        s.propagate_down.append(True)
        reshape = _layer(net, w + "_x_static_reshape", "Reshape", (w + "_x_static_preshape",), (w + "_x_static",))
        reshape.reshape_param.shape.dim.extend((1, -1, rows))
    x_slice = _layer(net, w + "_x_slice", "Slice", (w + "_x",))
    x_slice.slice_param.axis = 0
    return cont_slice, x_slice


def _scale(net, t):
    """h_conted_{t-1} := cont_t * h_{t-1}: a Scale over axis 0 by the second bottom."""
    lp = _layer(net, f"h_conted_{t - 1}", "Scale", (f"h_{t - 1}", f"cont_{t}"), (f"h_conted_{t - 1}",))
    lp.scale_param.axis = 0


def _sum(net, name, bottoms, top):
    lp = _layer(net, name, "Eltwise", bottoms, (top,))
    lp.eltwise_param.operation = lp.eltwise_param.SUM


def _step_input(net, t, slices, rows, rp, static, w_h, w_x, names):
    """Timestep t's input to the recurrence, alike in both FillUnrolledNets (rnn_layer.cpp:147-195,
    lstm_layer.cpp:156-204): cont_t and the transformed x_t sliced off, h_{t-1} scaled by cont_t,
    transformed by `w_h` (the InnerProduct named names[0], no bias) and summed with x_t's transform
    (and the static input's) by the Eltwise names[1] into names[2]."""
    cont_slice, x_slice = slices
    cont_slice.top.append(f"cont_{t}")
    x_slice.top.append(f"{w_x}_x_{t}")
    _scale(net, t)
    w = _transform(net, names[0], rows, rp, False)
    w.param.add().name = w_h
    w.bottom.append(f"h_conted_{t - 1}")
    w.top.append(f"{w_h}_h_{t - 1}")
    _sum(net, names[1], (f"{w_h}_h_{t - 1}", f"{w_x}_x_{t}") + ((f"{w_x}_x_static",) if static else ()), names[2])


def fill_rnn(net, t_steps, n, num_output, static, rp):
    """RNNLayer::FillUnrolledNet (rnn_layer.cpp:41-231): names (recur inputs, recur outputs, outputs)."""
    cont_slice, x_slice = _common(net, t_steps, n, num_output, num_output, static, rp, ("h_0",), "W_xh", "b_h")
    concat = []
    for t in range(1, t_steps + 1):
        _step_input(net, t, (cont_slice, x_slice), num_output, rp, static, "W_hh", "W_xh",
                    (f"W_hh_h_{t - 1}", f"h_input_sum_{t}", f"h_neuron_input_{t}"))
        _layer(net, f"h_neuron_{t}", "TanH", (f"h_neuron_input_{t}",), (f"h_{t}",))
        o = _transform(net, f"W_ho_h_{t}", num_output, rp, True)
        o.param.add().name = "W_ho"
        o.param.add().name = "b_o"
        o.bottom.append(f"h_{t}")
        o.top.append(f"W_ho_h_{t}")
        _layer(net, f"o_neuron_{t}", "TanH", (f"W_ho_h_{t}",), (f"o_{t}",))
        concat.append(f"o_{t}")
    _layer(net, "o_concat", "Concat", concat, ("o",)).concat_param.axis = 0
    return ("h_0",), (f"h_{t_steps}",), ("o",)


def fill_lstm(net, t_steps, n, num_output, static, rp):
    """LSTMLayer::FillUnrolledNet (lstm_layer.cpp:46-239): names (recur inputs, recur outputs, outputs).
    Its Input makes c_0 before h_0; the Split that copies c_T and that Input have no name of their
    own (only the layer's prefix)."""
    rows = 4 * num_output
    cont_slice, x_slice = _common(net, t_steps, n, num_output, rows, static, rp, ("c_0", "h_0"), "W_xc", "b_c")
    concat = []
    for t in range(1, t_steps + 1):
        _step_input(net, t, (cont_slice, x_slice), rows, rp, static, "W_hc", "W_xc",
                    (f"transform_{t}", f"gate_input_{t}", f"gate_input_{t}"))
        _layer(net, f"unit_{t}", "LSTMUnit", (f"c_{t - 1}", f"gate_input_{t}", f"cont_{t}"), (f"c_{t}", f"h_{t}"))
        concat.append(f"h_{t}")
    _layer(net, None, "Split", (f"c_{t_steps}",), ("c_T",))
    _layer(net, "h_concat", "Concat", concat, ("h",)).concat_param.axis = 0
    return ("h_0", "c_0"), (f"h_{t_steps}", "c_T"), ("h",)


class _NeverRun:
    """A pseudoloss as the unrolled net holds it: set up by Net::Init, never run (Forward stops before
    it, ForwardTo; Backward starts after it, BackwardFrom: recurrent_layer.cpp:267, 287). It answers
    for its layer object but for its touches, which are its setup's alone."""

    def __init__(self, impl):
        self._impl = impl

    def __getattr__(self, name):
        return getattr(self._impl, name)

    def touches(self, run):
        return [t for t in self._impl.touches(run) if t.stage == "setup"]


def build_unrolled(layer, bottoms, name=None):
    """(Plan, the built net) for `layer` (named `name`, if not as its object) on these bottom shapes:
    Net::Init of the plan, in phase TRAIN, with the classes of the layer's net's schema (a fork's
    version of a type where it has one); its pseudolosses never run (_NeverRun), nor the layer's `never_run`
    layers before them (a fork's last_layer_index_ that stops earlier), so walking it forward and backward is
    walking what RecurrentLayer's Forward and Backward run."""
    from ..errors import InputError
    from ..net.build import build

    p = plan(layer, bottoms, name)
    _, NetState = _schema_of(layer.lp._msg)
    try:
        net = build(p.param, NetState(), schema=layer.ctx.schema)
    except InputError as e:  # (the layer's own checks come first: a failed inner CHECK is the layer's)
        layer.fail(f"its unrolled net does not build: {e.message}")
    last = len(net.layers) - len(p.outputs) - getattr(layer, "never_run", 0)
    net.layers[last:] = [dataclasses.replace(node, impl=_NeverRun(node.impl)) for node in net.layers[last:]]
    return p, net


def _roots(net):
    """{(blob index, part): the blob whose storage it is}, for the blobs whose data or diff a layer
    shares with its bottom's (a Concat or Slice of one blob, Reshape, Split's data), as
    protoaudit.memory.buffers joins them; a blob not listed is its own."""
    root = {}
    for node in net.layers:
        for top_j, bottom_j, part in node.impl.shares():
            top, bottom = node.tops[top_j], node.bottoms[bottom_j]
            if top != bottom:
                root[(top, part)] = root.get((bottom, part), bottom)
    return root


def outer_blobs(p, net, exposed, roots):
    """{(inner blob's owner name, part): (what, index)}: the inner storages that are the outer layer's
    blobs (Reshape's ShareData/ShareDiff, Forward's ShareData of the exposed tops)."""
    shared = {}

    def share(name, part, what, index):
        shared[(_owner(net, name, part, roots), part)] = (what, index)

    share("x", "data", "bottom", 0)
    share("x", "diff", "bottom", 0)
    share("cont", "data", "bottom", 1)
    if p.static:
        share("x_static", "data", "bottom", 2)
        share("x_static", "diff", "bottom", 2)
    for j, name in enumerate(p.outputs):
        share(name, "data", "top", j)
        share(name, "diff", "top", j)
    if exposed:
        first = 2 + p.static
        for j, name in enumerate(p.recur_inputs):
            share(name, "data", "bottom", first + j)
        for j, name in enumerate(p.recur_outputs):
            share(name, "data", "top", len(p.outputs) + j)
    return shared


def _owner(net, name, part, roots):
    """The name of the blob whose `part` blob `name`'s is (as a Buffer's owner names it)."""
    index = next(b.index for b in net.blobs if b.name == name)
    return net.blobs[roots.get((index, part), index)].name


def unrolled_touches(layer, run, p, net):
    """The outer layer's touches from its unrolled net `net` (of Plan `p`, build_unrolled's) in this run:
    setup (Net::Init of the whole net, pseudolosses included), the forward and backward up to the
    pseudolosses."""
    from ..memory.buffers import asked_engine, net_buffers

    mode = run.mode
    buffers = net_buffers(net, mode=mode, engine="caffe")
    if mode == "gpu" and asked_engine(net, mode) and run.engine != "caffe":
        buffers = net_buffers(net, mode=mode, engine=run.engine)  # (an inner layer asked: else one walk serves both)
    roots = _roots(net)
    shared = outer_blobs(p, net, layer.num_exposed, roots)
    more = getattr(layer, "more_shared", None)  # a fork's RecurrentLayer that shares more (DAVSOD's ConvLSTM)
    if more is not None:
        for (name, part), (what, index) in more(p).items():
            shared[(_owner(net, name, part, roots), part)] = (what, index)
    params = {}  # an owned inner parameter "layer.paramK" -> the outer parameter it is (blobs_, :144-154)
    for node in net.layers:
        for k, q in enumerate(node.params):
            if q.owner is None:
                params[f"{node.name}.param{k}"] = len(params)
    prefix = layer.lp.name + "_" if layer.lp.name else ""  # (the inner layers' names begin with it)
    zeroed = {(_owner(net, name, "diff", roots), "diff") for name in p.recur_outputs}  # (:166-171)
    out = []
    for b in buffers:
        part = "diff" if b.kind in ("top diff", "param diff") else "data"
        stage = b.touch
        if b.kind in ("top data", "top diff") and (b.owner, part) in zeroed and mode == "cpu":
            stage = "setup"  # zeroed on the host at setup: in CPU mode that is this very buffer
            zeroed.discard((b.owner, part))
        if b.kind in ("param data", "param diff"):
            out.append(touch.param(params[b.owner], part, stage))
        elif b.kind in ("top data", "top diff") and (b.owner, part) in shared:
            what, index = shared[(b.owner, part)]
            out.append((touch.bottom if what == "bottom" else touch.top)(index, part, stage))
        elif b.kind in ("top data", "top diff"):
            out.append(touch.buffer(f"{PREFIX}{b.owner} {part}", b.elements, stage, per_sample=bool(b.about),
                                    note=b.note, device=b.device))
        else:
            owner = b.owner[len(prefix):] if b.owner.startswith(prefix) else b.owner
            out.append(touch.buffer(PREFIX + owner, b.elements, stage, per_sample=b.per_sample, itemsize=b.itemsize,
                                    kind=b.kind, note=b.note, device=b.device))
    for owner, part in sorted(zeroed):  # never touched on the host but by that zeroing (or a GPU run's copy)
        blob = next(x for x in net.blobs if x.name == owner)
        if (owner, part) in shared and mode == "cpu":
            what, index = shared[(owner, part)]
            out.insert(0, (touch.bottom if what == "bottom" else touch.top)(index, part, "setup"))
        else:
            out.insert(0, touch.buffer(f"{PREFIX}{owner} diff" + (" (host)" if mode == "gpu" else ""), blob.count,
                                       "setup", per_sample=True, note="x".join(map(str, blob.shape)), device="host"))
    return out


def objects(layer, p, net):
    """(bytes, SyncedMemory objects freed by the first forward): the C++ objects the unrolled net
    `net` (of Plan `p`) adds to the layer's (protoaudit.memory.host, which sizes the layer object, its
    LayerParameter, its blobs_ vector and its parameters as any layer's).

    At setup: the Net and everything Net::Init makes (host_bytes of the net, its parameters among
    them: so the layer's parameter Blobs, which host sizes as the layer's own, are not counted
    again; its blobs_ is pushed back, :152, where host takes a resize); recur_input_blobs_,
    recur_output_blobs_ and output_blobs_ (pointers, resized, :121-133); less the SyncedMemory objects
    Reshape's sharing frees: x's data and diff, cont's data, x_static's data and diff, the exposed
    states' data, each top's data and diff (the layer's tops, sized by host as any top). Its first
    forward: what the unrolled net's own forward frees by sharing (its Splits), and with
    expose_hidden, the exposed tops' data (ShareData, :268-273)."""
    from ..memory.host import SYNCED, host_bytes, new_blob
    from .cxx import POINTER, grown

    setup = host_bytes(net, forward=False, rng_made=True)
    frees = (setup - host_bytes(net, backward=False, rng_made=True)) // SYNCED
    states = len(p.recur_inputs)
    setup += POINTER * (2 * states + len(p.outputs))
    owned = [q for node in net.layers for q in node.params if q.owner is None]
    setup += 16 * (grown(len(owned)) - len(owned)) - sum(new_blob(len(q.shape), 0 not in q.shape) for q in owned)
    exposed = states if layer.num_exposed else 0
    # of one timestep, cont_slice's one top took cont's data when Net::Init reshaped it (slice_layer.cpp:
    # 71-74), so cont's own SyncedMemory lives until the first forward's Reshape shares the top again
    held = 1 if p.timesteps == 1 else 0
    setup -= SYNCED * (2 + 1 - held + 2 * p.static + exposed + 2 * len(p.outputs))
    return setup, frees + exposed + held


# --- many timesteps: the net's pattern, one timestep like the next ------------------------------------
# Up to STEPS_BUILT timesteps the unrolled net is built whole (some 8 layers a timestep; 2,048 take a
# second). Past that (a largest-batch search where the batch is the timesteps; 30,000 would be a net
# of 240,000 layers), what it allocates is worked out from the nets of BASES timesteps: FillUnrolledNet
# makes every timestep's layers alike, so each buffer of a timestep between the first and the last
# has its like in every other, and the buffers sized by T (x's transform, the output, the bias and
# sum multipliers) grow by the same elements a timestep. Each kind of buffer is counted once, by its
# name with the timestep numbers replaced (t, T, T-1: "unrolled W_hc_h_t data"), its elements at T
# read off the line through the three nets, which must be straight (else the net is built whole).
STEPS_BUILT = 2048
BASES = (8, 9, 10)


def steps(bottoms):
    """T, the timesteps of a recurrent layer's bottoms."""
    return bottoms[0][0]


def _at(bottoms, t):
    """The bottoms with T timesteps instead (x's and cont's first axis; a static input and the
    exposed states have none)."""
    return [(t,) + tuple(b[1:]) if j < 2 else tuple(b) for j, b in enumerate(bottoms)]


def _role(name, t, prefix):
    """A buffer's name with its timestep numbers replaced: t, or T and T-1 for the last two, 0 and 1
    as they are (a Split's and a top's index are 0 or 1 too); the layer's own name taken out first."""
    name = name.replace(prefix, "") if prefix else name

    def number(m):
        n = int(m.group())
        return m.group() if n <= 1 else "T" if n == t else "T-1" if n == t - 1 else "t"

    return re.sub(r"\d+", number, name)


def _pattern(layer, run, t):
    """(outer touches, {role: [elements, buffers, first buffer]}) of the unrolled net of `t` timesteps."""
    p, net = layer.unrolled(_at(run.bottoms, t))
    prefix = layer.lp.name + "_" if layer.lp.name else ""
    outer, roles = [], {}
    for x in unrolled_touches(layer, run, p, net):
        if x.what != "buffer":
            outer.append((x.what, x.index, x.part, x.stage))
            continue
        key = (_role(x.name, t, prefix), x.stage, x.itemsize, x.kind, x.device, x.per_sample)
        found = roles.setdefault(key, [0, 0, x])
        found[0] += x.elements
        found[1] += 1
    return outer, roles


def periodic_touches(layer, run):
    """unrolled_touches for T past STEPS_BUILT, from the nets of BASES timesteps; None where they are
    not one pattern (then the net is built whole)."""
    t = steps(run.bottoms)
    patterns = [_pattern(layer, run, base) for base in BASES]
    (outer, roles), (outer1, roles1), (outer2, roles2) = patterns
    if not (outer == outer1 == outer2 and roles.keys() == roles1.keys() == roles2.keys()):
        return None
    a = BASES[0]
    out = [(touch.bottom if what == "bottom" else touch.top if what == "top" else touch.param)(index, part, stage)
           for what, index, part, stage in outer]
    names = {}
    for key in roles:
        names.setdefault(key[0], []).append(key)
    for key, (elements, count, first) in roles.items():
        per = [roles1[key][0] - elements, roles2[key][0] - roles1[key][0]]
        more = [roles1[key][1] - count, roles2[key][1] - roles1[key][1]]
        if per[0] != per[1] or more[0] != more[1]:
            return None
        role, stage, itemsize, kind, device, per_sample = key
        name = role if len(names[role]) == 1 else f"{role} ({stage}, {device})"
        total = elements + (t - a) * per[0]
        n = count + (t - a) * more[0]
        note = first.note if n == 1 and not per[0] else f"{n:,} buffers, {total:,} elements" if n > 1 else ""
        out.append(touch.buffer(name, total, stage, per_sample=per_sample, itemsize=itemsize, kind=kind,
                                note=note, device=device))
    return out


def periodic_objects(layer, name, bottoms):
    """objects for T past STEPS_BUILT, read off the line through the nets of BASES[:2] timesteps: the
    SyncedMemory objects freed exactly (one pattern a timestep); the bytes within about 10% (the Net's
    vectors grow by doubling, and longer timestep numbers make longer names), as the layer's
    assumption says."""
    t = steps(bottoms)
    (a, fa), (b, fb) = [objects(layer, *build_unrolled(layer, _at(bottoms, base), name)) for base in BASES[:2]]
    return a + (t - BASES[0]) * (b - a), fa + (t - BASES[0]) * (fb - fa)
