#!/usr/bin/python3
"""Debian's Optuna on the tabular benchmark that `bench/mf_search --table` replays
(bench/search/data/lcbench-sk.tsv, made by bench/search/lcbench_gen.py), for comparison with
mf_search's table.

The same replay as mf_search: the space is the table's parameters (log ones with log=True,
intlog ones as suggest_int(log=True)); a trial's configuration is snapped to the nearest
tabulated one of the dataset (Euclidean, every parameter scaled to [0, 1] over its range, log
ones in log) and trains with one of the table's training seeds, drawn per trial from (seed,
trial); it reports the table's error after each epoch (trial.report, step = epoch) and stops
when the pruner says so. Epochs count what each trial trained. Trials run one at a time
(mf_search runs four at a time).

Methods, each --trials trials (default 243, as mf_search):
  tpe + hyperband   TPESampler(seed) with HyperbandPruner(min_resource=1, max_resource=E,
                    reduction_factor=3)
  random + hyperband  RandomSampler(seed), the same pruner
  tpe + sha         TPESampler(seed) with SuccessiveHalvingPruner(min_resource=1,
                    reduction_factor=3)
Prints, per dataset, the medians over seeds 1..--seeds of the best error reported, the epochs
spent, and the epochs spent when that best was first reported.

At equal epochs (--budgets FILE, what `mf_search --per-seed FILE` wrote): for each dataset,
each of tunepack's `asha + tpe` and `asha + random` and each seed, Optuna's tpe + sha and
random + sha (RandomSampler(seed), the same pruner) run with no trial limit until their
epochs reach what tunepack spent with that seed; the study stops there, in the middle of a
trial if need be. Both sides count the best error after any epoch trained (mf_search's
best_any: a trial reports each epoch). Prints the medians over seeds and, per seed, how
often tunepack's best is lower, equal or higher.

    /usr/bin/python3 bench/search/lcbench_optuna.py [--table FILE] [--seeds 10] [--trials 243]
    build/bench/mf_search --table bench/search/data/lcbench-sk.tsv --per-seed OUT 10 243
    /usr/bin/python3 bench/search/lcbench_optuna.py --budgets OUT
"""

import argparse
import math
import os
import statistics
import sys

import numpy as np
import optuna

HERE = os.path.dirname(os.path.abspath(__file__))


def read(path):
    """(epochs, params [(name, kind, lo, hi)], {dataset: (x [configs][params], err[c][s][t])})"""
    epochs, params, rows = None, [], {}
    header = None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                w = line.split()
                if w[1:2] == ["epochs"]:
                    epochs = int(w[2])
                elif w[1:2] == ["param"]:
                    params.append((w[2], w[3], float(w[4]), float(w[5])))
                continue
            if not line:
                continue
            if header is None:
                header = line.split("\t")
                continue
            r = line.split("\t")
            d, c, s = r[0], int(r[1]), int(r[2])
            x = [float(v) for v in r[3:3 + len(params)]]
            e = [float(v) for v in r[3 + len(params):]]
            rows.setdefault(d, {})[(c, s)] = (x, e)
    data = {}
    for d, rs in rows.items():
        nc = 1 + max(c for c, _ in rs)
        ns = 1 + max(s for _, s in rs)
        x = np.array([rs[(c, 0)][0] for c in range(nc)])
        err = np.array([[rs[(c, s)][1] for s in range(ns)] for c in range(nc)])
        data[d] = (x, err)
    return epochs, params, data


