#!/usr/bin/env python3
"""GPU packing end to end (issue 3): trials with declared demands packed onto fake GPUs.

Every check reads what happened from the store's placement records: each attempt's
[start, end) interval (its 'running' event to its ending event) replayed with its placement
row proves that no GPU ever held more than its memory (less the reserve), its compute
((1 + oversubscribe) x C_k for k trials under MPS, the served curve; 1 + oversubscribe
time-sliced) or max_per_gpu trials; and each trial writes the environment it really got
to $TUNEPACK_TRIAL_DIR/env.<attempt>.json, compared with its placement row. No trial ever gets
an MPS thread limit, and one-per-gpu and sharing: none trials get CUDA_VISIBLE_DEVICES alone.
"""

import json
import math
import re
import os
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import (GpuE2E, PY, gpu_timeline, hyperband_nine, main, token_pids, wait_for,
                     yaml_str)

GIB = 1024
RESERVE_MIB = 512
MPS_KEYS = ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")
GPU_KEYS = ("CUDA_VISIBLE_DEVICES",) + MPS_KEYS
# C_k: the busy share a GPU serves k uncapped trials under MPS (src/place/fluid.h), k = 1..4+.
SERVED = (1.0, 1.14, 1.36, 1.44)


def capacity(k, oversubscribe, served):
    """The compute k trials may hold on one GPU: (1 + oversubscribe) x C_k under MPS."""
    return (1.0 + oversubscribe) * (SERVED[min(k, 4) - 1] if served else 1.0)

# The trial: record the GPU environment it got, sleep, die of CUDA OOM on attempt 1 when x is
# the OOM value, else report acc = x.
TRIAL = r'''
import json, os, sys, time
x = int(sys.argv[1]); oom_x = int(sys.argv[2]); sleep_s = float(sys.argv[3])
attempt = os.environ["TUNEPACK_ATTEMPT"]
env = {k: v for k, v in os.environ.items() if k.startswith("CUDA_")}
with open(os.path.join(os.environ["TUNEPACK_TRIAL_DIR"], "env.%s.json" % attempt), "w") as f:
    json.dump(env, f)
time.sleep(sleep_s)
if x == oom_x and attempt == "1":
    sys.stderr.write("Traceback (most recent call last):\n"
                     "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB "
                     "(GPU 0; 79.35 GiB total capacity)\n")
    sys.exit(1)
os.write(int(os.environ["TUNEPACK_REPORT_FD"]), ('{"acc": %d}\n' % x).encode())
'''


