"""Each Keras layer's shape rule and variables, against Keras's own docstring examples (the `>>>` lines
of keras-team/keras `keras/src/layers/...` and tf_keras's) or a derivation written out here."""
import math

import pytest

from protoaudit.errors import InputError
from protoaudit.keras.layers import Spec, make_layer


def layer(class_name, flavour="tf_keras", **config):
    return make_layer({"class_name": class_name, "config": {"name": "x", **config}}, flavour=flavour, path="m/x")


def out(lay, *shapes):
    """The output shapes of a layer called on float32 inputs of these shapes."""
    return [s.shape for s in lay.output_specs([Spec(tuple(s), "float32") for s in shapes])]


def weights(lay, *shapes):
    return {w.name: w.shape for w in lay.weights([Spec(tuple(s), "float32") for s in shapes])}


def params(lay, *shapes):
    return sum(math.prod(s) for s in weights(lay, *shapes).values())


# -- core -------------------------------------------------------------------------------------------
def test_dense_acts_on_the_last_axis():
    # Dense's docstring: (batch_size, d0, d1) -> (batch_size, d0, units); kernel (d1, units)
    d = layer("Dense", units=16)
    assert out(d, (4, 10, 8)) == [(4, 10, 16)]
    assert weights(d, (4, 10, 8)) == {"kernel": (8, 16), "bias": (16,)}
    assert weights(layer("Dense", units=16, use_bias=False), (4, 8)) == {"kernel": (8, 16)}


@pytest.mark.parametrize("equation, output_shape, bias_axes, shape, expect, kernel, bias", [
    # EinsumDense's three docstring examples (output shapes (None, 64), (None, 32, 64), (None, 32, 64));
    # kernel and bias by the equation's letters: b=32 c=64; d=64 with c=128; y=64 with ...x=128
    ("ab,bc->ac", 64, "c", (2, 32), (2, 64), (32, 64), (64,)),
    ("abc,cd->abd", [None, 64], "d", (2, 32, 128), (2, 32, 64), (128, 64), (64,)),
    ("...x,xy->...y", 64, "y", (2, 32, 128), (2, 32, 64), (128, 64), (64,)),
])
def test_einsum_dense_docstring_examples(equation, output_shape, bias_axes, shape, expect, kernel, bias):
    e = layer("EinsumDense", equation=equation, output_shape=output_shape, bias_axes=bias_axes)
    assert out(e, shape) == [expect]
    assert weights(e, shape) == {"kernel": kernel, "bias": bias}


def test_embedding_docstring():
    # Embedding(1000, 64) on (32, 10) integers -> (32, 10, 64); a 1000 x 64 table
    e = layer("Embedding", input_dim=1000, output_dim=64)
    specs = e.output_specs([Spec((32, 10), "int32")])
    assert specs == [Spec((32, 10, 64), "float32")]
    assert weights(e, (32, 10)) == {"embeddings": (1000, 64)}


# -- convolution --------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls, args, shape, expect", [
    ("Conv1D", dict(filters=32, kernel_size=3), (4, 10, 128), (4, 8, 32)),
    ("Conv2D", dict(filters=32, kernel_size=3), (4, 10, 10, 128), (4, 8, 8, 32)),
    ("Conv3D", dict(filters=32, kernel_size=3), (4, 10, 10, 10, 128), (4, 8, 8, 8, 32)),
    ("Conv1DTranspose", dict(filters=32, kernel_size=3, strides=2), (4, 10, 128), (4, 21, 32)),
    ("Conv2DTranspose", dict(filters=32, kernel_size=2, strides=2), (4, 10, 8, 128), (4, 20, 16, 32)),
    ("Conv3DTranspose", dict(filters=32, kernel_size=2, strides=2), (4, 10, 8, 12, 128), (4, 20, 16, 24, 32)),
    ("DepthwiseConv1D", dict(kernel_size=3, strides=3, depth_multiplier=2), (4, 10, 12), (4, 3, 24)),
    ("DepthwiseConv2D", dict(kernel_size=3), (4, 10, 10, 12), (4, 8, 8, 12)),
    ("SeparableConv1D", dict(filters=3, kernel_size=4, strides=3, depth_multiplier=2), (4, 10, 12), (4, 3, 3)),
    ("SeparableConv2D", dict(filters=3, kernel_size=4, strides=3, depth_multiplier=2), (4, 10, 10, 12),
     (4, 3, 3, 3)),
])
def test_convolution_docstring_examples(cls, args, shape, expect):
    # the `>>> print(y.shape)` examples of Keras 3's conv*.py and depthwise_conv2d.py; the other
    # depthwise and separable ones by hand (their docstrings' positional arguments do not match their
    # signatures): valid padding, (10 - 3) // 3 + 1 = 3 and (10 - 4) // 3 + 1 = 3, 12 x 2 channels
    assert out(layer(cls, **args), shape) == [expect]


