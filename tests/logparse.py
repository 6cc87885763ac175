"""A small reader of Caffe's Net::Init log lines, for holding protoaudit against real training logs.

It reads what net.cpp logs while it builds a net: the net text after "Initializing net from
parameters" (for the phase in its top-level `state { phase: ... }`), "Creating Layer", the
"<-"/"->" bottom and top lines, "Setting up", "Top shape:" and "Memory required for data:".
The same reader parses protoaudit's `--caffe-log` output, so both sides are compared alike.
"""
import re
from dataclasses import dataclass, field

# glog's prefix: severity+date, time, thread id, file:line]
GLOG_PREFIX = re.compile(r"^[IWEF]\d{4}\s+\d\d:\d\d:\d\d\.\d+\s+(\S+)\s+[\w.\-]+:\d+\]\s?")
SETTING_UP = re.compile(r"^Setting up (\S+)$")
TOP_SHAPE = re.compile(r"^Top shape: ((?:\d+ )*)\((\d+)\)$")
MEMORY = re.compile(r"^Memory required for data: (\d+)$")
BOTTOM = re.compile(r"^(\S+) <- (\S+)$")
TOP = re.compile(r"^(\S+) -> (\S+)(?: \(in-place\))?$")
STATE_PHASE = re.compile(r"^  phase: (TRAIN|TEST)$")


@dataclass
class Layer:
    name: str
    bottoms: list = field(default_factory=list)
    tops: list = field(default_factory=list)
    shapes: list = field(default_factory=list)  # one tuple per top, as "Top shape:" gave it
    memory: int = None  # the cumulative "Memory required for data" logged after this layer


@dataclass
class LoggedNet:
    phase: str = None
    layers: list = field(default_factory=list)
    memory: int = None  # the last "Memory required for data" of the net

    def layer(self, name):
        return next(l for l in self.layers if l.name == name)

    def data_inputs(self):
        """`--input TOP=SHAPE` values for the tops of layers with no bottom (their shape is the
        dataset's, which no prototxt states)."""
        return [f"{top}={'x'.join(map(str, shape))}"
                for layer in self.layers if not layer.bottoms
                for top, shape in zip(layer.tops, layer.shapes)]


def _message(line):
    """(text, starts_a_glog_record) for one log line."""
    m = GLOG_PREFIX.match(line)
    return (line[m.end():], True) if m else (line, False)


def parse(text):
    """Every net the log builds, in order. A net starts at "Initializing net from parameters" (or at
    the first "Creating Layer" after the previous net's "Network initialization done.")."""
    nets = []
    net = None
    done = False  # the net said "Network initialization done." (old Caffe logs its Memory after it)
    in_param_text = in_state = False
    creating = {}  # layer name -> Layer, for "<-"/"->" lines seen before "Setting up"
    for raw in text.splitlines():
        line, glog = _message(raw.rstrip("\r\n"))
        line = line.rstrip()
        if glog:
            in_param_text = in_state = False
        if line.startswith("Initializing net from parameters"):
            net = LoggedNet()
            nets.append(net)
            creating, done = {}, False
            in_param_text = True
            continue
        if in_param_text:
            if line == "state {":
                in_state = True
            elif in_state and line == "}":
                in_state = False
            elif in_state and STATE_PHASE.match(line):
                net.phase = STATE_PHASE.match(line).group(1)
            continue
        if line.startswith("Network initialization done"):
            done = True
            continue
        if line.startswith("Creating Layer "):
            if net is None or done:
                net = LoggedNet()
                nets.append(net)
                creating, done = {}, False
            name = line[len("Creating Layer "):].strip()
            creating[name] = Layer(name)
            continue
        if net is None:
            continue
        m = BOTTOM.match(line)
        if m and m.group(1) in creating:
            creating[m.group(1)].bottoms.append(m.group(2))
            continue
        m = TOP.match(line)
        if m and m.group(1) in creating:
            creating[m.group(1)].tops.append(m.group(2))
            continue
        m = SETTING_UP.match(line)
        if m:
            net.layers.append(creating.pop(m.group(1), None) or Layer(m.group(1)))
            continue
        m = TOP_SHAPE.match(line)
        if m and net.layers:
            shape = tuple(int(d) for d in m.group(1).split())
            count = 1
            for d in shape:
                count *= d
            if count != int(m.group(2)):
                raise ValueError(f"unreadable Top shape line (count {m.group(2)} != {count}): {raw}")
            net.layers[-1].shapes.append(shape)
            continue
        m = MEMORY.match(line)
        if m:
            net.memory = int(m.group(1))
            if net.layers and not done:
                net.layers[-1].memory = net.memory
    nets = [n for n in nets if n.layers]
    for k, n in enumerate(nets):
        if n.phase is None:  # Caffe's default NetState phase is TEST; a solver builds TRAIN first
            n.phase = "TRAIN" if k == 0 else "TEST"
    return nets


def parse_by_thread(text):
    """Every net of a log into which several processes wrote at once, their lines interleaved:
    each thread's lines (glog's thread id; a line with no prefix goes with the line before) are
    parsed alone, and the nets put in the order of their "Initializing net" lines."""
    lines, order, thread = {}, [], None
    for raw in text.splitlines():
        m = GLOG_PREFIX.match(raw)
        if m:
            thread = m.group(1)
            if raw[m.end():].startswith("Initializing net from parameters"):
                order.append(thread)
        lines.setdefault(thread, []).append(raw)
    nets = {t: iter(parse("\n".join(kept))) for t, kept in lines.items()}
    return [next(nets[t]) for t in order]


def first_difference(expected, got):
    """The first place where `got` differs from the log's net `expected`, in words; None if none."""
    for k, (exp, act) in enumerate(zip(expected.layers, got.layers)):
        if exp.name != act.name:
            return f"layer {k}: Caffe set up '{exp.name}', protoaudit '{act.name}'"
        if exp.shapes != act.shapes:
            return f"layer '{exp.name}': Caffe's top shapes {exp.shapes}, protoaudit's {act.shapes}"
        if exp.memory is not None and exp.memory != act.memory:
            return (f"layer '{exp.name}': Caffe's Memory required for data {exp.memory}, "
                    f"protoaudit's {act.memory}")
    if len(expected.layers) != len(got.layers):
        n = min(len(expected.layers), len(got.layers))
        longer = expected if len(expected.layers) > n else got
        return (f"Caffe set up {len(expected.layers)} layers, protoaudit {len(got.layers)} "
                f"(first unmatched: '{longer.layers[n].name}')")
    if expected.memory != got.memory:
        return f"Memory required for data: Caffe {expected.memory}, protoaudit {got.memory}"
    return None
