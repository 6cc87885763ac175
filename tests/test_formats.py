"""--format markdown and --format csv: the markdown renders to intact HTML tables, names from the
net come out as written (never as markup), and the CSV reads back as one row per layer of integers.

Row counts are the nets' own: seed 001's new net has 39 layers (data, the label's split, norm,
conv0, conv0_bn, relu0, pool0; 4 x (conv, BN, ReLU, pooling); 4 x (upsample, conv, BN);
conv_classifier, its split, loss, accuracy), plus the solver state and the CUDA context rows: 41.
Its categories: top data, top diff, param data, param diff, history, layer buffer, context, and
the total: 8 rows.
"""
import csv
import enum
import html
import io
import json
from html.parser import HTMLParser

import pytest

from conftest import run_in_process

markdown = pytest.importorskip("markdown")

OLD, NEW = "samples/segnet_seed001_old.prototxt", "samples/segnet_seed001_new.prototxt"
LAYER_ROWS, KIND_ROWS = 41, 8
AUDIT_COLUMNS, DIFF_COLUMNS = 11, 9

# A net whose names hold every character that could break a table or turn into markup.
TRICKY_NAME = '<b>*x*</b> _y_ `z` [l](u) ~~s~~ a\\b & c, "q" | d'
TRICKY = r'''name: "tricky|net <1>"
layer { name: "in|put" type: "Input" top: "da|ta" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer { name: "<b>*x*</b> _y_ `z` [l](u) ~~s~~ a\\b & c, \"q\" | d" type: "Convolution"
  bottom: "da|ta" top: "c|1" convolution_param { num_output: 2 kernel_size: 3 } }
layer { name: "fc" type: "InnerProduct" bottom: "c|1" top: "fc" inner_product_param { num_output: 2 } }
layer { name: "lab" type: "Input" top: "label" input_param { shape { dim: 2 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
'''
# in, the conv, fc, lab, loss; the solver state; the context
TRICKY_ROWS = 7


