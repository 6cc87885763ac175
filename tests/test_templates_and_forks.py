"""${NAME} templates (--define), and which Caffe's schema reads a file (--fork, and the refusal of a
file that several forks would size differently)."""
import pytest

from conftest import run_in_process
from protoaudit import InputError, build_nets
from protoaudit.layers import FORK_REGISTRY, fork_layers
from protoaudit.layers.segnet import BN
from protoaudit.read import load

TEMPLATE = """name: "${NET_ID}"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: ${BATCH} dim: 3 dim: 8 dim: 8 } } }
layer { name: "fc8_${EXP}" type: "InnerProduct" bottom: "data" top: "fc8"
  inner_product_param { num_output: ${NUM_LABELS} } }
"""


def test_every_unset_template_outside_a_string_is_asked_for_at_once(tmp_path):
    (tmp_path / "net.prototxt").write_text(TEMPLATE.replace("${NUM_LABELS}", "${CLASSES}"))
    run = run_in_process("net.prototxt", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr == ("protoaudit: net.prototxt:2: the file is a template: ${BATCH}, ${CLASSES} must be "
                          "given a value (give --define BATCH=VALUE --define CLASSES=VALUE)\n")


def test_deeplabs_num_labels_left_unset_is_its_scripts_stock_value_and_said(tmp_path):
    """DeepLab's run_pascal.sh (v1 and v2) sets NUM_LABELS=21 for its stock experiment, EXP=voc12:
    the 20 PASCAL VOC classes and the background. Left unset, that is the value, listed as assumed;
    a placeholder without a stock value is still asked for alone."""
    (tmp_path / "net.prototxt").write_text(TEMPLATE.replace("${BATCH}", "2"))
    (net,) = build_nets(str(tmp_path / "net.prototxt"))
    assert list(net.layer("fc8_${EXP}").top_shapes) == [(2, 21)]
    (said,) = [a for a in net.assumptions if "NUM_LABELS" in a.what]
    assert "net.prototxt:4" in said.what and "--define NUM_LABELS=N" in said.override
    (tmp_path / "net.prototxt").write_text(TEMPLATE)
    run = run_in_process("net.prototxt", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr == ("protoaudit: net.prototxt:2: the file is a template: ${BATCH} must be given a value "
                          "(give --define BATCH=VALUE)\n")


def test_define_fills_the_templates_and_strings_may_keep_theirs(tmp_path):
    (tmp_path / "net.prototxt").write_text(TEMPLATE)
    (net,) = build_nets(str(tmp_path / "net.prototxt"), defines={"BATCH": "2", "NUM_LABELS": "21"})
    assert list(net.layer("fc8_${EXP}").top_shapes) == [(2, 21)]
    assert net.name == "${NET_ID}"  # a string: Caffe would read it as it is
    run = run_in_process("net.prototxt", "--define", "BATCH=2", "--define", "NUM_LABELS=21", "--define", "EXP=voc",
                         "--caffe-log", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Creating Layer fc8_voc" in run.stdout and "Top shape: 2 21 (42)" in run.stdout


def test_a_template_in_a_comment_is_not_asked_for(tmp_path):
    (tmp_path / "net.prototxt").write_text("# num_output: ${NUM_LABELS}\n"
                                           + TEMPLATE.replace("${BATCH}", "2").replace("${NUM_LABELS}", "3"))
    (net,) = build_nets(str(tmp_path / "net.prototxt"))
    assert list(net.layers[-1].top_shapes) == [(2, 3)]


@pytest.mark.parametrize("value", ["NUM_LABELS", "=21", "NUM LABELS=21"])
def test_a_malformed_define_is_refused(tmp_path, value):
    (tmp_path / "net.prototxt").write_text(TEMPLATE)
    run = run_in_process("net.prototxt", "--define", value, cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.startswith(f"protoaudit: --define '{value}' is not NAME=VALUE")


NET_WITH_BN = """name: "bn"
input: "data"
input_dim: 1 input_dim: 2 input_dim: 4 input_dim: 4
layer { name: "bn" type: "BN" bottom: "data" top: "bn" }
"""


def test_fork_names_the_schema(tmp_path):
    path = tmp_path / "net.prototxt"
    # scale_filler is caffe-segnet's name (PSPNet's BN says slope_filler): segnet is the one fork
    # that reads it and knows BN (caffe-enet reads it too, but descends from caffe-segnet)
    path.write_text(NET_WITH_BN.replace('top: "bn" }', 'top: "bn" bn_param { scale_filler { value: 1 } } }'))
    assert load.load(str(path)).schema.name == "segnet"
    run = run_in_process("net.prototxt", "--fork", "nosuchfork", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.startswith("protoaudit: --fork nosuchfork: protoaudit knows bvlc, segnet")
    path.write_text(NET_WITH_BN)
    with pytest.raises(InputError, match="unknown layer type 'BN'"):
        build_nets(str(path), schema="bvlc")


def test_forks_that_would_size_a_file_differently_make_it_ambiguous(tmp_path, monkeypatch):
    """Two forks read the file and both know BN, with different classes: refused, naming both and
    --fork; with the same class for BN, either reading gives the same audit and the first is taken."""
    path = tmp_path / "net.prototxt"
    path.write_text(NET_WITH_BN)

    class OtherBN(BN):
        pass

    # PSPNet's, TSN's, L-Softmax's and Cysu's Caffes read a bare BN too (with a BN of their own,
    # tests/test_fork_seg.py, tests/test_fork_tsn.py; L-Softmax's sized as PSPNet's, Cysu's as L-Softmax's):
    # here PSPNet's and TSN's get segnet's
    monkeypatch.setitem(FORK_REGISTRY, "pspnet", {**fork_layers("pspnet"), "BN": BN})
    monkeypatch.setitem(FORK_REGISTRY, "tsn", {**fork_layers("tsn"), "BN": BN})
    monkeypatch.setitem(FORK_REGISTRY, "ducha", {"BN": OtherBN})
    load.READINGS.clear()
    with pytest.raises(InputError) as e:
        load.load(str(path))
    assert "more than one Caffe fork reads this file, and they size its layers differently" in str(e.value)
    assert "segnet (" in str(e.value) and "ducha (" in str(e.value)
    assert "--fork (segnet, ducha, pspnet, cysu, tsn, largemargin)" in str(e.value)
    assert load.load(str(path), "ducha").schema.name == "ducha"
    monkeypatch.setitem(FORK_REGISTRY, "ducha", {"BN": BN})
    load.READINGS.clear()
    assert load.load(str(path)).schema.name == "segnet"
    load.READINGS.clear()