def test_conv_padding_strides_dilation_and_channels_first():
    # same: ceil(n / stride); valid with dilation 2: the kernel spans 5 -> (11 - 5) // 2 + 1 = 4
    assert out(layer("Conv2D", filters=8, kernel_size=3, strides=2, padding="same"), (1, 11, 11, 3)) == \
        [(1, 6, 6, 8)]
    assert out(layer("Conv2D", filters=8, kernel_size=3, strides=2, dilation_rate=2), (1, 11, 11, 3)) == \
        [(1, 4, 4, 8)]
    assert out(layer("Conv1D", filters=8, kernel_size=5, padding="causal"), (2, 20, 3)) == [(2, 20, 8)]
    assert out(layer("Conv2D", filters=8, kernel_size=3, data_format="channels_first"), (1, 3, 10, 12)) == \
        [(1, 8, 8, 10)]


def test_conv_kernels():
    # (k..., in / groups, filters) + (filters,); transposed (k..., filters, in); depthwise (k..., in, dm)
    assert weights(layer("Conv2D", filters=32, kernel_size=3, groups=4), (1, 8, 8, 16)) == \
        {"kernel": (3, 3, 4, 32), "bias": (32,)}
    assert weights(layer("Conv2DTranspose", filters=32, kernel_size=2, strides=2), (4, 10, 8, 128)) == \
        {"kernel": (2, 2, 32, 128), "bias": (32,)}
    assert weights(layer("DepthwiseConv2D", kernel_size=3, depth_multiplier=2), (1, 8, 8, 12)) == \
        {"depthwise_kernel": (3, 3, 12, 2), "bias": (24,)}
    assert weights(layer("SeparableConv2D", filters=3, kernel_size=4, depth_multiplier=2), (1, 10, 10, 12)) == \
        {"depthwise_kernel": (4, 4, 12, 2), "pointwise_kernel": (1, 1, 24, 3), "bias": (3,)}


def test_conv_on_too_small_an_input_is_one_error():
    with pytest.raises(InputError, match="smaller than the kernel"):
        out(layer("Conv2D", filters=8, kernel_size=5), (1, 3, 3, 1))


# -- LocallyConnected ----------------------------------------------------------------------------------
def test_locally_connected_1d_docstring_and_its_three_kernels():
    # tf_keras docstring: LocallyConnected1D(64, 3) on (10, 32) -> (None, 8, 64)
    for impl in (1, 2, 3):
        lc = layer("LocallyConnected1D", filters=64, kernel_size=3, implementation=impl)
        assert out(lc, (2, 10, 32)) == [(2, 8, 64)]
    # impl 1: (outputs, k * in, filters) = (8, 96, 64); impl 2: (in_len, in, out_len, filters);
    # impl 3: one value per (output, tap, in, filter) = 8 * 3 * 32 * 64. The bias is (8, 64) in all.
    assert weights(layer("LocallyConnected1D", filters=64, kernel_size=3, implementation=1), (2, 10, 32)) == \
        {"kernel": (8, 96, 64), "bias": (8, 64)}
    assert weights(layer("LocallyConnected1D", filters=64, kernel_size=3, implementation=2), (2, 10, 32)) == \
        {"kernel": (10, 32, 8, 64), "bias": (8, 64)}
    assert weights(layer("LocallyConnected1D", filters=64, kernel_size=3, implementation=3), (2, 10, 32)) == \
        {"kernel": (8 * 3 * 32 * 64,), "bias": (8, 64)}


