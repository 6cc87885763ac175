"""A train net whose dataset is not on this machine, with Caffe's log of its run beside it: the data
tops are the shapes Caffe logged for them (what the dataset gave), said as an assumption. The real
case: LiJianfei06/caffe-project-VggNet-ResNet-DenseNet's captcha ResNet-20 (tests/data/logs_beside,
SOURCES.md), HDF5 data whose lists are not in the repository, its train and test nets and the log of
their run (the first 5,357 lines: both nets set up)."""
import json
import os
import shutil

import logparse
from conftest import DATA, run_in_process

HERE = os.path.join(DATA, "logs_beside", "captcha_resnet20_hdf5")
LOG = "train_ResNet-20.log"


def _shapes(path, *args):
    run = run_in_process(path, "--format", "json", *args)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    return {(d["net"], d["top"]): (d["shape"], d["source"]) for d in report["data_shapes"]}, report


def test_the_train_net_takes_the_hdf5_shapes_its_log_shows():
    """The log's TRAIN net (line 1657-1658): data 128 1 32 72, labels 128 4."""
    shapes, report = _shapes(os.path.join(HERE, "train_ResNet_20.prototxt"))
    where = f"Caffe's log {LOG} beside the net"
    assert shapes[("net", "data")] == ([128, 1, 32, 72], where)
    assert shapes[("net", "labels")] == ([128, 4], where)
    said = [a for a in report["assumptions"] if LOG in a["assumption"]]
    # each flag asks for as many axes as the log shows: data's four, the labels' two
    assert {a["override"] for a in said} == {"--input data=128xCxHxW", "--input labels=128xC"}


def test_a_log_whose_data_layer_is_of_another_type_is_not_this_nets(tmp_path):
    """The same net with its data layer of a type of its own (a fork's reader), beside the same log,
    which set up an HDF5Data layer of that name: the log names every layer, but what it logged for the
    data tops is another reader's, so it is not taken (tried as a new user would: a flat folder of
    files from many repositories, where a log of another repository's CaffeNet stood beside a net
    whose data layer was PicPac)."""
    text = open(os.path.join(HERE, "train_ResNet_20.prototxt")).read()
    assert text.count('type: "HDF5Data"') == 1
    (tmp_path / "train_ResNet_20.prototxt").write_text(text.replace('type: "HDF5Data"', 'type: "OwnReader"'))
    shutil.copy(os.path.join(HERE, LOG), tmp_path / LOG)
    run = run_in_process(tmp_path / "train_ResNet_20.prototxt")
    assert run.returncode == 2 and LOG not in run.stdout + run.stderr
    assert "unknown layer type 'OwnReader'" in run.stderr


def test_a_log_whose_data_layer_crops_otherwise_is_not_this_nets(tmp_path):
    """The same net, its data layer cropping to 16 where the logged run's did not: the layer names and
    types agree, but the logged data shapes are another transform's, so they are not taken (tried as a
    new user would: another repository's AlexNet log, cropping to 227, stood beside a net that does not
    crop, and gave it 227 x 227 images)."""
    text = open(os.path.join(HERE, "train_ResNet_20.prototxt")).read()
    assert text.count('type: "HDF5Data"') == 1
    (tmp_path / "train_ResNet_20.prototxt").write_text(
        text.replace('type: "HDF5Data"', 'type: "HDF5Data"\n  transform_param { crop_size: 16 }'))
    shutil.copy(os.path.join(HERE, LOG), tmp_path / LOG)
    run = run_in_process(tmp_path / "train_ResNet_20.prototxt", "--format", "json")
    assert LOG not in run.stdout + run.stderr


def test_a_test_net_file_takes_the_logs_test_net():
    """test_ResNet_20.prototxt's data layer is TEST-only: its TEST net, which the log set up at line
    4269-4270 with batch 10: data 10 1 32 72, labels 10 4."""
    shapes, _ = _shapes(os.path.join(HERE, "test_ResNet_20.prototxt"))
    assert shapes[("net", "data")][0] == [10, 1, 32, 72] and shapes[("net", "labels")][0] == [10, 4]


