"""`protoaudit-check [OPTIONS] FILE...`: every net of a change audited at once, for pre-commit and CI.

`protoaudit` takes one path; a pre-commit hook is handed every changed prototxt. This audits each
file with the same options (protoaudit's: `--gpu-mem 11G`, `--input`, `--batch`, `--phase`, ...),
writes one line per file (its total and, with --gpu-mem, the verdict), and ends with the worst
status: 0 all fit (or no card given), 1 one does not fit, 2 one is bad input, 3 an internal error.
"""
import argparse
import sys

from . import cli
from .errors import InputError
from .options import checked, parse_inputs, refuse_keras_options
from .report.text import verdict_lines
from .report.units import size


def parser():
    p = cli._OneLineParser(prog="protoaudit-check",
                           description="Audit each Caffe net or Keras model given with the same options; fail if one "
                           "does not fit the card (--gpu-mem) or cannot be read.")
    p.add_argument("paths", nargs="+", metavar="FILE",
                   help="nets, solvers, Caffe logs or Keras model files")
    p.add_argument("--input", action="append", default=[], metavar="TOP=NxCxHxW",
                   help="the full shape of a data layer's (or net input's) top, batch included (repeatable)")
    p.add_argument("--batch", help="the first dimension of every data source")
    cli._common(p, formats=False)
    return p


def check(path, args):
    """(exit status, one line) for one file."""
    try:
        from .keras.cli import is_keras_file

        if is_keras_file(path):
            return _check_keras(path, args)
        refuse_keras_options(args)
        result, fit = cli._audit_and_fit(path, args, parse_inputs(args.input), args.batch)
    except InputError as e:
        return cli.EXIT_BAD_INPUT, f"{path}: bad input: {str(e).removeprefix('<input>: ')}"
    except RecursionError:
        return cli.EXIT_BAD_INPUT, f"{path}: bad input: the net is too deeply nested to read"
    except Exception as e:  # one line, and a way to report it
        return cli.EXIT_INTERNAL, (f"{path}: internal error: {type(e).__name__}: {e} "
                                   "(please report this with the prototxt)")
    if fit is None:
        return cli.EXIT_FITS, f"{path}: {size(result.total_bytes)} ({result.total_bytes:,} bytes)"
    return (cli.EXIT_FITS if fit.fits else cli.EXIT_DOES_NOT_FIT), f"{path}: " + " ".join(verdict_lines(fit, result))


def _check_keras(path, args):
    """A Keras model's line: its total (weights, slots, the step's peak, the context on a GPU) and,
    with --gpu-mem, the verdict at the high end of the executor's orders."""
    from .keras.cli import audit_with_options
    from .report.keras_format import verdict_lines as keras_verdict

    a = audit_with_options(path, args, args.batch, args.freeze)
    line = f"{path}: {size(a.total_bytes)} ({a.total_bytes:,} bytes)"
    if a.fit is None:
        return cli.EXIT_FITS, line
    return (cli.EXIT_FITS if a.fit.fits else cli.EXIT_DOES_NOT_FIT), line + "; " + "; ".join(
        text.strip() for text in keras_verdict(a))


def main(argv=None):
    args = parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        checked(args)
    except InputError as e:  # a flag's value: one line for the run, not one per file
        print(f"protoaudit-check: {str(e).removeprefix('<input>: ')}", file=sys.stderr)
        return cli.EXIT_BAD_INPUT
    worst = cli.EXIT_FITS
    for path in dict.fromkeys(args.paths):  # a file given twice is audited once
        status, line = check(path, argparse.Namespace(**vars(args), path=path))
        print(line, file=sys.stdout if status in (cli.EXIT_FITS, cli.EXIT_DOES_NOT_FIT) else sys.stderr)
        worst = max(worst, status)
    return worst


if __name__ == "__main__":
    sys.exit(main())