class GpuPacking(GpuE2E):

    def setUp(self):
        super().setUp()
        self.trial_py = self.write("trial.py", TRIAL)
        # Two 80 GB and two 40 GB GPUs.
        self.fake_gpus([(80 * GIB, None), (80 * GIB, None), (40 * GIB, None), (40 * GIB, None)])

    def exp(self, trials=24, oom_x=-1, sleep_s=1.0, resources="gpu_memory: 20G, gpu_compute: 0.3",
            placement="policy: wfd, reserve: 512M", extra=""):
        return self.experiment(
            "name: gpupack\n"
            "command: [%s, %s, \"{x}\", \"%d\", \"%s\"]\n"
            "metric: {name: acc, mode: max}\n"
            "space:\n"
            "  x: {grid: [%s]}\n"
            "search: {algorithm: grid, trials: 1}\n"
            "concurrency: %d\n"
            "resources: {gpus: 1, %s}\n"
            "placement: {%s}\n%s"
            % (yaml_str(PY), yaml_str(self.trial_py), oom_x, sleep_s,
               ", ".join(str(i) for i in range(trials)), trials, resources, placement, extra))

    # -- checks ------------------------------------------------------------------------------

    def check_capacity(self, run_dir, reserve_mib=RESERVE_MIB, oversubscribe=0.0,
                       max_per_gpu=0, served=True):
        """Replay every attempt's placement over its interval; assert no GPU was ever over
        memory - reserve, its compute capacity (capacity(): the served curve under MPS when
        served), or max_per_gpu trials. Returns (the most trials any GPU held at once, the most
        compute any GPU held, the placement rows)."""
        with self.store(run_dir) as s:
            moments, rows = gpu_timeline(s)
        mem = {i: g_mib for i, g_mib in enumerate(self.gpu_mib)}
        most, most_compute = 0, 0.0
        for on in moments:
            for g, there in on.items():
                self.assertIn(g, mem, "a trial was placed on GPU %s, which does not exist" % g)
                who = sorted((p["trial"], p["attempt"]) for p in there)
                used = sum(p["memory_mib"] for p in there)
                compute = sum(p["compute"] for p in there)
                self.assertLessEqual(
                    used, mem[g] - reserve_mib,
                    "GPU %d held %d MiB of demand (> %d - %d reserve) at once: %s"
                    % (g, used, mem[g], reserve_mib, who))
                cap = capacity(len(there), oversubscribe, served)
                self.assertLessEqual(
                    compute, cap + 1e-9,
                    "GPU %d held compute %.3f (> %.3f for %d trials, oversubscribe %.2f) at "
                    "once: %s" % (g, compute, cap, len(there), oversubscribe, who))
                if max_per_gpu:
                    self.assertLessEqual(len(there), max_per_gpu,
                                         "GPU %d held %d trials (max_per_gpu %d): %s"
                                         % (g, len(there), max_per_gpu, who))
                most = max(most, len(there))
                most_compute = max(most_compute, compute)
        return most, most_compute, rows

    def trial_env(self, run_dir, trial, attempt):
        path = os.path.join(run_dir, "trials", "%06d" % trial, "env.%d.json" % attempt)
        self.assertTrue(os.path.exists(path), "trial %d attempt %d wrote no %s"
                        % (trial, attempt, path))
        with open(path) as f:
            return json.load(f)

    def check_env(self, run_dir, rows, mps=True):
        """Each attempt got the device and MPS variables its placement row says."""
        for (trial, attempt), p in sorted(rows.items()):
            what = "trial %d attempt %d (placed %s)" % (trial, attempt, p)
            got = self.trial_env(run_dir, trial, attempt)
            self.assertEqual(len(p["gpus"]), 1, what)
            g = p["gpus"][0]
            self.assertEqual(got.get("CUDA_VISIBLE_DEVICES"), self.uuids[g], what)
            if mps:
                self.assertEqual(p["sharing"], "mps", what)
                self.assertEqual(got.get("CUDA_MPS_PIPE_DIRECTORY"),
                                 os.path.join(run_dir, "mps", "gpu%d" % g, "pipe"), what)
                # No thread limit, alone or packed: a cap never paid (docs/gpus.md).
                self.assertNotIn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", got, what)
                self.assertEqual(got.get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
                                 "0=%dM" % math.ceil(p["memory_mib"] * 1.1 - 1e-9), what)
            else:
                for k in MPS_KEYS:
                    self.assertNotIn(k, got, what)
            # The journaled environment is the one the trial saw.
            self.assertEqual(p["env"], {k: v for k, v in got.items() if k in GPU_KEYS}, what)

    def check_no_daemons(self, run_dir):
        left = wait_for(lambda: not self.mps_daemons(run_dir), 10)
        self.assertTrue(left, "MPS daemons of %s still run: %s"
                        % (run_dir, self.mps_daemons(run_dir)))

    # -- tests -------------------------------------------------------------------------------

    def test_24_trials_packed_within_capacity_with_mps_env_and_oom_replacement(self):
        self.gpu_mib = [80 * GIB, 80 * GIB, 40 * GIB, 40 * GIB]
        exp = self.exp(trials=24, oom_x=3)
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir, env=self.gpu_env(mps=True))
        self.assertExit(r, 0)
        most, _, rows = self.check_capacity(run_dir)
        self.assertGreater(most, 1, "no GPU ever held two trials: nothing was packed")
        self.check_env(run_dir, rows, mps=True)

        with self.store(run_dir) as s:
            meta = s.meta()
            self.assertEqual(meta.get("sharing"), "mps")
            self.assertEqual(meta.get("policy"), "wfd")
            trials = s.trials()
            self.assertEqual(len(trials), 24)
            for t in trials:
                self.assertEqual(t["state"], "completed", t)
                self.assertEqual(t["failures"], 0, t)
                self.assertEqual(t["value"], t["params"]["x"], t)
            # Every placed trial is a 20 GB, 0.3 trial until the OOM, then the group grows.
            for (trial, attempt), p in rows.items():
                self.assertEqual(p["compute"], 0.3, p)
                self.assertIn(p["memory_mib"], (20 * GIB, 30 * GIB), p)
                self.assertEqual(p["cpus"], 0, p)

            # The OOM: trial with x = 3 died of CUDA OOM on attempt 1 and was placed again.
            oomer = [t for t in trials if t["params"]["x"] == 3][0]
            tid = oomer["id"]
            self.assertEqual(oomer["attempts"], 2, oomer)
            self.assertEqual(oomer["failures"], 0, oomer)
            ooms = s.events(tid, "oom")
            self.assertEqual(len(ooms), 1, s.events(tid))
            self.assertEqual(ooms[0]["attempt"], 1)
            self.assertIn("20480 MiB", ooms[0]["detail"])
            self.assertIn("30720 MiB", ooms[0]["detail"])
            self.assertEqual(s.events(tid, "failed"), [])
            mine = sorted((a, p["memory_mib"]) for (t, a), p in rows.items() if t == tid)
            # x1.5 (at least +256 MiB, at most 80 GB - reserve): 20480 -> 30720 MiB.
            self.assertEqual(mine, [(1, 20480), (2, 30720)])
            kinds = [(e["attempt"], e["kind"]) for e in s.events(tid)
                     if e["kind"] in ("running", "oom", "completed", "failed")]
            self.assertEqual(kinds, [(1, "running"), (1, "oom"), (2, "running"),
                                     (2, "completed")])
            with open(os.path.join(run_dir, "trials", "%06d" % tid, "stderr.1.log")) as f:
                self.assertIn("CUDA out of memory", f.read())
            # Nobody else died of anything.
            self.assertEqual([e for e in s.events() if e["kind"] == "oom"], ooms)
            token = meta["token"]

        # The re-placement is logged with its old and new memory, and every end says where.
        oom_line = [l for l in r.stdout.splitlines() if "trial %d attempt 1" % tid in l]
        self.assertEqual(len(oom_line), 1, r.stdout)
        self.assertRegex(oom_line[0], r"on \S+:\d: out of GPU memory with 20480 MiB; placing it "
                                      r"again with 30720 MiB")
        self.assertIn("1 placed again after running out of GPU memory", r.stdout)
        ends = [l for l in r.stdout.splitlines() if " completed in " in l]
        self.assertEqual(len(ends), 24)
        self.assertTrue(all(re.search(r" on \S+:\d: ", l) for l in ends), ends)
        # `trials` and `export` say the node and GPU of each trial's last attempt, as placed.
        rows_json = json.loads(self.tp("trials", run_dir, "--json").stdout)
        last = {t: p for (t, a), p in sorted(rows.items())}
        for t in rows_json:
            self.assertEqual(t["where"], "%s:%d" % (last[t["id"]]["node"],
                                                     last[t["id"]]["gpus"][0]))
        self.assertIn("where", self.tp("export", run_dir, "--format", "csv").stdout.splitlines()[0])
        # After the run `gpus DIR` shows no trial of ours and no memory held by them.
        for g in json.loads(self.tp("gpus", run_dir, "--json").stdout)["gpus"]:
            self.assertEqual(g["trials"], [], g)
            self.assertEqual(g["memory_used_mib"], g["foreign_mib"], g)

        status = self.tp("status", run_dir)
        self.assertExit(status, 0)
        gpus_line = [l for l in status.stdout.splitlines() if l.startswith("gpus")]
        self.assertEqual(len(gpus_line), 1, status.stdout)
        self.assertRegex(gpus_line[0], r"^gpus\s+shared by mps, placed by wfd$")

        # One MPS daemon per GPU, started for that GPU and told to quit at the end.
        for i, uuid in enumerate(self.uuids):
            log = os.path.join(run_dir, "mps", "gpu%d" % i, "log", "control.log")
            self.assertTrue(os.path.exists(log), "no MPS daemon log %s" % log)
            with open(log) as f:
                lines = f.read().splitlines()
            starts = [n for n, l in enumerate(lines) if " start " in l]
            self.assertEqual(len(starts), 1, lines)
            self.assertIn("CUDA_VISIBLE_DEVICES=%s " % uuid, lines[starts[0]])
            self.assertTrue(lines and lines[-1].endswith("] quit"),
                            "the MPS daemon of GPU %d was not told to quit: %s" % (i, lines))
        self.check_no_daemons(run_dir)
        self.assertEqual(token_pids(token), [])

    def test_oversubscribe_and_max_per_gpu_bound_what_shares_a_gpu(self):
        self.gpu_mib = [80 * GIB, 80 * GIB, 40 * GIB, 40 * GIB]
        # Compute 0.5 with oversubscribe 0.5 under MPS: four to a GPU (2.0 <= 1.5 x C_4 =
        # 2.16), not five (2.5); time-sliced it would be three (1.5).
        exp = self.exp(trials=12, resources="gpu_memory: 4G, gpu_compute: 0.5",
                       placement="policy: ff, reserve: 512M, oversubscribe: 0.5")
        run_dir = self.path("over")
        r = self.run_exp(exp, run_dir, env=self.gpu_env(mps=True))
        self.assertExit(r, 0)
        most, most_compute, rows = self.check_capacity(run_dir, oversubscribe=0.5)
        self.assertEqual(len(rows), 12)
        self.assertGreater(most_compute, 1.5 + 1e-9,
                           "the served curve over oversubscribe 0.5 was never used (most "
                           "compute %.2f)" % most_compute)
        self.assertEqual(most, 4, "expected four of 0.5 on a GPU under oversubscribe 0.5")
        self.check_env(run_dir, rows, mps=True)
        self.check_no_daemons(run_dir)

        # Small demands, max_per_gpu 2: memory and compute would allow five to a GPU.
        exp = self.exp(trials=12, resources="gpu_memory: 4G, gpu_compute: 0.2",
                       placement="policy: ff, reserve: 512M, max_per_gpu: 2")
        run_dir = self.path("max2")
        r = self.run_exp(exp, run_dir, env=self.gpu_env(mps=True))
        self.assertExit(r, 0)
        most, _, rows = self.check_capacity(run_dir, max_per_gpu=2)
        self.assertEqual(len(rows), 12)
        self.assertEqual(most, 2, "max_per_gpu 2 with room for five: expected pairs")
        self.check_env(run_dir, rows, mps=True)
        self.check_no_daemons(run_dir)

    def test_optimal_in_a_run_journals_its_gap_with_the_time_limit_given(self):
        # Two GPUs per trial: no model of optimal's proves such a round, so each round it
        # places is journaled as a placement-gap event naming placement.time_limit's value.
        self.gpu_mib = [80 * GIB, 80 * GIB, 40 * GIB, 40 * GIB]
        exp = self.exp(trials=4, sleep_s=0.2, resources="gpu_memory: 4G, gpu_compute: 0.4",
                       placement="policy: optimal, reserve: 512M, time_limit: 1.5s")
        with open(exp) as f:
            text = f.read().replace("resources: {gpus: 1,", "resources: {gpus: 2,")
        run_dir = self.path("gap")
        r = self.run_exp(self.experiment(text), run_dir, env=self.gpu_env(mps=True))
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            gaps = s.events(kind="placement-gap")
            self.assertEqual(len(s.events(kind="running")), 4)
        self.assertTrue(gaps, "optimal stopped short of a proof and journaled no gap")
        for e in gaps:
            self.assertEqual(e["trial"], -1)
            self.assertRegex(e["detail"], r"^optimal on a round of \d+ trials \(time limit 1\.5 s\): "
                                          r"(not proved optimal|stopped at its time limit): occupancy "
                                          r"[\d.]+%")
        self.assertIn("optimal on a round of", r.stderr + r.stdout)

        # One GPU per trial: the pattern model proves every round, so no gap is journaled.
        exp = self.exp(trials=8, sleep_s=0.2, resources="gpu_memory: 4G, gpu_compute: 0.4",
                       placement="policy: optimal, reserve: 512M, time_limit: 1.5s")
        run_dir = self.path("proved")
        r = self.run_exp(exp, run_dir, env=self.gpu_env(mps=True))
        self.assertExit(r, 0)
        most, _, rows = self.check_capacity(run_dir)
        self.assertEqual(len(rows), 8)
        with self.store(run_dir) as s:
            self.assertEqual(s.events(kind="placement-gap"), [])

    def test_sharing_none_gives_each_trial_a_gpu_of_its_own(self):
        self.gpu_mib = [80 * GIB, 80 * GIB, 40 * GIB, 40 * GIB]
        exp = self.exp(trials=8, extra="sharing: none\n")
        run_dir = self.path("none")
        r = self.run_exp(exp, run_dir, env=self.gpu_env(mps=True))
        self.assertExit(r, 0)
        most, _, rows = self.check_capacity(run_dir)
        self.assertEqual(len(rows), 8)
        self.assertEqual(most, 1, "sharing: none, yet a GPU held two trials at once")
        self.check_as_outside(run_dir, rows)
        with self.store(run_dir) as s:
            self.assertEqual([t["state"] for t in s.trials()], ["completed"] * 8)
        self.check_no_daemons(run_dir)

    def check_as_outside(self, run_dir, rows):
        """Each attempt ran as it would outside tunepack: its GPU named by
        CUDA_VISIBLE_DEVICES and no CUDA variable else (no MPS pipe, thread or memory limit),
        placed "exclusive", and no MPS daemon was started on any GPU."""
        for (trial, attempt), p in rows.items():
            self.assertEqual(p["sharing"], "exclusive", p)
            got = self.trial_env(run_dir, trial, attempt)  # every CUDA_* variable it saw
            self.assertEqual([k for k in got if k.startswith("CUDA_MPS_")], [], p)
            self.assertEqual(got.get("CUDA_VISIBLE_DEVICES"), self.uuids[p["gpus"][0]], p)
            self.assertEqual(p["env"], {"CUDA_VISIBLE_DEVICES": self.uuids[p["gpus"][0]]}, p)
        for i in range(len(self.uuids)):
            log = os.path.join(run_dir, "mps", "gpu%d" % i, "log", "control.log")
            self.assertFalse(os.path.exists(log), "an MPS daemon was started for GPU %d" % i)

    def test_one_per_gpu_trials_run_as_outside_tunepack(self):
        self.gpu_mib = [80 * GIB, 80 * GIB, 40 * GIB, 40 * GIB]
        exp = self.exp(trials=6, placement="policy: one-per-gpu, reserve: 512M")
        run_dir = self.path("one")
        r = self.run_exp(exp, run_dir, env=self.gpu_env(mps=True))
        self.assertExit(r, 0)
        most, _, rows = self.check_capacity(run_dir, served=False)
        self.assertEqual(len(rows), 6)
        self.assertEqual(most, 1, "one-per-gpu, yet a GPU held two trials at once")
        self.check_as_outside(run_dir, rows)
        self.check_no_daemons(run_dir)

    def test_one_per_gpu_profilers_take_a_gpu_each_too(self):
        # Found on an H200: the profilers of three groups were put beside each other on the one
        # GPU whatever the policy, so one-per-gpu time-sliced them.
        self.gpu_mib = [80 * GIB]
        self.fake_gpus([(80 * GIB, None)])
        exp = self.exp(trials=3, placement="policy: one-per-gpu, reserve: 512M",
                       resources="gpu_memory: auto, gpu_compute: auto, profile_time: 1s",
                       extra="profile_by: [x]\n")
        run_dir = self.path("one-prof")
        r = self.run_exp(exp, run_dir, env=self.gpu_env(mps=True))
        self.assertExit(r, 0)
        most, _, rows = self.check_capacity(run_dir, served=False)
        self.assertEqual(len(rows), 3)
        self.assertEqual(most, 1, "one-per-gpu, yet profilers shared the GPU")
        self.check_as_outside(run_dir, rows)

    def test_a_trial_alone_on_its_gpu_has_no_thread_limit(self):
        self.gpu_mib = [80 * GIB, 80 * GIB, 40 * GIB, 40 * GIB]
        exp = self.exp(trials=1, resources="gpu_memory: 4G, gpu_compute: 0.05")
        run_dir = self.path("alone")
        r = self.run_exp(exp, run_dir, env=self.gpu_env(mps=True))
        self.assertExit(r, 0)
        most, _, rows = self.check_capacity(run_dir)
        self.assertEqual((most, len(rows)), (1, 1))
        self.check_env(run_dir, rows, mps=True)
        got = self.trial_env(run_dir, *next(iter(rows)))
        self.assertNotIn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", got, got)
        self.assertIn("CUDA_MPS_PIPE_DIRECTORY", got, got)
        self.check_no_daemons(run_dir)

    def test_without_mps_control_trials_time_slice_with_no_mps_variables(self):
        self.gpu_mib = [80 * GIB, 80 * GIB, 40 * GIB, 40 * GIB]
        exp = self.exp(trials=10)
        run_dir = self.path("ts")
        r = self.run_exp(exp, run_dir, env=self.gpu_env(mps=False))
        self.assertExit(r, 0)
        most, _, rows = self.check_capacity(run_dir, served=False)
        self.assertEqual(len(rows), 10)
        self.assertGreater(most, 1, "time-slicing still packs: expected a shared GPU")
        for p in rows.values():
            self.assertEqual(p["sharing"], "time-slicing", p)
        self.check_env(run_dir, rows, mps=False)
        with self.store(run_dir) as s:
            sharing = s.meta().get("sharing") or ""
        self.assertTrue(sharing.startswith("time-slicing"), sharing)
        self.assertIn("no nvidia-cuda-mps-control", sharing)
        status = self.tp("status", run_dir)
        self.assertExit(status, 0)
        gpus_line = [l for l in status.stdout.splitlines() if l.startswith("gpus")]
        self.assertEqual(len(gpus_line), 1, status.stdout)
        self.assertRegex(gpus_line[0], r"^gpus\s+shared by time-slicing\b")
        self.assertFalse(os.path.exists(os.path.join(run_dir, "mps", "gpu0", "log",
                                                     "control.log")),
                         "an MPS daemon started though no control program was on PATH")
        self.check_no_daemons(run_dir)


