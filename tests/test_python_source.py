"""Python layers whose module is beside the net: top shapes read off the module's source (parsed with
ast, never imported or run), and every case where the source does not say, which asks as before.

Expected shapes are read by hand off the sources below: the real MTCNN training net of
CongWeilin/mtcnn-caffe (tests/data/python_source, SOURCES.md) and small modules written here.
"""
import json
import os

from conftest import DATA, run_in_process
from protoaudit import build_nets

MTCNN = os.path.join(DATA, "python_source", "mtcnn_caffe_12net")


def test_mtcnns_python_layers_are_read_off_their_source():
    """pythonLayer.py (Python 2, tabs and spaces mixed), by hand:
    Data_Layer_train.setup: self.batch_size = 64 (line 21), net_side = 12 (line 22); top[0].reshape(
    self.batch_size, 3, net_side, net_side) (line 30): 64x3x12x12; top[1..3] 64x1, 64x4, 64x10
    (lines 31-33); its reshape is `pass`. cls_Layer_fc.reshape: top[0].reshape(len(bottom[1].data),
    2,1,1) (line 233): bottom 1 is `label`, 64 rows: 64x2x1x1; top[1] 64x1 (line 234).
    regression_Layer.reshape: top[0].reshape(1) (line 204)."""
    (train,) = [n for n in build_nets(os.path.join(MTCNN, "train12.prototxt")) if n.phase == "TRAIN"]
    assert list(train.layer("PythonLayer").top_shapes) == [(64, 3, 12, 12), (64, 1), (64, 4), (64, 10)]
    assert list(train.layer("cls_bridge").top_shapes) == [(64, 2, 1, 1), (64, 1)]
    assert list(train.layer("roi_loss").top_shapes) == [(1,)]
    said = {a.layer: a for a in train.assumptions}
    assert "read off its source, pythonLayer.py (line 30, 31, 32, 33), never run" in said["PythonLayer"].what
    assert said["PythonLayer"].override.startswith("--input data=64x3x12x12 --input label=64x1")
    assert "pythonLayer.py (line 233, 234)" in said["cls_bridge"].what


def test_mtcnns_net_audits_with_no_flags_and_batch_moves_the_data_layer():
    run = run_in_process(os.path.join(MTCNN, "train12.prototxt"), "--format", "json", "--batch", "8")
    assert run.returncode == 0, run.stderr
    shapes = {(d["net"], d["top"]): d["shape"] for d in json.loads(run.stdout)["data_shapes"]}
    assert shapes[("train", "data")] == [8, 3, 12, 12]  # --batch moves the train net's data source
    assert shapes[("test", "data")] == [64, 3, 12, 12]  # the test net keeps the layer's own batch


LAYER = """import caffe
import numpy as np

class Data(caffe.Layer):
    def setup(self, bottom, top):
        params = eval(self.param_str)
        self.batch = int(params['batch'])
        size = params.get('size', 24)
        top[0].reshape(self.batch, 3, size, size)
        top[1].reshape(self.batch)
    def reshape(self, bottom, top):
        pass
    def forward(self, bottom, top):
        top[0].data[...] = 0

class Copy(caffe.Layer):
    def setup(self, bottom, top):
        pass
    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)
        top[1].reshape(bottom[0].num, bottom[0].channels * 2)
"""

NET = """name: "n"
layer { name: "data" type: "Python" top: "data" top: "label"
  python_param { module: "mylayers" layer: "Data" param_str: "{'batch': 16}" } }
layer { name: "copy" type: "Python" bottom: "data" top: "a" top: "b"
  python_param { module: "mylayers" layer: "Copy" } }
layer { name: "fc" type: "InnerProduct" bottom: "a" top: "fc" inner_product_param { num_output: 2 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
"""


def _net(tmp_path, layer_source, net=NET, folder="."):
    (tmp_path / folder).mkdir(exist_ok=True)
    (tmp_path / folder / "mylayers.py").write_text(layer_source)
    (tmp_path / "net.prototxt").write_text(net)
    return str(tmp_path / "net.prototxt")


