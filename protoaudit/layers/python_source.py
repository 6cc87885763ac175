"""A Python layer's top shapes read off its source, never run.

Many training repositories (MTCNN's, most of all) ship their own Python layers beside the net. Their
`setup` or `reshape` usually shapes each top with one `top[i].reshape(...)` whose arguments are
numbers, names given a number in the same method, `param_str` entries, the bottoms' shapes, or the
shape of an array the layer made with numpy's zeros, ones, empty or full. This module finds the
layer's class in its file, reads those two methods line by line with `ast` (which parses, and
evaluates nothing), and works out such arguments. Anything else (a branch, a loop, a
value made by a call it does not know, a name given two values) leaves the shape unknown, and the
user is asked for it as before. Python 2 sources are read too: tabs count to the next multiple of 8.
"""
import ast
import functools
import os
import re
from dataclasses import dataclass

import yaml

from ..read import plain_yaml

MAX_SOURCE_BYTES = 2**20  # a layer module larger than this is not read
_UP = 4  # folders above the net's searched for the module, as PYTHONPATH usually names one of them
# the folders a repository keeps its Python in, which its scripts put on sys.path (py-faster-rcnn's
# lib/, CTPN's src/): looked in under each folder searched
_CODE_FOLDERS = ("", "lib", "src", "python")
_MAX_SUBFOLDERS = 64  # subfolders of one folder looked in for a module
_SUBFOLDERS_UP = 3  # the net's folder and those above it whose subfolders are looked in
_SYS_PATH = re.compile(r"\bsys\.path\.(insert|append)\s*\(")
_PARAM_READERS = {"load", "safe_load", "eval", "loads", "literal_eval", "full_load"}
_ARRAY_MAKERS = {"zeros", "ones", "empty", "full"}  # numpy's, whose first argument is the array's shape


class Unread(Exception):
    """The shape cannot be read off the source; the message says why."""


def module_file(module, net_path, root=None):
    """The file `module` (dotted) is imported from, a module's own or a package's __init__.py: under
    --root, the net's folder or one of the few above it, or their lib/, src/ or python/; else a folder
    of the repository's that is on sys.path where its layers run (_in_subfolder); None where none has it."""
    if not re.fullmatch(r"\w+(\.\w+)*", module):
        return None
    parts = module.split(".")
    rels = (os.path.join(*parts) + ".py", os.path.join(*parts, "__init__.py"))
    above = []
    here = os.path.dirname(os.path.abspath(net_path)) if net_path else None
    for _ in range(_UP + 1):
        if here is None:
            break
        above.append(here)
        parent = os.path.dirname(here)
        here = parent if parent != here else None
    for folder in ([root] if root else []) + above:
        for code in _CODE_FOLDERS:
            for rel in rels:
                path = os.path.join(folder, code, rel)
                if os.path.isfile(path):
                    return path
    for folder in above[:_SUBFOLDERS_UP]:
        for rel in rels:
            path = _in_subfolder(folder, rel)
            if path:
                return path
    return None


def _in_subfolder(folder, rel):
    """folder/SUB/rel for the first SUB (by name) that has it and that is on sys.path where the layers
    run (_on_sys_path); hidden folders skipped."""
    try:
        subs = sorted(e.name for e in os.scandir(folder) if e.is_dir() and not e.name.startswith("."))
    except OSError:
        return None
    for sub in subs[:_MAX_SUBFOLDERS]:
        path = os.path.join(folder, sub, rel)
        if os.path.isfile(path) and _on_sys_path(folder, sub):
            return path
    return None


def _on_sys_path(folder, sub):
    """Whether the repository puts folder/SUB on sys.path: a .py file of SUB's own changes sys.path (a
    triplet-loss repository's _init_paths.py), one of `folder`'s changes sys.path and names SUB there
    (sys.path.append('%s/resources/' % os.getcwd())) or in a path it joins (py-faster-rcnn's
    _init_paths.py: add_path(osp.join(this_dir, 'layers'))), or SUB is a project pip installs (its setup.py)."""
    if os.path.isfile(os.path.join(folder, sub, "setup.py")):
        return True
    named = re.compile(r"[/'\"]" + re.escape(sub) + r"[/'\"]")
    return (_path_lines(os.path.join(folder, sub), lambda lines: True)
            or _path_lines(folder, lambda lines: any(named.search(line) and (_SYS_PATH.search(line) or "join(" in line)
                                                     for line in lines)))


