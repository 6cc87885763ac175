"""NVIDIA's Caffe 0.15 (NVIDIA/caffe, branch caffe-0.15 at 4b8d54d): its schema, DetectNetTransformation,
L1Loss, its Data layer and DetectNet's Python layers held against that commit's sources, and two real
DIGITS DetectNet nets (tests/data/SOURCES.md) audited with no flags.

Expected values are derived by hand below from src/caffe/proto/caffe.proto,
include/caffe/layers/detectnet_transform_layer.hpp, src/caffe/layers/detectnet_transform_layer.cpp and
.cu, include/caffe/util/detectnet_coverage.hpp, src/caffe/util/detectnet_coverage_rectangular.cpp,
l1_loss_layer.hpp/.cpp, base_data_layer.hpp/.cpp/.cu, data_layer.cpp, data_reader.cpp and
python/caffe/layers/detectnet/clustering.py and mean_ap.py of that commit, cited by file and line.
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit import audit
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers

HERE = os.path.join(DATA, "forks", "nvcaffe")
CARS = os.path.join(HERE, "detectnet_cars")
SPACENET = os.path.join(HERE, "spacenet")
F = 4  # bytes per float


def inputs(n=2, h=20, w=30, c=3, rows=6, label_n=None):
    """Images (n, c, h, w) and DIGITS-style labels (n, 1, rows, 16) from an Input layer."""
    label_n = n if label_n is None else label_n
    return (f'layer {{ name: "in" type: "Input" top: "data" top: "label" input_param {{ '
            f'shape {{ dim: {n} dim: {c} dim: {h} dim: {w} }} '
            f'shape {{ dim: {label_n} dim: 1 dim: {rows} dim: 16 }} }} }}\n')


def transform(g="", extra=""):
    return (f'layer {{ name: "t" type: "DetectNetTransformation" bottom: "data" bottom: "label" top: "img" '
            f'top: "lab" {extra} detectnet_groundtruth_param {{ {g} }} }}\n')


# --- the schema ------------------------------------------------------------------------------------

def test_the_proto_is_the_forks_verbatim_with_its_own_numbers():
    """caffe.proto:416-419: detectnet_groundtruth_param = 6801, detectnet_augmentation_param = 6802;
    DetectNetGroundTruthParameter's stride = 1 (default 4), image_size_x = 8 (default 1248),
    image_size_y = 9 (default 384); DataParameter.threads = 11; TransformationParameter.use_gpu_transform = 8."""
    lines = open(os.path.join(ROOT, "proto", "forks", "nvcaffe.proto")).read().splitlines()
    assert lines[0].startswith("// NVIDIA/caffe ") and "4b8d54d892116b9cb6822a917065a616f56b1292" in lines[0]
    for line in ("  optional DetectNetGroundTruthParameter detectnet_groundtruth_param = 6801;",
                 "  optional DetectNetAugmentationParameter detectnet_augmentation_param = 6802;",
                 "  optional uint32 stride = 1 [default = 4];",
                 "  optional uint32 image_size_x = 8 [default = 1248];",
                 "  optional uint32 image_size_y = 9 [default = 384];",
                 "  optional uint32 threads  = 11 [default = 0];",
                 "  optional bool use_gpu_transform = 8 [default = false];"):
        assert line in lines


def test_a_detectnet_file_is_read_as_nvidias_caffe(tmp_path):
    net = build_text(tmp_path, inputs() + transform())
    assert net.schema == "nvcaffe"


# --- DetectNetTransformation -----------------------------------------------------------------------

def test_transformation_defaults_by_hand(tmp_path):
    """No parameter given: image_size_x 1248, image_size_y 384, stride 4 (caffe.proto defaults). Top 0 is
    (num, 3, 384, 1248) (cpp:125-129); the grid is 384/4 x 1248/4 = 96 x 312 (coverage cpp:45-48), the
    label's channels 0 + 1 + 8 = 9: no object_class maps class 1 to 0 (coverage cpp:97-99), plus
    TRANSFORMED_LABEL_SIZE (coverage.hpp:112) (cpp:131-136). Whatever the bottoms' height and width."""
    net = build_text(tmp_path, inputs() + transform())
    assert tops(net, "t") == [(2, 3, 384, 1248), (2, 9, 96, 312)]


