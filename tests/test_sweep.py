"""--sweep BATCHES: each batch's totals, held to figures derived by hand.

Seed 001's nets (samples/segnet_seed001_*.prototxt) are linear in the batch N: every buffer that
grows with N has N as its first axis. Their totals are written out below as FIXED + N x PER_IMAGE,
from the column buffers and the top sizes (caffe-segnet's buffers, as tests/test_golden.py lists
them with the source files), and checked against test_golden's layer-by-layer model. The sweep
must give exactly these, split the same way, and agree with what `protoaudit diff` says of the
pair (what grows with the batch and what does not).

A net whose totals are not linear: Caffe's ScaleLayer sizes its sum_multiplier_ as
max(outer_dim_, inner_dim_) (scale_layer.cpp, Reshape: `const int sum_mult_size =
std::max(outer_dim_, inner_dim_)`), and outer_dim_ is the batch: at batch N on a Nx2x7x7 input it
holds max(N, 49) floats. The sweep must find that and still give every batch's exact total.
"""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_golden  # noqa: E402  (the layer-by-layer hand model of seed 001)
from conftest import run_in_process  # noqa: E402

import protoaudit  # noqa: E402

OLD, NEW = "samples/segnet_seed001_old.prototxt", "samples/segnet_seed001_new.prototxt"
GiB = 2**30
CARD = 8 * GiB
CONTEXT = 300 * 2**20
INT_MAX = 2**31 - 1

# the feature maps' H x W: s0 the new net's input (769x1025, kept by conv0's pad 3, kernel 7), then
# each pooling halves it (pool0: ceil((769 - 3) / 2) + 1 = 384, ceil((1025 - 3) / 2) + 1 = 512)
S0, S1, S2, S3, S4, S5 = 769 * 1025, 384 * 512, 192 * 256, 96 * 128, 48 * 64, 24 * 32
K = 7 * 7  # every convolution but the classifier is 7x7, pad 3, stride 1: H x W in = H x W out
C = 64  # channels of every conv, BN and pooling


