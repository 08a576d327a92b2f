#!/usr/bin/env python3
"""Fluid trial groups end to end (issue 12, item 3) on a fake GPU: a Hyperband rung is a
group, and each trial's compute share (its packing demand: who shares a GPU) follows its
remaining work, measured step time x remaining steps, memory-checked. Under MPS a share sets
no thread percentage: each trial takes what the others on its GPU leave.

One 16 GiB fake GPU; Hyperband with epochs 2, 6, 18 (9 trials, then the top 3, then 1). The
trial with x = 9 steps three times slower than the others (0.3 s against 0.1 s; rung 0's steps,
which Fluid measures, 0.9 s against 0.3 s) on a GPU of its own, and, like a compute-bound trial on a real GPU with no thread limit, k / C_k times slower on
a GPU it shares with k - 1 others under MPS, k times time-sliced (the trainer counts them;
gpu_compute 1.0 tells tunepack so; C_k is the busy share a GPU serves k such trials under MPS,
measured on H100s: TP_FLUID_SERVED in place/fluid.h, read from there).
Rung 0 knows no step time yet: equal shares, 1/4 each (the min). Rung 1 holds x = 9, 8, 7, each
with 4 epochs left: work (at rung 0's steps) 3.6, 1.2, 1.2 -> ideal 0.6, 0.2, 0.2 of the GPU -> 1/2, 1/4, 1/4 after
the min of 1/4 (applied after normalisation). Rung 2: x = 9 alone, the whole GPU.
"""

import json
import os
import re
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import SRC, GpuE2E, hyperband_nine, main

GIB = 1024


def served():
    """TP_FLUID_SERVED of place/fluid.h: [C_1, C_2, C_3, C_4]."""
    with open(os.path.join(SRC, "src", "place", "fluid.h")) as f:
        text = f.read().replace("\\\n", " ")  # the define may be continued on a next line
    m = re.search(r"#define TP_FLUID_SERVED\s*\{([^}]*)\}", text)
    return [float(v) for v in m.group(1).split(",")]


TRAINER = r'''
import json, os, sqlite3, sys, time
x = int(sys.argv[1]); budget = int(float(sys.argv[2]))
delay = 0.3 if x == 9 else 0.1
free_first = False  # True: epoch 1 is reported at once (nothing trained yet)
# Rung 0's steps (epochs 1 and 2) are the ones Fluid measures for rung 1: they take MEASURED
# times as long, so that the lag between a report's writing and the run's noting it (which a
# loaded machine lengthens, and which lands on one step's time whole) counts a third as much.
MEASURED = 3
ck = os.path.join(os.environ["TUNEPACK_CHECKPOINT_DIR"], "ckpt")
start = int(open(ck).read()) if os.path.exists(ck) else 0
# the trials on this GPU as the run counts them: those it has recorded as running with their
# attempt placed there, read from its store (a directory above the trial's). A
# neighbour slows this one from its placement until the run has recorded its end, so a loaded
# machine (Python starting late, an end noticed late) changes how long a step takes but not
# the load the run counts for it: only the lag of a report or of the store's commit is left.
run_dir = os.environ["TUNEPACK_TRIAL_DIR"]  # DIR/trials/NNNNNN[/rankK]
while not os.path.exists(os.path.join(run_dir, "tunepack.db")):
    run_dir = os.path.dirname(run_dir)
db = sqlite3.connect("file:%s?mode=ro" % os.path.join(run_dir, "tunepack.db"), uri=True,
                     timeout=10)
def query(sql, *args):
    while True:
        try:
            return db.execute(sql, args).fetchall()
        except sqlite3.OperationalError:  # busy: the run is writing
            time.sleep(0.01)
me = (int(os.environ["TUNEPACK_TRIAL_ID"]), int(os.environ["TUNEPACK_ATTEMPT"]))
while not query("SELECT 1 FROM placements WHERE trial = ? AND attempt = ?", *me):
    time.sleep(0.01)  # placed before it was launched; committed a moment later at most
gpu = json.loads(query("SELECT gpus FROM placements WHERE trial = ? AND attempt = ?",
                       *me)[0][0])[int(os.environ.get("LOCAL_RANK", "0"))]
ON_GPU = ("SELECT count(*) FROM trials t JOIN placements p ON p.trial = t.id "
          "AND p.attempt = t.attempts WHERE t.state = 'running' "
          "AND EXISTS (SELECT 1 FROM json_each(p.gpus) WHERE value = ?)")
SERVED = None  # C_k, k = 1..4 and more under MPS (TP_FLUID_SERVED); time-sliced: 1
if "CUDA_MPS_PIPE_DIRECTORY" not in os.environ:
    SERVED = [1.0] * 4
def sharing():
    n = query(ON_GPU, gpu)[0][0]
    return max(1.0, n / SERVED[min(max(n, 1), 4) - 1])
ahead, t = 0.0, None  # the next step's part done already, and when that was counted
def step(epoch):  # one step of `delay` on a GPU of its own, slowed by the others as a real one
    global ahead, t  # is: the time that passed counts, however long a wait took, and so does
    pace = delay * (MEASURED if epoch <= 2 else 1)  # the time between steps (a report, a
    done = ahead  # checkpoint), so that the steps end where the run sees them end
    if t is None:
        t = time.monotonic()
    while done < 1:
        time.sleep(0.01)
        now = time.monotonic()
        done += (now - t) / (pace * sharing())
        t = now
    ahead = done - 1
lead = os.environ.get("RANK", "0") == "0"  # elastic: one process per GPU, rank 0 reports
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1) if lead else None
if not lead:
    for epoch in range(start + 1, budget + 1):
        step(epoch)
    sys.exit(0)
if start >= budget:
    rep.write(json.dumps({"step": start, "score": x * start}) + "\n")
for epoch in range(start + 1, budget + 1):
    if epoch > 1 or not free_first:
        step(epoch)
    rep.write(json.dumps({"step": epoch, "score": x * epoch}) + "\n")
    with open(ck + ".tmp", "w") as f:
        f.write(str(epoch))
    os.rename(ck + ".tmp", ck)
'''


