"""What Caffe's Net::Init builds from a filtered V2 net: splits, blobs, shapes, params, backward flags.

This follows net.cpp step by step (InsertSplits, AppendBottom/AppendTop/AppendParam, SetUp, the
loss-contribution pass, force_backward) so the layer list, the names and the order are Caffe's.
"""
import functools
import os
import re
from collections import Counter
from math import prod
from dataclasses import dataclass, field, replace

from .. import layers as _layers  # noqa: F401  (registers every layer type)
from ..errors import InputError, closest
from ..layers.base import (NET_INPUT, REGISTRY, Assumption, Context, Layer, MissingShape, ShapeOrigin, count,
                           fork_layers, fork_notes, one_pixel)
from ..layers.data import DataSource, Declared, Logged, Unread, named_like_a_loss
from ..options import INT_MAX, MAX_AXES
from ..records import RECORD
from .netstate import included, layer_phase, phase_name
from .splits import insert_splits, wiring


@dataclass(**RECORD)
class Blob:
    """A blob of the net: one per distinct top name (in-place tops reuse their bottom's blob)."""

    index: int
    name: str
    shape: tuple = ()
    producer: int = -1  # index of the layer that first made it; -1 for a legacy net input
    need_backward: bool = False

    @property
    def count(self):
        return count(self.shape)


@dataclass(**RECORD)
class ParamBlob:
    """A layer's parameter blob, and whether it is this net's own or shares another's by name."""

    shape: tuple
    name: str = ""  # the ParamSpec name, if any
    owner: tuple = None  # (layer index, param index) of the owner when shared, else None
    lr_mult: float = 1.0
    decay_mult: float = 1.0
    need_backward: bool = True  # lr_mult is not 0: Net::Init's need_backward for the layer
    # longriyao/caffe_GAN's ParamSpec.param_propagate_down where the file gives it: the layer's
    # param_propagate_down_ flag, over lr_mult (its net.cpp:178-184); None: the flag is need_backward
    down: bool = None

    @property
    def count(self):
        return count(self.shape)

    @property
    def propagates(self):
        """Whether the layer's backward writes this param's diff (Layer::param_propagate_down)."""
        return self.need_backward if self.down is None else self.down


@dataclass(**RECORD)
class LayerNode:
    """One layer of the built net, with everything net.cpp records about it."""

    index: int
    name: str
    type: str
    lp: object  # the LayerParameter it was built from (after splits)
    impl: object  # the registered Layer instance
    line: int = None  # where the layer starts in the user's file (None for inserted splits)
    # tuples of their exact size, not lists: a 100,000-layer file's two nets hold some 220,000 of each
    bottoms: tuple = ()  # blob indices
    tops: tuple = ()  # blob indices
    in_place: tuple = ()  # per top: is it its bottom's blob
    bottom_shapes: tuple = ()
    top_shapes: tuple = ()
    loss_weights: tuple = ()  # per top
    params: tuple = ()  # ParamBlob
    need_backward: bool = False
    bottom_need_backward: tuple = ()
    memory_after: int = 0  # Caffe's cumulative "Memory required for data" after this layer
    form: bytes = b""  # its LayerParameter less its names (form_of): layers alike have one

    @property
    def is_split(self):
        return self.type == "Split" and self.line is None


@dataclass
class Net:
    """The built net. `graph` has a node per layer and per blob version, edges in data-flow order
    (made when first asked for: most audits never walk it)."""

    name: str
    phase: str
    layers: list
    blobs: list
    inputs: list  # blob indices of legacy net-level inputs (forks without the Input layer)
    force_backward: bool
    path: str = None
    assumptions: list = field(default_factory=list)  # protoaudit.layers.base.Assumption
    origins: list = field(default_factory=list)  # ShapeOrigin: where each data top's shape came from
    context: Context = field(default=None, repr=False)  # what its layers were made with (see rebatched)

    @functools.cached_property
    def graph(self):
        return _graph(self.layers, self.blobs)

    @property
    def batch(self):
        """The first dimension of the first data source's first top (or net input): the batch. A layer
        of no bottoms whose tops are declared or logged (a Python data layer's) is a data source too."""
        for index in self.inputs:
            if self.blobs[index].shape:
                return self.blobs[index].shape[0]
        for node in self.layers:
            source = getattr(node.impl, "data_source", False) or (not node.bottoms and isinstance(node.impl, Declared))
            if source and node.top_shapes and node.top_shapes[0]:
                return node.top_shapes[0][0]
        return None

    @property
    def memory_required_for_data(self):
        return self.layers[-1].memory_after if self.layers else 0

    def layer(self, name):
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(name)


