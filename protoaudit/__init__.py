"""protoaudit: what a Caffe net will allocate, layer by layer, before it touches a GPU.

`protoaudit.audit(path, gpu_mem=..., sweep=..., **options)` and `protoaudit.diff(a, b, ...)` are the
library's surface (protoaudit.library); the README's "As a library" shows them."""
__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it)

import importlib  # noqa: E402
import importlib.util  # noqa: E402
import sys  # noqa: E402
import types  # noqa: E402


def _without(e):
    """A dependency missing from this Python (protoaudit run from its folder, never installed): the
    command says so in one line (`python -m protoaudit`, while its package is imported, has argv
    ['-m', ...]); an importing program gets the same words in the ModuleNotFoundError."""
    message = (f"protoaudit: the packages it needs are not installed for this Python ({sys.executable}): "
               f"no module named '{e.name}' (install protoaudit with pip, as the README's first command "
               "does, and run that install's protoaudit)")
    if sys.argv[:1] == ["-m"]:
        sys.stderr.write(message + "\n")
        raise SystemExit(2)
    raise ModuleNotFoundError(message, name=e.name) from e


# The dependencies, looked for without importing them: a Keras model's audit imports none of
# Caffe's modules (protobuf, networkx), which take most of a run's start-up.
for _name in ("google.protobuf", "networkx", "numpy", "tabulate", "yaml"):
    try:
        _found = importlib.util.find_spec(_name)
    except ModuleNotFoundError as e:
        _without(e)
    if _found is None:
        _without(ModuleNotFoundError(f"No module named '{_name}'", name=_name))

from .errors import InputError  # noqa: E402
from .library import audit, diff  # noqa: E402


class _Package(types.ModuleType):
    """The package, whose `audit` stays the library's function when Caffe's module protoaudit.audit
    is first imported (an import binds a submodule's name on its package)."""

    def __setattr__(self, name, value):
        if name == "audit" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name):
    """Audit and build_nets, imported with Caffe's modules when first asked for."""
    if name in ("Audit", "build_nets"):
        return getattr(importlib.import_module(".audit", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["audit", "diff", "build_nets", "Audit", "InputError", "__version__"]
