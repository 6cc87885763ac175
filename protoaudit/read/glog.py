"""glog's line prefix, which tells a Caffe log from a prototxt: asked of every file given, so it
is kept apart from the log reader (protoaudit.read.caffe_log), which only a log needs."""
import functools
import os
import re

from . import special

# glog's line prefix: severity, date, time, thread, file:line]
GLOG = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+ +(\d+) [^ \]]+:\d+\] ")
# A training log is read line by line and never held whole; past this it is not a Caffe log.
MAX_LOG_BYTES = 2 * 2**30
HEAD_BYTES = 65536
# Caffe's first line of a run (Solver::Init, Net::Init), glog's prefix and all, after a newline
# (searched for as such, it is found at the speed of its literal part)
_INIT = re.compile(rb"\n[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^ \]\n]+:\d+\] "
                   rb"Initializing (?:solver|net) from parameters")
# what a prototxt's first line that is not blank or a comment starts with: a field's name, then a
# message's brace, or a colon and a value (a string, a number, a list, a message, or a name that
# ends the line or is followed by the next field) -- not "INFO:root:..." or "Train: epoch 1"
_FIELD = re.compile(r"""\s*[A-Za-z_][\w.]*\s*(?:[{<]|:\s*(?:["'\[{<]|[-+.\d]|"""
                    r"""[A-Za-z_]\w*(?:\s*(?:$|[#;,}])|\s+[A-Za-z_][\w.]*\s*[:{<])))""")
CHUNK = 2**22


def is_log_file(path):
    """Whether the file is a Caffe (glog) log rather than a prototxt: a glog line among its first
    lines (a prototxt has none), or, in a file that starts as no prototxt does (a script's output
    before it ran Caffe), Caffe's initialisation of a solver or net further on. Unreadable files,
    and pipes or devices, are left to the prototxt reader to report."""
    if special.kind(path):
        return False
    try:
        stat = os.stat(path)
    except (OSError, ValueError):
        return False
    return _is_log(path, os.path.abspath(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _is_log(path, *version):
    """is_log_file for one version of the file (asked again while it is audited): a prototxt is
    read no further than its head."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
            lines = head.decode("utf-8", errors="replace").lstrip("\ufeff").splitlines()
            if any(GLOG.match(line) for line in lines[:200]):
                return True
            first = next((line for line in lines if line.strip() and not line.lstrip().startswith("#")), None)
            if first is None or _FIELD.match(first) or b"\0" in head:
                return False
            return _initialises_further(f, head)
    except OSError:
        return False


def _initialises_further(f, seen):
    """Whether Caffe's initialisation line comes in the rest of the open file `f` (up to
    MAX_LOG_BYTES), read in chunks; `seen` is what was read of it already."""
    total = len(seen)
    tail = b"\n" + seen
    while True:
        if _INIT.search(tail):
            return True
        if total >= MAX_LOG_BYTES:
            return False
        chunk = f.read(CHUNK)
        if not chunk:
            return False
        total += len(chunk)
        # the last line read goes on in the chunk; one begun long before is no glog line
        cut = tail.rfind(b"\n")
        tail = (tail[cut:] if len(tail) - cut < 256 else b"") + chunk
