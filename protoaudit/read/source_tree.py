"""The Caffe source tree a net sits in, or that its repository holds beside it (a fork's nets under
examples/ or models/; a project's caffe/ folder): the layer types its Caffe registers, and its
caffe.proto, which reads the net's fields.

Read only to say where a layer type protoaudit has no rule for comes from: the .cpp that registers it
(REGISTER_LAYER_CLASS) and the caffe.proto `--caffe-proto` can take. Nothing is compiled or run.
"""
import functools
import os
import re

UP = 6  # folders above the net's looked in for src/caffe/proto/caffe.proto
MAX_FILES = 600  # layer sources read at most (a fork has some 100 to 300)
MAX_BYTES = 1 << 20


def tree_of(net_path):
    """The root of the Caffe source tree `net_path` sits in, or that a folder above it holds beside
    its nets (a repository's caffe/ or caffe-fast-rcnn/): the folder with src/caffe/proto/caffe.proto;
    None where there is none."""
    if not net_path:
        return None
    here = os.path.dirname(os.path.abspath(net_path))
    for _ in range(UP + 1):
        if _is_tree(here):
            return here
        try:
            beside = sorted(e.name for e in os.scandir(here) if e.is_dir() and e.name.lower().startswith("caffe"))
        except OSError:
            beside = []
        for name in beside:
            if _is_tree(os.path.join(here, name)):
                return os.path.join(here, name)
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent
    return None


def _is_tree(folder):
    return os.path.isfile(os.path.join(folder, "src", "caffe", "proto", "caffe.proto"))


def caffe_proto(net_path, tree=None):
    """The caffe.proto of the Caffe source tree of the net's repository (`tree`, else tree_of), as the
    user reaches it from the net's folder; None where there is none."""
    tree = tree or tree_of(net_path)
    if tree is None:
        return None
    return os.path.relpath(os.path.join(tree, "src", "caffe", "proto", "caffe.proto"),
                           os.path.dirname(os.path.abspath(net_path)))


def registering(root, layer_type):
    """The tree's layer source that registers `layer_type` (REGISTER_LAYER_CLASS(Type), or
    REGISTER_LAYER_CREATOR(Type, ...)), relative to the tree's root; None where none does."""
    folder = os.path.join(root, "src", "caffe", "layers")
    try:
        version = os.stat(folder).st_mtime_ns
    except OSError:
        return None
    found = _registered(folder, version).get(layer_type)
    return os.path.join("src", "caffe", "layers", found) if found else None


_REGISTER = re.compile(rb"REGISTER_LAYER_(?:CLASS|CREATOR)\(\s*(\w+)\s*[,)]")


@functools.lru_cache(maxsize=8)
def _registered(folder, version):
    """{type: file} of the types the folder's layer sources register, read once per version of the
    folder (its modification time): a net refused for its unknown types asks once per layer and per
    size it tries, and a tree holds some 100 to 300 sources."""
    out = {}
    try:
        names = sorted(e.name for e in os.scandir(folder) if e.is_file() and e.name.endswith(".cpp"))[:MAX_FILES]
    except OSError:
        return out
    for name in names:
        try:
            with open(os.path.join(folder, name), "rb") as f:
                text = f.read(MAX_BYTES)
        except OSError:
            continue
        for m in _REGISTER.finditer(text):
            out.setdefault(m.group(1).decode(), name)
    return out
