"""A net whose datasets are not on this machine: the image assumed for them (data.ASSUMED_SIZE, 224 x
224 in colour), and a label sized by the loss or accuracy that reads it, beside its prediction, where
the assumed image does not fit it. Every shape below is derived by hand from Caffe's rules
(conv_layer.cpp's output size, (in + 2 pad - kernel) / stride + 1; the losses' CHECKs)."""
import json

import pytest

from conftest import run_in_process
from protoaudit.audit import build_nets
from protoaudit.net.build import ShapesNeeded

DATA = ('layer {{ name: "{name}" type: "Data" top: "{top}" data_param {{ source: "/nowhere/{top}_lmdb" '
        'batch_size: 4 backend: LMDB }} }}\n')
HDF5 = ('layer { name: "d" type: "HDF5Data" top: "data" top: "label" '
        'hdf5_data_param { source: "/nowhere/train.txt" batch_size: 8 } }\n')


def conv(bottom, top, outputs, kernel, pad=0):
    return (f'layer {{ name: "{top}" type: "Convolution" bottom: "{bottom}" top: "{top}" '
            f'convolution_param {{ num_output: {outputs} kernel_size: {kernel} pad: {pad} }} }}\n')


def loss(kind, *bottoms, name="loss"):
    return (f'layer {{ name: "{name}" type: "{kind}" ' + " ".join(f'bottom: "{b}"' for b in bottoms)
            + f' top: "{name}" }}\n')


def write(tmp_path, text):
    path = tmp_path / "net.prototxt"
    path.write_text('name: "n"\n' + text)
    return str(path)


def shapes(net):
    return {net.blobs[i].name: net.blobs[i].shape for node in net.layers for i in node.tops}


def test_a_density_map_takes_the_euclidean_losss_prediction(tmp_path):
    """data 4x3x224x224 (assumed); a 5x5 convolution without pad makes 224 - 5 + 1 = 220: the
    density-map label EuclideanLoss compares with it is 4x1x220x220 (count(1) must agree, and the
    prediction's own shape is the one label of that count a dataset of such maps gives)."""
    path = write(tmp_path, DATA.format(name="data", top="data") + DATA.format(name="map", top="map")
                 + conv("data", "pred", 1, 5) + loss("EuclideanLoss", "pred", "map"))
    net = build_nets(path)[0]
    got = shapes(net)
    assert got["data"] == (4, 3, 224, 224) and got["pred"] == (4, 1, 220, 220) and got["map"] == (4, 1, 220, 220)
    said = {a.layer: a.what for a in net.assumptions}
    assert "224x224" in said["data"] and "EuclideanLoss layer 'loss' takes for it beside its first input" in said["map"]
    assert "4x1x220x220" in said["map"]
    with pytest.raises(ShapesNeeded):
        build_nets(path, strict=True)


def test_a_segmentation_label_through_a_split_takes_one_class_per_pixel(tmp_path):
    """Two classes per pixel, 4x2x224x224 (a 3x3 convolution with pad 1 keeps 224): SoftmaxWithLoss
    and Accuracy each take N*H*W labels; the label (read by both, through Caffe's split) is the
    prediction with its class axis 1, 4x1x224x224, not the 4x3x224x224 image first assumed for it."""
    path = write(tmp_path, DATA.format(name="data", top="data") + DATA.format(name="label", top="label")
                 + conv("data", "score", 2, 3, pad=1) + loss("SoftmaxWithLoss", "score", "label")
                 + loss("Accuracy", "score", "label", name="accuracy"))
    got = shapes(build_nets(path)[0])
    assert got["score"] == (4, 2, 224, 224) and got["label"] == (4, 1, 224, 224)


def test_an_hdf5_file_not_here_is_an_assumed_image_and_a_label_its_loss_takes(tmp_path):
    """HDF5Data's datasets may have any rank; not on this machine, each top is first taken as an
    image (8x3x224x224); the label, compared by EuclideanLoss with a 9x9 convolution's 216x216
    output (224 - 9 + 1), becomes 8x1x216x216. The report says both, and --strict asks for them."""
    path = write(tmp_path, HDF5 + conv("data", "pred", 1, 9) + loss("EuclideanLoss", "pred", "label"))
    got = shapes(build_nets(path)[0])
    assert got["data"] == (8, 3, 224, 224) and got["label"] == (8, 1, 216, 216)
    run = run_in_process(path, "--format", "json")
    assert run.returncode == 0, run.stderr
    sources = {d["top"]: d["source"] for d in json.loads(run.stdout)["data_shapes"]}
    assert sources == {"data": "assumed: an image size, its dataset not being on this machine",
                       "label": "assumed: what the layer reading it takes, its dataset not being on this machine"}
    run = run_in_process(path, "--strict")
    assert run.returncode == 2 and "--input data=8xCxHxW --input label=8xCxHxW" in run.stderr


