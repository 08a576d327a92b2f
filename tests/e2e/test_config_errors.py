#!/usr/bin/env python3
"""Config errors: exit 3, `file:line:col: message` on stderr, no store and no trial."""

import os
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, main

BASE = """name: cfg
command: [sh, -c, "echo acc=1", "{x}"]
metric: {name: acc, mode: max}
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, trials: 2, seed: 1}
concurrency: 1
"""


class ConfigErrors(E2E):

    def check_error(self, old, new, line, col, *needles):
        """Replace old by new in BASE, run it, and check exit 3, the location and message."""
        self.assertIn(old, BASE)
        exp = self.experiment(BASE.replace(old, new, 1), name="bad.yaml")
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 3)
        first = r.stderr.strip().splitlines()[0] if r.stderr.strip() else ""
        self.assertTrue(first.startswith("%s:%d:%d: " % (exp, line, col))
                        or first.startswith("bad.yaml:%d:%d: " % (line, col)),
                        "stderr should start with bad.yaml:%d:%d:, got %r"
                        % (line, col, r.stderr))
        for needle in needles:
            self.assertIn(needle, first)
        # Nothing was created: no store, no trial directory.
        self.assertFalse(os.path.exists(os.path.join(run_dir, "tunepack.db")),
                         "a config error must not create a store")
        self.assertFalse(os.path.exists(os.path.join(run_dir, "trials")),
                         "a config error must not create trials")
        return first

    def test_valid_base_experiment_runs(self):
        # The control: the unmodified file is valid, so each error below is the edit's.
        r = self.run_exp(self.experiment(BASE), self.path("run"))
        self.assertExit(r, 0)

    def test_yaml_syntax_error_reports_position(self):
        self.check_error("space:\n", "space: [\n", 6, 1, "YAML syntax error")

    def test_unknown_top_level_key_suggests_the_right_one(self):
        self.check_error("concurrency: 1", "concurency: 1", 7, 1,
                         '"concurency"', 'did you mean "concurrency"')

    def test_unknown_key_in_metric_is_reported(self):
        self.check_error("mode: max}", "mode: max, goal: 3}", 3, 32, '"goal"')

    def test_unknown_key_in_search_suggests_the_right_one(self):
        self.check_error("seed: 1}", "seed: 1, sed: 2}", 6, 49, '"sed"', 'did you mean "seed"')

    def test_wrong_type_for_concurrency(self):
        self.check_error("concurrency: 1", "concurrency: two", 7, 14,
                         '"concurrency"', "integer", '"two"')

    def test_inverted_range(self):
        self.check_error("{uniform: [0, 1]}", "{uniform: [1, 0]}", 5, 16, '"x"', "inverted")

    def test_inverted_int_range(self):
        self.check_error("{uniform: [0, 1]}", "{int: [5, 2]}", 5, 12, '"x"', "inverted")

    def test_loguniform_bound_not_positive(self):
        self.check_error("{uniform: [0, 1]}", "{loguniform: [0, 1]}", 5, 19,
                         "loguniform", '"x"', "> 0")

    def test_loguniform_negative_bound(self):
        self.check_error("{uniform: [0, 1]}", "{loguniform: [-1, 1]}", 5, 19,
                         "loguniform", "> 0")

    def test_empty_choice(self):
        self.check_error("{uniform: [0, 1]}", "{choice: []}", 5, 15, "choice", '"x"', "empty")

    def test_placeholder_naming_no_parameter(self):
        self.check_error('"{x}"]', '"{y}"]', 2, 33, "{y}", "no parameter", "{x}")

    def test_scalar_command_is_rejected(self):
        self.check_error('command: [sh, -c, "echo acc=1", "{x}"]', 'command: "echo {x}"',
                         2, 10, "command", "list")

    def test_missing_metric(self):
        self.check_error("metric: {name: acc, mode: max}\n", "", 1, 1,
                         'missing required key "metric"')

    def test_unknown_algorithm(self):
        self.check_error("algorithm: random", "algorithm: bayes", 6, 21, '"bayes"',
                         "grid", "random")

    def test_unknown_domain_kind_suggests_the_right_one(self):
        self.check_error("{uniform: [0, 1]}", "{unifrm: [0, 1]}", 5, 7,
                         '"unifrm"', 'did you mean "uniform"')

    def test_different_experiment_in_dir_exits_4_and_loses_nothing(self):
        run_dir = self.path("run")
        first = self.experiment(BASE, name="first.yaml")
        self.assertExit(self.run_exp(first, run_dir), 0)
        with self.store(run_dir) as s:
            before = (s.meta(), s.trials(), s.events(), s.metrics())
        other = self.experiment(BASE.replace("name: cfg", "name: other")
                                .replace("trials: 2", "trials: 3"), name="first.yaml")
        r = self.run_exp(other, run_dir)
        self.assertExit(r, 4)
        self.assertIn(run_dir, r.stderr)
        other2 = self.experiment(BASE.replace("name: cfg", "name: other"), name="second.yaml")
        self.assertExit(self.run_exp(other2, run_dir), 4)
        with self.store(run_dir) as s:
            after = (s.meta(), s.trials(), s.events(), s.metrics())
        self.assertEqual(before, after, "a refused run must not touch the store")
        self.assertEqual(sorted(os.listdir(os.path.join(run_dir, "trials"))),
                         ["000000", "000001"])


if __name__ == "__main__":
    main()