def _path_lines(folder, which):
    """Whether one of the folder's own .py files changes sys.path and `which` takes its lines."""
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.is_file() and e.name.endswith(".py"))
    except OSError:
        return False
    for name in names[:_MAX_SUBFOLDERS]:
        lines = read_lines(os.path.join(folder, name))
        if lines and any(_SYS_PATH.search(line) for line in lines) and which(lines):
            return True
    return False


def class_file(path, layer):
    """The file that defines class `layer`: the module's own, else, for a package's __init__.py that
    takes it from a module of its own (`from .pylayers import *`), that module's."""
    lines = read_lines(path)
    if lines is None or not os.path.basename(path) == "__init__.py" or _class_line(lines, layer) is not None:
        return path
    for line in lines:
        m = re.match(r"^from\s+\.?(\w+)\s+import\s+(.+)$", line.strip())  # Python 2 imports its own relatively
        if m and (m.group(2).strip() == "*" or layer in re.split(r"[\s,()]+", m.group(2))):
            found = os.path.join(os.path.dirname(path), m.group(1) + ".py")
            if os.path.isfile(found):
                return found
    return path


def _class_line(lines, layer):
    """The index of the line that opens `class LAYER`, or None."""
    head = re.compile(r"^\s*class\s+" + re.escape(layer) + r"\s*[(:]")
    return next((k for k, line in enumerate(lines) if head.match(line)), None)


