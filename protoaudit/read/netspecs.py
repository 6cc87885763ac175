"""From a loaded file to the nets Caffe would build: a net file's one net, or a solver's train and
test nets (Solver::InitTrainNet / InitTestNets), each with its NetState and upgraded to V2."""
from dataclasses import dataclass, field

from .glog import is_log_file
from . import load as loader
from ..errors import InputError
from ..net.netstate import make_state
from .upgrade import upgrade


@dataclass
class NetSpec:
    """One net to build: its parameters (V2), state, where its layers are in the text, its schema."""

    role: str  # "train", "test", or "net" for a plain net file
    param: object
    state: object
    schema: object
    path: str
    lines: list  # start line of each layer in param.layer, in the file `path`
    solver: object = None  # the SolverParameter that named it, if any
    own_phase: bool = False  # a net file whose own `state` sets the phase: that net alone (as Caffe logs it)
    shapes: dict = field(default_factory=dict)  # top -> shape Caffe logged (a log's data sources), under --input
    shapes_from: str = ""  # where those shapes were read
    read: dict = field(default_factory=dict, repr=False, compare=False)  # protoaudit.net.build's `read`, for param
    skipped: tuple = ()  # protoaudit.read.lenient.Skipped: fields of its file (and its solver's) read past

    @property
    def phase(self):
        return self.state.DESCRIPTOR.fields_by_name["phase"].enum_type.values_by_number[self.state.phase].name


def _upgraded(param, schema, path, lines):
    """Upgrade `param` in place; the start line of each resulting layer (None for made-up ones)."""
    try:
        return upgrade(param, schema, lines)
    except InputError as e:
        raise e.located(file=path) from None


def net_specs(path, *, phase=None, stages=(), level=None, schema=None, root=None, defines=None, strict=False):
    """The nets a file stands for. A net file gives one net in `phase` (its own state's, else
    TRAIN); a Caffe log gives the nets it initialised. `schema` forces a schema (--fork),
    `defines` fill ${NAME} templates (--define); `strict` reads past no field (load.load)."""
    if is_log_file(path):
        return _log_specs(path, phase, schema, defines, strict)
    src = loader.load(path, schema, defines, strict)
    if src.kind == "net":
        lines = _upgraded(src.message, src.schema, path, src.layer_lines[("", 0)])
        state = make_state(src.message, phase or file_phase(src.message), stages, level)
        return [NetSpec("net", src.message, state, src.schema, path, lines,
                        own_phase=src.message.state.HasField("phase"), skipped=src.skipped)]
    return _solver_specs(src, phase, stages, level, dict(root=root, schema=schema, defines=defines, strict=strict))


def _log_specs(path, phase, schema, defines, strict=False):
    """The nets of a Caffe log's run, from the parameters Net::Init printed (already filtered for
    their NetState and upgraded), with the shapes Caffe logged for their data sources."""
    from . import caffe_log

    run = caffe_log.chosen_run(caffe_log.read(path), path)
    solver = _logged_solver(run, path, schema, defines, strict)
    nets = [n for n in run.nets if phase is None or n.phase == phase]
    if not nets:
        built = sorted({n.phase for n in run.nets})
        raise InputError(f"the run in the log built no {phase} net (only {' and '.join(built)})", file=path,
                         fix=" or ".join(f"--phase {p.lower()}" for p in built) + ", or no --phase")
    cut = [n for n in nets if n.params.cut]
    if cut:
        raise InputError(
            f"glog cut the printed text of the {' and '.join(n.phase for n in cut)} net{'s' if len(cut) > 1 else ''} "
            "at its 30,000-byte limit",
            file=path, line=cut[0].params.line,
            fix=f"give the net file, with this log for its data shapes: protoaudit NET.prototxt --log {path}")
    specs = []
    for k, net in enumerate(nets):
        if net.layers and not net.params.text.strip():
            raise InputError("the net after 'Initializing net from parameters' was printed empty, though Caffe "
                             "set up its layers", file=path, line=net.params.line,
                             fix=f"give the net file, with this log for its data shapes: protoaudit NET.prototxt --log {path}")
        src = loader.load_text(net.params.text, path, net.params.line, schema, defines, strict)
        if src.kind != "net":
            raise InputError("the text after 'Initializing net from parameters' is not a net", file=path,
                             line=net.params.line)
        lines = _upgraded(src.message, src.schema, path, src.layer_lines[("", 0)])
        state = make_state(src.message, net.phase)
        role = "net" if solver is None else "train" if net.phase == "TRAIN" and k == 0 else "test"
        where = f"Caffe's log, line {net.layers[0].line}" if net.layers else ""
        specs.append(NetSpec(role, src.message, state, src.schema, path, lines, solver, own_phase=True,
                             shapes=net.data_shapes(), shapes_from=where, skipped=src.skipped))
    return specs


