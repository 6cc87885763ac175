"""The README and samples/README.md as a newcomer follows them: every documented `protoaudit`
command runs on the shipped samples as written, the first one exits 1 as the README says, every
file of samples/ is described, and the README's test command is the one .ci/run runs."""
import os
import re
import shlex

import pytest

from conftest import ROOT

README = os.path.join(ROOT, "README.md")
SAMPLES_README = os.path.join(ROOT, "samples", "README.md")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def commands(path):
    """The `protoaudit ...` lines of a page's indented code blocks on the shipped samples (not those
    naming a file of your own, such as model.keras), less comments and redirections."""
    found = []
    for line in read(path).splitlines():
        line = line.strip() if line.startswith("    ") else ""
        line = re.sub(r"^.*&& \S*protoaudit ", "protoaudit ", line)
        if re.match(r"(\.venv/bin/)?protoaudit ", line):
            words = shlex.split(line, comments=True)
            words = words[1:words.index(">")] if ">" in words else words[1:]
            if all(w.startswith("samples/") for w in words if re.search(r"\.(prototxt|log|keras|json|h5)$", w)):
                found.append(words)
    return found


USES = [c for c in commands(README) + commands(SAMPLES_README) if "samples/lenet_lmdb.prototxt" not in c]


def test_the_pages_document_commands():
    assert len(commands(README)) >= 12 and len(commands(SAMPLES_README)) >= 14


@pytest.mark.parametrize("argv", USES, ids=" ".join)
def test_every_documented_command_runs_on_the_samples(argv, monkeypatch, capsys):
    """Run from the repository's root, as the README says; 0 fits, 1 does not fit, never 2 (bad
    input) or 3 (an internal error)."""
    from protoaudit.cli import main

    monkeypatch.chdir(ROOT)
    try:
        status = main(argv)
    except SystemExit as e:  # --version exits through argparse
        status = e.code
    out, err = capsys.readouterr()
    assert status in (0, 1), err
    assert out


def test_the_first_command_exits_1_as_the_readme_says(monkeypatch, capsys):
    from protoaudit.cli import main

    first = commands(README)[0]
    assert first == ["samples/segnet_seed001_new.prototxt", "--gpu-mem", "8G"]
    monkeypatch.chdir(ROOT)
    assert main(first) == 1
    out = capsys.readouterr().out
    assert "DOES NOT FIT a 8 GiB card" in out
    # the lines the README pastes are the ones the command prints
    pasted = read(README).split("the last lines\nit prints are:\n\n", 1)[1].split("\n\n", 1)[0]
    assert [line[4:] for line in pasted.splitlines()] == out.rstrip("\n").splitlines()[-len(pasted.splitlines()):]


def test_every_sample_is_described():
    described, samples = read(SAMPLES_README), os.path.join(ROOT, "samples")
    for folder, subfolders, files in os.walk(samples):
        subfolders[:] = [d for d in subfolders if d != "data" and not d.startswith(".")]  # the recipe's output
        for name in files:
            name = os.path.relpath(os.path.join(folder, name), samples)
            assert f"`{name}`" in described, name


def test_the_out_of_memory_log_dies_of_out_of_memory():
    """The log is a real run's: Net::Init lines, then CUDA's out-of-memory CHECK, and its source URL
    is recorded; protoaudit finds where it died."""
    import protoaudit

    log = os.path.join(ROOT, "samples", "squeezenet128_oom.log")
    text = read(log)
    assert text.index("Memory required for data:") < text.index(
        "Check failed: error == cudaSuccess (2 vs. 0)  out of memory")
    assert ("https://github.com/ducha-aiki/caffenet-benchmark/blob/e47c4ffdab4f927a2b963b34f3c3297afa22d085/"
            "logs/architectures/SqueezeNet128_new_solver.log") in read(SAMPLES_README)
    death = protoaudit.audit(log).to_dict()["death"]
    assert "out of memory" in death["message"] and death["held_after_bytes"] > death["held_before_bytes"]


def test_the_readme_test_command_is_what_ci_runs():
    """The README shows the command .ci/run ends with, and says the Chromium install is the difference."""
    ci = read(os.path.join(ROOT, ".ci", "run")).rstrip("\n").splitlines()[-1]
    tests = read(README).split("## Tests\n", 1)[1]
    assert "    .ci/run\n" in tests
    assert f"\n    {ci}\n" in tests
    assert "Chromium" in tests