def test_locally_connected_2d_seed_000():
    # seed 000: LocallyConnected2D(1, (1, 1)) on (1, F, 4): impl 1 kernel (F, 4, 1), impl 2 a dense
    # (1, F, 4, 1, F, 1) one, the bias (1, F, 1)
    f = 5000
    assert out(layer("LocallyConnected2D", filters=1, kernel_size=[1, 1]), (40, 1, f, 4)) == [(40, 1, f, 1)]
    assert weights(layer("LocallyConnected2D", filters=1, kernel_size=[1, 1]), (40, 1, f, 4)) == \
        {"kernel": (f, 4, 1), "bias": (1, f, 1)}
    assert weights(layer("LocallyConnected2D", filters=1, kernel_size=[1, 1], implementation=2), (40, 1, f, 4)) \
        == {"kernel": (1, f, 4, 1, f, 1), "bias": (1, f, 1)}
    assert weights(layer("LocallyConnected2D", filters=1, kernel_size=[1, 1], implementation=3), (40, 1, f, 4)) \
        == {"kernel": (f * 4,), "bias": (1, f, 1)}


def test_locally_connected_same_padding_counts_only_taps_inside_the_input():
    # impl 3 with padding same, kernel 3 on length 4: outputs 0..3 see taps [0,2), [0,3), [1,4), [2,4)
    # (conv_connected_inputs: start max(0, p - 1), end min(4, p + 2)) = 2 + 3 + 3 + 2 = 10 taps
    lc = layer("LocallyConnected1D", filters=2, kernel_size=3, padding="same", implementation=3)
    assert weights(lc, (1, 4, 5)) == {"kernel": (10 * 5 * 2,), "bias": (4, 2)}


# -- pooling --------------------------------------------------------------------------------------------
def test_pooling():
    # strides default to the pool size: (7 - 2) // 2 + 1 = 3; same: ceil(7 / 2) = 4
    assert out(layer("MaxPooling2D", pool_size=[2, 2], strides=None), (1, 7, 7, 5)) == [(1, 3, 3, 5)]
    assert out(layer("AveragePooling2D", pool_size=2, padding="same"), (1, 7, 7, 5)) == [(1, 4, 4, 5)]
    assert out(layer("MaxPooling1D", pool_size=3, strides=1), (2, 10, 4)) == [(2, 8, 4)]
    assert out(layer("AveragePooling3D", pool_size=2), (1, 4, 6, 8, 3)) == [(1, 2, 3, 4, 3)]
    assert out(layer("MaxPooling2D", pool_size=2, data_format="channels_first"), (1, 5, 8, 6)) == [(1, 5, 4, 3)]
    assert weights(layer("MaxPooling2D"), (1, 8, 8, 3)) == {}


@pytest.mark.parametrize("cls, shape, expect", [
    # the Global*Pooling docstrings
    ("GlobalAveragePooling1D", (2, 3, 4), (2, 4)), ("GlobalMaxPooling1D", (2, 3, 4), (2, 4)),
    ("GlobalAveragePooling2D", (2, 4, 5, 3), (2, 3)), ("GlobalMaxPooling2D", (2, 4, 5, 3), (2, 3)),
    ("GlobalAveragePooling3D", (2, 4, 5, 4, 3), (2, 3)), ("GlobalMaxPooling3D", (2, 4, 5, 4, 3), (2, 3)),
])
def test_global_pooling_docstrings(cls, shape, expect):
    assert out(layer(cls), shape) == [expect]


def test_global_pooling_keepdims():
    assert out(layer("GlobalAveragePooling2D", keepdims=True), (2, 4, 5, 3)) == [(2, 1, 1, 3)]


# -- normalization -------------------------------------------------------------------------------------
def test_batch_normalization_keeps_moving_stats_untrained():
    bn = layer("BatchNormalization", axis=3)
    ws = bn.weights([Spec((2, 7, 7, 64), "float32")])
    assert [(w.name, w.shape, w.trainable) for w in ws] == [
        ("gamma", (64,), True), ("beta", (64,), True),
        ("moving_mean", (64,), False), ("moving_variance", (64,), False)]
    assert out(bn, (2, 7, 7, 64)) == [(2, 7, 7, 64)]


