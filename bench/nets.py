"""The synthetic nets the benchmarks audit, written the same way every time (no randomness).

    python bench/nets.py 10000 big.prototxt          # a V2 residual net of about 10,000 layers
    python bench/nets.py 10000 big_v1.prototxt --v1  # the same kind of net in the V1 format
    python bench/nets.py 100000 chain.prototxt --chain  # a chain of convolutions, each with an in-place ReLU

`residual_v2(n)`: conv/BatchNorm/Scale/ReLU residual blocks whose Eltwise sums make Caffe insert
splits, with a TRAIN and a TEST input (batch 32 and 10), so the default audit holds a train net and
a test net; a classifier, a loss and a TEST accuracy. `residual_v1(n)`: conv/ReLU blocks in the V1
format (`layers`, enum types, blobs_lr, net-level input), which the upgrade rewrites. `chain(n)`:
one net (no phase rules) of Convolutions each followed by an in-place ReLU, the net the output
formats are measured on: one net's report, every layer with a parameter and a column buffer.
"""
import argparse


def residual_v2(n_layers):
    """A V2 net of about `n_layers` layers: 9 per residual block (conv, BN, Scale, ReLU, conv, BN,
    Scale, Eltwise, ReLU), with a TRAIN and a TEST input, a classifier, a loss and a TEST accuracy."""
    out = ['name: "synthetic_resnet"']
    for phase, batch in (("TRAIN", 32), ("TEST", 10)):
        out.append(f'layer {{ name: "data" type: "Input" top: "data" top: "label" include {{ phase: {phase} }}\n'
                   f'  input_param {{ shape {{ dim: {batch} dim: 16 dim: 8 dim: 8 }} shape {{ dim: {batch} }} }} }}')
    out.append(_conv_v2("stem", "data", "x0") + _bn_v2("stem", "x0") + _relu_v2("stem_relu", "x0"))
    blocks = max(1, (n_layers - 8) // 9)
    for b in range(blocks):
        x, a, y = f"x{b}", f"b{b}a", f"x{b + 1}"
        out.append(_conv_v2(f"b{b}_conv1", x, a) + _bn_v2(f"b{b}_1", a) + _relu_v2(f"b{b}_relu1", a)
                   + _conv_v2(f"b{b}_conv2", a, f"b{b}b") + _bn_v2(f"b{b}_2", f"b{b}b")
                   + f'layer {{ name: "b{b}_sum" type: "Eltwise" bottom: "{x}" bottom: "b{b}b" top: "{y}" }}\n'
                   + _relu_v2(f"b{b}_relu2", y))
    x = f"x{blocks}"
    out.append(f'layer {{ name: "fc" type: "InnerProduct" bottom: "{x}" top: "fc" inner_product_param {{ num_output: 10 }} }}\n'
               'layer { name: "loss" type: "SoftmaxWithLoss" bottom: "fc" bottom: "label" top: "loss" }\n'
               'layer { name: "accuracy" type: "Accuracy" bottom: "fc" bottom: "label" top: "accuracy" '
               'include { phase: TEST } }')
    return "\n".join(out) + "\n"


def _conv_v2(name, bottom, top):
    return (f'layer {{ name: "{name}" type: "Convolution" bottom: "{bottom}" top: "{top}"\n'
            '  param { lr_mult: 1 decay_mult: 1 }\n'
            '  convolution_param { num_output: 16 kernel_size: 3 pad: 1 stride: 1 bias_term: false '
            'weight_filler { type: "msra" } } }\n')


def _bn_v2(name, blob):
    return (f'layer {{ name: "{name}_bn" type: "BatchNorm" bottom: "{blob}" top: "{blob}" }}\n'
            f'layer {{ name: "{name}_scale" type: "Scale" bottom: "{blob}" top: "{blob}" '
            'scale_param { bias_term: true } }\n')


def _relu_v2(name, blob):
    return f'layer {{ name: "{name}" type: "ReLU" bottom: "{blob}" top: "{blob}" }}\n'


def residual_v1(n_layers):
    """The same kind of net in the V1 format (`layers`, enum types, blobs_lr, net-level input):
    5 layers per block (conv, ReLU, conv, Eltwise, ReLU), as V1 had no BatchNorm."""
    out = ['name: "synthetic_resnet_v1"', 'input: "data"', 'input_dim: 32', 'input_dim: 16',
           'input_dim: 8', 'input_dim: 8', 'input: "label"', 'input_dim: 32', 'input_dim: 1',
           'input_dim: 1', 'input_dim: 1']
    blocks = max(1, (n_layers - 3) // 5)
    out.append(_conv_v1("stem", "data", "x0") + _relu_v1("stem_relu", "x0"))
    for b in range(blocks):
        x, a, y = f"x{b}", f"b{b}a", f"x{b + 1}"
        out.append(_conv_v1(f"b{b}_conv1", x, a) + _relu_v1(f"b{b}_relu1", a)
                   + _conv_v1(f"b{b}_conv2", a, f"b{b}b")
                   + f'layers {{ name: "b{b}_sum" type: ELTWISE bottom: "{x}" bottom: "b{b}b" top: "{y}" }}\n'
                   + _relu_v1(f"b{b}_relu2", y))
    out.append(f'layers {{ name: "fc" type: INNER_PRODUCT bottom: "x{blocks}" top: "fc" blobs_lr: 1 blobs_lr: 2 '
               'inner_product_param { num_output: 10 } }\n'
               'layers { name: "loss" type: SOFTMAX_LOSS bottom: "fc" bottom: "label" top: "loss" }')
    return "\n".join(out) + "\n"


def _conv_v1(name, bottom, top):
    return (f'layers {{ name: "{name}" type: CONVOLUTION bottom: "{bottom}" top: "{top}" blobs_lr: 1 blobs_lr: 2 '
            'weight_decay: 1 weight_decay: 0 convolution_param { num_output: 16 kernel_size: 3 pad: 1 } }\n')


def _relu_v1(name, blob):
    return f'layers {{ name: "{name}" type: RELU bottom: "{blob}" top: "{blob}" }}\n'


def chain(n_layers):
    """An Input, Convolution and in-place ReLU by turns, and a loss: `n_layers` layers (odd)."""
    out = ['name: "synthetic_chain"',
           'layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 8 dim: 16 dim: 8 dim: 8 } } }']
    x = "data"
    for i in range((n_layers - 2) // 2):
        out.append(f'layer {{ name: "conv{i}" type: "Convolution" bottom: "{x}" top: "c{i}"\n'
                   '  convolution_param { num_output: 16 kernel_size: 3 pad: 1 } }\n'
                   f'layer {{ name: "relu{i}" type: "ReLU" bottom: "c{i}" top: "c{i}" }}')
        x = f"c{i}"
    out.append(f'layer {{ name: "loss" type: "EuclideanLoss" bottom: "{x}" bottom: "data" top: "loss" }}')
    return "\n".join(out) + "\n"


def write(path, n_layers, v1=False, kind=None):
    with open(path, "w") as f:
        f.write((chain if kind == "chain" else residual_v1 if v1 else residual_v2)(n_layers))
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("layers", type=int)
    p.add_argument("out")
    p.add_argument("--v1", action="store_true", help="the V1 format")
    p.add_argument("--chain", action="store_true", help="a chain of convolutions and in-place ReLUs, one net")
    args = p.parse_args()
    write(args.out, args.layers, args.v1, "chain" if args.chain else None)


if __name__ == "__main__":
    main()
