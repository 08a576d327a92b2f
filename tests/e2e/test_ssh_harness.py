#!/usr/bin/env python3
"""The SSH harness (tests/cluster/sshnet.py) gives real sshd hosts in network namespaces:
BatchMode logins with strict host keys, a wrong host key refused, binary-clean stdio, a cut
link that ends a running session through ServerAlive, and a teardown that leaves no
namespace, no sshd and no file."""

import os
import statistics
import subprocess
import sys
import time
import unittest

sys.dont_write_bytecode = True  # keep tests/ free of __pycache__
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))

from roundtrip import ping_pong  # noqa: E402

import sshnet  # noqa: E402
from helpers import pids_mentioning  # noqa: E402
from sshnet import SshHosts  # noqa: E402


class SshHarness(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        SshHosts.for_class(cls)

    def test_batch_login_with_strict_host_keys(self):
        h = self.hosts
        self.assertEqual(h.ssh_args("host1"), ["ssh", "-F", h.config, "host1"])
        for host in ("host1", "host2"):
            r = subprocess.run(h.ssh_args(host) + ["echo", "ok"], capture_output=True,
                               text=True, timeout=60, stdin=subprocess.DEVNULL)
            self.assertEqual((r.returncode, r.stdout), (0, "ok\n"), r.stderr)
        with open(h.config) as f:
            config = f.read()
        for line in ("BatchMode yes", "StrictHostKeyChecking yes", "ServerAliveInterval 1",
                     "ServerAliveCountMax 3"):
            self.assertIn(line, config)
        # Each host is its own namespace, with its own address.
        r = h.run("host2", ["cat", "/proc/net/fib_trie"])
        self.assertIn(h.address("host2").encode(), r.stdout)
        self.assertNotIn(h.address("host1").encode(), r.stdout)

    def test_a_wrong_or_missing_host_key_is_refused(self):
        h = self.hosts
        bad = os.path.join(h.dir, "known_hosts.bad")
        other = os.path.join(h.dir, "other_key")
        h._keygen(other, "not-host1")
        with open(other + ".pub") as f:
            kind, blob = f.read().split()[:2]
        with open(bad, "w") as f:
            f.write("host1,%s %s %s\n" % (h.address("host1"), kind, blob))
        r = h.run("host1", ["-o", "UserKnownHostsFile=" + bad, "echo", "ok"])
        self.assertEqual(r.returncode, 255)
        self.assertEqual(r.stdout, b"")
        self.assertIn(b"Host key verification failed", r.stderr)
        # Not known at all: BatchMode + strict checking refuse too.
        r = h.run("host1", ["-o", "UserKnownHostsFile=/dev/null", "echo", "ok"])
        self.assertEqual((r.returncode, r.stdout), (255, b""))

    def test_binary_round_trip_through_ssh(self):
        data = os.urandom(64 * 1024)
        r = self.hosts.run("host1", ["cat"], input=data)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout), len(data))
        self.assertTrue(r.stdout == data, "the bytes came back changed")

    def test_interactive_stdio(self):
        # The agent's framed protocol is a conversation: each message must come back
        # before the next goes, with no newline to flush on.
        p = subprocess.Popen(self.hosts.ssh_args("host1") + ["cat"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            times = ping_pong(p)
        finally:
            p.stdin.close()
            p.wait(timeout=30)
            p.stdout.close()
        self.assertIsNotNone(times, "ssh host cat did not echo 100 bytes back")
        print("\n[ssh] ssh host cat, 100-byte echo: median %.2f ms"
              % (1000 * statistics.median(times)), file=sys.stderr)

    def test_ssh_latency(self):
        times = []
        for _ in range(10):
            t = time.monotonic()
            r = self.hosts.run("host2", ["true"])
            times.append(time.monotonic() - t)
            self.assertEqual(r.returncode, 0, r.stderr)
        print("\n[ssh] ssh host true: median %.1f ms (min %.1f, max %.1f)"
              % (1000 * statistics.median(times), 1000 * min(times), 1000 * max(times)),
              file=sys.stderr)

    def test_z_a_cut_link_ends_a_running_session(self):
        h = self.hosts
        self.addCleanup(h.restore, "host1")
        p = subprocess.Popen(h.ssh_args("host1") + ["echo started; exec sleep 100"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        self.addCleanup(p.stderr.close)
        self.addCleanup(p.stdout.close)
        self.addCleanup(p.stdin.close)
        self.assertEqual(p.stdout.readline(), b"started\n")
        t = time.monotonic()
        h.cut("host1")
        try:
            rc = p.wait(timeout=60)  # ServerAlive 1 s x 3: about 4 s; bounded generously
        except subprocess.TimeoutExpired:
            self.fail("the session outlived the cut link by 60 s")
        took = time.monotonic() - t
        self.assertEqual(rc, 255)
        print("\n[ssh] a cut link ended the session after %.1f s" % took, file=sys.stderr)
        # While cut, host1 cannot be reached; host2 can.
        r = h.run("host1", ["-o", "ConnectTimeout=2", "true"])
        self.assertEqual(r.returncode, 255)
        self.assertEqual(h.run("host2", ["true"]).returncode, 0)
        h.restore("host1")
        deadline = time.monotonic() + 30
        while h.run("host1", ["true"]).returncode != 0:
            self.assertLess(time.monotonic(), deadline, "host1 not back after restore")
            time.sleep(0.5)


class Teardown(unittest.TestCase):

    def test_close_leaves_no_namespace_no_sshd_no_file(self):
        h = SshHosts(n=1)
        h.start()
        try:
            d, ns = h.dir, h.namespace("host1")
            # A session that leaves a process behind in the namespace.
            r = h.run("host1", ["nohup sleep 300 >/dev/null 2>&1 & echo $!"])
            self.assertEqual(r.returncode, 0, r.stderr)
            orphan = int(r.stdout)
            self.assertIn(orphan, sshnet.ns_pids(ns))
            sshd = h.procs["host1"].pid
        finally:
            h.close()
        self.assertNotIn(ns, sshnet.namespaces())
        self.assertIsNone(sshnet._start_time(orphan))
        self.assertIsNone(sshnet._start_time(sshd))
        self.assertEqual(pids_mentioning(d), [])
        self.assertFalse(os.path.exists(d))
        self.assertFalse(os.path.exists("/sys/class/net/%s-h" % ns))
        self.assertFalse(os.path.exists(os.path.join(sshnet.ETC_NETNS, ns)))
        self.assertFalse(os.path.exists(os.path.join(sshnet.OWNERS, ns)))
        h.close()  # twice is fine

    def test_a_crashed_runs_namespaces_are_cleaned_by_the_next_hosts(self):
        h = SshHosts(n=1)
        h.start()
        ns, d, sshd = h.namespace("host1"), h.dir, h.procs["host1"]
        dead = subprocess.Popen(["true"])
        dead.wait()
        with open(os.path.join(sshnet.OWNERS, ns), "w") as f:
            f.write("%d 0\n" % dead.pid)
        h.slots.clear()  # forget them, as a crashed run would
        h.procs.clear()
        h.dir = None
        with open(os.path.join(d, "owner"), "w") as f:
            f.write("%d 0\n" % dead.pid)
        with SshHosts(n=1) as fresh:
            self.assertEqual(sshd.wait(timeout=10), -9)  # killed, and now reaped
            self.assertFalse(os.path.exists(d))
            self.assertEqual(fresh.run("host1", ["echo", "ok"]).stdout, b"ok\n")
            # The stale slot was freed (and perhaps taken again by `fresh`).
            if fresh.namespace("host1") != ns:
                self.assertNotIn(ns, sshnet.namespaces())


if __name__ == "__main__":
    unittest.main(verbosity=2)