def test_layer_normalization_docstring():
    # LayerNormalization(axis=[1, 2, 3]) built on [5, 20, 30, 40]: beta and gamma (20, 30, 40)
    assert weights(layer("LayerNormalization", axis=[1, 2, 3]), (5, 20, 30, 40)) == \
        {"gamma": (20, 30, 40), "beta": (20, 30, 40)}


def test_group_and_unit_normalization():
    assert weights(layer("GroupNormalization", groups=4, axis=-1), (2, 8, 8, 16)) == \
        {"gamma": (16,), "beta": (16,)}
    with pytest.raises(InputError, match="groups"):
        weights(layer("GroupNormalization", groups=5, axis=-1), (2, 8, 8, 16))
    assert weights(layer("UnitNormalization"), (2, 8)) == {}


# -- regularization, activations -----------------------------------------------------------------------
@pytest.mark.parametrize("cls, args", [
    ("Dropout", dict(rate=0.5)), ("SpatialDropout2D", dict(rate=0.5)), ("GaussianNoise", dict(stddev=1.0)),
    ("GaussianDropout", dict(rate=0.1)), ("AlphaDropout", dict(rate=0.1)), ("ActivityRegularization", {}),
    ("ReLU", {}), ("LeakyReLU", {}), ("ELU", {}), ("Softmax", {}), ("ThresholdedReLU", {}),
    ("Activation", dict(activation="relu")), ("Masking", {}), ("Rescaling", dict(scale=0.5)),
    ("RandomFlip", {}), ("RandomRotation", dict(factor=0.1)),
])
def test_shape_preserving_layers_have_no_variables(cls, args):
    lay = layer(cls, **args)
    assert out(lay, (3, 5, 5, 2)) == [(3, 5, 5, 2)]
    assert weights(lay, (3, 5, 5, 2)) == {}


def test_prelu_alpha():
    # alpha has the input's shape without the batch, 1 on each shared axis (counted from 1)
    assert weights(layer("PReLU"), (2, 10, 10, 3)) == {"alpha": (10, 10, 3)}
    assert weights(layer("PReLU", shared_axes=[1, 2]), (2, 10, 10, 3)) == {"alpha": (1, 1, 3)}


# -- reshaping -----------------------------------------------------------------------------------------
def test_reshaping_docstrings():
    assert out(layer("Flatten"), (2, 10, 64)) == [(2, 640)]
    assert out(layer("Permute", dims=[2, 1]), (2, 10, 64)) == [(2, 64, 10)]
    assert out(layer("RepeatVector", n=3), (2, 32)) == [(2, 3, 32)]
    assert out(layer("Reshape", target_shape=[3, 4]), (2, 12)) == [(2, 3, 4)]
    assert out(layer("Reshape", target_shape=[-1, 2, 2]), (2, 12)) == [(2, 3, 2, 2)]
    assert out(layer("Cropping2D", cropping=[[2, 2], [4, 4]]), (2, 28, 28, 3)) == [(2, 24, 20, 3)]
    assert out(layer("Cropping3D", cropping=[2, 4, 2]), (2, 28, 28, 10, 3)) == [(2, 24, 20, 6, 3)]
    assert out(layer("UpSampling3D", size=[2, 2, 2]), (2, 1, 2, 1, 3)) == [(2, 2, 4, 2, 3)]
    assert out(layer("ZeroPadding3D", padding=2), (1, 1, 2, 2, 3)) == [(1, 5, 6, 6, 3)]


def test_reshaping_1d_2d_and_errors():
    assert out(layer("Cropping1D", cropping=[1, 2]), (2, 10, 3)) == [(2, 7, 3)]
    assert out(layer("ZeroPadding2D", padding=[[3, 3], [3, 3]]), (1, 224, 224, 3)) == [(1, 230, 230, 3)]
    assert out(layer("ZeroPadding1D", padding=2), (1, 5, 3)) == [(1, 9, 3)]
    assert out(layer("UpSampling1D", size=3), (1, 5, 3)) == [(1, 15, 3)]
    assert out(layer("UpSampling2D", size=[2, 3], data_format="channels_first"), (1, 3, 4, 5)) == [(1, 3, 8, 15)]
    with pytest.raises(InputError, match="cannot reshape"):
        out(layer("Reshape", target_shape=[5, -1]), (2, 12))


