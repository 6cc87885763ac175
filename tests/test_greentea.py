"""naibaf7's OpenCL Caffe (naibaf7/caffe at 2996015, Greentea): its schema, its layers held against its
source, and the connectomics nets of naibaf7/PyGreentea and naibaf7/caffe_neural_models.

Expected values are derived by hand below from that commit's src/caffe/layers/*.cpp/.cu,
include/caffe/layers/*.hpp and src/caffe/test/test_mergecrop_layer.cpp, cited by file and line.
The nets are in tests/data/greentea (tests/data/SOURCES.md).
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_protoaudit, tops
from protoaudit.audit import build_nets
from protoaudit.errors import InputError
from protoaudit.memory.buffers import net_buffers
from protoaudit.read.load import load

HERE = os.path.join(DATA, "greentea")
NETS = ["pygreentea_3d_u_malis_euclid.prototxt", "dataset_08_net_train.prototxt",
        "dataset_08_net_train_malis.prototxt", "net_sk_2out_neuraltissue_net.prototxt",
        "net_u_2out_neuraltissue_net.prototxt"]
F = 4  # bytes per float; int_tp is 4 bytes too (USE_INDEX_64 off, CMakeLists.txt:55)


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "greentea.proto")).read()
    assert text.startswith("// naibaf7/caffe (Greentea: the OpenCL Caffe that became BVLC's opencl branch), "
                           "src/caffe/proto/caffe.proto at commit 29960153c828820b1abb55a5792283742f57caa2,\n")
    assert "repeated uint64 dilation = 13; // The kernel stride, default 1" in text  # PoolingParameter
    assert "message MergeCropParameter {" in text and "message AffinityParameter {" in text


@pytest.mark.parametrize("name", NETS)
def test_its_nets_are_read_with_its_schema_and_audit_with_no_flags(name):
    """Each was refused: PoolingParameter's dilation and MergeCrop are the fork's alone."""
    path = os.path.join(HERE, name)
    assert load(path).schema.name == "greentea"
    run = run_protoaudit(path, timeout=120)
    assert run.returncode in (0, 1), run.stderr
    assert "naibaf7's OpenCL Caffe" in run.stdout


def test_a_bvlc_net_keeps_bvlcs_schema(tmp_path):
    plain = tmp_path / "plain.prototxt"
    plain.write_text((IN % "dim: 1 dim: 3 dim: 8 dim: 8") + 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" '
                     'pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n')
    assert load(str(plain)).schema.name == "bvlc"


IN = 'layer { name: "in" type: "Input" top: "data" input_param { shape { %s } } }\n'


def net(tmp_path, dims, body):
    shape = " ".join(f"dim: {d}" for d in dims)
    return build_text(tmp_path, (IN % shape) + body, schema="greentea")


def test_pooling_dilates_its_kernel_on_each_axis(tmp_path):
    """pooling_layer.cpp:195-199: extended kernel (k - 1) x dilation + 1, pooled size
    ceil((size + 2 pad - extended) / stride) + 1; a padded axis drops a window starting in its
    padding (cpp:200-209), each axis by its own pad."""
    n = net(tmp_path, (1, 2, 10, 11, 12), 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param '
            '{ pool: MAX kernel_size: 3 stride: 2 dilation: 2 pad: 0 pad: 1 pad: 0 } }\n')
    # extended 5 on every axis; axis Z: ceil((10 - 5) / 2) + 1 = 3 + 1 = 4
    # axis Y: ceil((11 + 2 - 5) / 2) + 1 = 4 + 1 = 5; (5 - 1) x 2 = 8 < 11 + 1: kept
    # axis X: ceil((12 - 5) / 2) + 1 = 4 + 1 = 5
    assert tops(n, "p") == [(1, 2, 4, 5, 5)]
    # max_idx_: an int_tp per top element (cpp:218-221), 2 x 4 x 5 x 5 = 200
    assert layer_buffers(n, "p") == {("max_idx_", "device"): 200 * 4}


def test_the_sk_nets_pooling_as_its_file_gives_it():
    """net_sk_2out: a 229 image, conv1 kernel 7 -> 223; pool1 kernel 2, stride 1 -> 222; conv2 kernel 5
    dilation 2 (extended 9) -> 214; pool2 kernel 2 dilation 2 (extended 3) -> 212."""
    train = build_nets(os.path.join(HERE, NETS[3]))[0]
    assert tops(train, "pool1") == [(1, 48, 222, 222)]
    assert tops(train, "conv2") == [(1, 128, 214, 214)]
    assert tops(train, "pool2") == [(1, 128, 212, 212)]


def test_dilation_given_neither_once_nor_per_axis_is_refused(tmp_path):
    with pytest.raises(InputError, match="dilation must be specified once, or once per spatial dimension"):
        net(tmp_path, (1, 2, 10, 11, 12), 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param '
            '{ kernel_size: 2 dilation: 1 dilation: 2 } }\n')  # cpp:141-146


MERGE = ('layer { name: "b" type: "Input" top: "b" input_param { shape { %s } } }\n'
         'layer { name: "m" type: "MergeCrop" bottom: "data" bottom: "b" top: "m" %s }\n')


def test_mergecrop_stacks_the_channels_at_bottom_0s_size(tmp_path):
    """The fork's own test (test_mergecrop_layer.cpp:31-46, 104-115): a (1, 3, 3, 2, 6) and b
    (1, 3, 5, 4, 8): the top has a's num and spatial axes and 3 + 3 channels (STACK), 3 (ADD)."""
    n = net(tmp_path, (1, 3, 3, 2, 6), MERGE % ("dim: 1 dim: 3 dim: 5 dim: 4 dim: 8", ""))
    assert tops(n, "m") == [(1, 6, 3, 2, 6)]
    # shape_a_ and shape_b_: 5 - 2 = 3 int_tp each (mergecrop_layer.cpp:61-62), read on the device
    # (mergecrop_layer.cu:228-229)
    assert layer_buffers(n, "m") == {("shape_a_", "device"): 3 * 4, ("shape_b_", "device"): 3 * 4}
    add = net(tmp_path, (1, 3, 3, 2, 6), MERGE % ("dim: 1 dim: 3 dim: 5 dim: 4 dim: 8",
                                                  "mergecrop_param { operation: ADD }"))
    assert tops(add, "m") == [(1, 3, 3, 2, 6)]


