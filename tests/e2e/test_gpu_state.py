#!/usr/bin/env python3
"""What tunepack learns from the GPUs (fake NVML) and how it acts on it: a lost GPU, a foreign
process, measured (`auto`) demand, the experiment's GPU view, a machine without the GPUs asked
for, and MPS daemons left behind by a killed run."""

import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import (GpuE2E, PY, attempt_intervals, children_of, cmdline, gpu_timeline, main,
                     token_pids, wait_for, yaml_str)

GIB = 1024

# The trial: optionally pretend to use a GPU (a process file of its own pid for the fake
# NVML), wait until the release file exists (or sleep_s passes), report acc = x.
TRIAL = r"""
import json, os, sys, time
x = int(sys.argv[1]); sleep_s = float(sys.argv[2]); release = sys.argv[3]
proc_dir = sys.argv[4]; uuids = json.loads(sys.argv[5]); used_mib = int(sys.argv[6])
sm_util = int(sys.argv[7])
end = time.monotonic() + sleep_s
if used_mib:
    gpu = uuids.index(os.environ["CUDA_VISIBLE_DEVICES"])
    tmp = os.path.join(proc_dir, ".%d.tmp" % os.getpid())
    with open(tmp, "w") as f:
        json.dump({"gpu": gpu, "used_mib": used_mib, "sm_util": sm_util}, f)
    os.rename(tmp, os.path.join(proc_dir, "%d.json" % os.getpid()))
while time.monotonic() < end and not (release and os.path.exists(release)):
    time.sleep(0.05)
os.write(int(os.environ["TUNEPACK_REPORT_FD"]), ('{"acc": %d}\n' % x).encode())
"""

# A trial that starts as a PyTorch one does and then trains, until its release file exists:
# nothing on the GPU for a second (imports); a CUDA context whose memory grows (300 MiB + 100
# MiB a second) at SM 0 or 5% for startup_s seconds (the model built, data loaded); then
# training at 1200 MiB and SM 39-41% (mean 40), reporting a step each half second from the
# first. With mps it is an MPS client as NVML shows one: its own sm_util reads 0, and its use
# shows in its GPU's utilisation instead (the fake NVML's gpu_busy).
TRAINING = r"""
import json, os, sys, time
startup_s = float(sys.argv[1]); release = sys.argv[2]; proc_dir = sys.argv[3]
gpu = json.loads(sys.argv[4]).index(os.environ["CUDA_VISIBLE_DEVICES"]); mps = sys.argv[5] == "1"
def on_gpu(mib, sm):
    tmp = os.path.join(proc_dir, ".%d.tmp" % os.getpid())
    with open(tmp, "w") as f:
        json.dump({"gpu": gpu, "used_mib": mib, "sm_util": 0 if mps else sm,
                   "gpu_busy": sm if mps else 0}, f)
    os.rename(tmp, os.path.join(proc_dir, "%d.json" % os.getpid()))
time.sleep(1)
start = time.monotonic()
k = 0
while time.monotonic() - start < startup_s:
    on_gpu(300 + int(100 * (time.monotonic() - start)), 5 * (k % 2))
    k += 1
    time.sleep(0.2)
step = 0
while not os.path.exists(release) and time.monotonic() - start < 300:
    on_gpu(1200, (39, 40, 41)[step % 3])
    step += 1
    os.write(int(os.environ["TUNEPACK_REPORT_FD"]), ('{"step": %d, "acc": 1}\n' % step).encode())
    time.sleep(0.5)
"""
STARTUP_S = 6


# A trial of four profile_by groups (issue 31, profiling does not serialise): a trial of model a
# is on the GPU at once; one of b, c or d shows on the GPU only once the file `go` exists, so
# their profiles cannot end before the test has seen them all running. Every trial then waits
# for the file `end`, reporting acc = x as it goes.
GROUPS_TRIAL = r'''
import json, os, sys, time
model = sys.argv[1]; x = int(sys.argv[2]); proc_dir = sys.argv[3]; uuids = json.loads(sys.argv[4])
go = sys.argv[5]; end = sys.argv[6]
def wait(path):
    while not os.path.exists(path):
        time.sleep(0.05)
if model != "a":
    wait(go)
gpu = uuids.index(os.environ["CUDA_VISIBLE_DEVICES"])
tmp = os.path.join(proc_dir, ".%d.tmp" % os.getpid())
with open(tmp, "w") as f:
    json.dump({"gpu": gpu, "used_mib": 3000 if model == "a" else 2000, "sm_util": 20}, f)
os.rename(tmp, os.path.join(proc_dir, "%d.json" % os.getpid()))
step = 0
while not os.path.exists(end):  # training: a report now and then, as a trainer does
    step += 1
    os.write(int(os.environ["TUNEPACK_REPORT_FD"]), ('{"step": %d, "acc": %d}\n' % (step, x)).encode())
    time.sleep(0.2)
os.write(int(os.environ["TUNEPACK_REPORT_FD"]), ('{"step": %d, "acc": %d}\n' % (step + 1, x)).encode())
'''

