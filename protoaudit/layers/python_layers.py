"""Python layers: declared, never imported or run.

A Python layer's tops are shaped by Python code. The user declares them (`--input`, or a shapes
file beside the net: protoaudit.read.sidecar); for the well-known layers of py-faster-rcnn and of
the FCN models, protoaudit knows the shapes their published code gives and uses them; for a layer
whose module is beside the net, it reads the shapes off the module's source where they are plain
(protoaudit.layers.python_source). Each is shown as an assumption with the flag that changes it. Their tops and diffs are counted as Caffe
allocates them; what the Python code itself holds (numpy arrays, a prefetch process) is a gap the
report lists.

Sources, cited file:line in each class:
  py-faster-rcnn (rbgirshick/py-faster-rcnn 781a917): lib/roi_data_layer/layer.py and minibatch.py,
    lib/rpn/anchor_target_layer.py, proposal_layer.py, proposal_target_layer.py, generate_anchors.py,
    lib/fast_rcnn/config.py and experiments/cfgs/faster_rcnn_end2end.yml;
  FCN (shelhamer/fcn.berkeleyvision.org 1305c73): voc_layers.py, siftflow_layers.py, nyud_layers.py,
    pascalcontext_layers.py.
"""
import ast
import os

from ..read import plain_yaml
from ..read.sidecar import SUFFIX
from . import fast_rcnn_cfg, touch
from .base import MissingShape, register
from .data import Declared
from .python_source import SourceShapes, Unread, class_file, module_file, read_lines

KNOWN = {}  # (python_param.module, python_param.layer) -> class
# why a Python data layer's tops may be assumed as an absent dataset's (MissingShape.absent)
DATA_FROM_CODE = "its data comes from Python code, which protoaudit never runs"
DATA_FROM_CODE_WHERE = "its data coming from Python code"  # the same, where a shape's origin is said


def known(module, layer):
    """Class decorator: the built-in shapes of one published Python layer."""

    def deco(cls):
        KNOWN[(module, layer)] = cls
        return cls

    return deco


@register("Python")
class Python(Declared):
    """A Python layer. One protoaudit knows (KNOWN) gets its built-in shapes; any other needs
    its tops declared."""

    gap = "what its Python code allocates (protoaudit never runs it)"

    module_path = None  # the module's file, where it was found (FromSource)
    # whether, as a data layer whose tops are not found, its data may be assumed (an image, and labels
    # its losses size); not for a layer protoaudit knows, whose own refusal says what it lacks
    assumes_data = True

    def __new__(cls, lp, ctx):
        p = lp.python_param
        if cls is Python:
            cls = KNOWN.get((p.module, p.layer))
            if cls is None or not cls.fits(lp):  # (a repository's own code under a published name)
                cls = FromSource
        # (made again as its own class where the net is built anew: a batch search's rebuilds)
        path = module_file(p.module, ctx.path, ctx.root) if cls is FromSource and p.module else None
        made = super().__new__(cls if cls is not FromSource or path else Python)
        made.module_path = path
        return made

    @classmethod
    def why(cls, lp):
        p = lp.python_param
        return (f"Python layer ({p.module}.{p.layer}): its top shapes are set by Python code, which protoaudit "
                "never runs")

    @classmethod
    def asks(cls, lp):
        p = lp.python_param
        return (p.module, p.layer) not in KNOWN

    def reshape(self, bottoms):
        try:
            return self.top_shapes(bottoms)
        except MissingShape as e:
            outputs = self.outputs_only()
            if outputs is not None:
                return outputs
            if self.lp.bottom or e.absent or not self.assumes_data:
                raise
            given = self.shape_given()
            if given is not None:
                return [given]
            # a data layer: its tops are the data its code reads, which the audit may assume as it
            # assumes a dataset's that is not on this machine (an image; a label its loss sizes)
            batch = self.ctx.batch or self.batch_size() or 1
            raise MissingShape(e.reason, [(t, known if len(known) >= 4 else (batch, None, None, None))
                                          for t, known in e.tops], DATA_FROM_CODE) from None

    def shape_given(self):
        """The top's shape where a data layer of one top has a param_str of four or five positive
        integers and nothing else ('2,3,16,112,112', '[2, 3, 16, 112, 112]', '2 3 16 112 112': many
        repositories' own data layers take their top's shape so), said as an assumption; else None."""
        text = self.lp.python_param.param_str.strip().strip("[]()").replace(",", " ")
        parts = text.split()
        if len(self.lp.top) != 1 or not 4 <= len(parts) <= 5 or not all(p.isdigit() and int(p) > 0 for p in parts):
            return None
        shape = tuple(int(p) for p in parts)
        if self.ctx.batch:
            shape = (self.ctx.batch,) + shape[1:]
        top = self.lp.top[0]
        self.data_source = True
        self.note_origin(0, shape, f"assumed: the shape its param_str gives, {DATA_FROM_CODE_WHERE}")
        said = "x".join(map(str, shape))
        self.assume(f"{self.why(self.lp)}; its param_str {self.lp.python_param.param_str!r} is read as its top's "
                    f"shape, {said}", f"--input {top}={said} (your data's size)")
        return shape

    def batch_size(self):
        """The batch_size (or batch) its param_str gives as a plain value (a dict literal, JSON or YAML,
        read by parsers that run nothing), or None."""
        text = self.lp.python_param.param_str
        for parse in (ast.literal_eval, plain_yaml.load):
            try:
                params = parse(text)
            except Exception:  # noqa: BLE001  (not this notation: try the next)
                continue
            if isinstance(params, dict):
                value = params.get("batch_size", params.get("batch"))
                return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
        return None

    def top_shapes(self, bottoms):
        """The tops' shapes: --input's (a layer protoaudit knows: its source's), noted as a data
        layer's where it has no bottoms."""
        tops = Declared.reshape(self, bottoms)
        self.data_source = not bottoms
        if self.data_source:
            for j, shape in enumerate(tops):
                self.note_origin(j, shape, "--input")
        return tops

    def outputs_only(self):
        """Empty tops for a layer fed by the net whose tops no layer reads and none is declared (a
        deploy net's Python proposal layer, its outputs): nothing else depends on their shapes, so
        the rest of the net is audited, and what its Python code puts in them is said not to be
        counted. None for any other layer: its tops are asked for."""
        tops = list(self.lp.top)
        if not self.lp.bottom or not tops or any(t in self.ctx.read or t in self.ctx.inputs for t in tops):
            return None
        self.assume(f"{self.why(self.lp)}, and no layer of the net reads its tops ({', '.join(tops)}): they are "
                    "counted empty, and what its Python code puts in them is not counted",
                    " ".join(f"--input {t}=NxCxHxW" for t in tops) + " (their shapes, to count them)")
        return [(0,)] * len(tops)


