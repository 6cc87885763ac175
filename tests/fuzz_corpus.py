"""A mutation fuzzer over the corpus: real nets, solvers, shapes files and Caffe logs, cut, garbled
and rewired, each run through `protoaudit.cli.main` in this process: the command's own guarded run
(argument parsing, `_guarded`, every report format), without starting a process per case. Every
case must end in a report (exit status 0 or 1) or in one refusal line naming the file (2): never an
internal error (3), an exception that escapes, a hang, or memory without bound.

Each case is drawn from its own random generator (seed and case number), so one case is replayed
alone with `--case N`. A longer run, keeping each failing case's files in a folder:

    python tests/fuzz_corpus.py --cases 20000 --seed 7 --keep /tmp/fuzz-failures
"""
import argparse
import contextlib
import faulthandler
import glob
import io
import json
import os
import random
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from protoaudit import cli  # noqa: E402

# A case still running after TIMEOUT seconds (wall clock: a hang may wait rather than compute) is a
# hang; one that computes for over SLOW seconds (CPU time: the machine may be shared) is too slow.
TIMEOUT = 30.0
SLOW = 10.0  # a runaway case (quadratic work), an order of magnitude above the slowest seen (1.8 s)
MEMORY_HEADROOM = 2 * 2**30  # bytes of address space a case may add to the process's
MAX_SEED_BYTES = 160 * 1024  # larger files make slow cases and add nothing the smaller ones lack

# Replacements for a number: the edges of Caffe's int32/uint32/int64 fields, floats where integers
# go, and things that are no number at all.
NUMBERS = ["0", "-1", "1", "2", "3", "7", str(2**31 - 1), str(2**31), str(2**32), str(2**62), str(2**63),
           str(2**64), "1" + "0" * 40, "0.5", "1.5", "-0.0", "1e308", "1e-300", "nan", "inf", "-inf", "abc",
           "0x10", "", "true", '"7"', "99999999", "-2147483648"]
TYPES = ["Convolution", "Deconvolution", "Pooling", "InnerProduct", "ReLU", "PReLU", "BatchNorm", "Scale",
         "Bias", "Concat", "Eltwise", "Split", "Slice", "Flatten", "Reshape", "Dropout", "Softmax",
         "SoftmaxWithLoss", "EuclideanLoss", "Accuracy", "LRN", "Input", "DummyData", "Data", "ImageData",
         "HDF5Data", "WindowData", "MemoryData", "Python", "Crop", "Tile", "Reduction", "ArgMax", "Filter",
         "Embed", "RNN", "LSTM", "SPP", "Silence", "Parameter", "BN", "Upsample", "ROIPooling", "SmoothL1Loss",
         "MarginInnerProduct", "DenseBlock", "Interp", "Nope", "", "convolution", "CONVOLUTION"]
V1_TYPES = ["CONVOLUTION", "POOLING", "INNER_PRODUCT", "RELU", "CONCAT", "SPLIT", "DATA", "SOFTMAX_LOSS",
            "ELTWISE", "FLATTEN", "DROPOUT", "NONE", "BOGUS", "7"]