def test_param_str_entries_defaults_and_bottom_shapes_are_followed(tmp_path):
    """Data: batch = int(eval(param_str)['batch']) = 16, size = .get('size', 24) = 24: 16x3x24x24
    and 16. Copy: *bottom[0].data.shape = 16x3x24x24; bottom[0].num x channels * 2 = 16x6."""
    (net,) = build_nets(_net(tmp_path, LAYER))
    assert list(net.layer("data").top_shapes) == [(16, 3, 24, 24), (16,)]
    assert list(net.layer("copy").top_shapes) == [(16, 3, 24, 24), (16, 6)]


ARRAYS = """import caffe
import numpy as np


class Data(caffe.Layer):
    def setup(self, bottom, top):
        params = eval(self.param_str)
        self.batch_size = params['batch']
        self.crop = params.get('crop', 24)

    def reshape(self, bottom, top):
        self.data = np.zeros((self.batch_size, 3, self.crop, self.crop))
        self.label = np.zeros((self.batch_size, 1))
        for x in range(0, self.batch_size):
            self.data[x,] = self.load_image(x)
        top[0].reshape(*self.data.shape)
        top[1].reshape(*self.label.shape)


class Copy(caffe.Layer):
    def setup(self, bottom, top):
        pass
    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)
        top[1].reshape(bottom[0].num, 1)
"""


def test_the_shape_of_an_array_the_layer_makes_is_followed(tmp_path):
    """gombru/pycaffeCNNTemplate's customDataLayer, tried as a new user would: reshape makes self.data =
    np.zeros((batch_size, 3, crop_w, crop_h)) from param_str and shapes its top with *self.data.shape;
    the loop that fills it (a subscript) changes no shape. Here batch 16, crop 24 (.get's default):
    16x3x24x24 and a 16x1 label."""
    (net,) = build_nets(_net(tmp_path, ARRAYS))
    assert list(net.layer("data").top_shapes) == [(16, 3, 24, 24), (16, 1)]


def test_names_unpacked_from_a_tuple_are_followed(tmp_path):
    """`n, c, h, w = bottom[0].data.shape` and DeepID's siamese SplitLayer's `label1, label2 =
    bottom[0].data, bottom[1].data; N = label1.shape[0]`: each name takes its item. From the data's
    16x3x24x24: top a is n x c*2 x h x w = 16x6x24x24, top b is N x 1 = 16x1. A count that differs
    (`n, c = bottom[0].data.shape`, 4 items) leaves the names unknown, and the layer asks."""
    source = LAYER.replace("""        top[0].reshape(*bottom[0].data.shape)
        top[1].reshape(bottom[0].num, bottom[0].channels * 2)""", """        n, c, h, w = bottom[0].data.shape
        top[0].reshape(n, c * 2, h, w)
        first, again = bottom[0].data, bottom[0].data
        N = first.shape[0]
        top[1].reshape(N, 1)""")
    (net,) = build_nets(_net(tmp_path, source))
    assert list(net.layer("copy").top_shapes) == [(16, 6, 24, 24), (16, 1)]
    path = _net(tmp_path, source.replace("n, c, h, w = bottom[0].data.shape", "n, c = bottom[0].data.shape"))
    run = run_in_process(path, cwd=tmp_path)
    assert run.returncode == 2 and "layer 'copy'" in run.stderr and "--input a=" in run.stderr, run.stderr


