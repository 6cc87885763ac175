"""ARL's layers for BVLC Caffe (ZhiwenShao/ARL 512c226): its schema, its layers' shapes, touches and bytes
held against its source, what it carries from JAA-Net, and its three nets (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe.proto, include/*.hpp, src/*.cpp
and .cu, tools/convert_data.cpp and prep/face_transform.cpp, cited by file and line.
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops, touched
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.layers.base import fork_layers
from protoaudit.read.load import load
from protoaudit.read.schema import DESCENDS_FROM, load_schema

HERE = os.path.join(DATA, "arl")
NETS = ("BP4D_train_val", "FERA2015_train_val_intensity", "deploy")
F = 4  # bytes per float

# src/caffe.proto's three LayerParameter lines (2-4, tab-indented), numbered 1 to 3 there (BVLC's name, type,
# bottom), here 149 to 151
FIELDS = ["\toptional DivisionParameter division_param = 149;",
          "\toptional CombinationParameter combination_param = 150;",
          "\toptional MultiStageMeanfieldAU3Parameter multi_stage_meanfield_au3_param = 151;"]


def test_the_proto_is_bvlcs_with_the_repositorys_additions():
    """BVLC's caffe.proto with the three fields ending LayerParameter and the fragment's three messages
    (lines 7-36) at the end."""
    text = open(os.path.join(ROOT, "proto", "forks", "arl.proto")).read()
    first = text.split("\n", 1)[0]
    assert first.startswith("// ZhiwenShao/ARL (") and "512c226032ab33a6228444982f758f646c9d5df6" in first
    body = text.split("\n", 2)[2].splitlines()
    bvlc = open(os.path.join(ROOT, "proto", "caffe.proto")).read().splitlines()
    end = body.index(FIELDS[-1]) + 1
    assert body[:end] == bvlc[:end - 3] + FIELDS
    assert body[end:end + len(bvlc) - (end - 3)] == bvlc[end - 3:]
    added = body[end + len(bvlc) - (end - 3):]
    assert added[1] == "message DivisionParameter {" and added[-1] == "}"
    assert "message MultiStageMeanfieldAU3Parameter {" in added
    assert "    required float theta_alpha = 3 [default = 10.];" in added
    assert len(added) == 1 + 30  # a blank line and the fragment's lines 7 to 36


def test_the_messages_fields():
    s = load_schema("arl")
    au3 = s.message("MultiStageMeanfieldAU3Parameter").DESCRIPTOR
    assert [f.name for f in au3.fields] == [
        "compatibility_mode", "threshold", "theta_alpha", "theta_beta", "theta_gamma", "num_iterations",
        "spatial_filter_weight", "bilateral_filter_weight", "forced_spatial_filter_weight",
        "forced_bilateral_filter_weight"]
    assert au3.fields_by_name["num_iterations"].default_value == 1
    # JAA-Net's Division and Combination messages, field for field; BVLC's DataParameter (no get_mirror_crop)
    for name in ("DivisionParameter", "CombinationParameter"):
        ours = [(f.name, f.number) for f in s.message(name).DESCRIPTOR.fields]
        assert ours == [(f.name, f.number) for f in load_schema("jaanet").message(name).DESCRIPTOR.fields]
    assert {f.name for f in s.message("DataParameter").DESCRIPTOR.fields} == {
        f.name for f in load_schema("bvlc").message("DataParameter").DESCRIPTOR.fields}


def test_what_it_carries_from_jaanet():
    """combination_layer.* and division_layer.* are JAANet's byte for byte, EuclideanLoss2-4 the same code:
    sized by JAA-Net's classes. JAA-Net's other layers are not ARL's; a file with only the shared types is
    JAA-Net's (DESCENDS_FROM)."""
    layers = fork_layers("arl")
    for name in ("Division", "Combination", "EuclideanLoss2", "EuclideanLoss3", "EuclideanLoss4"):
        assert issubclass(layers[name], fork_layers("jaanet")[name])
    for name in ("AlignDataTransform", "AUMaskBasedLand", "DiceCoefLoss", "EuclideanLoss5", "SoftmaxWithLoss"):
        assert name not in layers
    assert DESCENDS_FROM["arl"] == "jaanet"


