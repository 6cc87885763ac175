"""The `protoaudit` command: a thin layer over `protoaudit.audit` and the reports."""
import argparse
import importlib
import itertools
import signal
import sys

from . import __version__, library
from .collector import paused
from .errors import InputError
from .options import checked, parse_defines, parse_inputs, refuse_keras_options
from .read.schema import SCHEMA_NAMES

EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
# --format: the modules of protoaudit.report with render() and render_diff(), besides the default
# text (each imported only when asked for)
FORMATS = {"json": "json_format", "markdown": "markdown", "csv": "csv_format", "html": "html_format"}


def _report(name):
    return importlib.import_module(f".report.{name}", __package__)


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), like every other bad input."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args=None, namespace=None):
        """A value that starts with a dash (`--gpu-mem -8G`, `--context -1`) is the option's value,
        refused by its own check, not taken by argparse for an option of its own."""
        args = list(sys.argv[1:] if args is None else args)
        takes = {s for a in self._actions if a.nargs is None for s in a.option_strings}
        for i in range(len(args) - 1, 0, -1):
            value = args[i]
            if (args[i - 1] in takes and value[:1] == "-" and value[:2] != "--"
                    and value not in self._option_string_actions):
                args[i - 1:i + 1] = [f"{args[i - 1]}={value}"]
        return super().parse_known_args(args, namespace)


def parser():
    p = _OneLineParser(
        prog="protoaudit",
        description="Tell what a Caffe net or a Keras model will allocate in training, before it touches a GPU. "
        "`protoaudit diff A B` compares two nets.",
    )
    p.add_argument("path", help="a net (train_val.prototxt, deploy.prototxt), a solver.prototxt, a Caffe log "
                   "(the nets it initialised, with the data shapes it logged), or a Keras model (model.to_json() "
                   "output, .h5, .keras)")
    p.add_argument("--input", action="append", default=[], metavar="TOP=NxCxHxW",
                   help="the full shape of a data layer's (or net input's) top, batch included (repeatable)")
    p.add_argument("--batch", help="the first dimension of every data source")
    p.add_argument("--shapes", metavar="FILE",
                   help="a file of --input shapes, one TOP=NxCxHxW a line (default: NET.prototxt.shapes beside "
                   "the net, if there is one); --input wins over it")
    p.add_argument("--caffe-log", action="store_true",
                   help="print the Top shape and Memory required for data lines as Caffe logs them (for a "
                   "Caffe log given as the path: those of every run it holds)")
    p.add_argument("--plot", metavar="FILE",
                   help="also draw memory by layer, stacked by category, with the running total and the card, "
                   "into FILE.svg or FILE.png (a Keras model: one training step's memory over time; with --sweep: "
                   "memory against the batch; needs pip install 'protoaudit[plot]')")
    p.add_argument("--sweep", metavar="BATCHES",
                   help="the totals at each batch: 1,2,4,8 or 1..64 (with --gpu-mem, whether each fits); "
                   "--format csv then writes one row per batch")
    p.add_argument("-v", "--table", action="store_true",
                   help="the text report in full: the per-layer table (with each layer's parameter count), the "
                   "categories and the hand recipe before the short answer (default: the short answer only)")
    p.add_argument("--version", action="version", version=f"protoaudit {__version__}")
    _common(p)
    return p


def diff_parser():
    p = _OneLineParser(
        prog="protoaudit diff",
        description="Two nets side by side: the change per layer and per category, and why.",
    )
    p.add_argument("path_a", help="the old net (A)")
    p.add_argument("path_b", help="the new net (B)")
    for side in ("a", "b"):
        p.add_argument(f"--input-{side}", action="append", default=[], metavar="TOP=NxCxHxW",
                       help=f"a data top's shape for {side.upper()} only (repeatable)")
        p.add_argument(f"--batch-{side}", help=f"the batch of {side.upper()} only")
        p.add_argument(f"--freeze-{side}", action="append", default=[], metavar="LAYER",
                       help=f"freeze LAYER and what it depends on in {side.upper()} only (repeatable; "
                       "adds to --freeze)")
    p.add_argument("--input", action="append", default=[], metavar="TOP=NxCxHxW",
                   help="a data top's shape for both nets (repeatable)")
    p.add_argument("--batch", help="the batch of both nets")
    _common(p)
    return p


