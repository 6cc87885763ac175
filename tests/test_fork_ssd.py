"""The SSD fork (weiliu89/caffe, branch ssd, 4817bf8): its schema, its layers' shapes and buffers,
and protoaudit against real runs of the fork.

Expected values come from the fork's own runs (tests/data/fork_oracle/ssd: its `Top shape:` and
`Memory required for data` log lines, and its heap measured byte for byte after one forward and one
backward in CPU mode), or are derived by hand below from the fork's sources, cited by file:line
(src/caffe/layers/ and src/caffe/util/ at that commit).
"""
import csv
import json
import os
import re

import pytest

from conftest import DATA, ROOT, build_text as build, by_layer, run_in_process, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import host_objects, net_buffers, runs_backward
from protoaudit.read.load import load

CORPUS = os.path.join(DATA, "corpus", "nets")
ORACLE = os.path.join(DATA, "fork_oracle", "ssd")
F = 4  # bytes per float


def owners(buffers, layer):
    return {b.owner[len(layer) + 1:]: b.bytes for b in buffers if b.layer == layer and b.owner.startswith(layer + ".")}


def cpu_buffers(net):
    """What the fork's runs measured: CPU mode, no solver, one forward and one backward."""
    return net_buffers(net, mode="cpu", backward=runs_backward(net)) + [host_objects(net)]


# --- the schema --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["mobilenet_ssd_train", "mobilenet_ssd_deploy"])
def test_corpus_ssd_nets_are_read_with_the_ssd_schema(name):
    assert load(os.path.join(CORPUS, name + ".prototxt")).schema.name == "ssd"


def test_the_ssd_proto_is_the_forks_file_verbatim():
    """Header comment naming repository, path and commit; then the fork's own text, whose
    fields the corpus nets use have the fork's numbers (caffe.proto: PriorBoxParameter, ...)."""
    text = open(os.path.join(ROOT, "proto", "forks", "ssd.proto")).read()
    assert text.startswith("// weiliu89/caffe (branch ssd), src/caffe/proto/caffe.proto at commit "
                           "4817bf8b4200b35ada8ed0dc378dceaf38c539e4")
    assert "optional PriorBoxParameter prior_box_param = 203;" in text
    assert "optional MultiBoxLossParameter multibox_loss_param = 201;" in text
    assert "optional AnnotatedDataParameter annotated_data_param = 200;" in text


def test_a_bvlc_net_is_still_read_with_bvlcs_schema():
    assert load(os.path.join(CORPUS, "lenet_train_test.prototxt")).schema.name == "bvlc"


# --- PriorBox ------------------------------------------------------------------------------------

HEAD = """
layer { name: "input" type: "Input" top: "x" top: "img"
        input_param { shape { dim: 2 dim: 6 dim: 5 dim: 7 } shape { dim: 2 dim: 3 dim: 100 dim: 100 } } }
"""


def prior(params, bottoms='bottom: "x" bottom: "img"'):
    return HEAD + f'layer {{ name: "p" type: "PriorBox" {bottoms} top: "p" prior_box_param {{ {params} }} }}'


@pytest.mark.parametrize("params, priors", [
    # prior_box_layer.cpp:17-45: aspect ratio 1, then each new ratio and (flip) its inverse, per
    # min_size; one more per max_size; flip is true by default (caffe.proto PriorBoxParameter)
    ("min_size: 20", 1),
    ("min_size: 20 max_size: 40", 2),
    ("min_size: 20 aspect_ratio: 2 flip: false", 2),
    ("min_size: 20 aspect_ratio: 2", 3),
    ("min_size: 20 aspect_ratio: 2 aspect_ratio: 0.5 flip: true", 3),  # 0.5 is 1/2's flip already
    ("min_size: 20 max_size: 40 aspect_ratio: 2 aspect_ratio: 3 flip: true", 6),
    ("min_size: 10 min_size: 30 aspect_ratio: 2 flip: false", 4),
    ("min_size: 10 min_size: 30 max_size: 20 max_size: 60 aspect_ratio: 2 flip: true", 8),
    ("min_size: 20 aspect_ratio: 1", 1),  # 1 is there already
])
def test_prior_box_top_holds_four_corners_and_four_variances_per_prior(tmp_path, params, priors):
    # prior_box_layer.cpp:104-118: (1, 2, H * W * priors * 4), H x W the feature map (5 x 7)
    assert tops(build(tmp_path, prior(params)), "p") == [(1, 2, 5 * 7 * priors * 4)]


