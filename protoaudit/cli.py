"""The `protoaudit` command: a thin layer over `protoaudit.audit` and the reports."""
import argparse
import sys

from .audit import audit, build_nets
from .errors import InputError
from .fit import check_fit, parse_size
from .options import parse_inputs
from .report import json_format
from .report import text as text_report
from .report.caffelog import caffe_log
from .summary import summarize

EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), like every other bad input."""

    def error(self, message):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: {message} (see {self.prog} --help)\n")


def parser():
    p = _OneLineParser(
        prog="protoaudit",
        description="Tell what a Caffe net will allocate, before it touches a GPU.",
    )
    p.add_argument("path", help="a net (train_val.prototxt, deploy.prototxt) or a solver.prototxt")
    p.add_argument("--phase", choices=["train", "test"], type=str.lower,
                   help="build this phase's net only (default: train for a net file; all nets of a solver)")
    p.add_argument("--stage", action="append", default=[], help="a NetState stage (repeatable)")
    p.add_argument("--level", type=int, help="the NetState level")
    p.add_argument("--input", action="append", default=[], metavar="TOP=NxCxHxW",
                   help="the full shape of a data layer's (or net input's) top, batch included (repeatable)")
    p.add_argument("--batch", type=int, help="the first dimension of every data source")
    p.add_argument("--test-batch", type=int, help="the batch of the test nets (default: as the file says)")
    p.add_argument("--caffe-log", action="store_true",
                   help="print the Top shape and Memory required for data lines as Caffe logs them")
    p.add_argument("--gpu-mem", metavar="SIZE",
                   help="the card's memory (8G, 8GiB, 11.5G, 8000M; G is GiB unless GB is written): "
                   "a verdict, the largest batch that fits, and the iter_size that keeps the effective batch; "
                   "exit status 0 fits, 1 does not")
    p.add_argument("--engine", choices=["caffe", "cudnn"], default="caffe", type=str.lower,
                   help="Caffe's own im2col convolutions (default) or a cuDNN build; both totals are shown")
    p.add_argument("--mode", choices=["gpu", "cpu"], default="gpu", type=str.lower,
                   help="Caffe's solver_mode: gpu (device memory, default) or cpu (host memory)")
    p.add_argument("--solver-type", metavar="TYPE",
                   help="SGD, Nesterov, AdaGrad, RMSProp, AdaDelta, Adam, or none for a bare net run once "
                   "forward and backward (default: the solver file's type, else SGD)")
    p.add_argument("--inference", action="store_true", help="a forward-only deployment (TEST phase by default)")
    p.add_argument("--context", metavar="BYTES", type=_bytes,
                   help="the CUDA context and library handles (default 300 MiB; 0 leaves it out)")
    p.add_argument("--format", choices=["text", "json"], default="text", type=str.lower)
    return p


def _bytes(value):
    return parse_size(value) if not value.isdigit() else int(value)


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        inputs = parse_inputs(args.input)
        if args.caffe_log:
            for net in build_nets(args.path, phase=args.phase, stages=args.stage, level=args.level,
                                  inputs=inputs, batch=args.batch):
                print("\n".join(caffe_log(net)))
            return EXIT_FITS
        options = dict(phase=args.phase, stages=args.stage, level=args.level, inputs=inputs,
                       test_batch=args.test_batch, mode=args.mode, engine=args.engine,
                       solver_type=args.solver_type, inference=args.inference, context=args.context)
        result = audit(args.path, batch=args.batch, **options)
        fit = None
        if args.gpu_mem:
            budget = parse_size(args.gpu_mem)
            fit = check_fit(result, budget, lambda b: audit(args.path, batch=b, compare_engines=False, **options))
        summary = summarize(result)
        if args.format == "json":
            print(json_format.render(result, summary, fit))
        else:
            print(text_report.render(result, summary, fit))
        return EXIT_DOES_NOT_FIT if fit is not None and not fit.fits else EXIT_FITS
    except InputError as e:
        text = str(e) if e.file or e.line else str(e).removeprefix("<input>: ")  # an option's value
        print(f"protoaudit: {text}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except RecursionError:
        print(f"protoaudit: {args.path}: the net is too deeply nested to read", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as e:  # never a traceback: one line, and a way to report it
        print(f"protoaudit: internal error on {args.path}: {type(e).__name__}: {e} "
              "(please report this with the prototxt)", file=sys.stderr)
        return EXIT_INTERNAL
