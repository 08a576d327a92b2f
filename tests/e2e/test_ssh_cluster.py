"""An experiment across hosts reached over ssh: real sshd servers, each in its own network
namespace (tests/cluster/sshnet.py), agents started with `ssh -o BatchMode=yes HOST tunepack
agent` with host keys checked. Trials run on every host, and when a host's link is cut mid-run
its trials run again elsewhere: every configuration completes exactly once, and nothing of the
cut host's trials is left running."""

import json
import os
import shutil
import sys
import time
import unittest

from helpers import BIN, E2E, PY, main, token_pids, wait_for, yaml_str

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from sshnet import SshHosts  # noqa: E402

# Each attempt appends "host attempt start-step" to runs.log in its trial directory, then
# works for `secs` seconds in ten checkpointed steps (resuming from the checkpoint, kept under
# checkpoint_root) and reports x; given a gate file, it waits for it before it reports.
TRIAL = r'''
import json, os, sys, time
x = float(sys.argv[1]); secs = float(sys.argv[2])
gate = sys.argv[3] if len(sys.argv) > 3 else None
d = os.environ["TUNEPACK_TRIAL_DIR"]
ck = os.path.join(os.environ["TUNEPACK_CHECKPOINT_DIR"], "step")
start = int(open(ck).read()) if os.path.exists(ck) else 0
with open(os.path.join(d, "runs.log"), "a") as f:
    f.write("%s %s %d\n" % (os.environ.get("TUNEPACK_RUN_TOKEN", "").split("-")[-1],
                            os.environ["TUNEPACK_ATTEMPT"], start))
for step in range(start + 1, 11):  # ten steps of secs/10, each one checkpointed
    time.sleep(secs / 10)
    with open(ck + ".tmp", "w") as f:
        f.write(str(step))
    os.rename(ck + ".tmp", ck)
while gate and not os.path.exists(gate):
    time.sleep(0.01)
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
rep.write(json.dumps({"step": 10, "x": x}) + "\n")
'''