class Known(Python):
    """A published Python layer whose top shapes protoaudit derives from its source. Subclasses
    give `defaults(bottoms)`: one shape per top, and the reason (the source's defaults)."""

    tops = None  # the exact top count the layer's code requires, when it checks one
    assumes_data = False

    @classmethod
    def fits(cls, lp):
        """Whether the layer's tops are ones the published code makes: a layer of the same module
        and name with others is a repository's own code, read as any Python layer's."""
        return True

    @property
    def source(self):
        p = self.lp.python_param
        return f"{p.module}.{p.layer}"

    def defaults(self, bottoms):
        raise NotImplementedError

    def top_shapes(self, bottoms):
        self.data_source = not bottoms
        declared = [t in self.ctx.inputs for t in self.lp.top]
        if all(declared):  # (given, or logged: the run's own code made them, whatever their count)
            return Python.top_shapes(self, bottoms)
        if self.tops is not None and len(self.lp.top) != self.tops:
            logged = self.ctx.logged_layers.get(self.lp.name)
            if logged is None or list(logged.tops) != list(self.lp.top) or len(logged.shapes) != len(self.lp.top):
                from ..net.build import Miscounted  # (build imports the layers)

                raise Miscounted(f"{self.source} makes {self.tops} tops; {len(self.lp.top)} are named",
                                 fix="declare its tops with --input if the repository's own layer makes these")
            return self._as_logged(logged)
        shapes, reason = self.defaults(bottoms)
        tops = []
        assumed = []
        for j, top in enumerate(self.lp.top):
            if declared[j] or self.data_source:
                shape = self.override(j, shapes[j])  # --input, else the default (with --batch for a data layer)
            else:
                shape = tuple(shapes[j])
            if not declared[j]:
                assumed.append((top, shape))
            if self.data_source:
                self.note_origin(j, shape, "--input" if declared[j] else self.origin(reason))
            tops.append(shape)
        what = ", ".join(f"{top} {'x'.join(map(str, s))}" for top, s in assumed)
        flags = " ".join(f"--input {top}={'x'.join(map(str, s))}" for top, s in assumed)
        beside = f"{os.path.basename(self.ctx.path)}{SUFFIX}" if self.ctx.path else f"the net's {SUFFIX} file"
        self.assume(f"{self.source} tops {what}: {reason}", f"{flags}, or those lines in {beside}")
        return tops

    def _as_logged(self, logged):
        """The tops a Caffe log of this net shows the repository's own copy of the layer made, where its
        count is not the published layer's (affordance-net's 10-top ProposalTargetLayer): as the log shows
        them at setup, which its forward may grow (the published tops' sizes would not fit the others')."""
        tops = [self.override(j, shape) if self.data_source else tuple(shape) for j, shape in enumerate(logged.shapes)]
        self.assume(f"{self.source} makes {self.tops} tops as published; Caffe's log (line {logged.line}) shows the "
                    f"repository's own made {len(tops)}, as the file names them: their shapes are the log's, at "
                    "setup, which its forward may grow",
                    " ".join(f"--input {top}={'x'.join(map(str, shape)) or 1}" for top, shape in zip(self.lp.top, tops)))
        return tops

    def origin(self, reason):
        """Where a data top's shape came from, when the layer itself gave it."""
        return f"assumed: {self.source}'s defaults"

    def touches(self, run):
        """PythonLayer's forward runs the Python code, which writes every top's data (`top[i].data[...] =`)
        after reading the bottoms it uses; its backward is `pass`: no diff is touched."""
        t = [touch.bottom(j, "data", "forward") for j in self.reads(len(run.bottoms))]
        return t + [touch.top(j, "data", "forward") for j in range(len(run.tops))]

    def reads(self, bottoms):
        """The bottoms the forward code reads."""
        return range(bottoms)

    # --- param_str, read as the layer reads it (never executed) -----------------------------------
    def yaml_params(self):
        """py-faster-rcnn's param_str: YAML (`yaml.load(self.param_str_)`)."""
        import yaml

        text = self.lp.python_param.param_str
        try:
            params = plain_yaml.load(text) if text.strip() else {}
        except yaml.YAMLError as e:
            self.fail(f"param_str {text!r} is not YAML, which {self.source} reads it as: {str(e).splitlines()[0]}",
                      fix="write it like \"'num_classes': 21\"")
        self.check(isinstance(params, dict), f"param_str {text!r} is not a YAML mapping, which {self.source} needs",
                   fix="write it like \"'num_classes': 21\"")
        return params

    def dict_params(self):
        """FCN's param_str: a Python dict literal (`eval(self.param_str)`), read here with
        ast.literal_eval, which evaluates no code."""
        text = self.lp.python_param.param_str
        try:
            params = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            self.fail(f"param_str is not a Python dict of plain values, which {self.source} reads it as",
                      fix="write it like \"{'split': 'train', 'seed': 1337}\", or declare the tops with --input")
        self.check(isinstance(params, dict), f"param_str is not a Python dict, which {self.source} needs")
        return params

    def param(self, params, key, where):
        self.check(key in params, f"param_str has no '{key}', which {self.source} reads ({where})",
                   fix=f"add '{key}' to param_str")
        return params[key]


