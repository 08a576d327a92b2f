#!/usr/bin/env python3
"""`tunepack place FILE`: the decision as JSON, the same answer under a node limit, the
read/decide/write split, and a repeated trial id named in the error."""

import json
import random
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, main


def instance(trials, gpus_per_node=4, nodes=2, seed=1, ids=None):
    rng = random.Random(seed)
    return {
        "nodes": [{"name": "n%d" % n, "cpus": 64,
                   "gpus": [{"name": "gpu%d" % g, "memory_mib": 16384}
                            for g in range(gpus_per_node)]} for n in range(nodes)],
        "trials": [{"id": ids[i] if ids else "t%d" % i, "gpus": 1,
                    "memory_mib": rng.randrange(500, 6000),
                    "compute": round(rng.uniform(0.05, 0.6), 3), "cpus": 1}
                   for i in range(trials)],
    }


class PlaceCli(E2E):

    def place(self, inst, *args):
        path = self.write("inst.json", json.dumps(inst))
        return self.tp("place", path, *args)

    def test_json_decision_names_every_trial_once_and_timings_go_to_stderr(self):
        inst = instance(300, ids=["t%d" % i for i in range(299)] + ["quote\"d\\id"])
        r = self.place(inst, "--json", "--timings")
        self.assertExit(r, 0)
        d = json.loads(r.stdout)
        named = [p["trial"] for p in d["placed"]] + d["unplaced"]
        self.assertEqual(sorted(named), sorted(t["id"] for t in inst["trials"]))
        self.assertTrue(d["placed"] and d["unplaced"])
        for p in d["placed"]:
            self.assertIn(p["node"], ("n0", "n1"))
        self.assertRegex(r.stderr, r"read [\d.]+ s, decide [\d.]+ s, write [\d.]+ s")

    def test_optimal_with_a_node_limit_decides_the_same_twice(self):
        inst = instance(40, seed=4)
        runs = [self.place(inst, "--json", "--policy", "optimal", "--node-limit", "5")
                for _ in range(2)]
        for r in runs:
            self.assertExit(r, 0)
        a, b = (json.loads(r.stdout) for r in runs)
        self.assertEqual(a["placed"], b["placed"])
        self.assertEqual(a["unplaced"], b["unplaced"])
        self.assertExit(self.place(inst, "--policy", "optimal", "--node-limit", "0"), 2)

    def test_the_default_policy_is_vpack(self):
        r = self.place(instance(20), "--json")
        self.assertExit(r, 0)
        self.assertEqual(json.loads(r.stdout)["policy"], "vpack")
        self.assertNotIn("optimal", json.loads(r.stdout))

    def test_optimal_says_it_proved_its_answer(self):
        # three demand classes on 8 interchangeable GPUs: the pattern model proves it
        inst = instance(0)
        inst["trials"] = [{"id": "t%d" % i, "gpus": 1, "memory_mib": 2000,
                           "compute": (0.5, 0.3, 0.2)[i % 3], "cpus": 1} for i in range(30)]
        r = self.place(inst, "--policy", "optimal")
        self.assertExit(r, 0)
        self.assertRegex(r.stdout, r"optimal: proved optimal \(pattern model, \d+ variables")
        d = json.loads(self.place(inst, "--policy", "optimal", "--json").stdout)
        self.assertEqual(d["optimal"]["proved"], True)
        self.assertEqual(d["optimal"]["stopped"], None)
        self.assertEqual(d["optimal"]["gap_points"], 0)
        self.assertEqual(d["occupancy"], 1)

    def test_optimal_stopped_by_its_node_limit_gives_its_gap(self):
        r = self.place(instance(40, seed=4), "--policy", "optimal", "--node-limit", "1", "--json")
        self.assertExit(r, 0)
        o = json.loads(r.stdout)["optimal"]
        self.assertEqual((o["proved"], o["stopped"]), (False, "node limit"))
        self.assertGreaterEqual(o["bound"], json.loads(r.stdout)["occupancy"])
        self.assertAlmostEqual(o["gap_points"],
                               100 * (o["bound"] - json.loads(r.stdout)["occupancy"]), places=6)
        t = self.place(instance(40, seed=4), "--policy", "optimal", "--node-limit", "1")
        self.assertRegex(t.stdout, r"optimal: stopped at its node limit: occupancy [\d.]+%, "
                                   r"bound [\d.]+%, gap [\d.]+ points")

    def test_a_repeated_trial_id_is_named(self):
        inst = instance(50, ids=["a%d" % i for i in range(49)] + ["a7"])
        r = self.place(inst, "--json")
        self.assertExit(r, 3)
        self.assertIn("trials[49].id must be unique (trials[7] has it too), got \"a7\"", r.stderr)
        self.assertEqual(r.stdout, "")


if __name__ == "__main__":
    main()