def test_the_grid_rounds_the_float_size_to_nearest_even(tmp_path):
    """gridROI_ is a cv::Rect made from Rect_<float> sides times (float)(1/stride), each side
    saturate_cast to int, rounding to nearest (ties to even). 100 x 50 at stride 3: 1/3 is 0.33333334f,
    100 x that 33.333334 -> 33, 50 x that 16.666667 -> 17. 40 x 24 at stride 16: 2.5 -> 2, 1.5 -> 2."""
    net = build_text(tmp_path, inputs() + transform("stride: 3 image_size_x: 100 image_size_y: 50"))
    assert tops(net, "t") == [(2, 3, 50, 100), (2, 9, 17, 33)]
    net = build_text(tmp_path, inputs() + transform("stride: 16 image_size_x: 40 image_size_y: 24"))
    assert tops(net, "t")[1] == (2, 9, 2, 2)


def test_the_label_channels_are_the_largest_dst_plus_nine(tmp_path):
    """findNumLabels: the largest dst + 1 (coverage cpp:71-80), + 8: dst 0 and 1 give 10, dst 3 gives 12."""
    two = "stride: 16 image_size_x: 64 image_size_y: 32 object_class { src: 1 dst: 0 } object_class { src: 2 dst: 1 }"
    net = build_text(tmp_path, inputs() + transform(two))
    assert tops(net, "t") == [(2, 3, 32, 64), (2, 10, 2, 4)]
    net = build_text(tmp_path, inputs() + transform("stride: 16 object_class { src: 5 dst: 3 }"))
    assert tops(net, "t")[1][1] == 12


def test_transformation_checks_channels_and_nums(tmp_path):
    """Reshape: CHECK_EQ(bottom[0]->channels(), 3) (cpp:115), CHECK_EQ(nums) (cpp:117)."""
    with pytest.raises(InputError, match="three-channel"):
        build_text(tmp_path, inputs(c=1) + transform())
    with pytest.raises(InputError, match="as many labels as images"):
        build_text(tmp_path, inputs(label_n=3) + transform())


def test_transformation_buffers_in_gpu_mode_by_hand(tmp_path):
    """GPU mode, images (2, 3, 20, 30): Reshape reserves gpu_workspace_augmentations_, 2 AugmentSelections of
    32 bytes (two floats, a bool padded to 4, a cv::Size, a float and a cv::Point: hpp:27-43), 64 bytes,
    and gpu_workspace_tmpdata_, sizeof(float) x bottom[0]->count() = 4 x 3,600 = 14,400 bytes
    (cpp:138-145). mean_value only: no mean image."""
    net = build_text(tmp_path, inputs() + transform(extra="transform_param { mean_value: 127 }"))
    assert layer_buffers(net, "t") == {("gpu_workspace_augmentations_", "device"): 64,
                                       ("gpu_workspace_tmpdata_", "device"): 3600 * F}


def test_transformation_mean_file_by_hand(tmp_path):
    """With a mean_file, retrieveMeanImage resizes it to the bottom's 20 x 30 (cpp:48-53, 119-123): data_mean_
    a cv::Mat of 3 floats a pixel, 1,800 floats on the host; in GPU mode mean_blob_ (1, 3, 20, 30) filled on
    the host (cpp:78-82) and read on the device (cu:397-400). In CPU mode data_mean_ alone, and no
    workspace (cpp:138)."""
    text = inputs() + transform(extra='transform_param { mean_file: "mean.binaryproto" }')
    net = build_text(tmp_path, text)
    assert layer_buffers(net, "t") == {("data_mean_", "host"): 1800 * F, ("mean_blob_ (host)", "host"): 1800 * F,
                                       ("mean_blob_", "device"): 1800 * F,
                                       ("gpu_workspace_augmentations_", "device"): 64,
                                       ("gpu_workspace_tmpdata_", "device"): 3600 * F}
    assert layer_buffers(net, "t", mode="cpu") == {("data_mean_", "host"): 1800 * F}


