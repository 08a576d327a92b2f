#!/usr/bin/python3
"""Data-parallel training with PyTorch's DistributedDataParallel, as one tunepack trial that
spans several processes (and nodes): an MLP on scikit-learn's digits, on the CPU, over gloo.

tunepack starts one process per rank with the torchrun-style environment (WORLD_SIZE, RANK,
LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), so the script is what it would be
under torchrun: init_process_group reads them, every rank trains on its own shard of the
training set (DistributedSampler), and DDP averages the gradients of all ranks at each step.
Rank 0 reports val_acc per epoch through python/tunepack_report.py; the others only train.

With --proof FILE every rank writes, at the end, a checksum of its parameters and of the
sample indices it trained on (FILE.rank<k>): the parameters agree across ranks although
their data differs, which only the gradient averaging can bring about.

    resources: {nodes: 2}                     # one process on each of two nodes
    resources: {procs_per_node: 2}            # two processes on one node
"""

import argparse
import hashlib
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "python"))
from tunepack_report import report  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset  # noqa: E402

SPLIT_SEED = 20240607
N_VAL = 500


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--proof", default=None)
    a = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo")  # WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT from the env
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)  # different on purpose: DDP broadcasts rank 0's weights

    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(SPLIT_SEED))
    val, train = order[:N_VAL], order[N_VAL:]
    data = TensorDataset(x[train], y[train], torch.arange(len(train)))
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=a.batch, sampler=sampler)

    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(64, a.hidden), torch.nn.ReLU(), torch.nn.Linear(a.hidden, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    seen = hashlib.sha256()
    for epoch in range(1, a.epochs + 1):
        sampler.set_epoch(epoch)
        model.train()
        for xb, yb, idx in loader:
            seen.update(idx.numpy().tobytes())
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()  # gradients averaged
            opt.step()
        if rank == 0:
            model.eval()
            with torch.no_grad():
                acc = (model(x[val]).argmax(1) == y[val]).sum().item() / len(val)
            report(step=epoch, val_acc=acc, world_size=world)
    if a.proof:
        params = hashlib.sha256()
        for p in model.module.parameters():
            params.update(p.detach().numpy().tobytes())
        with open("%s.rank%d" % (a.proof, rank), "w") as f:
            f.write("%s %s %s\n" % (params.hexdigest(), seen.hexdigest(),
                                    os.environ.get("SLURMD_NODENAME", "")))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