def build(net_param, state, *, inputs=None, batch=None, schema="bvlc", lines=None, path=None, keep_own_batch=False,
          root=None, logged=None, logged_from="", defines=None, read=None, logged_layers=None, guesses=(),
          sources=None, labels=(), logged_repeated=None, strict=False, read_with=None, _varied=False):
    """Build the net `net_param` (V2, upgraded) for `state`, as Caffe's Net::Init would. Tops
    whose shape cannot be known are collected, and raised at the end as one ShapesNeeded.
    `logged` are shapes a Caffe log gives for data tops (`logged_from` says where), under --input;
    `logged_layers` the layers the log of this very net set up, by name (a layer of a type with no
    rule takes its tops from there: Logged), and `logged_repeated` those of a name it set up more than
    once, in order (the k-th layer of the name takes the k-th); `guesses`, the Assumptions that `logged` shapes stand on
    where they were not read from a file (a layer's CHECK that fails on them says so); `sources`, where
    each of them comes from, by top (default: `logged_from` for all). `labels`: logged tops whose size
    was assumed, which a loss or accuracy that stops on them as its label may size instead (LabelSized).
    `strict` (--strict): a shape a layer would take on a guess is asked for instead (Context.strict).
    `read`: a dict the caller keeps for the builds of one message it does not change between them
    (a file's TRAIN and TEST nets): the layers' wiring is read from the message once, for them all.
    `read_with`: the name of the user's caffe.proto that read the file (--caffe-proto), for messages.
    `_varied`: this build tries the assumed sizes at others (stops_anyway, below): it says no more about them."""
    given = dict(inputs or {})

    def stops_anyway(lp, error, assumed):
        """Whether layer `lp` stops with the same `error` when the `assumed` origins' tops are given at
        other sizes (_varied_shape), at another batch (the message's shapes then read at that batch) and
        at another rank (_other_rank): then nothing assumed is what stops it (a rank the net's own layers
        make)."""
        def stops(varied, same):
            try:
                build(net_param, state, inputs={**given, **varied}, batch=batch, schema=schema, lines=lines,
                      path=path, keep_own_batch=keep_own_batch, root=root, logged=logged, logged_from=logged_from,
                      defines=defines, logged_layers=logged_layers, guesses=guesses, sources=sources, labels=labels,
                      logged_repeated=logged_repeated, strict=strict, read=read, read_with=read_with,
                      _varied=True)
            except InputError as other:
                return other.layer == lp.name and same(other.message) == error.message
            except Exception:  # (a net that fails otherwise at other sizes: the assumed size stays blamed)
                return False
            return False

        batches = {o.shape[0] for o in assumed if o.shape}
        at_other_batch = {o.top: (o.shape[0] + 1,) + tuple(o.shape[1:]) for o in assumed if o.shape}

        def read_back(message):
            for b in batches:
                message = message.replace(f"({b + 1},", f"({b},")
            return message

        return (stops({o.top: _varied_shape(o.shape) for o in assumed}, lambda m: m)
                and stops(at_other_batch, read_back)
                and stops({o.top: _other_rank(o.shape) for o in assumed}, lambda m: m))

    logged = {top: tuple(shape) for top, shape in (logged or {}).items() if top not in given}
    inputs = {**logged, **given}
    layers, wires, forms = _wiring_of(net_param, read)
    kept, kept_wires, kept_lines, kept_forms = [], [], [], []
    left_out = {}  # top -> the first layer the NetState leaves out that makes it
    for i, lp in enumerate(layers):
        try:
            keep = included(lp, state)
        except InputError as e:
            raise e.located(file=path, line=_line(lines, i)) from None
        if keep:
            kept.append(lp)
            kept_wires.append(wires[i])
            kept_lines.append(_line(lines, i))
            kept_forms.append(forms[i])
        else:
            for top in lp.top:
                left_out.setdefault(top, lp)
    holder = type(net_param)()  # the splits, and the layers whose bottoms they rename
    planned = insert_splits(kept, kept_wires, list(net_param.input), holder)
    phase = phase_name(state)
    builder = _Builder(phase, inputs, batch, schema, path, keep_own_batch, root, defines)
    builder.ctx.input_sources = {**dict.fromkeys(logged, logged_from or "Caffe's log"), **(sources or {})}
    builder.ctx.assumptions.extend(guesses)
    builder.ctx.logged_layers = dict(logged_layers or {})
    builder.repeated = {name: list(found) for name, found in (logged_repeated or {}).items()}
    builder.ctx.read = frozenset(name for _, wire, _ in planned for name in wire[2])
    builder.ctx.strict = strict
    builder.ctx.read_with = read_with
    builder.ctx.layers = tuple(lp for lp, _, _ in planned)
    builder.planned = planned
    builder.left_out, builder.stages = left_out, tuple(state.stage)
    builder.add_legacy_inputs(net_param)
    for lp, wire, src in planned:
        line = kept_lines[src] if src is not None else None
        try:
            if not builder.waits(lp, wire, line):
                # a split, or a layer whose bottoms a split renamed, is a new message (insert_splits)
                form = kept_forms[src] if src is not None and lp is kept[src] else form_of(lp, builder.forms)
                builder.add_layer(lp, wire, line, src is None, form)
        except MissingShape as m:
            builder.missing(lp, line, m)
        except InputError as e:
            label = (builder.label_to_size(lp, labels) or builder.label_to_fit(lp, labels)
                     if labels and not isinstance(e, (Unwired, Miscounted)) else None)
            if label is not None:
                raise label from None
            if not isinstance(e, (Unwired, Miscounted)):  # a layer's own CHECK: say what stands behind it
                upstream = builder.upstream(lp)
                assumed = [o for o in builder.ctx.origins if o.source.startswith("assumed")]
                behind = any(o.top in upstream for o in assumed)
                anyway = behind and not _varied and stops_anyway(lp, e, [o for o in assumed if o.top not in given])
                behind = behind and not anyway
                e.fix = _behind_check(builder.ctx, lp, e.fix, set() if anyway else upstream)
                if behind:
                    e.assumed = [(o.layer, o.top, o.shape) for o in assumed]
            raise e.located(file=path, line=line, layer=lp.name) from None
    if builder.needs:
        raise ShapesNeeded(builder.needs, path)
    unused = set(given) - builder.ctx.used_inputs - {builder.blobs[i].name for i in builder.inputs}
    if unused:
        names = ", ".join(sorted(unused))
        raise InputError(
            f"--input names {names}, which no data layer or net input of the {phase} net produces",
            file=path,
            fix="--input takes the name of a top of a data or Input layer",
        )
    builder.backward_pass(net_param.force_backward)
    return Net(
        name=net_param.name,
        phase=phase,
        layers=builder.layers,
        blobs=builder.blobs,
        inputs=builder.inputs,
        force_backward=net_param.force_backward,
        path=path,
        assumptions=_borrowed(builder.layers, schema) + fork_notes(schema, builder.layers) + builder.ctx.assumptions,
        origins=builder.ctx.origins,
        context=builder.ctx,
    )


def _varied_shape(shape):
    """An assumed top's shape at other sizes, its batch, channels and rank kept: each axis after the
    second one twice as large and one more (a vector's length, where it has two axes; a label's count
    is its batch)."""
    shape = tuple(shape)
    if len(shape) <= 1:
        return shape
    start = 2 if len(shape) > 2 else 1
    return shape[:start] + tuple(2 * d + 1 for d in shape[start:])  # (no pooling's rounding maps both to one)


def _other_rank(shape):
    """An assumed top's shape with other axes: fewer than four padded to four with ones (a vector as
    an image of one pixel), else one more of size one."""
    shape = tuple(shape)
    return shape + (1,) * (4 - len(shape)) if len(shape) < 4 else shape + (1,)


class Rebuild(Exception):
    """A net `rebatched` cannot make again from the built one: build it from its file."""


def _behind_check(ctx, lp, fix, upstream):
    """What stands behind a layer's failed CHECK, after the layer's own `fix` (if any): a shape
    protoaudit assumed for a data top that feeds it (a Python data layer's defaults; `upstream`, the
    names of the blobs it reads, directly or not), which the user's real sizes replace; else, with
    no fix of its own, the file itself."""
    assumed = {o.layer for o in ctx.origins if o.source.startswith("assumed") and o.top in upstream}
    # (and a shape said as an assumption of the top itself: one taken from a deploy file beside the net)
    guesses = [a for a in ctx.assumptions
               if a.layer in assumed or any(a.what.startswith(f"top '{t}' ") for t in upstream)]
    if not guesses and (label := _unseen_label(ctx, upstream)) is not None:
        return ((f"{fix}; but first: " if fix else "") + f"top '{label.top}' of layer '{label.layer}' is "
                f"{'x'.join(map(str, label.shape))}, one label per record as BVLC's Data layer makes it; its dataset "
                "is not on this machine, and a fork's Data layer may keep more values per record (PoseNet's Caffe: "
                f"the record's float_data): give its shape, --input {label.top}={label.shape[0]}xK")
    if not guesses:
        return fix or f"Caffe stops here too: fix this {lp.type} layer's parameters or the layers that feed it"
    said = _said_once(guesses)
    flags = "; ".join(a.override for a in guesses)
    return ((f"{fix}; but first: " if fix else "") + f"the shapes here follow from a size protoaudit assumed, not "
            f"from the file ({said}); give the size your data has: {flags}")


def _said_once(guesses):
    """'layer L: what' of each guess, where a layer's tops were taken at one shape for one reason said once
    (a Python data layer's three tops each assumed an image: one reason, not three)."""
    groups = {}  # (layer, shape, why) -> tops, in the guesses' order
    for a in guesses:
        m = _TOP_IS.match(a.what)
        groups.setdefault((a.layer, *(m.group(2, 3) if m else (None, a.what))), []).append(m.group(1) if m else None)
    parts = []
    for (layer, shape, why), tops in groups.items():
        if shape is None:
            parts.append(f"layer '{layer}': {why}")
        else:
            named = ", ".join(f"'{t}'" for t in tops)
            parts.append(f"layer '{layer}': {'top' if len(tops) == 1 else 'tops'} {named} "
                         f"{'is' if len(tops) == 1 else 'are'} {shape}: {why}")
    return "; ".join(parts)


