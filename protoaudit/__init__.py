"""protoaudit: what a Caffe net will allocate, layer by layer, before it touches a GPU.

`protoaudit.audit(path, gpu_mem=..., sweep=..., **options)` and `protoaudit.diff(a, b, ...)` are the
library's surface (protoaudit.library); the README's "As a library" shows them."""
__version__ = "0.1.0"  # the one place the version is written (pyproject.toml reads it)

from .audit import Audit, build_nets  # noqa: E402
from .errors import InputError  # noqa: E402
from .library import audit, diff  # noqa: E402

__all__ = ["audit", "diff", "build_nets", "Audit", "InputError", "__version__"]
