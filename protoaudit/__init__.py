"""protoaudit: what a Caffe net will allocate, layer by layer, before it touches a GPU."""
from .audit import Audit, audit, build_nets
from .errors import InputError

__all__ = ["audit", "build_nets", "Audit", "InputError"]
__version__ = "0.1.0"
