#!/usr/bin/python3
"""Search spaces and objectives as users write them: tunepack against Optuna 3.1 (Debian's
python3-optuna) on the same trial commands (bench/search/toy_objectives.py, run as
subprocesses by both), over several seeds, one trial at a time.

    sh bench/search/setup.sh                          # Optuna from Debian
    cmake -S . -B build -DCMAKE_BUILD_TYPE=Release && cmake --build build -j2
    python3 bench/search/spaces.py conditional        # tree space, TPE against TPE
    python3 bench/search/spaces.py --seeds 3 conditional   # a quick look

conditional  The `tree` problem: arch in {linear, mlp, cnn}, a shared lr, three parameters
             only for mlp, three only for cnn and one more only for cnn with kernel 5 or 7.
             tunepack writes it with `when:`; Optuna with define-by-run (suggest_* inside
             if arch == ...). Prints, per method, the median over seeds of the best loss after
             the trial budget; PASS when tunepack's TPE median is at most Optuna TPE's.
biobjective  ZDT1 (f1, f2 both minimized, 5 parameters): tunepack tpe (MOTPE), nsga2 and
             random against Optuna's TPESampler (MOTPE with two directions), NSGAIISampler and
             RandomSampler, at the same trial count. Prints the median hypervolume over seeds;
             PASS when tunepack's best median is at least Optuna's best.
warmstart    The bowl problem: per seed an earlier experiment of 50 random trials, then 20 TPE
             trials cold and 20 with search: {warm_start: [the earlier one]}; prints the median
             best loss of the 20 new trials; PASS when warm beats cold.

Figures, not tests: nothing here asserts. Standard library and optuna only; re-executes
itself with /usr/bin/python3 when the interpreter cannot import optuna.
"""

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import optuna
except ImportError:
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != \
            os.path.realpath("/usr/bin/python3") and not os.environ.get("TP_BENCH_REEXEC"):
        os.environ["TP_BENCH_REEXEC"] = "1"
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    sys.exit("spaces.py: optuna is not installed: run bench/search/setup.sh "
             "(apt-get install -y python3-optuna)")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OBJ = os.path.join(HERE, "toy_objectives.py")
OBJ_ARGV = ["/usr/bin/python3", "-S", OBJ]

# ---- the tree space, written both ways ------------------------------------------------

TREE_SPACE = """\
  arch: {choice: [linear, mlp, cnn]}
  lr: {loguniform: [1.0e-5, 1.0]}
  layers: {int: [1, 5], when: {arch: mlp}}
  width: {choice: [16, 32, 64, 128, 256, 512], when: {arch: mlp}}
  dropout: {uniform: [0.0, 0.5], when: {arch: mlp}}
  kernel: {choice: [3, 5, 7], when: {arch: cnn}}
  channels: {int: [4, 256], log: true, when: {arch: cnn}}
  pool: {choice: [max, avg], when: {arch: cnn}}
  dilation: {int: [1, 4], when: {kernel: [5, 7]}}
"""
TREE_PARAMS = ["arch", "lr", "layers", "width", "dropout", "kernel", "channels", "pool",
               "dilation"]


def tree_suggest(trial):
    """The same tree, define-by-run."""
    p = {"arch": trial.suggest_categorical("arch", ["linear", "mlp", "cnn"]),
         "lr": trial.suggest_float("lr", 1e-5, 1.0, log=True)}
    if p["arch"] == "mlp":
        p["layers"] = trial.suggest_int("layers", 1, 5)
        p["width"] = trial.suggest_categorical("width", [16, 32, 64, 128, 256, 512])
        p["dropout"] = trial.suggest_float("dropout", 0.0, 0.5)
    if p["arch"] == "cnn":
        p["kernel"] = trial.suggest_categorical("kernel", [3, 5, 7])
        p["channels"] = trial.suggest_int("channels", 4, 256, log=True)
        p["pool"] = trial.suggest_categorical("pool", ["max", "avg"])
        if p["kernel"] in (5, 7):
            p["dilation"] = trial.suggest_int("dilation", 1, 4)
    return p


# ---- running each engine ---------------------------------------------------------------

def tp_run(args, name, problem, params, space, metric_yaml, search_yaml, extra="", fixed=()):
    """Run one tunepack experiment; returns (rows, wall seconds, its directory),
    rows = [(id, value)]. fixed: more arguments for the trial command, as they are."""
    work = tempfile.mkdtemp(prefix="tp-spaces-", dir=args.scratch)
    cmd = ", ".join(json.dumps(a) for a in OBJ_ARGV + [problem] + list(fixed) +
                    ["--%s={%s}" % (p, p) for p in params])
    path = os.path.join(work, "exp.yaml")
    with open(path, "w") as f:
        f.write("name: %s\ncommand: [%s]\nmetric: %s\nspace:\n%ssearch: %s\nconcurrency: 1\n%s"
                % (name, cmd, metric_yaml, space, search_yaml, extra))
    t0 = time.monotonic()
    p = subprocess.run([args.tunepack, "run", path, "--dir", os.path.join(work, "run"),
                        "--quiet"], capture_output=True, text=True)
    wall = time.monotonic() - t0
    if p.returncode != 0:
        sys.exit("tunepack failed (%d): %s" % (p.returncode, p.stderr))
    db = sqlite3.connect(os.path.join(work, "run", "tunepack.db"))
    rows = db.execute("SELECT id, value FROM trials WHERE value IS NOT NULL "
                      "ORDER BY id").fetchall()
    db.close()
    return rows, wall, work


