"""MTCNN's published Python training layers: their tops' shapes, from each repository's source
(never imported or run; see python_layers). Each default is shown as an assumption with the
--input flags that change it.

Sources, cited file:line in each class:
  luoyetx/Joint-Face-Detection-and-Alignment f4f843bb0e968eb8e44006a9c767f86d6e15da9f:
    layers/data_layer.py, jfda/config.py, jfda/train.py, proto/{p,r,o}_solver.prototxt (its data
    layer is copied unchanged by BenJaminKen/mtcnn-head-detection and zyc3136/MTCNN);
  oftenliu/caffe-mtcnn 6bb430c42702646f4740f608a06d0b4a6c06d280: caffe-pnet/pydata_layer.py,
    caffe-{rnet,onet}/pydata_layer_multidb.py, caffe-*/config.py;
  reasonsolo/mtcnn_caffe ec646c8e27af900da1380d5968970705f9e8f582: python_layer.py, config.py.

Only these (module, layer) pairs are registered: each is tied to one source whose shapes are
read here. Other MTCNN trainings name their modules otherwise (CongWeilin/mtcnn-caffe's
pythonLayer is read off its source beside the net, python_source).
"""
import ast
import os
import re

from ..read import plain_yaml
from . import touch
from .python_layers import FromSource, Known, known
from .python_source import module_file

# Each family's config maps its net types to the square input side: 12, 24 and 48 pixels
# (jfda/config.py:15, caffe-*/config.py:13, reasonsolo's config.py:2).
SIDES = {"p": 12, "r": 24, "o": 48}
LANDMARKS = 10  # five (x, y) points: data_layer.py:60, pydata_layer.py:67, reasonsolo config.py:17 (5) * 2


def literal_dict(layer, example):
    """A param_str the layer evaluates (`eval(self.param_str)`), read as a literal: nothing runs."""
    text = layer.lp.python_param.param_str
    try:
        params = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        params = None
    layer.check(isinstance(params, dict),
                f"param_str {text!r} is not a Python dict of plain values, which {layer.source} reads it as",
                fix=f"write it like '{example}', or declare the tops with --input")
    return params


def yaml_dict(layer, example):
    """A param_str the layer reads with yaml.load, read by a loader that makes plain values only:
    nothing runs."""
    import yaml

    text = layer.lp.python_param.param_str
    try:
        params = plain_yaml.load(text)
    except yaml.YAMLError:
        params = None
    layer.check(isinstance(params, dict),
                f"param_str {text!r} is not a YAML mapping, which {layer.source} reads it as",
                fix=f"write it like \"{example}\", or declare the tops with --input")
    return params


def count_tops(layer, n, why):
    """The code shapes tops 0 to n-1 by index: fewer named stops it (IndexError), more stay unshaped."""
    layer.check(len(layer.lp.top) == n, f"{layer.source} shapes {n} tops ({why}); {len(layer.lp.top)} are named",
                fix="declare its tops with --input if your copy of the layer was changed to make these")


def whole(layer, value, key):
    """int(value), as the layer takes it (int(param['batch'])): a whole number or its digits."""
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        layer.fail(f"param_str '{key}' is {value!r}, not a whole number ({layer.source} takes int() of it)",
                   fix=f"give '{key}' a number")
    number = int(value)
    layer.check(number > 0, f"param_str '{key}' is {number}: a batch needs at least one sample",
                fix=f"give '{key}' a positive number")
    return number


# --- luoyetx/Joint-Face-Detection-and-Alignment ----------------------------------------------------
JFDA_BASE = 128  # jfda/train.py:104 --size, "base batch size"
JFDA_RATIO = {"p": (3, 1, 1, 2), "r": (3, 1, 1, 2), "o": (3, 2, 1, 2)}  # jfda/config.py:66-70 DATA_RATIO
JFDA_NET = re.compile(r"([pro])_")  # train.py:123 'proto/%s_solver.prototxt', whose net is proto/%s_train_val.prototxt


