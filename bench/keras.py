"""Keras model files: a 500 MB .keras audits as fast as its config alone.

usage: python bench/keras.py [-r RUNS] [--mb 500]

Writes, in a temporary folder, ResNet50's .keras of the oracle (config only, 0.1 MB) and the same zip
with a weights member of --mb MB (stored, as Keras stores model.weights.h5), then times
`python -m protoaudit FILE --mode cpu --format json` on each in fresh processes, interleaved, and
prints each one's median wall time and peak RSS.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SOURCE = os.path.join(ROOT, "tests", "data", "keras_oracle", "shared", "models", "config_only", "resnet50_sgd.keras")


def big_copy(src, dst, megabytes):
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for item in zin.infolist():
            zout.writestr(item, zin.read(item.filename))
        with zout.open(zipfile.ZipInfo("model.weights.h5"), "w", force_zip64=True) as f:
            block = b"\0" * (1 << 20)
            for _ in range(megabytes):
                f.write(block)


def run(path):
    start = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "protoaudit", path, "--mode", "cpu", "--format", "json"],
                         cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"protoaudit failed on {path}: {p.stderr.read().decode()[-300:]}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-r", "--runs", type=int, default=5)
    ap.add_argument("--mb", type=int, default=500)
    args = ap.parse_args()
    folder = tempfile.mkdtemp()
    try:
        small = os.path.join(folder, "resnet50.keras")
        shutil.copy(SOURCE, small)
        big = os.path.join(folder, "resnet50_weights.keras")
        big_copy(SOURCE, big, args.mb)
        times = {small: [], big: []}
        for _ in range(args.runs):
            for path in (small, big):
                times[path].append(run(path))
        for path in (small, big):
            size = os.path.getsize(path) / 1e6
            wall = statistics.median(t for t, _ in times[path])
            rss = statistics.median(m for _, m in times[path])
            print(f"{os.path.basename(path):24s} {size:8.1f} MB  {wall:6.3f} s  {rss:6.1f} MiB")
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