class FromSource(Known):
    """A Python layer whose module is found beside the net (its folder or one above, or --root):
    the tops' shapes its setup and reshape give with plain values, read off the source
    (python_source); where they are not plain, its tops are asked for as any Python layer's."""

    assumes_data = True

    def defaults(self, bottoms):
        p = self.lp.python_param
        path = class_file(self.module_path, p.layer)
        lines = read_lines(path)
        try:
            if lines is None:
                raise Unread(f"{os.path.basename(path)} is over a MiB")
            shapes, where, per_batch = SourceShapes(path, lines, p.layer).shapes(len(self.lp.top), bottoms,
                                                                                 p.param_str)
        except Unread as e:
            self.need_input(f"{self.why(self.lp)}; its source was read, not run: {e}",
                            [t for t in self.lp.top if t not in self.ctx.inputs])
        name = os.path.relpath(path, os.path.dirname(os.path.abspath(self.ctx.path or path)))
        said = ", ".join(sorted({str(n) for n in where}, key=int))
        origin = f"read off its source, {name} (line {said}), never run"
        if per_batch is not None and self.ctx.strict:
            self.need_input(f"{self.why(self.lp)}; its source was read, not run: its forward reshapes its tops to "
                            f"each batch ({name}:{per_batch})", [t for t in self.lp.top if t not in self.ctx.inputs])
        if per_batch is not None:
            origin += (f"; its forward (line {per_batch}) reshapes them to what each batch makes, which only running "
                       "it would tell: these are the shapes its setup gives, which Caffe's Net::Init allocates (and "
                       "its log shows), and a batch that makes larger tops takes more")
        return shapes, origin

    def origin(self, reason):
        return f"assumed: {self.source}, {reason}"


