"""DetectNet's Python layers, shipped inside NVIDIA's Caffe (NVIDIA/caffe, branch caffe-0.15 at
4b8d54d892116b9cb6822a917065a616f56b1292, python/caffe/layers/detectnet/clustering.py and mean_ap.py,
last changed by a21cdae): their tops' shapes, from that source (never imported or run; see
python_layers). DIGITS' DetectNet nets run them in the TEST net, on the coverage and box maps,
to score detections. Each shape is shown as an assumption with the --input flags that change it.

They are registered for any net (not only NVIDIA's Caffe's schema): a DetectNet deploy net, of BVLC's
layer types alone, ends in ClusterDetections too.
"""
from .python_layers import Known, known
from .python_mtcnn import count_tops

MODULE = "caffe.layers.detectnet."
MAX_BOXES = 50  # clustering.py:8, mean_ap.py:5: the rows of each image's list of boxes
BOX_VALUES = 5  # xl, yt, xr, yb and a confidence, a class or 0 (clustering.py:18-19, 80-81; mean_ap.py:12-17)


def param_list(layer, types, where):
    """param_str split at commas (`self.param_str.split(',')`) and each entry read as int() or float()
    reads it (whitespace around a number is allowed); the entries past `types` are left as strings.
    A missing entry is the IndexError the layer's setup raises; a wrong one its ValueError,
    "Parameter string missing or data type is wrong!" (`where`)."""
    text = layer.lp.python_param.param_str
    entries = text.split(",")
    layer.check(len(entries) >= len(types), f"param_str {text!r} has {len(entries)} comma-separated values; "
                f"{layer.source} reads at least {len(types)} ({where}: an IndexError)",
                fix="give them, as its docstring's example does")
    values = []
    for kind, entry in zip(types, entries):
        try:
            values.append(kind(entry))
        except ValueError:
            layer.fail(f"Parameter string missing or data type is wrong! ({layer.source}, {where}): {entry.strip()!r} "
                       f"is not {'an int' if kind is int else 'a number'}", fix="give the values its docstring lists")
    return values, entries[len(types):]


class Clustering(Known):
    """ClusterGroundtruth and ClusterDetections: setup reads param_str (the image's size, the stride,
    and the class count, 1 where not given) and requires one top per class; reshape requires the
    coverage (bottom 0) to have that many channels and gives each top (N, MAX_BOXES, 5), N bottom 0's
    first axis; forward writes each top's data, backward is `pass`."""

    TYPES = ()  # the entries setup reads before the class count
    WHERE = ""  # the setup's lines
    RESHAPE = ""  # the reshape's lines

    def classes(self):
        _, rest = param_list(self, self.TYPES, self.WHERE)
        return self.int_at(rest[0]) if rest else 1

    def int_at(self, entry):
        try:
            return int(entry)
        except ValueError:
            self.fail(f"Parameter string missing or data type is wrong! ({self.source}, {self.WHERE}): "
                      f"{entry.strip()!r} (the class count) is not an int", fix="give the values its docstring lists")

    def defaults(self, bottoms):
        classes = self.classes()
        self.check(len(self.lp.top) == classes, f"Unexpected number of tops: {len(self.lp.top)} != {classes} "
                   f"({self.source}, {self.WHERE}: one top per class of param_str)",
                   fix="name one top per class")
        self.check(len(bottoms) >= 1 and len(bottoms[0]) >= 2, f"{self.source} reads the coverage's shape[0] and "
                   f"shape[1] ({self.RESHAPE}); bottom 0 is {tuple(bottoms[0]) if bottoms else 'missing'}")
        self.check(bottoms[0][1] == classes, f"Unexpected number of classes: {bottoms[0][1]} != {classes}, bottom[0] "
                   f"shape={tuple(bottoms[0])} ({self.source}, {self.RESHAPE})", fix="give param_str the class count")
        n = bottoms[0][0]
        return [(n, MAX_BOXES, BOX_VALUES)] * classes, (
            f"each of {n} images' list of at most {MAX_BOXES} boxes of {BOX_VALUES} values, one top per class "
            f"({classes}), as its reshape makes them ({self.RESHAPE}, MAX_BOXES {MAX_BOXES})")


@known(MODULE + "clustering", "ClusterGroundtruth")
class ClusterGroundtruth(Clustering):
    """clustering.py:11-70: setup reads image_size_x, image_size_y, stride and num_classes (1 where
    param_str has three values) (:41-50), one top per class (:51-52); reshape (:54-61)."""

    TYPES = (int, int, int)
    WHERE = "clustering.py:41-52"
    RESHAPE = "clustering.py:54-61"


@known(MODULE + "clustering", "ClusterDetections")
class ClusterDetections(Clustering):
    """clustering.py:73-137: setup reads image_size_x, image_size_y, stride, gridbox_cvg_threshold,
    gridbox_rect_thresh, gridbox_rect_eps, min_height and num_classes (1 where param_str has seven
    values) (:104-117), one top per class (:118-119); reshape (:121-128)."""

    TYPES = (int, int, int, float, int, float, int)
    WHERE = "clustering.py:104-119"
    RESHAPE = "clustering.py:121-128"


@known(MODULE + "mean_ap", "ScoreDetections")
class ScoreDetections(Known):
    """mean_ap.py:8-50: reshape gives top 0 (N, MAX_BOXES, 5), N the ground truth's (bottom 0) first
    axis, and asserts the detections (bottom 1) have as many (:39-43). No param_str."""

    def defaults(self, bottoms):
        self.check(len(bottoms) >= 2 and all(len(b) >= 1 for b in bottoms[:2]),
                   f"{self.source} reads bottom[0] and bottom[1]'s first axes (mean_ap.py:40-43)")
        self.check(bottoms[0][0] == bottoms[1][0], f"# of images not matching! ({self.source}, mean_ap.py:43): "
                   f"{tuple(bottoms[0])} and {tuple(bottoms[1])}")
        count_tops(self, 1, "the scored boxes: mean_ap.py:42")
        n = bottoms[0][0]
        return [(n, MAX_BOXES, BOX_VALUES)], (
            f"each of {n} images' {MAX_BOXES} scored boxes of {BOX_VALUES} values (mean_ap.py:39-42)")


@known(MODULE + "mean_ap", "mAP")
class MAP(Known):
    """mean_ap.py:53-102: reshape gives mAP, precision and recall one value each (:84-87); setup
    reads nothing of param_str."""

    def defaults(self, bottoms):
        count_tops(self, 3, "mAP, precision and recall: mean_ap.py:85-87")
        return [(1,)] * 3, "one value each (mean_ap.py:84-87)"
