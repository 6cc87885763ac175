"""MTCNN's published Python training layers (protoaudit/layers/python_mtcnn.py) and SSH's anchor
target layer (python_ssh.py): built-in shapes, never imported or run.

Every expected shape is derived by hand below from the layers' published source, with file:line,
or is what Caffe logged while it set the net up (the real training logs, cut to their Net::Init
lines, in tests/data/python_mtcnn; tests/data/SOURCES.md names each file's origin):
  luoyetx/Joint-Face-Detection-and-Alignment f4f843b (layers/data_layer.py, jfda/config.py, jfda/train.py),
  oftenliu/caffe-mtcnn 6bb430c (caffe-pnet/pydata_layer.py, caffe-{rnet,onet}/pydata_layer_multidb.py, config.py),
  reasonsolo/mtcnn_caffe ec646c8 (python_layer.py, config.py),
  mahyarnajibi/SSH 9389c2b (SSH/layers/anchor_target_layer.py, generate_anchors.py).
"""
import os

import pytest

from conftest import DATA, run_in_process
from logparse import parse
from protoaudit import build_nets
from protoaudit.errors import InputError

HERE = os.path.join(DATA, "python_mtcnn")


def path(*parts):
    return os.path.join(HERE, *parts)


def build(file, **options):
    net = build_nets(file, phase=options.pop("phase", "train"), **options)[0]
    return {b.name: b.shape for b in net.blobs}, net


def logged(file):
    """The train net Caffe set up in the log: {layer name: its logged top shapes}."""
    with open(file) as f:
        nets = parse(f.read())
    assert nets and nets[0].phase == "TRAIN"
    return {layer.name: layer.shapes for layer in nets[0].layers}


def same_as_log(net, log, skip=()):
    """Every layer Caffe logged has protoaudit's top shapes ('Top shape: (1)' is a scalar, ())."""
    checked = 0
    for name, shapes in log.items():
        if name in skip:
            continue
        assert tuple(net.layer(name).top_shapes) == tuple(shapes), name
        checked += 1
    return checked


# --- luoyetx/Joint-Face-Detection-and-Alignment: layers.data_layer.FaceDataLayer -------------------
# The C++ loss of the repository (layers/jfda_loss_layer.cpp, type JfdaLoss) is sized as the fork
# jfda (protoaudit/layers/jfda.py, tests/test_fork_jfda.py).


def test_face_data_layer_setup_shapes_are_the_logged_ones():
    """1130.log trains proto/p_train_val.prototxt (its line "Creating training net from net file").
    Setup leaves n = n1 + n2 + n3 + n4 = 1 + 1 + 1 + 1 = 4 (data_layer.py:49-53) and reshape gives
    (4, 3, 12, 12), (4, 4), (4, 10), (4,) (:58-61; 12 = NET_INPUT_SIZE['p'], config.py:15): the log's
    "Top shape: 4 3 12 12", "4 4", "4 10", "4". With --batch 4 every layer is Caffe's, JfdaLoss's five scalars too."""
    log = logged(path("luoyetx", "1130_net_init.log"))
    assert log["data"] == [(4, 3, 12, 12), (4, 4), (4, 10), (4,)]
    _, net = build(path("luoyetx", "proto", "p_train_val.prototxt"), batch=4)
    assert same_as_log(net, log) == len(log) >= 10