def trainer():
    """TRAINER with the measured C_k."""
    return TRAINER.replace("SERVED = None", "SERVED = %r" % served())


class FluidGroups(GpuE2E):

    def setUp(self):
        super().setUp()
        self.trainer = self.write("trainer.py", trainer())
        self.fake_gpus([(16 * GIB, None)])

    def exp(self, shares, memory="3G", gpus="1", bounds="min: 0.25, max: 1"):
        return self.experiment(hyperband_nine(
            "fluid", self.trainer, "gpus: %s, gpu_memory: %s, gpu_compute: 1.0" % (gpus, memory),
            "max_per_gpu: 4", "groups: {shares: %s, %s}\n" % (shares, bounds)))

    def placements(self, run_dir, count_gpus=False):
        """{x: {rung: (rung, compute, MPS thread percentage (None: no limit) or GPUs)}}."""
        with self.store(run_dir) as s:
            xs = {t["id"]: t["params"]["x"] for t in s.trials()}
            rows = s.q("SELECT p.trial, p.attempt, p.compute, p.env, p.gpus, d.rung FROM placements p "
                       "JOIN decisions d ON d.trial = p.trial AND d.kind = 'job' "
                       "AND d.seq = (SELECT max(seq) FROM decisions WHERE trial = p.trial "
                       "AND kind = 'job' AND at <= p.at) ORDER BY p.trial, p.attempt")
        out = {}
        for r in rows:
            env = json.loads(r["env"])
            last = len(json.loads(r["gpus"])) if count_gpus else \
                env.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")
            # the first attempt at each rung (a heavily loaded machine may interrupt one and
            # run it again from its checkpoint)
            out.setdefault(xs[r["trial"]], {}).setdefault(r["rung"], (r["rung"], r["compute"], last))
        return out

    def run_fluid(self, shares, memory="3G", **kw):
        run_dir = self.path("run-%s-%s" % (shares, memory))
        r = self.run_exp(self.exp(shares, memory, **kw), run_dir, env=self.gpu_env(mps=True))
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            nine = [t for t in s.trials() if t["params"]["x"] == 9][0]
        self.assertEqual((nine["state"], nine["rung"]), ("completed", 2), nine)
        return run_dir

    def test_shares_follow_remaining_work_within_a_rung(self):
        run_dir = self.run_fluid("static")
        got = self.placements(run_dir)
        # rung 0: no step time measured yet, equal shares at the min; no thread limit
        for x in range(1, 10):
            self.assertEqual(got[x][0], (0, 0.25, None), (x, got[x]))
        # rung 1: x = 9 has three times the work of x = 8 and x = 7
        self.assertEqual(got[9][1], (1, 0.5, None), got[9])
        self.assertEqual(got[8][1], (1, 0.25, None), got[8])
        self.assertEqual(got[7][1], (1, 0.25, None), got[7])
        # rung 2: alone in its group, the whole GPU
        self.assertEqual(got[9][2], (2, 1.0, None), got[9])
        for x in range(1, 7):
            self.assertEqual(len(got[x]), 1, (x, got[x]))
        with self.store(run_dir) as s:
            xs = {t["id"]: t["params"]["x"] for t in s.trials()}
            why = [e["detail"] for e in s.events(kind="fluid-share") if xs[e["trial"]] == 9]
            self.assertEqual(len(why), 3, why)
            # steps on a GPU of their own (measured ones over the GPU's load meanwhile): about
            # 0.3 s and 0.1 s (start-up and reporting add a little)
            m = re.search(r"group 1 \(static\): (0\.\d+) of 1 GPUs for (\d+)% of the group's "
                          r"work", why[1])
            self.assertTrue(m, why[1])
            # the measured steps carry the run's delay in noting a report, which a loaded
            # machine lengthens (0.485 and 0.703 were seen under ctest -j8 beside two CPU hogs
            # when rung 0 stepped 0.3 s and 0.1 s): x = 9 keeps 1/2 as long as that lag adds
            # less than 0.3 s to the steps of x = 8 and x = 7 together, beyond what it adds
            # to x = 9's
            self.assertTrue(0.5 < float(m.group(1)) < 0.75, why[1])
            self.assertIn("given 1/2 GPU", why[1])
            self.assertEqual(s.events(kind="fluid-shares"), [])  # static: never again

    def test_memory_decides_the_smallest_fraction(self):
        # 5 GiB: four would need 20 GiB of the 15.5 usable, three fit: 1/3 at least
        run_dir = self.run_fluid("static", memory="5G")
        got = self.placements(run_dir)
        for x in range(1, 10):
            self.assertEqual(got[x][0][:2], (0, 1 / 3), (x, got[x]))
        # rung 1: the ladder starts at 1/3, so the two small ones take 1/3 each and x = 9
        # gets what is left of the GPU: 1/3, not the 1/2 it gets when 1/4 is allowed
        for x in (7, 8, 9):
            self.assertEqual(got[x][1][:2], (1, 1 / 3), (x, got[x]))

    def test_a_step_counts_the_load_it_ran_under_as_its_neighbours_end(self):
        # All nine of rung 0 start together at 1/9 and report epoch 1 at once, so each measures
        # its epoch 2 from a GPU shared by nine, under MPS a load of L = 9 / C_9 = 6.25. Rung 0's
        # steps are six times the other tests' base (1.8 s for x = 9, 0.6 s for the others
        # alone), so that the lag between a report and the run's noting it counts little. The
        # others' epoch 2 takes 0.6 L = 3.75 s and they end; x = 9 has then done 1/3 of its 1.8 s
        # and finishes alone: 3.75 + 1.2 = 4.95 s, under a load of L for 3.75 s and 1 for 1.2 s.
        # Its step alone is the time integral of 1 / load, 3.75 / L + 1.2 = 1.8 s: rung 1 gives
        # it 0.6 of the GPU (1/2). Divided by the load's plain time mean (about 5.0: 0.99 s) it
        # would get 0.45 (then the GPU's leftover still lifts it to 1/2); with the load not
        # noted when the others end (L throughout: 0.79 s) 0.40, and 1/3; with the load counted
        # as processor sharing, 9 and not 9 / C_9 (every step counted light, its own least), 0.66.
        # The trainers slow down by the load the run counts (its store says who runs), so a
        # late start or a late notice of an end changes how long steps take, not what the run
        # measures; the lag left (a report's, a commit's) lands on x = 9's step whole and lifts
        # the figure a little: 100 ms gives 0.613, and it takes 330 ms to reach 0.64.
        self.step_load_case(mps=True)

    def test_a_time_sliced_step_counts_no_mps_gain(self):
        # As above with no MPS daemon: nine time-sliced trials step nine times slower, and the
        # load is 9 for 5.4 s, then 1 for 1.2 s: again 0.6. Counting C_9 there (a load of 6.25)
        # would weigh every step heavy, its own least: 0.54.
        self.step_load_case(mps=False)

    def step_load_case(self, mps):
        text = trainer().replace("free_first = False", "free_first = True").replace(
            "delay = 0.3 if x == 9 else 0.1", "delay = 0.6 if x == 9 else 0.2")
        self.trainer = self.write("trainer.py", text)
        for part in ("delay = 0.6", "free_first = True"):
            self.assertIn(part, text)
        run_dir = self.path("run-free-first")
        exp = self.experiment(hyperband_nine(
            "fluid", self.trainer, "gpus: 1, gpu_memory: 1G, gpu_compute: 1.0",
            "max_per_gpu: 9", "groups: {shares: static, min: 0.111, max: 1}\n"))
        r = self.run_exp(exp, run_dir, env=self.gpu_env(mps=mps))
        self.assertExit(r, 0)
        got = self.placements(run_dir)
        for x in range(1, 10):
            self.assertEqual(got[x][0][:2], (0, 1 / 9), (x, got[x]))
        with self.store(run_dir) as s:
            xs = {t["id"]: t["params"]["x"] for t in s.trials()}
            why = [e["detail"] for e in s.events(kind="fluid-share") if xs[e["trial"]] == 9]
        m = re.search(r"group 1 \(static\): (0\.\d+) of 1 GPUs", why[1])
        self.assertTrue(m, why)
        self.assertTrue(0.55 < float(m.group(1)) < 0.64, why[1])
        self.assertEqual(got[9][1][:2], (1, 0.5), got[9])

    def test_dynamic_shares_are_computed_again_when_a_trial_of_the_group_ends(self):
        # (this trainer ignores pauses: no fraction is restarted for a larger share)
        run_dir = self.run_fluid("dynamic")
        got = self.placements(run_dir)
        self.assertEqual(got[9][1], (1, 0.5, None), got[9])
        with self.store(run_dir) as s:
            xs = {t["id"]: t["params"]["x"] for t in s.trials()}
            again = [e["detail"] for e in s.events(kind="fluid-shares")
                     if xs[e["trial"]] in (7, 8) and "of group 1 ended" in e["detail"]]
            given = {}
            for e in s.events(kind="fluid-share"):
                m = re.search(r"; given ([^;]+)", e["detail"])
                self.assertTrue(m, e["detail"])
                given.setdefault((e["trial"], e["attempt"]), []).append(m.group(1))
        # computed again at every placement round while a trial waits, journaled only when
        # its share changes
        for key, g in given.items():
            self.assertTrue(all(a != b for a, b in zip(g, g[1:])), (key, g))
        self.assertEqual(len(again), 2, again)
        # when x = 8 and x = 7 end, x = 9 (still running at 1/2) would take more
        last = again[-1]
        self.assertIn("ended; shares of the 1 left over 1 GPUs", last)
        self.assertIn(": 1 (running: from its next attempt)", last)


