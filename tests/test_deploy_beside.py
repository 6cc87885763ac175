"""A train net whose dataset is not on this machine, with a deploy net beside it: the data top's
channels, height and width are the deploy net's input's, its batch the data layer's own, and the
report says so. The real case: bobhuynh/Intel's DIGITS GoogLeNet (tests/data/deploy_beside), whose
own Caffe log (the same folder) shows the shapes Caffe built."""
import json
import os
import shutil

import logparse
from conftest import DATA, ROOT, run_in_process

HERE = os.path.join(DATA, "deploy_beside", "intel_googlenet")


def _copy(tmp_path, *names):
    for name in names:
        shutil.copy(os.path.join(HERE, name), tmp_path / name)
    return str(tmp_path / "train_val.prototxt")


ASSUMED = "assumed: an image size, its dataset not being on this machine"


def _not_taken(net):
    """Nothing beside `net` is its own: each data top gets the image size assumed for a dataset not on
    this machine (224x224 in colour, with the layer's batch), and --strict asks for it instead."""
    run = run_in_process(net, "--format", "json")
    assert run.returncode == 0, run.stderr
    shapes = {(d["net"], d["top"]): (d["shape"], d["source"]) for d in json.loads(run.stdout)["data_shapes"]}
    assert shapes[("train", "data")] == ([32, 3, 224, 224], ASSUMED)
    assert shapes[("test", "data")] == ([50, 3, 224, 224], ASSUMED)
    run = run_in_process(net, "--strict")
    assert run.returncode == 2 and "--input data=32xCxHxW" in run.stderr and "Traceback" not in run.stderr


def test_the_premise():
    """The LMDBs are DIGITS job folders of another machine; deploy.prototxt declares 64x3x256x256;
    the data layers give batch_size 32 (TRAIN) and 50 (TEST)."""
    with open(os.path.join(HERE, "train_val.prototxt")) as f:
        text = f.read()
    assert 'source: "/workspace/dlsdk/jobs/caffe/datasets/' in text
    assert not os.path.exists("/workspace/dlsdk")
    assert "batch_size: 32" in text and "batch_size: 50" in text and "crop_size" not in text
    with open(os.path.join(HERE, "deploy.prototxt")) as f:
        assert "input_param { shape: { dim: 64 dim: 3 dim: 256 dim: 256 } }" in f.read()


