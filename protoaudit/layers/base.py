"""The layer registry: one class per Caffe layer type, holding its blob counts and shape rule.

A layer class is created once per layer of a net, with the layer's (V2) LayerParameter and the
build context, and answers for that layer alone; the net driver (`protoaudit.net.build`) does the rest.
"""
import functools
import importlib
import math
import operator
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from . import touch
from ..errors import InputError

REGISTRY = {}  # BVLC's layer types: type name -> class
# Forks built on mid-2015 Caffe, whose cuDNN code and layer factory are that Caffe's (cuDNN v2 API):
# one forward-only convolution workspace per layer, cuDNN MAX pooling, no cuDNN LRN or Deconvolution.
# (caffe-segnet 344c113 and caffe-fast-rcnn 4115385 have the same cudnn_*_layer and layer_factory files;
# Tsinghua-Tencent 100K's Caffe is BVLC f1cc905 of August 2015, whose cudnn_*_layer files are BVLC's cuDNN R2
# ones of March 2015 and whose layer_factory.cpp differs from them by an #include of July 2015.)
CUDNN_2015_FORKS = frozenset({"segnet", "fastrcnn", "tt100k"})
FORK_REGISTRY = {}  # fork schema name -> {type name -> class}: a fork's own types, or its version of a BVLC type


def register(*type_names, fork=None):
    """Class decorator: the Caffe type names (as in `type: "..."`) the class implements; with
    `fork`, in that fork's nets only (the name of its schema, proto/forks/NAME.proto, or a tuple of
    names for a layer several forks carry unchanged)."""

    def deco(cls):
        forks = (fork,) if fork is None or isinstance(fork, str) else fork
        for one in forks:
            table = REGISTRY if one is None else FORK_REGISTRY.setdefault(one, {})
            for name in type_names:
                if name in table:
                    raise RuntimeError(f"layer type {name} registered twice" + (f" for {one}" if one else ""))
                table[name] = cls
        cls.type_names = type_names
        cls.fork = fork
        return cls

    return deco


def carry(module, fork, *classes):
    """Register, for `fork`, layers it carries from another Caffe: a subclass of each of `classes`
    under the same type names, as a class names one fork (its `fork`), made in `module` (the
    carrying module's __name__, which FORK_MODULES lists). Each sizes a layer as the class it carries
    does, so two forks that carry one class agree on a file both read (Layer.sized_as)."""
    for cls in classes:
        made = type(cls.__name__, (cls,), {"__doc__": cls.__doc__, "__module__": module,
                                          "sized_as": classmethod(lambda _, lp, cls=cls: cls.sized_as(lp))})
        register(*cls.type_names, fork=fork)(made)


