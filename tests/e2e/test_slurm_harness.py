#!/usr/bin/env python3
"""The Slurm harness (tests/cluster/slurm.py) gives a real Slurm 22.05 cluster: an allocation
over three nodes, steps placed on a named node with `srun --overlap -w`, binary-clean stdio
through srun, GPUs from gres, a node that dies and comes back, and a teardown that leaves
nothing running and nothing on disk."""

import os
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import unittest

sys.dont_write_bytecode = True  # keep tests/ free of __pycache__
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))

from helpers import BUILD, SRC  # noqa: E402
from roundtrip import ping_pong  # noqa: E402

import slurm  # noqa: E402
from slurm import SlurmCluster  # noqa: E402


def salloc(cluster, *args):
    """Allocate without a shell; return the job id."""
    r = cluster.run(["salloc", "--no-shell", "--immediate=30"] + list(args), timeout=60)
    if r.returncode != 0:
        raise AssertionError("salloc %s failed: %s\n%s" % (args, r.stderr, cluster.logs_tail()))
    for word in r.stderr.split():
        if word.isdigit():
            return word
    raise AssertionError("no job id in salloc's output: %r" % r.stderr)


def step(job, node, *cmd):
    return ["srun", "--jobid=" + job, "--overlap", "-N1", "-n1", "-w", node] + list(cmd)


def env_of(text):
    return dict(line.split("=", 1) for line in text.split("\n") if "=" in line)


