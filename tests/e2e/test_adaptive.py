"""Adaptive search end to end: budgets and rungs (ASHA, Hyperband), early stopping (median),
the checkpoint contract (pause, resume from the checkpoint), and a SIGKILL in the middle of an
ASHA run that resumes into the same decisions as an uninterrupted run."""

import json
import os
import signal
import unittest

from helpers import E2E, PY, yaml_str, wait_for

# A trial with a learning curve: value(epoch) = q * (1 - exp(-epoch / 3)) where q depends on
# x. It resumes from $TUNEPACK_CHECKPOINT_DIR/ckpt (the epoch reached), trains to the budget,
# saves a checkpoint each epoch, and honours "pause" on $TUNEPACK_CONTROL_FD (unless told to
# ignore it: then, given a gate file, it waits for that file after epoch 4, as a trial busy
# past the grace period would). Every epoch it runs is appended to epochs.log in its trial dir.
TRAINER = r'''
import json, math, os, select, sys, time
x = float(sys.argv[1]); budget = int(float(sys.argv[2])); sleep = float(sys.argv[3])
ignore_pause = len(sys.argv) > 4 and sys.argv[4] == "ignore"
gate = sys.argv[5] if len(sys.argv) > 5 else None
ck = os.path.join(os.environ["TUNEPACK_CHECKPOINT_DIR"], "ckpt")
start = int(open(ck).read()) if os.path.exists(ck) else 0
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
ctl = int(os.environ.get("TUNEPACK_CONTROL_FD", "-1"))
q = 1.0 - (x - 0.3) ** 2
if start >= budget:  # the contract: already there (killed before its result was seen): say so again
    rep.write(json.dumps({"step": start, "score": round(q * (1 - math.exp(-start / 3.0)), 6)}) + "\n")
for epoch in range(start + 1, budget + 1):
    while gate and epoch > 4 and not os.path.exists(gate):
        time.sleep(0.01)
    time.sleep(sleep)
    v = q * (1 - math.exp(-epoch / 3.0))
    with open(os.path.join(os.environ["TUNEPACK_TRIAL_DIR"], "epochs.log"), "a") as f:
        f.write("%d\n" % epoch)
    rep.write(json.dumps({"step": epoch, "score": round(v, 6)}) + "\n")
    tmp = ck + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(epoch))
    os.rename(tmp, ck)
    if ctl >= 0 and not ignore_pause and select.select([ctl], [], [], 0)[0]:
        if b"pause" in os.read(ctl, 64):
            sys.exit(0)
'''


def tuples(rows):
    """Store.q gives dicts (column order kept); these tests compare tuples."""
    return [tuple(r.values()) for r in rows]


def count(run_dir, sql):
    rows = E2E.poll_query(run_dir, sql)
    return list(rows[0].values())[0] if rows else 0