# The modules of this folder that register forks' layers only, and the forks they register them
# for: imported when a net of one of those forks is in play (fork_layers), so a BVLC net's run does
# not pay for them. protoaudit.layers imports every other module; tests/test_layer_registry.py
# checks this table against what the modules register.
FORK_MODULES = {
    "deeplab": ("deeplab_v2", "pspnet", "deeplab_v1"),
    "densenet": ("tongcheng",),
    "enet": ("enet",),
    "fastrcnn": ("fastrcnn",),
    "priv": ("priv",),
    "pspnet": ("pspnet",),
    "segnet": ("segnet",),
    "sphereface": ("sphereface", "priv"),
    "ssd": ("ssd",),
    "faceboxes": ("faceboxes",),
    "textboxes": ("textboxes",),
    "refinedet": ("refinedet",),
    "mobilenet_yolo": ("mobilenet_yolo",),
    "shufflenet": ("shufflenet",),
    "caffe_face": ("caffe_face",),
    "rfcn": ("rfcn",),
    "rfcn_matlab": ("rfcn_matlab",),
    "hed": ("hed", "rcf"),
    "rcf": ("rcf",),
    "tsn": ("tsn",),
    "cysu": ("cysu",),
    "deconvnet": ("deconvnet",),
    "happynear": ("happynear",),
    "c3d": ("c3d",),
    "caffe3d": ("caffe3d",),
    "largemargin": ("largemargin",),
    "yolov2": ("yolov2",),
    "general_pooling": ("general_pooling",),
    "caffe_lstm": ("caffe_lstm",),
    "ctpn": ("ctpn",),
    "video_caffe": ("video_caffe",),
    "ssdh": ("ssdh",),
    "video_triplet": ("video_triplet",),
    "triplet_loss": ("triplet_loss",),
    "goodluckcwl": ("goodluckcwl",),
    "ssd_focal": ("ssd_focal",),
    "tl_ssd": ("tl_ssd",),
    "faceboxes_fixed": ("faceboxes_fixed",),
    "caffe_pro": ("caffe_pro",),
    "hsmyy": ("hsmyy",),
    "posenet": ("posenet",),
    "crfrnn": ("crfrnn", "crfrnn_v2"),
    "jfda": ("jfda",),
    "oftenliu": ("oftenliu",),
    "caffe_ocr": ("caffe_ocr",),
    "e2e_face": ("e2e_face",),
    "nvcaffe": ("nvcaffe",),
    "greentea": ("greentea",),
    "affordance_net": ("affordance_net",),
    "flownet": ("flownet", "svs", "liteflownet", "flownet2"),
    "liteflownet": ("liteflownet", "flownet2"),
    "flownet2": ("flownet2",),
    "qnn": ("qnn",),
    "ristretto": ("ristretto",),
    "openvino": ("openvino",),
    "auto_pruning": ("auto_pruning",),
    "drml": ("drml",),
    "picanet": ("picanet",),
    "cascade": ("cascade",),
    "mscnn": ("mscnn",),
    "pgcnn": ("pgcnn",),
    "dyndilation": ("dyndilation",),
    "ggl": ("ggl",),
    "jaanet": ("jaanet",),
    "arl": ("arl",),
    "hrsod": ("hrsod",),
    "davsod": ("davsod",),
    "tt100k": ("tt100k",),
    "glad": ("glad",),
    "jiangqh": ("jiangqh",),
    "mixup": ("mixup",),
    "kcnet": ("kcnet",),
    "drml_ejulio": ("drml_ejulio",),
}
_IMPORTED_FORKS = set()


def fork_layers(fork):
    """{type name: class} of a fork's own layer types and its versions of BVLC's (empty for BVLC),
    the fork's modules imported first. "A+B" is fork A with the types only B has (a net whose
    Caffe added B's layer to A: protoaudit.read.load's _borrowing)."""
    if "+" in fork:
        first, *others = fork.split("+")
        merged = {}
        for other in others:  # only the types BVLC lacks: B's own InnerProduct is not A's (nor reads A's schema)
            merged.update({t: c for t, c in fork_layers(other).items() if t not in REGISTRY})
        return {**merged, **fork_layers(first)}
    if fork not in _IMPORTED_FORKS:
        for module, forks in FORK_MODULES.items():
            if fork in forks:
                importlib.import_module(f"{__package__}.{module}")
        _IMPORTED_FORKS.add(fork)
    return FORK_REGISTRY.get(fork, {})


def _fork_hook(table):
    """`@hook(fork)`: a decorator that keeps the function it decorates in `table`, under the fork."""
    def hook(fork):
        def deco(fn):
            table[fork] = fn
            return fn
        return deco
    return hook


# A fork's Solver::Test check on the outputs of its test nets (fork -> function(net) -> Assumption or
# None), registered by the fork's module with `@solver_test_check(fork)`.
SOLVER_TEST_CHECKS = {}
solver_test_check = _fork_hook(SOLVER_TEST_CHECKS)


def solver_test_stops(net):
    """What the Solver::Test of the fork that read `net` says of it (an Assumption), or None: BVLC's
    and most forks' test any output."""
    fork_layers(net.schema)  # the fork's modules, which register its check
    check = SOLVER_TEST_CHECKS.get(net.schema)
    return check(net) if check is not None else None


# What a fork's Caffe does to every net it runs, beyond its layers (its allocator, a workspace its layers
# share), said as assumptions of each net it reads (fork -> function(the net's layers) -> [Assumption]),
# registered by the fork's module with `@fork_note(fork)`.
FORK_NOTES = {}
fork_note = _fork_hook(FORK_NOTES)


def fork_notes(schema, layers):
    """The Assumptions the fork that read a net says of every net it runs ([] for most)."""
    fork = schema.split("+", 1)[0]
    fork_layers(fork)  # the fork's modules, which register its note
    note = FORK_NOTES.get(fork)
    return note(layers) if note is not None else []


def layer_class(type_name, schema="bvlc"):
    """The class for a layer type in a net read with `schema`: the fork's own, else BVLC's."""
    return fork_layers(schema).get(type_name) or REGISTRY.get(type_name)


