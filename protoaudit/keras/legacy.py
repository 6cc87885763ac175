"""What Keras did to an old model config as it loaded it, done here before the config is read.

Nameless Sequentials. Keras 2.0 and 2.1 wrote a Sequential's config as the bare list of its layers,
with no name. Loading one, Keras names it as it names any model built without a name: "sequential_"
and the next number of its counter for that prefix (2.0's Sequential.__init__, 2.2's Network), in the
order the models are made, each model before the layers inside it. In a fresh session the outer
model is sequential_1 and the first nameless one inside it sequential_2.

Class names of tf.keras 1.13. Its two BatchNormalization classes were named BatchNormalizationV1 and
BatchNormalizationV2, and configs wrote those names; tf.keras and tf_keras kept them as aliases of
BatchNormalization on loading (layers/serialization.py, populate_deserializable_objects: "in TF 1.13,
'BatchNormalizationV1' and 'BatchNormalizationV2' were used as class name for v1 and v2 version of
BatchNormalization"). The other V1/V2 names of tf.keras.layers (GRUV1, LSTMV2, ...) are module
aliases of classes named GRU and LSTM, never written in a config.

Keras 1 arguments. Keras 2.0 to 2.2 read a Keras 1 config (output_dim, nb_filter, nb_row/nb_col,
border_mode, subsample, init, W_regularizer, dim_ordering, Dropout's p, ...) through the legacy
interfaces that wrap each layer's constructor (keras/legacy/interfaces.py, the same table from 2.0.0
to 2.2.5): a preprocessor first, then value conversions (dim_ordering 'th' is channels_first),
then renames. `KERAS1` is that table, by the interface each Keras 2 class's constructor carries
(the decorators of keras/layers/*.py at 2.2.4), under the class names a config can hold.
"""
from ..errors import InputError

MAX_DEPTH = 64  # models inside models (graph.MAX_DEPTH refuses deeper ones)

_DIM_ORDERING = {"dim_ordering": {"tf": "channels_last", "th": "channels_first", "default": None}}
_WEIGHTS = (("init", "kernel_initializer"), ("W_regularizer", "kernel_regularizer"),
            ("b_regularizer", "bias_regularizer"), ("W_constraint", "kernel_constraint"),
            ("b_constraint", "bias_constraint"), ("bias", "use_bias"))
_CONV = (("nb_filter", "filters"), ("subsample", "strides"), ("border_mode", "padding"),
         ("dim_ordering", "data_format")) + _WEIGHTS
_POOLING = (("border_mode", "padding"), ("dim_ordering", "data_format"))
_ORDERING = (("dim_ordering", "data_format"),)


def _kernel_size(config, keys):
    """conv2d_args_preprocessor / conv3d_args_preprocessor as from_config calls them (no positional
    arguments): nb_row and nb_col (kernel_dim1..3) together make kernel_size."""
    if all(k in config for k in keys):
        config["kernel_size"] = [config.pop(k) for k in keys]


def _conv1d(config):
    if "input_dim" in config:
        _input_shape(config, [config.pop("input_length", None), config.pop("input_dim")])


def _conv2d(config):
    _kernel_size(config, ("nb_row", "nb_col"))


def _conv3d(config):
    _kernel_size(config, ("kernel_dim1", "kernel_dim2", "kernel_dim3"))


def _separable(config):
    if "init" in config:
        config["depthwise_initializer"] = config["pointwise_initializer"] = config.pop("init")
    _conv2d(config)


def _deconv2d(config):
    config.pop("output_shape", None)
    _conv2d(config)


def _forget_bias(config):
    """'one' is unit_forget_bias; any other value is dropped (Keras warns that it is ignored)."""
    if "forget_bias_init" in config and config.pop("forget_bias_init") == "one":
        config["unit_forget_bias"] = True


def _recurrent(config):
    _forget_bias(config)
    if "input_dim" in config:
        _input_shape(config, [config.pop("input_length", None), config.pop("input_dim")])


def _convlstm2d(config):
    _forget_bias(config)
    _conv2d(config)


def _embedding(config):
    config.pop("dropout", None)  # "no longer supported in Embedding": use SpatialDropout1D


def _batchnorm(config):
    if "mode" in config:
        if config.pop("mode") != 0:
            raise ValueError("The `mode` argument of `BatchNormalization` no longer exists. `mode=1` and `mode=2` "
                             "are no longer supported.")


def _zeropadding2d(config):
    padding = config.get("padding")
    if isinstance(padding, dict) and set(padding) <= {"top_pad", "bottom_pad", "left_pad", "right_pad"}:
        config["padding"] = [[padding.get("top_pad", 0), padding.get("bottom_pad", 0)],
                             [padding.get("left_pad", 0), padding.get("right_pad", 0)]]


def _input_shape(config, shape):
    """Keras 2's Layer.__init__: input_shape gives (None,) + input_shape where no batch_input_shape is
    given (only the first layer of a Sequential reads it)."""
    if shape is not None and isinstance(shape[-1], int) and "batch_input_shape" not in config:
        config["batch_input_shape"] = [None] + list(shape)


