#!/usr/bin/env python3
"""Deadline runs end to end: `scheduler: hypersched` with `deadline:` learns each job's timing
from the attempt's start and its reports' arrival (journaled), refuses trials that can no
longer reach the incumbent's budget before the deadline (journaled with the figures, the
paused ones stopped with the reason), and a resumed run replays those decisions exactly.

The run's deadline clock is the test clock (TUNEPACK_TEST_CLOCK, src/run/clock.h): it moves
0.1 s each time a trial's report is stored, and not otherwise, so the runs' timings do not
depend on how fast or loaded the machine is: a `deadline: 6s` run reaches its deadline at its
60th report, and the trials' timings are counted in reports too. Where a case asserts exact
decisions it runs one slot, so the reports also arrive in one order. The trainers do not
sleep; the killed run is held (trials 6 and on wait for a gate file) until the test kills
it, so the kill happens whatever the speed."""

import os
import subprocess
import unittest
from unittest import mock

from helpers import E2E, PY, SRC, yaml_str

# value(epoch) = q * (1 - exp(-epoch / 3)); resumes from its checkpoint; one report per epoch.
# With a gate file (argv[3], "-": none), trials from HOLD_FROM on wait for it to exist before
# their first report.
HOLD_FROM = 6
TRAINER = r'''
import json, math, os, sys, time
x = float(sys.argv[1]); budget = int(float(sys.argv[2])); gate = sys.argv[3]
if gate != "-" and int(os.environ["TUNEPACK_TRIAL_ID"]) >= %d:
    while not os.path.exists(gate):
        time.sleep(0.05)
ck = os.path.join(os.environ["TUNEPACK_CHECKPOINT_DIR"], "ckpt")
start = int(open(ck).read()) if os.path.exists(ck) else 0
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
q = 1.0 - (x - 0.3) ** 2
if start >= budget:
    rep.write(json.dumps({"step": start, "score": round(q * (1 - math.exp(-start / 3.0)), 6)}) + "\n")
for epoch in range(start + 1, budget + 1):
    rep.write(json.dumps({"step": epoch, "score": round(q * (1 - math.exp(-epoch / 3.0)), 6)}) + "\n")
    with open(ck + ".tmp", "w") as f:
        f.write(str(epoch))
    os.rename(ck + ".tmp", ck)
''' % HOLD_FROM


def rows(run_dir, sql):
    return [tuple(r.values()) for r in E2E.poll_query(run_dir, sql)]


