#!/usr/bin/env python3
"""The tabular multi-fidelity benchmark: bench/search/lcbench_gen.py trains scikit-learn's
MLPClassifier epoch by epoch and writes the table, `bench/mf_search --table` replays it through
the real schedulers and samplers; the committed table is small and says how it was made."""

import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import BUILD, SRC

GEN = os.path.join(SRC, "bench", "search", "lcbench_gen.py")
MF = os.path.join(BUILD, "bench", "mf_search")
TABLE = os.path.join(SRC, "bench", "search", "data", "lcbench-sk.tsv")
METHODS = ["asha + random", "asha + random, again", "random", "tpe", "asha + tpe", "asha + bohb", "asha + dehb",
           "hyperband + random", "hyperband + bohb", "hyperband + dehb"]


def rows(text):
    """mf_search's method rows: label -> the numbers after it and the verdict."""
    out = {}
    for line in text.splitlines():
        for m in METHODS:
            if line.startswith(m + " ") and line[len(m):len(m) + 2] == "  ":
                nums = re.findall(r"-?\d+\.?\d*|nan", line[len(m):])
                out[m] = (nums, line.split()[-1])
    return out


class TableBenchmark(unittest.TestCase):

    def mf(self, *args):
        p = subprocess.run([MF, *args], capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p.stdout

    def test_a_generated_table_replays_through_every_method(self):
        with tempfile.TemporaryDirectory(prefix="tp_lcb_") as d:
            out = os.path.join(d, "t.tsv")
            p = subprocess.run(["/usr/bin/python3", GEN, "--configs", "5", "--epochs", "3",
                                "--seeds", "2", "--datasets", "wine", "--jobs", "1", "--out",
                                out], capture_output=True, text=True, timeout=600)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(out) as f:
                lines = f.read().splitlines()
            data = [ln.split("\t") for ln in lines if not ln.startswith("#")]
            self.assertEqual(data[0][:4], ["dataset", "config", "seed", "lr"])
            self.assertEqual(data[0][-1], "e3")
            self.assertEqual(len(data), 1 + 5 * 2)  # header, 5 configs x 2 seeds
            errs = [float(v) for r in data[1:] for v in r[-3:]]
            self.assertTrue(all(0 <= e <= 1 for e in errs), errs)
            self.assertIn("# epochs 3", lines)
            text = self.mf("--table", out, "2", "9")
        head = re.search(r"lowest anywhere (\d\.\d+)", text)
        self.assertIsNotNone(head, text)
        self.assertIn("dataset wine: 5 configurations x 2 training seeds, epochs 1..3", text)
        got = rows(text)
        self.assertEqual(sorted(got), sorted(METHODS), text)
        for m, (nums, verdict) in got.items():
            best = float(nums[0])
            # a reported error is one of the table's: never below its lowest
            self.assertGreaterEqual(best, float(head.group(1)) - 1e-9, m)
            if "bohb" in m or "dehb" in m:
                self.assertIn(verdict, ("PASS", "MISS"), m)
        # the reference reaches its own best in every seed, within its own epochs
        nums, _ = got["asha + random"]
        self.assertEqual(nums[-2:], ["2", "2"], text)  # reached 2/2
        self.assertLessEqual(float(nums[-3]), 1.0)

    def test_the_committed_table_is_small_says_how_it_was_made_and_reads(self):
        self.assertLess(os.path.getsize(TABLE), 1 << 20)
        with open(TABLE) as f:
            head = [next(f) for _ in range(3)]
        self.assertIn("made by: /usr/bin/python3 bench/search/lcbench_gen.py", "".join(head))
        text = self.mf("--table", TABLE, "--dataset", "wine", "1", "27")
        self.assertEqual(sorted(rows(text)), sorted(METHODS), text)
        p = subprocess.run([MF, "--table", TABLE, "--dataset", "nope", "1"], capture_output=True,
                           text=True, timeout=600)
        self.assertEqual(p.returncode, 1)
        self.assertIn("no dataset 'nope'", p.stderr)

    def test_optuna_runs_at_the_epochs_mf_search_spent_per_seed(self):
        with tempfile.TemporaryDirectory(prefix="tp_lcb_") as d:
            per_seed = os.path.join(d, "per-seed.tsv")
            self.mf("--table", TABLE, "--dataset", "wine", "--per-seed", per_seed, "2", "27")
            with open(per_seed) as f:
                lines = [ln.split("\t") for ln in f.read().splitlines()]
            self.assertEqual(lines[0], ["dataset", "method", "seed", "trials", "epochs", "best",
                                        "best_any"])
            self.assertEqual(sorted((r[1], r[2]) for r in lines[1:]),
                             sorted((m, s) for m in METHODS for s in ("1", "2")))
            spent = {}
            for r in lines[1:]:
                # the best after any epoch is never above the best at the ends of jobs
                self.assertLessEqual(float(r[6]), float(r[5]), r)
                spent[(r[1], int(r[2]))] = int(r[4])
            p = subprocess.run(["/usr/bin/python3", os.path.join(SRC, "bench", "search",
                                                                 "lcbench_optuna.py"),
                                "--budgets", per_seed, "--dataset", "wine"],
                               capture_output=True, text=True, timeout=600)
        self.assertEqual(p.returncode, 0, p.stderr)
        got = re.findall(r"^(asha \+ \w+)\s+2\s+(\d+)\s+[\d.]+\s+(\w+ \+ sha)\s+[\d.]+\s+(\d+) "
                         r"(\d+)/(\d+)/(\d+)$", p.stdout, re.M)
        self.assertEqual(sorted((g[0], g[2]) for g in got),
                         sorted((t, o) for t in ("asha + tpe", "asha + random")
                                for o in ("tpe + sha", "random + sha")), p.stdout)
        for tp, epochs, _, op_epochs, lo, eq, hi in got:
            # Optuna stops where tunepack's epochs end: the same median
            median = sum(spent[(tp, k)] for k in (1, 2)) / 2
            self.assertLessEqual(abs(float(epochs) - median), 0.5, p.stdout)  # printed %.0f
            self.assertEqual(op_epochs, epochs, p.stdout)
            self.assertEqual(int(lo) + int(eq) + int(hi), 2)


if __name__ == "__main__":
    unittest.main()