class SlurmHarness(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = SlurmCluster(nodes=3, gpus_per_node=2, cpus_per_node=2)
        cls.cluster.start()
        cls.addClassCleanup(cls.cluster.close)

    def tearDown(self):
        self.cluster.run(["scancel", "--full", "-u", "root"], timeout=20)

    def test_a_step_runs_on_the_named_node_of_an_allocation(self):
        c = self.cluster
        self.assertEqual(c.node_states(), {"n1": "idle", "n2": "idle", "n3": "idle"})
        job = salloc(c, "-N3")
        for node in ("n1", "n2", "n3"):
            r = c.run(step(job, node, "env"))
            self.assertEqual(r.returncode, 0, r.stderr)
            env = env_of(r.stdout)
            self.assertEqual(env.get("SLURMD_NODENAME"), node)
            self.assertEqual(env.get("SLURM_JOB_ID"), job)

    def test_binary_round_trip_through_srun(self):
        c = self.cluster
        job = salloc(c, "-N3")
        data = os.urandom(64 * 1024)
        r = c.run(step(job, "n2", "cat"), input=data, text=False, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout), len(data))
        self.assertTrue(r.stdout == data, "the bytes came back changed")

    def test_interactive_stdio_needs_unbuffered(self):
        # The agent's framed protocol is a conversation: each message must come back
        # before the next goes. srun -u (--unbuffered) passes bytes at once; without it,
        # slurmstepd holds the task's output until a newline (or EOF), and a binary
        # conversation stalls.
        c = self.cluster
        job = salloc(c, "-N3")
        for unbuffered in (True, False):
            args = step(job, "n2", *(["-u", "cat"] if unbuffered else ["cat"]))
            p = c.popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL)
            try:
                times = ping_pong(p, rounds=50 if unbuffered else 1,
                                  timeout=10 if unbuffered else 3)
            finally:
                p.stdin.close()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                p.stdout.close()
            if unbuffered:
                self.assertIsNotNone(times, "srun -u cat did not echo 100 bytes back")
                print("\n[slurm] srun -u cat, 100-byte echo: median %.2f ms"
                      % (1000 * statistics.median(times)), file=sys.stderr)
            else:
                self.assertIsNone(times, "srun without -u now passes bytes at once")

    def test_gpus_from_gres_reach_the_step(self):
        c = self.cluster
        job = salloc(c, "-N1", "-w", "n3", "--gres=gpu:2")
        r = c.run(step(job, "n3", "--gres=gpu:2", "env"))
        self.assertEqual(r.returncode, 0, r.stderr)
        env = env_of(r.stdout)
        gpu_vars = {k: v for k, v in env.items()
                    if "GPU" in k or k in ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")}
        print("\n[slurm] GPU variables in a --gres=gpu:2 step: %s" % gpu_vars, file=sys.stderr)
        if c.gpu_devices_are_files:
            # mknod refused: slurmd counts the GPUs but names none.
            self.assertEqual(env.get("SLURM_GPUS_ON_NODE"), "2")
            return
        # What Slurm 22.05 sets in a step (SLURM_JOB_GPUS is only in batch/prolog
        # environments): the device list under every vendor's name, and the count.
        for name in ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "GPU_DEVICE_ORDINAL"):
            self.assertEqual(env.get(name), "0,1", name)
        self.assertEqual(env.get("SLURM_GPUS_ON_NODE"), "2")
        # One GPU asked for: one given.
        r = c.run(step(job, "n3", "--gres=gpu:1", "env"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(env_of(r.stdout).get("CUDA_VISIBLE_DEVICES", "").split(",")), 1)

    def test_srun_latency(self):
        c = self.cluster
        job = salloc(c, "-N3")
        times = []
        for _ in range(10):
            t = time.monotonic()
            r = c.run(step(job, "n1", "true"))
            times.append(time.monotonic() - t)
            self.assertEqual(r.returncode, 0, r.stderr)
        print("\n[slurm] srun --overlap -w n1 true: median %.1f ms (min %.1f, max %.1f)"
              % (1000 * statistics.median(times), 1000 * min(times), 1000 * max(times)),
              file=sys.stderr)

    def test_z_a_killed_node_leaves_nothing_and_goes_down_then_comes_back(self):
        c = self.cluster
        job = salloc(c, "-N3")
        running = c.popen(step(job, "n2", "sleep", "300"), stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.addCleanup(lambda: running.poll() is None and running.kill())
        self.addCleanup(running.stderr.close)
        # Wait until the step's task is running on n2.
        deadline = time.monotonic() + 30
        while not any(b"sleep\x00300" in slurm._read("/proc/%d/cmdline" % p)
                      for p in c.node_pids("n2")):
            self.assertLess(time.monotonic(), deadline, "the step never started on n2")
            time.sleep(0.1)
        before = c.node_pids("n2")
        self.assertGreaterEqual(len(before), 3, before)  # slurmd, slurmstepd, sleep
        c.kill_node("n2")
        self.assertEqual(c.node_pids("n2"), [])
        self.assertEqual([p for p in before if slurm._alive(p)], [])
        # slurmctld notices (SlurmdTimeout=5): the node goes down, the step fails.
        deadline = time.monotonic() + 60
        while not c.node_states().get("n2", "").startswith("down"):
            self.assertLess(time.monotonic(), deadline, "n2 never went down: %s"
                            % c.node_states())
            time.sleep(0.5)
        running.wait(timeout=60)
        r = c.run(["srun", "--immediate=2", "-N1", "-w", "n2", "true"], timeout=30)
        self.assertNotEqual(r.returncode, 0, "srun to a dead node succeeded")
        # The other nodes still work, and n2 comes back (ReturnToService=2).
        r = c.run(["srun", "-N1", "-w", "n1", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        c.restart_node("n2")
        r = c.run(["srun", "-N1", "-w", "n2", "printenv", "SLURMD_NODENAME"])
        self.assertEqual((r.returncode, r.stdout.strip()), (0, "n2"), r.stderr)


class Teardown(unittest.TestCase):

    def test_close_leaves_no_process_and_no_file(self):
        c = SlurmCluster(nodes=2, gpus_per_node=1)
        c.start()
        try:
            d, conf = c.dir, c.conf
            daemons = [p.pid for p in c.procs.values()]
            self.assertEqual(len(daemons), 4)  # munged, slurmctld, 2 x slurmd
            job = salloc(c, "-N2")
            steps = [c.popen(step(job, n, "sleep", "300"), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                     for n in ("n1", "n2")]
            deadline = time.monotonic() + 30
            while len([p for p in c.all_pids()
                       if b"sleep\x00300" in slurm._read("/proc/%d/cmdline" % p)]) < 2:
                self.assertLess(time.monotonic(), deadline, "the steps never started")
                time.sleep(0.1)
        finally:
            c.close()
        for s in steps:
            s.wait(timeout=30)
        self.assertEqual([p for p in daemons if slurm._alive(p)], [])
        self.assertEqual(slurm.pids_touching(d), [])
        self.assertEqual(slurm.pids_touching(conf), [])
        self.assertFalse(os.path.exists(d))
        c.close()  # twice is fine

    def test_a_crashed_runs_leftovers_are_cleaned_by_the_next_cluster(self):
        # A cluster whose owner is gone (here: an owner file naming a dead pid).
        c = SlurmCluster(nodes=1, gpus_per_node=0)
        c.start()
        stale_dir, stale_procs = c.dir, list(c.procs.values())
        stale = [p.pid for p in stale_procs]
        dead = subprocess.Popen(["true"])
        dead.wait()
        with open(c.path("owner"), "w") as f:
            f.write("%d\n" % dead.pid)
        c.procs.clear()  # forget it, as a crashed run would
        c.dir = None
        try:
            with SlurmCluster(nodes=1, gpus_per_node=0) as fresh:
                self.assertEqual([p for p in stale if slurm._alive(p)], [])
                self.assertFalse(os.path.exists(stale_dir))
                self.assertEqual(fresh.node_states(), {"n1": "idle"})
                for p in stale_procs:
                    p.wait(timeout=10)  # killed: reap them
        finally:
            slurm.clean_stale()


def doc_commands():
    """The commands docs/cluster.md shows for a local Slurm cluster: the first sh block
    under its heading "Trying it on one machine", one command a line."""
    with open(os.path.join(SRC, "docs", "cluster.md")) as f:
        text = f.read()
    section = text[text.index("## Trying it on one machine"):]
    block = section[section.index("```sh\n") + 6:]
    block = block[:block.index("```")]
    return [shlex.split(line) for line in block.split("\n") if line.strip()]


class LocalSlurmScript(unittest.TestCase):
    """scripts/local-slurm.sh, run the way docs/cluster.md says: start, run the Python example
    on two nodes, `tunepack nodes`, stop."""

    def test_the_documented_commands_run_an_experiment_on_two_nodes_and_clean_up(self):
        work = tempfile.mkdtemp(prefix="tp-local-slurm-")
        self.addCleanup(shutil.rmtree, work, ignore_errors=True)
        # A checkout as the doc's reader has it, its runs/ out of the sources.
        for name in ("scripts", "tests", "examples", "python"):
            os.symlink(os.path.join(SRC, name), os.path.join(work, name))
        os.symlink(BUILD, os.path.join(work, "build"))
        state = os.path.join(work, "state")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "SALLOC_", "SRUN_")) and k != "TUNEPACK"}
        env["TUNEPACK_LOCAL_SLURM"] = state
        script = os.path.join(work, "scripts", "local-slurm.sh")
        self.addCleanup(subprocess.run, [script, "stop"], cwd=work, env=env, timeout=120,
                        capture_output=True)
        commands = doc_commands()
        self.assertEqual([c[:2] for c in commands if c[0] == "scripts/local-slurm.sh"],
                         [["scripts/local-slurm.sh", "start"], ["scripts/local-slurm.sh", "run"],
                          ["scripts/local-slurm.sh", "stop"]], commands)
        listed = None
        for cmd in commands:
            r = subprocess.run(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=240)
            self.assertEqual(r.returncode, 0, "%s:\n%s%s" % (cmd, r.stdout, r.stderr))
            if cmd[1] == "start":  # up: its environment written, its nodes idle
                self.assertTrue(os.path.exists(os.path.join(state, "env")), r.stdout)
                self.assertIn("n1 n2", r.stdout)
            if cmd[1] == "nodes":
                listed = r.stdout
        # The example's eight trials completed, each on a node of the cluster.
        run_dir = os.path.join(work, "runs", "local-slurm")
        db = sqlite3.connect(os.path.join(run_dir, "tunepack.db"))
        states = [row[0] for row in db.execute("SELECT state FROM trials")]
        nodes = {row[0] for row in db.execute("SELECT node FROM placements")}
        db.close()
        self.assertEqual(states, ["completed"] * 8)
        self.assertLessEqual(nodes, {"n1", "n2"})
        # `tunepack nodes`: both nodes given back at the end of the run, none lost.
        rows = [line.split() for line in listed.split("\n")[1:] if line.strip()]
        self.assertEqual(sorted((row[0], row[1]) for row in rows),
                         [("n1", "released"), ("n2", "released")], listed)
        # stop: nothing of the cluster is left, running or on disk.
        self.assertFalse(os.path.exists(state), os.listdir(work))
        self.assertEqual(slurm.pids_touching(state), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
