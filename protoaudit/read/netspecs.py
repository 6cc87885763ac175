"""From a loaded file to the nets Caffe would build: a net file's one net, or a solver's train and
test nets (Solver::InitTrainNet / InitTestNets), each with its NetState and upgraded to V2."""
import os
from dataclasses import dataclass, field

from google.protobuf import text_format

from .folders import shown, tails, up_from
from .glog import is_log_file
from . import load as loader
from ..errors import InputError
from ..net.netstate import included, make_state, phase_name
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
    logged_layers: dict = field(default_factory=dict)  # layer name -> caffe_log.LoggedLayer: what Caffe set up
    logged_repeated: dict = field(default_factory=dict)  # layer name -> [LoggedLayer]: a name set up more than once
    read: dict = field(default_factory=dict, repr=False, compare=False)  # protoaudit.net.build's `read`, for param
    skipped: tuple = ()  # protoaudit.read.lenient.Skipped: fields of its file (and its solver's) read past
    assumed: tuple = ()  # (layer, what, override) of how it was read, for the audit's assumptions

    @property
    def phase(self):
        return phase_name(self.state)


def _upgraded(param, schema, path, lines):
    """Upgrade `param` in place: the start line of each resulting layer (None for made-up ones),
    and the assumptions of how it was upgraded (the V0 fields Caffe drops, and goes on)."""
    try:
        lines, dropped = upgrade(param, schema, lines)
    except InputError as e:
        raise e.located(file=path) from None
    return lines, tuple(d.assumption() for d in dropped)


def net_specs(path, *, phase=None, stages=(), level=None, schema=None, root=None, defines=None, strict=False,
              every_run=False):
    """The nets a file stands for. A net file gives one net in `phase` (its own state's, else
    TRAIN); a Caffe log gives the nets its last run initialised (`every_run`: those of each run it
    holds, in order). `schema` forces a schema (--fork), `defines` fill ${NAME} templates
    (--define); `strict` reads past no field (load.load)."""
    if is_log_file(path):
        from . import caffe_log

        runs = caffe_log.built_runs(caffe_log.read(path), path)
        return [spec for run in (runs if every_run else runs[-1:])
                for spec in _log_specs(run, path, phase, schema, defines, strict, echo=every_run)]
    src = loader.load(path, schema, defines, strict)
    if src.kind == "net":
        lines, assumed = _upgraded(src.message, src.schema, path, src.layer_lines[("", 0)])
        state = make_state(src.message, phase or file_phase(src.message), stages, level)
        return [NetSpec("net", src.message, state, src.schema, path, lines,
                        own_phase=src.message.state.HasField("phase"), skipped=src.skipped,
                        assumed=src.assumed + assumed)]
    return _solver_specs(src, phase, stages, level, dict(root=root, schema=schema, defines=defines, strict=strict))