@pytest.mark.parametrize("params, message", [
    ("", "must provide min_size"),
    ("min_size: 20 max_size: 10", "max_size 10.0 must be greater than min_size 20.0"),
    ("min_size: 20 min_size: 30 max_size: 40", "one max_size per min_size"),
    ("min_size: 20 variance: 0.1 variance: 0.2", "1 or 4 variances"),
    ("min_size: 20 img_size: 100 img_h: 100", "Either img_size or img_h/img_w"),
    ("min_size: 20 step: 8 step_w: 8", "Either step or step_h/step_w"),
])
def test_prior_box_refuses_what_the_fork_checks(tmp_path, params, message):
    with pytest.raises(InputError, match=re.escape(message)):
        build(tmp_path, prior(params))


def test_prior_box_reads_the_image_size_from_bottom_1_unless_given(tmp_path):
    """The header misspells ExactNumBottomBlobs (prior_box_layer.hpp:41), so one bottom is
    allowed; Forward_cpu reads bottom[1] only when img_size/img_h/img_w are not set."""
    assert tops(build(tmp_path, prior("min_size: 20 img_size: 100", 'bottom: "x"')), "p") == [(1, 2, 140)]
    with pytest.raises(InputError, match="image size from bottom 1"):
        build(tmp_path, prior("min_size: 20", 'bottom: "x"'))


def test_mobilenet_ssd_has_1917_priors():
    """MobileNet-SSD's six maps: 19x19 with 3 priors (min 60, ratio 2 flipped), then 10x10, 5x5,
    3x3, 2x2, 1x1 with 6 each (a max_size and ratios 2, 3 flipped): 1083 + 6 * 139 = 1917."""
    net = build_nets(os.path.join(CORPUS, "mobilenet_ssd_deploy.prototxt"), phase="TEST")[0]
    sizes = {"conv11": 19 * 19 * 3, "conv13": 10 * 10 * 6, "conv14_2": 5 * 5 * 6, "conv15_2": 3 * 3 * 6,
             "conv16_2": 2 * 2 * 6, "conv17_2": 1 * 1 * 6}
    for name, priors in sizes.items():
        assert tops(net, f"{name}_mbox_priorbox") == [(1, 2, priors * 4)]
    assert sum(sizes.values()) == 1917
    assert tops(net, "mbox_priorbox") == [(1, 2, 1917 * 4)]


def test_a_prior_count_the_location_layers_do_not_match_says_whose_count_it_is(tmp_path):
    """MobileNet-SSD's conv11_mbox_loc predicts 3 priors x 4 coordinates per location (num_output 12);
    given 16, the location predictions no longer match the 1917 priors and DetectionOutput's CHECK
    fails in SSD's Caffe. The message says the count is SSD's PriorBox's: sfzhang15/FaceBoxes's deploy net, whose fork makes
    21 priors per location from three min_sizes where SSD's makes 3, was told "Caffe stops here too"
    (tried as a new user would)."""
    text = open(os.path.join(CORPUS, "mobilenet_ssd_deploy.prototxt")).read()
    loc = re.search(r'name: "conv11_mbox_loc".*?num_output: 12', text, re.S)
    assert loc is not None  # 3 priors x 4 coordinates at conv11
    (tmp_path / "n.prototxt").write_text(text[:loc.end() - 2] + "16" + text[loc.end():])
    with pytest.raises(InputError) as refused:
        build_nets(str(tmp_path / "n.prototxt"), phase="TEST")
    said = str(refused.value)
    assert "Number of priors must match number of location predictions: 1917 priors" in said
    assert "SSD's Caffe stops here too" in said and "FaceBoxes" in said


# --- Permute -------------------------------------------------------------------------------------

@pytest.mark.parametrize("order, shape", [
    ("order: 0 order: 2 order: 3 order: 1", (2, 5, 7, 6)),
    ("order: 3 order: 1", (7, 6, 2, 5)),  # the axes not named follow in their own order
    ("order: 0 order: 1", (2, 6, 5, 7)),
    ("", (2, 6, 5, 7)),
])
def test_permute_orders_the_axes(tmp_path, order, shape):
    # permute_layer.cpp:34-71
    text = HEAD + f'layer {{ name: "p" type: "Permute" bottom: "x" top: "p" permute_param {{ {order} }} }}'
    assert tops(build(tmp_path, text), "p") == [shape]


@pytest.mark.parametrize("order, message", [("order: 4", "less than the input's 4 axes"),
                                            ("order: 1 order: 1", "duplicate orders")])
def test_permute_refuses_bad_orders(tmp_path, order, message):
    text = HEAD + f'layer {{ name: "p" type: "Permute" bottom: "x" top: "p" permute_param {{ {order} }} }}'
    with pytest.raises(InputError, match=message):
        build(tmp_path, text)


