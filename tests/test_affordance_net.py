"""affordance-net's Caffe (nqanh/affordance-net 8db1b3f, caffe-affordance-net): its schema, ROIAlignment and
ROIAlignment2 held against their source, and real nets and a real log built on it.

Expected values are derived by hand below from that commit's caffe-affordance-net/include/caffe/
roi_alignment_layer.hpp, roi_alignment2_layer.hpp and src/caffe/layers/roi_alignment_layer.cpp/.cu,
roi_alignment2_layer.cpp/.cu, cited by file and line, or read from the log. The files are TomatoNet's
mask_rcnn_end2end nets and affordanceNet_Novel's training log, each with its repository's lib/fast_rcnn/config.py,
which sizes the Python layers feeding ROIAlignment (tests/data/SOURCES.md).
"""
import json
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit.audit import build_nets
from protoaudit.errors import InputError
from protoaudit.layers import fastrcnn, layer_class
from protoaudit.memory.buffers import layer_touches, net_buffers
from protoaudit.read.load import load
from protoaudit.read.netspecs import net_specs

HERE = os.path.join(DATA, "affordance_net")
TOMATO = os.path.join(HERE, "tomatonet")
NOVEL = os.path.join(HERE, "ivalab_novel")
NOVEL_LOG = os.path.join("experiments", "logs", "faster_rcnn_end2end_VGG16_.txt.2018-12-10_12-32-13")
CORPUS = os.path.join(DATA, "corpus", "nets")
F = 4  # bytes per float, and per int

# conv (2, 4, 24, 32) from an 8-channel map; 6 RoIs; the layer under test pools them 3 x 3 and an
# InnerProduct and a loss above it make the net run backward through it into conv.
NET = """
input: "data" input_shape { dim: 2 dim: 8 dim: 24 dim: 32 }
input: "rois" input_shape { dim: 6 dim: 5 }
input: "label" input_shape { dim: 6 }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 4 kernel_size: 3 pad: 1 } }
layer { name: "align" type: "%(type)s" bottom: "conv" bottom: "rois" top: "pool"
        %(param)s { pooled_h: %(ph)d pooled_w: 3 spatial_scale: 0.0625 } }
layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip" inner_product_param { num_output: 2 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" }
"""


def net_of(tmp_path, kind="ROIAlignment", ph=3):
    param = "roi_alignment_param" if kind == "ROIAlignment" else "roi_alignment2_param"
    return build_text(tmp_path, NET % {"type": kind, "param": param, "ph": ph}, phase="train")


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "affordance_net.proto")).read()
    assert text.startswith("// nqanh/affordance-net, caffe-affordance-net/src/caffe/proto/caffe.proto at commit\n"
                           "// 8db1b3fcf5a7c9dbbab258f98234000798ab6de7")
    # its own fields (caffe.proto:390-391) and messages (:1015-1033), and a 2016 BVLC Caffe's last field
    assert "optional ROIAlignmentParameter roi_alignment_param = 143;//8266710;" in text
    assert "optional ROIAlignment2Parameter roi_alignment2_param = 144;//8266710;" in text
    assert "// LayerParameter next available layer-specific ID: 143 (last added: scale_param)" in text


def test_nets_with_roialignment_are_read_with_its_schema_and_py_faster_rcnns_stay_caffe_fast_rcnns(tmp_path):
    """affordance-net's Caffe keeps caffe-fast-rcnn's ROIPooling and SmoothL1Loss (read.schema.DESCENDS_FROM):
    a net of those alone, which both read, stays caffe-fast-rcnn's."""
    assert net_of(tmp_path).layers[1].impl.ctx.schema == "affordance_net"
    assert load(os.path.join(TOMATO, "train_w_align.prototxt")).schema.name == "affordance_net"
    assert load(os.path.join(CORPUS, "faster_rcnn_vgg16_end2end_train.prototxt")).schema.name == "fastrcnn"
    # its caffe.proto has no field py-R-FCN's lacks but ROIAlignment's (read.schema.SAME_FIELDS): PVANet's
    # BatchNorm net with ROIPooling, which both read, stays py-R-FCN's
    assert load(os.path.join(DATA, "python_layers", "pva_example_train", "train.prototxt")).schema.name == "rfcn"


def test_its_roipooling_and_smoothl1loss_are_caffe_fast_rcnns():
    """roi_pooling_layer.cu, smooth_L1_loss_layer.cpp/.cu are caffe-fast-rcnn 4115385's byte for byte,
    roi_pooling_layer.cpp in whitespace alone."""
    assert issubclass(layer_class("ROIPooling", "affordance_net"), fastrcnn.ROIPooling)
    assert issubclass(layer_class("SmoothL1Loss", "affordance_net"), fastrcnn.SmoothL1Loss)


