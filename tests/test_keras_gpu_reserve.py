"""TensorFlow's reserve on a GPU card: what its GPU device never lets the BFC allocator take.

tensorflow/core/common_runtime/gpu/gpu_device.cc (TensorFlow 2.21), SingleVirtualDeviceMemoryLimit: the
allocator's limit is the device's free memory (after the CUDA context) less MinSystemMemory(free, cc_major),
unless per_process_gpu_memory_fraction is set; MinSystemMemory is 225 MiB where free < 1<<31 bytes, else
500 MiB for cc_major <= 6, 1050 MiB for <= 7, 1536 MiB for <= 8 and 1800 MiB above; where the reserve is
not less than what is free, nothing is kept. TF_DEVICE_MIN_SYS_MEMORY_IN_MB replaces the reserve when it is
not more than what is free, and is ignored otherwise. The numbers below are the source's, written out.
"""
import json
import os

import pytest

from protoaudit import library
from protoaudit.errors import InputError
from protoaudit.keras.audit import audit_keras
from protoaudit.keras.reserve import min_system_memory, tensorflow_reserve

from conftest import ROOT, run_in_process, run_protoaudit

MiB = 2**20
GiB = 2**30
CONTEXT = 300 * MiB  # protoaudit's default --context
SEED000 = os.path.join(ROOT, "samples", "keras", "seed000_lc1_F5000_sgd.keras")
SEED003 = os.path.join(ROOT, "samples", "keras", "seed003_stack_joint_adam.keras")
LENET = os.path.join(ROOT, "samples", "lenet_lmdb.prototxt")


def report(*args):
    r = run_in_process(*args, "--format", "json")
    assert r.returncode in (0, 1), r.stderr
    return r.returncode, json.loads(r.stdout)


@pytest.mark.parametrize("free, cc_major, reserve", [
    (2**31 - 1, 9, 225 * MiB),  # under 2 GiB free: 225 MiB on every card
    (2**31 - 1, 6, 225 * MiB),
    (2**31, 3, 500 * MiB),  # 2 GiB free is not under 2 GiB
    (2**31, 6, 500 * MiB),  # Pascal (6.1, a GTX 1080 Ti) and older
    (11 * GiB, 7, 1050 * MiB),  # Volta, Turing
    (40 * GiB, 8, 1536 * MiB),  # Ampere, Ada
    (80 * GiB, 9, 1800 * MiB),  # Hopper
    (180 * GiB, 10, 1800 * MiB),  # Blackwell: "else" in the source
    (30 * GiB, 12, 1800 * MiB),
])
def test_the_tiers_are_gpu_device_cc_s(free, cc_major, reserve):
    assert min_system_memory(free, cc_major) == reserve


def test_a_1080_ti_keeps_500_mib_off_what_the_context_leaves():
    """An 11439 MiB card (the GTX 1080 Ti's nvidia-smi figure), the default 300 MiB context, compute
    capability 6.1: 11139 MiB free, at least 2 GiB, cc_major 6 <= 6: 500 MiB kept, 10639 MiB for the allocator."""
    status, j = report(SEED003, "--gpu-mem", "11439M", "--gpu-cc", "6.1")
    assert status == 0
    assert j["context_bytes"] == CONTEXT
    assert j["gpu_reserve_bytes"] == 500 * MiB
    assert j["fit"]["allocator_limit_bytes"] == (11439 - 300 - 500) * MiB
    # the verdict's figure on the card is the total at the high end and the reserve
    assert j["fit"]["total"] == j["high_total_bytes"] + 500 * MiB
    assert j["fit"]["budget"] == 11439 * MiB


@pytest.mark.parametrize("cc, reserve_mib", [("7.5", 1050), ("8.0", 1536), ("8.6", 1536), ("9.0", 1800),
                                             ("10.0", 1800)])
def test_each_compute_capability_takes_its_tier(cc, reserve_mib):
    status, j = report(SEED003, "--gpu-mem", "40G", "--gpu-cc", cc)
    assert j["gpu_reserve_bytes"] == reserve_mib * MiB
    assert j["fit"]["allocator_limit_bytes"] == 40 * GiB - CONTEXT - reserve_mib * MiB


