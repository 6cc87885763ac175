"""JiangQH's Caffe (JiangQH/caffe 0843699, pinned by JiangQH/Hypercolumns-Based-Surface-Normal-Recovery): its
schema, ImageNormalData, HyperColumns, its May 2016 BVLC layers, and the repository's two nets.

Expected values are derived by hand below from that commit's src/caffe/layers/*.cpp/.cu,
include/caffe/layers/*.hpp, src/caffe/data_transformer.cpp and src/caffe/util/io.cpp, cited by file and line.
The nets are in tests/data/jiangqh (tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops, touched
from protoaudit.audit import build_nets
from protoaudit.errors import InputError
from protoaudit.layers import layer_class
from protoaudit.memory.buffers import layer_touches
from protoaudit.read.load import load

NETS = os.path.join(DATA, "jiangqh")
F = 4  # bytes per float
D = 8  # bytes per double


def inputs(**shapes):
    return "".join(f'layer {{ name: "{n}" type: "Input" top: "{n}" input_param {{ shape {{ '
                   + " ".join(f"dim: {d}" for d in s) + " } } }\n" for n, s in shapes.items())


def build(tmp_path, body, **options):
    return build_text(tmp_path, "force_backward: true\n" + body, schema="jiangqh", **options)


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "jiangqh.proto")).read()
    assert text.startswith("// JiangQH/caffe, src/caffe/proto/caffe.proto at commit "
                           "084369909ce07cf0c75e72215260e17cbbfe3acc,\n// copied verbatim below this header")
    # caffe.proto:408 and :412-416 of the fork's file
    assert "  optional HyperColumnsParameter hypercolumns_param = 146;\n" in text
    assert ("message HyperColumnsParameter {\n    optional bool is_train = 1 [default = true];\n"
            "    optional int32 sample_num = 2 [default = 1000];\n"
            "    optional int32 skip_ratio = 3 [default = 1];\n}\n") in text


def test_its_bvlc_layers_are_of_may_2016():
    """BVLC e79bc8f's base_data_layer (3 batches of data_ and label_, copied into the tops: hpp:71-77,
    cpp:107-125) is the SSD fork's base; no accuracy_layer.cu (CPU code only, as caffe-enet's); batch_norm_layer.cpp
    is the same file as GGL's (BVLC c62e06b's), which keeps the file's lr_mult for the statistics."""
    for kind, fork in (("Data", "ssd"), ("ImageData", "ssd"), ("WindowData", "ssd"), ("Accuracy", "enet"),
                       ("BatchNorm", "ggl")):
        assert issubclass(layer_class(kind, "jiangqh"), layer_class(kind, fork)), kind



def test_batch_norm_statistics_keep_the_files_lr_mult(tmp_path):
    """Its upgrade_proto.cpp (BVLC e79bc8f, May 2016) predates BVLC a8ec123's BatchNorm upgrade (it names no
    BatchNorm): three params given lr_mult 1 stay 1, and its batch_norm_layer.cpp adds no ParamSpec (cpp:10-36)."""
    body = inputs(x=(2, 3, 4, 4)) + ('layer { name: "bn" type: "BatchNorm" bottom: "x" top: "bn" param { lr_mult: 1 } '
                                     'param { lr_mult: 1 } param { lr_mult: 1 } }\n')
    net = build(tmp_path, body)
    assert [p.lr_mult for p in net.layer("bn").params] == [1, 1, 1]

IND = """layer {{ name: "data" type: "ImageNormalData" top: "data" top: "normal"
  transform_param {{ {transform} }}
  image_data_param {{ new_height: 48 new_width: 64 batch_size: 4 source: "{source}" {more} }} }}
"""


def ind(source="absent/list.txt", transform="", more=""):
    return IND.format(source=source, transform=transform, more=more)


def test_image_normal_data_without_its_dataset(tmp_path):
    """The list is not here: the tops are the parameters', as ImageData's. InferBlobShape of the first image resized
    to 48 x 64 in colour (image_normal_data_layer.cpp:63-67, data_transformer.cpp:595-611): (1, 3, 48, 64), the
    batch size first (cpp:70-72): data (4, 3, 48, 64), and the normal top the same top_shape (cpp:77-78). Each of
    the 3 batches holds data_ and label_ of that shape (cpp:73-76), with device copies in GPU mode
    (base_data_layer.cpp:53-67); the forward copies them into the tops (:107-125)."""
    net = build(tmp_path, ind() + inputs(x=(4, 3, 48, 64))
                + 'layer { name: "loss" type: "EuclideanLoss" bottom: "normal" bottom: "x" }\n')
    assert tops(net, "data") == [(4, 3, 48, 64), (4, 3, 48, 64)]
    batch = 4 * 3 * 48 * 64 * F
    buffers = layer_buffers(net, "data")
    assert buffers[("prefetch[3].data", "device")] == 3 * batch
    assert buffers[("prefetch[3].normal", "device")] == 3 * batch
    assert ("top", 1, "data", "forward", "device") in touched(net, "data")