# --- py-faster-rcnn --------------------------------------------------------------------------------
# lib/fast_rcnn/config.py as the net's repository sets it (fast_rcnn_cfg), with experiments/cfgs/
# faster_rcnn_end2end.yml's IMS_PER_BATCH 1 for an RPN net (one image, minibatch.py:34-35)
TRAIN_MAX_SCALE = max(fast_rcnn_cfg.DEFAULTS[("TRAIN", "SCALES")])
TRAIN_MAX_SIZE = fast_rcnn_cfg.DEFAULTS[("TRAIN", "MAX_SIZE")]
ANCHOR_RATIOS = (0.5, 1, 2)  # generate_anchors.py:37, pva-faster-rcnn's anchor_target_layer.py:29 default 'ratios'
ANCHOR_SCALES = (8, 16, 32)  # anchor_target_layer.py:28, proposal_layer.py:29 default 'scales'
GT_BOXES = 64  # ground-truth boxes of one image: the blob keeps room for the most any image has

IMAGE = (f"py-faster-rcnn's largest training image (cfg.TRAIN.SCALES {TRAIN_MAX_SCALE} for the short side, "
         f"cfg.TRAIN.MAX_SIZE {TRAIN_MAX_SIZE} for the long side)")


# pva-faster-rcnn (sanghoon/pva-faster-rcnn b0dc7d2) keeps py-faster-rcnn's layers and module names, with
# the same defaults (lib/fast_rcnn/config.py:38 SCALES (600,), :41 SCALE_MULTIPLE_OF 1, :44 MAX_SIZE 1000),
# and floors each scaled side to a multiple of cfg.TRAIN.SCALE_MULTIPLE_OF (lib/utils/blob.py:31-45, called
# by roi_data_layer/minibatch.py:140-142). PVANet's nets train only with its cfg: its example's README
# (models/pvanet/example_train/README.md) runs tools/train_net.py --cfg models/pvanet/cfgs/train.yml.
PVA_TRAIN_CFG = {"SCALES": [416, 448, 480, 512, 544, 576, 608, 640, 672, 704, 736, 768, 800, 832, 864],
                 "MAX_SIZE": 1440, "SCALE_MULTIPLE_OF": 32}  # models/pvanet/cfgs/train.yml:11-28
PVA_CFG_NAME = "models/pvanet/cfgs/train.yml"


def _pva_net(ctx):
    """Whether the net is pva-faster-rcnn's: one of its RPN layers is given anchor 'ratios' in param_str,
    which only pva-faster-rcnn's AnchorTargetLayer and ProposalLayer read (lib/rpn/anchor_target_layer.py:
    28-30, proposal_layer.py:29-31; py-faster-rcnn's read 'scales' alone). The net is read from its file
    (the reading the audit already made)."""
    import yaml

    from ..read.load import load

    try:
        message = load(ctx.path, defines=ctx.defines).message
    except Exception:  # a net printed in a log, a solver: no file of its own to look at
        return False
    for lp in list(getattr(message, "layer", ())) + list(getattr(message, "layers", ())):
        p = lp.python_param
        if (p.module, p.layer) not in (("rpn.anchor_target_layer", "AnchorTargetLayer"),
                                       ("rpn.proposal_layer", "ProposalLayer")):
            continue
        try:
            params = plain_yaml.load(p.param_str) if p.param_str.strip() else {}
        except yaml.YAMLError:
            continue
        if isinstance(params, dict) and "ratios" in params:
            return True
    return False


def _pva_cfg_beside(path):
    """pva-faster-rcnn's training cfg where the repository keeps it, a `cfgs/` folder in the net's folder
    or the one above (models/pvanet/cfgs beside models/pvanet/example_train): the one YAML file there
    with a TRAIN section that sets SCALES, MAX_SIZE or SCALE_MULTIPLE_OF (the others, submit_*.yml, set
    TEST only). (its path, its TRAIN section), or None where there is none or more than one."""
    import yaml

    here = os.path.dirname(os.path.abspath(path))
    found = []
    for folder in (here, os.path.dirname(here)):
        cfgs = os.path.join(folder, "cfgs")
        if not os.path.isdir(cfgs):
            continue
        for name in sorted(os.listdir(cfgs)):
            if not name.endswith((".yml", ".yaml")):
                continue
            try:
                with open(os.path.join(cfgs, name), encoding="utf-8", errors="replace") as f:
                    data = plain_yaml.load(f.read(1 << 20))
            except (OSError, yaml.YAMLError):
                continue
            train = data.get("TRAIN") if isinstance(data, dict) else None
            if isinstance(train, dict) and {"SCALES", "MAX_SIZE", "SCALE_MULTIPLE_OF"} & set(train):
                found.append((os.path.join(cfgs, name), train))
    return found[0] if len(found) == 1 else None


