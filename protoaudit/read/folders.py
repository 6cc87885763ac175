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