# Fields (and whole blocks) dropped into a message: what steers Caffe's Net::Init, in and out of range.
FIELDS = ["propagate_down: false", "propagate_down: true", "param { lr_mult: 0 }", 'param { name: "shared" }',
          "param { lr_mult: 0 decay_mult: 0 }", "include { phase: TEST }", "include { phase: TRAIN }",
          'exclude { stage: "deploy" }', "include { min_level: 2 }", "loss_weight: 1", "loss_weight: -1",
          "loss_weight: 0", "engine: CUDNN", "engine: CAFFE", "force_backward: true", "state { phase: TEST }",
          'state { phase: TRAIN level: 3 stage: "deploy" }', 'input: "data"', "input_dim: 1",
          "input_shape { dim: 1 dim: 3 }", "dilation: 2", "group: 3", "num_output: 0", "axis: -5", "axis: 7",
          "axis: -1", "pad: 100", "stride: 0", "kernel_h: 5", "kernel_size: 0", "global_pooling: true",
          "pool: STOCHASTIC", "pool: AVE", "ceil_mode: true", 'bottom: "data"', 'top: "data"', 'top: "fresh"',
          'bottom: "fresh"', 'type: "Python"', 'name: "conv1"', "num_output: 4294967295",
          'python_param { module: "rpn.proposal_layer" layer: "ProposalLayer" param_str: "\'feat_stride\': 16" }',
          'python_param { module: "roi_data_layer.layer" layer: "RoIDataLayer" param_str: "num_classes: [" }',
          'layer { name: "s" type: "Split" bottom: "data" top: "s1" top: "s2" }',
          'layer { name: "i" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 9 dim: 9 } } }',
          'layers { name: "v1" type: RELU bottom: "data" top: "data" }', "crop_size: 0", "mean_value: 1",
          "batch_size: 0", "batch_size: 4294967295", "shape { dim: 0 }", "shape { dim: 2147483648 }",
          "reshape_param { shape { dim: 0 dim: -1 } }", "transform_param { crop_size: 1000000 }",
          'source: "/dev/zero"', 'source: "/"', 'mean_file: "/dev/zero"', "backend: LMDB", "iter_size: 0",
          'type: "Adam"', "solver_type: ADADELTA", "test_iter: 1", "test_interval: 0", "test_initialization: false",
          'net: "missing.prototxt"', 'net: "{self}"', 'train_net: "{self}"', 'test_net: "{self}"',
          "net_param { }", "max_iter: -1", "regularization_type: \"L1\"", "slice_point: 1", "operation: MAX",
          "coeff: 1", "bias_term: false", "use_global_stats: true", "num_axes: -1", "tile_param { tiles: 0 }"]
# Lines of a Caffe log (glog's prefix added) that the log reader acts on.
LOG_MESSAGES = ["Top shape: 999999999999 3 (1)", "Top shape: 0 0 (0)", "Top shape: 2 3 4 4 (96)", "Top shape: (1)",
                "Top shape: 1 1 1 1 1 1 1 1 1 1 (1)", "Memory required for data: -1",
                "Memory required for data: 99999999999999999999",
                "Check failed: error == cudaSuccess (2 vs. 0)  out of memory", "Iteration 5, loss = nan",
                "Creating layer conv1", "Creating layer ", "Initializing net from parameters: ",
                "Initializing solver from parameters: ", "Network initialization done.", "Solving ", "Testing net",
                "data -> data", "conv1 <- data", "conv1 -> conv1 (in-place)", "Setting up conv1",
                "GPU 0: GeForce GTX 1080 Ti", 'name: "net"', "layer {", "}", "state {", "phase: TEST",
                "Top shape: 2147483648 2147483648 (4611686018427387904)"]
LOG_FRAMES = ["    @     0x7f0000000000  caffe::Net<>::Init()", "    @     0x7f0000000000  caffe::Solver<>::Step()",
              "    @     0x7f0000000000  (unknown)", "*** Check failure stack trace: ***"]
GARBAGE = ["{", "}", "<", ">", "{{{{", "}}}}", '"', "'", "#", "\\", ":", "::", "layer {", "}\n}\n", ",", ";",
           "\x00", "\xff\xfe", "\xe2\x80\xa8", "\r", "\x85", "\x1b[31m", "\t\v\f", "${NUM}", "\\x00", '"\\',
           "[", "]", "-", "1e", "0x", "name", "layer", "\xef\xbb\xbf", "\xc3\x28", "\ud800".encode(
               "utf-8", "surrogatepass").decode("latin-1")]

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")
_QUOTED = re.compile(r'"[^"\n]*"')
_NAME = re.compile(r'\bname:\s*"([^"\n]{1,100})"')
_WIRE = re.compile(r"\b(bottom|top)(\s*:\s*)\"([^\"\n]*)\"")
_TYPE = re.compile(r"\btype(\s*:\s*)(\"[^\"\n]*\"|\w+)")
_GLOG = re.compile(r"^([IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^ \]]+:\d+\] )(.*)$", re.M)


