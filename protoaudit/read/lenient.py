"""Fields no shipped schema has: read past them where they cannot change what protoaudit counts.

A fork's caffe.proto adds fields that a file of that fork uses. When no schema protoaudit ships
reads a file, it is read again with protobuf's own parser told to skip unknown fields, and each
skipped field is judged by where it sits: a solver's or a net's own settings, a data layer's
shuffling, an `engine` on a layer that allocates the same under every engine cannot change a shape
or a byte, and the audit goes on with them listed as assumptions. Anywhere else a layer's shape
rule could read the field: one refusal names it and both ways out. --strict skips nothing.
"""
import difflib
import re
from typing import NamedTuple

from google.protobuf import text_format

from ..errors import InputError
from . import source_tree, tokens, whose

# Where protoaudit has met each field, in the caffe.proto of the fork that defines it (the words
# name the fork in messages). Fields not listed are said to belong to "a fork".
FIELD_FORKS = {
    ("NetParameter", "richness"): "Cysu's Caffe (Cysu/caffe, dgd_person_reid)",
    ("SolverParameter", "richness"): "yjxiong/caffe (TSN's Caffe)",
    ("SolverParameter", "min_lr"): "Cysu's Caffe (Cysu/caffe, dgd_person_reid)",
    ("SolverParameter", "stagelr"): "Intel Caffe (intel/caffe)",
    ("SolverParameter", "stageiter"): "Intel Caffe (intel/caffe)",
    ("SolverParameter", "engine"): "Intel Caffe (intel/caffe)",
    ("NetParameter", "engine"): "Intel Caffe (intel/caffe)",
    ("NetParameter", "bn_stats_batch_size"): "Intel Caffe (intel/caffe)",
    ("LayerParameter", "engine"): "Intel Caffe (intel/caffe)",
    ("DataParameter", "shuffle"): "lim0606's Caffe (lim0606/caffe, caffe-googlenet-bn)",
    ("VideoDataParameter", "new_length"): "a video fork: yjxiong/caffe (TSN) or C3D v1.1 (facebook/C3D)",
    ("VideoDataParameter", "modality"): "yjxiong/caffe (TSN's Caffe)",
    ("VideoDataParameter", "num_segments"): "yjxiong/caffe (TSN's Caffe)",
    ("LayerParameter", "center_loss_param"): "caffe-face (ydwen/caffe-face)",
    ("SolverParameter", "device_id"): "yjxiong/caffe (TSN's Caffe), where it is a list",
    ("ParamSpec", "param_propagate_down"): "longriyao/caffe_GAN (its net.cpp sets whether the parameter gets "
                                           "a gradient from it, over lr_mult)",
    ("RecurrentParameter", "clipping_threshold"): "a recurrent fork's (junhyukoh/caffe-lstm's LstmParameter has it: "
                                                  "a bound on the gradient's values)",
    **{(message, field): "video-caffe (chuckcho/video-caffe), whose NdConvolution and NdPooling read it"
       for message in ("ConvolutionParameter", "PoolingParameter") for field in ("kernel_shape", "pad_shape",
                                                                                "stride_shape")},
}

# Layer types whose memory protoaudit sizes differently by engine (cuDNN or Caffe's own): an
# `engine` field Caffe's schema lacks is read past only on the others.
ENGINE_SIZED = frozenset(("Convolution", "Deconvolution", "Pooling", "LRN", "Softmax", "SoftmaxWithLoss", "ReLU",
                          "Sigmoid", "TanH"))
# Messages none of whose fields changes a shape or a byte: a filler fills parameters at setup. A field of
# one that no schema has is read past even where it looks like a misspelling (said so in the assumption).
NEVER_SIZES = frozenset(("FillerParameter",))
# Fields that clip the values a layer computes (an LSTM's gradient), never sizing anything.
_VALUE_BOUNDS = frozenset(("clipping_threshold",))
# A data layer's field that says in what order records are read, never what a record holds.
_ORDER_FIELDS = re.compile(r"^(shuffle\w*|seed)$")


