"""Everyday use (issue 15): changing a started experiment, progress under ASHA that shows every
trial's end and agrees between `best` and `status`, failures in plain sight, fail-fast, the dry
run, honest accounting and the output options."""

import json
import os

from helpers import E2E, PY, main, wait_for, yaml_str

QUICK = """name: everyday
command: [%s, -c, "import json,os; os.write(int(os.environ['TUNEPACK_REPORT_FD']), (json.dumps({'acc': {x}})+'\\\\n').encode())"]
metric: {name: acc, mode: max}
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, trials: 2, seed: 1}
concurrency: 1
""" % yaml_str(PY)

FAIL = """name: failing
command: [%s, -c, "import sys; print('loading'); raise ValueError('bad value %%s' %% sys.argv[1])", "{x}"]
metric: {name: acc, mode: max}
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, trials: 6, seed: 1}
""" % yaml_str(PY)

ASHA = """name: asha
command: [%s, -c, "import json,os,sys; fd=int(os.environ['TUNEPACK_REPORT_FD']); e=int(float(sys.argv[2])); [os.write(fd, (json.dumps({'step': s, 'acc': float(sys.argv[1]) * s / 9})+'\\\\n').encode()) for s in range(1, e + 1)]", "{x}", "{epochs}"]
metric: {name: acc, mode: max}
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, trials: 9, seed: 2, scheduler: asha}
budget: {name: epochs, min: 1, max: 9, eta: 3}
concurrency: 1
""" % yaml_str(PY)