# Mutations: each takes the random generator and the file's text (bytes read as latin-1, so any byte
# survives) and returns the new text, or the same text when it finds nothing to act on.

def _lines(text):
    return text.split("\n")


def delete_lines(rng, text):
    lines = _lines(text)
    i = rng.randrange(len(lines))
    del lines[i:i + rng.choice([1, 1, 2, 3, 10])]
    return "\n".join(lines)


def duplicate_lines(rng, text):
    lines = _lines(text)
    i = rng.randrange(len(lines))
    chunk = lines[i:i + rng.choice([1, 1, 2, 5, 20])]
    j = rng.choice([i, rng.randrange(len(lines) + 1)])
    return "\n".join(lines[:j] + chunk + lines[j:])


def move_lines(rng, text):
    lines = _lines(text)
    i = rng.randrange(len(lines))
    chunk = lines[i:i + rng.choice([1, 3, 8])]
    del lines[i:i + len(chunk)]
    j = rng.randrange(len(lines) + 1)
    return "\n".join(lines[:j] + chunk + lines[j:])


def change_number(rng, text):
    found = list(_NUMBER.finditer(text))
    if not found:
        return text
    m = rng.choice(found)
    return text[:m.start()] + rng.choice(NUMBERS) + text[m.end():]


def truncate(rng, text):
    return text[:rng.randrange(len(text) + 1)]


def rewire(rng, text):
    """A bottom made a top (or the reverse), two blob names swapped, or a name taken from elsewhere."""
    found = list(_WIRE.finditer(text))
    if len(found) < 2:
        return text
    m, other = rng.sample(found, 2)
    how = rng.randrange(3)
    if how == 0:
        word = "top" if m.group(1) == "bottom" else "bottom"
        return text[:m.start(1)] + word + text[m.end(1):]
    if how == 1:
        first, second = sorted([m, other], key=lambda x: x.start())
        return (text[:first.start(3)] + second.group(3) + text[first.end(3):second.start(3)] + first.group(3)
                + text[second.end(3):])
    return text[:m.start(3)] + other.group(3) + text[m.end(3):]


def retype(rng, text):
    found = list(_TYPE.finditer(text))
    if not found:
        return text
    m = rng.choice(found)
    new = f'"{rng.choice(TYPES)}"' if m.group(2).startswith('"') else rng.choice(V1_TYPES)
    return text[:m.start(2)] + new + text[m.end(2):]


def insert_garbage(rng, text):
    i = rng.randrange(len(text) + 1)
    how = rng.randrange(3)
    if how == 0:
        junk = rng.choice(GARBAGE)
    elif how == 1:
        junk = "".join(chr(rng.randrange(32, 127)) for _ in range(rng.randrange(1, 40)))
    else:
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))).decode("latin-1")
    return text[:i] + junk + text[i:]


def unbalance(rng, text):
    braces = [m.start() for m in re.finditer(r"[{}]", text)]
    if braces and rng.random() < 0.5:
        i = rng.choice(braces)
        return text[:i] + text[i + 1:]
    i = rng.randrange(len(text) + 1)
    return text[:i] + rng.choice(["{", "}", "{\n", "\n}"]) + text[i:]


def long_name(rng, text):
    found = list(_QUOTED.finditer(text))
    if not found:
        return text
    m = rng.choice(found)
    name = rng.choice(["x", "\u00e9".encode().decode("latin-1"), "ab/", " "]) * rng.choice([1000, 30000, 200000])
    return text[:m.start()] + f'"{name}"' + text[m.end():]


