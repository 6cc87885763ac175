"""happynear's Caffe (happynear/caffe-windows, branch ms at 967eedf): its schema, and Flip, Normalize,
LabelSpecificAdd and its own InnerProduct, SoftmaxWithLoss and Accuracy held against its source.

Expected values are derived by hand below from src/caffe/layers/ and include/caffe/layers/ at that
commit, cited by file and line; the nets are happynear/AMSoftmax's (f57f7a7), read as they are.
"""
import os

import pytest

from conftest import DATA, build_text, run_in_process, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.layers import layer_class
from protoaudit.layers.dense import InnerProduct as BvlcInnerProduct
from protoaudit.memory.buffers import layer_touches, net_buffers
from protoaudit.read.load import load
from protoaudit.read.schema import load_schema

TRAIN = os.path.join(DATA, "forks", "happynear_amsoftmax_face_train_test.prototxt")
DEPLOY = os.path.join(DATA, "forks", "happynear_amsoftmax_face_deploy_mirror_normalize.prototxt")
F = 4  # bytes per float


def build(tmp_path, text, **options):
    """The net read as this fork's (--fork happynear): a bare Normalize is SSD's type name too."""
    return build_text(tmp_path, text, schema="happynear", **options)


def owners(buffers, layer):
    """{what the layer owns, less its name: (bytes, first touch, device)}."""
    return {b.owner[len(layer) + 1:]: (b.bytes, b.touch, b.device) for b in buffers
            if b.layer == layer and b.owner.startswith(layer + ".")}


def first_touch(buffers, blob, kind):
    return next(((b.touch, b.bytes, b.device) for b in buffers if b.owner == blob and b.kind == kind), None)


def net(body, shape=(8, 6, 3, 4), label=True, force=True):
    dims = " ".join(f"dim: {d}" for d in shape)
    inputs = f'top: "x" top: "label" input_param {{ shape {{ {dims} }} shape {{ dim: {shape[0]} }} }}' if label else \
        f'top: "x" input_param {{ shape {{ {dims} }} }}'
    return ("force_backward: true\n" if force else "") + f'layer {{ name: "in" type: "Input" {inputs} }}\n' + body


# ------------------------------------------------------------------ the schema and the real nets


def test_amsoftmax_nets_are_read_with_the_forks_schema():
    """Flip (deploy), InnerProduct's `normalize` and label_specific_add_param (train) are the fork's only."""
    assert load(TRAIN).schema.name == "happynear"
    assert load(DEPLOY).schema.name == "happynear"


def test_the_proto_is_the_forks_file_verbatim_with_its_own_numbers():
    text = open(os.path.join(DATA, "..", "..", "proto", "forks", "happynear.proto")).read()
    assert "Commit: 967eedf25009e334b7f6f933bb5e17aaaff5bef6" in text
    layer = load_schema("happynear").message("LayerParameter").DESCRIPTOR.fields_by_name
    # caffe.proto:428, 430, 456, and InnerProductParameter's normalize = 7 (:928)
    assert (layer["flip_param"].number, layer["normalize_param"].number, layer["label_specific_add_param"].number) \
        == (212, 214, 241)
    assert layer["center_loss_param"].number == 211  # caffe-face's is 147: each schema keeps its own
    assert load_schema("caffe_face").message("LayerParameter").DESCRIPTOR.fields_by_name["center_loss_param"].number \
        == 147
    ip = load_schema("happynear").message("InnerProductParameter").DESCRIPTOR.fields_by_name["normalize"]
    assert ip.number == 7 and ip.default_value is False


@pytest.mark.parametrize("path, fork", [
    (os.path.join(DATA, "corpus", "nets", "sphereface20_train.prototxt"), "sphereface"),
    (os.path.join(DATA, "forks", "caffe_face_mnist_train_test.prototxt"), "caffe_face"),
])
def test_sphereface_and_caffe_face_nets_stay_theirs(path, fork):
    """This fork's caffe.proto also has margin_inner_product_param (232; SphereFace's is 147) and
    center_loss_param (211; caffe-face's is 147), but protoaudit has no rule for their layers in this
    fork: the files are still read with their own fork's schema."""
    assert load(path).schema.name == fork