def test_mergecrop_checks_are_caffes(tmp_path):
    with pytest.raises(InputError, match="batch sizes differ"):  # CHECK_EQ, cpp:43
        net(tmp_path, (1, 3, 4, 4), MERGE % ("dim: 2 dim: 3 dim: 6 dim: 6", ""))
    with pytest.raises(InputError, match="same channels"):  # CHECK_EQ, cpp:51
        net(tmp_path, (1, 3, 4, 4), MERGE % ("dim: 1 dim: 2 dim: 6 dim: 6", "mergecrop_param { operation: ADD }"))


def test_mergecrop_has_no_cpu_code(tmp_path):
    """mergecrop_layer.cpp:78-82: Forward_cpu is LOG(FATAL)."""
    n = net(tmp_path, (1, 3, 4, 4), MERGE % ("dim: 1 dim: 2 dim: 6 dim: 6", ""))
    with pytest.raises(InputError, match="MergeCrop has no CPU code"):
        net_buffers(n, mode="cpu")


MALIS = ('layer { name: "aff" type: "Input" top: "aff" top: "seg" input_param { shape { dim: 1 dim: 3 dim: 4 '
         'dim: 5 dim: 6 } shape { dim: 1 dim: 1 dim: 4 dim: 5 dim: 6 } } }\n'
         'layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 3 '
         'kernel_size: 1 } }\n'
         'layer { name: "l" type: "MalisLoss" bottom: "c" bottom: "aff" bottom: "seg" top: "loss" }\n')


def test_malis_loss_keeps_four_host_buffers_of_its_prediction(tmp_path):
    """malis_loss_layer.cpp:329-332: affinity_pos_, affinity_neg_, dloss_pos_, dloss_neg_ take
    bottom 0's shape, 1 x 3 x 4 x 5 x 6 = 360 floats each, written on the host (cpp:368-419)."""
    n = net(tmp_path, (1, 2, 4, 5, 6), MALIS)
    assert tops(n, "l") == [(1,)]  # loss_layer.cpp:24-25: a one-element top
    assert layer_buffers(n, "l") == {(name, "host"): 360 * F
                                     for name in ("affinity_pos_", "affinity_neg_", "dloss_pos_", "dloss_neg_")}


AFFINITY = ('layer { name: "a" type: "Affinity" bottom: "data" top: "a" }\n'
            'layer { name: "cc" type: "ConnectedComponent" bottom: "data" top: "cc" }\n')


def test_affinity_and_connected_component_shapes(tmp_path):
    """affinity_layer.cpp:38-48: a (1, 2, H, W) top and min_index_ whatever the batch: for (2, 2, 8, 9),
    1 x 2 x 8 x 9 = 144 floats on the host. connected_component_layer.cpp:52: the top is the bottom's."""
    n = net(tmp_path, (2, 2, 8, 9), AFFINITY)
    assert tops(n, "a") == [(1, 2, 8, 9)] and tops(n, "cc") == [(2, 2, 8, 9)]
    assert layer_buffers(n, "a") == {("min_index_[0]", "host"): 144 * F}
    assert layer_buffers(n, "cc") == {}