class AdaptiveTest(E2E):
    def trainer(self):
        return self.write("trainer.py", TRAINER)

    def exp(self, scheduler, trials=12, budget="{name: epochs, min: 1, max: 9, eta: 3}",
            sleep=0.01, concurrency=2, extra="", algorithm="random", args=""):
        return self.experiment(
            "name: adaptive\n"
            "command: [%s, %s, \"{x}\", \"{epochs}\", \"%s\"%s]\n"
            "metric: {name: score, mode: max}\n"
            "space:\n  x: {uniform: [0, 1]}\n"
            "search: {algorithm: %s, trials: %d, seed: 7, scheduler: %s}\n"
            "budget: %s\n"
            "concurrency: %d\nstop_grace: 1s\n%s"
            % (yaml_str(PY), yaml_str(self.trainer()), sleep, args, algorithm, trials,
               scheduler, budget, concurrency, extra))

    def decisions(self, run_dir):
        with self.store(run_dir) as s:
            return tuples(s.q("SELECT kind, trial, rung, ok FROM decisions ORDER BY seq"))

    def test_asha_promotes_the_top_third_and_uses_fewer_epochs(self):
        d = self.path("run")
        p = self.run_exp(self.exp("asha", trials=12), d)
        self.assertExit(p, 0)
        with self.store(d) as s:
            rows = tuples(s.q("SELECT id, state, rung, budget, decision FROM trials ORDER BY id"))
            epochs = tuples(s.q("SELECT count(*) FROM metrics"))[0][0]
        self.assertEqual(len(rows), 12)
        states = {r[1] for r in rows}
        self.assertLessEqual(states, {"completed", "stopped"})
        at_max = [r for r in rows if r[3] == 9]
        self.assertGreaterEqual(len(at_max), 1, rows)
        self.assertLess(len(at_max), 12)
        # Rungs 1, 3, 9: promotions only to the top 1/3 of a rung.
        for r in rows:
            if r[1] == "stopped":
                self.assertIn("not promoted", r[4])
        promoted = [r for r in rows if r[2] >= 1]
        self.assertLessEqual(len(promoted), 12 // 3 + 1)
        # Far fewer epochs than 12 trials x 9.
        self.assertLess(epochs, 12 * 9 / 2)
        # Each epoch of a trial ran once: promotions resumed from the checkpoint.
        for r in rows:
            with open(os.path.join(d, "trials", "%06d" % r[0], "epochs.log")) as f:
                log = f.read().split()
            self.assertEqual(log, [str(e) for e in range(1, len(log) + 1)], r)
        out = self.tp("trials", d)
        self.assertIn("promoted", out.stdout)
        # Export: every trial reported, so every one carries its last metrics,
        # stopped ones included; scheduler decisions are decisions, not errors.
        exported = json.loads(self.tp("export", d, "--format", "json").stdout)
        self.assertEqual(len(exported), 12)
        for t in exported:
            self.assertIsNotNone(t["metrics"], t)
            self.assertEqual(t["metrics"]["score"], t["value"], t)
            self.assertIsNone(t["error"], t)
            self.assertTrue(t["decision"], t)

    def test_hyperband_runs_synchronous_brackets_to_the_end(self):
        d = self.path("run")
        p = self.run_exp(self.exp("hyperband", trials=0 or 30), d)
        self.assertExit(p, 0)
        with self.store(d) as s:
            rows = tuples(s.q("SELECT state, budget FROM trials"))
            kinds = tuples(s.q("SELECT count(*) FROM decisions WHERE kind = 'job'"))[0][0]
        self.assertTrue(any(b == 9 for _, b in rows))
        self.assertTrue(all(st in ("completed", "stopped") for st, _ in rows), rows)
        self.assertGreater(kinds, len(rows))  # some trials were promoted

    def test_median_rule_stops_clearly_worse_trials_early(self):
        d = self.path("run")
        exp = self.experiment(
            "name: median\n"
            "command: [%s, %s, \"{x}\", \"{epochs}\", \"0.005\"]\n"
            "metric: {name: score, mode: max}\n"
            "space:\n  x: {grid: [0.3, 0.3, 0.3, 0.3, 0.3, 0.32, 0.31, 0.29, 0.95, 1.0, 0.9]}\n"
            "search: {algorithm: grid, trials: 1, scheduler: median}\n"
            "budget: {name: epochs, min: 1, max: 12}\n"
            "concurrency: 1\n" % (yaml_str(PY), yaml_str(self.trainer())))
        p = self.run_exp(exp, d)
        self.assertExit(p, 0)
        with self.store(d) as s:
            rows = tuples(s.q("SELECT id, state, step, decision FROM trials ORDER BY id"))
        bad = [r for r in rows if r[0] >= 8]
        for r in bad:
            self.assertEqual(r[1], "stopped", rows)
            self.assertLess(r[2], 12)
            self.assertIn("median", r[3])
        for r in rows[:5]:
            self.assertEqual(r[1], "completed", rows)

    def test_stop_pauses_through_the_control_channel_and_resume_continues_from_the_checkpoint(self):
        d = self.path("run")
        exp = self.exp("fifo", trials=2, budget="{name: epochs, min: 1, max: 40}", sleep=0.05)
        p = self.start_run(exp, d)
        self.assertTrue(wait_for(lambda: count(d, "SELECT count(*) FROM metrics") >= 6, 30))
        stop = self.tp("stop", d)
        self.assertEqual(stop.returncode, 0, stop.stderr)
        p.wait(timeout=60)
        self.assertEqual(p.returncode, 6)
        with self.store(d) as s:
            states = [r["state"] for r in s.q("SELECT state FROM trials")]
        self.assertTrue(all(st == "pending" for st in states), states)
        r = self.run_exp(exp, d)
        self.assertExit(r, 0)
        for tid in (0, 1):
            with open(os.path.join(d, "trials", "%06d" % tid, "epochs.log")) as f:
                log = f.read().split()
            self.assertEqual(log, [str(e) for e in range(1, 41)])  # no epoch ran twice
        with self.store(d) as s:
            self.assertEqual(tuples(s.q("SELECT count(DISTINCT attempt) FROM metrics "
                                        "WHERE trial = 0"))[0][0], 2)

    def test_a_trial_ignoring_the_pause_is_stopped_and_resumed_from_its_last_checkpoint(self):
        d = self.path("run")
        gate = self.path("gate")
        exp = self.exp("fifo", trials=1, budget="{name: epochs, min: 1, max: 30}", sleep=0.01,
                       args=', "ignore", %s' % yaml_str(gate))
        p = self.start_run(exp, d)
        self.assertTrue(wait_for(lambda: count(d, "SELECT count(*) FROM metrics") >= 4, 30))
        self.tp("stop", d)
        # It ignores the pause and would go on only once the gate opens: the stop ends it
        # after the grace period, or the run would never end.
        p.wait(timeout=60)
        self.assertEqual(p.returncode, 6)
        with self.store(d) as s:
            self.assertEqual(tuples(s.q("SELECT state FROM trials")), [("pending",)])
            self.assertEqual(tuples(s.q("SELECT max(step) FROM metrics")), [(4,)])
        with open(gate, "w"):
            pass
        r = self.run_exp(exp, d)
        self.assertExit(r, 0)
        with open(os.path.join(d, "trials", "000000", "epochs.log")) as f:
            log = [int(e) for e in f.read().split()]
        # Resumed from its checkpoint at epoch 4: no epoch runs twice, none is skipped.
        self.assertEqual(log, list(range(1, 31)))

    def test_asha_killed_at_any_moment_resumes_into_the_same_decisions(self):
        plain = self.path("plain")
        exp = self.exp("asha", trials=9, concurrency=1, sleep=0.02)
        self.assertExit(self.run_exp(exp, plain), 0)
        want = self.decisions(plain)
        killed = self.path("killed")
        self.kill_at(exp, killed, [len(want) * k // 5 for k in (1, 2, 3, 4)])
        self.assertExit(self.run_exp(exp, killed), 0)
        self.assertEqual(self.decisions(killed), want)
        with self.store(plain) as a, self.store(killed) as b:
            qa = tuples(a.q("SELECT id, state, rung, round(value, 6) FROM trials ORDER BY id"))
            qb = tuples(b.q("SELECT id, state, rung, round(value, 6) FROM trials ORDER BY id"))
        self.assertEqual(qb, qa)

    def params(self, run_dir):
        with self.store(run_dir) as s:
            return tuples(s.q("SELECT id, params FROM trials ORDER BY id"))

    def test_tpe_asha_killed_at_concurrency_2_proposes_what_its_journal_order_implies(self):
        # Resume is exact: each resumed run replays the journal (a new trial's configuration
        # included) without a divergence, and one more resume of the finished journal replays
        # every proposal it holds; and while the results come in the unbroken run's order, the
        # proposals are the unbroken run's.
        exp = self.exp("asha", trials=16, concurrency=2, sleep=0.02, algorithm="tpe")
        plain = self.path("plain")
        self.assertExit(self.run_exp(exp, plain), 0)
        total = len(self.decisions(plain))
        for k in (1, 2, 3, 4, 5):
            killed = self.path("killed-%d" % k)
            self.kill_after(exp, killed, total * k // 6)
            for _ in range(2):  # resume, then replay the finished journal once more
                q = self.run_exp(exp, killed)
                self.assertExit(q, 0)
                self.assertNotIn("diverged", q.stderr)
            # Up to the first decision where the order differs from the unbroken run's (a
            # rerun job may end later than it did there), every new trial is the same.
            got, want = self.decisions(killed), self.decisions(plain)
            same = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                        min(len(got), len(want)))
            new = sorted(t for kind, t, rung, _ in got[:same] if kind == "job" and rung == 0)
            self.assertEqual([x for x in self.params(killed) if x[0] in new],
                             [x for x in self.params(plain) if x[0] in new])


if __name__ == "__main__":
    unittest.main()
