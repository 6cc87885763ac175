"""--format html in a real browser (Debian's Chromium, headless, over the DevTools protocol): the
page loads from a file with no network, sorts and filters its per-layer table as a user clicks and
types, shows what it should, and is never blank. Names from the prototxt stay text.

Seed 001's new net has 41 rows (39 layers, the solver's state, the CUDA context; see
test_formats.py); of its 39 layers, 8 are the decoder's conv_decode* and conv_decode*_bn, 4 are
Upsample and 9 are BN (conv0_bn .. conv4_bn, conv_decode4_bn .. conv_decode1_bn). The old net has
no conv0 stage: conv0, conv0_bn, relu0 and pool0 are added in the new one.
"""
import csv
import io
import os
import re

import pytest

from conftest import DATA, run_in_process

OLD, NEW = "samples/segnet_seed001_old.prototxt", "samples/segnet_seed001_new.prototxt"
RESNET152 = os.path.join(DATA, "corpus", "nets", "resnet152_deploy.prototxt")
MB = 10**6
ROWS = 41
DECODER = ["conv_decode4", "conv_decode4_bn", "conv_decode3", "conv_decode3_bn", "conv_decode2", "conv_decode2_bn",
           "conv_decode1", "conv_decode1_bn"]
UPSAMPLES = ["upsample4", "upsample3", "upsample2", "upsample1"]
ADDED = ["conv0", "conv0_bn", "relu0", "pool0"]
# the page's colours of an added and a changed row (style: tr.added td, tr.changed td)
GREEN, YELLOW = "rgb(218, 251, 225)", "rgb(255, 248, 197)"

# names that would be markup, a script, or break out of an attribute if written as they are
SCRIPT_NAME = "<script>alert(1)</script>"
QUOTED_NAME = "a \"b\" & 'c' <d> &amp;"
QUOTED_IN_PROTOTXT = QUOTED_NAME.replace('"', '\\"')
TRICKY = f'''name: "x<b>y</b>"
layer {{ name: "in" type: "Input" top: "data" input_param {{ shape {{ dim: 2 dim: 3 dim: 8 dim: 8 }} }} }}
layer {{ name: "{SCRIPT_NAME}" type: "Convolution" bottom: "data" top: "c1"
  convolution_param {{ num_output: 2 kernel_size: 3 }} }}
layer {{ name: "{QUOTED_IN_PROTOTXT}" type: "ReLU" bottom: "c1" top: "c1" }}
layer {{ name: "fc" type: "InnerProduct" bottom: "c1" top: "fc" inner_product_param {{ num_output: 2 }} }}
layer {{ name: "lab" type: "Input" top: "label" input_param {{ shape {{ dim: 2 }} }} }}
layer {{ name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }}
'''


