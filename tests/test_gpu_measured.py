"""protoaudit's GPU terms against real GPUs' (tests/data/gpu_measured, measured by bench/gpu/measure.py
on an H200 and an H100, driver 580, CUDA 13, cuDNN 9.19; README.md there).

- cudaMalloc's pages: protoaudit.memory.cuda_pages against the drop in free memory the device showed
  for N allocations of one size, for three orders of mixed sizes, and for every device buffer of
  seven nets under both engines as protoaudit lists them, one cudaMalloc each.
- The CUDA context and library handles: what a process holds before its first buffer, against the
  default --context, which is set for the cards of Caffe's users (200 to 700 MB, tests/test_gpu_reports.py).
- cuDNN's workspaces under Caffe's rule, against protoaudit's cuDNN-engine estimate.
- Seed 001 replayed on its 8 GB card with the measured terms.
"""
import json
import os

import pytest

from conftest import DATA, ROOT, run_in_process
from protoaudit.memory.cuda_pages import PAGE, taken
from protoaudit.options import DEFAULT_CONTEXT_BYTES

MEASURED = os.path.join(DATA, "gpu_measured")
FACTS = json.load(open(os.path.join(MEASURED, "h200_cuda13.json")))
CARDS = {"H200": FACTS, "H100": json.load(open(os.path.join(MEASURED, "h100_cuda13.json")))}  # same driver


def on_each_card(pick):
    """pytest params (card, item) for each item `pick` takes from each card's facts."""
    return [pytest.param(card, item, id=f"{card}-{name}") for card, facts in CARDS.items()
            for name, item in pick(facts)]
SIZES = json.load(open(os.path.join(MEASURED, "buffers.json")))  # what the device allocated, per net
CONVS = json.load(open(os.path.join(MEASURED, "convs.json")))  # what it asked cuDNN about
SAMPLES = os.path.join(ROOT, "samples")
MiB, GiB = 2**20, 2**30


def run_json(*args):
    run = run_in_process(*args, "--format", "json", timeout=300)
    assert run.returncode in (0, 1), run.stderr
    return run.returncode, json.loads(run.stdout)


def stage(stages, name):
    return next(s for s in stages if s["stage"] == name)


def held_after(stages, name):
    """The device's used memory after a stage, above the first stage's."""
    return stage(stages, name)["nvml_used"] - stages[0]["nvml_used"]


# --- cudaMalloc ----------------------------------------------------------------------------------------

def by_size(runs):
    return [(f"{r['size']}x{r['n']}", r) for r in runs]


@pytest.mark.parametrize("card,run", on_each_card(lambda f: by_size(f["malloc"]["sizes"])))
def test_n_allocations_of_one_size(card, run):
    """After each allocation too: the first 1 MiB takes a page, the second shares it."""
    assert [taken([run["size"]] * (i + 1)) for i in range(run["n"])] == run["drop_after_each"]
    assert run["left_after_free"] == 0


@pytest.mark.parametrize("card,run", on_each_card(lambda f: by_size(f["pages"]["slots"])))
def test_slots_in_shared_pages(card, run):
    assert taken([run["size"]] * run["n"]) == run["drop"] == run["pages"] * PAGE


@pytest.mark.parametrize("card,item", on_each_card(lambda f: [(k, (k, v)) for k, v in
                                                             sorted(f["pages"]["orders"].items())]))
def test_mixed_orders_take_the_fullest_page_that_fits(card, item):
    """1.0, 1.5, 0.5, 1.0 MiB: first fit would put the 0.5 beside the 1.0 and need a third page."""
    order, taken_bytes = item
    assert taken([int(float(x) * MiB) for x in order.split(",")]) == taken_bytes == 2 * PAGE


def test_slots_are_512_bytes_by_the_count_per_page():
    """A page holds 2 MiB / slot allocations: read from where the device took each new page."""
    per_page = {r["size"]: r["steps"][1][0] - r["steps"][0][0] for r in FACTS["pages"]["slots"] if len(r["steps"]) > 1}
    assert per_page[1] == per_page[512] == PAGE // 512
    assert per_page[513] == per_page[1024] == PAGE // 1024
    assert per_page[1025] == PAGE // 1536 and per_page[4097] == PAGE // 4608


