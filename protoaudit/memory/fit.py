"""Does it fit a card, and what batch would: the answer to `--gpu-mem`.

The largest batch comes from what the audit knows (protoaudit.memory.scaling): the buffers that
grow with the batch and those that do not give the batch the card holds; Caffe's rules applied at
that batch (the net made again, its shapes inferred and its buffers walked) confirm it. That
needs only two sums of what is on the card there, which protoaudit.audit.split_at works out
without making the audit's Buffers; buffers are compared one by one only where the sums cannot
tell. Where Caffe's shapes are not linear in the batch (a dimension hard-coded, a buffer capped),
the batches are audited one by one around the answer instead, never read off a scaled total.

On a GPU the card holds more than the buffers' bytes: cudaMalloc's pages (protoaudit.memory.
cuda_pages). They are not linear in the batch, so the rule's batch is then checked with the pages
of the rule's buffers at that batch, and lowered until they fit too.
"""
import math
from dataclasses import dataclass

from ..errors import InputError
from . import scaling

MAX_BATCH = 1 << 20


@dataclass
class Fit:
    budget: int
    total: int
    fits: bool
    batch: int  # the audited batch
    largest_batch: int  # largest that fits (0: not even batch 1); None when the net has no batch
    effective_batch: int  # batch x iter_size as the prototxt/solver states
    suggested_batch: int  # a batch that fits and divides the effective batch
    suggested_iter_size: int
    limit: str = None  # why no larger batch fits where the card is not the reason (Caffe refuses the next)

    @property
    def headroom(self):
        return self.budget - self.total


def check_fit(audit, budget, audit_at, split_at=None):
    """The verdict for `audit` on a card of `budget` bytes; `audit_at(batch)` audits again at a batch,
    `split_at(batch)` gives what scaling.split gives of that audit without making it (None: ask
    audit_at; protoaudit.audit.split_at). On a GPU the card's figure is the total with its pages."""
    total = on_card(audit)
    batch = audit.batch
    fit = Fit(budget, total, total <= budget, batch, None, None, None, None)
    if batch is None:
        return fit
    totals = {batch: total}
    audits = {}
    refusals = {}  # batch -> the InputError Caffe's rules raised there

    def total_at(b):
        if b not in totals:
            try:
                audits[b] = audit_at(b)
                totals[b] = on_card(audits[b])
            except InputError as e:  # Caffe refuses the net at this batch (a blob over INT_MAX elements)
                refusals[b] = e
                totals[b] = math.inf
        return totals[b]

    fit.largest_batch = _by_the_rule(audit, budget, total_at, audits, split_at)
    if fit.largest_batch is None:
        fit.largest_batch = largest_batch(total_at, budget, batch)
    elif audit.cudamalloc_pages is not None:
        fit.largest_batch = _with_pages(audit, fit.largest_batch, budget)
    fit.limit = _limit(fit.largest_batch, totals, refusals, budget)
    fit.effective_batch = batch * audit.iter_size
    if fit.largest_batch:
        fit.suggested_batch, fit.suggested_iter_size = keep_effective_batch(fit.effective_batch, fit.largest_batch)
    return fit


def on_card(audit):
    """What `audit` takes on the card: its total, and on a GPU cudaMalloc's pages."""
    return audit.total_bytes + (audit.cudamalloc_pages or 0)


def _with_pages(audit, largest, budget):
    """The largest batch up to `largest` (the rule's, by the buffers' bytes) whose buffers by the
    rule fit `budget` with their pages (0: not even batch 1). Packing some 100,000 buffers into
    pages takes a while, so the pages' floor, which costs almost nothing, first rules out the
    batches that cannot fit, and the batch below the first of them is tried. Where that does not fit
    either, the batch where the pages would be were they the same share of the bytes at every batch
    is tried, then its neighbour, and a bisection takes over only where those two do not settle it
    (fitting taken to be monotone in the batch)."""
    known = audit.card_sizes
    card = scaling.OnCard(known, audit.batch)
    on_card = card.at
    top = _bisect(lambda b: card.at_least(b) <= budget, 0, largest + 1)
    if top == 0:
        return 0
    top_bytes = on_card(top)
    if top_bytes <= budget:
        return top
    fixed = sum(n for n, grows in known.values() if not grows)
    per_batch = (sum(n for n, _ in known.values()) - fixed) / audit.batch
    if not per_batch:
        return 0  # the same at every batch, and it does not fit
    share = top_bytes / (fixed + per_batch * top)
    guess = math.floor((budget / share - fixed) / per_batch)
    low, high = 0, top  # batch 0 fits; `top` does not
    for _ in range(2):
        guess = min(max(guess, low + 1), high - 1)
        if on_card(guess) <= budget:
            low, guess = guess, guess + 1
        else:
            high, guess = guess, guess - 1
        if high - low <= 1:
            return low
    return _bisect(lambda b: on_card(b) <= budget, low, high)


