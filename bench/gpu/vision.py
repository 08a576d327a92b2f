#!/usr/bin/env python3
"""The HyperSack study's vision models on a real GPU: profiles, co-location workers, trials.

Used by bench/gpu/checks.sh on a machine with an NVIDIA GPU and PyTorch (torchvision; timm
when present). Data is synthetic and CIFAR-sized (3x32x32, 10 classes) and lives on the GPU,
so what is measured is the training step itself: forward, cross-entropy, backward and an SGD
step in fp32 (PyTorch's default math), with a loader that costs nothing. An epoch is 50,000
samples (CIFAR-10's training set).

    vision.py profile --models resnet18,vit_tiny --batches 64,128 --seconds 2 --out P.jsonl
        each model x batch alone: samples/s, epoch s, peak memory (PyTorch's peak reserved
        plus the CUDA context measured through NVML), GPU busy % from NVML sampled every
        0.1 s; one JSON object per line
    vision.py worker --model M --batch B --seconds S --ready FILE --go FILE --out FILE
        co-location worker: builds and warms up, creates FILE --ready, waits until --go holds
        a start time, then trains for S seconds and writes {"samples", "seconds", "steps"}
    vision.py trial --model M --batch B --lr LR --epochs E (--steps N | --steps-from P.jsonl
                    --epoch-s S) [--alloc-mib X]
        a tunepack trial: E epochs of N steps, reporting loss per epoch; with --steps-from,
        N is the steps this model and batch trained alone in S seconds by that profile (the
        same for every run that reads the same file); --alloc-mib first holds X MiB more on
        the GPU (to cross a memory limit on purpose); under tunepack it keeps the epochs done
        in its checkpoint directory, so a promotion resumes after them

Models: resnet18, resnet34, mobilenet (mobilenet_v3_small), shufflenet (shufflenet_v2_x1_0),
vit_tiny and deit_tiny (ViT-Ti: 12 layers, width 192, 3 heads; patch 4 on 32x32 images; DeiT-Ti
has the same network, only its training recipe differs). Plain PyTorch, for bench/gpu/truth.sh's
mixed workload: mlp (3072-1024-1024-10), convnet (three 3x3 convolutions, 32-64-128 channels)
and tinyformer (a 4-layer transformer encoder, width 128, on 4x4 patches).
"""
import argparse
import json
import os
import sys
import threading
import time

import torch

EPOCH_SAMPLES = 50000
MODELS = ("resnet18", "resnet34", "mobilenet", "shufflenet", "vit_tiny", "deit_tiny")
PLAIN = ("mlp", "convnet", "tinyformer")  # plain PyTorch, for bench/gpu/truth.sh


class TinyFormer(torch.nn.Module):
    """A plain-PyTorch transformer encoder on 4x4 patches: 64 tokens of width 128, 4 layers."""

    def __init__(self, width=128, layers=4):
        super().__init__()
        self.patch = torch.nn.Conv2d(3, width, 4, stride=4)
        self.pos = torch.nn.Parameter(torch.zeros(1, 64, width))
        layer = torch.nn.TransformerEncoderLayer(width, 4, 2 * width, dropout=0.0,
                                                 batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers)
        self.head = torch.nn.Linear(width, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.encoder(x).mean(1))


def build_plain(name):
    """The plain-PyTorch models (no torchvision, no timm: they start as fast as torch does),
    or None."""
    nn = torch.nn
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(3072, 1024), nn.ReLU(),
                             nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    if name == "convnet":
        return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10))
    if name == "tinyformer":
        return TinyFormer()
    return None


