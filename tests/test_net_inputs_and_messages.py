"""Issue 17, item 4: net-level inputs get their "Data shape:" line and JSON data_shapes entry, and
refusals name the real cause (a V1 block with a V2 type; a concat that fails on an assumed size)."""
import json
import os

import pytest

from conftest import DATA, run_in_process, run_protoaudit

HERE = os.path.join(DATA, "net_inputs")


def _tops(name, *flags):
    """The tops of each layer in `protoaudit NAME FLAGS --format json`, which must audit with no
    assumption."""
    run = run_protoaudit(name, *flags, "--format", "json", cwd=HERE)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["assumptions"] == []
    return {layer["name"]: layer["tops"] for layer in out["nets"][0]["layers"]}


def test_input_shape_inputs_are_told_in_json_and_text():
    run = run_protoaudit("fast_rcnn_inputs.prototxt", "--format", "json", cwd=HERE)
    assert run.returncode == 0, run.stderr
    shapes = json.loads(run.stdout)["data_shapes"]
    # the file's input_shape blocks: data 1x3x227x227, rois 1x5
    assert [(s["top"], s["shape"], s["source"]) for s in shapes] == [
        ("data", [1, 3, 227, 227], "the net's input_shape"), ("rois", [1, 5], "the net's input_shape")]
    text = run_protoaudit("fast_rcnn_inputs.prototxt", "--batch", "3", cwd=HERE).stdout
    assert "Data shape: the net, layer '(net input)', top 'data' 3x3x227x227: the net's input_shape, batch 3" in text


def test_input_dim_inputs_and_input_overrides():
    run = run_protoaudit("icnet_input_dim.prototxt", "--format", "json", cwd=HERE)
    assert run.returncode == 0, run.stderr
    # input_dim: 1 3 1025 2049, as ICNet's file gives it
    assert [(s["top"], s["shape"]) for s in json.loads(run.stdout)["data_shapes"]] == [("data", [1, 3, 1025, 2049])]
    given = run_protoaudit("icnet_input_dim.prototxt", "--input", "data=2x3x64x64", "--format", "json", cwd=HERE)
    assert [(s["shape"], s["source"]) for s in json.loads(given.stdout)["data_shapes"]] == [([2, 3, 64, 64], "--input")]


def test_an_image_of_one_pixel_is_named_as_the_placeholder_it_is(tmp_path):
    """OpenPose's face and hand deploy nets write `input_dim: 1 3 1 1  # Original: 368`: Caffe builds
    them at one pixel (each 3x3 convolution padded by 1 keeps 1x1), a figure of no use to anyone who
    runs them at 368; the Data shape line says so and gives the --input line (tried as a new user
    would: 741 MiB, without a word). A feature vector (4096 channels at 1x1) is no image."""
    for dims, named in (("1 3 1 1", True), ("1 4096 1 1", False), ("1 3 368 368", False)):
        (tmp_path / "n.prototxt").write_text(
            'input: "image"\n' + "".join(f"input_dim: {d}\n" for d in dims.split())
            + 'layer { name: "conv" type: "Convolution" bottom: "image" top: "conv"\n'
              '  convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }\n')
        run = run_protoaudit("n.prototxt", cwd=tmp_path)
        assert run.returncode == 0, run.stderr
        line = next(x for x in run.stdout.splitlines() if x.startswith("Data shape:"))
        assert ("an image of one pixel" in line and "--input image=1x3xHxW" in line) == named, line


