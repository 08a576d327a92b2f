#!/usr/bin/env python3
"""Hostile values in an experiment file: each is refused before any trial with
`file:line:col` (exit 3), or carried to the trial intact; none hangs or breaks a run."""

import csv
import io
import json
import os
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, PY, main, yaml_str

BASE = """name: hostile
command: [sh, -c, "echo acc=1", "{x}"]
metric: {name: acc, mode: max}
space:
  x: %s
search: {algorithm: random, trials: 1, seed: 1}
"""


class HostileValues(E2E):

    def refused(self, text, line, col, *needles):
        exp = self.experiment(text, name="bad.yaml")
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir, timeout=30)
        self.assertExit(r, 3)
        first = r.stderr.strip().splitlines()[0]
        self.assertTrue(first.startswith("%s:%d:%d: " % (exp, line, col)), first)
        for n in needles:
            self.assertIn(n, first)
        self.assertFalse(os.path.exists(os.path.join(run_dir, "tunepack.db")))

    def test_non_finite_numbers_are_refused_at_their_place(self):
        for value, col in (("{choice: [1, .inf]}", 19), ("{grid: [.nan]}", 14), ("1e999", 6),
                           ("{uniform: [0, -.inf]}", 20)):
            with self.subTest(value=value):
                self.refused(BASE % value, 5, col, "is not a finite number")

    def test_nul_byte_is_refused(self):
        self.refused(BASE % '{choice: ["a\\0b"]}', 5, 16, "NUL byte")

    def test_value_over_the_limit_is_refused_and_names_the_limit(self):
        self.refused(BASE % ('"%s"' % ("v" * 65537)), 5, 6, "at most 65536 bytes")

    def test_name_of_dots_is_refused(self):
        self.refused((BASE % "1").replace("name: hostile", 'name: ".."'), 1, 7,
                     '"name" cannot be ".."')

    def test_long_value_reaches_the_trial_whole_in_its_environment(self):
        value = "a" * 40000
        exp = self.experiment(
            "name: long\ncommand: [sh, -c, 'echo acc=${#TUNEPACK_PARAM_X}']\n"
            "metric: {name: acc, mode: max}\nspace:\n  x: {choice: [\"%s\"]}\n"
            "search: {algorithm: random, trials: 1}\n" % value)
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        with self.store(run_dir) as s:
            self.assertEqual(s.trials()[0]["value"], 40000.0)

    def trial_script(self, body):
        """A python trial whose body is given; returns its experiment line for `command`."""
        path = self.write("trial.py", "import json, os, sys\n" + body)
        return "command: [%s, %s, \"{x}\"]\n" % (yaml_str(PY), yaml_str(path))

    def test_csv_header_quotes_metric_names_with_comma_quote_and_newline(self):
        names = ["a,b", 'q"x', "n\nl", "plain"]
        report = dict({n: i for i, n in enumerate(names)}, acc=1.5)
        exp = self.experiment(
            "name: csvnames\n" + self.trial_script(
                "f = os.fdopen(int(os.environ['TUNEPACK_REPORT_FD']), 'w')\n"
                "f.write(json.dumps(%r) + '\\n')\n" % report)
            + "metric: {name: acc, mode: max}\nspace:\n  x: {choice: [1]}\n"
            "search: {algorithm: random, trials: 1}\n")
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        r = self.tp("export", run_dir, "--format", "csv")
        self.assertExit(r, 0)
        rows = list(csv.reader(io.StringIO(r.stdout, newline="")))
        self.assertEqual(len(rows), 2, r.stdout)
        header, row = rows
        self.assertEqual(len(header), len(row))
        got = dict(zip(header, row))
        for i, n in enumerate(names):
            self.assertEqual(got["metric." + n], str(i), header)

    def test_trials_prints_no_escape_sequence_from_a_value(self):
        evil = "\x1b]0;pwned\x07\x1b[2J\x9b31m"
        exp = self.experiment(
            "name: esc\ncommand: [sh, -c, 'echo acc=1; exit 3', \"{x}\"]\n"
            "metric: {name: acc, mode: max}\nspace:\n  x: {choice: [%s]}\n"
            "search: {algorithm: random, trials: 1}\n" % yaml_str(evil))
        run_dir = self.path("run")
        self.run_exp(exp, run_dir)
        r = self.tp("trials", run_dir)
        self.assertExit(r, 0)
        self.assertIn("x=\\x1b]0;pwned\\x07\\x1b[2J\\u009b31m", r.stdout)
        for c in r.stdout:
            self.assertFalse(ord(c) < 32 and c != "\n", repr(r.stdout))
            self.assertFalse(0x7f <= ord(c) <= 0x9f, repr(r.stdout))

    def test_trial_whose_reports_were_all_rejected_says_so_and_why(self):
        exp = self.experiment(
            "name: rejected\n" + self.trial_script(
                "f = os.fdopen(int(os.environ['TUNEPACK_REPORT_FD']), 'w')\n"
                "f.write('{\"acc\": \"high\"}\\n')\nf.write('not json\\n')\n")
            + "metric: {name: acc, mode: max}\nspace:\n  x: {choice: [1]}\n"
            "search: {algorithm: random, trials: 1}\n")
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 5)
        with self.store(run_dir) as s:
            err = s.trials()[0]["error"]
        self.assertIn("all 2 of its report lines were rejected, the first because:", err)
        self.assertIn("acc", err)
        self.assertNotIn("no report at all", err)


if __name__ == "__main__":
    main()
