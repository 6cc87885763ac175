"""PG-CNN's layers for BVLC Caffe (mysee1989/PG-CNN f3faafd: Li, Zeng, Shan and Chen's Patch-Gated CNN and
its attention CNN, gACNN, for facial expressions under occlusion), as their sources shape them.

The repository is not a Caffe: it holds include/multi_label_image_data_layer.hpp,
include/multi_roi_pooling_layer.hpp, src/multi_label_image_data_layer.cpp, src/multi_roi_pooling_layer.cpp
and .cu, to build into a BVLC Caffe with proto/caffe.proto's additions (proto/forks/pgcnn.proto).
multi_label_image_data_layer.cpp is BVLC's image_data_layer.cpp as of 3ba2054 (January 2017) and
master but for the labels, so the Caffe is BVLC 1.0 or later: the rest of a net is BVLC's layers.

File:line references are to that commit's include/ and src/ files.
"""
from . import touch
from .base import Layer, count, legacy_shape, register
from .data import FIRST_TOKENS, LIST_ENTRY_BYTES, ImageData

FORK = "pgcnn"
LIST_ENTRY_BYTES.setdefault("MultiLabelImageData", 56)  # sizeof(pair<string, vector<int>>)


def _name(line):
    """The name an entry keeps: the line's first token (`infile >> filename`, cpp:44)."""
    return line.split()[:1]


@register("MultiLabelImageData", fork=FORK)
class MultiLabelImageData(ImageData):
    """MultiLabelImageDataLayer: BVLC's ImageData (the same file but for the labels, on BVLC's
    BasePrefetchingDataLayer: data_param.prefetch batches, multi_label_image_data_layer.cpp:91-105)
    reading multi_label_image_data_param. Its list is read token by token, a name then label_num
    ints (`infile >> filename`, cpp:44-53); the data top is the first image's, resized to
    new_height x new_width when given, then transform_param's crop (cpp:81-94); the label top is
    (batch_size, label_num) (cpp:100-105), in every prefetch batch too. Two tops exactly (hpp:33).
    The parameter's own scale, mean_file, crop_size and mirror are never read (BVLC upgrades
    image_data_param's, not this message's): transform_param's are."""

    label_origin = "the layer's batch size and multi_label_image_data_param.label_num (cpp:100-105)"

    def param(self):
        return self.fork_param("multi_label_image_data_param")

    def label_shape(self, batch):
        return (batch, self.param().label_num)

    def first_names(self, list_path):
        return [self.param().root_folder + FIRST_TOKENS(list_path, 1, "image list")[0]]

    def reader_touches(self, run):
        """lines_ (hpp:40): per entry its name and a vector of label_num ints (cpp:47-52), one entry a
        line; cv::resize's state with new_height/new_width, as ImageData's."""
        return self.float_list_touches("MultiLabelImageData", self.param().label_num, _name, "ints")


@register("MultiROIPooling", fork=FORK)
class MultiROIPooling(Layer):
    """MultiROIPoolingLayer (its type() says "MultiROIPoolingData", multi_roi_pooling_layer.hpp:31; it is
    registered as MultiROIPooling, cpp:70): crops a pooled_h x pooled_w patch of the feature map
    (bottom 0) around each of an image's points (bottom 1, (x, y) pairs), one top per point. Two
    bottoms, 2 to 30 tops (hpp:34-37); pooled_h and pooled_w > 0 (cpp:25-28). Reshape makes top[idx]
    (num, channels, pooled_h, pooled_w) of bottom 0 for idx < top_num (cpp:44-47), by the legacy
    accessors; a top past top_num is never shaped.

    Forward_cpu and Backward_cpu are NOT_IMPLEMENTED (cpp:53, :61). Forward_gpu zeroes the top_num tops
    and copies one patch per top for top_idx < num_rois = bottom[1]->count(1, 2) (cu:146-162), reading
    point ((b * top_num + top_idx) * 2) of bottom 1 for each image b of bottom 0 (cu:38). Backward_gpu,
    whenever the net runs it, zeroes and writes bottom 0's diff from the num_rois tops' diffs
    (cu:168-184), whatever propagate_down says, and never bottom 1's. No buffer of its own."""

    exact_bottoms = 2
    min_tops = 2
    max_tops = 30

    def param(self):
        return self.fork_param("multi_roi_pooling_param")

    def reshape(self, bottoms):
        p = self.param()
        self.check(p.pooled_h > 0, "pooled_h must be > 0 (multi_roi_pooling_layer.cpp:25)")
        self.check(p.pooled_w > 0, "pooled_w must be > 0 (multi_roi_pooling_layer.cpp:27)")
        tops = len(self.lp.top)
        self.check(p.top_num <= tops, f"top_num {p.top_num} but {tops} tops: Reshape shapes top[idx] for every idx "
                   "< top_num (multi_roi_pooling_layer.cpp:44-47), past the tops named",
                   fix=f"name {p.top_num} tops, or set top_num to {tops}")
        n, c, _, _ = legacy_shape(self, bottoms[0])
        rois = tuple(bottoms[1])
        self.check(len(rois) >= 2, f"bottom 1 {rois} has {len(rois)} axes: Forward_gpu takes its count(1, 2), the "
                   "number of points (multi_roi_pooling_layer.cu:146), which needs 2", fix="give the points as "
                   f"(num, {p.top_num}, 2)")
        points = rois[1]
        self.check(points <= p.top_num, f"bottom 1 has {points} points per image (its axis 1, cu:146) but top_num is "
                   f"{p.top_num}: Forward_gpu writes a top per point (cu:157-161), past the {p.top_num} it shapes",
                   fix=f"set top_num to {points}")
        last = ((n - 1) * p.top_num + points - 1) * 2 + 1
        self.check(n == 0 or points == 0 or last < count(rois),
                   f"Forward_gpu reads element {last:,} of bottom 1, {'x'.join(map(str, rois))} = {count(rois):,} "
                   f"elements: ((b * top_num + top_idx) * 2) for each of bottom 0's {n} images (cu:38)",
                   fix=f"give bottom 1 as ({n}, {p.top_num}, 2)")
        return [(n, c, p.pooled_h, p.pooled_w)] * p.top_num + [(0,)] * (tops - p.top_num)

    def touches(self, run):
        if run.mode != "gpu":
            why = ("PG-CNN's MultiROIPooling has no CPU code (multi_roi_pooling_layer.cpp:{}, NOT_IMPLEMENTED): "
                   "Caffe stops at its first {} pass in CPU mode")
            return [touch.stop("forward", why.format(53, "forward")),
                    touch.stop("backward", why.format(61, "backward"))]
        points = run.bottoms[1][1]
        shaped = self.param().top_num
        t = [touch.bottom(0, "data", "forward"), touch.bottom(1, "data", "forward")]
        t += [touch.top(j, "data", "forward") for j in range(shaped)]
        if any(run.propagate_down):
            t += [touch.bottom(1, "data", "backward")]
            t += [touch.top(j, "diff", "backward") for j in range(points)]
            t += [touch.bottom(0, "diff", "backward")]
        return t
