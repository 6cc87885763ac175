"""The public entry point: `audit(path, **options)`: the nets a file stands for, built, and every
allocation Caffe would make for them, held at once as `caffe train` (or the chosen run) holds them."""
import functools
import os
from dataclasses import dataclass, field, replace
from math import prod

from .collector import paused
from .errors import InputError, LayerStops
from .memory.buffers import Buffer, device_bytes, forget_touches, host_objects, net_buffers, runs_backward
from .memory.host import draws_random
from .layers.base import Assumption, MissingShape, solver_test_stops
from .layers.data import Unread
from .net.build import LabelSized, Miscounted, Need, OtherPhase, Rebuild, ShapesNeeded, StageNeeded, build, input_dims, rebatched
from .read.glog import is_log_file
from .net.netstate import keeps_the_same_layers, make_state
from .read.load import ForksDisagree
from .read.netspecs import net_specs
from .read.schema import SAME_FIELDS, USER_PREFIX, described
from .read.sidecar import declared_shapes
from .options import DEFAULT_CONTEXT_BYTES, INT_MAX, MAX_AXES, parse_batch

ENGINES = ("caffe", "cudnn")
MODES = ("gpu", "cpu")


@dataclass
class NetAudit:
    """One net of the audit, with how it runs (forward only or not) and what it allocates."""

    net: object
    role: str  # train | test | net
    forward_only: bool
    buffers: list  # Buffer, for the audit's engine and mode
    runs: bool = True  # False: built but never run (a solver that never tests)
    kept: dict = field(default_factory=dict, repr=False, compare=False)  # see figure

    def figure(self, key, work):
        """`work(buffers)`, worked out once while `buffers` stays the same list: a reaudit at another
        batch reuses a test net as it is, and the largest-batch search asks for its figures again."""
        entry = self.kept.get(key)
        if entry is None or entry[0] is not self.buffers or entry[1] != len(self.buffers):
            entry = self.kept[key] = (self.buffers, len(self.buffers), work(self.buffers))
        return entry[2]

    @property
    def name(self):
        return self.net.name

    @property
    def phase(self):
        return self.net.phase

    @property
    def batch(self):
        return self.net.batch

    def total_bytes(self):
        return sum(b.bytes for b in self.buffers)


@dataclass
class Audit:
    """What protoaudit found for one file: the nets, the solver's state, and the totals."""

    path: str
    mode: str
    engine: str
    solver_type: str  # a Caffe solver type, or "none"
    iter_size: int
    nets: list = field(default_factory=list)  # NetAudit
    extra: list = field(default_factory=list)  # Buffer: solver history, the CUDA context
    other_engine_total: int = None  # the same run's total under the other engine (gpu mode)
    other_engine_stops: object = None  # InputError: where Caffe stops under the other engine, if it does
    death: object = None  # protoaudit.memory.failure.Death: where a run in the Caffe log audited died
    fit: object = None  # protoaudit.memory.fit.Fit, against a card (protoaudit.audit(gpu_mem=...), --gpu-mem)
    sweep: object = None  # protoaudit.memory.sweep.Sweep (protoaudit.audit(sweep=...), --sweep)
    again: tuple = field(default=None, repr=False, compare=False)  # its options, for reaudit
    state: tuple = field(default=None, repr=False, compare=False)  # (train net, how, solver state), for reaudit

    @property
    def buffers(self):
        return [b for n in self.nets for b in n.buffers] + self.extra

    @property
    def total_bytes(self):
        """Everything audited that counts against the budget: device bytes on the GPU, all on the CPU."""
        cpu = self.mode == "cpu"
        return (sum(n.figure(("total", cpu), functools.partial(_counted, cpu=cpu)) for n in self.nets)
                + _counted(self.extra, cpu))

    @functools.cached_property
    def cudamalloc_pages(self):
        """In GPU mode, what cudaMalloc's pages take beyond the total's bytes, one call per device
        buffer in the audit's order (protoaudit.memory.cuda_pages, measured): in the verdict, not in
        the total, whose sums the sweep and the batch search scale linearly."""
        if self.mode != "gpu":
            return None
        from .memory import scaling

        return scaling.pages(self.card_sizes)

    @functools.cached_property
    def card_sizes(self):
        """scaling.sizes of this audit, worked out once: the pages and the largest-batch search read them."""
        from .memory import scaling

        return scaling.sizes(self)

    @property
    def batch(self):
        return self.nets[0].batch if self.nets else None

    @property
    def train(self):
        return train_of(self.nets)

    # the library's surface (README, "As a library"): the figures every report shows
    @functools.cached_property
    def summary(self):
        """protoaudit.memory.summary.Summary: the per-layer rows and the totals by category."""
        from .memory.summary import summarize

        return summarize(self)

    def rows(self):
        """The per-layer table's rows (LayerRow: net, name, type, tops, columns, total, cumulative, buffers)."""
        return self.summary.rows

    def explain(self):
        """The plain-words lines: the hand recipe and what it leaves out, freezing, layers not counted,
        where data shapes came from and what was assumed, the verdict, where a logged run died."""
        from .report.text import explanation

        return explanation(self, self.summary, self.fit)

    def to_dict(self):
        """The JSON report (--format json) as dicts and lists."""
        from .report.json_format import to_dict

        return to_dict(self, self.summary, self.fit)


def train_of(nets):
    """The train (or only) net of built nets or NetAudits: the one --batch sets and a solver steps."""
    return next((n for n in nets if n.role in ("train", "net")), None)


def _counted(buffers, cpu):
    """The bytes of `buffers` that count against the budget (all of them on the CPU)."""
    return sum(b.elements * b.itemsize for b in buffers if cpu or b.device == "device")