class DeadlineTest(E2E):
    def setUp(self):
        super().setUp()
        # every run of these tests (and its resumes) on the test clock: 0.1 s a report
        clock = mock.patch.dict(os.environ, {"TUNEPACK_TEST_CLOCK": "0.1"})
        clock.start()
        self.addCleanup(clock.stop)

    def exp(self, deadline="6s", trials=80, extra="", gate="-", concurrency=3):
        trainer = self.write("trainer.py", TRAINER)
        return self.experiment(
            "name: deadline\n"
            "command: [%s, %s, \"{x}\", \"{epochs}\", %s]\n"
            "metric: {name: score, mode: max}\n"
            "space:\n  x: {uniform: [0, 1]}\n"
            "search: {algorithm: random, trials: %d, seed: 5, scheduler: hypersched}\n"
            "budget: {name: epochs, min: 1, max: 9, eta: 3}\n"
            "deadline: %s\n"
            "concurrency: %d\nstop_grace: 1s\n%s"
            % (yaml_str(PY), yaml_str(trainer), yaml_str(gate), trials, deadline, concurrency, extra))

    def decisions(self, run_dir):
        return rows(run_dir, "SELECT kind, trial, rung, ok, detail FROM decisions ORDER BY seq")

    def test_hypersched_learns_timings_and_refuses_what_cannot_make_the_deadline(self):
        # One slot: the reports arrive in one order, so the decisions are the same on every
        # machine. With three, which trials the deadline finds waiting (refused) or running
        # (stopped) depends on how their reports interleave; CI once saw no waiting one refused.
        exp, run = self.exp(concurrency=1), self.path("run")
        r = self.run_exp(exp, run)
        self.assertExit(r, 0)
        journaled = self.decisions(run)
        d = [x for x in journaled if x[0] != "trials"]  # the search's size first
        kinds = [k for k, *_ in d]
        self.assertEqual(kinds[0], "deadline")
        self.assertIn("after the experiment's creation", d[0][4])
        timing = [x for x in d if x[0] == "timing"]
        self.assertTrue(timing, "every job ended ok is timed")
        self.assertIn('"units":1', timing[0][4].replace(".0", ""))
        refused = [x for x in d if x[0] == "refused"]
        self.assertTrue(refused, "80 trials of up to 9 reports cannot all run in 60 reports")
        self.assertTrue(all("the deadline is too near: " in x[4] for x in refused), refused)
        # once a job's timing is known, the why gives the figures
        self.assertTrue(any("the deadline is too near: needs" in x[4] and "s to the deadline" in x[4]
                            for x in refused), refused)
        # new trials are refused once, for good
        self.assertEqual(sum(1 for x in refused if x[1] == -1), 1)
        self.assertLess(len(rows(run, "SELECT id FROM trials")), 80)
        # refused paused trials end as stopped, saying why
        for _, trial, *_ in (x for x in refused if x[1] >= 0):
            state, decision = rows(run, "SELECT state, decision FROM trials WHERE id = %d" % trial)[0]
            self.assertEqual(state, "stopped")
            self.assertIn("the deadline is too near", decision)
        # the timeline shows the admitted and the refused with their figures, and counts them
        tl = subprocess.run([PY, os.path.join(SRC, "scripts", "timeline.py"), run],
                            capture_output=True, text=True, check=True).stdout
        self.assertRegex(tl.splitlines()[0], r"^%d trials admitted; %d refusals: %d waiting "
                         r"trials not promoted or continued, new trials closed at \+[\d.]+s; "
                         r"0 resizes$" % (len(rows(run, "SELECT id FROM trials")), len(refused),
                                          len(refused) - 1))
        self.assertRegex(tl, r"trial 0 admitted: new trial at rung 0")
        self.assertRegex(tl, r"refused: no new trials, the deadline is too near: needs \d+ s")
        self.assertRegex(tl, r"trial \d+ refused: not (promoted|continued), the deadline is too "
                         r"near: needs \d+ s")
        self.assertRegex(tl, r"attempt 1 ends: paused: .*\(last report: step 1, value [\d.]+\)")
        # replaying the finished journal repeats every decision
        again = self.run_exp(exp, run)
        self.assertExit(again, 0)
        self.assertNotIn("diverged", again.stderr)
        self.assertEqual(self.decisions(run), journaled)

    def test_under_a_surrogate_hypersched_still_refuses_and_names_the_surrogates(self):
        exp = self.exp(extra="surrogate: {param: width, value: 0.25, promote: 2, eager: 0.5}\n")
        run = self.path("run")
        r = self.run_exp(exp, run)
        self.assertExit(r, 0)
        d = self.decisions(run)
        self.assertTrue([x for x in d if x[0] == "timing"], "the surrogates' timings are told")
        refused = [x for x in d if x[0] == "refused"]
        self.assertEqual(sum(1 for x in refused if x[1] == -1), 1)
        # The trials the deadline ended: refused while waiting, or stopped while running (which
        # of the two depends on how the three slots' reports interleave; the deadline arrives
        # with a report, so a trial is running then). In the run's numbers: surrogate trials
        # (a refused one is stopped), or a target promoted from them.
        ended = [x for x in d if x[0] in ("refused", "deadline-stop") and x[1] >= 0]
        self.assertTrue(ended, d)
        kinds = []
        for what, trial, *_ in ended:
            kind, state = rows(run, "SELECT kind, state FROM trials WHERE id = %d" % trial)[0]
            kinds.append(kind)
            if what == "refused":
                self.assertEqual((kind, state), ("surrogate", "stopped"), trial)
        self.assertIn("surrogate", kinds)
        self.assertLessEqual(set(kinds), {"surrogate", "target"})
        again = self.run_exp(exp, run)
        self.assertExit(again, 0)
        self.assertNotIn("diverged", again.stderr)
        self.assertEqual(self.decisions(run), d)

    def test_a_killed_deadline_run_resumes_into_its_journaled_decisions(self):
        gate = self.path("gate")
        exp, run = self.exp(deadline="8s", gate=gate), self.path("killed")
        # trials 0-5 run, 6 on wait at the gate: the run holds until it is killed
        self.kill_after(exp, run, 12)
        before = self.decisions(run)
        kinds = [k for k, *_ in before]  # the deadline, and timings and results learned
        for kind in ("deadline", "timing", "result"):
            self.assertIn(kind, kinds)
        open(gate, "w").close()
        r = self.run_exp(exp, run)
        self.assertExit(r, 0)
        self.assertNotIn("diverged", r.stderr)
        after = self.decisions(run)
        self.assertEqual(after[:len(before)], before)
        self.assertEqual(sum(1 for x in after if x[0] == "deadline"), 1)


if __name__ == "__main__":
    unittest.main()
