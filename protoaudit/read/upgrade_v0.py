"""V0 nets (`layers { layer { type: "conv" ... } }`) to V1, as Caffe's UpgradeV0Net does.

First the V0 padding layers are folded into the conv or pool layer they feed; then each V0 layer's
flat fields move into the V1 `*_param` its type owns. A field the type does not own is dropped,
as UpgradeV0LayerParameter drops it: it logs "Unknown parameter ... for layer type ...", upgrades the
rest of the layer, and Net goes on ("continuing anyway"); each one is reported as an assumption.
Only what Caffe itself stops on (LOG(FATAL), CHECK) is refused.
"""
from dataclasses import dataclass

from ..errors import InputError

# V0 type string -> V1 LayerType name (UpgradeV0LayerType)
V0_TYPES = {
    "accuracy": "ACCURACY", "bnll": "BNLL", "concat": "CONCAT", "conv": "CONVOLUTION",
    "data": "DATA", "dropout": "DROPOUT", "euclidean_loss": "EUCLIDEAN_LOSS", "flatten": "FLATTEN",
    "hdf5_data": "HDF5_DATA", "hdf5_output": "HDF5_OUTPUT", "im2col": "IM2COL",
    "images": "IMAGE_DATA", "infogain_loss": "INFOGAIN_LOSS", "innerproduct": "INNER_PRODUCT",
    "lrn": "LRN", "multinomial_logistic_loss": "MULTINOMIAL_LOGISTIC_LOSS", "pool": "POOLING",
    "relu": "RELU", "sigmoid": "SIGMOID", "softmax": "SOFTMAX", "softmax_loss": "SOFTMAX_LOSS",
    "split": "SPLIT", "tanh": "TANH", "window_data": "WINDOW_DATA",
}


_DATA_PARAMS = {"data": "data_param", "hdf5_data": "hdf5_data_param", "images": "image_data_param",
                "window_data": "window_data_param"}

# V0 field -> where it goes in the V1 layer: one path for every type, or a path per V0 type that
# owns the field (UpgradeV0LayerParameter, in its order, which is the order of its error lines).
# Fields not here are dropped silently, as Caffe drops new_num and new_channels; name, type,
# blobs, blobs_lr and weight_decay are copied on their own.
V0_FIELDS = {
    "num_output": {"conv": "convolution_param.num_output",
                   "innerproduct": "inner_product_param.num_output"},
    "biasterm": {"conv": "convolution_param.bias_term", "innerproduct": "inner_product_param.bias_term"},
    "weight_filler": {"conv": "convolution_param.weight_filler",
                      "innerproduct": "inner_product_param.weight_filler"},
    "bias_filler": {"conv": "convolution_param.bias_filler",
                    "innerproduct": "inner_product_param.bias_filler"},
    "pad": {"conv": "convolution_param.pad", "pool": "pooling_param.pad"},
    "kernelsize": {"conv": "convolution_param.kernel_size", "pool": "pooling_param.kernel_size"},
    "group": {"conv": "convolution_param.group"},
    "stride": {"conv": "convolution_param.stride", "pool": "pooling_param.stride"},
    "pool": {"pool": "pooling_param.pool"},
    "dropout_ratio": {"dropout": "dropout_param.dropout_ratio"},
    "local_size": {"lrn": "lrn_param.local_size"},
    "alpha": {"lrn": "lrn_param.alpha"},
    "beta": {"lrn": "lrn_param.beta"},
    "k": {"lrn": "lrn_param.k"},
    "source": {**{t: f"{p}.source" for t, p in _DATA_PARAMS.items()},
               "infogain_loss": "infogain_loss_param.source"},
    "scale": "transform_param.scale",
    "meanfile": "transform_param.mean_file",
    "batchsize": {t: f"{p}.batch_size" for t, p in _DATA_PARAMS.items()},
    "cropsize": "transform_param.crop_size",
    "mirror": "transform_param.mirror",
    "rand_skip": {"data": "data_param.rand_skip", "images": "image_data_param.rand_skip"},
    "shuffle_images": {"images": "image_data_param.shuffle"},
    "new_height": {"images": "image_data_param.new_height"},
    "new_width": {"images": "image_data_param.new_width"},
    "concat_dim": {"concat": "concat_param.concat_dim"},
    "det_fg_threshold": {"window_data": "window_data_param.fg_threshold"},
    "det_bg_threshold": {"window_data": "window_data_param.bg_threshold"},
    "det_fg_fraction": {"window_data": "window_data_param.fg_fraction"},
    "det_context_pad": {"window_data": "window_data_param.context_pad"},
    "det_crop_mode": {"window_data": "window_data_param.crop_mode"},
    "hdf5_output_param": {"hdf5_output": "hdf5_output_param"},
}

# The name UpgradeV0LayerParameter's error line gives a field, where it is not the field's own
LOGGED_AS = {"shuffle_images": "shuffle"}


@dataclass(frozen=True)
class Dropped:
    """A V0 field Caffe's upgrade drops from a layer whose type does not own it."""

    layer: str
    field: str
    v0_type: str

    @property
    def logged(self):
        """The error line Caffe logs for it."""
        return f"Unknown parameter {LOGGED_AS.get(self.field, self.field)} for layer type {self.v0_type}"

    def assumption(self):
        """(layer, what, override) as an audit's assumptions list them."""
        return (self.layer or "(unnamed)",
                f"'{self.field}' is dropped, as Caffe drops it: a V0 '{self.v0_type}' layer has no such parameter, "
                f"so Caffe's V0 upgrade logs \"{self.logged}\", upgrades the rest of the layer and goes on",
                f"delete '{self.field}' from the layer: the same net, without Caffe's error")


