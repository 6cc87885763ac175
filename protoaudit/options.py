"""Parsing the user's option values: shapes (`data=128x3x32x32`) and sizes (`8G`, `11.5GiB`)."""
import os
import re

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


def parse_inputs(values, flag="--input"):
    inputs = {}
    for text in values or ():
        name, shape = parse_input(text, flag)
        inputs[name] = shape
    return inputs


def parse_batch(value, flag="--batch"):
    if value is None:
        return None
    if value < 1:
        raise InputError(f"{flag} {value}: the batch size must be at least 1", fix=f"e.g. {flag} 32")
    return value


# The CUDA context and library handles: device memory a framework holds before its first buffer
# (--context). The default is read off users' nvidia-smi figures (see docs/caffe.md, "The CUDA context").
DEFAULT_CONTEXT_BYTES = 300 * 2**20
UNITS = {"B": 1, "K": 2**10, "KIB": 2**10, "KB": 10**3, "M": 2**20, "MIB": 2**20, "MB": 10**6,
         "G": 2**30, "GIB": 2**30, "GB": 10**9, "T": 2**40, "TIB": 2**40, "TB": 10**12}
SIZE_FIXES = {"--gpu-mem": "write it like 8G, 8GiB, 11.5G, 8000M or 8GB", "--context": "write it like 300M, 1G or 0",
              "--gpu-reserve": "write it like 500M (TF_DEVICE_MIN_SYS_MEMORY_IN_MB=500), 1800M or 0"}
MIN_CARD = 2**20  # no GPU has less: a smaller --gpu-mem is a unit gone wrong


def parse_size(text, flag="--gpu-mem"):
    """`8G`, `8GiB`, `11.5G`, `8000M`, `8GB`: G means GiB unless GB is written. A unit is required:
    a bare `8` taken as bytes would be a card of 8 bytes (--context 0, no context, is the exception)."""
    text, fix = str(text), SIZE_FIXES.get(flag, SIZE_FIXES["--gpu-mem"])
    m = re.fullmatch(r"\s*(-?[0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", text)
    if not m or (m.group(2) and m.group(2).upper() not in UNITS):
        raise InputError(f"{flag} {text}: not a size", fix=fix)
    number, unit = m.group(1), m.group(2).upper()
    number = int(number) if number.lstrip("-").isdigit() else float(number)  # exact, however many bytes
    if number < 0:
        raise InputError(f"{flag} {text}: a size cannot be negative", fix=fix)
    if number == 0 and flag == "--gpu-mem":
        raise InputError(f"{flag} {text}: the card must have some memory", fix=fix)
    if not unit and number != 0:
        meant = f"{m.group(1)}M" if flag == "--gpu-reserve" else _meant(m.group(1))  # in MB, as TensorFlow's variable
        raise InputError(f"{flag} {text}: a size needs a unit (did you mean {meant}?)",
                         fix=f"{fix}; bytes are written with B, e.g. 8000000B")
    size = int(number * UNITS[unit or "B"])
    if flag == "--gpu-mem" and size < MIN_CARD:
        raise InputError(f"{flag} {text}: no GPU has less than 1 MiB (did you mean {_meant(m.group(1))}?)",
                         fix=fix)
    return size


def _meant(number):
    """The unit a bare number most likely left out: 8 -> 8G, 8000 or 12287 -> 8000M."""
    return f"{number}M" if float(number) >= 1000 else f"{number}G"


CC_FIX = "write your card's compute capability as MAJOR.MINOR: 6.1 for a GTX 1080 Ti, 8.0 an A100, 9.0 an H100"
MIN_CC = 3  # TensorFlow's GPU device ignores cards below compute capability 3.0 (3.5 in its own builds)