def test_deploy_net_by_hand():
    """input 100x3x112x96; Flip keeps the shape (flip_layer.cpp:25); Concat on axis 0 doubles the
    batch; fc5 gives 200x512, sliced back to two 100x512 and summed; Normalize makes it
    (num, channels, height, width) = 100x512x1x1 (normalize_layer.cpp:26-27). In the forward-only run,
    Normalize's squared_ is the bottom's size and norm_ one float per sample (cpp:28-35)."""
    n = build_nets(DEPLOY)[0]
    assert tops(n, "flip_data") == [(100, 3, 112, 96)]
    assert tops(n, "concat_data") == [(200, 3, 112, 96)]
    assert tops(n, "normalize1") == [(100, 512, 1, 1)]
    got = owners(net_buffers(n, mode="gpu", backward=False), "normalize1")
    assert got["squared_"] == (100 * 512 * F, "forward", "device")
    assert got["norm_"] == (100 * F, "forward", "device")
    assert "norm_.diff" not in got  # (the GPU backward's scratch, cu:138)


def test_train_net_by_hand():
    """batch 256 of 3x112x96 (the deploy net's input; the images are not here). fc5 256x512, norm1
    256x512x1x1; fc6_l2, normalize and no bias: weight (10516, 512) and weight_norm_, 10516 floats
    (inner_product_layer.cpp:98-102); LabelSpecificAdd keeps 256x10516 (label_specific_add.cpp:26);
    SoftmaxWithLoss's loss_ and counts_ are outer x inner = 256 x 1 each (softmax_loss_layer.cpp:101-102)."""
    n = build_nets(TRAIN, inputs={"data": (256, 3, 112, 96)})[0]
    assert tops(n, "norm1") == [(256, 512, 1, 1)]
    assert [p.shape for p in n.layer("fc6_l2").params] == [(10516, 512)]
    assert tops(n, "label_specific_margin") == [(256, 10516)]
    buffers = net_buffers(n, mode="gpu")
    assert owners(buffers, "fc6_l2")["weight_norm_"] == (10516 * F, "setup", "device")
    loss = owners(buffers, "softmax_loss")
    assert loss["loss_"] == loss["counts_"] == (256 * F, "forward", "device")
    assert loss["prob_"][0] == 256 * 10516 * F


def test_the_solver_beside_its_net_audits_with_the_images_size_given(tmp_path):
    text = open(TRAIN).read()
    (tmp_path / "face_train_test.prototxt").write_text(text)
    (tmp_path / "face_solver.prototxt").write_text('net: "face_train_test.prototxt"\ntest_iter: 10\n'
                                                  'test_interval: 500000\nbase_lr: 0.1\nlr_policy: "fixed"\n')
    r = run_in_process(str(tmp_path / "face_solver.prototxt"), "--input", "data=256x3x112x96")
    assert r.returncode == 0, r.stderr
    assert "happynear's Caffe" in r.stdout


def test_a_bare_normalize_is_ssds_or_this_forks(tmp_path):
    """Both forks name a layer Normalize (SSD's with norm_param): a file that says no more is refused,
    naming both, with --fork as the way out."""
    with pytest.raises(InputError, match=r"--fork \(ssd, happynear\)"):
        build_text(tmp_path, net('layer { name: "n" type: "Normalize" bottom: "x" top: "n" }', label=False))


# ------------------------------------------------------------------ Flip


def test_flip_keeps_the_shape_and_has_no_buffers(tmp_path):
    """flip_layer.cpp:25: top like bottom; forward and backward index one blob into the other (no
    blob of the layer's own, hpp:43-44 hold two bools only)."""
    n = build(tmp_path, net('layer { name: "f" type: "Flip" bottom: "x" top: "f" flip_param { flip_height: true } }',
                            label=False))
    assert tops(n, "f") == [(8, 6, 3, 4)]
    assert owners(net_buffers(n, mode="gpu"), "f") == {}


def test_flip_reads_four_axes_at_most(tmp_path):
    """cpp:33-36 reads num(), channels(), height(), width(): Blob's legacy accessors CHECK <= 4 axes."""
    with pytest.raises(InputError, match="at most 4 axes"):
        build(tmp_path, net('layer { name: "f" type: "Flip" bottom: "x" top: "f" }', shape=(2, 3, 4, 5, 6), label=False))


