"""YOLOv2's Caffe port (gklz1982/caffe-yolov2 ebb2702), as its sources shape its layers.

The fork is BVLC Caffe f28f5ae (June 2016) with YOLO's layers added: BoxData, Reorg and RegionLoss,
which its nets use, and DetectionLoss, EvalDetection, DetectionOutput and DetectionEvaluate, which
have no rule here (their tops are given with --input; protoaudit.read.whose.OWN_UNSIZED). Of BVLC's
files it changes base_data_layer (PREFETCH_COUNT = 1 batch in an array, copied into the tops:
base_data_layer.hpp:50-55, 74-80, base_data_layer.cpp:121-147, .cu:8-35), data_transformer (box
labels, and an RNG in every TRAIN layer: data_transformer.cpp:625-636), io (box labels), net
(quantization helpers), solver.cpp (Test reads detection rows: first_test_stops), sgd_solver.cpp (the
multifixed lr_policy) and base_conv_layer.hpp (a member made protected); every other file of
src/caffe and include/caffe is f28f5ae's byte for byte. Of June 2016's BVLC code, protoaudit counts
what differs from BVLC 9b89154's: BatchNorm keeps the statistics' lr_mult as the file gives them
(and no upgrade zeroes them: protoaudit.read.upgrade), and the factory has no cuDNN Deconvolution
(protoaudit.layers.conv). Its Convolution, Scale, ReLU, Pooling and Concat allocate what 9b89154's do
(the differences are messages, the FLOOR round_mode its caffe.proto lacks, and destructors).

File and line references are to that commit's src/caffe/layers/*.cpp/.cu and include/caffe/layers/*.hpp.
"""
from . import touch
from .base import Assumption, Layer, count, legacy_shape, refuse_in_place, register, solver_test_check
from .data import OPENCV_RESIZE_BYTES, CopyingPrefetching, Data as BVLCData, ImageData as BVLCImageData, \
    ThroughDataReader, WindowData as BVLCWindowData
from .normalization import BatchNorm as BVLCBatchNorm

FORK = "yolov2"
BOXES, BOX_VALUES = 30, 5  # a BoxData label: 30 boxes of (class, x, y, w, h) per image (box_data_layer.cpp:65)
# What the fork's one recipe for a BoxData database writes (data/yolo/convert.sh: convert_box_data
# --resize_width=416 --resize_height=416 --encoded=true --encode_type=jpg, colour images)
RECIPE = (3, 416, 416)
RECIPE_SCRIPT = "data/yolo/convert.sh"


class ForkPrefetching(CopyingPrefetching):
    """The fork's BasePrefetchingDataLayer: PREFETCH_COUNT = 1 batch (base_data_layer.hpp:74) in an
    array, a Batch being data_, label_ and the vector multi_label_ (hpp:50-55), allocated at setup
    on the host and, in GPU mode, on the device (base_data_layer.cpp:55-82), and copied into the
    tops by each forward. Its DataTransformer makes an RNG for mirror or for any TRAIN layer
    (data_transformer.cpp:629), where BVLC's needs a TRAIN crop."""

    PREFETCH_COUNT = 1
    BATCH_BLOBS = 2
    BATCH_EXTRA_BYTES = 24  # multi_label_, the vector in each Batch (protoaudit.memory.host)

    def transformer_draws(self):
        return self.lp.transform_param.mirror or self.ctx.phase == "TRAIN"


@register("Data", fork=FORK)
class Data(ForkPrefetching, ThroughDataReader, BVLCData):
    """DataLayer reads through a DataReader (data_layer.cpp:14-17, data_reader.cpp:18-20)."""


@register("ImageData", fork=FORK)
class ImageData(ForkPrefetching, BVLCImageData):
    pass


@register("WindowData", fork=FORK)
class WindowData(ForkPrefetching, BVLCWindowData):
    pass


