#!/usr/bin/python3 -S
"""Trial commands for bench/search/spaces.py and field.py: objectives over the spaces that
conditional parameters, several objectives, warm starts and small continuous spaces are
measured on.

    toy_objectives.py PROBLEM --name=value ...

Problems (every value minimized):
  tree   a conditional space: arch in {linear, mlp, cnn} with a shared lr and per-branch
         parameters (mlp: layers, width, dropout; cnn: kernel, channels, pool, and dilation
         only for kernel 5 or 7). Reports loss; the best is 0.1 (cnn, kernel 5, dilation 2,
         channels 64, pool max, lr 1e-3).
  zdt1   ZDT1 over x0..x4 in [0, 1]: f1 = x0, f2 = g (1 - sqrt(f1 / g)), g = 1 + 9 mean(x1..x4).
         Reports f1 and f2; the Pareto front is f2 = 1 - sqrt(f1) with x1..x4 = 0.
  bowl   a shifted bowl over x, y, z in [0, 1] and c in {a, b, c, d}: reports loss.
  branin     Branin over x1 in [-5, 10], x2 in [0, 15] (minimum 0.397887, three minima);
  hartmann6  Hartmann-6 over x1..x6 in [0, 1] (minimum -3.32237, at 0.20169 0.150011
             0.476874 0.275332 0.311652 0.6573). Both take --noise=SIGMA and --seed=S and
             report loss = f + a Gaussian draw of sd SIGMA and true_loss = f. The draw is a
             function of (S, the point): the same configuration gets the same noise, any
             other an independent one.

The result goes to the descriptor TUNEPACK_REPORT_FD as one JSON line when it is set, else
to stdout. Standard library only; -S keeps start-up short (about 10 ms).
"""

import json
import math
import os
import random
import sys


def tree(p):
    lr = math.log10(float(p["lr"]))
    arch = p["arch"]
    best_lr = {"linear": -1.0, "mlp": -2.5, "cnn": -3.0}[arch]
    loss = 0.1 * (lr - best_lr) ** 2
    if arch == "linear":
        return {"loss": 0.5 + loss}
    if arch == "mlp":
        loss += 0.25 + 0.05 * (int(p["layers"]) - 3) ** 2
        loss += 0.025 * (math.log2(int(p["width"])) - 7) ** 2
        loss += 0.4 * (float(p["dropout"]) - 0.2) ** 2
        return {"loss": loss}
    kernel = int(p["kernel"])
    loss += 0.1 + (0.08 if kernel == 3 else 0.02 if kernel == 7 else 0.0)
    loss += 0.0125 * (math.log2(int(p["channels"])) - 6) ** 2
    loss += 0.03 if p["pool"] == "avg" else 0.0
    if kernel != 3:
        loss += 0.04 * (int(p["dilation"]) - 2) ** 2
    return {"loss": loss}


def zdt1(p):
    x = [float(p["x%d" % i]) for i in range(5)]
    g = 1 + 9 * sum(x[1:]) / 4
    f1 = x[0]
    return {"f1": f1, "f2": g * (1 - math.sqrt(f1 / g))}


def bowl(p):
    shift = {"a": 0.3, "b": 0.0, "c": 0.1, "d": 0.2}[p["c"]]
    x, y, z = float(p["x"]), float(p["y"]), float(p["z"])
    return {"loss": shift + (x - 0.7) ** 2 + (y - 0.2) ** 2 + 0.5 * (z - 0.55) ** 2}


def noisy(f, p, names):
    """f's value at p's names, with the Gaussian noise p["noise"] and p["seed"] ask for."""
    x = [float(p[k]) for k in names]
    true = f(x)
    key = "%s|%s" % (p.get("seed", "0"), " ".join("%.12g" % v for v in x))
    noise = random.Random(key).gauss(0.0, float(p.get("noise", 0.0)))
    return {"loss": true + noise, "true_loss": true}


def branin_f(x):
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    return (x[1] - b * x[0] ** 2 + c * x[0] - 6) ** 2 + 10 * (1 - t) * math.cos(x[0]) + 10


H6_A = ((10, 3, 17, 3.5, 1.7, 8), (0.05, 10, 17, 0.1, 8, 14), (3, 3.5, 1.7, 10, 17, 8),
        (17, 8, 0.05, 10, 0.1, 14))
H6_P = ((.1312, .1696, .5569, .0124, .8283, .5886), (.2329, .4135, .8307, .3736, .1004, .9991),
        (.2348, .1451, .3522, .2883, .3047, .6650), (.4047, .8828, .8732, .5743, .1091, .0381))


def hartmann6_f(x):
    return -sum(a * math.exp(-sum(A[j] * (x[j] - P[j]) ** 2 for j in range(6)))
                for a, A, P in zip((1.0, 1.2, 3.0, 3.2), H6_A, H6_P))


def branin(p):
    return noisy(branin_f, p, ("x1", "x2"))


def hartmann6(p):
    return noisy(hartmann6_f, p, ["x%d" % i for i in range(1, 7)])


PROBLEMS = {"tree": tree, "zdt1": zdt1, "bowl": bowl, "branin": branin, "hartmann6": hartmann6}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in PROBLEMS:
        sys.exit("usage: toy_objectives.py %s --name=value ..." % "|".join(PROBLEMS))
    params = {}
    for a in sys.argv[2:]:
        if not a.startswith("--") or "=" not in a:
            sys.exit("toy_objectives.py: expected --name=value, got %r" % a)
        k, v = a[2:].split("=", 1)
        params[k] = v
    line = json.dumps(PROBLEMS[sys.argv[1]](params)) + "\n"
    fd = os.environ.get("TUNEPACK_REPORT_FD")
    if fd:
        os.write(int(fd), line.encode())
    else:
        sys.stdout.write(line)


if __name__ == "__main__":
    main()