# ------------------------------------------------------------------ Normalize


def test_normalize_makes_a_legacy_4d_top_and_an_optional_norm_top(tmp_path):
    """cpp:26-27: top 0 is (num, channels, height, width): a (8, 6) bottom gives (8, 6, 1, 1);
    cpp:31-32: top 1 is (num, 1, height, width)."""
    n = build(tmp_path, net('layer { name: "n" type: "Normalize" bottom: "x" top: "n" top: "norm" }'))
    assert tops(n, "n") == [(8, 6, 3, 4), (8, 1, 3, 4)]
    flat = build(tmp_path, net('layer { name: "n" type: "Normalize" bottom: "x" top: "n" }', shape=(8, 6), label=False))
    assert tops(flat, "n") == [(8, 6, 1, 1)]


@pytest.mark.parametrize("mode", ["gpu", "cpu"])
def test_normalize_buffers_one_top(tmp_path, mode):
    """8x6x3x4 bottom: squared_ 8*6*3*4 floats written forward (cpp:43, cu:97); norm_ 8*1*3*4
    holds the norms (cpp:44, cu:98); the GPU backward uses norm_'s diff, 8*3*4, as scratch (cu:138);
    the CPU backward does not touch it (cpp:86-147)."""
    n = build(tmp_path, net('layer { name: "n" type: "Normalize" bottom: "x" top: "n" }', label=False))
    got = owners(net_buffers(n, mode=mode), "n")
    device = "device" if mode == "gpu" else "host"
    assert got["squared_"] == (8 * 6 * 3 * 4 * F, "forward", device)
    assert got["norm_"] == (8 * 3 * 4 * F, "forward", device)
    assert ("norm_.diff" in got) == (mode == "gpu")
    if mode == "gpu":
        assert got["norm_.diff"] == (8 * 3 * 4 * F, "backward", "device")


def test_normalize_with_two_tops_keeps_the_norms_in_top_1(tmp_path):
    """cpp:44, cu:98: with two tops the norms go to top 1 and norm_'s data is never touched; its
    diff is read backward only with bp_norm (cpp:20, 126-127)."""
    text = net('layer { name: "n" type: "Normalize" bottom: "x" top: "n" top: "norm" normalize_param { bp_norm: BP } }')
    for bp in ("false", "true"):
        n = build(tmp_path, text.replace("BP", bp))
        buffers = net_buffers(n, mode="gpu")
        assert "norm_" not in owners(buffers, "n")
        assert first_touch(buffers, "norm", "top data") == ("forward", 8 * 3 * 4 * F, "device")
        touched = {(t.what, t.index, t.part) for t in layer_touches(n.layer("n"), "gpu", "caffe")}
        assert (("top", 1, "diff") in touched) == (bp == "true")


def test_an_unknown_normalize_type_stops_the_forward(tmp_path):
    """cpp:80-82 and cu:122-124: NOT_IMPLEMENTED for anything but L2 and L1."""
    n = build(tmp_path, net('layer { name: "n" type: "Normalize" bottom: "x" top: "n" '
                            'normalize_param { normalize_type: "L3" } }', label=False))
    stops = [t for t in layer_touches(n.layer("n"), "gpu", "caffe") if t.what == "stop"]
    assert [t.stage for t in stops] == ["forward"] and "L3" in stops[0].note
    assert "normalize_type" in stops[0].name  # the fix the refusal gives, not the CPU-mode one


# ------------------------------------------------------------------ InnerProduct with normalize


def test_normalized_inner_product_adds_one_norm_per_output(tmp_path):
    """K = 6*3*4 = 72, num_output 5, no bias: weight (5, 72); weight_norm_ (5,) set on the host in
    Reshape (cpp:98-102) and used by the GPU forward (cu:41), so one device buffer of 5 floats."""
    text = net('layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip" '
               'inner_product_param { num_output: 5 bias_term: false normalize: NORM } }', label=False)
    n = build(tmp_path, text.replace("NORM", "true"))
    assert [p.shape for p in n.layer("ip").params] == [(5, 72)]
    assert owners(net_buffers(n, mode="gpu"), "ip")["weight_norm_"] == (5 * F, "setup", "device")
    plain = build(tmp_path, text.replace("NORM", "false"))
    assert "weight_norm_" not in owners(net_buffers(plain, mode="gpu"), "ip")


