"""The shapes and stored types of an HDF5 file's datasets (h5py; shapes only, no data read).

HDF5DataLayer loads the datasets named like its tops from the first listed file
(hdf5_data_layer.cpp:28-46, util/hdf5.cpp): each needs at least one axis, float or integer data,
and the same number of rows. The file is opened read-only without HDF5's file locks.
"""
from dataclasses import dataclass

from . import DatasetError, library


@dataclass(frozen=True)
class Dataset:
    name: str
    shape: tuple
    dtype: str  # numpy's name: float32, float64, int64, ...
    native_float: bool  # stored as the float Caffe reads, so HDF5 needs no conversion buffer


def datasets(path, names):
    """The Dataset for each of `names` in the HDF5 file `path`."""
    h5py = library("h5py", "an HDF5 file")
    try:
        with h5py.File(path, "r", locking=False) as f:
            out = []
            for name in names:
                if name not in f or not isinstance(f[name], h5py.Dataset):
                    raise DatasetError(f"{path} has no dataset '{name}' (Caffe reads one dataset per top, named "
                                       "like the top)")
                d = f[name]
                kind = d.dtype.kind
                if kind not in "fiu":
                    raise DatasetError(f"{path}: dataset '{name}' holds {d.dtype} values; Caffe reads float or "
                                       "integer data only")
                if len(d.shape) < 1:
                    raise DatasetError(f"{path}: dataset '{name}' has no axis (Caffe needs at least one)")
                native = d.dtype.kind == "f" and d.dtype.itemsize == 4 and d.dtype.byteorder in "=<|"
                out.append(Dataset(name, tuple(int(x) for x in d.shape), d.dtype.name, native))
    except OSError as e:
        raise DatasetError(f"{path}: not a readable HDF5 file ({e})") from None
    rows = out[0].shape[0]
    for d in out[1:]:
        if d.shape[0] != rows:
            raise DatasetError(f"{path}: dataset '{d.name}' has {d.shape[0]} rows and '{out[0].name}' {rows}; "
                               "Caffe needs the same number")
    return out
