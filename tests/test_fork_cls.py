"""The classification forks (SphereFace's Caffe, soeaver's caffe-priv with its ceil_mode pooling and
Fast R-CNN layers, Tongcheng's DenseBlock): which schema the loader picks, and every corpus net of
theirs audited to the end with the help it needs (only --input)."""
import os

import pytest

from conftest import DATA, run_in_process
from protoaudit import InputError
from protoaudit.layers import fork_layers
from protoaudit.layers.pooling import Pooling
from protoaudit.read import load as loader

CORPUS = os.path.join(DATA, "corpus")

# corpus file -> (schema, the --input values it needs, why)
CORPUS_HELP = {
    "nets/sphereface20_train.prototxt": (
        "sphereface", ["data=256x3x112x96"],
        "ImageData of CASIA-WebFace faces the authors' preprocessing crops to 112x96 (no resize in the file); "
        "the solver (corpus/solvers/sphereface_solver.prototxt) names it as code/sphereface_model.prototxt, "
        "found when run from the folder caffe train ran in (tests/test_sphereface.py)"),
    "nets/densenet121_deploy.prototxt": ("priv", [], "input_dim 1x3x224x224"),
    "nets/densenet161_deploy.prototxt": ("priv", [], "input_dim 1x3x224x224"),
    "nets/soeaver_resnext50_32x4d_deploy.prototxt": ("priv", [], "input_shape 1x3x224x224"),
    "nets/soeaver_wrn50_2_deploy.prototxt": ("priv", [], "input_shape 1x3x224x224"),
    "nets/densenet_memeff_tongcheng_c10.prototxt": (
        "tongcheng", ["Data1=64x3x32x32"], "CIFAR-10 LMDB (32x32 colour); the TEST net keeps its batch 50"),
    "nets/densenet_bc_memeff_tongcheng_c10.prototxt": (
        "tongcheng", ["Data1=64x3x32x32"], "CIFAR-10 LMDB (32x32 colour); the TEST net keeps its batch 50"),
    "nets/soeaver_faster_rcnn_air101_train.prototxt": (
        "priv", [],
        "ceil_mode read; caffe-priv's ROIPooling and SmoothL1Loss (tests below); py-faster-rcnn's Python "
        "layers at their published shapes (tests/test_python_layers.py)"),
}


def run(file, *extra):
    _, inputs, _ = CORPUS_HELP[file]
    return run_in_process(os.path.join(CORPUS, file), *[a for v in inputs for a in ("--input", v)], *extra,
                          timeout=300)


@pytest.mark.parametrize("file", sorted(CORPUS_HELP))
def test_corpus_net_audits_to_the_end(file):
    schema, _, _ = CORPUS_HELP[file]
    assert loader.load(os.path.join(CORPUS, file)).schema.name == schema
    result = run(file)
    assert result.returncode == 0, result.stderr
    assert "Total:" in result.stdout
    card = run(file, "--gpu-mem", "4G")
    assert card.returncode in (0, 1), card.stderr
    assert ("does not fit" in card.stdout.lower()) == (card.returncode == 1)


# --- the loader's choice ---------------------------------------------------------------------------

def net_file(tmp_path, text):
    path = tmp_path / "net.prototxt"
    path.write_text(text)
    loader.READINGS.clear()
    return str(path)


MARGIN = """name: "m"
layer { name: "in" type: "Input" top: "x" top: "label" input_param { shape { dim: 4 dim: 2 dim: 6 dim: 6 } shape { dim: 4 } } }
layer { name: "pool" type: "Pooling" bottom: "x" top: "pool" pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 POOL } }
layer { name: "fc6" type: "MarginInnerProduct" bottom: "pool" bottom: "label" top: "fc6" top: "lambda"
        margin_inner_product_param { num_output: 5 } }
"""