def test_without_a_compute_capability_the_largest_reserve_is_assumed_and_said():
    status, j = report(SEED003, "--gpu-mem", "11439M")
    assert j["gpu_reserve_bytes"] == 1800 * MiB
    assert j["fit"]["allocator_limit_bytes"] == (11439 - 300 - 1800) * MiB
    assert "assumed" in j["gpu_reserve_from"] and "--gpu-cc" in j["gpu_reserve_from"]
    text = run_in_process(SEED003, "--gpu-mem", "11439M").stdout
    (line,) = [x for x in text.splitlines() if x.startswith("  TensorFlow reserve")]
    assert "1.76 GiB" in line and "assumed" in line and "--gpu-cc" in line
    # given, it is not an assumption
    text = run_in_process(SEED003, "--gpu-mem", "11439M", "--gpu-cc", "6.1").stdout
    (line,) = [x for x in text.splitlines() if x.startswith("  TensorFlow reserve")]
    assert "500 MiB" in line and "assumed" not in line and "6.1" in line


def test_a_model_between_the_card_less_the_reserve_and_the_card_does_not_fit():
    """Seed 000 at batch 7: its total (context included) T lies under the card, but T + 500 MiB does not."""
    t = audit_keras(SEED000, batch=7, mode="gpu").high_total_bytes
    card = t + 250 * MiB  # 250 MiB above the total, 250 MiB short of the reserve
    assert card - CONTEXT >= 2**31  # the cc tier, not the small card's
    status, j = report(SEED000, "--batch", "7", "--gpu-mem", f"{card}B", "--gpu-cc", "6.1")
    assert status == 1 and not j["fit"]["fits"]
    assert j["fit"]["total"] - j["fit"]["budget"] == 250 * MiB
    # without the reserve (as TF_DEVICE_MIN_SYS_MEMORY_IN_MB=0 makes it) it fits
    status, j = report(SEED000, "--batch", "7", "--gpu-mem", f"{card}B", "--gpu-reserve", "0")
    assert status == 0 and j["fit"]["fits"] and j["gpu_reserve_bytes"] == 0
    assert j["fit"]["allocator_limit_bytes"] == card - CONTEXT


def test_the_largest_batch_holds_the_reserve_out():
    """Seed 000 on the 11439 MiB card at 6.1: the largest batch B is the last whose total is within
    11439 - 500 MiB (each batch audited, as the verdict does)."""
    limit = (11439 - 500) * MiB
    status, j = report(SEED000, "--gpu-mem", "11439M", "--gpu-cc", "6.1")
    b = j["fit"]["largest_batch"]
    assert audit_keras(SEED000, batch=b, mode="gpu").high_total_bytes <= limit
    assert audit_keras(SEED000, batch=b + 1, mode="gpu").high_total_bytes > limit
    status, j0 = report(SEED000, "--gpu-mem", "11439M", "--gpu-reserve", "0")
    assert j0["fit"]["largest_batch"] > b  # the reserve costs batches here


def test_sweep_fits_hold_the_reserve_out():
    t8 = audit_keras(SEED000, batch=8, mode="gpu").high_total_bytes
    card = t8 + 100 * MiB
    r = run_in_process(SEED000, "--sweep", "7,8", "--gpu-mem", f"{card}B", "--gpu-cc", "6.1", "--format", "json")
    rows = {row["batch"]: row for row in json.loads(r.stdout)["sweep"]}
    assert rows[8]["total"] == t8 and rows[8]["fits"] is False  # t8 + 500 MiB > t8 + 100 MiB
    assert rows[7]["fits"] is (rows[7]["total"] + 500 * MiB <= card)
    csv = run_in_process(SEED000, "--sweep", "7,8", "--gpu-mem", f"{card}B", "--gpu-cc", "6.1", "--format", "csv")
    assert csv.stdout.splitlines()[2] == f"8,{t8},False"
    text = run_in_process(SEED000, "--sweep", "7,8", "--gpu-mem", f"{card}B", "--gpu-cc", "6.1").stdout
    assert "TensorFlow's 500 MiB reserve" in text