def test_a_label_no_loss_can_size_leaves_the_refusal_saying_the_size_was_assumed(tmp_path):
    """A Concat of the image (4x3x224x224) with a second dataset's top that a convolution shrank to
    222: no loss reads it as a label, so the refusal stands, and says the size was assumed."""
    path = write(tmp_path, DATA.format(name="data", top="data") + DATA.format(name="other", top="other")
                 + conv("other", "small", 3, 3)
                 + 'layer { name: "cat" type: "Concat" bottom: "data" bottom: "small" top: "cat" }\n')
    run = run_in_process(path)
    assert run.returncode == 2 and "follow from a size protoaudit assumed" in run.stderr, run.stderr


def ip(bottom, top, outputs):
    return (f'layer {{ name: "{top}" type: "InnerProduct" bottom: "{bottom}" top: "{top}" '
            f'inner_product_param {{ num_output: {outputs} }} }}\n')


def test_a_sliced_label_is_as_wide_as_its_pieces_losses_need(tmp_path):
    """A label sliced at 1 on axis 1 into a 1-wide target and the rest, each compared by EuclideanLoss
    with an InnerProduct of 1 and of 3 outputs: the first piece must be 4x1, the second 4x3, so the
    label the Slice cuts is 4 x (1 + 3) = 4x4 (slice_layer.cpp: the pieces' widths along the axis
    add up to the bottom's)."""
    path = write(tmp_path, DATA.format(name="data", top="data") + DATA.format(name="label", top="label")
                 + 'layer { name: "cut" type: "Slice" bottom: "label" top: "l1" top: "l2" '
                   'slice_param { axis: 1 slice_point: 1 } }\n'
                 + ip("data", "p1", 1) + ip("data", "p3", 3)
                 + loss("EuclideanLoss", "p1", "l1", name="loss1") + loss("EuclideanLoss", "p3", "l2", name="loss2"))
    got = shapes(build_nets(path)[0])
    assert got["label"] == (4, 4) and got["l1"] == (4, 1) and got["l2"] == (4, 3)


def test_a_net_that_adds_its_input_back_takes_a_grey_image(tmp_path):
    """A residual super-resolution net: a 3x3 convolution with pad 1 to one channel, summed with its
    input by Eltwise, which needs both of one shape. No colour image fits (3 channels against 1 at
    224, 227 and 299); the grey 1x224x224 does, and the assumption says what stopped the others."""
    path = write(tmp_path, DATA.format(name="data", top="data") + conv("data", "res", 1, 3, pad=1)
                 + 'layer { name: "sum" type: "Eltwise" bottom: "data" bottom: "res" top: "sum" }\n')
    net = build_nets(path)[0]
    assert shapes(net)["data"] == (4, 1, 224, 224)
    (said,) = net.assumptions
    assert "1 channel (grey images" in said.what and "3x224x224 stops layer 'sum'" in said.what
    assert "3x299x299 stops layer 'sum'" in said.what


def test_a_blob_over_caffes_limit_at_224_takes_a_smaller_image(tmp_path):
    """A 1x1 convolution to 50,000 channels: at 224x224, 4 x 50,000 x 224 x 224 = 10,035,200,000
    elements, over Caffe's INT_MAX (2,147,483,647) per blob, as at 227 and 299 and in grey; CIFAR's
    32x32 makes 4 x 50,000 x 32 x 32 = 204,800,000, which Caffe holds."""
    path = write(tmp_path, DATA.format(name="data", top="data") + conv("data", "wide", 50000, 1))
    got = shapes(build_nets(path)[0])
    assert got["data"] == (4, 3, 32, 32) and got["wide"] == (4, 50000, 32, 32)
    with pytest.raises(Exception, match="2,147,483,647"):
        build_nets(path, inputs={"data": (4, 3, 224, 224)})


def ip(bottom, top, outputs):
    return (f'layer {{ name: "{top}" type: "InnerProduct" bottom: "{bottom}" top: "{top}" '
            f'inner_product_param {{ num_output: {outputs} }} }}\n')