@paused
def build_nets(path, *, phase=None, stages=(), level=None, inputs=None, batch=None, schema=None, freeze=(),
               test_batch=None, keep_test_batch=False, as_test=False, root=None, defines=None, log=None, shapes=None,
               batched_only=False, specs=None, strict=False, every_run=False):
    """Every net the file stands for (one for a net file, train then tests for a solver), built.
    `batch` is the train (or only) net's, `test_batch` a solver's test nets'; with
    `keep_test_batch`, a test net's --input shapes keep the batch its file gives (it runs beside its
    train net); `as_test` takes a net file's net for a test net. `freeze` names layers frozen with
    their ancestors (protoaudit.net.freeze) in every net but the test nets, which run forward only.
    `root` is the folder Caffe ran in (dataset paths are relative to it; default: the working
    directory). `schema` forces a schema (a fork's name: --fork), `defines` fill the file's ${NAME}
    templates (--define) and give the counts only the data decides that some layers read
    (Layer.defines: MultiBoxLoss's matched_priors, DetectionOutput's detections). `log` is a Caffe
    log of a run of these nets: the data shapes it logged stand where no --input is given (a log
    given as `path` brings its own). `shapes` names a shapes file (protoaudit.read.sidecar; None:
    the one beside `path`, if any; False: none); `inputs` win over it. Each net's `batched` says
    whether `batch` sets its batch (the train or only net); `batched_only` builds those alone.
    `specs`: the file's NetSpecs as net_specs gives them for these options, when the caller has them.
    `strict` (--strict) refuses a field no shipped schema has, which is otherwise read past where it
    cannot change a figure (protoaudit.read.lenient) and listed with the net's assumptions.
    `every_run`: a log's nets of each run it holds, not only its last run's (--caffe-log)."""
    inputs = {**declared_shapes(path, shapes), **(inputs or {})}
    phase = phase.upper() if phase else None
    if phase not in (None, "TRAIN", "TEST"):
        raise InputError(f"--phase {phase.lower()}: the phase is train or test")
    batch, test_batch = parse_batch(batch), parse_batch(test_batch, "--test-batch")
    log, log_from, log_layers = _log_shapes(log)
    nets, needed = [], None
    if specs is None:
        specs = net_specs(path, phase=phase, stages=stages, level=level, schema=schema, root=root, defines=defines,
                          strict=strict, every_run=every_run)
    for spec in specs:
        is_test = spec.role == "test" or as_test
        if batched_only and is_test:
            continue
        for k, skipped in enumerate(spec.skipped):  # a field a data layer's shape could read: its tops given,
            if skipped.why is None and not all(t in inputs for t in skipped.tops):  # or its dataset absent
                if strict or not _dataset_absent(spec, skipped.layer, root):
                    raise skipped.refusal(spec.path)
                spec.skipped = spec.skipped[:k] + (skipped._replace(why=ABSENT_WHY),) + spec.skipped[k + 1:]
        logged = dict(spec.shapes)
        if log is not None:
            logged.update(log.get(spec.phase, {}))
        options = dict(inputs=inputs, batch=test_batch if is_test else batch, schema=spec.schema.layers,
                       read_with=spec.schema.name if spec.schema.name.startswith(USER_PREFIX) else None,
                       lines=spec.lines, path=spec.path, keep_own_batch=keep_test_batch and is_test, root=root,
                       logged=logged, logged_from=log_from.get(spec.phase, spec.shapes_from), defines=defines,
                       logged_layers=spec.logged_layers or log_layers.get(spec.phase, {}),
                       logged_repeated=spec.logged_repeated, strict=strict)
        frozen = []
        if freeze and not is_test:
            from .net.freeze import freeze as freeze_param

            spec.param, frozen = freeze_param(
                spec.param, spec.state, freeze, lambda param, spec=spec: build(param, spec.state, **options),
                spec.path)
        try:
            try:
                net = _built(spec, options, strict)
            except ShapesNeeded:
                raise
            except InputError:
                if not (phase is None and _a_test_file(spec)):
                    raise
                # a test.prototxt (DeepLab's, MobileNet-SSD's): every data source is TEST-only, so it
                # is the TEST net alone; Caffe never builds a TRAIN net from it
                spec.state.phase = _TEST
                net = _built(spec, options, strict)
        except ShapesNeeded as e:  # every net's missing shapes, in one message
            needed = e if needed is None else needed.merged(e)
            continue
        except InputError:  # a data layer's field read past (its dataset absent) may be what it stops on
            read_past = [skipped for skipped in spec.skipped if skipped.why == ABSENT_WHY]
            if read_past:
                raise read_past[0]._replace(why=None).refusal(spec.path) from None
            raise
        net.assumptions.extend(Assumption(*skipped.assumption()) for skipped in spec.skipped)
        net.assumptions.extend(Assumption(*assumed) for assumed in spec.assumed)
        values = (spec.role, not is_test, spec.solver, frozen, spec.own_phase, spec.schema.name)
        for name, value in zip(_BUILT_AS, values):
            setattr(net, name, value)
        _check_sizes(net)
        nets.append(net)
    if needed is not None:
        raise needed
    return nets


ABSENT_WHY = ("the layer's dataset is not on this machine, so its tops' shapes are assumed (or given) whatever "
              "the field says")


def _dataset_absent(spec, name, root):
    """Whether the data layer `name` of the net names a source (any *_param's `source`) and none of its
    sources is on this machine: its shape is then assumed or given, whatever its fields say."""
    from .read.datasets.paths import locate, sources_of

    sources = [source for lp in spec.param.layer if lp.name == name for source in sources_of(lp)]
    return bool(sources) and all(locate(source, root, spec.path) is None for source in sources)


def _built(spec, options, strict=False):
    """The net of `spec`; where shapes are missing, built with those a Caffe log of it beside its
    file gives, else a deploy net beside it, else (unless `strict`) an image size assumed for a
    dataset that is not on this machine; else ShapesNeeded. Where a layer stops on a size protoaudit
    assumed (a Python layer's published defaults), the shapes such a log gives, if it gives them all,
    else (unless `strict`) another image size the net takes (_with_images_searched)."""
    try:
        return build(spec.param, spec.state, **options, read=spec.read)
    except ShapesNeeded as e:
        net = (_with_logged_inputs(spec, options, e.needs)
               or _with_deploy_inputs(spec, options, e.needs, assume=not strict))
        if net is None:
            raise
        return net
    except Miscounted:  # a fork that relaxed a layer's top count: a Caffe log beside may show it ran so
        net = _with_logged_layers(spec, options, strict)
        if net is None:
            raise
        return net
    except InputError as e:  # a CHECK that fails on a size protoaudit assumed: a Caffe log beside may give it
        guessed = getattr(e, "assumed", None)
        if not guessed:
            raise
        net = (_with_logged_inputs(spec, options, [Need(layer, None, None, "", [(top, ())])
                                                   for layer, top, _ in guessed])
               or (None if strict else _with_images_searched(spec, options, guessed, e)))
        if net is None:
            raise
        return net


def _with_logged_layers(spec, options, strict):
    """The net built again with the layers a Caffe log of it beside its file set up (whose top counts
    the net's build then takes as that run's Caffe did); None where no log beside it is of this net,
    or where its layers were already given."""
    from .read.logs_beside import logged_beside

    found = logged_beside(spec.path, spec.param, spec.phase) if spec.path else None
    if found is None or set(found[0].by_name()) <= set(options["logged_layers"]):
        return None
    return _built(spec, dict(options, logged_layers={**found[0].by_name(), **options["logged_layers"]}), strict)


