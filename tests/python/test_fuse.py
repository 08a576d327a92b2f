#!/usr/bin/python3
"""Unit tests of python/tunepack_fuse.py's horizontal fusion (Debian's python3-torch 1.13 with
functorch, run by /usr/bin/python3): K models stacked into one batched model step to the same
parameters as the same K models stepped one after the other (SGD with momentum, weight decay
and nesterov, Adam, AdamW, a different lr per model; the grouped-matmul MLP and the vmap path),
the fallback to stepping one after the other says why (BatchNorm, a buffer changed in forward,
a model vmap rejects, a custom optimizer), checkpoints are one model's and round trip, and a
dropped configuration or one sitting an epoch out leaves the others' results unchanged."""

import contextlib
import io
import os
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tunepack_fuse  # noqa: E402
from tunepack_fuse import Fused  # noqa: E402

torch.set_num_threads(1)
CE = nn.functional.cross_entropy
STEPS = 12


def mlp(params):
    torch.manual_seed(int(params.get("seed", 0)))
    return nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 4))


class Residual(nn.Module):
    """Not a Sequential of Linear layers: the vmap path runs it."""

    def __init__(self):
        super().__init__()
        self.inp, self.mid, self.out = nn.Linear(10, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        return self.out(h + torch.tanh(self.mid(h)))


def residual(params):
    torch.manual_seed(int(params.get("seed", 0)))
    return Residual()


def with_bn(params):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))


class Counting(nn.Module):
    """Changes a buffer of its own in forward (counts its calls)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(10, 4)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls.add_(1)
        return self.lin(x)


class DataDependent(nn.Module):
    """Python control flow on a tensor's value: vmap cannot batch it."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(10, 4)

    def forward(self, x):
        out = self.lin(x)
        return out * 2 if float(out.sum()) > 0 else out


def configs(k, tmp=None, **fixed):
    """K configurations whose lr, momentum, weight decay (and seed) differ."""
    out = []
    for i in range(k):
        params = {"lr": 0.03 * (i + 1), "momentum": [0.0, 0.9, 0.5, 0.8][i % 4],
                  "weight_decay": [0.0, 1e-3, 1e-2, 0.0][i % 4], "nesterov": i == 2, "seed": i}
        params.update(fixed)
        c = {"config": i, "params": params}
        if tmp:
            c["checkpoint_dir"] = os.path.join(tmp, "c%d" % i)
        out.append(c)
    return out


def batches(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(32, 10, generator=g), torch.randint(0, 4, (32,), generator=g))
            for _ in range(n)]


def train(fused, data, epoch=None, loss=CE):
    losses = []
    for x, y in data:
        losses.append(fused.train_step(x, y, loss, epoch=epoch))
    return losses


def weights(fused, i):
    return [p.detach().clone() for p in fused.models[i].parameters()]