CONV = ('layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 4 '
        'kernel_size: 3 } }\n')


def test_libdnn_convolution_keeps_no_im2col_buffer_on_a_gpu(tmp_path):
    """libdnn_conv_layer.cpp:23 (use_colbuffer_ false): no col_buffer_; bias_multiplier_ (the top's
    6 x 6 = 36 spatial ones) is written on the host (base_conv_layer.cpp:296-305). In CPU mode it is
    Caffe's ConvolutionLayer: the im2col buffer of one image, 2 x 3 x 3 x 6 x 6 = 648 floats."""
    n = net(tmp_path, (1, 2, 8, 8), CONV)
    assert layer_buffers(n, "c") == {("bias_multiplier_", "host"): 36 * F}
    cpu = layer_buffers(n, "c", mode="cpu")
    assert cpu[("col_buffer_", "host")] == 648 * F


def test_memory_data_takes_n_d_dims(tmp_path):
    """memory_data_layer.cpp:17-47: `dim` gives the shape; the label is (batch, 1, ..., 1) of its rank."""
    n = build_text(tmp_path, 'layer { name: "d" type: "MemoryData" top: "d" top: "l" memory_data_param { dim: 2 '
                   'dim: 3 dim: 4 dim: 5 dim: 6 } }\n', schema="greentea")
    assert tops(n, "d") == [(2, 3, 4, 5, 6), (2, 1, 1, 1, 1)]


def test_the_forks_own_dilated_pooling_test(tmp_path):
    """test_pooling_ndsk_layer.cpp:27-33, 168-184 (TestSetup): a 1x1x5x5x5 bottom, kernel 3 and
    dilation 2 on each of the 3 axes, gives a top of 1 on each: extended (3 - 1) x 2 + 1 = 5,
    ceil((5 - 5) / 1) + 1 = 1."""
    n = net(tmp_path, (1, 1, 5, 5, 5), 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param '
            '{ pool: MAX kernel_size: 3 kernel_size: 3 kernel_size: 3 dilation: 2 dilation: 2 dilation: 2 } }\n')
    assert tops(n, "p") == [(1, 1, 1, 1, 1)]


def test_euclidean_loss_takes_a_scale_as_third_bottom(tmp_path):
    """euclidean_loss_layer.hpp:57-59: 2 or 3 bottoms; the scale is read in forward (cpp:26-29) and
    never given a diff (backward loops over bottoms 0 and 1, cpp:40-51). diff_ is bottom 0's shape:
    1 x 3 x 4 x 4 x 4 = 192 floats."""
    n = net(tmp_path, (1, 3, 4, 4, 4), 'layer { name: "s" type: "Input" top: "t" top: "s" input_param { shape { '
            'dim: 1 dim: 3 dim: 4 dim: 4 dim: 4 } } }\n'
            'layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 3 '
            'kernel_size: 1 } }\n'
            'layer { name: "r" type: "ReLU" bottom: "c" top: "c" }\n'
            'layer { name: "l" type: "EuclideanLoss" bottom: "c" bottom: "t" bottom: "s" top: "l" }\n')
    assert tops(n, "l") == [()]
    assert layer_buffers(n, "l") == {("diff_", "device"): 192 * F}
    # the fork's cuDNN ReLU takes the 5-axis blob (cudnn_relu_layer.cpp:26-29): no stop in a cuDNN build
    assert net_buffers(n, mode="gpu", engine="cudnn")


def test_each_axis_is_clipped_by_its_own_pad(tmp_path):
    """pooling_layer.cpp:200-209 tests `pad_data[i] > 0` per axis (BVLC clips both axes when either is
    padded). A 5x5 bottom, kernel (2, 1), stride 3, pad (1, 0):
    Y: ceil((5 + 2 - 2) / 3) + 1 = 2 + 1 = 3, and (3 - 1) x 3 = 6 >= 5 + 1, so 2;
    X: ceil((5 - 1) / 3) + 1 = 2 + 1 = 3, unpadded, kept (BVLC's rule would make it 2)."""
    n = net(tmp_path, (1, 1, 5, 5), 'layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param '
            '{ pool: AVE kernel_size: 2 kernel_size: 1 stride: 3 pad: 1 pad: 0 } }\n')
    assert tops(n, "p") == [(1, 1, 2, 3)]
