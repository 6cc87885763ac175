"""PG-CNN's layers for BVLC Caffe (mysee1989/PG-CNN f3faafd): its schema, MultiLabelImageData and
MultiROIPooling held against its source, and its five nets (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's proto/caffe.proto,
include/multi_label_image_data_layer.hpp, include/multi_roi_pooling_layer.hpp,
src/multi_label_image_data_layer.cpp, src/multi_roi_pooling_layer.cpp and .cu, cited by file and line.
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, by_layer, layer_buffers, run_in_process, tops, touched
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import layer_touches, net_buffers
from protoaudit.read.load import load
from protoaudit.read.schema import load_schema

import datasets as ds

HERE = os.path.join(DATA, "pgcnn")
NETS = ("gACNN_train", "gACNN_test", "pACNN_train", "pACNN_test", "deploy")
F = 4  # bytes per float

# proto/caffe.proto's two LayerParameter lines (2-3), and the lines of its messages that BVLC's
# ImageDataParameter does not have (the name, label_num) and of MultiROIPoolingParameter (38-45)
FIELDS = ["  optional MultiROIPoolingParameter multi_roi_pooling_param = 8266713;",
          "  optional MultiLabelImageDataParameter multi_label_image_data_param = 15711;"]
LABEL_NUM = "  optional uint32 label_num = 13 [default = 28];"
ROI_MESSAGE = [" message MultiROIPoolingParameter {",
               "  optional uint32 pooled_h = 1 [default = 0]; // The pooled output height",
               "  optional uint32 pooled_w = 2 [default = 0]; // The pooled output width",
               "  // Multiplicative spatial scale factor to translate ROI coords from their",
               "  // input scale to the scale used when pooling",
               "  optional float spatial_scale = 3 [default = 1];",
               "  optional uint32 top_num = 4 [default = 1];",
               " }"]


def test_the_proto_is_bvlcs_with_the_repositorys_additions_verbatim():
    """proto/caffe.proto is 46 lines: LayerParameter's two fields, MultiLabelImageDataParameter (BVLC's
    ImageDataParameter, comments and all, with label_num = 13, default 28) and MultiROIPoolingParameter,
    indented by one space as the file has it. BVLC's with those, and nothing else."""
    text = open(os.path.join(ROOT, "proto", "forks", "pgcnn.proto")).read()
    assert text.startswith("// mysee1989/PG-CNN (")
    assert "proto/caffe.proto at commit f3faafd8245fc02b5a5d2a9fdfa3c08eb79b7de5:\n" in text.split("\n", 1)[0] + "\n"
    body = text.split("\n", 2)[2].splitlines()
    bvlc = open(os.path.join(ROOT, "proto", "caffe.proto")).read().splitlines()
    image = bvlc.index("message ImageDataParameter {")
    image_lines = bvlc[image + 1:bvlc.index("}", image)]
    message = ["message MultiLabelImageDataParameter {"] + image_lines + [LABEL_NUM, "}"]
    end = body.index(FIELDS[1]) + 1
    assert body[:end] == bvlc[:end - 2] + FIELDS  # the two fields end LayerParameter
    assert body[end:] == bvlc[end - 2:] + [""] + message + [""] + ROI_MESSAGE


def test_the_multi_label_message_is_image_datas_with_label_num():
    pg = load_schema("pgcnn")
    ml = pg.message("MultiLabelImageDataParameter").DESCRIPTOR
    image = load_schema("bvlc").message("ImageDataParameter").DESCRIPTOR
    same = {(f.name, f.number, f.type, f.default_value) for f in image.fields}
    assert {(f.name, f.number, f.type, f.default_value) for f in ml.fields} == same | {("label_num", 13, 13, 28)}


def data_layer(source, extra="", tops_=("data", "label"), crop=8):
    return ('layer { name: "d" type: "MultiLabelImageData" ' + " ".join(f'top: "{t}"' for t in tops_)
            + (f" transform_param {{ crop_size: {crop} }}" if crop else "")
            + f' multi_label_image_data_param {{ source: "{source}" batch_size: 2 {extra} }} }}\n')


