#!/usr/bin/env python3
"""`tunepack plan EXPERIMENT` and `simulate EXPERIMENT --gpus N` (issue 35): the user's own
experiment file planned from a finished small run's measured trials (the MLP example,
shortened), the answer's shape and consistency (more GPUs never a longer makespan, the
deadline met), `plan --check DIR`, node failures, queue waits and a trial's start-up on its
node, and bad input."""

import json
import os
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import BUILD, E2E, GpuE2E, PY, SRC, main, yaml_str


class PlanExperiment(E2E):

    def mlp(self, trials=6, epochs=3):
        with open(os.path.join(SRC, "examples", "mlp", "experiment.yaml")) as f:
            text = f.read()
        mlp = os.path.join(BUILD, "examples", "mlp_train")
        self.assertTrue(os.access(mlp, os.X_OK), "build examples/mlp_train first")
        for old, new in (("./build/examples/mlp_train", yaml_str(mlp)),
                         ("trials: 40", "trials: %d" % trials),
                         ("epochs: 20", "epochs: %d" % epochs)):
            self.assertEqual(text.count(old), 1, "examples/mlp/experiment.yaml changed: %r" % old)
            text = text.replace(old, new)
        return self.experiment(text)

    def plan(self, *args):
        p = self.tp("plan", *args, "--json")
        self.assertExit(p, 0)
        return json.loads(p.stdout)

    def test_plan_from_a_finished_run_answers_gpus_makespan_best_and_check_compares(self):
        exp = self.mlp()
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        # no plan kept yet: --check plans from the run's first trials, on its concurrency
        c = self.tp("plan", "--check", run_dir, "--json")
        self.assertExit(c, 0)
        c = json.loads(c.stdout)
        self.assertEqual(c["plan"], "recomputed")
        self.assertEqual(c["actual"]["trials_finished"], 6)
        self.assertGreater(c["actual"]["makespan_s"], 0)
        self.assertEqual(c["gpus"], 2)  # the example's concurrency
        self.assertAlmostEqual(c["makespan_error"],
                               c["predicted"]["makespan_s"]["median"] / c["actual"]["makespan_s"]
                               - 1, places=9)
        self.assertIsNotNone(c["actual"]["best"])
        d = self.plan(exp, "--deadline", "1h", "--dir", run_dir, "--seeds", "5")
        self.assertIn("kept in the store of", d["kept"])
        self.assertGreaterEqual(d["gpus"], 1)
        self.assertLessEqual(d["makespan_s"]["median"], 3600)
        ms = d["makespan_s"]
        self.assertTrue(ms["lo"] <= ms["median"] <= ms["hi"], ms)
        self.assertEqual(d["scheduler"], "fifo")
        self.assertEqual(d["sampler"], "random")
        counts = [b["gpus"] for b in d["by_gpus"]]
        self.assertIn(d["gpus"], counts)
        for b in d["by_gpus"]:  # curves were measured: a best is predicted at every count
            self.assertIsNotNone(b["best"], b)
            self.assertTrue(0 <= b["best"]["median"] <= 1, b)
        self.assertTrue(any("measured in" in a for a in d["assumed"]), d["assumed"])
        # more GPUs never take longer (the same seeds, the same draws)
        prev = None
        for g in (1, 2, 3, 6):
            p = self.tp("simulate", exp, "--gpus", g, "--dir", run_dir, "--seeds", "5", "--json")
            self.assertExit(p, 0)
            s = json.loads(p.stdout)
            self.assertEqual(s["trials_finished"]["median"], 6)
            if prev is not None:
                self.assertLessEqual(s["makespan_s"]["median"], prev + 1e-9)
            prev = s["makespan_s"]["median"]
        # plan --check: the plan kept in the store, as it was made, beside what happened
        c = self.tp("plan", "--check", run_dir, "--json")
        self.assertExit(c, 0)
        c = json.loads(c.stdout)
        self.assertEqual(c["plan"], "stored")
        self.assertEqual(c["gpus"], d["gpus"])
        self.assertEqual(c["run_gpus"], 2)
        self.assertEqual(c["predicted"]["makespan_s"], d["makespan_s"])
        self.assertEqual(c["predicted"]["trials_finished"], d["trials_finished"])
        self.assertEqual(c["predicted"]["best"],
                         [b for b in d["by_gpus"] if b["gpus"] == d["gpus"]][0]["best"])
        self.assertEqual(c["assumed"], d["assumed"])
        self.assertEqual(c["actual"]["trials_finished"], 6)
        text = self.tp("plan", "--check", run_dir)
        self.assertExit(text, 0)
        for word in ("against its plan of", "predicted", "actual", "error", "assumed:"):
            self.assertIn(word, text.stdout)
        # --from N plans again from the first N trials, whatever was kept
        c = json.loads(self.tp("plan", "--check", run_dir, "--from", "2", "--json").stdout)
        self.assertEqual((c["plan"], c["planned_from_trials"]), ("recomputed", 2))

    def test_a_plan_made_before_the_run_is_kept_by_the_run_in_its_store(self):
        exp = self.mlp(trials=3, epochs=2)
        # no run yet in runs/<name>: the plan waits there for the run
        p = self.tp("plan", exp, "--deadline", "1h", "--unit-time", "2s", "--seeds", "3")
        self.assertExit(p, 0)
        run_dir = os.path.join(self.tmp, "runs", "mlp-demo")
        self.assertIn("kept in %s/plan.json" % os.path.join("runs", "mlp-demo"), p.stdout)
        with open(os.path.join(run_dir, "plan.json")) as f:
            waiting = json.load(f)
        self.assertEqual(waiting["inputs"]["trials"], 3)
        self.assertEqual(waiting["inputs"]["unit_time_s"], 2)
        self.assertEqual(self.run_exp(exp, run_dir).returncode, 0)
        self.assertFalse(os.path.exists(os.path.join(run_dir, "plan.json")))
        with self.store(run_dir) as s:
            kept = [json.loads(r["doc"]) for r in s.q("SELECT doc FROM plans")]
        self.assertEqual([k["makespan_s"] for k in kept], [waiting["makespan_s"]])
        c = json.loads(self.tp("plan", "--check", run_dir, "--json").stdout)
        self.assertEqual((c["plan"], c["gpus"]), ("stored", waiting["gpus"]))
        self.assertEqual(c["actual"]["trials_finished"], 3)

    def test_without_measurements_times_are_declared_and_the_metric_not_predicted(self):
        exp = self.experiment(
            "name: big\ncommand: [train, --lr, '{lr}', --epochs, '{epochs}']\n"
            "metric: {name: acc, mode: max}\nspace: {lr: {loguniform: [1.0e-4, 1.0]}}\n"
            "search: {algorithm: tpe, trials: 40, seed: 1, scheduler: asha}\n"
            "budget: {name: epochs, min: 1, max: 9, eta: 3}\nresources: {gpus: 2}\n")
        p = self.tp("plan", exp, "--deadline", "2h", "--dir", self.path("none"), "--json")
        self.assertExit(p, 2)  # a --dir that holds no run is named
        d = self.plan(exp, "--deadline", "2h", "--unit-time", "60s", "--seeds", "4")
        self.assertEqual(d["scheduler"], "asha")
        self.assertEqual(d["gpus"] % 2, 0)  # whole trials of two GPUs
        self.assertLessEqual(d["makespan_s"]["median"], 7200)
        for b in d["by_gpus"]:
            self.assertIsNone(b["best"])
        self.assertTrue(any("cannot be predicted" in a for a in d["assumed"]), d["assumed"])
        self.assertTrue(any("--unit-time" in a for a in d["assumed"]), d["assumed"])
        text = self.tp("plan", exp, "--deadline", "2h", "--unit-time", "60s", "--seeds", "4")
        self.assertExit(text, 0)
        self.assertIn("cannot be predicted", text.stdout)
        # a deadline shorter than one job: no count meets it, exit 1, said plainly
        p = self.tp("plan", exp, "--deadline", "30s", "--unit-time", "60s", "--seeds", "2")
        self.assertExit(p, 1)
        self.assertIn("finishes by the deadline", p.stdout)
        # half the GPUs: not faster
        half = max(2, d["gpus"] // 2)
        s = json.loads(self.tp("simulate", exp, "--gpus", half, "--unit-time", "60s",
                               "--seeds", "4", "--json").stdout)
        self.assertGreaterEqual(s["makespan_s"]["median"], d["makespan_s"]["median"] - 1e-9)

    def test_failures_queue_waits_and_start_ups_cost_a_plan_gpus_or_time(self):
        """--node-failures, --queue-wait and --trial-startup, as simulate takes them: an
        experiment's plan on nodes that join after a queue wait and fail needs at least as
        many GPUs, each simulated search takes longer, and the plan says what it assumed; a
        workload's plan takes them too; a bad rate is a usage error that names the option."""
        exp = self.experiment(
            "name: scale\ncommand: [train, --lr, '{lr}', --epochs, '{epochs}']\n"
            "metric: {name: acc, mode: max}\nspace: {lr: {loguniform: [1.0e-4, 1.0]}}\n"
            "search: {algorithm: random, trials: 40, seed: 1, scheduler: asha}\n"
            "budget: {name: epochs, min: 1, max: 9, eta: 3}\n")
        common = ("--unit-time", "60s", "--seeds", "4")
        calm = self.plan(exp, "--deadline", "2h", *common)
        rough = ("--node-failures", "50", "--queue-wait", "10m", "--trial-startup", "20s",
                 "--gpus-per-node", "2")
        d = self.plan(exp, "--deadline", "2h", *common, *rough)
        self.assertIsNotNone(calm["gpus"])
        self.assertIsNotNone(d["gpus"])
        self.assertGreaterEqual(d["gpus"], calm["gpus"])
        said = " ".join(d["assumed"])
        for words in ("nodes of 2 GPUs", "50 times per node-day", "queue wait of 600 s",
                      "20 s later on its node"):
            self.assertIn(words, said)
        self.assertFalse(any("node-day" in a for a in calm["assumed"]), calm["assumed"])
        # the same GPUs: every node joins after its queue wait, every job starts 20 s later
        g = str(calm["gpus"])
        sims = [json.loads(self.tp("simulate", exp, "--gpus", g, *common, *extra,
                                   "--json").stdout)
                for extra in ((), ("--trial-startup", "20s"), ("--queue-wait", "10m"), rough)]
        for s in sims:
            self.assertEqual(s["trials_finished"]["median"], 40)
        base = sims[0]["makespan_s"]["median"]
        for s in sims[1:]:
            self.assertGreater(s["makespan_s"]["median"], base)
        # a workload's plan: the same options, parsed the same way
        w = self.plan("--space", "SP1", "--gpu-type", "a100_80g", "--deadline", "2h")
        wq = self.plan("--space", "SP1", "--gpu-type", "a100_80g", "--deadline", "2h",
                       "--queue-wait", "30m", "--trial-startup", "1s")
        self.assertIsNotNone(w["gpus"])
        self.assertGreater(wq["makespan_s"], 0)
        self.assertGreaterEqual(wq["gpus"], w["gpus"])
        for args in ((exp, "--deadline", "2h", *common), ("--space", "SP1", "--deadline", "2h")):
            p = self.tp("plan", *args, "--node-failures", "often")
            self.assertExit(p, 2)
            self.assertIn("--node-failures must be failures per node-day", p.stderr)
            p = self.tp("plan", *args, "--queue-wait", "soon")
            self.assertExit(p, 2)
            self.assertIn("--queue-wait", p.stderr)

    def test_a_packing_experiment_plans_fewer_gpus_than_the_same_unpacked(self):
        """The experiment's placement: trials of a quarter GPU and 8 GiB that wfd packs on an
        80 GiB GPU plan fewer GPUs than the same trials under one-per-gpu or sharing: none (one
        per GPU, the same plan), and the plan says how many share a GPU, and how much slower."""
        base = ("name: pk\ncommand: [train, --lr, '{lr}', --epochs, '{epochs}']\n"
                "metric: {name: acc, mode: max}\nspace: {lr: {loguniform: [1.0e-4, 1.0]}}\n"
                "search: {algorithm: random, trials: 40, seed: 1, scheduler: asha}\n"
                "budget: {name: epochs, min: 1, max: 9, eta: 3}\n"
                "resources: {gpus: 1, gpu_memory: 8G, gpu_compute: 0.25}\n")
        args = ("--deadline", "30m", "--unit-time", "60s", "--seeds", "4", "--gpu-type",
                "a100_80g")
        plans = {}
        for name, extra in (("packed", "placement: {policy: wfd}\n"),
                            ("alone", "placement: {policy: one-per-gpu}\n"),
                            ("none", "sharing: none\n")):
            plans[name] = self.plan(self.experiment(base + extra, name=name + ".yaml"), *args)
            self.assertIsNotNone(plans[name]["gpus"], plans[name])
        self.assertLess(plans["packed"]["gpus"], plans["alone"]["gpus"])
        self.assertEqual(plans["none"]["gpus"], plans["alone"]["gpus"])
        said = [a for a in plans["packed"]["assumed"] if "share each GPU" in a]
        self.assertTrue(said and "wfd" in said[0], plans["packed"]["assumed"])
        for name in ("alone", "none"):
            self.assertTrue(any("alone on its GPU" in a for a in plans[name]["assumed"]),
                            plans[name]["assumed"])

    def test_bad_input_is_an_error_that_says_what(self):
        exp = self.mlp()
        p = self.tp("simulate", exp)
        self.assertExit(p, 2)
        self.assertIn("--gpus", p.stderr)
        p = self.tp("plan", exp, "--deadline", "1h", "--seeds", "0")
        self.assertExit(p, 2)
        p = self.tp("plan", "--check", self.path("nowhere"))
        self.assertNotEqual(p.returncode, 0)
        p = self.tp("plan", "--check", self.path("nowhere"), "--deadline", "1h")
        self.assertExit(p, 2)
        bad = self.experiment("name: x\ncommand: [true]\nmetric: {name: m, mode: max}\n"
                              "space: {a: {uniform: [1, 0]}}\n", name="bad.yaml")
        p = self.tp("plan", bad, "--deadline", "1h")
        self.assertExit(p, 3)
        self.assertIn("bad.yaml:", p.stderr)
        p = self.tp("plan", "--space", "SP4", "--dir", self.path("x"), "--deadline", "1h")
        self.assertExit(p, 2)


# A trial that takes a moment and reports one value.
QUICK = r'''
import json, os, sys, time
time.sleep(0.2)
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
rep.write(json.dumps({"step": 1, "acc": float(sys.argv[1])}) + "\n")
'''


class PlanOnOtherGpus(GpuE2E):

    def test_gpu_type_scales_the_times_measured_on_the_runs_gpus_by_the_speed_table(self):
        self.fake_gpus([(80 * 1024, {"name": "NVIDIA H100 80GB HBM3"})])
        exp = self.experiment(
            "name: typed\ncommand: [%s, %s, \"{x}\"]\nmetric: {name: acc, mode: max}\n"
            "space: {x: {uniform: [0, 1]}}\nsearch: {algorithm: random, trials: 4, seed: 2}\n"
            "concurrency: 1\nresources: {gpus: 1, gpu_memory: 1G, gpu_compute: 0.2}\n"
            % (yaml_str(PY), yaml_str(self.write("quick.py", QUICK))), name="typed.yaml")
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir, env=self.gpu_env()), 0)

        def on(gpu_type):
            p = self.tp("simulate", exp, "--gpus", "1", "--dir", run_dir, "--seeds", "3",
                        "--json", *(("--gpu-type", gpu_type) if gpu_type else ()))
            self.assertExit(p, 0)
            return json.loads(p.stdout)
        same, h100, a100, h200 = on(None), on("h100_80g"), on("a100_80g"), on("h200_141g")
        ms = lambda d: d["makespan_s"]["median"]
        self.assertAlmostEqual(ms(h100), ms(same), delta=1e-6 * ms(same))
        self.assertAlmostEqual(ms(a100), 2 * ms(h100), delta=0.01 * ms(h100))  # 2.0 / 1.0
        self.assertAlmostEqual(ms(h200), ms(h100) * 2.0 / 2.1, delta=0.01 * ms(h100))
        said = [a for a in a100["assumed"] if "speed table" in a]
        self.assertTrue(said and "NVIDIA H100 80GB HBM3" in said[0], a100["assumed"])
        # a type the table does not know: as fast, and said so
        odd = on("tpu_v9")
        self.assertAlmostEqual(ms(odd), ms(same), delta=1e-6 * ms(same))
        self.assertTrue(any("not in the speed table" in a for a in odd["assumed"]), odd["assumed"])


if __name__ == "__main__":
    main()