def test_labels_joined_by_a_concat_share_what_the_loss_takes(tmp_path):
    """DeepFashion's box: four HDF5 tops x1, y1, x2 and y2 joined along axis 1 and compared by
    EuclideanLoss with a 4-output InnerProduct, 8x4. Concat adds the widths along its axis
    (concat_layer.cpp:39-50), so the four, alike, are 8x1 each: 4 / 4. The class label beside them is
    one per item for SoftmaxWithLoss (8 labels for an 8x10 prediction)."""
    path = write(tmp_path, 'layer { name: "d" type: "HDF5Data" top: "data" top: "x1" top: "y1" top: "x2" top: "y2" '
                 'top: "category" hdf5_data_param { source: "/nowhere/train.txt" batch_size: 8 } }\n'
                 'layer { name: "box" type: "Concat" bottom: "x1" bottom: "y1" bottom: "x2" bottom: "y2" top: "box" '
                 'concat_param { axis: 1 } }\n'
                 + ip("data", "pred", 4) + ip("data", "cls", 10) + loss("EuclideanLoss", "pred", "box")
                 + loss("SoftmaxWithLoss", "cls", "category", name="closs"))
    got = shapes(build_nets(path)[0])
    assert got["box"] == (8, 4) and all(got[t] == (8, 1) for t in ("x1", "y1", "x2", "y2"))
    assert got["category"][0] == 8 and len(got["category"]) <= 2 and got["data"] == (8, 3, 224, 224)


def test_a_concat_of_a_known_blob_and_a_label_leaves_the_label_what_is_left(tmp_path):
    """A label joined beside a known 8x3 blob (a 3-output InnerProduct) into the 8x5 target: the label
    takes the other 2 of the axis, 8x2."""
    path = write(tmp_path, HDF5 + ip("data", "known", 3) + ip("data", "pred", 5)
                 + 'layer { name: "t" type: "Concat" bottom: "known" bottom: "label" top: "t" }\n'
                 + loss("EuclideanLoss", "pred", "t"))
    got = shapes(build_nets(path)[0])
    assert got["label"] == (8, 2) and got["t"] == (8, 5)


def test_a_label_pooled_to_its_prediction_is_the_image_the_windows_tile(tmp_path):
    """A GoogLeNet-style map: 7x7 prediction (224 through a 32-stride convolution: (224 - 32) / 32 + 1
    = 7), its label pooled 2x2 stride 2 before SigmoidCrossEntropyLoss (counts must match). Caffe's
    ceil rounding gives ceil((14 - 2) / 2) + 1 = 7 from 14 (and from 13); the label is taken as the
    size the windows tile exactly, (7 - 1) x 2 + 2 = 14: 8x1x14x14."""
    path = write(tmp_path, HDF5 + 'layer { name: "pred" type: "Convolution" bottom: "data" top: "pred" '
                 'convolution_param { num_output: 1 kernel_size: 32 stride: 32 } }\n'
                 'layer { name: "lp" type: "Pooling" bottom: "label" top: "lp" '
                 'pooling_param { pool: AVE kernel_size: 2 stride: 2 } }\n'
                 + loss("SigmoidCrossEntropyLoss", "pred", "lp"))
    got = shapes(build_nets(path)[0])
    assert got["pred"] == (8, 1, 7, 7) and got["lp"] == (8, 1, 7, 7) and got["label"] == (8, 1, 14, 14)


PYDATA = ('layer {{ name: "data" type: "Python" top: "data" top: "label" python_param {{ module: "nowhere_layers" '
          'layer: "TrainData" param_str: "{params}" }} }}\n')


def test_a_python_data_layer_not_found_is_an_assumed_image_and_a_label(tmp_path):
    """A Python data layer whose module is not on this machine: its tops are taken as an absent
    dataset's, the batch from param_str's batch_size (a dict literal, read by a parser that runs
    nothing), 16x3x224x224, and the label one per item as SoftmaxWithLoss takes it. Every format says
    the data's shape came from an assumption; --strict asks for the tops, as before."""
    path = write(tmp_path, PYDATA.format(params="{'batch_size': 16, 'split': 'train'}") + ip("data", "fc", 10)
                 + loss("SoftmaxWithLoss", "fc", "label"))
    got = shapes(build_nets(path)[0])
    assert got["data"] == (16, 3, 224, 224) and got["fc"] == (16, 10)
    assert got["label"] in ((16,), (16, 1))  # SoftmaxWithLoss: outer x inner = 16 labels
    run = run_in_process(path, "--format", "json")
    assert run.returncode == 0, run.stderr
    sources = {d["top"]: d["source"] for d in json.loads(run.stdout)["data_shapes"]}
    assert sources == {"data": "assumed: an image size, its data coming from Python code",
                       "label": "assumed: what the layer reading it takes, its data coming from Python code"}
    run = run_in_process(path)
    assert run.returncode == 0 and "for data shapes protoaudit assumed (data 16x3x224x224" in run.stdout
    run = run_in_process(path, "--strict")
    assert run.returncode == 2 and "Python layer (nowhere_layers.TrainData)" in run.stderr