@known("layers.data_layer", "FaceDataLayer")
class FaceDataLayer(Known):
    """The JFDA training data layer (layers/data_layer.py). Its reshape (:57-61) makes data
    (n, 3, s, s), bbox_target (n, 4), landmark_target (n, 10) and label (n,). Setup leaves n at 4,
    one of each kind (:48-55: the n of the "Top shape" lines Caffe logs); train.py then calls
    set_batch_num (:65-66) with n1..n4 = --size 128 (:104) times cfg.DATA_RATIO[net] (:29-30,
    config.py:66-70), n = their sum (data_layer.py:39), and every forward reshapes the tops to it:
    896 for p and r (128 x 7), 1024 for o (128 x 8). s = cfg.NET_INPUT_SIZE[cfg.NET_TYPE]
    (data_layer.py:40, config.py:15), NET_TYPE from --net (train.py:119), whose solver,
    proto/<net>_solver.prototxt (:123), trains proto/<net>_train_val.prototxt (p_solver.prototxt:1):
    the net's file name says which. No param_str is read."""

    def defaults(self, bottoms):
        self.check(not bottoms, f"{self.source} takes no bottom")
        count_tops(self, 4, "data, bbox_target, landmark_target and label: its data_layer.py:58-61")
        name = os.path.basename(self.ctx.path or "")
        m = JFDA_NET.match(name)
        if not m:
            self.need_input(f"{self.why(self.lp)}: its input side (12, 24 or 48) is the --net train.py was run "
                            f"with, which the net's file name says in the repository (p_, r_ or o_train_val."
                            f"prototxt) and '{name or 'this net'}' does not",
                            [t for t in self.lp.top if t not in self.ctx.inputs])
        net = m.group(1)
        side = SIDES[net]
        ratio = JFDA_RATIO[net]
        n = JFDA_BASE * sum(ratio)
        shapes = [(n, 3, side, side), (n, 4), (n, LANDMARKS), (n,)]
        return shapes, (f"the {net} net (the file's name, as train.py names it), {side}x{side} images "
                        f"(cfg.NET_INPUT_SIZE), {n} a batch once training starts (--size {JFDA_BASE} x "
                        f"DATA_RATIO {'+'.join(map(str, ratio))}; Caffe's setup log shows 4, one of each kind)")


# --- oftenliu/caffe-mtcnn --------------------------------------------------------------------------
OFTEN_NETS = {"pnet": 12, "rnet": 24, "onet": 48}  # caffe-*/config.py:13 NET_INPUT_SIZE


@known("pydata_layer", "MtcnnDataLayer")
@known("pydata_layer_multidb", "MtcnnDataLayer")
class MtcnnDataLayer(Known):
    """caffe-mtcnn's data layer: caffe-pnet/pydata_layer.py (one LMDB) and caffe-{rnet,onet}/
    pydata_layer_multidb.py (four), whose layer code is the same. Setup reads param_str as YAML
    (pydata_layer.py:41, multidb :41): 'batch_size' (default 256, :42) and 'net_type' (default
    'pnet', :43), the side cfg.NET_INPUT_SIZE[net_type] (:44; config.py:13: 12, 24, 48). Reshape
    (pydata_layer.py:63-67, multidb :64-68) makes data (b, 3, s, s), label (b,), bbox (b, 4) and
    landmark (b, 10), the same at every forward."""

    def defaults(self, bottoms):
        self.check(not bottoms, f"{self.source} takes no bottom")
        count_tops(self, 4, "data, label, bbox and landmark: its reshape, pydata_layer.py:64-67")
        params = yaml_dict(self, "{'batch_size': 384, 'net_type': 'pnet'}")
        batch = whole(self, params.get("batch_size", 256), "batch_size")
        net = params.get("net_type", "pnet")
        self.check(net in OFTEN_NETS, f"param_str 'net_type' is {net!r}; {self.source} knows "
                   f"{', '.join(OFTEN_NETS)} (config.py:13 NET_INPUT_SIZE)", fix="give 'net_type' one of those")
        side = OFTEN_NETS[net]
        shapes = [(batch, 3, side, side), (batch,), (batch, 4), (batch, LANDMARKS)]
        given = "param_str's" if "batch_size" in params else "the default"
        return shapes, f"{net}: {side}x{side} images (config.py NET_INPUT_SIZE), batch {batch} ({given} batch_size)"


# --- reasonsolo/mtcnn_caffe ------------------------------------------------------------------------
SOLO_NETS = {"pnet": 12, "rnet": 24, "onet": 48}  # config.py:2 NET_IMG_SIZES
SOLO_EXAMPLE = '{"net": "pnet", "batch": 256}'


def solo_net(layer, params, where):
    net = layer.param(params, "net", where)
    layer.check(net in SOLO_NETS, f"param_str 'net' is {net!r}; {layer.source} knows {', '.join(SOLO_NETS)} "
                f"(config.py:2 NET_IMG_SIZES)", fix="give 'net' one of those")
    return net


