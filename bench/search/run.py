#!/usr/bin/python3
"""Side-by-side search benchmark: tunepack against Optuna on the same trial commands.

For the C MLP example (val_acc) and the synthetic objectives of search_objective (bowl,
branin, needle: learning curves with a known optimum), over several seeds, it runs:

  tunepack: random (full budget), tpe, asha (random sampler), asha with tpe, hyperband, median
            - one experiment YAML per run, `tunepack run FILE --dir D --quiet`, results read
            from D/tunepack.db (tables trials, metrics, events);
  Optuna:   RandomSampler, TPESampler(seed) (default settings), and with pruners:
            SuccessiveHalvingPruner (asha), HyperbandPruner, MedianPruner
            - each trial runs the same command as a subprocess, reporting JSON lines on a pipe
            named by TUNEPACK_REPORT_FD; n_jobs as --concurrency.

Both run --concurrency trials at a time (default 2: tunepack's `concurrency:` and Optuna's
n_jobs). At 2 the trials finish in an order that depends on the machine's load, and each ask
depends on what has finished, so two runs of the same seeds differ; --concurrency 1 makes
both engines deterministic given the seed (the same figures run after run), which is what
settles a close comparison. For each method and objective it prints the
median over seeds of: the best value found with the same number of trials; the best value
found within the same total number of epochs (a third of what random with the full budget
uses); the epochs used; and the wall time. A second pass times the same work (random search,
full budget, every epoch sleeping --epoch-ms) on both engines at the same concurrency.

"Best value" is the largest reported value of the metric (both metrics are maximized), over
every report in the run: for a pruned or stopped trial that is its last (lower-budget) value.
"Epochs" counts reports: one per epoch trained, repeated epochs included.

Then it checks and prints PASS or MISS for:
  1. tunepack tpe at least as good as Optuna TPE: median best value at the same number of
     trials, within a tolerance (0.01 for the synthetic objectives, twice their noise; 0.005
     for the MLP, five validation points);
  2. tunepack asha reaches the best value that random with the full budget finds (within the
     same tolerance) using at most a third of the epochs random used (median over seeds);
  3. tunepack's wall time is lower than Optuna's for the same work (random search, full budget);
  4. tunepack asha + tpe reaches at least Optuna's TPE + SuccessiveHalvingPruner at equal epochs:
     each seed cut at the smaller of the two runs' epoch counts (median over seeds, the same
     tolerance). --methods tp-asha-tpe,op-asha-tpe runs this comparison alone.

--optuna-normalized gives Debian's Optuna 3.1 TPE the normalized kernels of later Optuna
(its truncated-normal log density leaves out -log(sigma): optuna issue 5109), which tunepack's
tpe has; without it the comparison is with Optuna 3.1 as Debian ships it.

Figures, not tests: nothing here asserts on time. Usage, from the repository root:

    sh bench/search/setup.sh                 # Optuna from Debian (python3-optuna)
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j"$(nproc)"
    python3 bench/search/run.py --quick      # 3 seeds, fewer trials: about 2 minutes on 2 cores
    python3 bench/search/run.py              # 10 seeds, 60 trials: about 14 minutes on 2 cores
    python3 bench/search/run.py --objectives needle --methods tp-asha-tpe,op-asha-tpe \
        --seeds 40 --concurrency 1           # reproducible: about 3 minutes

Standard library and optuna only. It re-executes itself with /usr/bin/python3 when the
interpreter it was started with cannot import optuna (Debian's package lives there).
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
import threading
import time

try:
    import optuna
except ImportError:
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != \
            os.path.realpath("/usr/bin/python3") and not os.environ.get("TP_BENCH_REEXEC"):
        os.environ["TP_BENCH_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("run.py: optuna is not installed: run bench/search/setup.sh "
             "(apt-get install -y python3-optuna)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SYNTHETIC = ("bowl", "branin", "needle")
SYNTHETIC_SPACE = [  # (name, kind, args): the space search_objective --describe prints
    ("x", "uniform", (0.0, 1.0)),
    ("z", "uniform", (0.0, 1.0)),
    ("y", "loguniform", (1.0e-5, 1.0)),
    ("c", "choice", ("opt0", "opt1", "opt2", "opt3")),
]
MLP_SPACE = [  # as examples/mlp/experiment.yaml
    ("lr", "loguniform", (1.0e-4, 1.0)),
    ("momentum", "uniform", (0.0, 0.99)),
    ("hidden", "choice", (16, 32, 64, 128)),
    ("layers", "int", (1, 3)),
]
TP_METHODS = [  # name, sampler, scheduler (None: fifo, one job per trial at the full budget)
    ("tp-random", "random", None),
    ("tp-tpe", "tpe", None),
    ("tp-asha", "random", "asha"),
    ("tp-asha-tpe", "tpe", "asha"),
    ("tp-hyperband", "random", "hyperband"),
    ("tp-median", "random", "median"),
]
OPTUNA_METHODS = [  # name, sampler, pruner
    ("op-random", "random", None),
    ("op-tpe", "tpe", None),
    ("op-asha", "random", "asha"),
    ("op-asha-tpe", "tpe", "asha"),
    ("op-hyperband", "random", "hyperband"),
    ("op-median", "random", "median"),
]


class Problem:
    """One objective: its command, space, metric, budget and tolerance."""

    def __init__(self, name, args):
        self.name = name
        self.synthetic = name in SYNTHETIC
        self.space = SYNTHETIC_SPACE if self.synthetic else MLP_SPACE
        self.metric = "score" if self.synthetic else "val_acc"
        self.max_budget = args.max_budget if self.synthetic else args.mlp_max_budget
        self.trials = args.trials if self.synthetic else args.mlp_trials
        self.tolerance = 0.01 if self.synthetic else 0.005
        self.objective_bin = args.objective_bin
        self.mlp_bin = args.mlp_bin
        self.concurrency = args.concurrency

    def argv(self, params, epochs, seed, epoch_ms=0):
        """The trial's argv; params values may be placeholders ("{x}") or numbers."""
        if self.synthetic:
            argv = [self.objective_bin, "--objective", self.name, "--seed", str(seed)]
            if epoch_ms:
                argv += ["--epoch-ms", str(epoch_ms)]
        else:
            argv = [self.mlp_bin]
        for name, _, _ in self.space:
            argv += ["--" + name, str(params[name])]
        return argv + ["--epochs", str(epochs)]