class Tables(HTMLParser):
    """Every <table> as a list of rows, each a list of (cell text, tags inside the cell)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables, self.cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self.cell = ["", []]
        elif self.cell is not None:
            self.cell[1].append(tag)

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(tuple(self.cell))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell[0] += data


def render(text):
    """The markdown as HTML. GitHub reads markdown inside <details> after a blank line; Python-Markdown
    does so only for a block marked markdown="1" (md_in_html)."""
    text = text.replace("<details>", '<details markdown="1">')
    return markdown.markdown(text, extensions=["tables", "md_in_html"])


def tables(text):
    parser = Tables()
    parser.feed(render(text))
    return parser.tables


def check_intact(table, columns, rows):
    """A header and `rows` rows, each of `columns` cells, no cell holding a '|' or any markup."""
    assert len(table) == rows + 1
    for row in table:
        assert len(row) == columns, row
        for text, tags in row:
            assert "|" not in text or text in ("in|put", TRICKY_NAME), row
            assert tags == [], row


def protoaudit_md(*args):
    r = run_in_process(*args, "--format", "markdown")
    assert r.returncode in (0, 1), r.stderr
    return r.stdout


def test_audit_markdown_renders_two_intact_tables():
    out = protoaudit_md(NEW, "--gpu-mem", "8G")
    kinds, layers = tables(out)
    check_intact(kinds, 3, KIND_ROWS)
    check_intact(layers, AUDIT_COLUMNS, LAYER_ROWS)
    assert [c[0] for c in layers[1][:3]] == ["net", "data", "DummyData"]
    assert [c[0] for c in layers[-1][:2]] == ["process", "CUDA context"]


def test_diff_markdown_renders_two_intact_tables():
    kinds, layers = tables(protoaudit_md("diff", OLD, NEW, "--gpu-mem", "8G"))
    check_intact(kinds, 4, KIND_ROWS)
    check_intact(layers, DIFF_COLUMNS, LAYER_ROWS)
    conv0 = [c[0] for c in layers[4]]
    assert conv0[1] == "conv0" and conv0[3] == "" and conv0[-1] == "added"


def test_markdown_puts_the_summary_first_and_the_layers_in_a_details_block():
    lines = protoaudit_md(NEW, "--gpu-mem", "8G").splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("<details><summary>"))
    assert lines[start] == "<details><summary>Per layer (41 rows)</summary>"
    assert lines[start + 1] == "" and lines[start + 2].startswith("| net | layer |")
    assert lines[-2:] == ["", "</details>"]
    summary = "\n".join(lines[:start])
    for words in ("**Total: 8.67 GiB**", "**DOES NOT FIT", "1,175,184,180 bytes", "| category |"):
        assert words in summary


def tricky_net(tmp_path):
    path = tmp_path / "tricky.prototxt"
    path.write_text(TRICKY)
    return path


def test_names_with_markup_stay_text_in_markdown(tmp_path):
    path = tricky_net(tmp_path)
    out = protoaudit_md(path)
    kinds, layers = tables(out)
    check_intact(layers, AUDIT_COLUMNS, TRICKY_ROWS)
    assert [row[1][0] for row in layers[1:6]] == ["in|put", TRICKY_NAME, "fc", "lab", "loss"]
    assert [row[3][0] for row in layers[1:3]] == ["2x3x8x8", "2x2x6x6"]
    page = render(out)
    assert "<b>" not in page and "<em>" not in page and "<del>" not in page and "<a " not in page
    # the net's name, in the summary's sentence, is text too
    assert "the TRAIN net 'tricky|net <1>'" in html.unescape(page)


def test_names_with_markup_stay_text_in_a_diff(tmp_path):
    path = tricky_net(tmp_path)
    kinds, layers = tables(protoaudit_md("diff", path, path))
    check_intact(layers, DIFF_COLUMNS, TRICKY_ROWS)
    assert layers[2][1][0] == TRICKY_NAME and layers[2][-1][0] == "same"


def protoaudit_csv(*args):
    r = run_in_process(*args, "--format", "csv")
    assert r.returncode in (0, 1), r.stderr
    return list(csv.reader(io.StringIO(r.stdout)))


def test_audit_csv_is_one_row_per_layer_in_bytes():
    head, *rows = protoaudit_csv(NEW)
    assert head == ["net", "layer", "type", "top_shapes", "params_bytes", "data_bytes", "diffs_bytes",
                    "buffers_bytes", "workspace_bytes", "total_bytes", "cumulative_bytes", "assumed"]
    assert len(rows) == LAYER_ROWS and all(len(r) == len(head) for r in rows)
    assert not any(r[11] for r in rows)  # nothing guessed: the net states every shape
    figures = [[int(x) for x in r[4:11]] for r in rows]
    running = 0
    for params, data, diffs, buffers, workspace, row_total, cumulative in figures:
        assert params + data + diffs + buffers + workspace <= row_total  # the solver and context rows
        running += row_total
        assert cumulative == running
    # conv1: its col_buffer_ (64x7x7x384x512 floats) and bias_multiplier_ (384x512 floats)
    conv1 = next(r for r in rows if r[1] == "conv1")
    assert int(conv1[7]) == (64 * 7 * 7 * 384 * 512 + 384 * 512) * 4 == 2_467_037_184
    assert conv1[3] == "1x64x384x512"


def test_diff_csv_is_one_row_per_aligned_layer():
    head, *rows = protoaudit_csv("diff", OLD, NEW)
    assert head == ["net", "layer", "status", "type_a", "type_b", "tops_a", "tops_b", "bytes_a", "bytes_b",
                    "change_bytes"]
    assert len(rows) == LAYER_ROWS
    for r in rows:
        assert int(r[9]) == int(r[8]) - int(r[7])
    pool0 = next(r for r in rows if r[1] == "pool0")
    assert pool0[2:7] == ["added", "", "Pooling", "", "1x64x384x512, 1x64x384x512"]


def test_csv_quotes_names_it_must(tmp_path):
    rows = protoaudit_csv(tricky_net(tmp_path))
    assert [r[1] for r in rows[1:6]] == ["in|put", TRICKY_NAME, "fc", "lab", "loss"]


def test_text_stays_the_default():
    plain = run_in_process(NEW)
    text = run_in_process(NEW, "--format", "text")
    assert plain.returncode == text.returncode == 0 and plain.stdout == text.stdout
    assert plain.stdout.startswith("protoaudit: ")


def test_an_unknown_format_is_a_usage_error():
    r = run_in_process("diff", OLD, NEW, "--format", "pdf")
    assert r.returncode == 2 and "invalid choice: 'pdf'" in r.stderr


def test_json_written_as_it_is_made_is_json_dumps_text():
    """The streamed report (`render_parts`) is json.dumps(to_dict(...), indent=1) to the byte, for
    an audit and a diff, and its encoder writes what json.dumps writes for every kind of value."""
    import protoaudit
    from protoaudit.report import json_format

    a = protoaudit.audit(NEW, gpu_mem="8G")
    assert json_format.render(a, a.summary, a.fit) == json.dumps(json_format.to_dict(a, a.summary, a.fit), indent=1)
    c = protoaudit.diff(OLD, NEW)
    assert json_format.render_diff(c) == json.dumps(json_format.diff_dict(c), indent=1)
    odd = {"é\n\"": [1, 2.5, float("nan"), None, True, (3, 4)], "": {}, "l": [], 1: {2.5: [{}]}, None: False,
           "edges": [float("inf"), float("-inf"), -0.0, 1e300, 5e-324, -(2**70), False, enum.IntEnum("E", "A").A]}
    assert json_format.text(odd) == json.dumps(odd, indent=1)


@pytest.mark.parametrize("n, written", [(999 * 2**20, "999 MiB"), (int(999.4 * 2**20), "999 MiB"),
                                        (int(999.7 * 2**20), "1000 MiB"), (1000 * 2**20, "1000 MiB"),
                                        (1023 * 2**20, "1023 MiB"), (2**30, "1 GiB"), (1536, "1.5 KiB"),
                                        (12, "12 B")])
def test_sizes_are_written_with_three_figures_and_never_in_exponents(n, written):
    # a total of 1,050,233,748 bytes (1001.6 MiB) was written "1e+03 MiB" (three figures of a number
    # that rounds to 1000), on a real training log's net
    from protoaudit.report.units import size

    assert size(n) == written