def test_a_python_data_layer_with_no_batch_in_param_str_takes_one_item_or_batch(tmp_path):
    """No batch_size in param_str (a YAML mapping here): one item at a time, 1x3x224x224; --batch 4
    sets it, as for any data layer."""
    path = write(tmp_path, PYDATA.format(params="split: train") + ip("data", "fc", 10)
                 + loss("SoftmaxWithLoss", "fc", "label"))
    assert shapes(build_nets(path)[0])["data"] == (1, 3, 224, 224)
    assert shapes(build_nets(path, batch=4)[0])["data"] == (4, 3, 224, 224)


def test_a_python_data_layer_declared_with_input_has_its_data_shape_line(tmp_path):
    """--input gives a Python data layer's tops: the report's data shapes name them, as a Data layer's."""
    path = write(tmp_path, PYDATA.format(params="") + ip("data", "fc", 10) + loss("SoftmaxWithLoss", "fc", "label"))
    run = run_in_process(path, "--input", "data=2x1x28x28", "--input", "label=2", "--format", "json")
    assert run.returncode == 0, run.stderr
    assert {d["top"]: (tuple(d["shape"]), d["source"]) for d in json.loads(run.stdout)["data_shapes"]} == {
        "data": ((2, 1, 28, 28), "--input"), "label": ((2,), "--input")}


def test_a_label_piece_joined_beside_features_is_one_wide(tmp_path):
    """MPIIGaze's net: the label sliced at 2 into gaze and head pose; the head pose joined beside 500
    features (Concat along axis 1 needs the same rank and the other axes equal), gaze compared with a
    2-output InnerProduct. Nothing says the head pose's width: it is taken as one value per item,
    8x1, so the label is 2 + 1 = 3 wide (the last slice keeps what is left: slice_layer.cpp), gaze
    8x2, and the join 8x501. The assumption names the Concat."""
    path = write(tmp_path, HDF5 + 'layer { name: "cut" type: "Slice" bottom: "label" top: "gaze" top: "pose" '
                 'slice_param { axis: 1 slice_point: 2 } }\n' + ip("data", "ip1", 500)
                 + 'layer { name: "cat" type: "Concat" bottom: "ip1" bottom: "pose" top: "cat" }\n'
                 + ip("cat", "ip2", 2) + loss("EuclideanLoss", "ip2", "gaze"))
    net = build_nets(path)[0]
    got = shapes(net)
    assert (got["label"], got["gaze"], got["pose"], got["cat"]) == ((8, 3), (8, 2), (8, 1), (8, 501))
    assert any("top 'label' is 8x3" in a.what and "Concat layer 'cat'" in a.what for a in net.assumptions)


def test_a_label_sliced_into_more_pieces_than_it_is_wide_takes_one_value_a_piece(tmp_path):
    """A CAPTCHA net: the label sliced along axis 1 into 6 tops, one per character, each read by its
    SoftmaxWithLoss beside a 36-way InnerProduct. Slice needs the axis at least as wide as its pieces
    (slice_layer.cpp: an even split of 3 into 6 stops Caffe); a label's piece is first taken one value
    wide (8x6x224x224), then each loss takes its piece as one label per item: 8x1, the label 8x6."""
    cut = ('layer { name: "cut" type: "Slice" bottom: "label" ' + " ".join(f'top: "c{i}"' for i in range(6))
           + ' slice_param { axis: 1 } }\n')
    path = write(tmp_path, HDF5 + cut + "".join(ip("data", f"p{i}", 36) + loss("SoftmaxWithLoss", f"p{i}", f"c{i}",
                                                                                name=f"l{i}") for i in range(6)))
    net = build_nets(path)[0]
    got = shapes(net)
    assert got["label"] == (8, 6) and all(got[f"c{i}"] == (8, 1) for i in range(6))
    assert any("top 'label' is 8x6:" in a.what and "SoftmaxWithLoss layer" in a.what for a in net.assumptions)


