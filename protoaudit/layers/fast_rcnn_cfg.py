"""py-faster-rcnn's configuration as the net's repository sets it: lib/fast_rcnn/config.py, read, never run.

py-faster-rcnn's Python layers size their tops from `cfg` (fast_rcnn.config), and the repositories
built on it edit its defaults in place (`__C.TRAIN.SCALES = (768,)`, `__C.TRAIN.BATCH_SIZE = 32`).
The module the net's layers import is found as their own modules are (python_source.module_file);
its top-level `__C.SECTION.KEY = value` lines with a plain value are taken, the last one of a key
winning, as Python runs them; a value only the running code has leaves py-faster-rcnn's. The YAML a
training script may pass with --cfg is not known here.
"""
import ast
import os
import re

from .python_source import module_file, read_lines

# rbgirshick/py-faster-rcnn lib/fast_rcnn/config.py: the values a repository's file starts from
DEFAULTS = {
    ("TRAIN", "SCALES"): (600,),  # :38, the shortest side
    ("TRAIN", "MAX_SIZE"): 1000,  # :41, the longest side at most
    ("TRAIN", "IMS_PER_BATCH"): 2,  # :44 (faster_rcnn_end2end.yml sets 1 for an RPN net)
    ("TRAIN", "BATCH_SIZE"): 128,  # :47, RoIs per minibatch
    ("TRAIN", "FG_FRACTION"): 0.25,  # :50
    ("TRAIN", "RPN_POST_NMS_TOP_N"): 2000,  # :116
    ("TEST", "RPN_POST_NMS_TOP_N"): 300,  # :162
}
_LINE = re.compile(r"^__C\.(TRAIN|TEST)\.(\w+)\s*=\s*(.+?)\s*$")


class Config:
    """The values the repository's config.py gives (`where`: its path, None where there is none)."""

    def __init__(self, values, where):
        self.values = values
        self.where = where

    def get(self, section, key, default=None):
        return self.values.get((section, key), DEFAULTS.get((section, key), default))

    def count(self, section, key):
        """A size the layers take as a whole number: the repository's where it is a positive integer,
        else py-faster-rcnn's (None where it has none)."""
        value = self.values.get((section, key))
        ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
        return value if ok else DEFAULTS.get((section, key))

    def fraction(self, section, key):
        """A share in (0, 1]: the repository's where it is one, else py-faster-rcnn's."""
        value = self.values.get((section, key))
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1
        return value if ok else DEFAULTS.get((section, key))

    def changed(self, *keys):
        """Whether the repository gives any of `keys` ((section, key)) another value than py-faster-rcnn's."""
        return any(k in self.values and self.values[k] != DEFAULTS.get(k) for k in keys)

    def said(self, net_path):
        """The file, as the user finds it from the net's folder."""
        return os.path.relpath(self.where, os.path.dirname(os.path.abspath(net_path))) if net_path else self.where


def of_net(ctx):
    """The configuration the net's py-faster-rcnn layers import: its repository's, else py-faster-rcnn's."""
    path = module_file("fast_rcnn.config", ctx.path, ctx.root) if ctx.path else None
    lines = read_lines(path) if path else None
    if lines is None:
        return Config({}, None)
    values = {}
    for line in lines:
        m = _LINE.match(line.split("#", 1)[0])
        if not m:
            continue
        try:
            value = ast.literal_eval(m.group(3))
        except (ValueError, SyntaxError):
            values.pop((m.group(1), m.group(2)), None)  # a value only the running code has
            continue
        values[(m.group(1), m.group(2))] = value
    return Config(values, path)