@known("roi_data_layer.layer", "RoIDataLayer")
class RoIDataLayer(Known):
    """The training data layer (lib/roi_data_layer/layer.py). With cfg.TRAIN.HAS_RPN (3 tops,
    layer.py:100-107): data, im_info (1, 3) and gt_boxes (G, 5) (minibatch.py:38-44). Without
    (Fast R-CNN, 6 tops with BBOX_REG, layer.py:108-137): data, rois (R, 5), labels (R,) and
    bbox_targets/inside/outside weights (R, 4 * num_classes), R = TRAIN.BATCH_SIZE RoIs in all
    (minibatch.py:25, 47-79). The original Fast R-CNN's (rbgirshick/fast-rcnn lib/roi_data_layer/
    layer.py:83-104, minibatch.py:32-63) makes 5: bbox_targets and bbox_loss_weights (R, 4 * num_classes),
    with the same configuration (config.py:38-47). affordance-net's (nqanh/affordance-net 8db1b3f) makes
    5 too, told apart by their names: HAS_RPN's 3 and, with cfg.TRAIN.MASK_REG, seg_mask_inds (G, 2) and
    flipped (1, 1) (layer.py:100-113, minibatch.py:131-147). Forward reshapes every top to its minibatch (layer.py:146-151): the
    blobs keep the largest, which these defaults are; the image blob holds IMS_PER_BATCH images
    padded to the largest (utils/blob.py:18-20)."""

    @classmethod
    def fits(cls, lp):
        """3 tops (HAS_RPN), 5 (the original Fast R-CNN's, or affordance-net's) or 6 (Fast R-CNN's)."""
        return len(lp.top) in (3, 5, 6)

    def defaults(self, bottoms):
        shapes, why = self.tops_and_why()
        if self.ctx.schema == "rfcn":  # py-R-FCN's copy makes every top but im_info 4-axis (its layer.py:146-156)
            shapes = [s if len(shapes) == 3 and i == 1 else s + (1,) * (4 - len(s)) for i, s in enumerate(shapes)]
        return shapes, why

    def tops_and_why(self):
        params = self.yaml_params()
        classes = self.param(params, "num_classes", "layer.py:89")
        n = len(self.lp.top)
        masks = n == 5 and list(self.lp.top)[1:3] == ["im_info", "gt_boxes"]
        cfg = fast_rcnn_cfg.of_net(self.ctx)
        if n == 3 or masks:
            height, width, said = self.image(cfg)
            image = (1, 3, height, width)
            if masks:  # affordance-net's: HAS_RPN with MASK_REG
                return [image, (1, 3), (GT_BOXES, 5), (GT_BOXES, 2), (1, 1)], (
                    f"5 tops: cfg.TRAIN.HAS_RPN and MASK_REG (affordance-net), one image ({said}), room for "
                    f"{GT_BOXES} ground-truth boxes and their masks' indices")
            return [image, (1, 3), (GT_BOXES, 5)], (
                f"3 tops: cfg.TRAIN.HAS_RPN, one image ({said}), room for {GT_BOXES} ground-truth boxes")
        if n in (5, 6):  # 5: the original Fast R-CNN's (rbgirshick/fast-rcnn), bbox_targets and bbox_loss_weights
            images, rois = cfg.count("TRAIN", "IMS_PER_BATCH"), cfg.count("TRAIN", "BATCH_SIZE")
            height, width, said = self.image(cfg)
            shapes = [(images, 3, height, width), (rois, 5), (rois,)] + [(rois, 4 * classes)] * (n - 3)
            whose = "Fast R-CNN" if n == 6 else "the original Fast R-CNN (rbgirshick/fast-rcnn)"
            return shapes, (f"{n} tops: {whose} with bounding-box regression, {images} images of "
                            f"{said}, {rois} RoIs (cfg.TRAIN.BATCH_SIZE), {classes} classes")
        self.fail(f"{self.source} makes 3 tops (data, im_info, gt_boxes with cfg.TRAIN.HAS_RPN), 6 (data, rois, "
                  f"labels and the three bbox blobs) or, in the original Fast R-CNN, 5 (two bbox blobs); {n} are named",
                  fix="declare its tops with --input if your configuration makes these")


    def image(self, cfg):
        """The largest training image: (height, width, what says so). The repository's configuration
        `cfg` (fast_rcnn_cfg); a pva-faster-rcnn net (_pva_net) takes its cfg: the one beside it (_pva_cfg_beside), else the
        cfg its example trains with (PVA_TRAIN_CFG). Each side is at most the largest scale and
        MAX_SIZE, floored to a multiple of SCALE_MULTIPLE_OF (utils/blob.py:38-43)."""
        if self.ctx.path is None or not _pva_net(self.ctx):
            return _image_of(cfg, self.ctx.path)
        beside = _pva_cfg_beside(self.ctx.path)
        cfg = {"SCALES": [TRAIN_MAX_SCALE], "MAX_SIZE": TRAIN_MAX_SIZE, "SCALE_MULTIPLE_OF": 1}
        if beside is None:
            cfg.update(PVA_TRAIN_CFG)
            where = (f"pva-faster-rcnn's training cfg ({PVA_CFG_NAME}, which its example_train README passes "
                     "with --cfg; none is beside the net)")
        else:
            cfg.update({k: v for k, v in beside[1].items() if k in cfg})
            where = f"the pva-faster-rcnn cfg beside the net, {os.path.relpath(beside[0], os.path.dirname(os.path.abspath(self.ctx.path)))}"
        scales = cfg["SCALES"] if isinstance(cfg["SCALES"], (list, tuple)) else [cfg["SCALES"]]
        try:
            scale, size, multiple = max(int(v) for v in scales), int(cfg["MAX_SIZE"]), int(cfg["SCALE_MULTIPLE_OF"])
        except (TypeError, ValueError):
            self.fail(f"{where} has a TRAIN.SCALES, MAX_SIZE or SCALE_MULTIPLE_OF that is not a number",
                      fix="give the image size with --input")
        self.check(multiple > 0 and 0 < scale and 0 < size, f"{where} has a TRAIN size that is not positive",
                   fix="give the image size with --input")
        height, width = scale // multiple * multiple, size // multiple * multiple
        self.check(height > 0 and width > 0, f"{where} floors the image to nothing (SCALE_MULTIPLE_OF {multiple})",
                   fix="give the image size with --input")
        return height, width, (
            f"pva-faster-rcnn's largest training image under {where}: TRAIN.SCALES at most {scale} for the short "
            f"side, TRAIN.MAX_SIZE {size} for the long side, each side floored to a multiple of "
            f"TRAIN.SCALE_MULTIPLE_OF {multiple}: {height}x{width}; the net's anchors have 'ratios', which only "
            "pva-faster-rcnn's RPN layers read")