# Hyperband trainer: x = 8 steps slower than the rest by construction, whatever the machine's
# speed. The others write all their epochs' reports in one write: the agent reads them at
# once and sends them as one message, so the run measures a step of microseconds. x = 8
# writes each epoch's report alone and, before the next one, waits until the run has stored
# the last (its row in the store) and then 0.3 s more: the run measures at least 0.3 s a step.
SLOW_EIGHT = r'''
import json, os, sqlite3, sys, time
x = int(sys.argv[1]); budget = int(float(sys.argv[2]))
ck = os.path.join(os.environ["TUNEPACK_CHECKPOINT_DIR"], "ckpt")
start = int(open(ck).read()) if os.path.exists(ck) else 0
trial_dir = os.environ["TUNEPACK_TRIAL_DIR"]
db = os.path.join(os.path.dirname(os.path.dirname(trial_dir)), "tunepack.db")
trial, attempt = int(os.environ["TUNEPACK_TRIAL_ID"]), int(os.environ["TUNEPACK_ATTEMPT"])

def stored(step):
    try:
        with sqlite3.connect("file:%s?mode=ro" % db, uri=True) as c:
            return c.execute("SELECT count(*) FROM metrics WHERE trial = ? AND attempt = ? AND "
                             "step = ?", (trial, attempt, step)).fetchone()[0] > 0
    except sqlite3.Error:
        return False

line = lambda epoch: json.dumps({"step": epoch, "score": x * epoch}) + "\n"
rep = int(os.environ["TUNEPACK_REPORT_FD"])
if x != 8:
    os.write(rep, "".join(line(e) for e in range(start + 1, budget + 1)).encode())
else:
    for epoch in range(start + 1, budget + 1):
        if epoch > start + 1:
            while not stored(epoch - 1):
                time.sleep(0.02)
            time.sleep(0.3)
        os.write(rep, line(epoch).encode())
with open(ck + ".tmp", "w") as f:
    f.write(str(budget))
os.rename(ck + ".tmp", ck)
'''