def test_a_deploy_file_whose_train_phase_cannot_build_is_its_test_net(tmp_path):
    """LisaAnne/lisa-caffe-public's LRCN deploy net reshapes its input with a TEST-only Reshape: Caffe
    cannot build the file in the TRAIN phase (the LSTM's bottom is made by no TRAIN layer), so it is
    audited as its TEST net, which the report says (tried as a new user would: refused, the default
    phase being TRAIN). Hand derivation: Reshape 4x6 -> 2x2x6; InnerProduct 2x2x6 (axis 1) -> 2x3."""
    (tmp_path / "n.prototxt").write_text(
        'layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 4 dim: 6 } } }\n'
        'layer { name: "reshape" type: "Reshape" bottom: "data" top: "seq" include { phase: TEST }\n'
        '  reshape_param { shape { dim: 2 dim: 2 dim: 6 } } }\n'
        'layer { name: "fc" type: "InnerProduct" bottom: "seq" top: "fc" inner_product_param { num_output: 3 } }\n')
    run = run_protoaudit("n.prototxt", "--format", "json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    [net] = out["nets"]
    assert net["phase"] == "TEST"
    assert {layer["name"]: layer["tops"] for layer in net["layers"]}["fc"] == [[2, 3]]
    [said] = [a for a in out["assumptions"] if a["layer"] == "(file)"]
    assert "TEST phase" in said["assumption"] and "'reshape'" in said["assumption"]
    refused = run_protoaudit("n.prototxt", "--phase", "train", cwd=tmp_path)  # the phase named is that phase
    assert refused.returncode == 2 and "unknown bottom blob 'seq'" in refused.stderr


def test_where_that_test_net_lacks_shapes_those_are_asked_for(tmp_path):
    """The same file with a layer of a type protoaudit has no rule for after the Reshape (a video
    net's ConvLSTM): the TRAIN phase stops on the TEST-only bottom as above, and the TEST net, the one
    Caffe can build, lacks that layer's tops: those are asked for, not the TRAIN phase's wiring."""
    (tmp_path / "n.prototxt").write_text(
        'layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 4 dim: 6 } } }\n'
        'layer { name: "reshape" type: "Reshape" bottom: "data" top: "seq" include { phase: TEST }\n'
        '  reshape_param { shape { dim: 2 dim: 2 dim: 6 } } }\n'
        'layer { name: "enc" type: "FancyConvLSTM" bottom: "seq" top: "enc" }\n'
        'layer { name: "fc" type: "InnerProduct" bottom: "enc" top: "fc" inner_product_param { num_output: 3 } }\n')
    run = run_protoaudit("n.prototxt", cwd=tmp_path)
    assert run.returncode == 2 and "unknown layer type 'FancyConvLSTM'" in run.stderr, run.stderr
    assert "--input enc=" in run.stderr and "unknown bottom blob" not in run.stderr


def test_a_quoted_type_in_a_v1_block_names_the_enum():
    run = run_protoaudit("v1_quoted_type.prototxt", cwd=HERE)
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
    assert run.stderr.startswith("protoaudit: v1_quoted_type.prototxt:12: layer 'prob': ")
    # V1LayerParameter.LayerType's SOFTMAX = 20 upgrades to "Softmax" (upgrade_proto.cpp UpgradeV1LayerType)
    assert "type: SOFTMAX" in run.stderr and "another Caffe fork" not in run.stderr


def test_an_unknown_type_names_its_fork_and_the_input_line(tmp_path):
    """A type no fork has a rule for, whose guided_dropout_param says it is Cysu's: refused naming the fork
    and the --input line. (Cysu's GuidedDropout itself is sized: tests/test_fork_cysu.py.)"""
    with open(os.path.join(HERE, "dgd_guided_dropout.prototxt")) as f:
        text = f.read().replace('type: "GuidedDropout"', 'type: "GuidedDropoutV2"')
    (tmp_path / "dgd_guided_dropout.prototxt").write_text(text)
    run = run_protoaudit("dgd_guided_dropout.prototxt", cwd=tmp_path)
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
    msg = run.stderr
    assert msg.startswith("protoaudit: dgd_guided_dropout.prototxt:6: layer 'guided_drop7': ")
    assert "'GuidedDropoutV2'" in msg and "Cysu" in msg and "--input dropped=NxCxHxW" in msg
    # the original file is sized with Cysu's layer: its top is bottom 0's shape; InnerProduct N x num_output
    tops = _tops("dgd_guided_dropout.prototxt")
    assert tops["guided_drop7"] == [[2, 256]] and tops["fc"] == [[2, 5]]


def test_c3ds_convolution3d_is_read_with_its_shipped_fork():
    """C3D's Convolution3D, unknown before C3D v1.1's Caffe was shipped, is read exactly and sized."""
    tops = _tops("c3d_conv3d.prototxt")
    # 3x3x3 kernels, pads 1 (convolution3d_layer.cpp:63-65): (16 + 2 - 3) / 1 + 1 = 16 frames, (112 + 2 - 3) / 1 + 1 = 112
    assert tops["conv1a"] == [[1, 64, 16, 112, 112]] and tops["fc"] == [[1, 5]]
    assert "C3D v1.1" in run_protoaudit("c3d_conv3d.prototxt", cwd=HERE).stdout


def test_video_caffes_kernel_shape_is_no_misspelling():
    """video-caffe's ConvolutionParameter.kernel_shape (its caffe.proto, field 7778) is near kernel_size,
    but it is a fork's field, read by the fork's shipped schema: NdConvolution 3 x 3 x 3, pad 1, stride 1
    keeps the 16 x 112 x 112 clip (cudnn_ndconv_layer.cpp:239-251), audited as the cuDNN build it
    needs (tests/test_fork_video_caffe.py)."""
    run = run_protoaudit("video_caffe_ndconv.prototxt", cwd=HERE)
    assert run.returncode == 0, run.stderr
    assert "Read with the caffe.proto of video-caffe" in run.stdout and "did you mean" not in run.stdout
    assert _tops("video_caffe_ndconv.prototxt")["conv1a"] == [[1, 64, 16, 112, 112]]


def test_r_fcns_psroipooling_is_read_and_sized_by_its_shipped_fork():
    """py-R-FCN's PSROIPooling, unknown before its fork was shipped, is read exactly and sized."""
    tops = _tops("rfcn_psroi.prototxt")
    # 300 RoIs x output_dim 21 x group_size 7 x 7; then AVE pooling 7x7 stride 7 of 7x7 maps, (7 - 7) / 7 + 1 = 1
    assert tops["psroipooled_cls_rois"] == [[300, 21, 7, 7]] and tops["ave_cls_score_rois"] == [[300, 21, 1, 1]]
    assert "py-R-FCN" in run_protoaudit("rfcn_psroi.prototxt", cwd=HERE).stdout


def test_a_v1_type_of_a_fork_names_the_fork():
    """VIDEO_DATA = 33 in C3D v1.0's V1LayerParameter.LayerType (C3D-v1.0/src/caffe/proto/caffe.proto:168)."""
    run = run_protoaudit("c3d_v1_video_data.prototxt", cwd=HERE)
    assert run.returncode == 2 and len(run.stderr.splitlines()) == 1, run.stderr
    assert run.stderr.startswith("protoaudit: c3d_v1_video_data.prototxt:6: layer 'data': ")
    assert "C3D v1.0" in run.stderr and "ssd" not in run.stderr
    assert "C3D v1.1's nets are read (the fork c3d)" in run.stderr  # the way out: v1.1's format


def test_deconvnets_v1_bn_is_read_with_deconvnets_schema(tmp_path):
    """BN = 43 in DeconvNet's V1LayerParameter.LayerType (HyeonwooNoh/caffe src/caffe/proto/caffe.proto:241):
    DeconvNet's schema is shipped now, so the V1 BN reads and is sized (a V1 type of a fork still not
    shipped is named by its fork: test_a_v1_type_of_a_fork_names_the_fork)."""
    (tmp_path / "d.prototxt").write_text('name: "d"\ninput: "a"\ninput_dim: 2\ninput_dim: 3\ninput_dim: 8\n'
                                         'input_dim: 8\nlayers { name: "bn1" type: BN bottom: "a" top: "b" }\n')
    run = run_protoaudit("d.prototxt", "--format", "json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["assumptions"] == [] and out["params"]["total"] == 6  # a scale and a shift per channel
    assert "DeconvNet" in run_protoaudit("d.prototxt", cwd=tmp_path).stdout


DIGITS_STAGES = """name: "digits"
layer { name: "train-data" type: "Input" top: "data" include { phase: TRAIN stage: "train" }
  input_param { shape { dim: 4 dim: 3 dim: 8 dim: 8 } } }
layer { name: "val-data" type: "Input" top: "data" include { phase: TEST stage: "val" }
  input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1" convolution_param { num_output: 4 kernel_size: 3 } }
"""


def test_a_net_file_whose_data_is_in_one_stage_is_audited_in_that_stage(tmp_path):
    """DIGITS writes its data layers under `stage: "train"` and `stage: "val"` and trains with those
    stages (its solver's train_state). Read with none, as Caffe would read it, 'data' is made by no
    layer of the net (found tried as a new user would). Only stage "train" includes its maker in
    the TRAIN phase, so the net file is audited in that stage, said as an assumption with the flag:
    train-data's 4x3x8x8 through a 3x3 convolution of 4 outputs is 4x4x6x6."""
    (tmp_path / "net.prototxt").write_text(DIGITS_STAGES)
    r = run_in_process("net.prototxt", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    said = [a for a in out["assumptions"] if "stage 'train'" in a["assumption"]]
    assert len(said) == 1 and said[0]["override"] == "--stage train"
    assert "includes layer 'train-data', which makes 'data'" in said[0]["assumption"]
    conv = next(layer for layer in out["nets"][0]["layers"] if layer["name"] == "conv1")
    assert conv["tops"] == [[4, 4, 6, 6]], conv
    assert run_in_process("net.prototxt", "--stage", "train", "--stage", "val", cwd=tmp_path).returncode == 0


def test_a_bottom_that_two_stages_could_make_or_a_solver_state_is_still_refused(tmp_path):
    """Where two stages would each include the maker, protoaudit does not choose: the message names
    the layer and both flags. A solver's own state is Caffe's, and is not second-guessed either."""
    (tmp_path / "net.prototxt").write_text(DIGITS_STAGES.replace(
        'include { phase: TRAIN stage: "train" }', 'include { stage: "a" } include { stage: "b" }'))
    r = run_in_process("net.prototxt", cwd=tmp_path)
    assert r.returncode == 2
    assert "--stage a or --stage b" in r.stderr
    (tmp_path / "one.prototxt").write_text(DIGITS_STAGES)
    (tmp_path / "solver.prototxt").write_text('net: "one.prototxt"\nbase_lr: 0.01\nmax_iter: 1\n')
    r = run_in_process("solver.prototxt", cwd=tmp_path)
    assert r.returncode == 2 and "--stage train" in r.stderr

@pytest.mark.parametrize("type_name, fork", [
    # each type is registered (REGISTER_LAYER_CLASS) in that repository's src/caffe/layers/, read there
    ("ContinuationIndicator", "warrentdrew/Caffe_SSD_LSTM_LPR"),  # continuation_indicator_layer.cpp
    ("CosinAddm", "xialuxi/arcface-caffe"),  # cosin_add_m_layer.cpp
])
def test_an_unknown_type_names_the_fork_that_registers_it(tmp_path, type_name, fork):
    """Found tried as a new user would, on nets of those repositories: the type is named with its
    fork and the --input line for its top, in one message."""
    (tmp_path / "n.prototxt").write_text(
        'layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 4 dim: 8 dim: 8 } } }\n'
        f'layer {{ name: "odd" type: "{type_name}" bottom: "x" top: "y" }}\n')
    r = run_in_process("n.prototxt", cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert f"unknown layer type '{type_name}': most likely a layer of" in r.stderr and fork in r.stderr
    assert "--input y=" in r.stderr


@pytest.mark.parametrize("layout", ["in the tree", "beside it"])
def test_an_unknown_type_the_nets_own_caffe_tree_registers_names_its_source(tmp_path, layout):
    """A fork's repository holds its Caffe source tree: the net under the tree's examples/ (Lyp100208/
    Caffe_action's), or beside a caffe/ folder (Lyp100208/oneshot_hashing's prototxt/ and caffe/). The
    type the tree registers (REGISTER_LAYER_CLASS(HashData) in src/caffe/layers/hash_data_layer.cpp) is
    named with that file and the tree's caffe.proto, for --caffe-proto, in one line; a type the tree
    does not register is refused as before."""
    tree = tmp_path / "caffe" if layout == "beside it" else tmp_path
    (tree / "src" / "caffe" / "layers").mkdir(parents=True)
    (tree / "src" / "caffe" / "proto").mkdir()
    (tree / "src" / "caffe" / "proto" / "caffe.proto").write_text('syntax = "proto2";\npackage caffe;\n')
    (tree / "src" / "caffe" / "layers" / "conv_layer.cpp").write_text("INSTANTIATE_CLASS(ConvolutionLayer);\n")
    (tree / "src" / "caffe" / "layers" / "hash_data_layer.cpp").write_text(
        "namespace caffe {\nINSTANTIATE_CLASS(HashDataLayer);\nREGISTER_LAYER_CLASS(HashData);\n}\n")
    nets = tmp_path / ("prototxt" if layout == "beside it" else "examples") / "hashing"
    nets.mkdir(parents=True)
    (nets / "n.prototxt").write_text(
        'layer { name: "in" type: "Input" top: "x" input_param { shape { dim: 1 dim: 4 dim: 8 dim: 8 } } }\n'
        'layer { name: "odd" type: "HashData" bottom: "x" top: "y" }\n')
    r = run_in_process("n.prototxt", cwd=nets)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    where = "../../caffe/src/caffe" if layout == "beside it" else "../../src/caffe"
    assert (f"unknown layer type 'HashData': a layer of the Caffe source tree of this net's repository "
            f"({where}/layers/hash_data_layer.cpp)") in r.stderr
    assert f"--caffe-proto {where}/proto/caffe.proto" in r.stderr and "--input y=" in r.stderr
    (nets / "n.prototxt").write_text((nets / "n.prototxt").read_text().replace("HashData", "HashDatum"))
    r = run_in_process("n.prototxt", cwd=nets)
    assert r.returncode == 2 and "Caffe source tree" not in r.stderr


def test_a_fork_field_of_a_net_in_a_caffe_tree_points_to_that_trees_caffe_proto(tmp_path):
    """superxuang/caffe_3d_faster_rcnn's nets sit beside its Caffe tree: a Crop with its fork's
    center_align, which no shipped caffe.proto has and which the crop's shape could read, is refused
    naming the tree's own src/caffe/proto/caffe.proto for --caffe-proto; outside a tree, FILE."""
    net = ('layer { name: "in" type: "Input" top: "x" top: "z" input_param { shape { dim: 1 dim: 4 dim: 8 dim: 8 } '
           'shape { dim: 1 dim: 4 dim: 4 dim: 4 } } }\n'
           'layer { name: "crop" type: "Crop" bottom: "x" bottom: "z" top: "y" crop_param { axis: 2 center_align: true } }\n')
    tree = tmp_path / "repo" / "caffe"
    (tree / "src" / "caffe" / "proto").mkdir(parents=True)
    (tree / "src" / "caffe" / "proto" / "caffe.proto").write_text('syntax = "proto2";\npackage caffe;\n')
    nets = tmp_path / "repo" / "models" / "ours"
    nets.mkdir(parents=True)
    (nets / "n.prototxt").write_text(net)
    r = run_in_process("n.prototxt", cwd=nets)
    assert r.returncode == 2 and 'field "center_align" of CropParameter' in r.stderr, r.stderr
    assert "--caffe-proto ../../caffe/src/caffe/proto/caffe.proto" in r.stderr, r.stderr
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "n.prototxt").write_text(net)
    r = run_in_process("n.prototxt", cwd=tmp_path / "alone")
    assert r.returncode == 2 and "--caffe-proto FILE" in r.stderr and "source tree" not in r.stderr


DEPLOY_WITH_TRAIN_LOSS = """name: "deploy"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
  convolution_param { num_output: 2 kernel_size: 3 } }
layer { name: "loss" type: "SigmoidCrossEntropyLoss" bottom: "conv" bottom: "label" top: "loss"
  include { phase: TRAIN } }
layer { name: "prob" type: "Sigmoid" bottom: "conv" top: "prob" include { phase: TEST } }
"""


def test_a_train_only_layer_reading_a_blob_no_layer_makes_leaves_the_test_net(tmp_path):
    """A deploy file (found tried as a new user would: a co-saliency FCN's) that keeps its TRAIN-only
    losses on labels no Input gives. Caffe's Net::Init stops on the unknown bottom 'label' in the
    TRAIN phase; in the TEST phase FilterNet leaves the loss out and the net builds. Read with no
    flags, the file is audited as its TEST net, said with --phase train; with --phase train, the
    refusal names the phase and the flag."""
    (tmp_path / "net.prototxt").write_text(DEPLOY_WITH_TRAIN_LOSS)
    r = run_in_process("net.prototxt", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    said = [a for a in out["assumptions"] if "TRAIN phase only" in a["assumption"]]
    assert len(said) == 1 and said[0]["override"] == "--phase train"
    assert [layer["name"] for layer in out["nets"][0]["layers"]] == ["data", "conv", "prob"]
    refused = run_in_process("net.prototxt", "--phase", "train", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1
    assert "unknown bottom blob 'label'" in refused.stderr and "--phase test" in refused.stderr


def test_a_python_layer_under_a_published_name_with_other_tops_is_read_as_the_repositorys_own(tmp_path):
    """py-faster-rcnn's roi_data_layer.layer.RoIDataLayer makes 3, 5 or 6 tops; a repository's own
    layer of that module and name with 4 (found tried as a new user would: a multi-task detector's)
    is its own code, read as any Python data layer's (its tops assumed, each said with its --input),
    not refused for py-faster-rcnn's num_classes."""
    (tmp_path / "net.prototxt").write_text(
        'layer { name: "input_data" type: "Python" top: "data" top: "im_info" top: "gt_a" top: "gt_b"\n'
        '  python_param { module: "roi_data_layer.layer" layer: "RoIDataLayer" param_str: "{}" } }\n'
        'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"\n'
        '  convolution_param { num_output: 2 kernel_size: 3 } }\n'
        'layer { name: "s" type: "Silence" bottom: "im_info" bottom: "gt_a" bottom: "gt_b" bottom: "conv" }\n')
    r = run_in_process("net.prototxt", "--format", "json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)["assumptions"]
    assert [a["override"] for a in said] == [f"--input {t}=1xCxHxW" for t in ("data", "im_info", "gt_a", "gt_b")]
    assert all("Python code, which protoaudit never runs" in a["assumption"] for a in said)


def test_a_train_only_layer_reading_a_misspelt_blob_is_still_the_files_fault(tmp_path):
    """The same file with a data layer whose label the TRAIN-only loss misspells: Caffe stops in the
    TRAIN phase, and the refusal points at the name, not at the TEST net."""
    (tmp_path / "net.prototxt").write_text(DEPLOY_WITH_TRAIN_LOSS.replace(
        'layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } } }',
        'layer { name: "data" type: "Input" top: "data" top: "lable"\n'
        '  input_param { shape { dim: 1 dim: 3 dim: 8 dim: 8 } shape { dim: 1 dim: 2 dim: 6 dim: 6 } } }'))
    r = run_in_process("net.prototxt", cwd=tmp_path)
    assert r.returncode == 2 and "did you mean 'lable'?" in r.stderr


@pytest.mark.parametrize("declared, says", [
    # tried as a new user would (tomstream/SSDA's SDA_train_phase.prototxt): two inputs of two input_dim each
    ('input: "data"\ninput_dim: 14950\ninput_dim: 100\ninput: "label"\ninput_dim: 14950\ninput_dim: 100\n',
     "2 net inputs ('data', 'label') need 8 input_dim values (4 each), and the file gives 4"),
    # two inputs, one input_shape: an internal error (IndexError) before
    ('input: "data"\ninput: "label"\ninput_shape { dim: 2 dim: 3 }\n',
     "2 net inputs ('data', 'label') need 2 input_shape (1 each), and the file gives 1"),
])
def test_net_inputs_with_too_few_dimensions_are_refused_where_caffe_reads_past_them(tmp_path, declared, says):
    # upgrade_proto.cc UpgradeNetInput reads input_dim(4i..4i+3) or input_shape(i) for each input i, with
    # no check (protobuf checks no index in a release build); Net::Init before the Input layer CHECKed
    # input_size() * 4 == input_dim_size() ("Incorrect input blob dimension specifications.")
    path = tmp_path / "net.prototxt"
    path.write_text('name: "n"\n' + declared + 'layer { name: "f" type: "Flatten" bottom: "data" top: "f" }\n')
    run = run_in_process(path)
    assert run.returncode == 2, run.stderr
    assert says in run.stderr and len(run.stderr.strip().splitlines()) == 1