@pytest.mark.parametrize("card,net", on_each_card(lambda f: [(n, n) for n in sorted(f["malloc"]["nets"])]))
def test_every_buffer_of_a_net_one_cudamalloc_each(card, net):
    """The device's drop for every buffer of the audit, one cudaMalloc each, to the byte: 14 runs
    (7 nets, both engines) on each card, all but the SegNets' and ResNet-50's on the H200 measured
    after the rule was written. The sizes are protoaudit's, which test_oracle.py holds to real
    Caffe's on CPU."""
    run, sizes = CARDS[card]["malloc"]["nets"][net], SIZES[net]
    assert (len(sizes), sum(sizes)) == (run["buffers"], run["requested"])
    assert taken(sizes) == run["drop"]
    assert run["drop"] > run["requested"]


@pytest.mark.parametrize("net,args", [
    ("segnet_seed001_new_b1_caffe", ("segnet_seed001_new.prototxt", "--batch", 1)),
    ("segnet_seed001_old_b4_cudnn", ("segnet_seed001_old.prototxt", "--batch", 4, "--engine", "cudnn")),
])
def test_the_audits_pages_are_what_the_device_took(net, args):
    """The same net audited (no context): its total is the bytes the device was asked for, and with
    the pages the report gives beside it, what the device took."""
    _, result = run_json(os.path.join(SAMPLES, args[0]), *args[1:], "--mode", "gpu", "--context", "0")
    run = FACTS["malloc"]["nets"][net]
    assert result["total_bytes"] == run["requested"]
    assert result["total_bytes"] + result["cudamalloc_pages_bytes"] == run["drop"]


def test_no_pages_in_cpu_mode():
    _, result = run_json(os.path.join(SAMPLES, "segnet_seed001_old.prototxt"), "--batch", 4, "--mode", "cpu")
    assert result["cudamalloc_pages_bytes"] is None


# --- the context and handles ---------------------------------------------------------------------------

def test_context_and_handles_on_the_h200():
    lazy, eager = FACTS["context_lazy"]["stages"], FACTS["context_eager"]["stages"]
    context = held_after(lazy, "context (cudaFree(0))")
    assert context == held_after(eager, "context (cudaFree(0))") == 552_402_944  # 526.8 MiB
    # the H100 of the same driver holds the same context and library handles, stage by stage
    h100 = CARDS["H100"]["context_lazy"]["stages"]
    assert [held_after(h100, s["stage"]) for s in h100[:-1]] == [held_after(lazy, s["stage"]) for s in lazy[:-1]]
    # Caffe::Caffe() makes one cuBLAS handle and one cuRAND generator: 594.8 MiB lazily loaded
    assert held_after(lazy, "cuRAND seed") == 623_706_112
    assert held_after(eager, "cuRAND seed") == 1_038_942_208  # every module loaded at once: 990.8 MiB
    # protoaudit's default is below what a modern card's driver holds: it is set for Caffe-era cards
    assert DEFAULT_CONTEXT_BYTES < context


def test_a_cudnn_handle_and_a_stream():
    """Each cudnnCreate after the first takes 8.75 MiB on cuDNN 9.19; each stream 576 KiB; a cuDNN
    convolution layer in Caffe makes three of each per group (cudnn_conv_layer.cpp)."""
    rows = FACTS["handles"]["stages"]
    assert (held_after(rows, "64 more cuDNN handles") - held_after(rows, "1 cuDNN handle")) / 64 == 8.75 * MiB
    assert (held_after(rows, "64 streams") - held_after(rows, "64 more cuDNN handles")) / 64 == 0.5625 * MiB
    assert held_after(rows, "cudnnSetStream on 64 of those handles") == held_after(rows, "64 streams")


# --- cuDNN's workspaces ----------------------------------------------------------------------------------

