"""Bring a net to the current (V2) format, as Caffe's UpgradeNetAsNeeded does before building it."""


def upgrade(net, schema):
    """Upgrade `net` (a NetParameter of `schema`) in place, in Caffe's order; returns it."""
    if schema.has_message("InputParameter"):
        upgrade_input(net)
    upgrade_batch_norm(net)
    return net


def upgrade_input(net):
    """Net-level `input` + `input_shape`/`input_dim` become one Input layer named "input", first."""
    if not net.input:
        return
    if net.input_shape or net.input_dim:
        layer = net.layer.add()
        layer.name = "input"
        layer.type = "Input"
        for i, top in enumerate(net.input):
            layer.top.append(top)
            shape = layer.input_param.shape.add()
            if net.input_shape:
                shape.CopyFrom(net.input_shape[i])
            else:
                shape.dim.extend(net.input_dim[4 * i : 4 * i + 4])
        net.layer.insert(0, _copy(layer))
        del net.layer[-1]
    del net.input[:]
    del net.input_shape[:]
    del net.input_dim[:]


def _copy(message):
    clone = type(message)()
    clone.CopyFrom(message)
    return clone


def upgrade_batch_norm(net):
    """Old BatchNorm definitions declared three params; Caffe zeroes their lr_mult and decay_mult."""
    for layer in net.layer:
        if layer.type == "BatchNorm" and len(layer.param) == 3:
            for spec in layer.param:
                spec.lr_mult = 0.0
                spec.decay_mult = 0.0
