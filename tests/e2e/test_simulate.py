#!/usr/bin/env python3
"""`tunepack simulate` and `tunepack plan` on the study workload: the study command as
written, CSV and SVG outputs (the SVG parsed as XML), errors with exit codes, and the default
workload file when no FILE is given."""

import csv
import json
import os
import sys
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import SRC, E2E, main

SP = os.path.join("data", "workloads", "sp.yaml")  # relative to the repository root


class Simulate(E2E):

    def test_study_command_prints_makespan_bound_and_trials(self):
        p = self.tp("simulate", SP, "--space", "SP4", "--cluster", "homog_16", "--policy", "wfd",
                    "--json", cwd=SRC)
        self.assertExit(p, 0)
        d = json.loads(p.stdout)
        self.assertEqual(d["trials"], 384)
        self.assertLessEqual(d["lower_bound_s"], d["makespan_s"])
        self.assertAlmostEqual(d["ratio"], d["makespan_s"] / d["lower_bound_s"], places=6)
        base = json.loads(self.tp("simulate", SP, "--space", "SP4", "--cluster", "homog_16",
                                  "--policy", "one-per-gpu", "--json", cwd=SRC).stdout)
        self.assertGreaterEqual(base["makespan_s"] / d["makespan_s"], 2.7)

    def test_node_failures_requeue_trials_and_every_trial_still_ends_once(self):
        out_csv = self.path("f.csv")
        args = ("simulate", SP, "--space", "SP4", "--cluster", "homog_16", "--policy", "wfd",
                "--node-failures", "200", "--queue-wait", "30s", "--trial-startup", "12ms",
                "--seed", "1")
        p = self.tp(*args, "--json", "--csv", out_csv, cwd=SRC)
        self.assertExit(p, 0)
        d = json.loads(p.stdout)
        self.assertGreaterEqual(d["node_failures"], 1)
        self.assertGreaterEqual(d["requeued"], 1)
        self.assertEqual(d["trials"], 384)
        with open(out_csv) as f:
            ids = sorted(int(r["trial"]) for r in csv.DictReader(f))
        self.assertEqual(ids, list(range(384)))  # each ended once, the requeued ones too
        again = json.loads(self.tp(*args, "--json", cwd=SRC).stdout)  # the seed decides
        for k in ("makespan_s", "node_failures", "requeued", "gpu_hours", "rounds"):
            self.assertEqual(again[k], d[k], k)
        text = self.tp(*args, cwd=SRC)
        self.assertExit(text, 0)
        self.assertIn("nodes failed", text.stdout)
        self.assertIn("GPU-hours", text.stdout)
        bad = self.tp("simulate", SP, "--space", "SP4", "--node-failures", "lots", cwd=SRC)
        self.assertExit(bad, 2)
        self.assertIn("--node-failures must be failures per node-day", bad.stderr)

    def test_csv_and_svg_describe_every_trial(self):
        out_csv, out_svg = self.path("t.csv"), self.path("t.svg")
        p = self.tp("simulate", SP, "--space", "SP4", "--cluster", "homog_4", "--csv", out_csv,
                    "--svg", out_svg, cwd=SRC)
        self.assertExit(p, 0)
        self.assertIn("makespan", p.stdout)
        with open(out_csv) as f:
            rows = list(csv.DictReader(f))
        self.assertEqual(len(rows), 384)
        self.assertEqual(sorted(int(r["trial"]) for r in rows), list(range(384)))
        for r in rows:
            self.assertLess(float(r["start_s"]), float(r["end_s"]))
        root = ET.parse(out_svg).getroot()
        self.assertEqual(root.tag, "{http://www.w3.org/2000/svg}svg")
        titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
        self.assertEqual(sum(1 for t in titles if t.startswith("trial ")), 384)
        texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
        self.assertIn("resnet34", texts)  # the legend

    def test_unknown_cluster_and_space_say_what_there_is(self):
        p = self.tp("simulate", SP, "--space", "SP4", "--cluster", "homog16", cwd=SRC)
        self.assertExit(p, 2)
        self.assertIn('did you mean "homog_16"', p.stderr)
        p = self.tp("simulate", SP, "--space", "SP5", cwd=SRC)
        self.assertExit(p, 2)
        self.assertIn('no space "SP5"', p.stderr)
        p = self.tp("simulate", SP, "--policy", "wfdd", cwd=SRC)
        self.assertExit(p, 2)
        self.assertIn('did you mean "wfd"', p.stderr)
        bad = self.write("bad.yaml", "gpu_types: [1, 2]\n")
        p = self.tp("simulate", bad)
        self.assertExit(p, 3)
        self.assertIn("bad.yaml:", p.stderr)

    def test_no_file_uses_the_default_workload(self):
        # run from an empty directory, so nothing relative to the working directory helps
        env = {"TUNEPACK_DATA_DIR": None}
        p = self.tp("simulate", "--space", "SP3", "--cluster", "homog_4", "--json", env=env)
        self.assertExit(p, 0)
        q = self.tp("simulate", SP, "--space", "SP3", "--cluster", "homog_4", "--json", cwd=SRC)
        got, want = json.loads(p.stdout), json.loads(q.stdout)
        for d in (got, want):
            d.pop("wall_s")  # how long the simulation took, not what it found
        self.assertEqual(got, want)
        p = self.tp("plan", "--space", "SP3", "--deadline", "1h", "--json", env=env)
        self.assertExit(p, 0)
        self.assertIsNotNone(json.loads(p.stdout)["gpus"])

    def test_tunepack_data_dir_overrides_the_default_and_errors_name_it(self):
        data = self.path("data")
        os.makedirs(os.path.join(data, "workloads"))
        # a model with a bad source on line 4, column 104
        self.write(os.path.join("data", "workloads", "sp.yaml"),
                   "gpu_types: {g: {memory_mib: 100, speed: 1}}\n"
                   "clusters: {c: {nodes: 1, gpus_per_node: 1, gpu_type: g, cpus_per_node: 1}}\n"
                   "models:\n"
                   "  m: {b_ref: 8, mem_base_mib: 1, mem_per_sample_mib: 1, time_ref_s: 1, "
                   "util_ref: 0.5, cpus: 1, source: guess}\n"
                   "spaces: {}\n")
        for verb in (["simulate"], ["plan", "--space", "SP4", "--deadline", "30m"]):
            p = self.tp(*verb, env={"TUNEPACK_DATA_DIR": data})
            self.assertExit(p, 3)
            self.assertIn(os.path.join(data, "workloads", "sp.yaml") + ":4:104: "
                          "models.m.source must be assumed or measured", p.stderr)
        p = self.tp("simulate", env={"TUNEPACK_DATA_DIR": self.path("nowhere")})
        self.assertExit(p, 1)
        self.assertIn(self.path("nowhere", "workloads", "sp.yaml") + ": No such file or directory",
                      p.stderr)
        self.assertNotIn("Sanitizer", p.stderr)

    def test_plan_with_neither_file_nor_space_is_a_usage_error_naming_both(self):
        p = self.tp("plan", "--deadline", "24h")
        self.assertExit(p, 2)
        self.assertIn("an experiment or workload FILE", p.stderr)
        self.assertIn("--space NAME", p.stderr)
        self.assertEqual(p.stdout, "")

    def test_bad_file_exits_nonzero_with_its_location(self):
        bad = self.write("bad.yaml", "gpu_types:\n  g: {memory_mib: lots, speed: 1}\n")
        for verb in (["simulate", bad], ["plan", bad, "--deadline", "30m"]):
            p = self.tp(*verb)
            self.assertExit(p, 3)
            self.assertIn(bad + ":2:19: gpu_types.g.memory_mib must be a number", p.stderr)
        p = self.tp("simulate", self.path("missing.yaml"))
        self.assertExit(p, 1)
        self.assertIn(self.path("missing.yaml") + ": No such file or directory", p.stderr)

    def test_contention_capped_replays_the_h200_packing_check_and_served_is_faster(self):
        # bench/gpu/h200-packing.workload.yaml, profiled as the run did (docs/gpu-checks.md):
        # with caps each group's profiler ran alone, 51.0 s measured and 50.6 s simulated;
        # without them both groups' profilers run at once
        wl = os.path.join("bench", "gpu", "h200-packing.workload.yaml")
        args = ("simulate", wl, "--policy", "wfd", "--profile", "12s", "--json")
        capped = self.tp(*args, "--contention", "capped", cwd=SRC)
        self.assertExit(capped, 0)
        self.assertAlmostEqual(json.loads(capped.stdout)["makespan_s"], 50.6, delta=0.05)
        served = self.tp(*args, cwd=SRC)
        self.assertExit(served, 0)
        self.assertLess(json.loads(served.stdout)["makespan_s"], 0.6 * 50.6)
        p = self.tp("simulate", wl, "--contention", "uncapped", cwd=SRC)
        self.assertExit(p, 2)
        self.assertIn("served, capped", p.stderr)

    def test_plan_finds_the_fewest_gpus_for_a_deadline(self):
        p = self.tp("plan", SP, "--space", "SP4", "--gpu-type", "a100_80g", "--deadline", "30m",
                    "--json", cwd=SRC)
        self.assertExit(p, 0)
        d = json.loads(p.stdout)
        self.assertLessEqual(d["makespan_s"], 1800)
        n = d["gpus"]
        # one GPU fewer misses the deadline
        q = self.tp("plan", SP, "--space", "SP4", "--gpu-type", "a100_80g", "--deadline", "30m",
                    "--max-gpus", str(n - 1), "--json", cwd=SRC)
        self.assertExit(q, 1)
        self.assertIsNone(json.loads(q.stdout)["gpus"])
        p = self.tp("plan", SP, "--deadline", "soon", cwd=SRC)
        self.assertExit(p, 2)
        self.assertIn("--deadline", p.stderr)
        p = self.tp("plan", SP, "--deadline", "1m", cwd=SRC)  # the longest trial alone is longer
        self.assertExit(p, 1)
        self.assertIn("no number of", p.stdout)


if __name__ == "__main__":
    main()