def _common(p, formats=True):
    """The options that apply to an audit, and to both sides of a diff (and to protoaudit-check,
    which has no --format)."""
    p.add_argument("--phase", choices=["train", "test"], type=str.lower,
                   help="build this phase's net only (default: train for a net file; all nets of a solver)")
    p.add_argument("--stage", action="append", default=[], help="a NetState stage (repeatable)")
    p.add_argument("--level", help="the NetState level")
    p.add_argument("--test-batch", help="the batch of the test nets (default: as the file says)")
    p.add_argument("--gpu-mem", metavar="SIZE",
                   help="the card's memory (8G, 8GiB, 11.5G, 8000M; G is GiB unless GB is written): "
                   "a verdict, the largest batch that fits, and the iter_size that keeps the effective batch; "
                   "exit status 0 fits, 1 does not")
    p.add_argument("--engine", choices=["caffe", "cudnn"], default=None, type=str.lower,
                   help="Caffe's own im2col convolutions (default, unless a layer runs only in a cuDNN build) or "
                   "a cuDNN build; both totals are shown")
    p.add_argument("--mode", choices=["gpu", "cpu"], default=None, type=str.lower,
                   help="Caffe's solver_mode: gpu (device memory, default) or cpu (host memory); for a Caffe log "
                   "given as the path, the mode its run used")
    p.add_argument("--solver-type", metavar="TYPE",
                   help="SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam, or none for a bare net run once "
                   "forward and backward (default: the solver file's type, else SGD)")
    p.add_argument("--inference", action="store_true", help="a forward-only deployment (TEST phase by default)")
    p.add_argument("--context", metavar="SIZE",
                   help="the CUDA context and library handles, a size as --gpu-mem takes (default 300M; 0 leaves it out)")
    p.add_argument("--freeze", action="append", default=[], metavar="LAYER",
                   help="train as if LAYER and every layer it depends on (its ancestors in the blob graph, "
                   "not every earlier layer) were frozen: param { lr_mult: 0 } on their params and "
                   "propagate_down: false where their outputs enter the rest; Caffe's solver still keeps their "
                   "param diffs and history (repeatable; in diff, both nets)")
    p.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                   help="fill the file's ${NAME} templates (as DeepLab's scripts do before running Caffe), or give a "
                   "count only the data decides: matched_priors (SSD's MultiBoxLoss: priors matched per image; "
                   "default: every prior), detections (SSD's DetectionOutput: kept per image; default: the most "
                   "it keeps) (repeatable)")
    p.add_argument("--fork", metavar="NAME",
                   help="read the files with this Caffe's schema and layers: " + ", ".join(SCHEMA_NAMES)
                   + " (default: the one that reads the file)")
    p.add_argument("--caffe-proto", metavar="FILE",
                   help="your Caffe's own caffe.proto (a fork protoaudit does not ship): the files are read with it "
                   "(needs pip install 'protoaudit[caffe-proto]')")
    p.add_argument("--strict", action="store_true",
                   help="refuse a file with a field no shipped caffe.proto has, even where it cannot change a "
                   "figure, and ask for the size of a dataset that is not on this machine (by default such fields "
                   "are read past, such images assumed (224x224 in colour, or the first of a few other conventional images "
                   "the net takes), and both listed as assumptions)")
    p.add_argument("--log", metavar="LOG",
                   help="a Caffe log of a run of this net: its data layers' shapes are taken from it")
    p.add_argument("--optimizer", metavar="NAME",
                   help="Keras models: the optimizer (sgd, adam, rmsprop, adagrad, ...; settings as Keras takes them: "
                   "'sgd(momentum=0.9)') when the file holds none, or instead of the file's")
    p.add_argument("--loss", metavar="NAME",
                   help="Keras models: the loss (e.g. sparse_categorical_crossentropy, mse) when the file holds none")
    p.add_argument("--gpu-cc", metavar="MAJOR.MINOR",
                   help="Keras models: the card's compute capability (6.1 a GTX 1080 Ti, 7.5 a T4, 8.0 an A100, 9.0 an "
                   "H100), which sets the memory TensorFlow keeps off its allocator (gpu_device.cc: 500 MiB up to 6.x, "
                   "1050 MiB 7.x, 1536 MiB 8.x, 1800 MiB from 9.0; 225 MiB where under 2 GiB is free); with --gpu-mem "
                   "(default: the largest, 1800 MiB)")
    p.add_argument("--gpu-reserve", metavar="SIZE",
                   help="Keras models: that reserve, as TF_DEVICE_MIN_SYS_MEMORY_IN_MB sets it (500M for =500; 0 for "
                   "none), instead of the one --gpu-cc chooses; with --gpu-mem")
    p.add_argument("--root", metavar="DIR",
                   help="the folder Caffe ran in: dataset and net paths in the file are relative to it "
                   "(default: the working directory)")
    if formats:
        p.add_argument("--format", choices=["text", *FORMATS], default="text", type=str.lower)


