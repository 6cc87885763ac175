"""The table of modules that hold forks' layers only (protoaudit.layers.base.FORK_MODULES), which are
imported when a net of one of their forks is in play, against what the modules register: a fork's
registry is whole whenever it is asked for, and no module of forks' layers is imported for every net."""
import importlib
import os

from protoaudit import layers
from protoaudit.layers.base import FORK_MODULES, FORK_REGISTRY, REGISTRY

FOLDER = os.path.dirname(layers.__file__)


def registered_for():
    """Module name (in protoaudit.layers) -> the forks its classes are registered for (None: BVLC),
    with every module of the folder imported."""
    for name in os.listdir(FOLDER):
        if name.endswith(".py") and name != "__init__.py":
            importlib.import_module(f"protoaudit.layers.{name[:-3]}")
    found = {}
    for cls in REGISTRY.values():
        found.setdefault(cls.__module__.rsplit(".", 1)[1], set()).add(None)
    for fork, table in FORK_REGISTRY.items():
        for cls in table.values():
            found.setdefault(cls.__module__.rsplit(".", 1)[1], set()).add(fork)
    return found


def test_each_fork_module_registers_for_the_forks_the_table_names():
    found = registered_for()
    assert {m: found.get(m) for m in FORK_MODULES} == {m: set(forks) for m, forks in FORK_MODULES.items()}


def test_every_module_of_forks_layers_only_is_in_the_table():
    assert sorted(m for m, forks in registered_for().items() if None not in forks and m not in FORK_MODULES) == []


def test_a_fork_registry_is_whole_when_asked_for_in_a_fresh_process():
    """Asked for one fork in a new interpreter (no other fork's modules imported), fork_layers gives
    what it gives with every module imported."""
    import subprocess
    import sys

    registered_for()
    whole = {f: sorted(layers.fork_layers(f)) for f in FORK_REGISTRY}
    for fork, types in whole.items():
        out = subprocess.run([sys.executable, "-c", "import sys; from protoaudit.layers import fork_layers; "
                              "print(' '.join(sorted(fork_layers(sys.argv[1]))))", fork],
                             capture_output=True, text=True, check=True).stdout.split()
        assert out == types, fork