def hand(new):
    """(FIXED, PER_IMAGE) bytes of a seed net: what does not grow with the batch, and what each image adds."""
    encoder = [S0, S1, S2, S3, S4] if new else [S1, S2, S3, S4]  # where each encoder conv runs
    decoder = [S4, S3, S2, S1]  # conv_decode4 .. conv_decode1, each after an Upsample that doubles H and W
    convs = encoder + decoder
    first_in = 4  # the data's channels: conv0 (new) or conv1 (old) reads them
    # --- fixed (floats) ---
    # im2col column buffers, one image each: C_in x 7 x 7 x H_out x W_out; the 1x1 classifier's
    # backward also takes one, 64 x H x W
    columns = first_in * K * convs[0] + C * K * sum(convs[1:]) + C * S1
    bias_multipliers = sum(convs) + S1  # H_out x W_out per conv, the classifier's too
    params = (C * first_in * K + C) + (len(convs) - 1) * (C * C * K + C) + (3 * C + 3) + len(convs) * 2 * C
    param_copies = 3 * params  # data, diff (ClearParamDiffs), SGD history
    bn_fixed = sum(convs) + len(convs) * 2 * C  # spatial_sum_multiplier_ (H x W), batch_mean_, batch_variance_
    loss_scalars = 2  # the loss top's data and its diff (the loss weight)
    fixed = 4 * (columns + bias_multipliers + param_copies + bn_fixed + loss_scalars) + CONTEXT
    # --- per image (floats) ---
    h0 = convs[0]
    data = 4 * h0 + S1  # DummyData: the data top, and the label (384x512, in both nets)
    lrn = 2 * 4 * h0  # norm's top and its scale_
    per_conv = 2 * C  # each conv: its top, and its bottom's diff (same H x W, Caffe's backward takes it)
    conv_tops = per_conv * sum(convs[1:]) + (C + first_in) * h0  # the first conv's bottom has 4 channels
    bn = sum(2 * C * s + 2 * C + 1 for s in convs)  # buffer_blob_ and x_norm_, spatial mean/variance, batch_sum_multiplier_
    pooled = encoder[1:] + [S5]  # each pooling's output
    pools = sum(2 * C * out + C * s for s, out in zip(encoder, pooled))  # top and mask; the bottom's diff
    ups = sum(C * s + C * (s // 4) for s in decoder)  # the doubled top, and its bottom's diff
    classifier = 3 * S1 + C * S1  # its top; the bottom's diff
    split = 2 * 3 * S1  # Split's own diffs: the accuracy top's and conv_classifier's top's
    loss = 3 * S1 + (3 * S1 + S1) + 3 * S1  # prob_'s diff; prob_ and scale_; its bottom's diff as scratch
    per_image = 4 * (data + lrn + conv_tops + bn + pools + ups + classifier + split + loss)
    return fixed, per_image


def total(new, n):
    fixed, per_image = hand(new)
    return fixed + n * per_image


@pytest.mark.parametrize("new", [False, True])
def test_the_closed_form_is_the_layer_by_layer_hand_model(new):
    for n in (1, 2, 4, 8):
        rows = test_golden.seed001(new, n)
        assert total(new, n) == test_golden.total(rows)
        assert hand(new)[0] == test_golden.per_sample(rows)[1]  # the fixed part
    # the figures the diff explanation writes (seed 001: "7.05 GiB in B against 4.31 GiB in A")
    assert test_golden.size(hand(True)[0]) == "7.05 GiB" and test_golden.size(hand(False)[0]) == "4.31 GiB"
    # conv1's column buffer dominates the new net's fixed part: 64 x 49 x 384 x 512 floats
    assert 4 * C * K * S1 == 2_466_250_752


def sweep_json(*args):
    r = run_in_process(*args, "--format", "json", timeout=120)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("net, new, base", [(OLD, False, 4), (NEW, True, 1)])
def test_sweep_of_each_seed_net_is_the_hand_figures(net, new, base):
    report = sweep_json(net, "--sweep", "1,2,4,8", "--gpu-mem", "8G")
    fixed, per_image = hand(new)
    assert [r["batch"] for r in report["sweep"]] == [1, 2, 4, 8]
    for row in report["sweep"]:
        n = row["batch"]
        assert row["total_bytes"] == fixed + n * per_image
        assert row["fixed_bytes"] == fixed and row["per_sample_bytes"] == n * per_image
        assert row["other_engine_total_bytes"] == test_golden.total(test_golden.seed001(new, n, "cudnn"))
        assert row["fits"] is (row["total_bytes"] <= CARD)
        assert row["how"] == "scaled" and row["refused"] is None
    basis = report["sweep_basis"]
    assert basis["how"] == "scaled" and basis["base_batch"] == base and basis["not_scaling"] == []
    assert basis["refused_at"] is None
    assert basis["checked_at"] == sorted({1, 8, base})
    # the sweep's row at the audited batch is the audit itself
    row = next(r for r in report["sweep"] if r["batch"] == base)
    assert row["total_bytes"] == report["total_bytes"] and row["other_engine_total_bytes"] == report[
        "other_engine_total_bytes"]
    # seed 001: the old net fits 8 GiB up to batch 5, the new one not even at batch 1
    assert [r["fits"] for r in report["sweep"]] == ([True, True, True, False] if not new else [False] * 4)


def test_sweep_agrees_with_the_diff_explanation():
    diff = sweep_json("diff", OLD, NEW)
    old, new = sweep_json(OLD, "--sweep", "1,2,4,8"), sweep_json(NEW, "--sweep", "1,2,4,8")
    at_4 = next(r for r in old["sweep"] if r["batch"] == 4)  # A runs batch 4
    at_1 = next(r for r in new["sweep"] if r["batch"] == 1)  # B runs batch 1
    assert diff["batch_invariant"] == {"a": at_4["fixed_bytes"], "b": at_1["fixed_bytes"]} == {
        "a": hand(False)[0], "b": hand(True)[0]}
    assert diff["per_sample"] == {"a": at_4["per_sample_bytes"], "b": at_1["per_sample_bytes"]} == {
        "a": 4 * hand(False)[1], "b": hand(True)[1]}
    size = test_golden.size
    assert diff["explanation"][1] == (
        "What does not grow with the batch (parameters and their diffs, solver state, column buffers, workspaces, "
        f"the context): {size(hand(True)[0])} in B against {size(hand(False)[0])} in A. What grows with it (tops, "
        f"their diffs, per-sample buffers): {size(hand(True)[1])} against {size(4 * hand(False)[1])}.")


def test_sweep_text_markdown_and_csv_carry_the_same_rows():
    fixed, per_image = hand(False)
    text = run_in_process(OLD, "--sweep", "1,2,4,8", "--gpu-mem", "8G")
    lines = text.stdout.splitlines()
    start = lines.index("Batch sweep (on a 8 GiB card):")
    assert lines[start + 1].split() == ["batch", "total", "(caffe)", "with", "cudnn", "grows", "with", "the", "batch",
                                        "does", "not", "card"]
    assert [line.split()[0] for line in lines[start + 3:start + 7]] == ["1", "2", "4", "8"]
    assert lines[start + 6].endswith("does not fit") and lines[start + 5].endswith("fits")
    assert test_golden.size(fixed + 8 * per_image) in lines[start + 6]
    assert lines[start + 7] == ("Totals scaled from the audit at batch 4: every buffer that grows with the batch has it "
                                "as its first axis and the rest stays the same, as audits at batch 1 and 8 confirm. "
                                "The card column counts each row's cudaMalloc pages (2 MiB pages, 512-byte slots) "
                                "beside its total, as the verdict does.")
    md = run_in_process(OLD, "--sweep", "1,2,4,8", "--format", "markdown").stdout
    assert f"| 8 | {test_golden.size(fixed + 8 * per_image)} |" in md
    csv_out = run_in_process(OLD, "--sweep", "1..3", "--format", "csv").stdout.splitlines()
    assert csv_out[0] == "batch,total_bytes,other_engine_total_bytes,per_sample_bytes,fixed_bytes,fits,how,refused"
    assert [line.split(",")[:2] for line in csv_out[1:]] == [[str(n), str(fixed + n * per_image)] for n in (1, 2, 3)]


def test_batches_caffe_refuses_are_said_and_the_rest_stay_exact():
    # the new net's conv0 top is N x 64 x 769 x 1025: over INT_MAX elements from N = 43 on
    assert 42 * C * S0 <= INT_MAX < 43 * C * S0
    report = sweep_json(NEW, "--sweep", "1..64")
    fixed, per_image = hand(True)
    for row in report["sweep"]:
        if row["batch"] < 43:
            assert row["total_bytes"] == fixed + row["batch"] * per_image, row
        else:
            assert row["total_bytes"] is None and "a Caffe blob holds at most 2,147,483,647" in row["refused"]
    assert report["sweep_basis"]["how"] == "audited" and report["sweep_basis"]["refused_at"] == 64
    assert "Caffe refuses the net at batch 64" in report["sweep_basis"]["description"]
    text = run_in_process(NEW, "--sweep", "1..64").stdout
    assert text.count("Caffe refuses the net:") == 1  # one line for the batches 43 to 64
    assert "At batches 43 to 64, Caffe refuses the net: " in text


KINK = '''name: "kink"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 2 dim: 7 dim: 7 } } }
layer { name: "scale" type: "Scale" bottom: "data" top: "s" scale_param { bias_term: false } }
'''


def kink_total(n):
    """Bytes at batch n, no context: the data top and Scale's top (n x 2 x 7 x 7 floats each), its
    scale (2 floats) with the diff and SGD history the solver keeps, and sum_multiplier_, max(n, 49)
    floats (the net has no loss, so nothing runs backward)."""
    return 4 * (2 * n * 2 * 49 + 3 * 2 + max(n, 7 * 7))


def test_a_net_that_is_not_linear_in_the_batch_is_audited_where_it_bends(tmp_path):
    net = tmp_path / "kink.prototxt"
    net.write_text(KINK)
    report = sweep_json(net, "--sweep", "1..64", "--context", "0")
    assert [r["total_bytes"] for r in report["sweep"]] == [kink_total(n) for n in range(1, 65)]
    basis = report["sweep_basis"]
    assert basis["how"] == "audited"
    assert [(m["owner"], m["expected_bytes"], m["audited_bytes"]) for m in basis["not_scaling"]] == [
        ("scale.sum_multiplier_", 4 * 49, 4 * 64)]
    how = {r["batch"]: r["how"] for r in report["sweep"]}
    # the bend at 49 is audited around; far from it, rows are read off the line between audits
    assert how[48] == how[49] == how[50] == "audited" and how[1] == how[64] == "audited"
    assert sum(h == "audited" for h in how.values()) < 20 and "interpolated" in how.values()
    assert "scale.sum_multiplier_ (layer buffer): 196 B expected at batch 64, 256 B audited" in basis["description"]


def test_the_library_sweep_is_the_commands():
    result = protoaudit.audit(NEW, sweep=[8, 1, 2, 4, 2], gpu_mem="8G")
    assert [r.batch for r in result.sweep.rows] == [1, 2, 4, 8]
    assert [r.total for r in result.sweep.rows] == [total(True, n) for n in (1, 2, 4, 8)]
    assert result.to_dict()["sweep"] == sweep_json(NEW, "--sweep", "1,2,4,8", "--gpu-mem", "8G")["sweep"]


@pytest.mark.parametrize("value, says", [("0", "from 1 up"), ("8..1", "from 1 up"), ("x", "'x' is not a batch"),
                                         ("1..5000", "more than 1024 batches"), ("", "is not a batch")])
def test_a_bad_sweep_is_one_line_and_exit_2(value, says):
    r = run_in_process(OLD, "--sweep", value)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and says in r.stderr and r.stderr.startswith("protoaudit: --sweep")


def test_plot_with_a_sweep_draws_memory_against_the_batch(tmp_path):
    pytest.importorskip("matplotlib")
    import xml.etree.ElementTree as ET

    out = tmp_path / "sweep.svg"
    r = run_in_process(OLD, "--sweep", "1,2,4,8", "--gpu-mem", "8G", "--plot", out, timeout=120)
    assert r.returncode == 0, r.stderr
    ids = {g.get("id"): g for g in ET.parse(out).getroot().iter("{http://www.w3.org/2000/svg}g") if g.get("id")}
    assert {"sweep-total", "sweep-other", "sweep-fixed", "card"} <= set(ids)
    # one point per batch on the total's line (matplotlib writes the line as one path of 4 points)
    path = next(ids["sweep-total"].iter("{http://www.w3.org/2000/svg}path")).get("d")
    assert len([c for c in path.split() if c in ("M", "L")]) == 4
