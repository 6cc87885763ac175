"""The library's surface (README, "As a library"): protoaudit.audit and protoaudit.diff give the
command's figures as Python objects, and to_dict() is the --format json report, key for key."""
import json

import pytest

import protoaudit
from protoaudit import InputError

from conftest import run_in_process

OLD, NEW = "samples/segnet_seed001_old.prototxt", "samples/segnet_seed001_new.prototxt"


def cli_json(*args):
    r = run_in_process(*args, "--format", "json", timeout=120)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def plain(value):
    """Whether a value is plain data: dicts with str keys, lists, str, int, float, bool, None."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(plain(v) for v in value)
    return value is None or isinstance(value, (str, int, float, bool))


@pytest.mark.parametrize("options, flags", [
    ({}, []),
    ({"gpu_mem": "8G"}, ["--gpu-mem", "8G"]),
    ({"gpu_mem": 8 * 2**30, "batch": 2, "engine": "cudnn", "sweep": "1..3"},
     ["--gpu-mem", "8G", "--batch", "2", "--engine", "cudnn", "--sweep", "1..3"]),
    ({"inference": True, "context": 0}, ["--inference", "--context", "0"]),
])
def test_to_dict_is_the_json_report(options, flags):
    result = protoaudit.audit(OLD, **options)
    data = result.to_dict()
    assert plain(data)
    assert json.loads(json.dumps(data)) == cli_json(OLD, *flags)


def test_an_audit_has_its_totals_rows_and_explanation():
    result = protoaudit.audit(NEW, gpu_mem="8G")
    assert result.total_bytes == 9_307_486_632  # test_golden: seed 001's new net, by hand
    rows = result.rows()
    assert [r.name for r in rows[:3]] == ["data", "label_data_1_split", "norm"]
    assert rows[-1].name == "CUDA context" and rows[-1].cumulative == result.total_bytes
    conv1 = next(r for r in rows if r.name == "conv1")
    assert conv1.columns["buffers"] == (64 * 7 * 7 * 384 * 512 + 384 * 512) * 4  # col_buffer_, bias_multiplier_
    assert result.fit.fits is False and result.fit.largest_batch == 0
    lines = result.explain()
    assert lines[0].startswith("Hand recipe (activations x2 + params x3, 4 bytes each): 2.21 GiB")
    # the card's figure: the total and cudaMalloc's pages, 9,363,783,680 bytes (test_golden's on_card)
    assert result.total_bytes + result.cudamalloc_pages == 9_363_783_680
    assert "DOES NOT FIT a 8 GiB card: 8.72 GiB needed, 738 MiB too much." in lines
    assert result.summary.per_sample + result.summary.invariant == result.total_bytes


def test_diff_is_the_json_diff_and_its_explanation():
    comparison = protoaudit.diff(OLD, NEW, gpu_mem="8G")
    assert comparison.delta == 9_307_486_632 - 7_613_443_500
    assert comparison.explain()[0] == "B needs 1.58 GiB more than A: 8.67 GiB against 7.09 GiB."
    assert comparison.fit_a.fits and not comparison.fit_b.fits
    data = comparison.to_dict()
    assert plain(data) and json.loads(json.dumps(data)) == cli_json("diff", OLD, NEW, "--gpu-mem", "8G")


def test_diff_takes_options_for_one_side():
    comparison = protoaudit.diff(NEW, NEW, b={"batch": 2})
    assert comparison.a.batch == 1 and comparison.b.batch == 2
    assert json.loads(json.dumps(comparison.to_dict())) == cli_json("diff", NEW, NEW, "--batch-b", "2")


def test_bad_input_raises_input_error():
    with pytest.raises(InputError, match="--gpu-mem 8Q: not a size"):
        protoaudit.audit(NEW, gpu_mem="8Q")
    with pytest.raises(InputError, match="--sweep 0"):
        protoaudit.audit(NEW, sweep=[0, 1])
