"""The Caffe schemas protoaudit reads nets with: BVLC master and the forks whose field numbers clash.

Each schema is a FileDescriptorSet compiled from `proto/` (see proto/build.py) and loaded into a
descriptor pool of its own, so `caffe.NetParameter` can mean BVLC's or a fork's in one process.
"""
import functools
import os
from dataclasses import dataclass

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

HERE = os.path.dirname(os.path.abspath(__file__))

# The forks protoaudit reads, each compiled from proto/forks/NAME.proto, in the order they are
# tried; the text says which Caffe it is in messages. Their layer types are registered with the
# layers (protoaudit.layers.base.register(..., fork=NAME)).
FORKS = {
    "segnet": "caffe-segnet (alexgkendall/caffe-segnet)",
    "ducha": "ducha-aiki's fork (caffenet-benchmark)",
    "ssd": "SSD (weiliu89/caffe, branch ssd)",
}
SCHEMA_NAMES = ("bvlc",) + tuple(FORKS)


def described(name):
    """How messages name a schema: BVLC Caffe, or the fork's own words."""
    return "BVLC Caffe" if name == "bvlc" else FORKS.get(name, name)


@dataclass(frozen=True)
class Schema:
    """One Caffe dialect: its message classes, by their names in caffe.proto."""

    name: str
    pool: descriptor_pool.DescriptorPool

    def message(self, type_name):
        """The message class `caffe.<type_name>` of this schema."""
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(f"caffe.{type_name}"))

    def has_message(self, type_name):
        try:
            self.pool.FindMessageTypeByName(f"caffe.{type_name}")
        except KeyError:
            return False
        return True

    @property
    def NetParameter(self):
        return self.message("NetParameter")

    @property
    def SolverParameter(self):
        return self.message("SolverParameter")

    @property
    def LayerParameter(self):
        return self.message("LayerParameter")


@functools.cache
def load_schema(name):
    """The schema compiled as protoaudit/read/schemas/<name>.desc."""
    with open(os.path.join(HERE, "schemas", f"{name}.desc"), "rb") as f:
        files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for proto in files.file:
        pool.Add(proto)
    return Schema(name, pool)