def build(name):
    """The model `name` for 32x32 images and 10 classes."""
    plain = build_plain(name)
    if plain is not None:
        return plain
    import torchvision.models as tvm
    if name in ("resnet18", "resnet34"):
        return getattr(tvm, name)(num_classes=10)
    if name == "mobilenet":
        return tvm.mobilenet_v3_small(num_classes=10)
    if name == "shufflenet":
        return tvm.shufflenet_v2_x1_0(num_classes=10)
    if name in ("vit_tiny", "deit_tiny"):
        try:
            import timm
            arch = "vit_tiny_patch16_224" if name == "vit_tiny" else "deit_tiny_patch16_224"
            return timm.create_model(arch, img_size=32, patch_size=4, num_classes=10)
        except ImportError:
            return tvm.VisionTransformer(image_size=32, patch_size=4, num_layers=12,
                                         num_heads=3, hidden_dim=192, mlp_dim=768,
                                         num_classes=10)
    raise SystemExit("vision.py: unknown model %r (known: %s)" % (name, ", ".join(MODELS + PLAIN)))


def device():
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Trainer:
    """One model, its optimizer and one synthetic batch on the device."""

    def __init__(self, name, batch, lr=0.05, seed=0):
        torch.manual_seed(seed)
        self.dev = device()
        self.model = build(name).to(self.dev)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)
        self.x = torch.randn(batch, 3, 32, 32, device=self.dev)
        self.y = torch.randint(0, 10, (batch,), device=self.dev)
        self.batch = batch

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()
        return loss

    def sync(self):
        if self.dev.type == "cuda":
            torch.cuda.synchronize()

    def run_for(self, seconds):
        """Train until `seconds` have passed (checked after each step, which ends with a
        synchronisation, as a loop that reads its loss does); returns (steps, seconds)."""
        t0 = time.monotonic()
        steps = 0
        while True:
            self.step()
            self.sync()
            steps += 1
            dt = time.monotonic() - t0
            if dt >= seconds:
                return steps, dt