def read_lines(path):
    """The module's lines, tabs expanded as Python 2 counts them; None for a file too large. Read
    once per file and version (a net's Python layers often share one module)."""
    stat = os.stat(path)
    return _lines(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _lines(path, mtime, size):
    if size > MAX_SOURCE_BYTES:
        return None
    with open(path, "rb") as f:
        text = f.read(MAX_SOURCE_BYTES).decode("utf-8", errors="replace")
    return tuple(line.expandtabs(8) for line in text.split("\n"))


def _indent(line):
    return len(line) - len(line.lstrip(" "))


def _block(lines, start):
    """(first, end) line indexes of the body of the block opened on line `start`."""
    base, end = _indent(lines[start]), start + 1
    while end < len(lines):
        text = lines[end].strip()
        if text and not text.startswith("#") and _indent(lines[end]) <= base:
            break
        end += 1
    return start + 1, end


def _statements(lines, first, end):
    """(line number, indentation, source) of each logical line in lines[first:end], with
    bracketed continuations joined."""
    k = first
    while k < end:
        text = lines[k].strip()
        if not text or text.startswith("#"):
            k += 1
            continue
        number, indent, parts = k + 1, _indent(lines[k]), [text]
        while k + 1 < end and (_open_brackets(" ".join(parts)) > 0 or parts[-1].endswith("\\")):
            k += 1
            parts.append(lines[k].strip().rstrip("\\"))
        k += 1
        yield number, indent, " ".join(p.rstrip("\\") for p in parts)


def _open_brackets(text):
    text = re.sub(r"'[^']*'|\"[^\"]*\"|#.*", "", text)
    return sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")


@dataclass
class _Branch:
    """An `if` chain of a method's own level whose tests param_str decides, as `_read` walks it."""

    indent: int  # the if's
    body: int  # its current branch's body's, once seen
    taken: bool  # whether the code runs the current branch
    any_taken: bool  # whether one branch of the chain was taken already


class SourceShapes:
    """The tops' shapes one Python layer class gives, read off its module's source."""

    def __init__(self, path, lines, layer):
        self.path = path
        self.lines = lines
        self.methods, self.elsewhere = self._methods(layer)
        self.globals = _module_names(path, lines)

    def _methods(self, layer):
        """{method name: (bottom's name, top's name, first, end)} of the class's setup and reshape, and
        its forward where that reshapes a top; and what its methods other than setup and reshape
        change: the attributes they assign ('self.n')."""
        start = _class_line(self.lines, layer)
        if start is None:
            raise Unread(f"no class {layer} in {os.path.basename(self.path)}")
        first, end = _block(self.lines, start)
        found, elsewhere = {}, set()
        sig = re.compile(r"^\s*def\s+(\w+)\s*\(\s*self\s*(?:,\s*(\w+)\s*,\s*(\w+)\s*)?[,)]")
        for k in range(first, end):
            m = sig.match(self.lines[k])
            if not m or _indent(self.lines[k]) <= _indent(self.lines[start]):
                continue
            body = _block(self.lines, k)
            if m.group(1) in ("setup", "reshape") and m.group(3):
                found[m.group(1)] = (m.group(2), m.group(3), *body)
                continue
            text = "\n".join(self.lines[body[0]:body[1]])
            elsewhere.update("self." + a for a in re.findall(r"\bself\.(\w+)\s*(?:[-+*/]?=)(?!=)", text))
            if m.group(1) == "forward" and m.group(3) and _reshapes(text, m.group(3)):
                found["forward"] = (m.group(2), m.group(3), *body)
        return found, elsewhere

    def shapes(self, tops, bottoms, param_str):
        """One shape per top, the source line of each, and the line of a forward that reshapes the
        tops to what each batch makes (None where none does). Caffe runs setup, then reshape, so a
        top reshape shapes wins over setup's. A forward's reshape wins where it is plain (the
        bottoms' own shape); one that only running it would tell (a sampler's triplets, a filter's
        kept rows) leaves the shapes setup and reshape gave, which Net::Init allocates, and is
        unread where they give none."""
        shaped, lines = [None] * tops, [None] * tops
        per_batch = None
        env = {name: _UNKNOWN for name in self.elsewhere}  # set by code protoaudit does not follow
        for method in ("setup", "reshape", "forward"):
            if method in self.methods:  # a method's own names are its own; self's attributes carry over
                bottom, top, first, end = self.methods[method]
                env = {k: v for k, v in env.items() if k.startswith("self.")}
                before = (list(shaped), list(lines))
                try:
                    self._read(top, first, end, _Scope(env, bottom, bottoms, param_str, self.globals), shaped, lines)
                except Unread:
                    if method != "forward":
                        raise
                    if None in before[0]:
                        raise Unread(f"its forward reshapes its tops to each batch ({os.path.basename(self.path)})") \
                            from None
                    shaped[:], lines[:] = before
                    per_batch = next((k + 1 for k in range(first, end) if _reshapes(self.lines[k], top)), first)
        missing = [j for j in range(tops) if shaped[j] is None]
        if missing:
            raise Unread(f"top {missing[0]} is given no shape that can be read off "
                         f"{os.path.basename(self.path)} (setup and reshape)")
        return shaped, lines, per_batch

    def _read(self, top, first, end, scope, shaped, lines):
        """One method's statements, lines[first:end]: its top[i].reshape(...) into `shaped`, its
        assignments into the scope's names. An `if` of the method's own level whose test param_str
        decides (`'k' in params`, `params.has_key('k')`) runs the branch it takes and skips the others,
        as the code would; any other branch's assignments leave their names unknown."""
        base, branch = None, None
        for number, indent, text in _statements(self.lines, first, end):
            base = indent if base is None else base
            if branch is not None and indent > branch.indent:
                if not branch.taken:
                    continue  # a branch the code does not take
                branch.body = branch.body or indent
            elif branch is not None and indent == branch.indent and re.match(r"(else\s*:|elif\b)", text):
                taken = _decided(text, scope) if text.startswith("elif") and not branch.any_taken else False
                if taken is _UNKNOWN:
                    branch = None
                else:
                    branch.body = None
                    branch.taken = (not branch.any_taken) if text.startswith("else") else taken
                    branch.any_taken = branch.any_taken or taken
                continue
            else:
                branch = None
                taken = _decided(text, scope) if indent == base and text.startswith("if ") else _UNKNOWN
                if taken is not _UNKNOWN:
                    branch = _Branch(indent, None, taken, taken)
                    continue
            try:
                node = ast.parse(text).body[0]
            except (SyntaxError, IndexError, ValueError):
                if _reshapes(text, top):
                    raise Unread(f"line {number} of {os.path.basename(self.path)} is not read as Python 3 can parse")
                continue
            deeper = indent > (branch.body if branch is not None else base)
            call = _reshape_call(node, top)
            if call is not None:
                index, args = call
                if deeper:
                    raise Unread(f"top {index} is shaped inside a branch or loop ({os.path.basename(self.path)}:"
                                 f"{number})")
                if index >= len(shaped):
                    raise Unread(f"{os.path.basename(self.path)}:{number} shapes top {index}, which the net does "
                                 "not name")
                shaped[index] = self._shape(args, scope, number)
                lines[index] = number
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                for name, value in _assigned(node.targets[0], node.value, scope):
                    if name not in self.elsewhere:
                        scope.env[name] = _UNKNOWN if deeper or name in scope.env else value

    def _shape(self, args, scope, number):
        dims = []
        for arg in args:
            if isinstance(arg, ast.Starred):
                value = scope.value(arg.value)
                dims.extend(value if isinstance(value, tuple) else [_UNKNOWN])
            else:
                dims.append(scope.value(arg))
        if len(dims) == 1 and isinstance(dims[0], tuple):
            dims = list(dims[0])
        if not dims or any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in dims):
            raise Unread(f"the shape on {os.path.basename(self.path)}:{number} depends on values only the "
                         "running code has")
        return tuple(dims)