class Equivalence(unittest.TestCase):
    def assertSameModels(self, a, b, which):
        for i in which:
            for p, q in zip(weights(a, i), weights(b, i)):
                self.assertTrue(torch.allclose(p, q, rtol=1e-4, atol=1e-6),
                                "model %d: %g apart" % (i, float((p - q).abs().max())))

    def check(self, build, optimizer, k=4, plan=True, loss=CE):
        data = batches(STEPS)
        a = Fused(build, optimizer=optimizer, configs=configs(k))
        b = Fused(build, optimizer=optimizer, configs=configs(k), horizontal=False)
        self.assertEqual((a.mode, a.why), ("horizontal", None))
        self.assertEqual(b.mode, "sequential")
        self.assertEqual(a._plan is not None, plan)
        before = weights(a, 1)
        la, lb = train(a, data, loss=loss), train(b, data, loss=loss)
        self.assertEqual(a.mode, "horizontal")  # the first step did not fall back
        for da, db in zip(la, lb):
            self.assertEqual(sorted(da), list(range(k)))
            for i in da:
                self.assertAlmostEqual(da[i], db[i], places=4)
        self.assertSameModels(a, b, range(k))
        self.assertFalse(torch.equal(before[0], weights(a, 1)[0]), "nothing trained")
        # the lrs differ, so the models do: each stepped with its own settings
        self.assertFalse(torch.allclose(weights(a, 0)[0], weights(a, k - 1)[0]))
        xv, yv = batches(1, seed=7)[0]
        ea = a.evaluate(xv, yv, lambda out, y: CE(out, y))
        eb = b.evaluate(xv, yv, lambda out, y: CE(out, y))
        for i in range(k):
            self.assertAlmostEqual(ea[i], eb[i], places=4)
        return a, b

    def test_sgd_momentum_matmul(self):
        self.check(mlp, "sgd")

    def test_sgd_momentum_vmap(self):
        self.check(residual, "sgd", plan=False)

    def test_adam(self):
        self.check(mlp, "adam")
        self.check(residual, "adam", plan=False)

    def test_losses_other_than_cross_entropy(self):
        # vmapped: any loss of (outputs, targets)
        self.check(mlp, "sgd", loss=lambda out, y: (out.softmax(1) - nn.functional.one_hot(
            y, 4)).pow(2).sum(1).mean())
        # nn.CrossEntropyLoss with label smoothing and an ignored class: one call for all K
        y = torch.tensor([0, 1, 3, 2, 1])
        out = torch.randn(3, 5, 4)
        fn = nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=3)
        want = torch.stack([fn(out[i], y) for i in range(3)])
        self.assertTrue(torch.allclose(Fused._losses(fn, out, y), want, atol=1e-6))
        self.assertTrue(torch.allclose(Fused._losses(CE, out, y),
                                       torch.stack([CE(o, y) for o in out]), atol=1e-6))

    def test_adamw(self):
        self.check(mlp, "adamw", k=3)

    def test_models_are_views_of_the_stack(self):
        a, _ = self.check(mlp, "sgd", k=2)
        x = torch.randn(5, 10)
        with torch.no_grad():  # models[i] is the stacked model i, usable on its own
            out = a._forward(x)
            for i in range(2):
                self.assertTrue(torch.allclose(a.models[i](x), out[i], atol=1e-6))

    def test_one_configuration_is_not_batched(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            f = Fused(mlp, configs=configs(1))
        self.assertEqual(f.mode, "sequential")
        self.assertIn("one configuration", f.why)
        self.assertNotIn("tunepack_fuse", err.getvalue())  # nothing to say for an unfused trial


class Fallback(unittest.TestCase):
    def fallback(self, build, expect, optimizer="sgd", at_step=False):
        err = io.StringIO()
        data = batches(4)
        with contextlib.redirect_stderr(err):
            a = Fused(build, optimizer=optimizer, configs=configs(3))
            self.assertEqual(a.mode, "horizontal" if at_step else "sequential")
            la = train(a, data)
            train(a, data)
        self.assertEqual(a.mode, "sequential")
        self.assertIn(expect, a.why)
        # said once (other lines would be the framework's own warnings)
        lines = [line for line in err.getvalue().splitlines() if "tunepack_fuse" in line]
        self.assertEqual(len(lines), 1, err.getvalue())
        self.assertIn("one after the other", lines[0])
        self.assertIn(expect, lines[0])
        # and it trains as today's stepping does
        b = Fused(build, optimizer=optimizer, configs=configs(3), horizontal=False)
        lb = train(b, data)
        train(b, data)
        self.assertEqual(la, lb)
        for i in range(3):
            for p, q in zip(weights(a, i), weights(b, i)):
                self.assertTrue(torch.equal(p, q))
            for p, q in zip(a.models[i].buffers(), b.models[i].buffers()):
                self.assertTrue(torch.equal(p, q))
        return a

    def test_batchnorm(self):
        a = self.fallback(with_bn, "BatchNorm1d")
        self.assertIn("running statistics", a.why)
        self.assertEqual(int(a.models[0][1].num_batches_tracked), 8)

    def test_buffer_changed_in_forward(self):
        a = self.fallback(lambda p: Counting(), "forward changes its buffers (calls)",
                          at_step=True)
        self.assertEqual(float(a.models[0].calls), 8)  # the probe's call was undone

    def test_vmap_rejects(self):
        self.fallback(lambda p: DataDependent(), "vmap rejects the model", at_step=True)

    def test_custom_optimizer(self):
        class Mine(torch.optim.SGD):
            def __init__(self, groups):
                super().__init__(groups, lr=0.05, momentum=0.9)
        a = self.fallback(mlp, "a custom optimizer (Mine)", optimizer=Mine)
        self.assertEqual([g["lr"] for g in a.optimizer.param_groups], [0.05] * 3)  # its own

    def test_custom_optimizer_gets_named_settings(self):
        with contextlib.redirect_stderr(io.StringIO()):
            a = Fused(mlp, optimizer=torch.optim.SGD, hparams={"lr": "lr"}, configs=configs(2))
        self.assertEqual([g["lr"] for g in a.optimizer.param_groups], [0.03, 0.06])


class Checkpoints(unittest.TestCase):
    def test_round_trip(self):
        data, more = batches(STEPS), batches(6, seed=3)
        for optimizer in ("sgd", "adam"):
            with tempfile.TemporaryDirectory() as tmp:
                a = Fused(mlp, optimizer=optimizer, configs=configs(3, tmp))
                train(a, data)
                a.save_checkpoints(1)
                blob = torch.load(os.path.join(tmp, "c1", "fused.pt"))
                # one model's state_dict, each tensor its own (not the stack's storage)
                single = mlp({"seed": 9})
                single.load_state_dict(blob["model"])
                for p, q in zip(single.parameters(), a.models[1].parameters()):
                    self.assertTrue(torch.equal(p, q))
                for t in blob["model"].values():
                    storage = t.untyped_storage() if hasattr(t, "untyped_storage") \
                        else t.storage()  # PyTorch 2 / 1.13
                    self.assertEqual(storage.nbytes(), t.numel() * t.element_size())
                # a plain torch optimizer takes its state and steps as the stack does
                opt = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}[optimizer]
                one = opt(single.parameters(), lr=0.06,
                          **({"momentum": 0.9, "weight_decay": 1e-3} if optimizer == "sgd"
                             else {}))
                for p, st in zip(single.parameters(), blob["optimizer"]):
                    self.assertTrue(st)
                    one.state[p] = st
                cfg1 = configs(3, tmp)[1]["params"]
                self.assertEqual((cfg1["lr"], cfg1["momentum"]), (0.06, 0.9))
                if optimizer == "adam":
                    one.param_groups[0]["weight_decay"] = cfg1["weight_decay"]
                # resumed stacked, resumed one after the other, and uninterrupted agree
                b = Fused(mlp, optimizer=optimizer, configs=configs(3, tmp))
                c = Fused(mlp, optimizer=optimizer, configs=configs(3, tmp), horizontal=False)
                self.assertEqual(b.load_checkpoints(), 1)
                self.assertEqual(c.load_checkpoints(), 1)
                train(a, more)
                train(b, more)
                train(c, more)
                for x, y in more:
                    one.zero_grad()
                    CE(single(x), y).backward()
                    one.step()
                for i in range(3):
                    for p, q, r in zip(weights(a, i), weights(b, i), weights(c, i)):
                        self.assertTrue(torch.allclose(p, q, atol=1e-6), (optimizer, i))
                        self.assertTrue(torch.allclose(p, r, rtol=1e-4, atol=1e-6))
                for p, q in zip(single.parameters(), a.models[1].parameters()):
                    self.assertTrue(torch.allclose(p, q, rtol=1e-4, atol=1e-6), optimizer)