def test_inner_product_without_normalize_is_bvlcs():
    cls = layer_class("InnerProduct", "happynear")
    ip = load_schema("happynear").message("LayerParameter")()
    assert cls.sized_as(ip) is BvlcInnerProduct
    ip.inner_product_param.normalize = True
    assert cls.sized_as(ip) is cls


# ------------------------------------------------------------------ LabelSpecificAdd


def margin(tops_=('"m"',), extra="", phase=""):
    top = " ".join(f"top: {t}" for t in tops_)
    return (f'layer {{ name: "m" type: "LabelSpecificAdd" bottom: "x" bottom: "label" {top} {phase}'
            f'label_specific_add_param {{ bias: -0.35 {extra} }} }}\n')


def test_label_specific_add_shapes(tmp_path):
    """cpp:26-27: top 0 like bottom 0, top 1 (1,)."""
    n = build(tmp_path, net(margin(('"m"', '"b"')), shape=(8, 10)))
    assert tops(n, "m") == [(8, 10), (1,)]


def test_label_specific_add_touches_by_hand(tmp_path):
    """TRAIN: the bias goes to top 1 on the host (cpp:51-52, cu:38-39: mutable_cpu_data); the
    backward copies top 0's diff into bottom 0's (cpp:65-70). In place, nothing is copied back and
    no diff is the layer's to touch."""
    n = build(tmp_path, net(margin(('"m"', '"b"')), shape=(8, 10)))
    touched = {(t.stage, t.what, t.index, t.part, t.device) for t in layer_touches(n.layer("m"), "gpu", "caffe")}
    assert ("forward", "top", 1, "data", "host") in touched
    assert ("backward", "bottom", 0, "diff", "device") in touched
    assert not {t for t in touched if t[1] == "bottom" and t[2] == 1 and t[3] == "diff"}  # never the labels'
    inplace = build(tmp_path, net(margin(('"x"',)), shape=(8, 10)))
    assert not [t for t in layer_touches(inplace.layer("m"), "gpu", "caffe") if t.part == "diff"]


def test_label_specific_add_in_test_writes_no_bias(tmp_path):
    """cpp:13, 43: transform_test is ANDed with phase == TRAIN, so a TEST forward returns before top 1."""
    n = build(tmp_path, net(margin(('"m"', '"b"'), phase="include { phase: TEST } "), shape=(8, 10)), phase="TEST")
    touched = {(t.what, t.index, t.part) for t in layer_touches(n.layer("m"), "gpu", "caffe")}
    assert ("top", 1, "data") not in touched


# ------------------------------------------------------------------ SoftmaxWithLoss and Accuracy


def loss(extra="", bottoms='bottom: "x" bottom: "label"', softmax=""):
    return (f'layer {{ name: "l" type: "SoftmaxWithLoss" {bottoms} top: "l" {extra} '
            f'softmax_param {{ {softmax} }} }}\n')


def test_softmax_loss_gpu_scratch_is_its_own(tmp_path):
    """8x10 scores: loss_ and counts_ are outer x inner = 8 x 1 floats each (cpp:101-102), the GPU
    forward's scratch (cu:108, 111), where BVLC's borrows the bottom's diff: a forward-only run never
    allocates the bottom's diff. The CPU code touches neither (cpp:152-256)."""
    n = build(tmp_path, net(loss(), shape=(8, 10), force=False))
    gpu = net_buffers(n, mode="gpu", backward=False)
    got = owners(gpu, "l")
    assert got["loss_"] == got["counts_"] == (8 * F, "forward", "device")
    assert first_touch(gpu, "x", "top diff") is None
    assert "loss_" not in owners(net_buffers(n, mode="cpu"), "l")


