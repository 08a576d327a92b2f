#!/usr/bin/env python3
"""No trial outlives its run. A process that leaves its trial's process group (a setsid()
grandchild, a daemon's double fork), clears its environment and closes every fd is ended
when its attempt ends (stopped, timed out, or its leader exited) and, at the latest, when the
run ends: the agent is a child subreaper, so every orphan comes back to it; a cgroup per
attempt, where one can be made, and the run token in the environment are further nets.

The same escapes are proven locally with cgroups, locally without (TUNEPACK_NO_CGROUP=1, the
agent's switch for this), and on the sshd harness (its hosts have no cgroup2 mounted) after a
normal end, a lost link and an orchestrator SIGKILL followed by a resume. Survivors are
counted by the marker each escapee carries in its command line (its pid file's path)."""

import os
import signal
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))

from helpers import E2E, PY, main, pids_mentioning, token_pids, wait_for, yaml_str  # noqa: E402
from sshnet import SshHosts  # noqa: E402

# argv: MODE BASE. The trial forks an escapee that writes its pid to BASE.pid.MODE.NODE (NODE:
# where it runs), then reports acc=1 and exits, unless BASE.hold.NODE exists: then it waits
# until that file is gone. Modes:
#   setsid  a setsid() child that keeps the trial's pipes and environment
#   double  a daemon: setsid, fork again (the middle exits), stdio on /dev/null
#   hang    a setsid() child with stdio on /dev/null; the trial hangs (for a timeout)
#   clean   a setsid() child that execs with an empty environment: no token
#   hidden  a double fork, setsid, every fd closed, an empty environment: nothing but the
#           process tree leads to it
#   checkM  run after mode M: reports acc=1 if M's escapee on this node is gone already
# Escapees that exec run `python -c SLEEP BASE.pid...`: the marker stays in their command line.
ESCAPE = r'''
import os, sys, time
mode, base = sys.argv[1], sys.argv[2]
token = os.environ.get("TUNEPACK_RUN_TOKEN", "")
node = token.rsplit("-", 1)[1] if "-" in token else "local"
pidfile = "%s.pid.%s.%s" % (base, mode, node)
if mode.startswith("check"):
    pid = int(open("%s.pid.%s.%s" % (base, mode[5:], node)).read())
    try:
        with open("/proc/%d/stat" % pid) as f:
            alive = int(f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"))
    except FileNotFoundError:
        alive = 0
    print("acc=%d" % (1 - alive), flush=True)
    sys.exit(0)
if os.path.exists(pidfile):  # an earlier attempt's
    os.unlink(pidfile)
if os.fork() == 0:
    os.setsid()  # out of the trial's process group and session
    if mode in ("double", "hidden"):  # a daemon: fork again, the middle exits
        if os.fork() != 0:
            os._exit(0)
    if mode != "setsid":
        fd = os.open(os.devnull, os.O_RDWR)
        for k in (0, 1, 2):
            os.dup2(fd, k)
    if mode == "hidden":
        os.closerange(3, 65536)
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(pidfile + ".tmp", pidfile)
    if mode in ("clean", "hidden"):  # no token in the environment
        exe = sys.executable
        os.execve(exe, [exe, "-c", "import time; time.sleep(600)", pidfile], {})
    time.sleep(600)
    os._exit(0)
with open("%s.cgroup.%s" % (base, mode), "w") as f:
    f.write(open("/proc/self/cgroup").read())
while not os.path.exists(pidfile):
    time.sleep(0.01)
if mode == "hang":
    time.sleep(600)
while os.path.exists("%s.hold.%s" % (base, node)):
    time.sleep(0.05)
print("acc=1", flush=True)
'''

MODES = ["setsid", "double", "clean", "hidden"]


class EscapeBase(E2E):
    """An experiment of escaping trials, and the count of their escapees."""

    def tearDown(self):
        for pid in self.survivors():  # a failed test's escapees: this test's, by their marker
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        super().tearDown()

    def escape_exp(self, modes, extra=""):
        script = self.write("escape.py", ESCAPE)
        return self.experiment(
            "name: escape\ncommand: [%s, %s, \"{mode}\", %s]\n"
            "metric: {name: acc, mode: max}\nspace:\n  mode: {grid: [%s]}\n"
            "search: {algorithm: grid}\n%s"
            % (yaml_str(PY), yaml_str(script), yaml_str(self.base()), ", ".join(modes), extra))

    def base(self):
        return self.path("esc")

    def escapee_nodes(self, mode):
        """The nodes where mode's escapee was made."""
        prefix = "esc.pid.%s." % mode
        return {n[len(prefix):] for n in os.listdir(self.tmp)
                if n.startswith(prefix) and not n.endswith(".tmp")}

    def survivors(self):
        """Live processes whose command line or environment carries the escapees' marker."""
        return pids_mentioning(self.base())

    def in_own_cgroup(self, mode):
        with open(self.base() + ".cgroup." + mode) as f:
            return "tunepack-agent-" in f.read()

    def assert_none_survive(self, run_dir, modes):
        for mode in modes:
            self.assertTrue(self.escapee_nodes(mode), "the %s trial made no escapee" % mode)
        self.assertTrue(wait_for(lambda: self.survivors() == [], 60),
                        "escapees outlived their run: %s" % self.survivors())
        self.assertEqual(token_pids(self.token_of(run_dir)), [])


