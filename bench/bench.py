"""How fast protoaudit answers, at every size, measured rather than assumed (SPEC, "Targets": speed).

Run from the repository root:

    python bench/bench.py               # the whole table, 5 runs of each case
    python bench/bench.py -r 3 --no-100k

Every case is the command as a user runs it: a new interpreter (start, imports and exit included)
running `python -m protoaudit ...` from this tree, waited for with os.wait4, which gives that one
process's peak RSS (ru_maxrss) and CPU time beside the wall time measured around it. Each row is
the median of the runs. Cases compared with each other (protoaudit and the floor, a plain run and
a --gpu-mem run, protoaudit and real Caffe) are run interleaved, so a load that comes and goes on
the machine weighs on both alike.

The tree is byte-compiled first (compileall), as pip does when it installs a package: the floor's
protobuf is imported from its .pyc files too. (This environment sets PYTHONDONTWRITEBYTECODE, so
without that step every run would compile protoaudit's sources anew.)

Rows:
- corpus: every net of tests/data/corpus/nets and samples/ with no flags, as a new user runs them
  (those whose data shapes are in a dataset that is absent are refused in one line: that answer is
  timed too); a summary line, then the largest net (most layers) with the --define its template needs.
- the floor: a fresh Python that imports protobuf and parses the file with Caffe's schema through
  text_format.Parse (bench/floor.py), for ResNet-152's train net and for the largest corpus net.
- generated nets of 10,000 and 100,000 layers (bench/nets.py, the same every time).
- the largest-batch search: `--gpu-mem` on the 10,000-layer net against a plain run, in audits'
  worth (the ratio of the two medians), with the nets built by each (counted in-process).
- every output format (the short text answer, the text report with its table, json, csv, markdown,
  html) of a generated 100,000-layer chain (bench/nets.py --chain), one net of Convolutions and
  in-place ReLUs: `--formats` measures these rows alone.
- real Caffe (BVLC, pycaffe, CPU mode) building ResNet-152 at batch 4 and running it once forward
  and backward (bench/pycaffe_run.py), beside protoaudit on the same file, when pycaffe imports.
"""
import argparse
import contextlib
import glob
import importlib
import io
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import nets  # noqa: E402

CORPUS_DIRS = (os.path.join(ROOT, "tests", "data", "corpus", "nets"), os.path.join(ROOT, "samples"))
RESNET152_TRAIN = os.path.join(ROOT, "tests", "data", "corpus", "nets", "imagenet_resnet152_ethanhe_train.prototxt")
CAFFE_NET = os.path.join(ROOT, "tests", "data", "oracle", "nets", "resnet152_deploy__TRAIN__b4__fb.prototxt")
# A BVLC Caffe build with pycaffe (the oracle's kit, /work/shared/oracle/kit): its venv's python and
# its python/ folder. Override with --caffe DIR (a folder holding venv/ and bvlc/python/).
CAFFE_HOMES = ("/work/caffe/hostobj", "/work/caffe/bvlc", "/work/caffe/oracle")
# A template the largest corpus net is written for (DeepLab's scripts fill it with sed): PASCAL VOC's 21 labels.
DEFINES = {"NUM_LABELS": "21"}
GPU_MEM = "11G"  # the card of the largest-batch search (a GTX 1080 Ti): the 10,000-layer net fits batch 32 and more

TARGETS = {
    "resnet152": 2.0,  # x the floor
    "10k": 1.5,  # seconds
    "100k": 15.0,  # seconds
    "100k_rss": 1024,  # MiB
    "formats_rss": 500,  # MiB: every output format of the 100,000-layer chain
    "search": 1.2,  # audits' worth
    "caffe": 40.0,  # x faster than real Caffe
}


class Run:
    """One finished process: wall seconds, CPU seconds (user + system), peak RSS in MiB, exit status."""

    def __init__(self, wall, cpu, rss, status, err=""):
        self.wall, self.cpu, self.rss, self.status, self.err = wall, cpu, rss, status, err