def build(tmp_path, body, **options):
    return build_text(tmp_path, body, schema="pgcnn", **options)


def test_multi_label_tops_and_prefetch(tmp_path):
    """cpp:85-105: the data top (batch_size, 3, crop, crop) (is_color: 3 channels; transform_param's crop, the
    images being absent), the label (batch_size, label_num) = (2, 5); BVLC's prefetch (base_data_layer.cpp):
    data_param.prefetch = 4 batches of each top on the device, and their pinned host copies."""
    net = build(tmp_path, data_layer("absent.txt", "label_num: 5"))
    assert tops(net, "d") == [(2, 3, 8, 8), (2, 5)]
    held = layer_buffers(net, "d")
    assert held[("prefetch[4].data", "device")] == held[("prefetch[4].data (host)", "host")] == 4 * 2 * 3 * 8 * 8 * F
    assert held[("prefetch[4].label", "device")] == held[("prefetch[4].label (host)", "host")] == 4 * 2 * 5 * F
    assert ("lines_", "host") not in held  # the list is absent: not counted
    # label_num's default is 28 (caffe.proto:34)
    assert tops(build(tmp_path, data_layer("absent.txt")), "d")[1] == (2, 28)


def test_multi_label_list_of_the_repository(tmp_path):
    """train_list_example/train.list: ten entries, a name and 49 ints each (cpp:44-53: `infile >> filename`,
    then label_num ints). lines_ (vector<pair<string, vector<int>>>, 32 + 24 = 56 bytes an entry) pushed back
    ten times: capacity 16. Five names of 17 characters, past std::string's 15 inline: 18 bytes each on the
    heap; each vector<int>, copied by make_pair, 49 x 4 bytes. new_height/new_width resize: cv::resize's
    thread state, 2,280 bytes (protoaudit/layers/data.py, measured for BVLC's ImageData)."""
    source = os.path.join(HERE, "train.list")
    net = build(tmp_path, data_layer(source, "label_num: 49 new_height: 232 new_width: 232", crop=224))
    assert tops(net, "d") == [(2, 3, 224, 224), (2, 49)]
    held = layer_buffers(net, "d")
    assert held[("lines_", "host")] == 16 * 56 + 5 * 18 + 10 * 49 * 4
    assert held[("cv::resize thread state", "host")] == 2280


def test_multi_label_reads_the_first_token_as_the_image(tmp_path):
    """cpp:81-85: the first entry's name (its first token), under root_folder, sizes the data top: a 70 x 50
    PNG, 3 channels, no crop, no resize."""
    ds.write_images(str(tmp_path / "imgs"), 1, 3, 50, 70)
    ds.write_list(str(tmp_path / "list.txt"), ["img0.png 3 10 12 30 40", "img0.png 1 11 13 31 41"])
    net = build(tmp_path, data_layer(tmp_path / "list.txt", f'label_num: 5 root_folder: "{tmp_path}/imgs/"', crop=0))
    assert tops(net, "d") == [(2, 3, 50, 70), (2, 5)]
    assert layer_buffers(net, "d")[("lines_", "host")] == 2 * 56 + 2 * 5 * 4  # capacity 2, names inline


def test_multi_label_image_size_only_the_data_decides_is_assumed(tmp_path):
    """No new_height/new_width, no crop: the first image's size (cpp:81-86), its list absent here, is
    assumed and said, with the --input that gives it."""
    net = build(tmp_path, data_layer("absent.txt", "label_num: 5", crop=0))
    assert tops(net, "d") == [(2, 3, 224, 224), (2, 5)]
    assert [a.override for a in net.assumptions] == ["--input data=2x3xHxW"]