def test_image_normal_data_keeps_its_list_of_pairs(tmp_path):
    """lines_ is a vector<pair<string, string>> (hpp:42) filled by push_back (cpp:47-50): 3 entries, capacity 4,
    64 bytes each; names of up to 15 characters stay in the strings. The list is there, its first image is not: the
    parameters fix the size (new_height/new_width), as ImageData's."""
    (tmp_path / "list.txt").write_text("i/1.png n/1.bin\ni/2.png n/2.bin\ni/3.png n/3.bin\n")
    net = build(tmp_path, ind(source=str(tmp_path / "list.txt")))
    assert tops(net, "data") == [(4, 3, 48, 64), (4, 3, 48, 64)]
    assert layer_buffers(net, "data")[("lines_", "host")] == 4 * 64


def test_image_normal_data_takes_no_crop_nor_grey(tmp_path):
    """TransformImg and TransformNormal CHECK_EQ the image's height and width against the blob's
    (data_transformer.cpp:360-361, :407-408), which InferBlobShape cropped: a crop_size of 32 on 48 x 64 images
    stops. The normal is a 3-channel float cv::Mat (util/io.cpp:100) checked against the blob's channels
    (data_transformer.cpp:399): is_color false (1 channel) stops."""
    with pytest.raises(InputError, match="crop_size 32"):
        build(tmp_path, ind(transform="crop_size: 32"))
    with pytest.raises(InputError, match="is_color"):
        build(tmp_path, ind(more="is_color: false"))


def hyper(param, bottoms="normal f1 f2 f3 f4 f5 f6"):
    b = " ".join(f'bottom: "{x}"' for x in bottoms.split())
    return (f'layer {{ name: "hc" type: "HyperColumns" {b} top: "hc" top: "pts" '
            f'hypercolumns_param {{ {param} }} }}\n')


FEATURES = dict(normal=(2, 3, 16, 16), f1=(2, 4, 16, 16), f2=(2, 8, 8, 8), f3=(2, 16, 4, 4), f4=(2, 16, 2, 2),
                f5=(2, 32, 2, 2), f6=(2, 64, 1, 1))
TOTAL = 4 + 8 + 16 + 16 + 32 + 64  # total_channels_: bottoms 1-6 (cpp:110-120)


def test_hypercolumns_in_training(tmp_path):
    """N 2, K 3, H = W = 16 (cpp:88-91). Training: sample_num 10 (cpp:99-100), so top 0 (2 * 10, 140, 1, 1) and
    top 1 (20, 3) (cpp:131-140). GPU mode: the first forward cudaMallocs the widths, heights and channels (7 ints
    each, .cu:278-283), the bilinear map 6 * 6 feature bottoms * 256 pixels doubles (.cu:305-307) and the sample
    list of 20 ints (.cu:115); mappings_ holds the same 9,216 doubles on the host, grown by push_back to 16,384
    (.cu:329-334). selected_points_: 20 ints, capacity 32 (cpp:24-72); width_, height_, scalef_, channels_, padf_:
    7 entries each, capacity 8, 4 bytes each (cpp:105-119). generate_list reads the normal map on the host
    (cpp:41). Backward writes the diffs of bottoms 1-6, never bottom 0's (cpp:257-259, .cu:262-264)."""
    net = build(tmp_path, inputs(**FEATURES) + hyper("sample_num: 10"))
    assert tops(net, "hc") == [(20, TOTAL, 1, 1), (20, 3)]
    assert layer_buffers(net, "hc") == {
        ("cuda_widths_", "device"): 7 * F, ("cuda_heights_", "device"): 7 * F, ("cuda_channels_", "device"): 7 * F,
        ("cuda_map_lists_", "device"): 6 * 6 * 256 * D, ("mappings_", "host"): 16384 * D,
        ("cuda_samplelist_", "device"): 20 * F, ("selected_points_", "host"): 32 * F,
        ("width_, height_, scalef_, channels_, padf_", "host"): 5 * 8 * F}
    t = touched(net, "hc")
    assert ("bottom", 0, "data", "forward", "host") in t
    assert {j for (what, j, part, stage, _) in t if what == "bottom" and part == "diff"} == set(range(1, 7))
    assert layer_buffers(net, "hc", mode="cpu") == {("selected_points_", "host"): 32 * F,
                                                    ("width_, height_, scalef_, channels_, padf_", "host"): 5 * 8 * F}


