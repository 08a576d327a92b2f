"""Trials of several processes (resources.procs_per_node, resources.nodes): each process gets
the torchrun-style environment, the processes of a trial start, report (rank 0 counts) and
stop as one, and a real DistributedDataParallel example (examples/ddp, gloo on the CPU)
really averages gradients: every rank ends with the same parameters from different data."""

import glob
import json
import os
import unittest

from helpers import E2E, PY, main, token_pids, yaml_str

# Each process writes its contract to env.rank<RANK>.json in the trial directory; rank 0
# reports; a rank told to fail (argv[1] == its rank) exits 3 after a moment, while the
# others would run 60 s.
PROC = r'''
import json, os, sys, time
keys = ["WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
        "MASTER_ADDR", "MASTER_PORT", "TUNEPACK_TRIAL_ID", "TUNEPACK_ATTEMPT"]
env = {k: os.environ.get(k) for k in keys}
root = os.environ["TUNEPACK_CHECKPOINT_DIR"].rsplit("/", 1)[0]
with open(os.path.join(root, "env.rank%s.json" % env["RANK"]), "w") as f:
    json.dump(env, f)
fail = int(sys.argv[1])
if int(env["RANK"]) == fail:
    time.sleep(0.5)
    sys.exit(3)
if fail >= 0:
    time.sleep(60)
if env["RANK"] == "0":
    os.write(int(os.environ["TUNEPACK_REPORT_FD"]), b'{"v": 1}\n')
'''


class MultiProcess(E2E):
    def exp(self, fail=-1, extra=""):
        proc = self.write("proc.py", PROC)
        return self.experiment(
            "name: mp\ncommand: [%s, %s, \"%d\"]\nmetric: {name: v, mode: max}\n"
            "search: {algorithm: random, trials: 1}\nresources: {procs_per_node: 3}\n"
            "stop_grace: 1s\n%s" % (yaml_str(PY), yaml_str(proc), fail, extra))

    def envs(self, run_dir):
        out = {}
        for path in glob.glob(os.path.join(run_dir, "trials", "000000", "env.rank*.json")):
            with open(path) as f:
                e = json.load(f)
            out[int(e["RANK"])] = e
        return out

    def test_each_process_gets_the_torchrun_contract(self):
        d = self.path("run")
        self.assertExit(self.run_exp(self.exp(), d), 0)
        envs = self.envs(d)
        self.assertEqual(sorted(envs), [0, 1, 2])
        port = envs[0]["MASTER_PORT"]
        self.assertTrue(port and int(port) > 0, envs[0])
        for rank, e in envs.items():
            self.assertEqual(e["WORLD_SIZE"], "3")
            self.assertEqual(e["LOCAL_RANK"], str(rank))
            self.assertEqual(e["LOCAL_WORLD_SIZE"], "3")
            self.assertEqual(e["NODE_RANK"], "0")
            self.assertEqual(e["MASTER_PORT"], port)
            self.assertEqual(e["MASTER_ADDR"], envs[0]["MASTER_ADDR"])
            self.assertEqual(e["TUNEPACK_TRIAL_ID"], "0")
        # Rank 0 is the trial; the others keep their logs in rank<k>/.
        for k in (1, 2):
            self.assertTrue(os.path.exists(os.path.join(d, "trials", "000000", "rank%d" % k,
                                                        "stdout.log")))
        with self.store(d) as s:
            self.assertEqual(s.trial(0)["state"], "completed")

    def test_a_failing_rank_stops_the_others_and_fails_the_attempt(self):
        d = self.path("run")
        p = self.run_exp(self.exp(fail=2), d)
        self.assertExit(p, 5)  # no trial completed
        with self.store(d) as s:
            t = s.trial(0)
        self.assertEqual(t["state"], "failed", t)
        self.assertIn("exited with code 3", t["error"])
        # The others (60 s sleepers) were stopped with it: nothing of the run is left.
        self.assertEqual(token_pids(self.token_of(d)), [])

    def test_more_nodes_than_the_cluster_has_is_refused(self):
        d = self.path("run")
        exp = self.exp()
        with open(exp) as f:
            text = f.read().replace("{procs_per_node: 3}", "{nodes: 2}")
        with open(exp, "w") as f:
            f.write(text)
        p = self.run_exp(exp, d)
        self.assertExit(p, 3)
        self.assertIn("each trial spans 2 nodes", p.stderr)


class DistributedDataParallel(E2E):
    def test_ddp_ranks_end_with_the_same_parameters_from_different_data(self):
        d = self.path("run")
        exp = self.ddp_experiment("{procs_per_node: 2}")
        self.assertExit(self.run_exp(exp, d, timeout=240), 0)
        self.assert_ranks_synchronised()
        with self.store(d) as s:
            t = s.trial(0)
        self.assertEqual(t["state"], "completed")
        self.assertGreater(t["value"], 0.3)  # well above chance (0.1) after 2 epochs
        self.assertEqual(json.loads(t["metrics"])["world_size"], 2)


if __name__ == "__main__":
    main()
