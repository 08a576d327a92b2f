#!/usr/bin/env python3
"""The shipped examples run to completion (the MLP one shortened to stay fast)."""

import json
import os
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import BUILD, E2E, SRC, main, yaml_str


class Examples(E2E):

    def test_mlp_example_shortened_completes_with_values(self):
        with open(os.path.join(SRC, "examples", "mlp", "experiment.yaml")) as f:
            text = f.read()
        mlp = os.path.join(BUILD, "examples", "mlp_train")
        self.assertTrue(os.access(mlp, os.X_OK), "build examples/mlp_train first")
        for old, new in (("./build/examples/mlp_train", yaml_str(mlp)),
                         ("trials: 40", "trials: 4"),
                         ("epochs: 20", "epochs: 5")):
            self.assertEqual(text.count(old), 1, "examples/mlp/experiment.yaml changed: %r" % old)
            text = text.replace(old, new)
        exp = self.experiment(text)
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            trials = s.trials()
            self.assertEqual(s.meta()["state"], "finished")
            self.assertEqual(s.meta()["metric"], "val_acc")
        self.assertEqual([t["id"] for t in trials], [0, 1, 2, 3])
        for t in trials:
            self.assertEqual(t["state"], "completed", t)
            self.assertEqual(t["step"], 5)
            self.assertTrue(0.0 <= t["value"] <= 1.0, t)
            self.assertEqual(t["params"]["epochs"], 5)
            self.assertIn(t["params"]["hidden"], (16, 32, 64, 128))
            self.assertTrue(1e-4 <= t["params"]["lr"] <= 1.0)
            self.assertIn(t["params"]["layers"], (1, 2, 3))
        best = self.tp("best", run_dir, "--json")
        self.assertExit(best, 0)
        self.assertEqual(json.loads(best.stdout)["value"], max(t["value"] for t in trials))

    def test_mlp_example_separates_a_bad_configuration_from_a_good_one_below_perfect(self):
        # The example's problem is hard on purpose (4 spiral arms, 5% wrong labels): at the
        # example's 20 epochs a learning rate far too small stays near chance (0.25), a
        # well-chosen one gets far above it but not to 1.0. Same command line as the example.
        with open(os.path.join(SRC, "examples", "mlp", "experiment.yaml")) as f:
            command = [line for line in f if line.startswith("command:")]
        self.assertEqual(len(command), 1, "examples/mlp/experiment.yaml changed: command")
        mlp = os.path.join(BUILD, "examples", "mlp_train")
        exp = self.experiment(
            command[0].replace("./build/examples/mlp_train", yaml_str(mlp)) +
            "metric: {name: val_acc, mode: max}\n"
            "space:\n"
            "  lr: {grid: [1.0e-4, 0.3]}\n"
            "  momentum: 0.0\n"
            "  hidden: 16\n"
            "  layers: 3\n"
            "  epochs: 20\n"
            "search: {algorithm: grid, trials: 1}\n"
            "concurrency: 2\n"
            "name: mlp-spread\n")
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        with self.store(run_dir) as s:
            trials = {t["params"]["lr"]: t for t in s.trials()}
        self.assertEqual(sorted(trials), [1e-4, 0.3])
        for t in trials.values():
            self.assertEqual(t["state"], "completed", t)
            self.assertEqual(t["step"], 20)
        bad, good = trials[1e-4]["value"], trials[0.3]["value"]
        self.assertLess(bad, 0.35)            # near chance: 4 classes
        self.assertGreater(good, 0.85)        # learnt the spirals...
        self.assertLess(good, 0.97)           # ...but the wrong labels keep it below 1.0

    def test_python_example_completes_from_the_repository_root(self):
        exp = os.path.join(SRC, "examples", "python", "experiment.yaml")
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir, cwd=SRC)
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            trials = s.trials()
            self.assertEqual(s.meta()["state"], "finished")
        self.assertEqual(len(trials), 8)
        self.assertEqual({(t["params"]["lr"], t["params"]["epochs"]) for t in trials},
                         {(lr, e) for lr in (0.001, 0.01, 0.1, 1.0) for e in (5, 20)})
        for t in trials:
            self.assertEqual(t["state"], "completed", t)
            self.assertEqual(t["step"], t["params"]["epochs"])
            self.assertTrue(t["value"] > 0, t)
            self.assertIn("val_acc", json.loads(t["metrics"]))
        best = json.loads(self.tp("best", run_dir, "--json").stdout)
        self.assertEqual(best["value"], min(t["value"] for t in trials))


if __name__ == "__main__":
    main()
