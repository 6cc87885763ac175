"""Tongcheng's memory-efficient DenseBlock: its shape rule, parameters, what it allocates, and what it
saves against the same DenseNet built from plain layers (`protoaudit diff`).

Expected values are derived by hand below from Tongcheng/caffe 1625bb3 (master, the fork
Tongcheng/DN_CaffeScript's README names): src/caffe/layers/DenseBlock_layer.cpp ("cpp:") and
DenseBlock_layer.cu ("cu:"), and, for the plain layers, BVLC Caffe's BatchNorm, Scale, Convolution,
Dropout, Concat and Split as the SPEC states their buffers.
"""
import json
import os

import pytest

from conftest import DATA, ROOT, run_in_process
from protoaudit import InputError, audit, build_nets
from protoaudit.layers.densenet import CUDNN_DROPOUT_STATES_BYTES
from protoaudit.read.schema import load_schema

MiB = 2**20
SAMPLE = os.path.join(ROOT, "samples", "densenet40_denseblock_train_test.prototxt")
PLAIN = os.path.join(DATA, "nets", "densenet40_plain_layers_train_test.prototxt")

HEAD = """name: "tiny"
layer { name: "data" type: "Input" top: "data" top: "label"
        input_param { shape { dim: 2 dim: 3 dim: 4 dim: 4 } shape { dim: 2 } } }
layer { name: "conv0" type: "Convolution" bottom: "data" top: "x0"
        convolution_param { num_output: 3 kernel_size: 1 bias_term: false } }
"""
TAIL = """layer { name: "pool" type: "Pooling" bottom: "block" top: "pool" pooling_param { pool: AVE global_pooling: true } }
layer { name: "fc" type: "InnerProduct" bottom: "pool" top: "fc" inner_product_param { num_output: 5 } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }
"""


def block_net(params=""):
    """N=2, C0=3, H=W=4; a DenseBlock of T=2 transitions of growth rate k=2 (C = 3 + 2*2 = 7)."""
    return HEAD + f"""layer {{ name: "block" type: "DenseBlock" bottom: "x0" top: "block"
        denseblock_param {{ numTransition: 2 initChannel: 3 growthRate: 2 {params} }} }}
""" + TAIL


def plain_net():
    """The same two transitions from BVLC layers: BatchNorm, Scale, ReLU, 3x3 Convolution, Concat."""
    text, x = HEAD, "x0"
    for i in range(2):
        p = f"t{i}"
        top = "block" if i == 1 else f"{p}_concat"
        text += f"""layer {{ name: "{p}_bn" type: "BatchNorm" bottom: "{x}" top: "{p}_bn"
        param {{ lr_mult: 0 }} param {{ lr_mult: 0 }} param {{ lr_mult: 0 }} }}
layer {{ name: "{p}_scale" type: "Scale" bottom: "{p}_bn" top: "{p}_bn" scale_param {{ bias_term: true }} }}
layer {{ name: "{p}_relu" type: "ReLU" bottom: "{p}_bn" top: "{p}_bn" }}
layer {{ name: "{p}_conv" type: "Convolution" bottom: "{p}_bn" top: "{p}_conv"
        convolution_param {{ num_output: 2 bias_term: false kernel_size: 3 pad: 1 }} }}
layer {{ name: "{p}_concat" type: "Concat" bottom: "{x}" bottom: "{p}_conv" top: "{top}" }}
"""
        x = top
    return text + TAIL


