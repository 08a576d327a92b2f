#!/usr/bin/env python3
"""Deadline bench on real trials: the best metric at deadlines of 25%, 50% and 100% of what
ASHA needs to finish, `scheduler: hypersched` (with elastic trials and reallocation) against
`scheduler: asha`, both through `tunepack run`: the real engine, real processes, the real clock,
8 fake GPUs (the stand-in NVML of the tests, build/fake). Prints a table like bench/deadline's
(the simulator's) and asserts nothing.

    python3 bench/deadline/real.py [--build DIR] [--seeds 3] [--first-seed 1] [--unit 2.4]
                                   [--startup 0.8] [--policy uniform] [--keep DIR]

Trials: bench/deadline/trial.py, the simulator's family (src/sim/sim_tune.c) in wall seconds:
81 random configurations of x, y in [0, 1], budget 1..27 epochs with eta 3, one epoch
--unit (0.6 + 0.8 x) seconds +-5% at one GPU with Amdahl scaling over the GPUs it holds, a
start-up of --startup (0.8 + 0.4 y) seconds per attempt; the metric is a learning curve whose
early epochs predict the later ones. They sleep instead of computing, so that 8 of them at once
measure the scheduler, not the contention of this machine's 2 cores.

Per seed:
1. asha without a deadline, to the end: T = the end of its last attempt - the experiment's
   creation (what ASHA needs to finish);
2. for each fraction of T (25%, 50%, 100%) two runs side by side (same load): asha with
   `deadline:` (one fixed GPU per trial, as ASHA has: no reallocation) and hypersched with
   `deadline:`, `resources: {gpus: {min: 1, max: 8}}` and `reallocation:`. At the deadline the
   run asks running trials to checkpoint and report; the best metric reported in the run counts.

--keep DIR keeps every run's directory there (for scripts/timeline.py); else a temporary
directory is removed at the end. The load average before and after is printed: start-ups and
the orchestrator's reaction times inflate under load.
"""
import argparse
import json
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FRACS = (0.25, 0.5, 1.0)
PY = "/usr/bin/python3"  # Debian's: the trial needs only the standard library, and starts fast

EXPERIMENT = """name: deadline-real-{sched}
command: [{py}, {trial}, "{{x}}", "{{y}}", "{{epochs}}", "{unit}", "{startup}"]
metric: {{name: score, mode: max}}
space:
  x: {{uniform: [0, 1]}}
  y: {{uniform: [0, 1]}}
search: {{algorithm: random, trials: 81, seed: {seed}, scheduler: {sched}}}
budget: {{name: epochs, min: 1, max: 27, eta: 3}}
concurrency: 8
resources: {{gpus: {gpus}, gpu_memory: 2G, gpu_compute: 1.0}}
stop_grace: 10s
{extra}"""


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def fake_gpus(work):
    """Eight fake 16 GiB GPUs: the stand-in NVML's JSON, as tests/e2e's GpuE2E writes it."""
    procs = os.path.join(work, "nvml-procs")
    os.makedirs(procs, exist_ok=True)
    gpus = [{"name": "NVIDIA Fake 16G", "uuid": "GPU-%08x-fake-%d" % (0xbeef0000 + i, i),
             "memory_mib": 16384, "util": 0} for i in range(8)]
    path = os.path.join(work, "nvml.json")
    with open(path, "w") as f:
        json.dump({"gpus": gpus, "processes": [], "process_dir": procs}, f)
    return path


def env_for(build, nvml):
    env = dict(os.environ)
    for k in ("CUDA_VISIBLE_DEVICES", "TUNEPACK_MPS_CONTROL", "CUDA_MPS_PIPE_DIRECTORY"):
        env.pop(k, None)
    env["LD_LIBRARY_PATH"] = os.path.join(build, "fake")
    env["TUNEPACK_FAKE_NVML"] = nvml
    env["PATH"] = os.pathsep.join(d for d in env.get("PATH", "").split(os.pathsep)
                                  if d and not os.path.exists(
                                      os.path.join(d, "nvidia-cuda-mps-control")))
    return env


def write_exp(path, args, seed, sched, deadline=None):
    extra = ""
    gpus = "1"
    if deadline is not None:
        extra += "deadline: %ds\n" % deadline
    if sched == "hypersched":
        gpus = "{min: 1, max: 8}"
        extra += "reallocation: {policy: %s, cooldown: %s}\n" % (args.policy, args.cooldown)
    with open(path, "w") as f:
        f.write(EXPERIMENT.format(sched=sched, py=json.dumps(PY),
                                  trial=json.dumps(os.path.join(HERE, "trial.py")),
                                  unit=args.unit, startup=args.startup, seed=seed, gpus=gpus,
                                  extra=extra))
    return path


def start(args, env, exp, run_dir):
    log = open(run_dir + ".log", "w")
    return subprocess.Popen([os.path.join(args.build, "tunepack"), "run", exp, "--dir", run_dir],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), log


def finish(p, log, run_dir):
    rc = p.wait()
    log.close()
    if rc != 0:
        with open(run_dir + ".log") as f:
            sys.exit("tunepack run in %s failed (%d):\n%s" % (run_dir, rc, f.read()[-3000:]))


