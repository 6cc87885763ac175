"""How fast protoaudit is, measured rather than assumed (SPEC, "Targets": speed).

Run from the repository root:

    /work/.venv/bin/python bench/bench.py                # every file, 5 repeats
    /work/.venv/bin/python bench/bench.py -r 3 -k 10k    # only the files whose label has "10k"

It writes the nets it needs to a temporary folder: a 10,000-layer V2 net of residual
conv/BatchNorm/Scale/ReLU blocks whose sums make Caffe insert splits, with a TRAIN and a TEST
input so the default audit builds both nets, and a 10,000-layer V1 net (enum types, blobs_lr,
net-level input) that the upgrade rewrites. It adds the largest corpus nets when
/work/shared/corpus/nets is there, and skips them when not. For each file it times, with
time.perf_counter: the command as a user runs it in a new interpreter (default audit: train and
test nets, SGD, both engines' totals; --caffe-log; --gpu-mem), the command in-process, and the
library steps one by one (the parsed-file cache emptied where the step reads the file). It prints
the median and the minimum of the repeats, after a line giving the machine's speed at a plain
Python loop, so numbers from two machines can be compared.
"""
import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the tree this script is in, not whichever protoaudit is installed

from protoaudit import audit as run_audit  # noqa: E402
from protoaudit import cli  # noqa: E402
from protoaudit.read import load, netspecs as nets  # noqa: E402
from protoaudit.memory.fit import check_fit  # noqa: E402
from protoaudit.memory.buffers import net_buffers  # noqa: E402
from protoaudit.net.build import build  # noqa: E402
from protoaudit.read.upgrade import upgrade  # noqa: E402

try:
    from protoaudit.collector import paused
except ImportError:  # a tree from before the collector was paused: time it as it ran
    def paused(fn):
        return fn

CORPUS = "/work/shared/corpus/nets"
CORPUS_NETS = ("soeaver_inception_resnet_v2_deploy.prototxt", "resnet152_deploy.prototxt")
LAYERS = 10_000


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


def timed(fn, repeats):
    """Seconds per call, `repeats` times (after one untimed warm-up call), with the cycle collector
    paused as the command and audit() pause it (protoaudit.collector)."""
    fn = paused(fn)
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def unparsed(fn):
    """`fn` with protoaudit's parsed-file cache emptied first: each call reads the file anew."""
    def run():
        if hasattr(load, "_read"):  # trees from before the cache parse every time anyway
            load._read.cache_clear()
        return fn()
    return run


def in_process_cli(argv):
    def run():
        with contextlib.redirect_stdout(io.StringIO()):
            status = cli.main(argv)
        if status not in (0, 1):
            raise RuntimeError(f"protoaudit {' '.join(argv)} exited {status}")
    return unparsed(run)


def fresh_cli(argv):
    """The command as a user runs it: a new interpreter (start, imports, exit included)."""
    def run():
        env = dict(os.environ, PYTHONPATH=ROOT)
        done = subprocess.run([sys.executable, "-m", "protoaudit", *argv], capture_output=True, text=True, env=env)
        if done.returncode not in (0, 1):
            raise RuntimeError(f"protoaudit {' '.join(argv)} exited {done.returncode}: {done.stderr}")
    return run


def consuming(step, make):
    """A step that changes its input (upgrade works in place; a walk keeps each layer's touches on
    the built net): `make()` gives a fresh input for every call, made outside the timing."""
    return step, make


def library_cases(label, path, upgrade_too):
    """The library's steps on one file, each timed on its own from inputs made beforehand."""
    spec = nets.net_specs(path)[0]
    src = load.load(path)

    def fresh_message():
        m = type(src.message)()
        m.CopyFrom(src.message)
        return m

    def fresh_net():
        return build(spec.param, spec.state, schema=spec.schema.name, lines=spec.lines, path=path)

    cases = [(f"{label}: load: parse + outline", unparsed(lambda: load.load(path)))]
    if upgrade_too:
        cases.append((f"{label}: upgrade V1 -> V2", consuming(lambda m: upgrade(m, src.schema, []), fresh_message)))
    cases += [
        (f"{label}: build: Net::Init, train net", fresh_net),
        (f"{label}: memory: net_buffers, train net", consuming(net_buffers, fresh_net)),
        (f"{label}: audit(): all nets, both engines", unparsed(lambda: run_audit(path))),
        (f"{label}: audit() + largest batch (4G)", unparsed(lambda: _fit(path))),
    ]
    return cases


def _fit(path):
    result = run_audit(path)
    return check_fit(result, 4 * 2**30, lambda b: run_audit(path, batch=b, compare_engines=False))


def all_cases(folder, only):
    big = os.path.join(folder, "big.prototxt")
    v1 = os.path.join(folder, "big_v1.prototxt")
    with open(big, "w") as f:
        f.write(residual_v2(LAYERS))
    with open(v1, "w") as f:
        f.write(residual_v1(LAYERS))
    files = [("10k V2", big, False), ("10k V1", v1, True)]
    for name in reversed(CORPUS_NETS):
        path = os.path.join(CORPUS, name)
        if os.path.exists(path):
            files.insert(0, (name.removesuffix(".prototxt"), path, False))
        else:
            print(f"(skipped {name}: not found in {CORPUS})")
    cases = []
    for label, path, upgrade_too in files:
        if only and not any(o in label for o in only):
            continue
        cases += [(f"{label}: CLI (new process)", fresh_cli([path])),
                  (f"{label}: CLI --caffe-log (new process)", fresh_cli([path, "--caffe-log"])),
                  (f"{label}: CLI --gpu-mem 4G (new process)", fresh_cli([path, "--gpu-mem", "4G"])),
                  (f"{label}: CLI in-process", in_process_cli([path]))]
        cases += library_cases(label, path, upgrade_too)
    return cases


def calibration():
    """This machine's speed at plain Python: 10 million additions in a loop."""
    start = time.perf_counter()
    x = 0
    for i in range(10_000_000):
        x += i
    return time.perf_counter() - start


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-r", "--repeat", type=int, default=5)
    p.add_argument("-k", "--only", action="append", default=[], help="only the files whose label contains this")
    args = p.parse_args(argv)
    print(f"python {sys.version.split()[0]}; 10M-addition loop {calibration():.2f} s; "
          f"{args.repeat} repeats after a warm-up; seconds")
    print(f"{'case':52s} {'median':>8s} {'min':>8s}")
    with tempfile.TemporaryDirectory() as folder:
        for name, fn in all_cases(folder, args.only):
            if isinstance(fn, tuple):
                step, make = fn
                inputs = [make() for _ in range(args.repeat + 1)]
                fn = lambda: step(inputs.pop())  # noqa: E731
            times = timed(fn, args.repeat)
            print(f"{name:52s} {statistics.median(times):8.3f} {min(times):8.3f}", flush=True)


if __name__ == "__main__":
    main()