def test_a_shape_written_in_param_str_as_numbers_is_read(tmp_path):
    """OpenSALICON's CustomData: setup takes `vals = [int(x) for x in self.param_str.split(',')]`,
    `self.MY_TOP_SHAPE = tuple(vals)`, and reshape gives top[0].reshape(*self.MY_TOP_SHAPE): a
    param_str of "1,3,120,160" is the shape 1x3x120x160. map(int, ...) reads the same; a part that is
    not a number ("1,3,h,160") leaves the shape unread."""
    source = LAYER.replace("""        params = eval(self.param_str)
        self.batch = int(params['batch'])
        size = params.get('size', 24)
        top[0].reshape(self.batch, 3, size, size)
        top[1].reshape(self.batch)""", """        vals = [int(x) for x in self.param_str.split(',')]
        self.MY_TOP_SHAPE = tuple(vals)
        top[1].reshape(tuple(map(int, self.param_str.split(',')))[0])
    def reshape(self, bottom, top):
        top[0].reshape(*self.MY_TOP_SHAPE)""").replace("""    def reshape(self, bottom, top):
        pass
""", "", 1)
    net = NET.replace("param_str: \"{'batch': 16}\"", 'param_str: "1,3,120,160"')
    (built,) = build_nets(_net(tmp_path, source, net))
    assert list(built.layer("data").top_shapes) == [(1, 3, 120, 160), (1,)]
    run = run_in_process(_net(tmp_path, source, net.replace("1,3,120,160", "1,3,h,160")), "--strict", cwd=tmp_path)
    assert run.returncode == 2 and "--input data=" in run.stderr, run.stderr


def test_a_branch_the_bottoms_axes_decide_is_run_as_the_code_would(tmp_path):
    """DeepID2-Inception's NormVecLayer: `if len(bottom[0].data.shape) == 2:` shapes its top (N, C),
    else (N, C, 1, 1). Its bottom here is the data, 16x3x24x24 (4 axes): the else runs, 16x3x1x1;
    the other top shapes (N, 2) where the test is `!= 2`, as the code would."""
    source = LAYER.replace("""        top[0].reshape(*bottom[0].data.shape)
        top[1].reshape(bottom[0].num, bottom[0].channels * 2)""", """        if len(bottom[0].data.shape) == 2:
            top[0].reshape(bottom[0].data.shape[0], bottom[0].data.shape[1])
        else:
            top[0].reshape(bottom[0].data.shape[0], bottom[0].data.shape[1], 1, 1)
        if len(bottom[0].data.shape) != 2:
            top[1].reshape(bottom[0].data.shape[0], 2)""")
    (net,) = build_nets(_net(tmp_path, source))
    assert list(net.layer("copy").top_shapes) == [(16, 3, 1, 1), (16, 2)]


def test_an_array_made_from_a_list_of_dimensions_is_followed(tmp_path):
    """MEnet's read_data1.input_layer writes np.zeros([self.batch_size, 3, h, w]): numpy takes a list
    of dimensions as it takes a tuple. The same 16x3x24x24 and 16x1 as above."""
    source = ARRAYS.replace("np.zeros((self.batch_size, 3, self.crop, self.crop))",
                            "np.zeros([self.batch_size, 3, self.crop, self.crop])").replace(
        "np.zeros((self.batch_size, 1))", "np.zeros([self.batch_size, 1])")
    (net,) = build_nets(_net(tmp_path, source))
    assert list(net.layer("data").top_shapes) == [(16, 3, 24, 24), (16, 1)]


def test_a_module_one_folder_up_is_found(tmp_path):
    """PYTHONPATH usually names the repository's root; the net sits in a folder below it."""
    (tmp_path / "proto").mkdir()
    (tmp_path / "layers").mkdir()
    (tmp_path / "layers" / "mylayers.py").write_text(LAYER)
    (tmp_path / "proto" / "net.prototxt").write_text(NET.replace('"mylayers"', '"layers.mylayers"'))
    (net,) = build_nets(str(tmp_path / "proto" / "net.prototxt"))
    assert list(net.layer("data").top_shapes) == [(16, 3, 24, 24), (16,)]