def test_a_net_two_forks_read_alike_is_not_ambiguous(tmp_path):
    """SphereFace's Caffe and caffe-priv both read MarginInnerProduct (caffe-priv carries SphereFace's
    layer files unchanged) and both know every type; caffe-priv's Pooling sizes a layer that keeps
    ceil_mode's default as BVLC's does: the same sizes, so the first fork in FORKS order reads it."""
    path = net_file(tmp_path, MARGIN.replace("POOL", ""))
    assert loader.load(path).schema.name == "sphereface"


def test_ceil_mode_false_takes_the_fork_that_has_it(tmp_path):
    path = net_file(tmp_path, MARGIN.replace("POOL", "ceil_mode: false"))
    assert loader.load(path).schema.name == "priv"


def test_forks_that_would_size_a_layer_differently_are_refused(tmp_path, monkeypatch):
    """Were SphereFace's Caffe to have its own Pooling, the two readings would differ: refused."""
    other = type("OtherPooling", (Pooling,), {})
    monkeypatch.setitem(fork_layers("sphereface"), "Pooling", other)
    path = net_file(tmp_path, MARGIN.replace("POOL", ""))
    with pytest.raises(InputError, match="more than one Caffe fork reads this file"):
        loader.load(path)
    loader.READINGS.clear()


def test_a_net_bvlc_reads_stays_bvlc(tmp_path):
    """Forks are tried only when BVLC's schema fails or lacks a type: a plain net is BVLC's even though
    caffe-priv's and SphereFace's schemas read it too."""
    path = net_file(tmp_path, MARGIN.replace("POOL", "").split('layer { name: "fc6"')[0])
    assert loader.load(path).schema.name == "bvlc"


def test_caffe_priv_has_no_cudnn_deconvolution(tmp_path):
    """caffe-priv's layer_factory.cpp (ec89b86) registers no Deconvolution creator (a
    DeformableConvolution one stands where BVLC's GetDeconvolutionLayer was): in a cuDNN build its
    Deconvolution still keeps Caffe's column buffer, C_out*k*k*H_in*W_in floats = 2*4*4*3*3."""
    from protoaudit import audit

    text = """input: "data" input_shape { dim: 1 dim: 2 dim: 3 dim: 3 }
layer { name: "pool" type: "Pooling" bottom: "data" top: "pool" pooling_param { pool: MAX kernel_size: 1 POOL } }
layer { name: "up" type: "Deconvolution" bottom: "pool" top: "up" convolution_param { num_output: 2 kernel_size: 4 stride: 2 } }
"""
    cols = {}
    for schema, pool in (("priv", "ceil_mode: false"), ("bvlc", "")):
        result = audit(net_file(tmp_path, text.replace("POOL", pool)), engine="cudnn", inference=True)
        assert result.nets[0].net.layers[0].impl.ctx.schema == schema
        cols[schema] = [b.bytes for b in result.buffers if b.owner == "up.col_buffer_"]
    assert cols == {"priv": [2 * 4 * 4 * 3 * 3 * 4], "bvlc": []}


def test_a_test_net_whose_data_layer_shares_the_train_ones_name_is_audited():
    """Tongcheng's nets name both data layers Data1 (TRAIN batch 64, TEST batch 50): the TEST net is
    other layers of the file all the same, and `caffe train` holds it beside the TRAIN net."""
    from protoaudit import audit

    result = audit(os.path.join(CORPUS, "nets/densenet_memeff_tongcheng_c10.prototxt"),
                   inputs={"Data1": (64, 3, 32, 32)})
    assert [(n.role, n.batch) for n in result.nets] == [("train", 64), ("test", 50)]


# --- caffe-priv's ROIPooling and SmoothL1Loss (soeaver/py-RFCN-priv ec89b86, caffe-priv/) ----------

AIR101 = os.path.join(CORPUS, "nets/soeaver_faster_rcnn_air101_train.prototxt")


def air101_buffers(**options):
    from protoaudit import build_nets
    from protoaudit.memory.buffers import net_buffers

    net = build_nets(AIR101)[0]
    return net, [b for b in net_buffers(net, **options)]


