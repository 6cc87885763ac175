"""Users' GPU-memory reports (the project's corpus/gpu_reports.md, numbered as there), replayed.

Each replay runs the `protoaudit` command as the user ran Caffe (the net, batch, input size, and
`--gpu-mem` set to the card) and holds its verdict to what the user saw: exit 0 and "fits" where
training ran, exit 1 where Caffe ran out of memory, and for a measured usage a total inside a band
derived in the replay. Nets are copies in tests/data/gpu_reports (see tests/data/SOURCES.md).

Cards: a card sold as "N GB" has N GiB (a 12 GB Titan X shows 12287 MiB in nvidia-smi, report 37),
so `--gpu-mem NG`. The CUDA context is protoaudit's default (300 MiB) unless a replay says otherwise.

Engines: where the thread says cuDNN or not, that engine; where it does not, each replay says
which it holds and why. A verdict held under both engines is the strongest claim; where only one
engine agrees, the reason for that engine comes from the thread or the fork, never from the result.
caffe-segnet builds without cuDNN unless USE_CUDNN is uncommented (its Makefile.config.example
ships it commented out), so the SegNet tutorial's default build runs the Caffe engine.
"""
import json
import os
from dataclasses import dataclass

import pytest

from conftest import DATA, run_in_process

NETS = os.path.join(DATA, "gpu_reports")
ORACLE = os.path.join(DATA, "oracle", "measurements.tsv")
GiB, MiB = 2**30, 2**20
CAMVID = "3x360x480"  # the SegNet tutorial's CamVid images (report rows 14-20)
# Users' CUDA contexts (README, "The CUDA context"): 200 to 700 MB; protoaudit's total counts 300 MiB.
CONTEXT_LOW, CONTEXT_HIGH = 200e6, 700e6


@dataclass
class Replay:
    report: str
    net: str
    args: tuple
    card: str  # --gpu-mem
    engines: tuple
    fits: bool
    why: str  # the configuration and the engine choice, from the thread
    mrd: int = None  # Caffe's "Memory required for data" the user's log printed (pins batch and size)
    measured: tuple = None  # (low, high) bytes the user read, before the context band is applied

    @property
    def id(self):
        return f"{self.report}-{os.path.splitext(self.net)[0]}-{self.card}"