def insert_field(rng, text, self_name="self.prototxt"):
    opens = [m.end() for m in re.finditer(r"\{", text)] or [0]
    i = rng.choice(opens + [0, len(text)])
    snippet = rng.choice(FIELDS).replace("{self}", self_name)
    return text[:i] + "\n" + snippet + "\n" + text[i:]


def log_line(rng, text):
    """A glog line's message replaced, or a new line (a message, or a stack frame) put after it."""
    found = list(_GLOG.finditer(text))
    if not found:
        return text
    m = rng.choice(found)
    how = rng.randrange(3)
    if how == 0:
        return text[:m.start(2)] + rng.choice(LOG_MESSAGES) + text[m.end(2):]
    severity = rng.choice("IWEF")
    new = severity + m.group(1)[1:] + rng.choice(LOG_MESSAGES)
    if how == 2:
        new += "\n" + "\n".join(rng.choice(LOG_FRAMES) for _ in range(rng.randrange(1, 4)))
    return text[:m.end()] + "\n" + new + text[m.end():]


MUTATIONS = [delete_lines, duplicate_lines, move_lines, change_number, change_number, truncate, rewire, rewire,
             retype, insert_garbage, unbalance, long_name, insert_field, insert_field, insert_field]
LOG_MUTATIONS = MUTATIONS + [log_line] * 6


MNIST = ["--input", "data=64x1x28x28", "--input", "label=64"]
CAMVID = ["--input", "data=4x3x360x480", "--input", "label=4x1x360x480"]
# What the nets whose datasets are not here need to be audited past their data layers.
SEED_OPTIONS = {"bayesian_segnet_basic_train.prototxt": CAMVID, "segnet_basic_train.prototxt": CAMVID,
                "segnet_train.prototxt": CAMVID, "segnet_basic_inference.prototxt": ["--input", "data=1x3x360x480"],
                "segnet_inference.prototxt": ["--input", "data=1x3x360x480"],
                "deeplabv2_vgg16_largefov_train.prototxt": ["--define", "NUM_LABELS=21"],
                "v1_deeplab_v1_vgg128_noup_test.prototxt": ["--define", "NUM_LABELS=21"],
                "v1_deeplab_v1_vgg128_noup_train.prototxt": ["--define", "NUM_LABELS=21"],
                "densenet_memeff_tongcheng_c10.prototxt": ["--input", "Data1=64x3x32x32", "--input", "Data2=64"],
                "lenet_lmdb.prototxt": MNIST,
                "sphereface20_train.prototxt": ["--input", "data=8x3x112x96", "--input", "label=8"]}


@dataclass
class Seed:
    """A file to mutate and the arguments that audit it well (the shapes its data layers need)."""

    path: str
    args: list = field(default_factory=list)
    kind: str = "net"  # net | log (audited itself) | log-for (given with --log to its net) | shapes | proto