def absent_data(g="stride: 16 image_size_x: 64 image_size_y: 32"):
    """A DIGITS DetectNet's front: two Data layers of LMDBs that are not on this machine."""
    return ('layer { name: "d" type: "Data" top: "data" data_param { source: "/nowhere/features" batch_size: 2 '
            'backend: LMDB } }\n'
            'layer { name: "l" type: "Data" top: "label" data_param { source: "/nowhere/labels" batch_size: 2 '
            'backend: LMDB } }\n' + transform(g) +
            'layer { name: "c" type: "Convolution" bottom: "img" top: "c" convolution_param { num_output: 9 '
            'kernel_size: 16 stride: 16 } }\n'
            'layer { name: "loss" type: "EuclideanLoss" bottom: "c" bottom: "lab" top: "loss" }\n')


def test_absent_datasets_take_the_size_the_transformation_gives(tmp_path):
    """The images are taken at image_size_y x image_size_x (32 x 64), the labels as DIGITS writes them:
    (1, max_bboxes + 1, 16), max_bboxes 64 (bbox_to_array's default), each at its Data layer's batch; said so."""
    net = build_text(tmp_path, absent_data())
    assert tops(net, "d") == [(2, 3, 32, 64)]
    assert tops(net, "l") == [(2, 1, 65, 16)]
    assert tops(net, "t") == [(2, 3, 32, 64), (2, 9, 2, 4)]
    said = " ".join(a.what for a in net.assumptions)
    assert "one DetectNetTransformation layer 't' takes" in said and "image_size_y x image_size_x" in said


def test_a_given_image_of_another_size_is_taken(tmp_path):
    """Images given with --input keep their size: the layer crops or scales any image (cpp:344-410)."""
    net = build_text(tmp_path, absent_data(), inputs={"data": (2, 3, 40, 90)})
    assert tops(net, "d") == [(2, 3, 40, 90)]
    assert tops(net, "l") == [(2, 1, 65, 16)]
    assert tops(net, "t")[0] == (2, 3, 32, 64)


# --- L1Loss --------------------------------------------------------------------------------------

def l1_net(label="dim: 2 dim: 4 dim: 3 dim: 5", force=""):
    return (f'{force}input: "x" input_shape {{ dim: 2 dim: 7 }}\ninput: "y" input_shape {{ {label} }}\n'
            'layer { name: "p" type: "InnerProduct" bottom: "x" top: "p" inner_product_param { num_output: 60 } }\n'
            'layer { name: "loss" type: "L1Loss" bottom: "p" bottom: "y" top: "l" }\n')


def test_l1_loss_by_hand(tmp_path):
    """LossLayer's scalar top; count(1) 60 both (l1_loss_layer.cpp:15-16); diff_ and sign_ like bottom 0,
    120 floats each (cpp:17-18), on the host even in GPU mode (no GPU code: hpp:38-43); the backward writes
    bottom 0's diff (cpp:41-52), 120 floats, read by the InnerProduct on the device."""
    net = build_text(tmp_path, l1_net())
    assert net.schema == "nvcaffe"
    assert tops(net, "loss") == [()]
    assert layer_buffers(net, "loss") == {("diff_", "host"): 120 * F, ("sign_", "host"): 120 * F}
    diffs = {b.owner: b.device for b in net_buffers(net) if b.layer == "loss" and b.kind == "top diff"
             and b.touch == "backward"}
    assert diffs == {"p": "device"}


def test_l1_loss_checks_dimensions_and_allows_force_backward(tmp_path):
    """CHECK_EQ(count(1)) (cpp:15-16); AllowForceBackward true for both bottoms (hpp:30-32): with
    force_backward the label's diff is written too."""
    with pytest.raises(InputError, match="same dimension"):
        build_text(tmp_path, l1_net(label="dim: 2 dim: 61"))
    net = build_text(tmp_path, l1_net(force="force_backward: true\n"))
    diffs = {b.owner for b in net_buffers(net) if b.layer == "loss" and b.kind == "top diff" and b.touch == "backward"}
    assert diffs == {"p", "y"}


# --- its Data layer --------------------------------------------------------------------------------

