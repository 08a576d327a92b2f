#!/usr/bin/python3
"""A width-scalable MLP in muP for tunepack's `surrogate:` (examples/mup/experiment.yaml).

Needs Debian's python3-torch (run it with /usr/bin/python3). The data is synthetic and made
here, nothing downloaded: 32-dimensional Gaussian inputs labelled by a fixed random teacher
network (10 classes), 16384 for training and 8192 held out, from a fixed seed. The student is
32 -> 1024 w -> 1024 w -> 10 (ReLU) for a width multiplier w (`--width-mult`, the surrogate
parameter: 0.25 in the search, 1 when promoted), built in muP by python/tunepack_mup.py so
that the learning rate found at w = 0.25 holds at w = 1 (at w = 0.125, 128 wide, the best
learning rate was already twice the full model's: finite-width effects muP does not remove):

    model, opt = mup.build(lambda w: mlp(w), width_mult, "adam", lr=lr)

It trains with Adam for --epochs passes over the training set (default 1: every example seen
once, so the held-out loss measures learning, not memorising; batches of 128) and reports
after each the held-out loss (val_loss, the objective), accuracy, cpu_s, this process's CPU
seconds so far (import and data included: what the trial cost), and train_cpu_s, those spent
after the import and the data (model and training alone). The data, the initialisation and
the batch order are fixed (--seed, default 0, for the last two), and torch runs
single-threaded (tunepack runs trials side by side, one core each), so the same arguments give
the same reports and the loss is a smooth function of the learning rate: the search compares
learning rates, not draws of the noise. 8192 held-out examples keep the loss's own
estimation error well below the 1% the surrogate is judged by (with 2048 it jittered by
1-2% between neighbouring learning rates).

    /usr/bin/python3 examples/mup/train.py --lr 0.0005 --width-mult 0.25
"""

import argparse
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
import tunepack_mup as mup  # noqa: E402
from tunepack_report import report  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402

BASE = 1024  # hidden width at width_mult 1
TRAIN, VAL = 16384, 8192  # examples
DATA_SEED = 20241123


def dataset():
    """(x_train, y_train, x_val, y_val): a teacher network's labels of Gaussian inputs."""
    g = torch.Generator().manual_seed(DATA_SEED)
    x = torch.randn(TRAIN + VAL, 32, generator=g)
    w1 = torch.randn(32, 64, generator=g) / 32 ** 0.5
    w2 = torch.randn(64, 10, generator=g) / 64 ** 0.5
    y = (torch.tanh(x @ w1) @ w2 + 0.1 * torch.randn(TRAIN + VAL, 10, generator=g)).argmax(1)
    return x[:TRAIN], y[:TRAIN], x[TRAIN:], y[TRAIN:]


def mlp(w):
    h = max(1, round(BASE * w))
    return nn.Sequential(nn.Linear(32, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                         nn.Linear(h, 10))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--width-mult", type=float,
                    default=float(os.environ.get("TUNEPACK_PARAM_WIDTH_MULT", "1")))
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if not (a.lr > 0 and a.width_mult > 0 and a.epochs > 0):
        ap.error("--lr, --width-mult and --epochs must be > 0")
    torch.set_num_threads(1)
    xt, yt, xv, yv = dataset()
    setup_s = time.process_time()
    torch.manual_seed(a.seed)
    model, opt = mup.build(mlp, a.width_mult, "adam", lr=a.lr)
    order = torch.Generator().manual_seed(a.seed)
    for epoch in range(1, a.epochs + 1):
        model.train()
        for idx in torch.randperm(len(yt), generator=order).split(128):
            opt.zero_grad()
            nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            out = model(xv)
            loss = nn.functional.cross_entropy(out, yv).item()
            acc = (out.argmax(1) == yv).float().mean().item()
        if loss != loss:  # diverged: a learning rate far too large
            loss = 10.0
        cpu = time.process_time()
        report(step=epoch, val_loss=round(loss, 6), val_acc=round(acc, 6), cpu_s=round(cpu, 3),
               train_cpu_s=round(cpu - setup_s, 3))


if __name__ == "__main__":
    main()