def test_a_branch_param_str_decides_is_run_as_the_code_would(tmp_path):
    """`'k' in params`, `params.has_key('k')` (Python 2), elif and else, at setup's own level: the
    branch param_str's {'batch': 16} takes runs, the others are skipped. Here 'size' is absent: size
    32 from the else; has_key('batch') is true: channels 1 from the first branch, not the elif's 5."""
    source = LAYER.replace("        size = params.get('size', 24)\n",
                           "        if 'size' in params:\n            size = params['size']\n"
                           "        else:\n            size = 32\n"
                           "        if params.has_key('batch'):\n            channels = 1\n"
                           "        elif 'channels' in params.keys():\n            channels = params['channels']\n"
                           "        else:\n            channels = 5\n").replace(
        "top[0].reshape(self.batch, 3, size, size)", "top[0].reshape(self.batch, channels, size, size)")
    (net,) = build_nets(_net(tmp_path, source))
    assert list(net.layer("data").top_shapes) == [(16, 1, 32, 32), (16,)]
    # a test param_str does not decide leaves the branch's names unknown, as before
    stderr = _asks(tmp_path, source.replace("if 'size' in params:", "if self.phase == 'train':"))
    assert "depends on values only the running code has" in stderr


def _asks(tmp_path, source):
    """The refusal --strict gives (without it, the layer's data is assumed as an absent dataset's:
    tests/test_assumed_images.py), after checking that a plain run audits it so."""
    path = _net(tmp_path, source)
    plain = run_in_process(path, cwd=tmp_path)
    assert plain.returncode == 0 and "for data shapes protoaudit assumed" in plain.stdout, plain.stderr
    run = run_in_process(path, "--strict", cwd=tmp_path)
    assert run.returncode == 2, run.stdout
    assert "--input data=" in run.stderr and "Traceback" not in run.stderr
    return run.stderr


def test_what_only_running_code_knows_is_asked_for(tmp_path):
    # a shape set again by forward, batch by batch, from what the batch holds
    stderr = _asks(tmp_path, LAYER.replace("top[0].data[...] = 0", "blob = self.next_batch()\n"
                                           "        top[0].reshape(*blob.shape)"))
    assert "its forward reshapes its tops to each batch" in stderr
    # a value another method sets (a training script calls it)
    stderr = _asks(tmp_path, LAYER.replace("    def forward(self, bottom, top):",
                                           "    def set_batch(self, n):\n        self.batch = n\n"
                                           "    def forward(self, bottom, top):"))
    assert "depends on values only the running code has" in stderr
    # a shape inside a branch
    stderr = _asks(tmp_path, LAYER.replace("        top[1].reshape(self.batch)",
                                           "        for _ in range(2):\n            top[1].reshape(self.batch)"))
    assert "top 1 is shaped inside a branch or loop" in stderr
    # a name of setup's own, read again in reshape, where Python would not find it
    stderr = _asks(tmp_path, LAYER.replace("        top[1].reshape(self.batch)\n", "").replace(
        "    def reshape(self, bottom, top):\n        pass", "    def reshape(self, bottom, top):\n"
        "        top[1].reshape(size)"))
    assert "depends on values only the running code has" in stderr
    # a value made by a function protoaudit does not follow
    stderr = _asks(tmp_path, LAYER.replace("size = params.get('size', 24)", "size = config.size(params)"))
    assert "depends on values only the running code has" in stderr
    # no such class in the module
    stderr = _asks(tmp_path, LAYER.replace("class Data(", "class Other("))
    assert "no class Data in mylayers.py" in stderr


def test_a_forward_that_reshapes_to_its_bottoms_shape_is_followed(tmp_path):
    """hizhangp/triplet's L2NormLayer: setup gives (num, channels); forward reshapes to
    *bottom[0].data.shape each batch, which the run has: here the copy of 16x3x24x24 stays 4-D.
    A reshape commented out in forward (essishen93/Triplet-Loss's data layer) is not run."""
    source = LAYER.replace("top[0].data[...] = 0", "# top[0].reshape(*(blob.shape))\n        top[0].data[...] = 0")
    source = source.replace("""        pass
    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)""", """        top[0].reshape(bottom[0].num, bottom[0].channels)
    def forward(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)
    def reshape(self, bottom, top):""")
    (net,) = build_nets(_net(tmp_path, source))
    assert list(net.layer("data").top_shapes) == [(16, 3, 24, 24), (16,)]
    assert list(net.layer("copy").top_shapes) == [(16, 3, 24, 24), (16, 6)]