@paused
def main(argv=None):
    if hasattr(signal, "SIGPIPE"):  # `protoaudit ... | head` ends quietly, as Unix tools do
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["diff"]:
        args = diff_parser().parse_args(argv[1:])
        return _guarded(lambda: _diff(args), f"{args.path_a} / {args.path_b}")
    args = parser().parse_args(argv)
    return _guarded(lambda: _audit(args), args.path)


def _options(args):
    return dict(phase=args.phase, stages=args.stage, level=args.level, test_batch=args.test_batch,
                mode=args.mode, engine=args.engine, solver_type=args.solver_type, inference=args.inference,
                context=args.context, root=args.root, schema=_schema(args), defines=parse_defines(args.define),
                log=args.log, shapes=getattr(args, "shapes", None), strict=args.strict)


def _schema(args):
    """--fork NAME, or the user's --caffe-proto compiled now (not both)."""
    if args.caffe_proto is None:
        return args.fork
    if args.fork is not None:
        raise InputError("give --fork or --caffe-proto, not both", fix="--caffe-proto reads the files with your file")
    from .read.schema import user_schema

    return user_schema(args.caffe_proto).name


def _audit_and_fit(path, args, inputs, batch, freeze=None, sweep=None):
    options = dict(_options(args), inputs=inputs, freeze=args.freeze if freeze is None else freeze)
    result = library.audit(path, batch=batch, gpu_mem=args.gpu_mem, sweep=sweep, **options)
    return result, result.fit


