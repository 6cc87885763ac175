"""The library's surface for notebooks and scripts: `protoaudit.audit` and `protoaudit.diff`.

They take the command's options as keywords and return what its reports are made of: an Audit
(protoaudit.audit.Audit: `total_bytes`, `rows()`, `explain()`, `fit`, `sweep`, `to_dict()`) and a
Comparison (protoaudit.memory.explain.Comparison: `delta`, `layers`, `sentences`, `to_dict()`).
`to_dict()` is the `--format json` report, as dicts and lists.
"""
import functools

from .options import parse_batches, parse_size


def audit(path, *, gpu_mem=None, sweep=None, **options):
    """Audit `path` (a net, a solver or a Caffe log) with the command's options (protoaudit.audit.audit's
    keywords: batch, inputs, phase, engine, mode, freeze, ...). `gpu_mem` (bytes, or "8G" as --gpu-mem
    writes it) gives `.fit`: the verdict, the largest batch that fits and the iter_size that keeps the
    effective batch. `sweep` (batches, or "1,2,4,8" / "1..64" as --sweep writes it) gives `.sweep`:
    the totals at each batch. A Keras model file (.keras, .h5, model.to_json()) gives a
    protoaudit.keras.audit.KerasAudit instead, with the options batch, optimizer, loss, mode, inputs,
    freeze and context."""
    from .keras.cli import is_keras_file

    if is_keras_file(path):
        return _keras(path, gpu_mem, sweep, **options)
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


def _keras(path, gpu_mem, sweep, **options):
    from .keras.audit import audit_keras, check_fit, sweep as sweep_batches

    result = audit_keras(path, **dict(options, mode=options.get("mode") or "gpu"))
    budget = None
    if gpu_mem is not None:
        budget = gpu_mem if isinstance(gpu_mem, int) else parse_size(gpu_mem)
        result.fit = check_fit(result, budget)
    if sweep is not None:
        batches = parse_batches(sweep) if isinstance(sweep, str) else sorted(set(sweep))
        result.sweep = sweep_batches(result, batches, budget)
    return result
