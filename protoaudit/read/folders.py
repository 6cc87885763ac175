"""Folders a file's relative paths are looked up from, as the readers of nets, solvers and logs
all do: a file kept anywhere inside a Caffe tree (or a repository) finds the paths it names."""
import os


def up_from(path):
    """The folder of `path` and each folder above it, nearest first."""
    folder, out = os.path.dirname(os.path.abspath(path)), []
    while True:
        out.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            return out
        folder = parent


def shown(path):
    """`path` as a message shows it: relative where it lies under the working directory."""
    return os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else path


MAX_PARTS = 8  # the last parts of a named path tried beside a file: deeper than any repository's


def last_parts(named):
    """A named path's last parts, all of them (at most MAX_PARTS) first, down to its file name."""
    parts = [p for p in named.replace("\\", "/").split("/") if p not in ("", ".")][-MAX_PARTS:]
    return [os.path.join(*parts[-n:]) for n in range(len(parts), 0, -1)]


def tails(named, path):
    """Where a file named by a path that holds elsewhere (from the Caffe root in a solver, in
    another machine's folders in a log) may be, seen from `path`, the file that names it: the
    named path's last parts joined to `path`'s folder and each folder above it, longest first (a
    repository keeps the net beside the solver or log that names it). A file name alone is looked
    for beside `path` only: any folder above holds some train.prototxt."""
    folders = up_from(path)
    return [os.path.join(folder, tail) for tail in last_parts(named)
            for folder in (folders if os.sep in tail else folders[:1])]
