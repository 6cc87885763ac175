"""e2e_face's Caffe (mikuhatsune/e2e_face 11d506e): its schema, SpatialTransformer, CenterLoss and
HDF5Data held against the repository's caffe_modification/ sources, and its real log
(tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's caffe_modification/caffe.proto,
spatial_transformer_layer.hpp/.cpp/.cu, center_loss_layer.cpp/.cu and hdf5_data_layer.hpp/.cpp, cited
by file and line, or are the lines Caffe logged (shallow/caffe.localhost.localdomain.zhongyy.log...).
"""
import os
import re

import numpy as np
import pytest

import datasets as ds
from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers

HERE = os.path.join(DATA, "forks", "e2e_face")
LOG = os.path.join(HERE, "shallow_net_init.log")
F = 4  # bytes per float (and per int of count_)
GLOG = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ [^\]]+\] ?")
LINES = re.compile(r"^(Top shape|Memory required for data)")


def log_lines(text):
    return [line for line in (GLOG.sub("", raw) for raw in text.splitlines()) if LINES.match(line)]


def st_net(n=4, c=1, h=20, w=20, theta=8, kind="projective", out="output_H: 8 output_W: 6"):
    """U (n, c, h, w) and theta from an InnerProduct (so the backward runs into theta only)."""
    return (f'input: "U" input_shape {{ dim: {n} dim: {c} dim: {h} dim: {w} }}\n'
            f'input: "x" input_shape {{ dim: {n} dim: 5 }}\n'
            f'layer {{ name: "t" type: "InnerProduct" bottom: "x" top: "t" inner_product_param {{ num_output: {theta} }} }}\n'
            f'layer {{ name: "st" type: "SpatialTransformer" bottom: "U" bottom: "t" top: "V" '
            f'st_param {{ transform_type: "{kind}" {out} }} }}\n'
            'layer { name: "loss" type: "EuclideanLoss" bottom: "V" bottom: "V2" top: "l" }\n'
            f'input: "V2" input_shape {{ dim: {n} dim: {c} dim: 8 dim: 6 }}\n')


def test_the_proto_is_the_repositorys_verbatim_with_its_own_numbers():
    """caffe_modification/caffe.proto: st_param = 147, center_loss_param = 148 (caffe-face's is 147),
    HDF5DataParameter's scale = 4 (default 1), mirror = 5, mean_value = 6, crop_size = 7, crop_num = 8."""
    text = open(os.path.join(ROOT, "proto", "forks", "e2e_face.proto")).read()
    assert text.startswith("// mikuhatsune/e2e_face ")
    assert "11d506efb1a3ba99a14851724be78823408f97d2" in text.splitlines()[0]
    for line in ("  optional SpatialTransformerParameter st_param = 147;",
                 "  optional CenterLossParameter center_loss_param = 148;",
                 "  optional float scale = 4 [default = 1];", "  optional bool mirror = 5 [default = false];",
                 "  optional uint32 crop_num = 8 [default = 1];",
                 '\toptional string transform_type = 5 [default = "affine"];'):
        assert line in text.splitlines()




def test_spatial_transformer_top_shapes(tmp_path):
    net = build_text(tmp_path, st_net(), schema="e2e_face")
    assert tops(net, "st") == [(4, 1, 8, 6)]
    net = build_text(tmp_path, st_net(out="output_W: 6").replace("dim: 8 dim: 6", "dim: 20 dim: 6"), schema="e2e_face")
    assert tops(net, "st") == [(4, 1, 20, 6)]


@pytest.mark.parametrize("kind, theta", [("affine", 6), ("translation", 2), ("translation_scaling", 4),
                                         ("projective", 8), ("similarity", 4), ("similarity+", 5)])
def test_spatial_transformer_theta_width_is_checked(tmp_path, kind, theta):
    """Reshape's CHECK_EQ(bottom[1]->shape(1), width) per type (cpp:75-116)."""
    build_text(tmp_path, st_net(theta=theta, kind=kind), schema="e2e_face")
    with pytest.raises(InputError, match=f"{theta}-dimension theta"):
        build_text(tmp_path, st_net(theta=theta + 1, kind=kind), schema="e2e_face")


