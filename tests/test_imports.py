"""Each module a library user may import first imports alone, in a fresh interpreter: the layer
registry imports every layer module, and a layer module that imported the net builder at its top
failed so (a circular import) wherever the builder was imported before the layers."""
import subprocess
import sys

import pytest

FIRST = ["protoaudit.net.build", "protoaudit.read.netspecs", "protoaudit.layers.python_layers",
         "protoaudit.audit", "protoaudit.memory.fit", "protoaudit.keras.audit", "protoaudit"]


@pytest.mark.parametrize("module", FIRST)
def test_the_module_imports_first(module):
    run = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
