"""A trial of bench/surrogate/bench.py: a synthetic model family whose optimum transfers
across width, nearly (stdlib only).

    python3 family.py LR WD MOMENTUM WIDTH_MULT

A model of width w reaches, for a learning rate lr, weight decay wd and momentum m,

    loss = floor(w) + s(w) * (0.30 (x1 - x1*(w))^2 + 0.10 (x2 - x2*)^2 + 0.50 (m - 0.9)^2)

with x1 = log10 lr, x2 = log10 wd, floor(w) = 0.5 + 0.05 log2(1/w) (a narrow model is worse),
s(w) = 1 + 0.1 log2(1/w), x1*(w) = -2.5 + 0.03 log2(1/w) (the best learning rate drifts a
little with the width, as it does in muP after finite-width effects) and x2* = -4. Its cost
is w^2 + 0.02: the compute of a width-w model relative to the full one (hidden layers grow as
w^2) plus a fixed start-up. It reports loss and cost on TUNEPACK_REPORT_FD."""

import json
import math
import os
import sys


def loss(lr, wd, mom, w):
    k = math.log2(1.0 / w)
    x1, x2 = math.log10(lr), math.log10(wd)
    bowl = 0.30 * (x1 - (-2.5 + 0.03 * k)) ** 2 + 0.10 * (x2 + 4) ** 2 + 0.50 * (mom - 0.9) ** 2
    return 0.5 + 0.05 * k + (1 + 0.1 * k) * bowl


def main():
    lr, wd, mom, w = (float(a) for a in sys.argv[1:5])
    out = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w")
    out.write(json.dumps({"step": 1, "loss": round(loss(lr, wd, mom, w), 9),
                          "cost": w * w + 0.02}) + "\n")


if __name__ == "__main__":
    main()