@register("BoxData", fork=FORK)
class BoxData(ForkPrefetching, ThroughDataReader, BVLCData):
    """BoxDataLayer: DataLayer's reading (a DataReader, the first record shaped by InferBlobShape:
    box_data_layer.cpp:31-42) with YOLO labels. Each top after the data is (batch, 150), room for 30
    boxes of 5 values, whatever `side` says (cpp:61-73); data_param's `side` gives one entry per
    label top, 7 when none is given, and Caffe CHECKs the count (cpp:48-57). Its labels live in
    each batch's multi_label_ (new Blobs), copied into the tops as the data is.

    With labels, every record must be an encoded image with 6 floats per box (class, difficult,
    x, y, w, h): the transformer CHECKs both (data_transformer.cpp:134-138, 153) in the first
    batch. In training it crops a random 70-100% patch holding a box centre and resizes it back to
    the image's size with cv::resize in the prefetch thread (cpp:170-229); the patches are cv::Mats
    freed with each image, not counted.

    A database that is not on disk is taken to be what the fork's one recipe for it writes
    (RECIPE_SCRIPT): its records are what convert_box_data makes, the only tool that writes box
    labels, said as an assumption. Its DataReader's Datums are then counted at the raw image's size,
    a bound on the JPEG the record holds."""

    max_tops = 100
    own_fields = (("DataParameter", "side"),)
    label_origin = f"the layer's batch size: {BOXES} boxes of {BOX_VALUES} values per image"

    def reshape(self, bottoms):
        sides = list(self.lp.data_param.side) or [7]
        labels = len(self.lp.top) - 1
        self.check(not labels or len(sides) == labels,
                   f"side num not equal to top size: {len(sides)} side entr{'y' if len(sides) == 1 else 'ies'} "
                   f"for {labels} label tops (box_data_layer.cpp:56)",
                   fix=f"give data_param {{ side }} once per label top ({labels})")
        return super().reshape(bottoms)

    def label_shape(self, batch):
        return (batch, BOXES * BOX_VALUES)

    def data_shape(self, batch):
        shape = super().data_shape(batch)
        record = self.record
        if record is not None and len(self.lp.top) > 1:
            self.check(record.encoding != "raw", "the first record is raw pixels; with labels BoxData's "
                       "transformer CHECKs that every record is an encoded image (data_transformer.cpp:153)",
                       fix="make the database with the fork's convert_box_data (--encoded=true)")
            self.check(record.float_values > 0 and record.float_values % 6 == 0,
                       f"the first record holds {record.float_values} label floats; Caffe CHECKs 6 per box, at "
                       "least one box (data_transformer.cpp:134-138)",
                       fix="make the database with the fork's convert_box_data")
        return shape

    def of_example(self, source, batch, channels):
        """The records RECIPE_SCRIPT writes, cropped as the layer says, for a database not on disk;
        None where the parameters do not fit them (a crop larger, other channels, another mean)."""
        _, h, w = RECIPE
        shape = self.fitted((1, h, w) if self.lp.transform_param.force_gray else RECIPE, channels)
        if shape is None:
            return None
        self.decodes = True
        self.assume_known(source, f"BoxData reads the records of convert_box_data, the fork's tool for box labels, "
                                  f"taken as the fork's {RECIPE_SCRIPT} makes them: {h}x{w} colour JPEG images",
                          [(self.lp.top[0], (batch, *shape))])
        return shape, f"assumed: the records the fork's {RECIPE_SCRIPT} writes (convert_box_data, {h}x{w} JPEG)"

    def reader_touches(self, run):
        """cv::resize's state in the prefetch thread, for the training crops."""
        t = super().reader_touches(run)
        if self.ctx.phase == "TRAIN" and len(run.tops) > 1:
            t.append(touch.host("cv::resize thread state", OPENCV_RESIZE_BYTES))
        return t