def seeds(max_bytes=MAX_SEED_BYTES):
    """The corpus nets (with the oracle's --input shapes), the samples, a solver, the Caffe logs
    (audited themselves, and as the --log of the net they ran) and a shapes file."""
    with open(os.path.join(DATA, "corpus", "oracle_shapes.json")) as f:
        oracle = json.load(f)
    options = {}
    for run in oracle.values():
        args = ["--phase", run["phase"].lower()] + [a for s in run["stages"] for a in ("--stage", s)]
        args += [a for shape in run["input_shapes"] or [] for a in ("--input", shape.replace(",", "x"))]
        options.setdefault(run["file"], args)
    found = []
    for path in sorted(glob.glob(os.path.join(DATA, "corpus", "nets*", "*.prototxt"))):
        rel = os.path.relpath(path, os.path.join(DATA, "corpus"))
        found.append(Seed(path, options.get(rel, []) + SEED_OPTIONS.get(os.path.basename(path), [])))
    found += [Seed(p, SEED_OPTIONS.get(os.path.basename(p), []))
              for p in sorted(glob.glob(os.path.join(ROOT, "samples", "*.prototxt")))]
    solvers = os.path.join(DATA, "solvers")
    found.append(Seed(os.path.join(solvers, "lenet_solver.prototxt"), ["--root", solvers] + MNIST))
    logs = os.path.join(DATA, "logs")
    with open(os.path.join(logs, "PAIRS.tsv")) as f:
        pairs = [line.split("\t") for line in f.read().splitlines() if line and not line.startswith("#")]
    for log, train, test in pairs:
        found.append(Seed(os.path.join(logs, log), kind="log"))
        net = os.path.join(logs, train if train != "-" else test)
        if not os.path.exists(net):  # named as in the shared corpus, where the nets sit beside the logs
            net = os.path.join(DATA, "corpus", os.path.relpath(net, os.path.dirname(logs)))
        found.append(Seed(net, ["--log", os.path.join(logs, log)]))
        found.append(Seed(os.path.join(logs, log), [net], kind="log-for"))
    found.append(Seed(os.path.join(ROOT, "samples", "voc-fcn8s_train.prototxt"),
                      ["data = 1x3x375x500  # VOC\nlabel = 1x1x375x500\n"], kind="shapes"))
    found.append(Seed(os.path.join(ROOT, "proto", "caffe.proto"), [os.path.join(DATA, "nets", "lenet_train_test.prototxt")]
                      + MNIST, kind="proto"))
    return [s for s in found if s.kind == "shapes" or os.path.getsize(s.path) <= max_bytes]


# Options added to a case now and then: every report format, the other engine and mode, the batch
# search, a forward-only run, a solver's history, freezing, and `diff` against the unmutated file.
EXTRA_OPTIONS = [(0.25, lambda rng: ["--format", rng.choice(["json", "csv", "markdown", "html"])]),
                 (0.03, lambda rng: ["--sweep", rng.choice(["1,2,4", "1..8", "3"])]),
                 (0.08, lambda rng: ["--engine", "cudnn"]), (0.08, lambda rng: ["--caffe-log"]),
                 (0.04, lambda rng: ["--gpu-mem", rng.choice(["8G", "1M", "100G"])]),
                 (0.06, lambda rng: ["--inference"]), (0.08, lambda rng: ["--phase", rng.choice(["train", "test"])]),
                 (0.05, lambda rng: ["--mode", "cpu"]),
                 (0.05, lambda rng: ["--solver-type", rng.choice(["Adam", "AdaDelta", "none", "Nesterov"])]),
                 (0.05, lambda rng: ["--batch", rng.choice(["1", "3", "1000"])])]


@dataclass
class Case:
    number: int
    seed: Seed
    mutations: list
    files: dict  # name -> bytes, written into the case's folder
    argv: list  # with {dir} for the case's folder
    main_file: str  # the file whose refusal must be named

    def given_files(self):
        """The names of the files the user gave (a refusal names one): the mutated file, the
        unmutated ones beside it, and those a solver names under its --root."""
        names = [self.main_file]
        for i, a in enumerate(self.argv):
            if "{dir}" not in a and os.path.isfile(a):
                names.append(os.path.basename(a))
            elif self.argv[i - 1] == "--root":
                names += [os.path.basename(p) for p in glob.glob(os.path.join(a, "**", "*.prototxt"), recursive=True)]
        return names

    def describe(self):
        return f"case {self.number}: {os.path.relpath(self.seed.path, ROOT)} {'+'.join(self.mutations)}"


