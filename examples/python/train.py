#!/usr/bin/env python3
"""A tiny trainer for tunepack's Python example (standard library only).

Logistic regression, trained by mini-batch SGD, on two overlapping 2-D Gaussian clouds whose
boundary is curved (the model sees x, y and x*y). The data comes from a fixed seed, so every
trial sees the same points; only --lr and --epochs change. Too small a learning rate leaves
the validation loss high after the few epochs a trial gets, too large a one makes it bounce.

    python3 examples/python/train.py --lr 0.1 --epochs 10

Each epoch is reported with report(step=epoch, val_loss=..., val_acc=...).
"""

import argparse
import math
import pathlib
import random
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
from tunepack_report import report  # noqa: E402

DATA_SEED = 7      # fixed: the data never depends on a trial's arguments
N_TRAIN = 400
N_VAL = 200
BATCH = 16


def make_data(n, rng):
    """Return n (features, label) pairs: class 1 where x*y > 0, blurred by noise."""
    points = []
    for _ in range(n):
        x, y = rng.uniform(-2.0, 2.0), rng.uniform(-2.0, 2.0)
        label = 1 if x * y + rng.gauss(0.0, 0.5) > 0 else 0
        points.append(((x, y, x * y), label))
    return points


def log_loss(z, label):
    """Cross-entropy of sigmoid(z) against label, without overflow for large |z|."""
    softplus = max(z, 0.0) + math.log1p(math.exp(-abs(z)))  # log(1 + e^z)
    return softplus - z * label


def sigmoid(z):
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def evaluate(w, b, points):
    """Return (mean log loss, accuracy) of the model on points."""
    loss = correct = 0
    for features, label in points:
        z = b + sum(wi * xi for wi, xi in zip(w, features))
        loss += log_loss(z, label)
        correct += (z > 0) == (label == 1)
    return loss / len(points), correct / len(points)


def positive_float(text):
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError("must be a number > 0, got %r" % text)
    return value


def positive_int(text):
    value = float(text)  # accepts "10" and "10.0"
    if not (math.isfinite(value) and value >= 1 and value == int(value)):
        raise argparse.ArgumentTypeError("must be an integer >= 1, got %r" % text)
    return int(value)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lr", type=positive_float, default=0.1, help="learning rate")
    parser.add_argument("--epochs", type=positive_int, default=10, help="passes over the data")
    parser.add_argument("--seed", type=int, default=0, help="order of the mini-batches")
    args = parser.parse_args()  # bad arguments: message on stderr, exit status 2

    rng = random.Random(DATA_SEED)
    train, val = make_data(N_TRAIN, rng), make_data(N_VAL, rng)
    order = random.Random(args.seed)
    w, b = [0.0, 0.0, 0.0], 0.0

    for epoch in range(1, args.epochs + 1):
        order.shuffle(train)
        for start in range(0, len(train), BATCH):
            batch = train[start:start + BATCH]
            gw, gb = [0.0, 0.0, 0.0], 0.0
            for features, label in batch:
                err = sigmoid(b + sum(wi * xi for wi, xi in zip(w, features))) - label
                gw = [g + err * xi for g, xi in zip(gw, features)]
                gb += err
            w = [wi - args.lr * g / len(batch) for wi, g in zip(w, gw)]
            b -= args.lr * gb / len(batch)
        val_loss, val_acc = evaluate(w, b, val)
        report(step=epoch, val_loss=val_loss, val_acc=val_acc)

    print("train.py: lr=%g epochs=%d val_loss=%.4f val_acc=%.3f"
          % (args.lr, args.epochs, val_loss, val_acc), file=sys.stderr)


if __name__ == "__main__":
    main()