def _with_images_searched(spec, options, guessed, error):
    """The net built with the images a layer protoaudit knows assumed (a Python data layer's published
    defaults: FCN's largest VOC image, 500x500) at another size of data.ASSUMED_IMAGES and
    data.SEARCHED_IMAGES the net takes (a U-Net's crops need a multiple of its pooling): the largest
    not above the layer's own, else the smallest above it, the height and width of every image-like
    top (4 axes, more than one pixel) alike; None where none builds."""
    from .layers.data import ASSUMED_IMAGES, SEARCHED_IMAGES

    images = [(layer, top, shape) for layer, top, shape in guessed if len(shape) == 4 and min(shape[2:]) > 1]
    if not images:
        return None
    own = images[0][2][2:]
    sizes = {}
    for (_, height, width), what in ASSUMED_IMAGES + SEARCHED_IMAGES:
        sizes.setdefault((height, width), what)
    within = sorted((size for size in sizes if size[0] <= own[0] and size[1] <= own[1]), key=lambda s: -s[0] * s[1])
    for height, width in within + sorted((size for size in sizes if size not in within), key=lambda s: s[0] * s[1]):
        what = sizes[(height, width)]
        if any(tuple(shape[2:]) == (height, width) for _, _, shape in images):
            continue
        shapes = {top: tuple(shape[:2]) + (height, width) for _, top, shape in images}
        how = ("so protoaudit takes the largest height and width not above it that the net takes"
               if (height, width) in within else
               "and so does every size below it protoaudit tries: it takes the smallest above that the net takes")
        said = [Assumption(layer, f"top '{top}' is {'x'.join(map(str, shapes[top]))}: the size the layer assumes, "
                           f"{'x'.join(map(str, shape))}, stops layer '{error.layer}', {how}, {height}x{width} "
                           f"({what})", f"--input {top}={'x'.join(map(str, shape[:2]))}xHxW")
                for layer, top, shape in images]
        wheres = dict.fromkeys(shapes, "assumed: an image size the net takes, the layer's own stopping it")
        try:
            net = build(spec.param, spec.state, **dict(options, logged={**options["logged"], **shapes},
                                                       sources=wheres), read=spec.read, guesses=said)
            _check_sizes(net, assumed=True)
            return net
        except (InputError, ShapesNeeded):
            continue
    return None


def _with_logged_inputs(spec, options, needs):
    """The net built with the shapes Caffe logged for its missing tops in a log of this net beside its
    file (protoaudit.read.logs_beside), a layer of a type protoaudit has no rule for sized as that log
    set it up (data.Logged); None unless the log gives every top it needs."""
    from .read.logs_beside import fill, logged_beside

    found = logged_beside(spec.path, spec.param, spec.phase) if spec.path else None
    if found is None:
        return None
    run, file = found
    logged_shapes = run.top_shapes()
    name = os.path.relpath(file, os.path.dirname(os.path.abspath(spec.path)))

    def given(top, known):
        shape = fill(known, logged_shapes[top]) if top in logged_shapes else None
        return None if shape is None else (shape, f"its shape is the one Caffe logged for it in {name} beside the net",
                                           f"Caffe's log {name} beside the net")

    return _with_shapes_beside(spec, options, needs, given,
                               logged_layers={**run.by_name(), **options["logged_layers"]})


def _with_deploy_inputs(spec, options, needs, assume=False):
    """The net built with the shapes its missing data tops have in a deploy net beside its file
    (protoaudit.read.deploy), and with `assume`, for a top whose dataset is not on this machine and
    that no deploy net gives, the image size data.assumed_image assumes, or for a label the loss or
    accuracy that stops on that image gives it (the shape it takes beside its prediction,
    Layer.label_for); None unless every top it needs is found so."""
    from .layers.data import ASSUMED_CHANNELS, ASSUMED_IMAGES, NOT_HERE, SEARCHED_IMAGES, SEARCHED_SIDES, \
        assumed_image
    from .layers.python_layers import DATA_FROM_CODE, DATA_FROM_CODE_WHERE
    from .read.deploy import fill, inputs_beside

    tops = {top for need in needs for top, _ in need.tops}
    absent = {top for need in needs if need.absent and assume for top, _ in need.tops}
    beside = inputs_beside(spec.path, spec.param, tops) if spec.path else {}
    image, passed, labels = ASSUMED_IMAGES[0], "", {}  # labels: top -> LabelSized, the shape a layer takes
    from_code = {top for need in needs if need.absent == DATA_FROM_CODE for top, _ in need.tops}

    def given(top, known):
        lacking = DATA_FROM_CODE_WHERE if top in from_code else NOT_HERE
        found = beside.get(top) if use_beside or top not in absent else None
        shape = fill(known, found[0]) if found else None
        colour = ""
        if shape is None and found and top in absent and len(found[0]) == 4 and found[0][1] == 0:
            shape = fill(known, (found[0][0], ASSUMED_CHANNELS) + found[0][2:])  # its channels: only the dataset's
            colour = f", and {ASSUMED_CHANNELS} channels assumed"
        if shape is not None:
            dims = "x".join(str(d) if d else "NC"[i] for i, d in enumerate(found[0]))
            return shape, (f"its shape is that of '{top}' in {found[1]} beside the net ({dims}), with the batch "
                           f"the layer gives{colour}"), f"assumed: the input of {found[1]} beside the net"
        if top in labels:
            e = labels[top]
            said = (f"its shape is one {e.kind} layer '{e.layer}' takes: {e.how}" if e.how else
                    f"its shape is the one {e.kind} layer '{e.layer}' takes for it beside its first input, "
                    f"{'x'.join(map(str, e.prediction))}")
            return e.sized[top], said, f"assumed: what the layer reading it takes, {lacking}"
        if top not in absent:
            return None
        guessed.add(top)
        return assumed_image(known, image, passed, lacking)

    first = None  # the refusal at the first image, where no image fits
    furthest = None  # the refusal that comes latest in the file
    images = ASSUMED_IMAGES + _named_image(spec) + SEARCHED_IMAGES if absent else ASSUMED_IMAGES[:1]
    # a deploy net's input for an absent dataset's top first; where a layer stops on it, the images instead
    # (the deploy net may be a whole-slide inference net of another size than the training crops)
    borrowed = sorted({found[1] for top, found in beside.items() if top in absent})
    trials = [(images[0], True)] * bool(borrowed) + [(image, not borrowed) for image in images]
    for k, (image, use_beside) in enumerate(trials):
        k -= bool(borrowed)
        labels, guessed = {}, set()
        try:
            net = _labelled(spec, options, needs, given, absent, labels)
            if net is not None and guessed:
                _check_sizes(net, assumed=True)
                _check_logged(net, options["logged_layers"])
            return net
        except InputError as e:
            if not getattr(e, "assumed", None):
                raise
            first = first or e
            if furthest is None or (e.line or 0) > (furthest.line or 0):
                furthest = e
            if k < 0:  # the deploy net's shape
                passed = f"; the input of {' and '.join(borrowed)} beside the net stops layer '{e.layer}'"
            elif k < len(ASSUMED_IMAGES):  # (the searched ones are said together)
                passed = _passed_over(passed, image, e)
            elif k == len(ASSUMED_IMAGES):
                passed += ", and the searched sizes before it"
    if furthest is not first:  # a size the net takes up to a later layer, whose own check is the blocker
        raise furthest  # (it says the size, and where the sizes before it stopped)
    first.fix = (first.fix or "") + " (no other image protoaudit tries fits either: " + ", ".join(
        "x".join(map(str, shape)) for shape, _ in ASSUMED_IMAGES[1:]) + \
        f", nor a square colour image of side {', '.join(map(str, SEARCHED_SIDES))}, nor 360x480 or 540x960)"
    raise first