def test_the_nets_then_reproduce_caffes_lines():
    """Built so, the train net's Top shape lines and memory are the log's own, line for line."""
    run = run_in_process(os.path.join(HERE, "train_ResNet_20.prototxt"), "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(os.path.join(HERE, LOG), errors="replace") as f:
        want = [n for n in logparse.parse(f.read()) if n.phase == "TRAIN"]
    got = logparse.parse(run.stdout)
    assert logparse.first_difference(want[0], got[0]) is None, logparse.first_difference(want[0], got[0])


def test_without_the_log_the_shapes_are_asked_for(tmp_path):
    shutil.copy(os.path.join(HERE, "train_ResNet_20.prototxt"), tmp_path)
    run = run_in_process(str(tmp_path / "train_ResNet_20.prototxt"), "--strict")  # else images are assumed
    assert run.returncode == 2 and "--input data=128xCxHxW" in run.stderr


FCN = os.path.join(DATA, "logs_beside", "my_fcn")


def test_a_log_beside_replaces_a_size_that_stops_the_net():
    """KID-7391/my_fcn's FCN-32s reads SBDD through FCN's Python layer, whose published 500x500 VOC size
    protoaudit assumes; its upscore (kernel 128, stride 8) makes 240 there, which the crop against 500
    refuses, as Caffe would. Its own run, in Log/caffe.log beside it, fed 128x128 images (line 667-668:
    data 1 3 128 128, label 1 1 128 128): those shapes replace the assumed ones, and the TRAIN net
    then prints the log's own lines."""
    run = run_in_process(os.path.join(FCN, "train.prototxt"), "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(os.path.join(FCN, "Log", "caffe.log"), errors="replace") as f:
        want = [n for n in logparse.parse(f.read()) if n.phase == "TRAIN"]
    got = logparse.parse(run.stdout)
    assert logparse.first_difference(want[0], got[0]) is None, logparse.first_difference(want[0], got[0])


def test_without_its_log_the_fcn_net_takes_the_largest_size_it_takes_the_logs_own(tmp_path):
    """Without its log, the layer's 500x500 stops the crop; of the sizes protoaudit tries, the largest
    not above 500x500 that the net takes is 128x128, the size its own run logged: the same total as
    with the log, said as assumed. --strict keeps the refusal, which says the size was assumed."""
    with_log = json.loads(run_in_process(os.path.join(FCN, "train.prototxt"), "--format", "json").stdout)
    shutil.copy(os.path.join(FCN, "train.prototxt"), tmp_path)
    run = run_in_process(str(tmp_path / "train.prototxt"), "--format", "json")
    assert run.returncode in (0, 1), run.stderr
    alone = json.loads(run.stdout)
    assert {d["top"]: d["shape"] for d in alone["data_shapes"]} == {"data": [1, 3, 128, 128], "label": [1, 1, 128, 128]}
    assert alone["total_bytes"] == with_log["total_bytes"]
    assert any("stops layer 'score'" in a["assumption"] and "128x128" in a["assumption"] for a in alone["assumptions"])
    run = run_in_process(str(tmp_path / "train.prototxt"), "--strict")
    assert run.returncode == 2 and "240 - offset 0 is smaller than 500" in run.stderr
    assert "follow from a size protoaudit assumed" in run.stderr


def test_a_given_input_wins_over_the_log():
    shapes, report = _shapes(os.path.join(HERE, "train_ResNet_20.prototxt"), "--input", "data=128x1x40x80",
                             "--input", "labels=128x4")
    assert shapes[("net", "data")][0] == [128, 1, 40, 80]
    assert not [a for a in report["assumptions"] if LOG in a["assumption"]]


def test_a_cluster_jobs_output_beside_the_net_is_a_log_too(tmp_path):
    """A video net trained as a cluster job: its glog lines are in the job's output file,
    NAME.o639312 (SGE and PBS name it so), beside the net. Its dataset is not here, and no image
    protoaudit assumes fits its 7x4096 kernel; the log gives the data, 100x1x150x4096 (line 107),
    and conv1's top is then the log's own, 100x400x144x1 (line 125): (150 - 7) + 1 = 144 and
    (4096 - 4096) + 1 = 1. (The run's TRAIN net also had an accuracy layer, which the file keeps for
    TEST: nine in ten of its layers are the file's, as a log beside must have.)"""
    here = os.path.join(DATA, "logs_beside", "caffe_vid")
    shapes, _ = _shapes(os.path.join(here, "train_net1.prototxt"))
    assert shapes[("train", "data")] == ([100, 1, 150, 4096], "Caffe's log f400w7_s1_detailed.o639312 beside the net")
    run = run_in_process(os.path.join(here, "train_net1.prototxt"), "--phase", "train", "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(os.path.join(here, "f400w7_s1_detailed.o639312"), errors="replace") as f:
        (want, *_) = [n for n in logparse.parse(f.read()) if n.phase == "TRAIN"]
    (got,) = logparse.parse(run.stdout)
    conv1 = [layer.shapes for net in (want, got) for layer in net.layers if layer.name == "conv1"]
    assert conv1 == [[(100, 400, 144, 1)]] * 2


def test_a_log_in_a_folder_beside_shows_a_layer_its_caffe_set_up_with_fewer_tops(tmp_path):
    """caunion/gnet's ImageData has one top (its labels come from an LMDB Data layer), which BVLC's
    ImageDataLayer refuses (ExactNumTopBlobs 2); its log, glog's own file in log/ beside the net's
    folder, shows the run's Caffe set it up so (line 405: "Top shape: 130 3 224 224", one top). The
    net then audits, saying so: data 260x3x224x224 (the file's batch_size 260 and crop_size 224) and the
    label 260x1x1x6 (the log's 1x1x6, line 415, with the file's batch). Without the log it is refused."""
    here = os.path.join(DATA, "logs_beside", "gnet_one_top")
    net = os.path.join(here, "caffenet_proto", "train_val.prototxt")
    shapes, report = _shapes(net)
    assert shapes[("train", "data")][0] == [260, 3, 224, 224]
    assert shapes[("train", "label")][0] == [260, 1, 1, 6]
    said = [a["assumption"] for a in report["assumptions"] if a["layer"] == "data"]
    assert any("ImageData takes exactly 2 top blobs in BVLC Caffe; Caffe's log shows the run's own Caffe set it "
               "up with 1" in a for a in said), said
    shutil.copytree(os.path.join(here, "caffenet_proto"), tmp_path / "caffenet_proto")
    run = run_in_process(str(tmp_path / "caffenet_proto" / "train_val.prototxt"))
    assert run.returncode == 2 and "layer 'data': takes exactly 2 top blobs, got 1" in run.stderr


def test_of_two_logs_of_the_net_the_one_that_read_its_dataset_is_taken(tmp_path):
    """Tried as a new user would (a flat folder of several repositories' files): two logs set up the
    same LeNet-like net, one of another repository's run on another dataset (64 x 64 images), and the
    net's own run, which read the file's source. The own run's shapes are taken, though its file sorts
    after the other's. Here: the captcha net's log, and a copy whose run read './other_h5.txt' and
    logged 128 1 64 64 for the data; the net reads './train_h5.txt', so 128 1 32 72 is taken."""
    shutil.copy(os.path.join(HERE, "train_ResNet_20.prototxt"), tmp_path / "train_ResNet_20.prototxt")
    text = open(os.path.join(HERE, LOG)).read()
    assert text.count('source: "./train_h5.txt"') == 1 and text.count("Top shape: 128 1 32 72 (294912)") == 1
    other = text.replace('source: "./train_h5.txt"', 'source: "./other_h5.txt"').replace(
        "Top shape: 128 1 32 72 (294912)", "Top shape: 128 1 64 64 (524288)")
    (tmp_path / "a_other_run.log").write_text(other)
    (tmp_path / "b_own_run.log").write_text(text)
    shapes, _ = _shapes(tmp_path / "train_ResNet_20.prototxt")
    assert shapes[("net", "data")] == ([128, 1, 32, 72], "Caffe's log b_own_run.log beside the net")