def fork_types(fork):
    """The layer types a fork's nets may use that a BVLC net may not, and that make a file the
    fork's (a class with `claims_files = False` is the fork's only when the file says --fork)."""
    return frozenset(t for t, cls in fork_layers(fork).items()
                     if t not in REGISTRY and getattr(cls, "claims_files", True))


class Assumption(NamedTuple):
    """A guess protoaudit made where the file and the dataset do not say, and how to override it."""

    layer: str
    what: str  # "top 'data' has 3 channels (colour images): ..."
    override: str  # the flag that replaces the guess: "--input data=64x1x227x227"


NET_INPUT = "(net input)"  # ShapeOrigin.layer of a net-level input (input: with input_dim or input_shape)


class ShapeOrigin(NamedTuple):
    """Where a data source's top shape came from, for the report."""

    layer: str
    top: str
    shape: tuple
    source: str  # "the layer's parameters", "dataset PATH (first record: ...)", "assumed: ...", "--input"


def one_pixel(top, shape):
    """What a shape written in the file says when it is an image of one pixel (1 to 4 channels, 1 x 1):
    the size OpenPose's deploy nets write for a net reshaped to the image at run time."""
    if len(shape) == 4 and shape[1] <= 4 and shape[2] == shape[3] == 1:
        return (f" (an image of one pixel: the size a deploy net reshaped at run time writes; "
                f"give --input {top}={shape[0]}x{shape[1]}xHxW for the size you run)")
    return ""


class MissingShape(Exception):
    """A layer cannot know a top's shape: the net driver collects every such top of every net and
    asks for them all in one message (`tops`: (name, known dims, None where unknown)). `absent`: the
    dataset that would give them is not on this machine (the audit may then assume an image size),
    or, as a string, why else only the data would give them (DATA_FROM_CODE)."""

    def __init__(self, reason, tops, absent=False):
        super().__init__(reason)
        self.reason = reason
        self.tops = tops
        self.absent = absent


@dataclass
class Context:
    """What a layer may need beyond its own parameters: the net's phase and the user's overrides,
    and where it notes its guesses and its data shapes' origins."""

    phase: str = "TRAIN"  # the layer's phase (Caffe: the net's, unless the layer sets its own)
    inputs: dict = field(default_factory=dict)  # top name -> full shape, from --input
    batch: int = None  # --batch: the first dimension of every data source
    schema: str = "bvlc"
    used_inputs: set = field(default_factory=set)  # which --input names some layer took
    keep_own_batch: bool = False  # a test net beside its train net: --input shapes take the file's batch
    path: str = None  # the net's file
    root: str = None  # --root: the folder Caffe ran in, which dataset paths are relative to
    defines: dict = field(default_factory=dict)  # --define NAME=VALUE: templates, and counts only the data decides
    assumptions: list = field(default_factory=list)  # Assumption
    origins: list = field(default_factory=list)  # ShapeOrigin
    input_sources: dict = field(default_factory=dict)  # top -> where an `inputs` shape came from, if not --input
    logged_layers: dict = field(default_factory=dict)  # layer name -> what Caffe's log says it set up (Logged)
    read: frozenset = frozenset()  # the name of every blob a layer of the net reads (a bottom)
    layers: tuple = ()  # the LayerParameters Net::Init sets up, in order, splits included (PoseNet's Data reads them)
    strict: bool = False  # --strict: a shape a layer would take on a guess is asked for instead
    read_with: str = None  # the name of the user's caffe.proto that read the file (--caffe-proto), if any