CONFIG = """BATCH_SIZE = 240
TRIPLET = True
CHANNELS = 1 + 2
"""

TRIPLET = """import caffe
import config as cfg
from numpy import *
from settings import *

class Data(caffe.Layer):
    def setup(self, bottom, top):
        if cfg.TRIPLET:
            self.batch = cfg.BATCH_SIZE / 3 * 3
        else:
            self.batch = 7
        top[0].reshape(self.batch, cfg.CHANNELS, SIDE, SIDE)
        top[1].reshape(self.batch)
    def reshape(self, bottom, top):
        pass

class Copy(caffe.Layer):
    def setup(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)
        top[1].reshape(cfg.BATCH_SIZE / 3, shape(bottom[0].data)[1])
    def reshape(self, bottom, top):
        pass
"""


def test_a_config_modules_plain_values_and_a_sibling_folder_are_followed(tmp_path):
    """essishen93/Triplet-Loss's pattern: the layers live in a folder of their own beside the nets'
    (a script puts it on sys.path), and read config.BATCH_SIZE = 240 of a module beside them. By hand:
    TRIPLET is True, so batch = 240 / 3 * 3 = 240 (Python 2 integer division); channels 1 + 2 = 3;
    SIDE = 28 from `from settings import *`: data 240x3x28x28, label 240. Copy: the data's shape, and
    (240 / 3, shape(data)[1]) = 80x3. The modules are read, never imported."""
    (tmp_path / "models").mkdir()
    code = tmp_path / "tripletcode"
    code.mkdir()
    (code / "mylayers.py").write_text(TRIPLET)
    (code / "config.py").write_text(CONFIG)
    (code / "settings.py").write_text("import os\nSIDE = 28\nos.remove('x')\n")
    # the script that runs the layers puts their folder on sys.path (_init_paths.py's add_path)
    (code / "_init_paths.py").write_text("import sys\nsys.path.insert(0, 'tripletcode')\n")
    (tmp_path / "models" / "net.prototxt").write_text(NET.replace("{'batch': 16}", ""))
    (net,) = build_nets(str(tmp_path / "models" / "net.prototxt"))
    assert list(net.layer("data").top_shapes) == [(240, 3, 28, 28), (240,)]
    assert list(net.layer("copy").top_shapes) == [(240, 3, 28, 28), (80, 3)]
    net_path = str(tmp_path / "models" / "net.prototxt")
    # a folder no script puts on sys.path (another repository's, beside this one) is not looked in
    (code / "_init_paths.py").unlink()
    run = run_in_process(net_path)
    assert run.returncode == 2 and "Python layer (mylayers.Copy)" in run.stderr
    assert "its source was read" not in run.stderr
    (code / "_init_paths.py").write_text("import sys\nsys.path.append('tripletcode')\n")
    # a flag the config gives two values leaves the branch unread: the data is assumed as an absent
    # dataset's, and --strict asks for it
    (code / "config.py").write_text(CONFIG + "TRIPLET = False\n")
    run = run_in_process(net_path)
    assert run.returncode == 0 and "for data shapes protoaudit assumed" in run.stdout, run.stderr
    run = run_in_process(net_path, "--strict")
    assert run.returncode == 2 and "mylayers.py:12 depends on values only the running code has" in run.stderr


def test_the_module_is_never_run(tmp_path):
    """Its top level would write a file if imported; the audit reads it and the file never appears."""
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').write('x')\n" + LAYER
    (net,) = build_nets(_net(tmp_path, source))
    assert list(net.layer("data").top_shapes)[0] == (16, 3, 24, 24)
    assert not marker.exists()