# A trial of a profile_by group (issue 31, a group's other trials start beside its profiler):
# nothing on the GPU until the file `go` exists (so no profile can end before the test lets it),
# then `mib` MiB at SM 20% on its GPU, reporting steps until the file `end-<x>` exists.
SIBLINGS_TRIAL = r'''
import json, os, sys, time
model = sys.argv[1]; x = int(sys.argv[2]); proc_dir = sys.argv[3]; uuids = json.loads(sys.argv[4])
go = sys.argv[5]; end = sys.argv[6] + "-%d" % x; mib = int(sys.argv[7])
while not os.path.exists(go):
    time.sleep(0.05)
gpu = uuids.index(os.environ["CUDA_VISIBLE_DEVICES"])
tmp = os.path.join(proc_dir, ".%d.tmp" % os.getpid())
with open(tmp, "w") as f:
    json.dump({"gpu": gpu, "used_mib": mib, "sm_util": 20}, f)
os.rename(tmp, os.path.join(proc_dir, "%d.json" % os.getpid()))
step = 0
while not os.path.exists(end):
    step += 1
    os.write(int(os.environ["TUNEPACK_REPORT_FD"]), ('{"step": %d, "acc": %d}\n' % (step, x)).encode())
    time.sleep(0.2)
os.write(int(os.environ["TUNEPACK_REPORT_FD"]), ('{"step": %d, "acc": %d}\n' % (step + 1, x)).encode())
'''