def _named_image(spec):
    """(the image whose size is the largest map size a layer of the net fixes in its own fields, a
    decoder's last Upsample restoring the image; what it is), as a tuple of none or one, to try
    before the searched sizes."""
    from .layers.base import layer_class
    from .layers.data import ASSUMED_CHANNELS

    named = [(size, lp.name) for lp in spec.param.layer
             for size in getattr(layer_class(lp.type, spec.schema.name), "sizes_named", lambda _: ())(lp)]
    if not named:
        return ()
    (height, width), layer = max(named, key=lambda found: found[0][0] * found[0][1])
    return (((ASSUMED_CHANNELS, height, width), f"the largest map size the net's own layers fix (layer '{layer}')"),)


def _check_logged(net, logged_layers):
    """An InputError (carrying `assumed`) where a layer of a net built at an assumed image has other top
    shapes than a Caffe log of the run set up (a log kept from after its data layers: the layers it
    does show say which image it ran)."""
    for node in net.layers:
        logged = logged_layers.get(node.name)
        if logged is not None and logged.shapes and [tuple(s) for s in logged.shapes] != list(node.top_shapes):
            shown = " ".join(map(str, logged.shapes[0]))
            error = InputError(f"its tops are not the ones Caffe's log set up (line {logged.line}: {shown})",
                               layer=node.name)
            error.assumed = True
            raise error


def _labelled(spec, options, needs, given, absent, labels):
    """_with_shapes_beside, again for the labels a layer sizes (LabelSized: into `labels`), until
    none is sized again alike (its layer stops on something else) or one has been sized thrice (the
    slices of one label, each sized by its own loss)."""
    tries = {}
    while True:
        try:
            return _with_shapes_beside(spec, options, needs, given, labels=absent)
        except LabelSized as e:
            for top in e.sized:
                tries[top] = tries.get(top, 0) + 1
            if all(top in labels and labels[top].sized[top] == shape for top, shape in e.sized.items()) \
                    or max(tries[top] for top in e.sized) > 3:
                return None
            labels.update(dict.fromkeys(e.sized, e))


def _passed_over(passed, image, error):
    """Why the images tried so far were passed over, for the assumption of the one taken."""
    said = f"{'x'.join(map(str, image[0]))} stops layer '{error.layer}'"
    return f"{passed}, {said}" if passed else f"; {said}"


def _rank_of(known, shape):
    """The dimensions a layer knew of a top, as many as the shape taken for it has: an HDF5 or LMDB top
    known by its batch alone, taken as (T, N) by the layer reading it, is asked for as TxC, not TxCxHxW."""
    known = tuple(known)[:len(shape)]
    return known + (None,) * (len(shape) - len(known))


def _with_shapes_beside(spec, options, needs, given, **more):
    """The net built with a shape for each top `needs` (Need) asks for, `given(top, known dims)` -> (shape,
    why, where it comes from) or None, each listed as an assumption; None where one has none or the
    net still needs more. A layer fed by the net is left to size its own tops where none is given
    (a Python loss at the net's end, once its bottoms are known). `more`: other build options (a
    log's layers, the labels a loss may size)."""
    shapes, said, wheres = {}, [], {}
    for need in needs:
        for top, known in need.tops:
            found = given(top, known)
            if found is None and need.fed:
                continue
            if found is None:
                return None
            shapes[top], whence, wheres[top] = found
            why = need.absent if isinstance(need.absent, str) else "its data is not on this machine"
            said.append(Assumption(need.layer, f"top '{top}' is {'x'.join(map(str, shapes[top]))}: {why}, so "
                                   f"{whence}", f"--input {top}={input_dims(_rank_of(known, shapes[top]))}"))
    try:
        return build(spec.param, spec.state, **dict(options, logged={**options["logged"], **shapes}, sources=wheres,
                                                    **more), read=spec.read, guesses=said)
    except ShapesNeeded:
        return None


def _a_test_file(spec):
    """A net file (no state of its own) whose data sources are all TEST-only."""
    if spec.role != "net" or spec.own_phase:
        return False
    test = type(spec.state)()
    test.CopyFrom(spec.state)
    test.phase = _TEST
    return not feeds(spec.param, spec.state) and feeds(spec.param, test)


_TEST = 1  # caffe.Phase TEST, the same number in every schema


def feeds(param, state):
    """Whether a net has a data source (a layer with no bottom, or a net input) in `state`."""
    from .net.netstate import included

    return bool(param.input) or any(not lp.bottom and included(lp, state) for lp in param.layer)


def _log_shapes(log):
    """({phase: {top: shape}}, {phase: where}, {phase: {layer name: LoggedLayer}}) from a Caffe log
    given with --log: its data shapes, and the layers it set up (a type with no rule is sized so)."""
    if log is None:
        return None, {}, {}
    from .read.caffe_log import data_shapes, logged_nets

    found = data_shapes(log)
    layers = {net.phase: net.by_name() for net in logged_nets(log)}
    return ({p: shapes for p, (shapes, _) in found.items()}, {p: where for p, (_, where) in found.items()},
            layers)


def _check_sizes(net, assumed=False):
    """Raise _size_error's error, if any; `assumed`: the net's data shapes were assumed, so the
    error says so (and carries `assumed`, for the audit to try another image)."""
    error = _size_error(net)
    if error is None:
        return
    if assumed:
        error.assumed = True
        error.fix += "; but first: the shapes here follow from an image protoaudit assumed: give yours with --input"
    raise error


def _size_error(net):
    """The InputError of Blob::Reshape's CHECKs (blob.cpp:24-34), or None: no blob, top or parameter,
    has more than kMaxBlobAxes (32) axes or holds more than INT_MAX elements. Each distinct shape is
    looked at once (a net has few); only a net with one too large is walked for the first layer it
    fails at."""
    shapes = {blob.shape for blob in net.blobs}
    shapes.update(p.shape for layer in net.layers if layer.params for p in layer.params)
    if all(len(shape) <= MAX_AXES and prod(shape) <= INT_MAX for shape in shapes):
        return None
    for layer in net.layers:
        for index in layer.tops:
            blob = net.blobs[index]
            if len(blob.shape) > MAX_AXES:
                return InputError(f"top '{blob.name}' would have {len(blob.shape):,} axes; a Caffe blob has at "
                                  f"most {MAX_AXES}", file=net.path, line=layer.line, layer=layer.name,
                                  fix="give the shape with fewer dims")
            if blob.count > INT_MAX:
                return InputError(
                    f"top '{blob.name}' would hold {blob.count:,} elements {blob.shape}; a Caffe blob holds "
                    f"at most {INT_MAX:,}",
                    file=net.path, line=layer.line, layer=layer.name,
                    fix="use a smaller batch or input size",
                )
        for k, param in enumerate(layer.params):
            if param.count > INT_MAX:
                return InputError(
                    f"parameter {k} would hold {param.count:,} elements {param.shape}; a Caffe blob holds at most "
                    f"{INT_MAX:,}", file=net.path, line=layer.line, layer=layer.name,
                    fix="use a smaller num_output or kernel",
                )
    return None


