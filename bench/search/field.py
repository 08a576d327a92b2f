#!/usr/bin/python3
"""Small continuous spaces against the field: tunepack's random, tpe, gp and cmaes samplers
against Optuna 3.1's (Debian's python3-optuna) RandomSampler, TPESampler, QMCSampler and
CmaEsSampler, on Branin (2 parameters) and Hartmann-6 (6) with additive Gaussian noise.

Both engines run the same trial command, bench/search/toy_objectives.py (tunepack through
`tunepack run`, Optuna as a subprocess per trial; values are argv elements, never a shell),
one trial at a time, over several seeds. The trial reports loss = f(x) + N(0, sigma^2) and
the noise-free true_loss = f(x); the samplers see loss only.

Per run, the *incumbent* after t trials is the trial of lowest noisy loss among the first t
(what a user would pick); its noise-free value is what is measured. Per method it prints
the median over seeds of:
  best      the incumbent's noise-free value after all trials;
  sampled   the lowest noise-free value among the trials (what an oracle would pick);
  to reach  the trials until the incumbent's noise-free value first reaches the target, the
            median `best` of Optuna's TPE ("never" when it is not reached in half the seeds),
            and in how many seeds it was reached.
Then PASS or MISS for issue 32's target: tunepack's gp has a lower median `best` than
Optuna's TPE and CMA-ES on Hartmann-6 at 50 trials.

Figures, not tests: nothing here asserts. From the repository root:

    sh bench/search/setup.sh                 # Optuna and cmaes from Debian
    sh /work/wt/build.sh (or cmake ... && cmake --build build)
    python3 bench/search/field.py --quick    # 3 seeds
    python3 bench/search/field.py            # 10 seeds: 7,200 trial commands, each a Python
                                             # start-up (31 minutes on a 2-core machine at
                                             # load average 16-34, mostly waiting for a CPU)

Optuna 3.1 has no GPSampler (it came in 3.6), and Debian ships no BoTorch, so no GP row on
Optuna's side.
"""

import argparse
import concurrent.futures
import json
import os
import shutil
import sqlite3
import sys
import time
import warnings

import spaces  # imports optuna, re-executing with /usr/bin/python3 when it cannot
from run import fmt, median

optuna = spaces.optuna

PROBLEMS = {  # name: (parameters (name, lo, hi), trials, noise sd, optimum)
    "branin": ([("x1", -5.0, 10.0), ("x2", 0.0, 15.0)], 40, 0.5, 0.397887),
    "hartmann6": ([("x%d" % i, 0.0, 1.0) for i in range(1, 7)], 50, 0.1, -3.32237),
}
METHODS = ["tp-random", "tp-tpe", "tp-gp", "tp-cmaes",
           "op-random", "op-tpe", "op-qmc", "op-cmaes"]


def optuna_sampler(kind, seed):
    if kind == "qmc":  # scrambled Sobol: unscrambled, every seed would draw the same points
        return optuna.samplers.QMCSampler(qmc_type="sobol", scramble=True, seed=seed)
    if kind == "cmaes":
        return optuna.samplers.CmaEsSampler(seed=seed)
    return spaces.optuna_sampler(kind, seed)


def run_one(args, problem, method, seed):
    """One run; returns [(noisy loss, noise-free loss)] in trial order, its wall time, or an
    error."""
    params, trials, sigma, _ = PROBLEMS[problem]
    fixed = ["--noise=%g" % (sigma * args.noise_scale), "--seed=%d" % seed]
    engine, kind = method.split("-", 1)
    t0 = time.monotonic()
    try:
        if engine == "tp":
            space = "".join("  %s: {uniform: [%r, %r]}\n" % p for p in params)
            _, _, work = spaces.tp_run(args, method, problem, [p[0] for p in params], space,
                                       "{name: loss, mode: min}",
                                       "{algorithm: %s, trials: %d, seed: %d}"
                                       % (kind, trials, seed), fixed=fixed)
            try:
                db = sqlite3.connect(os.path.join(work, "run", "tunepack.db"))
                rows = db.execute("SELECT value, metrics FROM trials WHERE value IS NOT NULL "
                                  "ORDER BY id").fetchall()
                db.close()
            finally:
                shutil.rmtree(work, ignore_errors=True)
            seq = [(v, json.loads(m)["true_loss"]) for v, m in rows]
        else:
            warnings.simplefilter("ignore")  # QMC and CMA-ES are "experimental" in 3.1
            optuna.logging.set_verbosity(optuna.logging.WARNING)
            study = optuna.create_study(direction="minimize",
                                        sampler=optuna_sampler(kind, seed))

            def objective(t):
                r = spaces.run_objective(problem, {n: t.suggest_float(n, lo, hi)
                                                   for n, lo, hi in params}, fixed)
                t.set_user_attr("true_loss", r["true_loss"])
                return r["loss"]
            study.optimize(objective, n_trials=trials)
            seq = [(t.value, t.user_attrs["true_loss"]) for t in study.trials
                   if t.value is not None]
    except (SystemExit, RuntimeError, ValueError) as e:
        return {"error": str(e).strip().splitlines()[0] if str(e).strip() else repr(e)}
    if not seq:
        return {"error": "no trial completed"}
    return {"seq": seq, "wall": time.monotonic() - t0}