def test_permute_that_changes_nothing_shares_its_bottom(tmp_path):
    """permute_layer.cpp:110-113, 129-132: ShareData forward, ShareDiff backward; a real permute
    keeps three int vectors of one entry per axis (permute_order_, old_steps_, new_steps_)."""
    text = "force_backward: true\n" + HEAD + """
layer { name: "same" type: "Permute" bottom: "x" top: "same" permute_param { order: 0 order: 1 } }
layer { name: "moved" type: "Permute" bottom: "x" top: "moved" permute_param { order: 0 order: 2 order: 3 order: 1 } }
"""
    buffers = cpu_buffers(build(tmp_path, text))
    assert owners(buffers, "same") == {}
    assert owners(buffers, "moved") == {"permute_order_": 4 * F, "old_steps_": 4 * F, "new_steps_": 4 * F}
    assert not [b for b in buffers if b.owner == "same"]  # no blob of its own: it is x's


# --- Normalize -----------------------------------------------------------------------------------

def test_normalize_buffers_by_hand(tmp_path):
    """normalize_layer.cpp, bottom (2, 6, 5, 7), CPU: setup sum_channel_multiplier_ (C) and
    sum_spatial_multiplier_ (H*W), the scale (C, or 1 shared); forward buffer_ (C*H*W, one image),
    norm_ (N*H*W, or N across_spatial); backward buffer_channel_ (C), buffer_spatial_ (H*W)."""
    text = "force_backward: true\n" + HEAD + """
layer { name: "n" type: "Normalize" bottom: "x" top: "n" norm_param { across_spatial: false channel_shared: false } }
layer { name: "s" type: "Normalize" bottom: "x" top: "s" norm_param { across_spatial: true channel_shared: true } }
"""
    net = build(tmp_path, text)
    assert [p.shape for p in net.layer("n").params] == [(6,)]
    assert [p.shape for p in net.layer("s").params] == [()]
    buffers = cpu_buffers(net)
    assert owners(buffers, "n") == {"sum_channel_multiplier_": 6 * F, "sum_spatial_multiplier_": 35 * F,
                                    "buffer_": 6 * 35 * F, "norm_": 2 * 35 * F, "buffer_channel_": 6 * F,
                                    "buffer_spatial_": 35 * F, "param0": 6 * F}
    assert owners(buffers, "s")["norm_"] == 2 * F


# --- MultiBoxLoss --------------------------------------------------------------------------------

def test_multibox_loss_rows_worst_case_and_defined():
    """Worst case: every prior of every image matched (M = N * priors) and so no negatives
    left; with K matched per image MAX_NEGATIVE mines min(K * neg_pos_ratio, priors - K) more
    (bbox_util.cpp:950-960)."""
    path = os.path.join(CORPUS, "mobilenet_ssd_train.prototxt")
    net = build_nets(path)[0]
    layer = net.layer("mbox_loss").impl
    assert layer.rows(24, 1917) == (24 * 1917, 24 * 1917)
    layer.ctx.defines = {"matched_priors": 10}
    assert layer.rows(24, 1917) == (240, 240 + 24 * 30)
    layer.ctx.defines = {"matched_priors": 1900}
    assert layer.rows(24, 1917) == (24 * 1900, 24 * 1917)


def test_multibox_loss_assumption_is_reported():
    net = build_nets(os.path.join(CORPUS, "mobilenet_ssd_train.prototxt"))[0]
    said = [a for a in net.assumptions if a.layer == "mbox_loss"]
    assert len(said) == 1 and "--define matched_priors=" in said[0].override
    net = build_nets(os.path.join(CORPUS, "mobilenet_ssd_train.prototxt"), defines={"matched_priors": 8})[0]
    assert not [a for a in net.assumptions if a.layer == "mbox_loss"]


def test_define_counts_are_checked(protoaudit):
    """--define also fills ${NAME} templates, so any name is taken; a count a layer reads must be a
    whole number no larger than the layer allows."""
    path = os.path.join(CORPUS, "mobilenet_ssd_train.prototxt")
    run = protoaudit(path, "--define", "matched_priors=5000")
    assert run.returncode == 2 and "only 1917 priors per image" in run.stderr
    run = protoaudit(path, "--define", "matched_priors=many")
    assert run.returncode == 2 and "--define matched_priors=many" in run.stderr and "whole number" in run.stderr
    run = protoaudit(path, "--define", "matched_priors=20")
    assert run.returncode == 0 and "--define matched_priors=K" not in run.stdout


# --- AnnotatedData -------------------------------------------------------------------------------

def annotated(transform, data_param="batch_size: 8"):
    return f"""
layer {{ name: "data" type: "AnnotatedData" top: "data" top: "label"
        transform_param {{ {transform} }} data_param {{ source: "x" {data_param} }} }}
"""