# -- merging -------------------------------------------------------------------------------------------
def test_merging():
    for cls in ("Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum"):
        assert out(layer(cls), (2, 8, 16), (2, 8, 16)) == [(2, 8, 16)]
    assert out(layer("Add"), (2, 8, 16), (2, 1, 16)) == [(2, 8, 16)]  # broadcast
    assert out(layer("Concatenate", axis=-1), (2, 8, 3), (2, 8, 5)) == [(2, 8, 8)]
    assert out(layer("Concatenate", axis=1), (2, 3, 4), (2, 5, 4)) == [(2, 8, 4)]
    # Dot(axes=1) of (batch, 10) and (batch, 10): the batch and a 1 (Keras pads a rank-1 result)
    assert out(layer("Dot", axes=1), (2, 10), (2, 10)) == [(2, 1)]
    # Dot(axes=(1, 2)) of (b, 5, 2) and (b, 2, 5): (b, 2) + (2,) -> (b, 2, 2), tf_keras's docstring
    assert out(layer("Dot", axes=[1, 2]), (2, 5, 2), (2, 2, 5)) == [(2, 2, 2)]
    with pytest.raises(InputError, match="cannot concatenate"):
        out(layer("Concatenate", axis=-1), (2, 8, 3), (2, 7, 5))


# -- recurrent -----------------------------------------------------------------------------------------
def test_lstm_gru_docstrings():
    # LSTM(4) and GRU(4) on (32, 10, 8): (32, 4); with return_sequences and return_state the sequence
    # (32, 10, 4) and the states (32, 4) (two for LSTM, one for GRU)
    assert out(layer("LSTM", units=4), (32, 10, 8)) == [(32, 4)]
    assert out(layer("LSTM", units=4, return_sequences=True, return_state=True), (32, 10, 8)) == \
        [(32, 10, 4), (32, 4), (32, 4)]
    assert out(layer("GRU", units=4, return_sequences=True, return_state=True), (32, 10, 8)) == \
        [(32, 10, 4), (32, 4)]
    assert out(layer("RNN", cell={"class_name": "GRUCell", "config": {"units": 4}}), (32, 10, 8)) == [(32, 4)]


def test_recurrent_kernels():
    # gates x units: SimpleRNN 1, LSTM 4, GRU 3 (reset_after: a (2, 3u) bias, input and recurrent)
    assert weights(layer("SimpleRNN", units=4), (2, 10, 8)) == \
        {"kernel": (8, 4), "recurrent_kernel": (4, 4), "bias": (4,)}
    assert weights(layer("LSTM", units=4), (2, 10, 8)) == \
        {"kernel": (8, 16), "recurrent_kernel": (4, 16), "bias": (16,)}
    assert weights(layer("GRU", units=4, reset_after=True), (2, 10, 8)) == \
        {"kernel": (8, 12), "recurrent_kernel": (4, 12), "bias": (2, 12)}
    assert weights(layer("GRU", units=4, reset_after=False), (2, 10, 8))["bias"] == (12,)


def test_bidirectional_docstring_model():
    # Bidirectional(LSTM(10, return_sequences=True)) on (5, 10), then Bidirectional(LSTM(10)):
    # (None, 5, 20), (None, 20); an LSTM(10) on d features has 4 * 10 * (d + 10 + 1) parameters
    lstm = {"class_name": "LSTM", "config": {"name": "lstm", "units": 10, "return_sequences": True}}
    first = layer("Bidirectional", layer=lstm, merge_mode="concat")
    assert out(first, (3, 5, 10)) == [(3, 5, 20)]
    assert params(first, (3, 5, 10)) == 2 * 4 * 10 * (10 + 10 + 1)
    second = layer("Bidirectional", layer=dict(lstm, config=dict(lstm["config"], return_sequences=False)))
    assert out(second, (3, 5, 20)) == [(3, 20)]
    assert params(second, (3, 5, 20)) == 2 * 4 * 10 * (20 + 10 + 1)
    assert out(layer("Bidirectional", layer=lstm, merge_mode="sum"), (3, 5, 10)) == [(3, 5, 10)]
    assert out(layer("Bidirectional", layer=lstm, merge_mode=None), (3, 5, 10)) == [(3, 5, 10), (3, 5, 10)]


