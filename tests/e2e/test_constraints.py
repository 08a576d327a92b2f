#!/usr/bin/env python3
"""constraints: end to end. A toy trial reports its loss and a constrained metric (mem_gb = 10 x,
feasible up to 5; a trial with y > 0.85 never reports it); the result decisions journal each
result's constraint values, `best` and `status` rank feasible trials only and say how many were
infeasible, `trials` shows a feasible column (and --json, export each standing), and a run SIGKILLed at several points resumes into the same decisions (c-TPE told
the same values in the same order)."""

import csv
import io
import json
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, PY, main, yaml_str

N = 14  # 10 random start-up trials, then 4 from c-TPE
# The unconstrained optimum (x = 1) is infeasible.
TRIAL = r'''
import json, os, sys
x, y = float(sys.argv[1]), float(sys.argv[2])
report = {"loss": (x - 1.0) ** 2 + (y - 0.5) ** 2}
if y <= 0.85:
    report["mem_gb"] = 10 * x
os.write(int(os.environ["TUNEPACK_REPORT_FD"]), (json.dumps(report) + "\n").encode())
'''


def feasible(metrics):
    return metrics.get("mem_gb") is not None and metrics["mem_gb"] <= 5


class ConstraintsTest(E2E):
    def exp(self):
        script = self.write("trial.py", TRIAL)
        return self.experiment(
            "name: cons\n"
            "command: [%s, %s, \"{x}\", \"{y}\"]\n"
            "metric: {name: loss, mode: min}\n"
            "space:\n"
            "  x: {uniform: [0, 1]}\n"
            "  y: {uniform: [0, 1]}\n"
            "search: {algorithm: tpe, trials: %d, seed: 5}\n"
            "constraints: [{metric: mem_gb, max: 5}]\n" % (yaml_str(PY), yaml_str(script), N))

    def decisions(self, run_dir):
        with self.store(run_dir) as s:
            return [tuple(r.values()) for r in
                    s.q("SELECT kind, trial, ok, value, constraints FROM decisions ORDER BY seq")]

    def test_best_ranks_feasible_trials_only_and_a_killed_run_resumes_the_same(self):
        plain, killed = self.assert_kills_resume_the_same(self.exp(), self.decisions, parts=3)
        with self.store(plain) as s:
            trials = s.trials()
            results = s.q("SELECT trial, constraints FROM decisions WHERE kind = 'result'")
            self.assertEqual(json.loads(s.meta()["constraints"]), [{"metric": "mem_gb", "max": 5}])
        self.assertEqual([t["state"] for t in trials], ["completed"] * N)
        metrics = {t["id"]: json.loads(t["metrics"]) for t in trials}
        # each result journaled with the value its last report gave (null: never reported)
        self.assertEqual(len(results), N)
        for r in results:
            self.assertEqual(json.loads(r["constraints"]), [metrics[r["trial"]].get("mem_gb")])
        good = [t for t in trials if feasible(metrics[t["id"]])]
        bad = N - len(good)
        self.assertTrue(good and bad, "the toy gives feasible and infeasible trials")
        self.assertTrue(any("mem_gb" not in metrics[t["id"]] for t in trials),
                        "and one that never reported mem_gb")
        want = min(good, key=lambda t: t["value"])
        best_of_all = min(trials, key=lambda t: t["value"])
        print("%d feasible, %d infeasible; best feasible trial %d (loss %.4f), best of all %d"
              % (len(good), bad, want["id"], want["value"], best_of_all["id"]))

        p = self.tp("best", plain)
        self.assertExit(p, 0)
        self.assertIn("best trial %d: loss = " % want["id"], p.stdout)
        self.assertIn("%d infeasible trial%s left out" % (bad, "" if bad == 1 else "s"), p.stdout)
        p = self.tp("best", plain, "--json")
        self.assertExit(p, 0)
        b = json.loads(p.stdout)
        self.assertEqual((b["trial"], b["infeasible"]), (want["id"], bad))
        self.assertLessEqual(b["metrics"]["mem_gb"], 5)
        p = self.tp("best", plain, "--json", "--top", str(N))
        ranked = [t["trial"] for t in json.loads(p.stdout)]
        self.assertEqual(sorted(ranked), sorted(t["id"] for t in good))  # no infeasible one

        p = self.tp("status", plain)
        self.assertExit(p, 0)
        self.assertIn("(trial %d)" % want["id"], p.stdout)
        self.assertIn("infeasible  %d trial" % bad, p.stdout)
        st = json.loads(self.tp("status", plain, "--json").stdout)
        self.assertEqual((st["best"]["id"], st["infeasible"]), (want["id"], bad))
        # export (JSON and CSV) and trials --json carry each trial's constraint value and
        # whether it is feasible, the CSV's new columns at the end
        exported = {t["id"]: t for t in json.loads(self.tp("export", plain, "--format", "json")
                                                    .stdout)}
        listed = {t["id"]: t for t in json.loads(self.tp("trials", plain, "--json").stdout)}
        for t in trials:
            mem = metrics[t["id"]].get("mem_gb")
            want_cons = [{"metric": "mem_gb", "max": 5, "value": mem,
                          "violation": None if mem is None else max(0, mem - 5)}]
            for got in (exported[t["id"]], listed[t["id"]]):
                self.assertEqual(got["feasible"], feasible(metrics[t["id"]]), got)
                self.assertEqual(len(got["constraints"]), 1)
                self.assertEqual(got["constraints"][0].keys(), want_cons[0].keys())
                for k in ("metric", "max", "value"):
                    self.assertEqual(got["constraints"][0][k], want_cons[0][k])
                if mem is not None:
                    self.assertAlmostEqual(got["constraints"][0]["violation"], max(0, mem - 5))
                else:
                    self.assertIsNone(got["constraints"][0]["violation"])
        # the terminal's table: a feasible column after the state
        p = self.tp("trials", plain)
        self.assertExit(p, 0)
        lines = [l.split() for l in p.stdout.splitlines() if l.strip()]
        self.assertEqual(lines[0][:4], ["trial", "state", "feasible", "fails"])
        shown = {int(l[0]): l[2] for l in lines[1:] if l[0].isdigit()}
        self.assertEqual(shown, {t["id"]: "yes" if feasible(metrics[t["id"]]) else "no"
                                 for t in trials})
        p = self.tp("export", plain, "--format", "csv")
        self.assertExit(p, 0)
        header = p.stdout.splitlines()[0].split(",")
        self.assertEqual(header[-5:], ["metric.mem_gb", "retries", "promotions",
                                       "constraint.mem_gb", "feasible"])
        rows = list(csv.DictReader(io.StringIO(p.stdout)))
        self.assertEqual(len(rows), N)
        for row in rows:
            m = metrics[int(row["id"])]
            self.assertEqual(row["feasible"], "true" if feasible(m) else "false")
            self.assertEqual(row["constraint.mem_gb"], row["metric.mem_gb"])
            self.assertEqual(row["constraint.mem_gb"] != "", "mem_gb" in m)
            self.assertEqual((row["retries"], row["promotions"]), ("0", "0"))
        self.assertEqual(sum(r["feasible"] == "false" for r in rows), bad)
        # the run's own log names the same best
        self.assertEqual(self.tp("best", killed, "--json").stdout, self.tp("best", plain, "--json")
                         .stdout.replace(plain, killed))


if __name__ == "__main__":
    main()
