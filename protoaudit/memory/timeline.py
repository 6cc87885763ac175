"""One memory model for every framework: buffers with lifetimes, and the peak over time.

A framework's run is written as a program of steps in the order they execute. Each step reads some
buffers and makes new ones (and may hold a scratch buffer while it runs). A buffer lives from the
step that makes it to the last step that reads it, unless it is held (to the end of the program, as
Caffe holds every buffer, or as an optimizer's slot lives across steps). A step may make its output
in the memory of an input it reads last (TensorFlow's buffer forwarding: `forward_input_or_allocate_output`),
which then costs nothing new. The peak is the largest sum of live bytes at any step, scratch included.
"""
from dataclasses import dataclass, field


@dataclass
class Buf:
    """One buffer of the program: its size, what it is, and who made it."""

    bytes: int
    label: str  # what it holds, e.g. "conv1 output", "dense kernel gradient"
    kind: str  # a category of the report: activation, gradient, optimizer, scratch, input, ...
    step: int = -1  # the step that made it
    held: bool = False  # lives to the end of the program
    last: int = -1  # the last step that reads it
    alias: int = None  # the buffer whose memory it took (forwarding), or None


@dataclass
class Step:
    label: str
    reads: tuple
    makes: tuple
    scratch: int = 0
    forward: tuple = ()  # (made buffer, read buffer) pairs: the made one may take the read one's memory


@dataclass
class Peak:
    """The result: the peak's bytes, the step at which it occurs, and what is live there by kind."""

    bytes: int
    step: str
    live: dict = field(default_factory=dict)  # kind -> bytes at the peak
    groups: list = field(default_factory=list)  # live buffers at the peak by what made them: (bytes, count, label, kind)


class Program:
    """Buffers and the steps that make and read them, in execution order."""

    def __init__(self):
        self.bufs = []
        self.steps = []

    def step(self, label, reads=(), makes=(), scratch=0, forward=()):
        """Run a step that reads buffer ids `reads` and makes buffers `makes` (each (bytes, label, kind));
        `forward` lists (index into makes, buffer id read) pairs whose memory the made buffer may take
        when this step is the read buffer's last reader. Returns the new buffers' ids."""
        ids = []
        for size, what, kind in makes:
            self.bufs.append(Buf(int(size), what, kind, len(self.steps)))
            ids.append(len(self.bufs) - 1)
        pairs = tuple((ids[k], src) for k, src in forward)
        self.steps.append(Step(label, tuple(r for r in reads if r is not None), tuple(ids), int(scratch), pairs))
        return ids

    def hold(self, *ids):
        for i in ids:
            self.bufs[i].held = True

    def _walk(self, rounding):
        """Walk the steps once: allocate what each makes (unless forwarded), yield (step, live buffer
        ids, live bytes) at its height (its scratch not included), then free what was read for the last
        time. `rounding`: every allocation rounded up to a multiple of it (an allocator's granularity)."""
        bufs = self.bufs
        if rounding > 1:
            for b in bufs:
                b.bytes = -(-b.bytes // rounding) * rounding
            for s in self.steps:
                s.scratch = -(-s.scratch // rounding) * rounding
        for k, s in enumerate(self.steps):
            for r in s.reads:
                bufs[r].last = k
        live = 0
        alive = set()
        for k, s in enumerate(self.steps):
            taken = {}
            for made, src in s.forward:
                b = bufs[src]
                if (src in alive and b.last == k and not b.held and src not in taken.values()
                        and b.bytes >= bufs[made].bytes):
                    taken[made] = src
            for m in s.makes:
                src = taken.get(m)
                if src is not None:
                    alive.discard(src)
                    live -= bufs[src].bytes
                    bufs[m].alias = src
                alive.add(m)
                live += bufs[m].bytes
            yield s, alive, live
            for r in s.reads:
                if r in alive and bufs[r].last == k and not bufs[r].held:
                    alive.discard(r)
                    live -= bufs[r].bytes
            for m in s.makes:
                if m in alive and bufs[m].last < k and not bufs[m].held:  # made and never read
                    alive.discard(m)
                    live -= bufs[m].bytes

    def peak(self, top=5, rounding=1):
        """The largest live bytes of any step with its scratch, where it occurs and what is live there."""
        bufs = self.bufs
        best, at, snapshot = -1, None, None
        for s, alive, live in self._walk(rounding):
            if live + s.scratch > best:
                best, at = live + s.scratch, s.label
                snapshot = (set(alive), s)
        result = Peak(max(best, 0), at)
        if snapshot is not None:
            ids, s = snapshot
            for i in ids:
                result.live[bufs[i].kind] = result.live.get(bufs[i].kind, 0) + bufs[i].bytes
            if s.scratch:
                result.live["scratch"] = result.live.get("scratch", 0) + s.scratch
            groups = {}
            for i in ids:
                entry = groups.setdefault((bufs[i].label, bufs[i].kind), [0, 0])
                entry[0] += bufs[i].bytes
                entry[1] += 1
            if s.scratch:
                groups[(f"{s.label} scratch", "scratch")] = [s.scratch, 1]
            result.groups = sorted(((b, n, label, kind) for (label, kind), (b, n) in groups.items()), reverse=True)[:top]
        return result

    def timeline(self, rounding=1):
        """Each step's label and its live bytes by kind, its scratch as "scratch" (what a chart draws)."""
        bufs = self.bufs
        out = []
        for s, alive, _ in self._walk(rounding):
            kinds = {}
            for i in alive:
                kinds[bufs[i].kind] = kinds.get(bufs[i].kind, 0) + bufs[i].bytes
            if s.scratch:
                kinds["scratch"] = kinds.get("scratch", 0) + s.scratch
            out.append((s.label, kinds))
        return out
