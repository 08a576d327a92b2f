"""Surrogate tuning (`surrogate:`): is the configuration promoted from a width-scaled search as
good at full size as the best of a search run at full size, and what does it cost?

    python3 bench/surrogate/bench.py [--build DIR] [--seeds N] [--trials N]
        [--surrogate-trials N] [--algorithm A] [--concurrency N]
    python3 bench/surrogate/bench.py --mup [--build DIR] [--runs SURROGATE_DIR FULL_DIR]

Family (default): bench/surrogate/family.py, a synthetic model family whose optimum nearly
transfers across width (its docstring has the formula; cost = width^2 + 0.02 per trial). For
each seed it runs the search twice through tunepack: at full size (width_mult 1, --trials
trials), and with `surrogate: {param: width_mult, value: 0.125, promote: 3, eager: 0.5}`
(--surrogate-trials surrogates, default --trials: a surrogate costs 0.035 of a full-size
trial, so the surrogate search can afford more). It prints, per seed: the full search's best
loss, the promoted loss (the best target trial), the gap in per cent of the full best,
"explored" (the gap of the best configuration the surrogate search tried, evaluated at full
size with the family's formula: what a perfect promotion would reach; gap - explored is the
promotion's own error), the cost ratio (surrogate search, targets included / full search) and
the targets run; then the worst and mean over the seeds. --algorithm random (default)
proposes the same configurations in both runs when the trial counts are equal, so the gap is
the surrogate's ranking error alone; tpe lets the two searches diverge. One trial at a time
(--concurrency 1, the default) lets the search see every result before its next proposal,
so a seed gives the same figures on every run and any load.

--mup runs examples/mup/experiment.yaml (a 1024-wide muP MLP, its learning rate searched
at width 0.25, the best 3 promoted) and examples/mup/full.yaml (the same search at full width) on this machine's CPU
and prints the same row with the cost in CPU seconds (every trial's own, from its cpu_s
report), once with and once without each trial's fixed start-up (import torch, the data).
--runs reads two finished runs instead. Needs Debian's python3-torch. Take the figures
when the load is low; the load average before and after is printed.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

EXPERIMENT = """name: family-{kind}
command: [{py}, {family}, "{{lr}}", "{{wd}}", "{{momentum}}", {width}]
metric: {{name: loss, mode: min}}
space:
  lr: {{loguniform: [1.0e-5, 1.0]}}
  wd: {{loguniform: [1.0e-6, 1.0e-1]}}
  momentum: {{uniform: [0.5, 0.99]}}
search: {{algorithm: {algorithm}, trials: {trials}, seed: {seed}}}
concurrency: {concurrency}
{surrogate}"""


def run(binary, exp, run_dir):
    p = subprocess.run([binary, "run", exp, "--dir", run_dir, "--quiet"], cwd=ROOT,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("tunepack run %s failed (%d):\n%s" % (exp, p.returncode, p.stderr))
    return exported(binary, run_dir)


def summary(full, surr, cost):
    """(best full value, promoted value, gap %, cost ratio, targets): cost(trial) its cost."""
    done = [t for t in full if t["value"] is not None]
    best_full = min(t["value"] for t in done)
    targets = [t for t in surr if t.get("kind") == "target" and t["value"] is not None]
    promoted = min(t["value"] for t in targets)
    ratio = sum(cost(t) for t in surr) / sum(cost(t) for t in full)
    return best_full, promoted, 100.0 * (promoted - best_full) / abs(best_full), ratio, len(targets)


def explored(surr, best_full):
    """The gap (%) of the best configuration the surrogate search tried, evaluated at full size
    with the family's formula: what a perfect promotion would reach. gap - explored is the
    promotion's error (ranking at the surrogate width), explored the search's (what it tried)."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "surrogate"))
    import family as fam  # noqa: E402 (stdlib only)
    best = min(fam.loss(t["params"]["lr"], t["params"]["wd"], t["params"]["momentum"], 1.0)
               for t in surr if t.get("kind") == "surrogate")
    return 100.0 * (best - best_full) / abs(best_full)


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def family(args):
    fam = os.path.join(ROOT, "bench", "surrogate", "family.py")
    rows = []
    with tempfile.TemporaryDirectory(prefix="tp-surrogate-") as tmp:
        for seed in range(1, args.seeds + 1):
            res = {}
            for kind in ("full", "surrogate"):
                sur = ("surrogate: {param: width_mult, value: 0.125, promote: 3, eager: 0.5}\n"
                       if kind == "surrogate" else "")
                exp = os.path.join(tmp, "%s-%d.yaml" % (kind, seed))
                with open(exp, "w") as f:
                    f.write(EXPERIMENT.format(kind=kind, py=json.dumps(sys.executable),
                                              family=json.dumps(fam),
                                              width='"{width_mult}"' if sur else '"1"',
                                              algorithm=args.algorithm,
                                              trials=args.surrogate_trials if sur
                                              else args.trials,
                                              seed=seed, surrogate=sur,
                                              concurrency=args.concurrency))
                res[kind] = run(args.binary, exp, os.path.join(tmp, "%s-%d" % (kind, seed)))
            r = summary(res["full"], res["surrogate"], lambda t: t["metrics"]["cost"])
            rows.append((seed,) + r[:3] + (explored(res["surrogate"], r[0]),) + r[3:])
    print("surrogate bench: synthetic family, %s, %d full-size trials, %d surrogate trials, width "
          "0.125, promote 3, eager 0.5; cost = width^2 + 0.02 per trial"
          % (args.algorithm, args.trials, args.surrogate_trials))
    print("%4s  %12s  %12s  %7s  %9s  %10s  %7s" % ("seed", "best full", "promoted", "gap %",
                                                      "explored", "cost ratio", "targets"))
    for r in rows:
        print("%4d  %12.6f  %12.6f  %7.3f  %9.3f  %10.3f  %7d" % r)
    gaps, ratios = [r[3] for r in rows], [r[5] for r in rows]
    print("worst gap %.3f %%, mean gap %.3f %%, worst cost ratio %.3f: %s" % (
        max(gaps), sum(gaps) / len(gaps), max(ratios),
        "within 1% at under a third of the cost" if max(gaps) <= 1 and max(ratios) < 1 / 3
        else "SHORT of within 1% at under a third of the cost"))