REPLAYS = [
    Replay("7", "resnet_32_solver.prototxt", ("--input", "data=32x3x224x224", "--input", "label=32"),
           "12G", ("caffe", "cudnn"), True,
           "ethanhe42/resnet-imagenet-caffe#4: ResNet-32, batch 32, the repo's configuration unchanged; "
           "the author: batch 32 just fits 12 GB. Run through the repo's own solver, whose test_iter is "
           "commented out, so Caffe builds no test net (the net file alone would add its TEST net). "
           "cuDNN unknown: both engines.",
           mrd=6110433804,  # logs/imagenet_resnet32_ethanhe.log, the same net at batch 32
           # the user: "9GB多" (a little over 9 GB), read as 9 GB to 10 GiB
           measured=(9e9, 10 * GiB)),
    Replay("3", "faster_rcnn_vgg16_end2end_train.prototxt", (), "4G", ("cudnn",), True,
           "rbgirshick/py-faster-rcnn#54: Faster R-CNN VGG16 end2end, trained with py-faster-rcnn's defaults "
           "(one image, at most 600x1000, 128 RoIs: protoaudit's built-in shapes for its Python layers) on "
           "a 4 GB card with cuDNN, in caffe-fast-rcnn (the fork's 2015 cuDNN code); the author: 'around 3 "
           "GB is enough' (py-faster-rcnn's README: 3G suffices using CUDNN).",
           measured=(2.5e9, 3.5e9)),
    Replay("8", "resnet50_deploy.prototxt", ("--inference",), "12G", ("caffe", "cudnn"), True,
           "jolibrain/deepdetect#84: ResNet-50 (deepdetect's template is the MSRA deploy net, "
           "global-stats BatchNorm, batch 1, 224x224) predicts on a 12 GB K40. cuDNN unknown: both "
           "engines. Its 302 MB reading is not held: see test_report_8_reading_is_below_caffes_own_heap."),
    Replay("14", "segnet_basic_train.prototxt", ("--input", f"data=1x{CAMVID}"), "1G", ("caffe",), False,
           "SegNet-Tutorial#25: SegNet-Basic, batch 1, the tutorial's CamVid, a 1 GB GT 720: out of "
           "memory. Caffe engine: the fork's default build (the thread never mentions cuDNN).",
           mrd=410926132),
    Replay("15", "segnet_train.prototxt", ("--input", f"data=1x{CAMVID}"), "2G", ("caffe",), False,
           "caffe-segnet#21 (mrgloom): SegNet, batch 1, a GeForce GTX 460: out of memory at 'Solving'. "
           "A GTX 460 is Fermi (compute capability 2.1) and cuDNN needs 3.0 or more: Caffe engine. "
           "GTX 460s have 768 MB to 2 GB: the largest. (The OP's camseq images have no stated size.)",
           mrd=1083110452),
    Replay("16", "segnet_basic_train.prototxt", ("--input", f"data=10x{CAMVID}"), "12287M", ("caffe", "cudnn"),
           True,
           "caffe-segnet#15, the maintainer quoting the tutorial: on a 12 GB K40 or Titan X, batch 10 for "
           "SegNet-Basic. Titan X: 12287 MiB. Holds under both engines."),
    Replay("16", "segnet_train.prototxt", ("--input", f"data=6x{CAMVID}"), "12287M", ("caffe", "cudnn"), True,
           "caffe-segnet#15, the maintainer: batch 6 for SegNet on a 12 GB Titan X (12287 MiB); both "
           "engines. (On a K40m with ECC on, 11519 MiB, the Caffe engine's total would not fit.)"),
    Replay("16", "segnet_train.prototxt", ("--input", f"data=1x{CAMVID}"), "4G", ("caffe",), False,
           "caffe-segnet#15 (salehiac): SegNet, batch 1, a 4 GB GTX 970: out of memory; a commenter: "
           "building with cuDNN solves it. So the failing build ran the Caffe engine..."),
    Replay("16", "segnet_train.prototxt", ("--input", f"data=1x{CAMVID}"), "4G", ("cudnn",), True,
           "...and the same run fits with cuDNN, as the commenter found."),
    Replay("17", "segnet_train.prototxt", ("--input", f"data=1x{CAMVID}"), "4G", ("caffe",), False,
           "SegNet-Tutorial#26: SegNet and SegNet-Basic, batch 1, a 4 GB GTX 980: out of memory. Caffe "
           "engine: the fork's default build (under cuDNN protoaudit would fit batch 1, against the report)."),
    Replay("17", "segnet_basic_train.prototxt", ("--input", f"data=1x{CAMVID}"), "4G", ("caffe",), False,
           "SegNet-Tutorial#26: SegNet-Basic too, batch 1, out of memory on the 4 GB GTX 980."),
    Replay("17", "segnet_train_180x240.prototxt", ("--input", "data=7x3x180x240"), "4G", ("caffe",), True,
           "SegNet-Tutorial#26: with the images halved (180x240, the upsample parameters changed) batch 7 "
           "runs on the same card and build."),
    Replay("17", "segnet_basic_train_180x240.prototxt", ("--input", "data=7x3x180x240"), "4G", ("caffe",), True,
           "SegNet-Tutorial#26: the thread does not say which of the two nets ran at batch 7; both fit."),
    Replay("18", "segnet_train.prototxt", ("--input", f"data=2x{CAMVID}"), "4G", ("caffe",), False,
           "SegNet-Tutorial#71: SegNet, batch 2, a 4 GB card: out of memory in BNLayer::Forward_gpu. Caffe "
           "engine: the fork's default, and the crash is in the forward pass, where protoaudit's cuDNN "
           "run fits whole (see test_report_18_runs_out_in_the_forward_pass)."),
    Replay("19", "segnet_train_1024x2048.prototxt", ("--input", "data=1x3x1024x2048"), "8G", ("caffe", "cudnn"),
           False,
           "caffe-segnet#120: SegNet on Cityscapes (2048x1024), batch 1, a GTX 1080 8 GB: out of memory "
           "under either engine. (The corpus net's Upsample sizes are for 360x480; they must have been "
           "changed, or Caffe stops at a CHECK instead: the derived copy changes them.)"),
    Replay("19", "segnet_train.prototxt", ("--input", f"data=4x{CAMVID}"), "8G", ("cudnn",), True,
           "caffe-segnet#120: resized to 360x480, batch 4, training went ahead. cuDNN: the same user posted "
           "the same run to TimoSaemann/caffe-segnet-cudnn5#16, the fork's cuDNN 5 port."),
    Replay("20", "segnet_basic_train.prototxt", ("--input", f"data=4x{CAMVID}"), "4G", ("caffe",), False,
           "caffe-segnet#96 (the OP): segnet_basic_solver as shipped (batch 4, CamVid) on a GTX 745 (4 GB "
           "at most): out of memory. Caffe engine: the fork's default build."),
    Replay("22", "ENet/prototxts/enet_solver_encoder decoder.prototxt", (), "11G", ("caffe", "cudnn"), False,
           "TimoSaemann/ENet#10 (ewen1024): 'by default' (the repository's encoder-decoder solver and net: batch "
           "3, images resized to 512x1024, the Tutorial's `caffe train -solver`), it does not fit a GTX 1080 Ti, "
           "11 GB. The solver tests at iteration 0 (test_initialization, test_iter 1), so Caffe holds the TEST "
           "net beside the TRAIN net. cuDNN unknown: both engines."),
    Replay("26", "openpose_coco_deploy.prototxt", ("--inference", "--input", "data=1x3x368x656"), "12G",
           ("cudnn",), True,
           "caffe_rtpose#3: the COCO model at --net_resolution 656x368 needs 2-3 GB (ZheC), 'around 3GB' "
           "(tsimk) on a 12 GB Titan X. cuDNN: the maintainers' build (caffe_rtpose#18: 'enable cuDNN'; "
           "#36: 'you must use cuDNN to avoid out of memory').",
           measured=(2e9, 3 * GiB)),
    Replay("30", "squeezenet_v1.0_train_val.prototxt",
           ("--phase", "train", "--solver-type", "none", "--input", "data=512x3x227x227", "--input", "label=512"),
           "12G", ("caffe", "cudnn"), False,
           "forresti/SqueezeNet#19: `caffe time` (one net, forward and backward, no solver) of SqueezeNet "
           "v1.0 at batch 512, 227x227 crops, a 12 GB Titan X: out of memory. cuDNN unknown: both engines."),
    Replay("4", "faster_rcnn_vgg16_end2end_test.prototxt", ("--inference", "--input", "data=1x3x600x1000"),
           "4G", ("cudnn",), True,
           "rbgirshick/py-faster-rcnn#357: demo.py (the test net, TEST phase, one image of at most "
           "600x1000, 300 proposals) on a 4 GB EC2 card with cuDNN v5: it runs (the user read 1.6 GB; see "
           "NOT_REPLAYED for why that figure is not held)."),
    Replay("30", "squeezenet_v1.0_train_val.prototxt",
           ("--phase", "train", "--inference", "--input", "data=512x3x227x227", "--input", "label=512"),
           "12G", ("caffe", "cudnn"), False,
           "forresti/SqueezeNet#19: the thread does not say which file was timed (train_val or deploy): "
           "even the forward pass alone does not fit, whichever it was."),
]

