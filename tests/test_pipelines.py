"""protoaudit in pipelines, tried as a team would use it: the pre-commit hook (a repository of nets
whose .pre-commit-config.yaml names this one, and its entry run exactly as .pre-commit-hooks.yaml
says), the review
workflow's shell step (docs/protoaudit-review.yml) on a repository with two commits of a net, and
`protoaudit --version`.

Figures, on the card (the buffers and cudaMalloc's pages; test_golden.py's hand derivation,
`on_card`): seed 001's old net needs 7.12 GiB at batch 4 (fits 11 GiB and 8 GiB), the new one 8.72
GiB at batch 1 (fits 11 GiB, not 8 GiB); at batch 3 the new one needs 12 GiB (its buffers 11.9 GiB:
test_sweep.py's hand figures, 7.05 GiB fixed plus 1.62 GiB per image), more than 11 GiB.
"""
import importlib.metadata
import os
import re
import shutil
import stat
import subprocess
import sys

import pytest

from conftest import ROOT, run_protoaudit

import protoaudit

yaml = pytest.importorskip("yaml", reason="PyYAML reads the hook and workflow files (pip install '.[test]')")

OLD = os.path.join(ROOT, "samples", "segnet_seed001_old.prototxt")
NEW = os.path.join(ROOT, "samples", "segnet_seed001_new.prototxt")
HOOKS = os.path.join(ROOT, ".pre-commit-hooks.yaml")
WORKFLOW = os.path.join(ROOT, "docs", "protoaudit-review.yml")
BAD = 'name: "x"\nlayer { name: "bad" type: "Convolution" bottom: "nope" top: "y" }\n'


def at_batch(text, n):
    """Seed 001's new net with its DummyData batch set to n (the data's and the label's first dim)."""
    out = text.replace("dim: 1\n      dim: 4\n", f"dim: {n}\n      dim: 4\n", 1)
    out = out.replace("dim: 1\n      dim: 1\n", f"dim: {n}\n      dim: 1\n", 1)
    assert out.count(f"dim: {n}\n      dim: 4\n") == out.count(f"dim: {n}\n      dim: 1\n") == 1
    return out


