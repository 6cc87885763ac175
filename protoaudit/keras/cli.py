"""The command for Keras model files: `protoaudit MODEL.keras|.h5|.json` and `protoaudit diff A B`.

Which files are Keras's is decided by their content (a zip holding config.json, an HDF5 file, JSON
of a Keras model), so a renamed file is still read as what it is.
"""
import json
import os

from ..errors import InputError
from ..options import parse_inputs
from ..read import special

KERAS_EXTENSIONS = (".keras", ".h5", ".hdf5")


def is_keras_file(path):
    """Whether `path` is a Keras model file rather than a Caffe file."""
    path = os.fspath(path)
    if path.lower().endswith(KERAS_EXTENSIONS):
        return True
    if special.kind(path) is not None:  # a pipe would be waited on; the Caffe reader refuses it
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return True
    if head.startswith(b"PK"):
        import zipfile

        try:
            with zipfile.ZipFile(path) as z:
                return "config.json" in z.namelist()
        except (zipfile.BadZipFile, OSError):
            return False
    text = head.lstrip()
    if text.startswith(b"{") and text[1:].lstrip().startswith(b'"'):  # a JSON object: no prototxt opens so
        return True
    if text.startswith(b'"') and b'class_name' in head:  # a JSON string of model.to_json()'s output
        return True
    if text.startswith(b"{") and b'"class_name"' in head:
        try:
            first = json.loads(head.decode("utf-8", "replace")) if len(head) < 4096 else None
        except ValueError:
            first = None
        return first is None or isinstance(first, dict)
    return False


# options of Caffe's audit that a Keras model has no use for: refused by name, never ignored
CAFFE_ONLY = {"phase": None, "stage": [], "level": None, "test_batch": None, "engine": "caffe", "solver_type": None,
              "inference": False, "define": [], "fork": None, "caffe_proto": None, "log": None, "root": None,
              "caffe_log": False, "shapes": None}


def _refuse_caffe_options(args):
    for name, default in CAFFE_ONLY.items():
        if getattr(args, name, default) not in (default, None, [], False):
            raise InputError(f"--{name.replace('_', '-')} is for Caffe nets; a Keras model has no use for it",
                             fix="leave it out")


def audit_with_options(path, args, batch, freeze):
    """The audit of the Keras model at `path` with the command line's options (Caffe's refused by name)."""
    _refuse_caffe_options(args)
    from ..library import audit

    # --gpu-mem, --gpu-reserve in bytes, --gpu-cc (major, minor) and --sweep's batches, as
    # protoaudit.options.checked made them
    return audit(path, gpu_mem=args.gpu_mem or None, sweep=getattr(args, "sweep", None) or None, batch=batch,
                 gpu_cc=args.gpu_cc, gpu_reserve=args.gpu_reserve,
                 optimizer=args.optimizer, loss=args.loss, mode=args.mode or "gpu", inputs=parse_inputs(args.input),
                 freeze=freeze, context=args.context)


def run(args):
    from ..report.keras_format import render

    if args.plot:  # matplotlib is imported only then; a missing one is refused before the audit
        from ..report import chart
        chart.check(args.plot)
    result = audit_with_options(args.path, args, args.batch, args.freeze)
    print(render(result, args.format))
    if args.plot:
        from ..report import keras_chart
        keras_chart.draw(result, args.plot)
    return 1 if result.fit is not None and not result.fit.fits else 0


def run_diff(args):
    from ..report.keras_format import render_diff

    a = audit_with_options(args.path_a, args, args.batch_a if args.batch_a is not None else args.batch,
                           args.freeze + args.freeze_a)
    b = audit_with_options(args.path_b, args, args.batch_b if args.batch_b is not None else args.batch,
                           args.freeze + args.freeze_b)
    print(render_diff(a, b, "json" if args.format == "json" else "text"))
    return 1 if b.fit is not None and not b.fit.fits else 0