def test_data_keeps_three_batches_and_copies_them_into_its_top(tmp_path):
    """PREFETCH_COUNT 3 (base_data_layer.hpp:76), whatever data_param.prefetch says, each on the host and in
    GPU mode the device (base_data_layer.cpp:53-68): images 2 x 3 x 32 x 64 = 12,288 floats, 3 x that; the
    forward copies the batch into the top (.cu:26-31), which owns its 12,288 floats. The DataReader's queue
    holds prefetch (4) x batch_size (2) strings (data_reader.cpp:19-20); the transforming pool has
    data_param.threads threads (data_layer.cpp:45-48)."""
    text = absent_data().replace('backend: LMDB } }\nlayer { name: "l"',
                                 'backend: LMDB threads: 3 } }\nlayer { name: "l"', 1)
    net = build_text(tmp_path, text)
    held = layer_buffers(net, "d")
    assert held[("prefetch[3].data", "device")] == 3 * 12288 * F
    assert held[("prefetch[3].data (host)", "host")] == 3 * 12288 * F
    reader = next(b for b in net_buffers(net) if b.owner == "d.DataReader datums")
    assert reader.elements == 4 * 2
    pool = next(b for b in net_buffers(net) if b.owner == "d.transform thread pool")
    assert "3 boost::threads" in pool.note
    owned = [b for b in net_buffers(net) if b.layer == "d" and b.kind == "top data"]
    assert [(b.owner, b.bytes) for b in owned] == [("data", 12288 * F)]


def test_batchnorm_is_refused_not_sized_as_bvlcs(tmp_path):
    """NVIDIA's BatchNorm has five blobs (batch_norm_layer.cpp:24-47), BVLC's three: refused."""
    text = inputs() + transform() + 'layer { name: "bn" type: "BatchNorm" bottom: "img" top: "bn" }\n'
    with pytest.raises(InputError, match="five parameter blobs"):
        build_text(tmp_path, text)


# --- DetectNet's Python layers -------------------------------------------------------------------

def python(name, module, layer, bottoms, top_names, param=""):
    b = " ".join(f'bottom: "{x}"' for x in bottoms)
    t = " ".join(f'top: "{x}"' for x in top_names)
    return (f'layer {{ name: "{name}" type: "Python" {b} {t} python_param {{ module: "caffe.layers.detectnet.{module}" '
            f'layer: "{layer}" param_str: "{param}" }} }}\n')


def maps(n=2, classes=1):
    return (f'input: "cov" input_shape {{ dim: {n} dim: {classes} dim: 6 dim: 8 }}\n'
            f'input: "boxes" input_shape {{ dim: {n} dim: 4 dim: 6 dim: 8 }}\n')


def test_clustering_tops_by_hand(tmp_path):
    """ClusterDetections: 7 values and no class count: 1 class (clustering.py:104-117), one top
    (N, MAX_BOXES 50, 5) (:121-128, :8). ClusterGroundtruth: 3 values, 1 class (:41-50, :54-61). Two
    classes: a top each, the coverage of 2 channels."""
    text = maps() + python("c", "clustering", "ClusterDetections", ["cov", "boxes"], ["det"],
                           "1248, 352, 16, 0.6, 3, 0.02, 22") \
        + python("g", "clustering", "ClusterGroundtruth", ["cov", "boxes"], ["gt"], "1280, 1280, 16")
    net = build_text(tmp_path, text)
    assert tops(net, "c") == [(2, 50, 5)] and tops(net, "g") == [(2, 50, 5)]
    text = maps(classes=2) + python("c", "clustering", "ClusterDetections", ["cov", "boxes"], ["d0", "d1"],
                                    "1248,352,16,0.05,1,0.025,22,2")
    assert tops(build_text(tmp_path, text), "c") == [(2, 50, 5), (2, 50, 5)]


