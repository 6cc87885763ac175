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
    "enet": "caffe-enet (TimoSaemann/caffe-enet)",
    "deeplab_v2": "DeepLab v2 (deeplab-public-ver2)",
    "pspnet": "PSPNet's Caffe (hszhao/PSPNet)",
    "deeplab_v1": "DeepLab v1 (DeepLab-Context)",
}
SCHEMA_NAMES = ("bvlc",) + tuple(FORKS)

# Forks grown from another fork whose layers they keep: caffe-enet is caffe-segnet's BN, Upsample and
# DenseImageData ported to a 2017 BVLC Caffe, PSPNet's Caffe is deeplab-public-ver2 plus its BN
# layer (their sources are the same files elsewhere). A file both read is the ancestor's: the
# descendant is needed only for the fields and layer types it adds.
DESCENDS_FROM = {"enet": "segnet", "pspnet": "deeplab_v2"}


def described(name):
    """How messages name a schema: BVLC Caffe, or the fork's own words."""
    return "BVLC Caffe" if name == "bvlc" else FORKS.get(name, name)


@dataclass(frozen=True)
class Schema:
    """One Caffe dialect: its message classes, by their names in caffe.proto."""

    name: str
    pool: descriptor_pool.DescriptorPool
    predates_v2: bool = False  # its caffe.proto has V1 layers only (the V2 ones are protoaudit's, _add_v2_layers)

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


def ancestors(name):
    """The forks `name` descends from, nearest first."""
    found = []
    while name in DESCENDS_FROM:
        name = DESCENDS_FROM[name]
        found.append(name)
    return found


@functools.cache
def load_schema(name):
    """The schema compiled as protoaudit/read/schemas/<name>.desc."""
    with open(os.path.join(HERE, "schemas", f"{name}.desc"), "rb") as f:
        files = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    old = False
    for proto in files.file:
        if name != "bvlc" and _predates_v2(proto):
            _add_v2_layers(proto)
            old = True
        pool.Add(proto)
    return Schema(name, pool, old)


def _predates_v2(proto):
    """A caffe.proto from before V2 layers (late 2014): its LayerParameter is the V1 one."""
    net = next((m for m in proto.message_type if m.name == "NetParameter"), None)
    return net is not None and not any(f.name == "layer" for f in net.field)


def _add_v2_layers(proto):
    """Give a pre-V2 fork's schema what Caffe's V1-to-V2 upgrade writes into, as BVLC's schema has
    it: its LayerParameter is renamed V1LayerParameter (the text reads as before), and a V2
    LayerParameter is added with BVLC's common fields (name, type, bottom, top, phase, loss_weight,
    param, blobs, propagate_down, include, exclude) and every *_param message field of the fork's
    own V1 layer, so the fork's parameters (DeepLab v1's conv `hole`, interp_param...) travel along.
    NetParameter gets BVLC's `layer` field (100). Nothing of the fork's own text format changes."""
    bvlc = {m.name: m for m in _bvlc_file().message_type}
    old = ".caffe.LayerParameter"
    for message in _all_messages(proto.message_type):
        for f in message.field:
            if f.type_name == old or f.type_name.startswith(old + "."):
                f.type_name = ".caffe.V1LayerParameter" + f.type_name[len(old):]
    v1 = next(m for m in proto.message_type if m.name == "LayerParameter")
    v1.name = "V1LayerParameter"
    if not any(m.name == "ParamSpec" for m in proto.message_type):
        proto.message_type.add().CopyFrom(bvlc["ParamSpec"])
    layer = proto.message_type.add()
    layer.name = "LayerParameter"
    for f in bvlc["LayerParameter"].field:
        if f.name in V2_COMMON_FIELDS:
            layer.field.add().CopyFrom(f)
    for number, f in enumerate((f for f in v1.field if f.name.endswith("_param") and f.type_name), start=100):
        added = layer.field.add()
        added.CopyFrom(f)
        added.number = number
    net = next(m for m in proto.message_type if m.name == "NetParameter")
    net.field.add().CopyFrom(next(f for f in bvlc["NetParameter"].field if f.name == "layer"))


V2_COMMON_FIELDS = ("name", "type", "bottom", "top", "phase", "loss_weight", "param", "blobs", "propagate_down",
                    "include", "exclude")


def _all_messages(messages):
    for m in messages:
        yield m
        yield from _all_messages(m.nested_type)


@functools.cache
def _bvlc_file():
    with open(os.path.join(HERE, "schemas", "bvlc.desc"), "rb") as f:
        return descriptor_pb2.FileDescriptorSet.FromString(f.read()).file[0]