def test_air101_faster_rcnn_uses_caffe_privs_layers():
    """The net needs caffe-priv's schema (ceil_mode: false), so its ROIPooling and SmoothL1Loss are
    caffe-priv's (protoaudit/layers/priv.py), with no --input: py-faster-rcnn's Python layers give
    their published shapes. res31 is (1, 1024, 38, 63) (a 600x1000 image, stride 16 with ceil
    pooling) and roi-data gives 128 RoIs, so the top and max_idx_ are 128x1024x14x14
    (roi_pooling_layer.cpp:34-37), 4 bytes each."""
    from protoaudit.layers import fastrcnn, priv

    net, buffers = air101_buffers(mode="gpu")
    layers = {n.name: n for n in net.layers}
    assert type(layers["roi_pool"].impl) is priv.ROIPooling
    assert {type(layers[n].impl) for n in ("rpn_loss_bbox", "loss_bbox")} == {priv.SmoothL1Loss}
    assert isinstance(layers["roi_pool"].impl, fastrcnn.ROIPooling)
    shapes = {b.name: b.shape for b in net.blobs}
    assert shapes["res31"] == (1, 1024, 38, 63) and shapes["rois"] == (128, 5)
    assert shapes["roi_pool"] == (128, 1024, 14, 14)
    mine = {b.owner: b for b in buffers if b.layer == "roi_pool"}
    pooled = 128 * 1024 * 14 * 14 * 4
    assert mine["roi_pool"].bytes == mine["roi_pool.max_idx_"].bytes == pooled == 102_760_448
    # Backward_gpu (cu:163-180) writes the diff of its res31 (a Split's top: res31 also feeds the
    # RPN) and never the rois': roi-data's tops need backward (its bottom comes from the RPN), but
    # nothing writes a diff into them
    split = "res31_res31_relu_0_split_1"
    assert mine[split].kind == "top diff" and mine[split].bytes == 1024 * 38 * 63 * 4
    assert "rois" not in {b.owner for b in buffers if b.kind == "top diff"}
    # rpn_loss_bbox: bottom 0 (1, 36, 38, 63) = 86,184 elements: diff_, errors_, ones_ on the device
    # (smooth_l1_loss_layer.cpp:34-40, .cu:27-56), ones_ filled on the host first (cpp:41-43)
    loss = {b.owner: (b.touch, b.bytes, b.device) for b in air101_buffers(mode="gpu")[1]
            if b.layer == "rpn_loss_bbox" and b.kind == "layer buffer"}
    size = 36 * 38 * 63 * 4
    assert loss == {"rpn_loss_bbox.ones_ (host)": ("setup", size, "host"),
                    "rpn_loss_bbox.diff_": ("forward", size, "device"),
                    "rpn_loss_bbox.errors_": ("forward", size, "device"),
                    "rpn_loss_bbox.ones_": ("forward", size, "device")}


def test_air101_in_cpu_mode_stops_at_caffe_privs_smoothl1_forward():
    """caffe-priv's SmoothL1Loss has no CPU code either: Forward_cpu is NOT_IMPLEMENTED
    (smooth_l1_loss_layer.cpp:49), met before any backward."""
    r = run_in_process(AIR101, "--mode", "cpu")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "layer 'rpn_loss_bbox'" in r.stderr and "caffe-priv's SmoothL1Loss" in r.stderr
    assert "smooth_l1_loss_layer.cpp:49" in r.stderr


ROI_NET = """name: "roi"
input: "data" input_shape { dim: 2 dim: 8 dim: 24 dim: 32 }
input: "boxes" input_shape { dim: 6 dim: 3 }
input: "label" input_shape { dim: 6 }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }
layer { name: "rois" type: "InnerProduct" bottom: "boxes" top: "rois" ROIS_PARAM inner_product_param { num_output: 5 } }
layer { name: "pool" type: "ROIPooling" bottom: "conv" bottom: "rois" top: "pool" DOWN
        roi_pooling_param { pooled_h: 4 pooled_w: 4 spatial_scale: 0.0625 } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc" inner_product_param { num_output: 3 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
"""


