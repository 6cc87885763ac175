"""A net's shapes file: the `--input` shapes of its data and Python layers, kept beside the net.

`train.prototxt.shapes` (the net's own file name plus `.shapes`) is read whenever protoaudit
audits `train.prototxt`; `--shapes FILE` names another. One `TOP=NxCxHxW` a line, as `--input`
takes it; `#` starts a comment; blank lines are skipped. `--input` wins over a line of the file.
"""
import os

from ..errors import InputError
from ..options import parse_input
from . import special

SUFFIX = ".shapes"
MAX_BYTES = 2**20  # characters: a net's tops take a few lines


def beside(path):
    """The shapes file beside a net or solver file, or None."""
    candidate = path + SUFFIX
    return candidate if os.path.isfile(candidate) else None


def read_shapes(path):
    """{top: shape} from a shapes file; a bad line is one error naming the file and line."""
    special.refuse(path, "shapes file")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_BYTES + 1)
        if len(text) > MAX_BYTES:
            raise InputError(f"the shapes file is over {MAX_BYTES // 2**20} MiB, far more than a line per top "
                             "takes", file=path, fix="keep one TOP=NxCxHxW line per data or Python layer top")
        lines = text.splitlines()
    except FileNotFoundError:
        raise InputError("no such shapes file", file=path, fix="check the path given to --shapes") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the shapes file: {getattr(e, 'strerror', None) or e}", file=path,
                         fix="write it as UTF-8 text, one TOP=NxCxHxW a line") from None
    shapes, where = {}, {}
    for number, raw in enumerate(lines, 1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            top, shape = parse_input(text, what="the line")
        except InputError as e:
            e.fix = "write one TOP=NxCxHxW a line, e.g. data=1x3x600x1000 (# starts a comment)"
            raise e.located(file=path, line=number) from None
        if top in shapes:
            raise InputError(f"top '{top}' is given twice (first at line {where[top]})", file=path, line=number,
                             fix="keep one line per top")
        shapes[top], where[top] = shape, number
    return shapes


def declared_shapes(path, shapes=None):
    """The shapes a net file's shapes file declares: `shapes` names the file (None: the one beside
    `path`, if any; False: none)."""
    if shapes is False:
        return {}
    found = shapes if shapes else beside(path)
    return read_shapes(found) if found else {}