def test_the_data_shape_comes_from_the_deploy_net_with_the_layers_batch(tmp_path):
    run = run_in_process(_copy(tmp_path, "train_val.prototxt", "deploy.prototxt"), "--format", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    shapes = {(d["net"], d["top"]): (d["shape"], d["source"]) for d in report["data_shapes"]}
    assert shapes[("train", "data")] == ([32, 3, 256, 256], "assumed: the input of deploy.prototxt beside the net")
    assert shapes[("test", "data")] == ([50, 3, 256, 256], "assumed: the input of deploy.prototxt beside the net")
    said = [a for a in report["assumptions"] if "deploy.prototxt" in a["assumption"]]
    assert len(said) == 2 and all(a["override"].startswith("--input data=") for a in said)


def test_with_its_caffe_log_beside_the_shapes_are_those_caffe_logged():
    """The log beside the net (caffe.log: DIGITS's run of this very net, cut before Caffe built its
    TEST net) shows what the dataset gave the TRAIN net: its Top shape line, data 32x3x256x256 (the
    label, one per image, the layer's own batch gives). It wins over the deploy net's input, and the
    report says where it came from; the TEST net, which the log does not hold, takes the deploy net's."""
    with open(os.path.join(HERE, "caffe.log"), errors="replace") as f:
        text = f.read()
    assert text.count("Initializing net from parameters") == 1 and "Top shape: 32 3 256 256 (6291456)" in text
    run = run_in_process(os.path.join(HERE, "train_val.prototxt"), "--format", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    shapes = {(d["net"], d["top"]): (d["shape"], d["source"]) for d in report["data_shapes"]}
    assert shapes[("train", "data")] == ([32, 3, 256, 256], "Caffe's log caffe.log beside the net")
    assert shapes[("test", "data")] == ([50, 3, 256, 256], "assumed: the input of deploy.prototxt beside the net")
    said = [a for a in report["assumptions"] if "caffe.log beside the net" in a["assumption"]]
    assert len(said) == 1 and said[0]["override"] == "--input data=32xCxHxW"


def test_a_log_of_another_net_is_not_taken(tmp_path):
    """The same log beside a net whose layers are named otherwise: not this net's run."""
    net = _copy(tmp_path, "train_val.prototxt", "caffe.log")
    text = open(net).read()
    open(net, "w").write(text.replace('name: "', 'name: "other_').replace('top: "data"', 'top: "data"'))
    _not_taken(net)


def test_caffe_built_those_shapes():
    """Caffe's own log of this net: every Top shape and the memory it required, line for line."""
    run = run_in_process(os.path.join(HERE, "train_val.prototxt"), "--phase", "train", "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(os.path.join(HERE, "caffe.log"), errors="replace") as f:
        (want,) = logparse.parse(f.read())
    (got,) = logparse.parse(run.stdout)
    assert logparse.first_difference(want, got) is None, logparse.first_difference(want, got)


def test_without_a_deploy_net_an_image_size_is_assumed_and_said_first(tmp_path):
    net = _copy(tmp_path, "train_val.prototxt")
    _not_taken(net)
    run = run_in_process(net)
    total = run.stdout.splitlines().index(next(line for line in run.stdout.splitlines() if line.startswith("Total:")))
    assert run.stdout.splitlines()[total + 1] == ("  for data shapes protoaudit assumed (data 32x3x224x224; see "
                                                  "Assumed below): give yours with --input")
    assert "protoaudit assumes its height and width 224x224 and 3 channels" in run.stdout


def test_a_train_net_beside_gives_its_crop(tmp_path):
    """A net without a crop beside a version of it that crops to 227 (its train net): the data top
    is 227x227, from that crop; the channels, which only the dataset gives, are assumed 3."""
    net = _copy(tmp_path, "train_val.prototxt")
    text = open(net).read()
    assert text.count("mirror: false") == 2
    (tmp_path / "train_crop.prototxt").write_text(text.replace("mirror: false", "mirror: false crop_size: 227"))
    run = run_in_process(net, "--format", "json")
    assert run.returncode == 0, run.stderr
    shapes = {(d["net"], d["top"]): (d["shape"], d["source"]) for d in json.loads(run.stdout)["data_shapes"]}
    assert shapes[("train", "data")] == ([32, 3, 227, 227], "assumed: the input of train_crop.prototxt beside the net")


def test_an_input_given_wins_and_assumes_nothing():
    run = run_in_process(os.path.join(HERE, "train_val.prototxt"), "--input", "data=32x3x224x224",
                         "--phase", "train", "--format", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert not [a for a in report["assumptions"] if "deploy.prototxt" in a["assumption"]]
    assert [d["shape"] for d in report["data_shapes"] if d["top"] == "data"] == [[32, 3, 224, 224]]


def test_a_deploy_input_of_another_rank_is_not_taken(tmp_path):
    net = _copy(tmp_path, "train_val.prototxt", "deploy.prototxt")
    deploy = tmp_path / "deploy.prototxt"
    deploy.write_text(deploy.read_text().replace("dim: 64 dim: 3 dim: 256 dim: 256", "dim: 64 dim: 196608"))
    _not_taken(net)


def test_a_deploy_net_of_another_net_is_not_taken(tmp_path):
    """A folder of unrelated nets: DenseNet-121's deploy net declares a `data` input too, but its
    layers are not this GoogLeNet's, so its shape is not this net's."""
    net = _copy(tmp_path, "train_val.prototxt")
    shutil.copy(os.path.join(ROOT, "samples", "densenet121_ceil_mode_deploy.prototxt"),
                tmp_path / "densenet121_deploy.prototxt")
    _not_taken(net)


def test_in_a_folder_of_many_deploy_nets_the_one_named_after_the_net_is_read_first(tmp_path):
    """A flat folder of many repositories' files: nine other deploy nets sort before this one, past
    the eight files looked at, but `train_val_deploy.prototxt` shares the start of its name with
    `train_val.prototxt` and is read first."""
    net = _copy(tmp_path, "train_val.prototxt")
    shutil.copy(os.path.join(HERE, "deploy.prototxt"), tmp_path / "train_val_deploy.prototxt")
    for k in range(9):
        shutil.copy(os.path.join(ROOT, "samples", "densenet121_ceil_mode_deploy.prototxt"),
                    tmp_path / f"a{k}_deploy.prototxt")
    run = run_in_process(net, "--format", "json")
    assert run.returncode == 0, run.stderr
    shapes = {(d["net"], d["top"]): d["shape"] for d in json.loads(run.stdout)["data_shapes"]}
    assert shapes[("train", "data")] == [32, 3, 256, 256]


def test_a_check_that_fails_on_a_shape_taken_from_the_deploy_net_says_so(tmp_path):
    """Found tried as a new user would (a facial-expression CNN's train net): a data layer of a type
    protoaudit does not know, with a deploy net beside whose label input is 3x49. The train net's
    Reshape of the sliced label to 12x24x2 fails on the 3x48 the deploy net's shape gives; Caffe, with
    the fork's layer and its batch of 12, makes 12x48. The refusal says the shape was taken, not that
    Caffe stops there. (That CNN's MultiLabelImageData is read now, the fork pgcnn: the layer here is of a
    type and a parameter no Caffe protoaudit reads has.)"""
    (tmp_path / "train.prototxt").write_text(
        'layer { name: "data" type: "LandmarkListData" top: "data" top: "label"\n'
        '  transform_param { crop_size: 8 }\n'
        '  landmark_list_data_param { source: "/no/such/list.txt" batch_size: 12 label_num: 49 } }\n'
        'layer { name: "cut" type: "Slice" bottom: "label" top: "first" top: "rest"\n'
        '  slice_param { slice_point: 1 axis: 1 } }\n'
        'layer { name: "rois" type: "Reshape" bottom: "rest" top: "rois"\n'
        '  reshape_param { shape { dim: 12 dim: 24 dim: 2 } } }\n'
        'layer { name: "s" type: "Silence" bottom: "data" bottom: "first" bottom: "rois" }\n')
    (tmp_path / "deploy.prototxt").write_text(
        'layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 3 dim: 3 dim: 8 dim: 8 } } }\n'
        'layer { name: "label" type: "Input" top: "label" input_param { shape { dim: 3 dim: 49 } } }\n'
        'layer { name: "cut" type: "Slice" bottom: "label" top: "first" top: "rest"\n'
        '  slice_param { slice_point: 1 axis: 1 } }\n'
        'layer { name: "s" type: "Silence" bottom: "data" bottom: "first" bottom: "rest" }\n')
    run = run_in_process(str(tmp_path / "train.prototxt"))
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert "Caffe stops here too" not in run.stderr
    assert "follow from a size protoaudit assumed" in run.stderr and "deploy.prototxt" in run.stderr
    assert "--input label=" in run.stderr


def test_a_deploy_input_a_layer_of_the_train_net_refuses_gives_way_to_the_assumed_image(tmp_path):
    """Tried as a new user would (a whole-slide pathology FCN: its inference net beside takes 1204x1204
    tiles, its train net 244-pixel patches whose logits are one per image): the deploy net's 300x300
    input makes the 224x224-kernel convolution's output 77x77, so SoftmaxWithLoss wants 4 x 77 x 77
    labels of the Data layer's 4 (softmax_loss_layer.cpp: outer_num_ * inner_num_ == label count).
    The assumed 224x224 image makes it 1x1, 4 predictions for 4 labels: the net audits at 4x3x224x224,
    and the assumption says the deploy net's input stopped layer 'loss'."""
    (tmp_path / "train.prototxt").write_text(
        'layer { name: "data" type: "Data" top: "data" top: "label" '
        'data_param { source: "/nowhere/train_lmdb" batch_size: 4 backend: LMDB } }\n'
        'layer { name: "score" type: "Convolution" bottom: "data" top: "score" '
        'convolution_param { num_output: 2 kernel_size: 224 } }\n'
        'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "score" bottom: "label" top: "loss" }\n')
    (tmp_path / "deploy.prototxt").write_text(
        'layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 300 dim: 300 } } }\n'
        'layer { name: "score" type: "Convolution" bottom: "data" top: "score" '
        'convolution_param { num_output: 2 kernel_size: 224 } }\n')
    run = run_in_process(str(tmp_path / "train.prototxt"), "--format", "json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    shapes = {d["top"]: d["shape"] for d in report["data_shapes"]}
    assert shapes["data"] == [4, 3, 224, 224]
    said = [a["assumption"] for a in report["assumptions"] if a["layer"] == "data"]
    assert any("the input of deploy.prototxt beside the net stops layer 'loss'" in a for a in said)