@pytest.mark.parametrize("transform, shape", [
    # data_transformer.cpp:1024-1050: the crop, else resize_param's size (WARP)
    ("resize_param { height: 300 width: 300 resize_mode: WARP }", (8, 3, 300, 300)),
    ("resize_param { height: 512 width: 400 }", (8, 3, 512, 400)),
    ("crop_size: 224 resize_param { height: 300 width: 300 }", (8, 3, 224, 224)),
    ("crop_h: 200 crop_w: 100", (8, 3, 200, 100)),
    ("force_gray: true resize_param { height: 300 width: 300 }", (8, 1, 300, 300)),
])
def test_annotated_data_top_from_transform_param(tmp_path, transform, shape):
    net = build(tmp_path, annotated(transform))
    # the label: one row of 8 per box, all boxes of the batch in one plane
    # (annotated_data_layer.cpp:78-96); one box per image by default
    assert tops(net, "data") == [shape, (1, 1, 8, 8)]


def test_annotated_data_size_from_the_dataset_needs_input(tmp_path):
    with pytest.raises(Exception, match="--input data="):
        build(tmp_path, annotated("mirror: true"))


def test_annotated_data_label_from_input_is_taken_whole(tmp_path):
    net = build(tmp_path, annotated("resize_param { height: 300 width: 300 }"),
                inputs={"label": (1, 1, 57, 8)}, batch=4)
    assert tops(net, "data") == [(4, 3, 300, 300), (1, 1, 57, 8)]


def test_annotated_data_keeps_three_prefetch_batches(tmp_path):
    """base_data_layer.hpp:71 PREFETCH_COUNT = 3, whatever data_param.prefetch says; each batch
    holds the data and the label, allocated at setup (base_data_layer.cpp:53-58)."""
    net = build(tmp_path, annotated("resize_param { height: 300 width: 300 }", "batch_size: 8 prefetch: 10"))
    prefetch = {b.owner: b.bytes for b in cpu_buffers(net) if b.kind == "prefetch"}
    assert prefetch == {"data.prefetch[3].data": 3 * 8 * 3 * 300 * 300 * F, "data.prefetch[3].label": 3 * 8 * 8 * F}


def test_fit_small_size_needs_batch_1(tmp_path):
    with pytest.raises(InputError, match="batch size of 1 for FIT_SMALL_SIZE"):
        build(tmp_path, annotated("resize_param { height: 300 width: 300 resize_mode: FIT_SMALL_SIZE }"))


# --- the fork's own runs (tests/data/fork_oracle/ssd) ------------------------------------------------

RUNS = list(csv.DictReader(open(os.path.join(ORACLE, "measurements.tsv")), delimiter="\t"))
HEAP_RUNS = [r for r in RUNS if not r["run"].startswith("ssd_annotated_data")]
# The AnnotatedData runs read an LMDB (shapes from its records): data and label as the log shows them
ANNOTATED_INPUTS = {"ssd_annotated_data_b2": {"data": (2, 3, 30, 40), "label": (1, 1, 1, 8)},
                    "ssd_annotated_data_60x80_b2": {"data": (2, 3, 60, 80), "label": (1, 1, 1, 8)}}
SSD_TYPES = ("Permute", "PriorBox", "Normalize", "MultiBoxLoss", "DetectionOutput", "DetectionEvaluate")


def measured(run):
    with open(os.path.join(ORACLE, "runs", run["run"] + ".json")) as f:
        return json.load(f)


def defines(run):
    out = {}
    if run["matched_priors_per_image"]:
        out["matched_priors"] = int(run["matched_priors_per_image"])
    if run["detections_per_image"]:
        out["detections"] = int(run["detections_per_image"])
    return out


def oracle_net(run):
    return build_nets(os.path.join(ORACLE, run["net"]), phase=run["phase"], defines=defines(run),
                      inputs=ANNOTATED_INPUTS.get(run["run"]))[0]


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_caffe_log_lines_match_the_forks(run):
    """Every "Top shape:" and "Memory required for data:" line (and the layers, bottoms and tops)
    as the fork logged them while building the measured net."""
    import logparse

    with open(os.path.join(ORACLE, "runs", run["run"] + ".log")) as f:
        (expected,) = logparse.parse(f.read())
    args = [a for top, shape in ANNOTATED_INPUTS.get(run["run"], {}).items()
            for a in ("--input", f"{top}={'x'.join(map(str, shape))}")]
    got = run_in_process(os.path.join(ORACLE, run["net"]), "--phase", run["phase"].lower(), "--caffe-log", *args)
    assert got.returncode == 0, got.stderr
    (net,) = logparse.parse(got.stdout)
    assert logparse.first_difference(expected, net) is None, logparse.first_difference(expected, net)
    assert net.memory == int(run["memory_required_for_data"])


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_shapes_match_the_forks_blobs(run):
    net = oracle_net(run)
    assert [[b.name, list(b.shape)] for b in net.blobs] == [
        # the fork's runs record blobs after the forward: the data-dependent tops had grown by then
        [name, shape] for name, shape in measured(run)["blobs"]
    ] or _grown_only(net, measured(run))