# Reports not replayed, and why. Nothing is asserted about them.
NOT_REPLAYED = [
    ("1", "a modified LeNet whose modification and batch are not stated, on an unstated card"),
    ("2", "VGG-11: no corpus net (vgg16_train_val is another net); card not stated"),
    ("3b", "the commenter's card is not stated: no verdict; the two readings are held in "
           "test_report_3b_with_and_without_cudnn"),
    ("4", "the 1.6 GB reading: cuDNN v5 is not caffe-fast-rcnn 4115385's cuDNN (its 2015 code takes the "
          "v2-era API), so the user ran another Caffe, whose convolution workspaces protoaudit cannot know"),
    ("5", "Faster R-CNN ResNet-101 OHEM: no corpus net"),
    ("6", "antingshen's ResNet-50 train net: no corpus net (the corpus has MSRA's deploy net only)"),
    ("9", "FCN with CRF-RNN layers (torrvision's fork): no corpus net; voc-fcn8s alone is a smaller net "
          "(its Python data layer now audits at 500x500 with no flag), and the CRF-RNN layer's buffers are "
          "the fork's"),
    ("10", "CRF-RNN on FCN-8s: no corpus net (the CRF-RNN layer is a fork's); voc-fcn8s alone is a smaller net"),
    ("11", "S3FD (an SSD built on VGG16, in the SSD fork): no corpus net (mobilenet_ssd_train is another "
           "backbone and other prior boxes), and the input size is not stated"),
    ("12", "SSD300 (VGG16, weiliu89's ssd_pascal.py): no corpus net; the SSD fork's layers are audited, but "
           "mobilenet_ssd_train is another net (MobileNet backbone, 1917 priors against SSD300's 8732)"),
    ("13", "DSOD300 (SSD-style heads on a DenseNet): no corpus net"),
    ("16", "the maintainer's 'K40 or Titan X' is replayed on the Titan X (12287 MiB) only: a K40's usable "
           "memory depends on ECC (11519 MiB on, about 12 GiB off), which the tutorial does not say"),
    ("20", "the commenter's Titan X run: the batch they lowered from ('6, the default I believe'; the file "
           "says 4) and their input size are not stated"),
    ("21", "SIVO runs Bayesian SegNet (the full net, for inference, batch 2 for MC dropout) on KITTI: the "
           "corpus has the basic train net only"),
    ("22", "the OP's out of memory on a Titan Z: batch and image size not stated. The commenter's '12 gb "
           "for batch 3' is not a reading on a named card: protoaudit's total for that run, its test net "
           "included, is 15.9 GiB (Caffe engine), the train net alone 10.3 GiB"),
    ("23", "Dilation front-end + context: no corpus net"),
    ("24", "SegAware (aharley/segaware): its nets need its own Caffe, whose layers (ChannelReduce, Im2dist, "
           "NormConvMeanfield) no schema protoaudit reads has; the DeepLab-ResNet nets of the corpus are "
           "other nets"),
    ("25", "CPM pose training: no corpus net, and caffe_train's CPMData is a fork protoaudit cannot read"),
    ("26", "the OP's out of memory on the 12 GB Titan X: the OP's build (cuDNN or not) and rtpose flags "
           "(scales) are not stated"),
    ("27", "OpenPose rtpose: the batch and input size are not stated"),
    ("28", "DetectNet on NVCaffe 0.15: no corpus net; NVCaffe's memory manager is not BVLC's"),
    ("29", "hipCaffe on a Radeon VII: MIOpen, neither of protoaudit's engines; Caffe ran out during "
           "set-up, where BVLC Caffe allocates only params, prefetch and workspaces, so MIOpen's "
           "set-up allocations are what ran out"),
    ("30", "AlexNet at batch 1024 runs under `caffe time`: not with bvlc_alexnet_train_val, the table's "
           "pairing; see test_report_30_alexnet_train_val_cannot_be_what_ran"),
    ("31", "DecoupledNet: no corpus net, input size not stated"),
    ("32", "TextBoxes++ (on the SSD fork, with its own TextBoxes layers): no corpus net, batch not stated"),
    ("33", "FCN-AlexNet (DIGITS): DIGITS' variant of the net (its own data layers and padding), not "
           "voc-fcn-alexnet_train, and PASCAL's images vary in size"),
    ("34", "FCN-8s (DIGITS): DIGITS' variant of the net on a custom dataset whose input size is not stated"),
    ("35", "the seed 001 SegNet-basic variant: no corpus net; replayed from samples/ in tests/test_audit.py "
           "(the 8 GB card is stated in seeds/001)"),
    ("36", "OICR VGG16: no corpus net, input and batch not stated"),
    ("37", "the net is not named"),
]