# ---- tunepack ----

def yaml_scalar(v):
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, float):
        return repr(v) if "e" not in repr(v) else "%.1e" % v  # 1.0e-05: a YAML 1.1 float
    return str(v)


def tunepack_yaml(problem, method, seed, epoch_ms):
    """The experiment file for one tunepack run (fifo: the full budget as a constant)."""
    _, sampler, scheduler = method
    placeholders = {name: "{%s}" % name for name, _, _ in problem.space}
    argv = problem.argv(placeholders, "{epochs}", seed, epoch_ms)
    lines = ["name: %s-%s-%d" % (problem.name, method[0], seed),
             "command: [%s]" % ", ".join(yaml_scalar(a) for a in argv),
             "metric: {name: %s, mode: max}" % problem.metric,
             "space:"]
    for name, kind, a in problem.space:
        if kind == "choice":
            lines.append("  %s: {choice: [%s]}" % (name, ", ".join(yaml_scalar(v) for v in a)))
        else:
            lines.append("  %s: {%s: [%s, %s]}" % (name, kind, yaml_scalar(a[0]),
                                                   yaml_scalar(a[1])))
    search = "{algorithm: %s, trials: %d, seed: %d" % (sampler, problem.trials, seed)
    if scheduler is None:
        lines.append("  epochs: %d" % problem.max_budget)
    else:
        search += ", scheduler: %s" % scheduler
        lines.append("budget: {name: epochs, min: 1, max: %d, eta: 3}" % problem.max_budget)
    lines += ["search: %s}" % search, "concurrency: %d" % problem.concurrency, "retries: 0",
              "timeout: 10m"]
    return "\n".join(lines) + "\n"


def report_order(db):
    """Every report of a run, as (estimated time, value), in time order.

    The metrics table has no time column: a report's time is estimated by spreading the
    reports of one attempt evenly between its 'running' event and the attempt's next event.
    """
    times = {}
    for event, trial, attempt, at, kind in db.execute(
            "SELECT id, trial, attempt, at, kind FROM events ORDER BY id"):
        key = (trial, attempt)
        if kind == "running" and key not in times:
            times[key] = [at, None, event]
        elif key in times and times[key][1] is None and kind != "running":
            times[key][1] = at
    rows = db.execute("SELECT trial, attempt, seq, value FROM metrics "
                      "WHERE value IS NOT NULL ORDER BY trial, attempt, seq").fetchall()
    per_attempt = {}
    for trial, attempt, seq, value in rows:
        per_attempt.setdefault((trial, attempt), []).append(value)
    out = []
    for key, values in per_attempt.items():
        start, end, event = times.get(key, [0.0, None, 0])
        end = start if end is None else end
        for i, v in enumerate(values):  # equal times (a coarse clock): in start order
            out.append((start + (end - start) * (i + 1) / len(values), event, i, v))
    out.sort(key=lambda r: r[:3])
    return [(t, v) for t, _, _, v in out]