def test_time_distributed_docstring():
    # TimeDistributed(Conv2D(64, (3, 3))) on (32, 10, 128, 128, 3): (32, 10, 126, 126, 64)
    td = layer("TimeDistributed", layer={"class_name": "Conv2D",
                                         "config": {"name": "c", "filters": 64, "kernel_size": [3, 3]}})
    assert out(td, (32, 10, 128, 128, 3)) == [(32, 10, 126, 126, 64)]
    assert weights(td, (32, 10, 128, 128, 3)) == {"kernel": (3, 3, 3, 64), "bias": (64,)}


def test_conv_lstm_2d():
    # ConvLSTM2D(8, 3) on (b, time 5, 16, 16, 3): valid -> 14 x 14; kernels (3, 3, in, 4f), (3, 3, f, 4f)
    c = layer("ConvLSTM2D", filters=8, kernel_size=[3, 3])
    assert out(c, (2, 5, 16, 16, 3)) == [(2, 14, 14, 8)]
    assert out(layer("ConvLSTM2D", filters=8, kernel_size=3, return_sequences=True, padding="same"),
               (2, 5, 16, 16, 3)) == [(2, 5, 16, 16, 8)]
    assert weights(c, (2, 5, 16, 16, 3)) == \
        {"kernel": (3, 3, 3, 32), "recurrent_kernel": (3, 3, 8, 32), "bias": (32,)}


# -- attention -----------------------------------------------------------------------------------------
def test_multi_head_attention_docstring():
    # tf_keras's docstring: MultiHeadAttention(num_heads=2, key_dim=2) on target (8, 16) and source
    # (4, 16) -> (None, 8, 16). Query, key and value kernels (16, 2, 2) with biases (2, 2); the output
    # kernel (2, 2, 16) and bias (16,): 3 * (64 + 4) + 64 + 16 = 284 parameters
    mha = layer("MultiHeadAttention", num_heads=2, key_dim=2)
    assert out(mha, (3, 8, 16), (3, 4, 16)) == [(3, 8, 16)]
    assert weights(mha, (3, 8, 16), (3, 4, 16))["attention_output/kernel"] == (2, 2, 16)
    assert params(mha, (3, 8, 16), (3, 4, 16)) == 284
    assert out(layer("MultiHeadAttention", num_heads=2, key_dim=2, output_shape=7), (3, 8, 16), (3, 4, 16)) == \
        [(3, 8, 7)]


def test_dot_and_additive_attention():
    # (batch, Tq, dim) and (batch, Tv, dim) -> (batch, Tq, dim)
    assert out(layer("Attention"), (2, 7, 16), (2, 9, 16)) == [(2, 7, 16)]
    assert weights(layer("Attention", use_scale=True, score_mode="concat"), (2, 7, 16), (2, 9, 16)) == \
        {"scale": (), "concat_score_weight": ()}
    assert weights(layer("AdditiveAttention", use_scale=True), (2, 7, 16), (2, 9, 16)) == {"scale": (16,)}


# -- preprocessing -------------------------------------------------------------------------------------
def test_image_size_preprocessing():
    for cls in ("Resizing", "CenterCrop", "RandomCrop"):
        assert out(layer(cls, height=64, width=48), (2, 100, 90, 3)) == [(2, 64, 48, 3)]


def test_normalization_preprocessing_variables():
    # adapt()'s mean and variance over the kept axis, and a count (int64, a scalar); none when given
    ws = layer("Normalization", axis=-1).weights([Spec((2, 5, 3), "float32")])
    assert [(w.name, w.shape, w.dtype, w.trainable) for w in ws] == [
        ("mean", (3,), "float32", False), ("variance", (3,), "float32", False), ("count", (), "int64", False)]
    assert weights(layer("Normalization", axis=-1, mean=[0.5], variance=[2.0]), (2, 5, 3)) == {}


# -- dtype policies ------------------------------------------------------------------------------------
def test_mixed_float16_computes_in_half_on_float32_variables():
    policy2 = {"class_name": "Policy", "config": {"name": "mixed_float16"}}
    policy3 = {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "mixed_bfloat16"},
               "registered_name": None}
    for policy, compute in ((policy2, "float16"), (policy3, "bfloat16"), ("mixed_float16", "float16")):
        d = layer("Dense", units=4, dtype=policy)
        assert (d.compute_dtype, d.variable_dtype) == (compute, "float32")
        assert d.output_specs([Spec((2, 3), "float32")]) == [Spec((2, 4), compute)]
        assert {w.dtype for w in d.weights([Spec((2, 3), "float32")])} == {"float32"}