# interface: (renames (old, new), value conversions {old key: {old value: new value}}, preprocessor)
INTERFACES = {
    "dense": ((("output_dim", "units"),) + _WEIGHTS, {}, None),
    "dropout": ((("p", "rate"),), {}, None),
    "embedding": ((("init", "embeddings_initializer"), ("W_regularizer", "embeddings_regularizer"),
                   ("W_constraint", "embeddings_constraint")), {}, _embedding),
    "pooling1d": ((("pool_length", "pool_size"), ("stride", "strides"), ("border_mode", "padding")), {}, None),
    "prelu": ((("init", "alpha_initializer"),), {}, None),
    "gaussiannoise": ((("sigma", "stddev"),), {}, None),
    "recurrent": ((("output_dim", "units"), ("init", "kernel_initializer"), ("inner_init", "recurrent_initializer"),
                   ("inner_activation", "recurrent_activation"), ("W_regularizer", "kernel_regularizer"),
                   ("b_regularizer", "bias_regularizer"), ("U_regularizer", "recurrent_regularizer"),
                   ("dropout_W", "dropout"), ("dropout_U", "recurrent_dropout"), ("consume_less", "implementation")),
                  {"consume_less": {"cpu": 0, "mem": 1, "gpu": 2}}, _recurrent),
    "gaussiandropout": ((("p", "rate"),), {}, None),
    "pooling": (_POOLING, _DIM_ORDERING, None),  # pooling2d and pooling3d
    "ordering": (_ORDERING, _DIM_ORDERING, None),  # global pooling, upsampling2d/3d, zeropadding3d, cropping
    "upsampling1d": ((("length", "size"),), {}, None),
    "zeropadding2d": (_ORDERING, _DIM_ORDERING, _zeropadding2d),
    "conv1d": ((("nb_filter", "filters"), ("filter_length", "kernel_size"), ("subsample_length", "strides"),
                ("border_mode", "padding")) + _WEIGHTS, {}, _conv1d),
    "conv2d": (_CONV, _DIM_ORDERING, _conv2d),
    "separable_conv2d": ((("nb_filter", "filters"), ("subsample", "strides"), ("border_mode", "padding"),
                          ("dim_ordering", "data_format"), ("b_regularizer", "bias_regularizer"),
                          ("b_constraint", "bias_constraint"), ("bias", "use_bias")), _DIM_ORDERING, _separable),
    "deconv2d": (_CONV, _DIM_ORDERING, _deconv2d),
    "conv3d": (_CONV, _DIM_ORDERING, _conv3d),
    "batchnorm": ((("beta_init", "beta_initializer"), ("gamma_init", "gamma_initializer")), {}, _batchnorm),
    "convlstm2d": ((("nb_filter", "filters"), ("subsample", "strides"), ("border_mode", "padding"),
                    ("dim_ordering", "data_format"), ("init", "kernel_initializer"),
                    ("inner_init", "recurrent_initializer"), ("W_regularizer", "kernel_regularizer"),
                    ("U_regularizer", "recurrent_regularizer"), ("b_regularizer", "bias_regularizer"),
                    ("inner_activation", "recurrent_activation"), ("dropout_W", "dropout"),
                    ("dropout_U", "recurrent_dropout"), ("bias", "use_bias")), _DIM_ORDERING, _convlstm2d),
    "spatialdropout1d": ((("p", "rate"),), {}, None),
    "spatialdropoutNd": ((("p", "rate"), ("dim_ordering", "data_format")), _DIM_ORDERING, None),
    "input": ((("input_dtype", "dtype"),), {}, None),
}

# class name (Keras 2's, and the Keras 1 names its aliases keep) -> the interface its constructor carries
KERAS1 = {
    "Dense": "dense", "Dropout": "dropout", "Embedding": "embedding", "PReLU": "prelu",
    "GaussianNoise": "gaussiannoise", "GaussianDropout": "gaussiandropout",
    "SimpleRNN": "recurrent", "GRU": "recurrent", "LSTM": "recurrent",
    "MaxPooling1D": "pooling1d", "AveragePooling1D": "pooling1d", "MaxPool1D": "pooling1d", "AvgPool1D": "pooling1d",
    **{f"{kind}{rank}D": "pooling" for kind in ("MaxPooling", "AveragePooling", "MaxPool", "AvgPool")
       for rank in (2, 3)},
    **{f"Global{kind}{rank}D": "ordering" for kind in ("MaxPooling", "AveragePooling", "MaxPool", "AvgPool")
       for rank in (2, 3)},
    "UpSampling1D": "upsampling1d", "UpSampling2D": "ordering", "UpSampling3D": "ordering",
    "ZeroPadding2D": "zeropadding2d", "ZeroPadding3D": "ordering", "Cropping2D": "ordering", "Cropping3D": "ordering",
    "Conv1D": "conv1d", "Convolution1D": "conv1d", "LocallyConnected1D": "conv1d",
    "Conv2D": "conv2d", "Convolution2D": "conv2d", "LocallyConnected2D": "conv2d",
    "SeparableConv2D": "separable_conv2d", "SeparableConvolution2D": "separable_conv2d",
    "Conv2DTranspose": "deconv2d", "Convolution2DTranspose": "deconv2d", "Deconvolution2D": "deconv2d",
    "Conv3D": "conv3d", "Convolution3D": "conv3d",
    "BatchNormalization": "batchnorm", "ConvLSTM2D": "convlstm2d",
    "SpatialDropout1D": "spatialdropout1d", "SpatialDropout2D": "spatialdropoutNd",
    "SpatialDropout3D": "spatialdropoutNd", "InputLayer": "input",
}