def _grown_only(net, run):
    """Blobs differ only where a forward reshapes them: DetectionOutput's and DetectionEvaluate's
    tops (kept detections), the AnnotatedData label (the batch's boxes)."""
    grown = {"DetectionOutput", "DetectionEvaluate", "AnnotatedData"}
    tops = {net.blobs[i].name for node in net.layers if node.type in grown for i in node.tops}
    mine = {b.name: list(b.shape) for b in net.blobs}
    theirs = dict((name, shape) for name, shape in run["blobs"])
    assert mine.keys() == theirs.keys()
    assert {n for n in mine if mine[n] != theirs[n]} <= tops
    return True


@pytest.mark.parametrize("run", HEAP_RUNS, ids=[r["run"] for r in HEAP_RUNS])
def test_total_matches_the_forks_heap(run):
    """CPU mode, no solver, after one forward and one backward: within 0.5% or 64 KiB."""
    want = int(run["backward_live"])
    got = sum(b.bytes for b in cpu_buffers(oracle_net(run)))
    assert abs(got - want) <= max(0.005 * want, 64 * 1024), f"protoaudit {got:,}, the fork {want:,}"


@pytest.mark.parametrize("run", HEAP_RUNS, ids=[r["run"] for r in HEAP_RUNS])
def test_ssd_layers_allocate_what_the_fork_allocated(run):
    """Each SSD layer's forward and backward bytes, against the fork's per-layer measurement.
    What protoaudit keeps apart from Caffe's own figures, by the fork's source:
    - MultiBoxLoss: the fake one-row shape its inner loss layer is set up with
      (multibox_loss_layer.cpp:107-113) fills a class-row of diff (SetLossWeights) that the first
      batch frees (4 x classes bytes); the match lists of each forward (a 64-byte map node, one int
      per prior and per mined negative, per image) are freed at the end of backward (:368-369);
      without mining, ShareData/ShareDiff also free a SyncedMemory object (64 bytes with its
      shared_ptr count) and the lists hold no negatives.
    - DetectionEvaluate: its top grows by 5 floats per detection after the first (uncounted).
    - Permute that changes nothing: ShareData/ShareDiff free its own blob's objects (64 bytes)."""
    net = oracle_net(run)
    model = by_layer(net_buffers(net, mode="cpu", backward=runs_backward(net)))
    batch = net.batch
    for layer in measured(run)["layers"]:
        if layer["type"] not in SSD_TYPES:
            continue
        mine = model.get(layer["name"], {"forward": 0, "backward": 0})
        fwd, bwd = layer["fwd_alloc"], layer["bwd_alloc"]
        node = net.layer(layer["name"])
        if layer["type"] == "MultiBoxLoss":
            p = node.impl.lp.multibox_loss_param
            priors = node.bottom_shapes[2][2] // 4
            matched = int(run["matched_priors_per_image"])
            negatives = 3 * matched if p.mining_type == 1 else 0
            lists = batch * (64 + 4 * priors + 4 * negatives)
            if p.mining_type == 1:
                assert bwd == mine["backward"] - lists, layer["name"]
                assert fwd + bwd == mine["forward"] + mine["backward"] - 4 * p.num_classes, layer["name"]
            else:
                assert bwd == mine["backward"] - lists - 64, layer["name"]
                assert abs(fwd + bwd - (mine["forward"] + mine["backward"])) <= 256, layer["name"]
        elif layer["type"] == "DetectionEvaluate":
            kept = int(run["detections_per_image"]) * batch
            assert fwd - mine["forward"] == 5 * F * (kept - 1) and bwd == 0
        elif layer["type"] == "Permute" and node.impl.shares():
            assert (fwd, bwd) == (-64, -64) and (mine["forward"], mine["backward"]) == (0, 0)
        else:
            assert (fwd, bwd) == (mine["forward"], mine["backward"]), layer["name"]


def test_matched_priors_read_from_the_forks_backward():
    """mobilenet_ssd_train_b1's mbox_loss backward (README): 195,868 bytes = its bottoms' diffs
    (7668 + 40257 floats) + loc_pred_'s diff (4M floats) + conf_pred_'s diff (4M x 21 floats, M
    matched and 3M negatives) - the match lists freed (a 64-byte map node, 1917 + 3M ints)."""
    layer = next(l for l in measured(next(r for r in RUNS if r["run"] == "mobilenet_ssd_train_b1"))["layers"]
                 if l["name"] == "mbox_loss")
    m = 35
    assert layer["bwd_alloc"] == (7668 + 40257) * F + 4 * m * F + 4 * m * 21 * F - (64 + 1917 * F + 3 * m * F)