def test_an_image_sliced_into_frames_takes_a_colour_image_a_frame(tmp_path):
    """A clip's frames stacked on the channel axis, sliced into 4 tops, each convolved: the image's
    channels are unknown, so each frame is taken as a colour image, 4 x 3 = 12 channels (the
    assumption says so); each frame is 8x3x224x224."""
    cut = 'layer { name: "cut" type: "Slice" bottom: "data" top: "f0" top: "f1" top: "f2" top: "f3" }\n'
    path = write(tmp_path, HDF5 + cut + "".join(conv(f"f{i}", f"c{i}", 4, 3) for i in range(4))
                 + 'layer { name: "s" type: "Silence" bottom: "label" }\n')
    got = shapes(build_nets(path)[0])
    assert got["data"] == (8, 12, 224, 224) and got["f3"] == (8, 3, 224, 224) and got["c0"] == (8, 4, 222, 222)


def test_a_label_reshaped_to_a_size_holds_that_many_values_an_item(tmp_path):
    """MDNet's label, reshaped to (0, 1, 49, 1): Reshape needs the counts equal (reshape_layer.cpp),
    so the label holds 49 values an item: 8x49 (dim 0 copies the batch)."""
    path = write(tmp_path, HDF5 + 'layer { name: "r" type: "Reshape" bottom: "label" top: "r" '
                 'reshape_param { shape { dim: 0 dim: 1 dim: 49 dim: 1 } } }\n'
                 'layer { name: "s" type: "Silence" bottom: "r" bottom: "data" }\n')
    got = shapes(build_nets(path)[0])
    assert got["label"] == (8, 49) and got["r"] == (8, 1, 49, 1)


def test_a_mask_multiplied_into_a_score_map_takes_its_shape(tmp_path):
    """A coverage mask (an HDF5 file's second top) multiplied into a 5-channel score map by an Eltwise
    PROD, which needs identical shapes (eltwise_layer.cpp): 8x5x222x222, a 3x3 convolution of 224."""
    path = write(tmp_path, HDF5 + conv("data", "score", 5, 3)
                 + 'layer { name: "m" type: "Eltwise" bottom: "score" bottom: "label" top: "m" '
                   'eltwise_param { operation: PROD } }\n'
                 + 'layer { name: "s" type: "Silence" bottom: "m" }\n')
    got = shapes(build_nets(path)[0])
    assert got["label"] == (8, 5, 222, 222) == got["m"]


def test_a_python_loss_at_the_end_is_audited_around_once_the_data_is_assumed(tmp_path):
    """An embedding net: an HDF5 file not on this machine, an InnerProduct, and a Python hinge loss
    whose top no layer reads (its module not here). The data is assumed (8x3x224x224) and the Python
    layer, fed by the net, is then counted empty as any such layer, not asked for."""
    path = write(tmp_path, 'force_backward: true\n' + HDF5 + ip("data", "emb", 16)
                 + 'layer { name: "loss" type: "Python" bottom: "emb" bottom: "label" top: "loss" '
                   'python_param { module: "nowhere_loss" layer: "HingeLoss" } }\n')
    net = build_nets(path)[0]
    got = shapes(net)
    assert got["data"] == (8, 3, 224, 224) and got["emb"] == (8, 16) and got["loss"] == (0,)


def test_where_no_conventional_image_fits_the_size_the_nets_fixed_sizes_take_is_searched(tmp_path):
    """A decoder's fixed size: the image pooled 2x2 (stride 2) and added to a 2x3x128x128 input, which
    Eltwise needs of identical shape (eltwise_layer.cpp): 224, 227, 299, 32 and 28 (and grey 224)
    stop it; of the searched square sides, 256 is the first that gives 128. The assumption says so."""
    path = write(tmp_path, DATA.format(name="data", top="data")
                 + 'layer { name: "fixed" type: "Input" top: "fixed" input_param { shape { dim: 4 dim: 3 dim: 128 '
                   'dim: 128 } } }\n'
                 'layer { name: "half" type: "Pooling" bottom: "data" top: "half" pooling_param { pool: MAX '
                 'kernel_size: 2 stride: 2 } }\n'
                 'layer { name: "sum" type: "Eltwise" bottom: "half" bottom: "fixed" top: "sum" }\n')
    net = build_nets(path)[0]
    assert shapes(net)["data"] == (4, 3, 256, 256)
    (said,) = [a.what for a in net.assumptions if a.layer == "data"]
    assert "256x256 and 3 channels (a square image the net's fixed sizes take); 3x224x224 stops layer 'sum'" in said


