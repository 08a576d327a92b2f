#!/usr/bin/python3
"""Unit tests of python/tunepack_mup.py (Debian's python3-torch, run by /usr/bin/python3): the
roles of common layers, the per-layer learning rates and initial scales of muP's table as the
width changes, and coordinate checks: after a few steps the activations stay O(1) across a
32x range of widths under muP, while the standard parametrisation drifts (which proves the
check can fail)."""

import math
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tunepack_mup as mup  # noqa: E402

torch.set_num_threads(1)
WIDTHS = [0.125, 0.25, 0.5, 1, 2, 4]


def mlp(w, base=256, inputs=32, classes=10):
    h = round(base * w)
    return nn.Sequential(nn.Linear(inputs, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(),
                         nn.Linear(h, classes))


class Net(nn.Module):
    """Every supported kind: an embedding, a conv stack with batch norm, a layer norm."""

    def __init__(self, w):
        super().__init__()
        c, d = round(32 * w), round(64 * w)
        self.emb = nn.Embedding(50, d)
        self.conv1 = nn.Conv2d(3, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(c + d, 7)


def by_role(table):
    return {name: (r.role, r.m) for name, r in table.items()}


class RolesTest(unittest.TestCase):
    def test_an_mlp_has_input_hidden_and_output_layers(self):
        t = mup.roles(mlp(0.5), mlp(0.25), 0.5)
        self.assertEqual(by_role(t), {
            "0.weight": ("input", 0.5), "0.bias": ("vector", 0.5),
            "2.weight": ("hidden", 0.5), "2.bias": ("vector", 0.5),
            "4.weight": ("output", 0.5), "4.bias": ("fixed", 1.0)})

    def test_conv_embedding_and_norms_are_classified_by_which_dims_grow(self):
        t = by_role(mup.roles(Net(1), Net(0.5), 1.0, base_mult=0.25))
        self.assertEqual(t["emb.weight"], ("input", 4.0))
        self.assertEqual(t["conv1.weight"], ("input", 4.0))
        self.assertEqual(t["conv2.weight"], ("hidden", 4.0))
        self.assertEqual(t["bn.weight"], ("vector", 4.0))
        self.assertEqual(t["norm.bias"], ("vector", 4.0))
        self.assertEqual(t["head.weight"], ("output", 4.0))
        self.assertEqual(t["head.bias"], ("fixed", 1.0))

    def test_a_width_scaled_layer_of_another_kind_is_refused_with_its_name(self):
        class Odd(nn.Module):
            def __init__(self, w):
                super().__init__()
                self.gru = nn.GRU(4, round(16 * w))
        with self.assertRaises(ValueError) as e:
            mup.build(Odd, 1.0)
        self.assertIn("gru.weight_ih_l0 (GRU) grows with the width", str(e.exception))
        with self.assertRaises(ValueError):
            mup.build(mlp, 0.5, optimizer="lion")


class RatesAndInitTest(unittest.TestCase):
    def rates(self, w, optimizer, lr=0.01):
        _, opt = mup.build(mlp, w, optimizer, lr=lr)
        out = {}
        for g in opt.param_groups:
            for role in g["mup_roles"]:
                out[role] = g["lr"]
        return out

    def test_adam_rates_divide_hidden_and_output_by_the_width_and_keep_the_rest(self):
        for w in WIDTHS:
            r = self.rates(w, "adam")
            self.assertAlmostEqual(r["input"], 0.01)
            self.assertAlmostEqual(r["vector"], 0.01)
            self.assertAlmostEqual(r["fixed"], 0.01)
            self.assertAlmostEqual(r["hidden"], 0.01 / w)
            self.assertAlmostEqual(r["output"], 0.01 / w)
        self.assertEqual(self.rates(1, "adamw"), {k: 0.01 for k in
                                                  ("input", "vector", "fixed", "hidden", "output")})

    def test_sgd_rates_grow_input_and_biases_keep_hidden_and_shrink_output(self):
        for w in WIDTHS:
            r = self.rates(w, "sgd", lr=0.1)
            self.assertAlmostEqual(r["input"], 0.1 * w)
            self.assertAlmostEqual(r["vector"], 0.1 * w)
            self.assertAlmostEqual(r["hidden"], 0.1)
            self.assertAlmostEqual(r["output"], 0.1 / w)
            self.assertAlmostEqual(r["fixed"], 0.1)

    def test_initial_scales_follow_fan_in_for_hidden_and_fan_in_squared_for_output(self):
        for w in (0.5, 1, 2, 4):
            torch.manual_seed(0)
            model, _ = mup.build(lambda v: mlp(v, base=512), w)
            fan_in = round(512 * w)
            hidden, out = model[2].weight.std().item(), model[4].weight.std().item()
            # PyTorch's default: uniform(+-1/sqrt(fan_in)), std 1/sqrt(3 fan_in)
            self.assertAlmostEqual(hidden * math.sqrt(3 * fan_in), 1.0, delta=0.05)
            # output: variance ~ 1/fan_in^2 relative to the full model (w = 1)
            self.assertAlmostEqual(out * math.sqrt(3 * 512) * w, 1.0, delta=0.12)
            self.assertTrue(torch.all(model[2].bias == 0))
        torch.manual_seed(0)
        model, _ = mup.build(mlp, 1.0, zero_output=True)
        self.assertTrue(torch.all(model[4].weight == 0))

    def test_build_leaves_the_random_stream_as_if_only_the_model_was_made(self):
        torch.manual_seed(3)
        mup.build(mlp, 0.5)
        a = torch.rand(3)
        torch.manual_seed(3)
        mlp(0.5)
        self.assertTrue(torch.equal(torch.rand(3), a))


def coordinates(make, widths, steps=4, lr=0.01):
    """After `steps` optimizer steps on one batch: mean |coordinate| of the two hidden layers'
    outputs and of the logits, per width."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 32, generator=g), torch.randint(0, 10, (64,), generator=g)
    out = []
    for w in widths:
        torch.manual_seed(1)
        model, opt = make(w, lr)
        for _ in range(steps):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        with torch.no_grad():
            h1 = model[1](model[0](x))
            h2 = model[3](model[2](h1))
            out.append([t.abs().mean().item() for t in (h1, h2, model[4](h2))])
    return out


def spread(values):
    return max(values) / min(values)


class CoordinateCheckTest(unittest.TestCase):
    def check(self, optimizer, lr, sp_class):
        mu = coordinates(lambda w, lr: mup.build(mlp, w, optimizer, lr=lr), WIDTHS, lr=lr)
        for layer in range(3):
            self.assertLess(spread([c[layer] for c in mu]), 2.0, (optimizer, layer, mu))

        def sp(w, lr):
            m = mlp(w)
            return m, sp_class(m.parameters(), lr=lr)
        std = coordinates(sp, WIDTHS, lr=lr)
        # the same check fails the standard parametrisation: its logits drift with the width
        self.assertGreater(spread([c[2] for c in std]), 2.5, (optimizer, std))

    def test_adam_activations_stay_order_one_across_widths_after_steps(self):
        self.check("adam", 0.01, torch.optim.Adam)

    def test_sgd_activations_stay_order_one_across_widths_after_steps(self):
        self.check("sgd", 0.1, torch.optim.SGD)


if __name__ == "__main__":
    unittest.main()
