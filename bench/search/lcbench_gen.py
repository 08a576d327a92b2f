#!/usr/bin/python3
"""Makes bench/search/data/lcbench-sk.tsv: a tabular multi-fidelity benchmark in the style of
LCBench (Zimmer, Lindauer and Hutter 2021), from what Debian ships (scikit-learn's
MLPClassifier and its bundled datasets), for `bench/mf_search --table`.

For a fixed set of configurations, the same on every dataset, the first --configs points of
a scrambled Sobol sequence (seed 0) over

    lr        learning_rate_init, log-uniform in [1e-4, 0.3]
    momentum  Nesterov momentum, uniform in [0.1, 0.99]
    alpha     L2 penalty, log-uniform in [1e-6, 0.1]
    width     units of the one hidden layer (ReLU), integer, log-uniform in [8, 256]
    batch     batch size, integer, log-uniform in [16, 256]

it trains MLPClassifier(solver="sgd", learning_rate="constant") one epoch at a time with
partial_fit, up to --epochs, and records the validation error after each epoch, for each
training seed (the seed sets the initial weights and the shuffling; np.random.RandomState
[seed, config], so each epoch shuffles anew). Datasets: load_digits, load_breast_cancer,
load_wine; each split once into 2/3 training and 1/3 validation (stratified, random_state 0),
features standardized on the training part. A run whose weights overflow (sklearn raises
"non-finite parameter weights") stops there: that epoch and the later ones get the error of
predicting the training part's most frequent class. A batch larger than the training part
(wine has 118 rows) is clipped to it, as sklearn does.

Finished curves are appended to OUT.partial as they come, keyed by dataset, configuration
and seed: a stopped run started again makes only the missing ones, and since the Sobol
points come in order, a table of fewer --configs is a prefix of a larger one.

The file is tab-separated text. Lines starting with '#' say how it was made and declare the
epochs and the parameters ("# param NAME KIND LO HI", KIND one of log, lin, intlog, in the
order of the columns); then a header row and one row per (dataset, config, seed): the
dataset, the configuration's number, the training seed, the parameters' values, and the
validation error after epochs 1, 2, ..., E (4 decimals).

Usage (run once, at low priority; with the defaults about 380 CPU seconds of training, 45
minutes at nice 19 on 2 cores that a load test and five other builds share):

    nice -n 19 /usr/bin/python3 bench/search/lcbench_gen.py --jobs 2 \
        --out bench/search/data/lcbench-sk.tsv
"""

import argparse
import math
import os
import sys
import time

# One thread per worker: the matrices are small and the workers share two cores.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import multiprocessing  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import sklearn  # noqa: E402
from scipy.stats import qmc  # noqa: E402
from sklearn import datasets  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from sklearn.neural_network import MLPClassifier  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

# (name, kind, lo, hi): kind log (float, log scale), lin (float), intlog (integer, log scale).
PARAMS = [
    ("lr", "log", 1e-4, 0.3),
    ("momentum", "lin", 0.1, 0.99),
    ("alpha", "log", 1e-6, 0.1),
    ("width", "intlog", 8, 256),
    ("batch", "intlog", 16, 256),
]

LOADERS = {
    "digits": datasets.load_digits,
    "breast_cancer": datasets.load_breast_cancer,
    "wine": datasets.load_wine,
}


def configs(n, seed=0):
    """The first n points of a scrambled Sobol sequence (seed 0) mapped onto PARAMS (log
    kinds in log): the first n of a larger set are the same, so a smaller table is a prefix
    of a larger one."""
    with warnings.catch_warnings():  # "balance properties" when n is not a power of 2
        warnings.simplefilter("ignore", UserWarning)
        u = qmc.Sobol(len(PARAMS), scramble=True, seed=seed).random(n)
    out = [dict() for _ in range(n)]
    for k, (name, kind, lo, hi) in enumerate(PARAMS):
        for i in range(n):
            if kind == "lin":
                v = lo + (hi - lo) * u[i, k]
            else:
                v = math.exp(math.log(lo) + (math.log(hi) - math.log(lo)) * u[i, k])
            out[i][name] = int(round(v)) if kind == "intlog" else float("%.4g" % v)
    return out


def split(name):
    """The dataset's fixed split: standardized training and validation arrays."""
    X, y = LOADERS[name](return_X_y=True)
    Xt, Xv, yt, yv = train_test_split(X, y, test_size=1 / 3, stratify=y, random_state=0)
    sc = StandardScaler().fit(Xt)
    return sc.transform(Xt), sc.transform(Xv), yt, yv


_DATA = {}