def _log_specs(run, path, phase, schema, defines, strict=False, echo=False):
    """The nets of one run of a Caffe log, from the parameters Net::Init printed (already filtered
    for their NetState and upgraded), with the shapes Caffe logged for their data sources; with
    `echo` (the log's lines printed again, --caffe-log), for their Python layers' tops too: the shapes
    their setup gave, which Caffe logs, where the audit counts what their forward reshapes them to."""
    solver = _logged_solver(run, path, schema, defines, strict)
    created = _created_type(solver)
    nets = [n for n in run.nets if phase is None or n.phase == phase]
    if not nets:
        built = sorted({n.phase for n in run.nets})
        raise InputError(f"the run in the log built no {phase} net (only {' and '.join(built)})", file=path,
                         fix=" or ".join(f"--phase {p.lower()}" for p in built) + ", or no --phase")
    files = {id(n): _named_file(n, path, schema, defines, strict) for n in nets if n.params.cut}
    cut = [n for n in nets if n.params.cut and not isinstance(files[id(n)], tuple)]
    if cut:
        raise _cut_unread(cut, files, path)
    specs = []
    for k, net in enumerate(nets):
        if net.layers and not net.params.text.strip() and not net.params.cut:
            raise InputError("the net after 'Initializing net from parameters' was printed empty, though Caffe "
                             "set up its layers", file=path, line=net.params.line,
                             fix=f"give the net file, with this log for its data shapes: protoaudit NET.prototxt --log {path}")
        if net.params.cut:
            src, lines, state, assumed = files[id(net)]
        else:
            try:
                src = loader.load_text(net.params.text, path, net.params.line, schema, defines, strict)
            except InputError as e:  # a printed text edited by hand: the file Caffe read, where it is found
                found = _named_file(net, path, schema, defines, strict, unparsed=e)
                if not isinstance(found, tuple):
                    raise
                src, lines, state, assumed = found
            else:
                if src.kind != "net":
                    raise InputError("the text after 'Initializing net from parameters' is not a net", file=path,
                                     line=net.params.line)
                lines, assumed = _upgraded(src.message, src.schema, path, src.layer_lines[("", 0)])
                state = make_state(src.message, net.phase)
        role = "net" if solver is None else "train" if net.phase == "TRAIN" and k == 0 else "test"
        where = f"Caffe's log, line {net.layers[0].line}" if net.layers else ""
        if not net.layers:  # (caffe_log.built_runs: printed, none of its layers set up)
            stop = f" (it stops creating layer '{net.creating}')" if net.creating else ""
            assumed += (("(file)", f"the log prints this net but sets up none of its layers{stop}, so no shape "
                         "Caffe logged is known: it is audited as its file would be", "--input for its data tops"),)
        specs.append(NetSpec(role, src.message, state, src.schema, src.path, lines, solver, own_phase=True,
                             shapes={**net.data_shapes(), **(_python_tops(net, src.message) if echo else {})},
                             shapes_from=where, logged_layers=net.by_name(), logged_repeated=net.repeated(),
                             skipped=src.skipped, assumed=src.assumed + assumed + created))
    return specs


def _python_tops(logged, param):
    """The shapes Caffe logged for the tops of the net's Python layers."""
    python = {lp.name for lp in param.layer if lp.type == "Python"}
    return {top: shape for layer in logged.layers if layer.name in python
            for top, shape in zip(layer.tops, layer.shapes)}


def _cut_unread(cut, files, path):
    """The refusal of nets whose text glog cut and whose files were not found as Caffe ran them:
    each reason once (two nets from one file share it), the file to give where the log names one."""
    whys = {}
    for n in cut:
        whys.setdefault(files[id(n)], []).append(n.phase)
    why = next(iter(whys)) if len(whys) == 1 else "; ".join(
        f"for the {' and '.join(phases)} net{'s' if len(phases) > 1 else ''}, {clause}"
        for clause, phases in whys.items())
    named = {n.source for n in cut}
    net = os.path.basename(named.pop()) if len(named) == 1 and None not in named else None
    give = f"the net file, {net} as Caffe ran it," if net else "the net file,"
    unprinted = all(not n.params.text for n in cut)
    what = (f"the log sets up {_nets_named(n.phase for n in cut)} without the text Net::Init prints before (it "
            f"was kept from a later line)" if unprinted else
            f"glog cut the printed text of {_nets_named(n.phase for n in cut)} at its 30,000-byte limit")
    return InputError(
        f"{what}, and {why}",
        file=path, line=cut[0].params.line,
        fix=f"give {give} with this log for its data shapes: protoaudit {net or 'NET.prototxt'} --log {path}")


def _nets_named(phases):
    """"the TRAIN net", "the TRAIN and TEST nets", "8 TEST nets" (a log of unrolled sub-nets), or
    "4 nets (1 TRAIN, 3 TEST)"."""
    phases = list(phases)
    counts = {p: phases.count(p) for p in dict.fromkeys(phases)}
    if len(phases) == 1:
        return f"the {phases[0]} net"
    if all(n == 1 for n in counts.values()):
        return f"the {' and '.join(counts)} nets"
    if len(counts) == 1:
        return f"{len(phases)} {phases[0]} nets"
    return f"{len(phases)} nets ({', '.join(f'{n} {p}' for p, n in counts.items())})"


