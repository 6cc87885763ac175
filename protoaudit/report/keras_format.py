"""Reports of a Keras audit (protoaudit.keras.audit): text, JSON, markdown, CSV, HTML. Formatting only.

The short answer comes first (what lives across steps, the step's peak, the verdict), then Keras's
own summary() columns with the memory of each layer, then what the peak is made of and the hand
recipe beside it.
"""
import csv
import html
import io
import json

from .units import size

RECIPE = ("the usual hand recipe (every layer's output x the batch, plus the parameters, x 4 bytes: "
          "Stack Overflow's get_model_memory_usage)")


def _shape(shapes):
    return ", ".join("(" + ", ".join(map(str, s)) + ")" for s in shapes)


def headline(a):
    """The short answer, a few lines."""
    how = "TensorFlow on the CPU" if a.mode == "cpu" else "TensorFlow on a GPU (BFC and context: estimates)"
    opt, config = a.optimizer
    lines = [
        f"{a.path}: {keras_named(a)}, one training step at batch {a.batch} "
        f"({_batch_from(a)}), {how}",
        *([f"the Keras model of a {a.container}: these are TensorFlow's figures for training it in Python, "
           "not TensorFlow.js's"] if a.container and "TensorFlow.js" in a.container else
          [f"the Keras model in a {a.container}, read as model.to_json() writes it"] if a.container else []),
        *([f"Keras 1 arguments (output_dim, nb_filter, border_mode, dim_ordering, ...) of {a.keras1_layers} "
           f"layer{'s' if a.keras1_layers > 1 else ''} read as Keras 2.0-2.2 converted them on loading "
           "(keras/legacy/interfaces.py)"] if a.keras1_layers else []),
        f"optimizer {opt} ({a.optimizer_from}): {a.slots_per_variable} slot(s) per trainable variable; "
        f"loss {_loss(a)} ({a.loss_from})",
        "",
        f"  weights           {size(a.weights_bytes):>10}   {a.params:,} params: {a.trainable_params:,} trainable, "
        f"{a.params - a.trainable_params:,} non-trainable",
        f"  optimizer slots   {size(a.slot_bytes):>10}",
        f"  one step's peak   {size(a.step_peak_bytes):>10}   " + _order_range(a),
    ]
    if a.context:
        lines.append(f"  CUDA context      {size(a.context):>10}   (estimate; --context)")
    lines.append(f"  total             {size(a.total_bytes):>10}" + (
        f"   up to {size(a.high_total_bytes)} in another order, which the verdict takes" if _wider(a) else ""))
    if a.reserve is not None:
        lines.append(f"  TensorFlow reserve{size(a.reserve.bytes):>10}   " + reserve_words(a.reserve))
    lines += verdict_lines(a)
    return lines


def reserve_words(r):
    """Where TensorFlow's reserve on the card comes from, in words, with the flag that changes it."""
    from ..keras.reserve import LOW

    source = "gpu_device.cc's MinSystemMemory"
    if not r.from_tier:
        return "kept off TensorFlow's allocator, as TF_DEVICE_MIN_SYS_MEMORY_IN_MB sets it (--gpu-reserve)"
    ignored = (f"--gpu-reserve {size(r.given)} is more than the card leaves after the context, which TensorFlow "
               "ignores; " if r.ignored else "")
    if r.bytes == 0:
        return ignored + (f"none: the card leaves no more than {source}'s reserve after the context, and "
                          "TensorFlow then keeps none")
    if r.tier_assumed:
        return ignored + (f"kept off TensorFlow's allocator ({source}); assumed: compute capability 9.0 or higher, "
                          "the largest reserve: give your card's with --gpu-cc (6.1 a GTX 1080 Ti, 8.0 an A100), "
                          "or --gpu-reserve")
    if r.free < LOW:
        return ignored + f"kept off TensorFlow's allocator ({source}: 225 MiB where under 2 GiB is free after the context)"
    return ignored + f"kept off TensorFlow's allocator ({source} at compute capability {r.cc[0]}.{r.cc[1]}, --gpu-cc)"


def _wider(a):
    """Whether the executor's other orders reach above the step's peak by more than 1%."""
    return a.step_peak_high_bytes > 1.01 * a.step_peak_bytes


def _order_range(a):
    if a.step_peak_low_bytes >= 0.99 * a.step_peak_bytes and not _wider(a):
        return "above what lives across steps"
    low, high = min(a.step_peak_low_bytes, a.step_peak_bytes), max(a.step_peak_high_bytes, a.step_peak_bytes)
    return f"(TensorFlow's executor order can make it {size(low)} to {size(high)})"


