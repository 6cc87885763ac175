"""A log whose nets' printed text glog cut (a message ends at 30,000 bytes): the nets are read from
the files the log says they came from, found beside the log, and only when those files hold the
very layers the log set up. Every expected line is the real log's own."""
import os
import shutil

import pytest

import logparse
from conftest import DATA, run_in_process

REPO = os.path.join(DATA, "logs_cut", "res18_ssd")
LOG = os.path.join("job", "res18_coco_SSD_512x512.log")


def _logged():
    with open(os.path.join(REPO, LOG), errors="replace") as f:
        return logparse.parse(f.read())


def test_the_log_names_absolute_paths_of_another_machine():
    """The premise: the solver named /home/.../models/resnet18/own/train.prototxt, which is not
    here; only its last part matches the file kept beside the log."""
    with open(os.path.join(REPO, LOG)) as f:
        head = f.read(4000)
    assert 'train_net: "/home/zhongchong/repos/caffe-ssd/models/resnet18/own/train.prototxt"' in head
    assert not os.path.exists("/home/zhongchong/repos/caffe-ssd/models/resnet18/own/train.prototxt")


def test_a_cut_log_is_reproduced_from_the_net_files_beside_it():
    run = run_in_process(os.path.join(REPO, LOG), "--caffe-log")
    assert run.returncode == 0, run.stderr
    expected, got = _logged(), logparse.parse(run.stdout)
    assert [n.phase for n in expected] == ["TRAIN", "TEST"] == [n.phase for n in got]
    for want, have in zip(expected, got):
        assert logparse.first_difference(want, have) is None, logparse.first_difference(want, have)
    # the log's own totals (net.cpp's last "Memory required for data" of each net)
    assert [n.memory for n in got] == [3695489572, 1232681636]


def test_the_report_says_where_the_net_was_read_from():
    run = run_in_process(os.path.join(REPO, LOG))
    assert run.returncode == 0, run.stderr
    assert "glog cut the TRAIN net's printed text" in run.stdout
    assert os.path.join("job", "train.prototxt") in run.stdout


def _copy(tmp_path, edit=None):
    shutil.copytree(REPO, tmp_path / "repo")
    if edit:
        path = tmp_path / "repo" / "job" / "train.prototxt"
        path.write_text(edit(path.read_text()))
    return str(tmp_path / "repo" / LOG)


def test_a_file_with_other_layers_is_not_taken(tmp_path):
    """The same name, another net (a layer renamed): refused, naming the file and the first layer
    that differs from those the log set up."""
    log = _copy(tmp_path, lambda text: text.replace('name: "conv1"', 'name: "conv1_renamed"', 1))
    run = run_in_process(log, "--caffe-log")
    assert run.returncode == 2
    assert "is not the net Caffe ran" in run.stderr and "'conv1_renamed' where the log set up 'conv1'" in run.stderr
    assert "Traceback" not in run.stderr


def test_without_the_files_the_cut_is_refused_with_both_ways_out(tmp_path):
    log = _copy(tmp_path)
    os.remove(os.path.join(os.path.dirname(log), "train.prototxt"))
    run = run_in_process(log, "--caffe-log")
    assert run.returncode == 2
    assert "glog cut the printed text of the TRAIN net" in run.stderr
    assert "found neither as named nor beside the log" in run.stderr and "--log" in run.stderr


@pytest.mark.parametrize("phase,memory", [("train", 3695489572), ("test", 1232681636)])
def test_one_phase_of_a_cut_log(phase, memory):
    run = run_in_process(os.path.join(REPO, LOG), "--caffe-log", "--phase", phase)
    assert run.returncode == 0, run.stderr
    (got,) = logparse.parse(run.stdout)
    assert got.memory == memory


def test_every_run_of_a_restarted_job_is_reproduced(tmp_path):
    """A job restarted into the same file logs its nets once per run: --caffe-log gives each run's,
    in order, and the audit is of the last. (The real cifar_resnet20.log written twice.)"""
    with open(os.path.join(DATA, "logs", "cifar_resnet20.log"), errors="replace") as f:
        text = f.read()
    log = tmp_path / "restarted.log"
    log.write_text(text + text)
    run = run_in_process(log, "--caffe-log")
    assert run.returncode == 0, run.stderr
    expected, got = logparse.parse(text), logparse.parse(run.stdout)
    assert len(expected) == 2 and len(got) == 4
    for want, have in zip(expected + expected, got):
        assert logparse.first_difference(want, have) is None, logparse.first_difference(want, have)
    audit = run_in_process(log, "--format", "json")
    assert audit.returncode == 0 and audit.stdout.count('"role": "train"') == 1