def test_hypercolumns_outside_training_samples_every_skip_ratio_th_point(tmp_path):
    """is_train false: skip_ratio 3 does not divide 16 * 16 = 256 (256 % 3 = 1), 2 does (cpp:93-98); sample_num =
    256 / 2 = 128 (cpp:102): top 0 (2 * 128, 140, 1, 1), top 1 (256, 3). The normal map is not read on the host."""
    net = build(tmp_path, inputs(**FEATURES) + hyper("is_train: false skip_ratio: 3"))
    assert tops(net, "hc") == [(256, TOTAL, 1, 1), (256, 3)]
    assert layer_buffers(net, "hc")[("cuda_samplelist_", "device")] == 256 * F
    assert ("bottom", 0, "data", "forward", "host") not in touched(net, "hc")


def test_hypercolumns_needs_seven_bottoms_on_the_gpu(tmp_path):
    """Forward_gpu passes bottom[1] to bottom[6] to its kernels (.cu:163-167): with three bottoms it stops on the
    GPU; the CPU code loops over the bottoms there are (cpp:169): top 0 (20, 4 + 8, 1, 1)."""
    net = build(tmp_path, inputs(**FEATURES) + hyper("sample_num: 10", "normal f1 f2"))
    assert tops(net, "hc") == [(20, 12, 1, 1), (20, 3)]
    stops = [t for t in layer_touches(net.layer("hc"), "gpu", "caffe") if t.what == "stop"]
    assert len(stops) == 1 and ".cu:163-167" in stops[0].note
    assert not [t for t in layer_touches(net.layer("hc"), "cpu", "caffe") if t.what == "stop"]


def test_hypercolumns_checks(tmp_path):
    """skip_ratio 0 divides by zero (cpp:94); a bottom of 2 axes has no shape(2) (cpp:88-91)."""
    with pytest.raises(InputError, match="skip_ratio 0"):
        build(tmp_path, inputs(**FEATURES) + hyper("skip_ratio: 0"))
    with pytest.raises(InputError, match="axes"):
        build(tmp_path, inputs(normal=(2, 3), f1=(2, 4, 16, 16)) + hyper("", "normal f1"))


VGG_CHANNELS = 64 + 128 + 256 + 512 + 512 + 4096  # conv1_2, conv2_2, conv3_3, conv4_3, conv5_3, fc7-conv


def test_the_train_net():
    """model/train.prototxt: ImageNormalData 5 x 3 x 224 x 224 (new_height/new_width, batch_size 5), the normal top
    alike. VGG-16's 3x3 pad-1 convolutions keep the size and the 2/2 poolings halve it: conv1_2 224, conv2_2 112,
    conv3_3 56, conv4_3 28, conv5_3 14; pool5 7, fc6-conv kernel 7: 1 x 1, fc7-conv 1 x 1. HyperColumns, training,
    sample_num 1000: top 0 (5 * 1000, 5568, 1, 1), top 1 (5000, 3). The bilinear map: 6 * 6 * 224 * 224 doubles."""
    path = os.path.join(NETS, "train.prototxt")
    assert load(path).schema.name == "jiangqh"
    net = build_nets(path)[0]
    assert tops(net, "data") == [(5, 3, 224, 224), (5, 3, 224, 224)]
    assert tops(net, "fc7-conv") == [(5, 4096, 1, 1)]
    assert tops(net, "hypercolumns") == [(5000, VGG_CHANNELS, 1, 1), (5000, 3)]
    assert layer_buffers(net, "hypercolumns")[("cuda_map_lists_", "device")] == 6 * 6 * 224 * 224 * D


def test_the_deploy_net():
    """model/deploy.prototxt: Input 1 x 3 x 224 x 224 for the image and the normal; HyperColumns outside training,
    skip_ratio 1: sample_num 224 * 224 = 50176 (cpp:102): top 0 (50176, 5568, 1, 1), fc1 (50176, 4096)."""
    net = build_nets(os.path.join(NETS, "deploy.prototxt"))[0]
    assert tops(net, "hypercolumns") == [(50176, VGG_CHANNELS, 1, 1), (50176, 3)]
    assert tops(net, "fc1") == [(50176, 4096)]


def test_the_nets_audit_with_no_flags():
    """Tried as a new user would: `protoaudit train.prototxt`, `protoaudit deploy.prototxt`."""
    for name in ("train.prototxt", "deploy.prototxt"):
        r = run_in_process(name, cwd=NETS, timeout=300)
        assert r.returncode in (0, 1), r.stderr
        assert "Total:" in r.stdout and "JiangQH's Caffe" in r.stdout
