"""Tsinghua-Tencent 100K's Caffe (asyncbridge/tsinghua-tencent-100k ea8f399, code/caffe/): its schema, DriveData,
Tiling, L1Loss, the August 2015 BVLC layers around them, and the repository's two nets.

Expected values are derived by hand below from that commit's code/caffe/src/caffe/layers/*.cpp/.cu and
code/caffe/include/caffe/*.hpp, cited by file and line. The nets are in tests/data/tt100k (tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops, touched
from protoaudit.audit import build_nets
from protoaudit.layers import layer_class
from protoaudit.layers.base import CUDNN_2015_FORKS
from protoaudit.read.load import load

NETS = os.path.join(DATA, "tt100k")
F = 4  # bytes per float


def inputs(**shapes):
    """Net inputs (input, input_shape): the fork, of August 2015, has no Input layer."""
    return "".join(f'input: "{n}" input_shape {{ ' + " ".join(f"dim: {d}" for d in s) + " }\n"
                   for n, s in shapes.items())


def build(tmp_path, body, force=True, **options):
    return build_text(tmp_path, ("force_backward: true\n" if force else "") + body, schema="tt100k", **options)


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "tt100k.proto")).read()
    assert text.startswith("// asyncbridge/tsinghua-tencent-100k, code/caffe/src/caffe/proto/caffe.proto at commit "
                           "ea8f399502c157e3a87d85cd11f2cc12350cfc4d,\n// copied verbatim below this header")
    # caffe.proto:410-411 and the TilingParameter of the fork's file
    assert "  optional TilingParameter tiling_param = 500;\n  optional DriveDataParameter drive_data_param = 501;\n" \
        in text
    assert "message TilingParameter {" in text and "  optional int32 tile_dim = 1;\n" in text


def test_its_bvlc_layers_are_of_august_2015():
    """accuracy_layer.cpp:26-46 with nums_buffer_ and no accuracy_layer.cu (caffe-enet's rule); the cuDNN R2
    layer files of BVLC f1cc905."""
    assert issubclass(layer_class("Accuracy", "tt100k"), layer_class("Accuracy", "enet"))
    assert "tt100k" in CUDNN_2015_FORKS


DRIVE = ('layer {{ name: "d" type: "DriveData" {tops} transform_param {{ mean_file: "{mean}" }} '
         'data_param {{ source: "nowhere" batch_size: 2 backend: LMDB }} drive_data_param {{ cropped_height: 48 '
         'cropped_width: 64 tiling_height: 3 tiling_width: 4 label_resolution: 8 catalog_resolution: 2 {more}}} }}\n')
THREE = 'top: "data" top: "label" top: "label_type"'


def test_drive_data_tops_and_batches(tmp_path):
    """DataLayerSetUp (drive_data_layer.cpp:30-89): data (2, 3, 48, 64) (cpp:37-42); label (2, 8, 3 * 8, 4 * 8)
    = (2, 8, 24, 32) (cpp:65-71); label_type (2, 1, 3 * 2, 4 * 2) = (2, 1, 6, 8) (cpp:72-76). PREFETCH_COUNT 3
    (data_layers.hpp:102), each batch's Blobs on the host and the device (base_data_layer.cpp:50-66):
    3 * 2*3*48*64 = 55,296 floats, 3 * 2*8*24*32 = 36,864, 3 * 2*6*8 = 288. The tops are the layer's own,
    written by each forward's copy (base_data_layer.cu:12-23)."""
    net = build(tmp_path, DRIVE.format(tops=THREE, mean="m.binaryproto", more=""), force=False)
    assert tops(net, "d") == [(2, 3, 48, 64), (2, 8, 24, 32), (2, 1, 6, 8)]
    b = layer_buffers(net, "d")
    assert b[("prefetch[3].data", "device")] == b[("prefetch[3].data (host)", "host")] == 55296 * F
    assert b[("prefetch[3].label", "device")] == 36864 * F and b[("prefetch[3].label_type", "device")] == 288 * F
    assert touched(net, "d") == {("top", j, "data", "forward", "device") for j in range(3)}


def test_drive_data_without_the_dataset_takes_the_crop_for_the_stored_images(tmp_path):
    """Mean file and LMDB absent: the stored images are taken as the crop, 3 x 48 x 64 = 9,216 values.
    data_mean_ (data_transformer.cpp:18-27): 9,216 floats. The reader's strings (data_reader.cpp:19-20, :47,
    :108): prefetch 4 x batch 2 = 8, each a std::string (32 bytes) of 9,216 raw bytes and its terminator.
    load_batch's working set: v_mean 9,216 floats (cpp:581), the label Datum 8 * 24*32 = 6,144 floats
    (cpp:456-515), the larger of the 11 label maps (11 * 768 = 8,448 floats, cpp:152-171) and the image's
    warp (mean_img 48*64 = 3,072 floats and one channel of the stored image in floats, 3,072: cpp:682, :691-693),
    no picgen without genlist_file (cpp:631-635); and the parsed record, 9,216 bytes (cpp:567, :603)."""
    net = build(tmp_path, DRIVE.format(tops=THREE, mean="m.binaryproto", more=""), force=False)
    b = layer_buffers(net, "d")
    assert b[("data_mean_", "host")] == 9216 * F
    assert b[("DataReader strings", "host")] == 8 * (32 + 9216 + 1)
    assert b[("load_batch working set", "host")] == F * (9216 + 6144 + 8448) + 9216
    said = " ".join(a.what for a in net.assumptions)
    assert "taken as the crop's 48x64" in said


def test_drive_data_stored_images_given_and_artificial_marks(tmp_path):
    """--define image_height=100 --define image_width=200: the mean and each record 3 * 100 * 200 = 60,000; with
    genlist_file, picgen's 4 planes of the crop, 4 * 48*64 = 12,288 floats (cpp:631-635); the image's warp is
    now 3,072 + 20,000 floats, above the label maps' 8,448."""
    net = build(tmp_path, DRIVE.format(tops=THREE, mean="m.binaryproto", more='genlist_file: "g.txt" '), force=False,
                defines={"image_height": "100", "image_width": "200"})
    b = layer_buffers(net, "d")
    assert b[("data_mean_", "host")] == 60000 * F
    assert b[("load_batch working set", "host")] == F * (60000 + 12288 + 6144 + 3072 + 20000) + 60000


def test_drive_data_with_two_tops_stops(tmp_path):
    """CHECK_GE(top.size(), 3) after shaping the label (drive_data_layer.cpp:81)."""
    with pytest.raises(Exception, match="CHECK_GE"):
        build(tmp_path, DRIVE.format(tops='top: "data" top: "label"', mean="m.binaryproto", more=""), force=False)


def test_drive_data_without_a_mean_file_stops(tmp_path):
    """load_batch reads data_mean_.cpu_data() (drive_data_layer.cpp:580): an empty Blob's CHECK(data_)
    (blob.cpp:72)."""
    with pytest.raises(Exception, match="mean_file"):
        build(tmp_path, DRIVE.format(tops=THREE, mean="", more="").replace(' mean_file: ""', ""), force=False)


def test_drive_data_alone_has_one_top(tmp_path):
    """One top: output_labels_ false (base_data_layer.cpp:20-24), only data shaped and prefetched."""
    net = build(tmp_path, DRIVE.format(tops='top: "data"', mean="m.binaryproto", more=""), force=False)
    assert tops(net, "d") == [(2, 3, 48, 64)]
    assert not any(name.startswith("prefetch[3].label") for name, _ in layer_buffers(net, "d"))


TILE = 'layer {{ name: "t" type: "Tiling" bottom: "x" top: "y" tiling_param {{ tile_dim: {t} }} }}\n'
EUCLID = 'layer { name: "loss" type: "EuclideanLoss" bottom: "y" bottom: "z" }\n'


def test_tiling_shape_and_host_copies(tmp_path):
    """x (2, 32, 3, 5), tile_dim 4: top (2, 32 / 16, 3 * 4, 5 * 4) = (2, 2, 12, 20) (tiling_layer.cpp:43-44).
    Forward_gpu and Backward_gpu run the CPU code (tiling_layer.cu:13-22): bottom data and top data on the host
    (cpp:50-51); backward with propagate_down[0], the top's diff and the bottom's on the host (cpp:77-78). No
    buffer of its own."""
    net = build(tmp_path, inputs(x=(2, 32, 3, 5), z=(2, 2, 12, 20)) + TILE.format(t=4) + EUCLID)
    assert tops(net, "t") == [(2, 2, 12, 20)]
    assert layer_buffers(net, "t") == {}
    assert touched(net, "t") == {("bottom", 0, "data", "forward", "host"), ("top", 0, "data", "forward", "host"),
                                 ("top", 0, "diff", "backward", "host"), ("bottom", 0, "diff", "backward", "host")}


def test_tiling_checks(tmp_path):
    """CHECK_EQ(0, input_channels_ % tile_dim_sq_) (cpp:40-42); CHECK_GT(tile_dim_, 0) (cpp:24)."""
    with pytest.raises(Exception, match="multiples"):
        build(tmp_path, inputs(x=(2, 12, 3, 5)) + TILE.format(t=4))
    with pytest.raises(Exception, match="tile_dim"):
        build(tmp_path, inputs(x=(2, 12, 3, 5)) + TILE.format(t=0))


L1 = 'layer { name: "l1" type: "L1Loss" bottom: "a" bottom: "b" top: "loss" }\n'


def test_l1_loss(tmp_path):
    """a, b (2, 4, 6, 8): diff_ and sign_ (2, 4, 6, 8) (l1_loss_layer.cpp:17-20), 384 floats each, written on the
    device (.cu:16-23); the loss on the host (.cu:25), its diff read there (.cu:34); both bottoms' diffs, as
    AllowForceBackward is true (loss_layers.hpp) and force_backward asks for them (.cu:31-41)."""
    net = build(tmp_path, inputs(a=(2, 4, 6, 8), b=(2, 4, 6, 8)) + L1)
    assert tops(net, "l1") == [()]
    assert layer_buffers(net, "l1") == {("diff_", "device"): 384 * F, ("sign_", "device"): 384 * F}
    t = touched(net, "l1")
    assert {("top", 0, "data", "forward", "host"), ("top", 0, "diff", "backward", "host"),
            ("bottom", 0, "diff", "backward", "device"), ("bottom", 1, "diff", "backward", "device")} <= t


def test_l1_loss_checks_channels_height_and_width(tmp_path):
    """CHECK_EQ of channels, height and width (l1_loss_layer.cpp:14-16): (2, 4, 6, 8) and (2, 4, 8, 6) have one
    count(1) but stop."""
    with pytest.raises(Exception, match="channels, height and width"):
        build(tmp_path, inputs(a=(2, 4, 6, 8), b=(2, 4, 8, 6)) + L1)


def test_the_train_val_net():
    """code/model/train_val.prototxt: DriveData 20 x 3 x 480 x 640. conv 11/4: (480 - 11) / 4 + 1 = 118,
    (640 - 11) / 4 + 1 = 158; max pool 3/2 (ceil): 59 x 79; conv 5 pad 2 keeps it; pool: 29 x 39; the 3x3 pad 1
    convolutions keep it; pool4: 14 x 19; Convolution6 kernel 6 pad 3: 14 + 6 - 6 + 1 = 15, 20. Tiling 8 of 128
    channels: (20, 2, 120, 160), the label's 15 * 8 x 20 * 8; Tiling 2 of 1004: (20, 251, 30, 40), label_type's
    15 * 2 x 20 * 2; Tiling 8 of 256: (20, 4, 120, 160), whose L1Loss has diff_ and sign_ of 1,536,000 floats."""
    path = os.path.join(NETS, "train_val.prototxt")
    assert load(path).schema.name == "tt100k"
    net = build_nets(path)[0]
    assert tops(net, "data") == [(20, 3, 480, 640), (20, 8, 120, 160), (20, 1, 30, 40)]
    assert tops(net, "output_pixel") == [(20, 2, 120, 160)] and tops(net, "output_type") == [(20, 251, 30, 40)]
    assert tops(net, "output_bb") == [(20, 4, 120, 160)]
    assert layer_buffers(net, "loss_bb") == {("diff_", "device"): 1536000 * F, ("sign_", "device"): 1536000 * F}


def test_the_nets_audit_with_no_flags():
    """Tried as a new user would: `protoaudit train_val.prototxt`, `protoaudit model.prototxt`."""
    for name in ("train_val.prototxt", "model.prototxt"):
        r = run_in_process(name, cwd=NETS, timeout=300)
        assert r.returncode in (0, 1), r.stderr
        assert "Total:" in r.stdout and "Tsinghua-Tencent 100K's Caffe" in r.stdout