def _image_of(cfg, net_path):
    """The largest training image the repository's configuration makes: (height, width, what says
    so). prep_im_for_blob (utils/blob.py:31-45) scales the short side to the scale, unless the long
    side would pass MAX_SIZE: the largest blob is min(scale, MAX_SIZE) by MAX_SIZE."""
    keys = (("TRAIN", "SCALES"), ("TRAIN", "MAX_SIZE"))
    scales, size = cfg.get(*keys[0]), cfg.get(*keys[1])
    scales = list(scales) if isinstance(scales, (list, tuple)) else [scales]
    if not cfg.changed(*keys) or not scales or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in scales + [size]):
        return TRAIN_MAX_SCALE, TRAIN_MAX_SIZE, IMAGE
    scale, size = int(max(scales)), int(size)
    height = min(scale, size)
    return height, size, (f"the largest training image of the repository's {cfg.said(net_path)} (cfg.TRAIN.SCALES "
                          f"at most {scale} for the short side, cfg.TRAIN.MAX_SIZE {size} for the long side: "
                          f"{height}x{size})")


def anchors(layer, params, score=None):
    """(anchors per position, how that count was found): one per ratio and scale (generate_anchors.py:
    37-48). py-faster-rcnn reads 'scales' from param_str (anchor_target_layer.py:28); pva-faster-rcnn's
    layers read 'ratios' too (sanghoon/pva-faster-rcnn lib/rpn/anchor_target_layer.py:28-30,
    proposal_layer.py:29-31). Where param_str gives neither and the score map `score` (2 channels per
    anchor: rpn_cls_score, or its softmax) has another count than the defaults' 9, the repository's
    own layer changed its defaults (a rotated RPN's 10 scales): the net's count is taken, and said."""
    counts = []
    for key, default in (("ratios", ANCHOR_RATIOS), ("scales", ANCHOR_SCALES)):
        value = params.get(key, default)
        layer.check(isinstance(value, (list, tuple)) and value, f"param_str '{key}' must be a list of anchor {key}")
        counts.append(len(value))
    a = counts[0] * counts[1]
    if (score is not None and len(score) == 4 and score[1] % 2 == 0 and score[1] // 2 != a
            and "ratios" not in params and "scales" not in params):
        return score[1] // 2, (f"{score[1] // 2} anchors, as its score map's {score[1]} channels (2 per anchor) "
                               f"say, where py-faster-rcnn's default ratios and scales make {a}: the repository's own "
                               "layer sets others")
    return a, f"{a} anchors"


