#!/usr/bin/env python3
"""search: {algorithm: bohb} end to end: it runs to the end in asha's rungs when no scheduler is
named (at concurrency 4) and in hyperband's brackets when named, a run SIGKILLed at several
points resumes into the same trials and decisions (at concurrency 2: into its journaled state,
every trial ended), and without a budget it is refused saying what it needs."""

import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, PY, main, yaml_str

# loss falls with the epochs; its floor is (x - 0.3)^2 + (y - 0.6)^2
TRIAL = r'''
import json, os, sys
x, y, epochs = float(sys.argv[1]), float(sys.argv[2]), int(float(sys.argv[3]))
fd = int(os.environ["TUNEPACK_REPORT_FD"])
for s in range(1, epochs + 1):
    loss = (x - 0.3) ** 2 + (y - 0.6) ** 2 + 1.0 / s
    os.write(fd, (json.dumps({"step": s, "loss": loss}) + "\n").encode())
'''

N = 24  # hyperband (1, 9, 3): brackets of 9, 5 and 3 configurations, then 9 again (cut at 7)


class BohbTest(E2E):
    ALGO = "bohb"  # test_dehb.py runs these tests again with dehb

    def exp(self, concurrency, scheduler=None, budget=True, name="exp.yaml"):
        script = self.write("trial.py", TRIAL)
        sched = ", scheduler: %s" % scheduler if scheduler else ""
        return self.experiment(
            "name: %s\n"
            "command: [%s, %s, \"{x}\", \"{y}\", \"{epochs}\"]\n"
            "metric: {name: loss, mode: min}\n"
            "space:\n"
            "  x: {uniform: [0, 1]}\n"
            "  y: {uniform: [0, 1]}\n"
            "search: {algorithm: %s, trials: %d, seed: 5%s}\n"
            "%s"
            "concurrency: %d\n"
            % (self.ALGO, yaml_str(PY), yaml_str(script), self.ALGO, N, sched,
               "budget: {name: epochs, min: 1, max: 9, eta: 3}\n" if budget else "",
               concurrency), name=name)

    def decisions(self, run_dir):
        with self.store(run_dir) as s:
            return [tuple(r.values()) for r in
                    s.q("SELECT kind, trial, rung, ok, value FROM decisions ORDER BY seq")]

    def trials(self, run_dir):
        with self.store(run_dir) as s:
            return [(t["id"], t["params"], t["state"]) for t in s.trials()]

    def whys(self, run_dir):
        with self.store(run_dir) as s:
            return [r["detail"] or "" for r in s.q("SELECT detail FROM decisions WHERE kind = 'job'")]

    def test_runs_in_asha_rungs_by_default_at_concurrency_4_and_in_hyperband_brackets(self):
        for sched, conc in ((None, 4), ("hyperband", 2)):
            with self.subTest(scheduler=sched):
                run_dir = self.path("run-%s" % sched)
                self.assertExit(self.run_exp(self.exp(conc, sched, name="%s.yaml" % sched),
                                             run_dir), 0)
                ts = self.trials(run_dir)
                self.assertEqual([t[0] for t in ts], list(range(N)))
                self.assertEqual([t for t in ts if t[2] not in ("completed", "stopped")], [])
                whys = self.whys(run_dir)
                if sched is None:  # asha's rungs
                    self.assertTrue(any(w.startswith("promoted to rung") for w in whys), whys)
                    self.assertFalse(any("bracket" in w for w in whys), whys[:3])
                else:
                    self.assertTrue(any("bracket s=2" in w for w in whys), whys[:3])

    def test_killed_at_any_moment_resumes_into_the_same_trials(self):
        plain, killed = self.assert_kills_resume_the_same(self.exp(1), self.decisions)
        self.assertEqual(self.trials(killed), self.trials(plain))

    def test_killed_at_concurrency_2_replays_its_journal_and_ends_every_trial(self):
        # Two jobs at once: results come back in the order the machine makes, so the decisions
        # are not a plain run's; what must hold is that each resume replays the journaled asks
        # and results into the same sampler state (no "diverged") and every trial ends.
        exp = self.exp(2, name="c2.yaml")
        plain, killed = self.path("plain2"), self.path("killed2")
        self.assertExit(self.run_exp(exp, plain), 0)
        n = len(self.decisions(plain))
        self.kill_at(exp, killed, [n * k // 4 for k in range(1, 4)])
        q = self.run_exp(exp, killed)
        self.assertExit(q, 0)
        self.assertNotIn("diverged", q.stderr)
        ts = self.trials(killed)
        self.assertEqual([t[0] for t in ts], list(range(N)))
        self.assertEqual([t for t in ts if t[2] not in ("completed", "stopped")], [])

    def test_without_a_budget_it_is_refused_saying_what_it_needs(self):
        r = self.run_exp(self.exp(1, budget=False), self.path("none"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(self.ALGO, r.stderr)
        self.assertIn("needs a budget", r.stderr)
        r = self.run_exp(self.exp(1, scheduler="fifo", name="fifo.yaml"), self.path("fifo"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("needs a scheduler with rungs", r.stderr)


if __name__ == "__main__":
    main()