def _named_file(net, log_path, schema, defines, strict, unparsed=None):
    """A net whose printed text glog cut (or, `unparsed`, whose printed text does not parse: the
    InputError it gives), read from the file solver.cpp said it comes from: found as named, or by the
    last parts of that path beside the log or in a folder above it (a log kept in the repository of
    its nets), and taken only if, in the state Caffe printed, it holds the very layers the log set
    up. (source, layer lines, state, assumed), or why not (a clause)."""
    if not net.layers:
        return (f"the log set up none of its layers to check the file '{net.source}' against" if net.source else
                "the log does not name the file the net came from")
    logged = [layer.name for layer in net.layers]
    differs = None
    for candidate in _candidates(net.source, log_path) if net.source else _beside(log_path):
        try:
            src = loader.load(candidate, schema, defines, strict)
            if src.kind != "net":
                continue
            lines, upgraded = _upgraded(src.message, src.schema, candidate, src.layer_lines[("", 0)])
            states = _states(net, src.message)
        except InputError:
            continue
        for state in states:
            names = [layer.name for layer in src.message.layer if included(layer, state)]
            known = set(names)
            kept = [name for name in logged if name in known or not name.endswith("_split")]  # Caffe's own splits
            if (kept == names or (not net.done and kept == names[:len(kept)])
                    or (not net.params.text and kept and kept == names[len(names) - len(kept):])):
                break  # (a log kept from a later line holds the last layers set up)
        else:
            differs = differs or (candidate, next((f"'{a}' where the log set up '{b}'" for a, b in zip(names, kept)
                                                   if a != b), f"{len(names)} layers where the log set up {len(kept)}"))
            continue
        whose = f"the file the log names ('{net.source}')" if net.source else "a net file beside the log"
        if unparsed is not None:
            how = (f"the {net.phase} net's printed text does not parse as Caffe printed it (log line "
                   f"{unparsed.line or net.params.line}: {unparsed.message})")
        elif net.params.text:
            how = f"glog cut the {net.phase} net's printed text (log line {net.params.line})"
        else:
            net.phase = phase_name(state)
            how = f"the log sets up a {net.phase} net from its line {net.params.line} without printing it"
        what = (f"{how}; the net is read from {candidate}, {whose}, whose {len(names)} layers in that state are "
                "the ones Caffe set up")
        return src, lines, state, (("(file)", what, "give the net file with --log LOG to choose another"), *upgraded)
    if not net.source:
        return "the log does not name the file the net came from, and no net file beside it holds the layers it set up"
    if differs:
        return f"the file found, {differs[0]}, is not the net Caffe ran (it has {differs[1]})"
    return f"the file the log names, '{net.source}', is found neither as named nor beside the log or above it"


MAX_BESIDE = 64  # the net files beside a log that one whose text glog cut is looked for among


def _beside(log_path):
    """The net files in a log's own folder (a `caffe test` or pycaffe run names none), at most
    MAX_BESIDE of them: a repository keeps a log beside the net that ran it."""
    folder = os.path.dirname(os.path.abspath(log_path))
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".prototxt") and "solver" not in n.lower())
    except OSError:
        return []
    return [shown(os.path.join(folder, n)) for n in names[:MAX_BESIDE] if os.path.isfile(os.path.join(folder, n))]


def _states(net, param):
    """The NetStates a net of the log may have been built in: the one it printed; for a net whose
    text the log does not hold, the file's own in TRAIN, then in TEST (as `caffe` builds a file)."""
    if net.params.text:
        return [_printed_state(net.params.text, param)]
    return [make_state(param, phase) for phase in ("TRAIN", "TEST")]


def _candidates(named, log_path):
    """Where the net file a log names may be: as named (from the working directory), then by the
    last parts of its path beside the log and above it (folders.tails), then by its name alone in the
    two folders above the log (a repository that moved its nets: a log in video/log/ naming
    ../scripts/NET.prototxt, kept as video/NET.prototxt). Each is taken only where it holds the very
    layers the log set up (_named_file)."""
    near = [os.path.join(folder, os.path.basename(named)) for folder in up_from(log_path)[1:3]]
    return [shown(c) for c in dict.fromkeys([named] + tails(named, log_path) + near) if os.path.isfile(c)]