_TOP_IS = re.compile(r"top '([^']*)' is ([^:\s]+): (.*)$", re.DOTALL)


def _unseen_label(ctx, upstream):
    """The ShapeOrigin of a Data layer's one-value label that a failed CHECK reads, where that layer's
    dataset is not on this machine (its data top's shape was assumed); else None."""
    unseen = {o.layer for o in ctx.origins if "assumed" in o.source}
    return next((o for o in ctx.origins if o.top in upstream and o.layer in unseen and len(o.shape) == 1
                 and o.source == DataSource.label_origin), None)


def rebatched(net, batch):
    """`net` as `build` makes it with its data sources at another `batch`, from the built net:
    Net::Init's filtering, splits, wiring and backward flags do not depend on the batch, so they
    are kept, and each layer is made again, reshaped and given its parameters in order. Raises
    Rebuild (or what a layer raises) where that is not the whole story: a net with legacy inputs
    (their shapes come from the file), a layer whose tops or parameters come out otherwise, a
    layer that refuses the batch, a blob over Caffe's limits (more than INT_MAX elements or
    kMaxBlobAxes axes); the caller then builds the net from its file, which says why."""
    old = net.context
    if old is None or net.inputs:
        raise Rebuild
    builder = _Builder(net.phase, {}, batch, old.schema, net.path)
    builder.ctx = ctx = replace(old, batch=batch, used_inputs=set(), assumptions=[], origins=[])
    builder.blobs = [Blob(b.index, b.name, b.shape, b.producer, b.need_backward) for b in net.blobs]
    builder.before = net.layers
    for node in net.layers:
        builder.again(node)
    if ctx.used_inputs != old.used_inputs:
        raise Rebuild
    return replace(net, layers=builder.layers, blobs=builder.blobs,
                   assumptions=_borrowed(builder.layers, old.schema) + fork_notes(old.schema, builder.layers)
                   + ctx.assumptions, origins=ctx.origins, context=ctx)


def _borrowed(layers, schema):
    """[the Assumption] of a net whose layer types no one shipped fork has ("A+B": A's caffe.proto
    read the file, B's classes size the types A lacks), naming them; [] for any other net."""
    if "+" not in schema:
        return []
    from ..read.schema import described

    first, *others = schema.split("+")
    own = fork_layers(first)
    types = sorted({n.type for n in layers if n.type not in own and n.type not in REGISTRY})
    if not types:
        return []
    whose = {t: next(o for o in others if t in fork_layers(o)) for t in types}
    said = "; ".join(f"{t} as {described(whose[t])} defines it" for t in types)
    return [Assumption("(file)", f"no Caffe fork protoaudit ships has every layer type of this file: it is read "
                       f"with the caffe.proto of {described(first)}, and sized with {said} (the same layer, "
                       "added to your Caffe)", "--caffe-proto FILE (your Caffe's own caffe.proto), or --fork NAME")]


@dataclass
class Need:
    """A layer whose tops need a shape from the user: why, and what is known of each."""

    layer: str
    type: str
    line: int
    reason: str
    tops: list  # (top name, known dims with None where unknown)
    absent: bool = False  # only a dataset that is not on this machine would give them
    fed: bool = False  # the layer has bottoms: once they are known, it may size its tops itself


class LabelSized(Exception):
    """A loss or accuracy stops on labels whose shapes were assumed (their dataset is not on this machine):
    `sized`, {data top: the shape it takes} for the layer to have the label it takes beside its
    prediction (Layer.label_for), traced back through the layers between (Layer.bottoms_for); or
    another layer stops on such data, and `how` says what shape lets it take them (Layer.fitting)."""

    def __init__(self, sized, layer, kind, prediction, how=None):
        super().__init__(", ".join(sized))
        self.sized, self.layer, self.kind, self.prediction, self.how = sized, layer, kind, prediction, how


class Unwired(InputError):
    """A bottom no earlier layer makes: the file's wiring, which no assumed size explains."""


class Miscounted(InputError):
    """A layer given more or fewer bottoms or tops than its type takes: the file's, which no assumed
    size explains."""


class OtherPhase(Unwired):
    """A bottom made only by a layer of the other phase (a deploy file whose reshaping layers are
    TEST-only): the audit of a plain net file may build the file in that phase instead."""


class StageNeeded(Unwired):
    """A bottom made only by layers included in a stage the net's state lacks (DIGITS' nets keep
    their data layers so): `stages`, the stages that would include its maker."""

    def __init__(self, message, fix, stages, blob, maker):
        super().__init__(message, fix=fix)
        self.stages, self.blob, self.maker = stages, blob, maker


class ShapesNeeded(InputError):
    """Every top of a file's nets that needs --input, in one message with the flags to paste."""

    def __init__(self, needs, path):
        self.needs = list(needs)
        first = self.needs[0]
        if len(self.needs) == 1:
            super().__init__(first.reason, file=path, line=first.line, layer=first.layer, fix=self.flags())
        else:
            groups = {}  # layers that need a shape for the same reason (a fork's type used 12 times) told once
            for n in self.needs:
                groups.setdefault(n.reason, []).append(f"'{n.layer}'" + (f" (line {n.line})" if n.line else ""))
            where = "; ".join(("layer " if len(named) == 1 else "layers ") + ", ".join(named[:3])
                              + (f" and {len(named) - 3} more" if len(named) > 3 else "") + f": {reason}"
                              for reason, named in groups.items())
            super().__init__(f"{len(self.needs)} layers need a top shape protoaudit cannot find: {where}",
                             file=path, fix=self.flags())

    def flags(self):
        """Ready-to-paste --input flags, the known dimensions filled in (one per top name)."""
        seen, flags = set(), []
        for need in self.needs:
            for top, known in need.tops:
                if top in seen:
                    continue
                seen.add(top)
                flags.append(f"--input {top}={input_dims(known)}")
        return "give " + " ".join(flags)

    def merged(self, other):
        """This message and another net's, one need per layer name and top."""
        have = {(n.layer, tuple(t for t, _ in n.tops)) for n in self.needs}
        extra = [n for n in other.needs if (n.layer, tuple(t for t, _ in n.tops)) not in have]
        return ShapesNeeded(self.needs + extra, self.file)


def input_dims(known):
    """NxCxHxW with the known dimensions written in: (64, 3, None, None) -> 64x3xHxW; a volume's
    five axes NxCxDxHxW."""
    letters = "NCHW" if len(known) <= 4 else "NCDHW" if len(known) == 5 else [f"D{i}" for i in range(len(known))]
    known = tuple(known) or (None, None, None, None)
    return "x".join(str(d) if d is not None else letters[i] for i, d in enumerate(known))


