"""Generalized pooling's Caffe (chl260/general-pooling, c65d6a2): its schema, its four pooling layers and
its one-batch data layer held against its source, and its AlexNet example (tests/data/SOURCES.md).

Expected values are derived by hand below from that commit's src/caffe/layers/treepool_kernel_1layer,
treepool_kernel_2layer, treepool_max_ave and treepool_max_ave_efficient .cpp/.cu, base_data_layer.cpp/.cu
and include/caffe/{vision,data}_layers.hpp, cited by file and line.
"""
import os

import pytest

from conftest import DATA, ROOT, build_text, layer_buffers, run_in_process, tops
from protoaudit import build_nets
from protoaudit.errors import InputError
from protoaudit.read.load import load

HERE = os.path.join(DATA, "forks", "general_pooling")
NET = os.path.join(HERE, "train_val.prototxt")
SOLVER = os.path.join(HERE, "solver.prototxt")
F = 4  # bytes per float



def pool_net(kind, shape=(2, 3, 7, 7), conv="kernel_size: 2 stride: 2"):
    dims = " ".join(f"dim: {d}" for d in shape)
    return (f'input: "data" input_shape {{ {dims} }}\n'
            f'layer {{ name: "p" type: "{kind}" bottom: "data" top: "p" convolution_param {{ {conv} }} }}\n'
            'layer { name: "c" type: "Convolution" bottom: "p" top: "c" loss_weight: 1 '
            'convolution_param { num_output: 2 kernel_size: 1 } }\n')  # a loss, so that Caffe runs backward


def test_the_proto_is_the_forks_file_verbatim():
    text = open(os.path.join(ROOT, "proto", "forks", "general_pooling.proto")).read()
    assert text.startswith("// chl260/general-pooling (generalized pooling's Caffe: Lee, Gallagher and Tu, AISTATS "
                           "2016), src/caffe/proto/caffe.proto at commit c65d6a2dec1e39da0b451e2928ea1fc2630f8070,\n")
    assert "  optional uint32 kernel_size = 4; // The kernel size (square)\n" in text  # March 2015: one value
    assert "  optional uint32 stride = 6 [default = 1]; // The stride (equal in Y, X)\n" in text
    assert "iter_size" not in text


def test_its_net_is_read_with_its_schema():
    assert load(NET).schema.name == "general_pooling"
    assert build_nets(SOLVER)[0].schema == "general_pooling"


def test_the_alexnet_example_audits_with_no_flags():
    """Batch 256 of 227 x 227 crops. conv1 (11, stride 4): (227 - 11) / 4 + 1 = 55; TreepoolKernel1L (3,
    stride 2): ceil((55 - 3) / 2) + 1 = 27; conv2 (5, pad 2) keeps 27; TreepoolMaxAve: 13; conv3-5 keep 13;
    TreepoolMaxAve: 6, so fc6 reads 256 x 6 x 6 as AlexNet's does. The parameters are AlexNet's 60,965,224
    and the poolings' 3 x 3 filters: three for Kernel1L (cpp:40-49), one for each MaxAve (cpp:40-46)."""
    r = run_in_process(NET)
    assert r.returncode == 0, r.stderr
    assert "Read with the caffe.proto of generalized pooling's Caffe" in r.stdout
    assert "Params: 60,965,269 " in r.stdout
    net = build_nets(NET)[0]
    assert tops(net, "TreepoolKernel1L_1") == [(256, 96, 27, 27)]
    assert tops(net, "TreepoolMaxAve_2") == [(256, 256, 13, 13)]
    assert tops(net, "TreepoolMaxAve_3") == [(256, 256, 6, 6)]
    assert run_in_process(SOLVER).returncode == 0


def test_the_pooled_size_is_a_ceiling_without_padding(tmp_path):
    """POOLED_HEIGHT_ = ceil((H - K) / S) + 1 (cpp:28-29): 7 x 7 by 2, stride 2: ceil(5 / 2) + 1 = 4
    (a floor would give 3); by 3, stride 3: ceil(4 / 3) + 1 = 3. The stride defaults to 1: 7 - 3 + 1 = 5."""
    for kind in ("TreepoolKernel1L", "TreepoolKernel2L", "TreepoolMaxAve", "GatedMaxAve"):
        assert tops(build_text(tmp_path, pool_net(kind)), "p") == [(2, 3, 4, 4)]
    assert tops(build_text(tmp_path, pool_net("TreepoolMaxAve", conv="kernel_size: 3 stride: 3")), "p") == [(2, 3, 3, 3)]
    assert tops(build_text(tmp_path, pool_net("TreepoolMaxAve", conv="kernel_size: 3")), "p") == [(2, 3, 5, 5)]
    with pytest.raises(InputError, match="reads convolution_param's kernel_size"):
        build_text(tmp_path, pool_net("TreepoolMaxAve", conv="stride: 2"))


def test_the_parameters_are_kernel_sized_filters(tmp_path):
    """Kernel1L: v1, v2, weight1; Kernel2L: v1-v4, weight1-3; MaxAve and GatedMaxAve: weight1; each
    (1, 1, K, K) (cpp LayerSetUp)."""
    for kind, blobs in (("TreepoolKernel1L", 3), ("TreepoolKernel2L", 7), ("TreepoolMaxAve", 1), ("GatedMaxAve", 1)):
        node = build_text(tmp_path, pool_net(kind)).layer("p")
        assert [p.shape for p in node.params] == [(1, 1, 2, 2)] * blobs


