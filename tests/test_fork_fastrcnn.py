"""caffe-fast-rcnn (rbgirshick/caffe-fast-rcnn 4115385, py-faster-rcnn's Caffe): its schema, its
ROIPooling and SmoothL1Loss layers, and protoaudit against the fork's measured heap.

The runs (tests/data/fork_oracle/fastrcnn, README there) built the fork CPU-only and measured it in
CPU mode, with no solver. The fork has no CPU code for SmoothL1Loss (forward or backward) nor for
ROIPooling's backward (NOT_IMPLEMENTED aborts), so the measuring script did not run those passes:
protoaudit's prediction for those runs is its own walk with exactly those passes left out, which
the tests check is what protoaudit itself says the CPU build lacks. What those passes allocate
on the GPU is derived by hand from the fork's .cu files below.
"""
import csv
import json
import os

import pytest

from conftest import DATA, build_text, by_layer, run_in_process
from protoaudit import build_nets
from protoaudit.layers import fastrcnn
from protoaudit.memory.buffers import host_objects, layer_touches, net_buffers, runs_backward

ORACLE = os.path.join(DATA, "fork_oracle", "fastrcnn")
RUNS = list(csv.DictReader(open(os.path.join(ORACLE, "measurements.tsv")), delimiter="\t"))
CORPUS = os.path.join(DATA, "corpus", "nets")
F = 4


def detail(run):
    return json.load(open(os.path.join(ORACLE, "runs", run["run"] + ".json")))


def oracle_net(run):
    return build_nets(os.path.join(ORACLE, run["file"]), phase=run["phase"])[0]


def skipped_passes(net):
    """(layer type, stage) of every pass protoaudit says the fork's CPU code lacks."""
    return {(node.type, t.stage) for node in net.layers
            for t in layer_touches(node, "cpu", "caffe") if t.what == "stop"}


@pytest.fixture
def without_missing_cpu_passes(monkeypatch):
    """The walk with the passes the CPU build lacks left out, as the measuring script ran it."""
    for cls in (fastrcnn.ROIPooling, fastrcnn.SmoothL1Loss):
        original = cls.touches
        monkeypatch.setattr(cls, "touches", lambda self, run, original=original:
                            [t for t in original(self, run) if t.what != "stop"])


# --- the schema -------------------------------------------------------------------------------------

@pytest.mark.parametrize("file", ["faster_rcnn_vgg16_end2end_train", "faster_rcnn_vggcnnm1024_end2end_train",
                                  "faster_rcnn_vgg16_end2end_test", "fast_rcnn_vgg16_train"])
def test_faster_rcnn_nets_are_read_with_the_forks_schema(file):
    net = build_nets(os.path.join(CORPUS, file + ".prototxt"), phase="train")[0]
    assert {node.impl.ctx.schema for node in net.layers} == {"fastrcnn"}


@pytest.mark.parametrize("file", ["bvlc_alexnet_train_val", "voc-fcn8s_train", "vgg16_train_val"])
def test_bvlc_nets_are_still_read_with_bvlcs(file):
    path = os.path.join(CORPUS, file + ".prototxt")
    if not os.path.exists(path):
        pytest.skip(f"{file} is not in the corpus")
    net = build_nets(path, phase="train", inputs={"data": (1, 3, 227, 227), "label": (1,)}
                     if "alexnet" in file or "vgg16" in file else None)[0]
    assert {node.impl.ctx.schema for node in net.layers} == {"bvlc"}


def test_dropout_scale_train_is_the_forks_field(tmp_path):
    """DropoutParameter.scale_train (caffe.proto, fork only): BVLC cannot read it, the fork can; it
    changes the arithmetic (dropout_layer.cpp), not what Dropout allocates."""
    path = tmp_path / "net.prototxt"
    path.write_text('input: "x" input_shape { dim: 2 dim: 8 }\n'
                    'layer { name: "d" type: "Dropout" bottom: "x" top: "y" dropout_param { scale_train: false } }\n')
    net = build_nets(str(path))[0]
    assert net.layers[0].impl.ctx.schema == "fastrcnn"
    assert {b.owner: b.bytes for b in net_buffers(net, mode="gpu", backward=False)}["d.rand_vec_"] == 16 * F


# --- against the fork's heap -------------------------------------------------------------------------