def test_a_euclidean_loss_whose_label_comes_first_sizes_it_too(tmp_path):
    """EuclideanLoss compares its two bottoms alike (euclidean_loss_layer.cpp: only their counts per
    item must agree, and either may be a prediction): a face net's age target given first, its
    1-output InnerProduct second, takes the target as 8x1."""
    path = write(tmp_path, HDF5 + ip("data", "age", 1) + loss("EuclideanLoss", "label", "age"))
    assert shapes(build_nets(path)[0])["label"] == (8, 1)


def test_smooth_l1_losss_targets_and_weights_take_the_predictions_shape(tmp_path):
    """Fast R-CNN's SmoothL1Loss needs its targets and its inside and outside weights of the
    prediction's channels, height and width (smooth_L1_loss_layer.cpp:28-37): beside an 84-output
    InnerProduct (21 classes x 4), each of the three absent tops is 8x84."""
    path = write(tmp_path, 'layer { name: "d" type: "HDF5Data" top: "data" top: "t" top: "wi" top: "wo" '
                 'hdf5_data_param { source: "/nowhere/train.txt" batch_size: 8 } }\n' + ip("data", "bbox", 84)
                 + 'layer { name: "l" type: "SmoothL1Loss" bottom: "bbox" bottom: "t" bottom: "wi" bottom: "wo" '
                   'top: "l" loss_weight: 1 }\n')
    got = shapes(build_nets(path)[0])
    assert got["t"] == got["wi"] == got["wo"] == (8, 84)


def test_a_wrong_count_of_bottoms_is_the_files_whatever_was_assumed(tmp_path):
    """A ReLU given two bottoms stops Caffe whatever the data (neuron_layer.hpp, ExactNumBottomBlobs
    1): the refusal does not say the shapes were assumed."""
    path = write(tmp_path, HDF5 + 'layer { name: "r" type: "ReLU" bottom: "data" bottom: "label" top: "r" }\n')
    run = run_in_process(path)
    assert run.returncode == 2 and "takes exactly 1 bottom blob, got 2" in run.stderr
    assert "assumed" not in run.stderr


def test_a_label_flattened_for_its_loss_is_as_flat_as_the_prediction(tmp_path):
    """A denoising autoencoder's target, flattened (axis 1 to the end, flatten_layer.cpp) and compared
    by EuclideanLoss with a 100-output InnerProduct: a label of 100 values an item, 8x100, which
    flattening leaves as it is."""
    path = write(tmp_path, HDF5 + ip("data", "rec", 100)
                 + 'layer { name: "flat" type: "Flatten" bottom: "label" top: "flat" }\n'
                 + loss("EuclideanLoss", "rec", "flat"))
    got = shapes(build_nets(path)[0])
    assert got["label"] == got["flat"] == (8, 100)


def _decoder(classes_loss="", label=DATA.format(name="label", top="label")):
    """A SegNet-style net (caffe-segnet's Upsample): two 2x2 poolings, then two Upsample layers
    whose sizes the file fixes, 50x66 and 100x132, each fed the mask of the pooling it mirrors."""
    pool = ('layer {{ name: "{t}" type: "Pooling" bottom: "{b}" top: "{t}" top: "{t}_mask" '
            'pooling_param {{ pool: MAX kernel_size: 2 stride: 2 }} }}\n')
    up = ('layer {{ name: "{t}" type: "Upsample" bottom: "{b}" bottom: "{m}_mask" top: "{t}" '
          'upsample_param {{ upsample_h: {h} upsample_w: {w} }} }}\n')
    return (DATA.format(name="data", top="data") + label
            + pool.format(t="pool1", b="data") + pool.format(t="pool2", b="pool1")
            + up.format(t="up2", b="pool2", m="pool2", h=50, w=66) + up.format(t="up1", b="up2", m="pool1", h=100, w=132)
            + conv("up1", "score", 11, 3, pad=1)
            + 'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "score" bottom: "label" top: "loss"'
            + classes_loss + ' }\n')


