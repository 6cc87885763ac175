"""JAA-Net's layers for BVLC Caffe (ZhiwenShao/JAANet 0b8e87e): its schema, its layers' shapes, touches
and bytes held against its source, and its two nets (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe.proto, include/*.hpp,
src/*.cpp and .cu, tools/convert_data.cpp and prep/face_transform.cpp, cited by file and line.
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, by_layer, layer_buffers, run_in_process, tops, touched
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load
from protoaudit.read.schema import load_schema

HERE = os.path.join(DATA, "jaanet")
NETS = ("BP4D_train_val", "deploy")
F = 4  # bytes per float

# src/caffe.proto's five LayerParameter lines (2-6, tab-indented), numbered 1 to 5 there (BVLC's name,
# type, bottom, top, loss_weight), here 149 to 153; its DataParameter's one line BVLC's has not (line 66)
FIELDS = ["\toptional AUMaskBasedLandParameter au_mask_based_land_param = 149;",
          "\toptional DivisionParameter division_param = 150;",
          "\toptional CombinationParameter combination_param = 151;",
          "\toptional AlignDataTransformParameter align_data_transform_param = 152;",
          "\toptional DiceCoefLossParameter dice_coef_loss_param = 153;"]
MIRROR = "  optional bool get_mirror_crop = 11 [default = false];"


def test_the_proto_is_bvlcs_with_the_repositorys_additions():
    """BVLC's caffe.proto with the five fields ending LayerParameter, get_mirror_crop after prefetch, the
    fragment's four messages (lines 9-32) at the end and the AlignDataTransformParameter it names but never
    defines, empty."""
    text = open(os.path.join(ROOT, "proto", "forks", "jaanet.proto")).read()
    first = text.split("\n", 1)[0]
    assert first.startswith("// ZhiwenShao/JAANet (") and "0b8e87e51be05d04cf6e612f67332f2d5c293036" in first
    body = text.split("\n", 2)[2].splitlines()
    bvlc = open(os.path.join(ROOT, "proto", "caffe.proto")).read().splitlines()
    end = body.index(FIELDS[-1]) + 1
    assert body[:end] == bvlc[:end - 5] + FIELDS
    prefetch = bvlc.index("  optional uint32 prefetch = 10 [default = 4];")
    assert body[end:prefetch + 6] == bvlc[end - 5:prefetch + 1] and body[prefetch + 6] == MIRROR
    rest = body[prefetch + 7:]
    assert rest[:len(bvlc) - prefetch - 1] == bvlc[prefetch + 1:]
    added = rest[len(bvlc) - prefetch - 1:]
    assert added[1] == "message AUMaskBasedLandParameter {" and added[-2:] == ["message AlignDataTransformParameter {", "}"]
    assert "\trequired uint32 img_size = 1;" in added and "  optional float smooth = 1 [default = 1.0];" in added


def test_the_messages_fields():
    s = load_schema("jaanet")
    au = s.message("AUMaskBasedLandParameter").DESCRIPTOR
    assert {f.name: f.default_value for f in au.fields if f.has_default_value} == {
        "fill_type": "manhattan", "fill_coeff": pytest.approx(0.075), "fill_value": 0}
    assert [f.name for f in s.message("DivisionParameter").DESCRIPTOR.fields] == ["width", "height", "xcoord", "ycoord"]
    bvlc = {(f.name, f.number) for f in load_schema("bvlc").message("DataParameter").DESCRIPTOR.fields}
    ours = {(f.name, f.number) for f in s.message("DataParameter").DESCRIPTOR.fields}
    assert ours == bvlc | {("get_mirror_crop", 11)}


def build(tmp_path, body, **options):
    return build_text(tmp_path, body, schema="jaanet", **options)


def inputs(**shapes):
    return "".join(f'layer {{ name: "{n}" type: "Input" top: "{n}" input_param {{ shape {{ '
                   + " ".join(f"dim: {d}" for d in s) + " } } }\n" for n, s in shapes.items())


def data(name, extra="", tops_=("data",), transform=""):
    return (f'layer {{ name: "{name}" type: "Data" ' + " ".join(f'top: "{t}"' for t in tops_)
            + (f" transform_param {{ {transform} }}" if transform else "")
            + f' data_param {{ source: "absent/{name}_ldb" batch_size: 2 backend: LMDB {extra} }} }}\n')


def test_data_with_get_mirror_crop(tmp_path):
    """data_layer.cpp:51-57: with get_mirror_crop the second top and each prefetch batch's label are
    (batch_size, 4, 1, 1): 4 batches x 2 x 4 floats = 128 bytes on the device and as many pinned on the host;
    the transformer's mirror_crop_para_ holds 4 ints an image (data_transformer.cpp:57-58, 100-101), the first
    batch's 2 x 4 x 4 = 32 bytes. Without it the label is (batch_size,) (cpp:60-64)."""
    net = build(tmp_path, data("d", "get_mirror_crop: true", ("data", "mc"), "crop_size: 8 mirror: true"),
                inputs={"data": (2, 3, 8, 8)})
    assert tops(net, "d") == [(2, 3, 8, 8), (2, 4, 1, 1)]
    got = layer_buffers(net, "d")
    assert got[("prefetch[4].mc", "device")] == 4 * 2 * 4 * F
    assert got[("prefetch[4].mc (host)", "host")] == 4 * 2 * 4 * F
    assert got[("mirror_crop_para_", "host")] == 2 * 4 * 4
    plain = build(tmp_path, data("d", "", ("data", "label"), "crop_size: 8"), inputs={"data": (2, 3, 8, 8)})
    assert tops(plain, "d")[1] == (2,)
    assert ("mirror_crop_para_", "host") not in layer_buffers(plain, "d")