def test_clustering_refusals(tmp_path):
    """Setup's ValueError on a value int() or float() refuses (clustering.py:49-50), its top count check
    (:118-119); reshape's class count check (:124-125)."""
    det = lambda cov, names, param: maps(classes=cov) + python("c", "clustering", "ClusterDetections",  # noqa: E731
                                                               ["cov", "boxes"], names, param)
    with pytest.raises(InputError, match="data type is wrong"):
        build_text(tmp_path, det(1, ["d"], "1248, 352, 16.5, 0.6, 3, 0.02, 22"))
    with pytest.raises(InputError, match="Unexpected number of tops: 1 != 2"):
        build_text(tmp_path, det(2, ["d"], "1248, 352, 16, 0.6, 3, 0.02, 22, 2"))
    with pytest.raises(InputError, match="Unexpected number of classes: 1 != 2"):
        build_text(tmp_path, det(1, ["d0", "d1"], "1248, 352, 16, 0.6, 3, 0.02, 22, 2"))


def test_scoring_and_map_tops_by_hand(tmp_path):
    """ScoreDetections: (N, 50, 5) (mean_ap.py:39-43); mAP: three tops of one value (:84-87)."""
    text = ('input: "gt" input_shape { dim: 2 dim: 50 dim: 5 }\ninput: "det" input_shape { dim: 2 dim: 50 dim: 5 }\n'
            + python("s", "mean_ap", "ScoreDetections", ["gt", "det"], ["scored"])
            + python("m", "mean_ap", "mAP", ["scored"], ["mAP", "precision", "recall"], "1248, 352, 16"))
    net = build_text(tmp_path, text)
    assert tops(net, "s") == [(2, 50, 5)]
    assert tops(net, "m") == [(1,), (1,), (1,)]
    with pytest.raises(InputError, match="not matching"):
        build_text(tmp_path, text.replace('input: "det" input_shape { dim: 2', 'input: "det" input_shape { dim: 3'))


# --- the real nets -----------------------------------------------------------------------------

def test_detectnet_cars_audits_with_no_flags():
    """bpinaya/DetectNetCars: refused before (DetectNetTransformation unknown, its LMDBs absent, four
    Python layers). Its train transformation crops to 1248 x 384 at stride 16: a 78 x 24 grid (1248/16,
    384/16), 1 class + 8 = 9 label channels; the coverage the net predicts is that grid."""
    r = run_in_process("train_val.prototxt", cwd=CARS)
    assert r.returncode == 0, r.stderr
    assert "NVIDIA's Caffe 0.15" in r.stdout
    train, test = (n.net for n in audit(os.path.join(CARS, "train_val.prototxt")).nets)
    assert train.schema == "nvcaffe"
    assert tops(train, "train_data") == [(2, 3, 384, 1248)] and tops(train, "train_label") == [(2, 1, 65, 16)]
    assert tops(train, "train_transform") == [(2, 3, 384, 1248), (2, 9, 24, 78)]
    assert tops(train, "coverage/sig") == [(2, 1, 24, 78)]
    assert tops(train, "bbox_loss") == [()]
    assert tops(test, "cluster") == [(2, 50, 5)] and tops(test, "mAP") == [(1,), (1,), (1,)]
    assert any("cub's caching allocator" in a.what for a in train.assumptions)
    held = layer_buffers(train, "train_transform")
    assert held[("gpu_workspace_tmpdata_", "device")] == 2 * 3 * 384 * 1248 * F


def test_spacenet_audits_with_no_flags_and_its_solver_too():
    """allykgray/DetectionTutorialSpaceNet: its train transformation crops to 512 x 512 (a 32 x 32 grid at
    stride 16), its val transformation scales to 1280 x 1280 (80 x 80); the Data layers' mean_file is absent.
    Its solver (ADAM) trains it with no flags too."""
    r = run_in_process("train_val.prototxt", cwd=SPACENET)
    assert r.returncode == 0, r.stderr
    train, test = (n.net for n in audit(os.path.join(SPACENET, "train_val.prototxt")).nets)
    assert tops(train, "train_transform") == [(2, 3, 512, 512), (2, 9, 32, 32)]
    assert tops(test, "val_transform") == [(2, 3, 1280, 1280), (2, 9, 80, 80)]
    assert tops(test, "coverage/sig") == [(2, 1, 80, 80)]
    r = run_in_process("solver.prototxt", cwd=SPACENET)
    assert r.returncode == 0, r.stderr
    assert "Adam" in r.stdout