# The trainer of FluidGrowth, compute-bound: it starts up in 1 s (its imports, say), then a
# step takes 0.5 s for x = 9 and 0.04 s for the others on the whole GPU, and 100 / p times
# that at an MPS thread percentage p. Each honours a pause (checkpoint per step, exit 0) and
# records, per attempt, the step it resumed from and its percentage.
GROWING = r'''
import json, os, sys, time
sys.path.insert(0, %r)
from tunepack_report import checkpoint_dir, should_pause
x = int(sys.argv[1]); budget = int(float(sys.argv[2]))
time.sleep(1.0)
pct = int(os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "100"))
delay = (0.5 if x == 9 else 0.04) * 100 / pct
ck = os.path.join(checkpoint_dir(), "ckpt")
start = int(open(ck).read()) if os.path.exists(ck) else 0
with open(os.path.join(os.environ["TUNEPACK_TRIAL_DIR"],
                       "attempt.%%s.json" %% os.environ["TUNEPACK_ATTEMPT"]), "w") as f:
    json.dump({"from": start, "budget": budget,
               "mps": os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE")}, f)
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
if start >= budget:
    rep.write(json.dumps({"step": start, "score": x * start}) + "\n")
for epoch in range(start + 1, budget + 1):
    until = time.time() + delay
    while time.time() < until:
        if should_pause():
            sys.exit(0)  # its checkpoint is the last step done
        time.sleep(0.02)
    rep.write(json.dumps({"step": epoch, "score": x * epoch}) + "\n")
    with open(ck + ".tmp", "w") as f:
        f.write(str(epoch))
    os.rename(ck + ".tmp", ck)
'''