def test_the_repositorys_databases_by_name(tmp_path):
    """tools/convert_data.cpp:82-89: a line of data_num values is a Datum of channels 1, height data_num,
    width 1, so a batch of 2 is (2, 1, data_num, 1): 98 landmark coordinates (data/examples/*_land.txt), 49
    reflection indices (data/reflect_49.txt), 1 inter-ocular distance, 12 AU labels. The images are
    prep/face_transform.cpp's 200 x 200 colour faces (cpp:16, :63), cropped to 176 (3 x 176 x 176)."""
    body = ""
    for src in ("BP4D_combine_1_2_land_ldb", "reflect_49_ldb", "BP4D_combine_1_3_biocular_ldb",
                "BP4D_combine_2_3_AUoccur_ldb"):
        body += (f'layer {{ name: "{src}" type: "Data" top: "{src}" data_param {{ source: "../v6_2/{src}" '
                 'batch_size: 2 backend: LMDB } }\n')
    body += ('layer { name: "img" type: "Data" top: "img" top: "mc" transform_param { crop_size: 176 } '
             'data_param { source: "../v6_2/BP4D_combine_1_2_ldb" batch_size: 2 backend: LMDB get_mirror_crop: true } }\n')
    net = build(tmp_path, body)
    assert tops(net, "BP4D_combine_1_2_land_ldb") == [(2, 1, 98, 1)]
    assert tops(net, "reflect_49_ldb") == [(2, 1, 49, 1)]
    assert tops(net, "BP4D_combine_1_3_biocular_ldb") == [(2, 1, 1, 1)]
    assert tops(net, "BP4D_combine_2_3_AUoccur_ldb") == [(2, 1, 12, 1)]
    assert tops(net, "img") == [(2, 3, 176, 176), (2, 4, 1, 1)]
    assert any("JAA-Net's README" in a.what for a in net.assumptions)


def align(para=(2, 4, 1, 1), reflect=(2, 1, 49, 1)):
    return (inputs(land=(2, 1, 98, 1), para=para, reflect=reflect)
            + 'layer { name: "a" type: "AlignDataTransform" bottom: "land" bottom: "para" bottom: "reflect" '
              'top: "al" }\n')


def test_align_data_transform(tmp_path):
    """cpp:20-21: the top is bottom 0's (2, 1, 98, 1); Forward_gpu runs Forward_cpu (cu:10), reading the
    three bottoms and writing the top on the host; the net's consumers read its device copy: 2 x 98 x 4 =
    784 bytes first touched there (an Input's data is its own). Backward where bottom 0 needs it (cpp:60),
    here by force_backward, writes its host diff. Each mirrored image reads the first 49 values of bottom 2
    (cpp:45, index[j / 2] for j < 98): 40 are refused."""
    net = build(tmp_path, "force_backward: true\n" + align())
    assert tops(net, "a") == [(2, 1, 98, 1)]
    assert layer_buffers(net, "a") == {}
    got = touched(net, "a")
    assert {("bottom", j, "data", "forward", "host") for j in range(3)} <= got
    assert ("top", 0, "data", "forward", "host") in got
    assert ("bottom", 0, "diff", "backward", "host") in got
    with pytest.raises(InputError, match="reads 4 an image"):
        build(tmp_path, align(para=(2, 3, 1, 1)))
    with pytest.raises(InputError, match="reads 49 indices"):
        build(tmp_path, align(reflect=(1, 1, 40, 1)))


def mask(scale, bottom=(2, 98)):
    return (inputs(land=bottom) + 'layer { name: "m" type: "AUMaskBasedLand" bottom: "land" '
            + " ".join(f'top: "m{k}"' for k in range(13))
            + f" au_mask_based_land_param {{ img_size: 176 spatial_ratio: 0.14 spatial_scale: {scale} }} }}\n")


