#!/usr/bin/env python3
"""Fusion throughput (issue 12, item 5; issue 31, item 4): K models trained fused in one
process against the same K models as K separate processes; prints a table, asserts nothing.

  python3 bench/fuse/throughput.py [--ks 1,2,4,8] [--epochs 8] [--hidden 64] [--repeat 1]
                                  [--mode horizontal,sequential,separate] [--json]
                                  [--device cpu|cuda] [--python /usr/bin/python3]

The workload is examples/fuse/train.py (an MLP on scikit-learn's digits, 1297 training images,
batch 64, torch on one thread per process), run directly, without tunepack. --mode says which
rows (default horizontal,separate), for each K of --ks:

- horizontal: one process gets K configurations in --configs and the tunepack_fuse helper
  steps the K models as one batched model (horizontal fusion);
- sequential: the same, the helper stepping the K models one after the other (train.py
  --sequential: the helper as it was before horizontal fusion);
- separate: K processes of one configuration each, side by side (at K = 1 only when no fused
  mode is asked for: it is the fused K = 1 then).

Each cell is the best (shortest wall) of --repeat runs. Figures per row:

- wall: from the start of the first process to the end of the last (start-up included:
  interpreter, torch and sklearn imports, data);
- samples/s in all (K x epochs x 1297 / wall) and per model;
- train s and train samples/s: the same over the training alone, from the first process's
  first epoch to the last one's end (train.py prints when its training began and ended), so
  without the start-up that --epochs dilutes;
- CPU s: user + system of the processes (getrusage of the children), and per model;
- memory: peak resident memory of the one fused process, or the sum of the K separate peaks.

The load average before and after is printed: timings inflate under load (take the table
when the machine is quiet). With --json each row is one JSON object on a line of stdout
({"k", "mode", "ran", "processes", "epochs", "device", "hidden", "wall_s",
"samples_per_s", "per_model", "train_s", "train_samples_per_s", "cpu_s", "peak_mib"}; "ran"
is the mode the fused process reports, which differs from "mode" where the helper fell back)
and the rest goes to stderr. Needs Debian's python3-torch and python3-sklearn; the
processes run with /usr/bin/python3 (--python names another interpreter: the GPU machine's).
With --device cuda every process trains on GPU 0 (bench/gpu/checks.sh runs it so).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "examples", "fuse", "train.py")
N_TRAIN = 1297


def configs(k):
    """K configurations of one shape: lr, momentum and weight decay differ."""
    return [{"config": i, "params": {"lr": 0.02 * (1 + i), "momentum": 0.5 + 0.05 * i,
                                      "weight_decay": 1e-5 * (1 + i)}} for i in range(k)]


def start(cfgs, args, mode):
    env = dict(os.environ)
    for name in ("TUNEPACK_REPORT_FD", "TUNEPACK_CONTROL_FD", "TUNEPACK_CONFIGS_JSON",
                 "TUNEPACK_TRIAL_DIR", "TUNEPACK_CHECKPOINT_DIR", "TUNEPACK_BUDGET"):
        env.pop(name, None)
    argv = [args.python, TRAIN, "--configs", json.dumps(cfgs), "--hidden", str(args.hidden),
            "--batch", "64", "--epochs", str(args.epochs), "--device", args.device]
    return subprocess.Popen(argv + (["--sequential"] if mode == "sequential" else []),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)


TRAINED = re.compile(r"epochs \d+\.\.\d+, (\w+), trained from ([\d.]+) to ([\d.]+)")


def measure(groups, args, mode):
    """Run one process per group side by side: (wall s, CPU s, sum of peak RSS MiB, training
    s from the first one's start to the last one's end, the mode the processes ran)."""
    t0 = time.monotonic()
    procs = [start(g, args, mode) for g in groups]
    cpu, rss, spans, ran = 0.0, 0.0, [], set()
    left = {p.pid: p for p in procs}
    while left:
        pid, status, ru = os.wait4(-1, 0)
        p = left.pop(pid, None)
        if p is None:
            continue
        cpu += ru.ru_utime + ru.ru_stime
        rss += ru.ru_maxrss / 1024.0
        err = p.stderr.read().decode(errors="replace")
        p.stderr.close()
        if status != 0:
            raise SystemExit("train.py failed: %s" % err)
        m = TRAINED.search(err)
        if m is None:
            raise SystemExit("train.py did not say when it trained: %s" % err)
        ran.add(m.group(1))
        spans.append((float(m.group(2)), float(m.group(3))))
    train = max(e for _, e in spans) - min(b for b, _ in spans)
    return time.monotonic() - t0, cpu, rss, train, ",".join(sorted(ran))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", default="1,2,4,8")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--mode", default="horizontal,separate",
                    help="the rows, a comma list of horizontal, sequential and separate")
    ap.add_argument("--json", action="store_true",
                    help="one JSON object per row on stdout, the rest on stderr")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: every process on GPU 0")
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="the interpreter that runs train.py (one with torch and sklearn)")
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    modes = [m for m in args.mode.split(",") if m]
    bad = [m for m in modes if m not in ("horizontal", "sequential", "separate")]
    if bad or not modes:
        ap.error("--mode: horizontal, sequential or separate, got %r" % args.mode)
    text = sys.stderr if args.json else sys.stdout
    load0 = os.getloadavg()
    # The header first and each row as it is measured (flushed): a run cut off by a time
    # limit still leaves the rows it finished.
    print("fusion throughput: examples/fuse/train.py, MLP 64-%d-%d-10 on digits, %d epochs x "
          "%d samples per model, batch 64, torch 1 thread per process, %d CPUs, device %s"
          % (args.hidden, args.hidden, args.epochs, N_TRAIN, os.cpu_count(), args.device),
          file=text)
    print("load average (1, 5, 15 min) before: %.2f %.2f %.2f" % load0, file=text)
    print(file=text)
    print("| K | how | processes | wall s | samples/s in all | per model | train s | train "
          "samples/s | CPU s | CPU s per model | peak memory MiB |", file=text)
    print("|---|---|---|---|---|---|---|---|---|---|---|", file=text, flush=True)
    fused = any(m != "separate" for m in modes)
    for k in ks:
        cfgs = configs(k)
        for mode in modes:
            if k == 1 and mode == "separate" and fused:
                continue  # the same thing as fused K=1
            groups = [[c] for c in cfgs] if mode == "separate" else [cfgs]
            wall, cpu, rss, train, ran = min(
                (measure(groups, args, mode) for _ in range(args.repeat)), key=lambda m: m[0])
            samples = k * args.epochs * N_TRAIN
            print("| %d | %s | %d | %.1f | %.0f | %.0f | %.1f | %.0f | %.1f | %.1f | %.0f |"
                  % (k, mode if ran == mode or mode == "separate" else "%s (ran %s)"
                     % (mode, ran), len(groups), wall, samples / wall, samples / wall / k,
                     train, samples / train, cpu, cpu / k, rss), file=text, flush=True)
            if args.json:
                print(json.dumps({
                    "k": k, "mode": mode, "ran": "separate" if mode == "separate" else ran,
                    "processes": len(groups),
                    "epochs": args.epochs, "device": args.device, "hidden": args.hidden,
                    "wall_s": round(wall, 3), "samples_per_s": round(samples / wall, 1),
                    "per_model": round(samples / wall / k, 1), "train_s": round(train, 3),
                    "train_samples_per_s": round(samples / train, 1), "cpu_s": round(cpu, 2),
                    "peak_mib": round(rss, 1)}), flush=True)
    print(file=text)
    print("load average (1, 5, 15 min) after: %.2f %.2f %.2f" % os.getloadavg(), file=text)


if __name__ == "__main__":
    main()