@known("rpn.anchor_target_layer", "AnchorTargetLayer")
class AnchorTargetLayer(Known):
    """RPN training targets (lib/rpn/anchor_target_layer.py): for A anchors per position of the
    score map bottom 0 (H, W) (:51, :55), labels (1, 1, A*H, W) and bbox_targets, inside and outside
    weights (1, 4A, H, W) each (:57-63, and forward :224-249). A is the ratios times the scales
    of param_str (see anchors)."""

    tops = 4

    def defaults(self, bottoms):
        a, said = anchors(self, self.yaml_params(), bottoms[0])
        self.check(len(bottoms[0]) >= 2, f"bottom 0 {tuple(bottoms[0])} needs height and width axes")
        h, w = bottoms[0][-2:]
        return [(1, 1, a * h, w)] + [(1, 4 * a, h, w)] * 3, (
            f"{said} at each of the {h}x{w} positions of the score map (bottom 0)")

    def reads(self, bottoms):
        return range(min(bottoms, 3))  # the score map, gt_boxes and im_info (forward :74-82)


@known("rpn.proposal_layer", "ProposalLayer")
class ProposalLayer(Known):
    """RPN proposals (lib/rpn/proposal_layer.py): rois (P, 5) and, with a second top, scores
    (P, 1) (:150-161), where P is at most cfg[phase].RPN_POST_NMS_TOP_N (:64-66, :145-146: 2000
    in TRAIN, 300 in TEST, config.py:116 and :162) and at most one per anchor (A per position of
    the score map, bottom 0)."""

    @classmethod
    def fits(cls, lp):
        """3 bottoms (scores, deltas, im_info) and 1 or 2 tops (:35-47)."""
        return len(lp.bottom) == 3 and len(lp.top) in (1, 2)

    def defaults(self, bottoms):
        self.check(len(self.lp.top) in (1, 2), f"{self.source} makes 1 or 2 tops (rois, scores)")
        a, said = anchors(self, self.yaml_params(), bottoms[0])
        self.check(len(bottoms[0]) >= 2, f"bottom 0 {tuple(bottoms[0])} needs height and width axes")
        h, w = bottoms[0][-2:]
        phase = self.ctx.phase
        top_n = fast_rcnn_cfg.of_net(self.ctx).count(phase, "RPN_POST_NMS_TOP_N")
        p = min(top_n, a * h * w)
        return [(p, 5), (p, 1)][:len(self.lp.top)], (
            f"at most {top_n} proposals in {phase} (cfg.{phase}.RPN_POST_NMS_TOP_N), and at most "
            f"one per anchor ({said} at each of {h}x{w} positions)")


@known("rpn.proposal_target_layer", "ProposalTargetLayer")
class ProposalTargetLayer(Known):
    """Fast R-CNN training targets from RPN proposals (lib/rpn/proposal_target_layer.py): R
    sampled RoIs, at most cfg.TRAIN.BATCH_SIZE for its one image (:58-59, :147-185): rois (R, 5),
    labels (R,), bbox_targets and the inside and outside weights (R, 4 * num_classes) (:78-96).
    affordance-net's (nqanh/affordance-net 8db1b3f), with cfg.TRAIN.MASK_REG and tops named so, adds
    mask_targets (F, MASK_SIZE, MASK_SIZE) and rois_pos (F, 5) for the F foreground RoIs, at most
    round(FG_FRACTION x BATCH_SIZE) (proposal_target_layer.py:63-65, 87, 108, 317-319, 462, 486)."""

    @property
    def tops(self):
        return 7 if self._masks() else 5

    def _masks(self):
        return len(self.lp.top) == 7 and self.lp.top[5] == "mask_targets"

    def defaults(self, bottoms):
        classes = self.param(self.yaml_params(), "num_classes", "proposal_target_layer.py:26")
        cfg = fast_rcnn_cfg.of_net(self.ctx)
        rois = cfg.count("TRAIN", "BATCH_SIZE")
        shapes = [(rois, 5), (rois,)] + [(rois, 4 * classes)] * 3
        if self.ctx.schema == "rfcn":  # py-R-FCN's copy makes every top 4-axis (its :80-105)
            shapes = [s + (1,) * (4 - len(s)) for s in shapes]
        said = f"{rois} RoIs (cfg.TRAIN.BATCH_SIZE), {classes} classes"
        if self._masks():
            side = cfg.count("TRAIN", "MASK_SIZE")
            self.check(isinstance(side, int) and side > 0, "affordance-net's mask targets need cfg.TRAIN.MASK_SIZE, "
                       "which the repository's fast_rcnn/config.py does not give as a number",
                       fix="declare mask_targets and rois_pos with --input")
            fg = int(round(cfg.fraction("TRAIN", "FG_FRACTION") * rois))
            shapes += [(fg, side, side), (fg, 5)]
            said += f", {fg} foreground RoIs' {side}x{side} masks (cfg.TRAIN.FG_FRACTION, MASK_SIZE)"
        return shapes, said


