#!/usr/bin/env python3
"""Trial lifecycle: timeout, retries, and `tunepack stop` that leaves no orphan behind."""

import json
import os
import time
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, cmdline, main, token_pids, wait_for, yaml_str


class Lifecycle(E2E):

    def exp(self, command, trials=1, extra="", metric="acc"):
        return self.experiment(
            "name: life\n"
            "command: %s\n"
            "metric: {name: %s, mode: max}\n"
            "space:\n"
            "  x: {int: [1, 100]}\n"
            "search: {algorithm: random, trials: %d, seed: 3}\n%s"
            % (command, metric, trials, extra))

    def test_timeout_kills_a_sleeping_trial_quickly_and_fails_it(self):
        exp = self.exp("[sh, -c, 'echo acc=0.5; exec sleep 300']",
                       extra="timeout: 1s\nstop_grace: 1s\n")
        run_dir = self.path("run")
        t0 = time.monotonic()
        r = self.run_exp(exp, run_dir)
        elapsed = time.monotonic() - t0
        self.assertExit(r, 5)
        # not a speed check: a trial left alone would sleep 300 s
        self.assertLess(elapsed, 300, "the timeout did not end the sleeping trial")
        with self.store(run_dir) as s:
            t = s.trial(0)
            self.assertEqual(t["state"], "failed")
            self.assertIn("timed out", t["error"] or "")
            self.assertEqual(t["attempts"], 1)
            self.assertEqual(t["failures"], 1)
            token = s.meta()["token"]
        self.assertEqual(token_pids(token), [])

    def test_timeout_escalates_to_sigkill_when_sigterm_is_ignored(self):
        exp = self.exp("[sh, -c, 'trap \"\" TERM; echo acc=0.5; sleep 300; sleep 300']",
                       extra="timeout: 1s\nstop_grace: 1s\n")
        run_dir = self.path("run")
        t0 = time.monotonic()
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 5)
        # SIGTERM is ignored: without the SIGKILL the trial would sleep 600 s
        self.assertLess(time.monotonic() - t0, 300, "SIGKILL did not follow the ignored SIGTERM")
        with self.store(run_dir) as s:
            t = s.trial(0)
            self.assertEqual(t["state"], "failed")
            self.assertIn("timed out", t["error"] or "")
            token = s.meta()["token"]
        self.assertEqual(token_pids(token), [])

    def test_retry_after_first_failure_completes_on_attempt_two(self):
        exp = self.exp(
            "[sh, -c, 'if [ \"$TUNEPACK_ATTEMPT\" = 1 ]; then echo first >&2; exit 7; fi; "
            "echo \"{{\\\"acc\\\": $TUNEPACK_ATTEMPT}}\" >&3']",
            trials=2, extra="retries: 2\n")
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            for t in s.trials():
                self.assertEqual(t["state"], "completed", t)
                self.assertEqual(t["attempts"], 2)
                self.assertEqual(t["failures"], 1)
                self.assertEqual(t["value"], 2)
                self.assertEqual([m["attempt"] for m in s.metrics(t["id"])], [2])
                kinds = [(e["attempt"], e["kind"]) for e in s.events(t["id"])
                         if e["kind"] in ("running", "failed", "completed")]
                self.assertEqual(kinds, [(1, "running"), (1, "failed"),
                                         (2, "running"), (2, "completed")])
                tdir = os.path.join(run_dir, "trials", "%06d" % t["id"])
                # The first attempt's logs are kept beside the second's.
                with open(os.path.join(tdir, "stderr.1.log")) as f:
                    self.assertIn("first", f.read())
                self.assertTrue(os.path.exists(os.path.join(tdir, "stdout.log")))

    def test_always_failing_trial_uses_every_retry_then_fails(self):
        exp = self.exp("[sh, -c, 'exit 9']", trials=1, extra="retries: 2\n")
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 5)
        with self.store(run_dir) as s:
            t = s.trial(0)
            self.assertEqual(t["state"], "failed")
            self.assertEqual(t["attempts"], 3)
            self.assertEqual(t["failures"], 3)
            self.assertEqual(t["exit_code"], 9)
            self.assertEqual(len(s.events(0, "failed")), 3)

    def test_the_same_exception_twice_is_not_retried_again(self):
        # Issue 34: a trial that fails twice with the same exception and message would only
        # fail again; one whose message changes (a flaky cause) gets every retry.
        same = self.write("same.py", "raise ValueError('lr must be positive')\n")
        changing = self.write("changing.py", "import os\n"
                              "raise RuntimeError('CUDA error on attempt ' + "
                              "os.environ['TUNEPACK_ATTEMPT'])\n")
        for script, attempts in ((same, 2), (changing, 4)):
            run_dir = self.path("run-" + os.path.basename(script))
            exp = self.exp("[%s, %s]" % (yaml_str(sys.executable), yaml_str(script)),
                           extra="retries: 3\n")
            r = self.run_exp(exp, run_dir)
            self.assertExit(r, 5)
            with self.store(run_dir) as s:
                t = s.trial(0)
                self.assertEqual(t["state"], "failed")
                self.assertEqual(t["attempts"], attempts, t)
                self.assertEqual(len(s.events(0, "failed")), attempts)  # each retry, and the end
            if attempts == 2:
                self.assertIn("ValueError: lr must be positive (the same error as its attempt "
                              "before: not retried again)", t["error"])
                self.assertIn("not retried again", r.stdout)
            else:
                self.assertNotIn("not retried", t["error"])

    def test_stop_leaves_no_orphans_and_run_again_completes(self):
        # Each trial starts a background child and waits; on resume (marker present) it
        # reports and exits at once.
        marker = self.path("resume-now")
        script = self.write("trial.sh",
                            "if [ -e %s ]; then echo \"acc=$1\"; exit 0; fi\n"
                            "sleep 300 &\n"
                            "sleep 300\n" % marker)
        exp = self.exp("[sh, %s, \"{x}\"]" % yaml_str(script), trials=4,
                       extra="concurrency: 2\nstop_grace: 2s\n")
        run_dir = self.path("run")
        p = self.start_run(exp, run_dir)

        def running():
            rows = self.poll_query(run_dir, "SELECT id FROM trials WHERE state = 'running'")
            return rows is not None and len(rows) == 2
        self.assertTrue(wait_for(running, 30), "two trials should be running")
        token = self.token_of(run_dir)
        self.assertTrue(token)
        # Both trials and their background children carry the token.
        self.assertTrue(wait_for(lambda: len(token_pids(token)) >= 5, 10),
                        "expected agent + 2x(sh, sleep, sleep) with the token")

        stop = self.tp("stop", run_dir, timeout=30)
        self.assertExit(stop, 0)
        try:
            p.wait(timeout=30)
        except Exception:
            self.fail("run did not exit after `tunepack stop`")
        self.assertEqual(p.returncode, 6, p.stderr.read())
        # An interruption is neither a failure nor a retry, and the summary counts it.
        out = p.stdout.read().decode()
        self.assertIn("0 failed, 0 retried, 2 interrupted", out)
        self.assertEqual(out.count("interrupted after"), 2, out)
        # The run has exited: nothing with its token may remain, at once.
        left = token_pids(token)
        self.assertEqual(left, [], "processes with the run's token survived the stop: %s"
                         % [(pid, cmdline(pid)) for pid in left])

        status = self.tp("status", run_dir)
        self.assertExit(status, 0)
        state_line = [l for l in status.stdout.splitlines() if l.startswith("state")]
        self.assertEqual(len(state_line), 1, status.stdout)
        self.assertIn("stopped", state_line[0])
        self.assertNotIn("running", state_line[0])
        with self.store(run_dir) as s:
            self.assertEqual(s.meta()["state"], "stopped")
            trials = s.trials()
            self.assertNotIn("running", [t["state"] for t in trials])
            interrupted = [t for t in trials if s.events(t["id"], "interrupted-as-pending")
                           or any(e["detail"] == "interrupted" for e in s.events(t["id"]))]
            self.assertEqual(len(interrupted), 2)
            for t in interrupted:
                self.assertEqual(t["state"], "pending")
                self.assertEqual((t["failures"], t["interrupted"]), (0, 1), t)
        # `trials` and `status` say the same about them.
        self.assertIn("2 pending, 0 interrupted (2 of the pending were interrupted by the stop",
                      status.stdout)
        listed = json.loads(self.tp("trials", run_dir, "--json").stdout)
        self.assertEqual(sorted(t["state"] for t in listed), ["pending", "pending"])

        with open(marker, "w"):
            pass
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        self.assertIn("(2 interrupted)", r.stderr)
        export = {t["id"]: t for t in json.loads(self.tp("export", run_dir, "--format",
                                                         "json").stdout)}
        with self.store(run_dir) as s:
            trials = s.trials()
            self.assertEqual([t["id"] for t in trials], [0, 1, 2, 3])
            for t in trials:
                # Interrupted attempts are counted apart, never as failures; `duration_s` is
                # the time the attempts ran (each journaled running -> end), no waiting.
                self.assertEqual(export[t["id"]]["failures"], 0)
                self.assertEqual(export[t["id"]]["interrupted"], t["interrupted"])
                self.assertEqual(export[t["id"]]["duration_s"], t["run_s"])
            for t in trials:
                self.assertEqual(t["state"], "completed", t)
                self.assertEqual(t["value"], t["params"]["x"])
            self.assertEqual(s.meta()["state"], "finished")
        self.assertEqual(token_pids(token), [])


if __name__ == "__main__":
    main()