def test_roialignment_top_and_buffers_by_hand(tmp_path):
    """Reshape (roi_alignment_layer.cpp:43): the top is (rois' num 6, conv's channels 4, pooled_h 3,
    pooled_w 3) = 216 elements. It shapes six buffers alike (cpp:46-51): four Blob<int> and two
    Blob<float> (roi_alignment_layer.hpp:52-57), 216 x 4 = 864 bytes each, which the GPU forward
    writes (cu:135-140)."""
    net = net_of(tmp_path)
    assert tops(net, "align") == [(6, 4, 3, 3)]
    names = ("max_idx_topleft", "max_idx_topright", "max_idx_bottomleft", "max_idx_bottomright",
             "dh_ratio", "dw_ratio")
    assert layer_buffers(net, "align") == {(n, "device"): 216 * F for n in names}
    mine = [b for b in net_buffers(net, mode="gpu") if b.layer == "align"]
    assert {b.owner: b.touch for b in mine if b.owner.startswith("align.")} == {f"align.{n}": "forward" for n in names}
    assert all(b.per_sample for b in mine if b.owner.startswith("align."))


def test_roialignment_backward_writes_the_maps_diff_not_the_rois(tmp_path):
    """Backward_gpu (cu:278-309): bottom 0's diff, conv's 2*4*24*32 = 6,144 elements, zeroed and written
    from top 0's diff (216); bottom 1, the rois, is only read (cu:283)."""
    net = net_of(tmp_path)
    first = {b.owner: b for b in net_buffers(net, mode="gpu") if b.layer == "align"}
    assert first["conv"].kind == "top diff" and first["conv"].bytes == 2 * 4 * 24 * 32 * F
    assert not any(b.owner == "rois" and b.kind.endswith("diff") for b in net_buffers(net, mode="gpu"))


def test_roialignment_with_no_diff_to_give_runs_no_backward(tmp_path):
    """cu:280-282: it returns unless bottom 0 needs a diff. Fed by the data itself, nothing below it learns."""
    text = (NET % {"type": "ROIAlignment", "param": "roi_alignment_param", "ph": 3}).replace(
        'bottom: "conv" bottom: "rois"', 'bottom: "data" bottom: "rois"')
    net = build_text(tmp_path, text, phase="train")
    align = next(n for n in net.layers if n.name == "align")
    assert [t for t in layer_touches(align, "gpu", "caffe") if t.stage == "backward"] == []


def test_roialignment_on_the_cpu_stops_at_backward(tmp_path):
    """Forward_cpu allocates what the GPU's does (cpp:70-75); Backward_cpu is NOT_IMPLEMENTED (cpp:182)."""
    align = next(n for n in net_of(tmp_path).layers if n.name == "align")
    cpu = layer_touches(align, "cpu", "caffe")
    assert [(t.stage, t.what) for t in cpu if t.what == "stop"] == [("backward", "stop")]
    assert sum(t.elements * t.itemsize for t in cpu if t.what == "buffer") == 6 * 216 * F


def test_roialignment2_by_hand(tmp_path):
    """roi_alignment2_layer.cpp:43: the same top, (6, 4, 5, 3) with pooled_h 5; two Blob<Dtype> of its
    shape (hpp:52-53, cpp:45-46), 6*4*5*3 = 360 elements, 1,440 bytes each, written by the GPU forward (cu:128-129).
    Its Forward_cpu and Backward_cpu are NOT_IMPLEMENTED (cpp:52, :59)."""
    net = net_of(tmp_path, "ROIAlignment2", ph=5)
    assert tops(net, "align") == [(6, 4, 5, 3)]
    assert layer_buffers(net, "align") == {("max_idx_x", "device"): 360 * F, ("max_idx_y", "device"): 360 * F}
    align = next(n for n in net.layers if n.name == "align")
    cpu = layer_touches(align, "cpu", "caffe")
    assert [(t.stage, t.what) for t in cpu] == [("forward", "stop"), ("backward", "stop")]


@pytest.mark.parametrize("kind", ["ROIAlignment", "ROIAlignment2"])
def test_pooled_size_zero_is_caffes_check(tmp_path, kind):
    """LayerSetUp: CHECK_GT(pooled_h, 0) (roi_alignment_layer.cpp:27, roi_alignment2_layer.cpp:27)."""
    with pytest.raises(InputError, match="pooled_h must be > 0"):
        net_of(tmp_path, kind, ph=0)


# --- real files ---------------------------------------------------------------------------------------

def test_tomatonet_with_alignment_audits_with_no_flags():
    """train_w_align.prototxt with its repository's lib/fast_rcnn/config.py (cfg.TRAIN.BATCH_SIZE 32 at :55,
    FG_FRACTION 0.25 at :58): roi_align5 pools the 32 sampled RoIs, roi_align5_2 the round(0.25 x 32) = 8
    foreground ones (rois_pos), each over conv5_3's 512 channels at 7 x 7 (roi_alignment_layer.cpp:43); six
    buffers of the top's size each (cpp:46-51): 32*512*7*7 = 802,816 and 8*512*7*7 = 200,704 elements."""
    path = os.path.join(TOMATO, "train_w_align.prototxt")
    net = build_nets(path, phase="train")[0]
    assert tops(net, "roi_align5") == [(32, 512, 7, 7)] and tops(net, "roi_align5_2") == [(8, 512, 7, 7)]
    assert sorted(layer_buffers(net, "roi_align5").values()) == [802816 * F] * 6
    assert sorted(layer_buffers(net, "roi_align5_2").values()) == [200704 * F] * 6
    run = run_in_process(path)
    assert run.returncode == 0, run.stderr
    assert "Read with the caffe.proto of affordance-net's Caffe" in run.stdout