@known("python_layer", "DataLayer")
class SoloDataLayer(Known):
    """reasonsolo's data layer (python_layer.py:8-45). Setup evaluates param_str (:10): 'batch'
    (:11) and 'net' (:12), the side config.NET_IMG_SIZES[net] (:13; config.py:2: 12, 24, 48), and
    shapes data (b, 3, s, s), label (b, 1), bbox (b, 4) and, but for pnet, landmarks (b, 10)
    (:22-26, config.py:17 LANDMARK_SIZE 5). Its reshape does nothing (:28-29): the shapes stay."""

    def defaults(self, bottoms):
        self.check(not bottoms, f"{self.source} takes no bottom")
        if not self.reasonsolos():
            # python_layer.DataLayer is a plain name: a layer whose param_str lacks the two keys this
            # one reads, with its module beside the net, is another's, and its source is read instead
            self.module_path = module_file(self.lp.python_param.module, self.ctx.path, self.ctx.root)
            if self.module_path:
                return FromSource.defaults(self, bottoms)
        params = literal_dict(self, SOLO_EXAMPLE)
        batch = whole(self, self.param(params, "batch", "python_layer.py:11"), "batch")
        net = solo_net(self, params, "python_layer.py:12")
        side = SOLO_NETS[net]
        shapes = [(batch, 3, side, side), (batch, 1), (batch, 4)]
        if net != "pnet":
            shapes.append((batch, LANDMARKS))
        count_tops(self, len(shapes), f"data, label, bbox{'' if net == 'pnet' else ', landmarks'} for {net}: "
                   "python_layer.py:22-26")
        return shapes, f"{net}: {side}x{side} images (config.py NET_IMG_SIZES), batch {batch} (param_str's 'batch')"

    def reasonsolos(self):
        """Whether param_str is a dict literal with the keys reasonsolo's setup reads (:11-12)."""
        try:
            params = ast.literal_eval(self.lp.python_param.param_str)
        except (ValueError, SyntaxError):
            return False
        return isinstance(params, dict) and {"net", "batch"} <= set(params)

    def origin(self, reason):
        return f"assumed: {self.source}, {reason}" if self.module_path else super().origin(reason)


@known("python_layer", "LabelBridgeLayer")
class LabelBridgeLayer(Known):
    """reasonsolo's label bridge (python_layer.py:48-124): per pair of bottoms (scores and labels,
    bbox predictions and targets, and but for pnet landmark predictions and targets), tops as long
    as the bottoms' first axis: (N0, 2, 1, 1) and (N0, 1) (:57-58), (N2, 4, 1, 1) and (N2, 4)
    (:66-67), (N4, 10, 1, 1) and (N4, 10) (:73-74). The valid rows are copied to the front, the
    rest filled (:81-101). Its backward zeroes every bottom's diff (:104-105, :111-112, :119-120)
    and copies back the top diffs of the bottoms propagate_down names (:106-108, :113-116, :121-124)."""

    def defaults(self, bottoms):
        net = solo_net(self, literal_dict(self, '{"net": "pnet"}'), "python_layer.py:51")
        n = 4 if net == "pnet" else 6
        self.check(len(bottoms) == n, f"{self.source} reads {n} bottoms for {net} (python_layer.py:54-74); "
                   f"{len(bottoms)} are given")
        count_tops(self, n, f"python_layer.py:57-74 for {net}")
        for j in range(0, n, 2):
            self.check(len(bottoms[j]) >= 1, f"bottom {j} {tuple(bottoms[j])} needs a first axis")
        shapes = [(bottoms[0][0], 2, 1, 1), (bottoms[0][0], 1), (bottoms[2][0], 4, 1, 1), (bottoms[2][0], 4)]
        if net != "pnet":
            shapes += [(bottoms[4][0], LANDMARKS, 1, 1), (bottoms[4][0], LANDMARKS)]
        return shapes, f"{net}: one row per row of its bottoms (python_layer.py:57-74)"

    def touches(self, run):
        t = [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        t += [touch.top(j, "data", "forward") for j in range(len(run.tops))]
        down = list(run.propagate_down) + [False] * len(run.bottoms)
        t += [touch.top(j, "diff", "backward") for j in range(len(run.tops)) if down[j]]
        # every bottom's diff is zeroed by the Python code; one no layer below reads (propagate_down 0:
        # the labels, the targets) is only ever touched on the host
        t += [touch.bottom(j, "diff", "backward", device="device" if down[j] else "host")
              for j in range(len(run.bottoms))]
        return t
