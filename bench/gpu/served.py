#!/usr/bin/env python3
"""The busy share a GPU serves to k co-located trials under MPS with no thread limit.

    served.py [--overhead 0.03] [--min-busy 0.5] FILE.jsonl...
        (colocate.py's rows; default: the H100's, bench/gpu/h100-*.jsonl)

The simulator's Fluid model (docs/simulator.md) runs k trials of busy intensity d (NVML's busy
share of the GPU when the trial is alone) on one GPU at the pace 1 / (T max(1, D / C_k)), where
T = host + m gpu with m = 1 + o (k - 1), and D = the sum of the trials' m gpu / T. For k copies
of one model saturating the GPU that gives an aggregate speed over one alone of S_k = C_k / (d m)
(below saturation, k / (1 + (m - 1) d)), so a measured S_k where k d > 1 gives C_k = d S_k m. This prints C_k for every
such MPS row with no limit, the median and the least per k, and how far the model's S_k is from
the measured one with C_k = 1 (saturation at D = 1) and with the medians. Only compute-bound
jobs count, those busy at least --min-busy alone (the simulator's trials are 0.6-1.0).
"""
import argparse
import glob
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def rows_of(paths):
    """(file, job, k, samples/s, busy share) of the MPS rows with no thread limit."""
    for path in paths:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r["mode"] == "mps" and r.get("caps") is None:
                    yield path, "%s:%d" % (r["model"], r["batch"]), r["k"], \
                        r["samples_per_s"], r["busy_pct"] / 100


def model(k, d, o, c):
    """The simulator's aggregate speed of k copies (intensity d alone) over one alone."""
    m = 1 + o * (k - 1)
    dk = m * d / (1 + (m - 1) * d)  # each copy's busy share at its slowed pace
    return k / (1 + (m - 1) * d) / max(1.0, k * dk / c)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--overhead", type=float, default=0.03)
    ap.add_argument("--min-busy", type=float, default=0.5)
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    paths = args.files or sorted(glob.glob(os.path.join(HERE, "h100-*.jsonl")))
    alone, meas = {}, []
    for path, job, k, rate, busy in rows_of(paths):  # each file's own k = 1 is the baseline
        if k == 1:
            alone[path, job] = (rate, busy)
        elif (path, job) in alone and alone[path, job][1] >= args.min_busy:
            meas.append((job, k, rate / alone[path, job][0], alone[path, job][1]))
    by_k = {}
    print("| job | k | d alone | k d | S_k measured | C_k |")
    print("|---|---|---|---|---|---|")
    for job, k, s, d in meas:
        m = 1 + args.overhead * (k - 1)
        c = d * s * m if k * d > 1 else None
        if c is not None:
            by_k.setdefault(k, []).append(c)
        print("| %s | %d | %.2f | %.2f | %.3f | %s |" % (job, k, d, k * d, s,
                                                       "%.3f" % c if c else "(not saturated)"))
    med = {k: statistics.median(v) for k, v in by_k.items()}
    print("\n| k | rows | C_k median | C_k least | C_k most |\n|---|---|---|---|---|")
    for k in sorted(by_k):
        print("| %d | %d | %.3f | %.3f | %.3f |" % (k, len(by_k[k]), med[k], min(by_k[k]),
                                                   max(by_k[k])))
    for name, cap in (("C_k = 1", lambda k: 1.0), ("C_k = the medians", lambda k: med[k])):
        err = [abs(model(k, d, args.overhead, max(1.0, cap(k))) / s - 1) for _, k, s, d in meas]
        print("model with %s: S_k off by %.1f%% on average, %.1f%% at most (%d rows)"
              % (name, 100 * sum(err) / len(err), 100 * max(err), len(err)))


if __name__ == "__main__":
    main()