def outcome(run_dir):
    """(best metric reported, seconds from creation to the last attempt's end, trials,
    refusals, resizes, the best model's metric: the best trial's last report, its checkpoint's)
    of a finished run."""
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(run_dir, "tunepack.db"), uri=True)
    created = float(db.execute("SELECT value FROM meta WHERE key = 'created_at'").fetchone()[0])
    best = db.execute("SELECT max(value) FROM metrics").fetchone()[0]
    model = db.execute("SELECT max(value) FROM trials").fetchone()[0]
    end = db.execute("SELECT max(ended_at) FROM trials").fetchone()[0]
    trials = db.execute("SELECT count(*) FROM trials").fetchone()[0]
    refused = db.execute("SELECT count(*) FROM decisions WHERE kind = 'refused'").fetchone()[0]
    resizes = db.execute("SELECT count(*) FROM decisions WHERE kind = 'resize'").fetchone()[0]
    db.close()
    return (best if best is not None else -math.inf, end - created, trials, refused, resizes,
            model if model is not None else -math.inf)


def one_seed(args, env, work, seed):
    d = os.path.join(work, "s%d" % seed)
    os.makedirs(d, exist_ok=True)
    full = os.path.join(d, "asha-full")
    p, log = start(args, env, write_exp(full + ".yaml", args, seed, "asha"), full)
    finish(p, log, full)
    best_full, t_full, *_ = outcome(full)
    print("seed %d: asha finishes in %.1f s (best %.4f); load %s" % (seed, t_full, best_full,
                                                                      load()), flush=True)
    row = {"T": t_full, "full": best_full}
    for frac in FRACS:
        deadline = max(1, int(round(frac * t_full)))
        runs = {}
        for sched in ("asha", "hypersched"):
            rd = os.path.join(d, "%s-%d" % (sched, int(frac * 100)))
            runs[sched] = (rd,) + start(args, env, write_exp(rd + ".yaml", args, seed, sched,
                                                             deadline), rd)
        for sched, (rd, p, log) in runs.items():
            finish(p, log, rd)
            row[(sched, frac)] = outcome(rd)
        a, h = row[("asha", frac)], row[("hypersched", frac)]
        print("  %3d%% (deadline %d s): asha %.4f (%d trials), hypersched %.4f (%d trials, "
              "%d refusals, %d resizes); load %s" % (frac * 100, deadline, a[0], a[2], h[0],
                                                      h[2], h[3], h[4], load()), flush=True)
    return row


def table(rows, args):
    n = len(rows)
    ts = [r["T"] for r in rows]
    print()
    print("real trials (bench/deadline/trial.py, the simulator's family in wall seconds: epoch "
          "%g s x (0.6 + 0.8x), start-up %g s x (0.8 + 0.4y)); 8 fake GPUs, 81 configurations "
          "(random), budget 1..27 eta 3, %d seeds; ASHA needs %.1f s on average to finish "
          "(%.1f to %.1f)" % (args.unit, args.startup, n, statistics.mean(ts), min(ts), max(ts)))
    refusals = sum(r[("hypersched", f)][3] for r in rows for f in FRACS)
    resizes = sum(r[("hypersched", f)][4] for r in rows for f in FRACS)
    print("hypersched: admission on measured timings + reallocation (%s, min_gain 1.1, cooldown "
          "%s), elastic trials 1..8 GPUs; asha: one GPU per trial; %d refusals and %d resizes "
          "in all" % (args.policy, args.cooldown, refusals, resizes))
    print()
    print("best metric reported by the deadline (higher is better)")
    compare(rows, 0)
    print()
    print("the best model at the deadline: the best trial's last report (what its checkpoint "
          "holds, as `tunepack best` names it)")
    compare(rows, 5)
    print()
    print("per seed: T, then asha / hypersched best reported (best model) at 25%, 50%, 100%")
    for seed, r in zip(range(args.first_seed, args.first_seed + n), rows):
        print("  seed %d: T %.1f s; %s" % (seed, r["T"], "; ".join(
            "%.4f / %.4f (%.4f / %.4f)" % (r[("asha", f)][0], r[("hypersched", f)][0],
                                           r[("asha", f)][5], r[("hypersched", f)][5])
            for f in FRACS)))


def compare(rows, i):
    """The table of figure i of outcome() per deadline: medians, means, seeds won."""
    n = len(rows)
    print("| deadline | asha median | asha mean | hypersched median | hypersched mean | "
          "seeds hypersched >= asha | seeds hypersched > asha |")
    print("|---|---|---|---|---|---|---|")
    for f in FRACS:
        a = [r[("asha", f)][i] for r in rows]
        h = [r[("hypersched", f)][i] for r in rows]
        ge = sum(1 for x, y in zip(a, h) if y >= x)
        gt = sum(1 for x, y in zip(a, h) if y > x)
        print("| %3d%% | %.4f | %.4f | %.4f | %.4f | %d/%d | %d/%d |" % (
            f * 100, statistics.median(a), statistics.mean(a), statistics.median(h),
            statistics.mean(h), ge, n, gt, n))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--unit", type=float, default=2.4, help="seconds per epoch scale")
    ap.add_argument("--startup", type=float, default=0.8, help="start-up scale, seconds")
    ap.add_argument("--policy", default="uniform", choices=("uniform", "top-job", "softmax"))
    ap.add_argument("--cooldown", default="3s")
    ap.add_argument("--keep", help="keep the runs' directories here")
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if not os.path.exists(os.path.join(args.build, "fake", "libnvidia-ml.so.1")):
        sys.exit("real.py: no %s/fake/libnvidia-ml.so.1: build the tree first "
                 "(cmake --build %s)" % (args.build, args.build))
    work = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="tp-deadline-")
    os.makedirs(work, exist_ok=True)
    env = env_for(args.build, fake_gpus(work))
    print("load average before: %s" % load(), flush=True)
    t0 = time.time()
    rows = []
    try:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            rows.append(one_seed(args, env, work, seed))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    table(rows, args)
    print()
    print("load average after: %s; %.0f s in all" % (load(), time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
