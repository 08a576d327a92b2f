#!/usr/bin/python3
"""A PyTorch trainer for tunepack: an MLP on scikit-learn's digits, on the CPU.

Needs Debian's python3-torch and python3-sklearn (run it with /usr/bin/python3). The data is
scikit-learn's bundled digits set (sklearn.datasets.load_digits: 1797 8x8 images of the
digits 0-9, shipped inside the package, nothing downloaded), split once with a fixed seed into
1297 training and 500 held-out validation images. The network is 64 -> hidden -> hidden -> 10
with ReLU and dropout, trained with AdamW; chance is 0.1, good configurations reach about
0.97 within a few epochs, poor ones (a learning rate far too small or too large, heavy weight
decay) stay far below.

    /usr/bin/python3 examples/pytorch/train.py --lr 0.003 --hidden 64 --epochs 9

It follows tunepack's checkpoint contract (docs/checkpoints.md) through the helper
python/tunepack_report.py:

- the budget: --epochs, else TUNEPACK_BUDGET, is the epoch to train up to;
- reports: report(step=epoch, val_acc=..., loss=...) after every epoch;
- checkpoints: with a checkpoint directory (--checkpoint-dir, else TUNEPACK_CHECKPOINT_DIR) it
  resumes from DIR/model.pt when that exists and saves it after every epoch with torch.save
  (a temp file, then os.replace): model and optimizer state, the epoch reached, and the two
  random generators (batch order, dropout), so 3 epochs then a job with budget 9 report
  exactly what one 9-epoch run reports;
- pause: after each epoch's checkpoint it asks should_pause() (a "pause" line on
  TUNEPACK_CONTROL_FD, or SIGUSR1) and on a request exits 0 with the checkpoint saved.

torch runs single-threaded (torch.set_num_threads(1)): tunepack runs several trials side by
side, one core each. --seed (default 0) sets the weight initialisation, dropout and batch
order: the same arguments give the same reports. Exit status: 0 after training or a pause,
2 for bad arguments or a checkpoint of another configuration.
"""

import argparse
import math
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
from tunepack_report import (budget, checkpoint_dir, handle_pause_signal,  # noqa: E402
                             report, should_pause)

import torch  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

SPLIT_SEED = 20240607  # fixed: the split never depends on a trial's arguments
N_VAL = 500            # held-out validation images; the other 1297 train
CKPT_NAME = "model.pt"
# What a checkpoint must agree on to be resumed: the shapes of the saved tensors and the
# stream of random numbers depend on these.
CKPT_KEYS = ("hidden", "batch", "seed")


def load_data():
    """Return (x_train, y_train, x_val, y_val) as tensors; pixels scaled from 0..16 to 0..1."""
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(SPLIT_SEED))
    val, train = order[:N_VAL], order[N_VAL:]
    return x[train], y[train], x[val], y[val]


def make_model(hidden, dropout):
    return torch.nn.Sequential(
        torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Dropout(dropout),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(), torch.nn.Dropout(dropout),
        torch.nn.Linear(hidden, 10))


def train_epoch(model, opt, x, y, batch, order_gen):
    """One pass over (x, y) in an order drawn from order_gen; returns the mean training loss
    (non-finite once training has diverged)."""
    model.train()
    total = 0.0
    perm = torch.randperm(len(y), generator=order_gen)
    for start in range(0, len(y), batch):
        idx = perm[start:start + batch]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        total += loss.item() * len(idx)
    return total / len(y)


@torch.no_grad()
def accuracy(model, x, y):
    model.eval()
    # right / total in Python: 0.974, where a float32 mean would give 0.9739999771118164
    return int((model(x).argmax(dim=1) == y).sum()) / len(y)


def save_checkpoint(path, state):
    """torch.save to a temp file, then rename it over path: a kill at any moment leaves the
    old checkpoint or the new one, never half of one."""
    tmp = path + ".tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)


