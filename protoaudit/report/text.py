"""The plain terminal report: what runs, the per-layer table, the totals, the verdict."""
import functools
import itertools

from ..net.freeze import frozen_lines
from ..read.schema import USER_PREFIX, described, load_schema
from .table import ColumnRows, middle, simple_table, simple_table_lines
from .units import shapes, size

ENGINE_NAMES = {"caffe": "Caffe engine (im2col)", "cudnn": "cuDNN"}


def other_engine(audit):
    """The name of the engine the audit's other total is for (every report shows it beside the total)."""
    return ENGINE_NAMES["cudnn" if audit.engine == "caffe" else "caffe"]


def other_engine_clause(audit):
    """What the same run holds under the other engine, or where it stops there, for every report's
    total line: "with cuDNN instead: 3.46 GiB"; None where the other engine is not compared."""
    if audit.other_engine_total is not None:
        return f"with {other_engine(audit)} instead: {size(audit.other_engine_total)}"
    e = audit.other_engine_stops
    if e is None:
        return None
    return (f"with {other_engine(audit)} instead: it stops at layer '{e.layer}'" + (f" (line {e.line})" if e.line else "")
            + f": {e.message}")


def describe(audit):
    """One sentence: what protoaudit audited, as Caffe would hold it."""
    parts = []
    for n in audit.nets:
        how = ("built, never run: the solver never tests" if not n.runs else
               "forward only" if n.forward_only else "forward and backward")
        source = f"from {n.net.path}, " if n.net.path and n.net.path != audit.path else ""
        parts.append(f"the {n.phase} net '{n.name or '(unnamed)'}' ({source}batch {n.batch}, {how})")
    solver = "no solver" if audit.solver_type == "none" else f"the {audit.solver_type} solver's state"
    mode = "GPU" if audit.mode == "gpu" else "CPU"
    schemas = [s for s in dict.fromkeys(getattr(n.net, "schema", "bvlc") for n in audit.nets) if s != "bvlc"]
    read = "".join(f" Read with {described(s)}, its layers sized as {described(load_schema(s).layers)}'s."
                   if s.startswith(USER_PREFIX) else f" Read with the caffe.proto of {described(s)}." for s in schemas)
    return (f"{mode} mode, {ENGINE_NAMES[audit.engine] if audit.mode == 'gpu' else 'CPU code'}: "
            + ", ".join(parts) + f", with {solver}, held at once." + read)


WIDTH = 120  # the per-layer table's width, where shortened names and shapes can make it fit
# the columns a row's figures fill, by the summary's column order (a column all empty is left out)
FIGURE_HEAD = ["params", "data", "diffs", "buffers", "workspace"]
# text columns that may be shortened to fit WIDTH: (narrowest, how)
NARROWEST = {"layer": 14, "type": 10, "top shapes": 14}


def short_shapes(cell, width):
    """Top shapes in `width` characters: the first and how many more, then its ends."""
    parts = cell.split(", ")
    if len(parts) > 1:
        more = f" (+{len(parts) - 1})"
        return middle(parts[0], width - len(more)) + more if width > len(more) + 3 else middle(cell, width)
    return middle(cell, width)


SHORTEN = {"layer": middle, "type": middle, "top shapes": short_shapes}


