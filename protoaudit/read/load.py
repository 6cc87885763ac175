"""Read a prototxt through the compiled Caffe schema: a net or a solver, BVLC or a fork.

protobuf's own text parser does the reading; its tokens also give the line where each layer
starts, so later errors can point at the layer in the user's file. A file is read once per content
(protoaudit.read.tokens): an audit, its test net and a batch search all ask for the same file.
"""
import os
import re
from typing import NamedTuple

from google.protobuf import text_format

from ..errors import InputError, closest
from . import special
from . import lenient, whose
from .folders import last_parts, shown, tails, up_from
from .schema import FORKS, SAME_FIELDS, SCHEMA_NAMES, USER_PREFIX, ancestors, described, differing_names, load_schema
from .tokens import Text, has_tokens, parse

# Larger than any real net (the biggest public ones are well under 1 MiB): reading such a file
# through protobuf's text parser would take minutes, so it is refused at once.
MAX_FILE_BYTES = 16 * 2**20
# protobuf's own text parser refuses messages nested deeper than this (its recursion limit).
MAX_DEPTH = 100
# Bytes that never occur in a text prototxt but do in binary protobuf (field tags, lengths).
_BINARY_BYTES = bytes(set(range(32)) - set(b"\t\n\r\f\v"))


class Block:
    """A message-valued field in the text: where it starts and ends (`end`, 0 until its closing
    brace is read), its own `name: "..."` (`label`, if it has one) and the blocks inside it.
    Written out rather than a dataclass: the class is made on every start, its objects once per
    block of the file."""

    __slots__ = ("name", "line", "end", "label", "children")

    def __init__(self, name, line):
        self.name, self.line, self.end, self.label, self.children = name, line, 0, "", []

    def blocks(self, *names):
        return [c for c in self.children if c.name in names]


class Source(NamedTuple):
    """A file read through one schema: what kind of message it is, and where its layers are."""

    path: str
    kind: str  # "net" or "solver"
    message: object
    schema: object
    text: str
    layer_lines: dict  # see layer_lines
    skipped: tuple = ()  # protoaudit.read.lenient.Skipped: fields no shipped schema has, read past
    assumed: tuple = ()  # (layer, what, override): the template values taken where the file gave none