def run_tunepack(args, problem, method, seed, epoch_ms=0):
    """One tunepack run; returns a result dict, or {"error": text} when it did not run."""
    work = tempfile.mkdtemp(prefix="tp-bench-", dir=args.scratch)
    try:
        path = os.path.join(work, "experiment.yaml")
        with open(path, "w") as f:
            f.write(tunepack_yaml(problem, method, seed, epoch_ms))
        t0 = time.monotonic()
        p = subprocess.run([args.tunepack, "run", path, "--dir", os.path.join(work, "run"),
                            "--quiet"], cwd=work, capture_output=True, text=True)
        wall = time.monotonic() - t0
        dbpath = os.path.join(work, "run", "tunepack.db")
        # exit 5 is "no trial completed": an adaptive run whose every trial was stopped
        # before the top rung still found values, which is what is measured here
        if p.returncode not in (0, 5) or not os.path.exists(dbpath):
            text = (p.stderr or p.stdout or "exit %d" % p.returncode).strip().splitlines()
            return {"error": text[0] if text else "exit %d" % p.returncode}
        db = sqlite3.connect(dbpath)
        try:
            curve = [v for _, v in report_order(db)]
            trials = db.execute("SELECT count(*) FROM trials").fetchone()[0]
        finally:
            db.close()
        if not curve:
            return {"error": "no reports in tunepack.db"}
        return {"curve": curve, "trials": trials, "wall": wall}
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- Optuna ----

def normalize_optuna_tpe():
    """Makes the TPE of Debian's Optuna 3.1 use normalized kernels, as later Optuna does.

    Optuna 3.1's _truncnorm.logpdf(x, a, b, loc, scale) leaves out -log(scale) (optuna
    issue 5109, fixed by pull request 5110): each kernel's density is off by its bandwidth,
    so l(x) / g(x) favours wide kernels. tunepack's tpe uses normalized kernels, as the paper
    does. Returns True when it patched, False when the installed Optuna needs no patch."""
    import numpy as np
    from optuna.samplers._tpe import _truncnorm
    one = _truncnorm.logpdf(np.array([0.0]), -1.0, 1.0, loc=0.0, scale=1.0)[0]
    two = _truncnorm.logpdf(np.array([0.0]), -1.0, 1.0, loc=0.0, scale=2.0)[0]
    if abs((one - two) - math.log(2.0)) < 1e-9:
        return False
    unscaled = _truncnorm.logpdf

    def logpdf(x, a, b, loc=0, scale=1):
        return unscaled(x, a, b, loc, scale) - np.log(scale)

    _truncnorm.logpdf = logpdf
    return True


def optuna_sampler(kind, seed):
    if kind == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)


def optuna_pruner(kind, problem):
    if kind == "asha":
        return optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3)
    if kind == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource=problem.max_budget,
                                              reduction_factor=3)
    if kind == "median":
        return optuna.pruners.MedianPruner()
    return optuna.pruners.NopPruner()


def suggest(trial, space):
    params = {}
    for name, kind, a in space:
        if kind == "choice":
            params[name] = trial.suggest_categorical(name, list(a))
        elif kind == "int":
            params[name] = trial.suggest_int(name, a[0], a[1])
        else:
            params[name] = trial.suggest_float(name, a[0], a[1], log=(kind == "loguniform"))
    return params