def run(argv, env=None, cwd=ROOT):
    """Run `argv` in a new process; its own rusage comes from os.wait4."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=cwd)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - start
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode(errors="replace")
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, p.returncode, text)


def protoaudit(*args):
    return [sys.executable, "-m", "protoaudit", *args]


def floor(path):
    return [sys.executable, os.path.join(HERE, "floor.py"), path]


def interleaved(commands, repeats):
    """Each command (argv, or (argv, env)) `repeats` times, in turns (a, b, a, b, ...): {name: [Run]}."""
    out = {name: [] for name in commands}
    for _ in range(repeats):
        for name, argv in commands.items():
            argv, env = argv if isinstance(argv, tuple) else (argv, None)
            r = run(argv, env=env)
            if r.status not in (0, 1, 2):
                raise SystemExit(f"{' '.join(argv)} exited {r.status}: {r.err.strip()[-500:]}")
            out[name].append(r)
    return out


def median(runs, what="wall"):
    return statistics.median(getattr(r, what) for r in runs)


def layers_in(path):
    with open(path, errors="replace") as f:
        return len(re.findall(r"^\s*layers?\s*\{", f.read(), re.MULTILINE))


def corpus_files():
    return sorted(f for d in CORPUS_DIRS for f in glob.glob(os.path.join(d, "*.prototxt")))


def defines_for(path):
    with open(path, errors="replace") as f:
        text = f.read()
    return [a for name, value in DEFINES.items() if "${" + name + "}" in text for a in ("--define", f"{name}={value}")]


def nets_built(argv):
    """How many nets protoaudit builds (Net::Init's work, protoaudit.net.build.build) for `argv`, counted in-process."""
    sys.path.insert(0, ROOT)
    from protoaudit import cli

    module = importlib.import_module("protoaudit.audit")  # (the module: the package's `audit` is the function)
    built = module.build
    calls = []

    def counting(*a, **k):
        calls.append(1)
        return built(*a, **k)

    module.build = counting
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            cli.main(argv)
    finally:
        module.build = built
    return len(calls)


def find_caffe(home):
    """(python, its env) of a Caffe build whose pycaffe imports, or None."""
    homes = [home] if home else CAFFE_HOMES
    for h in homes:
        python, package = os.path.join(h, "venv", "bin", "python"), os.path.join(h, "bvlc", "python")
        if not (os.path.exists(python) and os.path.isdir(os.path.join(package, "caffe"))):
            continue
        env = dict(os.environ, PYTHONPATH=package, GLOG_minloglevel="2")
        if subprocess.run([python, "-c", "import caffe"], env=env, capture_output=True).returncode == 0:
            return python, env
    return None


FORMATS = {"text (short answer)": [], "text --table": ["--table"], "json": ["--format", "json"],
           "csv": ["--format", "csv"], "markdown": ["--format", "markdown"], "html": ["--format", "html"]}


def formats(repeats, layers=100_000):
    """Each output format of the generated chain, interleaved: whether each is within its RSS target."""
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        chain = nets.write(os.path.join(folder, "chain.prototxt"), layers, kind="chain")
        runs = interleaved({name: protoaudit(chain, *flags) for name, flags in FORMATS.items()}, repeats)
        for name, done in runs.items():
            seconds, rss = median(done), max(x.rss for x in done)
            met = rss <= TARGETS["formats_rss"]
            ok &= met
            row(f"generated {layers:,}-layer chain: {name}", f"{seconds:.1f} s, {rss:.0f}", " MiB",
                f"<= {TARGETS['formats_rss']} MiB", met, detail=f"CPU {median(done, 'cpu'):.1f} s")
    return ok


def row(case, value, unit, target=None, met=None, detail=""):
    mark = "" if met is None else ("yes" if met else "NO")
    target = "" if target is None else target
    print(f"| {case} | {value}{unit} | {target} | {mark} | {detail} |", flush=True)


def loop_seconds():
    """This machine's speed at plain Python: 10 million additions in a loop."""
    start = time.perf_counter()
    x = 0
    for i in range(10_000_000):
        x += i
    return time.perf_counter() - start


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-r", "--repeat", type=int, default=5, help="runs of each case (the 100,000-layer net: at most 3)")
    p.add_argument("--no-100k", action="store_true", help="leave out the 100,000-layer net (a minute a run)")
    p.add_argument("--no-corpus", action="store_true", help="leave out the per-net corpus summary")
    p.add_argument("--formats", action="store_true", help="only every output format of the 100,000-layer chain")
    p.add_argument("--caffe", metavar="DIR", help="a Caffe build with pycaffe (DIR/venv/bin/python, DIR/bvlc/python)")
    args = p.parse_args(argv)
    r = args.repeat
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(ROOT, "protoaudit")], check=True)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; a 10M-addition Python loop: {loop_seconds():.2f} s")
    print(f"median of {r} fresh-process runs (wall seconds; CPU seconds and peak RSS beside)\n")
    print("| case | measured | target | met | detail |")
    print("|---|---:|---|---|---|")
    ok = True
    if args.formats:
        ok = formats(min(r, 3))
        print("\nevery target met" if ok else "\nsome targets NOT met")
        return 0 if ok else 1

    # the corpus, as a new user runs it, then its largest net
    files = corpus_files()
    largest = max(files, key=layers_in)
    if not args.no_corpus:
        per_net = {f: interleaved({"a": protoaudit(f)}, max(1, r // 2))["a"] for f in files}
        walls = sorted((median(runs), f) for f, runs in per_net.items())
        audited = sum(1 for runs in per_net.values() if runs[0].status in (0, 1))
        worst_rss = max((max(x.rss for x in runs), f) for f, runs in per_net.items())
        row(f"corpus: {len(files)} nets, no flags ({audited} audited, {len(files) - audited} refused in one line)",
            f"{statistics.median(w for w, _ in walls):.2f}", " s median",
            detail=f"slowest {walls[-1][0]:.2f} s ({os.path.basename(walls[-1][1])}); "
            f"largest peak RSS {worst_rss[0]:.0f} MiB ({os.path.basename(worst_rss[1])})")

    # ResNet-152's train net and the largest corpus net, each beside its floor
    for label, path, target in (("ResNet-152 train net", RESNET152_TRAIN, TARGETS["resnet152"]),
                                (f"largest corpus net ({os.path.basename(largest)}, {layers_in(largest)} layers)",
                                 largest, None)):
        runs = interleaved({"pa": protoaudit(path, *defines_for(path)), "floor": floor(path)}, r)
        ratio = median(runs["pa"]) / median(runs["floor"])
        met = ratio <= target if target else None
        ok &= met is not False
        row(f"{label}: default audit", f"{median(runs['pa']):.3f}", " s",
            detail=f"floor {median(runs['floor']):.3f} s; CPU {median(runs['pa'], 'cpu'):.3f} s, "
            f"floor CPU {median(runs['floor'], 'cpu'):.3f} s; {max(x.rss for x in runs['pa']):.0f} MiB")
        row(f"{label}: x the floor", f"{ratio:.2f}", "x", f"<= {target}x" if target else "", met,
            detail=f"CPU: {median(runs['pa'], 'cpu') / median(runs['floor'], 'cpu'):.2f}x")

    with tempfile.TemporaryDirectory() as folder:
        big = nets.write(os.path.join(folder, "big10k.prototxt"), 10_000)
        runs = interleaved({"plain": protoaudit(big), "search": protoaudit(big, "--gpu-mem", GPU_MEM)}, r)
        plain, search = median(runs["plain"]), median(runs["search"])
        met = plain <= TARGETS["10k"]
        ok &= met
        row("generated 10,000-layer net: default audit", f"{plain:.2f}", " s", f"<= {TARGETS['10k']} s", met,
            detail=f"CPU {median(runs['plain'], 'cpu'):.2f} s; {max(x.rss for x in runs['plain']):.0f} MiB")
        worth = search / plain
        met = worth <= TARGETS["search"]
        ok &= met
        row(f"--gpu-mem {GPU_MEM} largest-batch search, 10,000-layer net", f"{worth:.2f}", " audits' worth",
            f"<= {TARGETS['search']}", met,
            detail=f"{search:.2f} s against {plain:.2f} s; nets built: {nets_built([big])} plain, "
            f"{nets_built([big, '--gpu-mem', GPU_MEM])} with the search")

        if not args.no_100k:
            huge = nets.write(os.path.join(folder, "big100k.prototxt"), 100_000)
            runs = interleaved({"plain": protoaudit(huge)}, min(r, 3))["plain"]
            seconds, rss = median(runs), max(x.rss for x in runs)
            met = seconds <= TARGETS["100k"] and rss <= TARGETS["100k_rss"]
            ok &= met
            row(f"generated 100,000-layer net ({os.path.getsize(huge) / 2**20:.1f} MiB): default audit",
                f"{seconds:.1f} s, {rss:.0f}", " MiB", f"<= {TARGETS['100k']:.0f} s, <= {TARGETS['100k_rss']} MiB",
                met, detail=f"CPU {median(runs, 'cpu'):.1f} s")

    caffe = find_caffe(args.caffe)
    if caffe is None:
        row("real Caffe, ResNet-152 b4 forward and backward", "pycaffe not found", "", f">= {TARGETS['caffe']:.0f}x")
    else:
        python, env = caffe
        runs = interleaved({"caffe": ([python, os.path.join(HERE, "pycaffe_run.py"), CAFFE_NET], env),
                            "pa": protoaudit(CAFFE_NET)}, min(r, 3))
        mine = runs["pa"]
        ratio = median(runs["caffe"]) / median(mine)
        met = ratio >= TARGETS["caffe"]
        ok &= met
        row("real Caffe (pycaffe, CPU) building ResNet-152 b4, forward and backward, against protoaudit on it",
            f"{ratio:.0f}", "x", f">= {TARGETS['caffe']:.0f}x", met,
            detail=f"Caffe {median(runs['caffe']):.1f} s, {max(x.rss for x in runs['caffe']):.0f} MiB; "
            f"protoaudit {median(mine):.3f} s, {max(x.rss for x in mine):.0f} MiB")
    print("\nevery target met" if ok else "\nsome targets NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