def exported(binary, run_dir):
    e = subprocess.run([binary, "export", run_dir, "--format", "json"], capture_output=True,
                       text=True, check=True)
    return json.loads(e.stdout)


def mup(args):
    before = load()
    if args.runs:  # runs made before: read their stores
        res = {"surrogate": exported(args.binary, args.runs[0]),
               "full": exported(args.binary, args.runs[1])}
    else:
        with tempfile.TemporaryDirectory(prefix="tp-mup-") as tmp:
            res = {k: run(args.binary, os.path.join(ROOT, "examples", "mup", y),
                          os.path.join(tmp, k))
                   for k, y in (("surrogate", "experiment.yaml"), ("full", "full.yaml"))}
    after = load()
    print("surrogate bench: muP example (examples/mup), val_loss, %d full-width trials, %d "
          "surrogates, width %g, promote 3, eager 0.5; load average before %s, after %s"
          % (len(res["full"]), sum(t.get("kind") == "surrogate" for t in res["surrogate"]),
             res["surrogate"][0]["params"]["width_mult"], before, after))
    print("%-22s  %10s  %10s  %7s  %10s  %7s  %8s  %8s" % (
        "cost counted", "best full", "promoted", "gap %", "cost ratio", "targets", "surr CPU",
        "full CPU"))
    for name, key in (("CPU s, whole process", "cpu_s"), ("CPU s, training only", "train_cpu_s")):
        def cost(t, key=key):
            return t["metrics"][key] if t["metrics"] else 0.0
        r = summary(res["full"], res["surrogate"], cost)
        print("%-22s  %10.5f  %10.5f  %7.3f  %10.3f  %7d  %8.1f  %8.1f" % (
            (name,) + r + (sum(cost(t) for t in res["surrogate"]),
                           sum(cost(t) for t in res["full"]))))
    ok = [t for t in res["full"] if t["value"] is not None]
    best = min(ok, key=lambda t: (t["value"], t["id"]))
    byid = {t["id"]: t for t in res["surrogate"]}
    for t in sorted((t for t in res["surrogate"] if t.get("kind") == "target"),
                    key=lambda t: t["id"]):
        print("target trial %d: lr %.3g, val_loss %s at full width, %.5f as surrogate trial %d"
              % (t["id"], t["params"]["lr"], "%.5f" % t["value"] if t["value"] is not None
                 else "-", byid[t["source"]]["value"], t["source"]))
    print("full search's best: trial %d, lr %.3g, val_loss %.5f"
          % (best["id"], best["params"]["lr"], best["value"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--surrogate-trials", type=int, default=0,
                    help="trials of the surrogate search (default: --trials)")
    ap.add_argument("--concurrency", type=int, default=1,
                    help="trials at once (1, the default: the search sees every result before "
                         "its next proposal, so a seed gives the same figures on every run)")
    ap.add_argument("--algorithm", default="random", choices=("random", "tpe"))
    ap.add_argument("--mup", action="store_true")
    ap.add_argument("--runs", nargs=2, metavar=("SURROGATE_DIR", "FULL_DIR"),
                    help="with --mup: read these finished runs of examples/mup/experiment.yaml "
                         "and full.yaml instead of running them")
    args = ap.parse_args()
    args.surrogate_trials = args.surrogate_trials or args.trials
    args.binary = os.path.join(os.path.abspath(args.build), "tunepack")
    mup(args) if args.mup else family(args)


if __name__ == "__main__":
    main()