def write(tmp_path, text, name="net.prototxt"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def block_buffers(result, layer="block"):
    """{owner: bytes} of one layer's own buffers in a JSON report (tops and params left out)."""
    out = {}
    for net in result["nets"]:
        for row in net["layers"]:
            if row["name"] == layer:
                for b in row["buffers"]:
                    if b["kind"] in ("layer buffer", "workspace"):
                        out[b["owner"].split(".", 1)[1]] = b["bytes"]
    return out


def report(path, *args):
    run = run_in_process(path, "--format", "json", *args)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


# --- schema and shapes --------------------------------------------------------------------------

def test_schema_is_tongchengs():
    """Tongcheng/caffe caffe.proto: denseblock_param = 147 in LayerParameter; the defaults of
    DenseBlockParameter (numTransition 40, initChannel 16, growthRate 12, workspace_MB 8)."""
    s = load_schema("tongcheng")
    assert s.LayerParameter.DESCRIPTOR.fields_by_name["denseblock_param"].number == 147
    p = s.message("DenseBlockParameter")()
    assert (p.numTransition, p.initChannel, p.growthRate, p.workspace_MB) == (40, 16, 12, 8)
    assert not p.use_dropout and not p.use_BC and not p.BC_ultra_space_efficient


def test_top_is_the_input_plus_t_times_k_channels(tmp_path):
    """Reshape (cpp:213-220): top = (N, initChannel + numTransition * growthRate, H, W)."""
    (net,) = build_nets(write(tmp_path, block_net()))
    assert list(net.layer("block").top_shapes) == [(2, 3 + 2 * 2, 4, 4)]


def test_parameters_and_the_specs_the_layer_adds(tmp_path):
    """LayerSetUp (cpp:70-164): 5T+1 blobs without BC, c_i = 3 + 2i input channels: filters
    (k, c_i, 3, 3), then scale, shift, mean, variance (1, c_i, 1, 1) each, then one (1,) blob; the
    specs it adds (cpp:166-188): lr_mult and decay_mult 0 from blob 3T on, 1 before."""
    (net,) = build_nets(write(tmp_path, block_net()))
    params = net.layer("block").params
    assert [p.shape for p in params] == [(2, 3, 3, 3), (2, 5, 3, 3)] + [(1, 3, 1, 1), (1, 5, 1, 1)] * 4 + [(1,)]
    assert [p.lr_mult for p in params] == [1] * 6 + [0] * 5
    assert [p.decay_mult for p in params] == [1] * 6 + [0] * 5


def test_bc_parameters(tmp_path):
    """With use_BC (cpp:87-157): 10T+1 blobs; the 3x3 filter reads 4k channels (k, 4k, 3, 3), the
    1x1 filters at 5T+i are (4k, c_i, 1, 1), the second BN's four blobs (1, 4k, 1, 1); lr_mult 0
    for [3T, 5T) and from 8T on (cpp:189-208)."""
    (net,) = build_nets(write(tmp_path, block_net("use_BC: true")))
    params = net.layer("block").params
    T, k = 2, 2
    assert len(params) == 10 * T + 1
    assert [p.shape for p in params[:T]] == [(k, 4 * k, 3, 3)] * T
    assert [p.shape for p in params[5 * T:6 * T]] == [(4 * k, 3, 1, 1), (4 * k, 5, 1, 1)]
    assert [p.shape for p in params[6 * T:10 * T]] == [(1, 4 * k, 1, 1)] * (4 * T)
    assert [i for i, p in enumerate(params) if p.lr_mult == 0] == list(range(3 * T, 5 * T)) + list(range(8 * T, 10 * T + 1))


def test_param_specs_in_the_prototxt_are_refused(tmp_path):
    """cpp:168-170: CHECK_EQ(0, 1) << "Nope" when the prototxt gives any param { }."""
    text = block_net().replace('top: "block"\n', 'top: "block" param { lr_mult: 1 }\n', 1)
    with pytest.raises(InputError, match="DenseBlock sets its own param specs"):
        build_nets(write(tmp_path, text))


def test_init_channel_must_be_the_bottoms_channels(tmp_path):
    """The GPU forward copies initChannel channels per image out of the bottom (cu:514-521)."""
    with pytest.raises(InputError, match="initChannel is 4 but the bottom has 3 channels"):
        build_nets(write(tmp_path, block_net().replace("initChannel: 3", "initChannel: 4")))


# --- what it allocates ----------------------------------------------------------------------------

N, C0, T, K, HW = 2, 3, 2, 2, 16
C = C0 + T * K  # 7
BLOCK = N * C * HW  # 224 floats: the block's output size
INPUTS = sum(C0 + i * K for i in range(T))  # 3 + 5 = 8 channels entering the T BN layers


def test_gpu_buffers(tmp_path):
    """GPU_Initialization (cu:191-454), at the first forward: six buffers of the block's output size
    (cu:196-208), workspace and workspace2 of workspace_MB MiB (cu:217-220), the saved mean and
    inverse variance per transition, c_i floats each (cu:280-281), Mean_tmp and Var_tmp of C floats
    (cu:372-373)."""
    buffers = block_buffers(report(write(tmp_path, block_net())))
    assert buffers == {
        **{name: BLOCK * 4 for name in ("postConv_data_gpu", "postBN_data_gpu", "postReLU_data_gpu",
                                        "postConv_grad_gpu", "postBN_grad_gpu", "postReLU_grad_gpu")},
        "workspace": 8 * MiB, "workspace2": 8 * MiB,
        "ResultSaveMean_gpu": INPUTS * 4, "ResultSaveInvVariance_gpu": INPUTS * 4,
        "Mean_tmp": C * 4, "Var_tmp": C * 4,
    }


def test_gpu_buffers_with_dropout_and_bc(tmp_path):
    """use_dropout adds postDropout data and grad (cu:198-206) and, per transition, a cuDNN dropout
    state and reserve space (cu:318-335; sizes are cuDNN's: protoaudit's estimates); use_BC adds five
    N*4k*H*W buffers (cu:249-253), the 1x1 output once per transition unless ultra space efficient
    (cu:338-342; cu:259-261), and 4 x 4k statistics per transition (cu:344-362). workspace_MB sets
    both workspaces (cu:55)."""
    quad = N * 4 * K * HW
    params = "use_dropout: true dropout_amount: 0.2 use_BC: true workspace_MB: 2"
    buffers = block_buffers(report(write(tmp_path, block_net(params))))
    assert buffers["postDropout_data_gpu"] == buffers["postDropout_grad_gpu"] == BLOCK * 4
    assert buffers["dropout_state_gpu"] == T * CUDNN_DROPOUT_STATES_BYTES
    assert buffers["dropout_reserve_gpu"] == T * N * K * HW
    assert buffers["workspace"] == buffers["workspace2"] == 2 * MiB
    for name in ("postBN_4G", "postBN_4G_grad", "postReLU_4G", "postReLU_4G_grad", "postConv_4G_grad"):
        assert buffers[name] == quad * 4
    assert buffers["postConv_4GVec"] == T * quad * 4 and "postConv_4G" not in buffers
    assert buffers["BC_MeanInfVec"] == buffers["ResultSaveInvVariance_BC"] == T * 4 * K * 4
    ultra = block_buffers(report(write(tmp_path, block_net(params + " BC_ultra_space_efficient: true"))))
    assert ultra["postConv_4G"] == quad * 4 and "postConv_4GVec" not in ultra


def test_a_test_net_allocates_the_same_buffers(tmp_path):
    """GPU_Initialization never looks at the phase: a forward-only run holds the gradient buffers too."""
    path = write(tmp_path, block_net())
    assert block_buffers(report(path, "--inference")) == block_buffers(report(path))


def test_cpu_buffers_keep_every_transition(tmp_path):
    """CPU mode runs the naive reference (cpp:717-987) over Blobs made by CPU_Initialization
    (cpp:717-770), each touched as it goes, TRAIN: per transition the merged input (c_i channels),
    BN x-hat, BN output and ReLU output (N*c_i*H*W each), the k-channel convolution output, the batch
    mean and variance (c_i), plus the merged output (C channels); every one of them gets a diff in
    Backward_cpu (cpp:942-984)."""
    buffers = block_buffers(report(write(tmp_path, block_net()), "--mode", "cpu"))
    spatial = N * HW
    merged = spatial * (INPUTS + C)
    expected = {"merged_conv": merged, "BN_XhatVec": spatial * INPUTS, "postBN_blobVec": spatial * INPUTS,
                "postReLU_blobVec": spatial * INPUTS, "postConv_blobVec": spatial * T * K,
                "batch_Mean": INPUTS, "batch_Var": INPUTS}
    assert buffers == {**{k: 4 * v for k, v in expected.items()}, **{k + ".diff": 4 * v for k, v in expected.items()}}


def test_cpu_test_forward_leaks_its_inference_statistics(tmp_path):
    """BN_inf_Fwd (cpp:548-574) makes localInf_Mean and localInf_Var, c_i floats each, on every call
    and never frees them: 2 * (3 + 5) floats per test forward; no x-hat, no batch statistics."""
    buffers = block_buffers(report(write(tmp_path, block_net()), "--mode", "cpu", "--inference"))
    assert buffers["BN_inf_Fwd localInf_Mean/Var"] == 2 * INPUTS * 4
    assert "BN_XhatVec" not in buffers and "merged_conv.diff" not in buffers


def test_int_sized_buffers_past_2_gib_are_refused(tmp_path):
    """cu:196 computes the buffers' byte size into an int: 64x203x224x224 floats, 2.6 GB, overflow it
    (each blob stays under Caffe's 2**31 elements)."""
    text = block_net().replace("dim: 2 dim: 3 dim: 4 dim: 4", "dim: 64 dim: 3 dim: 224 dim: 224")
    text = text.replace("shape { dim: 2 }", "shape { dim: 64 }")
    text = text.replace("numTransition: 2", "numTransition: 100")
    with pytest.raises(InputError, match="sizes them in an int"):
        audit(write(tmp_path, text))
    audit(write(tmp_path, text), mode="cpu")  # the CPU code keeps Blobs


# --- what it saves ----------------------------------------------------------------------------------

def test_diff_against_plain_layers_tiny(tmp_path):
    """B (the DenseBlock) against A (its plain layers), everything else equal, GPU, Caffe engine, SGD.

    Only A has (floats): the Split of x0 (2 diffs of N*3*HW = 96): 192. Transition 0 (c = 3):
    BatchNorm params 3+3+1 times 3 (data, diff, history) 21, top data and diff 192, buffers
    spatial_sum_multiplier_ 16 + batch_sum_multiplier_ 2 + mean_ 3 + variance_ 3 + num_by_chans_ 6 +
    temp_ 96 + x_norm_ 96 = 222; Scale params 6 x 3 = 18, buffers sum_multiplier_ 16 +
    bias_multiplier_ 16 + temp_ (in place) 96 + sum_result_ 6 = 134; Convolution params 2*3*9 x 3 =
    162, top 64 + 64, im2col 3*9*16 = 432; Concat top 160 + 160: 1629. The Split of its output (2
    diffs of 160): 320. Transition 1 (c = 5): 33 + 320 + 358 + 30 + 202 + 270 + 128 + 720 = 2061.
    The last Concat's top is the block's top in B too. A: 4202 floats = 16,808 bytes.

    Only B has: the block's params, 177 floats x 3 = 531; six buffers of 224, 2 x 8 saved
    statistics, 2 x 7 temporaries: 1374 floats; two 8 MiB workspaces. B: 7,620 + 16,777,216 bytes.
    """
    a, b = write(tmp_path, plain_net(), "a.prototxt"), write(tmp_path, block_net(), "b.prototxt")
    only_a, only_b = 4202 * 4, (531 + 1374) * 4 + 16 * MiB
    run = run_in_process("diff", a, b, "--format", "json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["b"]["total_bytes"] - result["a"]["total_bytes"] == only_b - only_a == 16_768_028
    text = run_in_process("diff", a, b).stdout
    assert ("The 12 layers only A has (2 BatchNorm, 2 Concat, 2 Convolution, 2 ReLU, 2 Scale, 2 Split) hold "
            "16.9 KiB; the 1 only B has (1 DenseBlock) hold 16 MiB.") in text


def _plain_block(n, c0, t, k, s, dropout, train):
    """Bytes A's plain layers hold for one dense block, beyond what B holds too (the block's input and
    output blobs). Per transition (c = c0 + i*k): BatchNorm (3 params; top; spatial_sum_multiplier_ s,
    batch_sum_multiplier_ n, mean_ and variance_ c, num_by_chans_ n*c, temp_ and x_norm_ n*c*s),
    Scale in place (2c params; sum_multiplier_ max(n, s), bias_multiplier_ s, temp_ n*c*s, and in
    training sum_result_ n*c), Convolution (k*c*9 params; top; im2col c*9*s), Dropout (top; uint32
    rand_vec_ in training), Concat (top, but for the last, whose top is the block's) and the Split of
    each Concat's top but the last's, and of the block's input (a diff per Split top in training).
    Training keeps data, diff and SGD history of params, data and diff of tops; a test net forward
    only, on the train net's params."""
    floats = 2 * n * c0 * s if train else 0
    sides = 2 if train else 1
    for i in range(t):
        c = c0 + i * k
        params = (2 * c + 1) + 2 * c + k * c * 9
        floats += 3 * params if train else 0
        floats += sides * n * c * s + s + n + 2 * c + n * c + 2 * n * c * s  # BatchNorm
        floats += max(n, s) + s + n * c * s + (n * c if train else 0)  # Scale
        floats += sides * n * k * s + c * 9 * s  # Convolution
        if dropout:
            floats += sides * n * k * s + (n * k * s if train else 0)  # Dropout
        if i < t - 1:
            floats += sides * n * (c + k) * s + (2 * n * (c + k) * s if train else 0)  # Concat, Split
    return floats * 4


def _dense_block(n, c0, t, k, s, dropout, train):
    """Bytes only B holds for one DenseBlock layer (cu:191-454, cpp:70-164): in training its params
    (data, diff, SGD history); in either net 6 (8 with dropout) buffers of n*C*s floats, the saved
    statistics (2 * sum of c_i), Mean_tmp and Var_tmp (2 * C), two 8 MiB workspaces, and with
    dropout one state (protoaudit's estimate) and n*k*s reserve bytes per transition."""
    channels = [c0 + i * k for i in range(t)]
    total = c0 + t * k
    params = sum(k * c * 9 + 4 * c for c in channels) + 1
    floats = (3 * params if train else 0) + (8 if dropout else 6) * n * total * s + 2 * sum(channels) + 2 * total
    extra = 2 * 8 * MiB + ((t * CUDNN_DROPOUT_STATES_BYTES + t * n * k * s) if dropout else 0)
    return floats * 4 + extra


def test_diff_against_plain_layers_densenet40():
    """The sample's DenseNet-40 (k = 12, 12 transitions per block, dropout 0.2) against the same net
    from plain layers (tests/data/nets/densenet40_plain_layers_train_test.prototxt): train net at
    batch 64, test net at 50; blocks of c0 = 16, 160, 304 input channels on 32x32, 16x16, 8x8. The
    rest of both nets is the same layers: the saving is the blocks' difference, derived above."""
    blocks = [(16, 32 * 32), (160, 16 * 16), (304, 8 * 8)]
    saving = sum(_plain_block(n, c0, 12, 12, s, 0.2, train) - _dense_block(n, c0, 12, 12, s, 0.2, train)
                 for c0, s in blocks for n, train in ((64, True), (50, False)))
    run = run_in_process("diff", PLAIN, SAMPLE, "--format", "json", timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["a"]["total_bytes"] - result["b"]["total_bytes"] == saving
    assert saving > 5 * 2**30  # 7.94 GiB against 2.54 GiB
    text = run_in_process("diff", PLAIN, SAMPLE, timeout=300).stdout
    assert ("The 504 layers only A has (72 BatchNorm, 72 Concat, 72 Convolution, 72 Dropout, 72 ReLU, 72 Scale, "
            "72 Split) hold") in text
    assert ("DenseBlock1: layer buffer DenseBlock1.postConv_data_gpu, 40 MiB (64x160x32x32: the block's output "
            "size, shared by its 12 transitions; grows with the batch), is new in B.") in text



def test_nesterov_on_the_cpu_keeps_no_update_blobs(tmp_path):
    """Tongcheng/caffe's nesterov_solver.cpp (lines 22-45) writes the step into the param's diff
    where BVLC's copies the old history into update_ first: one blob per param, history_ only."""
    def solver_blobs(text):
        result = audit(write(tmp_path, text), mode="cpu", solver_type="Nesterov")
        return {b.owner.rsplit(".", 1)[1].split("[")[0] for b in result.buffers if b.kind == "history" and "[" in b.owner}

    assert solver_blobs(block_net()) == {"history_"}
    assert solver_blobs(plain_net()) == {"history_", "update_"}  # BVLC's