@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_the_passes_not_run_are_those_the_forks_cpu_code_lacks(run):
    """The script left out SmoothL1Loss's forward and backward and ROIPooling's backward; protoaudit
    stops a CPU audit at exactly those (smooth_L1_loss_layer.cpp:54, :60; roi_pooling_layer.cpp:130)."""
    net = oracle_net(run)
    stops = skipped_passes(net)
    said = {(t, "forward") for t in run["forward_not_run"].split(",")} | \
           {(t, "backward") for t in run["backward_not_run"].split(",")}
    assert stops <= said
    present = {node.type for node in net.layers}
    assert {s for s in said if s[0] in present} == stops


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_shapes_and_caffes_figure_match_the_fork(run):
    net = oracle_net(run)
    measured = detail(run)
    assert [(b.name, b.shape) for b in net.blobs] == [(name, tuple(shape)) for name, shape in measured["blobs"]]
    assert net.memory_required_for_data == int(run["memory_required_for_data"])
    # Net::Init's own backward decisions, as the fork logged them
    needs = {name: how == "needs" for name, how in measured["need_backward"]}
    assert {node.name: node.need_backward for node in net.layers if node.name in needs} == needs


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_total_matches_the_forks_heap(run, without_missing_cpu_passes):
    net = oracle_net(run)
    got = sum(b.bytes for b in net_buffers(net, mode="cpu", backward=runs_backward(net))) + host_objects(net).bytes
    want = int(run["backward_live"])
    assert abs(got - want) <= max(0.005 * want, 64 * 1024), f"protoaudit {got:,}, the fork {want:,}"


@pytest.mark.parametrize("run", RUNS, ids=[r["run"] for r in RUNS])
def test_every_layers_allocations_match_the_fork(run, without_missing_cpu_passes):
    """Each layer's first forward and first backward allocate what protoaudit says, to the byte.
    (The fork's Split layers free 128 bytes of host objects in their first forward: Caffe's
    objects are protoaudit's one fitted term, not a layer's buffers.)"""
    net = oracle_net(run)
    mine = by_layer(net_buffers(net, mode="cpu", backward=runs_backward(net)))
    for layer in detail(run)["layers"]:
        got = mine.get(layer["name"], {"forward": 0, "backward": 0})
        fwd = layer["fwd_alloc"] + (128 if layer["type"] == "Split" else 0)
        assert (got["forward"], got["backward"]) == (fwd, layer["bwd_alloc"]), layer["name"]


def test_roipooling_by_hand_and_as_measured():
    """roipool_train: conv (2, 8, 24, 32), 6 RoIs pooled 4x4. Forward: the top and max_idx_, each
    6*8*4*4 = 768 elements of 4 bytes (roi_pooling_layer.cpp:39-42, :54-57): 6,144 bytes, as the
    fork allocated. Its backward is the GPU's only."""
    run = next(r for r in RUNS if r["run"] == "roipool_train")
    layer = next(x for x in detail(run)["layers"] if x["name"] == "roi_pool")
    assert layer["fwd_alloc"] == 2 * 6 * 8 * 4 * 4 * F == 6144
    net = oracle_net(run)
    gpu = {b.owner: b for b in net_buffers(net, mode="gpu") if b.layer == "roi_pool"}
    # Backward_gpu (roi_pooling_layer.cu:168-184): the top's diff (its consumer wrote it first) and
    # bottom 0's diff, the conv map: 2*8*24*32; never the rois' diff
    assert gpu["roi_pool.max_idx_"].bytes == 768 * F and gpu["pool"].touch == "forward"
    assert gpu["conv"].kind == "top diff" and gpu["conv"].bytes == 2 * 8 * 24 * 32 * F
    assert "rois" not in {b.owner for b in net_buffers(net, mode="gpu") if b.kind == "top diff"}


def test_smoothl1_without_loss_weight_gets_no_backward():
    """SmoothL1LossLayer::LayerSetUp (smooth_L1_loss_layer.cpp:13-22) never calls LossLayer's, which
    adds the default loss weight of 1: without `loss_weight` nothing needs backward, as the fork's
    Net::Init logged ('loss does not need backward computation')."""
    run = next(r for r in RUNS if r["run"] == "smoothl1_no_loss_weight")
    net = oracle_net(run)
    assert not runs_backward(net)
    assert dict(detail(run)["need_backward"])["loss"] == "does not need"


