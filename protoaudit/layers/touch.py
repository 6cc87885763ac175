"""What a layer touches when Caffe sets it up, runs it forward and runs it backward.

Caffe allocates a buffer the first time it is touched and never frees it, so a layer's memory is
described by what it touches: blobs it shares with the net (its bottoms' and tops' data and diffs,
its parameters) by reference, and its private buffers by size. Each layer class lists its touches
(`Layer.touches`); `protoaudit.memory.buffers` turns them into allocations.
"""
import functools
from dataclasses import dataclass

from ..records import RECORD


@dataclass(**RECORD)
class Touch:
    stage: str  # setup | forward | backward
    what: str  # bottom | top | param | buffer | stop
    index: int = 0  # which bottom, top or param
    part: str = "data"  # data | diff (for blobs and params)
    name: str = ""  # a private buffer's name, as in Caffe's source (col_buffer_, max_idx_, ...)
    elements: int = 0
    itemsize: int = 4
    per_sample: bool = False  # does it grow with the batch
    kind: str = "layer buffer"  # layer buffer | workspace | prefetch
    note: str = ""  # how its size comes about, for explanations: "64x7x7x384x512 (one image)"
    device: str = "device"  # "host" for a buffer only ever touched by CPU code, even in GPU mode
    owns: bool = True  # False: a top whose data points into a buffer counted elsewhere (set_cpu_data)
    process: bool = False  # a one-time cost of the process (a library's state), counted once per audit


# Touches of shared blobs are few distinct values, asked for on every layer of every pass: each
# is made once, and one instance serves every layer (a Touch is never changed once made).
@functools.cache
def bottom(j, part, stage, device="device"):
    return Touch(stage, "bottom", j, part, device=device)


@functools.cache
def top(j, part, stage, device="device", owns=True):
    return Touch(stage, "top", j, part, device=device, owns=owns)


@functools.cache
def param(k, part, stage):
    return Touch(stage, "param", k, part)


def buffer(name, elements, stage, *, per_sample, itemsize=4, kind="layer buffer", note="", device="device"):
    return Touch(stage, "buffer", 0, "data", name, int(elements), itemsize, per_sample, kind, note, device)


def host(name, size, note="", kind="host objects"):
    """Host memory a layer's C++ code holds from setup on (objects, handles, lists): `size` bytes."""
    return Touch("setup", "buffer", name=name, elements=int(size), itemsize=1, kind=kind, note=note, device="host")


def process(name, size, note=""):
    """A one-time cost of the process (a library initialised on first use), host memory, `size`
    bytes. It is the process's, not a layer's: a train net and its test net (or two decoding
    layers) in one `caffe train` pay it once. So it is one buffer per audit, carried by the first
    layer that needs it (where Caffe first pays it), and the report's first-touch order shows why."""
    return Touch("setup", "buffer", name=name, elements=int(size), itemsize=1, kind="library state", note=note,
                 device="host", process=True)


def static(name, elements, stage, note=""):
    """A class's static Blob, one per process for every layer of the class in every net: Blob::Reshape
    grows it, at setup, to the largest count any of them asks, before the first touch allocates it.
    Stage "reshape": a layer that reshapes it and never touches it (its size counts, nothing more)."""
    return Touch(stage, "buffer", name=name, elements=int(elements), note=note, process=True)


def stop(stage, why, fix="audit it where Caffe has that code: GPU mode (--mode gpu)"):
    """Caffe stops here: the layer has no code for this pass in this mode (a fork's
    NOT_IMPLEMENTED), or its code in this build cannot take the blob. Reached only when the audited
    run makes that pass; `fix` (kept as the touch's name) is what the user can do."""
    return Touch(stage, "stop", note=why, name=fix)


class Run:
    """How a layer runs in this audit: the build (engine, mode) and its flags from Net::Init.

    It notes whether the layer asked which engine runs (`asked_engine`): most layers allocate the
    same under either engine, and their touches then serve both (protoaudit.memory.buffers)."""

    __slots__ = ("mode", "_engine", "phase", "bottoms", "tops", "in_place", "propagate_down",
                 "param_propagate_down", "num_params", "asked_engine")

    def __init__(self, mode, engine, phase, bottoms, tops, in_place, propagate_down, param_propagate_down,
                 num_params):
        self.mode = mode  # gpu | cpu (Caffe's solver_mode)
        self._engine = engine  # caffe | cudnn
        self.phase = phase  # TRAIN | TEST (the layer's)
        self.bottoms = bottoms  # shapes
        self.tops = tops  # shapes
        self.in_place = in_place  # per top: is it its bottom's blob
        self.propagate_down = propagate_down  # per bottom: does backward write its diff (bottom_need_backward)
        self.param_propagate_down = param_propagate_down  # per param: does backward write its diff
        self.num_params = num_params
        self.asked_engine = False

    @property
    def engine(self):
        self.asked_engine = True
        return self._engine