def layer_table_lines(audit, summary):
    """The per-layer table: torchinfo's columns (the layer, its type, its output shapes, its own
    parameter count) and the bytes it first touches, by category; a net column only where the
    file has more than one net, and no column that is empty on every row."""
    distinct = {r.figures for r in summary.rows}  # rows share their figures: a few dozen
    shown = [i for i in range(len(FIGURE_HEAD)) if any(f[i] for f in distinct)]
    nets = len(audit.nets) > 1
    head = (["net"] if nets else []) + ["layer", "type", "top shapes", "param #"] + [FIGURE_HEAD[i] for i in shown]
    head.append("total")

    def columns(rows, own=None):
        tops = own[0] if own else [shapes(r.tops) for r in rows]
        figures = list(zip(*[figure_cells(r.figures) for r in rows]))
        out = [[r.net for r in rows]] if nets else []
        return out + [[r.name for r in rows], [r.type for r in rows], tops, [count_cell(r.param_count) for r in rows],
                      *[figures[i] for i in shown], [size(r.total) for r in rows]]

    fit = (WIDTH, {head.index(h): (max(n, len(h)), SHORTEN[h]) for h, n in NARROWEST.items()})
    return simple_table_lines(ColumnRows(summary.rows, columns, (head.index("top shapes"),)), head, fit)


@functools.lru_cache(maxsize=4096)
def count_cell(n):
    return f"{n:,}" if n else ""


@functools.lru_cache(maxsize=4096)  # rows with the same figures share them: the cells too
def figure_cells(figures):
    """A row's cells by column: each size, empty for none."""
    return tuple(size(n) if n else "" for n in figures)


def param_lines(params):
    """torchinfo's three lines under its table."""
    if params is None:
        return []
    return [f"Total params: {params.total:,}", f"Trainable params: {params.trainable:,}",
            f"Non-trainable params: {params.frozen:,}"]


def totals(summary):
    lines = ["By category:"]
    lines += [f"  {kind:14s} {size(b):>11s}  {b:>16,} B" for kind, b in summary.by_kind.items()]
    lines.append("By first touch:")
    lines += [f"  {touch:14s} {size(b):>11s}  {b:>16,} B" for touch, b in summary.by_touch.items()]
    lines.append(f"Grows with the batch: {size(summary.per_sample)}; does not: {size(summary.invariant)}")
    return lines


def pages_clause(audit):
    """What cudaMalloc's pages add on the card, beside the total (GPU mode), or None."""
    if not audit.cudamalloc_pages:
        return None
    return (f"cudaMalloc's 2 MiB pages take {size(audit.cudamalloc_pages)} more on the card "
            "(measured on an H200 and an H100; in the verdict, not in the total)")


def assumed_clause(summary):
    """The data shapes under the total that protoaudit assumed rather than read (a dataset not on
    this machine, a Python layer's defaults), or None: the total holds for those sizes only."""
    seen = {}
    for _, o in summary.data_shapes:
        if o.source.startswith("assumed"):
            seen.setdefault(o.top, o.shape)
    if not seen:
        return None
    said = ", ".join(f"{top} {shapes([shape])}" for top, shape in seen.items())
    return f"for data shapes protoaudit assumed ({said}; see Assumed below): give yours with --input"


def verdict_lines(fit, audit):
    if fit is None:
        return []
    if fit.fits:
        lines = [f"FITS a {size(fit.budget)} card: {size(fit.total)} needed, {size(fit.headroom)} to spare."]
    else:
        lines = [f"DOES NOT FIT a {size(fit.budget)} card: {size(fit.total)} needed, {size(-fit.headroom)} too much."]
    if fit.largest_batch is not None:
        if fit.largest_batch == 0:
            lines.append("Even batch 1 does not fit.")
        else:
            lines.append(f"Largest batch that fits: {fit.largest_batch} (audited at batch {fit.batch}).")
            if fit.limit:  # the card would hold more: say what stops it
                lines.append(f"{fit.limit}.")
            if fit.suggested_iter_size and fit.suggested_iter_size > 1:
                lines.append(f"To keep the effective batch of {fit.effective_batch}: batch {fit.suggested_batch} "
                             f"with iter_size {fit.suggested_iter_size}.")
    return lines