def test_smoothl1_buffers_by_hand():
    """smoothl1_weights: bottom 0 is (4, 8, 6, 5), 960 elements.
    CPU: Reshape fills ones_ at setup (cpp:44-48), and nothing more runs.
    GPU (smooth_L1_loss_layer.cu): forward writes diff_ and errors_ (:32-55) and reads ones_ on the
    device (:59); backward writes the diffs of bottoms 0 and 1 (:87-96): 'targets' needs none here
    (a DummyData top), so only 'pred', the conv's top; the weights never get one."""
    run = next(r for r in RUNS if r["run"] == "smoothl1_weights")
    net = oracle_net(run)
    cpu = {b.owner: b for b in net_buffers(net, mode="cpu", backward=False, forward=False) if b.layer == "loss"}
    assert cpu["loss.ones_"].bytes == 960 * F and cpu["loss.ones_"].touch == "setup"
    gpu = [b for b in net_buffers(net, mode="gpu") if b.layer == "loss"]
    owners = {b.owner: (b.touch, b.bytes, b.device) for b in gpu}
    assert owners["loss.diff_"] == owners["loss.errors_"] == owners["loss.ones_"] == ("forward", 960 * F, "device")
    assert owners["loss.ones_ (host)"] == ("setup", 960 * F, "host")
    assert owners["pred"] == ("backward", 960 * F, "device")
    assert not {"targets", "inside", "outside"} & {b.owner for b in gpu if b.kind == "top diff"}


def test_cpu_mode_stops_where_caffe_does():
    train = os.path.join(CORPUS, "faster_rcnn_vgg16_end2end_train.prototxt")
    r = run_in_process(train, "--mode", "cpu")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "layer 'rpn_loss_bbox'" in r.stderr and "smooth_L1_loss_layer.cpp:54" in r.stderr
    test = os.path.join(CORPUS, "faster_rcnn_vgg16_end2end_test.prototxt")
    assert run_in_process(test, "--mode", "cpu", "--inference").returncode == 0  # ROIPooling forward runs
    r = run_in_process(test, "--mode", "cpu", "--phase", "test", "--solver-type", "none")
    assert r.returncode == 0  # nothing needs backward in the test net: ROIPooling's backward never runs


def test_cudnn_build_keeps_the_forks_2015_cudnn_code():
    """The fork's cudnn_conv_layer.cu:22-25 limits the forward algorithm's workspace to
    kh*kw*C_in ints (+1 byte), one workspace per layer, none backward; its layer_factory.cpp gives
    MAX pooling without padding to cuDNN (no max_idx_). VGG16's 13 convolutions and the RPN's
    3x3 and two 1x1: at most sum(kh*kw*C_in) * 4 bytes of workspace."""
    net = build_nets(os.path.join(CORPUS, "faster_rcnn_vgg16_end2end_train.prototxt"), phase="train")[0]
    buffers = net_buffers(net, mode="gpu", engine="cudnn")
    work = sum(b.bytes for b in buffers if b.kind == "workspace")
    limit = sum(c * k * k * F for c, k in [(3, 3), (64, 3), (64, 3), (128, 3), (128, 3), (256, 3), (256, 3),
                                           (256, 3), (512, 3), (512, 3), (512, 3), (512, 3), (512, 3),
                                           (512, 3), (512, 1), (512, 1)])
    assert work == limit
    assert not [b for b in buffers if b.owner.endswith("max_idx_") and b.layer.startswith("pool")]


# --- the original Fast R-CNN's SmoothL1Loss (branch fast-rcnn) -----------------------------------------
# rbgirshick/caffe-fast-rcnn bcd9b4e (branch fast-rcnn, the submodule rbgirshick/fast-rcnn b612190 pins):
# fast_rcnn_layers.hpp:72-73 MaxBottomBlobs 3; smooth_L1_loss_layer.cpp:15 has_weights_ = 3 bottoms,
# :30-33 diff_ and errors_ as bottom 0, no ones_ (the faster-rcnn branch's cpp:44-48 adds it);
# .cu:31-48 forward writes diff_ (times the weights) and errors_ and sums errors_ with asum;
# .cu:70-85 backward writes the diffs of bottoms 0 and 1 from diff_, never reading the weights.

ORIGINAL = os.path.join(DATA, "forks", "fast_rcnn_original_vgg16_train.prototxt")
THREE = """force_backward: true
input: "data" input_shape { dim: 4 dim: 3 dim: 6 dim: 5 }
layer { name: "targets" type: "DummyData" top: "targets" top: "w" dummy_data_param { shape { dim: 4 dim: 8 dim: 6 dim: 5 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "pred" convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }
layer { name: "loss" type: "SmoothL1Loss" bottom: "pred" bottom: "targets" bottom: "w" top: "loss" loss_weight: 1 }
"""


def test_three_bottoms_are_the_original_branchs_layer_four_the_faster_rcnn_branchs(tmp_path):
    net = build_text(tmp_path, THREE, schema="fastrcnn")
    assert type(net.layer("loss").impl) is fastrcnn.OriginalSmoothL1Loss
    four = THREE.replace('top: "w"', 'top: "w" top: "w2"').replace('bottom: "w"', 'bottom: "w" bottom: "w2"')
    assert type(build_text(tmp_path, four, schema="fastrcnn").layer("loss").impl) is fastrcnn.SmoothL1Loss