def recorded_attempts(run_dir, trial):
    """What each attempt of a trial recorded (attempt.N.json in its directory), in order."""
    tdir = os.path.join(run_dir, "trials", "%06d" % trial)
    names = [n for n in os.listdir(tdir) if n.startswith("attempt.")]
    out = []
    for name in sorted(names, key=lambda n: int(n.split(".")[1])):
        with open(os.path.join(tdir, name)) as f:
            out.append(json.load(f))
    return out


class FluidGrowth(GpuE2E):
    """Dynamic shares on one 16 GiB fake GPU under MPS: a fraction whose share grows is not
    restarted, as it has no thread limit to grow out of. Rung 0: the nine at 1/4 (x = 9
    measures 0.5 s a step, the others 0.04 s). Rung 1 holds x = 9, 8, 7 with 4 epochs left
    each: work 2, 0.16, 0.16 -> ideal 0.86, 0.07, 0.07 -> 1/2, 1/4, 1/4 after the min of 1/4.
    When both others have ended, x = 9's share grows to the whole GPU; it runs on in the same
    attempt at the pace it had (the whole GPU's: no percentage held it to 1/2), where a trial
    capped at 50% would have had to checkpoint and restart to get it."""

    def setUp(self):
        super().setUp()
        self.trainer = self.write("trainer.py", GROWING % os.path.join(SRC, "python"))
        self.fake_gpus([(16 * GIB, None)])

    def test_a_fraction_whose_share_grows_runs_on_with_no_thread_limit(self):
        run_dir = self.path("run")
        exp = self.experiment(hyperband_nine(
            "grow", self.trainer, "gpus: 1, gpu_memory: 3G, gpu_compute: 1.0", "max_per_gpu: 4",
            "groups: {shares: dynamic, min: 0.25, max: 1}\n"))
        r = self.run_exp(exp, run_dir, env=self.gpu_env(mps=True))
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            nine = [t for t in s.trials() if t["params"]["x"] == 9][0]
            self.assertEqual((nine["state"], nine["rung"]), ("completed", 2), nine)
            self.assertEqual(s.q("SELECT * FROM decisions WHERE kind = 'resize'"), [])
            xs = {t["id"]: t["params"]["x"] for t in s.trials()}
            last = [e["detail"] for e in s.events(kind="fluid-shares")
                    if xs[e["trial"]] in (7, 8) and "of group 1 ended" in e["detail"]][-1]
            steps = [m["step"] for m in s.metrics(nine["id"])]
            placed = s.q("SELECT compute, env FROM placements WHERE trial = ? ORDER BY attempt",
                         nine["id"])
        # its share grew to the whole GPU, for its next attempt: rung 1 ran on in one attempt
        self.assertIn("trial %d: 1 (running: from its next attempt)" % nine["id"], last)
        attempts = recorded_attempts(run_dir, nine["id"])
        self.assertEqual([a["budget"] for a in attempts], [2, 6, 18], attempts)
        # every attempt had the GPU's threads unlimited, whatever its share (rung 0: 1/4, or
        # more if it started after others had ended; rung 1: 1/2; rung 2: 1)
        self.assertEqual([a["mps"] for a in attempts], [None] * 3, attempts)
        self.assertEqual([p["compute"] for p in placed][1:], [0.5, 1.0], placed)
        for p in placed:
            env = json.loads(p["env"])
            self.assertIn("CUDA_MPS_PIPE_DIRECTORY", env)
            self.assertNotIn("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", env)
        self.assertEqual(steps, list(range(1, 19)), steps)


