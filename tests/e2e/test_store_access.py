#!/usr/bin/env python3
"""A reader that may not write: a healthy store on read-only media, or one read by a user
without write access to its directory, is read (not called damaged); a user who may not read
the directory or the store is told "permission denied" (not "no experiment"). The test machine
runs as root, whom permissions do not stop: the other user is nobody, through setpriv (or
runuser), and the read-only media a read-only bind mount in a mount namespace of its own."""

import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import BIN, E2E, main

EXP = """name: access
command: [sh, -c, 'echo "{{\\"acc\\": $0}}" >&3', "{x}"]
metric: {name: acc, mode: max}
space:
  x: {choice: [0.25, 0.5]}
search: {algorithm: grid}
"""
READERS = (("trials",), ("status",), ("best",), ("export", "--format", "csv"))
NOBODY = 65534


def as_nobody():
    """The command prefix that runs a program as uid/gid nobody with no other groups."""
    if shutil.which("setpriv"):
        return ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
    if shutil.which("runuser"):
        return ["runuser", "-u", "nobody", "--"]
    raise AssertionError("neither setpriv nor runuser is here: cannot run as another user")


class StoreAccess(E2E):

    def setUp(self):
        super().setUp()
        if os.getuid() != 0:
            raise AssertionError("these tests change owners and modes: run them as root")
        os.chmod(self.tmp, 0o755)  # others may reach what is inside; each test says what

    def finished(self):
        run_dir = self.path("run")
        self.assertExit(self.run_exp(self.experiment(EXP), run_dir), 0)
        self.assertFalse(os.path.exists(os.path.join(run_dir, "tunepack.db-wal")))
        self.assertFalse(os.path.exists(os.path.join(run_dir, "tunepack.db-shm")))
        return run_dir

    def read_as(self, prefix, args, run_dir):
        return subprocess.run(prefix + [BIN, args[0], run_dir, *args[1:]], cwd="/",
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              errors="replace", timeout=60)

    def assertReads(self, r, args):
        self.assertEqual(r.returncode, 0, "%s: %s" % (args, r.stderr))
        self.assertNotIn("damaged", r.stderr)
        if args[0] == "trials":
            self.assertIn("completed", r.stdout)

    def test_a_reader_without_write_access_reads_a_healthy_store(self):
        run_dir = self.finished()
        os.chmod(os.path.join(run_dir, "tunepack.db"), 0o444)
        os.chmod(run_dir, 0o555)
        for args in READERS:
            self.assertReads(self.read_as(as_nobody(), args, run_dir), args)
        self.assertEqual(sorted(os.listdir(run_dir)), ["lock", "trials", "tunepack.db"],
                         "a reader leaves nothing behind")

    def test_a_store_on_read_only_media_is_read(self):
        run_dir = self.finished()
        mount = ["unshare", "-m", "sh", "-c",
                 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && '
                 'if touch "$1/probe" 2>/dev/null; then exit 99; fi; shift; exec "$@"', "sh",
                 run_dir]
        for args in READERS:
            r = self.read_as(mount, args, run_dir)
            self.assertNotEqual(r.returncode, 99, "the bind mount was not read-only")
            self.assertReads(r, args)

    def test_a_user_who_may_not_read_is_told_permission_denied(self):
        run_dir = self.finished()
        os.chmod(run_dir, 0o700)  # the default `permissions: owner`; owned by root
        for args in READERS:
            r = self.read_as(as_nobody(), args, run_dir)
            self.assertEqual(r.returncode, 4, r.stderr)
            self.assertIn("permission denied: cannot enter the directory %s (mode 0700, owned "
                          "by root)" % run_dir, r.stderr)
            self.assertNotIn("no experiment", r.stderr)
        os.chmod(run_dir, 0o755)
        os.chmod(os.path.join(run_dir, "tunepack.db"), 0o600)
        r = self.read_as(as_nobody(), ("status",), run_dir)
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("permission denied: cannot read %s/tunepack.db (mode 0600" % run_dir,
                      r.stderr)
        # a directory that holds no experiment is still told so
        empty = self.path("empty")
        os.mkdir(empty)
        r = self.read_as(as_nobody(), ("status",), empty)
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("no experiment in %s" % empty, r.stderr)


if __name__ == "__main__":
    main()