class Layer:
    """A Caffe layer type. Subclasses set their blob counts and implement `reshape`."""

    exact_bottoms = None
    min_bottoms = None
    max_bottoms = None
    exact_tops = None
    min_tops = None
    max_tops = None
    auto_top_blobs = False  # Caffe adds anonymous tops up to the required count
    equal_bottoms_tops = False  # as many tops as bottoms (BaseConvolutionLayer's CHECK)
    loss_by_default = False  # LossLayer: top 0 has loss weight 1 unless loss_weight is given
    data_source = False  # has no bottoms and makes a batch: --batch and --input apply
    defines = {}  # --define names the layer reads: name -> what it means
    walks_net = False  # its setup reads the layers that made its bottoms (walk_net): one object per layer
    own_fields = ()  # (message, field) of a fork's own version of the type: never lent to a Caffe that has them
    lent = True  # False: a fork's copy of another's type, for its own nets only (never lent to another reading)
    allows_backward = True  # False: a fork's AllowBackward() (liruoteng/FlowNet's): Net::Init never asks its backward

    def __init__(self, lp, ctx):
        self.lp = View(lp)
        self.ctx = ctx

    # --- the shape rule -------------------------------------------------------------------
    def reshape(self, bottoms):
        """The top shapes (tuples of ints) for these bottom shapes."""
        raise NotImplementedError

    def param_shapes(self, bottoms):
        """The shapes of the layer's parameter blobs (Caffe's `blobs_`), in Caffe's order."""
        return []

    def bottom_for(self, top_index, shape, bottom):
        """The shape of bottom 0 that gives top `top_index` the shape `shape` (bottom 0 is `bottom`
        now), for a top a later layer sizes (a label whose dataset is absent: label_for); None for a
        layer that has no such rule."""
        return None

    def bottoms_for(self, top_index, shape, bottoms, labels):
        """bottom_for for each bottom (`bottoms`: their shapes now; `labels`: whether each is a label
        whose dataset is absent, fitting's kinds): a list with None for a bottom left as it is, or None
        where no shape of the bottoms gives that top."""
        first = self.bottom_for(top_index, shape, bottoms[0])
        return None if first is None else [first] + [None] * (len(bottoms) - 1)

    def fitting(self, bottoms, kinds):
        """For a layer that stops on data whose dataset is absent (`kinds`, per bottom: "image" for a
        data layer's first top, "label" for another, None for a bottom of the net's own), beside its
        other bottoms (`bottoms`: their shapes): (a shape per bottom that lets the layer take it, None
        for a bottom left as it is; how, in words), for a later layer to size again; None for a layer
        that has no such rule."""
        return None

    @classmethod
    def sizes_named(cls, lp):
        """The (height, width) of maps the layer's own fields fix (a decoder's Upsample sizes), one of
        which is the image's where the net's data is absent; () for most."""
        return ()

    def inner_nets(self, node):
        """The nets this layer builds inside itself, as Net::Init logs them within its setup (a
        recurrent layer's unrolled net), for the layer `node`; [] for most."""
        return []

    labels_beside = (1,)  # the bottoms label_for sizes beside the prediction (bottom 0)
    label_either = False  # whether either of the first two bottoms may be the prediction (label_for both ways)

    def label_for(self, prediction):
        """The label (bottom 1) shape this layer takes beside a prediction (bottom 0) of that shape,
        for a loss or accuracy whose label comes from a dataset that is not on this machine (or
        {bottom index: shape} where the bottoms `labels_beside` names take shapes of their own); None
        for a layer that has no such rule."""
        return None

    def walk_net(self, layers, blobs, bottoms):
        """For a class with `walks_net`: the checks of a LayerSetUp that reads the net built so far
        (`layers`: the LayerNodes before this one, `blobs`: the net's Blobs, `bottoms`: this
        layer's bottom blob indices), made before `reshape`, as Caffe sets a layer up before it
        reshapes it. What it finds may be kept on the object (each layer has its own)."""

    def allow_force_backward(self, bottom_index):
        return True

    @classmethod
    def version(cls, lp):
        """The class whose code runs the layer `lp`: its type's, unless the fork ships two versions
        of the type that the file tells apart (caffe-fast-rcnn's SmoothL1Loss of three bottoms)."""
        return cls

    @classmethod
    def has_own_version(cls, schema):
        """Whether a Caffe of `schema` (a Schema) has its own version of this fork's type: its schema
        has the fields the type's own fields name (own_fields), so this class does not size it there."""
        return any(schema.has_message(holder) and field in schema.message(holder).DESCRIPTOR.fields_by_name
                   for holder, field in cls.own_fields)

    @classmethod
    def sized_as(cls, lp):
        """The class that sizes the layer `lp` (a message of this class's schema). A fork's version of
        a BVLC type answers BVLC's class where the layer does not use what the fork changes, so two
        forks that read a file agree on it (protoaudit.read.load)."""
        return cls

    def param_specs(self):
        """The ParamSpecs the layer keeps for its own blobs (Caffe's layer_param_), which the
        solver's learning rates come from. Call after param_shapes."""
        return self.lp.param

    # --- what it touches (see protoaudit.layers.touch) --------------------------------------------
    def touches(self, run):
        """Everything the layer touches, by stage. The default is a plain layer: params filled at
        setup; bottoms read and tops written forward; backward reads the top diffs and writes the
        diffs Net::Init asked for. Layers add their private buffers and Caffe's quirks."""
        return list(_plain_touches(run.num_params, len(run.bottoms), len(run.tops), tuple(run.propagate_down),
                                   tuple(run.param_propagate_down)))

    def shares(self):
        """(top, bottom, part) triples: tops whose data or diff is the bottom's (ShareData/ShareDiff)."""
        return []

    # --- helpers for subclasses -----------------------------------------------------------
    def fail(self, message, fix=None, fork=None):
        raise InputError(message, layer=self.lp.name, fix=fix, fork=fork)

    def check(self, condition, message, fix=None):
        if not condition:
            self.fail(message, fix)

    def override(self, top_index, shape, own_batch=None):
        """A data source's top shape after --input and --batch: --input gives the whole shape,
        --batch its first dimension (in a test net audited beside its train net, the layer's own
        batch does, `own_batch` or the first dimension of `shape`)."""
        top = self.lp.top[top_index] if top_index < len(self.lp.top) else None
        if top is not None and top in self.ctx.inputs:
            self.ctx.used_inputs.add(top)
            given = tuple(self.ctx.inputs[top])
            first = self.ctx.batch
            if first is None and self.ctx.keep_own_batch:
                first = own_batch if own_batch is not None else (shape[0] if shape else None)
            return (first,) + given[1:] if first is not None and given else given
        if shape is None:
            return None
        if self.ctx.batch is not None and len(shape) > 0:
            return (self.ctx.batch,) + tuple(shape[1:])
        return tuple(shape)

    def need_input(self, what, tops=None, known=None, absent=False):
        """Stop: `tops` (default: every top of the layer) need --input. `known` maps a top to the
        dimensions that are known (None for the others), to fill in the flag the user is given;
        `absent`: only a dataset not on this machine would give them (MissingShape)."""
        tops = list(self.lp.top) if tops is None else list(tops)
        known = known or {}
        raise MissingShape(what, [(t, tuple(known.get(t) or ())) for t in tops], absent)

    def defined(self, name):
        """The user's --define NAME=COUNT for a count only the data decides (None when not given);
        the class lists the names it reads in `defines`."""
        assert name in self.defines, name
        value = self.ctx.defines.get(name)
        if value is None:
            return None
        text = str(value).strip()
        self.check(text.isdigit(), f"--define {name}={value}: {self.defines[name]} is a count, a whole number",
                   fix=f"write it as --define {name}=10")
        return int(text)

    def fork_param(self, name):
        """The layer's fork-only message (bn_param, prior_box_param, ...): missing only when the net
        was read with a schema that lacks it (e.g. a fork layer type in a file another fork read)."""
        try:
            return getattr(self.lp, name)
        except AttributeError:
            from ..read.schema import described

            whose = described(self.fork) if self.fork else "another Caffe"
            self.fail(f"{self.lp.type} is a layer of {whose}, but the net was not read with that fork's "
                      f"caffe.proto (it has no {name})",
                      fix="the net mixes this fork's layers with fields the fork does not have; "
                      "say which Caffe with --fork or --caffe-proto")

    def assume(self, what, override):
        """Note a guess the report must show, with the flag that overrides it."""
        self.ctx.assumptions.append(Assumption(self.lp.name, what, override))

    def note_origin(self, top_index, shape, source):
        """Note where a data top's shape came from (--input wins over what the layer says). A top
        the file does not name (AutoTopBlobs) is Caffe's "(automatic)" (net.cpp AppendTop)."""
        top = self.lp.top[top_index] if top_index < len(self.lp.top) else "(automatic)"
        if top in self.ctx.inputs:
            source = self.ctx.input_sources.get(top, "--input")
        self.ctx.origins.append(ShapeOrigin(self.lp.name, top, tuple(shape), source))


