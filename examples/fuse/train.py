#!/usr/bin/python3
"""A fusable PyTorch trainer: K MLPs on scikit-learn's digits in one process, on the CPU.

With `fuse: {max: K}` tunepack hands this process up to K configurations of the same shape
(the same hidden width and batch size; lr, momentum and weight decay differ) in
--configs "{configs_json}"; python/tunepack_fuse.py builds one model per configuration and
steps all of them on the same batches from one shared loader, reports each one's val_acc
with its configuration index, keeps each one's checkpoint in its own directory, and stops
training a configuration tunepack drops while the others go on. Without --configs (a run
from a terminal) it trains one model from --lr and the like.

    /usr/bin/python3 examples/fuse/train.py --lr 0.1 --hidden 64 --epochs 9

The data is scikit-learn's bundled digits set (1797 8x8 images, nothing downloaded), split
once with a fixed seed into 1297 training and 500 validation images. The batch order of
epoch e depends on e and --seed only, and every model starts from the same initial weights
(--seed), so a configuration reports the same numbers whatever it is fused with, and a
resumed one goes on exactly where its checkpoint left it. Needs Debian's python3-torch and
python3-sklearn (run it with /usr/bin/python3).
"""

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
from tunepack_fuse import Fused  # noqa: E402
from tunepack_report import budget  # noqa: E402

import torch  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

SPLIT_SEED = 20240607
N_VAL = 500


def load_data():
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(SPLIT_SEED))
    val, train = order[:N_VAL], order[N_VAL:]
    return x[train], y[train], x[val], y[val]


def make_model(hidden, seed):
    torch.manual_seed(seed)  # the same initial weights for every configuration
    return torch.nn.Sequential(
        torch.nn.Linear(64, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, 10))


def accuracy(out, y):
    return int((out.argmax(dim=1) == y).sum()) / len(y)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--configs", help="the fused configurations ({configs_json})")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu, or cuda for the first visible GPU")
    p.add_argument("--sequential", action="store_true",
                   help="step the models one after the other, not batched (to compare)")
    p.add_argument("--lr", type=float, default=0.1, help="unfused only")
    p.add_argument("--momentum", type=float, default=0.9, help="unfused only")
    p.add_argument("--weight-decay", type=float, default=0.0, help="unfused only")
    args = p.parse_args()
    epochs = args.epochs or int(budget(default=9))
    torch.set_num_threads(1)  # one core per process: tunepack runs processes side by side

    x, y, xv, yv = (t.to(args.device) for t in load_data())  # on the GPU once, not per batch
    fused = Fused(lambda params: make_model(args.hidden, args.seed), optimizer="sgd",
                  configs=args.configs, device=args.device, horizontal=not args.sequential,
                  defaults={"lr": args.lr, "momentum": args.momentum,
                            "weight_decay": args.weight_decay})
    first = fused.load_checkpoints(epochs)
    loss = torch.nn.functional.cross_entropy
    began = time.time()  # training starts (imports, data and models are done)
    for epoch in range(first + 1, epochs + 1):
        order = torch.randperm(len(y), generator=torch.Generator().manual_seed(
            args.seed * 100003 + epoch))
        sums = {}
        for start in range(0, len(y), args.batch):  # one loader for all the models
            idx = order[start:start + args.batch]
            for i, v in fused.train_step(x[idx], y[idx], loss, epoch=epoch).items():
                sums[i] = sums.get(i, 0.0) + v * len(idx)
        fused.report(epoch, val_acc=fused.evaluate(xv, yv, accuracy),
                     loss={i: s / len(y) for i, s in sums.items()})
        fused.save_checkpoints(epoch)
        if fused.poll() or not fused.live:
            break
    # every step copied its losses to the host, so the GPU's work is done by now
    print("train.py: %d configuration(s), hidden %d, batch %d: epochs %d..%d, %s, trained "
          "from %.3f to %.3f" % (len(fused.configs), args.hidden, args.batch, first + 1, epochs,
                                 fused.mode, began, time.time()), file=sys.stderr)


if __name__ == "__main__":
    main()