def test_multi_label_checks(tmp_path):
    """ExactNumTopBlobs 2 (hpp:33); new_height and new_width set together (cpp:35-37)."""
    with pytest.raises(InputError):
        build(tmp_path, data_layer("absent.txt", tops_=("data",)))
    with pytest.raises(InputError, match="new_height and new_width"):
        build(tmp_path, data_layer("absent.txt", "new_height: 32"))


def inputs(**shapes):
    return "".join(f'layer {{ name: "{n}" type: "Input" top: "{n}" input_param {{ shape {{ '
                   + " ".join(f"dim: {d}" for d in s) + " } } }\n" for n, s in shapes.items())


def roi_layer(tops_=3, top_num=3, pooled="pooled_h: 4 pooled_w: 5"):
    return ('layer { name: "p" type: "MultiROIPooling" bottom: "fm" bottom: "pts" '
            + " ".join(f'top: "r{k}"' for k in range(tops_))
            + f" multi_roi_pooling_param {{ {pooled} spatial_scale: 0.5 top_num: {top_num} }} }}\n")


def test_multi_roi_pooling_shapes_and_what_it_touches(tmp_path):
    """cpp:41-47: top[idx] = (num, channels, pooled_h, pooled_w) of bottom 0 for idx < top_num: 3 x (2, 8, 4, 5),
    2 x 8 x 4 x 5 x 4 = 1,280 bytes each. No buffer of its own. Forward_gpu reads both bottoms
    (cu:142-144) and writes every shaped top (cu:149-161); Backward_gpu reads bottom 1 (cu:168), the diffs of
    the num_rois = 3 tops (cu:178) and writes bottom 0's diff (cu:169), never bottom 1's, though force_backward
    asks for it."""
    net = build(tmp_path, "force_backward: true\n" + inputs(fm=(2, 8, 10, 12), pts=(2, 3, 2)) + roi_layer())
    assert tops(net, "p") == [(2, 8, 4, 5)] * 3
    assert layer_buffers(net, "p") == {}
    got = touched(net, "p")
    assert ("bottom", 0, "diff", "backward", "device") in got
    assert not any(t[0] == "bottom" and t[1] == 1 and t[2] == "diff" for t in got)
    assert {t[1] for t in got if t[:1] == ("top",) and t[2:4] == ("diff", "backward")} == {0, 1, 2}
    assert {t[1] for t in got if t[:1] == ("top",) and t[2:4] == ("data", "forward")} == {0, 1, 2}
    # first touched here: forward, the Inputs' data (an Input's forward writes none), 2 x 8 x 10 x 12 x 4 =
    # 7,680 and 2 x 3 x 2 x 4 = 48 bytes, and the three tops'; backward, the tops' diffs (no layer reads
    # them) and bottom 0's diff
    assert by_layer(net_buffers(net, mode="gpu", engine="caffe"))["p"] == {
        "setup": 0, "forward": 7680 + 48 + 3 * 1280, "backward": 3 * 1280 + 7680}


def test_multi_roi_pooling_fewer_points_than_tops(tmp_path):
    """Two points an image, top_num 3: Forward_gpu zeroes the three tops (cu:149-152) but copies into two
    (cu:157), reading point (b * 3 + t) of bottom 1 (cu:38): at most ((2 - 1) * 3 + 1) * 2 + 1 = 9, inside a
    (2, 2, 3) blob of 12; Backward_gpu reads those two tops' diffs. A fourth top, past top_num, is never
    shaped (0 elements)."""
    net = build(tmp_path, "force_backward: true\n" + inputs(fm=(2, 8, 10, 12), pts=(2, 2, 3)) + roi_layer(4))
    assert tops(net, "p") == [(2, 8, 4, 5)] * 3 + [(0,)]
    got = touched(net, "p")
    assert {t[1] for t in got if t[:1] == ("top",) and t[2:4] == ("diff", "backward")} == {0, 1}