def recipe_lines(recipe):
    """The hand recipe beside the total, and what it leaves out."""
    if recipe is None:
        return []
    lines = [f"Hand recipe (activations x2 + params x3, 4 bytes each): {size(recipe.total)} = 2 x "
             f"{recipe.activation_elements:,} activations (Caffe's count) + 3 x {recipe.param_elements:,} "
             f"params; the total is {recipe.ratio:.2f}x that."]
    if recipe.misses:
        lines.append("  It leaves out: " + ", ".join(f"{k} {size(v)}" for k, v in list(recipe.misses.items())[:4])
                     + ".")
    return lines


def net_name(label):
    """How a line names a net: "the net" for a file's only net, else "the train net", "the test net"..."""
    return "the net" if label == "net" else f"the {label} net"


def shape_lines(summary):
    """Where each data top's shape came from, and every guess with the flag that overrides it."""
    lines = [f"Data shape: {net_name(net)}, layer '{o.layer}', top '{o.top}' {shapes([o.shape])}: {o.source}"
             for net, o in summary.data_shapes]
    lines += [f"Assumed: {net_name(net)}, layer '{a.layer}': {a.what} (to change it: {a.override})"
              for net, a in summary.assumptions]
    return lines


def death_lines(death):
    """Where the logged run died, and what protoaudit says it held then, against the card."""
    if death is None:
        return []
    lines = [f"The run in the log died at line {death.line} ({death.message}) {death.where}."]
    held = (f"protoaudit counts {size(death.before)} held before that step and {size(death.after)} with it"
            if death.before != death.after else f"protoaudit counts {size(death.after)} held then")
    on_card = death.after + death.after_pages
    if death.after_pages:
        held += f" ({size(on_card)} on the card with cudaMalloc's pages)"
    if death.card:
        card = f" ({death.card_name})" if death.card_name else ""
        verdict = ("more than the card" if on_card > death.card else "within the card, so something else "
                   "(another process, or cuDNN's workspace) took the rest")
        lines.append(f"  {held}; the card{card} holds {size(death.card)}: {verdict}.")
    else:
        lines.append(f"  {held} (give --gpu-mem to compare with the card).")
    return lines


def render(audit, summary, fit=None, table=False):
    return "\n".join(report_lines(audit, summary, fit, table))


def report_lines(audit, summary, fit=None, table=False):
    """The report's lines: what ran, then the short answer (the total, the verdict, what holds the
    most, the notes that change the answer), as accelerate's estimate-memory answers in a few
    lines. With `table`, the per-layer table, the parameter counts, the categories and Caffe's own
    figure come first, and the short answer ends the report. The table's lines are made as they
    are read (the command writes them as they come: the table of a 100,000-layer net is 33 MB of
    text); the others are worked out at once, before any is read."""
    head = [f"protoaudit: {audit.path}", describe(audit), ""]
    if not table:
        return head + answer_lines(audit, summary, fit) + ["", "The per-layer table, the parameter counts, the "
                                                            "categories and the hand recipe: --table"]
    tail = [""] + param_lines(summary.params) + [""]
    tail += totals(summary)
    tail += recipe_lines(summary.recipe)
    for net_audit in audit.nets:
        figure = net_audit.net.memory_required_for_data
        tail.append(f"Caffe's own 'Memory required for data' for the {net_audit.phase} net: {figure:,} bytes "
                    f"({size(figure)})")
    tail.append("")
    tail += answer_lines(audit, summary, fit)
    return itertools.chain(head, layer_table_lines(audit, summary), tail)


