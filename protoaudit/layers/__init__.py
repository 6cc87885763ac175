"""Step 3: what each layer touches. One class per Caffe layer type (its shape rule, its parameters,
the buffers it allocates and when), one module per family; importing this registers them all."""
import difflib

from . import (  # noqa: F401
    activations,
    conv,
    data,
    dense,
    losses,
    normalization,
    pooling,
    recurrent,
    segnet,
    structure,
)
from .base import REGISTRY


def suggest(type_name):
    """The registered type closest to a misspelt one, or None."""
    by_lower = {name.lower(): name for name in REGISTRY}
    if type_name.lower() in by_lower:
        return by_lower[type_name.lower()]
    close = difflib.get_close_matches(type_name, list(REGISTRY), n=1, cutoff=0.75)
    return close[0] if close else None
