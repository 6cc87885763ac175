"""The classification forks (SphereFace's Caffe, ceil_mode pooling as caffe-priv carries it,
Tongcheng's DenseBlock): which schema the loader picks, and every corpus net of theirs audited to the
end with the help it needs (only --input)."""
import os

import pytest

from conftest import DATA, run_protoaudit
from protoaudit import InputError
from protoaudit.layers import FORK_REGISTRY
from protoaudit.layers.pooling import Pooling
from protoaudit.read import load as loader

CORPUS = os.path.join(DATA, "corpus")

# soeaver's AIR-101 Faster R-CNN reads with caffe-priv's schema (ceil_mode), which also carries
# caffe-fast-rcnn's ROIPooling and SmoothL1Loss in versions of its own (ROIPooling's CPU backward,
# for one): protoaudit sizes those for caffe-fast-rcnn's nets only, so here their tops are declared.
# res31 is 1024x38x63 and roi-data gives 128 RoIs (py-faster-rcnn's TRAIN.BATCH_SIZE): RoI pooling
# to 14x14 is 128x1024x14x14; the two losses are scalars.
FASTER_RCNN_TOPS = ["rpn_loss_bbox=1", "roi_pool=128x1024x14x14", "loss_bbox=1"]

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
        "priv", FASTER_RCNN_TOPS,
        "ceil_mode read; caffe-priv's ROIPooling and SmoothL1Loss are audited around as gaps"),
}


def run(file, *extra):
    _, inputs, _ = CORPUS_HELP[file]
    return run_protoaudit(os.path.join(CORPUS, file), *[a for v in inputs for a in ("--input", v)], *extra,
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
    loader._read.cache_clear()
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
    monkeypatch.setitem(FORK_REGISTRY["sphereface"], "Pooling", other)
    path = net_file(tmp_path, MARGIN.replace("POOL", ""))
    with pytest.raises(InputError, match="more than one Caffe fork reads this file"):
        loader.load(path)
    loader._read.cache_clear()


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