def _audit(args):
    checked(args)
    from .keras.cli import is_keras_file

    if is_keras_file(args.path):
        from .keras.cli import run

        return run(args)
    refuse_keras_options(args)
    inputs = parse_inputs(args.input)
    if args.caffe_log:
        from .audit import build_nets
        from .read import caffe_log
        from .read.glog import is_log_file

        runs = caffe_log.read(args.path) if is_log_file(args.path) else []
        logged = [n for run in runs for n in run.nets]
        per_layer = all(n.memory_per_layer for n in logged)  # (a log of an older Caffe: as it printed)
        four_axes = bool(logged) and all(n.four_axes for n in logged)
        for net in build_nets(args.path, phase=args.phase, stages=args.stage, level=args.level,
                              inputs=inputs, batch=args.batch, root=args.root, schema=_schema(args),
                              defines=parse_defines(args.define), log=args.log, shapes=args.shapes,
                              strict=args.strict, every_run=True):
            died = caffe_log.died_setting_up(runs, [layer.name for layer in net.layers])
            print("\n".join(_report("caffelog").caffe_log(net, memory_per_layer=per_layer, four_axes=four_axes,
                                                           died=died)))
        return EXIT_FITS
    if args.plot:  # matplotlib is imported only here; a missing one is refused before the audit
        from .report import chart
        chart.check(args.plot)
    result, fit = _audit_and_fit(args.path, args, inputs, args.batch, sweep=args.sweep)
    summary = result.summary
    if args.format == "text":
        _write(_report("text").report_lines(result, summary, fit, table=args.table))
    elif args.format in ("json", "html"):
        _write_parts(_report(FORMATS[args.format]).render_parts(result, summary, fit))
    else:
        print(_report(FORMATS[args.format]).render(result, summary, fit))
    if args.plot:
        chart.draw(result, summary, fit, args.plot)
    return EXIT_DOES_NOT_FIT if fit is not None and not fit.fits else EXIT_FITS


def _write(lines):
    """Print lines as they come, a few thousand at a time: a report of a 100,000-layer net is 33 MB
    of text, which print would take whole, then encoded whole."""
    lines = iter(lines)
    while True:
        chunk = list(itertools.islice(lines, 4096))
        if not chunk:
            return
        sys.stdout.write("\n".join(chunk) + "\n")


def _write_parts(parts):
    """Write text that comes in pieces (the JSON report, the page), a thousand pieces (some 500
    layers, 1 MB) at a time, and a line break."""
    parts = iter(parts)
    while True:
        chunk = "".join(itertools.islice(parts, 1024))
        if not chunk:
            break
        sys.stdout.write(chunk)
    sys.stdout.write("\n")


def _diff(args):
    checked(args)
    from .keras.cli import is_keras_file

    if is_keras_file(args.path_a) or is_keras_file(args.path_b):
        from .keras.cli import run_diff

        return run_diff(args)
    refuse_keras_options(args)
    shared = parse_inputs(args.input)
    a, fit_a = _audit_and_fit(args.path_a, args, {**shared, **parse_inputs(args.input_a, "--input-a")},
                              args.batch_a if args.batch_a is not None else args.batch, args.freeze + args.freeze_a)
    b, fit_b = _audit_and_fit(args.path_b, args, {**shared, **parse_inputs(args.input_b, "--input-b")},
                              args.batch_b if args.batch_b is not None else args.batch, args.freeze + args.freeze_b)
    from .memory.explain import compare

    comparison = compare(a, b)
    if args.format == "json":
        _write_parts(_report("json_format").render_diff_parts(comparison, fit_a, fit_b))
    elif args.format in FORMATS:
        print(_report(FORMATS[args.format]).render_diff(comparison, fit_a, fit_b))
    else:
        print(_report("diff_text").render(comparison, fit_a, fit_b))
    return EXIT_DOES_NOT_FIT if fit_b is not None and not fit_b.fits else EXIT_FITS


def _guarded(run, what):
    """Run a command: bad input is one line and exit 2; never a traceback."""
    try:
        return run()
    except InputError as e:
        text = str(e) if e.file or e.line else str(e).removeprefix("<input>: ")  # an option's value
        _say(text)
        return EXIT_BAD_INPUT
    except RecursionError:
        _say(f"{what}: the net is too deeply nested to read")
        return EXIT_BAD_INPUT
    except Exception as e:  # one line, and a way to report it
        _say(f"internal error on {what}: {type(e).__name__}: {e} (please report this with the prototxt)")
        return EXIT_INTERNAL


def _say(text):
    """One line on stderr, whatever the file's names hold: line breaks and other control characters
    (a quoted "\\n" or "\\r" in a prototxt is one) written as escapes."""
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    print(f"protoaudit: {text}", file=sys.stderr)
