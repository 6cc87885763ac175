"""Write what the device script (bench/gpu/measure.py) allocates and asks cuDNN about, into
tests/data/gpu_measured, beside what it measured.

- convs.json: for each net, audited in GPU mode with the cuDNN engine, every convolution cuDNN runs,
  with its bottom and top shapes, kernel, stride, pad and group.
- buffers.json: for each net, the size of every device buffer protoaudit lists, one cudaMalloc each.

The shapes are protoaudit's (checked against real Caffe's on the same nets by tests/test_oracle.py);
what cuDNN asks for and what the driver takes for them are what the device measures. Run from the
repository root:

    python bench/gpu/inputs.py
"""
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

import protoaudit  # noqa: E402
from protoaudit.layers.base import CUDNN_2015_FORKS  # noqa: E402

ORACLE = os.path.join(os.path.dirname(ROOT), "shared", "oracle")
NETS = [  # (label, path relative to the repository root or the oracle, batch): the oracle's batches
    ("resnet50_b1", "oracle:nets/resnet50_deploy__TRAIN__b1__fb.prototxt", None),
    ("resnet50_b4", "oracle:nets/resnet50_deploy__TRAIN__b4__fb.prototxt", None),
    ("segnet_seed001_old_b4", "samples/segnet_seed001_old.prototxt", 4),
    ("segnet_seed001_new_b1", "samples/segnet_seed001_new.prototxt", 1),
]


def _path(name):
    if name.startswith("oracle:"):
        return os.path.join(ORACLE, name[len("oracle:"):])
    return os.path.join(ROOT, name)


def convolutions(path, batch):
    """The cuDNN convolutions of `path`'s first net, as the device script reads them."""
    options = {"mode": "gpu", "engine": "cudnn"}
    if batch is not None:
        options["batch"] = batch
    audit = protoaudit.audit(path, **options)
    net = audit.nets[0]
    cudnn = {b.owner for b in net.buffers if b.kind == "workspace"}
    out = []
    for node in net.net.layers:
        if f"{node.name}.workspace" not in cudnn:  # a layer cuDNN does not run
            continue
        geo, channels, num_output, group = node.impl._setup(node.bottom_shapes)
        out.append({
            "layer": node.name, "type": node.type, "bottom": list(node.bottom_shapes[0]),
            "top": list(node.top_shapes[0]), "kernel": list(geo.kernel), "stride": list(geo.stride),
            "pad": list(geo.pad), "dilation": list(geo.dilation), "group": group, "num_output": num_output,
        })
    # caffe-segnet's cuDNN v2 layer picks its forward algorithm under kh*kw*C_in ints; BVLC's picks all
    # three under 8 MiB (protoaudit.layers.conv)
    rule = "2015" if net.net.schema in CUDNN_2015_FORKS else "bvlc"
    return {"schema": net.net.schema, "rule": rule, "convs": out}


def device_buffers(path, batch, engine):
    """Every cudaMalloc Caffe makes for `path` in GPU mode as protoaudit audits it by default (the
    nets' device buffers, then the solver's state), in bytes, in the audit's order."""
    options = {"mode": "gpu", "engine": engine} if batch is None else {"mode": "gpu", "engine": engine, "batch": batch}
    audit = protoaudit.audit(path, **options)
    return [b.bytes for b in audit.buffers
            if b.device == "device" and b.kind not in ("context", "cudaMalloc pages") and b.bytes > 0]


# more nets for the page rule alone: many small buffers (ResNet-110 on CIFAR),
# many mid-sized ones (SqueezeNet), a net of a few large ones (AlexNet)
MORE = [("cifar_resnet110_b4", "oracle:nets/cifar_resnet110_trainval__TRAIN__b4.prototxt", None),
        ("squeezenet_b4", "oracle:nets/squeezenet_v1.1_train_val__TRAIN__b4.prototxt", None),
        ("alexnet_b4", "oracle:nets/bvlc_alexnet_train_val__TRAIN__b4.prototxt", None),
        ("googlenet_b1", "oracle:nets/bvlc_googlenet_train_val__TRAIN__b1.prototxt", None)]


def main():
    nets = {label: convolutions(_path(name), batch) for label, name, batch in NETS}
    buffers = {f"{label}_{engine}": device_buffers(_path(name), batch, engine)
               for label, name, batch in NETS + MORE for engine in ("caffe", "cudnn") if label != "resnet50_b1"}
    for name, what in (("convs.json", nets), ("buffers.json", buffers)):
        with open(os.path.join(ROOT, "tests", "data", "gpu_measured", name), "w") as f:
            json.dump(what, f, indent=1 if name == "convs.json" else None)
    print(sum(len(n["convs"]) for n in nets.values()), "convolutions;",
          {k: (len(v), sum(v)) for k, v in buffers.items()})


if __name__ == "__main__":
    main()