def build(tmp_path, body, **options):
    return build_text(tmp_path, body, schema="arl", **options)


def inputs(**shapes):
    return "".join(f'layer {{ name: "{n}" type: "Input" top: "{n}" input_param {{ shape {{ '
                   + " ".join(f"dim: {d}" for d in s) + " } } }\n" for n, s in shapes.items())


def test_the_repositorys_databases_by_name(tmp_path):
    """tools/convert_data.cpp:82-89: a line of data_num values is a Datum of channels 1, height data_num,
    width 1, so a batch of 2 is (2, 1, data_num, 1): 12 AU occurrences and as many weights for detection, 5
    AU intensities (FERA 2015's: the intensity net's five branches) and as many weights. The faces are
    prep/face_transform.cpp's 200 x 200 colour images (cpp:16, :63), cropped to 176."""
    sources = {"BP4D_combine_1_2_ldb": (2, 3, 176, 176), "BP4D_combine_1_3_AUoccur_ldb": (2, 1, 12, 1),
               "BP4D_combine_2_3_weight_ldb": (2, 1, 12, 1), "BP4D_train_ldb": (2, 3, 176, 176),
               "BP4D_train_intensity_AUoccur_ldb": (2, 1, 5, 1), "BP4D_train_intensity_weight_ldb": (2, 1, 5, 1)}
    body = "".join(f'layer {{ name: "{s}" type: "Data" top: "{s}" transform_param {{ crop_size: 176 }} '
                   f'data_param {{ source: "{s}" batch_size: 2 backend: LMDB }} }}\n'
                   for s in sources if "AUoccur" not in s and "weight" not in s)
    body += "".join(f'layer {{ name: "{s}" type: "Data" top: "{s}" data_param {{ source: "{s}" batch_size: 2 '
                    'backend: LMDB } }\n' for s in sources if "AUoccur" in s or "weight" in s)
    net = build(tmp_path, body)
    for s, shape in sources.items():
        assert tops(net, s) == [shape], s
    assert any("ARL's README" in a.what for a in net.assumptions)


def meanfield(features=16, iterations=5, feature_hw=(44, 44)):
    return (inputs(u=(8, 2, 44, 44), q=(8, 2, 44, 44), f=(8, features) + feature_hw)
            + 'layer { name: "m" type: "MultiStageMeanfieldAU3" bottom: "u" bottom: "q" bottom: "f" top: "m" '
              f"multi_stage_meanfield_au3_param {{ num_iterations: {iterations} theta_alpha: 160 theta_beta: 3 "
              "theta_gamma: 3 } }\n")