class Drops(unittest.TestCase):
    def test_dropped_configuration_leaves_the_others_unchanged(self):
        data = batches(STEPS)
        a = Fused(mlp, optimizer="adam", configs=configs(4))
        train(a, data[:5])
        frozen = weights(a, 1)
        with mock.patch.object(tunepack_fuse.tunepack_report, "dropped", return_value={1}):
            self.assertFalse(a.poll())
        self.assertEqual(a.live, [0, 2, 3])
        self.assertEqual(a.mode, "horizontal")
        losses = train(a, data[5:])
        self.assertTrue(all(sorted(d) == [0, 2, 3] for d in losses))
        for p, q in zip(frozen, weights(a, 1)):
            self.assertTrue(torch.equal(p, q), "a dropped configuration trained on")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            a.report(1, loss=losses[-1])
        self.assertEqual([line.split()[0] for line in out.getvalue().splitlines()],
                         ["config=0", "config=2", "config=3"])
        # the others: as if configuration 1 had never been there
        b = Fused(mlp, optimizer="adam", configs=[c for c in configs(4) if c["config"] != 1])
        lb = train(b, data)
        for row, i in enumerate([0, 2, 3]):
            for p, q in zip(weights(a, i), weights(b, row)):
                self.assertTrue(torch.allclose(p, q, rtol=1e-4, atol=1e-6), i)
            self.assertAlmostEqual(losses[-1][i], lb[-1][row], places=4)

    def test_all_dropped(self):
        a = Fused(mlp, configs=configs(2))
        with mock.patch.object(tunepack_fuse.tunepack_report, "dropped", return_value={0, 1}):
            a.poll()
        self.assertEqual(a.live, [])
        self.assertEqual(train(a, batches(2)), [{}, {}])

    def test_sitting_an_epoch_out(self):
        data = batches(4)
        for optimizer in ("sgd", "adam"):
            a = Fused(mlp, optimizer=optimizer, configs=configs(3))
            b = Fused(mlp, optimizer=optimizer, configs=configs(3), horizontal=False)
            for f in (a, b):
                f.done[1] = 2  # resumed further than the others: sits out epochs 1 and 2
            frozen = weights(a, 1)
            la, lb = train(a, data, epoch=2), train(b, data, epoch=2)
            self.assertTrue(all(sorted(d) == [0, 2] for d in la))
            for da, db in zip(la, lb):
                self.assertEqual(sorted(da), sorted(db))
                for i in da:
                    self.assertAlmostEqual(da[i], db[i], places=4)
            for p, q in zip(frozen, weights(a, 1)):
                self.assertTrue(torch.equal(p, q))
            train(a, data, epoch=3)
            train(b, data, epoch=3)
            for i in range(3):
                for p, q in zip(weights(a, i), weights(b, i)):
                    self.assertTrue(torch.allclose(p, q, rtol=1e-4, atol=1e-6), (optimizer, i))
            self.assertEqual(float(a._steps[1]), 4)  # its Adam step count: its own


if __name__ == "__main__":
    unittest.main()