def keras_named(a):
    """"Keras 2.2.4 (tf_keras)"; where the file gives no version, the Keras it is read as and that the
    version is not in the file (Keras 3's to_json writes none)."""
    if a.keras_version:
        return f"Keras {a.keras_version} ({a.flavour})"
    if a.flavour == "keras3":
        return "Keras 3 (version not in the file)"
    if a.keras1_layers:
        return "Keras 1 (version not in the file)"
    return f"Keras 2 ({a.flavour}, version not in the file)"


def _batch_from(a):
    return {"argument": "--batch", "input": "the model's input", "default": "Keras fit's default"}.get(
        a.batch_from, a.batch_from)


def _loss(a):
    from ..keras.training.losses import describe

    return describe(a.loss) or "mse"


def verdict_lines(a):
    """The verdict on --gpu-mem's card and the largest batch, indented lines of the text report."""
    fit = a.fit
    if fit is None:
        return []
    word = "FITS" if fit.fits else "DOES NOT FIT"
    lines = [f"  {word} a {size(fit.budget)} card: "
             + (f"{size(fit.budget - fit.total)} to spare" if fit.fits else f"{size(fit.total - fit.budget)} over")]
    if fit.largest_batch == 0:
        lines.append("  not even batch 1 fits")
    elif fit.largest_batch is not None:
        lines.append(f"  largest batch that fits: {fit.largest_batch}"
                     + (f" (batch {fit.suggested_batch} x {fit.suggested_iter_size} accumulated steps keeps the "
                        f"effective batch {a.batch})" if fit.suggested_iter_size else ""))
    return lines


def peak_lines(a):
    p = a.peak
    lines = [f"The step's peak is at \"{p.step}\". Live there, by kind: "
             + ", ".join(f"{k} {size(v)}" for k, v in sorted(p.live.items(), key=lambda kv: -kv[1]))]
    lines.append(f"Of the step's peak, {size(a.grows)} grows with the batch (activations kept for the backward pass, "
                 f"their gradients, the batch itself) and {size(max(a.step_peak_bytes - a.grows, 0))} does not "
                 "(weight gradients, optimizer temporaries, kernel scratch, TensorFlow's own).")
    lines.append("The largest there:")
    for b, n, label, kind in p.groups:
        lines.append(f"  {size(b):>10}  {label}" + (f" (x{n:,}, {size(b // n)} each)" if n > 1 else "") + f"  [{kind}]")
    ratio = (a.weights_bytes + a.slot_bytes + a.step_peak_bytes) / max(a.recipe_bytes, 1)
    lines.append(f"Beside it, {RECIPE}: {size(a.recipe_bytes)}, {_times(ratio)} less than weights, slots and the "
                 "step's peak." if ratio >= 1 else f"Beside it, {RECIPE}: {size(a.recipe_bytes)}, {_times(1 / ratio)} more "
                 "than weights, slots and the step's peak (TensorFlow keeps only what each gradient reads, and "
                 "frees as it goes).")
    if a.frozen:
        lines.append(f"Frozen (--freeze or trainable: false, with what they depend on): {len(a.frozen)} layers; "
                     "they keep no gradients, no slots and none of their activations for a backward pass.")
    if a.unmodelled:
        lines.append("Layers whose ops are not modelled (taken as passing their input through): "
                     + ", ".join(a.unmodelled))
    for layer, what in a.undercounted:
        lines.append(f"The step's peak is low for layer '{layer}': {what}.")
    if a.cpu_stops:
        layer, said = a.cpu_stops[0]
        more = f" (and {len(a.cpu_stops) - 1} more channels_first layer{'s' if len(a.cpu_stops) > 2 else ''})" \
            if len(a.cpu_stops) > 1 else ""
        lines.append(f"On a CPU without oneDNN (TF_ENABLE_ONEDNN_OPTS=0, as these figures are measured), TensorFlow "
                     f"cannot train it: its kernels refuse layer '{layer}'{more} in channels_first (\"{said}\"); "
                     "with oneDNN, its x86 default, it trains, with oneDNN's kernels, whose scratch is not counted "
                     "here.")
    if a.mode == "gpu":
        lines.append("GPU figures are estimates until a device confirms them: TensorFlow's BFC allocator "
                     "reserves most of the card at start unless memory growth is on; cuDNN's workspaces are "
                     "not counted.")
    return lines


def _times(x):
    return f"{x:,.0f}x" if x >= 10 else f"{x:.2g}x"