def make_case(number, seed_value, all_seeds, cache):
    rng = random.Random(f"{seed_value}:{number}")
    seed = rng.choice(all_seeds)
    if seed.path not in cache:
        with open(seed.path, "rb") as f:
            cache[seed.path] = f.read().decode("latin-1")
    name = f"c{number}_" + os.path.basename(seed.path)
    if seed.kind == "shapes":
        text, main_file = seed.args[0], name + ".shapes"
    else:
        text, main_file = cache[seed.path], name
    pool = LOG_MUTATIONS if seed.kind in ("log", "log-for") else MUTATIONS
    applied = []
    for _ in range(rng.choice([1, 1, 2, 2, 3])):
        mutate = rng.choice(pool)
        text = mutate(rng, text, name) if mutate is insert_field else mutate(rng, text)
        applied.append(mutate.__name__)
    files = {main_file: text.encode("latin-1")}
    if seed.kind == "shapes":
        argv = [seed.path, "--shapes", os.path.join("{dir}", main_file)]
    elif seed.kind == "log-for":
        argv = [seed.args[0], "--log", os.path.join("{dir}", main_file)]
    elif seed.kind == "proto":  # a user's caffe.proto (--caffe-proto), compiled by protoc
        argv = seed.args + ["--caffe-proto", os.path.join("{dir}", main_file)]
    else:
        argv = [os.path.join("{dir}", main_file)] + seed.args
    for chance, option in EXTRA_OPTIONS:
        if rng.random() < chance:
            argv += option(rng)
    names = _NAME.findall(text)
    if names and rng.random() < 0.05:  # freeze a layer of the mutated file (or a blob's name: refused)
        argv += ["--freeze", rng.choice(names)]
    if seed.kind == "net" and rng.random() < 0.04 and not {"--caffe-log", "--sweep"} & set(argv):  # audit's own
        argv = ["diff", seed.path] + argv
    return Case(number, seed, applied, files, argv, main_file)


class CaseTimeout(BaseException):
    """Raised into a case that runs past TIMEOUT (a BaseException: `_guarded` must not take it)."""


def _timed_out(signum, frame):
    raise CaseTimeout()


@dataclass
class Outcome:
    case: Case
    status: object  # exit status, or "hang" / "escaped"
    stdout: str
    stderr: str
    seconds: float  # CPU time
    wall: float
    problem: str = None


def run_case(case, folder, timeout=TIMEOUT):
    """Write the case's files into `folder` and run `protoaudit ARGV` in this process."""
    for name, data in case.files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    argv = [a.replace("{dir}", folder) for a in case.argv]
    out, err = io.StringIO(), io.StringIO()
    pipe = signal.getsignal(signal.SIGPIPE)
    alarm = signal.signal(signal.SIGALRM, _timed_out)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    # a hang in C code, where the alarm cannot interrupt it: the stacks, and the run ends
    faulthandler.dump_traceback_later(timeout * 3, exit=True, file=sys.__stderr__)
    start, cpu = time.perf_counter(), time.process_time()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = cli.main(argv)
            except SystemExit as e:  # argparse's own exits
                status = e.code
    except CaseTimeout:
        status = "hang"
    except BaseException:  # noqa: B902 - anything that escapes the command is the finding
        status = "escaped"
        err.write(traceback.format_exc())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, alarm)
        signal.signal(signal.SIGPIPE, pipe)
        for name in case.files:
            os.remove(os.path.join(folder, name))
    outcome = Outcome(case, status, out.getvalue(), err.getvalue(), time.process_time() - cpu,
                      time.perf_counter() - start)
    outcome.problem = problem(outcome)
    return outcome


def problem(outcome):
    """What is wrong with how the command answered the case, or None."""
    status, stderr = outcome.status, outcome.stderr
    if status == "hang":
        return f"no answer within {TIMEOUT:g} s"
    if outcome.seconds > SLOW:
        return f"{outcome.seconds:.1f} s of CPU time (more than {SLOW:g} s)"
    if status == "escaped":
        return "an exception escaped the command:\n" + stderr
    if status == 3:
        return "internal error: " + stderr.strip()
    if status in (0, 1):
        return f"exit status {status} with something on stderr: {stderr[:300]!r}" if stderr else None
    if status != 2:
        return f"exit status {status!r}"
    lines = stderr.splitlines()
    if len(lines) != 1 or not lines[0].startswith("protoaudit: "):
        return f"a refusal of {len(lines)} lines: {stderr[:500]!r}"
    if not any(name in lines[0] for name in outcome.case.given_files()):
        return f"the refusal names none of {', '.join(outcome.case.given_files())}: {lines[0][:300]}"
    return None