def _wiring_of(net_param, read):
    """`net_param`'s LayerParameters, their wiring and their forms, read once for the message
    `read` was kept for."""
    known = read.get("wiring") if read is not None else None
    if known is None or known[0] is not net_param:
        layers = list(net_param.layer)
        forms = {}
        known = (net_param, layers, [wiring(lp) for lp in layers], [form_of(lp, forms) for lp in layers])
        if read is not None:
            read["wiring"] = known
    return known[1:]


def form_of(lp, forms):
    """The LayerParameter less its name and its blobs' names, serialized: what no layer reads to
    size anything besides its shapes, so layers of one form (and the same shapes and flags) are
    alike (protoaudit.memory.alike). `forms` keeps one object per form."""
    config = type(lp)()
    config.CopyFrom(lp)
    for name in ("name", "bottom", "top"):
        config.ClearField(name)
    form = config.SerializeToString()
    return forms.setdefault(form, form)


def _line(lines, i):
    return lines[i] if lines and i < len(lines) else None


class _Builder:
    """Net::Init's loop state: blobs by name, the blobs still unconsumed, the layers so far."""

    def __init__(self, phase, inputs, batch, schema, path, keep_own_batch=False, root=None, defines=None):
        self.ctx = Context(phase=phase, inputs=inputs, batch=batch, schema=schema, keep_own_batch=keep_own_batch,
                           path=path, root=root, defines=dict(defines or {}))
        self.needs = []  # Need: layers whose tops need a shape the user must give
        self.unknown = set()  # top names whose shapes wait on those
        self.layers = []
        self.blobs = []
        self.by_name = {}
        self.available = set()
        self.inputs = []
        self.memory = 0
        self.param_owner = {}  # param name -> (layer index, param index)
        self.planned = []  # every layer Net::Init will set up, for naming a later producer
        self.has_loss = None  # whether a planned layer is a loss (unread: found at the first need)
        self.left_out, self.stages = {}, ()  # top -> a layer the NetState leaves out that makes it; its stages
        self.before = []  # the layers of the net made again (rebatched)
        self.classes = {**REGISTRY, **fork_layers(schema)}  # layer_class's answers, as one table
        self.shapes = {}  # every shape made, and each layer's tuple of them: one object each (see _shared)
        self.flags = {}  # tuples of bools: in_place, bottom_need_backward
        self.weights = {}  # tuples of loss weights (floats: kept apart from bools, which compare equal)
        self.forms = {}  # the forms of the layers made here (splits, renamed copies): one object each
        # Layers alike (the same form, bottoms' shapes and in-place tops: _alike_key) are one layer
        # object, with its top and parameter shapes: what it answers (its touches, its C++ objects)
        # is asked once per likeness anyway (protoaudit.memory.alike), and it reads no name (its
        # errors name the first such layer, the one whose touches are asked)
        self.made = {}  # _alike_key -> (layer object, top shapes, parameter shapes)
        self.repeated = {}  # layer name -> the LoggedLayers of that name still to come (build's logged_repeated)
        self.alike = {}  # class -> whether its layers can be made once for those alike

    def new_blob(self, name, shape, producer):
        blob = Blob(len(self.blobs), name, tuple(shape), producer)
        self.blobs.append(blob)
        return blob

    def add_legacy_inputs(self, net):
        """Old Caffe (and forks before the Input layer) keep net inputs as blobs, uncounted."""
        if not net.input:
            return
        if net.input_dim and len(net.input_dim) != 4 * len(net.input):
            raise InputError("input_dim must give 4 numbers per input", fix="or use input_shape")
        if not net.input_dim and len(net.input_shape) != len(net.input):
            raise InputError("give exactly one input_shape per input")
        for i, name in enumerate(net.input):
            in_file = tuple(net.input_dim[4 * i : 4 * i + 4]) if net.input_dim else tuple(net.input_shape[i].dim)
            shape = in_file
            if name in self.ctx.inputs:  # --input, as for a data layer's top (Layer.override)
                self.ctx.used_inputs.add(name)
                shape = tuple(self.ctx.inputs[name])
            first = self.ctx.batch
            if first is None and self.ctx.keep_own_batch and in_file:
                first = in_file[0]
            if first is not None and shape:
                shape = (first,) + shape[1:]
            if shape:  # the report's "Data shape:" line, as a data layer's top has
                if name in self.ctx.inputs:
                    source = self.ctx.input_sources.get(name, "--input")
                else:
                    source = "the net's " + ("input_dim" if net.input_dim else "input_shape")
                    if in_file and shape[0] != in_file[0]:
                        source += f", batch {shape[0]} from --batch"
                    source += one_pixel(name, shape)
                self.ctx.origins.append(ShapeOrigin(NET_INPUT, name, shape, source))
            blob = self.new_blob(name, shape, -1)
            self.by_name[name] = blob.index
            self.available.add(name)
            self.inputs.append(blob.index)

    def waits(self, lp, wire, line):
        """Whether the layer reads a top whose shape is still unknown: then its own tops wait too
        (and a layer whose tops only the user can declare is asked for them now)."""
        if not self.unknown or not any(b in self.unknown for b in wire[2]):
            return False
        cls = self._class_of(lp, lp.top)
        undeclared = [t for t in lp.top if t not in self.ctx.inputs]
        if cls is None and undeclared and (typo := _typo(lp, self.ctx.schema)) is not None:
            raise typo
        if (cls is None and not self.unread(lp)) or (cls is not None and issubclass(cls, Declared) and undeclared
                                                     and cls.asks(lp)):
            ctx = self.ctx
            reason = (_unknown_type(lp, ctx.schema, self.unsized(), ctx.path, ctx.read_with).message if cls is None
                      else cls.why(lp))
            self.missing(lp, line, MissingShape(reason, [(t, ()) for t in undeclared]))
        self.unknown.update(lp.top)
        return True

    def unread(self, lp):
        """Whether `lp`, of a type with no rule, is sized as Unread: a loss or a metric at the net's end,
        with bottoms, whose tops no layer reads; a type named like a loss (...Loss), or any such layer of
        a net that has a loss (its known types' or a loss_weight) for it to sit beside."""
        if not (lp.bottom and lp.top) or any(t in self.ctx.read for t in lp.top):
            return False
        if named_like_a_loss(lp.type):
            return True
        if self.has_loss is None:
            self.has_loss = any(other.loss_weight or named_like_a_loss(other.type)
                                or getattr(self.classes.get(other.type), "loss_by_default", False)
                                for other, _, _ in self.planned)
        return self.has_loss

    def unsized(self):
        """The net's layers of types no class sizes."""
        return [lp for lp, _, _ in self.planned if lp.type not in self.classes]

    def missing(self, lp, line, m):
        self.needs.append(Need(lp.name, lp.type, line, m.reason, m.tops, m.absent, bool(lp.bottom)))
        self.unknown.update(lp.top)

    def _class_of(self, lp, tops):
        """The class that sizes a layer: its type's (the version the layer's form asks for,
        Layer.version); for a type with none, Logged where the log of this net gives its tops'
        shapes (unless --input declares them all), else None."""
        cls = self.classes.get(lp.type)
        if cls is not None:
            return cls.version(lp)
        ctx = self.ctx
        logged = ctx.logged_layers.get(lp.name)
        if (logged is not None and len(logged.shapes) == len(tops)
                and not all(t in ctx.inputs and t not in ctx.input_sources for t in tops)):
            return Logged
        return None

    def _logged_with(self, lp, tops):
        """Whether the log of this very net shows Caffe set the layer up with these tops (a fork that
        relaxed a layer's top count: an ImageData with no label top)."""
        logged = self.ctx.logged_layers.get(lp.name)
        return logged is not None and list(logged.tops) == list(tops)

    def add_layer(self, lp, wire, line, auto, form):
        """AppendBottom, SetUp, AppendTop and AppendParam for one layer: the LayerNode, its lists
        kept as tuples of their exact size (small ones shared: most layers have the same flags)."""
        layer_name, kind, bottom, tops, weights, propagate_down, phase = wire
        if self.repeated.get(lp.name):  # the next layer of a name the log set up more than once
            self.ctx.logged_layers[lp.name] = self.repeated[lp.name].pop(0)
        cls = self._class_of(lp, tops)
        if cls is None:
            ctx = self.ctx
            if not tops or any(t not in ctx.inputs for t in tops):
                typo = _typo(lp, ctx.schema)
                if typo is not None:
                    raise typo
                e = _unknown_type(lp, ctx.schema, self.unsized(), ctx.path, ctx.read_with)
                if not tops:
                    raise e
                if not self.unread(lp):
                    raise MissingShape(e.message, [(t, ()) for t in tops if t not in ctx.inputs])
                cls = Unread  # no layer reads its tops: build on around it (a custom loss), and say so
                ctx.assumptions.append(_unread_assumption(lp, e))
            else:
                cls = Declared  # the user declared its tops: build on, and report the gap
        if not bottom:
            propagate_down = ()
        elif propagate_down and len(propagate_down) != len(bottom):
            raise InputError("propagate_down must be given either 0 or bottom_size times")
        blobs, by_name, available = self.blobs, self.by_name, self.available
        bottoms, bottom_shapes, down = [], [], []
        for j, name in enumerate(bottom):
            if name not in available:
                raise self._unknown_bottom(lp, j, name)
            index = by_name[name]
            available.discard(name)
            blob = blobs[index]
            bottoms.append(index)
            bottom_shapes.append(blob.shape)
            down.append(blob.need_backward)
        need_backward = True in down
        named_in_place = tuple([j < len(bottom) and name == bottom[j] for j, name in enumerate(tops)])
        key = self._alike_key(cls, form, bottom_shapes, named_in_place)
        made = self.made.get(key) if key is not None else None
        impl = made[0] if made is not None else cls(lp, self._in_phase(phase))
        _check_counts(len(bottom), impl.exact_bottoms, impl.min_bottoms, impl.max_bottoms, "bottom")
        if impl.auto_top_blobs:
            needed = max(impl.min_tops or 0, impl.exact_tops or 0)
            tops += (None,) * max(0, needed - len(tops))
        try:
            _check_counts(len(tops), impl.exact_tops, impl.min_tops, impl.max_tops, "top")
        except Miscounted as e:
            if not self._logged_with(lp, tops):
                raise
            self.ctx.assumptions.append(Assumption(
                lp.name, f"{lp.type} {e.message.split(',')[0]} in BVLC Caffe; Caffe's log shows the run's own "
                f"Caffe set it up with {len(tops)}, as the file names them: its tops are counted as that log "
                "shows them", "--caffe-proto and the fork's layer, to check the count"))
        if impl.equal_bottoms_tops and len(tops) != len(bottom):
            raise InputError("needs as many tops as bottoms")
        if impl.walks_net:  # (its LayerSetUp, before Reshape)
            impl.walk_net(self.layers, blobs, bottoms)
        shapes = made[1] if made is not None else _top_shapes(impl, bottom_shapes, tops, bottom, self.shapes)
        index = len(self.layers)
        top_indices = []
        memory = self.memory
        for j, name in enumerate(tops):
            shape = shapes[j]
            if name is None:
                blob = Blob(len(blobs), "(automatic)", shape, index)
                blobs.append(blob)
            elif named_in_place[j]:
                blob = blobs[bottoms[j]]
                blob.shape = shape
                available.add(name)
            elif name in by_name:
                raise InputError(f"top blob '{name}' is produced by multiple sources",
                                 fix="give the top a new name, or the same name as the bottom at the same "
                                 "position for an in-place layer")
            else:
                by_name[name] = len(blobs)
                blob = Blob(len(blobs), name, shape, index)
                blobs.append(blob)
                available.add(name)
            top_indices.append(blob.index)
            memory += prod(shape)
        self.memory = memory
        weights = _loss_weights(impl, weights, len(tops))
        param_shapes = made[2] if made is not None else impl.param_shapes(list(bottom_shapes))
        if key is not None and made is None:
            self.made[key] = (impl, shapes, param_shapes)
        params = self._params(lp, impl, index, param_shapes)
        if not need_backward and params:
            need_backward = any(p.need_backward for p in params)
        if not impl.allows_backward:  # (liruoteng/FlowNet's net.cpp:180, 188)
            need_backward = False
        if need_backward:
            for i in top_indices:
                blobs[i].need_backward = True
        in_places = named_in_place + (False,) * (len(tops) - len(named_in_place))  # (automatic tops last)
        bottom_shapes = tuple(bottom_shapes)
        self.layers.append(LayerNode(index, layer_name, kind, lp, impl, None if auto else line, tuple(bottoms),
                                     tuple(top_indices), self._shared(in_places),
                                     self.shapes.setdefault(bottom_shapes, bottom_shapes),
                                     shapes, self.weights.setdefault(weights, weights), params, need_backward,
                                     self._shared(propagate_down or down), memory * 4, form))

    def _alike_key(self, cls, form, bottom_shapes, in_place):
        """What a layer object of class `cls` is made from, for those of layers alike
        (_Builder.made): its form (which holds its type and any phase of its own), its bottoms'
        shapes, and for each top it names whether it is in place. None for a layer that reads more:
        a data source (its tops' names, --input, --batch, its files), a layer whose tops are
        declared (their names), a layer that reads --define and notes what it assumed, a layer
        whose setup walks the net (Layer.walks_net: the layers behind its bottoms)."""
        alike = self.alike.get(cls)
        if alike is None:
            alike = self.alike[cls] = not (cls.data_source or cls.defines or cls.walks_net
                                           or issubclass(cls, Declared))
        return (form, tuple(bottom_shapes), in_place) if alike else None

    def _shared(self, values):
        """`values` (bools) as a tuple, the one made before if an equal one was (self.flags): a net's
        layers have few distinct flags, and one object each saves memory (loss weights and shapes
        are kept once each the same way, in self.weights and self.shapes)."""
        values = tuple(values)
        return self.flags.setdefault(values, values)

    def _in_phase(self, phase):
        """The net's Context, in `phase` if it is not None."""
        if phase is None:
            return self.ctx
        ctx = Context(**{**vars(self.ctx), "phase": phase})
        ctx.used_inputs = self.ctx.used_inputs
        return ctx

    def again(self, node):
        """`node` (of a built net) made again at this builder's batch, wired as it was (rebatched)."""
        lp, blobs = node.lp, self.blobs
        bottom_shapes = tuple([blobs[i].shape for i in node.bottoms])
        key = self._alike_key(type(node.impl), node.form, bottom_shapes, node.in_place[:len(lp.top)])
        made = self.made.get(key) if key is not None else None
        if made is None:
            impl = type(node.impl)(lp, self._in_phase(layer_phase(lp)))
            if impl.walks_net:
                impl.walk_net(self.layers, blobs, node.bottoms)
            shapes = _top_shapes(impl, bottom_shapes, node.tops, node.bottoms, self.shapes)
            shapes_now = impl.param_shapes(list(bottom_shapes))
            if key is not None:
                self.made[key] = (impl, shapes, shapes_now)
        else:
            impl, shapes, shapes_now = made
        memory = self.memory
        for i, shape in zip(node.tops, shapes):
            blobs[i].shape = shape
            n = count(shape)
            if n > INT_MAX or len(shape) > MAX_AXES:
                raise Rebuild  # a blob Caffe refuses (Blob::Reshape's CHECKs): building the file says so
            memory += n
        self.memory = memory
        params = node.params
        if not (shapes_now or params) or self._unchanged(node, shapes_now):
            for k, p in enumerate(params):  # (records made once and only read afterwards)
                if p.name and p.owner is None:
                    self.param_owner[p.name] = (node.index, k)
        else:
            params = self._params(lp, impl, node.index, shapes_now)
            if (len(params) != len(node.params) or any(p.owner != q.owner for p, q in zip(params, node.params))
                    or any(p.count > INT_MAX for p in params)):
                raise Rebuild
            for p, q in zip(params, node.params):  # as Net::Init's backward pass and force_backward left them
                p.need_backward, p.down = q.need_backward, q.down
        self.layers.append(LayerNode(node.index, node.name, node.type, lp, impl, node.line, node.bottoms, node.tops,
                                     node.in_place, bottom_shapes, shapes, node.loss_weights, params,
                                     node.need_backward, node.bottom_need_backward, memory * 4, node.form))

    def _unchanged(self, node, shapes):
        """Whether `node`'s parameter blobs stand as they are with these shapes: the same shapes, and
        any it shares are its owner's as this builder has them (kept as well)."""
        params, layers = node.params, self.layers
        if len(shapes) != len(params):
            return False
        for s, p in zip(shapes, params):  # (one loop: some 5,000 layers with parameters on a 10,000-layer net)
            if tuple(map(int, s)) != p.shape:
                return False
            owner = p.owner
            if owner is not None and not (owner[0] < len(layers) and layers[owner[0]].params
                                          is self.before[owner[0]].params):
                return False
        return True

    def _params(self, lp, impl, index, shapes):
        """The layer's parameter blobs (AppendParam) of these shapes (its param_shapes): names,
        sharing and lr_mult."""
        specs = lp.param
        if len(specs) > len(shapes) and not isinstance(impl, (Logged, Unread)):  # (its blobs are unknown, not absent)
            raise InputError(f"gives {len(specs)} param specs but the layer has {len(shapes)} parameter blobs",
                             fix="remove the extra param { } entries")
        if not shapes:
            return ()
        own = impl.param_specs()
        known, param_owner = self.shapes, self.param_owner
        params = []
        for k, shape in enumerate(shapes):
            shape = tuple(map(int, shape))
            # Net::Init reads the net's copy for need-backward; the solver, the layer's own copy
            need_backward = (specs[k].lr_mult if k < len(specs) else 1.0) != 0
            down = _param_propagate_down(specs[k]) if k < len(specs) else None
            if k < len(own):
                spec = own[k]
                p = ParamBlob(known.setdefault(shape, shape), spec.name, None, spec.lr_mult, spec.decay_mult,
                              need_backward, down)
            else:
                p = ParamBlob(known.setdefault(shape, shape), need_backward=need_backward, down=down)
            if p.name and p.name in param_owner:
                owner_layer, owner_k = param_owner[p.name]
                owner = self.layers[owner_layer].params[owner_k] if owner_layer < len(self.layers) else params[owner_k]
                strict = specs[k].share_mode == 0
                if (strict and owner.shape != p.shape) or count(owner.shape) != count(p.shape):
                    raise InputError(
                        f"cannot share param '{p.name}': its shape {p.shape} differs from {owner.shape} "
                        f"in layer '{self.layers[owner_layer].name if owner_layer < len(self.layers) else lp.name}'",
                        fix="shared params need the same shape (or the same count with share_mode: PERMISSIVE)",
                    )
                p.owner = (owner_layer, owner_k)
            elif p.name:
                param_owner[p.name] = (index, k)
            params.append(p)
        return tuple(params)

    def _unknown_bottom(self, lp, j, name):
        if name in self.by_name:
            return InputError(f"bottom '{name}' was already consumed",
                              fix="Caffe inserts splits only for tops used by several layers; check the names")
        later = next((wire[0] for _, wire, _ in self.planned[len(self.layers) + 1:] if name in wire[3]), None)
        if later is not None:
            return Unwired(
                f"bottom '{name}' (bottom {j}) is produced only by a later layer, '{later}'",
                fix="Caffe builds layers in file order and a net cannot have a cycle: move the producing "
                "layer before this one, or break the cycle",
            )
        maker = self.left_out.get(name)
        if maker is not None:  # made only in another phase or stage: DIGITS' nets keep their data layers so
            stages = sorted({st for rule in maker.include for st in rule.stage})
            message = (f"unknown bottom blob '{name}' (bottom {j}): the layer that makes it, '{maker.name}', is "
                       f"not in this net's phase ({self.ctx.phase}) and stages ({', '.join(self.stages) or 'none'})")
            if stages:
                return StageNeeded(message, "give its stage, as the solver or the tool that trains it does: "
                                   + " or ".join(f"--stage {st}" for st in stages), stages, name, maker.name)
            return OtherPhase(message, fix="give the phase it is in (--phase), or include it in this one")
        near = closest(name, [n for n in self.available if "_split_" not in n])  # not a split Caffe named
        ruled = [r for r in lp.include if r.HasField("phase")]
        if near is None and len(ruled) == len(lp.include) == 1 and not lp.exclude:
            # no layer makes it nor a name like it, and its reader is in this phase only (a deploy file
            # that keeps its TRAIN-only losses on labels no Input gives): the other phase's net leaves
            # the reader out
            other = "test" if str(self.ctx.phase).upper() == "TRAIN" else "train"
            return OtherPhase(f"unknown bottom blob '{name}' (bottom {j}): no layer makes it, and this layer is in "
                              f"the {self.ctx.phase} phase only",
                              fix=f"audit the net without it (--phase {other}), or add the layer that makes "
                                  f"'{name}'")
        return Unwired(
            f"unknown bottom blob '{name}' (bottom {j}): no earlier layer produces it",
            fix=(f"did you mean '{near}'? " if near else "") + "Caffe builds layers in file order: check the name, "
            "make sure the producing layer comes first and is included in this phase and stage, and that the net "
            "has no cycle",
        )

    def label_to_size(self, lp, labels):
        """LabelSized where `lp` reads as its labels (bottom 1, or the bottoms its class's
        `labels_beside` names) some of `labels`, directly or through layers that say what bottoms give
        a top of a shape (Layer.bottoms_for: a Split, a Slice, a Concat), and its class says what label
        its prediction (bottom 0) takes; where its class allows either first two bottoms to be the
        prediction (`label_either`: EuclideanLoss), the other way round too; else None."""
        cls = self.classes.get(lp.type)
        if cls is None or len(lp.bottom) < 2 or any(b not in self.by_name for b in lp.bottom):
            return None
        layer = cls(lp, self.ctx)
        for first, beside in [(0, layer.labels_beside)] + ([(1, (0,))] if layer.label_either else []):
            prediction = self.blobs[self.by_name[lp.bottom[first]]].shape
            shape = layer.label_for(prediction)
            if shape is None:
                return None
            shapes = shape if isinstance(shape, dict) else dict.fromkeys(beside, shape)
            wanted = []
            for j in beside:
                if j >= len(lp.bottom) or j not in shapes:
                    continue
                index = self.by_name[lp.bottom[j]]
                blob = self.blobs[index]
                # where the bottoms take shapes of their own (InfogainLoss's labels and H), a label the data
                # gives already, with as many values as the layer counts, is left as it is
                kept = isinstance(shape, dict) and blob.name not in labels and count(blob.shape) == count(shapes[j])
                wanted.append((index, None if kept else shapes[j]))
            sized = self._sized_each(wanted, labels)
            if sized:
                return LabelSized(sized, lp.name, lp.type, prediction)
        return None

    def label_to_fit(self, lp, labels):
        """LabelSized where `lp` stops on bottoms that are data among `labels` (or pieces of them,
        _kind_of), and its class says what shapes let it take them (Layer.fitting: a Concat, a Slice,
        an Eltwise, a Reshape); else None."""
        cls = self.classes.get(lp.type)
        if cls is None or any(b not in self.by_name for b in lp.bottom):
            return None
        blobs = [self.blobs[self.by_name[b]] for b in lp.bottom]
        kinds = [self._kind_of(b, labels) for b in blobs]
        fitted = cls(lp, self.ctx).fitting([b.shape for b in blobs], kinds) if any(kinds) else None
        if fitted is None:
            return None
        sized = self._sized_each([(self.by_name[b.name], want) for b, want in zip(blobs, fitted[0])], labels)
        return LabelSized(sized, lp.name, lp.type, None, how=fitted[1]) if sized else None

    def _kind_of(self, blob, labels):
        """"image" for a data layer's first top among `labels`, "label" for another, or a piece of one
        through layers of one bottom that say what bottom gives a top (a Slice, a Split); else None."""
        while blob.name not in labels:
            node = self.layers[blob.producer] if blob.producer >= 0 else None
            if node is None or len(node.bottoms) != 1 or type(node.impl).bottom_for is Layer.bottom_for:
                return None
            blob = self.blobs[node.bottoms[0]]
        first = blob.producer >= 0 and self.layers[blob.producer].tops[0] == blob.index
        return "image" if first else "label"

    def _sized(self, index, shape, labels):
        """{label top: shape} that gives blob `index` the shape `shape`, walking back to the tops in
        `labels`; {} where it has that shape already and is no label; None where no layer says how."""
        blob = self.blobs[index]
        if blob.name in labels:
            return {blob.name: shape}
        if tuple(blob.shape) == shape:
            return {}
        node = self.layers[blob.producer] if blob.producer >= 0 else None
        if node is None or not node.bottoms or index not in node.tops:
            return None
        wanted = node.impl.bottoms_for(node.tops.index(index), shape, [self.blobs[b].shape for b in node.bottoms],
                                       [self._kind_of(self.blobs[b], labels) for b in node.bottoms])
        return None if wanted is None else self._sized_each(list(zip(node.bottoms, wanted)), labels)

    def _sized_each(self, wanted, labels):
        """_sized for each (blob index, shape or None: left as it is), merged; None where one has none."""
        sized = {}
        for index, shape in wanted:
            found = self._sized(index, tuple(shape), labels) if shape is not None else {}
            if found is None:
                return None
            sized.update(found)
        return sized

    def upstream(self, lp):
        """The names of the blobs `lp` reads, directly or through the layers built so far."""
        wanted = {self.by_name[b] for b in lp.bottom if b in self.by_name}
        for node in reversed(self.layers):
            if wanted.intersection(node.tops):
                wanted.update(node.bottoms)
        return {self.blobs[i].name for i in wanted}

    def backward_pass(self, force_backward):
        """Net::Init's backward walk: which layers contribute to a loss; then force_backward."""
        under_loss, skip = set(), set()
        blobs = self.blobs
        for node in reversed(self.layers):
            contributes = False
            skip_down = True
            for j, index in enumerate(node.tops):
                name = blobs[index].name
                if node.loss_weights[j] or name in under_loss:
                    contributes = True
                if name not in skip:
                    skip_down = False
                if contributes and not skip_down:
                    break
            if (node.need_backward and skip_down) or not contributes:
                node.need_backward = False
                node.bottom_need_backward = self._shared((False,) * len(node.bottoms))
            for index, nb in zip(node.bottoms, node.bottom_need_backward):
                name = blobs[index].name
                if contributes:
                    under_loss.add(name)
                if not nb:
                    skip.add(name)
        if force_backward:
            for node in self.layers:
                node.need_backward = True
                down = tuple(nb or node.impl.allow_force_backward(j) for j, nb in enumerate(node.bottom_need_backward))
                node.bottom_need_backward = self._shared(down)
                for index, nb in zip(node.bottoms, down):
                    blobs[index].need_backward |= nb
                for p in node.params:  # (caffe_GAN's net.cpp:266-270 sets every param's flag too)
                    p.need_backward, p.down = True, None


