"""Shared fixtures: the test data folder, a way to run the `protoaudit` command as users do, and
small helpers the layer and fork tests share (a net written to a file and built, bytes by layer,
the corpus nets and samples audited as a new user runs them)."""
import contextlib
import glob
import io
import os
import signal
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")
# every corpus net and sample, for the tests that hold each one to a rule
CORPUS_AND_SAMPLES = sorted(glob.glob(os.path.join(DATA, "corpus", "nets", "*.prototxt"))
                            + glob.glob(os.path.join(ROOT, "samples", "*.prototxt")))


def audited(path, **options):
    """protoaudit.audit(path, **options), or None where it refuses the file (no flags can say what
    a dataset that is absent would)."""
    import protoaudit
    from protoaudit.errors import InputError

    try:
        return protoaudit.audit(path, **options)
    except InputError:
        return None


def run_protoaudit(*args, cwd=None, timeout=60):
    """`python -m protoaudit ARGS` in a subprocess (this tree's package first on the path), so exit
    status, stdout and stderr are exactly what a user sees."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "protoaudit", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd or ROOT, env=env)


def run_in_process(*args, cwd=None, timeout=None):
    """The same command, status, stdout and stderr as run_protoaudit, run in this process: for the
    tests about what the command prints and returns rather than about the process (a fresh Python
    per call is most of their time). A run past `timeout` seconds raises TimeoutExpired, as
    run_protoaudit's does."""
    from protoaudit.cli import main

    out, err, here = io.StringIO(), io.StringIO(), os.getcwd()
    sigpipe = signal.getsignal(signal.SIGPIPE) if hasattr(signal, "SIGPIPE") else None
    command = ["protoaudit", *map(str, args)]

    def too_long(signum, frame):
        raise subprocess.TimeoutExpired(command, timeout)

    alarm = signal.signal(signal.SIGALRM, too_long) if timeout else None
    os.chdir(cwd or ROOT)
    try:
        if timeout:
            signal.setitimer(signal.ITIMER_REAL, timeout)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(command[1:])
            except SystemExit as e:  # argparse: --help, --version, a bad flag
                status = e.code if isinstance(e.code, int) else int(e.code is not None)
    finally:
        if timeout:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, alarm)
        os.chdir(here)
        if sigpipe is not None:  # main() lets SIGPIPE end the command, as Unix tools do; not pytest
            signal.signal(signal.SIGPIPE, sigpipe)
    return subprocess.CompletedProcess(command, status, out.getvalue(), err.getvalue())


@pytest.fixture(autouse=True)
def _sigpipe_ignored():
    """protoaudit's main() lets SIGPIPE end the command, as Unix tools do; a test that calls it in
    this process must not leave that on for pytest, where a pipe closed under a test's writer thread
    would end the whole run without a word."""
    yield
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)


@pytest.fixture
def protoaudit():
    """The command as run_in_process runs it (run_protoaudit is for the tests about the process)."""
    return run_in_process


@pytest.fixture
def data_dir():
    return DATA


def build_text(tmp_path, text, **options):
    """The first net protoaudit builds from `text` written to a prototxt (build_nets' options)."""
    from protoaudit.audit import build_nets

    path = tmp_path / "net.prototxt"
    path.write_text(text)
    return build_nets(str(path), **options)[0]


def tops(net, layer):
    """A layer's top shapes, as a list."""
    return list(net.layer(layer).top_shapes)


def layer_buffers(net, layer, mode="gpu", engine="caffe"):
    """{(name, device): bytes} of what a layer itself holds: its buffers, by their names in its source
    (no blob or parameter of the net)."""
    from protoaudit.memory.buffers import net_buffers

    return {(b.owner[len(layer) + 1:], b.device): b.bytes for b in net_buffers(net, mode=mode, engine=engine)
            if b.layer == layer and b.owner.startswith(layer + ".") and not b.kind.startswith("param")}


def touched(net, layer, mode="gpu"):
    """{(what, index, part, stage, device)} a layer touches of its bottoms and tops."""
    from protoaudit.memory.buffers import layer_touches

    return {(t.what, t.index, t.part, t.stage, t.device) for t in layer_touches(net.layer(layer), mode, "caffe")
            if t.what in ("bottom", "top")}


def by_layer(buffers):
    """{layer: {setup, forward, backward: bytes}}: what each layer first touches, by pass."""
    table = {}
    for b in buffers:
        row = table.setdefault(b.layer, {"setup": 0, "forward": 0, "backward": 0})
        row[b.touch] += b.bytes
    return table


# The files whose tests take minutes (the fuzzer, the 100,000-layer and million-entry cases, the
# pre-commit hook's own environment): collected first, so that with `-n auto --dist loadfile` they
# start at once beside the rest instead of ending the run alone. pytest-xdist would send the files
# with the most tests first (the fuzzer, one test of over a minute, last): its documented
# --no-loadscope-reorder keeps the collection's order, and is set here so that the README's
# command needs no more flags.
LONG_FILES = ("test_fuzz.py", "test_hostile.py", "test_scale.py", "test_pipelines.py")


def pytest_configure(config):
    if getattr(config.option, "loadscopereorder", None):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.path.name not in LONG_FILES)
