"""The library's surface for notebooks and scripts: `protoaudit.audit` and `protoaudit.diff`.

They take the command's options as keywords and return what its reports are made of: an Audit
(protoaudit.audit.Audit: `total_bytes`, `rows()`, `explain()`, `fit`, `sweep`, `to_dict()`) and a
Comparison (protoaudit.memory.explain.Comparison: `delta`, `layers`, `sentences`, `to_dict()`).
`to_dict()` is the `--format json` report, as dicts and lists.
"""
import functools

from .errors import InputError
from .options import parse_batches, parse_cc, parse_size, refuse_keras_options


def audit(path, *, gpu_mem=None, sweep=None, gpu_cc=None, gpu_reserve=None, **options):
    """Audit `path` (a net, a solver or a Caffe log) with the command's options (protoaudit.audit.audit's
    keywords: batch, inputs, phase, engine, mode, freeze, ...). `gpu_mem` (bytes, or "8G" as --gpu-mem
    writes it) gives `.fit`: the verdict, the largest batch that fits and the iter_size that keeps the
    effective batch. `sweep` (batches, or "1,2,4,8" / "1..64" as --sweep writes it) gives `.sweep`:
    the totals at each batch. A Keras model file (.keras, .h5, model.to_json()) gives a
    protoaudit.keras.audit.KerasAudit instead, with the options batch, optimizer, loss, mode, inputs,
    freeze and context; on a GPU with `gpu_mem`, TensorFlow's reserve is held out of the card by the
    card's compute capability `gpu_cc` ("6.1" or (6, 1) as --gpu-cc writes it; default: the largest
    reserve) or `gpu_reserve` (bytes, or "500M" as --gpu-reserve writes it)."""
    from .keras.cli import is_keras_file

    if is_keras_file(path):
        return _keras(path, gpu_mem, sweep, gpu_cc, gpu_reserve, **options)
    from types import SimpleNamespace

    refuse_keras_options(SimpleNamespace(gpu_cc=gpu_cc, gpu_reserve=gpu_reserve))
    from .audit import audit as _run, reaudit, split_at
    from .memory.fit import check_fit

    result = _run(path, **options)
    last = []  # the last batch audited again: a sweep asks for it under each engine in turn

    def audit_at(batch, engine=None, compare_engines=False):
        if last and last[0].batch == batch:
            return reaudit(last[0], engine=engine, compare_engines=compare_engines)
        again = reaudit(result, batch=batch, engine=engine, compare_engines=compare_engines)
        last[:] = [again]
        return again

    budget = None
    if gpu_mem is not None:  # an empty size is refused by parse_size, never ignored
        budget = gpu_mem if isinstance(gpu_mem, int) else parse_size(gpu_mem)
        result.fit = check_fit(result, budget, audit_at, functools.partial(split_at, result))
        if result.death is not None:  # the card given, rather than the one the log names
            result.death.card, result.death.card_name = budget, "given with --gpu-mem"
    if sweep is not None:
        from .memory.sweep import sweep as sweep_batches

        batches = parse_batches(sweep) if isinstance(sweep, str) else sorted(set(sweep))
        if not batches or min(batches) < 1:
            batches = parse_batches(",".join(map(str, batches)))  # refused, with the option's message
        result.sweep = sweep_batches(result, batches, audit_at, budget)
    return result


def diff(path_a, path_b, *, gpu_mem=None, a=None, b=None, **options):
    """Compare net `path_a` (the old one) with `path_b` (the new one), both audited with `options`;
    `a` and `b` are options for one side only (e.g. `b={"batch": 8}`). With `gpu_mem`, each side's
    `.fit` is in the comparison's `fit_a` and `fit_b`."""
    audit_a = audit(path_a, gpu_mem=gpu_mem, **{**options, **(a or {})})
    audit_b = audit(path_b, gpu_mem=gpu_mem, **{**options, **(b or {})})
    from .memory.explain import compare

    return compare(audit_a, audit_b)


def _keras(path, gpu_mem, sweep, gpu_cc, gpu_reserve, **options):
    from .keras.audit import audit_keras, check_fit, sweep as sweep_batches
    from .keras.reserve import tensorflow_reserve

    mode = options.get("mode") or "gpu"
    for flag, value in (("--gpu-cc", gpu_cc), ("--gpu-reserve", gpu_reserve)):
        if value is not None and mode == "cpu":
            raise InputError(f"{flag}: TensorFlow keeps a reserve on a GPU only; --mode cpu has none",
                             fix="leave it out")
        if value is not None and gpu_mem is None:
            raise InputError(f"{flag} sets what TensorFlow keeps off the card of --gpu-mem", fix="give --gpu-mem too")
    cc = None if gpu_cc is None else parse_cc(gpu_cc)
    given = None if gpu_reserve is None else parse_size(
        f"{gpu_reserve}B" if isinstance(gpu_reserve, int) else gpu_reserve, "--gpu-reserve")
    result = audit_keras(path, **dict(options, mode=mode))
    budget = None
    if gpu_mem is not None:
        budget = gpu_mem if isinstance(gpu_mem, int) else parse_size(gpu_mem)
        if mode == "gpu":
            result.reserve = tensorflow_reserve(budget, result.context, cc, given)
        result.fit = check_fit(result, budget)
    if sweep is not None:
        batches = parse_batches(sweep) if isinstance(sweep, str) else sorted(set(sweep))
        result.sweep = sweep_batches(result, batches, budget)
    return result