def _param_propagate_down(spec):
    """A ParamSpec's param_propagate_down where its schema has the field (longriyao/caffe_GAN's, number 6)
    and the file sets it, else None. That Caffe's Net::Init still asks for the layer's backward by
    lr_mult, then sets the layer's flag for the param to this field where given (net.cpp:174-184):
    the param's diff is written by the layer's backward only where the flag says so."""
    if "param_propagate_down" in spec.DESCRIPTOR.fields_by_name and spec.HasField("param_propagate_down"):
        return spec.param_propagate_down
    return None


def _top_shapes(impl, bottom_shapes, tops, bottom, known):
    """The layer's top shapes (a tuple of tuples of ints) for these bottoms, with Net::Init's checks:
    one shape per top (`tops`: their names, None for an automatic one, for the messages; a net made
    again gives their indices, as rebatched's caller builds the file to say why), no negative
    dimension. `known` holds the shapes made before, which pass the checks: one object each is kept."""
    shapes = impl.reshape(list(bottom_shapes))
    if len(shapes) != len(tops):
        raise InputError(f"makes {len(shapes)} tops but {len(tops)} are named")
    out = []
    for name, shape in zip(tops, shapes):
        seen = known.get(shape) if type(shape) is tuple else None
        if seen is None:
            shape = tuple(map(int, shape))
            if shape and min(shape) < 0:
                raise InputError(f"top '{name}' would have a negative dimension {shape}",
                                 fix="the input is too small for this layer's kernel, stride or crop"
                                 if bottom else "a shape's dimensions cannot be negative")
            seen = known.setdefault(shape, shape)
        out.append(seen)
    out = tuple(out)
    return known.setdefault(out, out)


