"""Layers TensorFlow's own CPU kernels cannot train in channels_first, where the step then fails.

Without oneDNN (TF_ENABLE_ONEDNN_OPTS=0, how protoaudit's CPU figures are measured, and any build
without it), some gradient and pooling kernels take NHWC/NDHWC only. Tried on TensorFlow 2.21 (CPU, one
step of train_on_batch on a layer in channels_first, both flavours): the messages below are the kernels'
own. Keras 3 transposes channels_first pooling and 3-D convolutions itself, so fewer of its layers stop.
With oneDNN, TensorFlow's default on x86, every one of them trained.
"""
BACKPROP_FILTER = "Conv2DCustomBackpropFilterOp only supports NHWC."
BACKPROP_INPUT = "Conv2DCustomBackpropInputOp only supports NHWC."

STOPS = {
    "tf_keras": {
        "Conv1D": BACKPROP_FILTER, "Conv2D": BACKPROP_FILTER,
        "Conv3D": "Conv3DBackpropFilterOpV2 only supports NDHWC on the CPU.",
        "SeparableConv2D": BACKPROP_INPUT,
        "MaxPooling2D": "Default MaxPoolingOp only supports NHWC on device type CPU",
        "AveragePooling2D": "Default AvgPoolingOp only supports NHWC on device type CPU",
    },
    "keras3": {"Conv1D": BACKPROP_FILTER, "Conv2D": BACKPROP_FILTER, "Conv2DTranspose": BACKPROP_INPUT},
}


def cpu_stops(graph, flavour):
    """[(layer name, the kernel's message)] of the layers in channels_first whose kernels TensorFlow's CPU
    build without oneDNN refuses, each layer once."""
    stops = STOPS.get(flavour, {})
    out, seen = [], set()
    for node in graph.nodes:
        layer = node.layer
        kind = type(layer).__name__  # the registry's class of each alias (Convolution2D: Conv2D)
        if kind in stops and layer.config.get("data_format") == "channels_first" and layer.name not in seen:
            seen.add(layer.name)
            out.append((layer.name, stops[kind]))
    return out
