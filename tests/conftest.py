"""Shared fixtures: the test data folder and a way to run the `protoaudit` command as users do."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data")


def run_protoaudit(*args, cwd=None, timeout=60):
    """`python -m protoaudit ARGS` in a subprocess (this tree's package first on the path), so exit
    status, stdout and stderr are exactly what a user sees."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "protoaudit", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd or ROOT, env=env)


@pytest.fixture
def protoaudit():
    return run_protoaudit


@pytest.fixture
def data_dir():
    return DATA