REPORTS = [str(n) for n in range(1, 38)] + ["3b"]


def audit_json(replay, engine, *extra):
    run = run_in_process(os.path.join(NETS, replay.net), *replay.args, "--engine", engine,
                         "--gpu-mem", replay.card, "--format", "json", *extra, timeout=300)
    assert run.returncode in (0, 1), run.stderr
    return run.returncode, json.loads(run.stdout)


def context_bytes(result):
    return sum(b["bytes"] for b in result["extra"] if b["kind"] == "context")


CASES = [(r, e) for r in REPLAYS for e in r.engines]


@pytest.mark.parametrize("replay,engine", CASES, ids=[f"{r.id}-{e}" for r, e in CASES])
def test_verdict_agrees_with_the_report(replay, engine):
    status, result = audit_json(replay, engine)
    assert result["engine"] == engine
    assert result["fit"]["fits"] is replay.fits, f"{replay.why}: protoaudit {result['total_bytes']:,} B"
    assert status == (0 if replay.fits else 1)
    if replay.mrd is not None:  # the user's own log line pins the batch and the input size
        train = next(n for n in result["nets"] if n["role"] in ("train", "net"))
        assert train["memory_required_for_data"] == replay.mrd
    if replay.measured is not None:
        # The reading is of one process in nvidia-smi, context included; protoaudit counts a 300 MiB
        # context where users see 200 to 700 MB. So the net alone (total less protoaudit's context)
        # must lie within [low - 700 MB, high - 200 MB] of the reading.
        low, high = replay.measured
        net_alone = result["total_bytes"] - context_bytes(result)
        assert low - CONTEXT_HIGH <= net_alone <= high - CONTEXT_LOW, f"{net_alone:,} B: {replay.why}"