def html_report(tmp_path, name, *args):
    r = run_in_process(*args, "--format", "html", timeout=120)
    assert r.returncode in (0, 1), r.stderr
    path = tmp_path / name
    path.write_text(r.stdout, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def browser():
    from browser import Browser, BrowserError, find

    if find()[0] is None:
        pytest.skip(find()[1])
    pytest.importorskip("websocket", reason="websocket-client drives the browser: pip install '.[test]'")
    try:
        b = Browser()
    except BrowserError as e:
        pytest.skip(f"Chromium is installed but does not start here: {e}")
    yield b
    b.close()


# --- what the browser shows ------------------------------------------------------------------------
def column(browser, table, index, visible_only=True):
    """The text of one column of a table, top to bottom, as displayed (hidden rows left out)."""
    return browser.js(f"""Array.from(document.querySelectorAll("#{table} tbody tr"))
        .filter(r => !{str(visible_only).lower()} || r.getClientRects().length > 0)
        .map(r => r.cells[{index}].textContent)""")


def head_index(browser, table, title):
    heads = browser.js(f"""Array.from(document.querySelector("#{table} thead tr:last-child").cells)
        .map(c => c.textContent.replace(/[\\u25B2\\u25BC ]+$/, ""))""")
    return heads.index(title)


def click_head(browser, table, title, index=None):
    index = head_index(browser, table, title) if index is None else index
    browser.click(f"#{table} thead tr:last-child th:nth-child({index + 1})")
    return index


def problems(browser):
    """Requests for anything but the page itself, and errors the console logged (a blocked script)."""
    out = []
    for e in browser.events:
        if e["method"] == "Network.requestWillBeSent" and not e["params"]["request"]["url"].startswith("file://"):
            out.append(e["params"]["request"]["url"])
        if e["method"] == "Log.entryAdded" and e["params"]["entry"]["level"] == "error":
            out.append(e["params"]["entry"]["text"])
        if e["method"] == "Runtime.exceptionThrown":
            out.append(str(e["params"]["exceptionDetails"]))
        if e["method"] == "Page.javascriptDialogOpening":
            out.append("dialog: " + e["params"]["message"])
    return out


def not_blank(png, at_least=30):
    """The screenshot has content: its pixels vary (a blank page's do not) and it has many colours."""
    from PIL import Image, ImageStat

    image = Image.open(io.BytesIO(png)).convert("RGB")
    spread = ImageStat.Stat(image).stddev
    colours = image.getcolors(maxcolors=1 << 20)
    assert min(spread) > 10, spread
    assert colours is not None and len(colours) >= at_least, len(colours or [])
    return image


def has_colour(image, rgb, box=None, tolerance=6):
    """Whether the image (or the part in `box`) has a pixel of about this colour."""
    part = image.crop(box) if box else image
    return any(all(abs(a - b) <= tolerance for a, b in zip(pixel, rgb)) for _, pixel in part.getcolors(1 << 20))


def chart_box(browser, selector="svg.chart"):
    x, y, w, h = browser.js(f"""(() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect();
        return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height]; }})()""")
    return int(x), int(y), int(x + w), int(y + h)


def csv_rows(*args):
    r = run_in_process(*args, "--format", "csv")
    return list(csv.DictReader(io.StringIO(r.stdout)))


# --- the audit ------------------------------------------------------------------------------------
def test_audit_page_sorts_filters_and_shows_its_chart(browser, tmp_path):
    page = html_report(tmp_path, "new.html", NEW, "--gpu-mem", "8G")
    browser.load(page)
    assert problems(browser) == []
    layers = column(browser, "layers", 2)
    names = [r["layer"] for r in csv_rows(NEW)]
    assert len(layers) == ROWS and layers == names  # the net's order, every row shown
    assert browser.js('document.querySelector("[data-tools-for=layers]").hidden') is False  # the script ran

    # sort by total: largest first, then smallest first (ties keep the net's order)
    by_total = {r["layer"]: int(r["total_bytes"]) for r in csv_rows(NEW)}
    index = click_head(browser, "layers", "total")
    assert column(browser, "layers", 2) == sorted(names, key=lambda n: -by_total[n])
    click_head(browser, "layers", "total", index)
    assert column(browser, "layers", 2) == sorted(names, key=lambda n: by_total[n])
    assert browser.js(f'document.querySelector("#layers thead tr:last-child th:nth-child({index + 1})")'
                      '.getAttribute("aria-sort")') == "ascending"

    # sort by type (text, A to Z; the solver's and the context's rows have none), then back by #
    types = {r["layer"]: r["type"] for r in csv_rows(NEW)}
    click_head(browser, "layers", "type")
    assert column(browser, "layers", 2) == sorted(names, key=lambda n: types[n].lower())
    click_head(browser, "layers", "#")  # a figure: largest first
    click_head(browser, "layers", "#")
    assert column(browser, "layers", 2) == names

    # filter by name, then by type, as typed into the box
    browser.type("[data-tools-for=layers] input", "conv_decode")
    assert column(browser, "layers", 2) == DECODER
    assert browser.js('document.querySelector("[data-tools-for=layers] .count").textContent') == "8 of 41 rows"
    browser.js('document.querySelector("[data-tools-for=layers] input").select()')
    browser.send("Input.insertText", text="Upsample")
    assert column(browser, "layers", 2) == UPSAMPLES
    assert column(browser, "layers", 3) == ["Upsample"] * 4
    browser.js('document.querySelector("[data-tools-for=layers] input").select()')
    browser.send("Input.insertText", text="bn")
    assert len(column(browser, "layers", 2)) == 9
    # sorting keeps the filter: the 9 BN rows, largest first
    click_head(browser, "layers", "total")
    assert column(browser, "layers", 2) == sorted([n for n in names if n.endswith("_bn")], key=lambda n: -by_total[n])
    browser.js('document.querySelector("[data-tools-for=layers] input").select()')
    browser.send("Input.insertText", text="no such layer")
    assert column(browser, "layers", 2) == []
    browser.js('const i = document.querySelector("[data-tools-for=layers] input"); i.select()')
    browser.send("Input.dispatchKeyEvent", type="keyDown", key="Backspace", code="Backspace",
                 windowsVirtualKeyCode=8)
    browser.send("Input.dispatchKeyEvent", type="keyUp", key="Backspace", code="Backspace", windowsVirtualKeyCode=8)
    assert len(column(browser, "layers", 2)) == ROWS

    # the page and its chart are drawn: the bars' colours (data, buffers) and the running total
    image = not_blank(browser.screenshot())
    box = chart_box(browser)
    assert box[2] - box[0] > 600 and box[3] - box[1] > 200
    for colour in ((0x4e, 0x79, 0xa7), (0x59, 0xa1, 0x4f), (0xc0, 0x00, 0x00)):
        assert has_colour(image, colour, box), colour
    assert problems(browser) == []


def test_diff_page_marks_changed_rows_and_sorts_by_change(browser, tmp_path):
    page = html_report(tmp_path, "diff.html", "diff", OLD, NEW, "--gpu-mem", "8G")
    browser.load(page)
    assert problems(browser) == []
    rows = csv_rows("diff", OLD, NEW)
    names = [r["layer"] for r in rows]
    assert column(browser, "layers", 2) == names and len(names) == ROWS
    status = dict(zip(names, column(browser, "layers", 3)))
    assert [n for n in names if status[n] == "added"] == ADDED
    # batch 4 against 1: every other row changes but accuracy's (host memory) and the context's
    assert [n for n in names if status[n] == "same"] == ["accuracy", "CUDA context"]
    colours = browser.js("""Array.from(document.querySelectorAll("#layers tbody tr"))
        .map(r => [r.cells[2].textContent, getComputedStyle(r.cells[2]).backgroundColor])""")
    for name, colour in colours:
        marked = {"added": GREEN, "changed": YELLOW}.get(status[name])
        assert colour == marked if marked else colour not in (GREEN, YELLOW), (name, colour)
    # A's and B's figures side by side: conv0 has none in A
    heads = browser.js('Array.from(document.querySelector("#layers thead tr:last-child").cells).map(c => c.textContent)')
    assert heads.count("total") == 2 and heads.count("cumulative") == 2
    a_total, b_total = [i for i, h in enumerate(heads) if h == "total"]
    conv0 = browser.js("""Array.from(Array.from(document.querySelectorAll("#layers tbody tr"))
        .find(r => r.cells[2].textContent === "conv0").cells).map(c => c.textContent)""")
    assert conv0[b_total] == "797 MiB" and conv0[a_total] == ""
    # sort by the change: the largest growth first
    change = {r["layer"]: int(r["change_bytes"]) for r in rows}
    click_head(browser, "layers", "change")
    shown = column(browser, "layers", 2)
    assert shown == sorted(names, key=lambda n: -change[n]) and shown[0] == "conv1"
    browser.type("[data-tools-for=layers] input", "pool")
    assert column(browser, "layers", 2) == sorted(["pool0", "pool1", "pool2", "pool3", "pool4"],
                                                  key=lambda n: -change[n])
    image = not_blank(browser.screenshot())
    assert has_colour(image, (0xda, 0xfb, 0xe1)) and has_colour(image, (0xff, 0xf8, 0xc5))  # the marked rows
    assert problems(browser) == []


def test_names_stay_text_and_nothing_runs_but_the_page_script(browser, tmp_path):
    net = tmp_path / "tricky.prototxt"
    net.write_text(TRICKY)
    for name, args in (("audit.html", [net]), ("diff.html", ["diff", net, net])):
        page = html_report(tmp_path, name, *args)
        text = page.read_text(encoding="utf-8")
        assert "<script>alert" not in text and "<b>y</b>" not in text
        browser.load(page)
        assert problems(browser) == []  # no dialog opened, nothing blocked or thrown
        assert browser.js("document.scripts.length") == 1
        layers = column(browser, "layers", 2)
        assert SCRIPT_NAME in layers and QUOTED_NAME in layers
        titles = browser.js('Array.from(document.querySelectorAll("svg.chart title")).map(t => t.textContent)')
        assert any(t.startswith(f"net {SCRIPT_NAME}:") for t in titles)
        assert "the TRAIN net 'x<b>y</b>'" in browser.js("document.body.textContent")
        assert not browser.js('Array.from(document.querySelectorAll("b")).some(b => b.textContent === "y")')
        browser.type("[data-tools-for=layers] input", "<script>")
        assert column(browser, "layers", 2) == [SCRIPT_NAME]


def test_readable_without_javascript(browser, tmp_path):
    page = html_report(tmp_path, "new.html", NEW, "--gpu-mem", "8G", "--sweep", "1,2")
    browser.load(page, javascript=False)
    try:
        assert len(column(browser, "layers", 2)) == ROWS  # every row shown
        assert browser.js('document.querySelector("[data-tools-for=layers]").getClientRects().length') == 0
        assert column(browser, "sweep-table", 0) == ["1", "2"]
        text = browser.js("document.body.innerText")
        for words in ("DOES NOT FIT a 8 GiB card", "Hand recipe", "Memory by layer", "Batch sweep"):
            assert words in text
        not_blank(browser.screenshot())
    finally:
        browser.load(page)  # scripts back on for the next test


# --- without a browser ------------------------------------------------------------------------------
def test_pages_are_small_and_fetch_nothing(tmp_path):
    pages = {"new": html_report(tmp_path, "new.html", NEW, "--gpu-mem", "8G"),
             "diff": html_report(tmp_path, "diff.html", "diff", OLD, NEW, "--gpu-mem", "8G"),
             "resnet152": html_report(tmp_path, "resnet152.html", RESNET152, "--gpu-mem", "11G")}
    for name, page in pages.items():
        text = page.read_text(encoding="utf-8")
        assert page.stat().st_size < MB, (name, page.stat().st_size)
        # no address to load anything from: the only URL is SVG's namespace name
        assert set(re.findall(r"https?://[^\s\"'<>]+", text)) <= {"http://www.w3.org/2000/svg"}, name
        assert not re.search(r"\s(src|href)=", text), name
        assert "default-src 'none'" in text
    # every row of ResNet-152's table is in the page: 721 layers, the SGD state, ClearParamDiffs, the context
    rows = csv_rows(RESNET152)
    text = pages["resnet152"].read_text(encoding="utf-8")
    table = text[text.index('<table id="layers"'):]
    assert len(rows) == 724 and table[:table.index("</table>")].count("<tr") == 1 + len(rows)


def test_html_is_a_format_of_diff_and_audit_alike():
    for args in ([NEW], ["diff", OLD, NEW]):
        r = run_in_process(*args, "--format", "html")
        assert r.returncode == 0 and r.stdout.startswith("<!DOCTYPE html>") and r.stdout.rstrip().endswith("</html>")


def test_the_explanation_holds_the_recipe_gaps_shapes_and_assumptions():
    """FCN-8s's Python data layer (samples/): a gap, where its shapes came from, and what was assumed,
    each as the text report writes it."""
    import html

    net = "samples/voc-fcn8s_train.prototxt"
    page = run_in_process(net, "--format", "html").stdout
    section = page[page.index('<section id="explanation">'):]
    items = [html.unescape(x) for x in re.findall(r"<li>(.*?)</li>", section[:section.index("</section>")])]
    text = run_in_process(net).stdout.splitlines()
    wanted = [line.strip() for line in text
              if line.startswith(("Hand recipe", "  It leaves out", "Not counted", "Data shape", "Assumed"))]
    assert sorted(items) == sorted(wanted)
    assert any(x.startswith("Not counted: layer 'data' (Python)") for x in items)
    assert any(x.startswith("Assumed: the net, layer 'data'") for x in items)
    assert len([x for x in items if x.startswith("Data shape")]) == 2