def _check_counts(n, exact, low, high, kind):
    plural = kind + "s"
    if exact is not None and n != exact:
        raise Miscounted(f"takes exactly {exact} {kind} blob{'s' if exact != 1 else ''}, got {n}",
                         fix=f"check the layer's {kind} entries")
    if low is not None and n < low:
        raise Miscounted(f"takes at least {low} {plural}, got {n}", fix=f"check the layer's {kind} entries")
    if high is not None and n > high:
        raise Miscounted(f"takes at most {high} {plural}, got {n}", fix=f"check the layer's {kind} entries")


def _loss_weights(impl, given, num_tops):
    """Layer::SetLossWeights, after LossLayer's default of 1 for its first top (for a layer sized
    from Caffe's log, the weights the log printed)."""
    if not given and isinstance(impl, Logged):
        given = impl.loss_weights()
    if not given and impl.loss_by_default:
        given = (1.0,)
    if given and len(given) != num_tops:
        raise InputError("loss_weight must be unspecified or given once per top blob")
    return given or (0.0,) * num_tops


def _typo(lp, schema):
    """An unknown layer type that is a known one misspelt: the error says which, and no more (its
    tops declared with --input would only hide the typo). None where no type is near."""
    from ..layers import suggest
    from ..read.whose import fork_of

    forks = fork_of(lp) or _forks_sizing(lp.type, schema)
    hint = None if forks else suggest(lp.type, schema)  # (a fork's type is no misspelling)
    return InputError(f"unknown layer type '{lp.type}'", layer=lp.name, fix=f"did you mean '{hint}'?") if hint else None


