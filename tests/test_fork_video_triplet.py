"""caffe-video_triplet (xiaolonw/caffe-video_triplet, c39ea1a) and wujiyang's Triplet-Loss Caffe
(wujiyang/Triplet-Loss, 7963e0b), which ports its layers to a 2017 BVLC Caffe: their schemas, Norm and
RankHardLoss held against their sources, ImageData's pair_size, and their real nets (tests/data/SOURCES.md).

Expected values are derived by hand below from caffe-video_triplet's src/caffe/layers/norm_layer.cpp/.cu,
rank_hard_loss_layer.cpp/.cu, image_data_layer.cpp, base_data_layer.cpp, loss_layer.cpp,
src/caffe/util/upgrade_proto.cpp and include/caffe/{loss_layers,data_layers}.hpp, and from
Triplet-Loss's rank_hard_loss_layer.hpp, cited by file and line.
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.layers import fork_layers
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

HERE = os.path.join(DATA, "forks", "video_triplet")
NET = os.path.join(HERE, "imagenet_train.prototxt")
SOLVER = os.path.join(HERE, "solver.prototxt")
FACE = os.path.join(DATA, "forks", "triplet_loss", "face_triplet_train.prototxt")
F = 4  # bytes per float
HEAD = 'input: "x" input_dim: 6 input_dim: 8 input_dim: 1 input_dim: 1\n' \
       'input: "y" input_dim: 6 input_dim: 1 input_dim: 1 input_dim: 1\n'
IP = 'layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip" inner_product_param { num_output: 5 } }\n'
NORM = 'layer { name: "n" type: "Norm" bottom: "ip" top: "n" }\n'
LOSS = 'layer { name: "l" type: "RankHardLoss" bottom: "n" bottom: "y" top: "l" rank_param { pair_size: 2 } }\n'


def written(net, layer, part):
    """{blob: device} of the blobs whose `part` the layer is the first to touch."""
    return {b.owner: b.device for b in net_buffers(net, mode="gpu") if b.layer == layer and b.kind == f"top {part}"}


def test_the_protos_are_the_forks_files_verbatim():
    """caffe-video_triplet's is HED's (a BVLC Caffe of mid 2015) with rank_param, ImageData's pair_size
    and the V1 values RANK_HARD_LOSS = 40 and NORM = 41 in place of CROP = 40."""
    text = open(os.path.join(ROOT, "proto", "forks", "video_triplet.proto")).read()
    assert text.startswith("// xiaolonw/caffe-video_triplet (caffe-video_triplet: Wang and Gupta, unsupervised "
                           "learning of visual representations using videos, ICCV 2015), src/caffe/proto/caffe.proto "
                           "at commit c39ea1ad6e937ccf7deba4510b7e555165abf05f,\n")
    body = text.split("\n", 2)[2]
    assert "  optional uint32 pair_size = 13 [default = 1];\n" in body
    assert "  optional RankParameter rank_param = 139;\n" in body and "    RANK_HARD_LOSS = 40;\n" in body
    face = open(os.path.join(ROOT, "proto", "forks", "triplet_loss.proto")).read()
    assert face.startswith("// wujiyang/Triplet-Loss (")
    assert "optional RankHardLossParameter rank_hard_loss_param = 149;" in face and "pair_size = 13" in face


def test_the_fields_and_layer_types_decide_whose_a_file_is(tmp_path):
    """rank_param is caffe-video_triplet's, rank_hard_loss_param Triplet-Loss's; a file both read (Norm
    alone, no field of either) is caffe-video_triplet's, whose layers Triplet-Loss ported. HED's and
    SSDH's nets (the same 2015 caffe.proto) stay theirs."""
    assert load(NET).schema.name == "video_triplet"
    assert build_nets(SOLVER)[0].schema == "video_triplet"
    assert load(FACE).schema.name == "triplet_loss"
    both = tmp_path / "both.prototxt"
    both.write_text(HEAD + IP + NORM)
    assert load(str(both)).schema.name == "video_triplet"
    assert load(os.path.join(DATA, "forks", "hed_train_val.prototxt")).schema.name == "hed"
    assert load(os.path.join(DATA, "forks", "ssdh", "train_val.prototxt")).schema.name == "ssdh"


