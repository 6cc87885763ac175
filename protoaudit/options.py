"""Parsing the user's option values: shapes (`data=128x3x32x32`) and sizes (`8G`, `11.5GiB`)."""
from .errors import InputError

INT_MAX = 2**31 - 1
MAX_AXES = 32  # kMaxBlobAxes, caffe/blob.hpp


def parse_input(text, what="--input"):
    """`TOP=N[xC[xH[xW...]]]` -> (top, shape); `what` names where the text came from in messages."""
    name, sep, dims = text.partition("=")
    name, dims = name.strip(), dims.strip()
    if not sep or not name or not dims:
        raise InputError(f"{what} '{text}' is not TOP=SHAPE", fix="write it as data=128x3x32x32")
    parts = dims.lower().replace("*", "x").replace(",", "x").split("x", MAX_AXES)
    if len(parts) > MAX_AXES:
        raise InputError(f"{what} '{text[:60]}...': a Caffe blob has at most {MAX_AXES} axes",
                         fix="write it as data=128x3x32x32")
    try:
        shape = tuple(int(d) for d in parts)
    except ValueError:
        raise InputError(f"{what} '{text}': the shape must be whole numbers joined by x",
                         fix="write it as data=128x3x32x32") from None
    if any(d < 0 for d in shape):
        raise InputError(f"{what} '{text}': dimensions cannot be negative", fix="write it as data=128x3x32x32")
    return name, shape


def parse_inputs(values):
    inputs = {}
    for text in values or ():
        name, shape = parse_input(text)
        inputs[name] = shape
    return inputs


def parse_batch(value):
    if value is None:
        return None
    if value < 1:
        raise InputError(f"--batch {value}: the batch size must be at least 1")
    return value


def parse_defines(values):
    """`NAME=VALUE` (--define) -> {NAME: VALUE}, for a file's ${NAME} templates."""
    defines = {}
    for text in values or ():
        name, sep, value = text.partition("=")
        if not sep or not name.isidentifier() or "\n" in value:
            raise InputError(f"--define '{text}' is not NAME=VALUE", fix="write it as NUM_LABELS=21")
        defines[name] = value
    return defines


MAX_SWEEP = 1024  # batches in one --sweep: each may need an audit of its own


def parse_batches(text):
    """`--sweep 1,2,4,8`, `1..64` (every batch from 1 to 64) or both (`1..8,16,32`) -> sorted batches."""
    fix = "write it as 1,2,4,8 or 1..64"
    batches = set()
    for part in str(text).replace(" ", "").split(","):
        low, sep, high = part.partition("..")
        try:
            first, last = int(low), int(high if sep else low)
        except ValueError:
            raise InputError(f"--sweep {text}: '{part}' is not a batch or a range of batches", fix=fix) from None
        if first < 1 or last < first:
            raise InputError(f"--sweep {text}: batches are whole numbers from 1 up, ranges low..high", fix=fix)
        if last - first + 1 + len(batches) > MAX_SWEEP:
            raise InputError(f"--sweep {text}: more than {MAX_SWEEP} batches", fix="sweep fewer batches, e.g. 1,2,4,...")
        batches.update(range(first, last + 1))
    return sorted(batches)
