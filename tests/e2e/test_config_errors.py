#!/usr/bin/env python3
"""Config errors: exit 3, `file:line:col: message` on stderr, no store and no trial; every
mistake of a file said in one pass; values the runtime cannot carry refused at load time."""

import hashlib
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

    def test_dry_run_reports_every_mistake_of_a_file_in_one_pass(self):
        # Five mistakes, a bad placeholder and a scheduler without a budget: one run says all.
        text = ("name: two words\n"
                "command: [sh, -c, \"echo acc=1\", \"{lr}\", \"{bsz}\"]\n"
                "metric: {name: acc, mode: maximum}\n"
                "space:\n"
                "  lr: {uniform: [1.0, 0.1]}\n"
                "  bs: {choice: [16, 32]}\n"
                "search: {algorithm: random, trials: -4, scheduler: asha}\n"
                "concurency: 2\n"
                "timeout: 1m1m\n")
        exp = self.experiment(text, name="bad.yaml")
        r = self.tp("run", exp, "--dry-run")
        self.assertExit(r, 3)
        self.assertNotIn("no mistakes", r.stdout + r.stderr)
        expected = [("1:7:", '"name"'), ("3:27:", '"mode"'), ("5:17:", "inverted"),
                    ("7:37:", '"trials"'), ("8:1:", 'did you mean "concurrency"'),
                    ("9:10:", "each unit once"), ("2:41:", "{bsz}"),
                    ("7:52:", "scheduler asha needs a budget")]
        lines = r.stderr.strip().splitlines()
        for where, what in expected:
            hits = [l for l in lines if l.startswith("%s:%s" % (exp, where))]
            self.assertEqual(len(hits), 1, "%s %s once in %r" % (where, what, r.stderr))
            self.assertIn(what, hits[0])
        self.assertEqual(len(lines), len(expected), r.stderr)
        places = [tuple(int(n) for n in l[len(exp) + 1:].split(":")[:2]) for l in lines]
        self.assertEqual(places, sorted(places), "in the file's order")
        # The parameter whose range is wrong is no unknown placeholder as well.
        self.assertNotIn("{lr}", r.stderr)
        # A plain run says the same mistakes, and runs nothing.
        r = self.run_exp(exp, self.path("run"))
        self.assertExit(r, 3)
        self.assertIn("scheduler asha needs a budget", r.stderr)
        self.assertFalse(os.path.exists(self.path("run", "tunepack.db")))

    def test_a_run_names_how_many_mistakes_it_left_out(self):
        text = BASE + "".join("unknown%d: 1\n" % i for i in range(30))
        exp = self.experiment(text, name="many.yaml")
        r = self.run_exp(exp, self.path("run"))
        self.assertExit(r, 3)
        self.assertRegex(r.stderr, r"\(and \d+ more mistakes; --dry-run lists them all\)")
        r = self.tp("run", exp, "--dry-run")
        self.assertExit(r, 3)
        self.assertEqual(r.stderr.count("unknown key"), 30)

    def test_three_nul_mistakes_are_all_reported(self):
        text = ('name: "a\\0b"\ncommand: [sh, -c, "echo\\0 acc=1"]\n'
                'metric: {name: "a\\0cc", mode: max}\n')
        r = self.tp("run", self.experiment(text, name="nul.yaml"), "--dry-run")
        self.assertExit(r, 3)
        for where in ("nul.yaml:1:7:", "nul.yaml:2:19:", "nul.yaml:3:16:"):
            self.assertIn(where, r.stderr)
        self.assertEqual(r.stderr.count("NUL byte"), 3, r.stderr)

    def test_a_byte_order_mark_is_no_part_of_the_first_key(self):
        for bom in ("\ufeff", "\ufeff\ufeff"):
            path = self.path("bom.yaml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(bom + BASE)
            r = self.tp("run", path, "--dry-run")
            self.assertExit(r, 0)
            self.assertIn("no mistakes", r.stdout)
        with open(path, "w", encoding="utf-8") as f:
            f.write("\ufeff" + BASE.replace("name: cfg", "nmae: cfg"))
        r = self.tp("run", path, "--dry-run")
        self.assertExit(r, 3)
        self.assertIn('bom.yaml:1:1: unknown key "nmae"', r.stderr)

    def test_values_the_runtime_cannot_carry_are_refused_at_load_time(self):
        cases = [
            ("concurrency: 1", "timeout: 2562047788015215h", 7, 10, "longest duration"),
            ("concurrency: 1", "stop_grace: 9223372036854775s", 7, 13, "longest duration"),
            ("concurrency: 1", "timeout: 0.0000001s", 7, 10, "below the 1ms"),
            ("concurrency: 1", "timeout: 1m1m", 7, 10, "each unit once"),
            ("concurrency: 1", "log_limit: 9000000T", 7, 12, "8388607T"),
            ("trials: 2", "trials: 9007199254740993", 6, 37, "9007199254740992"),
            ("{uniform: [0, 1]}", "{uniform: [0, 1], q: 1e-320}", 5, 27, "q >= "),
            ("{uniform: [0, 1]}", "{uniform: [-1.7e308, 1.7e308]}", 5, 16, "overflow"),
            ("{uniform: [0, 1]}", "{normal: [1.7e308, 1.0e307]}", 5, 15, "sigmas"),
        ]
        for old, new, line, col, what in cases:
            with self.subTest(new=new):
                first = self.check_error(old, new, line, col, what)
                r = self.tp("run", self.path("bad.yaml"), "--dry-run")
                self.assertExit(r, 3)
                self.assertNotIn("no mistakes", r.stdout)
                self.assertIn(first, r.stderr)
        # The edges that the runtime does carry are taken.
        ok = BASE.replace("concurrency: 1", "timeout: 1ms\nstop_grace: 1000000000s")
        r = self.tp("run", self.experiment(ok, name="edge.yaml"), "--dry-run")
        self.assertExit(r, 0)

    def test_numbers_under_constraints_surrogate_and_pbt_say_what_they_are_and_where(self):
        # One check for every number setting (tp__cfg_get_number): the key, the range, what
        # the number means with an example, what was written, and a hint when it is quoted.
        cases = [
            ('constraints: [{metric: mem_gb, max: "8"}]',
             'bad.yaml:8:37: "max" must be a finite number (a constraint\'s upper bound: a '
             'feasible trial reports at most this, e.g. {metric: mem_gb, max: 8}), got "8" '
             '(quoted, so it is a string; remove the quotes)'),
            ("constraints: [{metric: mem_gb, min: .nan}]",
             'bad.yaml:8:37: ".nan" is not a finite number'),
            ("surrogate: {param: width, value: -2}",
             'bad.yaml:8:34: "value" must be a number > 0 (the size the surrogate trials run '
             'at, scaled down from 1, the full size the best configurations are promoted to; '
             'e.g. 0.125), got "-2"'),
            ("surrogate: {param: width, value: 1}",
             'bad.yaml:8:34: "value" must be a number > 0 other than 1 (the full size the best '
             'configurations are promoted to), e.g. 0.125; got 1'),
            ("pbt: {perturbation_interval: 2, explore: {x: {factors: [0.8, big]}}}",
             'bad.yaml:8:62: "factors" must be a number > 0 (each factor multiplies the '
             'donor\'s "x" at an explore step, e.g. [0.8, 1.2]), got "big"'),
        ]
        for extra, msg in cases:
            with self.subTest(extra=extra):
                exp = self.experiment(BASE + extra + "\n", name="bad.yaml")
                r = self.tp("run", exp, "--dry-run")
                self.assertExit(r, 3)
                self.assertIn(msg, r.stderr)

    def test_a_wide_range_samples_finite_values_or_is_refused(self):
        # Every trial gets its value; a domain that cannot be sampled finitely never loads.
        wide = BASE.replace("{uniform: [0, 1]}", "{uniform: [-1.0e306, 1.0e306]}")
        wide = wide.replace('"echo acc=1", "{x}"',
                            '"echo acc=1; echo \\"$1\\" > \\"$2/x.txt\\"", sh, "{x}", "{trial_dir}"')
        run_dir = self.path("run")
        r = self.run_exp(self.experiment(wide), run_dir)
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            trials = s.trials()
        self.assertEqual(len(trials), 2)
        for t in trials:
            with open(os.path.join(run_dir, "trials", "%06d" % t["id"], "x.txt")) as f:
                value = float(f.read())
            self.assertTrue(abs(value) <= 1e306, value)


if __name__ == "__main__":
    main()