def test_softmax_loss_weights_bottom_and_class_weight(tmp_path):
    """A third bottom of 8 weights (hpp: 2 to 3 bottoms; cpp:108-111) makes class_weight_, one per
    class (10), set on the host (cpp:75-78) and read by the GPU kernels (cu:125)."""
    body = 'layer { name: "w" type: "DummyData" top: "w" dummy_data_param { shape { dim: 8 } } }\n' + \
        loss(bottoms='bottom: "x" bottom: "label" bottom: "w"')
    n = build(tmp_path, net(body, shape=(8, 10)))
    assert owners(net_buffers(n, mode="gpu"), "l")["class_weight_"] == (10 * F, "setup", "device")


def test_softmax_loss_l2_normalize_type_uses_normalizes_buffers(tmp_path):
    """cpp:26-35: normalize_type L2 makes the inner layer a Normalize on prob_: squared_ (8x10) and
    norm_ (8) instead of Softmax's scale_."""
    n = build(tmp_path, net(loss(softmax='normalize_type: "L2"'), shape=(8, 10)))
    got = owners(net_buffers(n, mode="gpu"), "l")
    assert got["squared_"][0] == 8 * 10 * F and got["norm_"][0] == 8 * F
    assert "scale_" not in got


def test_softmax_loss_refuses_an_unknown_normalize_type(tmp_path):
    with pytest.raises(InputError, match="normalize_type 'Max'"):  # cpp:36-38: NOT_IMPLEMENTED at setup
        build(tmp_path, net(loss(softmax='normalize_type: "Max"'), shape=(8, 10)))


def test_accuracy_runs_on_the_host(tmp_path):
    """No accuracy_layer.cu: in GPU mode Forward_cpu runs, reading its bottoms and writing its tops
    on the host; a per-class top (10,) has nums_buffer_ (10) there too (cpp:43-49)."""
    body = 'layer { name: "a" type: "Accuracy" bottom: "x" bottom: "label" top: "a" top: "per_class" }\n'
    n = build(tmp_path, net(body, shape=(8, 10), force=False), phase="TEST")
    got = owners(net_buffers(n, mode="gpu", backward=False), "a")
    assert got["nums_buffer_"] == (10 * F, "forward", "host")
    touched = {(t.what, t.device) for t in layer_touches(n.layer("a"), "gpu", "caffe")}
    assert touched == {("bottom", "host"), ("top", "host"), ("buffer", "host")}


# ------------------------------------------------------------------ NormFace's InnerDistance and contrastive loss

WEIGHT = 'layer { name: "w" type: "Parameter" top: "w" parameter_param { shape { dim: 7 dim: 72 } } }\n'


def test_inner_distance_with_its_own_centres(tmp_path):
    """One bottom 8x6x3x4: K = 72 (axis 1), num_output 5: centres (5, 72) (inner_distance_layer.cpp:
    26-48), top (8, 5) (cpp:67-70); normalize adds weight_norm_, 5 floats (cpp:71-77, cu:71)."""
    n = build(tmp_path, net('layer { name: "d" type: "InnerDistance" bottom: "x" top: "d" '
                            'inner_distance_param { num_output: 5 normalize: true } }', label=False))
    assert tops(n, "d") == [(8, 5)]
    assert [p.shape for p in n.layer("d").params] == [(5, 72)]
    assert owners(net_buffers(n, mode="gpu"), "d")["weight_norm_"] == (5 * F, "setup", "device")


def test_inner_distance_with_centres_from_bottom_1(tmp_path):
    """Two bottoms: N = bottom 1's num() = 7 (cpp:27, 64), no weight of its own (cpp:29-31); the
    centres get a diff when their producer learns (cpp:128-130)."""
    n = build(tmp_path, net(WEIGHT + 'layer { name: "d" type: "InnerDistance" bottom: "x" bottom: "w" top: "d" }',
                            label=False))
    assert tops(n, "d") == [(8, 7)] and not n.layer("d").params
    assert first_touch(net_buffers(n, mode="gpu"), "w", "top diff") == ("backward", 7 * 72 * F, "device")


def test_inner_distance_stops_at_an_unknown_distance(tmp_path):
    """cpp:116-118: NOT_IMPLEMENTED for anything but L2 and L1."""
    n = build(tmp_path, net('layer { name: "d" type: "InnerDistance" bottom: "x" top: "d" '
                            'inner_distance_param { num_output: 5 distance_type: "cos" } }', label=False))
    assert [t.stage for t in layer_touches(n.layer("d"), "gpu", "caffe") if t.what == "stop"] == ["forward"]