def _limit(largest, totals, refusals, budget):
    """Why the largest batch is not larger where the card is not what stops it: the search ends at
    MAX_BATCH, or Caffe refuses the next batch (a blob over INT_MAX elements) that the card, by the
    line through two audits, would hold."""
    if largest == MAX_BATCH:
        return f"Capped by protoaudit, not by the card: it looks no further than batch {MAX_BATCH:,}"
    e = refusals.get(largest + 1) if largest else None
    known = {b: t for b, t in totals.items() if t != math.inf}
    other = next((b for b in known if b != largest), None)
    if e is None or largest not in known or other is None:
        return None
    if known[largest] + (known[largest] - known[other]) / (largest - other) > budget:
        return None  # the card would not hold it either
    where = f"layer '{e.layer}': " if e.layer else ""
    return (f"Capped by Caffe's blob-size limit (INT_MAX elements), not by the card: batch {largest + 1:,} "
            f"is refused ({where}{e.message})")


def _by_the_rule(audit, budget, total_at, audits, split_at=None):
    """The largest batch that fits, from the rule (the buffers that grow with the batch and those
    that do not) and one audit at the batch it gives (batch 1 when not even that fits), which
    confirms it when every buffer there is what the rule says. Where the rule breaks (Caffe's
    shapes are not linear in the batch there), the audit at that batch, exact, gives the rule again
    from there: its answer stands when it is that same batch (it fits, as audited, and the next
    one does not by its own buffers), else it is audited in turn, up to STEPS times. None when the
    steps run out or Caffe refuses a batch tried: then the batches are searched by audits alone.
    The rule needs only each audit's two sums (scaling.split), which `split_at(batch)` gives
    without making the audit where it can; buffers are compared one by one only where the sums
    cannot tell."""
    def sizes(b):  # the sizes of the audit at a batch, audited now if it was not (None: Caffe refuses it)
        return None if total_at(b) == math.inf else scaling.parts(audits.get(b, audit))

    base = audit.batch
    known = (split_at(base) if split_at is not None else None) or scaling.split(sizes(base))
    for _ in range(STEPS):
        guess = _solve(known, base, budget)
        at = guess + 1 if guess == base else max(guess, 1)  # a batch other than the one known
        found = split_at(at) if split_at is not None else None
        if found is None:
            if total_at(at) == math.inf:
                return None
            found = scaling.split(sizes(at))
        again = _solve(found, at, budget)
        if again == at == guess:
            # the answer whether or not a buffer there is off the rule: with none off it, the
            # rule from `at` gives what it gives from `base`
            return at
        if not _off_the_rule(known, found, base, at):  # the sums cannot tell: buffer by buffer
            before, after = sizes(base), sizes(at)
            if before is None or after is None:
                return None
            if not scaling.misses(scaling.merged(before), scaling.merged(after), base, at):
                return guess
        if again == at:
            return at
        base, known = at, found
    return None


def _off_the_rule(known, found, base, at):
    """Whether the sums `found` at batch `at` show a buffer off the rule read from the sums `known`
    at batch `base`: their total is not the rule's, so some buffer's size is not."""
    return (found[0] + found[1]) * base != known[0] * base + known[1] * at


STEPS = 4  # audits the rule may take before the search by audits alone


def _solve(split, base, budget):
    """The largest batch whose total fits `budget` by the rule, from the bytes that do not grow
    with the batch and those that do at batch `base` (scaling.split; 0: not even batch 1; at most
    MAX_BATCH)."""
    fixed, grows = split
    if fixed > budget:
        return 0
    if not grows:
        return MAX_BATCH
    return min((budget - fixed) * base // grows, MAX_BATCH)


def largest_batch(total_at, budget, known):
    """The largest batch whose exact audit fits `budget` (0 if batch 1 does not), by audits alone.

    Two audits give a guess (most of a net grows linearly with the batch); exact audits around
    the guess confirm it, and a bisection takes over where the guess is wrong. Fitting is taken to
    be monotone in the batch."""
    fits = lambda b: total_at(b) <= budget  # noqa: E731
    if not fits(1):
        return 0
    other = known * 2 if known > 1 else 2
    slope = (total_at(other) - total_at(known)) / (other - known)
    guess = known + math.floor((budget - total_at(known)) / slope) if slope > 0 else MAX_BATCH
    guess = min(max(guess, 1), MAX_BATCH)
    if fits(guess):
        if guess == MAX_BATCH or not fits(guess + 1):
            return guess
        low, step = guess + 1, 2
        while low + step <= MAX_BATCH and fits(low + step):
            low, step = low + step, step * 2
        return _bisect(fits, low, min(low + step, MAX_BATCH + 1))
    if fits(guess - 1):
        return guess - 1
    return _bisect(fits, 1, guess - 1)


def _bisect(fits, low, high):
    """The largest fitting batch in [low, high): low fits, high does not (or is past the cap)."""
    while high - low > 1:
        mid = (low + high) // 2
        if fits(mid):
            low = mid
        else:
            high = mid
    return low


def keep_effective_batch(effective, largest):
    """A batch that fits, with the iter_size that keeps batch x iter_size at `effective`: the largest
    divisor of `effective` that fits, unless that is far smaller than what fits (then round up)."""
    if largest >= effective:
        return effective, 1
    divisor = max(d for d in range(1, largest + 1) if effective % d == 0)
    if divisor * 2 > largest:
        return divisor, effective // divisor
    return largest, math.ceil(effective / largest)
