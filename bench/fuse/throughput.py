#!/usr/bin/env python3
"""Fusion throughput (issue 12, item 5): K models trained fused in one process against the
same K models as K separate processes; prints a table, asserts nothing.

  python3 bench/fuse/throughput.py [--ks 1,2,4,8] [--epochs 8] [--hidden 64] [--repeat 1]
                                  [--device cpu|cuda] [--python /usr/bin/python3]

The workload is examples/fuse/train.py (an MLP on scikit-learn's digits, 1297 training images,
batch 64, torch on one thread per process), run directly, without tunepack: fused, one
process gets K configurations in --configs and steps the K models on the same batches (the
tunepack_fuse helper); separate, K processes of one configuration each run side by side. Each
cell is the best (shortest wall) of --repeat runs. Figures per row:

- wall: from the start of the first process to the end of the last (start-up included:
  interpreter, torch and sklearn imports, data);
- samples/s in all (K x epochs x 1297 / wall) and per model;
- CPU s: user + system of the processes (getrusage of the children), and per model;
- memory: peak resident memory of the one fused process, or the sum of the K separate peaks.

The load average before and after is printed: timings inflate under load (take the table
when the machine is quiet). Needs Debian's python3-torch and python3-sklearn; the
processes run with /usr/bin/python3 (--python names another interpreter: the GPU machine's).
With --device cuda every process trains on GPU 0 (bench/gpu/checks.sh runs it so).
"""
import argparse
import json
import os
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "examples", "fuse", "train.py")
N_TRAIN = 1297


def configs(k):
    """K configurations of one shape: lr, momentum and weight decay differ."""
    return [{"config": i, "params": {"lr": 0.02 * (1 + i), "momentum": 0.5 + 0.05 * i,
                                      "weight_decay": 1e-5 * (1 + i)}} for i in range(k)]


def start(cfgs, args):
    env = dict(os.environ)
    for name in ("TUNEPACK_REPORT_FD", "TUNEPACK_CONTROL_FD", "TUNEPACK_CONFIGS_JSON",
                 "TUNEPACK_TRIAL_DIR", "TUNEPACK_CHECKPOINT_DIR", "TUNEPACK_BUDGET"):
        env.pop(name, None)
    return subprocess.Popen([args.python, TRAIN, "--configs", json.dumps(cfgs),
                             "--hidden", str(args.hidden), "--batch", "64", "--epochs",
                             str(args.epochs), "--device", args.device],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)


def measure(groups, args):
    """Run one process per group side by side; (wall s, CPU s, sum of peak RSS MiB)."""
    t0 = time.monotonic()
    procs = [start(g, args) for g in groups]
    cpu, rss = 0.0, 0.0
    left = {p.pid: p for p in procs}
    while left:
        pid, status, ru = os.wait4(-1, 0)
        p = left.pop(pid, None)
        if p is None:
            continue
        cpu += ru.ru_utime + ru.ru_stime
        rss += ru.ru_maxrss / 1024.0
        if status != 0:
            raise SystemExit("train.py failed: %s" % p.stderr.read().decode(errors="replace"))
        p.stderr.close()
    return time.monotonic() - t0, cpu, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", default="1,2,4,8")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda: every process on GPU 0")
    ap.add_argument("--python", default="/usr/bin/python3",
                    help="the interpreter that runs train.py (one with torch and sklearn)")
    args = ap.parse_args()
    ks = [int(k) for k in args.ks.split(",")]
    load0 = os.getloadavg()
    # The header first and each row as it is measured (flushed): a run cut off by a time
    # limit still leaves the rows it finished.
    print("fusion throughput: examples/fuse/train.py, MLP 64-%d-%d-10 on digits, %d epochs x "
          "%d samples per model, batch 64, torch 1 thread per process, %d CPUs, device %s"
          % (args.hidden, args.hidden, args.epochs, N_TRAIN, os.cpu_count(), args.device))
    print("load average (1, 5, 15 min) before: %.2f %.2f %.2f" % load0)
    print()
    print("| K | how | processes | wall s | samples/s in all | per model | CPU s | CPU s per "
          "model | peak memory MiB |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    for k in ks:
        cfgs = configs(k)
        for mode, groups in (("fused", [cfgs]), ("separate", [[c] for c in cfgs])):
            if k == 1 and mode == "separate":
                continue  # the same thing as fused K=1
            wall, cpu, rss = min((measure(groups, args) for _ in range(args.repeat)),
                                 key=lambda m: m[0])
            samples = k * args.epochs * N_TRAIN
            print("| %d | %s | %d | %.1f | %.0f | %.0f | %.1f | %.1f | %.0f |"
                  % (k, mode, 1 if mode == "fused" else k, wall, samples / wall,
                     samples / wall / k, cpu, cpu / k, rss), flush=True)
    print()
    print("load average (1, 5, 15 min) after: %.2f %.2f %.2f" % os.getloadavg())

if __name__ == "__main__":
    main()