def run_objective(problem, params, fixed=()):
    """Run the trial command for params (and the arguments fixed); returns its JSON result."""
    argv = OBJ_ARGV + [problem] + list(fixed) + ["--%s=%s" % (k, v) for k, v in params.items()]
    out = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    return json.loads(out.stdout)


def optuna_sampler(name, seed):
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed)
    if name == "motpe":
        return optuna.samplers.TPESampler(seed=seed)  # several directions: MOTPE
    raise ValueError(name)


# ---- conditional -----------------------------------------------------------------------

def bench_conditional(args):
    methods = ["tunepack tpe", "optuna tpe", "tunepack random", "optuna random"]
    best = {m: [] for m in methods}
    wall = {m: [] for m in methods}
    for seed in range(args.seeds):
        for m in methods:
            engine, algo = m.split()
            t0 = time.monotonic()
            if engine == "tunepack":
                rows, _, _ = tp_run(args, "tree", "tree", TREE_PARAMS, TREE_SPACE,
                                    "{name: loss, mode: min}",
                                    "{algorithm: %s, trials: %d, seed: %d}"
                                    % (algo, args.trials, seed + 1))
                best[m].append(min(v for _, v in rows))
            else:
                study = optuna.create_study(direction="minimize",
                                            sampler=optuna_sampler(algo, seed + 1))
                study.optimize(lambda t: run_objective("tree", tree_suggest(t))["loss"],
                               n_trials=args.trials)
                best[m].append(study.best_value)
            wall[m].append(time.monotonic() - t0)
        print("seed %d: %s" % (seed + 1, "  ".join("%s %.4f" % (m, best[m][-1])
                                                   for m in methods)), flush=True)
    print("\nconditional space (tree: 9 parameters, 7 of them conditional), %d trials, "
          "%d seeds, loss minimized (optimum 0.1)" % (args.trials, args.seeds))
    print("| method | median best loss | mean best loss | worst seed | median wall s |")
    print("|---|---|---|---|---|")
    for m in methods:
        print("| %s | %.4f | %.4f | %.4f | %.1f |" % (m, statistics.median(best[m]),
                                                   statistics.mean(best[m]), max(best[m]),
                                                   statistics.median(wall[m])))
    ok = statistics.median(best["tunepack tpe"]) <= statistics.median(best["optuna tpe"])
    print("%s: tunepack TPE median best %.4f %s Optuna TPE median best %.4f"
          % ("PASS" if ok else "MISS", statistics.median(best["tunepack tpe"]),
             "<=" if ok else ">", statistics.median(best["optuna tpe"])))


# ---- bi-objective ------------------------------------------------------------------------

ZDT_SPACE = "".join("  x%d: {uniform: [0.0, 1.0]}\n" % i for i in range(5))
ZDT_PARAMS = ["x%d" % i for i in range(5)]
ZDT_REF = (1.1, 11.0)  # f1 <= 1, f2 <= g <= 10


def hypervolume_2d(points, ref):
    """Area dominated by points (both minimized) inside the box up to ref."""
    pts = sorted(p for p in points if p[0] < ref[0] and p[1] < ref[1])
    area, best = 0.0, ref[1]
    for f1, f2 in pts:  # by f1 ascending: each point that lowers f2 adds a slab
        if f2 < best:
            area += (ref[0] - f1) * (best - f2)
            best = f2
    return area