class Escape(EscapeBase):
    """On this machine, with a cgroup per attempt where one can be made (env: more of the
    agent's environment)."""

    env = None

    def run_trials(self, modes, extra=""):
        run_dir = self.path("run")
        return self.run_exp(self.escape_exp(modes, extra), run_dir, env=self.env), run_dir

    def test_every_escapee_is_ended_with_its_attempt(self):
        # One trial at a time: each escaping trial is followed by one that reports 1 only if
        # the escapee is gone already.
        modes = [m for mode in MODES for m in (mode, "check" + mode)]
        r, run_dir = self.run_trials(modes, "concurrency: 1\n")
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            values = {t["params"]["mode"]: t["value"] for t in s.trials()}
        self.assertEqual(values, {m: 1.0 for m in modes}, "escapees outlived their attempt")
        self.assert_none_survive(run_dir, MODES)

    def test_every_escapee_is_ended_by_the_end_of_the_run(self):
        r, run_dir = self.run_trials(MODES, "concurrency: %d\n" % len(MODES))
        self.assertExit(r, 0)
        self.assert_each_completed_once(run_dir, len(MODES))
        self.assert_none_survive(run_dir, MODES)

    def test_escapee_of_a_stopped_trial_is_ended_with_its_attempt_not_only_the_run(self):
        # Trial 0 leaves a quiet setsid() child and hangs until its timeout stops it;
        # trial 1, run after it, reports 1 only if that child is already gone.
        r, run_dir = self.run_trials(["hang", "checkhang"], "timeout: 2s\nconcurrency: 1\n")
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            trials = s.trials()
        self.assertEqual(trials[0]["state"], "failed")
        self.assertIn("timed out", trials[0]["error"])
        self.assertEqual(trials[1]["value"], 1.0, "the stopped trial's escapee was still alive")
        self.assert_none_survive(run_dir, ["hang"])


class EscapeWithoutCgroup(Escape):
    """The same, the agent told to make no cgroup (TUNEPACK_NO_CGROUP=1) as on a node without
    a writable cgroup2: its subreaper, the process groups and the token alone."""

    env = {"TUNEPACK_NO_CGROUP": "1"}

    def run_trials(self, modes, extra=""):
        r, run_dir = super().run_trials(modes, extra)
        for mode in modes:
            if not mode.startswith("check"):
                self.assertFalse(self.in_own_cgroup(mode), "the agent made a cgroup anyway")
        return r, run_dir


class EscapeOverSsh(EscapeBase):
    """On the sshd harness (tests/cluster/sshnet.py): `ip netns exec` gives each sshd a /sys
    of its own, without the cgroup2 mount, so its agents make no cgroup."""

    @classmethod
    def setUpClass(cls):
        SshHosts.for_class(cls)

    def ssh_exp(self):
        return self.escape_exp(MODES, "concurrency: %d\nstop_grace: 1s\n"
                               "cluster: {ssh: {hosts: [host1], config: %s}}\n"
                               % (len(MODES), yaml_str(self.hosts.config)))

    def hold_all_on_host1(self):
        """Start the run with every trial held on host1; return it once all their escapees
        run there."""
        self.write("esc.hold.host1", "")
        p = self.start_run(self.ssh_exp(), self.path("run"))
        ready = lambda: p.poll() is not None or all(
            "host1" in self.escapee_nodes(m) for m in MODES)
        self.assertTrue(wait_for(ready, 60) and p.poll() is None,
                        "not every escapee started on host1")
        self.assert_no_cgroup()
        return p

    def assert_no_cgroup(self):
        for mode in MODES:
            self.assertFalse(self.in_own_cgroup(mode), "a cgroup on the ssh host: nothing proven")

    def test_no_escapee_survives_a_normal_end(self):
        d = self.path("run")
        self.assertExit(self.run_exp(self.ssh_exp(), d, timeout=180), 0)
        self.assert_each_completed_once(d, len(MODES))
        self.assert_no_cgroup()
        self.assert_none_survive(d, MODES)

    def test_no_escapee_survives_a_lost_link(self):
        # Every trial holds on host1; host2 joins; host1's link is cut. Its agent hears
        # nothing, stops its trials and ends, and their escapees with them; the trials run
        # again on host2 (no hold there) and the run completes.
        d = self.path("run")
        p = self.hold_all_on_host1()
        self.assertExit(self.tp("nodes", "add", "host2", d), 0)
        self.hosts.cut("host1")
        try:
            out, err = p.communicate(timeout=180)
        finally:
            self.hosts.restore("host1")
        self.assertEqual(p.returncode, 0, err.decode(errors="replace"))
        self.assert_each_completed_once(d, len(MODES))
        with self.store(d) as s:
            lost = s.q("SELECT detail FROM events WHERE kind = 'agent-lost'")
        self.assertTrue(any("host1" in e["detail"] for e in lost), lost)
        self.assert_none_survive(d, MODES)

    def test_no_escapee_survives_an_orchestrator_kill_and_resume(self):
        d = self.path("run")
        p = self.hold_all_on_host1()
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        os.unlink(self.path("esc.hold.host1"))
        self.assertExit(self.run_exp(self.ssh_exp(), d, timeout=180), 0)
        self.assert_each_completed_once(d, len(MODES))
        self.assert_none_survive(d, MODES)


if __name__ == "__main__":
    main()