def git(cwd, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.invalid")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def tools(tmp_path):
    """A bin folder with `protoaudit` and `protoaudit-check` as pip installs them, running this tree:
    the installed console scripts when they sit beside this Python, else the modules they call."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name, module in (("protoaudit", "protoaudit"), ("protoaudit-check", "protoaudit.check")):
        installed = os.path.join(os.path.dirname(sys.executable), name)
        script = folder / name
        if os.path.exists(installed):
            script.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{installed}" "$@"\n')
        else:
            script.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m {module} "$@"\n')
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(folder)


# --- --version ------------------------------------------------------------------------------------
def test_version_is_the_packages():
    r = run_protoaudit("--version")
    assert r.returncode == 0 and r.stdout == f"protoaudit {protoaudit.__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+", protoaudit.__version__)
    try:  # an installed protoaudit says the same version
        assert importlib.metadata.version("protoaudit") == protoaudit.__version__
    except importlib.metadata.PackageNotFoundError:
        pass


# --- the pre-commit hook ---------------------------------------------------------------------------
def hook():
    with open(HOOKS, encoding="utf-8") as f:
        hooks = yaml.safe_load(f)
    assert [h["id"] for h in hooks] == ["protoaudit"]
    return hooks[0]


def test_hook_file_names_the_console_script_on_prototxt_files():
    h = hook()
    assert h["language"] == "python" and h["entry"] == "protoaudit-check" and h["args"] == ["--gpu-mem", "11G"]
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        assert 'protoaudit-check = "protoaudit.check:main"' in f.read()
    for name, matched in (("models/train_val.prototxt", True), ("deploy.prototxt", True),
                          ("weights.caffemodel", False), ("notes.md", False)):
        assert bool(re.search(h["files"], name)) is matched, name


def run_entry(tmp_path, files, cwd):
    """The hook as pre-commit runs it: entry, then args, then the changed files."""
    h = hook()
    env = dict(os.environ, PATH=tools(tmp_path) + os.pathsep + os.environ["PATH"])
    return subprocess.run([*h["entry"].split(), *h["args"], *files], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_hook_entry_passes_nets_that_fit_and_fails_one_that_does_not(tmp_path):
    nets = tmp_path / "nets"
    nets.mkdir()
    shutil.copy(OLD, nets / "old.prototxt")
    shutil.copy(NEW, nets / "new.prototxt")
    r = run_entry(tmp_path, ["old.prototxt", "new.prototxt"], nets)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("old.prototxt: FITS a 11 GiB card: 7.12 GiB needed")
    assert lines[1].startswith("new.prototxt: FITS a 11 GiB card: 8.72 GiB needed")
    (nets / "new_b3.prototxt").write_text(at_batch(NEW_TEXT(), 3))
    r = run_entry(tmp_path, ["old.prototxt", "new_b3.prototxt"], nets)
    assert r.returncode == 1
    assert r.stdout.splitlines()[1].startswith("new_b3.prototxt: DOES NOT FIT a 11 GiB card: 12 GiB needed")
    assert "Largest batch that fits: 2 (audited at batch 3)." in r.stdout


def test_hook_entry_fails_on_bad_input_with_one_line_per_file(tmp_path):
    nets = tmp_path / "nets"
    nets.mkdir()
    shutil.copy(OLD, nets / "old.prototxt")
    (nets / "bad.prototxt").write_text(BAD)
    r = run_entry(tmp_path, ["bad.prototxt", "old.prototxt"], nets)
    assert r.returncode == 2
    assert r.stderr.splitlines() == [r.stderr.strip()] and r.stderr.startswith(
        "bad.prototxt: bad input: bad.prototxt:2: layer 'bad': unknown bottom blob 'nope'")
    assert r.stdout.startswith("old.prototxt: FITS")  # the other files are still audited


def NEW_TEXT():
    with open(NEW, encoding="utf-8") as f:
        return f.read()


def hook_repository(tmp_path):
    """This tree as a hook repository at a commit: a clone of it with the working tree's files
    (tracked, and untracked but not ignored) committed on top, as pre-commit try-repo does."""
    shadow = tmp_path / "hooks"
    git(tmp_path, "clone", "-q", ROOT, str(shadow))
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        source, target = os.path.join(ROOT, name), shadow / name
        if os.path.lexists(target) and not os.path.lexists(source):
            os.remove(target)
        elif os.path.isfile(source):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    git(shadow, "add", "-A")
    git(shadow, "commit", "-q", "--allow-empty", "-m", "the working tree")
    return shadow, git(shadow, "rev-parse", "HEAD").strip()


def test_pre_commit_runs_the_hook_from_a_config(tmp_path):
    """A repository of nets whose .pre-commit-config.yaml names this repository's hook, as the file's
    header says: pre-commit builds the hook's own environment from the repository (pip, from the
    package index) once, then runs it on the files given."""
    if shutil.which("pre-commit") is None and not os.path.exists(os.path.join(os.path.dirname(sys.executable),
                                                                              "pre-commit")):
        pytest.skip("pre-commit is not installed (pip install '.[test]')")
    if subprocess.run(["git", "rev-parse", "--git-dir"], cwd=ROOT, capture_output=True).returncode != 0:
        pytest.skip("this tree is not a git repository: pre-commit needs one")
    pre_commit = shutil.which("pre-commit", path=os.path.dirname(sys.executable)) or shutil.which("pre-commit")
    hooks, rev = hook_repository(tmp_path)
    repo = tmp_path / "nets"
    repo.mkdir()
    git(repo, "init", "-q")
    shutil.copy(OLD, repo / "old.prototxt")
    (repo / "big.prototxt").write_text(at_batch(NEW_TEXT(), 3))
    (repo / "notes.txt").write_text("not a net\n")
    (repo / ".pre-commit-config.yaml").write_text(f"repos:\n- repo: {hooks}\n  rev: {rev}\n  hooks:\n  - id: protoaudit\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "nets")
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "cache"))
    env.pop("PYTHONPATH", None)
    run = lambda *files: subprocess.run(  # noqa: E731
        [pre_commit, "run", "--files", *files], cwd=repo, env=env, capture_output=True, text=True, timeout=900)
    r = run("old.prototxt", "notes.txt")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"protoaudit \(does each changed Caffe net fit the card\?\)\.+Passed", r.stdout)
    r = run("old.prototxt", "big.prototxt")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Failed" in r.stdout and "big.prototxt: DOES NOT FIT a 11 GiB card: 12 GiB needed" in r.stdout


# --- the review workflow ----------------------------------------------------------------------------
def workflow_step(step_id):
    with open(WORKFLOW, encoding="utf-8") as f:
        flow = yaml.safe_load(f)
    steps = [s for job in flow["jobs"].values() for s in job["steps"]]
    return next(s for s in steps if s.get("id") == step_id), steps


def test_workflow_runs_on_pull_requests_that_change_nets_and_posts_one_comment():
    with open(WORKFLOW, encoding="utf-8") as f:
        flow = yaml.safe_load(f)
    on = flow[True] if True in flow else flow["on"]  # YAML 1.1 reads the key `on` as true
    assert on["pull_request"]["paths"] == ["**.prototxt"]
    report, steps = workflow_step("report")
    post = next(s for s in steps if s.get("name") == "Post the comment")
    assert "gh pr comment" in post["run"] and "--body-file protoaudit-comment.md" in post["run"]
    assert report["env"]["COMMENT"] == "protoaudit-comment.md"
    # GitHub's values come in through env, never pasted into the script
    assert "${{" not in report["run"] and "${{" not in post["run"]


def test_workflow_report_step_on_two_commits_of_a_net(tmp_path):
    report, _ = workflow_step("report")
    repo = tmp_path / "nets"
    (repo / "models").mkdir(parents=True)
    git(repo, "init", "-q")
    shutil.copy(OLD, repo / "models" / "segnet.prototxt")
    (repo / "models" / "gone.prototxt").write_text(BAD)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "the old net")
    base = git(repo, "rev-parse", "HEAD").strip()
    shutil.copy(NEW, repo / "models" / "segnet.prototxt")  # the net changes
    (repo / "models" / "added.prototxt").write_text(at_batch(NEW_TEXT(), 2))  # a new net
    (repo / "models" / "broken.prototxt").write_text(BAD)  # a new file that is no net
    os.remove(repo / "models" / "gone.prototxt")  # a removed net is not audited
    (repo / "README.md").write_text("not a net\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the new net")
    outputs = tmp_path / "github_output"
    env = dict(os.environ)
    env.update({k: str(v) for k, v in report["env"].items()})  # the step's own settings (COMMENT, GPU_MEM)
    # then what GitHub fills in: the base commit, the outputs file; and an 8 GiB card
    env.update(BASE_SHA=base, GPU_MEM="8G", GITHUB_OUTPUT=str(outputs),
               PATH=tools(tmp_path) + os.pathsep + os.environ["PATH"])
    # as GitHub runs a step: bash --noprofile --norc -eo pipefail FILE
    script = tmp_path / "step.sh"
    script.write_text(report["run"])
    r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=repo, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    comment = (repo / "protoaudit-comment.md").read_text(encoding="utf-8")
    assert r.stdout == comment  # the log holds the whole report
    sections = re.split(r"^### ", comment, flags=re.M)
    assert sections[0] == "## protoaudit: memory of the changed nets\n\n"
    titles = [s.splitlines()[0] for s in sections[1:]]
    assert titles == ["models/added.prototxt", "models/broken.prototxt", "models/segnet.prototxt"]  # git's order
    added, broken, changed = sections[1:]
    assert "**protoaudit** `models/added.prototxt`" in added and "**DOES NOT FIT a 8 GiB card" in added
    assert broken.splitlines()[2].startswith(
        "protoaudit could not audit it: protoaudit: models/broken.prototxt:2: layer 'bad': unknown bottom blob")
    assert "**protoaudit diff**" in changed
    assert "- A: `.protoaudit-base/models/segnet.prototxt`" in changed and "- B: `models/segnet.prototxt`" in changed
    assert "- B needs 1.58 GiB more than A: 8.67 GiB against 7.09 GiB." in changed
    assert "- A: **FITS a 8 GiB card" in changed and "- B: **DOES NOT FIT a 8 GiB card" in changed
    assert outputs.read_text().splitlines() == ["nets=3", "status=2"]  # a bad input is the worst
    assert not (repo / ".protoaudit-base").exists()  # the base tree is removed again
    assert git(repo, "worktree", "list").count("\n") == 1