class SshCluster(E2E):
    @classmethod
    def setUpClass(cls):
        SshHosts.for_class(cls)

    def exp(self, trials, secs, concurrency, hosts="host1, host2", gate=None):
        trial = self.write("trial.py", TRIAL)
        return self.experiment(
            "name: ssh-cluster\n"
            "command: [%s, %s, \"{x}\", \"%s\"%s]\n"
            "metric: {name: x, mode: max}\n"
            "space: {x: {uniform: [0, 1]}}\n"
            "search: {algorithm: random, trials: %d, seed: 3}\n"
            "concurrency: %d\nstop_grace: 1s\nretries: 0\ncheckpoint_root: %s\n"
            "cluster: {ssh: {hosts: [%s], config: %s}}\n"
            % (yaml_str(PY), yaml_str(trial), secs, ", " + yaml_str(gate) if gate else "",
               trials, concurrency,
               yaml_str(self.path("ckpt")), hosts, yaml_str(self.hosts.config)))

    def nodes_of(self, run_dir):
        with self.store(run_dir) as s:
            return {(r["trial"], r["attempt"]): r["node"]
                    for r in s.q("SELECT trial, attempt, node FROM placements")}

    def test_trials_run_on_every_host(self):
        d = self.path("run")
        p = self.run_exp(self.exp(12, 0.4, 4), d)
        self.assertExit(p, 0)
        self.assert_each_completed_once(d, 12)
        nodes = self.nodes_of(d)
        self.assertEqual(set(nodes.values()), {"host1", "host2"}, nodes)
        # The trial's own record agrees with the journal: it ran where it was placed.
        for (tid, attempt), node in nodes.items():
            with open(os.path.join(d, "trials", "%06d" % tid, "runs.log")) as f:
                runs = [l.rsplit(" ", 1)[0] for l in f.read().split("\n") if l]
            self.assertIn("%s %d" % (node, attempt), runs)
        # Checkpoints live under checkpoint_root, one directory per trial.
        self.assertEqual(len(os.listdir(self.path("ckpt", "ssh-cluster"))), 12)

    def test_cut_link_moves_its_trials_and_leaves_no_orphans(self):
        d = self.path("run")
        self.t0 = time.monotonic()
        p = self.start_run(self.exp(10, 2.0, 4), d)
        # Wait until host1 runs something, then cut its link.
        on_host1 = lambda: self.poll_query(
            d, "SELECT trial FROM placements WHERE node = 'host1'")
        self.assertTrue(wait_for(on_host1, 30), "no trial was placed on host1")
        cut_at = time.monotonic()
        self.hosts.cut("host1")
        try:
            out, err = p.communicate(timeout=120)
        finally:
            self.hosts.restore("host1")
        self.assertEqual(p.returncode, 0, err.decode(errors="replace"))
        self.assert_each_completed_once(d, 10)
        nodes = self.nodes_of(d)
        with self.store(d) as s:
            lost = s.q("SELECT detail FROM events WHERE kind = 'agent-lost'")
            interrupted = [t for t in s.trials() if t["attempts"] > 1]
        self.assertTrue(any("host1" in r["detail"] for r in lost), lost)
        # Trials interrupted on host1 were completed by a later attempt on host2.
        self.assertTrue(interrupted, "no trial was interrupted by the cut")
        resumed = 0
        for t in interrupted:
            self.assertEqual(nodes[(t["id"], t["attempts"])], "host2", t)
            with open(os.path.join(d, "trials", "%06d" % t["id"], "runs.log")) as f:
                last = f.read().split("\n")[-2].split()
            resumed += int(last[2]) > 0  # the attempt on host2 went on from the checkpoint
        self.assertGreater(resumed, 0, "no moved trial resumed from its checkpoint")
        # The cut host's agent heard nothing and stopped its trials: none is left.
        token = self.token_of(d)
        self.assertTrue(wait_for(lambda: token_pids(token) == [], 30),
                        "trials of the cut host outlived the run: %s" % token_pids(token))
        with self.store(d) as s:
            lost_at = s.q("SELECT at FROM events WHERE kind = 'agent-lost'")[0]["at"]
            cut_wall = s.q("SELECT min(started_at) AS t FROM trials")[0]["t"]
        per_host = {}
        for node in nodes.values():
            per_host[node] = per_host.get(node, 0) + 1
        print("\n[ssh] 10 trials of 2 s on 2 hosts, host1's link cut at +%.1fs: attempts per "
              "host %s, %d moved, %d resumed from their checkpoint, host1 taken for lost at "
              "+%.1fs, wall %.1fs" % (cut_at - self.t0, per_host, len(interrupted), resumed,
                                      lost_at - cut_wall, time.monotonic() - self.t0),
              file=sys.stderr)

    def test_nodes_join_and_drain_while_it_runs(self):
        # The trials wait for a gate before they report, so the run is still going when the
        # requests come (the test opens the gate once they are answered).
        d, gate = self.path("run"), self.path("gate")
        p = self.start_run(self.exp(14, 1.0, 2, hosts="host1", gate=gate), d)
        self.assertTrue(wait_for(lambda: self.poll_query(d, "SELECT 1 FROM placements"), 30))
        add = self.tp("nodes", "add", "host2", d)
        self.assertExit(add, 0)
        self.assertIn("added host2", add.stdout)
        self.assertTrue(wait_for(lambda: self.poll_query(
            d, "SELECT 1 FROM placements WHERE node = 'host2'"), 30), "host2 got no trial")
        drain = self.tp("nodes", "drain", "host1", d)
        self.assertExit(drain, 0)
        self.assertIn("draining host1", drain.stdout)
        drained_at = self.poll_query(d, "SELECT max(rowid) AS n FROM placements")[0]["n"]
        self.assertExit(self.tp("nodes", "drain", "nosuch", d), 2)
        with open(gate, "w"):
            pass
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err.decode(errors="replace"))
        self.assert_each_completed_once(d, 14)
        with self.store(d) as s:
            late = s.q("SELECT node FROM placements WHERE rowid > ?", drained_at)
            events = [e["kind"] for e in s.q("SELECT kind FROM events WHERE trial = -1")]
        # After the drain (and the placements already decided), only host2 gets trials.
        self.assertTrue(late and all(r["node"] == "host2" for r in late[1:]), late)
        for kind in ("node-added", "node-drain", "node-drained"):
            self.assertIn(kind, events)
        listing = self.tp("nodes", d)
        self.assertExit(listing, 0)
        rows = {l.split()[0]: l.split()[1] for l in listing.stdout.splitlines()[1:]}
        self.assertEqual(rows.get("host1"), "drained", listing.stdout)
        self.assertIn("host2", rows)

    def test_logs_stream_back_when_the_hosts_share_no_storage(self):
        d = self.path("run")
        exp = self.experiment(
            "name: ssh-logs\n"
            "command: [/bin/sh, -c, 'echo out of $0 on $TUNEPACK_TRIAL_DIR; echo err of $0 >&2; "
            "echo x=$0', \"{x}\"]\n"
            "metric: {name: x, mode: max}\nspace: {x: {int: [1, 9]}}\n"
            "search: {algorithm: random, trials: 4, seed: 1}\nconcurrency: 2\n"
            "cluster: {ssh: {hosts: [host1, host2], config: %s, shared: false}}\n"
            % yaml_str(self.hosts.config))
        self.assertExit(self.run_exp(exp, d), 0)
        token = self.token_of(d)
        with self.store(d) as s:
            trials = s.trials()
            root = s.meta()["spool"]
        # The spool is named apart from the run token, which /tmp would show to anyone.
        self.assertNotIn(token, root)
        self.assertEqual(len(trials), 4)
        for t in trials:
            x = json.loads(t["params"])["x"] if isinstance(t["params"], str) else t["params"]["x"]
            tdir = os.path.join(d, "trials", "%06d" % t["id"])
            spool = "%s/trials/%06d" % (root, t["id"])
            self.assertEqual(os.stat(spool).st_mode & 0o777, 0o700)
            with open(os.path.join(tdir, "stdout.log")) as f:
                # Written on the node, in its own spool: here only by streaming back.
                self.assertEqual(f.read(), "out of %d on %s\nx=%d\n" % (x, spool, x))
            with open(os.path.join(tdir, "stderr.log")) as f:
                self.assertEqual(f.read(), "err of %d\n" % x)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
