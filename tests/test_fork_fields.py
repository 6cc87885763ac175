"""Forks whose nets differ from BVLC's in fields alone (lim0606's, Intel Caffe, Cysu's): each is read
with its own caffe.proto (shipped verbatim), chosen by the fields the file uses, and audited with
BVLC's layers, since none of those fields changes a shape or a byte protoaudit counts."""
import os

import pytest

from conftest import DATA, ROOT
from protoaudit.read.load import load
from protoaudit.read.schema import load_schema

FORKS = os.path.join(DATA, "forks")


@pytest.mark.parametrize("fork, header", [
    ("lim0606", "// lim0606/caffe (branch master, the Caffe lim0606/caffe-googlenet-bn names), "
                "src/caffe/proto/caffe.proto at commit 529a11e4f57f26a4c162e19d67c8b9c42f0a361a"),
    ("intel", "// intel/caffe (branch master), src/caffe/proto/caffe.proto at commit "
              "44d536385dc41804a673c527b4c2df2675770dff"),
    ("cysu", "// Cysu/caffe (branch domain-guided-dropout, the Caffe Cysu/dgd_person_reid pins as "
             "external/caffe), src/caffe/proto/caffe.proto at commit ab985827d63de737c5e05cbddb53c3a8484cd20f"),
])
def test_the_protos_are_the_forks_files_verbatim(fork, header):
    assert open(os.path.join(ROOT, "proto", "forks", f"{fork}.proto")).read().startswith(header)


def test_the_fields_their_nets_use_are_where_the_forks_put_them():
    """Read off each fork's caffe.proto: lim0606's DataParameter.shuffle (11), Intel's string
    `engine` on layers (149) and bn_stats_batch_size on nets, Cysu's net `richness` (9) and solver
    `min_lr` (39)."""
    def field(fork, message, name):
        return load_schema(fork).message(message).DESCRIPTOR.fields_by_name[name].number

    assert field("lim0606", "DataParameter", "shuffle") == 11
    assert field("intel", "LayerParameter", "engine") == 149
    assert "bn_stats_batch_size" in load_schema("intel").NetParameter.DESCRIPTOR.fields_by_name
    assert field("cysu", "NetParameter", "richness") == 9
    assert field("cysu", "SolverParameter", "min_lr") == 39


@pytest.mark.parametrize("name, fork", [
    ("lim0606_googlenet_bn_train_val.prototxt", "lim0606"),  # data_param { shuffle: true }
    ("intel_resnet_50_train_val.prototxt", "intel"),  # bn_stats_batch_size, engine: "MKL2017"
])
def test_real_nets_are_read_with_their_forks_schema_and_audit(protoaudit, name, fork):
    path = os.path.join(FORKS, name)
    assert load(path).schema.name == fork
    r = protoaudit(path)
    assert r.returncode == 0, r.stderr
    assert "Read with the caffe.proto of " in r.stdout


def test_a_solver_with_cysus_min_lr_is_read_with_its_schema(tmp_path):
    # (the fork predates the Input layer: DummyData stands for the data)
    (tmp_path / "net.prototxt").write_text('layer { name: "in" type: "DummyData" top: "x" '
                                           'dummy_data_param { shape { dim: 1 dim: 2 } } }\nrichness: 1000\n')
    solver = tmp_path / "solver.prototxt"
    solver.write_text('net: "net.prototxt"\nbase_lr: 0.01\nlr_policy: "poly"\npower: 0.5\nmin_lr: 0.0001\n')
    assert load(str(solver)).schema.name == "cysu"
    assert load(str(tmp_path / "net.prototxt")).schema.name == "cysu"
