"""Caffe's datasets, read the way its data layers read them at setup, and no further.

One small module per format: LMDB and LevelDB (`lmdb_db`, `leveldb_db`: the first record),
Caffe's Datum (`datum`), image headers (`image_file`), image and file lists (`lists`), HDF5
(`hdf5_file`), mean files (`mean_file`), R-CNN window files (`window_file`); `paths` finds a
dataset as Caffe would. Nothing here ever writes into a dataset.

The libraries (lmdb, h5py, Pillow, cramjam for LevelDB's compressed blocks) are the optional extra
`pip install 'protoaudit[datasets]'`, imported only when a dataset is opened.
"""
import importlib

EXTRA = "pip install 'protoaudit[datasets]'"


class DatasetError(Exception):
    """A dataset that is there but cannot be read as Caffe reads it: one line, and what to do."""

    def __init__(self, message, fix=None):
        super().__init__(message)
        self.message = message
        self.fix = fix


class MissingLibrary(DatasetError):
    """The library that reads this format is not installed (the `datasets` extra)."""

    def __init__(self, module, what):
        super().__init__(f"reading {what} needs the Python package '{module}', which is not installed", fix=EXTRA)
        self.module = module


def reader(name):
    """This package's module `name` (a format's reader), imported when a dataset is first read."""
    return importlib.import_module(f"{__name__}.{name}")


def library(module, what):
    """Import `module` (a dataset reader's library), or say which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingLibrary(module.split(".")[0], what) from None