def answer_lines(audit, summary, fit=None):
    """The short answer: the total beside the other engine's, the verdict with the largest batch
    and iter_size, the rows that hold the most and why, the parameters, then the notes."""
    lines = [f"Total: {size(summary.total)} ({summary.total:,} bytes)"
             + (" on the device" if audit.mode == "gpu" else " of host memory")]
    for clause in (assumed_clause(summary), other_engine_clause(audit), pages_clause(audit)):
        if clause:
            lines.append(f"  {clause}")
    lines += verdict_lines(fit, audit) or ["Give --gpu-mem with your card's memory (11G, 8G...) for a verdict "
                                           "and the largest batch that fits."]
    if audit.solver_type != "none" and audit.nets and all(n.forward_only for n in audit.nets):
        # a deploy net read as a train net: no loss, so nothing it holds for training is ever used
        lines.append("Nothing here runs backward (no loss reaches a parameter that learns): the solver's state "
                     "counted is what caffe train would still allocate; for a deployment's memory give --inference.")
    lines += biggest_lines(audit, summary)
    if summary.params is not None:
        p = summary.params
        lines.append(f"Params: {p.total:,} (trainable {p.trainable:,}, non-trainable {p.frozen:,})")
    lines += frozen_lines(summary.frozen, audit.solver_type)
    lines += gap_lines(summary)
    lines += shape_lines(summary)
    lines += death_lines(audit.death)
    lines += sweep_lines(audit.sweep)
    return lines


def biggest_lines(audit, summary):
    """The rows that hold the most, each with its largest parts."""
    if not summary.biggest:
        return []
    nets = len(audit.nets) > 1
    rows = []
    for c in summary.biggest:
        r = c.row
        where = f" ({net_name(r.net)})" if nets and r.net != "process" else ""
        what = f"{r.type}: " if r.type else ""
        parts = ", ".join(f"{k} {size(v)}" for k, v in c.parts[:3] if v * 10 >= r.total)
        rows.append([f"  {r.name}{where}", size(r.total), f"{100 * r.total / summary.total:.0f}%" if summary.total
                     else "", what + parts])
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return ["Most memory:"] + [f"{row[0]:<{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]:>{widths[2]}}  {row[3]}"
                               for row in rows]


def gap_lines(summary):
    """The layers whose own allocations protoaudit cannot see."""
    return [f"Not counted: layer '{layer}' ({kind}) of {net_name(net)}: {what}; "
            "its tops are counted at the shapes shown." for net, layer, kind, what in summary.gaps]


def explanation(audit, summary, fit=None):
    """Every plain-words line of an audit (the library's `Audit.explain()`, the HTML report's)."""
    return (recipe_lines(summary.recipe) + frozen_lines(summary.frozen, audit.solver_type) + gap_lines(summary)
            + shape_lines(summary) + verdict_lines(fit, audit) + death_lines(audit.death))


def sweep_table(sweep):
    """--sweep's rows as table cells: batch, the totals of both engines, what grows, what does not, the verdict."""
    head = ["batch", f"total ({sweep.engine})"] + ([f"with {sweep.other_engine}"] if sweep.other_engine else [])
    head += ["grows with the batch", "does not"] + (["card"] if sweep.budget is not None else [])
    rows = []
    for r in sweep.rows:
        if r.refused:
            rows.append([str(r.batch), "refused"] + [""] * (len(head) - 2))
            continue
        row = [str(r.batch), size(r.total)] + ([size(r.other_engine_total)] if sweep.other_engine else [])
        row += [size(r.per_sample), size(r.fixed)]
        if sweep.budget is not None:
            row.append("fits" if r.fits else "does not fit")
        rows.append(row)
    return head, rows


def sweep_lines(sweep):
    if sweep is None:
        return []
    head, rows = sweep_table(sweep)
    card = f"on a {size(sweep.budget)} card" if sweep.budget is not None else "no card given"
    return ["", f"Batch sweep ({card}):", simple_table(rows, head), sweep.describe()] + refused_lines(sweep)


def refused_lines(sweep):
    """Where Caffe refuses the net, one line per run of batches it refuses (the first one's reason)."""
    out, run = [], []
    for r in sweep.rows + [None]:
        if r is not None and r.refused:
            run.append(r)
            continue
        if run:
            batches = f"batch {run[0].batch}" if len(run) == 1 else f"batches {run[0].batch} to {run[-1].batch}"
            out.append(f"At {batches}, Caffe refuses the net: {run[0].refused}")
            run = []
    return out