def replay(case, folder):
    """The traceback of an internal error: the case run again without `_guarded`'s net."""
    for name, data in case.files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    argv = [a.replace("{dir}", folder) for a in case.argv]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            if argv[0] == "diff":
                args = cli.diff_parser().parse_args(argv[1:])
                cli._diff(args)
            else:
                cli._audit(cli.parser().parse_args(argv))
    except Exception:
        return traceback.format_exc()
    finally:
        for name in case.files:
            os.remove(os.path.join(folder, name))
    return "(no exception on replay)"


@contextlib.contextmanager
def bounded_memory(headroom=MEMORY_HEADROOM):
    """The process's address space capped at what it uses now plus `headroom`: a case that would
    take memory without bound fails with MemoryError (an internal error) instead."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * resource.getpagesize()
    limit = used + headroom
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@dataclass
class Summary:
    cases: int
    seconds: float
    statuses: dict
    failures: list  # Outcome
    slowest: list  # Outcome, slowest first

    def report(self):
        lines = [f"{self.cases} cases in {self.seconds:.1f} s of CPU time; exit statuses "
                 + ", ".join(f"{k}: {v}" for k, v in sorted(self.statuses.items(), key=str))]
        for o in self.slowest:
            lines.append(f"  slow: {o.seconds:.2f} s CPU ({o.wall:.2f} s wall) {o.case.describe()} -> {o.status}")
        for o in self.failures:
            lines.append(f"  FAIL {o.case.describe()}: {o.problem}")
            lines.append("       argv: protoaudit " + " ".join(o.case.argv))
        return "\n".join(lines)


def fuzz(cases, seed_value, folder, first=0, keep=None, progress=None, only=None):
    """Run cases first..first+cases-1 (or the case numbers in `only`); failing cases' files and
    argv are copied into `keep` when given."""
    all_seeds = seeds()
    cache, outcomes = {}, []
    numbers = only if only is not None else range(first, first + cases)
    start = time.process_time()
    with bounded_memory():
        for k, number in enumerate(numbers):
            outcome = run_case(make_case(number, seed_value, all_seeds, cache), folder)
            if outcome.problem and outcome.status == 3:
                outcome.problem += "\n" + replay(outcome.case, folder)
            outcomes.append(outcome)
            if keep and outcome.problem:
                _keep(outcome, keep)
            if progress and (k + 1) % progress == 0:
                bad = sum(1 for o in outcomes if o.problem)
                print(f"{k + 1} cases, {bad} failing, {time.process_time() - start:.0f} s", file=sys.stderr)
    statuses = {}
    for o in outcomes:
        statuses[o.status] = statuses.get(o.status, 0) + 1
    return Summary(len(outcomes), time.process_time() - start, statuses, [o for o in outcomes if o.problem],
                   sorted(outcomes, key=lambda o: -o.seconds)[:5])


def _keep(outcome, keep):
    folder = os.path.join(keep, f"case{outcome.case.number}")
    os.makedirs(folder, exist_ok=True)
    for name, data in outcome.case.files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    with open(os.path.join(folder, "README"), "w") as f:
        f.write(outcome.case.describe() + "\nprotoaudit " + " ".join(outcome.case.argv).replace("{dir}", folder)
                + "\n\n" + outcome.problem + "\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=2000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--first", type=int, default=0, help="the first case's number")
    p.add_argument("--case", type=int, action="append", help="run only this case (repeatable)")
    p.add_argument("--keep", help="copy each failing case's files into this folder")
    args = p.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="protoaudit-fuzz-")
    try:
        summary = fuzz(args.cases, args.seed, folder, args.first, args.keep, progress=500, only=args.case)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(summary.report())
    return 1 if summary.failures else 0


if __name__ == "__main__":
    sys.exit(main())
