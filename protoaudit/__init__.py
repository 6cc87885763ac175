"""protoaudit: what a Caffe net will allocate, layer by layer, before it touches a GPU.

`protoaudit.audit(path, gpu_mem=..., sweep=..., **options)` and `protoaudit.diff(a, b, ...)` are the
library's surface (protoaudit.library); the README's "As a library" shows them."""
__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it)

import sys  # noqa: E402


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


try:
    from .audit import Audit, build_nets  # noqa: E402
    from .errors import InputError  # noqa: E402
    from .library import audit, diff  # noqa: E402
except ModuleNotFoundError as e:
    if e.name is None or e.name.split(".")[0] == __name__:
        raise
    _without(e)

__all__ = ["audit", "diff", "build_nets", "Audit", "InputError", "__version__"]
