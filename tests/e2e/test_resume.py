#!/usr/bin/env python3
"""Resume: a SIGKILLed orchestrator or agent loses no trial and repeats none."""

import json
import os
import shlex
import signal
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, main, token_pids, wait_for, yaml_str

N = 24
SPACE = ("space:\n"
         "  x: {uniform: [0, 1]}\n"
         "  k: {choice: [a, b, c]}\n"
         "  n: {int: [1, 50]}\n"
         "search: {algorithm: random, trials: %d, seed: 42}\n" % N)


class Resume(E2E):

    def slow_exp(self, name="exp.yaml", sleep="0.5", gate=None):
        # Every execution appends a line to $TUNEPACK_TRIAL_DIR/runs, so re-runs show. With a
        # gate (a path), every trial waits for that file to exist instead of sleeping.
        wait = "sleep %s\n" % sleep if gate is None else \
            "while [ ! -e %s ]; do sleep 0.05; done\n" % shlex.quote(gate)
        script = self.write("trial.sh",
                            "echo \"$TUNEPACK_ATTEMPT\" >> \"$TUNEPACK_TRIAL_DIR/runs\"\n" +
                            wait +
                            "echo \"{\\\"acc\\\": $1}\" >&3\n")
        return self.experiment(
            "name: resume\n"
            "command: [sh, %s, \"{x}\", \"{k}\", \"{n}\"]\n"
            "metric: {name: acc, mode: max}\n%s"
            "concurrency: 3\n" % (yaml_str(script), SPACE), name=name)

    def reference_params(self):
        """The configurations of an uninterrupted run with the same seed, elsewhere."""
        exp = self.experiment(
            "name: resume-ref\n"
            "command: [sh, -c, 'echo \"{{\\\"acc\\\": $0}}\" >&3', \"{x}\"]\n"
            "metric: {name: acc, mode: max}\n%s"
            "concurrency: 3\n" % SPACE, name="ref.yaml")
        ref_dir = self.path("ref")
        self.assertExit(self.run_exp(exp, ref_dir), 0)
        with self.store(ref_dir) as s:
            trials = s.trials()
        self.assertEqual([t["id"] for t in trials], list(range(N)))
        return {t["id"]: t["params"] for t in trials}

    def completed_snapshot(self, run_dir):
        # A kill may come before the store has its schema: then nothing has completed.
        rows = self.poll_query(run_dir, "SELECT * FROM trials WHERE state = 'completed'")
        return {t["id"]: (t["value"], t["attempts"], json.loads(t["params"]))
                for t in rows or []}

    def test_resume_after_kill_loses_no_trial(self):
        ref = self.reference_params()
        exp = self.slow_exp()
        run_dir = self.path("run")
        kept = {}
        runs_when_completed = {}  # trial -> lines in its runs file when first seen completed
        # Kill points are the run's own events (counted across the runs): once the first
        # attempt started, once 2 trials completed, once half of them did.
        for kind, n in (("running", 1), ("completed", 2), ("completed", N // 2)):
            p = self.start_run(exp, run_dir)

            def reached():
                rows = self.poll_query(run_dir, "SELECT count(*) AS n FROM events WHERE "
                                                "kind = ?", kind)
                return p.poll() is not None or (rows and rows[0]["n"] >= n)
            wait_for(reached, 60)
            self.assertIsNone(p.poll(), "the run ended before %d %s events: never killed"
                              % (n, kind))
            self.assertEqual(self.lock_pid(run_dir), p.pid, "DIR/lock should name the "
                             "orchestrator")
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
            # Everything completed so far must survive the rerun untouched.
            snap = self.completed_snapshot(run_dir)
            for tid, row in kept.items():
                self.assertEqual(snap.get(tid), row, "trial %d changed after a kill" % tid)
            for tid in snap:
                if tid not in runs_when_completed:
                    with open(os.path.join(run_dir, "trials", "%06d" % tid, "runs")) as f:
                        runs_when_completed[tid] = len(f.read().split())
            kept = snap
            token = self.token_of(run_dir)
            if token:
                # The agent sees its input close and stops every trial.
                wait_for(lambda: token_pids(token) == [], 20)
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        self.assertGreater(len(kept), 0, "no trial completed before the kills; slow down")
        self.assertLess(len(kept), N, "every trial completed before the last kill")
        with self.store(run_dir) as s:
            trials = s.trials()
            self.assertEqual(s.meta()["state"], "finished")
            ids = [t["id"] for t in trials]
            self.assertEqual(ids, list(range(N)), "each trial exactly once")
            token = s.meta()["token"]
            for t in trials:
                self.assertEqual(t["state"], "completed", t)
                self.assertEqual(t["params"], ref[t["id"]],
                                 "trial %d has other params than the same seed gives"
                                 % t["id"])
                self.assertEqual(t["value"], t["params"]["x"])
            for tid, (value, attempts, params) in kept.items():
                t = trials[tid]
                # Completed before a kill: kept as it was, never executed again. (An
                # attempt interrupted by an earlier kill counts, so attempts may be > 1.)
                self.assertEqual(t["value"], value)
                self.assertEqual(t["attempts"], attempts)
                # Each attempt that got as far as starting the trial wrote one line (one killed
                # before its process began wrote none), and none ran after it completed.
                with open(os.path.join(run_dir, "trials", "%06d" % tid, "runs")) as f:
                    runs = len(f.read().split())
                self.assertLessEqual(runs, attempts, "trial %d ran again after it had completed"
                                     % tid)
                self.assertEqual(runs, runs_when_completed[tid],
                                 "trial %d ran again after it had completed" % tid)
            # Trials that were never interrupted ran exactly once.
            for t in trials:
                if not s.events(t["id"], "interrupted-as-pending") and not any(
                        e["detail"] == "interrupted" for e in s.events(t["id"])):
                    self.assertEqual(t["attempts"], 1, t)
            # One completed event per trial, whatever happened.
            for t in trials:
                self.assertEqual(len(s.events(t["id"], "completed")), 1)
        self.assertEqual(token_pids(token), [])

    def runs_of(self, run_dir, trial):
        """The attempts trial's executions wrote to its runs file, in order."""
        try:
            with open(os.path.join(run_dir, "trials", "%06d" % trial, "runs")) as f:
                return f.read().split()
        except OSError:
            return []

    def test_killed_agent_is_restarted_and_interrupted_trials_run_again(self):
        # The trials wait for a gate the test opens only after the kill: the three that run
        # when the agent is killed are certain, and each has begun (its runs file says so).
        gate = self.path("go")
        exp = self.slow_exp(gate=gate)
        run_dir = self.path("run")
        p = self.start_run(exp, run_dir)

        def running_ids():
            rows = self.poll_query(run_dir, "SELECT id FROM trials WHERE state='running'")
            ids = [r["id"] for r in rows or []]
            if len(ids) != 3 or not all(self.runs_of(run_dir, i) for i in ids):
                return None
            return ids
        interrupted = wait_for(running_ids, 60)
        self.assertTrue(interrupted, "three trials should be running")
        agent = wait_for(lambda: self.find_agent(p.pid), 10)
        self.assertTrue(agent, "no `tunepack agent` child of the orchestrator")
        self.assertEqual(running_ids(), interrupted)  # none can end before the gate opens
        os.kill(agent, signal.SIGKILL)
        with open(gate, "w"):
            pass
        try:
            p.wait(timeout=120)
        except Exception:
            self.fail("run did not finish after its agent was killed")
        self.assertEqual(p.returncode, 0, p.stderr.read())
        with self.store(run_dir) as s:
            trials = s.trials()
            token = s.meta()["token"]
            self.assertEqual(s.meta()["state"], "finished")
            self.assertEqual([t["id"] for t in trials], list(range(N)))
            for t in trials:
                self.assertEqual(t["state"], "completed", t)
                self.assertEqual(t["value"], t["params"]["x"])
            self.assertTrue(s.events(kind="agent-lost"), "the agent's loss is journaled")
            self.assertTrue(interrupted)
            for tid in interrupted:
                running = s.events(tid, "running")
                self.assertGreaterEqual(len(running), 2,
                                        "interrupted trial %d should have run again" % tid)
                with open(os.path.join(run_dir, "trials", "%06d" % tid, "runs")) as f:
                    self.assertGreaterEqual(len(f.read().split()), 2)
        self.assertEqual(token_pids(token), [])


    def test_a_killed_runs_agent_ending_late_spares_the_resumed_runs_trials(self):
        # A rare CI failure of test_adaptive's kill test: the agent of a SIGKILLed orchestrator
        # ended, and reaped, after the resumed run had started its trials; it reaped by the
        # run's token alone, which the resumed run's trials carry too, and killed one (a failed
        # result). Here the order is made certain: freeze that agent, resume, let it go on
        # once the resumed run's trials run.
        exp = self.slow_exp(sleep="2")
        run_dir = self.path("run")
        p = self.start_run(exp, run_dir)

        def running(n):
            rows = self.poll_query(run_dir, "SELECT count(*) AS n FROM events "
                                            "WHERE kind = 'running'")
            return rows and rows[0]["n"] >= n
        self.assertTrue(wait_for(lambda: running(3), 30), "three trials should be running")
        agent = wait_for(lambda: self.find_agent(p.pid), 10)
        self.assertTrue(agent, "no `tunepack agent` child of the orchestrator")
        os.kill(agent, signal.SIGSTOP)
        try:
            os.kill(p.pid, signal.SIGKILL)  # the orchestrator this test started
            p.wait(timeout=30)
            q = self.start_run(exp, run_dir)
            # The resumed run starts the three interrupted trials again, and they run (each
            # has written its attempt to its runs file) before the old agent goes on.
            self.assertTrue(wait_for(lambda: running(6), 30), "the resumed run runs no trial")
            rows = (self.poll_query(run_dir, "SELECT trial, attempt FROM events "
                                             "WHERE kind = 'running' ORDER BY id") or [])[3:]
            self.assertTrue(wait_for(lambda: all(str(r["attempt"]) in
                                                 self.runs_of(run_dir, r["trial"])
                                                 for r in rows), 60),
                            "the resumed run's trials never began: %s" % rows)
        finally:
            os.kill(agent, signal.SIGCONT)
        self.assertTrue(wait_for(lambda: not os.path.exists("/proc/%d" % agent)
                                 or self.zombie(agent), 30), "the old agent did not end")
        try:
            q.wait(timeout=120)
        except Exception:
            self.fail("the resumed run did not finish")
        self.assertEqual(q.returncode, 0, q.stderr.read())
        with self.store(run_dir) as s:
            states = [t["state"] for t in s.trials()]
        self.assertEqual(states, ["completed"] * N)

    @staticmethod
    def zombie(pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return True


if __name__ == "__main__":
    main()