class Busy:
    """NVML's GPU busy % of device 0 sampled every 0.1 s in a thread (None without NVML),
    and its per-process SM % (per_process())."""

    def __init__(self):
        self.samples, self.stop = [], threading.Event()
        try:
            import pynvml
            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # no pynvml or no driver: report no utilisation
            self.nvml = None

    def used_mib(self):
        if not self.nvml:
            return None
        return self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used / 2**20

    def __enter__(self):
        self.samples, self.proc, self.stop = [], {}, threading.Event()
        if self.nvml:
            self.thread = threading.Thread(target=self._sample, daemon=True)
            self.thread.start()
        return self

    def _sample(self):
        seen, n = int(time.time() * 1e6), 0
        while not self.stop.wait(0.1):
            self.samples.append(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
            n += 1
            if n % 5 == 0:  # NVML keeps a short history of per-process samples
                seen = self._proc_samples(seen)
        self._proc_samples(seen)

    def _proc_samples(self, seen):
        """Add NVML's per-process SM samples newer than seen (us); returns the newest."""
        try:
            got = self.nvml.nvmlDeviceGetProcessUtilization(self.handle, seen)
        except Exception:  # not supported, or no sample since seen
            return seen
        for s in got:
            if s.timeStamp > seen:
                self.proc.setdefault(s.pid, []).append(s.smUtil)
        return max([seen] + [s.timeStamp for s in got])

    def per_process(self):
        """{pid: mean SM %} of NVML's per-process samples over the window."""
        return {pid: round(sum(v) / len(v), 1) for pid, v in self.proc.items() if v}

    def __exit__(self, *exc):
        self.stop.set()
        if self.nvml:
            self.thread.join()

    def mean(self):
        return sum(self.samples) / len(self.samples) if self.samples else None


def profile(args):
    busy = Busy()
    before = busy.used_mib()
    torch.zeros(1, device=device())  # create the CUDA context
    context = busy.used_mib() - before if before is not None else None
    out = open(args.out, "a") if args.out else None
    for name in args.models.split(","):
        for b in (int(s) for s in args.batches.split(",")):
            if device().type == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            t = Trainer(name, b)
            t.run_for(args.warmup)
            with busy:
                steps, dt = t.run_for(args.seconds)
            row = {"model": name, "batch": b, "steps": steps, "seconds": round(dt, 3),
                   "samples_per_s": round(steps * b / dt, 1),
                   "epoch_s": round(EPOCH_SAMPLES * dt / (steps * b), 2),
                   "busy_pct": None if busy.mean() is None else round(busy.mean(), 1),
                   "context_mib": None if context is None else round(context),
                   "device": torch.cuda.get_device_name(0) if device().type == "cuda"
                   else "cpu"}
            if device().type == "cuda":
                row["peak_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
                row["peak_reserved_mib"] = round(torch.cuda.max_memory_reserved() / 2**20)
                row["peak_mib"] = row["peak_reserved_mib"] + (row["context_mib"] or 0)
            print(json.dumps(row), flush=True)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()
            del t


def worker(args):
    t = Trainer(args.model, args.batch)
    t.run_for(args.warmup)
    open(args.ready, "w").close()
    deadline = time.time() + args.wait
    while not os.path.exists(args.go):
        if time.time() > deadline:
            raise SystemExit("vision.py worker: no %s after %.0f s" % (args.go, args.wait))
        time.sleep(0.02)
    with open(args.go) as f:
        start = float(f.read())
    time.sleep(max(0.0, start - time.time()))
    steps, dt = t.run_for(args.seconds)
    with open(args.out, "w") as f:
        json.dump({"samples": steps * args.batch, "seconds": dt, "steps": steps}, f)


def trial(args):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    from tunepack_report import checkpoint_dir, report
    hold = None
    if args.alloc_mib:
        hold = torch.empty(args.alloc_mib * 2**20, dtype=torch.uint8, device=device())
    steps = args.steps
    if args.steps_from:
        with open(args.steps_from) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        rate = [r["steps"] / r["seconds"] for r in rows
                if r["model"] == args.model and r["batch"] == args.batch]
        if not rate:
            raise SystemExit("vision.py: no %s at batch %d in %s"
                             % (args.model, args.batch, args.steps_from))
        steps = max(1, round(args.epoch_s * rate[-1]))
    if not steps:
        raise SystemExit("vision.py trial: give --steps or --steps-from")
    # the epochs done, kept across the trial's jobs (a promotion resumes there; the weights
    # are not kept: the work is what these checks measure)
    done = os.path.join(checkpoint_dir(), "epochs_done") if checkpoint_dir() else None
    start = 0
    if done and os.path.exists(done):
        with open(done) as f:
            start = int(f.read() or 0)
    t = Trainer(args.model, args.batch, lr=args.lr)
    if start >= args.epochs:
        report(step=start, loss=float(t.step()))
    for epoch in range(start + 1, args.epochs + 1):
        for _ in range(steps):
            loss = t.step()
        report(step=epoch, loss=float(loss))
        if done:
            with open(done + ".tmp", "w") as f:
                f.write(str(epoch))
            os.replace(done + ".tmp", done)
    del hold


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("profile")
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--batches", default="64,128,256,512")
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--warmup", type=float, default=0.5)
    p.add_argument("--out")
    w = sub.add_parser("worker")
    w.add_argument("--model", required=True)
    w.add_argument("--batch", type=int, required=True)
    w.add_argument("--seconds", type=float, default=3.0)
    w.add_argument("--warmup", type=float, default=1.0)
    w.add_argument("--wait", type=float, default=120.0)
    w.add_argument("--ready", required=True)
    w.add_argument("--go", required=True)
    w.add_argument("--out", required=True)
    t = sub.add_parser("trial")
    t.add_argument("--model", required=True)
    t.add_argument("--batch", type=int, required=True)
    t.add_argument("--lr", type=float, default=0.05)
    t.add_argument("--steps", type=int, default=0)
    t.add_argument("--steps-from")
    t.add_argument("--epoch-s", type=float, default=1.0)
    t.add_argument("--epochs", type=int, default=1)
    t.add_argument("--alloc-mib", type=int, default=0)
    args = ap.parse_args()
    {"profile": profile, "worker": worker, "trial": trial}[args.mode](args)


if __name__ == "__main__":
    main()