def test_inner_product_with_its_weight_from_bottom_1(tmp_path):
    """NormFace's NCA net: InnerProduct bottom 1 a Parameter (7, 72), bias_term false: N = 7 (cpp:17,
    85), no blobs (cpp:25-28), no bias_multiplier_; with a bias the fork reads blobs it never sized."""
    body = WEIGHT + ('layer { name: "ip" type: "InnerProduct" bottom: "x" bottom: "w" top: "ip" '
                     'inner_product_param { bias_term: BIAS } }')
    n = build(tmp_path, net(body.replace("BIAS", "false"), label=False))
    assert tops(n, "ip") == [(8, 7)] and not n.layer("ip").params
    assert owners(net_buffers(n, mode="gpu"), "ip") == {}
    with pytest.raises(InputError, match="bias_term: false"):
        build(tmp_path, net(body.replace("BIAS", "true"), label=False))


def contrastive(extra="", tops_=('"l"', '"dist"')):
    top = " ".join(f"top: {t}" for t in tops_)
    return (f'layer {{ name: "l" type: "GeneralContrastiveLoss" bottom: "x" bottom: "label" {top} '
            f'loss_weight: 1 loss_weight: 1 general_contrastive_loss_param {{ {extra} }} }}\n')


def test_general_contrastive_loss_by_hand(tmp_path):
    """8x10 distances: a scalar loss and (2,) distances (cpp:36-45), (3,) with add_intra_mae; CPU code
    only, so in GPU mode the forward writes bottom 0's diff, 8*10 floats, on the host (cpp:55);
    max_negative_only adds 8 ints (cpp:46-48)."""
    n = build(tmp_path, net(contrastive(), shape=(8, 10)))
    assert tops(n, "l") == [(), (2,)]
    assert tops(build(tmp_path, net(contrastive("add_intra_mae: true"), shape=(8, 10))), "l") == [(), (3,)]
    assert first_touch(net_buffers(n, mode="gpu"), "x", "top diff") == ("forward", 8 * 10 * F, "host")
    m = build(tmp_path, net(contrastive("max_negative_only: true"), shape=(8, 10)))
    assert owners(net_buffers(m, mode="gpu"), "l")["max_negative_index_"] == (8 * 4, "forward", "host")


def test_general_contrastive_loss_needs_a_label_per_row(tmp_path):
    """loss_layer.cpp:19-21: the first dimensions of bottoms 0 and 1 must agree."""
    body = 'layer { name: "y" type: "DummyData" top: "y" dummy_data_param { shape { dim: 3 } } }\n' + \
        contrastive().replace('bottom: "label"', 'bottom: "y"')
    with pytest.raises(InputError, match="same first dimension"):
        build(tmp_path, net(body, shape=(8, 10)))


@pytest.mark.parametrize("param", ["disable_mean: true", "disable_variance: true", "engine: CUDNN"])
def test_batch_norm_settings_of_the_fork_alone_are_refused(tmp_path, param):
    """batch_norm_layer.cpp:40-54, 112-260: these change which passes run and what learns."""
    with pytest.raises(InputError, match="fork's BatchNorm"):
        build(tmp_path, net(f'layer {{ name: "bn" type: "BatchNorm" bottom: "x" top: "bn" '
                            f'batch_norm_param {{ {param} }} }}', label=False))


def test_batch_norm_without_them_is_bvlcs(tmp_path):
    n = build(tmp_path, net('layer { name: "bn" type: "BatchNorm" bottom: "x" top: "bn" }', label=False))
    assert [p.shape for p in n.layer("bn").params] == [(6,), (6,), (1,)]
    from protoaudit.layers.normalization import BatchNorm as BvlcBatchNorm
    assert layer_class("BatchNorm", "happynear").sized_as(None) is BvlcBatchNorm


# ------------------------------------------------------------------ ChannelScale


