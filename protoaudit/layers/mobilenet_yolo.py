"""MobileNet-YOLO's Caffe (eric612/MobileNet-YOLO 69b4441): the SSD fork with YOLOv3's and the
mobile nets' layers added, as its sources shape them.

Its own layers: Yolov3 (the YOLOv3 loss), Yolov3DetectionOutput, Upsample (nearest neighbour by
`scale`), ReLU6, DepthwiseConvolution (yonghenglh6/DepthwiseConvolution 2b9cf52's files, byte for
byte) and Axpy (hujie-frank/SENet 0262d43's files, byte for byte), and an AnnotatedData that trains
at several sizes and writes YOLO labels. Its BasePrefetchingDataLayer is BVLC's (data_param.prefetch
batches, tops pointed at the current one: base_data_layer.cpp:46-50, :131-144), so its Data and
ImageData are BVLC's. The SSD layers are the SSD fork's (protoaudit.layers.ssd): its permute,
prior_box, normalize, multibox_loss, smooth_L1_loss and detection_evaluate files are weiliu89's
4817bf8 byte for byte, and detection_output's differ only in dropping the code that saves results.

File:line references are to src/caffe/layers/ at that commit.
"""
from . import conv, ssd, touch
from .activations import Neuron
from .base import Layer, carry, count, legacy_shape, register
from .data import Prefetching

FORK = "mobilenet_yolo"

# the SSD fork's layers, which this fork carries (its own classes: a class names one fork)
carry(__name__, FORK, ssd.Permute, ssd.PriorBox, ssd.Normalize, ssd.SmoothL1Loss, ssd.MultiBoxLoss,
      ssd.DetectionOutput, ssd.DetectionEvaluate)


@register("AnnotatedData", fork=FORK)
class AnnotatedData(ssd.AnnotatedData):
    """The SSD fork's AnnotatedDataLayer on BVLC's prefetching, with two changes.

    transform_param's resize_param repeats: setup sizes the data top by the first
    (annotated_data_layer.cpp:70-75), and every 10th batch draws one of them by its `prob`
    (:221-241), so over a run each blob grows to the largest size drawn. protoaudit takes the
    largest (a crop, when given, wins as in the SSD fork: data_transformer.cpp:1384-1410).

    yolo_data_type: 1 writes a label of (batch, 1, 300, 5), 300 boxes of 5 per image
    (:116-120), where the SSD fork's label is (1, 1, boxes, 8)."""

    prefetch = Prefetching.prefetch
    touches = Prefetching.touches
    batches_in_array = Prefetching.batches_in_array

    def data_shape(self, batch):
        t = self.lp.transform_param
        sizes = list(t.resize_param)
        if not sizes:
            return super().data_shape(batch)
        self.check(not (t.force_color and t.force_gray), "cannot set both force_color and force_gray")
        if sizes[0].resize_mode == 2:  # FIT_SMALL_SIZE (cpp:54-59 checks the first policy only)
            self.check(self.batch_size() == 1, "Only support batch size of 1 for FIT_SMALL_SIZE",
                       fix="set data_param { batch_size: 1 }, or another resize_mode")
        probs = [r.prob for r in sizes]
        self.check(all(0 <= p <= 1 for p in probs) and abs(sum(probs) - 1) <= 0.01,
                   f"the resize_params' prob must each lie in [0, 1] and sum to 1 (they sum to {sum(probs):g}; "
                   "annotated_data_layer.cpp:226-233)", fix="give the resize_params probabilities that sum to 1")
        drawn = [r for r in sizes if r.prob > 0 and r.resize_mode != 2] or sizes[:1]
        for r in drawn:
            self.check(r.height > 0 and r.width > 0, "resize_param needs height and width",
                       fix="set resize_param { height: H width: W }")
        largest = max(drawn, key=lambda r: r.height * r.width)
        crop = (t.crop_size, t.crop_size) if t.crop_size else (t.crop_h, t.crop_w)
        if self.declared():
            return None, "--input"
        size = crop if all(crop) else (largest.height, largest.width)
        channels = 3 if t.force_color else 1 if t.force_gray else None
        origin = "the layer's transform_param"
        if not all(crop) and len(drawn) > 1:
            top = self.lp.top[0]
            self.assume(f"top '{top}' trains at {len(drawn)} sizes drawn at random; protoaudit takes the largest, "
                        f"{size[0]}x{size[1]}, which Caffe's blobs grow to once it is drawn",
                        f"--input {top}={batch}x3xHxW (the size to audit)")
            origin += f"; the largest of {len(drawn)} resize_params"
        if channels is None:
            channels = self.assume_colour(batch, size[0], size[1], "the dataset's images are not read")
            origin += "; 3 channels assumed"
        return (channels,) + tuple(size), origin

    def label_top(self, batch):
        if self.lp.annotated_data_param.yolo_data_type != 1:
            return super().label_top(batch)
        shape = self.override(1, (batch, 1, 300, 5), own_batch=batch)
        self.note_origin(1, shape, "the layer's yolo_data_type (300 boxes of 5 per image)")
        return shape


