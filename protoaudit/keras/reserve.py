"""What of a GPU card TensorFlow never lets its allocator take: the memory it leaves to the system.

TensorFlow's GPU device (tensorflow/core/common_runtime/gpu/gpu_device.cc, SingleVirtualDeviceMemoryLimit)
reads the device's free memory once the CUDA context exists and, unless per_process_gpu_memory_fraction
is set, gives its BFC allocator that much less MinSystemMemory(free, compute capability major):
225 MiB where less than 2 GiB is free, else 500 MiB up to compute capability 6.x, 1050 MiB up to 7.x,
1536 MiB up to 8.x and 1800 MiB from 9.0 on (TensorFlow 2.21; older 2.x had three tiers, 1536 MiB from
8.0 on). Where that is not less than what is free, nothing is kept. TF_DEVICE_MIN_SYS_MEMORY_IN_MB (and
gpu_options.experimental.gpu_system_memory_size_in_mb, which the variable overrides) replaces the reserve
when it is not more than what is free; a larger value is ignored and the reserve stays. Memory growth
(allow_growth) does not change the limit, only whether the pool is taken at start.
"""
from dataclasses import dataclass

MIB = 2**20
LOW = 1 << 31  # under 2 GiB free: the smallest reserve, whatever the card
LOW_RESERVE = 225 * MIB
# (the highest compute capability major of the tier, its reserve); None: every later one
TIERS = ((6, 500 * MIB), (7, 1050 * MIB), (8, 1536 * MIB), (None, 1800 * MIB))
LARGEST = (9, 0)  # the compute capability taken where none is given: the largest reserve


@dataclass(frozen=True)
class Reserve:
    """TensorFlow's reserve on a card of `card` bytes with `context` bytes taken before it."""

    card: int
    context: int
    bytes: int  # what TensorFlow keeps off its allocator
    cc: tuple = None  # (major, minor) given with --gpu-cc
    given: int = None  # --gpu-reserve, as TF_DEVICE_MIN_SYS_MEMORY_IN_MB sets it
    ignored: bool = False  # `given` is more than is free: TensorFlow ignores it and keeps its own

    @property
    def free(self):
        """The device's free memory TensorFlow reads: the card less the context."""
        return max(self.card - self.context, 0)

    @property
    def limit(self):
        """What TensorFlow's allocator may take: its weights, slots and every step's tensors."""
        return self.free - self.bytes

    @property
    def tier_assumed(self):
        """Whether the reserve is the largest tier for want of a compute capability (it would be
        smaller on a card before compute capability 9.0)."""
        return self.from_tier and self.cc is None and self.free >= LOW and self.bytes > 0

    @property
    def from_tier(self):
        return self.given is None or self.ignored


def min_system_memory(free, cc_major):
    """gpu_device.cc's MinSystemMemory: the reserve for `free` bytes on a card of compute capability `cc_major`."""
    if free < LOW:
        return LOW_RESERVE
    return next(reserve for most, reserve in TIERS if most is None or cc_major <= most)


def tensorflow_reserve(card, context, cc=None, given=None):
    """TensorFlow's reserve on a card of `card` bytes after `context` bytes: by compute capability `cc`
    ((major, minor); None: the largest tier, so that a verdict errs towards not fitting), or `given`
    bytes as TF_DEVICE_MIN_SYS_MEMORY_IN_MB sets it."""
    free = max(card - context, 0)
    if given is not None and given <= free:
        return Reserve(card, context, given, cc, given)
    reserve = min_system_memory(free, (cc or LARGEST)[0])
    return Reserve(card, context, reserve if reserve < free else 0, cc, given, given is not None)