@functools.cache
def _plain_touches(num_params, num_bottoms, num_tops, propagate_down, param_propagate_down):
    """Layer.touches for these counts and flags, made once (layers that add their own copy the list)."""
    t = [touch.param(k, "data", "setup") for k in range(num_params)]
    t += [touch.bottom(j, "data", "forward") for j in range(num_bottoms)]
    t += [touch.top(j, "data", "forward") for j in range(num_tops)]
    t += [touch.top(j, "diff", "backward") for j in range(num_tops)]
    t += [touch.bottom(j, "diff", "backward") for j, down in enumerate(propagate_down) if down]
    t += [touch.param(k, "diff", "backward") for k, down in enumerate(param_propagate_down) if down]
    return tuple(t)


def canonical_axis(layer, axis, num_axes):
    """Caffe's Blob::CanonicalAxisIndex: negative axes count from the end."""
    if not -num_axes <= axis < num_axes:
        layer.fail(f"axis {axis} is out of range for a {num_axes}-axis blob")
    return axis + num_axes if axis < 0 else axis


def float32(x):
    """`x` as C's (float)x: Caffe does some shape arithmetic in single precision. One float32
    division is also exact this way: a double quotient of two floats rounds to the float one."""
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:  # past the largest float: C's cast gives infinity
        return math.copysign(math.inf, x)