def test_report_3b_with_and_without_cudnn():
    """py-faster-rcnn#54, a comment: Faster R-CNN VGG16 end2end training takes 6.5 GB without cuDNN
    and 2.8 GB with it (caffe-fast-rcnn, py-faster-rcnn's defaults). The card is not stated, so no
    verdict: each reading, context aside, must hold the net alone (protoaudit's total less its
    300 MiB context) within [reading - 700 MB, reading in GiB - 200 MB]. With cuDNN the fork's
    2015 convolution keeps no column buffer and a workspace of at most kh*kw*C_in ints."""
    net = os.path.join(NETS, "faster_rcnn_vgg16_end2end_train.prototxt")
    for engine, reading in (("caffe", 6.5), ("cudnn", 2.8)):
        run = run_in_process(net, "--engine", engine, "--format", "json")
        assert run.returncode == 0, run.stderr
        result = json.loads(run.stdout)
        net_alone = result["total_bytes"] - context_bytes(result)
        assert reading * 1e9 - CONTEXT_HIGH <= net_alone <= reading * GiB - CONTEXT_LOW, (engine, net_alone)


def test_report_18_runs_out_in_the_forward_pass():
    """SegNet-Tutorial#71 crashed in BNLayer::Forward_gpu, in the first forward: the Caffe engine's
    set-up fits the 4 GB card and set-up plus forward does not. (Under cuDNN the whole run fits.)"""
    replay = next(r for r in REPLAYS if r.report == "18")
    _, result = audit_json(replay, "caffe")
    touch = result["by_touch"]
    assert touch["setup"] <= 4 * GiB < touch["setup"] + touch["forward"]
    _, result = audit_json(replay, "cudnn")
    assert result["fit"]["fits"]