def test_an_image_size_the_nets_own_upsample_sizes_fix_is_tried(tmp_path):
    """By hand: up2 gives 50x66, which must be pool1's mask, so pool1 is 50x66 and the image 100x132
    (2x2 pooling, stride 2), the size up1 restores; no conventional or searched size gives it. The
    largest size a layer fixes, 100x132, is tried before the searched ones, and the assumption names
    the layer: data 4x3x100x132, the label one class a pixel, 4x1x100x132."""
    net = build_nets(write(tmp_path, _decoder()))[0]
    assert shapes(net)["data"] == (4, 3, 100, 132) and shapes(net)["label"] == (4, 1, 100, 132)
    (said,) = [a.what for a in net.assumptions if a.layer == "data"]
    assert "100x132 and 3 channels (the largest map size the net's own layers fix (layer 'up1'))" in said


def test_where_a_size_builds_further_its_own_refusal_is_the_one_said(tmp_path):
    """The same net with its label given (an Input layer, 4x1x100x132) and caffe-segnet's
    weight_by_label_freqs with no class_weighting, which its SoftmaxWithLoss refuses at any size
    (softmax_loss_layer.cpp: one weight per class). At 224x224 the net stops earlier, at up2; at
    100x132 it reaches the loss: that refusal is the one said."""
    label = ('layer { name: "label" type: "Input" top: "label" input_param { shape { dim: 4 dim: 1 dim: 100 '
             'dim: 132 } } }\n')
    run = run_in_process(write(tmp_path, _decoder(" loss_param { weight_by_label_freqs: true }", label)))
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
    assert "layer 'loss': 0 class_weighting values for 11 classes" in run.stderr
    assert "100x132" in run.stderr


def test_an_infogain_matrix_from_an_absent_dataset_takes_the_classes_squared(tmp_path):
    """knub/sentence-boundary-detection-nn's InfogainLoss reads H as its third bottom, from an HDF5 file
    that is not here (batch 1). BVLC's infogain_loss_layer.cpp Reshape checks infogain->count() ==
    num_labels * num_labels, num_labels the prediction's classes (here 2, axis 1): H is taken as
    1x1x2x2, and the Data layer's own label (4 values, one per item) is left as it is."""
    path = write(tmp_path, DATA.format(name="data", top="data").replace('top: "data"', 'top: "data" top: "label"')
                 + 'layer { name: "h" type: "HDF5Data" top: "H" hdf5_data_param { source: "/nowhere/h.txt" '
                   'batch_size: 1 } }\n'
                 'layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { '
                 'num_output: 2 } }\n'
                 'layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }\n'
                 + loss("InfogainLoss", "prob", "label", "H"))
    net = build_nets(path)[0]
    assert shapes(net)["H"] == (1, 1, 2, 2) and shapes(net)["label"] == (4,)


def test_a_layers_tops_assumed_for_one_reason_are_said_once(tmp_path):
    """A Python data layer of three tops, each taken as an image (tried as a new user would: one refusal
    wrote the same reason three times in a line of about 2,000 characters): one reason, three tops."""
    (tmp_path / "n.prototxt").write_text(
        'layer { name: "py" type: "Python" top: "a" top: "b" top: "c" python_param { module: "absent" layer: "L" } }\n'
        'layer { name: "r" type: "Reshape" bottom: "a" top: "r" reshape_param { shape { dim: 7 dim: 11 } } }\n'
        'layer { name: "s" type: "Silence" bottom: "b" bottom: "c" bottom: "r" }\n')
    run = run_in_process("n.prototxt", cwd=tmp_path)
    assert run.returncode == 2
    assert "tops 'a', 'b', 'c' are " in run.stderr and run.stderr.count("its data comes from Python code") == 1