class GpuState(GpuE2E):

    def setUp(self):
        super().setUp()
        self.trial_py = self.write("trial.py", TRIAL)
        self.training_py = self.write("training.py", TRAINING)
        self.release = self.path("release")

    def exp(self, trials=6, sleep_s=1.0, resources="gpu_memory: 20G, gpu_compute: 0.3",
            used_mib=0, sm_util=0, release=False, extra="", concurrency=None):
        argv = [PY, self.trial_py, "{x}", str(sleep_s), self.release if release else "",
                self.proc_dir, json.dumps(self.uuids).replace("{", "{{").replace("}", "}}"),
                str(used_mib), str(sm_util)]
        return self.experiment(
            "name: gpustate\n"
            "command: [%s]\n"
            "metric: {name: acc, mode: max}\n"
            "space:\n"
            "  model: small\n"
            "  x: {grid: [%s]}\n"
            "search: {algorithm: grid, trials: 1}\n"
            "concurrency: %d\n"
            "resources: {gpus: 1, %s}\n"
            "placement: {policy: wfd, reserve: 512M}\n%s"
            % (", ".join(yaml_str(a) for a in argv), ", ".join(str(i) for i in range(trials)),
               concurrency or trials, resources, extra))

    def gpus_json(self, run_dir):
        r = self.tp("gpus", run_dir, "--json")
        self.assertExit(r, 0)
        return json.loads(r.stdout)

    # -- health and foreign use --------------------------------------------------------------

    def test_a_lost_gpu_gets_no_trials(self):
        self.fake_gpus([(80 * GIB, None), (80 * GIB, {"error": "lost"}), (80 * GIB, None),
                        (80 * GIB, None)])
        exp = self.exp(trials=12)
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir, env=self.gpu_env())
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            _, rows = gpu_timeline(s)
            self.assertEqual([t["state"] for t in s.trials()], ["completed"] * 12)
            self.assertEqual(len(rows), 12)
            on_lost = [p for p in rows.values() if 1 in p["gpus"]]
            self.assertEqual(on_lost, [], "trials were placed on the lost GPU 1")
            self.assertEqual({p["gpus"][0] for p in rows.values()}, {0, 2, 3})
            unhealthy = s.events(kind="gpu-unhealthy")
        view = {g["index"]: g for g in self.gpus_json(run_dir)["gpus"]}
        self.assertFalse(view[1]["healthy"], view[1])
        self.assertTrue(view[0]["healthy"], view[0])
        # docs/gpus.md: a GPU whose NVML calls fail gets no new trials (event gpu-unhealthy),
        # also when it is lost before the run starts: the journal must say why it is unused.
        self.assertEqual(len(unhealthy), 1, "no gpu-unhealthy event for the lost GPU 1: %s"
                         % unhealthy)
        self.assertIn("GPU 1", unhealthy[0]["detail"] or "")

    def test_a_gpu_lost_while_running_gets_no_new_trials(self):
        self.fake_gpus([(80 * GIB, None), (80 * GIB, None)])
        exp = self.exp(trials=16, sleep_s=1.0)
        run_dir = self.path("run")
        p = self.start_run(exp, run_dir, env=self.gpu_env())

        def both_used():
            rows = self.poll_query(run_dir, "SELECT DISTINCT gpus FROM placements")
            return rows is not None and len(rows) == 2
        self.assertTrue(wait_for(both_used, 30), "trials should run on both GPUs")
        # GPU 1 is lost now (the fake re-reads its JSON on every call; replace it whole).
        with open(self.nvml_json) as f:
            state = json.load(f)
        state["gpus"][1]["error"] = "lost"
        tmp = self.nvml_json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f)
        os.rename(tmp, self.nvml_json)
        try:
            p.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.fail("the run did not end")
        self.assertEqual(p.returncode, 0, p.stderr.read())
        with self.store(run_dir) as s:
            self.assertEqual([t["state"] for t in s.trials()], ["completed"] * 16)
            unhealthy = s.events(kind="gpu-unhealthy")
            self.assertEqual(len(unhealthy), 1, unhealthy)
            self.assertIn("GPU 1", unhealthy[0]["detail"])
            _, rows = gpu_timeline(s)
            running = {(e["trial"], e["attempt"]): e["id"] for e in s.events(kind="running")}
        after = [p for k, p in rows.items() if running[k] > unhealthy[0]["id"]]
        self.assertTrue(after, "no trial started after GPU 1 was lost: nothing to check")
        self.assertEqual([p for p in after if 1 in p["gpus"]], [],
                         "trials were placed on GPU 1 after it was lost")

    def test_foreign_process_keeps_trials_off_a_full_gpu(self):
        # A process that is not ours holds 70 GB of GPU 0's 80 GB: a 20 GB trial cannot fit.
        foreign = subprocess.Popen(["sleep", "120"])
        self.procs.append(foreign)
        self.fake_gpus([(80 * GIB, None), (80 * GIB, None)],
                       processes=[{"gpu": 0, "pid": foreign.pid, "used_mib": 70 * GIB,
                                   "sm_util": 40}])
        exp = self.exp(trials=6, sleep_s=30, release=True, used_mib=1000, sm_util=10)
        run_dir = self.path("run")
        p = self.start_run(exp, run_dir, env=self.gpu_env())

        # While it runs, `tunepack gpus DIR --json` shows the foreign process and our trials.
        def snapshot_with_trials():
            try:
                v = self.gpus_json(run_dir)
            except (AssertionError, ValueError):
                return None
            return v if any(g.get("trials") for g in v.get("gpus", [])) else None
        view = wait_for(snapshot_with_trials, 30, interval=0.3)
        self.assertTrue(view, "`tunepack gpus DIR --json` never listed our trials")
        running = self.poll_query(run_dir, "SELECT id FROM trials WHERE state = 'running'")
        gpus = {g["index"]: g for g in view["gpus"]}
        self.assertEqual(sorted(gpus), [0, 1])
        self.assertEqual(gpus[0]["trials"], [], "a trial runs beside the 70 GB foreign process")
        self.assertGreaterEqual(gpus[0]["foreign_mib"], 70 * GIB, gpus[0])
        self.assertIn(foreign.pid, gpus[0]["foreign"])
        self.assertTrue(gpus[1]["trials"])
        self.assertTrue(set(gpus[1]["trials"]) <= {r["id"] for r in running} | set(range(6)),
                        (gpus[1], running))
        self.assertEqual(gpus[1]["foreign_mib"], 0, gpus[1])

        with open(self.release, "w"):
            pass
        try:
            p.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.fail("the run did not end after the release")
        self.assertEqual(p.returncode, 0, p.stderr.read())
        with self.store(run_dir) as s:
            _, rows = gpu_timeline(s)
            self.assertEqual([t["state"] for t in s.trials()], ["completed"] * 6)
        self.assertEqual(len(rows), 6)
        self.assertEqual({p["gpus"][0] for p in rows.values()}, {1},
                         "20 GB trials were placed on GPU 0, where only 10 GB are free")

    def test_the_mps_server_of_our_daemons_is_not_foreign(self):
        # Seen on an H200: NVML lists nvidia-cuda-mps-server (66 MiB) beside the MPS clients;
        # it is ours while we run MPS daemons, not a foreign process to subtract. The stand-in
        # is a process whose command name is the real one (the kernel keeps 15 characters).
        server = self.path("nvidia-cuda-mps-server")
        os.symlink(shutil.which("sleep"), server)
        mps = subprocess.Popen([server, "120"])
        self.procs.append(mps)
        self.fake_gpus([(80 * GIB, None)],
                       processes=[{"gpu": 0, "pid": mps.pid, "used_mib": 66, "sm_util": 0}])
        exp = self.exp(trials=2, sleep_s=30, release=True, used_mib=1000, sm_util=10,
                       resources="gpu_memory: 4G, gpu_compute: 0.3")
        run_dir = self.path("run")
        p = self.start_run(exp, run_dir, env=self.gpu_env())

        def both_sampled():
            # (polled from the run's start: until its store has a schema, `gpus` says so, exit 4)
            r = self.tp("gpus", run_dir, "--json") if os.path.exists(run_dir) else None
            view = json.loads(r.stdout) if r is not None and r.returncode == 0 else None
            g = view and view.get("gpus") and view["gpus"][0]
            return g if g and len(g.get("trials", [])) == 2 else None
        g = wait_for(both_sampled, 30, interval=0.3)
        with open(self.release, "w"):
            pass
        self.assertTrue(g, "`tunepack gpus DIR --json` never listed both trials")
        self.assertEqual(g["foreign_mib"], 0, g)
        self.assertNotIn(mps.pid, g["foreign"], g)
        p.wait(timeout=90)
        self.assertEqual(p.returncode, 0, p.stderr.read())

    # -- auto demand ---------------------------------------------------------------------------

    def run_auto(self, trials, **kw):
        """Run `trials` trials of one profile_by group on two 80 GB GPUs with gpu_memory and
        gpu_compute auto (profile_time 2s, profile_wait: the group's other trials wait for its
        profile); assert all completed; return the run directory."""
        self.fake_gpus([(80 * GIB, None), (80 * GIB, None)])
        exp = self.exp(trials=trials, extra="profile_by: [model]\n",
                       resources="gpu_memory: auto, gpu_compute: auto, profile_time: 2s, "
                                 "profile_wait: true", **kw)
        run_dir = self.path("run")
        r = self.run_exp(exp, run_dir, env=self.gpu_env())
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            self.assertEqual([t["state"] for t in s.trials()], ["completed"] * trials)
        return run_dir

    def test_auto_demand_is_profiled_then_packed(self):
        run_dir = self.run_auto(6, sleep_s=3.5, used_mib=5000, sm_util=25)
        with self.store(run_dir) as s:
            profiles = s.q("SELECT * FROM profiles")
            self.assertEqual(len(profiles), 1, profiles)
            prof = profiles[0]
            self.assertEqual(json.loads(prof["key"]), {"model": "small"})
            self.assertEqual(prof["memory_mib"], 5000, prof)
            self.assertAlmostEqual(prof["compute"], 0.25, delta=0.02, msg=prof)
            self.assertGreaterEqual(prof["samples"], 1, prof)
            profiled = s.events(kind="profiled")
            self.assertEqual(len(profiled), 1, profiled)
            profiler = profiled[0]["trial"]
            self.assertIn("5000", profiled[0]["detail"] or "")
            _, rows = gpu_timeline(s)
            running = {(e["trial"], e["attempt"]): e["id"] for e in s.events(kind="running")}
        self.assertEqual(len(rows), 6)
        first = rows[(profiler, 1)]
        # The profiler runs under MPS like any trial, placed with a provisional demand (2 GiB,
        # compute 0.25: nothing declared or measured yet), with no thread limit and no memory
        # limit (its memory is what it measures).
        self.assertEqual(first["sharing"], "mps", first)
        self.assertEqual((first["memory_mib"], first["compute"]), (2048, 0.25), first)
        self.assertIn("CUDA_MPS_PIPE_DIRECTORY", first["env"], first)
        self.assertNotIn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", first["env"], first)
        self.assertNotIn("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", first["env"], first)
        later = [p for k, p in rows.items() if k != (profiler, 1)]
        for p in later:
            # Its group's other trials started only once it was measured.
            self.assertGreater(running[(p["trial"], p["attempt"])], profiled[0]["id"],
                               "trial %d started before the profile was taken" % p["trial"])
            self.assertAlmostEqual(p["memory_mib"], 5500, delta=10, msg=p)
            self.assertAlmostEqual(p["compute"], 0.25, delta=0.02, msg=p)
            self.assertEqual(p["sharing"], "mps", p)
        per_gpu = {}
        for p in later:
            per_gpu.setdefault(p["gpus"][0], []).append(p["trial"])
        self.assertTrue(any(len(v) > 1 for v in per_gpu.values()),
                        "the measured trials were not packed: %s" % per_gpu)

    # -- profiles of training, not start-up (issue 31) -------------------------------------

    def training_run(self, tag, profile_time, mps=False, processes=()):
        """Start a run of one TRAINING trial (auto demand, profile_time) on a fake 80 GB GPU of
        its own (its own NVML file and process directory: runs side by side do not see each
        other); return (Popen, run_dir, release file)."""
        self.fake_gpus([(80 * GIB, None)], processes=processes, name="nvml-%s.json" % tag)
        procs = self.path("procs-" + tag)
        os.makedirs(procs)
        with open(self.nvml_json) as f:
            nvml = json.load(f)
        nvml["process_dir"] = procs
        self.write("nvml-%s.json" % tag, json.dumps(nvml))
        release = self.path("release-" + tag)
        argv = [PY, self.training_py, str(STARTUP_S), release, procs,
                json.dumps(self.uuids).replace("{", "{{").replace("}", "}}"), "1" if mps else "0"]
        exp = self.experiment(
            "name: training\n"
            "command: [%s]\n"
            "metric: {name: acc, mode: max}\n"
            "space:\n"
            "  model: small\n"
            "search: {algorithm: grid, trials: 1}\n"
            "profile_by: [model]\n"
            "resources: {gpus: 1, gpu_memory: auto, gpu_compute: auto, profile_time: %s}\n"
            % (", ".join(yaml_str(a) for a in argv), profile_time), name="exp-%s.yaml" % tag)
        run_dir = self.path("run-" + tag)
        return self.start_run(exp, run_dir, env=self.gpu_env()), run_dir, release

    def profile_of(self, runs):
        """Wait until each of runs (Popen, run_dir, release) has journaled its `profiled` event,
        releasing its trial then (one trains until profiled, not for a time); wait for the runs
        to end; return each one's (profiles row, events of the trial by kind)."""
        released = set()

        def all_profiled():
            for i, (_, run_dir, release) in enumerate(runs):
                if i not in released and self.poll_query(
                        run_dir, "SELECT id FROM events WHERE kind = 'profiled'"):
                    with open(release, "w"):
                        pass
                    released.add(i)
            return len(released) == len(runs)
        wait_for(all_profiled, 120, interval=0.2)
        out = []
        for i, (p, run_dir, release) in enumerate(runs):
            if i not in released:
                with open(release, "w"):
                    pass
            p.wait(timeout=90)
            self.assertEqual(p.returncode, 0, p.stderr.read())
            self.assertIn(i, released, "%s journaled no `profiled` event" % run_dir)
            with self.store(run_dir) as s:
                prof = s.q("SELECT * FROM profiles")
                self.assertEqual(len(prof), 1, prof)
                events = {}
                for e in s.events(trial=0):
                    events.setdefault(e["kind"], []).append(e)
            out.append((prof[0], events))
        return out

    def test_a_3s_profile_waits_for_training_and_agrees_with_a_long_one(self):
        # Seen on an H200: profile_time 3s measured a trial's start-up, a CUDA context and no SM
        # use, and the 0.05 floor made that a 5% MPS cap. The trial here starts up for 6 s
        # (memory growing, SM 0-5%), then trains at 1200 MiB and SM ~40%. The short profile is
        # shorter than the start-up; the long one (12 s: 30 s scaled down) is not.
        self.assertLess(3, STARTUP_S)
        (short, short_ev), (long_, long_ev) = self.profile_of(
            [self.training_run("short", "3s"), self.training_run("long", "12s")])
        for prof in (short, long_):
            # The training's demand: a floor of 0.05, or start-up's memory, cannot pass.
            self.assertEqual(prof["memory_mib"], 1200, prof)
            self.assertAlmostEqual(prof["compute"], 0.40, delta=0.03, msg=prof)
            self.assertGreaterEqual(prof["samples"], 3, prof)
        self.assertLessEqual(abs(short["compute"] - long_["compute"]), 0.10 * long_["compute"])
        # The short one said that it waited for training, and why it stopped waiting.
        extended = short_ev.get("profile-extended", [])
        self.assertEqual(len(extended), 1, short_ev)
        self.assertIn("not training yet", extended[0]["detail"])
        profiled = short_ev["profiled"][0]
        self.assertGreater(profiled["id"], extended[0]["id"])
        self.assertIn("training seen", profiled["detail"])
        self.assertIn("(a report)", profiled["detail"])
        self.assertIn("its own SM use", profiled["detail"])
        # The long one's window held the start-up and its training: nothing to extend.
        self.assertNotIn("profile-extended", long_ev)

    def test_a_profiler_beside_others_under_mps_is_measured_from_its_gpu(self):
        # Under MPS, NVML gives a client no SM use of its own (all of it goes to the MPS server:
        # measured on an H200), so its compute comes from its GPU's busy share over what the
        # GPU showed before it came: here another process holding 2 GiB and 30% of the GPU.
        other = subprocess.Popen(["sleep", "300"])
        self.procs.append(other)
        (prof, ev), = self.profile_of([self.training_run("mps", "3s", mps=True, processes=[
            {"gpu": 0, "pid": other.pid, "used_mib": 2048, "sm_util": 0, "gpu_busy": 30}])])
        self.assertEqual(prof["memory_mib"], 1200, prof)
        self.assertAlmostEqual(prof["compute"], 0.40, delta=0.03, msg=prof)
        detail = ev["profiled"][0]["detail"]
        self.assertIn("the GPU's busy share over the 30%", detail)

    def test_profilers_of_three_groups_run_at_once_beside_a_measured_trial(self):
        # One GPU; four groups (model a, b, c, d), two trials each, all auto. Before, each
        # group's profiler ran alone on an empty GPU, one group after another. Now all four
        # profilers are placed at once under MPS; with profile_wait a group's second trial
        # waits for its profile: a is measured first and its second trial joins them while b,
        # c and d are still being profiled.
        self.fake_gpus([(80 * GIB, None)])
        script = self.write("groups_trial.py", GROUPS_TRIAL)
        go, end = self.path("go"), self.path("end")
        argv = [PY, script, "{model}", "{x}", self.proc_dir,
                json.dumps(self.uuids).replace("{", "{{").replace("}", "}}"), go, end]
        exp = self.experiment(
            "name: profilers\n"
            "command: [%s]\n"
            "metric: {name: acc, mode: max}\n"
            "space:\n"
            "  model: {grid: [a, b, c, d]}\n"
            "  x: {grid: [0, 1]}\n"
            "search: {algorithm: grid, trials: 1}\n"
            "concurrency: 8\n"
            "profile_by: [model]\n"
            "resources: {gpus: 1, gpu_memory: auto, gpu_compute: auto, profile_time: 2s,\n"
            "            profile_wait: true}\n"
            "placement: {policy: vpack, reserve: 512M}\n"
            % ", ".join(yaml_str(a) for a in argv))
        run_dir = self.path("run")
        p = self.start_run(exp, run_dir, env=self.gpu_env())
        model_of = {}

        def running_by_model():
            rows = self.poll_query(run_dir, "SELECT e.trial, t.params FROM events e JOIN trials t "
                                            "ON t.id = e.trial WHERE e.kind = 'running'")
            if rows is None:
                return None
            out = {}
            for r in rows:
                model_of[r["trial"]] = json.loads(r["params"])["model"]
                out.setdefault(model_of[r["trial"]], set()).add(r["trial"])
            return out

        def a_measured_and_joined():
            on = running_by_model()
            return on if on and len(on.get("a", ())) == 2 and all(
                len(on.get(m, ())) == 1 for m in "bcd") else None
        on = wait_for(a_measured_and_joined, 60, interval=0.2)
        try:
            self.assertTrue(on, "never saw both a trials running beside the profilers of b, c "
                                "and d: %s" % running_by_model())
            with self.store(run_dir) as s:
                profiled = [model_of.get(e["trial"]) for e in s.events(kind="profiled")]
            self.assertEqual(profiled, ["a"], "only a can have been measured before `go`")
        finally:
            with open(go, "w"):
                pass

        def all_profiled():
            rows = self.poll_query(run_dir, "SELECT trial FROM events WHERE kind = 'profiled'")
            return rows if rows is not None and len(rows) == 4 else None
        self.assertTrue(wait_for(all_profiled, 60, interval=0.2), "not every group was profiled")
        with open(end, "w"):
            pass
        p.wait(timeout=90)
        self.assertEqual(p.returncode, 0, p.stderr.read())

        with self.store(run_dir) as s:
            self.assertEqual([t["state"] for t in s.trials()], ["completed"] * 8)
            model_of = {t["id"]: t["params"]["model"] for t in s.trials()}
            spans = attempt_intervals(s)
            profiled = {model_of[e["trial"]]: e for e in s.events(kind="profiled")}
            _, rows = gpu_timeline(s)
        profilers = {model_of[e["trial"]]: (e["trial"], 1) for e in profiled.values()}
        self.assertEqual(sorted(profilers), ["a", "b", "c", "d"])
        # All four profilers were placed before any profile ended, on the one GPU, under MPS
        # with no thread or memory limit.
        first_profile = min(e["id"] for e in profiled.values())
        for m, key in profilers.items():
            self.assertLess(spans[key][0], first_profile, "%s's profiler started late" % m)
            row = rows[key]
            self.assertEqual((row["gpus"], row["sharing"]), ([0], "mps"), row)
            self.assertNotIn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", row["env"], row)
            self.assertNotIn("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", row["env"], row)
        # The profiles of b, c and d ran at the same time: each started before any of them
        # ended, and a's measured second trial ran beside them (started before their profiles
        # ended, ended after they started).
        bcd = [spans[profilers[m]] for m in "bcd"]
        self.assertLess(max(b[0] for b in bcd), min(profiled[m]["id"] for m in "bcd"))
        second_a = [k for k in spans if model_of[k[0]] == "a" and k != profilers["a"]]
        self.assertEqual(len(second_a), 1, second_a)
        start, stop = spans[second_a[0]]
        self.assertGreater(start, profiled["a"]["id"], "a's second trial did not wait for a's "
                                                         "profile")
        self.assertLess(start, min(profiled[m]["id"] for m in "bcd"))
        self.assertGreater(stop, max(b[0] for b in bcd))
        self.assertEqual(rows[second_a[0]]["gpus"], [0])
        # The measured trial gets the MPS memory limit of its measured demand (3000 MiB +10%).
        a2 = rows[second_a[0]]
        self.assertAlmostEqual(a2["memory_mib"], 3300, delta=2, msg=a2)
        self.assertEqual(a2["env"].get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
                         "0=%dM" % math.ceil(a2["memory_mib"] * 1.1 - 1e-9), a2)
        self.assertNotIn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", a2["env"], a2)

    # -- no GPUs -------------------------------------------------------------------------------

    def test_two_gpus_per_trial_where_nvml_finds_none_is_a_config_error(self):
        self.fake_gpus([])
        exp = self.exp(trials=2, resources="gpu_memory: 1G, gpu_compute: 0.5")
        with open(exp) as f:
            text = f.read().replace("resources: {gpus: 1,", "resources: {gpus: 2,")
        exp = self.experiment(text)
        cases = [("fake NVML with no GPU", self.gpu_env()),
                 ("no NVML library", dict(self.gpu_env(nvml=False),
                                          TUNEPACK_NVML_LIB=self.path("no-such-libnvidia-ml.so.1")))]
        for what, env in cases:
            with self.subTest(what):
                run_dir = self.path("run-%d" % len(self.run_dirs))
                r = self.run_exp(exp, run_dir, env=env)
                self.assertExit(r, 3)
                self.assertIn("2 GPU", r.stderr)
                self.assertIn("NVML", r.stderr)
                if os.path.exists(os.path.join(run_dir, "tunepack.db")):
                    with self.store(run_dir) as s:
                        self.assertEqual(s.events(kind="running"), [])
                        self.assertEqual(s.q("SELECT * FROM placements"), [])
        # The local view says the same.
        r = self.tp("gpus", "--json", env=cases[1][1])
        self.assertExit(r, 0)
        local = json.loads(r.stdout)
        self.assertEqual(local["gpus"], [])
        self.assertNotEqual(local["nvml"], "ok")

    def test_local_gpus_view_through_fake_nvml(self):
        self.fake_gpus([(80 * GIB, None), (40 * GIB, {"error": "lost"})],
                       processes=[{"gpu": 0, "pid": os.getpid(), "used_mib": 1234,
                                   "sm_util": 5}])
        r = self.tp("gpus", "--json", env=self.gpu_env())
        self.assertExit(r, 0)
        local = json.loads(r.stdout)
        self.assertEqual(local["nvml"], "ok")
        gpus = {g["index"]: g for g in local["gpus"]}
        self.assertEqual(sorted(gpus), [0, 1])
        self.assertEqual(gpus[0]["uuid"], self.uuids[0])
        self.assertEqual(gpus[0]["memory_mib"], 80 * GIB)
        self.assertEqual(gpus[0]["memory_used_mib"], 1234)
        self.assertTrue(gpus[0]["healthy"])
        self.assertFalse(gpus[1]["healthy"])

    def test_slow_mps_daemon_starts_do_not_lose_the_agent(self):
        # Five GPUs whose MPS daemons each take 2.5 s to open their pipe: 12.5 s of starts,
        # past the 10 s of silence after which the run takes an agent for lost. The agent
        # starts them one a turn of its loop and answers pings between, so it is never lost
        # and every GPU shares through MPS. (Starting them all in one callback lost the agent
        # and started it again, over and over, on a loaded machine.)
        self.fake_gpus([(80 * GIB, None)] * 5)
        exp = self.exp(trials=5, sleep_s=0.2)
        run_dir = self.path("run")
        env = dict(self.gpu_env(), TUNEPACK_FAKE_MPS_PIPE_DELAY_S="2.5", TUNEPACK_MPS_WAIT_S="30")
        r = self.run_exp(exp, run_dir, env=env)
        self.assertExit(r, 0)
        self.assertNotIn("lost", r.stderr)
        with self.store(run_dir) as s:
            self.assertEqual([e for e in s.events() if e["kind"] == "agent-lost"], [])
            self.assertEqual(sorted(t["state"] for t in s.trials()), ["completed"] * 5)
            sharing = s.q("SELECT value FROM meta WHERE key = 'sharing'")[0]["value"]
        self.assertTrue(sharing.startswith("mps"), sharing)

    # -- a killed run's MPS daemons ------------------------------------------------------------

    def test_resume_after_sigkill_stops_the_stale_mps_daemons(self):
        self.fake_gpus([(80 * GIB, None), (80 * GIB, None)])
        exp = self.exp(trials=4, sleep_s=60, release=True,
                       extra="stop_grace: 1s\n")
        run_dir = self.path("run")
        p = self.start_run(exp, run_dir, env=self.gpu_env())
        pid_files = [os.path.join(run_dir, "mps", "gpu%d" % i, "pipe",
                                  "nvidia-cuda-mps-control.pid") for i in range(2)]

        def running4():
            rows = self.poll_query(run_dir, "SELECT id FROM trials WHERE state = 'running'")
            return rows is not None and len(rows) == 4
        self.assertTrue(wait_for(running4, 30), "four trials should be running")
        self.assertTrue(wait_for(lambda: all(os.path.exists(f) for f in pid_files), 10),
                        "the MPS daemons did not start")
        stale = []
        for f in pid_files:
            with open(f) as fh:
                stale.append(int(fh.read().strip()))
        self.assertTrue(all(pid in self.mps_daemons(run_dir) for pid in stale),
                        (stale, self.mps_daemons(run_dir)))

        # Kill the run hard: orchestrator and agent at once (stopped first, so that neither
        # sees the other go and cleans up). The trials and the daemons stay behind.
        agents = [c for c in children_of(p.pid) if "agent" in " ".join(cmdline(c))]
        self.assertTrue(agents, "no agent child of %d" % p.pid)
        for pid in [p.pid] + agents:
            os.kill(pid, signal.SIGSTOP)
        for pid in [p.pid] + agents:
            os.kill(pid, signal.SIGKILL)
        p.wait(timeout=10)
        time.sleep(0.5)
        self.assertEqual(sorted(stale), sorted(d for d in self.mps_daemons(run_dir)
                                               if d in stale),
                         "the daemons should outlive a SIGKILLed run")

        with open(self.release, "w"):
            pass
        r = self.run_exp(exp, run_dir, env=self.gpu_env())
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            self.assertEqual([t["state"] for t in s.trials()], ["completed"] * 4)
            token = s.meta()["token"]
        alive = [pid for pid in stale if pid in self.mps_daemons(run_dir)]
        self.assertEqual(alive, [], "MPS daemons of the killed run still run: %s"
                         % [(pid, cmdline(pid)) for pid in alive])
        self.assertTrue(wait_for(lambda: not self.mps_daemons(run_dir), 10),
                        "MPS daemons still run after the resumed run: %s"
                        % self.mps_daemons(run_dir))
        self.assertEqual(token_pids(token), [])
        # The resumed run's own daemon started once the stale one was gone, and quit at the end.
        for i in range(2):
            with open(os.path.join(run_dir, "mps", "gpu%d" % i, "log", "control.log")) as f:
                lines = f.read().splitlines()
            self.assertFalse([l for l in lines if "already runs here" in l], lines)
            starts = [l for l in lines if " start " in l]
            self.assertEqual(len(starts), 2, lines)
            self.assertNotIn("pid=%d" % stale[i], starts[1])
            self.assertTrue(lines[-1].endswith("] quit"), lines)