def curve(task):
    """Validation errors after each epoch for one (dataset, config, seed)."""
    name, ci, cfg, seed, epochs = task
    t0 = time.process_time()
    if name not in _DATA:
        _DATA[name] = split(name)
    Xt, Xv, yt, yv = _DATA[name]
    classes = np.unique(yt)
    majority = classes[np.argmax([(yt == c).sum() for c in classes])]
    chance = float(np.mean(yv != majority))
    clf = MLPClassifier(
        hidden_layer_sizes=(cfg["width"],),
        solver="sgd",
        learning_rate="constant",
        learning_rate_init=cfg["lr"],
        momentum=cfg["momentum"],
        nesterovs_momentum=True,
        alpha=cfg["alpha"],
        batch_size=cfg["batch"],
        random_state=np.random.RandomState([seed, ci]),
    )
    errs = []
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)  # batch larger than the training rows
        for _ in range(epochs):
            try:
                clf.partial_fit(Xt, yt, classes=classes)
            except ValueError:  # non-finite weights: the run diverged
                break
            errs.append(float(np.mean(clf.predict(Xv) != yv)))
    errs += [chance] * (epochs - len(errs))
    return name, ci, seed, errs, time.process_time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=27)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--datasets", default="digits,breast_cancer,wine")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="-")
    a = ap.parse_args()
    names = a.datasets.split(",")
    for n in names:
        if n not in LOADERS:
            sys.exit("lcbench_gen: unknown dataset %r (one of %s)" % (n, ", ".join(LOADERS)))
    cfgs = configs(a.configs)
    # Configuration-major, so that what is done at any time is a prefix of the configurations.
    tasks = [(n, i, c, s, a.epochs) for i, c in enumerate(cfgs) for n in names
             for s in range(a.seeds)]
    # Finished curves go to OUT.partial as they come, keyed by what they were made from: a
    # run stopped half-way (or one for fewer configurations) reuses them.
    done = {}
    part = a.out + ".partial" if a.out != "-" else None
    if part and os.path.exists(part):
        with open(part) as f:
            for line in f:
                r = line.rstrip("\n").split("\t")
                if len(r) == 4 + a.epochs:
                    done[tuple(r[:3])] = ([float(v) for v in r[4:]], float(r[3]))
    key = lambda n, i, c, s: (n, repr(sorted(c.items())), str(s))  # noqa: E731
    todo = [t for t in tasks if key(t[0], t[1], t[2], t[3]) not in done]
    print("lcbench_gen: %d curves, %d already made" % (len(tasks), len(tasks) - len(todo)),
          file=sys.stderr)
    t0 = time.time()
    with multiprocessing.Pool(a.jobs) as pool:
        pf = open(part, "a") if part else None
        for n, ci, s, errs, cpu in pool.imap(curve, todo, chunksize=2):
            done[key(n, ci, cfgs[ci], s)] = (errs, cpu)
            if pf:
                pf.write("\t".join(list(key(n, ci, cfgs[ci], s)) + ["%.3f" % cpu] +
                                   ["%.4f" % e for e in errs]) + "\n")
                pf.flush()
        if pf:
            pf.close()
    rows = [(n, i, s) + done[key(n, i, c, s)] for n, i, c, s, _ in tasks]
    took = sum(r[4] for r in rows)
    f = sys.stdout if a.out == "-" else open(a.out + ".tmp", "w")
    cmd = "bench/search/lcbench_gen.py --configs %d --epochs %d --seeds %d --datasets %s" % (
        a.configs, a.epochs, a.seeds, a.datasets)
    f.write("# lcbench-sk: validation error of scikit-learn's MLPClassifier (solver sgd, one "
            "hidden ReLU layer) after each epoch of partial_fit, per dataset, configuration and "
            "training seed; see bench/search/lcbench_gen.py for how\n")
    f.write("# made by: /usr/bin/python3 %s (scikit-learn %s, numpy %s; %.0f CPU seconds of "
            "training)\n" % (cmd, sklearn.__version__, np.__version__, took))
    for n in names:
        Xt, Xv, _, _ = split(n)
        f.write("# dataset %s: %d training and %d validation rows, %d features\n"
                % (n, len(Xt), len(Xv), Xt.shape[1]))
    f.write("# epochs %d\n" % a.epochs)
    for name, kind, lo, hi in PARAMS:
        f.write("# param %s %s %g %g\n" % (name, kind, lo, hi))
    f.write("\t".join(["dataset", "config", "seed"] + [p[0] for p in PARAMS] +
                      ["e%d" % (t + 1) for t in range(a.epochs)]) + "\n")
    for name, ci, seed, errs, _ in rows:
        vals = ["%g" % cfgs[ci][p[0]] for p in PARAMS]
        f.write("\t".join([name, str(ci), str(seed)] + vals + ["%.4f" % e for e in errs]) + "\n")
    if f is not sys.stdout:
        f.close()
        os.replace(a.out + ".tmp", a.out)
    print("lcbench_gen: %d curves, %.0f CPU s of training, %.0f s now" % (
        len(rows), took, time.time() - t0), file=sys.stderr)


if __name__ == "__main__":
    main()
