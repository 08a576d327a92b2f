#!/usr/bin/env python3
"""No trial outlives its run: processes that leave the trial's process group (a setsid()
grandchild, a daemon's double fork) are found by the run token in their environment and
ended when their attempt ends (stopped, timed out, or holding the trial's pipes) and, at the
latest, when the run ends."""

import os
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, PY, main, token_pids, yaml_str

ESCAPE = r'''
import os, sys, time
mode, pidfile = sys.argv[1], sys.argv[2]
if mode == "check":  # the second trial: is the first one's escapee gone (or a zombie)?
    pid = int(open(pidfile).read())
    try:
        with open("/proc/%d/stat" % pid) as f:
            alive = int(f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"))
    except FileNotFoundError:
        alive = 0
    print("acc=%d" % (1 - alive), flush=True)
    sys.exit(0)
if os.fork() == 0:
    os.setsid()  # out of the trial's process group
    if mode == "double":  # a daemon: fork again, the middle exits, stdio closed
        if os.fork() != 0:
            os._exit(0)
    if mode in ("double", "hang", "clean"):
        fd = os.open(os.devnull, os.O_RDWR)
        for k in (0, 1, 2):
            os.dup2(fd, k)
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(pidfile + ".tmp", pidfile)
    if mode == "clean":  # no token, no pipes: only a cgroup holds it
        os.execve("/bin/sleep", ["sleep", "600"], {})
    time.sleep(600)
    os._exit(0)
with open(pidfile + ".cgroup", "w") as f:
    f.write(open("/proc/self/cgroup").read())
while not os.path.exists(pidfile):
    time.sleep(0.01)
if mode == "hang":
    time.sleep(600)
print("acc=1", flush=True)
'''


class Escape(E2E):

    def run_trials(self, modes, extra=""):
        script = self.write("escape.py", ESCAPE)
        exp = self.experiment(
            "name: escape\ncommand: [%s, %s, \"{mode}\", %s]\n"
            "metric: {name: acc, mode: max}\nspace:\n  mode: {grid: [%s]}\n"
            "search: {algorithm: grid}\n%s"
            % (yaml_str(PY), yaml_str(script), yaml_str(self.path("pid")),
               ", ".join(modes), extra))
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir)
        return r, run_dir

    def escapee(self):
        with open(self.path("pid")) as f:
            return int(f.read())

    def assert_gone(self, pid, run_dir):
        self.assertFalse(os.path.exists("/proc/%d" % pid) and
                         open("/proc/%d/stat" % pid).read().split()[2] != "Z",
                         "the escaped process %d outlived its run" % pid)
        self.assertEqual(token_pids(self.token_of(run_dir)), [])

    def test_setsid_grandchild_holding_the_pipes_is_ended_with_its_attempt(self):
        r, run_dir = self.run_trials(["setsid"])
        self.assertExit(r, 0)
        self.assert_gone(self.escapee(), run_dir)

    def test_double_forked_daemon_with_closed_stdio_is_ended_with_the_run(self):
        r, run_dir = self.run_trials(["double"])
        self.assertExit(r, 0)
        self.assert_gone(self.escapee(), run_dir)

    def test_escapee_without_the_token_or_the_pipes_is_ended_by_its_cgroup(self):
        r, run_dir = self.run_trials(["clean"])
        self.assertExit(r, 0)
        with open(self.path("pid") + ".cgroup") as f:
            if "tunepack-agent-" not in f.read():
                self.skipTest("no cgroup per trial on this machine (no writable cgroup2)")
        self.assert_gone(self.escapee(), run_dir)

    def test_escapee_of_a_stopped_trial_is_ended_with_its_attempt_not_only_the_run(self):
        # Trial 0 leaves a quiet setsid() child and hangs until its timeout stops it;
        # trial 1, run after it, reports 1 only if that child is already gone.
        r, run_dir = self.run_trials(["hang", "check"], "timeout: 2s\nconcurrency: 1\n")
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            trials = s.trials()
        self.assertEqual(trials[0]["state"], "failed")
        self.assertIn("timed out", trials[0]["error"])
        self.assertEqual(trials[1]["value"], 1.0, "the stopped trial's escapee was still alive")
        self.assert_gone(self.escapee(), run_dir)


if __name__ == "__main__":
    main()
