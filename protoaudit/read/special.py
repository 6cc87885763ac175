"""Paths that are not files: a pipe, a device, a socket.

protoaudit reads a file more than once (a look at its first lines says whether it is a Caffe log;
the file is then read whole), and opening a pipe no one writes to waits forever, while a device
such as /dev/zero never ends. So such a path is told apart before it is opened, by its mode alone.
"""
import os
import stat

from ..errors import InputError

_KINDS = ((stat.S_ISFIFO, "a pipe"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"),
          (stat.S_ISSOCK, "a socket"))
FIX = "save what it gives to a file and give that file"


def kind(path):
    """"a pipe", "a device" or "a socket" for such a path; None for a file, a folder or no path."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing, unreadable, or a name with a NUL: the reader says so
        return None
    return next((name for test, name in _KINDS if test(mode)), None)


def refuse(path, what="file"):
    """An InputError for a path that is a pipe, device or socket rather than a `what`."""
    found = kind(path)
    if found is not None:
        raise InputError(f"this is {found}, not a {what}", file=path, fix=FIX)