class FluidGroupsElastic(FluidGroups):
    """Four 16 GiB fake GPUs and elastic trials (resources: {gpus: {min: 1, max: 4}}): whole-GPU
    shares. Rung 1 on 4 GPUs: ideal 2.4, 0.8, 0.8 -> 2, 1/2, 1/2, and the GPU left over goes a
    step at a time to whoever would finish last -> 2, 1, 1. Rung 2: x = 9 takes all 4."""

    def setUp(self):
        GpuE2E.setUp(self)
        self.trainer = self.write("trainer.py", trainer())
        self.fake_gpus([(16 * GIB, None)] * 4)

    def test_shares_follow_remaining_work_within_a_rung(self):
        run_dir = self.run_fluid("static", gpus="{min: 1, max: 4}", bounds="min: 0.25, max: 4")
        got = self.placements(run_dir, count_gpus=True)
        rung0 = [got[x][0] for x in range(1, 10)]  # fractions of one GPU
        self.assertTrue(all(r[0] == 0 and r[1] < 1 and r[2] == 1 for r in rung0), rung0)
        self.assertLessEqual(sum(r[1] for r in rung0), 4 + 1e-9, rung0)
        self.assertEqual(got[9][1], (1, 1.0, 2), got[9])
        self.assertEqual(got[8][1], (1, 1.0, 1), got[8])
        self.assertEqual(got[7][1], (1, 1.0, 1), got[7])
        self.assertEqual(got[9][2], (2, 1.0, 4), got[9])
        # a fraction's step is its share's, not one GPU's: rung 0 adds no point to a
        # trial's scaling curve; rung 1 (whole GPUs) does
        with self.store(run_dir) as s:
            compute = {(p["trial"], p["attempt"]): p["compute"]
                       for p in s.q("SELECT trial, attempt, compute FROM placements")}
            curves = [(e["trial"], e["attempt"], json.loads(e["detail"])["samples"])
                      for e in s.events(kind="scaling")]
        last, grew = {}, 0
        for trial, attempt, samples in curves:
            if compute[(trial, attempt)] < 1:
                self.assertEqual(samples, last.get(trial, {}), (trial, attempt, curves))
            grew += samples != last.get(trial, {})
            last[trial] = samples
        self.assertGreater(grew, 0, curves)

    test_memory_decides_the_smallest_fraction = None
    test_a_step_counts_the_load_it_ran_under_as_its_neighbours_end = None
    test_a_time_sliced_step_counts_no_mps_gain = None
    test_dynamic_shares_are_computed_again_when_a_trial_of_the_group_ends = None