def test_face_data_layer_training_batch_by_hand():
    """Training batch: train.py:29-30 ns = DATA_RATIO[net] * --size (128, train.py:104), set on the
    layer (train.py:65-66) and taken at every forward's reshape (data_layer.py:39, :57-61).
    p: [3, 1, 1, 2] -> 128 * 7 = 896, 12x12; r: the same ratio, 896, 24x24; o: [3, 2, 1, 2] ->
    128 * 8 = 1024, 48x48 (config.py:15, :66-70). Which net is the file's name: train.py:123
    'proto/%s_solver.prototxt', whose net is proto/%s_train_val.prototxt."""
    blobs, _ = build(path("luoyetx", "proto", "p_train_val.prototxt"))
    assert (blobs["data"], blobs["bbox_target"], blobs["landmark_target"], blobs["label"]) == (
        (896, 3, 12, 12), (896, 4), (896, 10), (896,))
    assert blobs["conv1"] == (896, 10, 10, 10)  # 3x3 convolution of 12x12
    blobs, net = build(path("luoyetx", "proto", "r_train_val.prototxt"))
    assert blobs["data"] == (896, 3, 24, 24) and blobs["landmark_target"] == (896, 10)
    said = {a.layer: a for a in net.assumptions}
    assert "--input data=896x3x24x24" in said["data"].override
    blobs, _ = build(path("zyc3136", "proto", "o_train_val.prototxt"))
    assert blobs["data"] == (1024, 3, 48, 48) and blobs["label"] == (1024,)
    blobs, _ = build(path("luoyetx", "proto", "r_train_val.prototxt"), phase="test")
    assert blobs["data"] == (896, 3, 24, 24)  # the test net's layer gets the same batch (train.py:66)


def test_face_data_layer_needs_the_net_type_from_the_file_name(tmp_path):
    text = open(path("luoyetx", "proto", "r_train_val.prototxt")).read()
    other = tmp_path / "train.prototxt"
    other.write_text(text)
    with pytest.raises(InputError, match="p_, r_ or o_train_val"):
        build(str(other))
    r = run_in_process(str(other))
    assert r.returncode == 2 and "--input data=" in r.stderr


def test_head_detection_copy_names_three_tops_and_is_refused():
    """BenJaminKen/mtcnn-head-detection copies data_layer.py unchanged (it reshapes top[3],
    data_layer.py:61) but names 3 tops: the code as published stops there (IndexError), so
    protoaudit asks for the tops instead of guessing."""
    file = path("benjaminken", "proto", "p_train_val.prototxt")
    with pytest.raises(InputError, match="shapes 4 tops .*; 3 are named"):
        build(file)
    r = run_in_process(file)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "FaceDataLayer" in r.stderr


# --- oftenliu/caffe-mtcnn: pydata_layer(_multidb).MtcnnDataLayer ----------------------------------
# Its five C++ layers (OftenMtcnnClassBridge, ...SoftmaxLoss, ...Accuracy, ...EuclideanLoss,
# ...LandMarkLoss) are its own Caffe's, sized as the fork oftenliu (tests/test_fork_oftenliu.py).


@pytest.mark.parametrize("net, side", [("pnet", 12), ("rnet", 24), ("onet", 48)])
def test_mtcnn_data_layer_by_hand_and_as_logged(net, side):
    """param_str "{'batch_size': 384, 'net_type': '<net>'}" (YAML, pydata_layer.py:41-43): batch
    384, side NET_INPUT_SIZE[net] (config.py:13: 12, 24, 48); reshape (pydata_layer.py:64-67,
    multidb :65-68): data (384, 3, s, s), label (384,), bbox (384, 4), landmark (384, 10). The logs
    agree ("Top shape: 384 3 12 12", "384", "384 4", "384 10"), and so does every other layer."""
    log_file = path("oftenliu", f"{net}.log")
    log = logged(log_file)
    assert log["PyData"] == [(384, 3, side, side), (384,), (384, 4), (384, 10)]
    blobs, built = build(path("oftenliu", f"train_{net}.prototxt"))
    assert (blobs["data"], blobs["label"], blobs["bbox"], blobs["landmark"]) == (
        (384, 3, side, side), (384,), (384, 4), (384, 10))
    assert same_as_log(built, log) == len(log) >= 10


def refused_in_one_line(file, template, cases):
    """Each (param_str, what the refusal says): the net with it written into `template` exits 2 with
    one line saying so."""
    for bad, says in cases:
        file.write_text(template % bad)
        r = run_in_process(str(file))
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and says in r.stderr, (bad, r.stderr)