def test_multi_stage_meanfield_au3(tmp_path):
    """The train net's au1_spatial_attention_pred: unaries (8, 2, 44, 44), features au1_conv33 of 16
    channels. cpp:52: the top (8, 2, 44, 44); cpp:62-85: three params of (1, 1, 2, 2). feature_dim_ = 16
    (cpp:48), so the bilateral lattice has d = 2 + 16 = 18 dimensions (cpp:185) on P = 44 x 44 = 1,936
    points: bilateral_kernel_buffer_ 18 x 1,936 floats = 139,392 bytes (cpp:112); a lattice's offset_,
    barycentric_ and rank_ are 3 x (d + 1)(P + 16) x 4 = 3 x 19 x 1,952 x 4 = 445,056 bytes
    (modified_permutohedral.cpp:122-126) and blur_neighbors_ at most (d + 1) x (d + 1) x P x 8 = 19 x 19 x
    1,936 x 8 = 5,591,168 (cpp:264-267, Neighbors two ints, hpp:19-23): 6,036,224 an image, 48,289,792 for 8.
    The spatial lattice (d = 2): 3 x 3 x 1,952 x 4 + 3 x 3 x 1,936 x 8 = 70,272 + 139,392 = 209,664.
    bilateral_norms_ 8 x 1,936 floats = 61,952 (cpp:113); iteration_output_blobs_ 4 x 8 x 2 x 1,936 floats =
    495,616 (cpp:134-137)."""
    net = build(tmp_path, "force_backward: true\n" + meanfield())
    assert tops(net, "m") == [(8, 2, 44, 44)]
    got = layer_buffers(net, "m")
    assert got[("bilateral_kernel_buffer_", "host")] == 18 * 1936 * F == 139392
    assert got[("bilateral_lattices_", "host")] == 8 * (3 * 19 * 1952 * 4 + 19 * 19 * 1936 * 8) == 48289792
    assert got[("spatial_lattice_", "host")] == 3 * 3 * 1952 * 4 + 3 * 3 * 1936 * 8 == 209664
    assert got[("bilateral_norms_", "host")] == 8 * 1936 * F
    assert got[("iteration_output_blobs_", "device")] == 4 * 8 * 2 * 1936 * F
    assert ("bottom", 2, "data", "forward", "host") in touched(net, "m")
    # 3 feature channels: the 5-D lattice of CRF-RNN's RGB image, 3 x 6 x 1,952 x 4 + 6 x 6 x 1,936 x 8 an image
    three = layer_buffers(build(tmp_path, meanfield(features=3)), "m")
    assert three[("bilateral_lattices_", "host")] == 8 * (3 * 6 * 1952 * 4 + 6 * 6 * 1936 * 8)
    with pytest.raises(InputError, match="greater than 1"):
        build(tmp_path, meanfield(iterations=1))
    # features of 40 x 40 for unaries of 44 x 44: image 7 reads 7 x 16 x 1,600 + 16 x 1,936 = 210,176 > 204,800
    with pytest.raises(InputError, match="up to element 210,176"):
        build(tmp_path, meanfield(feature_hw=(40, 40)))


def test_l2_norm(tmp_path):
    """lp_norm_layer.cpp:20-22: the top is the bottom's (8, 5); inv_lpnorm_ of num = 8 floats on the host,
    32 bytes."""
    net = build(tmp_path, inputs(x=(8, 5)) + 'layer { name: "n" type: "L2Norm" bottom: "x" top: "y" }\n')
    assert tops(net, "n") == [(8, 5)]
    assert layer_buffers(net, "n") == {("inv_lpnorm_", "host"): 8 * F}


def test_cosine_similarity_loss(tmp_path):
    """cpp:12: bottoms of the same count(1) (5 and 1 x 5 x 1); a scalar top; no buffer. 6 values are refused."""
    def net(label):
        return build(tmp_path, inputs(p=(8, 5), l=label)
                     + 'layer { name: "L" type: "CosineSimilarityLoss" bottom: "p" bottom: "l" top: "loss" }\n')
    assert tops(net((8, 1, 5, 1)), "L") == [()]
    assert layer_buffers(net((8, 1, 5, 1)), "L") == {}
    with pytest.raises(InputError, match="same dimension"):
        net((8, 6))


def test_euclidean_loss6(tmp_path):
    """cpp:184-186: diff_ of bottom 0's 8 x 5 floats, 160 bytes, and its host copy (cu:161, :164); bottoms 1 and
    2 read on the host (cu:160, :164); three bottoms (hpp:312); bottom 2 read at each of bottom 0's 40 indices
    (cpp:205): 39 weights are refused."""
    def net(weights, bottoms=("p", "l", "w")):
        return build(tmp_path, inputs(p=(8, 5), l=(8, 1, 5, 1), w=weights)
                     + 'layer { name: "L" type: "EuclideanLoss6" ' + " ".join(f'bottom: "{b}"' for b in bottoms)
                     + ' top: "loss" }\n')
    got = net((8, 1, 5, 1))
    assert layer_buffers(got, "L") == {("diff_", "device"): 8 * 5 * F, ("diff_ (host)", "host"): 8 * 5 * F}
    assert {("bottom", 1, "data", "forward", "host"), ("bottom", 2, "data", "forward", "host")} <= touched(got, "L")
    with pytest.raises(InputError, match="39 weights"):
        net((39,))
    with pytest.raises(InputError):
        net((8, 1, 5, 1), bottoms=("p", "l"))


