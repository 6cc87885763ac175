"""Step 3: what each layer touches. One class per Caffe layer type (its shape rule, its parameters,
the buffers it allocates and when), one module per family or fork; importing this registers them all."""
import importlib
import os

from .base import FORK_REGISTRY, REGISTRY, fork_types, layer_class

__all__ = ["REGISTRY", "FORK_REGISTRY", "fork_types", "layer_class", "suggest"]

_HELPERS = {"base", "touch", "cxx"}  # the framework, not a family of layers
for _file in sorted(os.listdir(os.path.dirname(__file__))):  # as pkgutil.iter_modules lists them, without its imports
    if _file.endswith(".py") and _file[:-3] not in _HELPERS and _file != "__init__.py":
        importlib.import_module(f"{__name__}.{_file[:-3]}")


def suggest(type_name, schema="bvlc"):
    """The registered type closest to a misspelt one (BVLC's and the net's fork's), or None."""
    known = list(REGISTRY) + list(FORK_REGISTRY.get(schema, {}))
    by_lower = {name.lower(): name for name in known}
    if type_name.lower() in by_lower:
        return by_lower[type_name.lower()]
    import difflib

    close = difflib.get_close_matches(type_name, known, n=1, cutoff=0.75)
    return close[0] if close else None