def unit(params, x):
    """x (configs x params) scaled to [0, 1] per parameter, log kinds in log."""
    u = np.empty_like(x, dtype=float)
    for k, (_, kind, lo, hi) in enumerate(params):
        if kind == "lin":
            u[:, k] = (x[:, k] - lo) / (hi - lo)
        else:
            u[:, k] = (np.log(x[:, k]) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return u


def study_run(method, params, epochs, x, err, seed, trials, budget=None):
    """One study: (best, epochs spent, epochs when the best was first reported). With a
    budget: no trial limit; the study stops when its epochs reach the budget."""
    ux = unit(params, x)
    ns = err.shape[1]
    if method.startswith("random"):
        sampler = optuna.samplers.RandomSampler(seed=seed)
    else:
        sampler = optuna.samplers.TPESampler(seed=seed)
    if method.endswith("sha"):
        pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
    else:
        pruner = optuna.pruners.HyperbandPruner(min_resource=1, max_resource=epochs,
                                                reduction_factor=3)
    st = optuna.create_study(direction="minimize", sampler=sampler, pruner=pruner)
    state = {"epochs": 0, "best": math.inf, "at": 0}

    def objective(trial):
        v = []
        for name, kind, lo, hi in params:
            if kind == "intlog":
                v.append(trial.suggest_int(name, int(lo), int(hi), log=True))
            else:
                v.append(trial.suggest_float(name, lo, hi, log=(kind == "log")))
        u = unit(params, np.array([v], dtype=float))[0]
        c = int(np.argmin(((ux - u) ** 2).sum(axis=1)))
        s = int(np.random.default_rng([seed, trial.number]).integers(ns))
        e = math.inf
        for t in range(1, epochs + 1):
            if budget is not None and state["epochs"] >= budget:
                trial.study.stop()
                raise optuna.TrialPruned()  # the budget is spent: no result for this trial
            e = float(err[c, s, t - 1])
            state["epochs"] += 1
            if e < state["best"]:
                state["best"], state["at"] = e, state["epochs"]
            trial.report(e, t)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return e

    st.optimize(objective, n_trials=None if budget is not None else trials)
    return state["best"], state["epochs"], state["at"]


def read_budgets(path):
    """{(dataset, method): {seed: (epochs, best_any)}} from mf_search --per-seed."""
    out = {}
    with open(path) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            r = dict(zip(header, line.rstrip("\n").split("\t")))
            out.setdefault((r["dataset"], r["method"]), {})[int(r["seed"])] = (
                int(float(r["epochs"])), float(r["best_any"]))
    return out


def equal_epochs(params, epochs, data, budgets, only):
    """Optuna's tpe + sha and random + sha at tunepack's epochs, per seed."""
    for d, (x, err) in data.items():
        if only and d != only:
            continue
        print("dataset %s: Optuna %s at the epochs tunepack spent per seed (trials one at a "
              "time); best error after any epoch; medians over seeds" % (d, optuna.__version__))
        print("%-14s %5s %7s %9s  %-14s %9s %7s %s" % ("tunepack", "seeds", "epochs", "best",
                                                      "Optuna", "best", "epochs",
                                                      "tunepack lower/equal/higher"))
        for tp in ("asha + tpe", "asha + random"):
            runs = budgets.get((d, tp))
            if not runs:
                continue
            seeds = sorted(runs)
            tp_best = [runs[k][1] for k in seeds]
            for method in ("tpe + sha", "random + sha"):
                res = [study_run(method, params, epochs, x, err, k, 0, budget=runs[k][0])
                       for k in seeds]
                op_best = [r[0] for r in res]
                lo = sum(a < b for a, b in zip(tp_best, op_best))
                eq = sum(a == b for a, b in zip(tp_best, op_best))
                print("%-14s %5d %7.0f %9.4f  %-14s %9.4f %7.0f %d/%d/%d" % (
                    tp, len(seeds), statistics.median(runs[k][0] for k in seeds),
                    statistics.median(tp_best), method, statistics.median(op_best),
                    statistics.median(r[1] for r in res), lo, eq, len(seeds) - lo - eq))
                sys.stdout.flush()
        print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", default=os.path.join(HERE, "data", "lcbench-sk.tsv"))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--trials", type=int, default=243)
    ap.add_argument("--dataset")
    ap.add_argument("--budgets", help="mf_search --per-seed output: compare at its epochs")
    a = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    epochs, params, data = read(a.table)
    if a.budgets:
        equal_epochs(params, epochs, data, read_budgets(a.budgets), a.dataset)
        return
    for d, (x, err) in data.items():
        if a.dataset and d != a.dataset:
            continue
        print("dataset %s: Optuna %s, %d seeds, %d trials, epochs 1..%d, one trial at a time; "
              "medians over seeds" % (d, optuna.__version__, a.seeds, a.trials, epochs))
        print("%-20s %8s %8s %12s" % ("method", "best", "epochs", "to its best"))
        for method in ("tpe + hyperband", "random + hyperband", "tpe + sha"):
            res = [study_run(method, params, epochs, x, err, k, a.trials)
                   for k in range(1, a.seeds + 1)]
            print("%-20s %8.4f %8.0f %12.0f" % (method,
                                                 statistics.median(r[0] for r in res),
                                                 statistics.median(r[1] for r in res),
                                                 statistics.median(r[2] for r in res)))
        print()
        sys.stdout.flush()


if __name__ == "__main__":
    main()
