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


def tally(counted):
    """What floor needs of buffers given as {size: how many}: (pages of the large ones, the small
    ones' slots' bytes, and for j = 1..SHARING how many small ones are too large for j + 1 to share
    a page). Tallies of two lots of buffers add up item by item."""
    pages = volume = 0
    over = [0] * SHARING
    for size, k in counted.items():
        if size <= 0:
            continue
        if size > PAGE:
            pages += k * -(-size // PAGE)
            continue
        slot = -(-size // SLOT) * SLOT
        volume += k * slot
        for j in range(min(PAGE // slot, SHARING + 1) - 1, SHARING):  # (j + 2) slots overflow a page
            over[j] += k
    return pages, volume, over


def floor(*tallies):
    """Bytes that taken() gives at least for the buffers of these tallies, whatever their order: a
    page can hold no more small buffers than their bytes allow, nor more than j of those too large
    for j + 1 to share it. Cheap: it needs only the buffers' distinct sizes."""
    pages = sum(t[0] for t in tallies)
    volume = sum(t[1] for t in tallies)
    over = [sum(t[2][j] for t in tallies) for j in range(SHARING)]
    shared = max([-(-volume // PAGE)] + [-(-c // (j + 1)) for j, c in enumerate(over)])
    return (pages + shared) * PAGE


SHARING = 8  # floor's bounds for pages shared by up to 8 buffers


def beyond(sizes):
    """What the pages take beyond the bytes of `sizes` (taken, less what was asked for)."""
    sizes = list(sizes)
    return taken(sizes) - sum(sizes)
