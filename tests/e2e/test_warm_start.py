#!/usr/bin/env python3
"""Warm starts and enqueued configurations: earlier experiments' completed trials become prior
observations (journaled as such, never run again); `enqueue` runs given configurations first,
checked against the space with file:line:col."""

import json
import os
import signal
import sys
import time

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, PY, main, wait_for, yaml_str

# loss = (x - 0.3)^2 (+ 0.1 for opt b)
TRIAL = (
    "import json, os, sys\n"
    "a = dict(s.split('=', 1) for s in sys.argv[1:])\n"
    "loss = (float(a.get('x', 0.5)) - 0.3) ** 2 + (0.1 if a.get('opt') == 'b' else 0)\n"
    "os.write(int(os.environ['TUNEPACK_REPORT_FD']), (json.dumps({'loss': loss}) + '\\n').encode())\n"
)


class WarmStart(E2E):

    def setUp(self):
        super().setUp()
        self.trial = self.write("trial.py", TRIAL)

    def exp(self, space, search, name="exp.yaml", extra="", metric="loss"):
        args = ", ".join('"%s={%s}"' % (p, p) for p in ("x", "opt", "z") if p + ":" in space)
        return self.experiment(
            "name: ws\n"
            "command: [%s, %s, %s]\n"
            "metric: {name: %s, mode: min}\n"
            "space:\n%s"
            "search: %s\n%s" % (PY, yaml_str(self.trial), args, metric, space, search, extra),
            name=name)

    SPACE = "  x: {uniform: [0.0, 1.0]}\n  opt: {choice: [a, b]}\n"

    def earlier(self, trials=12):
        run_dir = self.path("first")
        exp = self.exp(self.SPACE, "{algorithm: random, trials: %d, seed: 1}" % trials,
                       name="first.yaml")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        return run_dir

    def test_completed_trials_are_journaled_priors_and_never_rerun(self):
        first = self.earlier()
        with self.store(first) as s:
            earlier = {t["id"]: t for t in s.trials()}
        run_dir = self.path("second")
        exp = self.exp(self.SPACE, "{algorithm: tpe, trials: 4, seed: 1, warm_start: [%s]}"
                       % yaml_str(first))
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        self.assertIn("warm start: 12 completed trials of %s as prior observations" % first,
                      r.stderr + r.stdout)
        with self.store(run_dir) as s:
            priors = s.q("SELECT * FROM priors ORDER BY seq")
            trials = s.trials()
        self.assertEqual(len(trials), 4)  # only the new ones run
        self.assertEqual(len(priors), 12)
        for p in priors:
            t = earlier[p["source_trial"]]
            self.assertEqual(p["source"], first)
            self.assertEqual(json.loads(p["params"]), t["params"])
            self.assertEqual(p["value"], t["value"])
        # with 12 priors TPE is past its 10 startup trials at trial 0: it does not draw
        # what the cold search draws
        cold = self.path("cold")
        self.assertExit(self.run_exp(self.exp(self.SPACE, "{algorithm: tpe, trials: 4, seed: 1}",
                                              name="cold.yaml"), cold), 0)
        with self.store(cold) as s:
            cold_trials = s.trials()
        self.assertNotEqual(trials[0]["params"], cold_trials[0]["params"])

    def test_an_overlapping_space_takes_the_shared_parameters(self):
        first = self.earlier(trials=5)
        run_dir = self.path("second")
        space = "  x: {uniform: [0.0, 0.5]}\n  z: {int: [1, 3]}\n"
        exp = self.exp(space, "{algorithm: tpe, trials: 2, warm_start: [%s]}" % yaml_str(first))
        self.assertExit(self.run_exp(exp, run_dir), 0)
        with self.store(first) as s:
            inside = [t for t in s.trials() if t["params"]["x"] <= 0.5]
        with self.store(run_dir) as s:
            priors = s.q("SELECT params FROM priors")
        # opt is no parameter here; x outside [0, 0.5] is not a value this space takes
        self.assertEqual(len(priors), len(inside))
        for p in priors:
            self.assertEqual(set(json.loads(p["params"])), {"x"})

    def test_bad_sources_are_refused_before_any_store(self):
        first = self.earlier(trials=2)
        exp = self.exp(self.SPACE, "{algorithm: tpe, warm_start: [%s]}" % yaml_str(self.path("none")))
        r = self.run_exp(exp, self.path("a"))
        self.assertExit(r, 3)
        self.assertIn("warm_start: no experiment in %s" % self.path("none"), r.stderr)
        exp = self.exp(self.SPACE, "{algorithm: tpe, warm_start: [%s]}" % yaml_str(first),
                       metric="acc", name="acc.yaml")
        r = self.run_exp(exp, self.path("b"))
        self.assertExit(r, 3)
        self.assertIn('did not optimize "acc"', r.stderr)
        exp = self.exp(self.SPACE, "{algorithm: random, warm_start: [%s]}" % yaml_str(first),
                       name="rnd.yaml")
        r = self.run_exp(exp, self.path("c"))
        self.assertExit(r, 3)
        self.assertIn("rnd.yaml:7:41: warm_start feeds earlier results to a sampler that "
                      "learns", r.stderr)

    def test_enqueued_configurations_run_first(self):
        exp = self.exp(self.SPACE, "{algorithm: tpe, trials: 4, seed: 2}",
                       extra="enqueue:\n  - {x: 0.25, opt: b}\n  - {x: 0.75}\n")
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        with self.store(run_dir) as s:
            trials = s.trials()
        self.assertEqual(len(trials), 4)
        self.assertEqual(trials[0]["params"], {"x": 0.25, "opt": "b"})
        self.assertEqual(trials[1]["params"]["x"], 0.75)
        self.assertIn(trials[1]["params"]["opt"], ("a", "b"))  # left to the sampler

    def test_enqueue_errors_say_what_and_where(self):
        cases = [
            ("  - {x: 0.25, optt: b}\n", 10, 15, '"optt" is no parameter of space; did you mean '
                                                '"opt"?'),
            ("  - {x: 1.5}\n", 10, 9, 'enqueued x = "1.5" is outside its domain'),
            ("  - {x: 0.1, m: 0.5}\n", 10, 14, 'enqueued "m" is inactive here: it needs opt = b'),
        ]
        space = self.SPACE + "  m: {uniform: [0.0, 1.0], when: {opt: b}}\n"
        for entry, line, col, needle in cases:
            exp = self.exp(space, "{algorithm: random, trials: 3}", name="bad.yaml",
                           extra="enqueue:\n" + entry)
            r = self.run_exp(exp, self.path("run"))
            self.assertExit(r, 3)
            self.assertIn("bad.yaml:%d:%d: " % (line, col), r.stderr)
            self.assertIn(needle, r.stderr)