class Everyday(E2E):
    def test_allowed_changes_are_taken_and_journaled_meaning_changes_refused(self):
        run_dir = self.path("run")
        exp = self.experiment(QUICK)
        self.assertExit(self.run_exp(exp, run_dir), 0)
        # A comment and a new layout change nothing.
        self.experiment("# tuned on Monday\n" + QUICK.replace("concurrency: 1", "concurrency:   1"))
        self.assertExit(self.run_exp(exp, run_dir), 0)
        # More trials and concurrency: taken, journaled, run.
        self.experiment(QUICK.replace("trials: 2", "trials: 4").replace("concurrency: 1",
                                                                        "concurrency: 2"))
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        self.assertIn("search.trials: 2 -> 4", r.stderr)
        with self.store(run_dir) as s:
            self.assertEqual([t["state"] for t in s.trials()], ["completed"] * 4)
            changes = [e["detail"] for e in s.events(kind="experiment-changed")]
        self.assertEqual(len(changes), 1)
        self.assertIn("concurrency: 1 -> 2", changes[0])
        # The space: refused with what changed, nothing touched.
        self.experiment(QUICK.replace("trials: 2", "trials: 4").replace("[0, 1]", "[0, 2]"))
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 4)
        self.assertIn('space: {"x":{"uniform":[0,1]}} -> {"x":{"uniform":[0,2]}}', r.stderr)
        self.assertIn("--dir", r.stderr)
        self.assertIn("--fork %s --dir DIR" % run_dir, r.stderr)
        # --fork: a new experiment seeded with the old results the new space holds.
        forked = self.path("forked")
        self.experiment(QUICK.replace("trials: 2", "trials: 3").replace("[0, 1]", "[0.2, 2]"))
        r = self.run_exp(exp, forked, "--fork", run_dir)
        self.assertExit(r, 0)
        self.assertIn("warm start:", r.stderr)  # the sampler takes them as prior observations
        with self.store(run_dir) as s:
            inside = sorted(t["value"] for t in s.trials() if t["params"]["x"] >= 0.2)
        with self.store(forked) as s:
            trials = s.trials()
            self.assertEqual(s.meta()["forked_from"], run_dir)
        seeded = [t for t in trials if t["id"] < 0]
        self.assertEqual(sorted(t["value"] for t in seeded), inside)
        self.assertEqual(sorted(t["id"] for t in trials if t["id"] >= 0), [0, 1, 2])
        self.assertTrue(all(t["attempts"] == 0 and "forked from" in t["decision"] for t in seeded))
        best = json.loads(self.tp("best", forked, "--json").stdout)
        status = json.loads(self.tp("status", forked, "--json").stdout)
        self.assertEqual(best["trial"], status["best"]["id"])
        self.assertEqual(best["value"], max(t["value"] for t in trials))
        self.assertIn("(trial %d" % best["trial"], r.stdout)  # the run's own summary agrees
        self.assertExit(self.run_exp(exp, forked, "--fork", run_dir), 0)  # resumes, no reseed
        with self.store(forked) as s:
            self.assertEqual(len(s.trials()), len(trials))
        # A fork into a directory that holds another experiment, or across metrics: refused.
        self.assertExit(self.run_exp(exp, run_dir, "--fork", forked), 4)
        self.experiment(QUICK.replace("mode: max", "mode: min"))
        self.assertExit(self.run_exp(exp, self.path("other"), "--fork", run_dir), 4)

    def test_asha_logs_every_end_and_best_agrees_with_status(self):
        run_dir = self.path("run")
        r = self.run_exp(self.experiment(ASHA), run_dir)
        self.assertExit(r, 0)
        self.assertIn("paused at rung 0, budget 1", r.stdout)
        self.assertIn("stopped early (rung 0, budget 1)", r.stdout)
        self.assertIn("so far the best acc", r.stdout)
        ended = [l for l in r.stdout.splitlines() if l.startswith("[")]
        with self.store(run_dir) as s:
            trials = s.trials()
        self.assertGreaterEqual(len(ended), len(trials))  # a line for each end, pauses too
        best = json.loads(self.tp("best", run_dir, "--json").stdout)
        self.assertEqual(best["state"], "completed")
        self.assertEqual(best["budget"], 9)
        status = json.loads(self.tp("status", run_dir, "--json").stdout)
        self.assertEqual(status["best"]["id"], best["trial"])
        self.assertEqual(status["counts"]["completed"] + status["counts"]["stopped"], len(trials))
        top = json.loads(self.tp("best", run_dir, "--top", "3", "--json").stdout)
        self.assertEqual([t["trial"] for t in top][0], best["trial"])
        self.assertEqual(len(top), 3)
        self.assertIn("budget", self.tp("best", "--help").stdout)

    def test_a_promoted_trial_stays_the_best_while_its_next_rung_runs(self):
        # Rung 0 (1 epoch) for 3 trials, the best promoted to 3 epochs, where it waits for a
        # file the test writes once it has looked.
        marker = self.path("go")
        trial = self.write("trial.py", "import json, os, sys, time\n"
                           "x, e = float(sys.argv[1]), int(float(sys.argv[2]))\n"
                           "while e > 1 and not os.path.exists(%r):\n"
                           "    time.sleep(0.05)\n"
                           "os.write(int(os.environ['TUNEPACK_REPORT_FD']),\n"
                           "         (json.dumps({'step': e, 'acc': x * e}) + '\\n').encode())\n"
                           % marker)
        exp = self.experiment(
            "name: promote\ncommand: [%s, %s, \"{x}\", \"{epochs}\"]\n"
            "metric: {name: acc, mode: max}\nspace:\n  x: {uniform: [0, 1]}\n"
            "search: {algorithm: random, trials: 3, seed: 2, scheduler: asha}\n"
            "budget: {name: epochs, min: 1, max: 3, eta: 3}\n" % (yaml_str(PY), yaml_str(trial)))
        run_dir = self.path("run")
        p = self.start_run(exp, run_dir)

        def promoted():
            rows = self.poll_query(run_dir, "SELECT id FROM trials WHERE state = 'running' "
                                            "AND rung = 1")
            return rows
        rows = wait_for(promoted, 60)
        self.assertTrue(rows, "no trial was promoted")
        best = json.loads(self.tp("best", run_dir, "--json").stdout)
        status = json.loads(self.tp("status", run_dir, "--json").stdout)
        self.assertEqual(best["trial"], rows[0]["id"])
        self.assertEqual((best["rung"], best["budget"], best["state"]), (0, 1, "running"))
        self.assertEqual(status["best"]["id"], best["trial"])
        with open(marker, "w"):
            pass
        self.assertEqual(p.wait(timeout=60), 0)
        best = json.loads(self.tp("best", run_dir, "--json").stdout)
        self.assertEqual((best["trial"], best["rung"], best["state"]), (rows[0]["id"], 1,
                                                                         "completed"))

    def test_failures_show_stderr_tail_and_fail_fast_stops(self):
        run_dir = self.path("run")
        r = self.run_exp(self.experiment(FAIL), run_dir)
        self.assertExit(r, 5)
        self.assertIn("fail-fast: the first 3 trials all failed the same way", r.stderr)
        self.assertIn("ValueError: bad value", r.stdout)
        with self.store(run_dir) as s:
            self.assertEqual(len(s.trials()), 3)
        out = self.tp("trials", run_dir).stdout
        self.assertIn("logs: %s/trials/000000/stderr.log" % run_dir, out)
        self.assertIn("| ValueError: bad value", out)
        rows = json.loads(self.tp("trials", run_dir, "--json").stdout)
        self.assertIn("ValueError", rows[0]["stderr_tail"])
        csv = self.tp("export", run_dir, "--format", "csv").stdout
        self.assertIn("stderr_tail", csv.splitlines()[0])
        # fail_fast: false runs them all.
        r = self.run_exp(self.experiment(FAIL.replace("failing", "failing2") +
                                         "fail_fast: false\n"), self.path("run2"))
        self.assertExit(r, 5)
        with self.store(self.path("run2")) as s:
            self.assertEqual(len(s.trials()), 6)

    def test_dry_run_reports_every_mistake_checks_the_program_and_shows_argv(self):
        bad = self.experiment("name: two words\ncommand: [x]\nmetric: {name: acc, mode: maximum}\n"
                              "space:\n  lr: {uniform: [1.0, 0.1]}\n"
                              "search: {algorithm: random, trials: -4}\n", name="bad.yaml")
        r = self.tp("run", bad, "--dry-run")
        self.assertExit(r, 3)
        for where in ("bad.yaml:1:7:", "bad.yaml:3:27:", "bad.yaml:5:17:", "bad.yaml:6:37:"):
            self.assertIn(where, r.stderr)
        missing = self.experiment(QUICK.replace(yaml_str(PY), "./trian.py"), name="m.yaml")
        r = self.run_exp(missing, self.path("run"))
        self.assertExit(r, 3)
        self.assertIn('m.yaml:2:11: the program "./trian.py" does not exist', r.stderr)
        self.assertFalse(os.path.exists(self.path("run", "trials")))
        r = self.tp("run", self.experiment(QUICK), "--dry-run", "--show", "2")
        self.assertExit(r, 0)
        self.assertIn("trial 1: x=", r.stdout)
        self.assertIn("import json,os", r.stdout)

    def test_a_reader_that_goes_away_does_not_kill_the_run(self):
        # `tunepack run ... | head -1`: the pipe closes after the first line.
        run_dir = self.path("run")
        p = self.start_run(self.experiment(QUICK.replace("trials: 2", "trials: 4")), run_dir)
        p.stdout.readline()
        p.stdout.close()
        self.assertEqual(p.wait(timeout=60), 0, p.stderr.read())
        with self.store(run_dir) as s:
            self.assertEqual(s.meta()["state"], "finished")
            self.assertEqual([t["state"] for t in s.trials()], ["completed"] * 4)

    def test_trials_sort_and_status_after_a_run(self):
        run_dir = self.path("run")
        self.assertExit(self.run_exp(self.experiment(QUICK.replace("trials: 2", "trials: 4")),
                                     run_dir), 0)
        rows = json.loads(self.tp("trials", run_dir, "--json", "--sort", "value").stdout)
        values = [t["value"] for t in rows]
        self.assertEqual(values, sorted(values, reverse=True))
        self.assertTrue(all(t["where"] for t in rows))
        self.assertTrue(all(t["interrupted"] == 0 for t in rows))
        r = self.tp("trials", run_dir, "--sort", "nothing")
        self.assertExit(r, 2)


if __name__ == "__main__":
    main()
