"""CRF-RNN's Caffe (torrvision/crfasrnn 650e988, caffe-crfrnn): its schema, MULTI_STAGE_MEANFIELD and
FCN's CROP held against its source, and a CRF-RNN training net (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's caffe-crfrnn/src/caffe/layers/
multi_stage_meanfield.cpp, meanfield_iteration.cpp, crop_layer.cpp, softmax_layer.cpp,
src/caffe/util/modified_permutohedral.cpp and include/caffe/vision_layers.hpp, cited by file and line.
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, run_in_process
from protoaudit import audit
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

NET = os.path.join(DATA, "forks", "crfrnn", "TVG_CRFRNN_COCO_VOC_TRAIN_3_CLASSES.prototxt")
F = 4  # bytes per float


def owned(net, layer, mode="gpu"):
    return {(b.owner, b.device): b.bytes for b in net_buffers(net, mode=mode) if b.layer == layer}


def crf_net(iterations=3, c=4, h=6, w=5, image="3"):
    """Legacy inputs (V1, as the fork's nets are): unaries and the first softmax input of (1, c, h, w),
    the image (1, 3, h, w); the CRF, and a loss so that it runs backward."""
    return (f'input: "u" input_dim: 1 input_dim: {c} input_dim: {h} input_dim: {w}\n'
            f'input: "q" input_dim: 1 input_dim: {c} input_dim: {h} input_dim: {w}\n'
            f'input: "img" input_dim: 1 input_dim: {image} input_dim: {h} input_dim: {w}\n'
            f'input: "y" input_dim: 1 input_dim: 1 input_dim: {h} input_dim: {w}\n'
            'force_backward: true\n'
            'layers { name: "crf" type: MULTI_STAGE_MEANFIELD bottom: "u" bottom: "q" bottom: "img" top: "p" '
            'blobs_lr: 1 blobs_lr: 1 blobs_lr: 1 '
            f'multi_stage_meanfield_param {{ num_iterations: {iterations} theta_alpha: 160 theta_beta: 3 '
            'theta_gamma: 3 } }\n'
            'layers { name: "loss" type: SOFTMAX_LOSS bottom: "p" bottom: "y" top: "loss" }\n')


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "crfrnn.proto")).read()
    assert text.startswith("// torrvision/crfasrnn (CRF-RNN: Zheng, Jayasumana, Romera-Paredes et al., ICCV 2015), "
                           "caffe-crfrnn/src/caffe/proto/caffe.proto at commit 650e988f8c97b04da34e445097225676d741c7d3")
    assert "    MULTI_STAGE_MEANFIELD = 42;\n" in text and "    CROP = 40;\n" in text
    assert "  optional MultiStageMeanfieldParameter multi_stage_meanfield_param = 44;\n" in text
    assert "  required uint32 num_iterations = 6 [default = 1];\n" in text
    assert "repeated LayerParameter layers = 2;" in text  # V1 layers only: no V2 `layer` field


def test_the_net_reads_as_the_forks_and_audits_with_no_flags():
    """The file is V1 with MULTI_STAGE_MEANFIELD and CROP, which only this fork's enum has. FCN-8s's
    crops with conv1_1's pad 100 on a 224 x 224 image (the image assumed, its LMDB not here): the
    coordinate maps (vision_layers.hpp:168-197, 563-566: a convolution or pooling maps by
    ((k - 1) / 2 - pad) / stride inverted, a deconvolution by ((k - 1) / 2 - pad, stride)) give FCN's own
    offsets, 5 (score-pool4 to score2), 9 (score-pool3 to score4) and 31 (bigscore to the image), the
    offsets FCN's later nets write out as crop_param. The CRF's top takes the unaries' (1, 4, 224, 224)."""
    assert load(NET).schema.name == "crfrnn"
    run = run_in_process(NET)
    assert run.returncode == 0, run.stderr
    net = audit(NET).nets[0].net
    crops = [node for node in net.layers if node.type == "Crop"]
    assert [node.impl.crop for node in crops] == [(5, 5), (9, 9), (31, 31)]
    assert [tuple(node.top_shapes[0]) for node in crops] == [(1, 4, 18, 18), (1, 4, 38, 38), (1, 4, 224, 224)]
    (crf,) = [node for node in net.layers if node.type == "MultiStageMeanfield"]
    assert tuple(crf.top_shapes[0]) == (1, 4, 224, 224)
    assert [tuple(p.shape) for p in crf.params] == [(1, 1, 4, 4)] * 3  # cpp:57-86


def test_the_crf_layer_buffers_by_hand(tmp_path):
    """N = 1, C = 4, H x W = 6 x 5 (P = 30, X = 120), T = 3 iterations, GPU mode.
    - three (1, 1, 4, 4) parameters (cpp:57-86), and their host copies, made at setup (48 floats);
    - spatial_norm_ and norm_feed_, P each; bilateral_kernel_buffer_ 5P (cpp:96-108); bilateral_norms_
      N x P (cpp:108);
    - the lattices (SSE build): offset_, barycentric_, rank_ of (d+1)(P+16) each (cpp:122-126), 4 bytes:
      spatial (d = 2) 3 x 3 x 46 x 4 = 1,656 bytes, bilateral (d = 5) 3 x 6 x 46 x 4 = 3,312; blur_neighbors_
      at most (d+1) x (d+1)P Neighbors of 8 bytes: 9 x 30 x 8 = 2,160 and 36 x 30 x 8 = 8,640;
    - T - 1 = 2 iteration outputs of X (cpp:129-132), on the device (the inner Eltwise's tops);
    - per iteration (meanfield_iteration.cpp:49-69): spatial_out_blob_, bilateral_out_blob_,
      message_passing_, pairwise_ and prob_ of X on the host, 3 x 16 parameter copies, softmax
      sum_multiplier_ C and scale_ N x P (softmax_layer.cpp:15-20); prob_ and pairwise_ on the device too;
    - backward: the split tops' diffs, T x X, and the iteration outputs' diffs on the device; every
      host blob's diff."""
    net = build_text(tmp_path, crf_net(), schema="crfrnn")
    got = owned(net, "crf")
    X, P, T = 120, 30, 3
    assert got[("crf.blobs_ (host)", "host")] == 3 * 16 * F
    assert got[("crf.spatial_norm_", "host")] == got[("crf.norm_feed_", "host")] == P * F
    assert got[("crf.bilateral_kernel_buffer_", "host")] == 5 * P * F
    assert got[("crf.bilateral_norms_", "host")] == P * F
    assert got[("crf.spatial_lattice_", "host")] == 1656 + 2160
    assert got[("crf.bilateral_lattices_", "host")] == 3312 + 8640
    assert got[("crf.iteration_output_blobs_", "device")] == got[("crf.iteration_output_blobs_ diff", "device")] \
        == (T - 1) * X * F
    for name in ("spatial_out_blob_", "bilateral_out_blob_", "message_passing_", "pairwise_", "prob_"):
        assert got[(f"crf.{name} x3", "host")] == got[(f"crf.{name} diff x3", "host")] == T * X * F
    assert got[("crf.prob_ (device) x3", "device")] == got[("crf.pairwise_ diff (device) x3", "device")] == T * X * F
    assert got[("crf.softmax scale_ x3", "device")] == T * P * F
    assert got[("crf.softmax sum_multiplier_ x3", "host")] == T * 4 * F
    assert got[("crf.blobs_ of the iterations x3", "host")] == T * 3 * 16 * F
    assert got[("crf.split tops' diffs", "device")] == T * X * F


def test_the_crf_layer_checks_what_its_source_checks(tmp_path):
    """CHECK_GT(num_iterations, 1) (cpp:32); the image bottom gives 3 channels per pixel (cpp:238-241);
    the fork's caffe.proto makes theta_alpha, theta_beta, theta_gamma and num_iterations required."""
    with pytest.raises(InputError, match="num_iterations is 1"):
        build_text(tmp_path, crf_net(iterations=1), schema="crfrnn")
    with pytest.raises(InputError, match="RGB image"):
        build_text(tmp_path, crf_net(image="1"), schema="crfrnn")
    path = tmp_path / "no_theta.prototxt"
    path.write_text(crf_net().replace("theta_alpha: 160 ", ""))
    run = run_in_process(str(path))
    assert run.returncode == 2 and "theta_alpha" in run.stderr


V2_NET = os.path.join(DATA, "forks", "crfrnn", "TVG_CRFRNN_new_deploy.prototxt")


def test_the_later_caffes_v2_nets_read_as_its_own():
    """torrvision/caffe d779ee3 keeps the layer's sources (but for includes and its V2 registration,
    multi_stage_meanfield.cpp:259) and adds multi_stage_meanfield_param = 146 to its V2 LayerParameter
    (caffe.proto:388). CRF-RNN's deploy net: a 500 x 500 image, 21 classes, so the CRF's top is
    (1, 21, 500, 500) and its parameters 3 x (1, 1, 21, 21); 10 iterations, so prob_ on the device is
    10 x 21 x 500 x 500 floats (210,000,000 bytes). Its Crop is FCN's (crop_layer.cpp, no crop_param in its
    caffe.proto): FCN-8s's offsets 5, 9 and 31 again."""
    assert load(V2_NET).schema.name == "crfrnn_v2"
    text = open(os.path.join(ROOT, "proto", "forks", "crfrnn_v2.proto")).read()
    assert "  optional MultiStageMeanfieldParameter multi_stage_meanfield_param = 146;\n" in text
    run = run_in_process(V2_NET)
    assert run.returncode == 0, run.stderr
    net = audit(V2_NET).nets[0].net
    (crf,) = [node for node in net.layers if node.type == "MultiStageMeanfield"]
    assert tuple(crf.top_shapes[0]) == (1, 21, 500, 500)
    assert [tuple(p.shape) for p in crf.params] == [(1, 1, 21, 21)] * 3
    assert owned(net, crf.name)[(f"{crf.name}.prob_ (device) x10", "device")] == 10 * 21 * 500 * 500 * F
    crops = [node for node in net.layers if node.type == "Crop"]  # the fork's Crop: FCN's
    assert [node.impl.crop for node in crops] == [(5, 5), (9, 9), (31, 31)]