@register("Reorg", fork=FORK)
class Reorg(Layer):
    """ReorgLayer (YOLOv2's passthrough): (N, C, H, W) to (N, C*s*s, H/s, W/s), or with `reverse`
    to (N, C/(s*s), H*s, W*s), s = reorg_param's stride (reorg_layer.cpp:20-30); Reshape gives the
    top the shape LayerSetUp found (cpp:33-38). LayerSetUp CHECKs that it is not in place and has a
    stride (cpp:9-12).

    Its kernels move every bottom element (.cu:5-36, cpp:84-108), so a bottom that the stride does
    not divide (H and W, or C by s*s with reverse) has a smaller top than the kernel writes: Caffe
    checks nothing and the forward writes past the top; protoaudit refuses it.

    diff_ is shaped as the bottom at setup (cpp:20) and only its diff is ever touched: backward,
    when it reaches the bottom, reads diff_'s diff (on the device in GPU mode), which nothing writes,
    in place of the top's (cpp:56, .cu:55-56), and writes the bottom's diff from it: the gradient
    through the layer is zero. The top's diff is not read."""

    exact_bottoms = 1
    exact_tops = 1
    own_fields = (("LayerParameter", "reorg_param"),)

    def reshape(self, bottoms):
        refuse_in_place(self)
        p = self.fork_param("reorg_param")
        self.check(p.HasField("stride"), "Reorg Layer needs stride param (reorg_layer.cpp:12)",
                   fix="set reorg_param { stride: 2 }")
        s = p.stride
        n, c, h, w = legacy_shape(self, bottoms[0])
        self.check(s > 0, "reorg_param stride 0: Caffe divides by it (reorg_layer.cpp:23-29)",
                   fix="set a positive stride")
        if p.reverse:
            whole, top = c % (s * s) == 0, (n, c // (s * s), h * s, w * s)
        else:
            whole, top = h % s == 0 and w % s == 0, (n, c * s * s, h // s, w // s)
        self.check(whole, f"stride {s} does not divide the bottom {(n, c, h, w)}" + (" channels by stride x stride"
                   if p.reverse else "'s height and width") + f": the top {top} is smaller than the bottom, and the "
                   "kernels, which move every bottom element, would write past it (Caffe checks nothing: "
                   "reorg_layer.cu:5-36)", fix="give the layer a bottom the stride divides")
        return [top]

    def touches(self, run):
        t = [touch.bottom(0, "data", "forward"), touch.top(0, "data", "forward")]
        if run.propagate_down[0]:
            size = count(run.bottoms[0])
            t += [touch.buffer("diff_.diff", size, "backward", per_sample=True,
                               note="the bottom's size, read in place of the top's diff"),
                  touch.bottom(0, "diff", "backward")]
        return t


@register("RegionLoss", fork=FORK)
class RegionLoss(Layer):
    """RegionLossLayer (YOLOv2's loss), a LossLayer with CPU code only, which GPU mode runs as it is
    (Layer's Forward_gpu and Backward_gpu call the CPU ones: layer.hpp:341-364).

    Its predictions must hold side x side x num x (coords + num_class + 1) values per image and its
    labels 30 x num (cpp:176-182: 30 x 5, BoxData's label, when num is 5); LossLayer::Reshape CHECKs
    their common num (loss_layer.cpp:19-20). The top is a scalar.

    Forward reads the labels and the predictions on the host (cpp:199, 219) and fills diff_ and
    real_diff_, each the predictions' size (Reshape: cpp:190-191; cpp:201, 435), on the host, and
    writes the loss there (cpp:463), which Layer::Forward reads on the device in GPU mode. A local
    Blob `swap` of the predictions' size lives during the forward only (cpp:208-212): not counted.
    Backward stops at a label that would take a gradient (cpp:477-479, LOG(FATAL)); otherwise it
    writes the predictions' diff from real_diff_ on the host (cpp:487-492), which the layer below
    then reads on the device in GPU mode. A softmax_tree or class_map file is read at setup into
    members not counted."""

    exact_bottoms = 2
    exact_tops = 1
    auto_top_blobs = True
    loss_by_default = True
    own_fields = (("LayerParameter", "region_loss_param"),)

    def reshape(self, bottoms):
        p = self.fork_param("region_loss_param")
        pred, label = (tuple(b) for b in bottoms)
        per_cell = p.coords + p.num_class + 1
        expected = p.side * p.side * p.num * per_cell
        self.check(count(pred, 1) == expected,
                   f"the predictions {pred} hold {count(pred, 1)} values per image; side x side x num x (coords + "
                   f"num_class + 1) = {p.side}x{p.side}x{p.num}x{per_cell} = {expected} (region_loss_layer.cpp:181)",
                   fix=f"make the convolution before it output num x (coords + num_class + 1) = {p.num * per_cell} "
                       f"channels at {p.side}x{p.side}")
        self.check(count(label, 1) == BOXES * p.num,
                   f"the labels {label} hold {count(label, 1)} values per image; the layer CHECKs 30 x num = "
                   f"{BOXES * p.num} (region_loss_layer.cpp:182)",
                   fix="feed it BoxData's label (30 x 5) with num: 5")
        n, m = legacy_shape(self, pred)[0], legacy_shape(self, label)[0]
        self.check(n == m, f"the predictions {pred} and labels {label} should have the same number "
                   "(loss_layer.cpp:19-20)")
        return [()]

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1

    def touches(self, run):
        size = count(run.bottoms[0])
        device = "host" if run.mode == "gpu" else "device"
        t = [touch.bottom(1, "data", "forward"), touch.bottom(0, "data", "forward")]
        t += [touch.buffer(name, size, "forward", per_sample=True, device=device,
                           note="the predictions' size") for name in ("diff_", "real_diff_")]
        t.append(touch.top(0, "data", "forward"))
        if run.propagate_down[1]:
            return t + [touch.stop("backward", "RegionLoss Layer cannot backpropagate to label inputs "
                                   "(region_loss_layer.cpp:477-479, LOG(FATAL))",
                                   fix="give the labels' bottom propagate_down: false")]
        if run.propagate_down[0]:
            t += [touch.top(0, "diff", "backward"), touch.bottom(0, "diff", "backward")]
        return t


@register("BatchNorm", fork=FORK)
class BatchNorm(BVLCBatchNorm):
    """June 2016's BatchNormLayer: BVLC's but for its setup, which leaves the layer's ParamSpecs as
    the file gives them (batch_norm_layer.cpp:10-37), so the solver applies the file's lr_mult, 1
    where none is given, to the statistics, and a nonzero one is no error. It allocates what BVLC's
    does; a file that sets no nonzero lr_mult on them is sized alike by either."""

    adds_statistics_specs = False  # protoaudit.memory.host

    def param_shapes(self, bottoms):
        channels = bottoms[0][1]  # (reshape refuses a bottom of one axis, as BVLC's)
        return [(channels,), (channels,), (1,)]

    def param_specs(self):
        return self.lp.param

    @classmethod
    def sized_as(cls, lp):
        return cls if any(spec.lr_mult != 0 for spec in lp.param[:3]) else BVLCBatchNorm


@solver_test_check(FORK)
def first_test_stops(net):
    """The fork's Solver::Test on its test net `net`: it CHECKs that every output of the net is 5 wide
    (solver.cpp:373), DetectionEvaluate's rows, after the net's first forward. An Assumption saying
    that Caffe stops there, or None where every output is 5 wide."""
    outputs = {}
    for node in net.layers:
        for b in node.bottoms:
            outputs.pop(b, None)
        outputs.update(dict.fromkeys(node.tops))
    wrong = [net.blobs[b] for b in outputs if len(net.blobs[b].shape) > 4 or
             (net.blobs[b].shape[3] if len(net.blobs[b].shape) == 4 else 1) != 5]
    if not wrong:
        return None
    named = ", ".join(f"'{b.name}' ({'x'.join(map(str, b.shape)) or 'a scalar'})" for b in wrong)
    return Assumption("(file)", f"this fork's Solver::Test CHECKs that every output of a test net is 5 wide, "
                      f"DetectionEvaluate's rows (solver.cpp:373); this test net's {named} "
                      f"{'is' if len(wrong) == 1 else 'are'} not, so Caffe stops at the first test, after the test "
                      "net's first forward (the figures stand to that point). The fork's examples test with a "
                      "net of their own (examples/indoor/solver.prototxt: test_net: \"test.prototxt\")",
                      "--phase train (the train net alone, as a solver that never tests runs it)")
