"""The one kind of error protoaudit reports to users: bad input, with where it is and what to do."""


class InputError(Exception):
    """A problem with what the user gave us; the CLI prints it on one line and exits with status 2."""

    def __init__(self, message, *, file=None, line=None, layer=None, fix=None, fork=None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.line = line
        self.layer = layer
        self.fix = fix
        self.fork = fork  # a shipped fork whose rules take what stopped here, where no --fork was given

    def located(self, *, file=None, line=None, layer=None):
        """Fill in whatever location is still unknown and return self (for re-raising)."""
        self.file = self.file or file
        self.line = self.line or line
        self.layer = self.layer or layer
        return self

    def __str__(self):
        where = self.file or "<input>"
        if self.line:
            where += f":{self.line}"
        text = f"{where}: "
        if self.layer:
            text += f"layer '{self.layer}': "
        text += self.message
        if self.fix:
            text += f" ({self.fix})"
        return text


class LayerStops(InputError):
    """Caffe stops at a layer in the audited build and mode (a layer's touch.stop): its code is not
    there, or cannot take the blob."""


def closest(word, known, cutoff=0.75):
    """The known name nearest a misspelt one (the same but for case first), or None: what a
    message's "did you mean" offers."""
    known = list(known)
    by_lower = {name.lower(): name for name in known}
    if str(word).lower() in by_lower:
        return by_lower[str(word).lower()]
    import difflib

    near = difflib.get_close_matches(str(word), known, n=1, cutoff=cutoff)
    return near[0] if near else None