MTCNN_DATA = """layer { name: "PyData" type: "Python" top: "data" top: "label" top: "bbox" top: "landmark"
  python_param { module: "pydata_layer" layer: "MtcnnDataLayer" param_str: "%s" } }"""


def test_mtcnn_data_layer_defaults_and_bad_param_str(tmp_path):
    """Without them, 'batch_size' is 256 and 'net_type' 'pnet' (pydata_layer.py:42-43)."""
    file = tmp_path / "net.prototxt"
    file.write_text(MTCNN_DATA % "{'net_type': 'rnet'}")
    blobs, _ = build(str(file))
    assert blobs["data"] == (256, 3, 24, 24) and blobs["landmark"] == (256, 10)
    file.write_text(MTCNN_DATA % "{'batch_size': 64}")
    assert build(str(file))[0]["data"] == (64, 3, 12, 12)
    refused_in_one_line(file, MTCNN_DATA, (("{'batch_size': [384", "not a YAML mapping"), ("384", "not a YAML mapping"),
                                           ("{'net_type': 'lnet'}", "'net_type' is 'lnet'"),
                                           ("{'batch_size': 'many'}", "not a whole number")))


# --- reasonsolo/mtcnn_caffe: python_layer.DataLayer and LabelBridgeLayer ---------------------------

def test_reasonsolo_pnet_by_hand():
    """param_str '{"net": "pnet", "batch": 256, "data_cat": "train"}' (eval, python_layer.py:10-12):
    img (256, 3, 12, 12), label (256, 1), bbox (256, 4) (:22-24; NET_IMG_SIZES['pnet'] 12, config.py:2),
    no landmarks for pnet (:25). P-Net: conv1 3x3 -> 10x10, pool 2x2/2 -> 5x5, conv2 3x3 -> 3x3,
    conv3 3x3 -> 1x1, so conv4-1 is (256, 2, 1, 1) and conv4-2 (256, 4, 1, 1). LabelBridgeLayer
    keeps the bottoms' rows (:57-58, :66-67): (256, 2, 1, 1), (256, 1), (256, 4, 1, 1), (256, 4)."""
    blobs, net = build(path("reasonsolo", "pnet_train.prototxt"))
    assert (blobs["img"], blobs["label"], blobs["bbox"]) == ((256, 3, 12, 12), (256, 1), (256, 4))
    assert blobs["conv4-1"] == (256, 2, 1, 1) and blobs["conv4-2"] == (256, 4, 1, 1)
    assert (blobs["conv4-1-valid"], blobs["label-valid"], blobs["conv4-2-valid"], blobs["bbox-valid"]) == (
        (256, 2, 1, 1), (256, 1), (256, 4, 1, 1), (256, 4))
    assert {a.layer for a in net.assumptions} >= {"train_data", "label_bridge"}
    r = run_in_process(path("reasonsolo", "pnet_train.prototxt"))
    assert r.returncode == 0, r.stderr


def test_label_bridge_writes_every_bottom_diff():
    """Its backward zeroes all four bottoms' diffs (python_layer.py:104-105, :111-112): the label's
    and bbox's diffs (propagate_down 0) are touched by the Python code only, on the host; the two
    convolution outputs' go on to the device."""
    from protoaudit.memory.buffers import net_buffers

    _, net = build(path("reasonsolo", "pnet_train.prototxt"))
    diffs = {(b.owner, b.device) for b in net_buffers(net, mode="gpu") if b.kind == "top diff"
             and b.layer == "label_bridge"}
    assert ("label", "host") in diffs and ("bbox", "host") in diffs
    assert ("conv4-1", "device") in diffs and ("conv4-2", "device") in diffs


SOLO = """layer { name: "d" type: "Python" top: "img" top: "label" top: "bbox" top: "landm5"
  python_param { module: "python_layer" layer: "DataLayer" param_str: '%s' } }"""