# --- FCN (fcn.berkeleyvision.org) -----------------------------------------------------------------
# Each layer loads one image (and its labels) per forward, at the image's own size, with batch 1
# (`top[i].reshape(1, *shape)` in reshape()): the blobs grow to the largest image of the dataset.
VOC_SIZE = (500, 500)  # PASCAL VOC (and SBD's VOC images, PASCAL-Context's VOC2010): at most 500 on a side
SIFTFLOW_SIZE = (256, 256)  # SIFT Flow: the 256x256 LabelMe images (siftflow_layers.py:100)
NYUD_SIZE = (425, 560)  # NYUDv2 as FCN prepared it: 425x560 crops


class SegData(Known):
    """An FCN data layer: image (1, 3, H, W) and label maps (1, 1, H, W)."""

    size = None
    dataset = ""

    def defaults(self, bottoms):
        self.check(not bottoms, f"{self.source} takes no bottom")
        h, w = self.size
        return [(1, 3, h, w)] + [(1, 1, h, w)] * (len(self.lp.top) - 1), (
            f"one image at a time (batch 1), {h}x{w}: {self.dataset}")


@known("voc_layers", "VOCSegDataLayer")
@known("voc_layers", "SBDDSegDataLayer")
class VOCSegData(SegData):
    """voc_layers.py: data and label (:43-44, :158-159), reshaped per image (:65-71, :180-186)."""

    tops = 2
    size = VOC_SIZE
    dataset = "PASCAL VOC images are at most 500x500"


@known("pascalcontext_layers", "PASCALContextSegDataLayer")
class PASCALContextSegData(SegData):
    """pascalcontext_layers.py: data and label (:53-54), reshaped per VOC2010 image (:74-80)."""

    tops = 2
    size = VOC_SIZE
    dataset = "PASCAL-Context's VOC2010 images are at most 500x500"


@known("siftflow_layers", "SIFTFlowSegDataLayer")
class SIFTFlowSegData(SegData):
    """siftflow_layers.py: data, semantic and geometric labels (:45-46), reshaped per image (:65-73)."""

    tops = 3
    size = SIFTFLOW_SIZE
    dataset = "SIFT Flow's images are 256x256"


@known("nyud_layers", "NYUDSegDataLayer")
class NYUDSegData(Known):
    """nyud_layers.py: one top per name in param_str 'tops' (:43, :56-57), reshaped per image
    (:76-80): color and hha (1, 3, H, W) (:110-123, :147-156), depth and label (1, 1, H, W)
    (:125-145)."""

    CHANNELS = {"color": 3, "hha": 3, "depth": 1, "label": 1}

    def defaults(self, bottoms):
        self.check(not bottoms, f"{self.source} takes no bottom")
        names = self.param(self.dict_params(), "tops", "nyud_layers.py:43")
        self.check(isinstance(names, (list, tuple)) and len(names) == len(self.lp.top),
                   f"param_str 'tops' names {len(names) if isinstance(names, (list, tuple)) else 'no list of'} "
                   f"outputs; the layer has {len(self.lp.top)} tops", fix="name one output per top")
        unknown = [n for n in names if n not in self.CHANNELS]
        self.check(not unknown, f"unknown output type {unknown[0]!r} in param_str 'tops'" if unknown else "",
                   fix="use color, depth, hha or label")
        h, w = NYUD_SIZE
        return [(1, self.CHANNELS[n], h, w) for n in names], (
            f"one image at a time (batch 1), {h}x{w}: the NYUDv2 images FCN uses")
