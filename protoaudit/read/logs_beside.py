"""Caffe logs beside a net: the shapes Caffe logged for its data tops, for a data source whose dataset
is not on this machine. Repositories often keep the log of the run that trained a net beside it
(`train.log`, `log.txt`, `nohup.out`); its `Top shape:` lines are what the dataset gave, which no
prototxt states, as `protoaudit NET --log LOG` takes them."""
import os
import re

from ..errors import InputError
from . import caffe_log
from .datasets.paths import sources_of

MAX_FILES = 16  # files opened, in the net's folder and its log folders
MAX_BYTES = 64 << 20  # a larger file is passed over (Caffe's own logs of a run are rarely this large)
HEAD = 4 << 20  # a log names its net within this many bytes, or is passed over unread
# a log's names: train.log, log.txt, nohup.out, a cluster job's output (SGE's and PBS's NAME.o639312,
# NAME.e639312: glog writes to stderr), and glog's own files (caffe.HOST.USER.log.INFO.20160320-043113.4127,
# and the caffe.INFO link to the latest)
_NAMES = re.compile(r".*(\.log|\.txt|\.out|log|\.[oe]\d+|\.log\.INFO\.\d{8}-\d{6}\.\d+|\.INFO)$", re.IGNORECASE)
_LOG_FOLDERS = ("log", "logs", "Log", "Logs")
_INIT = b"] Initializing net from parameters"


def logged_beside(path, param, phase):
    """(LoggedNet, file) of a Caffe log beside the net file `path` (its folder, a log/logs folder in
    it or beside it) that initialised this net in `phase`: the same name and nine in ten of the net's layers
    by name. The last run in the file to build it wins; of several files, the first whose data layers read
    the most of the file's own data sources (a folder of several repositories' logs, one of them this
    net's own run); None where no log did."""
    folder = os.path.dirname(os.path.abspath(path))
    names = {lp.name for lp in param.layer}
    sources = {source for lp in param.layer if not lp.bottom for source in sources_of(lp)}
    best, best_score = None, -1
    for candidate in _candidates(folder, param.name):
        try:
            runs = caffe_log.read(candidate)
        except (InputError, OSError):
            continue
        found = None
        for run in runs:
            for net in run.nets:
                if net.phase == phase and net.layers and _same_net(net, param, names):
                    found = (net, candidate)
        if found:
            printed = set(_PRINTED_SOURCE.findall(found[0].params.text if found[0].params else ""))
            score = len(printed & sources)
            if score > best_score:
                best, best_score = found, score
            if score == len(printed):  # every dataset it read is the file's
                break
    return best


# a data source as Caffe prints a layer's parameters
_PRINTED_SOURCE = re.compile(r'^\s*source: "([^"\n]*)"$', re.MULTILINE)


def _candidates(folder, name):
    """Files that may be Caffe logs of the net `name`, in `folder`, its log folders and those beside
    it (a repository's models/ and log/ side by side): at most
    MAX_FILES files with a name a log has (those that say "log" first) are opened, at most MAX_BYTES
    each, and kept where their first HEAD bytes hold Net::Init's line and the net's name. (A folder of
    a dataset's many .txt files costs a look at their names, not a read of each.)"""
    printed = f'name: "{name}"'.encode() if name else _INIT
    named = []
    parent = os.path.dirname(folder)
    for where in (folder, *(os.path.join(folder, f) for f in _LOG_FOLDERS),
                  *(os.path.join(parent, f) for f in _LOG_FOLDERS if parent != folder)):
        try:
            with os.scandir(where) as entries:
                named += [e.path for e in entries if _NAMES.fullmatch(e.name)]
        except OSError:
            continue
    named.sort(key=lambda path: ("log" not in os.path.basename(path).lower(), path))
    out = []
    for path in named[:MAX_FILES]:
        try:
            if not (os.path.isfile(path) and 0 < os.path.getsize(path) <= MAX_BYTES):
                continue
            with open(path, "rb") as f:
                head = f.read(HEAD)
            if _INIT in head and printed in head:
                out.append(path)
        except OSError:
            continue
    return out


def _same_net(logged, param, names):
    """Whether the net Caffe logged is this one: nine in ten of the layers it set up (past the
    splits Caffe inserts) are the net's by name, the net's printed name is the file's, and the layers
    of one name are of one type, nine in ten of them and every layer that reads no bottom (a data
    layer: a log of another repository's CaffeNet beside a net whose data layer is its own type
    names the same layers, but its data tops are not this net's)."""
    set_up = [layer.name for layer in logged.layers if not layer.name.endswith("_split")]  # (SplitLayerName)
    if not set_up or sum(name in names for name in set_up) < 0.9 * len(set_up):
        return False
    text = logged.params.text if logged.params else ""
    printed = re.search(r'^name: "([^"]*)"', text, re.MULTILINE)
    if printed is not None and param.name and printed.group(1) != param.name:
        return False
    types = {name: _kind(kind) for name, kind in _PRINTED_LAYER.findall(text)}
    both = [lp for lp in param.layer if lp.name in types]
    differ = [lp for lp in both if _kind(lp.type) != types[lp.name]]
    if len(differ) > 0.1 * len(both) or any(not lp.bottom for lp in differ):
        return False
    return all(_sizes_printed(text, lp.name) == _sizes(lp) for lp in both if not lp.bottom)


# what of a data layer's transform decides its top's size, as Caffe prints it and as the file gives it: a log of
# another net of the same layer names (another repository's AlexNet) crops where this one does not
_SIZED_BY = ("crop_size", "new_height", "new_width", "crop_h", "crop_w")


def _sizes_printed(text, name):
    """{field: value} of _SIZED_BY in the printed block of layer `name` (its text up to the next layer)."""
    start = re.search(r'^layers? \{\n\s*name: "' + re.escape(name) + '"\n', text, re.MULTILINE)
    if start is None:
        return None
    end = re.compile(r"^layers? \{", re.MULTILINE).search(text, start.end())
    block = text[start.end():end.start() if end else len(text)]
    return {k: v for k, v in re.findall(r"^\s*(" + "|".join(_SIZED_BY) + r"): (\d+)$", block, re.MULTILINE)}


def _sizes(lp):
    """The same of the file's layer: every such field it sets, in any of its parameter messages."""
    found = {}

    def walk(msg):
        for field, value in msg.ListFields():
            if field.message_type is not None:
                for sub in (value if field.is_repeated else [value]):
                    walk(sub)
            elif field.name in _SIZED_BY and not field.is_repeated:
                found[field.name] = str(value)

    walk(lp)
    return found


# a layer as Caffe prints its parameters: its name, then its type (a string; an enum in a V1 net's `layers`)
_PRINTED_LAYER = re.compile(r'^layers? \{\n\s*name: "([^"]*)"\n\s*type: "?(\w+)"?$', re.MULTILINE)


def _kind(layer_type):
    """A type as one word, whether written as V1's enum or as a string (INNER_PRODUCT, InnerProduct)."""
    return layer_type.replace("_", "").lower()


def fill(known, logged):
    """A needed top's shape from the one Caffe logged: the dimensions the layer knows (its batch)
    over it, where the ranks agree or only the batch is known; None where they disagree."""
    if not known or all(k is None for k in known):
        return tuple(logged)
    if len(known) == len(logged):
        return tuple(k if k is not None else d for k, d in zip(known, logged))
    if known[0] is not None and all(k is None for k in known[1:]) and logged:
        return (known[0],) + tuple(logged[1:])
    return None