def test_annotated_data_keeps_three_prefetch_batches_on_the_forks_heap():
    """The two AnnotatedData runs differ only in the images' size (3x30x40 against 3x60x80, 10,800
    bytes more per image). Their set-up heaps differ by 359,494 bytes: the fork's three prefetch
    batches of 2 images in floats take 3 x 2 x 10,800 x 4 = 259,200 of it, and its DataReader's
    queue of data_param.prefetch (4) x batch (2) = 8 raw datums 8 x 10,800 = 86,400, leaving
    13,894 (the protobuf strings' slack). Four batches (BVLC's data_param.prefetch) would need
    345,600 for the batches alone. protoaudit counts the three batches; the reader's datums are
    host memory the dataset decides (the stored images' bytes), which it does not count."""
    small, large = (next(r for r in RUNS if r["run"] == name) for name in ANNOTATED_INPUTS)
    grown = int(large["init_live"]) - int(small["init_live"])
    assert grown == 359_494
    batches, reader = 3 * 2 * 10_800 * F, 4 * 2 * 10_800
    assert 0 < grown - batches - reader < 0.05 * grown
    assert grown < 4 * 2 * 10_800 * F + reader
    mine = [sum(b.bytes for b in cpu_buffers(oracle_net(r)) if b.kind == "prefetch") for r in (small, large)]
    assert mine[1] - mine[0] == batches


def test_annotated_data_forward_copies_the_batch_into_its_tops():
    """base_data_layer.cpp:107-122: the forward reshapes the tops to the prefetched batch and
    copies it: 2x3x30x40 floats and the batch's 3 boxes (1x1x3x8), 28,896 bytes."""
    run = next(r for r in RUNS if r["run"] == "ssd_annotated_data_b2")
    (layer,) = [l for l in measured(run)["layers"] if l["type"] == "AnnotatedData"]
    assert layer["fwd_alloc"] == (2 * 3 * 30 * 40 + 3 * 8) * F
    net = build_nets(os.path.join(ORACLE, run["net"]), phase="TRAIN",
                     inputs={"data": (2, 3, 30, 40), "label": (1, 1, 3, 8)})[0]
    assert by_layer(cpu_buffers(net))["data"]["forward"] == layer["fwd_alloc"]


# --- the corpus SSD files, as a new user runs them ---------------------------------------------------

# corpus file -> the help it needs to audit to the end (only --input, --define or --caffe-proto
# would be allowed): none. Their data come from the prototxt (resize_param, input_shape); what only
# the dataset decides is assumed at its worst, and the report says so with the flag to change it.
CORPUS_HELP = {
    "nets/mobilenet_ssd_train.prototxt": [],
    "nets/mobilenet_ssd_deploy.prototxt": [],
}


@pytest.mark.parametrize("file", sorted(CORPUS_HELP))
def test_corpus_ssd_file_audits_with_the_help_listed(file):
    path = os.path.join(DATA, "corpus", file)
    run = run_in_process(path, *CORPUS_HELP[file])
    assert run.returncode == 0, run.stderr
    assert "Total:" in run.stdout
    fits = run_in_process(path, *CORPUS_HELP[file], "--gpu-mem", "8G")
    assert fits.returncode in (0, 1) and "Traceback" not in fits.stderr, fits.stderr


def test_corpus_train_net_reports_its_assumptions(protoaudit):
    run = protoaudit(os.path.join(DATA, "corpus", "nets", "mobilenet_ssd_train.prototxt"))
    assert "to change it: --input label=1x1xBOXESx8" in run.stdout
    assert "to change it: --define matched_priors=K" in run.stdout
    assert "the TRAIN net 'MobileNet-SSD' (batch 24, forward and backward)" in run.stdout
    assert "TEST net" not in run.stdout  # its data and loss layers are TRAIN-only: no test net


def test_corpus_train_net_gets_the_shapes_the_fork_ran():
    """The corpus file (AnnotatedData, resize_param 300x300) at batch 1 with the run's two boxes
    gives every blob the measured net has the shape the fork gave it."""
    run = next(r for r in RUNS if r["run"] == "mobilenet_ssd_train_b1")
    net = build_nets(os.path.join(CORPUS, "mobilenet_ssd_train.prototxt"), batch=1,
                     inputs={"label": (1, 1, 2, 8)})[0]
    theirs = dict((name, shape) for name, shape in measured(run)["blobs"])
    mine = {b.name: list(b.shape) for b in net.blobs}
    common = set(mine) & set(theirs)
    assert common == set(mine)  # the run's Input layer was named "data" too, so even the splits agree
    assert all(mine[name] == theirs[name] for name in common)


