"""Hold protoaudit against real Caffe's measured bytes (the oracle), run by run.

    python bench/oracle_sweep.py [ORACLE_DIR] [--only SUBSTR] [-v]

For every run in measurements.tsv: protoaudit's CPU-mode, solver-less total for the exact net Caffe
built, against `backward_live` (bytes held after one forward and one backward). With -v, the
per-layer forward/backward bytes of the first runs that differ, against the run's JSON.
"""
import argparse
import csv
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from protoaudit.audit import build_nets  # noqa: E402
from protoaudit.memory.buffers import host_objects, net_buffers, runs_backward  # noqa: E402

DEFAULT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "oracle")


def predict(path, phase, stages):
    net = build_nets(path, phase=phase, stages=stages)[0]
    buffers = net_buffers(net, mode="cpu", backward=runs_backward(net)) + [host_objects(net)]
    return net, buffers


def per_layer(buffers):
    table = {}
    for b in buffers:
        row = table.setdefault(b.layer, {"forward": 0, "backward": 0, "setup": 0})
        row[b.touch] += b.bytes
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("oracle", nargs="?", default=DEFAULT)
    ap.add_argument("--only")
    ap.add_argument("-v", action="store_true")
    ap.add_argument("--runs", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "oracle", "runs"),
                    help="the per-layer JSON of each run, for -v")
    a = ap.parse_args()
    rows = list(csv.DictReader(open(os.path.join(a.oracle, "measurements.tsv")), delimiter="\t"))
    worst, bad, shown = 0.0, 0, 0
    residuals = []  # (Caffe - protoaudit, Caffe, run)
    for row in rows:
        run = row["run"]
        if a.only and a.only not in run:
            continue
        stages = [] if row.get("stages", "-") in ("-", "") else row["stages"].split(",")
        path = os.path.join(a.oracle, "nets", run + ".prototxt")
        try:
            net, buffers = predict(path, row["phase"].lower(), stages)
        except Exception as e:  # report and go on
            print(f"ERROR {run}: {type(e).__name__}: {e}")
            bad += 1
            continue
        got = sum(b.bytes for b in buffers)
        want = int(row["backward_live"])
        err = (got - want) / want
        ok = abs(got - want) <= max(0.005 * want, 64 * 1024)
        worst = max(worst, abs(err))
        residuals.append((want - got, want, run))
        if not ok:
            bad += 1
        if not ok or a.v:
            print(f"{'OK  ' if ok else 'FAIL'} {run}: protoaudit {got:,} caffe {want:,} ({err:+.2%})")
        if not ok and a.v and shown < 3:
            shown += 1
            detail = json.load(open(os.path.join(a.runs, run + ".json")))
            mine = per_layer(buffers)
            for layer in detail["layers"]:
                m = mine.get(layer["name"], {"forward": 0, "backward": 0})
                if m["forward"] != layer["fwd_alloc"] or m["backward"] != layer["bwd_alloc"]:
                    print(f"    {layer['name']:30s} {layer['type']:16s} fwd {m['forward']:>12,} vs {layer['fwd_alloc']:>12,}"
                          f"   bwd {m['backward']:>12,} vs {layer['bwd_alloc']:>12,}")
    print(f"worst error {worst:.3%}; {bad} outside tolerance of {len(rows)}")
    if residuals:
        errors = sorted(abs(d) / w for d, w, _ in residuals)
        big = [abs(d) / w for d, w, _ in residuals if w > 20e6]
        print(f"median {errors[len(errors) // 2]:.4%}; worst over 20 MB {max(big, default=0):.4%}; "
              f"worst absolute {max(abs(d) for d, _, _ in residuals):,} bytes")
        for d, w, run in sorted(residuals, key=lambda r: -abs(r[0]))[:5]:
            print(f"  {run}: Caffe - protoaudit = {d:+,} bytes ({d / w:+.4%})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