def parse_cc(text, flag="--gpu-cc"):
    """`6.1` -> (6, 1): a card's CUDA compute capability, as nvidia-smi --query-gpu=compute_cap writes it.
    A (major, minor) pair, or a number (8.6), is taken as it is written."""
    if isinstance(text, tuple) and len(text) == 2 and all(isinstance(v, int) for v in text):
        text = f"{text[0]}.{text[1]}"
    text = str(text).strip()
    m = re.fullmatch(r"([0-9]+)\.([0-9]+)", text)
    if not m:
        meant = f" (did you mean {text[:-1]}.{text[-1]}?)" if text.isdigit() and len(text) >= 2 else ""
        raise InputError(f"{flag} {text}: not a compute capability{meant}", fix=CC_FIX)
    major, minor = int(m.group(1)), int(m.group(2))
    if major < MIN_CC:
        raise InputError(f"{flag} {text}: TensorFlow runs on no card below compute capability {MIN_CC}.0", fix=CC_FIX)
    return major, minor


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


INT32 = 2**31  # Caffe's NetState level is an int32


def whole(text, flag, low=None, int32=False):
    """An option's whole number (`--batch 32`), at least `low` where there is a least, within an
    int32 where Caffe keeps it in one (a batch past it meets Caffe's blob limits, with the layer)."""
    if text is None:
        return None
    example = f"e.g. {flag} {32 if low else 1}"
    try:
        value = int(str(text).strip())
    except ValueError:
        raise InputError(f"{flag} {text}: not a whole number", fix=example) from None
    if low is not None and value < low:
        raise InputError(f"{flag} {text}: must be at least {low}", fix=example)
    if int32 and not -INT32 <= value < INT32:
        raise InputError(f"{flag} {text}: more than Caffe's int32 holds", fix=example)
    return value


def checked(args):
    """Every option of a parsed command line (argparse's Namespace; the ones its command has)
    checked before any file is read, and turned into what the audit takes: a bad value is one
    line naming its flag. Files and layer names are checked where they are read."""
    get = lambda name: getattr(args, name, None)  # noqa: E731
    for name in ("batch", "batch_a", "batch_b", "test_batch"):
        if get(name) is not None:
            setattr(args, name, whole(get(name), "--" + name.replace("_", "-"), low=1))
    args.level = whole(args.level, "--level", int32=True)
    for name in ("input", "input_a", "input_b"):
        if get(name):
            parse_inputs(get(name), "--" + name.replace("_", "-"))
    parse_defines(args.define)
    if args.gpu_mem is not None:
        args.gpu_mem = parse_size(args.gpu_mem)
    if args.context is not None:
        args.context = parse_size(args.context, "--context")
    if get("gpu_cc") is not None:
        args.gpu_cc = parse_cc(args.gpu_cc)
    if get("gpu_reserve") is not None:
        args.gpu_reserve = parse_size(args.gpu_reserve, "--gpu-reserve")
    if get("sweep") is not None:
        args.sweep = parse_batches(args.sweep)
    if args.solver_type is not None and args.solver_type != "none":
        from .memory.solver import solver_type_of

        try:
            solver_type_of(None, args.solver_type)
        except InputError as e:
            raise InputError(f"--solver-type {args.solver_type}: {e.message}", fix=e.fix) from None
    if args.root is not None and not os.path.isdir(args.root):
        raise InputError(f"--root {args.root}: no such folder", fix="give the folder Caffe ran in")
    for flag, path, what in (("--log", args.log, "a Caffe log of a run of this net"),
                             ("--caffe-proto", args.caffe_proto, "your Caffe's src/caffe/proto/caffe.proto")):
        if path is not None and (not os.path.exists(path) or os.path.isdir(path)):
            found = "a folder, not a file" if os.path.isdir(path) else "no such file"
            raise InputError(f"{flag} {path}: {found}", fix=f"give the path of {what}")
    return args


# options of the Keras audit that a Caffe net has no use for: refused by name, never ignored (the
# mirror of protoaudit.keras.cli.CAFFE_ONLY)
KERAS_ONLY = ("optimizer", "loss", "gpu_cc", "gpu_reserve")


def refuse_keras_options(args):
    """InputError for the first Keras-only option `args` (a namespace: the command's, or the library's
    keywords) sets."""
    for name in KERAS_ONLY:
        if getattr(args, name, None) is not None:
            raise InputError(f"--{name.replace('_', '-')} is for Keras models; a Caffe net has no use for it",
                             fix="leave it out")