# What UpgradeV0Net keeps of the net itself; everything else (state, input_shape, ...) is dropped.
KEPT_NET_FIELDS = ("name", "input", "input_dim", "force_backward")


def upgrade_v0(net):
    """Rewrite `net`'s V0 layers as V1 ones in place; returns, per new layer, its index in the old,
    and the fields dropped (Dropped), in the order Caffe logs them."""
    kept, dropped = fold_padding(net), []
    saved = type(net)()
    for name in KEPT_NET_FIELDS:
        field = net.DESCRIPTOR.fields_by_name[name]
        if field.is_repeated:
            getattr(saved, name).extend(getattr(net, name))
        elif net.HasField(name):
            setattr(saved, name, getattr(net, name))
    for index in kept:
        saved.layers.add().CopyFrom(_upgrade_layer(net.layers[index], index, dropped))
    net.CopyFrom(saved)
    return kept, dropped


def _fail(message, index, name, fix):
    error = InputError(message, layer=name or None, fix=fix)
    error.layer_index = index
    return error


def fold_padding(net):
    """UpgradeV0PaddingLayers: a padding layer's pad moves into the conv/pool it feeds, which then
    reads the padding layer's bottom. Edits `net.layers` in place; returns the non-padding indices."""
    producer = {name: None for name in net.input}  # blob -> index of the last layer writing it
    kept = []
    for i, connection in enumerate(net.layers):
        v0 = connection.layer
        if v0.type != "padding":
            kept.append(i)
        for j, blob in enumerate(connection.bottom):
            if blob not in producer:
                raise _fail(f"bottom '{blob}' is not a top of any earlier layer or a net input",
                            i, v0.name, "check the bottom's spelling and the layer order")
            source = producer[blob]
            if source is None or net.layers[source].layer.type != "padding":
                continue
            _check_padding_use(net.layers[source], connection, i)
            v0.pad = net.layers[source].layer.pad
            connection.bottom[j] = net.layers[source].bottom[0]
        for blob in connection.top:
            producer[blob] = i
    return kept


def _check_padding_use(padding, connection, index):
    name = connection.layer.name
    fix = "give the conv or pool layer a `pad` instead of the padding layer"
    if connection.layer.type not in ("conv", "pool"):
        raise _fail(f"a V0 padding layer ('{padding.layer.name}') feeds this '{connection.layer.type}' "
                    "layer; Caffe folds padding only into conv and pool layers", index, name, fix)
    if len(connection.bottom) != 1:
        raise _fail("a layer fed by a V0 padding layer must have one bottom", index, name, fix)
    if len(padding.bottom) != 1 or len(padding.top) != 1:
        raise _fail(f"the V0 padding layer '{padding.layer.name}' must have one bottom and one top",
                    index, name, fix)


def _upgrade_layer(connection, index, dropped):
    """UpgradeV0LayerParameter: one V0 layer (inside its V1 connection) as a V1 layer; the fields
    its type does not own are appended to `dropped`."""
    v1 = type(connection)()
    v1.bottom.extend(connection.bottom)
    v1.top.extend(connection.top)
    v0 = connection.layer
    if not connection.HasField("layer"):
        raise _fail("this layer is in V1 form in a net of V0 layers; Caffe's V0 upgrade keeps only "
                    "its bottoms and tops", index, connection.name,
                    "write every layer in one form (V0 `layers { layer { ... } }` or V1)")
    if v0.HasField("name"):
        v1.name = v0.name
    if not v0.HasField("type") or v0.type not in V0_TYPES:
        raise _fail(f"unknown V0 layer type '{v0.type}'", index, v0.name,
                    "V0 types are " + ", ".join(sorted(V0_TYPES)))
    v1.type = v1.DESCRIPTOR.fields_by_name["type"].enum_type.values_by_name[V0_TYPES[v0.type]].number
    for blob in v0.blobs:
        v1.blobs.add().CopyFrom(blob)
    v1.blobs_lr.extend(v0.blobs_lr)
    v1.weight_decay.extend(v0.weight_decay)
    given = {field.name: (field, value) for field, value in v0.ListFields()}
    for name, targets in V0_FIELDS.items():  # in Caffe's order
        if name not in given:
            continue
        target = targets if isinstance(targets, str) else targets.get(v0.type)
        if target is None:
            dropped.append(Dropped(v0.name, name, v0.type))
        else:
            _assign(v1, target, *given[name])
    return v1


def _assign(v1, path, field, value):
    """Set the V1 field at dotted `path` to the V0 `field`'s value: append, copy or set, as its kind needs."""
    *parents, leaf = path.split(".")
    message = v1
    for name in parents:
        message = getattr(message, name)
    target = message.DESCRIPTOR.fields_by_name[leaf]
    if target.enum_type is not None:
        value = target.enum_type.values_by_name[field.enum_type.values_by_number[value].name].number
    if target.is_repeated:
        getattr(message, leaf).append(value)
    elif target.message_type is not None:
        getattr(message, leaf).CopyFrom(value)
    else:
        setattr(message, leaf, value)
