"""Extending an experiment (issue 34): raising `trials` on a finished, a stopped or a killed
experiment reaches a clean end under every scheduler and sampler, keeps what the runs before
found, and never hangs. A property test drives random sequences of run, stop, extend, SIGKILL
and resume and checks the invariants after each step.

Trials wait for a gate file before they report, so a stop or a kill lands while trials run:
the test waits for the run's own events (an attempt's start), never for a time.
TP_PROPERTY_SEED picks other random sequences (the default is fixed, so that CI repeats it);
TP_PROPERTY_STEPS sets how many steps each sequence takes."""

import json
import os
import random
import signal
import sqlite3
import subprocess

from helpers import BIN, E2E, PY, main, merged_env, wait_for, yaml_str

TRIAL = """import json, os, sys, time
x, epochs, gate = float(sys.argv[1]), int(float(sys.argv[2])), sys.argv[3]
while not os.path.exists(gate):
    time.sleep(0.01)
fd = int(os.environ['TUNEPACK_REPORT_FD'])
for s in range(1, epochs + 1):
    os.write(fd, (json.dumps({'step': s, 'acc': x * (0.5 + s / 18)}) + '\\n').encode())
"""

# The same, and it honours a pause request while it waits (as at a deadline): it reports the
# step it is at and exits 0.
PAUSABLE = """import json, os, select, sys, time
x, epochs, gate = float(sys.argv[1]), int(float(sys.argv[2])), sys.argv[3]
fd, ctl = int(os.environ['TUNEPACK_REPORT_FD']), int(os.environ['TUNEPACK_CONTROL_FD'])
def report(s):
    os.write(fd, (json.dumps({'step': s, 'acc': x * (0.5 + s / 18)}) + '\\n').encode())
while not os.path.exists(gate):
    if select.select([ctl], [], [], 0.01)[0] and b'pause' in os.read(ctl, 100):
        report(1)
        sys.exit(0)
for s in range(1, epochs + 1):
    report(s)
"""

SCHEDULERS = ("fifo", "asha", "hyperband", "median", "hypersched")
SAMPLERS = ("random", "tpe")
WAIT = 60  # seconds for an event the test waits for: far past any run's need


