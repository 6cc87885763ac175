"""What --sweep costs: audits made and seconds taken, against auditing every batch.

Run from the repository root:

    python bench/sweep.py               # seed 001's nets and ResNet-152 over 1..64, 3 repeats

For each net it times protoaudit.audit(path, sweep="1..64") (the audit itself, the probes and,
where the totals bend, the audits between) and counts the audits the sweep made, then times the
plain way: one audit per batch. It prints the median of the repeats.
"""
import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # the tree this script is in, not whichever protoaudit is installed

import protoaudit  # noqa: E402
from protoaudit import library  # noqa: E402

NETS = ("samples/segnet_seed001_old.prototxt", "samples/segnet_seed001_new.prototxt",
        "tests/data/corpus/nets/resnet152_deploy.prototxt")


def timed(fn, repeats):
    times, value = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-r", "--repeats", type=int, default=3)
    p.add_argument("--batches", default="1..64")
    args = p.parse_args()
    engine_audit = library._run
    for net in NETS:
        path = os.path.join(ROOT, net)
        calls = []

        def counting(*a, **k):
            calls.append(k.get("batch"))
            return engine_audit(*a, **k)

        library._run = counting
        try:
            seconds, result = timed(lambda: protoaudit.audit(path, sweep=args.batches), args.repeats)
        finally:
            library._run = engine_audit
        audits = len(calls) // args.repeats
        batches = [r.batch for r in result.sweep.rows]

        def every_batch():
            for b in batches:
                try:
                    engine_audit(path, batch=b)
                except protoaudit.InputError:
                    pass

        plain, _ = timed(every_batch, args.repeats)
        print(f"{net}: --sweep {args.batches} ({result.sweep.how}) {seconds:.2f} s, {audits} audits; "
              f"one audit per batch: {plain:.2f} s, {len(batches)} audits")


if __name__ == "__main__":
    main()