def test_spatial_transformer_refuses_an_unknown_type(tmp_path):
    """LayerSetUp: LOG(FATAL) "Transformation type: ... not supported!" (cpp:33)."""
    with pytest.raises(InputError, match="not supported"):
        build_text(tmp_path, st_net(kind="perspective"), schema="e2e_face")


def test_spatial_transformer_buffers_in_gpu_mode_by_hand(tmp_path):
    """Projective, N = 4, output 8 x 6 (48 pixels): source_ (4, 3, 8, 6) = 576 floats (cpp:99), written
    by Forward_gpu (.cu:464); theta_diff_cache_ (4, 8, 8, 6) = 1,536 floats (cpp:98), written by
    Backward_gpu (.cu:1017); theta_diff_op_ 48 ones set on the host in Reshape (cpp:121-126) and read
    on the device by the backward's gemm (.cu:1071). No target_ in GPU mode (cpp:50)."""
    net = build_text(tmp_path, st_net(), schema="e2e_face")
    assert layer_buffers(net, "st") == {("source_", "device"): 576 * F, ("theta_diff_cache_", "device"): 1536 * F,
                                        ("theta_diff_op_", "device"): 48 * F,
                                        ("theta_diff_op_ (host)", "host"): 48 * F}


def test_spatial_transformer_buffers_in_cpu_mode_by_hand(tmp_path):
    """CPU mode: target_ (1, 3, 8, 6) = 144 floats made in LayerSetUp (cpp:50-64); source_ 576 floats,
    and its diff, written by Backward_cpu (cpp:341, 386-387); no theta_diff_cache_ or theta_diff_op_
    (cpp:78, 121: GPU mode only)."""
    net = build_text(tmp_path, st_net(), schema="e2e_face")
    assert layer_buffers(net, "st", mode="cpu") == {("source_", "host"): 576 * F,
                                                    ("source_ (diff)", "host"): 576 * F,
                                                    ("target_", "host"): 144 * F}


def test_spatial_transformer_backward_writes_thetas_diff_not_the_images(tmp_path):
    """U is a net input (no backward into it): the backward writes only theta's diff, 4 x 8 floats
    (.cu:999, 1071); U's diff only where propagate_down[0] (.cu:1021-1023)."""
    net = build_text(tmp_path, st_net(), schema="e2e_face")
    got = {b.owner: b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "st"
           and b.kind == "top diff" and b.touch == "backward"}
    assert got == {"t": 4 * 8 * F}


def center_net(n=6, k=5, classes=10):
    return (f'input: "x" input_shape {{ dim: {n} dim: 3 }}\ninput: "y" input_shape {{ dim: {n} dim: 1 dim: 1 dim: 1 }}\n'
            f'layer {{ name: "f" type: "InnerProduct" bottom: "x" top: "f" inner_product_param {{ num_output: {k} }} }}\n'
            f'layer {{ name: "c" type: "CenterLoss" bottom: "f" bottom: "y" top: "l" '
            f'center_loss_param {{ num_output: {classes} }} }}\n')


def test_center_loss_by_hand(tmp_path):
    """Centres (10, 5) (cpp:24-30); distance_ like bottom 0, 6 x 5 (cpp:48); variation_sum_ like the
    centres, 50 floats (cpp:49), and count_ 10 ints (cpp:50-52), both written on the device by
    Backward_gpu (.cu:67-79) -- caffe-face's keeps variation_sum_ on the host."""
    net = build_text(tmp_path, center_net(), schema="e2e_face")
    assert tops(net, "c") == [()]
    params = {(b.kind, b.owner): b.bytes for b in net_buffers(net, mode="gpu") if b.layer == "c" and b.kind.startswith("param")}
    assert params and set(params.values()) == {50 * F}
    assert layer_buffers(net, "c") == {("distance_", "device"): 30 * F, ("variation_sum_", "device"): 50 * F,
                                       ("count_", "device"): 10 * F}