def _decided(header, scope):
    """Whether the branch an `if` or `elif` header opens is taken, where param_str decides it: `'k' in
    params` (or params.keys()), `'k' not in params`, `params.has_key('k')`, `not` of those; else
    _UNKNOWN."""
    test = re.sub(r"^(el)?if\s+", "", header).rstrip()
    if not test.endswith(":"):
        return _UNKNOWN
    try:
        node = ast.parse(test[:-1], mode="eval").body
    except SyntaxError:
        return _UNKNOWN
    return scope.condition(node)


class _Scope:
    """What one method's expressions are worked out from: its names ('x', 'self.x'), the names it
    gives its bottoms, their shapes, and the layer's param_str."""

    def __init__(self, env, bottom, bottoms, param_str, names=None):
        self.env = env
        self.bottom = bottom
        self.bottoms = bottoms
        self.param_str = param_str
        self.names = names or {}  # the module's own top-level names (_module_names)

    def value(self, node):
        """The value of an expression made of numbers, known names, param_str entries and the
        bottoms' shapes; _UNKNOWN for anything else."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
            return node.value
        if isinstance(node, (ast.Name, ast.Attribute)) and _target(node) in self.env:
            return self.env[_target(node)]
        if isinstance(node, ast.Name) and node.id in self.names:
            return self.names[node.id]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner = self.value(node.value)
            if isinstance(owner, _Module):
                return owner.names.get(node.attr, _UNKNOWN)
        if isinstance(node, ast.Attribute) and node.attr in ("param_str", "param_str_"):
            return _Params(self.param_str)
        if isinstance(node, ast.Attribute) and node.attr == "shape":  # an array the method made: its shape
            array = self.value(node.value)
            if isinstance(array, _Blob):
                return array.shape
        if isinstance(node, (ast.Tuple, ast.List)):  # np.zeros([n, c, h, w]) is as common as a tuple
            return _all_known(tuple(self.value(e) for e in node.elts))
        if isinstance(node, ast.BinOp):
            return _arith(node.op, self.value(node.left), self.value(node.right))
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            return self._comprehension(node)
        blob = _bottom_blob(node, self.bottom, self.bottoms)
        if blob is not None:
            return blob
        if isinstance(node, ast.Subscript):
            return _index(self.value(node.value), self.value(node.slice))
        if isinstance(node, ast.Call):
            return self._call(node)
        return _UNKNOWN

    def condition(self, node):
        """True or False where param_str decides the test `node` (see _decided); else _UNKNOWN."""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.condition(node.operand)
            return inner if inner is _UNKNOWN else not inner
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            key, holder = self.value(node.left), node.comparators[0]
            if (isinstance(holder, ast.Call) and isinstance(holder.func, ast.Attribute) and holder.func.attr == "keys"
                    and not holder.args):
                holder = holder.func.value
            params = self.value(holder)
            if isinstance(key, str) and isinstance(params, dict):
                return (key in params) == isinstance(node.ops[0], ast.In)
            return _UNKNOWN
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "has_key"
                and len(node.args) == 1):
            key, params = self.value(node.args[0]), self.value(node.func.value)
            if isinstance(key, str) and isinstance(params, dict):
                return key in params
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return _compare(node.ops[0], self.value(node.left), self.value(node.comparators[0]))
        value = self.value(node)  # a flag a config module sets (`if cfg.TRIPLET_LOSS:`)
        return bool(value) if isinstance(value, (int, float, str)) else _UNKNOWN

    def _comprehension(self, node):
        """[int(x) for x in self.param_str.split(',')]: one loop over known items, no condition."""
        (loop, *more) = node.generators
        items = self.value(loop.iter)
        if more or loop.ifs or not isinstance(loop.target, ast.Name) or not isinstance(items, tuple):
            return _UNKNOWN
        name, before = loop.target.id, self.env.get(loop.target.id, _ABSENT)
        values = []
        for item in items:
            self.env[name] = item
            values.append(self.value(node.elt))
        if before is _ABSENT:
            del self.env[name]
        else:
            self.env[name] = before
        return _all_known(tuple(values))

    def _call(self, node):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        args = [self.value(a) for a in node.args]
        if name == "len" and len(args) == 1 and isinstance(args[0], _Blob):
            return args[0].shape[0] if args[0].shape else _UNKNOWN
        if name == "len" and len(args) == 1 and isinstance(args[0], (tuple, str, dict)):  # len(bottom[0].data.shape)
            return len(args[0])
        if name in ("int", "float") and len(args) == 1 and isinstance(args[0], (int, float, str)):
            return _number(name, args[0])
        if name in ("tuple", "list") and len(args) == 1 and isinstance(args[0], tuple):
            return args[0]
        if name == "map" and len(args) == 2 and getattr(node.args[0], "id", None) in ("int", "float") \
                and isinstance(args[1], tuple):  # map(int, param_str.split(','))
            return _all_known(tuple(_number(node.args[0].id, a) for a in args[1]))
        if name == "split" and isinstance(node.func, ast.Attribute) and len(args) <= 1 \
                and all(isinstance(a, str) for a in args):
            text = self.value(node.func.value)
            if isinstance(text, str):
                return tuple(str.split(text, *args))
        if name == "shape" and len(args) == 1 and isinstance(args[0], _Blob):  # numpy's shape(a)
            return args[0].shape
        if name in _ARRAY_MAKERS and args and isinstance(args[0], tuple) and all(isinstance(d, int) for d in args[0]):
            return _Blob(args[0])  # np.zeros((n, c, h, w)) and the like: an array of that shape
        if name in _PARAM_READERS and len(args) >= 1 and isinstance(args[0], _Params):
            return args[0].read()
        if name == "get" and isinstance(node.func, ast.Attribute):
            params = self.value(node.func.value)
            if isinstance(params, dict) and args and args[0] is not _UNKNOWN:
                return params.get(args[0], args[1] if len(args) > 1 else _UNKNOWN)
        return _UNKNOWN


def _number(kind, value):
    """int(...) or float(...) of a number or of a string that writes one; _UNKNOWN otherwise."""
    try:
        return int(value) if kind == "int" else float(value)
    except ValueError:
        return _UNKNOWN


def _all_known(items):
    return _UNKNOWN if any(i is _UNKNOWN for i in items) else items


class _Unknown:
    def __repr__(self):
        return "unknown"


_UNKNOWN = _Unknown()
_ABSENT = object()  # a name a comprehension's loop had not shadowed


class _Params(str):
    """The layer's param_str, as code reads it (YAML, a Python literal, JSON)."""

    def read(self):
        text = str(self).strip()
        if not text:
            return {}
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            try:
                value = plain_yaml.load(text)
            except yaml.YAMLError:
                return _UNKNOWN
        return value if isinstance(value, dict) else _UNKNOWN


