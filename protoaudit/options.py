"""Parsing the user's option values: shapes (`data=128x3x32x32`) and sizes (`8G`, `11.5GiB`)."""
from .errors import InputError

INT_MAX = 2**31 - 1


def parse_input(text):
    """`TOP=N[xC[xH[xW...]]]` -> (top, shape)."""
    name, sep, dims = text.partition("=")
    if not sep or not name or not dims:
        raise InputError(f"--input '{text}' is not TOP=SHAPE", fix="write it as data=128x3x32x32")
    try:
        shape = tuple(int(d) for d in dims.lower().replace("*", "x").replace(",", "x").split("x"))
    except ValueError:
        raise InputError(f"--input '{text}': the shape must be whole numbers joined by x",
                         fix="write it as data=128x3x32x32") from None
    if any(d < 0 for d in shape):
        raise InputError(f"--input '{text}': dimensions cannot be negative", fix="write it as data=128x3x32x32")
    return name, shape


def parse_inputs(values):
    inputs = {}
    for text in values or ():
        name, shape = parse_input(text)
        inputs[name] = shape
    return inputs


def known_defines():
    """The --define names some layer type reads: name -> what it means."""
    from .layers.base import FORK_REGISTRY, REGISTRY

    classes = list(REGISTRY.values()) + [c for table in FORK_REGISTRY.values() for c in table.values()]
    return {name: what for cls in classes for name, what in cls.defines.items()}


def parse_defines(values):
    """--define NAME=VALUE (a list of such texts, or a dict): counts only the data decides, such as
    the priors MultiBoxLoss matches per image. Names no layer reads are refused, naming those that exist."""
    if not values:
        return {}
    pairs = values.items() if isinstance(values, dict) else (_define(text) for text in values)
    known = known_defines()
    defines = {}
    for name, value in pairs:
        if name not in known:
            raise InputError(f"--define {name}: no layer reads that name",
                             fix="known names: " + "; ".join(f"{n} ({what})" for n, what in sorted(known.items())))
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InputError(f"--define {name}={value}: the value must be a whole number, 0 or more")
        defines[name] = value
    return defines


def _define(text):
    name, sep, value = text.partition("=")
    if not sep or not name or not value.strip().isdigit():
        raise InputError(f"--define '{text}' is not NAME=COUNT", fix="write it as matched_priors=40")
    return name.strip(), int(value)


def parse_batch(value):
    if value is None:
        return None
    if value < 1:
        raise InputError(f"--batch {value}: the batch size must be at least 1")
    return value
