#!/usr/bin/python3
"""A PyTorch trainer for tunepack's population-based training (scheduler: pbt).

An MLP on scikit-learn's digits (bundled with the package, nothing downloaded), trained with
plain SGD on the CPU, one thread. Its best learning rate changes during training: a large
step makes fast progress in the first epochs and then keeps the weights bouncing, while a
small one crawls at first but settles lower later; PBT finds the schedule (high early, low
late) by copying the leaders' checkpoints and perturbing their learning rate, where a fixed
learning rate has to pick one.

    /usr/bin/python3 examples/pbt/train.py --lr 0.5 --epochs 4

Checkpoint contract (docs/checkpoints.md) through python/tunepack_report.py:
- the budget: --epochs, else TUNEPACK_BUDGET, is the epoch to train up to;
- it resumes from $TUNEPACK_CHECKPOINT_DIR/model.pt when that exists: model, optimizer, the
  epoch reached and its metrics (reported again when that epoch is already the budget). Under PBT that file may be another trial's (the donor's, copied there by
  tunepack): the weights and the epoch are taken from it, and the learning rate from this
  run's --lr (the explored one);
- it reports val_acc and the training loss after every epoch.
"""

import argparse
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
from tunepack_report import budget, checkpoint_dir, report  # noqa: E402

import torch  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

SPLIT_SEED = 7
N_VAL = 500
CKPT = "model.pt"


def data():
    d = load_digits()
    x = torch.tensor(d.data, dtype=torch.float32) / 16.0
    y = torch.tensor(d.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(SPLIT_SEED))
    return x[order[N_VAL:]], y[order[N_VAL:]], x[order[:N_VAL]], y[order[:N_VAL]]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lr", type=float, required=True)
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    epochs = args.epochs if args.epochs is not None else int(budget(default=8))
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    xt, yt, xv, yv = data()
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    epoch = 0
    ckdir = checkpoint_dir()
    path = os.path.join(ckdir, CKPT) if ckdir else None
    if path and os.path.exists(path):
        state = torch.load(path)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        epoch = state["epoch"]
        if epoch >= epochs and "val_acc" in state:  # nothing left to train: say where it stands
            report(step=epoch, val_acc=state["val_acc"], loss=state["loss"], lr=args.lr)
    for group in opt.param_groups:  # the explored learning rate, whoever saved the state
        group["lr"] = args.lr
    gen = torch.Generator().manual_seed(args.seed * 1000 + epoch)
    while epoch < epochs:
        model.train()
        perm = torch.randperm(len(yt), generator=gen)
        total = 0.0
        for i in range(0, len(yt), 32):
            idx = perm[i:i + 32]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        epoch += 1
        model.eval()
        with torch.no_grad():
            acc = int((model(xv).argmax(1) == yv).sum()) / len(yv)
        report(step=epoch, val_acc=acc, loss=total / len(yt), lr=args.lr)
        if path:
            os.makedirs(ckdir, exist_ok=True)
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                        "epoch": epoch, "val_acc": acc, "loss": total / len(yt)}, path + ".tmp")
            os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