def _check_choice(name, value, choices):
    if value not in choices:
        raise InputError(f"--{name} {value}: choose one of {', '.join(choices)}")


@paused
def audit(path, *, phase=None, stages=(), level=None, inputs=None, batch=None, test_batch=None,
          mode=None, engine=None, solver_type=None, inference=False, context=None, schema=None,
          compare_engines=True, freeze=(), root=None, defines=None, log=None, shapes=None, strict=False):
    """Audit `path` (a net or solver prototxt) as Caffe would run it.

    A net file stands for what `caffe train` holds at once: its TRAIN net (forward, backward, the
    solver's state) and, if the file has TEST-phase layers, its TEST net (forward only, sharing the
    train net's weights). `phase` keeps one net; `solver_type="none"` runs a bare net forward and
    backward as pycaffe does; `inference` runs forward only. `batch` replaces the batch of every
    data source of the train (or only) net, `test_batch` that of the test nets. `freeze` names
    layers frozen, with every layer they depend on, in the train (or only) net. `root` is the
    folder Caffe ran in, which dataset paths are relative to (default: the working directory).
    `schema` reads the file with one schema (a fork's name: --fork); `defines` fill its ${NAME}
    templates (--define NAME=VALUE). `path` may be a Caffe log (the nets it initialised, with the
    data shapes it logged); `log` is a log of a run of the file's nets, for its data shapes.
    `shapes` names a shapes file of --input shapes (None: the net's own `NET.prototxt.shapes`, if
    there is one; False: none). `strict` refuses fields no shipped schema has (see build_nets).
    `engine`: "caffe" (Caffe's own code), "cudnn" (a cuDNN build), or None: Caffe's own code, unless
    a layer has none in GPU mode and a cuDNN build runs the net (video-caffe's NdConvolution), which
    is then audited as a cuDNN build, the Caffe engine's stop said beside.
    """
    used = log_mode(path) if mode is None else None
    mode = used[0] if used else mode or "gpu"
    _check_choice("mode", mode, MODES)
    if engine is not None:
        _check_choice("engine", engine, ENGINES)
    if mode == "cpu":
        engine = "caffe"  # Caffe's CPU code has no cuDNN
    options = dict(phase=phase, stages=stages, level=level, inputs=inputs, batch=batch, test_batch=test_batch,
                   schema=schema, freeze=freeze, root=root, defines=defines, log=log, shapes=shapes, strict=strict)
    run = dict(mode=mode, engine=engine or "caffe", solver_type=solver_type, inference=inference, context=context)
    nets = _nets_in_a_fork(path, inference, options)
    if used and used[0] == "cpu":  # (GPU mode is the default: a GPU run's log needs no word)
        nets[0].assumptions.append(Assumption("(file)", f"the log's run used the CPU ('{used[1]}', line {used[2]}), "
                                              "so host memory is audited", "--mode gpu"))
    try:
        result = _assess(path, nets, compare_engines=compare_engines, **run)
    except LayerStops:
        if engine is not None or mode != "gpu":
            raise
        run["engine"] = "cudnn"
        result = _assess(path, nets, compare_engines=True, **run)  # (the Caffe engine's stop is said beside)
    result.again = (options, run)
    return result


def log_mode(path):
    """(mode, what caffe.cpp printed, its line) of the run of a Caffe log given as the path that the audit
    reads (caffe_log.chosen_run), where it says ("Use CPU." or "Use GPU with device ID 0"); None otherwise."""
    if not is_log_file(path):
        return None
    from .read import caffe_log

    try:
        return caffe_log.chosen_run(caffe_log.read(path), path).device
    except InputError:
        return None  # (refused where the nets are read, in its own words)


def _nets_in_a_fork(path, inference, options):
    """The nets to audit; where no --fork was given and BVLC Caffe's rules stop on what one shipped
    fork's take (a 5-axis blob into Pooling, which 3D-Caffe pools), the nets read with that fork, said
    as an assumption; where that fork stops too, BVLC's refusal."""
    try:
        return _nets_to_audit(path, inference, options)
    except InputError as e:
        if options["schema"] is not None or getattr(e, "fork", None) is None or isinstance(e, ShapesNeeded):
            raise
        stop = e
    options["schema"] = stop.fork
    try:
        nets = _nets_to_audit(path, inference, options)
    except InputError:
        options["schema"] = None
        raise stop from None
    where = f"layer '{stop.layer}'" if stop.layer else "the file"
    for net in nets:
        net.assumptions.append(Assumption("(file)", f"read with the fork {stop.fork}: with BVLC Caffe's rules, {where} "
                                          f"stops ({stop.message}), which that fork's rules take",
                                          "--fork bvlc, to refuse it as BVLC Caffe does"))
    return nets


@paused
def reaudit(result, *, batch=None, engine=None, compare_engines=False):
    """`result`'s file audited again with its options, at another batch of the train (or only) net
    (None: the same batch) or under another engine, without building again what does not change: at
    the same batch, no net; at another, only the train (or only) net, as the test nets keep their
    own batch (and keep their buffers when the engine is the same). Caffe's objects on the host are
    not worked out in GPU mode, where they do not count against the card: the result is for totals
    (`total_bytes`, the buffers that count), as the largest-batch search and the sweep use it."""
    options, run = result.again
    engine = run["engine"] if engine is None or run["mode"] == "cpu" else engine
    built = [n.net for n in result.nets]
    reuse = {}
    if batch is not None and batch != result.batch:
        again = {**options, "batch": batch}
        if run["inference"]:  # as _nets_to_audit builds the one net
            again.update(phase=options["phase"] or "TEST", test_batch=None)
        else:
            again["keep_test_batch"] = True
        fresh = _rebatched(built, batch, options) or iter(build_nets(result.path, **again, batched_only=True))
        nets = []
        for net in built:
            if net.batched:
                again, role = next(fresh), net.role
                again.role = role
                net = again
            elif engine == result.engine:
                reuse[id(net)] = next(n for n in result.nets if n.net is net)
            nets.append(net)
        built = nets
    again = _assess(result.path, built, compare_engines=compare_engines, host=run["mode"] == "cpu", reuse=reuse,
                    state=result.state, **{**run, "engine": engine})
    again.again = (dict(options, batch=batch if batch is not None else options["batch"]), dict(run, engine=engine))
    return again