def test_unknown_custom_and_lambda_layers_are_never_run():
    with pytest.raises(InputError, match="'MyLayer'.*not a built-in") as e:
        layer("MyLayer")
    assert "declare its output shape" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(InputError, match="Lambda.*never run"):
        layer("Lambda", function=["4wEAAAAAAAAA", None, None])
    with pytest.raises(InputError, match="custom class"):
        make_layer({"class_name": "Dense", "module": "my_package.layers", "registered_name": "Custom>Dense",
                    "config": {"name": "d", "units": 3}}, path="m/d")


def test_layers_keras_applications_define():
    """ConvNeXt's LayerScale (applications/convnext.py: build() adds gamma of (projection_dim,), call
    returns x * gamma) and InceptionResNetV2's CustomScaleLayer (inputs[0] + inputs[1] * scale, no
    variables), as each flavour writes them: module and registered name (tf_keras registers the
    latter as "Custom>CustomScaleLayer"), or, in an older file, the class and its config keys alone."""
    scale = make_layer({"module": "tf_keras.src.applications.convnext", "class_name": "LayerScale",
                        "registered_name": "LayerScale",
                        "config": {"name": "s", "init_values": 1e-6, "projection_dim": 96}}, path="m/s")
    assert out(scale, (2, 56, 56, 96)) == [(2, 56, 56, 96)]
    assert weights(scale, (2, 56, 56, 96)) == {"gamma": (96,)}
    with pytest.raises(InputError, match="projection_dim 96 does not match"):
        out(scale, (2, 56, 56, 64))
    residual = make_layer({"module": "tf_keras.src.applications.inception_resnet_v2", "class_name": "CustomScaleLayer",
                           "registered_name": "Custom>CustomScaleLayer", "config": {"name": "c", "scale": 0.17}},
                          path="m/c")
    assert out(residual, (2, 35, 35, 320), (2, 35, 35, 320)) == [(2, 35, 35, 320)]
    assert weights(residual, (2, 35, 35, 320), (2, 35, 35, 320)) == {}
    old = make_layer({"class_name": "LayerScale", "config": {"name": "s", "init_values": 1e-6, "projection_dim": 8}})
    assert weights(old, (2, 8)) == {"gamma": (8,)}


def test_a_users_class_named_as_an_applications_layer_is_custom_code():
    """Another module's LayerScale, or one whose config is not ConvNeXt's, is the user's: never run."""
    with pytest.raises(InputError, match="custom code is never run"):
        make_layer({"module": "my_model.layers", "class_name": "LayerScale", "registered_name": "LayerScale",
                    "config": {"name": "s", "init_values": 1e-6, "projection_dim": 96}}, path="m/s")
    with pytest.raises(InputError, match="custom code is never run"):
        make_layer({"class_name": "LayerScale", "config": {"name": "s", "scale": 2.0}}, path="m/s")
    with pytest.raises(InputError, match="custom code is never run"):
        make_layer({"module": "keras.src.applications.convnext", "class_name": "CustomScaleLayer",
                    "config": {"name": "c", "scale": 0.17}}, path="m/c")


def test_text_vectorization():
    """TextVectorization's docstring: max_tokens 5000, output_mode "int", output_sequence_length 4 on
    a batch of 2 strings gives (2, 4) int64; multi_hot with pad_to_max_tokens gives (batch, max_tokens).
    Without a length (int) or the padding (other modes) the width is the data's, so it is declared."""
    tv = layer("TextVectorization", max_tokens=5000, output_mode="int", output_sequence_length=4)
    assert tv.output_specs([Spec((2, 1), "string")]) == [Spec((2, 4), "int64")]
    assert weights(tv, (2, 1)) == {}
    hot = layer("TextVectorization", max_tokens=5000, output_mode="multi_hot", pad_to_max_tokens=True)
    assert out(hot, (2, 1)) == [(2, 5000)]
    for config in ({"output_mode": "int"}, {"output_mode": "multi_hot", "max_tokens": 5000}):
        with pytest.raises(InputError, match="declare its output shape"):
            layer("TextVectorization", **config).output_specs([Spec((2, 1), "string")])