class ExpectedDuration(GpuE2E):
    """The placer's expected duration in a run: measured seconds per step x the steps the job
    has left. One fake GPU that holds one trial at a time (compute 1.0), wfd, Hyperband over
    epochs 2, 6, 18: rung 1 promotes x = 9, 8, 7 together (best first), each with 4 epochs
    left; x = 8 measured at least 0.3 s a step, the others microseconds (SLOW_EIGHT). Longest
    first, wfd starts x = 8 first; without expected durations the promotion order rules
    (x = 9)."""

    def test_wfd_in_a_run_starts_the_longest_expected_job_first(self):
        trainer = self.write("trainer.py", SLOW_EIGHT)
        self.fake_gpus([(16 * GIB, None)])
        exp = self.experiment(hyperband_nine(
            "expected", trainer, "gpus: 1, gpu_memory: 3G, gpu_compute: 1.0", "policy: wfd"))
        run_dir = self.path("expected")
        r = self.run_exp(exp, run_dir, env=self.gpu_env(mps=True))
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            xs = {t["id"]: t["params"]["x"] for t in s.trials()}
            order = [xs[p["trial"]] for p in s.q("SELECT trial FROM placements ORDER BY id")]
        # rung 0: each of the nine once, then rung 1's three
        self.assertEqual(sorted(order[:9]), list(range(1, 10)), order)
        self.assertEqual(order[9], 8, order)
        self.assertEqual(sorted(order[10:12]), [7, 9], order)


if __name__ == "__main__":
    main()