@paused
def split_at(result, batch):
    """(bytes on the card that do not grow with the batch, bytes that do) of `result`'s run at a
    `batch` of its train (or only) net, as protoaudit.memory.scaling.split gives them for the audit
    at that batch, without building the sizes: at its own batch from its buffers, at another from
    Caffe's rules at that batch as reaudit applies them (the net made again, every layer reshaped and
    its touches walked) but without making a Buffer. What the largest-batch search reads the rule
    from and confirms a batch with. None where that audit is to be asked instead: CPU mode (host
    memory counts there), a Caffe log (what it says of the run), a net not made again from the
    built one (protoaudit.net.build.rebatched), a batch Caffe refuses, or names that can make two
    buffers one entry of the sizes (see _named_apart)."""
    options, run = result.again
    train = result.train
    if run["mode"] != "gpu" or train is None or not _named_apart(train.net) or is_log_file(result.path):
        return None
    if batch == result.batch:
        grows = _counted([b for b in train.buffers if b.per_sample], cpu=False)
        return result.total_bytes - grows, grows
    fresh = _rebatched([train.net], batch, options)
    again = next(fresh, None) if fresh is not None else None  # (the train net is the batched one)
    return None if again is None else _split_again(result, again)


def _split_again(result, again):
    """split_at's answer for the train net made again at another batch (`again`)."""
    from .memory.solver import solver_buffers

    train = result.train
    tally = {}  # (kind, grows with the batch): bytes on the card
    try:
        device_bytes(again, engine=result.engine, backward=not train.forward_only, forward=train.runs, tally=tally)
        if result.state is not None:  # as _assess takes it
            net, how, state = result.state
            if not _same_params(net, again):
                state = solver_buffers(again, how[0], mode=how[1], label=how[2], **how[3])
    except InputError:
        return None
    finally:
        forget_touches(again)
    grows = sum(n for (_, grew), n in tally.items() if grew)
    fixed = sum(tally.values()) - grows
    if result.state is not None:
        # ClearParamDiffs zeroes every learnable param's diff, which holds each diff the passes
        # touch (every param's diff is its owner's, a learnable one): the solver's state less those
        fixed += _counted(state, cpu=False) - tally.get(("param diff", False), 0)
    fixed += _counted([b for b in result.extra if b.kind == "context"], cpu=False)
    fixed += sum(n.figure(("total", False), functools.partial(_counted, cpu=False)) for n in result.nets
                 if n is not train)  # the test nets, which keep their batch (and their buffers)
    return fixed, grows


def _named_apart(net):
    """Whether each buffer of `net` is an entry of its own in the sizes (protoaudit.memory.scaling),
    whose keys are names: no two layers and no two blobs of one name, and no dot in a layer's name
    (a layer's buffer is named LAYER.BUFFER, and a buffer's own name may have a dot)."""
    layers = {node.name for node in net.layers}
    return (len(layers) == len(net.layers) and not any("." in name for name in layers)
            and len({b.name for b in net.blobs}) == len(net.blobs))


def _rebatched(nets, batch, options):
    """The batched nets of `nets` made again at `batch` from the built ones (protoaudit.net.build.rebatched),
    or None where they are to be built from the file: with --freeze (what it freezes is worked out
    from the file), or where the built nets do not tell the whole story at that batch."""
    if options["freeze"]:
        return None
    out = []
    try:
        for net in nets:
            if net.batched:
                again = rebatched(net, parse_batch(batch))  # (what _check_sizes refuses, it refuses)
                for name in _BUILT_AS:
                    setattr(again, name, getattr(net, name))
                out.append(again)
    except (Rebuild, MissingShape, InputError):
        return None
    return iter(out)


# what build_nets notes on each net it builds, beyond what build makes
_BUILT_AS = ("role", "batched", "solver", "frozen", "own_phase", "schema")


def _assess(path, nets, *, mode, engine, solver_type, inference, context, compare_engines, host=True, reuse=None,
            state=None):
    """The Audit of built nets: each net's buffers, the solver's state, the CUDA context and the
    other engine's total. `host`: work out Caffe's objects on the host (False only where they do not
    count: GPU mode). `reuse`: {id(net): NetAudit} of nets already walked the same way; `state`:
    another audit's solver state (Audit.state), taken where its train net has the same parameters."""
    from .memory.solver import added_to, solver_buffers, solver_options, solver_type_of

    solver = next((n.solver for n in nets if n.solver is not None), None)
    if inference or solver_type == "none":
        kind = "none"
    elif solver_type:
        kind = solver_type_of(None, solver_type)
    else:
        kind = "SGD"
    try:  # the solver file's own type and settings: a refusal names the file
        if solver is not None and not (inference or solver_type):
            kind = solver_type_of(solver)
        settings = solver_options(solver) if solver is not None else {}
    except InputError as e:
        raise e.located(file=path) from None
    result = Audit(path, mode, engine, kind, solver.iter_size if solver is not None else 1)
    train = train_of(nets)
    # a solver steps its TRAIN net only; a TEST net alone runs forward only
    stepped = kind if kind == "none" or (train is not None and train.phase == "TRAIN") else "none"
    other = ("cudnn" if engine == "caffe" else "caffe") if mode == "gpu" and compare_engines else None
    try:
        result.nets, others = _net_audits(nets, mode, engine, kind, inference, host, reuse or {}, other, stepped)
    except InputError as e:
        if other is None:
            raise
        # where Caffe stops is the other engine's (else this engine's walk alone raises it again)
        result.nets, others = _net_audits(nets, mode, engine, kind, inference, host, reuse or {}, None, stepped)
        result.other_engine_stops, other = e, None
    train = result.train
    kind = result.solver_type = stepped
    if kind != "none" and train is not None:
        label = train.buffers[0].net if train.buffers else train.role
        how = (kind, mode, label, settings)
        if state is not None and state[1] == how and _same_params(state[0], train.net):
            state = state[2]
        else:
            try:
                state = solver_buffers(train.net, kind, mode=mode, label=label, **settings)
            except InputError as e:
                raise e.located(file=path) from None
        result.state = (train.net, how, state)
        result.extra += added_to(train.buffers, state)
        # Solver::Step zeroes every param diff (ClearParamDiffs) before its first forward pass:
        # the solver, not the backward pass, touches them first
        cleared = {b.owner for b in state if b.kind == "param diff"}
        train.buffers = [b.first_touched("solver") if b.kind == "param diff" and b.owner in cleared else b
                         for b in train.buffers]
    if mode == "gpu":
        size = DEFAULT_CONTEXT_BYTES if context is None else int(context)
        if size:
            result.extra.append(Buffer("process", "(CUDA)", "CUDA context and library handles", "context",
                                       size, 1, "setup", False))
        if other is not None:
            result.other_engine_total = others + _counted(result.extra, cpu=False)
    if is_log_file(path):
        from .memory.failure import explain as explain_failure
        from .read import caffe_log

        result.death = explain_failure(result, caffe_log.chosen_run(caffe_log.read(path), path))
    return result


def _same_params(a, b):
    """Whether net `b` has net `a`'s parameter blobs, as the solver sees them: the same layers
    (`b` made from `a` at another batch, protoaudit.net.build.rebatched), the same shapes and owners."""
    return len(a.layers) == len(b.layers) and all(
        x.lp is y.lp and (x.params is y.params or len(x.params) == len(y.params)
                          and all(p.shape == q.shape and p.owner == q.owner for p, q in zip(x.params, y.params)))
        for x, y in zip(a.layers, b.layers))