def bench_biobjective(args):
    methods = ["tunepack tpe", "tunepack nsga2", "tunepack random", "optuna motpe",
               "optuna nsga2", "optuna random"]
    hv = {m: [] for m in methods}
    for seed in range(args.seeds):
        for m in methods:
            engine, algo = m.split()
            if engine == "tunepack":
                _, _, work = tp_run(args, "zdt1", "zdt1", ZDT_PARAMS, ZDT_SPACE,
                                    "[{name: f1, mode: min}, {name: f2, mode: min}]",
                                    "{algorithm: %s, trials: %d, seed: %d}"
                                    % (algo, args.trials, seed + 1))
                db = sqlite3.connect(os.path.join(work, "run", "tunepack.db"))
                pts = [(m_["f1"], m_["f2"]) for m_ in
                       (json.loads(r[0]) for r in db.execute(
                           "SELECT metrics FROM trials WHERE state = 'completed'"))]
                db.close()
            else:
                study = optuna.create_study(directions=["minimize", "minimize"],
                                            sampler=optuna_sampler(algo, seed + 1))

                def objective(t):
                    r = run_objective("zdt1", {k: t.suggest_float(k, 0.0, 1.0)
                                               for k in ZDT_PARAMS})
                    return r["f1"], r["f2"]
                study.optimize(objective, n_trials=args.trials)
                pts = [tuple(t.values) for t in study.trials if t.values]
            hv[m].append(hypervolume_2d(pts, ZDT_REF))
        print("seed %d: %s" % (seed + 1, "  ".join("%s %.3f" % (m, hv[m][-1]) for m in methods)),
              flush=True)
    print("\nbi-objective (ZDT1, 5 parameters, both minimized), %d trials, %d seeds; "
          "hypervolume up to (%g, %g), larger is better" % (args.trials, args.seeds, *ZDT_REF))
    print("| method | median hypervolume | mean | worst seed |")
    print("|---|---|---|---|")
    for m in methods:
        print("| %s | %.3f | %.3f | %.3f |" % (m, statistics.median(hv[m]),
                                             statistics.mean(hv[m]), min(hv[m])))
    ours = max(statistics.median(hv["tunepack tpe"]), statistics.median(hv["tunepack nsga2"]))
    theirs = max(statistics.median(hv["optuna motpe"]), statistics.median(hv["optuna nsga2"]))
    print("%s: tunepack's best median hypervolume %.3f %s Optuna's best (MOTPE or NSGA-II) %.3f"
          % ("PASS" if ours >= theirs else "MISS", ours, ">=" if ours >= theirs else "<",
             theirs))


# ---- warm start -------------------------------------------------------------------------

BOWL_SPACE = """\
  x: {uniform: [0.0, 1.0]}
  y: {uniform: [0.0, 1.0]}
  z: {uniform: [0.0, 1.0]}
  c: {choice: [a, b, c, d]}
"""
BOWL_PARAMS = ["x", "y", "z", "c"]


def bench_warmstart(args):
    methods = ["tpe cold", "tpe warm (50 earlier)", "the 50 earlier (random)"]
    best = {m: [] for m in methods}
    for seed in range(args.seeds):
        _, _, first = tp_run(args, "first", "bowl", BOWL_PARAMS, BOWL_SPACE,
                             "{name: loss, mode: min}",
                             "{algorithm: random, trials: %d, seed: %d}"
                             % (args.earlier, 1000 + seed))
        first_dir = os.path.join(first, "run")
        db = sqlite3.connect(os.path.join(first_dir, "tunepack.db"))
        best["the 50 earlier (random)"].append(
            db.execute("SELECT min(value) FROM trials").fetchone()[0])
        db.close()
        rows, _, _ = tp_run(args, "cold", "bowl", BOWL_PARAMS, BOWL_SPACE,
                            "{name: loss, mode: min}",
                            "{algorithm: tpe, trials: %d, seed: %d}" % (args.trials, seed + 1))
        best["tpe cold"].append(min(v for _, v in rows))
        rows, _, _ = tp_run(args, "warm", "bowl", BOWL_PARAMS, BOWL_SPACE,
                            "{name: loss, mode: min}",
                            "{algorithm: tpe, trials: %d, seed: %d, warm_start: [%s]}"
                            % (args.trials, seed + 1, json.dumps(first_dir)))
        best["tpe warm (50 earlier)"].append(min(v for _, v in rows))
        print("seed %d: %s" % (seed + 1, "  ".join("%s %.4f" % (m, best[m][-1])
                                                   for m in methods)), flush=True)
    print("\nwarm start (bowl: 3 reals and a choice, loss minimized, optimum 0.0): best loss of "
          "the %d new TPE trials, %d seeds" % (args.trials, args.seeds))
    print("| method | median best loss | mean | worst seed |")
    print("|---|---|---|---|")
    for m in methods:
        print("| %s | %.4f | %.4f | %.4f |" % (m, statistics.median(best[m]),
                                             statistics.mean(best[m]), max(best[m])))
    warm, cold = (statistics.median(best["tpe warm (50 earlier)"]),
                  statistics.median(best["tpe cold"]))
    wins = sum(w < c for w, c in zip(best["tpe warm (50 earlier)"], best["tpe cold"]))
    print("%s: warm median %.4f %s cold median %.4f (warm better on %d of %d seeds)"
          % ("PASS" if warm < cold else "MISS", warm, "<" if warm < cold else ">=", cold, wins,
             args.seeds))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--trials", type=int, default=None)
    ap.add_argument("--tunepack", default=os.path.join(ROOT, "build", "tunepack"))
    ap.add_argument("--scratch", default=None, help="where runs are written (default: /tmp)")
    ap.add_argument("--earlier", type=int, default=50, help="warmstart: earlier trials")
    ap.add_argument("bench", choices=["conditional", "biobjective", "warmstart"])
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if args.bench == "conditional":
        args.trials = args.trials or 60
        bench_conditional(args)
    elif args.bench == "warmstart":
        args.trials = args.trials or 20
        bench_warmstart(args)
    elif args.bench == "biobjective":
        args.trials = args.trials or 60
        bench_biobjective(args)


if __name__ == "__main__":
    main()