class Skipped(NamedTuple):
    """A field no shipped schema has, read past: where it is, and why that cannot change a figure
    (None where a layer's shape could depend on it: then only --input for its tops lets it be)."""

    field: str
    message: str  # the message type holding it, "DataParameter"
    line: int
    layer: str  # the layer's name, "" outside a layer
    layer_type: str
    tops: tuple  # the tops --input must give for it to be read past (a data layer's first)
    why: str
    near: str = ""  # a field of that message whose name is close: a misspelling, then
    file: str = ""  # the file it is in
    elsewhere: tuple = ()  # the shipped schemas that have the field, where the one chosen for its other fields has not
    reader: str = ""  # (then) how messages name that chosen schema

    @property
    def fork(self):
        known = FIELD_FORKS.get((self.message, self.field))
        if known is None and self.message == "LayerParameter":  # a layer parameter of a fork's layer type
            known = whose.FIELDS.get(self.field)
        if known:
            return f"probably a field of {known}"
        return f"did you mean '{self.near}'? else it is a fork's field" if self.near else "a fork's field"

    def assumption(self):
        """(layer, what, override) as an audit's assumptions list them."""
        why = self.why or f"the {self.layer_type} layer's tops were given with --input instead"
        return (self.layer or "(file)",
                f"{self.message}.{self.field} ({self.file}:{self.line}) was read past: no caffe.proto protoaudit "
                f"ships reads it as written ({self.fork}); {why}",
                "--caffe-proto FILE (that fork's caffe.proto) reads the field too; --strict refuses the file")

    def refusal(self, path):
        """The one message for a field a layer's shape could depend on, with both ways out: the fork's
        caffe.proto (the one of the Caffe source tree the net's repository holds, where it holds one)."""
        give = " ".join(f"--input {t}=NxCxHxW" for t in self.tops)  # (what a data layer's first top takes)
        proto = source_tree.caffe_proto(path)
        way = (f"give the caffe.proto of the Caffe source tree this net's repository holds: --caffe-proto {proto}"
               if proto else "give that fork's caffe.proto with --caffe-proto FILE")
        if self.elsewhere:
            return InputError(
                f'no caffe.proto protoaudit ships reads this whole file: field "{self.field}" of {self.message} is '
                f"{self.elsewhere[0]}'s" + (f" (and {len(self.elsewhere) - 1} other forks')" if len(self.elsewhere) > 1
                                             else "")
                + f", and the file's other fields are {self.reader}'s, which lacks "
                f"it; this {self.layer_type} layer's shape or memory could depend on it (the file is probably "
                "another fork's, with fields of both)",
                file=path, line=self.line, layer=self.layer or None,
                fix=way + (f", or give the layer's tops: {give}" if give else ""))
        return InputError(
            f'field "{self.field}" of {self.message} is in no caffe.proto protoaudit ships ({self.fork}), and '
            + (f"this {self.layer_type} layer's shape or memory could depend on it" if self.why is None else
               "it may be a misspelling"),
            file=path, line=self.line, layer=self.layer or None,
            fix=way + (f", or give the layer's tops: {give}" if give else ""))


def parse_skipping(text, message, refused=frozenset()):
    """`message` read from `text` (a tokens.Text) past unknown fields: [(field, message type,
    line)], or None when the text does not read even so, skips a top field named in `refused`, or
    this protobuf cannot skip."""
    try:
        return tokens.parse_skipping(text, message, refused)
    except (text_format.ParseError, RecursionError):
        return None


_ID_LIST = re.compile(r"^(\s*device_id\s*:\s*)(\[[\d\s,]*\])", re.MULTILINE)


def without_id_lists(text):
    """(text, Skipped...) with a solver's list-valued `device_id: [0,1,2,3]` (yjxiong/caffe's, a
    repeated field there; one int in every other caffe.proto) blanked out; None where none is."""
    found = list(_ID_LIST.finditer(text))
    if not found:
        return None
    why = "which GPUs run it: each GPU of a multi-GPU run holds what is counted here for one"
    skipped = tuple(Skipped("device_id", "SolverParameter", text.count("\n", 0, m.start()) + 1, "", "", (), why)
                    for m in found)
    return _ID_LIST.sub(lambda m: m.group(1) + "0" + " " * (len(m.group(2)) - 1), text), skipped


def extends(field, names):
    """Whether `field` is one of `names` with words added before or after it (a fork's mean_value_file,
    beside mean_value): a field of its own, not a misspelling."""
    return any((field.startswith(name + "_") or field.endswith("_" + name)) and len(field) > len(name) + 1
               for name in names)  # (an underscore alone added is a slip: param_str_)


def judged(field, message, line, layer, layer_type, tops, names):
    """The Skipped for a field read past, with why it cannot change a shape or a byte (None: it
    could); `names` are the fields its message has, for a misspelling (which is refused too)."""
    near = "" if (message, field) in FIELD_FORKS or extends(field, names) else next(
        iter(difflib.get_close_matches(field, names, 1, 0.8)), "")
    if message == "SolverParameter":
        why = "a solver setting: the solver's memory is its history, which its type sizes"
    elif message == "NetParameter":
        why = "a net-wide setting: every shape and byte is worked out from the layers and the inputs"
    elif message == "LayerParameter" and field == "engine" and layer_type and layer_type not in ENGINE_SIZED:
        why = f"a {layer_type} layer allocates the same under every engine"
    elif message in NEVER_SIZES:
        why = "a filler's setting: it fills the parameters at setup, and never shapes them"
    elif message.endswith("DataParameter") and _ORDER_FIELDS.match(field):
        why = "it orders the records a data layer reads, never what a record holds"
    elif field in _VALUE_BOUNDS:
        why = "it bounds values a pass computes, never a shape or a buffer"
    else:
        why = None
    if why and field == "richness":
        why += "; the cuDNN figure is BVLC Caffe's own workspace choice"
    return Skipped(field, message, line, layer, layer_type, tuple(tops), why, near)