def _nets_to_audit(path, inference, options):
    """The nets an audit holds; `options` are build_nets' (phase, stages, level, inputs, batch,
    test_batch, schema, freeze, root, defines, log, shapes, strict).

    A net file whose data layers are included only in a stage (DIGITS' nets: `stage: "train"` and
    `stage: "val"`, which DIGITS sets in the solver it writes) builds in no state without one: when
    the user gave no --stage and a single stage would include the missing top's maker, the file is
    audited in that stage, said as an assumption. A solver's own state is never second-guessed."""
    try:
        return _nets_of_fork(path, inference, options)
    except ForksDisagree as e:
        return _read_with_one_fork(path, inference, options, e)
    except StageNeeded as e:
        if options["stages"] or len(e.stages) != 1 or any(spec.role != "net" for spec in _file_specs(path, options)):
            raise
        nets = _nets_of_fork(path, inference, {**options, "stages": list(e.stages)})
        nets[0].assumptions.append(Assumption(
            "(file)", f"the net is built in stage '{e.stages[0]}', the only one that includes layer '{e.maker}', "
                      f"which makes '{e.blob}': with no stage, no layer makes it (the tool that trains the net, "
                      "DIGITS for one, gives the stage)", f"--stage {e.stages[0]}"))
        return nets


def _read_with_one_fork(path, inference, options, disagree):
    """A file several forks read and size differently (`disagree`): the nets of the first of them
    (in the order forks are listed, the most used first) that builds it, the choice said as an
    assumption with the others' --fork; where each of them stops at the same layer with the same
    message (a file's wiring, such as two TRAIN data layers that make one top, which Net::Init refuses
    in any Caffe), that stop, naming the forks, as the choice of fork cannot help; else the ambiguity."""
    from .read.schema import described

    stops, built = [], []
    for fork in disagree.forks:
        try:
            built.append((fork, _nets_to_audit(path, inference, {**options, "schema": fork})))
        except (ShapesNeeded, StageNeeded, ForksDisagree):
            raise disagree from None
        except InputError as e:
            stops.append(e)
    # a fork that sizes every layer comes before one that builds around a type it lacks (data.Unread)
    sized = [(fork, nets) for fork, nets in built
             if not any(isinstance(node.impl, Unread) for net in nets for node in net.layers)]
    if built:
        fork, nets = (sized or built)[0]
        others = [f for f in disagree.forks if f != fork]
        layers = ", ".join(f"'{name}'" for name in disagree.layers[:3]) + (
            f" and {len(disagree.layers) - 3} more" if len(disagree.layers) > 3 else "")
        nets[0].assumptions.append(Assumption(
            "(file)", f"more than one Caffe fork reads this file and sizes {'layers ' + layers if layers else 'it'} "
                      f"differently: it is read with the caffe.proto of {described(fork)}, the first of "
                      f"{', '.join(disagree.forks)} that builds it{' sizing every layer' if sized else ''}",
            " or ".join(f"--fork {f}" for f in others) + ", or your fork's own file with --caffe-proto"))
        return nets
    first = stops[0]
    if any((e.line, e.layer, e.message) != (first.line, first.layer, first.message) for e in stops[1:]):
        raise disagree
    first.fix = ((first.fix + "; ") if first.fix and not first.fix.startswith("Caffe stops here too") else "") + (
        f"every Caffe fork that reads this file ({', '.join(disagree.forks)}) stops here, as Caffe's Net::Init "
        "does whatever the fork; once it is fixed, say which fork with --fork, or give your fork's own file with "
        "--caffe-proto")
    raise first


def _nets_of_fork(path, inference, options):
    """_nets_in_state's nets; where the fork the file was read with stops on one of Caffe's checks and
    a fork of the same fields (SAME_FIELDS: FaceBoxes' densified PriorBox beside SSD's) builds it,
    that fork's, said as an assumption."""
    try:
        return _nets_in_state(path, inference, options)
    except (ShapesNeeded, StageNeeded):
        raise
    except InputError as failed:
        if options["schema"]:
            raise
        try:
            specs = _file_specs(path, options)
        except InputError:
            raise failed from None
        read_as = specs[0].schema.name if specs else None
        for other in SAME_FIELDS.get(read_as, ()):
            try:
                nets = _nets_in_state(path, inference, {**options, "schema": other})
            except InputError:
                continue
            where = f"layer '{failed.layer}': " if failed.layer else ""
            nets[0].assumptions.append(Assumption(
                "(file)", f"the net is read as a net of {described(other)}, whose caffe.proto reads it as that "
                          f"of {described(read_as)} does: with that fork's layers, {where}{failed.message}", f"--fork {read_as}"))
            return nets
        raise


def _file_specs(path, options):
    """The file's NetSpecs as `options` read it: its role (a net file, a solver) and its schema."""
    return net_specs(path, stages=options["stages"], level=options["level"], schema=options["schema"],
                     root=options["root"], defines=options["defines"], strict=options["strict"])


def _nets_in_state(path, inference, options):
    """_nets_to_audit's nets for the phase and stages `options` give."""
    phase = options["phase"]
    if inference:
        return build_nets(path, **{**options, "phase": phase or "TEST", "test_batch": None})[:1]
    common = {k: v for k, v in options.items() if k not in ("phase", "batch", "freeze")}
    needed = test = specs = tests = None
    if phase is None:  # a net file's TEST net is read from the same message (built again in the TEST state)
        specs = net_specs(path, stages=options["stages"], level=options["level"], schema=options["schema"],
                          root=options["root"], defines=options["defines"], strict=options["strict"])
        if len(specs) == 1 and specs[0].role == "net" and not specs[0].own_phase:
            tests = [replace(specs[0], state=make_state(specs[0].param, "TEST", options["stages"], options["level"]))]
    try:
        nets = build_nets(path, **options, keep_test_batch=True, specs=specs)
    except ShapesNeeded as e:
        needed, nets = e, None
    except OtherPhase as e:
        if not tests:  # a solver's net, or a file that sets its own phase: as Caffe, refused
            raise
        return _test_net_alone(path, options, tests, e)
    same = bool(nets and tests) and keeps_the_same_layers(tests[0].param, specs[0].state, tests[0].state)
    if (nets is None or (nets and nets[0].role == "net" and not nets[0].own_phase)) and phase is None and not same:
        # the file's TEST net, beside its TRAIN net: --input shapes take the file's test batch
        # (a file whose own state sets the phase, as Caffe prints a net it built, is that net alone;
        # a file whose layers all run in both phases is one net, shown once: it is not built twice)
        try:
            # (a solver's TEST nets are its own test nets, built above: none here)
            test = next(iter(build_nets(path, phase="TEST", **common, keep_test_batch=True, as_test=True,
                                        specs=tests)), None)
        except ShapesNeeded as e:  # one message for every net's missing shapes
            needed = e if needed is None else needed.merged(e)
        except OtherPhase as e:
            # a TEST net Caffe cannot build, because a bottom is made only by a TRAIN-phase layer
            # (PVANet's example train.prototxt: its TEST net's RoIPooling reads the TRAIN-only rois):
            # a file only a solver with no test net trains, so the TRAIN net alone, said (as a TRAIN
            # net Caffe cannot build is the TEST net alone: _test_net_alone)
            if needed is None and _feeds_phase(path, common, "TEST"):
                if not nets:
                    raise
                where = f"layer '{e.layer}': " if e.layer else ""
                nets[0].assumptions.append(Assumption(
                    "(file)", f"no TEST net: in the TEST phase, {where}{e.message} (Caffe would stop there), so "
                              "the file trains only under a solver with no test net (no test_iter), which never "
                              "builds it", "--phase test"))
        except InputError:
            # a train.prototxt whose data sources are all TRAIN-only (DeepLab's, MobileNet-SSD's)
            # has no TEST net: Caffe never builds one from it
            if needed is None and _feeds_phase(path, common, "TEST"):
                raise
    if needed is not None:
        raise needed
    # a TEST net of other layers of the file: other names, or (TRAIN and TEST data layers often
    # share a name) other lines of the file
    if test is not None and [(n.name, n.line) for n in test.layers] != [(n.name, n.line) for n in nets[0].layers]:
        test.role = "test"
        nets[0].role = "train"
        nets.append(test)
    for net in nets:
        if net.role == "test" and solver_tests(net.solver):
            stops = solver_test_stops(net)
            if stops is not None:
                net.assumptions.append(stops)
    return nets