def test_a_logged_path_of_thousands_of_parts_is_looked_up_in_its_last_few(tmp_path):
    """A log whose solver names a net file by a path of 5,000 folders: refused at once, in one line."""
    with open(os.path.join(REPO, LOG), errors="replace") as f:
        text = f.read()
    deep = "/" + "/".join(["d"] * 5000) + "/train.prototxt"
    log = tmp_path / "deep.log"
    log.write_text(text.replace("/home/zhongchong/repos/caffe-ssd/models/resnet18/own/train.prototxt", deep))
    run = run_in_process(log, "--caffe-log", "--phase", "train", timeout=30)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


GOOGLENET = os.path.join(DATA, "logs_cut", "kaggle_googlenet")
DGD = os.path.join(DATA, "logs_cut", "dgd_person_reid")


def _printed_net(path):
    """The lines of the first net text Net::Init printed, up to the next glog line, and the glog
    line that began it."""
    with open(path) as f:
        lines = f.read().split("\n")
    start = next(k for k, line in enumerate(lines) if "Initializing net from parameters" in line)
    end = next(k for k in range(start + 1, len(lines)) if logparse.GLOG_PREFIX.match(lines[k]))
    return lines[start], lines[start + 1:end]


def test_an_unindented_copy_of_a_log_still_shows_glogs_cut():
    """The premise: this copy of the log lost the net text's indentation, so the TRAIN net's text
    is under 25,000 bytes, yet it ends inside a layer. With protobuf's two spaces a level put back,
    the prefixed message comes to glog's 29,999 bytes (logging.h's kMaxLogMessageLen, 30,000, less
    the byte for its newline) with the next line's indentation: glog cut it there."""
    first, text = _printed_net(os.path.join(GOOGLENET, "caffe_output.log"))
    assert not any(line.startswith(" ") for line in text)
    assert len("\n".join(text).encode()) < 25000
    depth = size = 0
    for line in text:
        size += len(line) + 1 + 2 * (depth - 1 if line.startswith("}") else depth)
        depth += line.count("{") - line.count("}")
    size += len(first) + len(" \n")  # glog's line and the space Net::Init prints after "parameters:"
    assert depth == 3 and text[-1] == "bias_filler {"
    assert size + 2 * depth == 29999