def _forks_sizing(type_name, schema):
    """The shipped forks other than `schema` whose layers size `type_name`, where `schema`'s Caffe has
    no version of its own (Layer.has_own_version, whose.OWN_UNSIZED)."""
    from ..layers import fork_layers
    from ..read.schema import FORKS, load_schema
    from ..read.whose import OWN_UNSIZED

    if type_name in OWN_UNSIZED.get(schema, ()):
        return []
    return [f for f in FORKS if f != schema and type_name in fork_layers(f)
            and not fork_layers(f)[type_name].has_own_version(load_schema(schema))]


def _unread_assumption(lp, unknown):
    """The Assumption of a layer sized as Unread: the unknown type's message, and what was taken."""
    tops, said = ", ".join(f"'{t}'" for t in lp.top), unknown.message.split("; a fork's own caffe.proto")[0]
    taken = ("taken as Caffe's LossLayer: top 0 a scalar of loss weight 1, and the layers below it run "
             "backward" if named_like_a_loss(lp.type) else "counted empty")
    blocks = f"{len(lp.param)} param {{ }} block{'s' if len(lp.param) > 1 else ''}"
    weights = f"; its {blocks} {'say' if len(lp.param) > 1 else 'says'} it has weights, which are not counted" \
        if lp.param else ""
    return Assumption(lp.name, f"{said}; no layer reads its tops ({tops}), so they are {taken}; what "
                      f"its own code allocates is not counted{weights}",
                      " ".join(f"--input {t}=NxCxHxW" for t in lp.top) + " (its tops' shapes), or its fork's "
                      "caffe.proto with --caffe-proto")