def test_under_2_gib_free_the_reserve_is_225_mib():
    """--context 0 and a card under 2 GiB: 225 MiB, whatever the compute capability; a model between the
    card less 225 MiB and the card does not fit."""
    t = audit_keras(SEED000, batch=1, mode="gpu", context=0).high_total_bytes  # some 380 MiB
    card = t + 100 * MiB
    assert 225 * MiB < card < 2**31
    for cc in ("6.1", "9.0"):
        status, j = report(SEED000, "--batch", "1", "--context", "0", "--gpu-mem", f"{card}B", "--gpu-cc", cc)
        assert j["gpu_reserve_bytes"] == 225 * MiB and status == 1
        assert j["fit"]["allocator_limit_bytes"] == card - 225 * MiB
        assert j["fit"]["total"] - j["fit"]["budget"] == 125 * MiB
    status, j = report(SEED000, "--batch", "1", "--context", "0", "--gpu-mem", f"{card}B")
    assert j["gpu_reserve_bytes"] == 225 * MiB and "assumed" not in j["gpu_reserve_from"]
    status, j = report(SEED000, "--batch", "1", "--context", "0", "--gpu-mem", f"{card}B", "--gpu-reserve", "0")
    assert status == 0


def test_a_reserve_not_less_than_what_is_free_is_not_kept():
    """400 MiB card, 300 MiB context: 100 MiB free, under the 225 MiB reserve, so the source keeps none."""
    r = tensorflow_reserve(400 * MiB, CONTEXT, (6, 1))
    assert r.bytes == 0 and r.limit == 100 * MiB
    status, j = report(SEED003, "--gpu-mem", "400M", "--gpu-cc", "6.1")
    assert j["gpu_reserve_bytes"] == 0 and j["fit"]["allocator_limit_bytes"] == 100 * MiB


def test_gpu_reserve_replaces_the_tier():
    status, j = report(SEED003, "--gpu-mem", "11439M", "--gpu-cc", "6.1", "--gpu-reserve", "1G")
    assert j["gpu_reserve_bytes"] == GiB and j["fit"]["allocator_limit_bytes"] == 11439 * MiB - CONTEXT - GiB
    assert "TF_DEVICE_MIN_SYS_MEMORY_IN_MB" in j["gpu_reserve_from"]
    status, j = report(SEED003, "--gpu-mem", "11439M", "--gpu-reserve", "0")
    assert j["gpu_reserve_bytes"] == 0 and j["fit"]["total"] == j["high_total_bytes"]
    # more than is free: TensorFlow ignores it (a warning) and keeps MinSystemMemory's
    status, j = report(SEED003, "--gpu-mem", "11439M", "--gpu-cc", "6.1", "--gpu-reserve", "12G")
    assert j["gpu_reserve_bytes"] == 500 * MiB and "ignores" in j["gpu_reserve_from"]


def test_cpu_mode_has_no_reserve():
    t = audit_keras(SEED003, mode="cpu").high_total_bytes
    status, j = report(SEED003, "--mode", "cpu", "--gpu-mem", f"{t}B")
    assert status == 0 and j["fit"]["fits"] and j["fit"]["total"] == t
    assert j["gpu_reserve_bytes"] is None and j["fit"]["allocator_limit_bytes"] is None
    assert "TensorFlow reserve" not in run_in_process(SEED003, "--mode", "cpu", "--gpu-mem", f"{t}B").stdout
    for flag in (["--gpu-cc", "6.1"], ["--gpu-reserve", "0"]):
        r = run_in_process(SEED003, "--mode", "cpu", "--gpu-mem", "1G", *flag)
        assert r.returncode == 2 and flag[0] in r.stderr and "--mode cpu" in r.stderr


@pytest.mark.parametrize("flag, value", [("--gpu-cc", "x"), ("--gpu-cc", "0.5"), ("--gpu-cc", "61"),
                                         ("--gpu-cc", "6."), ("--gpu-cc", ""), ("--gpu-cc", "-9.0"),
                                         ("--gpu-reserve", "-1M"), ("--gpu-reserve", "500"),
                                         ("--gpu-reserve", "lots")])
def test_bad_values_are_one_line_and_exit_2(flag, value):
    r = run_protoaudit(SEED003, "--gpu-mem", "8G", flag, value)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and flag in r.stderr and "Traceback" not in r.stderr
    assert not r.stdout


def test_the_options_need_a_card():
    r = run_in_process(SEED003, "--gpu-cc", "6.1")
    assert r.returncode == 2 and "--gpu-mem" in r.stderr


