"""Layers protoaudit cannot see into: refused with what to do, or audited around when declared."""
import json

from conftest import run_in_process

NET = """name: "u"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer { name: "weird" type: "MyFancyLayer" bottom: "data" top: "w" }
layer { name: "conv" type: "Convolution" bottom: "w" top: "c" convolution_param { num_output: 4 kernel_size: 3 } }
"""


def test_unknown_type_says_how_to_declare_it(tmp_path):
    path = tmp_path / "u.prototxt"
    path.write_text(NET)
    run = run_in_process(str(path))
    assert run.returncode == 2
    assert "unknown layer type 'MyFancyLayer'" in run.stderr and "--input w=NxCxHxW" in run.stderr
    assert ":3:" in run.stderr and "'weird'" in run.stderr


def test_declared_unknown_layer_is_audited_around_and_reported(tmp_path):
    path = tmp_path / "u.prototxt"
    path.write_text(NET)
    run = run_in_process(str(path), "--input", "w=2x5x8x8", "--format", "json", "--context", "0")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    conv = next(layer for layer in report["nets"][0]["layers"] if layer["name"] == "conv")
    assert conv["tops"] == [[2, 4, 6, 6]]  # (8 - 3) / 1 + 1 = 6 from the declared 2x5x8x8
    col = next(b for b in conv["buffers"] if b["owner"] == "conv.col_buffer_")
    assert col["elements"] == 5 * 3 * 3 * 6 * 6  # C_in x kernel x output, one image
    assert report["gaps"] == [{"net": "net", "layer": "weird", "type": "MyFancyLayer",
                               "not_counted": "its own buffers (protoaudit cannot see into it)"}]