def _logged_solver(run, path, schema, defines, strict=False):
    """The SolverParameter the run printed (its nets are read from their own messages), or None
    for a run without a solver (pycaffe). A solver whose embedded net glog cut is read up to that
    net; what came after it keeps its defaults."""
    if run.solver is None:
        return None
    text = run.solver.text
    try:
        src = loader.load_text(text, path, run.solver.line, schema, defines, strict)
    except InputError:
        if not run.solver.cut:
            raise
        kept = []
        for line in text.split("\n"):
            if line.startswith(("net_param {", "train_net_param {", "test_net_param {")):
                break
            kept.append(line)
        src = loader.load_text("\n".join(kept), path, run.solver.line, schema, defines, strict)
    if src.kind != "solver":
        raise InputError("the text after 'Initializing solver from parameters' is not a solver", file=path,
                         line=run.solver.line)
    return src.message


def file_phase(net):
    """The phase a net file builds in when the command line gives none: its own `state { phase }`,
    as Caffe's Net does for a NetParameter (Caffe prints it in every net it logs), else TRAIN, as
    `caffe train` builds a net file's train net."""
    if net.state.HasField("phase"):
        return net.state.DESCRIPTOR.fields_by_name["phase"].enum_type.values_by_number[net.state.phase].name
    return "TRAIN"


def _solver_specs(src, phase, stages, level, files):
    """A solver's train and test nets; `files` says how to find and read the net files it names."""
    specs = []
    if phase in (None, "TRAIN"):
        specs.append(_train_spec(src, stages, level, files))
    if phase in (None, "TEST"):
        specs.extend(_test_specs(src, stages, level, files))
    return specs


def _net_from(src, field_name, file_value=None, index=None, files=None):
    """A solver's net: embedded (`*_param`) or a file it names (found as load.resolve_path says):
    (param, schema, path, lines, the fields of a file it names that were read past)."""
    if file_value is None:
        param = getattr(src.message, field_name)
        if index is not None:
            param = param[index]
        clone = type(param)()
        clone.CopyFrom(param)
        return clone, src.schema, src.path, src.layer_lines.get((field_name, index or 0), ()), ()
    files = files or {}
    net_path = loader.resolve_path(file_value, src.path, files.get("root"))
    net_src = loader.load(net_path, files.get("schema"), files.get("defines"), files.get("strict", False))
    if net_src.kind != "net":  # itself, or another solver (two solvers naming each other)
        line = next((i for i, text in enumerate(src.text.split("\n"), 1)
                     if f'"{file_value}"' in text or f"'{file_value}'" in text), None)
        raise InputError(f"the net it names, '{file_value}', is a solver, not a net", file=src.path, line=line,
                         fix="name the net's prototxt (train_val.prototxt) there")
    return net_src.message, net_src.schema, net_path, net_src.layer_lines[("", 0)], net_src.skipped


def _merge_state(state, extra):
    """NetState::MergeFrom: set fields overwrite, stages append."""
    if extra.HasField("phase"):
        state.phase = extra.phase
    if extra.HasField("level"):
        state.level = extra.level
    state.stage.extend(extra.stage)


def _solver_state(param, phase):
    """A solver's net state: its phase, then the net's own `state` merged over it."""
    state = type(param.state)()
    state.phase = state.DESCRIPTOR.fields_by_name["phase"].enum_type.values_by_name[phase].number
    _merge_state(state, param.state)
    return state


def _train_spec(src, stages, level, files):
    s = src.message
    sources = [("train_net_param", None) if s.HasField("train_net_param") else None,
               ("train_net", s.train_net) if s.HasField("train_net") else None,
               ("net_param", None) if s.HasField("net_param") else None,
               ("net", s.net) if s.HasField("net") else None]
    given = [x for x in sources if x]
    if len(given) != 1:
        raise InputError(
            "a solver must name exactly one train net" + (f" (it names {len(given)})" if given else ""),
            file=src.path, fix="use one of net, net_param, train_net, train_net_param",
        )
    field_name, file_value = given[0]
    param, schema, path, lines, skipped = _net_from(src, field_name, file_value, files=files)
    lines = _upgraded(param, schema, path, lines)
    state = _solver_state(param, "TRAIN")
    _merge_state(state, s.train_state)
    state.stage.extend(stages)
    if level is not None:
        state.level = level
    # the solver's file's fields read past are told with its train net
    return NetSpec("train", param, state, schema, path, lines, s, skipped=src.skipped + skipped)


def _test_specs(src, stages, level, files):
    s = src.message
    has_generic = s.HasField("net_param") or s.HasField("net")
    n_generic = len(s.test_iter) - len(s.test_net_param) - len(s.test_net) if has_generic else 0
    if s.test_state and len(s.test_state) != len(s.test_net_param) + len(s.test_net) + max(n_generic, 0):
        raise InputError("test_state must be unspecified, or given once per test net", file=src.path)
    found = [("test_net_param", None, i) for i in range(len(s.test_net_param))]
    found += [("test_net", name, None) for name in s.test_net]
    generic = ("net_param", None, None) if s.HasField("net_param") else ("net", s.net, None)
    found += [generic] * max(n_generic, 0)
    specs = []
    for k, (field_name, file_value, index) in enumerate(found):
        param, schema, path, lines, skipped = _net_from(src, field_name, file_value, index, files)
        lines = _upgraded(param, schema, path, lines)
        state = _solver_state(param, "TEST")
        if s.test_state:
            _merge_state(state, s.test_state[k])
        state.stage.extend(stages)
        if level is not None:
            state.level = level
        specs.append(NetSpec("test", param, state, schema, path, lines, s, skipped=skipped))
    return specs
