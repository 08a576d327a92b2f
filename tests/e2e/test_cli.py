#!/usr/bin/env python3
"""The read-side commands (status, trials, best, export), help, usage errors."""

import csv
import io
import json
import os
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import BIN, BUILD, E2E, main, yaml_str

VERBS = ["run", "status", "trials", "best", "export", "stop"]


class Cli(E2E):

    def finished_run(self, mode="max", trials=6):
        """A finished run of `trials` trials reporting acc=x (and loss=n) at step 2, after a
        worse acc at step 1, so that the final and the best value of each trial agree."""
        worse = 0 if mode == "max" else 2
        exp = self.experiment(
            "name: cli\n"
            "command: [sh, -c, 'echo \"{{\\\"step\\\": 1, \\\"acc\\\": %d, \\\"loss\\\": 9}}\" >&3; "
            "echo \"{{\\\"step\\\": 2, \\\"acc\\\": $0, \\\"loss\\\": $1}}\" >&3', \"{x}\", \"{n}\"]\n"
            "metric: {name: acc, mode: %s}\n"
            "space:\n"
            "  x: {uniform: [0, 1]}\n"
            "  n: {int: [1, 9]}\n"
            "search: {algorithm: random, trials: %d, seed: 11}\n"
            "concurrency: 2\n" % (worse, mode, trials))
        run_dir = self.path("run")
        p = self.run_exp(exp, run_dir)
        self.assertExit(p, 0)
        self.run_out = p.stdout
        return run_dir

    def test_best_json_is_the_max_for_mode_max(self):
        run_dir = self.finished_run("max")
        r = self.tp("best", run_dir, "--json")
        self.assertExit(r, 0)
        best = json.loads(r.stdout)
        self.assertEqual(set(best) >= {"trial", "value", "params", "metrics"}, True, best)
        with self.store(run_dir) as s:
            trials = s.trials()
        top = max(trials, key=lambda t: t["params"]["x"])
        self.assertEqual(best["trial"], top["id"])
        self.assertEqual(best["value"], top["params"]["x"])
        self.assertEqual(best["params"], top["params"])
        self.assertEqual(best["metrics"]["acc"], top["params"]["x"])
        self.assertEqual(best["metrics"]["loss"], top["params"]["n"])
        # Where it is: its folder, and its checkpoint once it holds one.
        home = os.path.join(os.path.realpath(run_dir), "trials", "%06d" % top["id"])
        self.assertEqual(best["dir"], home)
        self.assertNotIn("checkpoint", best)  # its checkpoint/ is empty: it saved none
        with open(os.path.join(home, "checkpoint", "model.pt"), "w") as f:
            f.write("weights")
        again = json.loads(self.tp("best", run_dir, "--json").stdout)
        self.assertEqual(again["checkpoint"], os.path.join(home, "checkpoint"))
        text = self.tp("best", run_dir).stdout
        self.assertIn("  directory: %s\n" % home, text)
        self.assertIn("  checkpoint: %s\n" % os.path.join(home, "checkpoint"), text)

    def test_best_json_is_the_min_for_mode_min(self):
        run_dir = self.finished_run("min")
        r = self.tp("best", run_dir, "--json")
        self.assertExit(r, 0)
        best = json.loads(r.stdout)
        with self.store(run_dir) as s:
            trials = s.trials()
        low = min(trials, key=lambda t: t["params"]["x"])
        self.assertEqual(best["trial"], low["id"])
        self.assertEqual(best["value"], low["params"]["x"])
        self.assertEqual(best["params"], low["params"])
        self.assertEqual(best["metrics"]["acc"], low["params"]["x"])

    def test_status_and_trials_show_the_finished_run(self):
        run_dir = self.finished_run()
        st = self.tp("status", run_dir)
        self.assertExit(st, 0)
        self.assertIn("finished", st.stdout)
        self.assertIn("6 completed", st.stdout)
        tr = self.tp("trials", run_dir)
        self.assertExit(tr, 0)
        with self.store(run_dir) as s:
            trials = s.trials()
        lines = [l for l in tr.stdout.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1 + len(trials), tr.stdout)
        for t in trials:
            self.assertTrue(any(l.split()[0] == str(t["id"]) and "completed" in l
                                for l in lines[1:]), t)

    def test_human_output_shows_six_significant_digits_and_json_keeps_all(self):
        run_dir = self.finished_run()
        with self.store(run_dir) as s:
            trials = s.trials()
        six = lambda v: "%.6g" % v
        # a uniform draw has 16-17 digits: the test means something only if they differ
        self.assertTrue(all(repr(t["params"]["x"]) != six(t["params"]["x"]) for t in trials))
        tr = self.tp("trials", run_dir)
        self.assertExit(tr, 0)
        rows = {int(l.split()[0]): l for l in tr.stdout.splitlines()[1:] if l.strip()}
        # no constraints: no feasible column
        self.assertEqual(tr.stdout.split()[:4], ["trial", "state", "fails", "retries"])
        for t in trials:
            x = t["params"]["x"]
            # trial, state, fails, retries, then the value
            self.assertEqual(rows[t["id"]].split()[4], six(t["value"]), rows[t["id"]])
            self.assertIn("x=%s n=%d" % (six(x), t["params"]["n"]), rows[t["id"]])
            self.assertNotIn(repr(x), rows[t["id"]])
        top = max(trials, key=lambda t: t["value"])
        st = self.tp("status", run_dir)
        self.assertExit(st, 0)
        self.assertIn("best        acc %s (trial %d): x=%s n=%d"
                      % (six(top["value"]), top["id"], six(top["params"]["x"]),
                         top["params"]["n"]), st.stdout)
        best = self.tp("best", run_dir)
        self.assertExit(best, 0)
        self.assertIn("best trial %d: acc = %s" % (top["id"], six(top["value"])), best.stdout)
        self.assertIn("  x: %s\n" % six(top["params"]["x"]), best.stdout)
        self.assertNotIn(repr(top["params"]["x"]), best.stdout + st.stdout)
        # so do the run's own log lines and summary
        for t in trials:
            self.assertIn("trial %d completed in" % t["id"], self.run_out)
            self.assertIn(": acc=%s\n" % six(t["value"]), self.run_out)
            self.assertNotIn(repr(t["value"]), self.run_out)
        self.assertIn("best acc %s (trial %d): x=%s n=%d" % (six(top["value"]), top["id"],
                                                            six(top["params"]["x"]),
                                                            top["params"]["n"]), self.run_out)
        # --json and export keep every digit
        self.assertEqual(json.loads(self.tp("best", run_dir, "--json").stdout)["value"],
                         top["value"])
        exported = json.loads(self.tp("export", run_dir, "--format", "json").stdout)
        self.assertEqual({r["id"]: r["params"]["x"] for r in exported},
                         {t["id"]: t["params"]["x"] for t in trials})

    def test_export_json_has_one_object_per_trial(self):
        run_dir = self.finished_run()
        r = self.tp("export", run_dir, "--format", "json")
        self.assertExit(r, 0)
        rows = json.loads(r.stdout)
        with self.store(run_dir) as s:
            trials = s.trials()
        self.assertEqual(len(rows), len(trials))
        by_id = {row["id"]: row for row in rows}
        self.assertEqual(sorted(by_id), [t["id"] for t in trials])
        for t in trials:
            row = by_id[t["id"]]
            self.assertEqual(row["state"], "completed")
            self.assertEqual(row["params"], t["params"])
            self.assertEqual(row["attempts"], 1)
            self.assertEqual(row["value"], t["params"]["x"])
            self.assertEqual(row["metrics"], {"step": 2, "acc": t["params"]["x"],
                                              "loss": t["params"]["n"]})
            self.assertEqual(row["exit_code"], 0)
            self.assertIsNone(row["error"])

    def test_export_csv_parses_with_param_and_metric_columns(self):
        run_dir = self.finished_run()
        r = self.tp("export", run_dir, "--format", "csv")
        self.assertExit(r, 0)
        self.assertEqual(self.tp("export", run_dir).stdout, r.stdout)  # csv unless told
        rows = list(csv.DictReader(io.StringIO(r.stdout)))
        header = r.stdout.splitlines()[0].split(",")
        for col in ("id", "state", "attempts", "value", "x", "n", "metric.acc", "metric.loss"):
            self.assertIn(col, header)
        with self.store(run_dir) as s:
            trials = {t["id"]: t for t in s.trials()}
        self.assertEqual(len(rows), len(trials))
        for row in rows:
            t = trials[int(row["id"])]
            self.assertEqual(row["state"], "completed")
            self.assertEqual(int(row["attempts"]), 1)
            self.assertEqual(float(row["value"]), t["params"]["x"])
            self.assertEqual(float(row["x"]), t["params"]["x"])
            self.assertEqual(int(row["n"]), t["params"]["n"])
            self.assertEqual(float(row["metric.acc"]), t["params"]["x"])
            self.assertEqual(float(row["metric.loss"]), t["params"]["n"])

    def test_help_on_each_verb_exits_0_with_an_example(self):
        for verb in VERBS:
            r = self.tp(verb, "--help")
            self.assertExit(r, 0)
            self.assertIn("example", (r.stdout + r.stderr).lower(), verb)

    def test_unknown_verb_exits_2_with_did_you_mean(self):
        r = self.tp("stauts")
        self.assertExit(r, 2)
        self.assertIn('did you mean "status"', r.stderr)
        r = self.tp("exprot")
        self.assertExit(r, 2)
        self.assertIn('did you mean "export"', r.stderr)

    def test_unknown_option_exits_2(self):
        r = self.tp("status", "--bogus")
        self.assertExit(r, 2)

    def test_read_commands_on_a_dir_without_experiment_exit_4(self):
        empty = self.path("empty")
        os.makedirs(empty)
        for verb in ("status", "trials", "best"):
            self.assertExit(self.tp(verb, empty), 4)
        self.assertExit(self.tp("export", empty, "--format", "json"), 4)

    def test_best_when_every_trial_failed_exits_5(self):
        exp = self.experiment(
            "name: allfail\n"
            "command: [sh, -c, 'exit 1']\n"
            "metric: {name: acc, mode: max}\n"
            "space: {x: {choice: [1, 2]}}\n"
            "search: {algorithm: random, trials: 2, seed: 1}\n")
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 5)
        self.assertExit(self.tp("best", run_dir), 5)
        self.assertExit(self.tp("best", run_dir, "--json"), 5)
        st = self.tp("status", run_dir)
        self.assertExit(st, 0)
        self.assertIn("2 failed", st.stdout)

    def test_grid_without_trials_runs_each_point_once(self):
        exp = self.experiment(
            "name: grid-once\n"
            "command: [sh, -c, 'echo \"acc=$0\"', \"{x}\"]\n"
            "metric: {name: acc, mode: max}\n"
            "space: {x: {grid: [1, 2, 3]}}\n"
            "search: {algorithm: grid}\n")
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        with self.store(run_dir) as s:
            trials = s.trials()
        self.assertEqual(sorted(t["params"]["x"] for t in trials), [1, 2, 3])
        self.assertEqual({t["state"] for t in trials}, {"completed"})
        tr = self.tp("trials", run_dir)
        self.assertExit(tr, 0)
        rows = [l for l in tr.stdout.splitlines()[1:] if l.strip()]
        self.assertEqual(len(rows), 3, tr.stdout)

    def test_mlp_example_runs_a_six_trial_grid(self):
        mlp = os.path.join(BUILD, "examples", "mlp_train")
        self.assertTrue(os.access(mlp, os.X_OK), "build examples/mlp_train first")
        exp = self.experiment(
            "name: mlp-grid\n"
            "command: [%s, --lr, \"{lr}\", --hidden, \"{hidden}\", --epochs, \"{epochs}\"]\n"
            "metric: {name: val_acc, mode: max}\n"
            "space:\n"
            "  lr: {grid: [0.01, 0.1, 0.5]}\n"
            "  hidden: {grid: [8, 16]}\n"
            "  epochs: 3\n"
            "search: {algorithm: grid, trials: 1}\n"
            "concurrency: 2\n" % yaml_str(mlp))
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        with self.store(run_dir) as s:
            trials = s.trials()
        self.assertEqual(len(trials), 6)
        self.assertEqual({(t["params"]["lr"], t["params"]["hidden"]) for t in trials},
                         {(lr, h) for lr in (0.01, 0.1, 0.5) for h in (8, 16)})
        for t in trials:
            self.assertEqual(t["state"], "completed", t)
            self.assertEqual(t["step"], 3)
            self.assertTrue(0.0 <= t["value"] <= 1.0)
        best = json.loads(self.tp("best", run_dir, "--json").stdout)
        self.assertEqual(best["value"], max(t["value"] for t in trials))


if __name__ == "__main__":
    main()
