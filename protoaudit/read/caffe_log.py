"""Caffe's own training log, read for what it says about the run: the solver and nets it
initialised (their text, as `Net::Init` printed it), the shape of every top it set up, and where
the run died if it died.

A log may hold several runs (a job restarted into the same file, or processes writing into it at
once, their lines told apart by glog's thread id); the run audited is the last one that built a net.
glog cuts any message at 30,000 bytes, so a long net's text may be cut: its layer lines
(`Top shape:`) are still whole, and `protoaudit NET --log LOG` takes them instead.
"""
import functools
import os
import re
from collections import Counter
from dataclasses import dataclass, field

from ..errors import InputError
from . import special
from .glog import GLOG, MAX_LOG_BYTES

# glog truncates a message to 30,000 bytes (LogMessage::kMaxLogMessageLen, its newline included)
GLOG_MAX_MESSAGE = 30000
MAX_LINE = 2**20  # glog writes no line this long; a longer one is read in pieces
# The numbers Caffe prints are at most 64-bit; a line with longer ones (or with no number where one
# belongs) is no line Caffe wrote, and is passed over as any other unknown line is.
_TOP_SHAPE = re.compile(r"^Top shape: ((?:[0-9]{1,20} )*)\(([0-9]{1,20})\)$")
_MEMORY = re.compile(r"^Memory required for data: ([0-9]{1,20})$")
_LOSS_WEIGHT = re.compile(r"^with loss weight ([-+]?(?:[0-9]{1,20}\.?[0-9]{0,20})(?:e[-+]?[0-9]{1,3})?)$")  # ostream's
_ARROW = re.compile(r"^(.+) (<-|->) (.+?)( \(in-place\))?$")
_ITERATION = re.compile(r"^Iteration ([0-9]{1,20})(?![0-9])")
_QUOTED = re.compile(r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'""")
_PYTHON_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): ")
_FRAME = re.compile(r"^\s*@\s+0x[0-9a-f]+\s+(.+?)\s*$")
# solver.cpp names the file each net comes from just before Net::Init prints it
# the file the next net comes from: the solver's net (solver.cpp), or a text file ReadProtoFromTextFile
# upgrades before a pycaffe script's net (upgrade_proto.cpp; a weights file it names is not a net's)
_NET_FILE = re.compile(r"^Creating (?:training|test) net .*? file: (.+)$"
                       r"|^Attempting to upgrade input file specified using deprecated [^:]*: (.+?\.(?:prototxt|pt))$")


@dataclass
class Text:
    """A message printed over several lines (a net's or solver's parameters): its text, the log
    line of its first line, and whether glog cut it."""

    text: str
    line: int
    cut: bool = False


@dataclass
class LoggedLayer:
    name: str
    line: int
    bottoms: list = field(default_factory=list)
    tops: list = field(default_factory=list)
    shapes: list = field(default_factory=list)
    weights: list = field(default_factory=list)  # per top: the loss weight Caffe printed under it, else 0


@dataclass
class LoggedNet:
    """One net Caffe initialised: its printed parameters and the layers it set up."""

    params: Text
    phase: str = None  # from the printed `state { phase }`
    layers: list = field(default_factory=list)
    done: bool = False  # "Network initialization done."
    memory: int = None  # the last "Memory required for data"
    creating: str = None  # the last layer Caffe began to create (where a failed setup stopped)
    source: str = None  # the net file the solver named for it, as the log gives it

    @property
    def memory_per_layer(self):
        """Whether this Caffe logged "Memory required for data" after each layer (since 2015); the
        Caffe of 2014 logged it once, after "Network initialization done.", and its blobs had four axes."""
        return not self.done or self.memory is not None

    @property
    def four_axes(self):
        """Whether its Caffe gave every blob four axes: it logged the memory once, as the Caffe of 2014
        did, and every shape it logged has four axes. A Caffe of early 2015 logged the memory once but
        shapes of any rank (a (128, 30) HDF5 label: qiexing/caffe-regression's log)."""
        return not self.memory_per_layer and all(len(shape) == 4 for layer in self.layers for shape in layer.shapes)

    def by_name(self):
        """The layers Caffe set up, by name; a name Caffe set up twice (Net::Init allows it) is left
        out, as it names no one layer."""
        times = Counter(layer.name for layer in self.layers)
        return {layer.name: layer for layer in self.layers if times[layer.name] == 1}

    def repeated(self):
        """The layers of a name Caffe set up more than once (a quantized net's many 'quantized_conv1'),
        in the order it set them up: the k-th layer of that name in the net is the k-th here."""
        times = Counter(layer.name for layer in self.layers)
        out = {}
        for layer in self.layers:
            if times[layer.name] > 1:
                out.setdefault(layer.name, []).append(layer)
        return out

    def top_shapes(self):
        """The shape Caffe logged for every top it set up (a top set up again, in place, keeps its last)."""
        return {top: shape for layer in self.layers for top, shape in zip(layer.tops, layer.shapes)}

    def data_shapes(self):
        """The shape Caffe logged for every top of a layer with no bottom (a data source)."""
        return {top: shape for layer in self.layers if not layer.bottoms
                for top, shape in zip(layer.tops, layer.shapes)}