def test_multi_roi_pooling_refusals(tmp_path):
    """pooled_h > 0 (cpp:25); top_num tops at most (cpp:44-45 index top[idx]); at most top_num points (cu:157-158
    write top[top_idx]); bottom 1 holding every point read: (2, 2, 2) = 8 elements, but element 9 is read."""
    fm = inputs(fm=(2, 8, 10, 12), pts=(2, 3, 2))
    with pytest.raises(InputError, match="pooled_h must be > 0"):
        build(tmp_path, fm + roi_layer(pooled="pooled_w: 5"))
    with pytest.raises(InputError, match="top_num 4 but 3 tops"):
        build(tmp_path, fm + roi_layer(3, 4))
    with pytest.raises(InputError, match="3 points per image"):
        build(tmp_path, fm + roi_layer(3, 2))
    with pytest.raises(InputError, match="reads element 9 of bottom 1"):
        build(tmp_path, inputs(fm=(2, 8, 10, 12), pts=(2, 2, 2)) + roi_layer())
    with pytest.raises(InputError, match="has 1 axes"):
        build(tmp_path, inputs(fm=(2, 8, 10, 12), pts=(12,)) + roi_layer())


def test_multi_roi_pooling_has_no_cpu_code(tmp_path):
    """Forward_cpu and Backward_cpu are NOT_IMPLEMENTED (cpp:53, :61): a CPU run stops at each."""
    net = build(tmp_path, inputs(fm=(2, 8, 10, 12), pts=(2, 3, 2)) + roi_layer())
    stops = [t for t in layer_touches(net.layer("p"), "cpu", "caffe") if t.what == "stop"]
    assert [t.stage for t in stops] == ["forward", "backward"] and "cpp:53" in stops[0].note


def test_the_gacnn_net_by_hand():
    """gACNN_train: MultiLabelImageData batch 12, 232 x 232 resized, 224 cropped; label_num 49. Four prefetch
    batches of 12 x 3 x 224 x 224 + 12 x 49 floats. conv4_2 (512 outputs) after three 2 x 2 poolings: 28 x 28;
    the label sliced after 1 and reshaped to (12, 24, 2), 24 points an image; MultiROIPooling's 24 tops
    (12, 512, 6, 6), 221,184 floats each, and its backward writes conv4_2's 12 x 512 x 28 x 28 diff."""
    net = build_nets(os.path.join(HERE, "gACNN_train.prototxt"))[0]
    assert tops(net, "data") == [(12, 3, 224, 224), (12, 49)]
    assert layer_buffers(net, "data")[("prefetch[4].data", "device")] == 4 * 12 * 3 * 224 * 224 * F
    assert layer_buffers(net, "data")[("prefetch[4].label", "device")] == 4 * 12 * 49 * F
    assert tops(net, "rois") == [(12, 24, 2)]
    assert net.layer("roi1").bottom_shapes[0] == (12, 512, 28, 28)
    assert tops(net, "roi1") == [(12, 512, 6, 6)] * 24
    assert ("bottom", 0, "diff", "backward", "device") in touched(net, "roi1")
    # its tops' diffs are first written by their Convolutions' backward: roi1 holds its 24 tops' data and
    # conv4_2's diff (the Split top it reads)
    assert by_layer(net_buffers(net, mode="gpu", engine="caffe"))["roi1"] == {
        "setup": 0, "forward": 24 * 12 * 512 * 6 * 6 * F, "backward": 12 * 512 * 28 * 28 * F}


def test_a_cpu_run_of_a_net_stops_at_multi_roi_pooling():
    r = run_in_process("gACNN_train.prototxt", "--mode", "cpu", cwd=HERE)
    assert r.returncode == 2 and "MultiROIPooling has no CPU code (multi_roi_pooling_layer.cpp:53" in r.stderr


@pytest.mark.parametrize("name", NETS)
def test_each_net_audits_with_no_flags(name):
    """Tried as a new user would: `protoaudit FILE` in the nets' folder, each read with PG-CNN's schema."""
    path = os.path.join(HERE, f"{name}.prototxt")
    assert load(path).schema.name == "pgcnn"
    r = run_in_process(os.path.basename(path), cwd=HERE, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout and "PG-CNN" in r.stdout