def roi_net(tmp_path, rois_learn=True, down=""):
    text = ROI_NET.replace("ROIS_PARAM", "" if rois_learn else "param { lr_mult: 0 } param { lr_mult: 0 }")
    return net_file(tmp_path, text.replace("DOWN", down))


def test_a_file_whose_only_fork_type_is_roipooling_stays_caffe_fast_rcnns(tmp_path):
    """caffe-priv's schema reads py-faster-rcnn's nets too, but its ROIPooling and SmoothL1Loss are
    caffe-fast-rcnn's layers: they do not make a file caffe-priv's (claims_files), --fork priv does."""
    from protoaudit import build_nets
    from protoaudit.layers import fastrcnn, priv

    path = roi_net(tmp_path)
    assert loader.load(path).schema.name == "fastrcnn"
    assert type(build_nets(path)[0].layer("pool").impl) is fastrcnn.ROIPooling
    assert type(build_nets(path, schema="priv")[0].layer("pool").impl) is priv.ROIPooling
    for file in ("faster_rcnn_vgg16_end2end_train", "fast_rcnn_vgg16_train", "faster_rcnn_vgg16_end2end_test"):
        loader.READINGS.clear()
        assert loader.load(os.path.join(CORPUS, "nets", file + ".prototxt")).schema.name == "fastrcnn"


def cpu_pool_buffers(path, fork):
    from protoaudit import build_nets
    from protoaudit.memory.buffers import net_buffers

    net = build_nets(path, schema=fork)[0]
    return {b.owner: (b.touch, b.bytes) for b in net_buffers(net, mode="cpu") if b.layer == "pool"}


def test_caffe_privs_roipooling_has_a_cpu_backward(tmp_path):
    """conv (2, 8, 24, 32), 6 RoIs pooled 4x4: the top and max_idx_ 6*8*4*4 = 768 elements each
    (roi_pooling_layer.cpp:34-37, forward cpp:49-52). The rois come from a frozen InnerProduct (no
    gradient for them), so caffe-priv's Backward_cpu (cpp:122-158) passes cpp:125-131 and reads the
    top's diff (768 floats, its consumer's backward wrote it) and writes the conv map's diff,
    2*8*24*32 floats (cpp:133-135). caffe-fast-rcnn's Backward_cpu is NOT_IMPLEMENTED (its cpp:130):
    Caffe stops."""
    from protoaudit import InputError

    path = roi_net(tmp_path, rois_learn=False)
    mine = cpu_pool_buffers(path, "priv")
    assert mine["pool"] == mine["pool.max_idx_"] == ("forward", 768 * 4)
    assert mine["conv"] == ("backward", 2 * 8 * 24 * 32 * 4)
    assert "rois" not in mine
    with pytest.raises(InputError, match=r"roi_pooling_layer.cpp:130, NOT_IMPLEMENTED"):
        cpu_pool_buffers(path, "fastrcnn")


def test_caffe_privs_roipooling_refuses_a_gradient_into_its_rois_on_the_cpu(tmp_path):
    """Learnable rois (an InnerProduct with lr_mult 1) need backward, so Net::Init gives ROIPooling
    propagate_down[1]: caffe-priv's Backward_cpu stops (cpp:125-128, LOG(FATAL)); its Backward_gpu
    never reads the flag (cu:166-168) and writes the map's diff only; propagate_down: false on the
    rois lets the CPU backward run."""
    from protoaudit import InputError, build_nets
    from protoaudit.memory.buffers import net_buffers

    path = roi_net(tmp_path)
    with pytest.raises(InputError, match=r"cannot backpropagate to its rois.*roi_pooling_layer.cpp:125-128"):
        cpu_pool_buffers(path, "priv")
    gpu = {b.owner: b.touch for b in net_buffers(build_nets(path, schema="priv")[0], mode="gpu") if b.layer == "pool"}
    assert gpu["conv"] == "backward" and "rois" not in gpu
    loader.READINGS.clear()
    path = roi_net(tmp_path, down="propagate_down: true propagate_down: false")
    assert cpu_pool_buffers(path, "priv")["conv"] == ("backward", 2 * 8 * 24 * 32 * 4)