COLUMNS = ("Layer (type)", "Output Shape", "Param #", "Output", "Gradients", "Slots")


def table_rows(a):
    for r in a.rows:
        yield (f"{r.name} ({r.class_name})", _shape(r.output_shapes), f"{r.params:,}", size(r.output_bytes),
               size(r.gradient_bytes) if r.gradient_bytes else "-", size(r.slot_bytes) if r.slot_bytes else "-")


def text_lines(a, table=True):
    lines = headline(a) + [""]
    if table:
        from tabulate import tabulate

        lines += tabulate(list(table_rows(a)), headers=COLUMNS, tablefmt="simple",
                          colalign=("left", "left", "right", "right", "right", "right")).splitlines()
        lines.append(f"Total params: {a.params:,}  Trainable params: {a.trainable_params:,}  "
                     f"Non-trainable params: {a.params - a.trainable_params:,}")
        lines.append("")
    lines += peak_lines(a)
    if a.sweep:
        lines += ["", "batch  total" + ("  fits" if a.sweep[0][2] is not None else "")]
        lines += [f"{b:>5}  {size(t):>10}" + ("" if f is None else ("  yes" if f else "  no")) for b, t, f in a.sweep]
        if a.reserve is not None and a.sweep[0][2] is not None:
            lines.append(f"(fits: the total and TensorFlow's {size(a.reserve.bytes)} reserve within the "
                         f"{size(a.reserve.card)} card)")
    return lines


def to_dict(a):
    p = a.peak
    fit = a.fit
    return {
        "path": a.path, "framework": "keras", "flavour": a.flavour, "keras_version": a.keras_version,
        "container": a.container, "keras1_layers": a.keras1_layers,
        "batch": a.batch, "batch_from": a.batch_from, "mode": a.mode,
        "optimizer": a.optimizer[0], "optimizer_from": a.optimizer_from, "loss": _loss(a), "loss_from": a.loss_from,
        "params": a.params, "trainable_params": a.trainable_params,
        "weights_bytes": a.weights_bytes, "trainable_bytes": a.trainable_bytes,
        "slots_per_variable": a.slots_per_variable, "slot_bytes": a.slot_bytes,
        "step_peak_bytes": a.step_peak_bytes, "step_peak_low_bytes": a.step_peak_low_bytes,
        "step_peak_high_bytes": a.step_peak_high_bytes, "high_total_bytes": a.high_total_bytes,
        "step_peak_growing_bytes": a.grows,
        "context_bytes": a.context, "total_bytes": a.total_bytes, "recipe_bytes": a.recipe_bytes,
        "gpu_reserve_bytes": None if a.reserve is None else a.reserve.bytes,
        "gpu_reserve_from": None if a.reserve is None else reserve_words(a.reserve),
        "peak": {"at": p.step, "live": p.live,
                 "largest": [{"bytes": b, "count": n, "what": label, "kind": kind} for b, n, label, kind in p.groups]},
        "layers": [{"name": r.name, "type": r.class_name, "output_shapes": [list(s) for s in r.output_shapes],
                    "params": r.params, "trainable_params": r.trainable_params, "output_bytes": r.output_bytes,
                    "weight_bytes": r.weight_bytes, "gradient_bytes": r.gradient_bytes, "slot_bytes": r.slot_bytes}
                   for r in a.rows],
        "frozen": a.frozen, "unmodelled": a.unmodelled,
        "undercounted": [{"layer": layer, "what": what} for layer, what in a.undercounted],
        "cpu_stops": [{"layer": layer, "kernel_says": said} for layer, said in a.cpu_stops],
        # with a card: its total is the high total with TensorFlow's reserve (on a GPU) held against the card;
        # allocator_limit_bytes, what TensorFlow's allocator may take there (the card less the context and
        # the reserve), against weights, slots and the step's peak
        "fit": None if fit is None else {"budget": fit.budget, "total": fit.total, "fits": fit.fits,
                                         "largest_batch": fit.largest_batch,
                                         "allocator_limit_bytes": None if a.reserve is None else a.reserve.limit},
        "sweep": None if not a.sweep else [{"batch": b, "total": t, "fits": f} for b, t, f in a.sweep],
    }