def incumbents(seq):
    """The incumbent's noise-free value after each trial."""
    out, best = [], None
    for noisy, true in seq:
        if best is None or noisy < best[0]:
            best = (noisy, true)
        out.append(best[1])
    return out


def trials_to_reach(seq, target):
    return next((t + 1 for t, v in enumerate(incumbents(seq)) if v <= target), float("inf"))


def report(args, problem, results):
    params, trials, sigma, optimum = PROBLEMS[problem]
    ok = {m: [r for r in runs if "error" not in r] for m, runs in results.items()}
    ref = ok.get("op-tpe")
    target = median([incumbents(r["seq"])[-1] for r in ref]) if ref else float("nan")
    print("\n%s (%d parameters), %d trials, noise sd %g, optimum %g, %d seeds; to reach: "
          "Optuna TPE's median best, %s" % (problem, len(params), trials,
                                            sigma * args.noise_scale, optimum, args.seeds,
                                            fmt(target)))
    print("| method | median best | median sampled | trials to reach | seeds reaching "
          "| median wall s |")
    print("|---|---|---|---|---|---|")
    for m, runs in results.items():
        if not ok[m]:
            print("| %s | not run: %s |  |  |  |  |" % (m, runs[0]["error"][:80]))
            continue
        reach = [trials_to_reach(r["seq"], target) for r in ok[m]]
        print("| %s | %s | %s | %s | %d of %d | %.1f |" % (
            m, fmt(median([incumbents(r["seq"])[-1] for r in ok[m]])),
            fmt(median([min(t for _, t in r["seq"]) for r in ok[m]])),
            fmt(float(median(reach)), 0), sum(n != float("inf") for n in reach), len(reach),
            median([r["wall"] for r in ok[m]])))
    return {m: median([incumbents(r["seq"])[-1] for r in runs]) for m, runs in ok.items()
            if runs}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 seeds")
    ap.add_argument("--seeds", type=int, help="seeds per method and problem (10)")
    ap.add_argument("--jobs", type=int, default=2, help="runs at once (2)")
    ap.add_argument("--problems", default="branin,hartmann6")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--noise-scale", type=float, default=1.0,
                    help="multiplies each problem's noise sd (branin 0.5, hartmann6 0.1)")
    ap.add_argument("--tunepack", default=os.path.join(spaces.ROOT, "build", "tunepack"))
    ap.add_argument("--scratch", default=None, help="where runs are written (default: /tmp)")
    args = ap.parse_args()
    args.seeds = args.seeds or (3 if args.quick else 10)
    if not os.access(args.tunepack, os.X_OK):
        sys.exit("field.py: %s is missing: build first" % args.tunepack)
    problems = [p for p in args.problems.split(",") if p]
    methods = [m for m in args.methods.split(",") if m]
    for m in methods:
        if m not in METHODS:
            sys.exit("field.py: unknown method %r (%s)" % (m, ", ".join(METHODS)))
    print("tunepack %s, optuna %s, %d seeds, %d runs at once, each run one trial at a time"
          % (args.tunepack, optuna.__version__, args.seeds, args.jobs), flush=True)
    t0 = time.monotonic()
    jobs = [(p, m, s) for p in problems for m in methods for s in range(1, args.seeds + 1)]
    with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
        done = pool.map(run_one, [args] * len(jobs), *zip(*jobs))
        results = {}
        for (p, m, _), r in zip(jobs, done):
            results.setdefault(p, {}).setdefault(m, []).append(r)
    medians = {p: report(args, p, results[p]) for p in problems}
    h = medians.get("hartmann6", {})
    if all(k in h for k in ("tp-gp", "op-tpe", "op-cmaes")):
        ok = h["tp-gp"] < min(h["op-tpe"], h["op-cmaes"])
        print("\n%s: tunepack gp's median best on hartmann6 %.4f %s Optuna TPE's %.4f and "
              "CMA-ES's %.4f (%d trials)" % ("PASS" if ok else "MISS", h["tp-gp"],
                                             "<" if ok else "not <", h["op-tpe"],
                                             h["op-cmaes"], PROBLEMS["hartmann6"][1]))
    print("\ntotal %.0f s" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
