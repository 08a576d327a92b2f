#!/usr/bin/env python3
"""Several objectives: metric as a list, every objective journaled, `best` prints the Pareto
front and `best --json` gives it as a list, export carries each objective, schedulers that
need one number refuse with a position, a report without every objective fails the trial."""

import csv
import io
import json
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, PY, main, yaml_str

# err falls with x, cost rises with x; y only makes both worse.
TRIAL = (
    "import json, os, sys\n"
    "x, y = float(sys.argv[1]), float(sys.argv[2])\n"
    "rec = {'err': round(1 - x + y, 6)}\n"
    "if len(sys.argv) < 4: rec['cost'] = round(x * x + y, 6)\n"
    "os.write(int(os.environ['TUNEPACK_REPORT_FD']), (json.dumps(rec) + '\\n').encode())\n"
)


def front_of(points):
    """The ids no other point beats in every objective (all minimized): the oracle."""
    ids = []
    for i, a in points.items():
        if not any(all(b[k] <= a[k] for k in range(2)) and b != a for b in points.values()):
            ids.append(i)
    return sorted(ids)


class MultiObjective(E2E):

    def setUp(self):
        super().setUp()
        self.trial = self.write("trial.py", TRIAL)

    def exp(self, search, extra_arg="", extra=""):
        return self.experiment(
            "name: mo\n"
            "command: [%s, %s, \"{x}\", \"{y}\"%s]\n"
            "metric: [{name: err, mode: min}, {name: cost, mode: min}]\n"
            "space:\n"
            "  x: {uniform: [0.0, 1.0]}\n"
            "  y: {uniform: [0.0, 0.3]}\n"
            "search: %s\n%s" % (PY, yaml_str(self.trial), extra_arg, search, extra),
            name="mo.yaml")

    def run_ok(self, search):
        run_dir = self.path("run-" + search.replace(" ", "").replace(",", "-")[:40])
        self.assertExit(self.run_exp(self.exp(search), run_dir), 0)
        return run_dir

    def test_best_prints_the_pareto_front_and_json_lists_it(self):
        run_dir = self.path("run-front")
        exp = self.exp("{algorithm: random, trials: 12, seed: 3}")
        ran = self.run_exp(exp, run_dir)
        self.assertExit(ran, 0)
        with self.store(run_dir) as s:
            trials = s.trials()
            results = s.q("SELECT trial, objectives FROM decisions WHERE kind = 'result'")
        self.assertEqual(len(trials), 12)
        points = {}
        for t in trials:
            m = json.loads(t["metrics"])
            points[t["id"]] = (m["err"], m["cost"])
        # every objective is journaled with its result, in metric order
        for row in results:
            self.assertEqual(tuple(json.loads(row["objectives"])), points[row["trial"]])
        want = front_of(points)
        self.assertGreaterEqual(len(want), 2)
        r = self.tp("best", run_dir, "--json")
        self.assertExit(r, 0)
        front = json.loads(r.stdout)
        self.assertIsInstance(front, list)
        self.assertEqual(sorted(f["trial"] for f in front), want)
        for f in front:
            self.assertEqual((f["values"]["err"], f["values"]["cost"]), points[f["trial"]])
            self.assertEqual(set(f["params"]), {"x", "y"})
        r = self.tp("best", run_dir)
        self.assertExit(r, 0)
        self.assertIn("Pareto front: %d of 12 finished trials" % len(want), r.stdout)
        for i in want:
            self.assertIn("trial %d: err=" % i, r.stdout)
        # the run's own summary, status and status --json say the front, not one best
        self.assertIn("Pareto front of %d trials:" % len(want), ran.stdout)
        r = self.tp("status", run_dir)
        self.assertExit(r, 0)
        self.assertIn("front       %d of 12 finished trials on the Pareto front" % len(want),
                      r.stdout)
        self.assertNotIn("best        ", r.stdout)
        r = self.tp("status", run_dir, "--json")
        self.assertExit(r, 0)
        st = json.loads(r.stdout)
        self.assertIsNone(st["best"])
        self.assertEqual(sorted(f["trial"] for f in st["front"]), want)
        # a resumed run rebuilds the front from the journal before it says it
        again = self.run_exp(exp, run_dir)
        self.assertExit(again, 0)
        self.assertIn("so far the Pareto front of %d trials:" % len(want), again.stdout)

    def test_export_carries_every_objective(self):
        run_dir = self.run_ok("{algorithm: random, trials: 4, seed: 1}")
        r = self.tp("export", run_dir, "--format", "csv")
        self.assertExit(r, 0)
        rows = list(csv.DictReader(io.StringIO(r.stdout)))
        self.assertEqual(len(rows), 4)
        for row in rows:
            self.assertNotEqual(row["metric.err"], "")
            self.assertNotEqual(row["metric.cost"], "")

    def test_tpe_and_nsga2_run_several_objectives(self):
        for algo in ("tpe", "nsga2"):
            run_dir = self.run_ok("{algorithm: %s, trials: 14, seed: 2}" % algo)
            with self.store(run_dir) as s:
                self.assertEqual([t["state"] for t in s.trials()], ["completed"] * 14)

    def test_schedulers_that_need_one_number_refuse_with_a_position(self):
        exp = self.exp("{algorithm: random, trials: 4, scheduler: asha}",
                       extra="budget: {name: epochs, min: 1, max: 9}\n")
        r = self.run_exp(exp, self.path("run"))
        self.assertExit(r, 3)
        self.assertIn("mo.yaml:7:51: scheduler asha promotes by one number per rung; with "
                      "several objectives use scheduler: fifo", r.stderr)

    def test_a_report_without_every_objective_fails_the_trial(self):
        exp = self.exp("{algorithm: random, trials: 2, seed: 1}", extra_arg=", nocost")
        run_dir = self.path("run")
        self.run_exp(exp, run_dir)
        with self.store(run_dir) as s:
            for t in s.trials():
                self.assertEqual(t["state"], "failed")
                self.assertIn('lacks the objective "cost"', t["error"])


if __name__ == "__main__":
    main()