def read_text(path):
    """The file's text, or a clear error for a missing, empty or binary file, or for no file at all."""
    special.refuse(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise InputError("no such file", file=path, fix="check the path") from None
    except IsADirectoryError:
        raise InputError("this is a folder, not a prototxt file", file=path) from None
    except OSError as e:
        raise InputError(f"cannot read the file: {e.strerror}", file=path) from None
    if len(data) > MAX_FILE_BYTES:
        raise InputError(
            f"the file is over {MAX_FILE_BYTES // 2**20} MiB, far larger than any Caffe net or solver",
            file=path, fix="give the net's train_val.prototxt, deploy.prototxt or solver.prototxt",
        )
    if looks_binary(data[:65536]):
        raise InputError(
            "this is a binary file, not a text prototxt",
            file=path,
            fix="a .caffemodel or .binaryproto holds weights or a mean, not a net; give the "
            "train_val.prototxt, deploy.prototxt or solver.prototxt instead",
        )
    text = data.decode("utf-8", errors="replace")
    if not text.strip() or not has_tokens(text):
        raise InputError("the file is empty", file=path, fix="give a net or solver prototxt")
    if text.startswith(LFS_POINTER):
        raise InputError("this is a Git LFS pointer, not the file: the repository keeps the file itself in LFS",
                         file=path, fix="run `git lfs pull` in the repository (Git LFS installed), then give the file")
    return text


LFS_POINTER = "version https://git-lfs.github.com/spec/v1\n"  # a pointer file's first line (the LFS spec)


def looks_binary(head):
    """Whether bytes hold what no text file does (control bytes other than whitespace)."""
    return head.translate(None, _BINARY_BYTES) != head


_TEMPLATE = re.compile(r"\$\{(\w+)\}")
_QUOTED_OR_COMMENT = re.compile(r""""(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|#.*""")
# Placeholders a template's own script gives one value in its stock setting: name -> (value, what it is).
# DeepLab's run_pascal.sh (v1 and v2) sets NUM_LABELS=21 for its stock experiment, EXP=voc12.
TEMPLATE_DEFAULTS = {
    "NUM_LABELS": ("21", "the classes DeepLab's run_pascal.sh gives its nets for PASCAL VOC 2012 (EXP=voc12): "
                         "20 and the background"),
}


def substitute(text, defines, path, first_line=1):
    """(text, assumptions): `${NAME}` templates (DeepLab's nets are written for a script that runs
    sed over them) replaced by `defines`, else by the stock value its script gives (TEMPLATE_DEFAULTS,
    each an assumption). Caffe itself reads no templates, so any other left outside a quoted string
    cannot parse: every such name is asked for at once. Inside strings (paths) one may stay."""
    if "${" not in text:
        return text, ()
    for name, value in defines.items():
        text = text.replace("${" + name + "}", value)
    unset = {}
    for number, line in enumerate(text.split("\n"), first_line):
        for name in _TEMPLATE.findall(_QUOTED_OR_COMMENT.sub("", line)):
            unset.setdefault(name, number)
    asked = {n: line for n, line in unset.items() if n not in TEMPLATE_DEFAULTS}
    if asked:
        names = ", ".join("${" + n + "}" for n in asked)
        raise InputError(f"the file is a template: {names} must be given a value",
                         file=path, line=min(asked.values()),
                         fix=" ".join(f"give --define {n}=VALUE" if i == 0 else
                                      f"--define {n}=VALUE" for i, n in enumerate(asked)))
    assumed = []
    for name, line in unset.items():
        value, what = TEMPLATE_DEFAULTS[name]
        text = text.replace("${" + name + "}", value)
        assumed.append(("(file)", f"${{{name}}} ({os.path.basename(path)}:{line}) is taken as {value}: {what}; "
                                  "the file is a template its script fills in",
                        f"--define {name}=N gives your value"))
    return text, tuple(assumed)


def outline(text, until=None):
    """The tree of message blocks in `text` (a protoaudit.read.tokens.Text), from protobuf's tokens
    (never a parser of ours); up to line `until` only, when that is all an error message needs.

    A block is named by the identifier before its brace (colons between), and labelled by the
    string after a `name` (colons between) inside it; other tokens are passed over. Read whole, only
    the file's own blocks and those of a solver's nets are kept (the layers, whose lines are what
    is read then); up to a line, every block (an error names the innermost layer)."""
    root = Block("", 1)
    stack = [root]
    deeper = Block("", 0)  # stands for a block inside a layer, followed for its braces only
    tokens, line_of = text.outline_tokens
    for i in [i for i, t in enumerate(tokens) if t in _MARKS]:
        t, line = tokens[i], line_of[i] + 1
        if until is not None and line > until:
            break
        if t == "name":
            j = _skip_colons(tokens, i, 1)
            if j < len(tokens) and tokens[j].startswith(("'", '"')) and (until is None or line_of[j] < until):
                stack[-1].label = tokens[j][1:-1]
        elif t in ("{", "<"):
            if len(stack) > MAX_DEPTH:
                raise InputError(f"messages are nested more than {MAX_DEPTH} levels deep",
                                 line=line, fix="no Caffe net or solver nests so deep; check the braces")
            j = _skip_colons(tokens, i, -1)
            named = j >= 0 and _is_identifier(tokens[j])
            parent = stack[-1]
            if until is None and parent is not root and parent.name not in NET_FIELDS:
                stack.append(deeper)
                continue
            block = Block(tokens[j], line_of[j] + 1) if named else Block("", line)
            parent.children.append(block)
            stack.append(block)
        elif len(stack) > 1:  # a closing brace
            stack.pop().end = line
    return root


_MARKS = frozenset(("{", "<", "}", ">", "name"))
NET_FIELDS = frozenset(("net_param", "train_net_param", "test_net_param"))  # a solver's nets, in the file


def _skip_colons(tokens, i, step):
    j = i + step
    while 0 <= j < len(tokens) and tokens[j] == ":":
        j += step
    return j


def _is_identifier(token):
    return token[:1].isalpha() or token[:1] == "_"


def layer_lines(root):
    """What an outline read whole is kept for: the start line of each layer of the file's own net
    (key ("", 0)) and of each net a solver holds in its text (key (field, index): ("net_param", 0),
    ("test_net_param", 1)...). Where a net has legacy `layers` blocks, Caffe's upgrade builds the
    net from those alone."""
    nets = {("", 0): root}
    for name in NET_FIELDS:
        nets.update(((name, i), block) for i, block in enumerate(root.blocks(name)))
    return {key: tuple(b.line for b in (block.blocks("layers") or block.blocks("layer")))
            for key, block in nets.items()}


def layer_at(root, line):
    """The innermost `layer`/`layers` block containing `line`, for naming a layer in a parse error."""
    found = None
    stack = [root]
    while stack:
        block = stack.pop()
        for child in block.children:
            if child.line <= line and (child.end == 0 or line <= child.end):
                if child.name in ("layer", "layers"):
                    found = child
                stack.append(child)
    return found


def _parse(text, schema, kind):
    message = (schema.NetParameter if kind == "net" else schema.SolverParameter)()
    return parse(text, message)


def _layers_used(message, kind, schema_name="bvlc"):
    """(type, layer message) for every layer of a parsed net (or a solver's embedded nets), V1 enums
    as V2 names (BVLC's, or the fork's own: upgrade.FORK_V1_TYPES)."""
    from .upgrade import v1_type

    nets = _nets_of(message, kind)
    for net in nets:
        yield from ((layer.type, layer) for layer in net.layer)
        for v1 in net.layers:
            if v1.HasField("type"):
                name = v1.DESCRIPTOR.fields_by_name["type"].enum_type.values_by_number[v1.type].name
                yield v1_type(name, schema_name) or name, v1


def _types_used(message, kind, schema_name="bvlc"):
    """The layer types a parsed net (or a solver's embedded nets) names."""
    return {t for t, _ in _layers_used(message, kind, schema_name)}


def _known_types(schema_name):
    from ..layers import REGISTRY, fork_types

    return set(REGISTRY) | set(fork_types(schema_name))


def _embedded_nets(solver):
    if solver.HasField("net_param"):
        yield solver.net_param
    if solver.HasField("train_net_param"):
        yield solver.train_net_param
    yield from solver.test_net_param


def load(path, schema_name=None, defines=None, strict=False):
    """Read `path` as a net or a solver, choosing the schema (BVLC, else the fork it needs), with
    `${NAME}` templates replaced by `defines` (--define NAME=VALUE). Unless `strict`, a file no
    schema reads is read past fields none has, where they cannot change a figure (lenient)."""
    if schema_name is not None and schema_name not in SCHEMA_NAMES and not schema_name.startswith(USER_PREFIX):
        raise InputError(f"--fork {schema_name}: protoaudit knows {', '.join(SCHEMA_NAMES)}",
                         fix="or give your fork's caffe.proto with --caffe-proto")
    text, assumed = substitute(read_text(path), defines or {}, path)
    kind, data, schema, lines, skipped = _read(path, text, schema_name, strict)
    return Source(path, kind, _message(schema, kind, data), schema, text, lines, skipped, assumed)


def load_text(text, path, first_line=1, schema_name=None, defines=None, strict=False):
    """A net or solver printed inside another file (a Caffe log), read as `load` reads a file;
    its lines keep their numbers in that file, for error messages."""
    text, assumed = substitute(text, defines or {}, path, first_line)
    padded = "\n" * (first_line - 1) + text
    kind, data, schema, lines, skipped = _read(path, padded, schema_name, strict)
    return Source(path, kind, _message(schema, kind, data), schema, padded, lines, skipped, assumed)


def _message(schema, kind, data):
    """The caller's own message (upgrading works on it in place), from the serialized one kept."""
    return (schema.NetParameter if kind == "net" else schema.SolverParameter).FromString(data)


READINGS = {}  # (path, length and hash of the text, schema name) -> _read's reading, the last MAX_READINGS read
MAX_READINGS = 8


def _read(path, raw, schema_name, strict):
    """_reading, kept by the text's hash (an audit, its test net and a batch search all read the
    same file) with the message serialized (a tenth of the message's memory, and read back faster
    than a message is copied) and only the layers' lines of the outline: a 100,000-layer file's
    text and outline held for the whole audit would be 50 MB. The cache lives in one process, so
    Python's own string hash (64 bits, salted anew in every process) keys it: a digest from
    hashlib would cost every start its import (OpenSSL's library loaded, 5-10 ms)."""
    key = (path, len(raw), hash(raw), schema_name, strict)
    reading = READINGS.pop(key, None)
    if reading is None:
        kind, message, schema, lines, *skipped = _reading(path, raw, schema_name, strict)
        if not message.IsInitialized():  # a fork's `required` field left out: Caffe's text parser refuses the file
            missing = ", ".join(message.FindInitializationErrors())
            raise InputError(f"the caffe.proto of {described(schema.name)} requires fields the file leaves out: "
                             f"{missing} (Caffe's parser refuses the file)", file=path, fix="give each of them a value")
        reading = kind, message.SerializeToString(), schema, lines, tuple(skipped[0] if skipped else ())
    READINGS[key] = reading  # the newest last
    while len(READINGS) > MAX_READINGS:
        READINGS.pop(next(iter(READINGS)), None)
    return reading


def _reading(path, raw, schema_name, strict=True):
    """Read the text with the schema asked for, else choose: BVLC's when it reads the file and
    knows every layer type the file names; else the fork that does (several forks that would read
    the file differently make it ambiguous); a file no schema reads is read past fields none has
    (unless `strict`: _past_unknown_fields), else gets the fault that came furthest into it."""
    text = Text(raw)  # its tokens, found once for every schema tried and the outline
    failures = []
    if schema_name:
        reading = _try(text, schema_name, failures)
        if reading is None:
            raise _parse_failure(path, text, failures)
        return reading + (_lines(text, reading[0], path),)
    bvlc = _try(text, "bvlc", failures)
    if bvlc is not None:
        unknown = _types_used(bvlc[1], bvlc[0]) - _known_types("bvlc")
        if not unknown:
            return bvlc + (_lines(text, bvlc[0], path),)
        candidates = [f for f in FORKS if unknown & _known_types(f)]
    else:  # a fork that defines no name the file uses otherwise would fail where BVLC's did
        candidates = [f for f in FORKS if _reads_otherwise(text, f, accepted_only=True)]
    readings = [r for r in (_try(text, f, failures) for f in candidates) if r is not None]
    if not readings:
        if bvlc is not None:  # a fork's type borrowed, else the layer registry names the type no fork knows
            reading = _borrowing([bvlc]) or bvlc
            return reading + (_lines(text, reading[0], path),)
        listed = None if strict else lenient.without_id_lists(raw)
        if listed is not None:
            reading = _reading(path, listed[0], schema_name, strict)
            earlier = reading[4] if len(reading) > 4 else ()
            return reading[:4] + (earlier + tuple(s._replace(file=path) for s in listed[1]),)
        unknown_field = any("has no field named" in str(e) for e, _, _ in failures)
        skipping = (_past_unknown_fields(path, text)
                    if unknown_field and not strict and text.balanced and not _misspelt(failures) else None)
        if skipping is None:
            raise _parse_failure(path, text, failures)
        reading, skipped = skipping
        return reading + (_lines(text, reading[0], path), skipped)
    complete = [r for r in readings if _types_used(r[1], r[0], r[2].layers) <= _known_types(r[2].layers)
                and _takes_its_bottoms(r)]
    chosen = _without_descendants(complete or readings)
    if not complete:
        borrowed = _borrowing(chosen)
        if borrowed is not None:
            return borrowed + (_lines(text, borrowed[0], path),)
        if len(chosen) > 1:
            _refuse_forks_that_each_lack_a_type(path, chosen)
    if len(chosen) > 1:
        _refuse_ambiguous(path, chosen)
    return chosen[0] + (_lines(text, chosen[0][0], path),)


def _borrowing(readings):
    """Readings that each lack a layer type some shipped fork sizes (a Caffe that added one fork's
    layer to another, as MnasNet's ConvolutionDepthwise beside MobileNet-YOLO's ReLU6 and Yolov3):
    the reading that lacks the fewest (and whose own classes take the bottoms the file gives), its
    layers made "A+B" (B's class for each type A lacks: protoaudit.layers.base.fork_layers), when
    every type it lacks has one class among the forks that size it, and none of its own classes is
    shadowed by another reading (_shadowed); else None. A type is not lent to a reading whose Caffe
    has its own version of it (Layer.has_own_version: MobileNet-YOLO's and Intel Caffe's
    region_loss_param, for their own RegionLoss), nor by a class with `lent = False` (a fork's copy of
    another's type, for its own nets only). The audit lists which types were borrowed
    (protoaudit.net.build)."""
    from ..layers import fork_layers, fork_types

    lacking = []
    for r in readings:
        if _shadowed(r, readings):
            continue
        donors = []
        for t in sorted(_types_used(r[1], r[0], r[2].layers) - _known_types(r[2].layers)):
            sizing = [f for f in FORKS if t in fork_types(f)  # (t is no BVLC type: r would know it)
                      and not fork_layers(f)[t].has_own_version(r[2]) and fork_layers(f)[t].lent]
            if len({fork_layers(f)[t] for f in sizing}) != 1:
                break  # no fork sizes it, or forks size it otherwise
            donors.append(sizing[0])
        else:  # (a reading whose own class of a type takes other bottoms than the file gives comes last)
            lacking.append(((not _takes_its_bottoms(r), len(donors)), r, list(dict.fromkeys(donors))))
    if not lacking:
        return None
    _, (kind, message, schema), donors = min(lacking, key=lambda x: x[0])
    return kind, message, schema._replace(dialect="+".join([schema.layers, *donors]))


def _shadowed(reading, readings):
    """Whether a type of the file that the reading's fork sizes with its own class has a version of
    its own in another reading's Caffe (Layer.has_own_version): a file of ReLU6 and RegionLoss is
    MobileNet-YOLO's as much as YOLOv2's port's, whose RegionLoss is not MobileNet-YOLO's, so the port's
    reading borrows no ReLU6 to size it."""
    from ..layers import fork_layers

    classes = fork_layers(reading[2].layers)
    used = _types_used(reading[1], reading[0], reading[2].layers) & set(classes)
    return any(classes[t].has_own_version(other[2]) for t in used for other in readings if other is not reading)


def _refuse_forks_that_each_lack_a_type(path, readings):
    """Readings none of which knows every layer type: refused where each lacks a type another knows
    (then --fork would not do); a type none knows is the registry's to name."""
    somewhere = set().union(*(_known_types(r[2].layers) for r in readings))
    missing = {r[2].name: (_types_used(r[1], r[0], r[2].layers) - _known_types(r[2].layers)) & somewhere
               for r in readings}
    if all(missing.values()) and len({frozenset(m) for m in missing.values()}) > 1:
        lacks = "; ".join(f"{name} lacks {', '.join(sorted(m))}" for name, m in missing.items())
        raise InputError(f"no Caffe fork protoaudit ships knows every layer type of this file ({lacks})", file=path,
                         fix="give your fork's own caffe.proto with --caffe-proto, or declare the tops of the layers "
                             "of a type the fork you name with --fork lacks (--input TOP=NxCxHxW)")


def _may_read_better(schema, skipped, types):
    """Whether `schema` has one of the fields another reading skipped ((field, message type, line)) or
    knows one of the layer types `types`."""
    return (any(_has_field(schema, field, holder) for field, holder, _ in skipped)
            or bool(types & _known_types(schema.layers)))


def _reads_otherwise(text, name, accepted_only=False):
    """Whether the text uses a field or enum value that schema `name` defines otherwise than BVLC's
    (`accepted_only`: accepts where BVLC's does not)."""
    names, numbers = differing_names(name, accepted_only)
    return not names.isdisjoint(text.words) or not numbers.isdisjoint(text.numbered)


def _misspelt(failures):
    """Whether every field the schemas did not know is near one its message has: a misspelling, which
    reading past would refuse too, after a pass of every schema (seconds on a large net)."""
    pool = load_schema("bvlc").pool
    fields = [str(e) for e, _, _ in failures if "has no field named" in str(e)]
    line = lambda text: int(text.split(":", 1)[0]) if text.split(":", 1)[0].isdigit() else 0  # noqa: E731
    furthest = max(map(line, fields), default=0)  # (the other kind of file fails at its first line)
    fields = [f for f in fields if line(f) == furthest]
    # a layer's *_param near another (convolution3d_param) is a fork's own layer's, not a misspelling,
    # nor is a field a known fork has (video-caffe's kernel_shape, near kernel_size), nor a known field's
    # name with a word added (a fork's mean_value_file beside mean_value)
    return bool(fields) and all(_near(f, pool) and not f.rstrip('".').endswith("_param") and not _fork_field(f)
                                and not _extends_a_field(f, pool) for f in fields)


def _extends_a_field(failure, pool):
    """Whether a 'has no field named' failure names a field of its message with words added before or
    after it (mean_value_file, of mean_value)."""
    found = _NO_FIELD.search(failure)
    known = _field_names(pool, found.group(1)) if found else None
    return known is not None and lenient.extends(found.group(2), known)


def _field_names(pool, message):
    """The names of the fields of `message` in the pool; None where the pool has no such message."""
    try:
        return [f.name for f in pool.FindMessageTypeByName(message).fields]
    except KeyError:
        return None


def _fork_field(failure):
    """Whether a 'has no field named' failure names a field of a fork protoaudit knows of (lenient.FIELD_FORKS),
    or one of a message none of whose fields sizes anything (lenient.NEVER_SIZES), which is read past."""
    found = _NO_FIELD.search(failure)
    holder = found.group(1).rsplit(".", 1)[-1] if found else ""
    return bool(found) and ((holder, found.group(2)) in lenient.FIELD_FORKS or holder in lenient.NEVER_SIZES)


def _takes_its_bottoms(reading):
    """Whether every layer has as many bottoms as the reading's class for it takes, where the class
    says exactly: caffe-enet's Upsample takes the pooling mask, MobileNet-YOLO's one bottom only."""
    from ..layers import layer_class

    kind, message, schema = reading
    for t, layer in _layers_used(message, kind, schema.layers):
        cls = layer_class(t, schema.layers)
        if cls is not None and cls.exact_bottoms is not None and len(layer.bottom) != cls.exact_bottoms:
            return False
    return True


def _past_unknown_fields(path, text):
    """((kind, message, schema), Skipped...) of the closest schema that reads the file past fields
    no schema has: one that knows its layer types, then the fewest fields read past, BVLC's first
    (a type none knows is then named as the registry names it); None where none reads it. A field
    read past where a layer with bottoms could read it is refused here (see build_nets for data layers)."""
    def reading(name, kind):
        schema = load_schema(name)
        message = (schema.NetParameter if kind == "net" else schema.SolverParameter)()
        # a top field only the other kind has (a net's layers read as a solver) ends the reading
        other = schema.SolverParameter if kind == "net" else schema.NetParameter
        skipped = lenient.parse_skipping(text, message, frozenset(other.DESCRIPTOR.fields_by_name))
        if skipped is None or (schema.predates_v2 and any(net.layer for net in _nets_of(message, kind))):
            return None
        # a reading that skips a field another shipped schema has comes last: that field is no fork's
        # unknown one, and the reading's other types can be borrowed (DSS: HED's ImageLabelmapData
        # beside BVLC's BatchNorm, whose batch_norm_param HED's older schema lacks); so does one that
        # skips a field of the parameters of its fork's own type protoaudit has no rule for: the layer
        # is another Caffe's type of that name (MS-CNN's DetectionLoss is not YOLOv2's port's)
        own = whose.OWN_UNSIZED.get(name, {}).values()
        ranked = (any(holder in own or _has_field(load_schema(other_name), field, holder)
                      for field, holder, _ in skipped for other_name in SCHEMA_NAMES if other_name != name),
                  len(_types_used(message, kind, schema.layers) - _known_types(schema.layers)), len(skipped))
        return ranked, ((kind, message, schema), skipped)

    found = [r for r in (reading(SCHEMA_NAMES[0], kind) for kind in ("net", "solver")) if r is not None]
    kinds, forks, alike = ("net", "solver"), SCHEMA_NAMES[1:], {}
    if found:
        # a fork reads the file past fewer fields, or knows more of its types, only where it has a field
        # BVLC's reading skipped or a type BVLC does not know: only those are read (each reading is a
        # pure-Python pass over the file)
        (kind, message, schema), skipped = min(found, key=lambda r: r[0])[1]
        types = _types_used(message, kind, schema.layers) - _known_types(schema.layers)
        kinds, forks = (kind,), [name for name in forks if _may_read_better(load_schema(name), skipped, types)]
        # a fork that defines no name the file uses otherwise reads it as BVLC's schema did, and only
        # knows other types: its rank needs no pass, and it is read only if it wins
        alike = {name: (False, len(_types_used(message, kind, name) - _known_types(load_schema(name).layers)),
                        len(skipped))
                 for name in forks if not _reads_otherwise(text, name) and not load_schema(name).predates_v2}
    else:  # a fork reads what BVLC's schema does not only where the file uses a name it defines otherwise
        forks = [name for name in forks if _reads_otherwise(text, name)]
    for name in forks:
        if name in alike:
            found.append((alike[name], name))
        else:
            found += [r for r in (reading(name, kind) for kind in kinds) if r is not None]
    if not found:
        return None
    best = min(found, key=lambda r: r[0])[1]  # (the first of the best: BVLC's before a fork's)
    if isinstance(best, str):
        best = reading(best, kinds[0])[1]
    (kind, message, schema), found = best
    chosen = _borrowing([best[0]]) or best[0]
    schema = chosen[2]
    used = list(_layers_used(message, kind, schema.layers))
    layers = {layer.name: (t, layer) for t, layer in used}
    known = _known_types(schema.layers)
    out = []
    whole = _outline(text, path)  # (read whole: a layer's name may come after the field)
    # a net's layers by the line of their block, where the outline has them all: names may repeat
    # (a data layer and the in-place layer after it both named "data")
    starts = layer_lines(whole)[("", 0)] if kind == "net" else ()
    by_line = dict(zip(starts, used)) if len(starts) == len(used) else {}
    for field, holder, line in found:
        block = layer_at(whole, line)
        name = block.label if block is not None else ""
        layer_type, layer = by_line.get(block.line if block is not None else None) or layers.get(name, ("", None))
        unknown = layer_type and layer_type not in known
        names = () if unknown else schema.message(holder).DESCRIPTOR.fields_by_name  # (for a misspelling)
        skipped = lenient.judged(field, holder, line, name, layer_type, layer.top[:1] if layer else (),
                                 names)._replace(file=path)
        if unknown:  # the build names the type, or takes its tops from --input
            out.append(skipped._replace(why=f"a {layer_type} layer, a type protoaudit has no rule for, is sized "
                                            "from the tops --input gives it", tops=()))
            continue
        refused = skipped.why is None and (layer is None or layer.bottom or not layer.top
                                           or holder == "LayerParameter")  # (--input stands for a data source's)
        if (skipped.near and holder not in lenient.NEVER_SIZES) or refused:
            # a field another shipped schema has is no misspelling: the file needs a fork with both
            elsewhere = tuple(described(other) for other in SCHEMA_NAMES
                              if other != schema.name and _has_field(load_schema(other), field, holder))
            if elsewhere and refused:
                raise skipped._replace(tops=(), elsewhere=elsewhere, reader=described(schema.name)).refusal(path)
            raise skipped._replace(tops=()).refusal(path)
        out.append(skipped)
    return chosen, tuple(out)


def _has_field(schema, field, holder):
    """Whether the schema's message `holder` has the field."""
    try:
        return field in schema.message(holder).DESCRIPTOR.fields_by_name
    except KeyError:
        return False


def _without_descendants(readings):
    """A fork grown from another that also reads the file is not needed for it (DESCENDS_FROM), nor is
    one that only a build tells from another that reads it (SAME_FIELDS: tried where that one's build
    stops, protoaudit.audit)."""
    names = {r[2].name for r in readings}
    after_build = {later for name in names for later in SAME_FIELDS.get(name, ())}
    return [r for r in readings if not names & set(ancestors(r[2].name)) and r[2].name not in after_build]


def _try(text, name, failures):
    """(kind, message, schema) of the text read with schema `name` as a net, else as a solver;
    None (and the faults noted) when it reads as neither."""
    schema = load_schema(name)
    for kind in ("net", "solver"):
        try:
            message = _parse(text, schema, kind)
        except text_format.ParseError as e:
            failures.append((e, name, kind))
            continue
        if schema.predates_v2 and any(net.layer for net in _nets_of(message, kind)):
            return None  # V2 `layer` blocks: the fork's own caffe.proto has no such field
        return kind, message, schema
    return None


def _nets_of(message, kind):
    return [message] if kind == "net" else list(_embedded_nets(message))


class ForksDisagree(InputError):
    """Several forks read the file and size its layers differently (`forks`: their names)."""

    def __init__(self, message, forks, layers=(), **where):
        super().__init__(message, **where)
        self.forks = forks
        self.layers = layers  # the layers they size differently


def _refuse_ambiguous(path, readings):
    """Several forks read the file and know its layers: fine when they would size every layer with
    the same class, refused (naming them) when not. A fork's version of a BVLC type counts as BVLC's
    on a layer that does not use what the fork changes (Layer.sized_as): a file that two forks read,
    neither of whose changes it uses, is no ambiguity."""
    from ..layers import layer_class

    def sizing(reading):
        kind, message, schema = reading
        classes = ((layer_class(t, schema.layers), layer)
                   for t, layer in _layers_used(message, kind, schema.layers))
        return tuple(cls.sized_as(layer) if cls is not None else None for cls, layer in classes)

    sized = [sizing(r) for r in readings]
    if len(set(sized)) > 1:
        names = [r[2].name for r in readings]
        kind, message, schema = readings[0]
        used = [layer for _, layer in _layers_used(message, kind, schema.layers)]
        differ = list(dict.fromkeys(layer.name for k, layer in enumerate(used)
                                    if len({s[k] for s in sized if k < len(s)}) > 1))
        raise ForksDisagree(
            "more than one Caffe fork reads this file, and they size its layers differently: "
            + "; ".join(f"{n} ({described(n)})" for n in names), names, tuple(differ),
            file=path, fix=f"say which with --fork ({', '.join(names)}), or give your fork's own file with --caffe-proto",
        )


def _lines(text, kind, path):
    """layer_lines of the file read as `kind`: a net's from where the parser met its layer blocks
    (tokens.Text.layer_starts), when its lines are the outline's (no line breaks but "\\n"), else
    from the outline."""
    starts = text.layer_starts
    if kind != "net" or starts is None or text.outline_tokens[0] is not text.tokens:
        return layer_lines(_outline(text, path))
    field = "layers" if any(f == "layers" for f, _ in starts) else "layer"
    return {("", 0): tuple(text.line_of[at] + 1 for f, at in starts if f == field)}


def _outline(text, path, until=None):
    try:
        return outline(text, until)
    except InputError as e:
        raise e.located(file=path) from None


def _parse_failure(path, text, failures):
    """One message for a file no schema could read: the fault that came furthest into the file."""

    def position(failure):
        e = failure[0]
        return (e.GetLine() or 0, e.GetColumn() or 0, failure[1] == "bvlc", failure[2] == "net")

    error, schema, kind = max(failures, key=position)
    line = error.GetLine()
    detail = str(error)
    if detail.startswith(f"{line}:"):
        detail = detail.split(" : ", 1)[-1]
    detail = " ".join(detail.split())  # protobuf may quote the line it stopped in, newline included
    if len(detail) > 240 and detail.startswith("'") and "': " in detail:  # a line of a minified file: its start
        quoted, rest = detail[1:].rsplit("': ", 1)
        detail = f"'{quoted[:100]}...': {rest}"
    fix = _near(detail, load_schema(schema).pool) or _parse_fix(detail, _line_text(text.text, line))
    found = _NO_FIELD.search(detail) if len({s for _, s, _ in failures}) == 1 else None  # one schema tried (--fork)
    having = [name for name in SCHEMA_NAMES if found and name != schema
              and _has_field(load_schema(name), found.group(2), found.group(1).rsplit(".", 1)[-1])]
    if having:  # other shipped schemas have the field --fork's lacks
        detail = f"{detail.rstrip('.')} in the caffe.proto of {described(schema)}, which --fork chose"
        fix = f"{', '.join(having)} {'has' if len(having) == 1 else 'have'} the field: leave --fork out, or name it"
    elif schema != "bvlc" and ("has no field named" in detail or "should not have multiple" in detail):
        detail = (f"{detail.rstrip('.')}, nor has any caffe.proto protoaudit ships (the {schema} fork's read furthest "
                  "into the file)")
    root = _outline(text, path, until=line) if line else None
    tokens, line_of = text.outline_tokens
    if root is not None and tokens and line >= line_of[-1] + 1:  # the fault is on the last line: the end
        truncated = _ends_inside(root, path, line)
        if truncated is not None:
            return truncated
    layer = layer_at(root, line) if line else None
    return InputError(detail, file=path, line=line, layer=layer.label if layer else None, fix=fix)


def _ends_inside(root, path, line):
    """A file that ends with blocks still open (a download or copy cut short): the error names the
    innermost layer open (else the innermost block) instead of protobuf's view of the last token
    (`Expected string but found: ''`). None where every block is closed."""
    opened = []
    block = root
    while block.children and block.children[-1].end == 0:
        block = block.children[-1]
        opened.append(block)
    if not opened:
        return None
    layers = [b for b in opened if b.name in ("layer", "layers")]
    inner = layers[-1] if layers else opened[-1]
    what = (f"layer '{inner.label}'" if inner.label else "a layer") if layers else f"'{inner.name or '{'} {{'"
    return InputError(f"the file ends inside {what}, opened on line {inner.line} (truncated?)", file=path, line=line,
                      fix="copy the whole file again, or close its braces")


WAY_OUT = "replace that layer with BVLC layers, or cut the net before it and let an Input layer stand for what came before"
FORK_FIELD_FIX = ("check the spelling against caffe.proto; protoaudit reads BVLC Caffe and "
                  + ", ".join(FORKS) + " (see --fork); for another fork give its caffe.proto with --caffe-proto, "
                  "or " + WAY_OUT)


_NO_FIELD = re.compile(r'Message type "([\w.]+)" has no field named "(\w+)"')
_COMMA_LIST = re.compile(r"\b(\w+)\s*:\s*[-+\w.]+\s*,\s*[-+]?[0-9][\w.]*(?:\s*,\s*[-+]?[0-9][\w.]*)*")
_NO_VALUE = re.compile(r'Enum type "([\w.]+)" has no value named (\w+)')


def _near(detail, pool):
    """"did you mean" for a misspelt field (kernel_sise) or enum value (MAXX, max), from the
    schema that read furthest, an enum's values listed whether or not one is near; None where
    neither applies or nothing is near."""
    field, value = _NO_FIELD.search(detail), _NO_VALUE.search(detail)
    if field:
        names = _field_names(pool, field.group(1))
        near = closest(field.group(2), names) if names is not None else None
        return f"did you mean '{near}'? the field names are caffe.proto's" if near else None
    try:
        known = [v.name for v in pool.FindEnumTypeByName(value.group(1)).values] if value else None
    except KeyError:  # protobuf named a type its pool does not hold: say nothing more
        return None
    if known is None:
        return None
    near = closest(value.group(2), known)
    if value.group(1).endswith(".LayerType"):  # a V1 net's `type: NAME`: dozens of them, not listed
        if value.group(2) in whose.V1_TYPES:  # a fork's own type, no misspelling (_parse_fix names the fork)
            return None
        return f"did you mean {near}?" if near else None
    hint = f"did you mean {near}? " if near else ""
    return f"{hint}{value.group(1).rsplit('.', 1)[-1]} is one of {', '.join(known)}"


def _parse_fix(detail, line_text):
    """What to do about one protobuf text-format fault."""
    if "${" in line_text:
        return "the file is a template with ${...} placeholders; substitute them first"
    listed = _COMMA_LIST.search(line_text) if "has no field named" in detail else None
    if listed:  # `device_id: 0,1`: the comma ends the field and the next value reads as a field's name
        one = ("device_id names one GPU (caffe train --gpu 0,1 trains on several)" if listed.group(1) == "device_id"
               else f"write `{listed.group(1)}: VALUE` once per value where caffe.proto repeats it, else keep one")
        return (f"`{listed.group(0).strip()}` lists values after a comma, which the text format reads as the "
                f"name of another field, and Caffe's parser stops here too: {one}")
    if "has no field named" in detail or "should not have multiple" in detail:
        return FORK_FIELD_FIX
    if "Enum type" in detail and "has no value named" in detail:
        quoted = re.search(r"""\btype\s*:\s*["']([^"']*)["']""", line_text)
        if "LayerType" in detail and quoted:  # a V2 type in a V1 block: Caffe's parser refuses it too
            from .upgrade import V1_TYPES

            enum = next((k for k, v in V1_TYPES.items() if v == quoted.group(1)), None)
            return ("a `layers` block (V1) names its type with an enum, unquoted; a quoted type is a `layer` "
                    "block's (V2), and Caffe refuses the file too: write " + (f"type: {enum}" if enum else
                                                                            "the V1 enum name")
                    + " in this block, or write the net with `layer` blocks")
        if "LayerType" in detail:  # a V1 net's `type: NAME`: a layer no schema protoaudit reads has
            named = re.search(r"\btype\s*:\s*(\w+)", line_text)
            fork = whose.V1_TYPES.get(named.group(1)) if named else None
            instead = whose.V1_INSTEAD.get(fork)
            return (f"most likely a layer type of {fork}" if fork else "a layer type of another Caffe fork") + (
                ", which protoaudit cannot size: " + (f"{instead}; or {WAY_OUT}" if instead else WAY_OUT))
        return "use one of the values caffe.proto lists for that field"
    if "out of range" in detail:
        return "use a value the field's type in caffe.proto holds (pad, kernel_size, stride... are unsigned)"
    return "fix the syntax at that line"


def _line_text(text, line):
    lines = text.splitlines()
    return lines[line - 1] if line and 0 < line <= len(lines) else ""


def _by_parts(parts):
    """The refusal's clause for the last parts of a net path tried (folders.tails)."""
    if not parts:
        return ""
    above = f"{', '.join(parts[:-1])} beside the solver and above it, " if parts[:-1] else ""
    return f"; then {above}{parts[-1]} beside it"


def resolve_path(ref, solver_path, root=None):
    """A net path named in a solver, as Caffe resolves it (against the working directory, usually
    the Caffe root, where `caffe train` runs), then against `root` (--root), then against the
    solver's folder and each folder above it (the solver may sit anywhere in the Caffe tree); else
    by its last parts there (folders.tails: a repository that keeps the net beside its solver).
    (the path found, whether it was found by its last parts only: a guess the report names)."""
    bases = [os.getcwd()] + ([root] if root else [])
    named = [ref] if os.path.isabs(ref) else [os.path.join(base, ref) for base in bases + up_from(solver_path)]
    for by_parts, candidates in ((False, named), (True, tails(ref, solver_path))):
        found = next((c for c in candidates if os.path.isfile(c)), None)
        if found:
            return shown(found), by_parts
    tried = [ref] if os.path.isabs(ref) else list(dict.fromkeys([ref] + named[1:3]))
    parts = last_parts(ref)[0 if os.path.isabs(ref) else 1:]  # a relative path's whole was tried above
    lines = read_text(solver_path).splitlines()
    line = next((i + 1 for i, l in enumerate(lines) if f'"{ref}"' in l or f"'{ref}'" in l), None)
    raise InputError(
        f"the net file '{ref}' named in the solver was not found (tried {', '.join(tried)}"
        + (" and the folders above the solver's" if not os.path.isabs(ref) else "")
        + _by_parts(parts) + ")",
        file=solver_path, line=line,
        fix="run protoaudit from the folder caffe train ran in, or give it with --root DIR",
    )