def render(a, fmt):
    if fmt == "json":
        return json.dumps(to_dict(a), indent=1)
    if fmt == "csv":
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        if a.sweep:
            w.writerow(["batch", "total_bytes", "fits"])
            w.writerows(a.sweep)
            return out.getvalue().rstrip("\n")
        w.writerow(["layer", "type", "output_shapes", "params", "trainable_params", "output_bytes", "weight_bytes",
                    "gradient_bytes", "slot_bytes"])
        for r in a.rows:
            w.writerow([r.name, r.class_name, _shape(r.output_shapes), r.params, r.trainable_params, r.output_bytes,
                        r.weight_bytes, r.gradient_bytes, r.slot_bytes])
        return out.getvalue().rstrip("\n")
    if fmt == "markdown":
        lines = ["```"] + headline(a) + ["```", "", *peak_lines(a), "", "<details><summary>Per layer</summary>", "",
                 "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in table_rows(a)]
        lines += ["", "</details>"]
        return "\n".join(lines)
    if fmt == "html":
        head = "\n".join(html.escape(x) for x in headline(a))
        body = "\n".join(html.escape(x) for x in peak_lines(a))
        rows = "\n".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in table_rows(a))
        return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>protoaudit: "
                f"{html.escape(str(a.path))}</title><style>body{{font-family:sans-serif;max-width:1350px}}"
                "td,th{padding:2px 8px;text-align:right}td:first-child,th:first-child{text-align:left}"
                "pre{background:#f4f4f4;padding:8px}</style></head><body>"
                f"<pre>{head}</pre><pre>{body}</pre><table><thead><tr>"
                + "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS) + f"</tr></thead><tbody>{rows}</tbody></table>"
                "</body></html>")
    return "\n".join(text_lines(a))


def render_diff(a, b, fmt="text"):
    """Two Keras audits side by side: the figures and why one needs more."""
    rows = [("weights", a.weights_bytes, b.weights_bytes), ("optimizer slots", a.slot_bytes, b.slot_bytes),
            ("one step's peak", a.step_peak_bytes, b.step_peak_bytes), ("total", a.total_bytes, b.total_bytes)]
    if fmt == "json":
        return json.dumps({"a": to_dict(a), "b": to_dict(b),
                           "delta": {k: y - x for k, x, y in rows}}, indent=1)
    lines = [f"A: {a.path} (batch {a.batch})", f"B: {b.path} (batch {b.batch})", "",
             f"  {'':18}{'A':>12}{'B':>12}{'B - A':>12}"]
    for k, x, y in rows:
        lines.append(f"  {k:18}{size(x):>12}{size(y):>12}{('+' if y >= x else '-') + size(abs(y - x)):>12}")
    lines += ["", "A's peak: " + _why(a), "B's peak: " + _why(b), ""]
    lines += _because(a, b)
    for side, x in (("A", a), ("B", b)):
        fit = x.fit
        if fit is not None:
            lines.append(f"{side}: {'fits' if fit.fits else 'does not fit'} a {size(fit.budget)} card"
                         + (f" with TensorFlow's {size(x.reserve.bytes)} reserve" if x.reserve is not None else "")
                         + f"; largest batch {fit.largest_batch}")
    return "\n".join(lines)


def _why(a):
    p = a.peak
    big = p.groups[0] if p.groups else None
    text = f"at \"{p.step}\"; " + ", ".join(f"{k} {size(v)}" for k, v in sorted(p.live.items(), key=lambda kv: -kv[1]))
    if big:
        b, n, label, kind = big
        text += f"; largest: {label}" + (f" x{n:,}" if n > 1 else "") + f" ({size(b)})"
    return text


def _because(a, b):
    """Why one needs more, in words: which part changed, and whether it grows with the batch."""
    parts = [("the optimizer's slots", b.slot_bytes - a.slot_bytes),
             ("weights", b.weights_bytes - a.weights_bytes),
             ("what grows with the batch in the step's peak", b.grows - a.grows),
             ("what does not grow with the batch in the step's peak",
              (b.step_peak_bytes - b.grows) - (a.step_peak_bytes - a.grows))]
    parts = [(what, d) for what, d in parts if abs(d) >= 1024]
    if not parts:
        return ["The two need the same."]
    more = "B needs more than A" if b.total_bytes > a.total_bytes else "B needs less than A"
    words = "; ".join(f"{what} {'+' if d > 0 else '-'}{size(abs(d))}" for what, d in
                      sorted(parts, key=lambda p: -abs(p[1])))
    lines = [f"{more}: {words}."]
    if a.trainable_params != b.trainable_params:
        lines.append(f"Trainable parameters: {a.trainable_params:,} in A, {b.trainable_params:,} in B. A frozen "
                     "weight keeps no gradient and no optimizer slot, and a layer with nothing trainable at or "
                     "before it runs no backward pass and keeps none of its activations.")
    return lines
