"""What cudaMalloc takes from the card for a run of allocations, beyond the bytes asked for.

Caffe makes one cudaMalloc per buffer (SyncedMemory::to_gpu), thousands on a ResNet. Measured on an
H200 and an H100 (driver 580, CUDA 13; tests/data/gpu_measured): the driver hands out memory in 2 MiB
pages.
- An allocation of more than 2 MiB takes whole pages of its own (2 MiB + 1 byte takes 4 MiB).
- Smaller ones take 512-byte slots (513 bytes: 4,096 per page; 1,025 bytes: 1,365; 4,097: 455)
  packed into shared pages, each into the fullest page it fits (1.0, 1.5, 0.5 and 1.0 MiB take
  two pages, not the three first fit would take).
That rule gives the drop in free memory to the byte, on both cards, for every device buffer of seven
nets under both engines, one cudaMalloc each (tests/test_gpu_measured.py).
"""
import bisect

PAGE = 2 * 2**20
SLOT = 512


def taken(sizes):
    """The bytes the driver takes for cudaMalloc of each of `sizes`, in this order, none freed."""
    pages = 0
    # the shared pages with free bytes, by how many bytes they have free: the counts, and the
    # distinct amounts sorted (multiples of SLOT, so at most PAGE / SLOT of them however many pages)
    count = {}
    room = []
    for size in sizes:
        if size <= 0:
            continue
        if size > PAGE:
            pages += -(-size // PAGE)
            continue
        slot = -(-size // SLOT) * SLOT
        at = bisect.bisect_left(room, slot)
        if at < len(room):  # the fullest page it fits
            free = room[at]
            if count[free] == 1:
                del count[free], room[at]
            else:
                count[free] -= 1
            left = free - slot
        else:
            pages += 1
            left = PAGE - slot
        if left:
            if left in count:
                count[left] += 1
            else:
                count[left] = 1
                bisect.insort(room, left)
    return pages * PAGE


def beyond(sizes):
    """What the pages take beyond the bytes of `sizes` (taken, less what was asked for)."""
    sizes = list(sizes)
    return taken(sizes) - sum(sizes)