# Two objectives, slow enough to be killed in the middle.
TRIAL_MO = (
    "import json, os, sys, time\n"
    "x, z = float(sys.argv[1]), float(sys.argv[2])\n"
    "time.sleep(float(os.environ.get('SLOW', '0')))\n"
    "rec = {'err': (x - 0.3) ** 2 + z, 'cost': (1 - x) ** 2 + z}\n"
    "os.write(int(os.environ['TUNEPACK_REPORT_FD']), (json.dumps(rec) + '\\n').encode())\n"
)


class ResumeSeveral(E2E):

    def exp(self, name, search, slow="0"):
        trial = self.write("trial_mo.py", TRIAL_MO)
        return self.experiment(
            "name: %s\n"
            "command: [%s, %s, \"{x}\", \"{z}\"]\n"
            "metric: [{name: err, mode: min}, {name: cost, mode: min}]\n"
            "space:\n  x: {uniform: [0.0, 1.0]}\n  z: {uniform: [0.0, 0.2]}\n"
            "search: %s\n"
            "env: {SLOW: \"%s\"}\n" % (name, PY, yaml_str(trial), search, slow),
            name=name + ".yaml")

    def test_killed_warm_started_multi_objective_tpe_resumes_the_same_search(self):
        first = self.path("first")
        self.assertExit(self.run_exp(self.exp("first", "{algorithm: random, trials: 12, "
                                                        "seed: 5}"), first), 0)
        search = "{algorithm: tpe, trials: 14, seed: 3, warm_start: [%s]}" % yaml_str(first)
        ref = self.path("ref")
        self.assertExit(self.run_exp(self.exp("ref", search), ref), 0)
        run_dir = self.path("run")
        exp = self.exp("run", search, slow="0.3")
        p = self.start_run(exp, run_dir)
        done = lambda: len(self.poll_query(run_dir, "SELECT id FROM trials WHERE state = "
                                                    "'completed'") or []) >= 5
        self.assertTrue(wait_for(lambda: done() or p.poll() is not None, 60))
        self.assertIsNone(p.poll(), "the run ended before it could be killed")
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        self.assertNotIn("diverged", r.stderr)
        with self.store(ref) as s:
            want = [t["params"] for t in s.trials()]
        with self.store(run_dir) as s:
            got = [t["params"] for t in s.trials()]
            self.assertEqual(s.q("SELECT count(*) AS n FROM priors")[0]["n"], 12)
        # the priors and every result's two values were replayed: the same 14 configurations
        self.assertEqual(got, want)


if __name__ == "__main__":
    main()