CAFFE_LIMIT = 8 * MiB  # cudnn_conv_layer.cpp: workspace_limit_bytes


def caffe_pick(ranked, limit):
    """Caffe's rule on the _v7 ranking: the first algorithm that runs within the limit."""
    return next(r for r in ranked if r["status"] == 0 and r["memory"] <= limit)["memory"]


def measured_workspace(net, conv, ranked):
    if net["rule"] == "2015":  # caffe-segnet: forward only, under kh*kw*C_in ints
        return caffe_pick(ranked["fwd"], 4 * conv["bottom"][1] * conv["kernel"][0] * conv["kernel"][1])
    need = max(caffe_pick(ranked[k], CAFFE_LIMIT) for k in ("fwd", "bwd_data", "bwd_filter"))
    return need * conv["group"] * 3


WORKSPACE_NETS = {  # the nets of convs.json, as bench/gpu/inputs.py audited them
    "resnet50_b1": (os.path.join(DATA, "oracle", "nets", "resnet50_deploy__TRAIN__b1__fb.prototxt"),),
    "resnet50_b4": (os.path.join(DATA, "oracle", "nets", "resnet50_deploy__TRAIN__b4__fb.prototxt"),),
    "segnet_seed001_old_b4": (os.path.join(SAMPLES, "segnet_seed001_old.prototxt"), "--batch", 4),
    "segnet_seed001_new_b1": (os.path.join(SAMPLES, "segnet_seed001_new.prototxt"), "--batch", 1),
}


@pytest.mark.parametrize("label", sorted(CONVS))
def test_cudnn_workspaces_against_the_estimate(label):
    """What cuDNN 9.19's heuristic asks for under Caffe's limit, against protoaudit's estimate (one
    group's im2col for one image, capped at the limit). Each layer's stays under the limit's bound;
    the net's total within a factor of three of cuDNN's: ResNet-50 asks 494 MB at batch 1 and 652 MB
    at batch 4 against protoaudit's 249 MB. The SegNets' forward-only limit leaves cuDNN no
    workspace at all, against protoaudit's 89-101 KB. (cuDNN 9 cannot build Caffe's cuDNN code,
    which calls the cuDNN 7 API; the estimate stays, and the docs give these figures.)"""
    net, ranked = CONVS[label], FACTS["cudnn"]["nets"][label]
    assert CARDS["H100"]["cudnn"]["nets"][label] == ranked  # the same heuristic choices on an H100
    _, result = run_json(*WORKSPACE_NETS[label], "--mode", "gpu", "--engine", "cudnn", "--context", "0")
    ours = {b["owner"]: b["bytes"] for layer in result["nets"][0]["layers"] for b in layer["buffers"]
            if b["kind"] == "workspace"}
    assert sorted(ours) == sorted(f"{c['layer']}.workspace" for c in net["convs"])
    theirs = 0
    for conv, r in zip(net["convs"], ranked):
        assert r["layer"] == conv["layer"]
        k = conv["kernel"]
        cap = CAFFE_LIMIT * conv["group"] * 3 if net["rule"] == "bvlc" else 4 * conv["bottom"][1] * k[0] * k[1]
        need = measured_workspace(net, conv, r)
        assert need <= cap and ours[f"{conv['layer']}.workspace"] <= cap
        theirs += need
    if net["rule"] == "bvlc":
        assert theirs / 3 <= sum(ours.values()) <= theirs
    else:
        assert theirs == 0 and sum(ours.values()) < 128 * 1024


# --- seed 001 with the measured terms --------------------------------------------------------------------