def scale(extra="", tops_=('"s"',), scales="n"):
    top = " ".join(f"top: {t}" for t in tops_)
    return (f'layer {{ name: "s" type: "ChannelScale" bottom: "x" bottom: "{scales}" {top} '
            f'channel_scale_param {{ {extra} }} }}\n')


NORMS_TOP = 'layer { name: "nrm" type: "Normalize" bottom: "x" top: "xn" top: "n" }\n'


def test_channel_scale_by_hand(tmp_path):
    """AM-Softmax's wo_fn net: the scores (8x6x3x4 here) times bottom 1, one value per (n, h, w):
    Normalize's second top, 8x1x3x4 (cpp:16-17). Top like bottom 0 (cpp:48); no parameter without
    global_scale; the backward writes both bottoms' diffs (cu:87-88), so the norms get a diff even
    where propagate_down says no."""
    n = build(tmp_path, net(NORMS_TOP + scale(), label=False))
    assert tops(n, "s") == [(8, 6, 3, 4)] and not n.layer("s").params
    assert first_touch(net_buffers(n, mode="gpu"), "n", "top diff") == ("backward", 8 * 3 * 4 * F, "device")


def test_channel_scale_global_scale_is_a_fixed_parameter(tmp_path):
    """global_scale: one (1,) blob, lr_mult 0 added by setup (cpp:29-37), and a second top (1,) on
    the host (cpp:49-51, cu:60-62); a learning param is refused (cpp:39-40)."""
    n = build(tmp_path, net(NORMS_TOP + scale("global_scale: true", ('"s"', '"g"')), label=False))
    assert tops(n, "s") == [(8, 6, 3, 4), (1,)]
    assert [p.shape for p in n.layer("s").params] == [(1,)]
    assert first_touch(net_buffers(n, mode="gpu"), "g", "top data") == ("forward", F, "host")
    with pytest.raises(InputError, match="lr_mult 1"):
        build(tmp_path, net(NORMS_TOP + scale("global_scale: true").replace(
            "channel_scale_param", "param { lr_mult: 1 } channel_scale_param"), label=False))


def test_channel_scale_needs_one_scale_per_position(tmp_path):
    with pytest.raises(InputError, match=r"one value per position"):
        build(tmp_path, net(scale(scales="label"), label=True))


@pytest.mark.parametrize("layer, branch", [
    ('type: "GlobalLSEMargin" bottom: "x" bottom: "label" top: "t"', "branch ms"),  # AM-Softmax's auto net
    ('type: "LabelSpecificRescale" bottom: "x" bottom: "label" top: "t"', "branch experiment"),
])
def test_the_forks_other_types_are_named_as_its(tmp_path, layer, branch):
    """Types of happynear/caffe-windows protoaudit has no rule for (REGISTER_LAYER_CLASS in
    global_lse_margin_layer.cpp on ms, label_specific_rescale_layer.cpp on experiment): the refusal
    names the fork and the --input way around."""
    with pytest.raises(InputError, match=f"happynear's Caffe.*{branch}.*--input t=NxCxHxW"):
        build_text(tmp_path, net(f'layer {{ name: "t" {layer} }}', shape=(8, 10)))


# ------------------------------------------------------------------ GeneralTripletLoss, SoftTruncation, Noise


def test_general_triplet_loss_by_hand(tmp_path):
    """LossLayer's two bottoms (the header keeps ExactNumBottomBlobs 2), a (2,) distances top
    (cpp:28-31), bottom 0's diff written forward on the host (cpp:41), hardest_index_ 8 ints with
    hardest_only (cpp:32-34)."""
    body = ('layer { name: "l" type: "GeneralTripletLoss" bottom: "x" bottom: "label" top: "l" top: "dist" '
            'loss_weight: 1 loss_weight: 0 general_triplet_loss_param { hardest_only: true } }\n')
    n = build(tmp_path, net(body, shape=(8, 10)))
    assert tops(n, "l") == [(), (2,)]
    buffers = net_buffers(n, mode="gpu")
    assert first_touch(buffers, "x", "top diff") == ("forward", 8 * 10 * F, "host")
    assert owners(buffers, "l")["hardest_index_"] == (8 * 4, "forward", "host")
    with pytest.raises(InputError, match="exactly 2 bottom"):
        build(tmp_path, net(body.replace('bottom: "label"', 'bottom: "label" bottom: "label"'), shape=(8, 10)))