def number(kind, test, what):
    """An argparse type: a finite kind (float or int; "64.0" is taken as an int, since a
    search space may hand integers over in either form) that passes test."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        ok = math.isfinite(value) and (kind is float or value == math.floor(value))
        if not ok or not test(value):
            raise argparse.ArgumentTypeError("must be %s, got %r" % (what, text))
        return kind(value)
    return parse


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lr", type=number(float, lambda v: v > 0, "a number > 0"), default=0.003)
    p.add_argument("--weight-decay", type=number(float, lambda v: v >= 0, "a number >= 0"),
                   default=0.0)
    p.add_argument("--dropout", type=number(float, lambda v: 0 <= v < 1, "in [0, 1)"),
                   default=0.0)
    p.add_argument("--hidden", type=number(int, lambda v: 1 <= v <= 4096, "in 1..4096"),
                   default=64)
    p.add_argument("--batch", type=number(int, lambda v: 1 <= v <= 1297, "in 1..1297"),
                   default=32)
    p.add_argument("--epochs", type=number(int, lambda v: 1 <= v <= 100000, "in 1..100000"),
                   default=None, help="the budget (default $TUNEPACK_BUDGET, else 9)")
    p.add_argument("--seed", type=number(int, lambda v: 0 <= v < 2**31, "in 0..2^31-1"),
                   default=0)
    p.add_argument("--checkpoint-dir", default=checkpoint_dir(),
                   help="resume from and save DIR/%s (default $TUNEPACK_CHECKPOINT_DIR)"
                   % CKPT_NAME)
    args = p.parse_args()  # bad arguments: message on stderr, exit status 2
    if args.epochs is None:
        args.epochs = int(budget(default=9))
    return args


def main():
    args = parse_args()
    torch.set_num_threads(1)  # one core per trial: tunepack runs trials side by side
    handle_pause_signal()     # SIGUSR1 is a pause request too, should the experiment send it
    torch.manual_seed(args.seed)              # weight init and dropout
    order_gen = torch.Generator().manual_seed(args.seed + 1)  # batch order

    x_train, y_train, x_val, y_val = load_data()
    model = make_model(args.hidden, args.dropout)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)

    epoch, acc, loss = 0, math.nan, math.nan
    path = None
    if args.checkpoint_dir:
        os.makedirs(args.checkpoint_dir, exist_ok=True)
        path = os.path.join(args.checkpoint_dir, CKPT_NAME)
    if path and os.path.exists(path):
        ckpt = torch.load(path)
        mine = {k: getattr(args, k) for k in CKPT_KEYS}
        if ckpt["config"] != mine:
            sys.exit("train.py: %s is of another configuration (%s, this run has %s): use "
                     "another checkpoint directory or remove the file" % (path, ckpt["config"],
                                                                        mine))
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        torch.set_rng_state(ckpt["torch_rng"])
        order_gen.set_state(ckpt["order_rng"])
        epoch, acc, loss = ckpt["epoch"], ckpt["val_acc"], ckpt["loss"]
        print("train.py: resumed from %s at epoch %d" % (path, epoch), file=sys.stderr)
        if epoch >= args.epochs:
            # Already there (a job killed before its result was seen): say so again.
            report(step=epoch, val_acc=acc, loss=loss)

    paused = False
    while epoch < args.epochs:
        loss = train_epoch(model, opt, x_train, y_train, args.batch, order_gen)
        acc = accuracy(model, x_val, y_val)
        epoch += 1
        # Report before saving: a kill between the two repeats this epoch's report on resume
        # rather than losing it.
        report(step=epoch, val_acc=acc, loss=loss)
        if path:
            save_checkpoint(path, {
                "config": {k: getattr(args, k) for k in CKPT_KEYS},
                "epoch": epoch, "val_acc": acc, "loss": loss,
                "model": model.state_dict(), "optimizer": opt.state_dict(),
                "torch_rng": torch.get_rng_state(), "order_rng": order_gen.get_state()})
        if not math.isfinite(loss):
            print("train.py: training diverged at epoch %d (lr %g), stopping"
                  % (epoch, args.lr), file=sys.stderr)
            break
        if epoch < args.epochs and should_pause():
            paused = True
            break

    print("train.py: lr=%g weight_decay=%g dropout=%g hidden=%d batch=%d seed=%d: "
          "epoch %d val_acc=%.4f loss=%.4g%s"
          % (args.lr, args.weight_decay, args.dropout, args.hidden, args.batch, args.seed,
             epoch, acc, loss,
             " (paused: checkpoint saved)" if paused and path else
             " (paused: no checkpoint directory, progress lost)" if paused else ""),
          file=sys.stderr)


if __name__ == "__main__":
    main()
