"""How fast protoaudit is, measured rather than assumed (SPEC, "Targets": speed).

Run from the repository root:

    /work/.venv/bin/python bench/bench.py            # everything, 5 repeats
    /work/.venv/bin/python bench/bench.py -r 3 -k cli  # only cases whose name contains "cli"

It writes the synthetic nets it needs to a temporary folder (a 10,000-layer V2 net of residual
conv/BatchNorm/Scale/ReLU blocks whose sums make Caffe insert splits, with TRAIN and TEST inputs so
the default audit builds both nets; and a 10,000-layer V1 net that the upgrade has to rewrite),
adds the largest corpus nets when /work/shared/corpus/nets is there, and times with
time.perf_counter: the whole CLI as a user runs it (a fresh interpreter, import included), the CLI
in-process, and the library steps one by one. It prints the median and the minimum of the repeats.
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
from protoaudit import cli, load, nets  # noqa: E402
from protoaudit.fit import check_fit  # noqa: E402
from protoaudit.memory import net_buffers  # noqa: E402
from protoaudit.net import build  # noqa: E402
from protoaudit.upgrade import upgrade  # noqa: E402

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
    """Seconds per call, `repeats` times (after one untimed warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def quiet_cli(argv):
    def run():
        with contextlib.redirect_stdout(io.StringIO()):
            status = cli.main(argv)
        if status not in (0, 1):
            raise RuntimeError(f"protoaudit {' '.join(argv)} exited {status}")
    return run


def fresh_cli(argv):
    def run():
        env = dict(os.environ, PYTHONPATH=ROOT)
        done = subprocess.run([sys.executable, "-m", "protoaudit", *argv], capture_output=True, text=True, env=env)
        if done.returncode not in (0, 1):
            raise RuntimeError(f"protoaudit {' '.join(argv)} exited {done.returncode}: {done.stderr}")
    return run


def library_cases(label, path, upgrade_too):
    """The library's steps on one file: each is timed on its own, its inputs made beforehand."""
    spec = nets.net_specs(path)[0]
    net = build(spec.param, spec.state, schema=spec.schema.name, lines=spec.lines, path=path)
    cases = [(f"{label}: load (parse)", lambda: load.load(path))]
    if upgrade_too:
        src = load.load(path)
        fresh = []

        def do_upgrade():
            upgrade(fresh.pop(), src.schema, [])

        def make_copies(n):
            for _ in range(n):
                m = type(src.message)()
                m.CopyFrom(src.message)
                fresh.append(m)
        cases.append((f"{label}: upgrade", (do_upgrade, make_copies)))
    cases += [
        (f"{label}: net_specs (load + upgrade)", lambda: nets.net_specs(path)),
        (f"{label}: build (Net::Init)", lambda: build(spec.param, spec.state, schema=spec.schema.name,
                                                      lines=spec.lines, path=path)),
        (f"{label}: memory (net_buffers)", lambda: net_buffers(net)),
        (f"{label}: audit()", lambda: run_audit(path)),
        (f"{label}: fit search", lambda: _fit(path)),
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
    cases = []
    files = [("10k V2", big, False), ("10k V1", v1, True)]
    for name in CORPUS_NETS:
        path = os.path.join(CORPUS, name)
        if os.path.exists(path):
            files.insert(0, (name.removesuffix(".prototxt"), path, False))
        else:
            print(f"(skipped {name}: not found in {CORPUS})")
    for label, path, _ in files:
        cases.append((f"{label}: CLI, fresh process", fresh_cli([path])))
        cases.append((f"{label}: CLI in-process", quiet_cli([path])))
        cases.append((f"{label}: CLI --caffe-log", quiet_cli([path, "--caffe-log"])))
        cases.append((f"{label}: CLI --gpu-mem 4G", quiet_cli([path, "--gpu-mem", "4G"])))
    for label, path, upgrade_too in files:
        if not only or any(o in label for o in only):
            cases += library_cases(label, path, upgrade_too)
    return [c for c in cases if not only or any(o in c[0] for o in only)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-r", "--repeat", type=int, default=5)
    p.add_argument("-k", "--only", action="append", default=[], help="run cases whose name contains this")
    args = p.parse_args(argv)
    print(f"python {sys.version.split()[0]}, {args.repeat} repeats (after a warm-up); seconds")
    print(f"{'case':52s} {'median':>8s} {'min':>8s}")
    with tempfile.TemporaryDirectory() as folder:
        for name, fn in all_cases(folder, args.only):
            if isinstance(fn, tuple):  # a step that consumes its input: make fresh inputs first
                step, prepare = fn
                prepare(args.repeat + 1)
                fn = step
            times = timed(fn, args.repeat)
            print(f"{name:52s} {statistics.median(times):8.3f} {min(times):8.3f}", flush=True)


if __name__ == "__main__":
    main()