def test_sigmoid_cross_entropy_loss_weights(tmp_path):
    """hpp:58-60, cpp:46-50: a third bottom with the label's count (8 x 12 = 96), its host data read at
    Reshape; 95 weights are refused (cpp:47). Two bottoms stay BVLC's."""
    def net(*weights):
        w = inputs(w=weights[0]) if weights else ""
        return build(tmp_path, inputs(p=(8, 12), l=(8, 1, 12, 1)) + w
                     + 'layer { name: "L" type: "SigmoidCrossEntropyLoss" bottom: "p" bottom: "l" '
                     + ('bottom: "w" ' if weights else "") + 'top: "loss" }\n')
    assert ("bottom", 2, "data", "setup", "host") in touched(net((8, 1, 12, 1)), "L")
    assert layer_buffers(net(), "L")[("sigmoid_output_", "device")] == 8 * 12 * F
    with pytest.raises(InputError, match="number of weights must match"):
        net((95,))


def test_the_nets_by_hand():
    """BP4D_train_val: batch 8; the faces cropped to 176 (8, 3, 176, 176), the labels and weights (8, 1, 12, 1);
    conv1's 32 maps of 176 x 176 cut into 64 boxes of 22 x 22 (JAA-Net's Division); the twelve attention CRFs
    (8, 2, 44, 44). FERA2015_train_val_intensity: labels and weights (8, 1, 5, 1); EuclideanLoss6's diff_ of
    8 x 5 floats; the L2Norms (8, 5) and (8, 1, 5, 1)."""
    net = build_nets(os.path.join(HERE, "BP4D_train_val.prototxt"))[0]
    assert net.schema == "arl"
    assert tops(net, "data") == [(8, 3, 176, 176)]
    assert tops(net, "label") == tops(net, "weight") == [(8, 1, 12, 1)]
    assert tops(net, "conv1_branch1_division") == [(8, 32, 22, 22)] * 64
    assert tops(net, "au12_spatial_attention_pred") == [(8, 2, 44, 44)]
    intensity = build_nets(os.path.join(HERE, "FERA2015_train_val_intensity.prototxt"))[0]
    assert tops(intensity, "label") == tops(intensity, "weight") == [(8, 1, 5, 1)]
    assert layer_buffers(intensity, "euclidean_loss")[("diff_", "device")] == 8 * 5 * F
    assert tops(intensity, "concat_intensity_final_norm") == [(8, 5)]
    assert tops(intensity, "label_norm") == [(8, 1, 5, 1)]


def test_a_jaanet_file_stays_jaanets(tmp_path):
    """A file with only the types both Caffes have (Division) is JAA-Net's, as before ARL was shipped."""
    path = tmp_path / "d.prototxt"
    path.write_text(inputs(x=(2, 3, 8, 8)) + 'layer { name: "d" type: "Division" bottom: "x" top: "p" '
                    "division_param { width: 4 height: 4 xcoord: 0 ycoord: 0 } }\n")
    assert load(str(path)).schema.name == "jaanet"


@pytest.mark.parametrize("name", NETS)
def test_each_net_audits_with_no_flags(name):
    """Tried as a new user would: `protoaudit FILE` in the nets' folder, each read with ARL's schema."""
    path = os.path.join(HERE, f"{name}.prototxt")
    assert load(path).schema.name == "arl"
    r = run_in_process(os.path.basename(path), cwd=HERE, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "Total:" in r.stdout and "ARL" in r.stdout
