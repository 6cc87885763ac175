"""Caffe's list files: ImageData's "path label" lines, DenseImageData's "image label-image" pairs,
HDF5Data's list of .h5 files. Caffe reads the whole list at setup into memory; protoaudit reads its
first entry, and counts the entries only for lists up to EXACT bytes (beyond, it estimates them from
the first SAMPLE bytes and the file's size), so a list of millions of lines is never read whole.
"""
import os
from dataclasses import dataclass

from . import DatasetError

FIRST_LINE_LIMIT = 1 << 16  # a first line longer than this is no list of file names
EXACT = 4 << 20
SAMPLE = 1 << 20


@dataclass(frozen=True)
class Entries:
    """How many entries a list holds and the bytes their names take, counted or estimated."""

    count: int
    name_bytes: int  # sum over names of (length + 1) for names libstdc++ keeps on the heap (over 15 chars)
    exact: bool


def _head(path, what):
    try:
        with open(path, "rb") as f:
            return f.read(FIRST_LINE_LIMIT)
    except OSError as e:
        raise DatasetError(f"{what} {path}: cannot be read ({e.strerror})") from None


def first_line_entry(path, what):
    """ImageData's first entry (image_data_layer.cpp: getline, the name before the last space)."""
    head = _head(path, what)
    if not head:
        raise DatasetError(f"{what} {path} is empty (Caffe: 'File is empty')")
    end = head.find(b"\n")
    if end < 0 and len(head) == FIRST_LINE_LIMIT:
        raise DatasetError(f"{what} {path}: its first line is over {FIRST_LINE_LIMIT:,} bytes: not a list of images")
    line = head[:end if end >= 0 else len(head)].decode("utf-8", "surrogateescape")
    space = line.rfind(" ")
    return line[:space] if space >= 0 else line


def first_tokens(path, n, what):
    """The first `n` whitespace-separated tokens (Caffe's `infile >> name`)."""
    tokens = _head(path, what).split()
    if len(tokens) < n:
        raise DatasetError(f"{what} {path} is empty" if not tokens else
                           f"{what} {path}: its first entry is not {n} names")
    return [t.decode("utf-8", "surrogateescape") for t in tokens[:n]]


def entries(path, names_of):
    """Entries of a list: `names_of(line)` gives the names Caffe keeps for one line."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        data = f.read(EXACT if size <= EXACT else SAMPLE)
    exact = size <= EXACT
    if not exact:
        data = data[:data.rfind(b"\n") + 1] or data
    count = heap = 0
    for line in data.splitlines():
        names = names_of(line)
        if names:
            count += 1
            heap += sum(len(n) + 1 for n in names if len(n) > 15)
    if exact or not data:
        return Entries(count, heap, True)
    scale = size / len(data)
    return Entries(round(count * scale), round(heap * scale), False)


def image_line_names(line):
    space = line.rfind(b" ")
    return [line[:space] if space >= 0 else line]


def token_names(line):
    return line.split()


def name_label_names(line):
    """A "name label" entry read as two tokens (2016 forks' ImageData: `infile >> filename >> label`)."""
    return line.split()[:1]


def pair_names(line):
    """DenseImageData's "image label-image" entry (caffe-segnet reads pairs of tokens)."""
    return line.split()[:2]
