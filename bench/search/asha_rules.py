#!/usr/bin/python3
"""ASHA's promotion rule against Optuna's SuccessiveHalvingPruner, on identical sequences.

Both see the same configurations in the same order, one at a time (concurrency 1), with
rungs 1 3 9 27 (eta 3) and a trial trained from its checkpoint (a trial that stops at rung k
has trained r_k epochs). What differs is only the rule:

  asha    Li et al. 2020, alg. 2 (src/search/sched_asha.c): get_job promotes, from the
          highest rung down, a trial of rung k in the top floor(n_k / eta) not promoted yet,
          else starts a new trial; a trial can enter a rung's top late, as n_k grows.
  optuna  SuccessiveHalvingPruner(min_resource=1, reduction_factor=3) as Optuna 3.1 writes
          it: when a trial reaches a rung it goes on only if it ranks in the top
          max(1, n_k // eta) of the values there (itself counted, ties go on); decided once.
  sha     synchronous successive halving: n, floor(n/3), ... (the paper's formula).

A configuration is a learning curve q (1 - exp(-epochs / tau)) plus noise; "improving" makes
later configurations better on average, as a sampler that learns (TPE) does. Prints the
median epochs and best value over seeds. Standard library only; figures, not a test.

    python3 bench/search/asha_rules.py [--seeds 500] [--trials 60]
"""

import argparse
import math
import random
import statistics

RUNGS = [1, 3, 9, 27]
ETA = 3


def value(cfg, k, rng_noise):
    q, tau, key = cfg
    return q * (1 - math.exp(-RUNGS[k] / tau)) + rng_noise(key, k)


def spent(k):
    """Epochs a job at rung k trains from the checkpoint of rung k - 1."""
    return RUNGS[k] - (RUNGS[k - 1] if k else 0)


def asha(cfgs, noise):
    rungs = [[] for _ in RUNGS]
    at = {}
    epochs, started, best = 0, 0, -math.inf
    while True:
        job = None
        for k in range(len(RUNGS) - 2, -1, -1):
            top = sorted(rungs[k], key=lambda r: (-r[0], r[1]))[:len(rungs[k]) // ETA]
            job = next(((t, k + 1) for _, t in top if at[t] == k), None)
            if job:
                break
        if job is None:
            if started == len(cfgs):
                return epochs, best
            job = (started, 0)
            started += 1
        t, k = job
        at[t] = k
        epochs += spent(k)
        v = value(cfgs[t], k, noise)
        best = max(best, v)
        rungs[k].append((v, t))


def optuna(cfgs, noise):
    seen = [[] for _ in RUNGS]
    epochs, best = 0, -math.inf
    for cfg in cfgs:
        for k in range(len(RUNGS)):
            epochs += spent(k)
            v = value(cfg, k, noise)
            best = max(best, v)
            seen[k].append(v)
            ranked = sorted(seen[k], reverse=True)
            if k == len(RUNGS) - 1 or v < ranked[max(1, len(ranked) // ETA) - 1]:
                break
    return epochs, best


def sha_epochs(n):
    total, share = 0, n
    for k in range(len(RUNGS)):
        total += share * spent(k)
        share //= ETA
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=500)
    ap.add_argument("--trials", type=int, default=60)
    args = ap.parse_args()
    print("%d trials, rungs %s, eta %d, concurrency 1; median over %d seeds (SHA: %d epochs)"
          % (args.trials, RUNGS, ETA, args.seeds, sha_epochs(args.trials)))
    for improving in (False, True):
        rows = {"asha": [], "optuna": []}
        for seed in range(args.seeds):
            rng = random.Random(seed)
            cfgs = []
            for t in range(args.trials):
                lift = 0.5 + 0.5 * t / args.trials if improving else 1.0
                cfgs.append((rng.random() ** 0.5 * lift, rng.uniform(1, 20), rng.random()))

            def noise(key, k):
                return random.Random(hash((seed, key, k))).uniform(-0.005, 0.005)

            rows["asha"].append(asha(cfgs, noise))
            rows["optuna"].append(optuna(cfgs, noise))
        for name, runs in rows.items():
            print("  %-9s %-7s epochs %6.1f  best %.4f" % (
                "improving" if improving else "random", name,
                statistics.median(e for e, _ in runs), statistics.median(b for _, b in runs)))


if __name__ == "__main__":
    main()