def test_corpus_deploy_net_is_the_measured_one():
    """mobilenet_ssd_deploy_b1 is the corpus file itself."""
    with open(os.path.join(CORPUS, "mobilenet_ssd_deploy.prototxt")) as a, \
            open(os.path.join(ORACLE, "nets", "mobilenet_ssd_deploy_b1.prototxt")) as b:
        assert a.read() == b.read()


def test_sample_is_the_corpus_train_net_with_a_header():
    with open(os.path.join(ROOT, "samples", "mobilenet_ssd_train.prototxt")) as f:
        sample = f.read()
    with open(os.path.join(CORPUS, "mobilenet_ssd_train.prototxt")) as f:
        corpus = f.read()
    header, body = sample[: len(sample) - len(corpus)], sample[len(sample) - len(corpus):]
    assert body == corpus
    assert "chuanqi305/MobileNet-SSD" in header and "MIT" in header
    assert all(line.startswith("#") for line in header.splitlines())


def test_sample_audits_and_fits_an_8_gib_card(protoaudit):
    run = protoaudit(os.path.join(ROOT, "samples", "mobilenet_ssd_train.prototxt"), "--gpu-mem", "8G")
    assert run.returncode == 0, run.stderr
    assert "FITS a 8 GiB card" in run.stdout


# --- GPU mode, derived from the fork's .cu files (the CPU runs cannot see these) ------------------------

def gpu_owners(net, layer, engine="caffe"):
    return {b.owner[len(layer) + 1:]: (b.bytes, b.device) for b in net_buffers(net, mode="gpu", engine=engine)
            if b.layer == layer and b.owner.startswith(layer + ".")}


def test_detection_output_on_the_gpu_decodes_and_permutes_on_the_device():
    """detection_output_layer.cu:21-48: bbox_preds_ (the locations' size) and conf_permute_ (the
    confidences') on the device, read back on the host; the top is written on the host (:115-125).
    share_location: no bbox_permute_."""
    run = next(r for r in RUNS if r["run"] == "ssd_detection_b4")
    net = oracle_net(run)
    mine = gpu_owners(net, "detection_out")
    assert mine["bbox_preds_"] == (4 * 36 * F, "device")
    assert mine["conf_permute_"] == (4 * 27 * F, "device")
    assert "bbox_permute_" not in mine
    assert mine["top (kept detections)"][1] == "host"


def test_multibox_loss_inner_layers_run_on_the_device():
    """multibox_loss_layer.cpp has no .cu: it fills loc_pred_/loc_gt_/conf_pred_/conf_gt_ on the
    host; the inner SmoothL1Loss and SoftmaxWithLoss run their Forward_gpu on them
    (smooth_L1_loss_layer.cu:32-54: diff_ and errors_; softmax_loss_layer.cu: prob_, and the
    prediction's diff as scratch), so those are device buffers. mobilenet_ssd_train_b1: M = 35,
    K = 4M = 140 rows of 21 classes."""
    run = next(r for r in RUNS if r["run"] == "mobilenet_ssd_train_b1")
    mine = gpu_owners(oracle_net(run), "mbox_loss")
    m, k = 35, 140
    for name, elements in (("loc_pred_", 4 * m), ("loc_gt_", 4 * m), ("smooth_L1_loc.diff_", 4 * m),
                           ("smooth_L1_loc.errors_", 4 * m), ("conf_pred_", k * 21), ("conf_gt_", k),
                           ("softmax_conf.prob_", k * 21), ("conf_pred_.diff", k * 21), ("loc_pred_.diff", 4 * m)):
        assert mine[name] == (elements * F, "device"), name
    assert mine["all_match_indices_, all_neg_indices_"][1] == "host"


def test_permute_steps_reach_the_device_in_the_forward():
    """permute_layer.cu:30-41: the GPU kernel reads permute_order_, old_steps_ and new_steps_."""
    run = next(r for r in RUNS if r["run"] == "ssd_shapes_b1")
    net = oracle_net(run)
    on_gpu = {b.owner: b.touch for b in net_buffers(net, mode="gpu") if b.layer == "perm"}
    assert on_gpu["perm.permute_order_"] == "forward"


def test_normalize_on_the_gpu_keeps_the_across_spatial_norm_on_the_host():
    """normalize_layer.cu:51-55: across_spatial keeps norm_ on the host; :147 a shared scale's
    diff is written on the host too."""
    run = next(r for r in RUNS if r["run"] == "ssd_shapes_b1")
    net = oracle_net(run)
    assert gpu_owners(net, "norm_all")["norm_"][1] == "host"
    assert gpu_owners(net, "norm")["norm_"] == (1 * 5 * 7 * F, "device")