def _printed_state(text, param):
    """The NetState Net::Init printed at the top of a net's text (phase, level, stages), as a
    message of `param`'s schema."""
    lines = text.split("\n")
    state = type(param.state)()
    if "state {" in lines:
        start = lines.index("state {")
        end = lines.index("}", start) if "}" in lines[start:] else len(lines)
        try:
            text_format.Parse("\n".join(lines[start + 1:end]), state)
        except text_format.ParseError:
            raise InputError("the printed net state does not parse") from None
    return state


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


def _created_type(solver):
    """The solver a log's Caffe created, where the printed type is a known one written in other case
    ("sgd"): Solver::Init prints the solver only once the registry has made it, so that Caffe took it
    (a Windows build's). The type is set to the known name, and ((file), what, override) said; ()
    where there is nothing to say."""
    from ..memory.solver import in_other_case

    if solver is None or "type" not in solver.DESCRIPTOR.fields_by_name or not solver.HasField("type"):
        return ()
    known = in_other_case(solver.type)
    if known is None:
        return ()
    written, solver.type = solver.type, known
    return (("(file)", f"the solver's type '{written}' is read as {known}: the log's Caffe created it (it printed "
             f"the solver, which Solver::Init does once the registry has made it), though BVLC Caffe's registry "
             f"is case-sensitive and refuses it", f"type: \"{known}\" in the solver for BVLC Caffe"),)


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
    (param, schema, path, lines, the fields of a file it names that were read past, assumptions:
    how the file was found, where that was a guess)."""
    if file_value is None:
        param = getattr(src.message, field_name)
        if index is not None:
            param = param[index]
        clone = type(param)()
        clone.CopyFrom(param)
        return clone, src.schema, src.path, src.layer_lines.get((field_name, index or 0), ()), (), src.assumed
    files = files or {}
    net_path, by_parts = loader.resolve_path(file_value, src.path, files.get("root"))
    net_src = loader.load(net_path, files.get("schema"), files.get("defines"), files.get("strict", False))
    if net_src.kind != "net":  # itself, or another solver (two solvers naming each other)
        line = next((i for i, text in enumerate(src.text.split("\n"), 1)
                     if f'"{file_value}"' in text or f"'{file_value}'" in text), None)
        raise InputError(f"the net it names, '{file_value}', is a solver, not a net", file=src.path, line=line,
                         fix="name the net's prototxt (train_val.prototxt) there")
    assumed = ((_found_by_parts(file_value, net_path, files.get("root")),) if by_parts else ()) + net_src.assumed
    return net_src.message, net_src.schema, net_path, net_src.layer_lines[("", 0)], net_src.skipped, assumed


def _found_by_parts(named, path, root):
    """The assumption of a solver's net file found only by the last parts of the path it names."""
    return ("(file)", f"the net file the solver names, '{named}', is not found from the working directory (where "
            "caffe train runs)" + (", --root" if root else "") + " or the solver's folder and those above it; the "
            f"net is read from {path}, found by the last parts of that path",
            "give --root DIR, the folder caffe train ran in, to read the file it names there")


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
    param, schema, path, lines, skipped, located = _net_from(src, field_name, file_value, files=files)
    lines, assumed = _upgraded(param, schema, path, lines)
    state = _solver_state(param, "TRAIN")
    _merge_state(state, s.train_state)
    state.stage.extend(stages)
    if level is not None:
        state.level = level
    # the solver's file's fields read past are told with its train net
    return NetSpec("train", param, state, schema, path, lines, s, skipped=src.skipped + skipped,
                   assumed=located + assumed)


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
        param, schema, path, lines, skipped, located = _net_from(src, field_name, file_value, index, files)
        lines, assumed = _upgraded(param, schema, path, lines)
        state = _solver_state(param, "TEST")
        if s.test_state:
            _merge_state(state, s.test_state[k])
        state.stage.extend(stages)
        if level is not None:
            state.level = level
        specs.append(NetSpec("test", param, state, schema, path, lines, s, skipped=skipped,
                             assumed=located + assumed))
    return specs