CLASS_ALIASES = {"BatchNormalizationV1": "BatchNormalization", "BatchNormalizationV2": "BatchNormalization"}


def keras1_layer(class_name, config):
    """A Keras 1 layer config as Keras 2.0-2.2 constructs it: (the new config, whether anything changed).
    ValueError where Keras refused it (both an old and a new name, BatchNormalization mode 1 or 2)."""
    interface = INTERFACES.get(KERAS1.get(class_name))
    if interface is None:
        return config, False
    renames, values, preprocessor = interface
    new = dict(config)
    if preprocessor is not None:
        preprocessor(new)
    for key, table in values.items():
        if key in new and _hashable(new[key]) and new[key] in table:
            new[key] = table[new[key]]
    for old, name in renames:
        if old in new:
            value = new.pop(old)
            if name in new:
                raise ValueError(f"For the `{name}` argument, the layer received both the legacy keyword argument "
                                 f"`{old}` and the Keras 2 keyword argument `{name}`")
            new[name] = value
    # Layer.__init__: a legacy input_dtype is the dtype of the input a first layer makes
    if "input_dtype" in new and "dtype" not in new and "batch_input_shape" in new:
        new["dtype"] = new.pop("input_dtype")
    if class_name == "GRU" and new != config and "reset_after" not in new:
        new["reset_after"] = False  # the GRU of Keras 2.0-2.2 (reset_after arrived in 2.1.3, off by default)
    return new, new != config


def _hashable(value):
    return isinstance(value, (str, int, float, bool, type(None)))


class _Upgrade:
    def __init__(self, path, flavour):
        self.path = path
        self.keras1 = flavour != "keras3"
        self.converted = 0
        self.sequentials = 0  # nameless Sequentials named so far

    def model(self, entry, depth=0):
        if depth > MAX_DEPTH:  # the graph refuses it
            return
        config = entry.get("config")
        if entry.get("class_name") == "Sequential" and isinstance(config, list) and entry.get("name") is None:
            self.sequentials += 1
            entry["name"] = f"sequential_{self.sequentials}"
        layers = config if isinstance(config, list) else config.get("layers") if isinstance(config, dict) else None
        if not isinstance(layers, list):
            return
        first = layers[0] if layers and isinstance(layers[0], dict) else {}
        if entry.get("class_name") == "Sequential" and first.get("class_name") == "Merge" \
                and isinstance(first.get("config"), dict) and isinstance(first["config"].get("layers"), list):
            raise InputError(f"a Keras 1 Sequential whose first layer merges {len(first['config']['layers'])} models "
                             "(a Merge of models, which Keras 2.2 no longer loads): not read", file=self.path,
                             fix="build it as a Functional model, merging the models' outputs, and save it again")
        for layer in layers:
            if not isinstance(layer, dict):
                continue
            if layer.get("class_name") in ("Sequential", "Model", "Functional") \
                    and isinstance(layer.get("config"), (dict, list)):
                self.model(layer, depth + 1)
            else:
                self.layer(layer)

    def layer(self, entry):
        config = entry.get("config")
        if not isinstance(config, dict) or not isinstance(entry.get("class_name"), str):
            return
        if self.keras1 and entry["class_name"] in CLASS_ALIASES and entry.get("module") is None:
            entry["class_name"] = CLASS_ALIASES[entry["class_name"]]
        if self.keras1:
            try:
                new, changed = keras1_layer(entry["class_name"], config)
            except ValueError as e:
                raise InputError(f"a Keras 1 argument Keras 2.0-2.2 refused on loading: {e}", file=self.path,
                                 layer=config.get("name") if isinstance(config.get("name"), str) else None,
                                 fix="load the model in Keras 2.2 and save it again") from None
            if changed:
                entry["config"] = config = new
                self.converted += 1
        for key in ("layer", "backward_layer"):  # TimeDistributed, Bidirectional: the layer they wrap
            if isinstance(config.get(key), dict):
                self.layer(config[key])


def upgrade(doc, path, flavour):
    """(the model config as Keras loads it, the number of layers whose Keras 1 arguments were
    converted). The parsed config is changed in place: a converted layer's config is replaced."""
    up = _Upgrade(path, flavour)
    up.model(doc)
    return doc, up.converted