def test_without_the_module_the_layer_is_asked_for_as_before(tmp_path):
    (tmp_path / "net.prototxt").write_text(NET)
    run = run_in_process("net.prototxt", cwd=tmp_path)
    assert run.returncode == 2
    assert "Python layer (mylayers.Data): its top shapes are set by Python code, which protoaudit never runs" \
        in run.stderr
    assert "its source was read" not in run.stderr


def test_a_declared_python_data_layer_gives_the_nets_batch(tmp_path):
    """Its module absent, the data layer's tops given with --input: the batch is their first axis."""
    (tmp_path / "net.prototxt").write_text("\n".join(
        line for line in NET.replace('bottom: "a" top: "fc"', 'bottom: "data" top: "fc"').split("\n")
        if "copy" not in line and "Copy" not in line))
    run = run_in_process("net.prototxt", "--input", "data=16x3x24x24", "--input", "label=16", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "(batch 16, forward and backward)" in run.stdout.splitlines()[1]


def test_a_package_pip_installs_and_a_folder_a_script_appends_are_looked_in(tmp_path):
    """akolesnikoff/SEC's layers are a package its setup.py installs (pylayers/setup.py, and
    pylayers/pylayers/__init__.py's `from .pylayers import *` taking the classes from pylayers.py);
    Tushar-N/cartoon-colorization's scripts at the repository's root do sys.path.append('%s/resources/'
    % os.getcwd()) for the layers under resources/, two folders above the net. Both are read: the
    shapes are LAYER's, by hand 16x3x24x24 and 16 (see test_param_str_entries...)."""
    (tmp_path / "training").mkdir()
    (tmp_path / "training" / "net.prototxt").write_text(NET.replace('"mylayers"', '"pylayers"'))
    package = tmp_path / "pylayers" / "pylayers"
    package.mkdir(parents=True)
    (tmp_path / "pylayers" / "setup.py").write_text("from setuptools import setup\nsetup(name='pylayers')\n")
    (package / "__init__.py").write_text("from .pylayers import *\n")
    (package / "pylayers.py").write_text(LAYER)
    (net,) = build_nets(str(tmp_path / "training" / "net.prototxt"))
    assert list(net.layer("data").top_shapes) == [(16, 3, 24, 24), (16,)]

    other = tmp_path / "other"
    (other / "models" / "train_val").mkdir(parents=True)
    (other / "models" / "train_val" / "net.prototxt").write_text(NET)
    (other / "resources").mkdir()
    (other / "resources" / "mylayers.py").write_text(LAYER)
    path = str(other / "models" / "train_val" / "net.prototxt")
    run = run_in_process(path, "--strict")
    assert run.returncode == 2 and "its source was read" not in run.stderr  # nothing says resources/ is used
    (other / "colorize.py").write_text("import os, sys\nsys.path.append('%s/resources/' % os.getcwd())\n")
    (net,) = build_nets(path)
    assert list(net.layer("copy").top_shapes) == [(16, 3, 24, 24), (16, 6)]


def test_the_largest_batch_search_rebuilds_a_layer_read_off_its_source(tmp_path):
    """--gpu-mem builds the net again at other batches, each Python layer made anew as the class it was
    sized by the first time: the layer read off its source is found again, never an internal error."""
    path = _net(tmp_path, LAYER)
    run = run_in_process(path, "--gpu-mem", "8G", cwd=tmp_path)
    assert run.returncode in (0, 1) and "Largest batch that fits" in run.stdout, run.stderr


def test_a_package_that_imports_its_modules_as_python_2_does_is_followed(tmp_path):
    """A package's __init__.py of Python 2 takes a class from a module beside it without the dot
    (`from mylayers import Data`, ZhouYzzz/project's layer/__init__.py), as Python 2's implicit
    relative import does: the class is read in that module. The shapes are LAYER's, by hand
    16x3x24x24 and 16 (see test_param_str_entries...)."""
    (tmp_path / "layer").mkdir()
    (tmp_path / "layer" / "__init__.py").write_text("# Data Layers\nfrom mylayers import Data, Copy\n")
    (tmp_path / "layer" / "mylayers.py").write_text(LAYER)
    (tmp_path / "net.prototxt").write_text(NET.replace('"mylayers"', '"layer"'))
    (net,) = build_nets(str(tmp_path / "net.prototxt"))
    assert list(net.layer("data").top_shapes) == [(16, 3, 24, 24), (16,)]


def test_a_folder_an_init_paths_script_adds_is_looked_in(tmp_path):
    """py-faster-rcnn's tools/_init_paths.py way, as MEnet's and lstm_trading_strategy's root
    _init_paths.py write it: `layers_path = osp.join(this_dir, 'layers')`, then `add_path(layers_path)`,
    whose body does sys.path.insert. The module in layers/ is read (LAYER's shapes, by hand 16x3x24x24
    and 16). A script that joins the name into a path but never changes sys.path is no evidence."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "train.prototxt").write_text(NET)
    (tmp_path / "layers").mkdir()
    (tmp_path / "layers" / "mylayers.py").write_text(LAYER)
    (tmp_path / "_init_paths.py").write_text(
        "import os.path as osp\nimport sys\n\n\ndef add_path(path):\n    print(path)\n\n\n"
        "this_dir = osp.dirname(__file__)\nlayers_path = osp.join(this_dir, 'layers')\nadd_path(layers_path)\n")
    path = str(tmp_path / "model" / "train.prototxt")
    run = run_in_process(path, "--strict")
    assert run.returncode == 2 and "its source was read" not in run.stderr, run.stderr
    (tmp_path / "_init_paths.py").write_text((tmp_path / "_init_paths.py").read_text().replace(
        "    print(path)\n", "    if path not in sys.path:\n        sys.path.insert(0, path)\n"))
    (net,) = build_nets(path)
    assert list(net.layer("data").top_shapes) == [(16, 3, 24, 24), (16,)]


SAMPLER = LAYER.replace("""class Copy(caffe.Layer):
    def setup(self, bottom, top):
        pass
    def reshape(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)""", """class Copy(caffe.Layer):
    def setup(self, bottom, top):
        top[0].reshape(*bottom[0].data.shape)
    def forward(self, bottom, top):
        kept = [x for x in bottom[0].data if x.sum() > 0]
        top[0].reshape(*np.array(kept).shape)
    def reshape(self, bottom, top):""")


def test_a_forward_that_reshapes_to_what_each_batch_makes_keeps_setups_shapes(tmp_path):
    """A sampler or filter in the manner of hizhangp/triplet's TripletSampleLayer (setup: the bottom's
    shape; forward: as many rows as the batch yields, np.array(kept).shape): Net::Init allocates the
    shape setup gives, 16x3x24x24 (Data's top 0, as derived above), so it is taken and said to be the
    setup's; --strict asks for it instead. Copy's top 1 is still bottom[0].num x channels * 2 = 16x6."""
    path = _net(tmp_path, SAMPLER)
    (net,) = build_nets(path)
    assert list(net.layer("copy").top_shapes) == [(16, 3, 24, 24), (16, 6)]
    said = {a.layer: a.what for a in net.assumptions}
    assert ("its forward (line 21) reshapes them to what each batch makes, which only running it would tell: these "
            "are the shapes its setup gives, which Caffe's Net::Init allocates") in said["copy"]
    strict = run_in_process(path, "--strict", "--input", "data=16x3x24x24", "--input", "label=16", cwd=tmp_path)
    assert strict.returncode == 2 and "Traceback" not in strict.stderr
    assert "its forward reshapes its tops to each batch (mylayers.py:21)" in strict.stderr
    assert "--input a=" in strict.stderr
