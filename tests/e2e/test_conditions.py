#!/usr/bin/env python3
"""Conditional parameters (`when:`): an inactive parameter is absent from params.json, the
environment and argv (its elements dropped), from the store, and empty in exports."""

import csv
import io
import json
import os
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import DUMP_TRIAL, E2E, PY, main, yaml_str

class Conditions(E2E):

    def setUp(self):
        super().setUp()
        self.dump = self.write("dump.py", DUMP_TRIAL)


    def run_grid(self):
        exp = self.experiment(
            "name: cond\n"
            "command: [%s, %s, \"--arch={arch}\", \"--width={width}\", --kernel, \"{kernel}\","
            " \"{depth}\"]\n"
            "metric: {name: acc, mode: max}\n"
            "space:\n"
            "  arch: {grid: [mlp, cnn]}\n"
            "  width: {grid: [8, 32], when: {arch: cnn}}\n"
            "  kernel: {grid: [3, 5], when: {width: 32}}\n"
            "  depth: {choice: [2]}\n"
            "search: {algorithm: grid}\n" % (PY, yaml_str(self.dump)))
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        return run_dir

    def test_inactive_params_are_absent_from_params_env_argv_and_store(self):
        run_dir = self.run_grid()
        with self.store(run_dir) as s:
            trials = s.trials()
        # mlp; cnn width 8; cnn width 32 with kernel 3 and 5: 4 valid points, each once
        self.assertEqual(sorted(json.dumps(t["params"], sort_keys=True) for t in trials),
                         sorted(json.dumps(p, sort_keys=True) for p in [
                             {"arch": "mlp", "depth": 2},
                             {"arch": "cnn", "width": 8, "depth": 2},
                             {"arch": "cnn", "width": 32, "kernel": 3, "depth": 2},
                             {"arch": "cnn", "width": 32, "kernel": 5, "depth": 2}]))
        for t in trials:
            self.assertEqual(t["state"], "completed")
            p = t["params"]
            with open(os.path.join(run_dir, "trials", "%06d" % t["id"], "params.json")) as f:
                self.assertEqual(json.load(f), p)
            seen = self.seen(run_dir, t["id"])
            want = ["--arch=" + p["arch"]]
            if "width" in p:
                want.append("--width=%d" % p["width"])
            if "kernel" in p:
                want += ["--kernel", str(p["kernel"])]
            want.append("2")
            # "--width={width}" and the pair "--kernel" "{kernel}" disappear when inactive
            self.assertEqual(seen["argv"][1:], want)
            self.assertEqual({k for k in seen["env"] if k.startswith("TUNEPACK_PARAM_")},
                             {"TUNEPACK_PARAM_" + k.upper() for k in p})

    def test_export_shows_inactive_params_empty_not_zero(self):
        run_dir = self.run_grid()
        r = self.tp("export", run_dir, "--format", "csv")
        self.assertExit(r, 0)
        rows = list(csv.DictReader(io.StringIO(r.stdout)))
        self.assertEqual(len(rows), 4)
        for row in rows:
            if row["arch"] == "mlp":
                self.assertEqual((row["width"], row["kernel"]), ("", ""))
            elif row["width"] == "8":
                self.assertEqual(row["kernel"], "")
            else:
                self.assertIn(row["kernel"], ("3", "5"))
        r = self.tp("export", run_dir, "--format", "json")
        self.assertExit(r, 0)
        for t in json.loads(r.stdout):
            if t["params"]["arch"] == "mlp":
                self.assertNotIn("width", t["params"])

    def test_tpe_run_keeps_the_tree(self):
        exp = self.experiment(
            "name: cond-tpe\n"
            "command: [%s, %s, \"--opt={opt}\", \"--momentum={momentum}\", \"--beta={beta}\"]\n"
            "metric: {name: acc, mode: max}\n"
            "space:\n"
            "  opt: {choice: [sgd, adam]}\n"
            "  momentum: {uniform: [0.0, 1.0], when: {opt: sgd}}\n"
            "  beta: {uniform: [0.0, 1.0], when: {opt: adam}}\n"
            "search: {algorithm: tpe, trials: 14, seed: 2}\n"
            "concurrency: 2\n" % (PY, yaml_str(self.dump)))
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        with self.store(run_dir) as s:
            trials = s.trials()
        self.assertEqual(len(trials), 14)
        for t in trials:
            p = t["params"]
            self.assertEqual(set(p), {"opt", "momentum" if p["opt"] == "sgd" else "beta"})
            argv = self.seen(run_dir, t["id"])["argv"]
            self.assertEqual(len(argv), 3, argv)

    def test_condition_on_unknown_value_is_a_config_error_with_position(self):
        exp = self.experiment(
            "name: bad\n"
            "command: [prog]\n"
            "metric: {name: acc, mode: max}\n"
            "space:\n"
            "  opt: {choice: [sgd, adam]}\n"
            "  momentum: {uniform: [0.0, 1.0], when: {opt: [sgd, rmsprop]}}\n", name="bad.yaml")
        r = self.run_exp(exp, self.path("run"))
        self.assertExit(r, 3)
        self.assertIn("bad.yaml:6:42: condition of \"momentum\" asks for opt = rmsprop", r.stderr)


if __name__ == "__main__":
    main()
