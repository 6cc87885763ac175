"""Where a logged run died, and what protoaudit says it held by then.

Caffe allocates in a fixed order, never freeing: every net's setup (train net, then test nets),
then in Solver::Step's first iteration the test nets' forward pass (when it tests at iteration 0),
ClearParamDiffs, the train net's forward pass, its backward pass, and the solver's update (its
history). A fatal CHECK in the log, with glog's stack, says which of these was running; the bytes
protoaudit counts for the steps before it, and with it, bound what was held when it died.
"""
from dataclasses import dataclass

from .cuda_pages import beyond

STEPS = ("setup", "test forward", "clear param diffs", "forward", "backward", "update")


@dataclass
class Death:
    """A run that died: where, in words, and the bytes held before and after the step that died."""

    line: int
    message: str
    where: str
    before: int  # bytes protoaudit counts for everything allocated before the failing step
    after: int  # ... and with the whole failing step
    card: int = None  # the card's bytes (--gpu-mem, or the card the log names)
    card_name: str = ""
    after_pages: int = 0  # on a GPU, what cudaMalloc's pages take beyond `after` (protoaudit.memory.cuda_pages)

    @property
    def out_of_memory(self):
        return "out of memory" in self.message


def _step_of(buffer, net_role):
    """The step of Caffe's run in which a buffer is first allocated."""
    if buffer.kind == "context":
        return "setup"
    if buffer.kind == "history":
        return "update"
    if buffer.touch == "setup":
        return "setup"
    if buffer.touch == "solver":
        return "clear param diffs"
    if net_role == "test":
        return "test forward"
    return buffer.touch  # forward | backward


def _failing_step(failure):
    frames = " ".join(failure.frames)
    if not failure.solving:
        return "setup"
    if failure.testing or "Solver<>::Test" in frames:
        return "test forward"
    for needle, step in (("ApplyUpdate", "update"), ("ComputeUpdateValue", "update"), ("Regularize", "update"),
                         ("ClearParamDiffs", "clear param diffs"), ("Backward", "backward"), ("Forward", "forward")):
        if needle in frames:
            return step
    return None


def explain(audit, run, card=None):
    """The Death of the logged `run` that `audit` audited, or None if the run did not die."""
    failure = run.failure
    if failure is None:
        return None
    counted = [(b, n.role) for n in audit.nets for b in n.buffers if audit.mode == "cpu" or b.device == "device"]
    counted += [(b, "train") for b in audit.extra if audit.mode == "cpu" or b.device == "device"]
    stepped = [(b, _step_of(b, role)) for b, role in counted]
    by_step = dict.fromkeys(STEPS, 0)
    for b, s in stepped:
        by_step[s] += b.bytes
    step = _failing_step(failure)
    card_name = ""
    if card is None and run.gpus:
        from .cards import card_bytes

        card_name = run.gpus[0]
        card = card_bytes(card_name)
    if step == "setup":
        before, after, where, held = _in_setup(audit, run, counted)
    elif step is None:
        before, after = 0, sum(by_step.values())
        held = [b for b, _ in counted]
        where = f"at iteration {failure.iteration or 0} (glog printed no stack saying in which step)"
    else:
        k = STEPS.index(step)
        before = sum(by_step[s] for s in STEPS[:k])
        after = before + by_step[step]
        held = [b for b, s in stepped if STEPS.index(s) <= k]
        passes = {"test forward": "the test net's forward pass", "clear param diffs": "ClearParamDiffs",
                  "forward": "the train net's forward pass", "backward": "the train net's backward pass",
                  "update": "the solver's update"}
        where = f"in {passes[step]} of iteration {failure.iteration or 0}"
    # on a GPU, one cudaMalloc per buffer held then, the context's none
    pages = beyond(b.bytes for b in held if b.kind != "context") if audit.mode == "gpu" else 0
    return Death(failure.line, failure.message, where, before, after, card, card_name, pages)


def _in_setup(audit, run, counted):
    """Bytes held when the setup of the net being built stopped at its last created layer."""
    dying = next((k for k, n in enumerate(run.nets) if not n.done), len(run.nets) - 1)
    logged = run.nets[dying]
    labels = [n.buffers[0].net if n.buffers else n.role for n in audit.nets]
    label = labels[dying] if dying < len(labels) else None
    names = [layer.name for layer in audit.nets[dying].net.layers] if dying < len(audit.nets) else []
    index_of = {name: i for i, name in enumerate(names)}
    stop = index_of.get(logged.creating, len(names) - 1)
    earlier = set(labels[:dying])
    held = []  # the buffers held with the failing layer
    before = 0  # ... of which those held before it
    for b, _ in counted:
        if b.touch != "setup" and b.kind != "context":
            continue
        if b.net in earlier or b.kind == "context":
            held.append(b)
            before += b.bytes
        elif b.net == label and b.layer in index_of:
            index = index_of[b.layer]
            if index < stop:
                before += b.bytes
            if index <= stop:
                held.append(b)
    layer = f", layer '{logged.creating}'" if logged.creating else ""
    return before, sum(b.bytes for b in held), f"while setting up the {logged.phase} net{layer}", held