def test_the_forks_other_prefetching_data_layers_keep_three_batches(tmp_path):
    """Data, ImageData and WindowData are built on the same BasePrefetchingDataLayer in the fork
    (PREFETCH_COUNT = 3, base_data_layer.hpp:71); BVLC's keep data_param.prefetch (4) batches. The
    fork's Data reads through a DataReader<Datum> of data_param.prefetch x batch_size = 8 Datums
    (data_reader.cpp:29-33, :55-60), each (the dataset not read) a raw record of the top's 3x4x5
    bytes: the object 72, its data string 32 and 60 bytes and a terminator on the heap."""
    text = """
layer { name: "data" type: "Data" top: "data" top: "label" data_param { source: "x" batch_size: 2 } }
layer { name: "p" type: "Permute" bottom: "data" top: "p" permute_param { order: 0 order: 2 order: 3 order: 1 } }
"""
    net = build(tmp_path, text, inputs={"data": (2, 3, 4, 5)})
    prefetch = {b.owner: b.bytes for b in cpu_buffers(net) if b.kind == "prefetch"}
    assert prefetch == {"data.prefetch[3].data": 3 * 2 * 60 * F, "data.prefetch[3].label": 3 * 2 * F,
                        "data.DataReader datums": 4 * 2 * (72 + 32 + 61)}
    bvlc = build(tmp_path, text.replace("Permute", "Flatten").replace(
        " permute_param { order: 0 order: 2 order: 3 order: 1 }", ""), inputs={"data": (2, 3, 4, 5)})
    assert {b.owner for b in cpu_buffers(bvlc) if b.kind == "prefetch"} == {"data.prefetch[4].data",
                                                                             "data.prefetch[4].label"}


def test_the_forks_deconvolution_is_always_caffes(tmp_path):
    """The fork's layer_factory.cpp has no GetDeconvolutionLayer (BVLC's picks cuDNN) and the fork
    has no cudnn_deconv_layer: in a cuDNN build its Deconvolution still keeps an im2col buffer."""
    text = HEAD + """
layer { name: "up" type: "Deconvolution" bottom: "x" top: "up"
        convolution_param { num_output: 4 kernel_size: 2 stride: 2 } }
layer { name: "p" type: "Permute" bottom: "up" top: "p" permute_param { order: 0 order: 2 order: 3 order: 1 } }
"""
    net = build(tmp_path, text)
    kinds = {b.owner: b.kind for b in net_buffers(net, mode="gpu", engine="cudnn") if b.layer == "up"}
    assert kinds.get("up.col_buffer_") == "layer buffer" and "workspace" not in kinds.values()


def test_a_test_only_net_file_is_audited_as_its_test_net(protoaudit, tmp_path):
    """MobileNet-SSD's test prototxt (the solver's test_net) has TEST-only data: as a plain file
    it is that TEST net alone, run forward."""
    path = tmp_path / "test.prototxt"
    path.write_text("""
layer { name: "data" type: "AnnotatedData" top: "data" top: "label" include { phase: TEST }
        transform_param { resize_param { height: 30 width: 30 } } data_param { source: "x" batch_size: 8 } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 4 kernel_size: 3 } }
layer { name: "silence" type: "Silence" bottom: "conv" bottom: "label" }
""")
    run = protoaudit(path)
    assert run.returncode == 0, run.stderr
    assert "the TEST net" in run.stdout and "(batch 8, forward only)" in run.stdout
    assert "TRAIN net" not in run.stdout


def test_a_net_whose_only_fork_layer_is_smooth_l1_loss_is_fast_rcnns(tmp_path):
    """caffe-fast-rcnn and the SSD fork both have SmoothL1Loss; Fast R-CNN's has no default loss
    weight, SSD's has LossLayer's 1 (smooth_L1_loss_layer.cpp:17-19). A file naming no other fork
    type is read as caffe-fast-rcnn's; --fork ssd reads it as the SSD fork's."""
    path = tmp_path / "net.prototxt"
    path.write_text("""
input: "a" input_shape { dim: 2 dim: 8 }
input: "b" input_shape { dim: 2 dim: 8 }
layer { name: "ip" type: "InnerProduct" bottom: "a" top: "ip" inner_product_param { num_output: 8 } }
layer { name: "loss" type: "SmoothL1Loss" bottom: "ip" bottom: "b" top: "loss" }
""")
    assert load(str(path)).schema.name == "fastrcnn"
    fast = build_nets(str(path))[0]
    assert list(fast.layer("loss").loss_weights) == [0] and not fast.layer("ip").need_backward
    ssd = build_nets(str(path), schema="ssd")[0]
    assert list(ssd.layer("loss").loss_weights) == [1.0] and ssd.layer("ip").need_backward
