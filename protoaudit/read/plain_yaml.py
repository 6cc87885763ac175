"""YAML as Python layers read it (`yaml.load(self.param_str_)`), built by a loader that makes plain
values only.

PyYAML's full loader, which py-faster-rcnn's layers call, also builds `!!python/tuple [2, 4, 8]`
(the scales of affordance-net's anchor layers). The safe loader refuses that tag; this one makes the
tuple, and still refuses every tag that would import or call anything.
"""
import yaml


class _PlainLoader(yaml.SafeLoader):
    pass


_PlainLoader.add_constructor("tag:yaml.org,2002:python/tuple",
                             lambda loader, node: tuple(loader.construct_sequence(node)))


def load(text):
    """The value of a YAML text; yaml.YAMLError where it is not plain YAML."""
    return yaml.load(text, Loader=_PlainLoader)  # noqa: S506 (a SafeLoader that also makes tuples)