class _Blob:
    """A bottom's data or diff, or an array the method made (np.zeros((...))), whose shape is known."""

    def __init__(self, shape):
        self.shape = tuple(shape)


def _bottom_blob(node, bottom, bottoms):
    """bottom[i], bottom[i].data/.diff (a _Blob), .shape (a tuple), .num/.channels/.height/.width/.count."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == bottom:
        index = node.slice
        if isinstance(index, ast.Constant) and isinstance(index.value, int) and 0 <= index.value < len(bottoms):
            return _Blob(bottoms[index.value])
        return None
    if isinstance(node, ast.Attribute):
        blob = _bottom_blob(node.value, bottom, bottoms)
        if isinstance(blob, _Blob):
            s = blob.shape
            legacy = {"num": 0, "channels": 1, "height": 2, "width": 3}
            if node.attr in ("data", "diff"):
                return blob
            if node.attr == "shape":
                return s
            if node.attr in legacy:
                return s[legacy[node.attr]] if len(s) > legacy[node.attr] else 1
            if node.attr == "count":
                count = 1
                for d in s:
                    count *= d
                return count
    return None


def _index(value, key):
    if isinstance(value, tuple) and isinstance(key, int) and -len(value) <= key < len(value):
        return value[key]
    if isinstance(value, dict) and isinstance(key, (str, int)) and key in value:
        return value[key]
    return _UNKNOWN


def _arith(op, a, b):
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)):
        return _UNKNOWN
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    if isinstance(op, ast.Mult):
        return a * b
    if isinstance(op, ast.FloorDiv) and b:
        return a // b
    if isinstance(op, ast.Div) and b:  # Python 2 divides integers to an integer
        return a // b if isinstance(a, int) and isinstance(b, int) else a / b
    return _UNKNOWN


def _assigned(target, value, scope):
    """(name, value) for each name an assignment gives: one, or each of a tuple's (`n, c, h, w =
    bottom[0].data.shape`, `a, b = bottom[0].data, bottom[1].data`), unknown where the counts differ."""
    if isinstance(target, (ast.Tuple, ast.List)):
        names = [_target(e) for e in target.elts]
        if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(names):
            values = [scope.value(e) for e in value.elts]
        else:
            whole = scope.value(value)
            values = list(whole) if isinstance(whole, tuple) and len(whole) == len(names) else [_UNKNOWN] * len(names)
        return [(n, v) for n, v in zip(names, values) if n is not None]
    name = _target(target)
    return [] if name is None else [(name, scope.value(value))]


def _target(node):
    """'x' for a name, 'self.x' for an attribute of self; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return "self." + node.attr
    return None


def _reshapes(text, top):
    code = re.sub(r"#[^\n]*", "", text)  # a reshape commented out is not run
    return re.search(r"\b" + re.escape(top) + r"\s*\[[^\]]*\]\s*\.\s*reshape\s*\(", code) is not None


def _compare(op, a, b):
    """A comparison of two plain values (numbers or strings); _UNKNOWN otherwise."""
    plain = (int, float, str)
    if not (isinstance(a, plain) and isinstance(b, plain)) or isinstance(a, str) != isinstance(b, str):
        return _UNKNOWN
    compares = {ast.Eq: a == b, ast.NotEq: a != b}
    if not isinstance(a, str):
        compares.update({ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b, ast.GtE: a >= b})
    return compares.get(type(op), _UNKNOWN)


class _Module:
    """A module the layer's file imports: its top-level names with plain values."""

    def __init__(self, names):
        self.names = names


def _module_names(path, lines, depth=0):
    """The top-level names of a module's source with plain values (BATCH_SIZE = 240, or arithmetic of
    earlier ones), and the modules it imports by name (import config as cfg: cfg.BATCH_SIZE), found
    where Python would find them beside it; one level of imports is followed. A name given two
    values is unknown."""
    names = {}
    scope = _Scope({}, None, [], "", names)
    for _, indent, text in _statements(lines, 0, len(lines)):
        if indent or not re.match(r"(import|from|\w+\s*=[^=])", text):
            continue
        try:
            node = ast.parse(text).body[0]
        except (SyntaxError, IndexError, ValueError):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if depth == 0:
                _imported(node, path, names)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            names[name] = _UNKNOWN if name in names else scope.value(node.value)
    return names


def _imported(node, path, names):
    """Bind what one import statement brings in: a module (_Module) or its names."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname or "." not in alias.name:
                module = _module_at(alias.name, path)
                names[alias.asname or alias.name] = _Module(module) if module is not None else _UNKNOWN
        return
    if node.level or not node.module:
        return
    module = _module_at(node.module, path)
    for alias in node.names:
        if alias.name == "*":
            names.update(module or {})
        else:
            names[alias.asname or alias.name] = (module or {}).get(alias.name, _UNKNOWN)


def _module_at(module, path):
    """The plain top-level names of `module` as imported from the file at `path`; None where it is
    not found (a library's) or not read."""
    found = module_file(module, path)
    if found is None or os.path.abspath(found) == os.path.abspath(path):
        return None
    lines = read_lines(found)
    return None if lines is None else _module_names(found, lines, depth=1)


def _reshape_call(node, top):
    """(top index, the call's arguments) of a statement `top[i].reshape(...)`, else None."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return None
    func = node.value.func
    if not (isinstance(func, ast.Attribute) and func.attr == "reshape" and isinstance(func.value, ast.Subscript)):
        return None
    sub = func.value
    if not (isinstance(sub.value, ast.Name) and sub.value.id == top):
        return None
    if not (isinstance(sub.slice, ast.Constant) and isinstance(sub.slice.value, int)):
        return None
    return sub.slice.value, node.value.args
