#!/usr/bin/env python3
"""One trial of the deadline family (bench/deadline/real.py), a real process on the real clock.

    trial.py X Y EPOCHS UNIT_S STARTUP_S

The simulator's family (src/sim/sim_tune.c) in wall seconds: final quality
q = 0.92 - 0.35 (x - 0.65)^2 - 0.08 y, learning time tau = 1.5 + 10 y (1 - x) + 3 x, the metric
after b epochs q - (q - 0.1) exp(-b / tau) plus N(0, 0.005) noise (a pure function of x, y and
the epoch, so the same configuration reports the same curve in every run); one epoch takes
UNIT_S (0.6 + 0.8 x) (f + (1 - f) / k) seconds +-5% on k GPUs (Amdahl, serial fraction
f = 0.05 + 0.45 y); each attempt pays a start-up of STARTUP_S (0.8 + 0.4 y) seconds (loading
data and model) on top of the interpreter's own.

Elastic (docs/elastic.md): one process per GPU held; rank 0 trains, reports {"step": epoch,
"score": ...} after each epoch and saves the epoch reached in its checkpoint; every rank honours
the pause request at once (polled every 20 ms, also during an epoch: an epoch in flight is lost
and done again by the next attempt, as a real trainer loses the batches since its checkpoint).
Standard library only.
"""
import hashlib
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "python"))
from tunepack_report import checkpoint_dir, report, should_pause  # noqa: E402

POLL_S = 0.02


def rng(*key):
    """A generator seeded by key (the same key, the same numbers, in every process)."""
    return random.Random(hashlib.sha256(repr(key).encode()).digest())


def wait(seconds):
    """Sleep for seconds; False when a pause request came first."""
    end = time.monotonic() + seconds
    while True:
        if should_pause():
            return False
        left = end - time.monotonic()
        if left <= 0:
            return True
        time.sleep(min(POLL_S, left))


def main():
    x, y = float(sys.argv[1]), float(sys.argv[2])
    epochs = int(float(sys.argv[3]))
    unit_s, startup_s = float(sys.argv[4]), float(sys.argv[5])
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    q = 0.92 - 0.35 * (x - 0.65) ** 2 - 0.08 * y
    tau = 1.5 + 10 * y * (1 - x) + 3 * x
    f = 0.05 + 0.45 * y
    ckpt = os.path.join(checkpoint_dir(), "state.json")

    def load():
        try:
            with open(ckpt) as fh:
                return json.load(fh)["epoch"]
        except (OSError, ValueError):
            return 0

    def score(epoch):
        noise = 0.005 * rng("m", x, y, epoch).gauss(0, 1)
        return round(q - (q - 0.1) * math.exp(-epoch / tau) + noise, 6)

    start = load()
    attempt = os.environ.get("TUNEPACK_ATTEMPT", "1")
    if not wait(startup_s * (0.8 + 0.4 * y) * rng("up", x, y, start, attempt).uniform(0.9, 1.1)):
        return 0
    if rank != 0:  # the other ranks follow rank 0 until it is done or a pause comes
        while load() < epochs and wait(0.1):
            pass
        return 0
    os.makedirs(checkpoint_dir(), exist_ok=True)
    if start >= epochs:  # nothing left to train: report where it is
        report(step=start, score=score(start))
    for epoch in range(start + 1, epochs + 1):
        t = unit_s * (0.6 + 0.8 * x) * (f + (1 - f) / world)
        if not wait(t * rng("step", x, y, epoch, world).uniform(0.95, 1.05)):
            return 0
        with open(ckpt + ".tmp", "w") as fh:
            json.dump({"epoch": epoch}, fh)
        os.replace(ckpt + ".tmp", ckpt)
        report(step=epoch, score=score(epoch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