def test_tomatonet_without_alignment_stops_where_caffe_does():
    """train.prototxt's bbox_pred has num_output 3 where its targets have 4 x 3 classes (12): the net gets past
    both ROIAlignment layers and stops at loss_bbox, on SmoothL1Loss's shape CHECK (smooth_L1_loss_layer.cpp:28-37)."""
    run = run_in_process(os.path.join(TOMATO, "train.prototxt"))
    assert run.returncode == 2
    assert "layer 'loss_bbox'" in run.stderr and "(32, 12)" in run.stderr and "(32, 3)" in run.stderr


def test_novel_log_audits_with_its_repositorys_config():
    """The log's run, with the repository's lib/fast_rcnn/config.py (BATCH_SIZE 48 at :57, FG_FRACTION 0.25 at
    :60): roi_pool5 (an ROIAlignment) pools 48 RoIs, roi_pool5_2 round(0.25 x 48) = 12, at 512 x 7 x 7."""
    run = run_in_process(NOVEL_LOG, "--format", "json", cwd=NOVEL)
    assert run.returncode == 0, run.stderr
    layers = {layer["name"]: layer["tops"] for layer in json.loads(run.stdout)["nets"][0]["layers"]}
    assert layers["roi_pool5"] == [[48, 512, 7, 7]] and layers["roi_pool5_2"] == [[12, 512, 7, 7]]


def test_novel_log_is_read_with_its_schema_and_its_lines_come_back():
    """affordanceNet_Novel's training log: its net names ROIAlignment with roi_alignment_param, which only
    affordance-net's caffe.proto reads. --caffe-log gives Caffe's own Top shape and Memory required lines,
    ROIAlignment's (roi_pool5: 1 512 7 7, from one RoI) by its rule, not the log's."""
    specs = net_specs(os.path.join(NOVEL, NOVEL_LOG))
    assert [s.schema.name for s in specs] == ["affordance_net"]
    assert not specs[0].skipped
    run = run_in_process(NOVEL_LOG, "--caffe-log", cwd=NOVEL)
    assert run.returncode == 0, run.stderr

    def lines(text):
        return [line.split("] ", 1)[-1] for line in text.splitlines()
                if "Top shape:" in line or "Memory required for data:" in line]

    logged = lines(open(os.path.join(NOVEL, NOVEL_LOG)).read())
    assert lines(run.stdout) == logged and len(logged) > 100
    assert "Top shape: 1 512 7 7 (25088)" in logged


CONTEXT = os.path.join(DATA, "affordance_net", "ivalab_context")
CONTEXT_LOG = os.path.join("experiments", "logs", "faster_rcnn_end2end_VGG16_.txt.2020-05-04_22-06-35")


def test_a_repositorys_own_proposal_target_layer_of_ten_tops_takes_the_logs_shapes(tmp_path):
    """affordanceNet_Context's ProposalTargetLayer makes 10 tops (its own copy: rois ... rois_pos and three
    attribute blobs), where py-faster-rcnn's makes 5 and affordance-net's 7. Its log shows Caffe set it up
    so (lines 1826-1836: 1 5, 1 1, three 1 8, 1 244 244, 1 5, three 1 7): the net is audited with those
    tops, as the log shows them at setup, and says so. The net Caffe printed, alone, is refused."""
    run = run_in_process(CONTEXT_LOG, "--format", "json", cwd=CONTEXT)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    layers = {layer["name"]: layer["tops"] for layer in report["nets"][0]["layers"]}
    assert layers["roi-data"] == [[1, 5], [1, 1], [1, 8], [1, 8], [1, 8], [1, 244, 244], [1, 5], [1, 7], [1, 7], [1, 7]]
    said = [a["assumption"] for a in report["assumptions"] if a["layer"] == "roi-data"]
    assert said and "makes 5 tops as published; Caffe's log (line" in said[0] and "made 10" in said[0]
    with open(os.path.join(CONTEXT, CONTEXT_LOG)) as f:
        lines = f.read().splitlines()
    first = next(k for k, line in enumerate(lines) if "Initializing net from parameters" in line)
    end = next(k for k in range(first + 1, len(lines)) if lines[k].startswith("I0"))
    (tmp_path / "train.prototxt").write_text("\n".join(lines[first + 1:end]) + "\n")
    alone = run_in_process("train.prototxt", cwd=tmp_path)
    assert alone.returncode == 2 and "makes 5 tops; 10 are named" in alone.stderr, alone.stderr
