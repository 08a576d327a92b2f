#!/usr/bin/python3
"""Unit tests of what bench/search/field.py measures with: the noisy Branin and Hartmann-6 of
bench/search/toy_objectives.py take their published minima at the published points, their
noise is a Gaussian of the asked sd that repeats for the same (seed, point) only, and field.py
scores a run by the noise-free value of the trial with the lowest noisy loss."""

import os
import statistics
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench", "search"))

import field  # noqa: E402
import toy_objectives  # noqa: E402


def point(values, noise=0.0, seed=1):
    p = {"x%d" % (i + 1): repr(v) for i, v in enumerate(values)}
    p.update(noise=repr(noise), seed=str(seed))
    return p


class FieldObjectivesTest(unittest.TestCase):
    def test_branin_and_hartmann6_take_their_published_minima(self):
        for x in ((-3.14159265359, 12.275), (3.14159265359, 2.275), (9.42477796077, 2.475)):
            r = toy_objectives.branin(point(x))
            self.assertAlmostEqual(r["true_loss"], 0.397887, places=5)
            self.assertEqual(r["loss"], r["true_loss"])
        r = toy_objectives.hartmann6(point((0.20169, 0.150011, 0.476874, 0.275332, 0.311652,
                                            0.6573)))
        self.assertAlmostEqual(r["true_loss"], -3.32237, places=4)
        self.assertGreater(toy_objectives.hartmann6(point([0.5] * 6))["true_loss"], -3.32237)

    def test_the_noise_is_gaussian_of_the_asked_sd_and_repeats_per_seed_and_point(self):
        draws = [toy_objectives.branin(point((i / 1000.0, 1.0), noise=0.5)) for i in range(2000)]
        noise = [r["loss"] - r["true_loss"] for r in draws]
        self.assertAlmostEqual(statistics.mean(noise), 0.0, delta=0.05)
        self.assertAlmostEqual(statistics.pstdev(noise), 0.5, delta=0.05)
        a = toy_objectives.branin(point((1.0, 2.0), noise=0.5, seed=3))
        self.assertEqual(a, toy_objectives.branin(point((1.0, 2.0), noise=0.5, seed=3)))
        self.assertNotEqual(a, toy_objectives.branin(point((1.0, 2.0), noise=0.5, seed=4)))

    def test_a_run_is_scored_by_the_true_value_of_its_lowest_noisy_trial(self):
        seq = [(5.0, 4.0), (1.0, 3.0), (2.0, 0.5), (0.9, 2.5)]  # (noisy, true)
        self.assertEqual(field.incumbents(seq), [4.0, 3.0, 3.0, 2.5])
        self.assertEqual(field.trials_to_reach(seq, 2.6), 4)
        self.assertEqual(field.trials_to_reach(seq, 1.0), float("inf"))


if __name__ == "__main__":
    unittest.main()