def test_reasonsolo_rnet_and_bad_param_str(tmp_path):
    """rnet: 24x24 and a fourth top, landmarks (batch, LANDMARK_SIZE * 2 = 10) (:25-26, config.py:17)."""
    file = tmp_path / "net.prototxt"
    file.write_text(SOLO % '{"net": "rnet", "batch": 64}')
    blobs, _ = build(str(file))
    assert blobs["img"] == (64, 3, 24, 24) and blobs["landm5"] == (64, 10)
    refused_in_one_line(file, SOLO, (('{"net": "pnet", "batch": 64}', "shapes 3 tops"),  # pnet makes no landmarks
                                     ('{"batch": 64}', "has no 'net'"),
                                     ('__import__("os")', "not a Python dict of plain values")))


# --- mahyarnajibi/SSH: SSH.layers.anchor_target_layer.AnchorTargetLayer -----------------------------

def test_ssh_anchor_targets_by_hand():
    """Each module's param_str gives 1 ratio and 2 scales: A = 2 anchors (generate_anchors.py:18-21).
    The RoIDataLayer's image is py-faster-rcnn's 1x3x600x1000; VGG16's 2x2/2 ceil poolings give
    conv4_3 75x125 (M1, stride 8), conv5_3 38x63 (M2, stride 16) and one more pooling 19x32 (M3,
    stride 32). Tops (anchor_target_layer.py:50-56): labels (1, 1, 2H, W), the rest (1, 8, H, W)."""
    blobs, net = build(path("ssh", "train_ssh.prototxt"))
    for m, (h, w) in (("m1", (75, 125)), ("m2", (38, 63)), ("m3", (19, 32))):
        assert blobs[f"{m}@ssh_anchor_labels"] == (1, 1, 2 * h, w)
        for top in ("reg_tragets", "reg_inside_weights", "reg_outside_weights"):
            assert blobs[f"{m}@ssh_{top}"] == (1, 8, h, w)
    r = run_in_process(path("ssh", "train_ssh.prototxt"))
    assert r.returncode == 0, r.stderr


def test_ssh_anchor_target_needs_feat_stride(tmp_path):
    """setup reads layer_params['feat_stride'] (anchor_target_layer.py:40): without it the layer stops."""
    text = open(path("ssh", "train_ssh.prototxt")).read().replace("'feat_stride': 8,", "")
    file = tmp_path / "train_ssh.prototxt"
    file.write_text(text)
    r = run_in_process(str(file))
    assert r.returncode == 2 and "feat_stride" in r.stderr and len(r.stderr.splitlines()) == 1


def test_another_python_layer_data_layer_beside_the_net_is_read_off_its_source(tmp_path):
    """python_layer.DataLayer is a plain name: where param_str lacks the 'net' and 'batch' that
    reasonsolo's setup reads (python_layer.py:11-12) and a module of that name is beside the net,
    that module's own shapes are read, as for any Python layer (python_source)."""
    (tmp_path / "python_layer.py").write_text(
        "import caffe\n\n\nclass DataLayer(caffe.Layer):\n    def setup(self, bottom, top):\n"
        "        pass\n\n    def reshape(self, bottom, top):\n        top[0].reshape(8, 1, 28, 28)\n\n"
        "    def forward(self, bottom, top):\n        pass\n")
    file = tmp_path / "net.prototxt"
    file.write_text('layer { name: "d" type: "Python" top: "x" python_param { module: "python_layer" '
                    "layer: \"DataLayer\" param_str: \"{'split': 'train'}\" } }")
    blobs, _ = build(str(file))
    assert blobs["x"] == (8, 1, 28, 28)
    file.write_text(SOLO % '{"net": "onet", "batch": 16}')  # reasonsolo's keys: its shapes, module or not
    assert build(str(file))[0]["img"] == (16, 3, 48, 48)