def test_segnet_replays_hold_dense_image_datas_tops_alone_on_the_device():
    """caffe-segnet's DenseImageData keeps its one prefetch batch on the host: the fork's
    Forward_gpu copies prefetch_data_.cpu_data() into the tops' device memory
    (base_data_layer.cu:13-22; base_data_layer.cpp:38-41 touches only the batch's cpu_data). At
    report 14's batch 1 on CamVid the device holds the tops, 1*3*360*480 + 1*1*360*480 floats =
    2,764,800 bytes, written by the first forward, and nothing at setup; the batch, as much
    again, is among the host bytes a GPU-mode report leaves out."""
    replay = next(r for r in REPLAYS if r.report == "14")
    _, result = audit_json(replay, "caffe")
    (net,) = [n for n in result["nets"] if n["role"] in ("train", "net")]
    (layer,) = [x for x in net["layers"] if x["name"] == "data"]
    device = [b for b in layer["buffers"] if b["device"] == "device"]
    assert sum(b["bytes"] for b in device) == (3 + 1) * 360 * 480 * 4 == 2764800
    assert {b["touch"] for b in device} == {"forward"} and len(device) == len(layer["buffers"])
    assert result["uncounted_host_bytes"] >= 2764800


def test_report_8_reading_is_below_caffes_own_heap():
    """deepdetect#84 read 302 MB (nvidia-smi, MiB) for ResNet-50 predicting one image. Real BVLC Caffe
    (the oracle, CPU mode, the same net at batch 1) holds 357,944,885 bytes after one forward with no
    CUDA context at all, more than 302 MiB = 316,669,952 bytes. So the reading was not of a whole
    forward in BVLC Caffe (taken before it, or another Caffe), and no figure can be held against it.
    The deploy net's BatchNorm layers all use global stats, so its TRAIN-phase oracle run is its
    TEST-phase forward; protoaudit's forward-only device total matches it (0.5%)."""
    rows = [line.split("\t") for line in open(ORACLE)]
    head = rows[0]
    row = dict(zip(head, next(r for r in rows if r[0] == "resnet50_deploy__TRAIN__b1")))
    assert int(row["forward_live"]) == 357944885 > 302 * MiB
    _, result = audit_json(next(r for r in REPLAYS if r.report == "8"), "caffe", "--context", "0")
    assert abs(result["total_bytes"] - int(row["forward_live"])) <= 0.005 * int(row["forward_live"])


def test_report_30_alexnet_train_val_cannot_be_what_ran():
    """forresti/SqueezeNet#19 timed AlexNet at batch 1024 on a 12 GB Titan X. With
    bvlc_alexnet_train_val that cannot have run: real Caffe's heap after a forward and backward (the
    oracle, CPU mode, no prefetch, no context) is 519,178,328 bytes at batch 1 and 560,414,876 at
    batch 4; everything in it is either fixed or grows linearly with the batch, so at batch 1024 it is
    519,178,328 + 1023 * (560,414,876 - 519,178,328) / 3 = 14,580,841,196 bytes > 12 GiB, before the
    data layer's prefetch. The user timed some other AlexNet file (deploy.prototxt, most likely, which
    `caffe time` runs backward through every layer): the configuration is not the table's."""
    rows = [line.split("\t") for line in open(ORACLE)]
    head = rows[0]
    live = {r[0]: int(dict(zip(head, r))["backward_live"]) for r in rows[1:]}
    b1, b4 = live["bvlc_alexnet_train_val__TRAIN__b1"], live["bvlc_alexnet_train_val__TRAIN__b4"]
    assert (b1, b4) == (519178328, 560414876)
    at_1024 = b1 + 1023 * (b4 - b1) // 3
    assert at_1024 == 14580841196 > 12 * GiB


def test_every_report_is_replayed_or_said_why_not():
    replayed = {r.report for r in REPLAYS}
    skipped = [n for n, _ in NOT_REPLAYED]
    assert len(skipped) == len(set(skipped)), "a report listed twice as not replayed"
    # a report may be replayed in part: then what is left out is listed too
    assert set(REPORTS) == replayed | set(skipped)
    assert all(reason for _, reason in NOT_REPLAYED)