def test_what_tree_pooling_allocates_on_the_gpu():
    """TreepoolKernel1L_1 of the example: bottom norm1 256 x 96 x 55 x 55 = 74,342,400 floats, top
    256 x 96 x 27 x 27 = 17,915,904. The GPU forward writes four Blobs of the top's shape (split_buffer1_/2_,
    resp_buffer1_/2_: cu:93-96, Reshaped in cpp:73-80); the backward mat_buffer_ (the top's shape),
    col_buffer_ (1, 1, K*K, top count) and bottom_diff_buffer_ (1, 1, bottom count, K*K) (cpp:78-79,
    cu:202-204), and reads bias_multiplier2_'s device copy (cu:262), K*K = 9 ones set on the host at
    setup (cpp:60-64)."""
    net = build_nets(NET)[0]
    top, bottom = 256 * 96 * 27 * 27, 256 * 96 * 55 * 55
    got = layer_buffers(net, "TreepoolKernel1L_1")
    for name in ("split_buffer1_", "split_buffer2_", "resp_buffer1_", "resp_buffer2_", "mat_buffer_"):
        assert got[(name, "device")] == top * F
    assert got[("col_buffer_", "device")] == 9 * top * F
    assert got[("bottom_diff_buffer_", "device")] == 9 * bottom * F == 2_676_326_400
    assert got[("bias_multiplier2_", "device")] == got[("bias_multiplier2_ (host)", "host")] == 9 * F
    # TreepoolMaxAve_2: bottom norm2 256 x 256 x 27 x 27, top 256 x 256 x 13 x 13; six forward Blobs
    # (cu:128-133), col_buffer_ and bottom_diff_buffer_ in the backward
    top, bottom = 256 * 256 * 13 * 13, 256 * 256 * 27 * 27
    got = layer_buffers(net, "TreepoolMaxAve_2")
    for name in ("split_buffer1_", "split_buffer2_", "top_buffer1_", "top_buffer2_", "mat_buffer_", "poolsize_buffer_"):
        assert got[(name, "device")] == top * F
    assert got[("col_buffer_", "device")] == 9 * top * F
    assert got[("bottom_diff_buffer_", "device")] == 9 * bottom * F


def test_kernel2l_and_gated_max_ave(tmp_path):
    """2 x 3 x 7 x 7 by 2, stride 2: top 2 x 3 x 4 x 4 = 96 floats, bottom 294. Kernel2L's forward writes
    ten Blobs of the top's shape (cu:108-117), its backward mat_buffer1_/2_, col_buffer_ 4 x 96 and
    bottom_diff_buffer_ 294 x 4. GatedMaxAve keeps bias_multiplier1_, the top's count of ones, on the host
    from setup (cpp:42-47) and on the device for its backward, with weight1_diff_buffer_ 4 x 96 (cpp:78,
    cu:201-225); its other buffers are commented out (cpp:70-77)."""
    got = layer_buffers(build_text(tmp_path, pool_net("TreepoolKernel2L")), "p")
    names = ["split_buffer1_", "split_buffer2_", "split_buffer3_", "split_buffer1c_", "split_buffer2c_",
             "split_buffer3c_", "resp_buffer1_", "resp_buffer2_", "resp_buffer3_", "resp_buffer4_", "mat_buffer1_",
             "mat_buffer2_"]
    assert {n: got[(n, "device")] for n in names} == {n: 96 * F for n in names}
    assert got[("col_buffer_", "device")] == 4 * 96 * F and got[("bottom_diff_buffer_", "device")] == 294 * 4 * F
    got = layer_buffers(build_text(tmp_path, pool_net("GatedMaxAve")), "p")
    assert got[("bias_multiplier1_ (host)", "host")] == got[("bias_multiplier1_", "device")] == 96 * F
    assert got[("weight1_diff_buffer_", "device")] == 4 * 96 * F
    assert not any(name.startswith(("split", "col_buffer", "bottom_diff_buffer", "bias_multiplier2")) for name, _ in got)


def test_on_the_cpu_the_layers_compute_nothing(tmp_path):
    """Forward_cpu and Backward_cpu only log "Enter CPU code ...." (cpp:84-94): in CPU mode a layer
    holds its filters and its host multiplier, no buffer of the batch's size."""
    got = layer_buffers(build_text(tmp_path, pool_net("TreepoolKernel1L")), "p", mode="cpu")
    assert set(got) == {("bias_multiplier2_ (host)", "host")}


def test_the_data_layer_holds_one_batch_on_the_host():
    """The train Data layer, batch 256 of 3 x 227 x 227: prefetch_data_ and prefetch_label_, the tops'
    sizes, on the host from setup (base_data_layer.cpp:38-41); the GPU forward copies them into the
    tops' own device memory (base_data_layer.cu:8-26), so the device holds no batch of the layer's."""
    got = layer_buffers(build_nets(NET)[0], "data")
    assert got[("prefetch_data_", "host")] == 256 * 3 * 227 * 227 * F
    assert got[("prefetch_label_", "host")] == 256 * F
    assert not any(device == "device" for _, device in got)
