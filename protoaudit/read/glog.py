"""glog's line prefix, which tells a Caffe log from a prototxt: asked of every file given, so it
is kept apart from the log reader (protoaudit.read.caffe_log), which only a log needs."""
import re

from . import special

# glog's line prefix: severity, date, time, thread, file:line]
GLOG = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ([^ \]]+):\d+\] ")


def is_log_file(path):
    """Whether the file is a Caffe (glog) log rather than a prototxt: a glog line among its first
    lines (a prototxt has none). Unreadable files, and pipes or devices, are left to the prototxt
    reader to report."""
    if special.kind(path):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(65536).decode("utf-8", errors="replace")
    except OSError:
        return False
    return any(GLOG.match(line) for line in head.splitlines()[:200])