@dataclass
class Failure:
    """A fatal CHECK: its line and text, the iteration it came in, and the stack glog printed."""

    line: int
    message: str
    iteration: int = None  # the last "Iteration N" before it (None: before Solve began)
    solving: bool = False  # after "Solving ...": inside Solver::Step
    testing: bool = False  # the last iteration line was "Testing net"
    frames: list = field(default_factory=list)  # function names, innermost first

    @property
    def out_of_memory(self):
        return "out of memory" in self.message


@dataclass
class Run:
    """One `caffe train` (or pycaffe) process in the log."""

    line: int
    thread: str = None  # glog's thread id of the line that began it
    solver: Text = None
    nets: list = field(default_factory=list)
    failure: Failure = None
    gpus: list = field(default_factory=list)  # the card names Caffe printed ("GPU 0: GeForce GTX 1080 Ti")
    # ("cpu" or "gpu", what caffe.cpp printed before the run began: "Use CPU.", "Use GPU with device ID 0", its
    # line); None where it printed neither (a pycaffe script's run)
    device: tuple = None


def read(path):
    """Every run in the log at `path`, read line by line (bounded by MAX_LOG_BYTES), once per
    version of the file (an audit asks for it while building and again for the run's end)."""
    special.refuse(path, "Caffe log")
    try:
        stat = os.stat(path)
    except OSError as e:
        raise InputError(f"cannot read the log: {e.strerror}", file=path) from None
    return _read(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _read(path, size, mtime):
    try:
        handle = open(path, encoding="utf-8", errors="replace")
    except OSError as e:
        raise InputError(f"cannot read the log: {e.strerror}", file=path) from None
    if size > MAX_LOG_BYTES:
        raise InputError(f"the file is over {MAX_LOG_BYTES // 2**30} GiB, larger than any Caffe log protoaudit "
                         "reads", file=path, fix="cut the log to the part that initialises the nets")
    with handle:
        return _Reader().read(_bounded_lines(handle, path))


def _bounded_lines(handle, path):
    """The file's lines, none longer than MAX_LINE characters (the rest of a longer one is read in
    pieces and passed over, so the lines after it keep their numbers) and no more than MAX_LOG_BYTES
    in all: a file that never ends is refused."""
    total = 0
    while True:
        line = piece = handle.readline(MAX_LINE)
        if not line:
            return
        total += len(piece)
        while not piece.endswith("\n") and len(piece) == MAX_LINE:
            piece = handle.readline(MAX_LINE)
            total += len(piece)
            if total > MAX_LOG_BYTES:
                break
        if total > MAX_LOG_BYTES:
            raise InputError(f"the log goes on past {MAX_LOG_BYTES // 2**30} GiB, larger than any Caffe log "
                             "protoaudit reads", file=path, fix="cut the log to the part that initialises the nets")
        yield line


class _Reader:
    def __init__(self):
        self.runs = []
        self.run = None
        self.text = None  # [kind, lines, first line, size, thread] of a multi-line message being read
        # thread -> [(a net it sets up, {name: LoggedLayer being created}: net.cpp prints <- and ->
        # before "Setting up")], the last the one it is in: a recurrent layer's setup builds its
        # unrolled net (printed as a net of its own) inside its own net's, which goes on after it.
        # Processes writing into one log (a script's workers each building a net) interleave their
        # lines; glog's thread id tells whose each is.
        self.building = {}
        self.iteration = None
        self.solving = self.testing = False
        self.gpus = []  # card names caffe.cpp prints before the solver starts the run
        self.device = None  # (Run.device) what caffe.cpp printed of the mode before the run began
        self.sources = {}  # thread -> the net file solver.cpp said its next net comes from
        self.python_error = None  # (run, Failure): the last Python exception while it set up a net

    def read(self, lines):
        for number, raw in enumerate(lines, 1):
            line = raw.rstrip("\r\n")
            m = GLOG.match(line)
            if self.text is not None:
                if m is None:
                    self.text[1].append(line)
                    self.text[3] += len(raw)
                    continue
                if not self.text[1] and not line[m.end():].strip():
                    # Intel Caffe logs the text as a message of its own, whose first line is empty
                    self.text[2], self.text[3] = number + 1, len(raw)
                    continue
                self._end_text()
            if self.run is not None and self.run.failure is not None and m is None:
                frame = _FRAME.match(line)
                if frame:
                    self.run.failure.frames.append(frame.group(1))
                continue
            if m is None:
                self._python_error(line, number)
                continue
            self._message(line[m.end():], m.group(1), m.group(2), number, len(raw))
        if self.text is not None:
            self._end_text()
        self._settle()
        return self.runs

    def _python_error(self, line, number):
        """A Python exception's last line (`ImportError: No module named pyloss`) while a net is set up:
        a Python layer's module or setup raised it, which ends the process (pycaffe's layer factory
        lets it through), unless the net's setup goes on after it in the log."""
        if self.run is not None and _PYTHON_ERROR.match(line) and any(
                not net.done for net, _ in self.building.get(self.run.thread, ())):
            self.python_error = (self.run, Failure(number, line.strip(), self.iteration, self.solving, self.testing))

    def _settle(self):
        """The Python exception the log ended a run's setup with is that run's failure."""
        if self.python_error is not None:
            run, failure = self.python_error
            run.failure = run.failure or failure
            self.python_error = None

    def _new_run(self, number, thread):
        self._settle()
        self.run = Run(number, thread, gpus=self.gpus, device=self.device)
        self.gpus, self.device = [], None
        self.runs.append(self.run)
        self.iteration, self.solving, self.testing = None, False, False

    def _unprinted(self, number, thread):
        """A net whose setup begins with no printed text before it (a log kept from its first layer
        on): a net of its own, its text missing (read from a file beside the log, if one holds its
        layers, as a cut text is)."""
        if self.run is None or self.run.thread != thread or any(net.done for net in self.run.nets):
            self._new_run(number, thread)
        net = LoggedNet(Text("", number, cut=True), None, source=self.sources.pop(thread, None))
        self.run.nets.append(net)
        self.building[thread] = [(net, {})]

    def _end_text(self):
        kind, lines, first, size, thread = self.text
        self.text = None
        text = Text("\n".join(lines), first, cut=size >= GLOG_MAX_MESSAGE - 1 or _opened(lines))
        if kind == "solver":
            self.run.solver = text
        else:
            stack = [entry for entry in self.building.get(thread, ()) if not entry[0].done]
            net = LoggedNet(text, _state_phase(lines), source=None if stack else self.sources.pop(thread, None))
            if not stack:  # (an unrolled net inside a layer is the layer's, not the run's)
                self.run.nets.append(net)
            self.building[thread] = stack + [(net, {})]

    def _message(self, msg, severity, thread, number, size):
        msg = msg.rstrip()
        if msg.startswith("Initializing solver from parameters"):
            self._new_run(number, thread)
            self.text = ["solver", [], number + 1, size, thread]
            return
        if msg.startswith("Initializing net from parameters"):
            if (self.run is None or self.run.thread != thread
                    or (self.run.solver is None and self.run.failure is not None)):
                self._new_run(number, thread)  # a pycaffe process builds nets with no solver
            self.text = ["net", [], number + 1, size, thread]
            return
        if msg == "Use CPU." or msg.startswith("Use GPU with device ID "):
            self.device = ("cpu" if msg == "Use CPU." else "gpu"), msg, number
            return
        if msg.startswith("GPU ") and ": " in msg:
            (self.run.gpus if self.run is not None and not self.run.nets else self.gpus).append(msg.split(": ", 1)[1])
            return
        if msg.startswith("Creating Layer ") and not any(not net.done for net, _ in self.building.get(thread, ())):
            self._unprinted(number, thread)
        m = _NET_FILE.match(msg)
        if m:  # (a pycaffe script's file comes before any run)
            self.sources[thread] = (m.group(1) or m.group(2)).strip()
            return
        if self.run is None:
            return
        if severity == "F":
            if self.run.failure is None:
                self.run.failure = Failure(number, msg, self.iteration, self.solving, self.testing)
            return
        if msg.startswith("Solving"):
            self.solving = True
            return
        m = _ITERATION.match(msg)
        if m:
            self.iteration = int(m.group(1))
            self.testing = "Testing net" in msg
            return
        net, creating = (self.building.get(thread) or [(None, None)])[-1]
        if net is None or net.done:
            return
        self.python_error = None  # the setup went on: the exception did not end it
        if msg.startswith("Creating Layer "):
            name = msg[len("Creating Layer "):].strip()
            creating[name] = LoggedLayer(name, number)
            net.creating = name
        elif msg.startswith("Setting up "):
            name = msg[len("Setting up "):].strip()
            net.layers.append(creating.pop(name, None) or LoggedLayer(name, number))
        elif msg.startswith("Top shape:"):
            m = _TOP_SHAPE.match(msg)
            # a Caffe of 2014 logged its data layer's shapes with no "Creating Layer" before them: they
            # are the printed net's first layer's with no bottom (read only then: most logs never need it)
            source = _first_source(net.params.text.split("\n")) if m and not net.layers else None
            if source is not None:
                net.layers.append(LoggedLayer(source[0], number, tops=list(source[1])))
            if m and net.layers:
                net.layers[-1].shapes.append(tuple(int(d) for d in m.group(1).split()))
                net.layers[-1].weights.append(0.0)
        elif msg.lstrip().startswith("with loss weight "):
            m = _LOSS_WEIGHT.match(msg.lstrip())
            if m and net.layers and net.layers[-1].weights:
                net.layers[-1].weights[-1] = float(m.group(1))
        elif msg.startswith("Memory required for data:"):
            m = _MEMORY.match(msg)
            if m:
                net.memory = int(m.group(1))
        elif msg.startswith("Network initialization done"):
            net.done = True
            if len(self.building[thread]) > 1:  # an unrolled net: its layer's net goes on
                self.building[thread].pop()
        else:
            m = _ARROW.match(msg)
            if m and m.group(1) in creating:
                layer = creating[m.group(1)]
                (layer.bottoms if m.group(2) == "<-" else layer.tops).append(m.group(3))


def _opened(lines):
    """Whether a printed message ends inside one of its messages: glog cut it (its 30,000 bytes
    counted before a log's copy lost the text's indentation, or in bytes its characters
    outnumber)."""
    depth = 0
    for line in lines:
        line = _QUOTED.sub("", line)
        depth += line.count("{") - line.count("}")
    return depth > 0


def _first_source(lines):
    """(name, tops) of the first layer of a printed net that has no bottom; None where none has."""
    depth, name, tops, bottoms, inside = 0, "", [], False, False
    for line in lines:
        text = _QUOTED.sub('""', line).strip()
        if depth == 0 and re.match(r"layers?\s*\{", text):
            inside, name, tops, bottoms = True, "", [], False
        elif inside and depth == 1:
            m = re.match(r'(name|top|bottom)\s*:\s*"([^"]*)"', line.strip())
            if m:
                key, value = m.groups()
                name = value if key == "name" else name
                tops += [value] if key == "top" else []
                bottoms = bottoms or key == "bottom"
        depth += text.count("{") - text.count("}")
        if inside and depth == 0:
            if not bottoms and tops:
                return name, tuple(tops)
            inside = False
    return None


def _state_phase(lines):
    """The phase in the printed net's top-level `state { ... }` (it comes right after the name)."""
    inside = False
    for line in lines:
        if line == "state {":
            inside = True
        elif inside and line == "}":
            return None
        elif inside and line.strip().startswith("phase:"):
            return line.split(":", 1)[1].strip()
        elif not inside and line.startswith("layer"):
            return None
    return None


def died_setting_up(runs, names):
    """(how many layers it set up, the Failure) where a run of the log died while setting up a net
    whose layers are `names` (those it set up are their first ones), as a data layer's prefetch
    thread that stops on an image smaller than its crop does; None where none did."""
    for run in runs:
        if run.failure is None or run.failure.solving:
            continue
        for net in run.nets:
            set_up = [layer.name for layer in net.layers]
            if not net.done and set_up and set_up == names[:len(set_up)] and len(set_up) < len(names):
                return len(set_up), run.failure
    return None


def built_runs(runs, path):
    """The runs that set up a net, in order (a job restarted into the same log has several). A net
    whose printed state has no phase (an old Caffe) is the solver's TRAIN net when it comes first,
    else a TEST net."""
    built = [r for r in runs if any(n.layers for n in r.nets)]
    if not built:  # Caffe printed the net and died before its first layer was set up (a dataset it could
        # not open): the printed net is still the net it ran, audited as its file would be
        built = [r for r in runs if r.nets and all(n.params.text.strip() or n.params.cut for n in r.nets)][-1:]
    if not built:
        raise InputError(
            "the log holds no net Caffe set up (no 'Initializing net from parameters' followed by its "
            "layers)", file=path, fix="give the net file, and this log with --log for its data shapes")
    for run in built:
        for k, net in enumerate(run.nets):
            if net.phase is None:
                net.phase = "TRAIN" if k == 0 and run.solver is not None else "TEST"
    return built


def chosen_run(runs, path):
    """The run to audit: the last one that set up a net."""
    return built_runs(runs, path)[-1]


def logged_nets(path):
    """The nets of the log's chosen run that Caffe set up, the first of each phase."""
    out = {}
    for net in chosen_run(read(path), path).nets:
        if net.layers and net.phase and net.phase not in out:
            out[net.phase] = net
    return list(out.values())


def data_shapes(path):
    """{phase: ({top: shape}, where)} for the nets of the log's chosen run: the shapes Caffe
    logged for its data sources' tops."""
    return {net.phase: (net.data_shapes(), f"Caffe's log {path}:{net.layers[0].line}") for net in logged_nets(path)}