def test_a_cut_unindented_log_is_reproduced_from_the_net_file_it_names():
    run = run_in_process(os.path.join(GOOGLENET, "caffe_output.log"), "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(os.path.join(GOOGLENET, "caffe_output.log")) as f:
        expected = logparse.parse(f.read())
    got = logparse.parse(run.stdout)
    assert len(expected) == len(got) == 2
    for want, have in zip(expected, got):
        assert logparse.first_difference(want, have) is None, logparse.first_difference(want, have)
    # the log's own last "Memory required for data" of each net (its lines 3129 and 6465)
    assert [n.memory for n in got] == [1794708748, 897355352]
    report = run_in_process(os.path.join(GOOGLENET, "caffe_output.log"))
    assert report.returncode == 0 and "glog cut the TRAIN net's printed text" in report.stdout


def test_without_the_file_it_names_an_unindented_cut_is_refused_naming_it(tmp_path):
    shutil.copy(os.path.join(GOOGLENET, "caffe_output.log"), tmp_path)
    run = run_in_process(tmp_path / "caffe_output.log", "--caffe-log")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert "glog cut the printed text of the TRAIN and TEST nets" in run.stderr
    assert "protoaudit train_val.prototxt --log" in run.stderr


def test_a_file_two_nets_came_from_that_is_not_the_net_is_told_once():
    """Both nets of Cysu's CUHK01 run came from one file, which the repository has since changed
    (the log set up 'gather_global_pool_to_fc7', the file has 'fc7'): one reason, told once."""
    run = run_in_process(os.path.join(DGD, "archived", "individually_cuhk01.log"), "--caffe-log")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "glog cut the printed text of the TRAIN and TEST nets" in run.stderr
    assert run.stderr.count("is not the net Caffe ran") == 1
    assert "'fc7' where the log set up 'gather_global_pool_to_fc7'" in run.stderr


def test_two_nets_with_two_reasons_are_each_told_theirs(tmp_path):
    """The GoogLeNet file with its TRAIN-only and TEST-only data layers renamed: each net is told
    what differs in it."""
    shutil.copytree(GOOGLENET, tmp_path / "job")
    path = tmp_path / "job" / "train_val.prototxt"
    path.write_text(path.read_text().replace('"train-data"', '"train-data2"').replace('"val-data"', '"val-data2"'))
    run = run_in_process(tmp_path / "job" / "caffe_output.log", "--caffe-log")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "for the TRAIN net, " in run.stderr and "'train-data2' where the log set up 'train-data'" in run.stderr
    assert "for the TEST net, " in run.stderr and "'val-data2' where the log set up 'val-data'" in run.stderr


def test_many_cut_nets_are_counted_not_listed():
    """A log of a ConvLSTM net prints its eight unrolled sub-nets as TEST nets (tried as a new user
    would: DengPingFan/DAVSOD's logc20.log): the message counts them, where it listed "TEST and TEST ..."."""
    from protoaudit.read.netspecs import _nets_named

    assert _nets_named(["TRAIN"]) == "the TRAIN net"
    assert _nets_named(["TRAIN", "TEST"]) == "the TRAIN and TEST nets"
    assert _nets_named(["TEST"] * 8) == "8 TEST nets"
    assert _nets_named(["TRAIN", "TEST", "TEST"]) == "3 nets (1 TRAIN, 2 TEST)"


DEEPFASHION = os.path.join(DATA, "logs_cut", "deepfashion_test", "epoch0_validation.log")


def test_a_cut_log_that_names_no_file_is_read_from_the_net_beside_it():
    """A `caffe test` run (no solver, so no file named) whose TEST net's text glog cut: the net file
    beside the log is taken, as it holds, in that phase, the very layers the log set up; every line
    of the log's is reproduced, and the report says where the net was read from."""
    run = run_in_process(DEEPFASHION, "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(DEEPFASHION, errors="replace") as f:
        (expected,) = logparse.parse(f.read())
    (got,) = logparse.parse(run.stdout)
    assert expected.phase == "TEST" and run.stdout.startswith("Net ResNet-50, phase TEST") and len(expected.layers) > 200
    assert logparse.first_difference(expected, got) is None, logparse.first_difference(expected, got)
    run = run_in_process(DEEPFASHION)
    assert run.returncode == 0 and "a net file beside the log" in run.stdout, run.stderr


def test_a_cut_log_beside_no_net_holding_its_layers_is_refused(tmp_path):
    shutil.copy(DEEPFASHION, tmp_path)
    (tmp_path / "train.prototxt").write_text('name: "other" layer { name: "x" type: "Input" top: "x" '
                                             'input_param { shape { dim: 1 } } }\n')
    run = run_in_process(str(tmp_path / "epoch0_validation.log"))
    assert run.returncode == 2 and "no net file beside it holds the layers it set up" in run.stderr


BACTERIA = os.path.join(DATA, "logs_cut", "bacteria_trimmed", "loadMeanHang.txt")


def _lines(text, start=None):
    """The Top shape and Memory required lines of glog lines or of --caffe-log's first net, from the
    first line naming `start` on."""
    out, on = [], start is None
    for line in text.splitlines():
        message = line.split("] ", 1)[1] if "] " in line else line
        on = on or message.startswith(f"Setting up {start}")
        if on and message.startswith(("Top shape:", "Memory required for data:")):
            out.append(message.strip())
    return out


def test_a_log_kept_from_after_its_net_text_is_read_from_the_net_beside_it():
    """A log whose first line is a layer's setup (its net's text and first layers not kept): the net
    file beside it holds those layers, last ones first, in the TEST phase. Its data layer's lines are
    gone, and its dataset is not here: of the images assumed, the first whose shapes are the ones the
    log set up is taken, 3x32x32 (at 224, conv1_1 would be 50x64x224x224 where the log set up
    50x64x32x32). Every kept Top shape and Memory line is then Caffe's own: the memory lines count the
    unlogged data layer's 50x3x32x32 floats and 50 labels too (615,000 bytes at the label's split)."""
    run = run_in_process(BACTERIA)
    assert run.returncode in (0, 1), run.stderr
    assert "without printing it" in run.stdout and "data 50x3x32x32" in run.stdout
    run = run_in_process(BACTERIA, "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(BACTERIA, errors="replace") as f:
        logged = _lines(f.read())
    printed = _lines(run.stdout.split("\nNet ")[0], start="label_data_1_split")
    assert len(logged) > 40 and printed[:len(logged)] == logged
    assert logged[2] == "Memory required for data: 615000" == f"Memory required for data: {50 * 3 * 32 * 32 * 4 + 3 * 50 * 4}"


def test_a_pycaffe_runs_net_file_is_the_one_upgrade_proto_names():
    """whuhxb/py-R-FCN-PSB's test run (tools/test_net.py, pycaffe: no solver names its net): glog cut the
    TEST net's text, and the only line naming its file is upgrade_proto.cpp's "Attempting to upgrade
    input file specified using deprecated input fields: models/pascal_voc/ResNet-101/rfcn_end2end/
    test_agnostic.prototxt" (line 5), relative to the repository's root where the script ran. That
    file is read, and every layer Caffe set up up to rfcn_cls has the log's own shapes (the Python
    proposal layer's too: --caffe-log prints the shapes its setup gave, 1x5 at line 5686). The
    repository's file was changed after the run: rfcn_cls has 11 x 49 outputs where the log shows
    21 x 49 (1029), the first line that differs."""
    repo = os.path.join(DATA, "logs_cut", "rfcn_test_upgrade")
    log = os.path.join(repo, "experiments", "logs", "rfcn_end2end_ResNet-101_.txt.2017-05-09_19-53-04")
    run = run_in_process(log, "--caffe-log")
    assert run.returncode == 0, run.stderr
    with open(log, errors="replace") as f:
        (want,) = logparse.parse(f.read())
    (got,) = logparse.parse(run.stdout)
    names = [layer.name for layer in want.layers]
    assert names == [layer.name for layer in got.layers]
    upto = names.index("rfcn_cls")
    assert [layer.shapes for layer in want.layers][:upto] == [layer.shapes for layer in got.layers][:upto]
    assert dict(zip(names, [layer.shapes for layer in got.layers]))["proposal"] == [(1, 5)]
    assert logparse.first_difference(want, got).startswith("layer 'rfcn_cls'")
    plain = run_in_process(log)
    assert plain.returncode == 0 and "test_agnostic.prototxt" in plain.stdout, plain.stderr


def test_a_net_file_kept_a_folder_above_its_log_is_found_by_its_name(tmp_path):
    """A repository that keeps its logs in a folder of their own below its nets (kaidic/AFEW_Competition's
    video/log/, naming ../scripts/inception21k_train_step4.prototxt, kept as video/): here Res18_SSD's
    log moved into job/log/. No last part of the named path is beside the log, and the file's name
    alone is found one folder above; it holds the very layers the log set up, so the log is reproduced."""
    shutil.copytree(REPO, tmp_path / "repo")
    (tmp_path / "repo" / "job" / "log").mkdir()
    shutil.move(str(tmp_path / "repo" / LOG), str(tmp_path / "repo" / "job" / "log"))
    log = str(tmp_path / "repo" / "job" / "log" / os.path.basename(LOG))
    run = run_in_process(log, "--caffe-log")
    assert run.returncode == 0, run.stderr
    expected, got = _logged(), logparse.parse(run.stdout)
    for want, have in zip(expected, got):
        assert logparse.first_difference(want, have) is None, logparse.first_difference(want, have)


UNPARSED = os.path.join(DATA, "logs_unparsed", "pla1-pla2-blue-withType")
UNPARSED_LOG = os.path.join("log", "log-2017-12-29-14-59-43.log")


def test_a_log_whose_printed_net_does_not_parse_is_reproduced_from_the_file_it_names():
    """wudigepimao/caffe-ocr-linux's log prints its TRAIN net with `name: "data""` (log line 38), which no
    caffe.proto parses, while Caffe's own lines say "Creating layer data": the file the log names
    (solver.cpp, line 26), kept in the folder above the log, holds the very layers it set up, so it
    is read instead, and every line Caffe logged is reproduced."""
    path = os.path.join(UNPARSED, UNPARSED_LOG)
    with open(path, errors="replace") as f:
        text = f.read()
    assert '  name: "data""\n' in text and "Creating layer data\n" in text  # the premise
    run = run_in_process(path, "--caffe-log")
    assert run.returncode == 0, run.stderr
    expected, got = logparse.parse(text), logparse.parse(run.stdout)
    assert [n.phase for n in expected] == ["TRAIN", "TEST"] == [n.phase for n in got]
    for want, have in zip(expected, got):
        assert logparse.first_difference(want, have) is None, logparse.first_difference(want, have)
    report = run_in_process(path)
    assert report.returncode == 0, report.stderr
    assert "the TRAIN net's printed text does not parse as Caffe printed it (log line 38" in report.stdout
    assert "whose 78 layers in that state are the ones Caffe set up" in report.stdout


def test_without_that_file_the_printed_nets_syntax_error_stands(tmp_path):
    shutil.copytree(UNPARSED, tmp_path / "run")
    os.remove(tmp_path / "run" / "train_val.prototxt")
    run = run_in_process(str(tmp_path / "run" / UNPARSED_LOG))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "log-2017-12-29-14-59-43.log:38" in run.stderr and "String missing ending quote" in run.stderr
