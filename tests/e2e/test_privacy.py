#!/usr/bin/env python3
"""Private by default: the experiment directory and its store are the owner's alone unless
`permissions:` says otherwise, and `env_passthrough:` decides what trials inherit (all of this
machine's environment by default, a safe set on other nodes). A dashboard over a private
experiment lets in only whoever has its token (docs/security.md)."""

import json
import os
import stat
import subprocess
import sys
import urllib.error
import urllib.request

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import BIN, E2E, main, merged_env, wait_for, yaml_str

# The trial reports 1 for each variable it sees: secret, path, given (from env:).
TRIAL = ("command: [sh, -c, 'echo \"{{\\\"acc\\\": 1, \\\"secret\\\": ${AWS_SECRET_ACCESS_KEY:+1}0, "
         "\\\"path\\\": ${HOME:+1}0, \\\"given\\\": ${GIVEN:+1}0, \\\"id\\\": "
         "${TUNEPACK_TRIAL_ID:+1}0}}\" >&3', \"{x}\"]\n")


class Privacy(E2E):

    def run_one(self, extra="", name="priv"):
        exp = self.experiment("name: %s\n%smetric: {name: acc, mode: max}\n"
                              "space:\n  x: {choice: [1]}\nsearch: {algorithm: random, trials: 1}\n"
                              "env: {GIVEN: \"yes\"}\n%s" % (name, TRIAL, extra),
                              name=name + ".yaml")
        run_dir = self.path(name)
        r = self.run_exp(exp, run_dir, env={"AWS_SECRET_ACCESS_KEY": "hunter2"})
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            seen = s.q("SELECT data FROM metrics")[0]["data"]
        return run_dir, json.loads(seen)

    def modes(self, run_dir):
        out = {"dir": stat.S_IMODE(os.stat(run_dir).st_mode)}
        for f in ("tunepack.db", "tunepack.db-wal", "tunepack.db-shm"):
            p = os.path.join(run_dir, f)
            if os.path.exists(p):
                out[f] = stat.S_IMODE(os.stat(p).st_mode)
        return out

    def test_directory_and_store_are_the_owners_alone_by_default(self):
        old = os.umask(0o022)
        try:
            run_dir, _ = self.run_one()
        finally:
            os.umask(old)
        m = self.modes(run_dir)
        self.assertEqual(m.pop("dir"), 0o700)
        self.assertIn("tunepack.db", m)
        for f, mode in m.items():
            self.assertEqual(mode, 0o600, f)

    def test_permissions_group_lets_the_group_read(self):
        old = os.umask(0o022)
        try:
            run_dir, _ = self.run_one("permissions: group\n")
        finally:
            os.umask(old)
        m = self.modes(run_dir)
        self.assertEqual(m.pop("dir"), 0o750)
        for f, mode in m.items():
            self.assertEqual(mode, 0o640, f)

    def test_local_trials_inherit_everything_by_default(self):
        _, seen = self.run_one()
        self.assertEqual((seen["secret"], seen["path"], seen["given"], seen["id"]), (10, 10, 10, 10))

    def test_env_passthrough_limits_what_trials_inherit(self):
        _, seen = self.run_one("env_passthrough: [HOME, \"LC_*\"]\n")
        self.assertEqual(seen["secret"], 0, "a name not passed through reached the trial")
        self.assertEqual((seen["path"], seen["given"], seen["id"]), (10, 10, 10))
        _, seen = self.run_one("env_passthrough: []\n", name="none")
        self.assertEqual((seen["secret"], seen["path"], seen["given"], seen["id"]), (0, 0, 10, 10))

    def test_trials_on_other_nodes_get_only_the_safe_set_by_default(self):
        cluster = ("cluster: {command: {nodes: [n1], shared: true,\n"
                   "  argv: [env, \"TP_NODE={node}\", %s, agent]}}\n" % yaml_str(BIN))
        _, seen = self.run_one(cluster, name="remote")
        self.assertEqual(seen["secret"], 0, "a secret travelled to another node unasked")
        self.assertEqual((seen["path"], seen["given"], seen["id"]), (10, 10, 10))
        _, seen = self.run_one(cluster + "env_passthrough: [\"*\"]\n", name="asked")
        self.assertEqual(seen["secret"], 10)

    def test_a_dashboard_over_a_private_experiment_asks_every_reader_for_its_token(self):
        run_dir, _ = self.run_one()
        ready = self.path("url")
        p = subprocess.Popen([BIN, "dashboard", run_dir, "--listen", "127.0.0.1:0",
                              "--ready-file=" + ready], cwd=self.tmp, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=merged_env(None))
        self.procs.append(p)
        wait_for(lambda: os.path.exists(ready) or p.poll() is not None, 20)
        with open(ready) as f:
            url = f.read().strip()
        # The token is nowhere another user could read: not in its command line, and the
        # file it is written to (for scripts and tests) is the owner's alone.
        token = url.split("?token=")[1]
        self.assertEqual(len(token), 32)
        with open("/proc/%d/cmdline" % p.pid, "rb") as f:
            self.assertNotIn(token.encode(), f.read())
        self.assertEqual(stat.S_IMODE(os.stat(ready).st_mode), 0o600)
        base = url.split("?")[0]
        for path in ("", "api/experiments", "api/e/0/trials", "api/e/0/log/0?stream=stdout"):
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(base + path, timeout=10)
            self.assertEqual(e.exception.code, 403, path)
        req = urllib.request.Request(base + "api/e/0/trials",
                                     headers={"Authorization": "Bearer " + token})
        with urllib.request.urlopen(req, timeout=10) as r:
            self.assertEqual(json.loads(r.read())["total"], 1)


if __name__ == "__main__":
    main()