def c_round(x):
    """C's round(): halves away from zero."""
    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)


def count(shape, start=0, end=None):
    """The number of elements of a blob of `shape` (axes start to end): Blob::count."""
    return math.prod(shape[start:end])


def legacy_shape(layer, shape):
    """Blob's legacy (num, channels, height, width) accessors: missing axes read as 1, and a blob
    of more than four axes is a failed CHECK."""
    if len(shape) > 4:
        layer.fail(f"{layer.lp.type} reads its bottom as (num, channels, height, width), which needs at most "
                   f"4 axes; got {tuple(shape)}")
    return tuple(shape) + (1,) * (4 - len(shape))


def refuse_in_place(layer):
    """The CHECK of the layers that cannot compute in place (top 0 named as bottom 0)."""
    tops, bottoms = layer.lp.top, layer.lp.bottom
    if tops and bottoms and tops[0] == bottoms[0]:
        layer.fail(f"{layer.lp.type} does not allow in-place computation", fix=f"give top '{tops[0]}' a new name")



class View:
    """A layer's parameters read as BVLC's schema describes them, whatever fork schema parsed them.

    Older forks lack some fields (then BVLC's default is returned) or declare as single a field
    BVLC repeats, such as `kernel_size` (then it reads as a list), so layer code is written once.
    `View(msg)` is a view of msg's message type: a class made once per type, whose fields are
    properties that read them that way (layers read their parameters many times).
    """

    __slots__ = ("_msg",)

    def __new__(cls, msg):
        view = object.__new__(_view_class(msg.DESCRIPTOR))
        view._msg = msg
        return view

    _singular = frozenset()  # the names of this schema's singular fields (the ones with presence)

    def HasField(self, name):
        return name in self._singular and self._msg.HasField(name)


@functools.cache
def _view_class(descriptor):
    """The View of one message type: a property per field of this schema's message and of BVLC's."""
    names = set(descriptor.fields_by_name) | set(_bvlc_fields(descriptor.full_name))
    fields = {name: property(_reader(descriptor, name)) for name in sorted(names)}
    singular = frozenset(name for name, fd in descriptor.fields_by_name.items() if not fd.is_repeated)
    return type(f"View[{descriptor.full_name}]", (View,), {"__slots__": (), "_singular": singular, **fields})


def _reader(descriptor, name):
    """How a View reads field `name` of messages of this type."""
    mine = descriptor.fields_by_name.get(name)
    theirs = _bvlc_fields(descriptor.full_name).get(name)
    if mine is None:  # a field this schema lacks: BVLC's default
        if theirs.is_repeated:
            return lambda view: []
        if theirs.message_type is not None:
            return lambda view: View(_bvlc_message(theirs.message_type.full_name)())
        return lambda view: theirs.default_value
    if mine.message_type is not None and not mine.is_repeated:
        return _sub_view(name, mine.message_type)
    if theirs is not None and theirs.is_repeated and not mine.is_repeated:
        return lambda view: [getattr(view._msg, name)] if view._msg.HasField(name) else []
    return operator.attrgetter("_msg." + name)


def _sub_view(name, message_type):
    """A reader of message field `name`: a View of it (its class found on the first read: message
    types may nest themselves)."""
    made = []

    def read(view):
        if not made:
            made.append(_view_class(message_type))
        sub = object.__new__(made[0])
        sub._msg = getattr(view._msg, name)
        return sub

    return read


def _bvlc_fields(full_name):
    from ..read.schema import load_schema

    schema = load_schema("bvlc")
    try:
        return schema.pool.FindMessageTypeByName(full_name).fields_by_name
    except KeyError:
        return {}


def _bvlc_message(full_name):
    from ..read.schema import load_schema

    return load_schema("bvlc").message(full_name.split(".", 1)[1])