def test_soft_truncation_is_a_neuron(tmp_path):
    n = build(tmp_path, net('layer { name: "t" type: "SoftTruncation" bottom: "x" top: "t" }', label=False))
    assert tops(n, "t") == [(8, 6, 3, 4)] and owners(net_buffers(n, mode="gpu"), "t") == {}


def test_noise_in_place_has_a_mask_in_train_only(tmp_path):
    """noise_layer.cpp:13: mask is the bottom's size, 8*6*3*4 floats, filled in TRAIN (cu:14-24); a
    TEST forward copies (cu:26). A top of another name is never shaped (cpp:11-14): refused."""
    text = net('layer { name: "z" type: "Noise" bottom: "x" top: "x" noise_param { gaussian_std: 0.1 } }', label=False)
    mask = owners(net_buffers(build(tmp_path, text), mode="gpu"), "z")["mask"]
    assert mask == (8 * 6 * 3 * 4 * F, "forward", "device")
    assert owners(net_buffers(build(tmp_path, text, phase="TEST"), mode="gpu", backward=False), "z") == {}
    with pytest.raises(InputError, match="in place"):
        build(tmp_path, text.replace('top: "x" noise', 'top: "y" noise'))


def test_eltwise_sort_keeps_a_bottom_sized_buffer(tmp_path):
    """eltwise_layer.cpp:44-47: SORT sizes sort_temp_ like bottom 0 (8x6x3x4), written forward
    (cu:65-73); the GPU backward without stable_prod_grad stops (cu:153-157); SUM is BVLC's."""
    body = ('layer { name: "e" type: "Eltwise" bottom: "x" bottom: "x" top: "e" '
            'eltwise_param { operation: SORT STABLE } }')
    n = build(tmp_path, net(body.replace("STABLE", ""), label=False))
    assert owners(net_buffers(n, mode="gpu"), "e")["sort_temp_"] == (8 * 6 * 3 * 4 * F, "forward", "device")
    unstable = build(tmp_path, net(body.replace("STABLE", "stable_prod_grad: false"), label=False))
    assert [t.stage for t in layer_touches(unstable.layer("e"), "gpu", "caffe") if t.what == "stop"] == ["backward"]
    assert not [t for t in layer_touches(unstable.layer("e"), "cpu", "caffe") if t.what == "stop"]
    from protoaudit.layers.structure import Eltwise as BvlcEltwise
    summed = load_schema("happynear").message("LayerParameter")()
    assert layer_class("Eltwise", "happynear").sized_as(summed) is BvlcEltwise


def test_a_reading_that_borrows_flip_keeps_its_own_inner_product(tmp_path):
    """happynear's Flip beside SmoothL1Loss (no shipped fork has both): the file is read with a Faster
    R-CNN-line schema, Flip borrowed from happynear's Caffe. Only the types that reading lacks are
    borrowed: its InnerProduct stays BVLC's, which reads the reading's own schema (happynear's reads
    inner_product_param.normalize, a field that schema has not: an internal error before, tried as a
    new user would on a face regression net)."""
    (tmp_path / "n.prototxt").write_text(
        'layer { name: "data" type: "Input" top: "data" top: "label" input_param { shape { dim: 2 dim: 3 dim: 8 '
        'dim: 8 } shape { dim: 4 dim: 1 } } }\n'
        'layer { name: "flip" type: "Flip" bottom: "data" top: "flip" }\n'
        'layer { name: "cat" type: "Concat" bottom: "data" bottom: "flip" top: "cat" concat_param { axis: 0 } }\n'
        'layer { name: "ip" type: "InnerProduct" bottom: "cat" top: "ip" inner_product_param { num_output: 1 } }\n'
        'layer { name: "loss" type: "SmoothL1Loss" bottom: "ip" bottom: "label" top: "loss" }\n')
    run = run_in_process("n.prototxt", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "sized with Flip as happynear's Caffe" in run.stdout
    (net,) = build_nets(str(tmp_path / "n.prototxt"))
    assert type(net.layer("ip").impl) is BvlcInnerProduct