def _unknown_type(lp, schema, beside=(), path=None, read_with=None):
    """The refusal of a layer of a type no class sizes: which fork most likely has it (by its name or
    its fields, else the one fork the file's other unknown types, `beside`, point to); for a net in a
    Caffe source tree (at `path`) that registers the type, that tree's source and its caffe.proto.
    `read_with`: the user's caffe.proto that read the file (or `schema`, where it is one), which is then
    not offered again."""
    from ..read.schema import USER_PREFIX, described
    from ..read.source_tree import caffe_proto, registering, tree_of
    from ..read.whose import OWN_UNSIZED, fork_of

    read_with = read_with or (schema if schema.startswith(USER_PREFIX) else None)
    fork = fork_of(lp)
    sized = _forks_sizing(lp.type, schema)
    tree = tree_of(path) if not sized else None
    source = registering(tree, lp.type) if tree else None
    if source is not None:
        message = (f"unknown layer type '{lp.type}': a layer of the Caffe source tree of this net's repository "
                   f"({os.path.relpath(os.path.join(tree, source), os.path.dirname(os.path.abspath(path)))}), which "
                   "protoaudit has no rule for" + ("" if read_with else f"; that tree's caffe.proto (--caffe-proto "
                                                   f"{caffe_proto(path, tree)}) reads the file's fields"))
        tops = ", ".join(f"--input {t}=NxCxHxW" for t in lp.top) or "--input TOP=NxCxHxW"
        return InputError(message, layer=lp.name, fix=f"declare its tops ({tops}) to audit the rest of the net around it")
    others = Counter() if fork or sized else Counter(fork_of(o) for o in beside if o.type != lp.type and fork_of(o))
    named = {f: o.type for o in reversed(beside) if (f := fork_of(o)) in others}  # the first type naming each
    if lp.type in OWN_UNSIZED.get(schema, ()):  # the schema's fork has its own, another fork's does not size it
        message = f"unknown layer type '{lp.type}': protoaudit has no rule for the {lp.type} of {described(schema)}"
    elif sized:  # a shipped fork sizes it, but that fork did not read this file or lacks its other types
        message = (f"unknown layer type '{lp.type}' in {described(schema)}: protoaudit sizes it with "
                   f"{' or '.join(f'--fork {f}' for f in sized)}, which does not read this file or lacks "
                   "another of its layer types")
    elif fork:
        message = f"unknown layer type '{lp.type}': most likely a layer of {fork}, which protoaudit has no rule for"
    elif others:  # the fork most of the file's other unknown layers point to
        fork = others.most_common(1)[0][0]
        message = (f"unknown layer type '{lp.type}': no fork protoaudit knows has it; most likely a layer of the "
                   f"fork this file's '{named[fork]}' comes from, {fork}, which protoaudit has no rule for")
    else:
        # the schema's description ends the clause, whatever its length or parentheses
        message = (f"unknown layer type '{lp.type}': protoaudit has no rule for it in "
                   f"{described(read_with or schema)}; ")
        if not read_with:
            message += "a fork's own caffe.proto (--caffe-proto) reads its fields, and "
        message += "declaring its tops audits the rest of the net around it"
    tops = ", ".join(f"--input {t}=NxCxHxW" for t in lp.top) or "--input TOP=NxCxHxW"
    return InputError(message, layer=lp.name, fix=f"declare its tops ({tops}) to audit the rest of the net around it")


def _graph(layers, blobs):
    """The data-flow graph: layer nodes ('layer', i) and blob-version nodes ('blob', j, version)."""
    import networkx as nx  # only here: importing it takes longer than auditing most nets

    g = nx.DiGraph()
    version = {}
    for blob in blobs:
        if blob.producer == -1:
            version[blob.index] = 0
            g.add_node(("blob", blob.index, 0), name=blob.name)
    for node in layers:
        g.add_node(("layer", node.index), name=node.name, type=node.type)
        for index in node.bottoms:
            g.add_edge(("blob", index, version[index]), ("layer", node.index))
        for index in node.tops:
            version[index] = version.get(index, -1) + 1
            g.add_node(("blob", index, version[index]), name=blobs[index].name)
            g.add_edge(("layer", node.index), ("blob", index, version[index]))
    return g