def test_a_check_no_size_of_the_assumed_data_passes_is_not_blamed_on_it(tmp_path):
    """Tried as a new user would (a voxel generator's train net): a Python data layer's image is
    assumed (16x3x224x224), while an InnerProduct and a Reshape make a 5-axis blob of the net's own,
    16x4x2x2x2 = 16 x 32 values whatever the image, and PReLU reads its bottom through Blob::channels(),
    which refuses more than 4 axes (blob.hpp LegacyShape: CHECK_LE(num_axes(), 4)). No size of the data
    changes that: the refusal says Caffe stops there, not that the shapes follow from the assumed size.
    A Reshape that needs the data's own batch (32 x 64 = 2,048 values asked of the assumed 16 items of 32
    values, 512; a batch of 64 gives them) still says the size was assumed."""
    voxels = ('layer { name: "r" type: "Reshape" bottom: "fc" top: "v" '
              'reshape_param { shape { dim: 0 dim: 4 dim: 2 dim: 2 dim: 2 } } }\n'
              'layer { name: "p" type: "PReLU" bottom: "v" top: "v" }\n')
    path = write(tmp_path, PYDATA.format(params="{'batch_size': 16}") + ip("data", "fc", 32) + voxels
                 + 'layer { name: "s" type: "Silence" bottom: "label" }\n')
    run = run_in_process(path)
    assert run.returncode == 2 and "layer 'p'" in run.stderr and "(16, 4, 2, 2, 2)" in run.stderr
    assert "Caffe stops here too" in run.stderr and "follow from a size protoaudit assumed" not in run.stderr
    batch = ('layer { name: "r" type: "Reshape" bottom: "fc" top: "v" '
             'reshape_param { shape { dim: 32 dim: 64 } } }\n')
    path = write(tmp_path, PYDATA.format(params="{'batch_size': 16}") + ip("data", "fc", 32) + batch
                 + 'layer { name: "s" type: "Silence" bottom: "label" bottom: "v" }\n')
    run = run_in_process(path)
    assert run.returncode == 2 and "layer 'r'" in run.stderr
    assert "follow from a size protoaudit assumed" in run.stderr and "Caffe stops here too" not in run.stderr


def test_a_rank_protoaudit_guessed_is_blamed_where_another_rank_passes(tmp_path):
    """Tried as a new user would (a pose regressor's HDF5 net, its data absent): the data's two axes are
    a guess, the EuclideanLoss's size beside a 4-wide slice (1x5), so the Convolution makes a 2-axis blob
    that LRN refuses (lrn_layer.cpp: CHECK_EQ(4, bottom[0]->num_axes())). The data as an image of one
    pixel, 1x5x1x1, passes: the refusal says the shape was assumed, not that Caffe stops there."""
    path = write(tmp_path,
                 'layer { name: "d" type: "HDF5Data" top: "full" top: "fake" '
                 'hdf5_data_param { source: "/nowhere/x.txt" batch_size: 1 } }\n'
                 'layer { name: "cut" type: "Slice" bottom: "full" top: "data" top: "label" '
                 'slice_param { axis: 1 slice_point: 4 } }\n'
                 + conv("data", "conv", 2, 1)
                 + 'layer { name: "norm" type: "LRN" bottom: "conv" top: "norm" }\n' + ip("norm", "fc", 1)
                 + loss("EuclideanLoss", "fc", "label")
                 + 'layer { name: "s" type: "Silence" bottom: "fake" }\n')
    run = run_in_process(path)
    assert run.returncode == 2 and "layer 'norm': LRN needs a 4-axis bottom" in run.stderr
    assert "top 'full' is 1x5" in run.stderr and "Caffe stops here too" not in run.stderr
    run = run_in_process(path, "--input", "full=1x5x1x1", "--input", "fake=1x3x224x224")
    assert run.returncode == 0, run.stderr


def test_a_python_data_layer_whose_param_str_is_a_shape_takes_it(tmp_path):
    """Tried as a new user would (a 3D-ResNet's net, its CustomData module not in the folder): each
    Python data layer's param_str is its top's shape, '2,3,16,112,112' and '2,1,16,112,112' (the
    repository's CustomData.py reads it so). They are taken, said as assumptions, where a 224x224
    image was assumed, which the 5-axis convolution refuses. A 3x3x3 convolution with pad 1 keeps
    16x112x112: 2x4x16x112x112. --batch sets the first axis, as for any data layer."""
    py = ('layer {{ name: "{name}" type: "Python" top: "{name}" python_param {{ module: "CustomData" '
          'layer: "CustomData" param_str: "{shape}" }} }}\n')
    path = write(tmp_path, py.format(name="data", shape="2,3,16,112,112")
                 + py.format(name="gt", shape="2 1 16 112 112")
                 + 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 4 '
                   'kernel_size: 3 kernel_size: 3 kernel_size: 3 pad: 1 pad: 1 pad: 1 } }\n'
                 + 'layer { name: "s" type: "Silence" bottom: "gt" bottom: "c" }\n')
    net = build_nets(path)[0]
    got = shapes(net)
    assert got["data"] == (2, 3, 16, 112, 112) and got["gt"] == (2, 1, 16, 112, 112)
    assert got["c"] == (2, 4, 16, 112, 112)
    said = [a.what for a in net.assumptions if a.layer == "data"]
    assert said and "param_str '2,3,16,112,112' is read as its top's shape" in said[0]
    assert shapes(build_nets(path, batch=4)[0])["data"] == (4, 3, 16, 112, 112)
