#!/usr/bin/python3
"""Unit tests of bench/search/asha_rules.py (Debian's python3-optuna, run by /usr/bin/python3):
its model of Optuna's SuccessiveHalvingPruner trains, trial by trial, exactly the epochs that
Optuna 3.1's own pruner lets the same sequence train (so its asha-against-Optuna figures
compare the real rule), and its asha gives the paper's counts where no trial's rank changes, as
src/search/sched_asha.c does (tests/unit/test_asha_paper.c)."""

import os
import random
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "bench", "search"))

import optuna  # noqa: E402

import asha_rules  # noqa: E402


def no_noise(key, k):
    return 0.0


class AshaRulesTest(unittest.TestCase):
    def test_the_optuna_model_trains_what_optunas_pruner_lets_train(self):
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        for seed in range(5):
            rng = random.Random(seed)
            cfgs = [(rng.random(), rng.uniform(1, 20), 0.0) for _ in range(40)]
            trained = []

            def objective(trial):
                cfg = cfgs[trial.number]
                step = 0
                for k, r in enumerate(asha_rules.RUNGS):
                    step = r
                    trial.report(asha_rules.value(cfg, k, no_noise), step)
                    if trial.should_prune():
                        trained.append(step)
                        raise optuna.TrialPruned()
                trained.append(step)
                return asha_rules.value(cfg, len(asha_rules.RUNGS) - 1, no_noise)

            study = optuna.create_study(
                direction="maximize", sampler=optuna.samplers.RandomSampler(seed=seed),
                pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=1,
                                                              reduction_factor=3))
            study.optimize(objective, n_trials=len(cfgs), n_jobs=1)
            epochs, _ = asha_rules.optuna(cfgs, no_noise)
            self.assertEqual(epochs, sum(trained))

    def test_asha_in_order_costs_the_papers_epochs(self):
        cfgs = [(1.0 - t / 1000.0, 1e-9, 0.0) for t in range(27)]  # each worse than the last
        epochs, best = asha_rules.asha(cfgs, no_noise)
        self.assertEqual(epochs, 81)
        self.assertEqual(asha_rules.sha_epochs(27), 81)
        self.assertEqual(asha_rules.sha_epochs(40), 40 + 13 * 2 + 4 * 6 + 18)
        self.assertEqual(best, 1.0)


if __name__ == "__main__":
    unittest.main()
