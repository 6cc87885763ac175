"""Where a path named in a net (a source, a mean file, a list entry) is found.

Caffe opens these paths as written, so a relative one is relative to the folder Caffe runs in:
usually the Caffe root (`./build/tools/caffe train --solver examples/mnist/...`). protoaudit
looks in the working directory, then in `--root`, then in the net file's folder and, for a path
with a folder in it, each folder above (so that a net kept inside a Caffe tree finds
`examples/mnist/mnist_train_lmdb` with no flag). The first folder that has the path is the one
Caffe ran in for every other relative path of the same layer (its list entries, its mean file), so
those are looked up there first.
"""
import os
from typing import NamedTuple

from ..folders import up_from


class Found(NamedTuple):
    path: str  # an existing path
    base: str  # the folder a relative name was found from (None for an absolute name)
    how: str  # that folder, in words: "the working directory", "--root", "the net file's folder", ...


def bases(root, net_path, above=True):
    """The folders a relative path is tried from, in order, each with how a message names it
    (`above`: the folders above the net file's too)."""
    out = [(os.getcwd(), "the working directory")]
    if root:
        out.append((os.path.abspath(root), "--root"))
    if net_path:
        folders = up_from(net_path)
        out.append((folders[0], "the net file's folder"))
        if above:
            out += [(folder, "a folder above the net file") for folder in folders[1:]]
    seen, unique = set(), []
    for folder, how in out:
        if folder not in seen:
            seen.add(folder)
            unique.append((folder, how))
    return unique


def locate(name, root, net_path, first=None):
    """The Found path for `name`, or None. `first` is a folder tried before the others (the
    folder this layer's other paths were found from)."""
    if not name:
        return None
    if os.path.isabs(name):
        return Found(name, None, "an absolute path") if os.path.exists(name) else None
    # a name with a folder in it ("examples/mnist/...") is the Caffe root's: it is looked for above
    # the net file too; a bare name only beside it, where a stray file of that name is unlikely
    tried = bases(root, net_path, above=os.sep in name.strip(os.sep))
    if first is not None:  # the folder the layer's first path was found from, with its own name
        tried = sorted(tried, key=lambda b: b[0] != first)
    for folder, how in tried:
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return Found(path, folder, how)
    return None


def looked_in(root):
    """Where a missing path was looked for, for the message."""
    where = [os.getcwd()] + ([os.path.abspath(root)] if root else [])
    return " or ".join(where) + " (and the net file's folder and the folders above it)"


def shown(found, name):
    """How a report names a found path: as the net wrote it, with the folder it was found from."""
    if found.base is None or found.how == "the working directory":
        return name
    return f"{name} (from {found.base}, {found.how})"


def sources_of(lp):
    """The datasets a layer names: the `source` of each of its parameter messages that has one and sets it."""
    return [value.source for field, value in lp.ListFields()
            if field.message_type is not None and not field.is_repeated
            and "source" in field.message_type.fields_by_name and value.source]