def run_optuna(args, problem, method, seed, epoch_ms=0):
    """One Optuna study (n_jobs: --concurrency) running the trial commands; returns a result."""
    _, sampler, pruner = method
    lock = threading.Lock()
    curve = []

    def objective(trial):
        argv = problem.argv(suggest(trial, problem.space), problem.max_budget, seed, epoch_ms)
        r, w = os.pipe()
        # The same work as under tunepack: there every trial has a checkpoint
        # directory and the trial commands save a checkpoint each epoch.
        ckpt = tempfile.mkdtemp(prefix="optuna-ckpt-", dir=args.scratch)
        env = dict(os.environ, TUNEPACK_REPORT_FD=str(w), TUNEPACK_CHECKPOINT_DIR=ckpt)
        proc = subprocess.Popen(argv, env=env, pass_fds=(w,), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(w)
        last = None
        try:
            with os.fdopen(r) as f:
                for line in f:
                    record = json.loads(line)
                    value = record.get(problem.metric)
                    if value is None:
                        continue
                    with lock:
                        curve.append(value)
                    last = value
                    if pruner is not None:
                        trial.report(value, record["step"])
                        if trial.should_prune():
                            raise optuna.TrialPruned()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            shutil.rmtree(ckpt, ignore_errors=True)
        if last is None:
            raise RuntimeError("trial reported no %s" % problem.metric)
        return last

    study = optuna.create_study(direction="maximize", sampler=optuna_sampler(sampler, seed),
                                pruner=optuna_pruner(pruner, problem))
    t0 = time.monotonic()
    study.optimize(objective, n_trials=problem.trials, n_jobs=problem.concurrency,
                   catch=(RuntimeError, ValueError, KeyError))
    wall = time.monotonic() - t0
    if not curve:
        return {"error": "no reports"}
    return {"curve": curve, "trials": len(study.trials), "wall": wall}


# ---- figures ----

def best_within(curve, epochs):
    return max(curve[:epochs]) if curve and epochs > 0 else float("nan")


def epochs_to_reach(curve, target):
    for i, v in enumerate(curve):
        if v >= target:
            return i + 1
    return math.inf


def median(values):
    values = [v for v in values if not (isinstance(v, float) and math.isnan(v))]
    return statistics.median(values) if values else float("nan")


def fmt(v, digits=4):
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return "n/a" if math.isnan(v) else "never"
    return ("%." + str(digits) + "f") % v if isinstance(v, float) else str(v)


def quality_pass(args, problems, methods):
    """Runs every method on every problem for every seed; returns results[problem][method]."""
    results = {}
    for problem in problems:
        results[problem.name] = {}
        for method, runner in methods:
            runs = []
            for seed in range(1, args.seeds + 1):
                r = runner(args, problem, method, seed)
                runs.append(r)
                if "error" in r:
                    break
            results[problem.name][method[0]] = runs
            ok = [r for r in runs if "error" not in r]
            if ok:
                print("  %-8s %-13s best %s  epochs %6d  wall %6.2fs  (%d seeds)" % (
                    problem.name, method[0], fmt(median([max(r["curve"]) for r in ok])),
                    median([len(r["curve"]) for r in ok]), median([r["wall"] for r in ok]),
                    len(ok)), flush=True)
            else:
                print("  %-8s %-13s did not run: %s" % (problem.name, method[0],
                                                        runs[0]["error"]), flush=True)
    return results


def print_table(problem, runs_by_method):
    equal_epochs = problem.trials * problem.max_budget // 3
    print("\n%s: %d trials, budget 1..%d (eta 3), concurrency %d; best@epochs counts the "
          "first %d epochs (a third of random's full budget)" % (
              problem.name, problem.trials, problem.max_budget, problem.concurrency, equal_epochs))
    print("  %-13s %13s %13s %12s %9s %7s" % ("method", "best@trials", "best@epochs",
                                              "epochs used", "wall s", "trials"))
    for name, runs in runs_by_method.items():
        ok = [r for r in runs if "error" not in r]
        if not ok:
            print("  %-13s not run: %s" % (name, runs[0]["error"][:90]))
            continue
        print("  %-13s %13s %13s %12s %9.2f %7s" % (
            name, fmt(median([max(r["curve"]) for r in ok])),
            fmt(median([best_within(r["curve"], equal_epochs) for r in ok])),
            fmt(median([float(len(r["curve"])) for r in ok]), 0),
            median([r["wall"] for r in ok]), fmt(median([float(r["trials"]) for r in ok]), 0)))


def check_targets(problems, results):
    """Prints PASS/MISS for targets 1 and 2 per problem; returns nothing (figures only)."""
    print("\nTargets")
    for problem in problems:
        res = results[problem.name]
        tol = problem.tolerance

        def ok_runs(name):
            return [r for r in res.get(name, []) if "error" not in r]

        tp_tpe, op_tpe = ok_runs("tp-tpe"), ok_runs("op-tpe")
        if tp_tpe and op_tpe:
            a = median([max(r["curve"]) for r in tp_tpe])
            b = median([max(r["curve"]) for r in op_tpe])
            print("  %s %-8s tunepack tpe %.4f vs Optuna TPE %.4f (median best, %d trials; "
                  "tolerance %g)" % ("PASS" if a >= b - tol else "MISS", problem.name, a, b,
                                     problem.trials, tol))
        else:
            print("  n/a  %-8s tpe vs Optuna TPE: tunepack tpe did not run" % problem.name)

        rnd, asha = ok_runs("tp-random"), ok_runs("tp-asha")
        if rnd and asha and len(rnd) == len(asha):
            needed, full = [], []
            for r, a in zip(rnd, asha):  # same seed, same objective noise
                needed.append(epochs_to_reach(a["curve"], max(r["curve"]) - tol))
                full.append(len(r["curve"]))
            need, have = median(needed), median(full)
            reached = sum(1 for n in needed if n != math.inf)
            print("  %s %-8s tunepack asha reaches random's best (-%g) in %s epochs (median; "
                  "%d of %d seeds reach it) vs random's %d: target <= %d" % (
                      "PASS" if need <= have / 3 else "MISS", problem.name, tol,
                      fmt(float(need), 0), reached, len(needed), have, have // 3))
        else:
            print("  n/a  %-8s asha vs random: tunepack asha did not run" % problem.name)

        equal_cost(problem, ok_runs("tp-asha-tpe"), ok_runs("op-asha-tpe"))


def equal_cost(problem, tp, op):
    """ASHA + TPE against Optuna's TPE + SuccessiveHalvingPruner at equal cost, per seed.

    The two spend different epochs for the same number of trials: Optuna's pruner decides once,
    when a trial reaches a rung, while ASHA promotes a trial whenever it enters the top
    floor(n_k / eta) of its rung, which grows as results arrive (late promotions, and those
    made after the last new trial). So each seed is cut at the smaller of the two epoch counts
    and the best value within it compared (median over seeds, the same tolerance)."""
    if not tp or not op or len(tp) != len(op):
        print("  n/a  %-8s asha+tpe vs Optuna tpe+sha: not both ran" % problem.name)
        return
    cut = [min(len(a["curve"]), len(b["curve"])) for a, b in zip(tp, op)]
    a = median([best_within(r["curve"], c) for r, c in zip(tp, cut)])
    b = median([best_within(r["curve"], c) for r, c in zip(op, cut)])
    ea, eb = median([len(r["curve"]) for r in tp]), median([len(r["curve"]) for r in op])
    print("  %s %-8s tunepack asha+tpe %.4f vs Optuna tpe+sha %.4f at equal epochs (median of "
          "each seed's smaller count, %d seeds; all epochs: %d vs %d, best %.4f vs %.4f)" % (
              "PASS" if a >= b - problem.tolerance else "MISS", problem.name, a, b, len(cut),
              ea, eb, median([max(r["curve"]) for r in tp]),
              median([max(r["curve"]) for r in op])))


def wall_pass(args, problem):
    """Times the same work (random search, full budget, --epoch-ms per epoch) on both."""
    rows = []
    for method, runner in ((TP_METHODS[0], run_tunepack), (OPTUNA_METHODS[0], run_optuna)):
        walls = []
        for seed in range(1, args.wall_seeds + 1):
            r = runner(args, problem, method, seed, epoch_ms=args.epoch_ms)
            if "error" in r:
                walls = r["error"]
                break
            walls.append(r["wall"])
        rows.append((method[0], walls))
    ideal = problem.trials * problem.max_budget * args.epoch_ms / 1000.0 / problem.concurrency
    print("\nWall time, same work: %s, random search, %d trials x %d epochs x %d ms, "
          "concurrency %d (ideal %.2f s), %d seeds" % (
              problem.name, problem.trials, problem.max_budget, args.epoch_ms,
              problem.concurrency, ideal, args.wall_seeds))
    for name, walls in rows:
        if isinstance(walls, str):
            print("  %-10s not run: %s" % (name, walls))
        else:
            print("  %-10s median %.2f s (overhead %.2f s over ideal)  runs: %s" % (
                name, median(walls), median(walls) - ideal,
                " ".join("%.2f" % w for w in walls)))
    if all(not isinstance(w, str) for _, w in rows):
        a, b = median(rows[0][1]), median(rows[1][1])
        print("  %s tunepack %.2f s vs Optuna %.2f s for the same work" % (
            "PASS" if a < b else "MISS", a, b))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 seeds, 30 trials (MLP: 12, "
                    "budget 9): a few minutes")
    ap.add_argument("--seeds", type=int, help="seeds per method and objective (10)")
    ap.add_argument("--trials", type=int, help="trials per synthetic run (60)")
    ap.add_argument("--max-budget", type=int, default=27, help="synthetic budget max (27)")
    ap.add_argument("--mlp-trials", type=int, help="trials per MLP run (30)")
    ap.add_argument("--mlp-max-budget", type=int, help="MLP budget max, epochs (27)")
    ap.add_argument("--objectives", default="bowl,branin,needle,mlp",
                    help="comma-separated: bowl, branin, needle, mlp")
    ap.add_argument("--engines", default="tunepack,optuna", help="tunepack, optuna or both")
    ap.add_argument("--methods", help="comma-separated method names to run (all), e.g. "
                    "tp-asha-tpe,op-asha-tpe for the equal-cost comparison alone")
    ap.add_argument("--concurrency", type=int, default=2, help="trials run at a time, on "
                    "both engines: tunepack's concurrency and Optuna's n_jobs (2); at 1 "
                    "both are deterministic given the seed")
    ap.add_argument("--optuna-normalized", action="store_true", help="give Optuna 3.1's TPE "
                    "normalized kernels (its truncated-normal density leaves out 1/sigma: "
                    "optuna issue 5109), as later Optuna and tunepack's tpe have")
    ap.add_argument("--epoch-ms", type=int, default=20, help="epoch time for the wall pass")
    ap.add_argument("--wall-seeds", type=int, help="seeds in the wall pass (3)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory")
    ap.add_argument("--tunepack", help="tunepack binary (BUILD/tunepack)")
    ap.add_argument("--scratch", default=None, help="where run directories go (a temp dir)")
    ap.add_argument("--dump", help="write every run's curve (values in report order), per "
                    "objective, method and seed, to this JSON file")
    args = ap.parse_args()

    quick = args.quick
    args.seeds = args.seeds or (3 if quick else 10)
    args.trials = args.trials or (30 if quick else 60)
    args.mlp_trials = args.mlp_trials or (12 if quick else 30)
    args.mlp_max_budget = args.mlp_max_budget or (9 if quick else 27)
    args.wall_seeds = args.wall_seeds or (1 if quick else 3)
    if args.concurrency < 1:
        sys.exit("run.py: --concurrency wants at least 1")
    args.tunepack = os.path.abspath(args.tunepack or os.path.join(args.build, "tunepack"))
    args.objective_bin = os.path.abspath(os.path.join(args.build, "bench", "search_objective"))
    args.mlp_bin = os.path.abspath(os.path.join(args.build, "examples", "mlp_train"))
    for path in (args.tunepack, args.objective_bin, args.mlp_bin):
        if not os.access(path, os.X_OK):
            sys.exit("run.py: %s is missing: build first (cmake --build build)" % path)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    patched = args.optuna_normalized and normalize_optuna_tpe()

    names = [n for n in args.objectives.split(",") if n]
    for n in names:
        if n not in SYNTHETIC + ("mlp",):
            sys.exit("run.py: unknown objective %r (bowl, branin, needle, mlp)" % n)
    problems = [Problem(n, args) for n in names]
    engines = set(args.engines.split(","))
    methods = ([(m, run_tunepack) for m in TP_METHODS] if "tunepack" in engines else []) + \
              ([(m, run_optuna) for m in OPTUNA_METHODS] if "optuna" in engines else [])
    if args.methods:
        wanted = set(args.methods.split(","))
        methods = [(m, r) for m, r in methods if m[0] in wanted]

    print("tunepack %s, optuna %s%s, %d seeds, python %s" % (
        args.tunepack, optuna.__version__, " (TPE kernels normalized)" if patched else "",
        args.seeds, sys.version.split()[0]))
    t0 = time.monotonic()
    results = quality_pass(args, problems, methods)
    if args.dump:
        with open(args.dump, "w") as f:
            json.dump(results, f)
    for problem in problems:
        print_table(problem, results[problem.name])
    check_targets(problems, results)
    if {"tunepack", "optuna"} <= engines and any(p.synthetic for p in problems) and \
            not args.methods:
        wall_pass(args, next(p for p in problems if p.synthetic))
    print("\ntotal %.0f s" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