def test_keras3_additions():
    # RMSNormalization's docstring: built on [5, 20, 30, 10], scale (10,)
    assert weights(layer("RMSNormalization", flavour="keras3"), (5, 20, 30, 10)) == {"scale": (10,)}
    # the AdaptiveAveragePooling2D / AdaptiveMaxPooling1D docstrings
    assert out(layer("AdaptiveAveragePooling2D", output_size=32), (1, 64, 64, 3)) == [(1, 32, 32, 3)]
    assert out(layer("AdaptiveMaxPooling1D", output_size=32), (1, 64, 3)) == [(1, 32, 3)]
    # SpectralNormalization(Conv2D(2, 2)) on (1, 10, 10, 1): (1, 9, 9, 2); u is (1, filters), not trained
    sn = layer("SpectralNormalization", flavour="keras3",
               layer={"class_name": "Conv2D", "config": {"name": "c", "filters": 2, "kernel_size": 2}})
    assert out(sn, (1, 10, 10, 1)) == [(1, 9, 9, 2)]
    ws = sn.weights([Spec((1, 10, 10, 1), "float32")])
    assert [(w.name, w.shape, w.trainable) for w in ws] == [
        ("kernel", (2, 2, 1, 2), True), ("bias", (2,), True), ("vector_u", (1, 2), False)]


def test_category_encoding_and_lookups():
    # CategoryEncoding's docstrings: one_hot of [3, 2, 0, 1] is (4, 4); multi_hot of 4 pairs is (4, 4)
    assert out(layer("CategoryEncoding", num_tokens=4, output_mode="one_hot"), (4,)) == [(4, 4)]
    assert out(layer("CategoryEncoding", num_tokens=4, output_mode="multi_hot"), (4, 2)) == [(4, 4)]
    assert layer("StringLookup").output_specs([Spec((8, 5), "string")]) == [Spec((8, 5), "int64")]
    with pytest.raises(InputError, match="depends on the vocabulary"):
        out(layer("IntegerLookup", output_mode="multi_hot"), (8, 5))


def test_transposed_conv_output_padding():
    # deconv_output_length with output_padding: (n - 1) * stride + kernel - 2 * pad + output_padding;
    # same pads kernel // 2: (5 - 1) * 2 + 3 - 2 + 1 = 10; valid: (5 - 1) * 2 + 3 + 1 = 12
    assert out(layer("Conv2DTranspose", filters=4, kernel_size=3, strides=2, padding="same",
                     output_padding=1), (1, 5, 5, 2)) == [(1, 10, 10, 4)]
    assert out(layer("Conv2DTranspose", filters=4, kernel_size=3, strides=2, output_padding=1), (1, 5, 5, 2)) == \
        [(1, 12, 12, 4)]
    # no output_padding, valid, kernel smaller than the stride: n * stride
    assert out(layer("Conv1DTranspose", filters=4, kernel_size=2, strides=3), (1, 5, 2)) == [(1, 15, 4)]


def test_keras3_operation_nodes():
    # keras.ops.add(x, 3.0) in a Keras 3 Functional model is an Add operation of module
    # keras.src.ops.numpy: elementwise, the input's shape; keras.ops.average reduces, so it is declared,
    # never mistaken for the Average merge layer
    add = make_layer({"module": "keras.src.ops.numpy", "class_name": "Add", "config": {"name": "add"}}, path="m/add")
    assert out(add, (2, 5, 3)) == [(2, 5, 3)]
    assert out(add, (2, 5, 3), (3,)) == [(2, 5, 3)]
    with pytest.raises(InputError, match="operation keras.ops Average.*declare"):
        make_layer({"module": "keras.src.ops.numpy", "class_name": "Average", "config": {"name": "avg"}},
                   path="m/avg")


def test_sizes_in_a_config_must_be_integers():
    with pytest.raises(InputError, match="non-integer sizes"):
        out(layer("Dense", units=2.5), (2, 3))
    with pytest.raises(InputError, match="non-integer sizes"):
        weights(layer("Embedding", input_dim="1000", output_dim=4), (2, 3))