def _test_net_alone(path, options, tests, failed):
    """A net file whose TRAIN net Caffe could not build, as its TEST net alone (LRCN's deploy net: its
    input is reshaped by a TEST-only layer; `tests`: the file's spec in the TEST state, already read),
    said as an assumption; the TRAIN net's refusal stands where the TEST net does not build either,
    unless only shapes are missing there: those are what to give (a video net's TEST-only data layer,
    its ConvLSTM a type of no rule)."""
    try:
        nets = build_nets(path, **{**options, "phase": "TEST"}, specs=tests)[:1]
    except ShapesNeeded:
        raise
    except InputError:
        raise failed from None
    nets[0].assumptions.append(Assumption(
        "(file)", f"the file is built in the TEST phase: in the TRAIN phase, layer '{failed.layer}': {failed.message} "
                  "(Caffe would stop there), so it is a file to deploy or test, not to train", "--phase train"))
    return nets


def _feeds_phase(path, options, phase):
    """Whether a net file has a data source in `phase` (see feeds)."""
    spec = net_specs(path, phase=phase, stages=options["stages"], level=options["level"], schema=options["schema"],
                     root=options["root"], defines=options["defines"], strict=options["strict"])[0]
    return feeds(spec.param, spec.state)


def _plans(nets, kind, inference):
    """How each net runs: (net, label, backward, runs, shared params): the train net forward and
    backward (plus ClearParamDiffs under a solver), a solver's test nets forward only on the train
    net's weights (`shared`: the layers whose parameter data is the train net's)."""
    train = train_of(nets)
    shared = {layer.name for layer in train.layers if layer.params} if train is not None else set()
    for k, net in enumerate(nets):
        is_test = net.role == "test" and not inference  # a solver's test net runs forward only
        label = net.role if net.role != "test" else f"test#{k}" if len(nets) > 2 else "test"
        forward_only = inference or is_test or (net.role == "net" and net.phase == "TEST" and kind != "none")
        backward = not forward_only and runs_backward(net)
        runs = not is_test or solver_tests(net.solver)
        yield net, label, backward, runs, shared if is_test else None


def _net_audits(nets, mode, engine, kind, inference, host=True, reuse=None, other=None, other_kind=None):
    """Each net's buffers (see _plans); `host` and `reuse` as _assess takes them. With `other` (an
    engine), also the nets' bytes on the device under it (with the solver type `other_kind`): each
    net walked under both engines at once where both run it alike, else in turn (its layers'
    touches serve both, then are let go): (NetAudits, the other engine's bytes or None)."""
    out = []
    rng_made = False  # Caffe's random generator, made once per process by the first net that draws
    held = {}  # a process's buffer (a library's state, a class's static Blob): bytes the nets before hold
    copies = {}  # LayerParameter sizes, by content (protoaudit.memory.host)
    others = 0
    plans = zip(_plans(nets, kind, inference), _plans(nets, other_kind or kind, inference))
    for (net, label, backward, runs, shared), (_, _, other_backward, other_runs, other_shared) in plans:
        kept = (reuse or {}).get(id(net))
        if kept is not None:
            out.append(kept)
            both = False
            for b in kept.buffers:  # (kept as _held_once left them: what each net added)
                if b.owner.startswith("process."):
                    held[b.owner] = held.get(b.owner, 0) + b.bytes
            rng_made = rng_made or draws_random(net, forward=runs)
        else:
            both = other is not None and (other_backward, other_runs, other_shared) == (backward, runs, shared)
            buffers = net_buffers(net, mode=mode, engine=engine, backward=backward, label=label,
                                  shared_params=shared, forward=runs, other=other if both else None)
            if both:  # walked under both engines at once
                buffers, change = buffers
                others += change
            walked = _counted(buffers, cpu=False)
            buffers = _held_once(buffers, held)
            if both:
                others += _counted(buffers, cpu=False)
            elif other is not None:  # (the other engine's walk below holds what this one's did)
                others -= walked - _counted(buffers, cpu=False)
            if host:
                buffers.append(host_objects(net, label, forward=runs, backward=backward,
                                            shared_params=(shared or ()) if runs else (), rng_made=rng_made,
                                            copies=copies))
                rng_made = rng_made or draws_random(net, forward=runs)
            out.append(NetAudit(net, net.role, not backward, buffers, runs))
        if other is not None and not both:  # (host objects and a library's state: host memory, not walked)
            others += device_bytes(net, mode=mode, engine=other, backward=other_backward, shared_params=other_shared,
                                   forward=other_runs)
        forget_touches(net)
    return out, (others if other is not None else None)


def _held_once(buffers, held):
    """`buffers` less what the process already holds (`held`, by owner, updated): a process's buffer
    (owner "process. ...") is one per process, so a later net's counts only where it is larger (a
    static Blob another net's layers grow)."""
    out = []
    for b in buffers:
        if b.owner.startswith("process."):
            more = b.bytes - held.get(b.owner, 0)
            if more <= 0:
                continue
            held[b.owner] = b.bytes
            if more < b.bytes:
                b = Buffer(b.net, b.layer, b.owner, b.kind, more // b.itemsize, b.itemsize, b.touch, b.per_sample,
                           b.device, b.about)
        out.append(b)
    return out


def solver_tests(solver):
    """Whether Solver::Step ever runs the test nets: every test_interval iterations, the first at
    iteration 0 only with test_initialization. (A net file's test net is taken to be tested.)"""
    if solver is None:
        return True
    interval = solver.test_interval
    return interval > 0 and (solver.test_initialization or interval <= solver.max_iter)
