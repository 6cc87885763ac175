"""What a dataset-reading layer finds on disk, read the way Caffe reads it at setup.

`Source` is a layer's view of its files: it finds each path as Caffe would (protoaudit.read.datasets.paths),
reads the mean file's shape and the first record or image, and turns a reader's error into the layer's
one-line error, or into a request for --input where only the dataset could say. Results are kept per file
(path, size, modification time), so the largest-batch search, which re-audits, reads each dataset once.
"""
import functools
import os
import re

from ..read import special
from ..read import datasets
from ..read.datasets import DatasetError, MissingLibrary, paths


def cached(module, reader):
    """protoaudit.read.datasets.<module>.<reader>(path, *args), kept for as long as the file at
    `path` is unchanged; the module is imported at the first read (most nets open no dataset)."""

    @functools.lru_cache(maxsize=256)
    def keyed(path, stamp, *args):
        return getattr(datasets.reader(module), reader)(path, *args)

    def wrapper(path, *args):
        found = special.kind(path)
        if found is not None:  # a pipe no one writes to would be waited on forever
            raise DatasetError(f"{path} is {found}, not a file or a database folder", fix=special.FIX)
        return keyed(path, stamp(path), *args)

    return wrapper


# The files of a database folder its readers open (LMDB's data.mdb; LevelDB's CURRENT, MANIFEST,
# logs and tables): a folder of a million other entries is looked through, never stat'ed whole.
DATABASE_FILES = re.compile(r"data\.mdb|CURRENT|MANIFEST-\d+|\d+\.(?:log|ldb|sst)")


def stamp(path):
    """What changes when a file, or a database folder's files, change."""
    st = os.stat(path)
    if not os.path.isdir(path):
        return (st.st_size, st.st_mtime_ns)
    with os.scandir(path) as entries:
        return (st.st_mtime_ns,) + tuple(sorted((e.name, e.stat().st_size, e.stat().st_mtime_ns) for e in entries
                                                if DATABASE_FILES.fullmatch(e.name) and e.is_file()))


class Source:
    """The files one layer names, resolved from the folder Caffe ran in."""

    def __init__(self, layer):
        self.layer = layer
        self.base = None  # the folder the layer's first path was found from

    def find(self, name):
        found = paths.locate(name, self.layer.ctx.root, self.layer.ctx.path, first=self.base)
        if found is not None and self.base is None and found.base is not None:
            self.base = found.base
        return found

    def not_found(self, what, name):
        """Why a dataset path is missing, for need_input's message."""
        if os.path.isabs(name):
            return f"{what} '{name}' does not exist on this machine"
        return (f"{what} '{name}' is not found from {paths.looked_in(self.layer.ctx.root)}; run from the folder "
                "Caffe runs in (usually the Caffe root) or give --root")

    def read(self, reader, *args, what):
        """reader(*args), a reader's DatasetError made the layer's own error (exit 2)."""
        try:
            return reader(*args)
        except MissingLibrary:
            raise
        except DatasetError as e:
            self.layer.fail(f"{what}: {e.message}", fix=e.fix or "Caffe cannot read it either: fix or rebuild the "
                            "dataset, or point the layer at another one")

    @staticmethod
    def shown(found, name):
        return paths.shown(found, name)


def legacy_chw(shape):
    """Blob's channels(), height(), width() of a blob shape (LegacyShape: a missing axis reads as 1)."""
    return tuple(shape[i] if i < len(shape) else 1 for i in (1, 2, 3))