def test_the_original_smoothl1_allocates_diff_and_errors_only(tmp_path):
    """Bottom 0 is (4, 8, 6, 5), 960 elements: forward writes diff_ and errors_ of 960 floats each
    (cpp:30-33, .cu:31-44), no ones_ on either side; backward (.cu:74-85) writes the diffs of bottoms
    0 and 1 (force_backward gives the DummyData's tops one) and not the weights'."""
    net = build_text(tmp_path, THREE, schema="fastrcnn")
    buffers = net_buffers(net, mode="gpu")
    own = {b.owner: (b.touch, b.bytes, b.device) for b in buffers if b.layer == "loss" and b.kind == "layer buffer"}
    assert own == {"loss.diff_": ("forward", 960 * F, "device"), "loss.errors_": ("forward", 960 * F, "device")}
    assert not [b for b in buffers if "ones_" in b.owner]
    diffs = {b.owner for b in buffers if b.kind == "top diff"}
    assert {"pred", "targets"} <= diffs and "w" not in diffs


def test_the_original_smoothl1_has_no_cpu_code_either(tmp_path):
    """smooth_L1_loss_layer.cpp:39 (Forward_cpu) and :45 (Backward_cpu) are NOT_IMPLEMENTED."""
    path = tmp_path / "net.prototxt"
    path.write_text(THREE)
    r = run_in_process(path, "--mode", "cpu", "--fork", "fastrcnn")
    assert r.returncode == 2 and "smooth_L1_loss_layer.cpp:39" in r.stderr and "branch fast-rcnn" in r.stderr


@pytest.mark.parametrize("fork", ["priv", "rfcn"])
def test_the_faster_rcnn_branchs_copies_still_refuse_three_bottoms(tmp_path, fork):
    path = tmp_path / "net.prototxt"
    path.write_text(THREE)
    r = run_in_process(path, "--fork", fork)
    assert r.returncode == 2 and "give both the inside and the outside weights" in r.stderr


def test_the_original_fast_rcnn_vgg16_train_net():
    """rbgirshick/fast-rcnn's VGG16 train.prototxt: the RoI data layer's 5 tops (the original's
    roi_data_layer: bbox_targets and bbox_loss_weights 128 x 84 for 21 classes), bbox_pred an
    InnerProduct of 84 outputs on 128 RoIs; its loss_bbox SmoothL1Loss takes bbox_pred, bbox_targets
    and bbox_loss_weights. diff_ and errors_: 128*84 = 10,752 floats each, and bbox_pred's diff the
    same; no ones_. The report names the branch whose layer it sized."""
    r = run_in_process(ORIGINAL, "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["nets"][0]["caffe_proto"] == "fastrcnn"
    said = [a for a in out["assumptions"] if a["layer"] == "loss_bbox"]
    assert len(said) == 1 and "branch fast-rcnn" in said[0]["assumption"]
    net = build_nets(ORIGINAL)[0]
    assert type(net.layer("loss_bbox").impl) is fastrcnn.OriginalSmoothL1Loss
    buffers = net_buffers(net, mode="gpu")
    mine = {b.owner: b.bytes for b in buffers if b.layer == "loss_bbox" and b.kind == "layer buffer"}
    assert mine == {"loss_bbox.diff_": 128 * 84 * F, "loss_bbox.errors_": 128 * 84 * F}
    assert {b.owner: b.bytes for b in buffers if b.kind == "top diff"}["bbox_pred"] == 128 * 84 * F


def test_the_original_net_holds_less_than_py_faster_rcnns_fast_rcnn_net():
    """The same VGG16 Fast R-CNN as py-faster-rcnn writes it (four bottoms: bbox_inside_weights and
    bbox_outside_weights, both 128 x 84) holds, on the device, one more data top of 128*84 floats
    and ones_ of 128*84 floats (the faster-rcnn branch's cpp:44-48, read by .cu:59): 2 * 43,008
    bytes more; on the host, ones_ (43,008 bytes) more."""
    def total(path, device):
        net = build_nets(path)[0]
        return sum(b.bytes for b in net_buffers(net, mode="gpu") if b.device == device)
    faster = os.path.join(CORPUS, "fast_rcnn_vgg16_train.prototxt")
    assert total(faster, "device") - total(ORIGINAL, "device") == 2 * 128 * 84 * F
    assert total(faster, "host") - total(ORIGINAL, "host") == 128 * 84 * F
