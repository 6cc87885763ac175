"""Step 3: what each layer touches. One class per Caffe layer type (its shape rule, its parameters,
the buffers it allocates and when), one module per family or fork. Importing this registers the layers of every module but those
that hold forks' layers only (base.FORK_MODULES), which register theirs when a net of one of their
forks is in play (fork_layers)."""
import importlib
import os
import re
from difflib import SequenceMatcher

from ..errors import closest
from .base import FORK_MODULES, FORK_REGISTRY, REGISTRY, fork_layers, fork_types, layer_class

__all__ = ["REGISTRY", "FORK_REGISTRY", "fork_layers", "fork_types", "layer_class", "suggest"]

_HELPERS = {"base", "touch", "cxx"}  # the framework, not a family of layers
for _file in sorted(os.listdir(os.path.dirname(__file__))):  # as pkgutil.iter_modules lists them, without its imports
    _module = _file[:-3]
    if _file.endswith(".py") and _module not in _HELPERS and _module not in FORK_MODULES and _file != "__init__.py":
        importlib.import_module(f"{__name__}.{_module}")


def suggest(type_name, schema="bvlc"):
    """The registered type closest to a misspelt one (BVLC's and the net's fork's), or None. A
    misspelling keeps the length but for a letter, and changes two letters at most; a name longer or
    shorter than that is a fork's own type named after the one it extends (BboxAccuracy,
    K1_EuclideanLoss, ROIPooling), and one that changes a word is another type (SoftmaxCrossEntropyLoss,
    a mixup fork's loss, beside SigmoidCrossEntropyLoss)."""
    near = closest(type_name, list(REGISTRY) + list(fork_layers(schema)))
    if near is None or abs(len(near) - len(type_name)) > 1:
        return None
    if re.sub(r"\d", "", near).lower() == re.sub(r"\d", "", type_name).lower():
        return None  # a number added: a fork's numbered versions (ARL's EuclideanLoss6, JAA-Net's EuclideanLoss2)
    edits = SequenceMatcher(None, near.lower(), type_name.lower()).get_opcodes()
    return near if sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in edits if tag != "equal") <= 2 else None