@pytest.mark.parametrize("flag", [["--gpu-cc", "6.1"], ["--gpu-reserve", "0"], ["--optimizer", "adam"],
                                  ["--loss", "mse"]])
def test_a_caffe_net_refuses_them_by_name(flag):
    for args in ([LENET, "--gpu-mem", "8G", *flag], ["diff", LENET, LENET, *flag],
                 [LENET, "--caffe-log", *flag]):
        r = run_in_process(*args)
        assert r.returncode == 2, args
        assert flag[0] in r.stderr and "Keras" in r.stderr and "Traceback" not in r.stderr
    from protoaudit import check

    assert check.main([LENET, "--gpu-mem", "8G", *flag]) == 2


def test_the_library_takes_them_for_keras_and_refuses_them_for_caffe():
    a = library.audit(SEED003, gpu_mem="11439M", gpu_cc="6.1")
    assert a.reserve.bytes == 500 * MiB and a.fit.total == a.high_total_bytes + 500 * MiB
    assert library.audit(SEED003, gpu_mem="11439M", gpu_cc=(8, 0)).reserve.bytes == 1536 * MiB
    assert library.audit(SEED003, gpu_mem="11439M", gpu_reserve="500M").reserve.bytes == 500 * MiB
    assert library.audit(SEED003, gpu_mem=11439 * MiB, gpu_reserve=0).reserve.bytes == 0
    assert library.audit(SEED003, gpu_mem="11439M").reserve.bytes == 1800 * MiB
    assert library.audit(SEED003, gpu_mem="11439M", mode="cpu").reserve is None
    for kw in ({"gpu_cc": "6.1"}, {"gpu_reserve": "0"}):
        with pytest.raises(InputError, match="for Keras models"):
            library.audit(LENET, gpu_mem="8G", **kw)
    with pytest.raises(InputError, match="--gpu-cc"):
        library.audit(SEED003, gpu_mem="8G", gpu_cc="5")


def test_every_format_shows_the_reserve_beside_the_verdict():
    for fmt in ("text", "markdown", "html"):
        out = run_in_process(SEED003, "--gpu-mem", "11439M", "--gpu-cc", "6.1", "--format", fmt).stdout
        assert "TensorFlow reserve" in out and "500 MiB" in out, fmt
    out = run_in_process("diff", SEED003, SEED003, "--gpu-mem", "11439M", "--gpu-cc", "6.1").stdout
    assert "with TensorFlow's 500 MiB reserve" in out


def test_the_chart_draws_the_card_less_the_reserve(tmp_path):
    pytest.importorskip("matplotlib")
    import xml.etree.ElementTree as ET

    out = tmp_path / "step.svg"
    r = run_in_process(SEED003, "--gpu-mem", "1G", "--gpu-cc", "6.1", "--plot", out)
    assert r.returncode in (0, 1), r.stderr
    ids = {g.get("id") for g in ET.parse(out).getroot().iter("{http://www.w3.org/2000/svg}g")}
    assert {"card", "card-less-reserve"} <= ids


def test_protoaudit_check_audits_keras_models_with_the_reserve_beside_caffe_nets(capsys):
    """protoaudit-check takes Keras models among the files of a change: seed 000 at batch 7, on a card
    250 MiB above its total (context included) with cc 6.1, is refused for the 500 MiB reserve (exit 1);
    with --gpu-reserve 0 it fits; a Caffe option is refused by name for the Keras file (exit 2)."""
    from protoaudit import check

    t = audit_keras(SEED000, batch=7, mode="gpu").high_total_bytes
    card = f"{t + 250 * MiB}B"
    assert check.main([SEED000, "--batch", "7", "--gpu-mem", card, "--gpu-cc", "6.1"]) == 1
    out = capsys.readouterr().out
    assert f"({t:,} bytes)" in out and "DOES NOT FIT" in out and "250 MiB over" in out
    assert check.main([SEED000, "--batch", "7", "--gpu-mem", card, "--gpu-reserve", "0"]) == 0
    assert "FITS" in capsys.readouterr().out
    assert check.main([SEED003, "--phase", "TEST"]) == 2
    err = capsys.readouterr().err
    assert "--phase is for Caffe nets" in err and "<input>" not in err and "internal error" not in err
