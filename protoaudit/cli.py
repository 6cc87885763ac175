"""The `protoaudit` command: a thin layer over `protoaudit.audit` and the reports."""
import argparse
import sys

from .audit import build_nets
from .errors import InputError
from .options import parse_inputs
from .report.caffelog import caffe_log

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
    p.add_argument("--caffe-log", action="store_true",
                   help="print the Top shape and Memory required for data lines as Caffe logs them")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        nets = build_nets(args.path, phase=args.phase, stages=args.stage, level=args.level,
                          inputs=parse_inputs(args.input), batch=args.batch)
        if args.caffe_log:
            for net in nets:
                print("\n".join(caffe_log(net)))
            return EXIT_FITS
        for net in nets:
            print("\n".join(caffe_log(net)))
        return EXIT_FITS
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