class Siblings(GpuE2E):
    """A group's other trials start beside its profiler on a guess (its provisional demand,
    memory x2, no MPS limit) where that fits, and hold the measured demand once it is taken."""

    def start(self, gib, xs, concurrency, placement, mib=2000):
        """Start a run of models a, b, c x `xs` (SIBLINGS_TRIAL, `mib` MiB each, auto demand) on
        one fake GPU of `gib` GiB; return (Popen, run_dir, go file, end prefix)."""
        self.fake_gpus([(gib * GIB, None)])
        script = self.write("siblings_trial.py", SIBLINGS_TRIAL)
        go, end = self.path("go"), self.path("end")
        argv = [PY, script, "{model}", "{x}", self.proc_dir,
                json.dumps(self.uuids).replace("{", "{{").replace("}", "}}"), go, end, str(mib)]
        exp = self.experiment(
            "name: siblings\n"
            "command: [%s]\n"
            "metric: {name: acc, mode: max}\n"
            "space:\n"
            "  x: {grid: [%s]}\n"
            "  model: {grid: [a, b, c]}\n"
            "search: {algorithm: grid, trials: 1}\n"
            "concurrency: %d\n"
            "profile_by: [model]\n"
            "resources: {gpus: 1, gpu_memory: auto, gpu_compute: auto, profile_time: 1s}\n"
            "placement: %s\n"
            % (", ".join(yaml_str(a) for a in argv), ", ".join(map(str, xs)), concurrency,
               placement))
        run_dir = self.path("run")
        return self.start_run(exp, run_dir, env=self.gpu_env()), run_dir, go, end

    def count(self, run_dir, kind, n):
        """Wait until run_dir has journaled n events of kind; return them."""
        def enough():
            rows = self.poll_query(run_dir, "SELECT * FROM events WHERE kind = ?", kind)
            return rows if rows is not None and len(rows) >= n else None
        rows = wait_for(enough, 60, interval=0.2)
        self.assertTrue(rows, "fewer than %d `%s` events" % (n, kind))
        return rows

    def finish(self, p, run_dir, end, xs):
        for x in xs:
            with open("%s-%d" % (end, x), "w"):
                pass
        p.wait(timeout=90)
        self.assertEqual(p.returncode, 0, p.stderr.read())
        with self.store(run_dir) as s:
            self.assertEqual({t["state"] for t in s.trials()}, {"completed"})
            model_of = {t["id"]: t["params"]["model"] for t in s.trials()}
            profiled = {model_of[e["trial"]]: e for e in s.events(kind="profiled")}
            spans = attempt_intervals(s)
            _, rows = gpu_timeline(s)
        self.assertEqual(sorted(profiled), ["a", "b", "c"])
        return model_of, profiled, spans, rows

    def test_a_groups_other_trials_start_beside_its_profiler(self):
        # One 80 GB GPU; three groups, trials x = 0, 1 of each at first (concurrency 6), and x
        # = 2 of each once those of x = 0 have ended.
        p, run_dir, go, end = self.start(80, [0, 1, 2], 6, "{policy: vpack, reserve: 512M}")
        try:
            self.count(run_dir, "running", 6)
            self.assertEqual(self.poll_query(run_dir, "SELECT id FROM events WHERE kind = "
                                                      "'profiled'"), [])
        finally:
            with open(go, "w"):
                pass
        self.count(run_dir, "profiled", 3)
        with open(end + "-0", "w"):
            pass
        self.count(run_dir, "running", 9)
        model_of, profiled, spans, rows = self.finish(p, run_dir, end, [1, 2])
        first = min(e["id"] for e in profiled.values())
        profilers = {(e["trial"], 1) for e in profiled.values()}
        early = sorted(k for k, (start, _) in spans.items() if start < first)
        # All six attempts of the first wave, two of each group, ran before any profile ended.
        self.assertEqual(len(early), 6, spans)
        self.assertEqual(sorted(model_of[t] for t, _ in early), sorted("aabbcc"))
        self.assertTrue(profilers <= set(early), (profilers, early))
        for key in early:
            row = rows[key]
            self.assertEqual((row["gpus"], row["sharing"]), ([0], "mps"), row)
            self.assertNotIn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", row["env"], row)
            self.assertNotIn("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", row["env"], row)
            # the profiler with the provisional 2 GiB and 0.25, its sibling on a guess with twice
            # the memory and half the compute
            want = (2048, 0.25) if key in profilers else (4096, 0.125)
            self.assertEqual((row["memory_mib"], row["compute"]), want, row)
        # The trials placed after the profiles hold the measured demand (2000 MiB + 10%) and
        # its MPS memory limit.
        late = [k for k in spans if k not in early]
        self.assertEqual(len(late), 3, spans)
        for key in late:
            row = rows[key]
            self.assertGreater(spans[key][0], profiled[model_of[key[0]]]["id"])
            self.assertEqual(row["memory_mib"], 2200, row)
            self.assertEqual(row["env"].get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"),
                             "0=%dM" % math.ceil(2200 * 1.1 - 1e-9), row)

    def test_on_a_small_gpu_a_groups_other_trials_wait_for_its_profile(self):
        # One 8 GB GPU (7.5 GiB after the reserve): the three profilers take 2 GiB each and a
        # sibling on a guess would take 4 GiB more: none fits, so they wait for the profiles.
        # Measured (1000 MiB + 10%), all six fit.
        p, run_dir, go, end = self.start(8, [0, 1], 6, "{policy: vpack, reserve: 512M}",
                                         mib=1000)
        try:
            self.count(run_dir, "running", 3)
        finally:
            with open(go, "w"):
                pass
        self.count(run_dir, "running", 6)
        model_of, profiled, spans, rows = self.finish(p, run_dir, end, [0, 1])
        profilers = {(e["trial"], 1) for e in profiled.values()}
        for key, (start, _) in spans.items():
            if key in profilers:
                continue
            self.assertGreater(start, profiled[model_of[key[0]]]["id"],
                               "trial %d started before its group's profile" % key[0])
            self.assertEqual(rows[key]["memory_mib"], 1100, rows[key])


if __name__ == "__main__":
    main()