@pytest.mark.parametrize("sample,batch,net,fits", [
    ("segnet_seed001_old.prototxt", 4, "segnet_seed001_old_b4_caffe", True),
    ("segnet_seed001_new.prototxt", 1, "segnet_seed001_new_b1_caffe", False),
])
def test_seed_001_on_its_8_gb_card_with_the_measured_terms(sample, batch, net, fits):
    """The user's two nets (Caffe engine, as the user's log shows) on the 8 GB card, with the
    measured terms: what the device took for each buffer, one cudaMalloc each, and the context with
    Caffe's cuBLAS handle and cuRAND generator as an H200 holds it. The old net fits and the new one
    does not, as the user found. protoaudit, given that context, says the same, and its verdict's
    figure (the total and the pages) is the device's bytes."""
    context = held_after(FACTS["context_lazy"]["stages"], "cuRAND seed")
    measured = FACTS["malloc"]["nets"][net]["drop"] + context
    assert (measured <= 8 * GiB) is fits
    status, result = run_json(os.path.join(SAMPLES, sample), "--batch", batch, "--gpu-mem", "8GiB",
                              "--context", f"{context}B")
    assert result["total_bytes"] + result["cudamalloc_pages_bytes"] == result["fit"]["total_bytes"] == measured
    assert result["fit"]["fits"] is fits and status == (0 if fits else 1)


def test_a_card_the_buffers_fit_but_not_with_their_pages():
    """A card 10 MiB above the old SegNet's total (no context): its buffers would fit, but with the
    pages the device took for them they do not, and the verdict says so, with the device's figure."""
    from protoaudit.report.units import size

    run = FACTS["malloc"]["nets"]["segnet_seed001_old_b4_caffe"]
    card = run["requested"] + 10 * MiB
    _, result = run_json(os.path.join(SAMPLES, "segnet_seed001_old.prototxt"), "--batch", 4, "--context", "0",
                         "--gpu-mem", f"{card}B")
    assert result["total_bytes"] < card < result["fit"]["total_bytes"] == run["drop"]
    assert result["fit"]["fits"] is False
    out = run_in_process(os.path.join(SAMPLES, "segnet_seed001_old.prototxt"), "--batch", 4, "--context", "0",
                         "--gpu-mem", f"{card}B")
    assert out.returncode == 1
    assert f"DOES NOT FIT a {size(card)} card: {size(run['drop'])} needed, {size(run['drop'] - card)} too much." \
        in out.stdout.splitlines()


@pytest.mark.parametrize("net,card", [
    ("resnet50_deploy__TRAIN__b4__fb.prototxt", "11G"),  # pages 1.8-5% of the total there
    ("squeezenet_v1.1_train_val__TRAIN__b4.prototxt", "3G"),  # batch 63's buffers fit, with their pages not
])
def test_the_largest_batch_with_pages_is_what_audits_at_it_say(net, card):
    """The search reads its batch off the buffers' rule, then lowers it until the rule's buffers fit
    with their pages: audits at that batch and the next, each with its own pages, confirm it."""
    import protoaudit
    from protoaudit.memory.fit import on_card
    from protoaudit.options import parse_size

    path = os.path.join(DATA, "oracle", "nets", net)
    largest = protoaudit.audit(path, gpu_mem=card).fit.largest_batch
    budget = parse_size(card)
    at, after = protoaudit.audit(path, batch=largest), protoaudit.audit(path, batch=largest + 1)
    assert on_card(at) <= budget < on_card(after)
    assert at.total_bytes <= budget  # (and the buffers alone may fit the next batch: the pages decide)


def test_the_sweeps_card_column_counts_the_pages_as_the_verdict_does():
    """SqueezeNet on 3 GiB: the sweep's card column turns at the verdict's largest batch, where the
    buffers alone would still fit (test_the_largest_batch_with_pages_is_what_audits_at_it_say)."""
    import protoaudit

    path = os.path.join(DATA, "oracle", "nets", "squeezenet_v1.1_train_val__TRAIN__b4.prototxt")
    result = protoaudit.audit(path, gpu_mem="3G", sweep=list(range(60, 67)))
    largest = result.fit.largest_batch
    assert 60 <= largest < 66
    assert [r.fits for r in result.sweep.rows] == [r.batch <= largest for r in result.sweep.rows]
    assert all(r.total <= 3 * GiB for r in result.sweep.rows if r.batch == largest + 1)
    assert "counts each row's cudaMalloc pages" in result.sweep.describe()
