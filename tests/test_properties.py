"""Properties every audit keeps, on random valid nets.

The nets come from a small grammar: Input or DummyData sources; Convolution, Pooling, InnerProduct,
ReLU (in place or not), BatchNorm + Scale, Concat, Eltwise, a top read twice (Caffe's Split),
Flatten and Reshape, Dropout, Softmax; SoftmaxWithLoss or EuclideanLoss at the end; parameters
shared by name, lr_mult 0 and propagate_down here and there. The generator works out every shape
by Caffe's formulas (conv_layer.cpp, pooling_layer.cpp: floor for convolution, ceil for pooling),
so each net is one Caffe would build.

The runs are derandomized (the same examples every time) and small; PROTOAUDIT_PROPERTY_EXAMPLES
sets how many examples each property tries (default 25), e.g. 1000 for a long run, and
PROTOAUDIT_PROPERTY_RANDOM=1 draws other examples at each run.
"""
import contextlib
import csv
import hashlib
import io
import json
import math
import os
import re
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protoaudit import audit, cli
from protoaudit.memory.explain import compare
from protoaudit.memory.summary import summarize

EXAMPLES = int(os.environ.get("PROTOAUDIT_PROPERTY_EXAMPLES", "25"))
RANDOM = bool(os.environ.get("PROTOAUDIT_PROPERTY_RANDOM"))  # other examples at each run, not CI's fixed ones
SETTINGS = settings(max_examples=EXAMPLES, derandomize=not RANDOM, deadline=None, database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FOLDER = tempfile.mkdtemp(prefix="protoaudit-properties-")


class Builder:
    """A net written layer by layer, with every blob's shape as Caffe would give it, and which tops
    share their data with another blob (so each data storage is known without protoaudit)."""

    def __init__(self, draw):
        self.draw = draw
        self.layers = []
        self.shapes = {}  # blob name -> shape
        self.storage = {}  # blob name -> the blob whose data it is (itself, or its bottom's)
        self.count = 0

    def name(self, kind):
        self.count += 1
        return f"{kind}{self.count}"

    def layer(self, type_, bottoms, tops, body="", params=(), propagate=True):
        name = self.name(type_.lower())
        text = [f'layer {{ name: "{name}" type: "{type_}"']
        text += [f'  bottom: "{b}"' for b in bottoms]
        text += [f'  top: "{t}"' for t in tops]
        for p in params:
            text.append(f"  param {{ {p} }}")
        if propagate and bottoms and self.draw(st.integers(0, 5)) == 0:
            text += [f"  propagate_down: {self.draw(st.sampled_from(['true', 'false']))}" for _ in bottoms]
        if body:
            text.append("  " + body)
        text.append("}")
        self.layers.append("\n".join(text))
        return name

    def top(self, name, shape, shares=None):
        self.shapes[name] = tuple(shape)
        self.storage[name] = self.storage[shares] if shares else name
        return name

    def params(self, count, shared=None):
        """`count` ParamSpecs (trailing empty ones left out): lr_mult 0 now and then, and a name when
        shared (`shared` is (name, lr_mult 0 or not): Caffe's AppendParam checks sharers agree)."""
        out = []
        for k in range(count):
            if shared:
                out.append(f'name: "{shared[0]}_{k}"' + (" lr_mult: 0" if shared[1] else ""))
            else:
                out.append("lr_mult: 0" if self.draw(st.integers(0, 4)) == 0 else "")
        while out and not out[-1]:
            out.pop()
        return out

    def text(self):
        return 'name: "random"\n' + "\n".join(self.layers) + "\n"


def source(b, batch):
    """An Input or DummyData layer: data N x C x H x W."""
    shape = (batch, b.draw(st.integers(1, 4)), b.draw(st.integers(3, 12)), b.draw(st.integers(3, 12)))
    dims = " ".join(f"dim: {d}" for d in shape)
    top = b.top("data", shape)
    if b.draw(st.booleans()):
        b.layer("Input", [], [top], f"input_param {{ shape {{ {dims} }} }}")
    else:
        b.layer("DummyData", [], [top], f"dummy_data_param {{ shape {{ {dims} }} }}")
    return top


def conv(b, x, shared=None, num_output=None, kernel=None, stride=None, pad=None):
    n, c, h, w = b.shapes[x]
    k = kernel or b.draw(st.integers(1, min(3, h, w)))
    s = stride or b.draw(st.integers(1, 2))
    p = pad if pad is not None else b.draw(st.integers(0, 1))
    out = num_output or b.draw(st.integers(1, 6))
    shape = (n, out, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1)  # conv_layer.cpp compute_output_shape
    top = b.top(b.name("c"), shape)
    b.layer("Convolution", [x], [top], f"convolution_param {{ num_output: {out} kernel_size: {k} stride: {s} pad: {p} }}",
            b.params(2, shared))
    return top


def pool(b, x):
    n, c, h, w = b.shapes[x]
    k = b.draw(st.integers(1, min(3, h, w)))
    s = b.draw(st.integers(1, 2))
    how = b.draw(st.sampled_from(["MAX", "AVE"]))
    # pooling_layer.cpp Reshape: ceil((H + 2 pad - k) / stride) + 1, no pad here (so no clip)
    shape = (n, c, math.ceil((h - k) / s) + 1, math.ceil((w - k) / s) + 1)
    top = b.top(b.name("p"), shape)
    b.layer("Pooling", [x], [top], f"pooling_param {{ pool: {how} kernel_size: {k} stride: {s} }}")
    return top


def inner_product(b, x, shared=None, num_output=None):
    out = num_output or b.draw(st.integers(1, 8))
    top = b.top(b.name("fc"), (b.shapes[x][0], out))
    b.layer("InnerProduct", [x], [top], f"inner_product_param {{ num_output: {out} }}", b.params(2, shared))
    return top


def relu(b, x):
    if b.draw(st.booleans()):
        b.layer("ReLU", [x], [x])
        return x
    top = b.top(b.name("r"), b.shapes[x])
    b.layer("ReLU", [x], [top])
    return top


def batchnorm_scale(b, x):
    """BatchNorm (its three statistics blobs at lr_mult 0, as users write it) and Scale, in place."""
    b.layer("BatchNorm", [x], [x], params=["lr_mult: 0"] * 3, propagate=False)
    b.layer("Scale", [x], [x], "scale_param { bias_term: true }", propagate=False)
    return x


def dropout(b, x):
    if b.draw(st.booleans()):
        b.layer("Dropout", [x], [x], "dropout_param { dropout_ratio: 0.5 }")
        return x
    top = b.top(b.name("d"), b.shapes[x])
    b.layer("Dropout", [x], [top], "dropout_param { dropout_ratio: 0.5 }")
    return top


def branches(b, x):
    """Two convolutions of the same top (Caffe splits it), same output size, joined by Concat or by
    Eltwise; with Eltwise the two may share their parameters by name."""
    n, c, h, w = b.shapes[x]
    join = b.draw(st.sampled_from(["Concat", "Eltwise"]))
    shared = (b.name("shared"), b.draw(st.booleans())) if join == "Eltwise" and b.draw(st.booleans()) else None
    out = b.draw(st.integers(1, 4))
    first = conv(b, x, shared, num_output=out, kernel=1, stride=1, pad=0)
    if shared:
        second = conv(b, x, shared, num_output=out, kernel=1, stride=1, pad=0)
    else:
        second = conv(b, x, num_output=out if join == "Eltwise" else b.draw(st.integers(1, 4)),
                      kernel=3 if min(h, w) >= 3 else 1, stride=1, pad=1 if min(h, w) >= 3 else 0)
    a, c2 = b.shapes[first], b.shapes[second]
    if join == "Concat":
        top = b.top(b.name("cat"), (n, a[1] + c2[1], h, w))
        b.layer("Concat", [first, second], [top])
    else:
        op = b.draw(st.sampled_from(["SUM", "PROD", "MAX"]))
        top = b.top(b.name("sum"), a)
        b.layer("Eltwise", [first, second], [top], f"eltwise_param {{ operation: {op} }}")
    return top


def flatten(b, x):
    n = b.shapes[x][0]
    rest = math.prod(b.shapes[x][1:])
    top = b.top(b.name("flat"), (n, rest), shares=x)
    if b.draw(st.booleans()):
        b.layer("Flatten", [x], [top])
    else:  # dim 0 copies the batch, -1 takes the rest: it scales with the batch
        b.layer("Reshape", [x], [top], "reshape_param { shape { dim: 0 dim: -1 } }")
    return top


SPATIAL = [conv, pool, relu, batchnorm_scale, dropout, branches, branches]
FLAT = [inner_product, relu, dropout]


@st.composite
def nets(draw, batch=None):
    """(prototxt text, Builder) of a random valid net."""
    b = Builder(draw)
    batch = batch or draw(st.integers(1, 4))
    x = source(b, batch)
    for step in draw(st.lists(st.sampled_from(SPATIAL), min_size=1, max_size=7)):
        x = step(b, x)
    if draw(st.booleans()):
        x = flatten(b, x)
    for step in draw(st.lists(st.sampled_from(FLAT), max_size=3)):
        x = step(b, x)
    loss = draw(st.sampled_from(["SoftmaxWithLoss", "EuclideanLoss", "Softmax"]))
    n = b.shapes[x][0]
    if loss == "SoftmaxWithLoss":
        score = inner_product(b, x, num_output=draw(st.integers(2, 5)))
        label = b.top("label", (n,))
        b.layer("DummyData", [], [label], f"dummy_data_param {{ shape {{ dim: {n} }} }}")
        b.layer("SoftmaxWithLoss", [score, label], [b.top("loss", ())], propagate=False)
    elif loss == "EuclideanLoss":
        target = b.top("target", b.shapes[x])
        dims = " ".join(f"dim: {d}" for d in b.shapes[x])
        b.layer("DummyData", [], [target], f"dummy_data_param {{ shape {{ {dims} }} }}")
        b.layer("EuclideanLoss", [x, target], [b.top("loss", ())], propagate=False)
    else:
        b.layer("Softmax", [x], [b.top(b.name("prob"), b.shapes[x])])
    return b.text(), b


def write(text):
    path = os.path.join(FOLDER, hashlib.sha1(text.encode()).hexdigest()[:16] + ".prototxt")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(text)
    return path


def run_cli(*argv):
    """`protoaudit ARGV` in this process: (exit status, stdout)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main([str(a) for a in argv])
    assert status == 0 and not err.getvalue(), (status, err.getvalue())
    return out.getvalue()


@SETTINGS
@given(nets())
def test_every_shape_is_the_generators_and_positive(net):
    text, b = net
    result = audit(write(text))
    for net_audit in result.nets:
        for node in net_audit.net.layers:
            for index, shape in zip(node.tops, node.top_shapes):
                assert all(d > 0 for d in shape), (node.name, shape)
                name = net_audit.net.blobs[index].name
                if name in b.shapes:  # a Split's tops are Caffe's, not the generator's
                    assert tuple(shape) == b.shapes[name], (node.name, name, shape, b.shapes[name])
            for p in node.params:
                assert p.shape and all(d > 0 for d in p.shape), (node.name, p.shape)


@SETTINGS
@given(nets(batch=1), st.integers(1, 5), st.integers(1, 6))
def test_totals_never_decrease_as_the_batch_grows(net, small, more):
    text, _ = net
    path = write(text)
    for options in ({}, {"engine": "cudnn"}, {"mode": "cpu"}, {"solver_type": "Adam"}, {"inference": True}):
        low, high = audit(path, batch=small, **options), audit(path, batch=small + more, **options)
        assert high.total_bytes >= low.total_bytes, options
        by_kind_low, by_kind_high = summarize(low).by_kind, summarize(high).by_kind
        for kind, size in by_kind_low.items():
            assert by_kind_high.get(kind, 0) >= size, (options, kind)


@SETTINGS
@given(nets())
def test_a_split_or_in_place_top_holds_one_data_buffer(net):
    """Each data storage appears once among a net's buffers, under the blob that owns it: an in-place
    top is its bottom's blob, a Split's tops and Flatten's or Reshape's top share their bottom's
    data. So the owners of the data buffers are exactly the generator's distinct storages."""
    text, b = net
    result = audit(write(text), solver_type="none")
    for net_audit in result.nets:
        owners = [x.owner for x in net_audit.buffers if x.kind == "top data"]
        assert len(owners) == len(set(owners)), owners
        assert set(owners) == set(b.storage.values()), (sorted(owners), sorted(set(b.storage.values())))
        by_owner = {x.owner: x for x in net_audit.buffers if x.kind == "top data"}
        for name, buffer in by_owner.items():
            assert buffer.elements == math.prod(b.shapes[name]), name
        keys = [(x.owner, x.kind) for x in net_audit.buffers]
        assert len(keys) == len(set(keys))


@SETTINGS
@given(nets())
def test_diff_of_a_net_with_itself_is_all_zeros(net):
    text, _ = net
    path = write(text)
    c = compare(audit(path), audit(path))
    assert c.delta == 0
    assert all(x == y for x, y in c.by_kind.values())
    assert all(d.delta == 0 and d.status == "same" for d in c.layers)
    assert all(d.delta == 0 for d in c.causes)
    diff = json.loads(run_cli("diff", path, path, "--format", "json"))
    assert diff["change_bytes"] == 0
    assert all(k["change"] == 0 for k in diff["by_kind"].values())
    assert all(layer["change"] == 0 for layer in diff["layers"])
    assert all(row[-1] == "0" for row in list(csv.reader(io.StringIO(run_cli("diff", path, path, "--format", "csv"))))[1:])


@SETTINGS
@given(nets(), nets(), st.integers(1, 3))
def test_diff_is_consistent_with_the_two_audits(net_a, net_b, batch):
    path_a, path_b = write(net_a[0]), write(net_b[0])
    a = json.loads(run_cli(path_a, "--format", "json"))
    b = json.loads(run_cli(path_b, "--format", "json", "--batch", batch))
    diff = json.loads(run_cli("diff", path_a, path_b, "--batch-b", batch, "--format", "json"))
    assert diff["change_bytes"] == b["total_bytes"] - a["total_bytes"]
    kinds = set(a["by_kind"]) | set(b["by_kind"])
    assert set(diff["by_kind"]) == kinds
    for kind in kinds:
        assert diff["by_kind"][kind] == {"a": a["by_kind"].get(kind, 0), "b": b["by_kind"].get(kind, 0),
                                         "change": b["by_kind"].get(kind, 0) - a["by_kind"].get(kind, 0)}
    assert sum(layer["change"] for layer in diff["layers"]) == diff["change_bytes"]
    assert sum(layer["bytes_b"] for layer in diff["layers"]) == b["total_bytes"]


BYTES = re.compile(r"^  (.{14}) (.{11})  ( *[\d,]+) B$")  # text.totals: kind, size, bytes


def text_figures(text):
    """From the text report: the total, and the bytes by category and by first touch."""
    total = int(re.search(r"^Total: .* \(([\d,]+) bytes\)", text, re.M).group(1).replace(",", ""))
    sections, current = {"By category:": {}, "By first touch:": {}}, None
    for line in text.splitlines():
        if line in sections:
            current = sections[line]
        elif current is not None and BYTES.match(line):
            m = BYTES.match(line)
            current[m.group(1).strip()] = int(m.group(3).replace(",", ""))
        elif current is not None:
            current = None
    return total, sections["By category:"], sections["By first touch:"]


@SETTINGS
@given(nets(), st.sampled_from([[], ["--engine", "cudnn"], ["--mode", "cpu"], ["--solver-type", "AdaDelta"],
                                 ["--inference"]]))
def test_json_csv_and_text_agree_on_every_total(net, options):
    path = write(net[0])
    as_json = json.loads(run_cli(path, "--format", "json", *options))
    rows = list(csv.DictReader(io.StringIO(run_cli(path, "--format", "csv", *options))))
    total, by_kind, by_touch = text_figures(run_cli(path, "--table", *options))
    assert as_json["total_bytes"] == total == int(rows[-1]["cumulative_bytes"])
    assert sum(int(r["total_bytes"]) for r in rows) == total
    assert as_json["by_kind"] == by_kind
    assert as_json["by_touch"] == by_touch
    per_layer = [(n["label"], layer["name"], layer["bytes"]) for n in as_json["nets"] for layer in n["layers"]]
    assert per_layer == [(r["net"], r["layer"], int(r["total_bytes"])) for r in rows][:len(per_layer)]
    for r in rows:
        columns = sum(int(r[f"{c}_bytes"]) for c in ("params", "data", "diffs", "buffers", "workspace"))
        assert columns <= int(r["total_bytes"])
    # each net's total holds the solver state and diffs labelled with its name; the context is the process's
    labels = {n["label"] for n in as_json["nets"]}
    assert sum(n["total_bytes"] for n in as_json["nets"]) + sum(
        x["bytes"] for x in as_json["extra"]
        if x["net"] not in labels and (options == ["--mode", "cpu"] or x["device"] == "device")) == total
