#!/usr/bin/python3 -S
"""Trial commands for bench/search/spaces.py: deterministic objectives over the spaces that
conditional parameters, several objectives and warm starts are measured on.

    toy_objectives.py PROBLEM --name=value ...

Problems (every value minimized):
  tree   a conditional space: arch in {linear, mlp, cnn} with a shared lr and per-branch
         parameters (mlp: layers, width, dropout; cnn: kernel, channels, pool, and dilation
         only for kernel 5 or 7). Reports loss; the best is 0.1 (cnn, kernel 5, dilation 2,
         channels 64, pool max, lr 1e-3).
  zdt1   ZDT1 over x0..x4 in [0, 1]: f1 = x0, f2 = g (1 - sqrt(f1 / g)), g = 1 + 9 mean(x1..x4).
         Reports f1 and f2; the Pareto front is f2 = 1 - sqrt(f1) with x1..x4 = 0.
  bowl   a shifted bowl over x, y, z in [0, 1] and c in {a, b, c, d}: reports loss.

The result goes to the descriptor TUNEPACK_REPORT_FD as one JSON line when it is set, else
to stdout. Standard library only; -S keeps start-up short (about 10 ms).
"""

import json
import math
import os
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


PROBLEMS = {"tree": tree, "zdt1": zdt1, "bowl": bowl}


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in PROBLEMS:
        sys.exit("usage: toy_objectives.py tree|zdt1|bowl --name=value ...")
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