@register("DepthwiseConvolution", fork=FORK)
class DepthwiseConvolution(conv.Convolution):
    """yonghenglh6's DepthwiseConvolutionLayer: a BaseConvolutionLayer (shapes, weights and checks
    as Convolution's; compute_output_shape, depthwise_conv_layer.cpp:6-20) registered by its own
    name, so never cuDNN. On the CPU it is Convolution's im2col and GEMMs (cpp:23-70). On the GPU
    its own kernels read the bottom, the weight and the bias and write the top (.cu:66-107): no
    column buffer, no workspace. Backward takes the weight's diff (.cu:271), the bias's when it has
    one (.cu:274) and the bottom's (.cu:299) as mutable whatever is asked; bias_multiplier_ is set
    on the host in Reshape (base_conv_layer.cpp)."""

    def uses_cudnn(self, run):
        return False

    def touches(self, run):
        if run.mode == "cpu":
            return super().touches(run)
        geo = self._setup(run.bottoms)[0]
        t = [touch.param(k, "data", "setup") for k in range(run.num_params)]
        if self.param.bias_term:
            t.append(touch.buffer("bias_multiplier_", count(run.tops[0], geo.axis + 1), "setup", per_sample=False,
                                  device="host"))
        t += [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        t += [touch.top(j, "data", "forward") for j in range(len(run.tops))]
        t += [touch.top(j, "diff", "backward") for j in range(len(run.tops))]
        t += [touch.param(k, "diff", "backward") for k in range(run.num_params)]
        return t + [touch.bottom(j, "diff", "backward") for j in range(len(run.bottoms))]


register("ReLU6", fork=FORK)(type("ReLU6", (Neuron,), {
    "__doc__": "ReLU6Layer, a NeuronLayer (relu6_layer.hpp:18): min(max(x, 0), 6), nothing of its own."}))


@register("Upsample", fork=FORK)
class Upsample(Layer):
    """UpsampleLayer (nearest neighbour): the bottom with its last two axes times `scale`
    (upsample_layer.cpp:14-23); forward and backward read it as (N, C, H, W) (cpp:28-31, .cu:64-66).
    Backward zeroes the bottom's diff before it adds into it (.cu:78-85)."""

    exact_bottoms = 1
    exact_tops = 1

    def reshape(self, bottoms):
        shape = tuple(bottoms[0])
        scale = self.fork_param("upsample_param").scale
        self.check(len(shape) == 4, f"Upsample reads its bottom as (N, C, H, W); got {shape}")
        self.check(scale > 0, f"upsample_param scale {scale} must be positive")
        return [shape[:2] + (shape[2] * scale, shape[3] * scale)]


@register("Axpy", fork=FORK)
class Axpy(Layer):
    """SENet's AxpyLayer: top = a * x + y, with a per (sample, channel) scale a (N, C[, 1, 1]) and x,
    y of one shape, which the top takes (axpy_layer.cpp:13-22).

    spatial_sum_multiplier_ (x's H*W ones) is set on the host in Reshape (cpp:23-28); only the CPU
    backward reads it. Backward on the GPU writes the diff of each bottom asked for (.cu:69-88);
    on the CPU a's gradient is summed from x's diff, which it writes first (cpp:55-66)."""

    exact_bottoms = 3
    exact_tops = 1

    def reshape(self, bottoms):
        a, x, y = (tuple(b) for b in bottoms)
        self.check(len(a) >= 2 and len(x) >= 2 and a[:2] == x[:2],
                   f"the scale (bottom 0, {a}) needs one value per sample and channel of bottom 1 {x}")
        self.check(len(a) != 4 or a[2:] == (1, 1), f"the scale (bottom 0, {a}) must be (N, C, 1, 1)")
        self.check(x == y, f"bottoms 1 {x} and 2 {y} must have the same shape")
        return [x]

    def touches(self, run):
        gpu = run.mode == "gpu"
        spatial = count(run.bottoms[1], 2)
        t = list(super().touches(run))
        t.append(touch.buffer("spatial_sum_multiplier_", spatial, "setup", per_sample=False,
                              device="host" if gpu else "device"))
        if not gpu and run.propagate_down[0]:
            t.append(touch.bottom(1, "diff", "backward"))
        return t


@register("Yolov3", fork=FORK)
class Yolov3(Layer):
    """Yolov3Layer, a LossLayer: the predictions (N, num * (5 + num_class), H, W) and the labels
    (N, ...: the YOLO label of AnnotatedData) give a scalar loss.

    LayerSetUp checks the predictions' size (yolov3_layer.cpp:435-440); LossLayer::Reshape the
    common batch (loss_layer.cpp:20). Its buffers are diff_ and swap_, each the predictions' size
    (real_diff_ is shaped but never touched: cpp:452-453). Its GPU forward fills swap_ on the device
    (.cu:12-30), then runs the CPU forward (.cu:32), which reads the bottoms and swap_ on the host,
    fills diff_ there and writes the loss (cpp:472-487, :731). Backward, without use_logic_gradient,
    scales diff_ on the device into the predictions' diff (.cu:45-52); with it, it runs the CPU
    backward (.cu:41-42: diff_, swap_ and the diff on the host). The CPU backward stops at a
    label that would take a gradient (cpp:790-792)."""

    exact_bottoms = 2
    exact_tops = 1
    auto_top_blobs = True
    loss_by_default = True

    def reshape(self, bottoms):
        p = self.fork_param("yolov3_param")
        pred, label = bottoms
        n, c, h, w = legacy_shape(self, pred)
        self.check(c * h * w == w * h * p.num * (4 + p.num_class + 1),
                   f"the predictions {tuple(pred)} must hold num ({p.num}) x (5 + num_class {p.num_class}) = "
                   f"{p.num * (5 + p.num_class)} channels per cell (yolov3_layer.cpp:440)",
                   fix="make the convolution before it output num x (5 + num_class) channels")
        self.check(len(label) and label[0] == n, f"the predictions {tuple(pred)} and labels {tuple(label)} should "
                   "have the same first dimension (loss_layer.cpp:20)")
        return [()]

    def allow_force_backward(self, bottom_index):
        return bottom_index != 1

    def touches(self, run):
        size = count(run.bottoms[0])
        gpu = run.mode == "gpu"
        logic = self.lp.yolov3_param.use_logic_gradient
        buf = lambda name, stage, device="device": touch.buffer(name, size, stage, per_sample=True,  # noqa: E731
                                                                device=device)
        if gpu:
            t = [touch.bottom(0, "data", "forward"), buf("swap_", "forward"),
                 touch.bottom(0, "data", "forward", device="host"), touch.bottom(1, "data", "forward", device="host"),
                 buf("swap_ (host)", "forward", "host"), buf("diff_ (host)", "forward", "host"),
                 touch.top(0, "data", "forward", device="host")]
        else:
            t = [touch.bottom(1, "data", "forward"), buf("diff_", "forward"), touch.bottom(0, "data", "forward"),
                 buf("swap_", "forward"), touch.top(0, "data", "forward")]
        if not any(run.propagate_down):
            return t
        if run.propagate_down[1] and (not gpu or logic):
            return t + [touch.stop("backward", "Yolov3 cannot backpropagate to its labels (yolov3_layer.cpp:"
                                   "790-792, LOG(FATAL))", fix="give the labels' bottom propagate_down: false")]
        if run.propagate_down[0]:
            t.append(touch.top(0, "diff", "backward", device="host" if gpu else "device"))
            if gpu and not logic:
                t += [buf("diff_", "backward"), touch.bottom(0, "diff", "backward")]
            else:
                t.append(touch.bottom(0, "diff", "backward", device="host" if gpu else "device"))
        return t


@register("Yolov3DetectionOutput", fork=FORK)
class Yolov3DetectionOutput(Layer):
    """Yolov3DetectionOutputLayer: decodes each scale's predictions (one bottom per mask group),
    keeps the boxes over confidence_threshold and runs NMS over all; forward only.

    Its top is (1, 1, 1, 7) at setup (yolov3_detection_output_layer.cpp:216-229) and (1, 1, kept, 7)
    after each forward, N rows when nothing is kept (cpp:352-373); kept is at most one box per cell
    and anchor (num_box) of every scale, which protoaudit takes, or `--define detections=K` per
    image. swap_ is reshaped to each bottom in turn, so it grows to the largest (cpp:253-256, .cu:23-24);
    the GPU forward fills it on the device and reads it back on the host (.cu:52-58), and the top
    is written on the host (cpp:363, :373)."""

    min_bottoms = 1
    exact_tops = 1
    defines = {"detections": "Yolov3DetectionOutput: detections kept per image"}

    def reshape(self, bottoms):
        p = self.fork_param("yolov3_detection_output_param")
        self.check(p.HasField("num_classes"), "Must specify num_classes")
        self.check(len(bottoms) == p.mask_group_num,
                   f"{len(bottoms)} bottoms, but mask_group_num is {p.mask_group_num} (one bottom per scale: "
                   "yolov3_detection_output_layer.cpp:212)", fix=f"set mask_group_num: {len(bottoms)}")
        for b in bottoms:
            legacy_shape(self, b)
        if self.defined("detections") is None:
            self.assume(f"it keeps the most detections it can: {self.kept(bottoms)} for the batch of "
                        f"{legacy_shape(self, bottoms[0])[0]}", "--define detections=K (detections kept per image)")
        return [(1, 1, 1, 7)]

    def kept(self, bottoms):
        """Rows of the top after a forward: every cell's every anchor of every scale, or --define."""
        num = legacy_shape(self, bottoms[0])[0]
        per_image = self.defined("detections")
        if per_image is None:
            boxes = self.fork_param("yolov3_detection_output_param").num_box
            per_image = sum(legacy_shape(self, b)[2] * legacy_shape(self, b)[3] for b in bottoms) * boxes
        return max(num * per_image, num)

    def touches(self, run):
        gpu = run.mode == "gpu"
        device = "host" if gpu else "device"
        largest = max(count(b) for b in run.bottoms)
        rows = self.kept(run.bottoms)
        t = [touch.bottom(j, "data", "forward") for j in range(len(run.bottoms))]
        t.append(touch.buffer("swap_", largest, "forward", per_sample=True))
        if gpu:
            t.append(touch.buffer("swap_ (host)", largest, "forward", per_sample=True, device="host"))
        t.append(touch.top(0, "data", "forward", device=device))
        if rows > 1:
            t.append(touch.buffer("top (kept detections)", (rows - 1) * 7, "forward", per_sample=True, device=device,
                                  note=f"the top grows to 1x1x{rows}x7 (7 floats per detection kept)"))
        return t