def test_au_mask_based_land(tmp_path):
    """cpp:23, :33-34: 13 tops (12 AUs and their maximum, AU_num_ = 12, cpp:18) of (num, 1, m, m), m =
    round(176 x 0.25) = 44, and round(176 x 0.295454545) = round(51.99999...) = 52 (the train net's); each
    top's host data is filled at Reshape (cpp:36): 2 x 44 x 44 x 4 = 15,488 bytes each, counted from
    setup. The Input's 2 x 98 floats are first read here, on the host. Landmark 45's y, index 91, is read (cpp:105): a bottom of 90 values an image is refused."""
    net = build(tmp_path, mask(0.25))
    assert tops(net, "m") == [(2, 1, 44, 44)] * 13
    assert tops(build(tmp_path, mask(0.295454545)), "m") == [(2, 1, 52, 52)] * 13
    got = touched(net, "m")
    assert {("top", j, "data", "setup", "host") for j in range(13)} <= got
    # the tops from setup (their device copies, which the layers after it read), the Input's 2 x 98 floats read
    # on the host in the forward
    assert by_layer(net_buffers(net, mode="gpu", engine="caffe"))["m"] == {
        "setup": 13 * 2 * 44 * 44 * F, "forward": 2 * 98 * F, "backward": 0}
    with pytest.raises(InputError, match="up to index 91"):
        build(tmp_path, mask(0.25, (2, 90)))


def division(xs=(0, 4, 0, 4), ys=(0, 0, 4, 4), size="width: 4 height: 4"):
    return (inputs(x=(2, 3, 8, 8)) + 'layer { name: "d" type: "Division" bottom: "x" '
            + " ".join(f'top: "p{k}"' for k in range(4)) + f" division_param {{ {size} "
            + " ".join(f"xcoord: {x}" for x in xs) + " " + " ".join(f"ycoord: {y}" for y in ys) + " } }\n")


COMBINE = ('layer { name: "c" type: "Combination" bottom: "p0" bottom: "p1" bottom: "p2" bottom: "p3" top: "y" '
           "combination_param { xcoord: 0 xcoord: 4 xcoord: 0 xcoord: 4 ycoord: 0 ycoord: 0 ycoord: 4 ycoord: 4 } }\n")


def test_division_and_combination(tmp_path):
    """Division (cpp:42-44): 4 tops of (2, 3, height 4, width 4) cut at the four coordinates; Combination
    (cpp:28-29, :37-38): (2, 3, ycoord[3] + 4, xcoord[3] + 4) = (2, 3, 8, 8). Both copy on the host (cu:15);
    each top is first written by them: 4 x 2 x 3 x 4 x 4 x 4 = 1,536 bytes for Division's, 2 x 3 x 8 x 8 x 4 =
    1,536 for Combination's; the Input's 1,536 are first read by Division, on the host. A box at x 6 of width 4 in a width of 8 reaches the next row of the last
    channel's last image: its last element (1 x 3 + 2) x 64 + 7 x 8 + 6 + 3 = 385 of 384 is refused."""
    net = build(tmp_path, division() + COMBINE)
    assert tops(net, "d") == [(2, 3, 4, 4)] * 4
    assert tops(net, "c") == [(2, 3, 8, 8)]
    rows = by_layer(net_buffers(net, mode="gpu", engine="caffe"))
    assert rows["d"]["forward"] == 4 * 2 * 3 * 4 * 4 * F + 2 * 3 * 8 * 8 * F  # and the Input's data, read there
    assert rows["c"]["forward"] == 2 * 3 * 8 * 8 * F
    assert ("bottom", 0, "data", "forward", "host") in touched(net, "d")
    assert {("bottom", j, "data", "forward", "host") for j in range(4)} <= touched(net, "c")
    with pytest.raises(InputError, match="reaches element 385"):
        build(tmp_path, division(xs=(0, 4, 0, 6)))
    with pytest.raises(InputError, match="xcoord"):
        build(tmp_path, division(xs=(0, 4, 0)))


def test_dice_coef_loss(tmp_path):
    """cpp:17-26: multiplier_ (count(1) = 1 x 44 x 44 = 1,936) and result_, result_tmp_ (num = 2) filled on
    the host at Reshape, and on the device in the GPU forward with tmp_ (bottom 0's 2 x 1,936) (cu:13-29)."""
    net = build(tmp_path, inputs(p=(2, 1, 44, 44), l=(2, 1, 44, 44))
                + 'layer { name: "L" type: "DiceCoefLoss" bottom: "p" bottom: "l" top: "loss" }\n')
    assert tops(net, "L") == [()]
    assert layer_buffers(net, "L") == {
        ("multiplier_ (host)", "host"): 1936 * F, ("result_ (host)", "host"): 2 * F, ("result_tmp_ (host)", "host"): 2 * F,
        ("multiplier_", "device"): 1936 * F, ("result_", "device"): 2 * F, ("result_tmp_", "device"): 2 * F,
        ("tmp_", "device"): 2 * 1936 * F}
    assert ("multiplier_", "device") not in layer_buffers(net, "L", mode="cpu")