# The trainer of FluidGrowthElastic: one process per GPU it holds; a step takes 4 s for x = 9
# and 0.1 s for the others on one GPU, over WORLD_SIZE on more (linear scaling). Rank 0
# reports and checkpoints; every rank honours a pause. Each attempt records its GPU count and
# the step it resumed from.
ELASTIC = r'''
import json, os, sys, time
sys.path.insert(0, %r)
from tunepack_report import checkpoint_dir, should_pause
x = int(sys.argv[1]); budget = int(float(sys.argv[2]))
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
ck = os.path.join(checkpoint_dir(), "ckpt")
def load():
    try:
        return int(open(ck).read())
    except (OSError, ValueError):
        return 0
start = load()
if rank != 0:  # the other ranks follow rank 0: until it is done or a pause comes
    while not should_pause() and load() < budget:
        time.sleep(0.02)
    sys.exit(0)
with open(os.path.join(os.environ["TUNEPACK_TRIAL_DIR"],
                       "attempt.%%s.json" %% os.environ["TUNEPACK_ATTEMPT"]), "w") as f:
    json.dump({"from": start, "budget": budget, "world": world}, f)
os.makedirs(checkpoint_dir(), exist_ok=True)
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
if start >= budget:
    rep.write(json.dumps({"step": start, "score": x * start}) + "\n")
for epoch in range(start + 1, budget + 1):
    until = time.time() + (4.0 if x == 9 else 0.1) / world
    while time.time() < until:
        if should_pause():
            sys.exit(0)
        time.sleep(0.02)
    rep.write(json.dumps({"step": epoch, "score": x * epoch}) + "\n")
    with open(ck + ".tmp", "w") as f:
        f.write(str(epoch))
    os.rename(ck + ".tmp", ck)
'''