class Extend(E2E):
    def setUp(self):
        super().setUp()
        self.gate = self.path("gate")
        self.trainer = self.write("trial.py", TRIAL)
        self.open_gate()

    def open_gate(self):
        with open(self.gate, "w"):
            pass

    def close_gate(self):
        if os.path.exists(self.gate):
            os.unlink(self.gate)

    def exp(self, scheduler, sampler, trials, concurrency, deadline="30m"):
        deadline = "deadline: %s\n" % deadline if scheduler == "hypersched" else ""
        return self.experiment(
            "name: extend\n"
            "command: [%s, %s, \"{x}\", \"{epochs}\", %s]\n"
            "metric: {name: acc, mode: max}\n"
            "space:\n  x: {uniform: [0, 1]}\n"
            "search: {algorithm: %s, trials: %d, seed: 3, scheduler: %s}\n"
            "budget: {name: epochs, min: 1, max: 9, eta: 3}\n"
            "concurrency: %d\n%s"
            % (yaml_str(PY), yaml_str(self.trainer), yaml_str(self.gate), sampler, trials,
               scheduler, concurrency, deadline))

    # -- what must hold after every step -------------------------------------------------

    def snapshot(self, run_dir):
        """What later runs must keep: completed trials with their values, and every
        decision so far (the journal only grows)."""
        if not os.path.exists(os.path.join(run_dir, "tunepack.db")):
            return {"completed": {}, "decisions": []}
        with self.store(run_dir) as s:
            completed = {t["id"]: t["value"] for t in s.trials() if t["state"] == "completed"}
            decisions = s.q("SELECT seq, kind, trial, rung, ok, value FROM decisions "
                            "ORDER BY seq")
        return {"completed": completed, "decisions": decisions}

    def check(self, run_dir, before, proc, finished, what):
        out = proc.stdout + proc.stderr if hasattr(proc, "stdout") else ""
        self.assertNotIn("bug:", out, what)
        self.assertNotIn("diverged", out, what)
        after = self.snapshot(run_dir)
        for tid, value in before["completed"].items():
            self.assertEqual(after["completed"].get(tid), value,
                             "%s: completed trial %d lost its result" % (what, tid))
        self.assertEqual(after["decisions"][:len(before["decisions"])], before["decisions"],
                         "%s: the journaled decisions changed" % what)
        jobs = [(d["trial"], d["rung"]) for d in after["decisions"] if d["kind"] == "job"]
        self.assertEqual(len(jobs), len(set(jobs)), "%s: a job was handed out twice" % what)
        status = json.loads(self.tp("status", run_dir, "--json").stdout)
        with self.store(run_dir) as s:
            trials = s.trials()
        counts = status["counts"]
        # "interrupted": left running by a run that was killed (no run owns the store now)
        self.assertEqual(sum(counts[k] for k in ("completed", "stopped", "failed", "running",
                                                 "paused", "pending", "interrupted")), len(trials),
                         "%s: %s" % (what, counts))
        if finished:
            open_ones = [t for t in trials if t["state"] not in ("completed", "stopped")]
            self.assertEqual(open_ones, [], what)
        return after

    # -- the steps -----------------------------------------------------------------------

    def run_to_end(self, exp, run_dir, what):
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        return r

    def interrupt(self, exp, run_dir, sig, what):
        """Start a run with the gate closed, wait for an attempt of this run to start, send
        sig to the process started, and let the trials go on (open the gate)."""
        last = self.poll_query(run_dir, "SELECT coalesce(max(id), 0) AS n FROM events") or [
            {"n": 0}]
        self.close_gate()
        # Output to files: a killed run's agent and trials may hold a pipe open for a while.
        out_path, err_path = self.path("out.txt"), self.path("err.txt")
        with open(out_path, "w") as out, open(err_path, "w") as err:
            self.run_dirs.append(run_dir)
            p = subprocess.Popen([BIN, "run", exp, "--dir", run_dir, "--plain"], cwd=self.tmp,
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 env=merged_env(None))
        self.procs.append(p)
        try:
            started = wait_for(lambda: p.poll() is not None or self.poll_query(
                run_dir, "SELECT id FROM events WHERE kind = 'running' AND id > ?",
                last[0]["n"]), WAIT)
            self.assertIsNone(p.poll(), "%s: the run ended before any attempt started" % what)
            self.assertTrue(started, "%s: no attempt started" % what)
            os.kill(p.pid, sig)
        finally:
            self.open_gate()
        p.wait(timeout=WAIT)
        with open(out_path) as f_out, open(err_path) as f_err:
            out, err = f_out.read(), f_err.read()
        if sig == signal.SIGKILL:
            self.assertEqual(p.returncode, -signal.SIGKILL, what)
        else:
            self.assertEqual(p.returncode, 6, "%s: %s" % (what, err))  # stopped; resumable

        class Done:
            stdout, stderr = out, err
        return Done

    # -- tests ---------------------------------------------------------------------------

    def test_every_scheduler_and_sampler_extends_a_finished_experiment(self):
        for scheduler in SCHEDULERS:
            for sampler in SAMPLERS:
                with self.subTest(scheduler=scheduler, sampler=sampler):
                    run_dir = self.path("run-%s-%s" % (scheduler, sampler))
                    what = "%s + %s" % (scheduler, sampler)
                    exp = self.exp(scheduler, sampler, 9, 3)
                    r = self.run_to_end(exp, run_dir, what)
                    before = self.check(run_dir, self.snapshot(run_dir), r, True, what)
                    self.assertGreater(len(before["completed"]), 0, what)
                    # Run again unchanged: nothing new, nothing said twice.
                    r = self.run_to_end(exp, run_dir, what)
                    self.assertNotIn("not promoted past", r.stdout, what)
                    same = self.check(run_dir, before, r, True, what)
                    self.assertEqual(same["decisions"], before["decisions"], what)
                    # More trials: they run, and the first ones keep what they found.
                    exp = self.exp(scheduler, sampler, 15, 2)
                    r = self.run_to_end(exp, run_dir, what + " extended")
                    after = self.check(run_dir, before, r, True, what + " extended")
                    with self.store(run_dir) as s:
                        self.assertGreater(len(s.trials()), 9, what)
                    self.assertGreater(len(after["decisions"]), len(before["decisions"]), what)

    def test_the_other_samplers_extend_a_finished_experiment_under_asha(self):
        # grid, nsga2, gp, cmaes, bohb and dehb as random and tpe above, under the scheduler whose
        # promotions made extending hang (one scheduler: the matrix above covers the rest).
        for sampler in ("grid", "nsga2", "gp", "cmaes", "bohb", "dehb"):
            with self.subTest(sampler=sampler):
                run_dir, what = self.path("run-%s" % sampler), "asha + %s" % sampler
                r = self.run_to_end(self.exp("asha", sampler, 9, 3), run_dir, what)
                before = self.check(run_dir, self.snapshot(run_dir), r, True, what)
                r = self.run_to_end(self.exp("asha", sampler, 15, 2), run_dir, what + " extended")
                after = self.check(run_dir, before, r, True, what + " extended")
                self.assertGreater(len(after["decisions"]), len(before["decisions"]), what)

    def test_hypersched_extended_past_its_deadline_reaches_a_clean_end(self):
        # The deadline stops the trials running then (they wait for the gate, and report
        # when asked to checkpoint); a later deadline and more trials follow. The jobs the
        # deadline stopped took their trials out of the search: nothing waits for them.
        self.trainer = self.write("trial.py", PAUSABLE)
        run_dir = self.path("run")
        self.close_gate()
        r = self.run_to_end(self.exp("hypersched", "random", 6, 2, deadline="1s"), run_dir,
                            "until the deadline")
        self.assertIn("deadline", r.stdout + r.stderr)
        before = self.check(run_dir, self.snapshot(run_dir), r, True, "until the deadline")
        with self.store(run_dir) as s:
            cut = s.q("SELECT trial FROM decisions WHERE kind = 'deadline-stop'")
        self.assertEqual(len(cut), 2, before)
        self.open_gate()
        exp = self.exp("hypersched", "random", 9, 2, deadline="1h")
        r = self.run_to_end(exp, run_dir, "past the deadline")
        after = self.check(run_dir, before, r, True, "past the deadline")
        self.assertGreater(len(after["completed"]), 0, r.stdout)
        r = self.run_to_end(exp, run_dir, "again")  # a replay that agrees, and nothing new
        self.assertEqual(self.check(run_dir, after, r, True, "again")["decisions"],
                         after["decisions"])

    def test_asha_promotes_a_trial_the_first_run_closed_when_extended(self):
        # The first run's search ended with trials waiting for a promotion; more trials at
        # rung 0 let the best of those waiting go on, as if trials had been raised at once.
        run_dir = self.path("run")
        self.run_to_end(self.exp("asha", "random", 9, 1), run_dir, "first")
        with self.store(run_dir) as s:
            closed = {t["id"] for t in s.trials() if t["state"] == "stopped"}
            last = s.q("SELECT max(seq) AS n FROM decisions")[0]["n"]
        self.assertTrue(closed)
        r = self.run_to_end(self.exp("asha", "random", 30, 1), run_dir, "extended")
        self.assertRegex(r.stderr, r"resuming .*: \d+ completed, 0 stopped early, 0 failed, "
                                   r"%d paused" % len(closed))
        with self.store(run_dir) as s:
            promoted = s.q("SELECT trial FROM decisions WHERE kind = 'job' AND rung > 0 AND "
                           "seq > ?", last)
        self.assertTrue({d["trial"] for d in promoted} & closed,
                        "no trial the first run closed was promoted: %s" % promoted)

    def test_a_run_whose_search_waits_for_nothing_says_why_and_exits(self):
        # A journal that lost a job's result (the scheduler counts that job as running, the
        # run has nothing running): before, the run sat forever; now it says so and stops.
        run_dir = self.path("run")
        exp = self.exp("asha", "random", 9, 1)
        self.run_to_end(exp, run_dir, "first")
        conn = sqlite3.connect(os.path.join(run_dir, "tunepack.db"))
        with conn:
            conn.execute("DELETE FROM decisions WHERE seq = (SELECT max(seq) FROM decisions "
                         "WHERE kind = 'result')")
        conn.close()
        r = self.run_exp(self.exp("asha", "random", 12, 1), run_dir)
        self.assertExit(r, 1)
        self.assertIn("no trial can make progress", r.stderr)
        with self.store(run_dir) as s:
            self.assertEqual(s.meta()["state"], "stopped")

    def test_random_run_stop_extend_kill_resume_sequences_keep_the_invariants(self):
        seed = int(os.environ.get("TP_PROPERTY_SEED", "20261127"))
        steps = int(os.environ.get("TP_PROPERTY_STEPS", "5"))
        rng = random.Random(seed)
        for scheduler in SCHEDULERS:
            sampler = rng.choice(SAMPLERS)
            run_dir = self.path("prop-%s" % scheduler)
            trials, before, ops, finished = 5, self.snapshot(run_dir), [], False
            with self.subTest(scheduler=scheduler, sampler=sampler, seed=seed):
                for step in range(steps + 1):
                    op = "extend" if step == steps else rng.choice(
                        ("run", "extend", "stop", "kill"))
                    conc = rng.randint(1, 4)
                    if op == "extend" or (op in ("stop", "kill") and finished):
                        trials += rng.randint(1, 4)  # a finished one has nothing to stop
                    ops.append("%s(trials=%d, concurrency=%d)" % (op, trials, conc))
                    what = "seed %d, %s + %s: %s" % (seed, scheduler, sampler, " ".join(ops))
                    exp = self.exp(scheduler, sampler, trials, conc)
                    if op in ("run", "extend"):
                        r = self.run_to_end(exp, run_dir, what)
                    else:
                        r = self.interrupt(exp, run_dir,
                                           signal.SIGTERM if op == "stop" else signal.SIGKILL,
                                           what)
                    finished = op in ("run", "extend")
                    before = self.check(run_dir, before, r, finished, what)


if __name__ == "__main__":
    main()