def test_euclidean_losses(tmp_path):
    """EuclideanLoss2 (cpp:50-56, :68): BVLC's diff_ (bottom 0's 2 x 98 floats, 784 bytes) and bottom 2's first
    value read on the host; three bottoms exactly (hpp:114). EuclideanLoss4 weights diff_ on the host in GPU
    mode too (cu:121-126): a host copy of it. EuclideanLoss5 wants 6 weights a value (cpp:189)."""
    body = inputs(p=(2, 98), l=(2, 1, 98, 1), b=(2, 1, 1, 1), w=(2, 98))
    net = build(tmp_path, body + 'layer { name: "L" type: "EuclideanLoss2" bottom: "p" bottom: "l" bottom: "b" '
                                 'top: "loss" }\n')
    assert layer_buffers(net, "L") == {("diff_", "device"): 2 * 98 * F}
    assert ("bottom", 2, "data", "forward", "host") in touched(net, "L")
    four = build(tmp_path, body + 'layer { name: "L" type: "EuclideanLoss4" bottom: "p" bottom: "l" bottom: "w" '
                                  'top: "loss" }\n')
    assert layer_buffers(four, "L") == {("diff_", "device"): 2 * 98 * F, ("diff_ (host)", "host"): 2 * 98 * F}
    with pytest.raises(InputError):
        build(tmp_path, body + 'layer { name: "L" type: "EuclideanLoss2" bottom: "p" bottom: "l" top: "loss" }\n')
    with pytest.raises(InputError, match="6 x 98"):
        build(tmp_path, body + 'layer { name: "L" type: "EuclideanLoss5" bottom: "p" bottom: "l" bottom: "w" '
                               'top: "loss" }\n')


def test_softmax_with_loss_weights(tmp_path):
    """cpp:57-61: a third bottom with the label's count (2 x 12 = 24 for a (2, 2, 12, 1) prediction on axis 1),
    its host data read; 23 weights are refused (cpp:58)."""
    def net(weights):
        return build(tmp_path, inputs(p=(2, 2, 12, 1), l=(2, 1, 12, 1), w=weights)
                     + 'layer { name: "L" type: "SoftmaxWithLoss" bottom: "p" bottom: "l" bottom: "w" top: "loss" }\n')
    assert ("bottom", 2, "data", "setup", "host") in touched(net((2, 1, 12, 1)), "L")
    with pytest.raises(InputError, match="number of weights must match"):
        net((23,))


def test_the_train_net_by_hand():
    """BP4D_train_val: batch 8; the faces cropped to 176 (8, 3, 176, 176), 4 prefetch batches of 8 x 3 x 176 x
    176 floats = 11,894,784 bytes; mirror_crop_para (8, 4, 1, 1); the landmarks (8, 1, 98, 1) aligned to the
    same; the two attention-map layers 13 x (8, 1, 52, 52) and 13 x (8, 1, 44, 44); align_loss's diff_ of
    align_fc's 8 x 98 floats; conv1's 32 maps of 176 x 176 cut into 64 boxes of 22 x 22."""
    net = build_nets(os.path.join(HERE, "BP4D_train_val.prototxt"))[0]
    assert tops(net, "data") == [(8, 3, 176, 176), (8, 4, 1, 1)]
    assert layer_buffers(net, "data")[("prefetch[4].data", "device")] == 4 * 8 * 3 * 176 * 176 * F
    assert tops(net, "align_land") == [(8, 1, 98, 1)]
    assert tops(net, "au_mask_ori") == [(8, 1, 52, 52)] * 13
    assert tops(net, "au_mask_ori_small") == [(8, 1, 44, 44)] * 13
    assert layer_buffers(net, "align_loss") == {("diff_", "device"): 8 * 98 * F}
    assert tops(net, "conv1_branch1_division") == [(8, 32, 22, 22)] * 64


@pytest.mark.parametrize("name", NETS)
def test_each_net_audits_with_no_flags(name):
    """Tried as a new user would: `protoaudit FILE` in the nets' folder, each read with JAA-Net's schema."""
    path = os.path.join(HERE, f"{name}.prototxt")
    assert load(path).schema.name == "jaanet"
    r = run_in_process(os.path.basename(path), cwd=HERE, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout and "JAA-Net" in r.stdout