class FluidGrowthElastic(GpuE2E):
    """Dynamic shares of whole GPUs (elastic trials, `max_per_gpu: 1`) on four fake GPUs: a
    running trial whose share grows to more GPUs is resized (run/groups.c grow()). Rung 1
    holds x = 9, 8, 7 with 4 epochs left each, x = 9 measured at 4 s a step, the others at
    0.1 s: work 16, 0.4, 0.4 -> ideal 3.8, 0.1, 0.1 -> 2, 1, 1 (the min is one GPU). When the
    others end (0.4 s of steps after their start-up), x = 9 has about 7 s left on 2 GPUs (5 on
    a loaded machine whose start-ups take seconds); its share grows to 3 or 4 GPUs as they
    end, and a restart (a second or two) pays for that."""

    def setUp(self):
        super().setUp()
        self.trainer = self.write("trainer.py", ELASTIC % os.path.join(SRC, "python"))
        self.fake_gpus([(16 * GIB, None)] * 4)

    def run_grow(self, groups):
        run_dir = self.path("run")
        exp = self.experiment(hyperband_nine(
            "grow", self.trainer, "gpus: {min: 1, max: 4}, gpu_memory: 3G, gpu_compute: 1.0",
            "max_per_gpu: 1", "groups: {%s}\n" % groups))
        r = self.run_exp(exp, run_dir, env=self.gpu_env(mps=True))
        self.assertExit(r, 0)
        return run_dir

    def test_a_trial_whose_share_grows_to_more_gpus_is_resized_from_its_checkpoint(self):
        run_dir = self.run_grow("shares: dynamic, min: 1, max: 4")
        with self.store(run_dir) as s:
            nine = [t for t in s.trials() if t["params"]["x"] == 9][0]
            self.assertEqual((nine["state"], nine["rung"]), ("completed", 2), nine)
            resizes = [d["detail"] for d in
                       s.q("SELECT detail FROM decisions WHERE kind = 'resize' AND trial = ?",
                           nine["id"])]
            others = s.q("SELECT trial FROM decisions WHERE kind = 'resize' AND trial != ?",
                         nine["id"])
            steps = [m["step"] for m in s.metrics(nine["id"])]
            shares = [e["detail"] for e in s.events(kind="fluid-shares")]
        attempts = recorded_attempts(run_dir, nine["id"])
        # rung 1: 2 GPUs, then one attempt per resize, each to more GPUs with the gain that
        # justified it, from its checkpoint; rung 2: all 4
        rung1 = [a for a in attempts if a["budget"] == 6]
        self.assertEqual(rung1[0]["world"], 2, attempts)
        self.assertTrue(resizes, shares)
        self.assertEqual(others, [], shares)
        # (the attempt after a resize takes at least its new count: more when the group's
        # shares grew again meanwhile, as when the other trial ended during the pause)
        self.assertEqual(len(rung1), 1 + len(resizes), (resizes, attempts))
        for i, d in enumerate(resizes):
            m = re.match(r"^resize (\d) -> (\d) GPUs: Fluid share of group 1 grew to \2 GPUs: "
                         r"gain (\d+\.\d\d) > 1\.10 \(\d+\.\d s left -> restart \d+\.\d s \+ "
                         r"\d+\.\d s\)$", d)
            self.assertTrue(m, d)
            self.assertEqual(int(m.group(1)), rung1[i]["world"], (resizes, attempts))
            self.assertGreater(int(m.group(2)), rung1[i]["world"], resizes)
            self.assertGreaterEqual(rung1[i + 1]["world"], int(m.group(2)), (resizes, attempts))
            self.assertGreater(float(m.group(3)), 1.1, d)
        self.assertTrue(all(a["from"] >= 2 for a in rung1), attempts)
        self.assertEqual(attempts[-1]["budget"], 18, attempts)
        self.assertEqual(attempts[-1]["world"], 4, attempts)
        self.assertEqual(steps, list(range(1, 19)), steps)

    def test_restart_false_leaves_a_running_trial_at_its_count(self):
        run_dir = self.run_grow("shares: dynamic, min: 1, max: 4, restart: false")
        with self.store(run_dir) as s:
            nine = [t for t in s.trials() if t["params"]["x"] == 9][0]
            self.assertEqual((nine["state"], nine["rung"]), ("completed", 2), nine)
            resizes = s.q("SELECT trial, detail FROM decisions WHERE kind = 'resize'")
            steps = [m["step"] for m in s.metrics(nine["id"])]
            grew = [e["detail"] for e in s.events(kind="fluid-shares")
                    if re.search(r"trial %d: [34] \(running: from its next attempt\)" %
                                 nine["id"], e["detail"])]
        attempts = recorded_attempts(run_dir, nine["id"])
        # its share grew to 3 or 4 GPUs as the others ended, and it ran on at 2: no resize,
        # one attempt for rung 1; rung 2 (its next job) takes the whole node. (Rung 0 takes
        # what is idle when it starts: the last of nine on four GPUs may get them all.)
        self.assertEqual(resizes, [], resizes)
        self.assertTrue(grew, grew)
        self.assertEqual([a["budget"] for a in attempts], [2, 6, 18], attempts)
        self.assertEqual([a["world"] for a in attempts[1:]], [2, 4], attempts)
        self.assertEqual(steps, list(range(1, 19)), steps)


if __name__ == "__main__":
    main()
