"""Caffe's Net::Init log lines, as `caffe train` prints them, so users can hold them against theirs."""


def shape_string(shape):
    """Blob::shape_string: the dimensions, then the count in parentheses."""
    n = 1
    for d in shape:
        n *= d
    return "".join(f"{d} " for d in shape) + f"({n})"


def caffe_log(net, memory_per_layer=True, four_axes=False, died=None):
    """The lines Caffe logs while it sets up `net`, layer by layer; where `memory_per_layer` is false,
    the memory once, after the net is done, as Caffe logged it before 2015's per-layer lines; with
    `four_axes`, every blob of four axes, as the Caffe of 2014 had them. `died`: (layers set up, the
    Failure) of a run in the log that died setting the net up: its lines end there, with why."""
    lines = [f"Net {net.name or '(unnamed)'}, phase {net.phase}: {net.path}"]
    for blob_index in net.inputs:
        blob = net.blobs[blob_index]
        lines.append(f"Input {net.inputs.index(blob_index)} -> {blob.name}")
    for k, layer in enumerate(net.layers):
        if died is not None and k == died[0]:
            return lines + [f"Caffe stopped here, the log's line {died[1].line}: {died[1].message}"]
        lines.append(f"Creating Layer {layer.name}")
        for index in layer.bottoms:
            lines.append(f"{layer.name} <- {net.blobs[index].name}")
        for index, in_place in zip(layer.tops, layer.in_place):
            lines.append(f"{layer.name} -> {net.blobs[index].name}" + (" (in-place)" if in_place else ""))
        for inner in layer.impl.inner_nets(layer):  # built in the layer's setup, before "Setting up"
            lines += caffe_log(inner, memory_per_layer, four_axes)
        lines.append(f"Setting up {layer.name}")
        for shape, weight in zip(layer.top_shapes, layer.loss_weights):
            lines.append(f"Top shape: {shape_string(tuple(shape) + (1,) * (4 - len(shape)) if four_axes else shape)}")
            if weight:
                lines.append(f"    with loss weight {weight:g}")
        if memory_per_layer:
            lines.append(f"Memory required for data: {layer.memory_after}")
    for layer in reversed(net.layers):
        verdict = "needs" if layer.need_backward else "does not need"
        lines.append(f"{layer.name} {verdict} backward computation.")
    lines.append("Network initialization done.")
    if not memory_per_layer and net.layers:
        lines.append(f"Memory required for data: {net.memory_required_for_data}")
    return lines