def test_the_alexnet_example_audits_with_no_flags():
    """Batch 100 of 227 x 227 crops (new_height/new_width 227) through CaffeNet's convolutions, fc6 and a
    1024-unit fc7. Parameters, weights + biases: conv1 96*3*11*11 + 96 = 34,944; conv2 (group 2)
    256*48*5*5 + 256 = 307,456; conv3 384*256*3*3 + 384 = 885,120; conv4 (group 2) 384*192*3*3 + 384 =
    663,936; conv5 (group 2) 256*192*3*3 + 256 = 442,624; fc6 256*6*6*4096 + 4096 = 37,752,832; fc7
    4096*1024 + 1024 = 4,195,328: 44,282,240. Norm and RankHardLoss have none."""
    r = run_in_process(NET)
    assert r.returncode == 0, r.stderr
    assert "Read with the caffe.proto of caffe-video_triplet" in r.stdout
    assert "Params: 44,282,240 " in r.stdout
    net = build_nets(NET)[0]
    assert tops(net, "data") == [(100, 3, 227, 227), (100,)]  # image_data_layer.cpp:67-86
    assert tops(net, "fc7") == [(100, 1024)]
    assert tops(net, "norml2") == [(100, 1024, 1, 1)]  # num, channels, height, width (norm_layer.cpp:28-29)
    assert tops(net, "loss") == [()]  # LossLayer's scalar (loss_layer.cpp:27-28)
    assert run_in_process(SOLVER).returncode == 0


def test_pair_size_changes_no_shape_and_no_byte(tmp_path):
    """pair_size is read in ShuffleImages only (image_data_layer.cpp:104), which reorders the list in
    blocks; DataLayerSetUp sizes the tops from batch_size and the image (cpp:67-86)."""
    text = open(NET).read()
    assert "pair_size: 2" in text
    nets = [build_text(tmp_path, text.replace("pair_size: 2", f"pair_size: {k}")) for k in (1, 5)]
    assert [tops(n, "data") for n in nets] == [[(100, 3, 227, 227), (100,)]] * 2
    assert ({(b.owner, b.bytes) for b in net_buffers(nets[0], mode="gpu")}
            == {(b.owner, b.bytes) for b in net_buffers(nets[1], mode="gpu")})


def test_what_the_loss_allocates():
    """dis_ and mask_ are num x num (rank_hard_loss_layer.cpp:28-29), written by the CPU forward, which is
    the GPU one too (cu:10-20): 100 x 100 floats = 40,000 bytes each, on the host. diff_ is reshaped
    (cpp:27) but never touched, so never allocated."""
    net = build_nets(NET)[0]
    want = {("dis_", "host"): 100 * 100 * F, ("mask_", "host"): 100 * 100 * F}
    assert layer_buffers(net, "loss") == want == {("dis_", "host"): 40_000, ("mask_", "host"): 40_000}
    assert layer_buffers(net, "loss", mode="cpu") == want
    assert layer_buffers(net, "norml2") == {}


def test_norm_and_the_loss_run_on_the_host():
    """Norm's forward writes its top's cpu_data (norm_layer.cpp:39), the loss's backward norml2's cpu_diff
    (rank_hard_loss_layer.cpp:187), Norm's backward reads them there (cpp:78-79): norml2 is on the host,
    data and diff. Norm's backward writes fc7's cpu_diff (cpp:81), which relu7's GPU backward reads on the
    device: 100 x 1024 floats = 409,600 bytes."""
    net = build_nets(NET)[0]
    assert written(net, "norml2", "data") == {"norml2": "host"}
    assert written(net, "loss", "diff")["norml2"] == "host"
    got = {b.owner: (b.device, b.bytes) for b in net_buffers(net, mode="gpu")
           if b.layer == "norml2" and b.kind == "top diff"}
    assert got == {"fc7": ("device", 100 * 1024 * F)} == {"fc7": ("device", 409_600)}