@pytest.fixture
def faces(tmp_path, monkeypatch):
    """A file of 5 grey 10 x 12 images and their labels (5, 1), listed once in list.txt."""
    monkeypatch.chdir(tmp_path)
    ds.write_h5(str(tmp_path / "a.h5"), I=np.zeros((5, 1, 10, 12), "float32"), Id=np.zeros((5, 1), "float32"))
    ds.write_list(str(tmp_path / "list.txt"), ["a.h5"])
    return tmp_path


def hdf5_net(extra="", phase="TRAIN"):
    return (f'layer {{ name: "d" type: "HDF5Data" top: "I" top: "Id" include {{ phase: {phase} }} '
            f'hdf5_data_param {{ source: "list.txt" batch_size: 2 {extra} }} }}\n'
            'layer { name: "c" type: "Convolution" bottom: "I" top: "c" convolution_param { num_output: 2 kernel_size: 1 } }\n')


def test_hdf5data_scale_and_mirror_change_no_size_and_two_files_are_held(faces):
    """scale and mirror change the values in place (cpp:235-254): the tops are batch_size rows of
    each dataset, (2, 1, 10, 12) and (2, 1) (cpp:363-377). hdf_blobs_q holds two files (hpp:59; the
    thread loads the next one at once, cpp:336-339, 44-73; a list of one file is read twice,
    cpp:298-302): 2 x (5 x 120 + 5 x 1) floats on the host."""
    net = build_text(faces, hdf5_net("scale: 0.00390625 mirror: true"), schema="e2e_face")
    assert tops(net, "d") == [(2, 1, 10, 12), (2, 1)]
    held = {b.owner: (b.bytes, b.device) for b in net_buffers(net, mode="gpu") if b.layer == "d"}
    assert held["d.hdf_blobs_q"] == (2 * (5 * 120 + 5) * F, "host")


def test_hdf5data_crop_size_and_tests_mirrored_crops(faces, tmp_path):
    """crop_size 8: top 0 is (batch x crop_num, C, 8, 8) (cpp:372-376), crop_num 1 in training, doubled
    in testing with mirror (cpp:276-277): (2, 1, 8, 8) and (4, 1, 8, 8); the label stays (2, 1)."""
    net = build_text(faces, hdf5_net("crop_size: 8"), schema="e2e_face")
    assert tops(net, "d") == [(2, 1, 8, 8), (2, 1)]
    net = build_nets(str(ds.write_list(str(tmp_path / "t.prototxt"), [hdf5_net("crop_size: 8 mirror: true", "TEST")])),
                     phase="test", schema="e2e_face")[0]
    assert tops(net, "d") == [(4, 1, 8, 8), (2, 1)]


def test_the_real_log_is_reproduced_line_for_line():
    """The log (cut after "Solver scaffolding done.") ran shallow/net.prototxt: every Top shape line and
    "Memory required for data" figure comes back, the SpatialTransformer's 128 1 96 96 among them."""
    text = open(LOG).read()
    r = run_in_process(LOG, "--caffe-log")
    assert r.returncode == 0, r.stderr
    assert log_lines(r.stdout) == log_lines(text)
    assert "Top shape: 128 1 96 96 (1179648)" in log_lines(text)


def test_the_net_beside_the_log_gives_its_lines():
    """The net file with the log's data shapes (its HDF5 files are not in the repository) prints the
    train net's lines of the log, every one."""
    train = log_lines(open(LOG).read())
    r = run_in_process(os.path.join(HERE, "net.prototxt"), "--caffe-log", "--phase", "train",
                       "--input", "I=128x1x128x128", "--input", "Id=128x1")
    assert r.returncode == 0, r.stderr
    assert log_lines(r.stdout) == train


def test_the_net_audits_with_no_flags():
    """Refused before (unknown layer type SpatialTransformer, and HDF5Data's scale); now read with the
    e2e_face schema and audited, the HDF5 top's size assumed."""
    r = run_in_process("net.prototxt", cwd=HERE)
    assert r.returncode == 0, r.stderr
    assert "e2e_face's Caffe" in r.stdout
    net = build_nets(os.path.join(HERE, "net.prototxt"), phase="train")[0]
    assert net.schema == "e2e_face"
    assert tops(net, "st")[0][2:] == (96, 96)