def test_the_data_layer_holds_three_batches_and_copies_them():
    """PREFETCH_COUNT = 3 Batches of data_ and label_ (data_layers.hpp:56-60, 79, 85), host and device
    copies made at setup (base_data_layer.cpp:50-65), each forward copying one into the tops
    (base_data_layer.cu:8-27). One batch: 100 x 3 x 227 x 227 = 15,458,700 floats and 100 labels."""
    net = build_nets(NET)[0]
    got = layer_buffers(net, "data")
    assert got[("prefetch[3].data", "device")] == 3 * 15_458_700 * F == 185_504_400
    assert got[("prefetch[3].label", "device")] == 3 * 100 * F


def test_norm_reads_a_legacy_blob(tmp_path):
    """Reshape uses num(), channels(), height(), width() (norm_layer.cpp:28-29): a 5-axis bottom fails
    Blob::LegacyShape's CHECK; a (6, 5) bottom gives (6, 5, 1, 1)."""
    assert tops(build_text(tmp_path, HEAD + IP + NORM), "n") == [(6, 5, 1, 1)]
    five = ('input: "x" input_shape { dim: 2 dim: 3 dim: 4 dim: 5 dim: 6 }\n'
            'layer { name: "n" type: "Norm" bottom: "x" top: "n" }\n')
    with pytest.raises(InputError, match="at most 4 axes"):
        build_text(tmp_path, five, schema="video_triplet")


def test_the_loss_checks_the_same_num(tmp_path):
    """LossLayer::Reshape CHECKs bottom 0's num() against bottom 1's (loss_layer.cpp:25-26)."""
    with pytest.raises(InputError, match="same number"):
        build_text(tmp_path, HEAD.replace("input_dim: 6 input_dim: 1", "input_dim: 4 input_dim: 1") + IP + NORM + LOSS)


def test_v1_types_upgrade_as_the_fork_upgrades_them(tmp_path):
    """UpgradeV1LayerType maps RANK_HARD_LOSS to "RankHardLoss" and NORM to "Norm" (upgrade_proto.cpp:924-927)."""
    ip = 'layers { name: "ip" type: INNER_PRODUCT bottom: "x" top: "ip" inner_product_param { num_output: 5 } }\n'
    text = (HEAD + ip +
            'layers { name: "n" type: NORM bottom: "ip" top: "n" }\n'
            'layers { name: "l" type: RANK_HARD_LOSS bottom: "n" bottom: "y" top: "l" }\n')
    net = build_text(tmp_path, text)
    assert net.schema == "video_triplet"
    assert tops(net, "n") == [(6, 5, 1, 1)] and tops(net, "l") == [()]
    assert layer_buffers(net, "l") == {("dis_", "host"): 6 * 6 * F, ("mask_", "host"): 6 * 6 * F}


def test_force_backward_into_the_labels_differs():
    """caffe-video_triplet's RankHardLossLayer allows force_backward into either bottom
    (loss_layers.hpp:322-324); Triplet-Loss's header has no AllowForceBackward (rank_hard_loss_layer.hpp:19-49),
    so LossLayer's keeps it out of the labels."""
    old, new = fork_layers("video_triplet")["RankHardLoss"], fork_layers("triplet_loss")["RankHardLoss"]
    assert [old.allow_force_backward(None, i) for i in (0, 1)] == [True, True]
    assert [new.allow_force_backward(None, i) for i in (0, 1)] == [True, False]


def test_the_face_net_needs_only_its_image_size():
    """Triplet-Loss's net has no new_height/new_width, so its image size is the images' (its list is not
    here); given as its deploy net's 3 x 112 x 96, batch 128: fc5 128 x 512, norml2 128 x 512 x 1 x 1, and
    the loss's dis_ and mask_ 128 x 128 floats = 65,536 bytes each, on the host (examples/face_deploy.prototxt
    declares that size, but reads it through a Flip this net lacks, so it is no deploy version of it)."""
    r = run_in_process(FACE, "--strict")  # without it, 224 x 224 is assumed
    assert r.returncode == 2 and "give --input data=128x3xHxW" in r.stderr
    assert "pair_size" not in r.stderr
    net = build_nets(FACE, inputs={"data": (128, 3, 112, 96)})[0]
    assert net.schema == "triplet_loss"
    assert tops(net, "norml2") == [(128, 512, 1, 1)] and tops(net, "triplet-loss") == [()]
    assert layer_buffers(net, "triplet-loss") == {("dis_", "host"): 128 * 128 * F, ("mask_", "host"): 65_536}
