#!/usr/bin/env python3
"""Fusion (`fuse:`): several configurations of one shape in one process, each still its own
trial: reports split by configuration index, an early stop drops one index while the process
goes on, checkpoints per configuration, a SIGKILLed run resumes exactly, K is chosen under the
memory limit from what was measured, and the PyTorch example runs fused."""

import json
import os
import signal
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, PY, SRC, main, token_pids, wait_for, yaml_str

# A fused trial in the standard library: argv STEPS SLEEP [MB]. Each configuration reports
# loss = x (its own parameter) at every step, keeps its step in its checkpoint directory
# (and resumes from it), and logs each step it computes; "drop i" stops index i, a pause
# request ends the process after the step. MB per configuration of memory are held.
FAKE = r'''
import json, os, sys, time
sys.path.insert(0, %(pydir)r)
from tunepack_report import budget, configs, dropped, report, should_pause
cfgs = configs()
steps, sleep = int(sys.argv[1]), float(sys.argv[2])
hold = bytearray((int(sys.argv[3]) if len(sys.argv) > 3 else 0) * len(cfgs) << 20)
for i in range(0, len(hold), 4096):
    hold[i] = 1
done = {}
for c in cfgs:
    os.makedirs(c["checkpoint_dir"], exist_ok=True)
    p = os.path.join(c["checkpoint_dir"], "step")
    done[c["config"]] = int(open(p).read()) if os.path.exists(p) else 0
    with open(os.path.join(c["checkpoint_dir"], "procs"), "a") as f:
        f.write("%%d %%d %%d\n" %% (os.getpid(), len(cfgs), c["config"]))
live = list(cfgs)
for step in range(1, steps + 1):
    for c in live:
        i = c["config"]
        if done[i] >= step:
            continue
        report(step=step, config=i, loss=float(c["params"]["x"]))
        with open(os.path.join(c["checkpoint_dir"], "work"), "a") as f:
            f.write("%%d\n" %% step)
        with open(os.path.join(c["checkpoint_dir"], "step.tmp"), "w") as f:
            f.write(str(step))
        os.replace(os.path.join(c["checkpoint_dir"], "step.tmp"),
                   os.path.join(c["checkpoint_dir"], "step"))
        done[i] = step
    gone = dropped()
    for c in live:
        if c["config"] in gone:
            with open(os.path.join(c["checkpoint_dir"], "dropped"), "w") as f:
                f.write("%%d %%d\n" %% (os.getpid(), step))
    live = [c for c in live if c["config"] not in gone]
    if not live or should_pause():
        break
    time.sleep(sleep)
'''


class Fuse(E2E):

    def fake(self):
        return self.write("fake.py", FAKE % {"pydir": os.path.join(SRC, "python")})

    def exp(self, fuse, trials, steps, sleep, extra="", mb=0, name="exp.yaml",
            scheduler="fifo", concurrency=1):
        return self.experiment(
            "name: fuse\n"
            "command: [%s, %s, \"%d\", \"%s\", \"%d\", --configs, \"{configs_json}\"]\n"
            "metric: {name: loss, mode: min}\n"
            "space:\n  x: {uniform: [0, 1]}\n  width: 8\n"
            "search: {algorithm: random, trials: %d, seed: 7, scheduler: %s}\n"
            "fuse: %s\nconcurrency: %d\ntimeout: 2m\n%s"
            % (yaml_str(PY), yaml_str(self.fake()), steps, sleep, mb, trials, scheduler, fuse,
               concurrency, extra), name=name)

    def ckpt(self, run_dir, tid, name):
        path = os.path.join(run_dir, "trials", "%06d" % tid, "checkpoint", name)
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return f.read()

    def runs_of(self, run_dir, tid):
        """[(pid, K, index)] of each process that ran trial tid."""
        text = self.ckpt(run_dir, tid, "procs") or ""
        return [tuple(int(v) for v in line.split()) for line in text.splitlines()]

    def test_fused_trials_keep_their_own_reports_and_checkpoints(self):
        run_dir = self.path("run")
        r = self.run_exp(self.exp("{min: 4, max: 4, shape: [width]}", 8, 3, 0.05), run_dir)
        self.assertExit(r, 0)
        pids = {}
        with self.store(run_dir) as s:
            trials = s.trials()
            self.assertEqual([t["state"] for t in trials], ["completed"] * 8)
            for t in trials:
                # Each configuration's reports went to its own trial: loss is its own x.
                rows = s.metrics(t["id"])
                self.assertEqual([m["step"] for m in rows], [1, 2, 3], t)
                self.assertTrue(all(m["value"] == t["params"]["x"] for m in rows), t)
                self.assertEqual(t["value"], t["params"]["x"])
                self.assertEqual(t["attempts"], 1)
                (pid, k, index), = self.runs_of(run_dir, t["id"])
                pids.setdefault(pid, []).append((index, t["id"]))
                self.assertEqual(k, 4)
                self.assertEqual(self.ckpt(run_dir, t["id"], "step"), "3")
            measured = s.events(kind="fuse-measure")
            self.assertEqual(len(measured), 2, measured)
            self.assertTrue(all("K=4:" in e["detail"] for e in measured), measured)
            table = json.loads(s.meta()["fusion"])
            self.assertEqual(list(table), ['{"width":8}'])
            self.assertEqual(table['{"width":8}']["4"]["runs"], 2)
            self.assertGreater(table['{"width":8}']["4"]["mem_mib"], 0)
        # Two processes of four configurations each, indexes 0..3 in trial order.
        self.assertEqual(len(pids), 2)
        for members in pids.values():
            self.assertEqual([i for i, _ in sorted(members)], [0, 1, 2, 3])
        # The configurations came as one argv element and in the environment alike.
        with open(os.path.join(run_dir, "trials", "000000", "params.json")) as f:
            self.assertEqual(json.load(f), {"width": 8})  # the shape: shared by all four

    def test_an_early_stop_drops_one_configuration_and_the_process_goes_on(self):
        run_dir = self.path("run")
        # The median rule: once 5 trials completed (the first process), a trial whose loss
        # is above their median at a step is stopped; in the second process those are
        # dropped by index while the others run to the end.
        xs = [0.1, 0.3, 0.5, 0.7, 0.9, 0.2, 0.8, 0.4, 0.95, 0.6]
        enqueue = "enqueue: [%s]\n" % ", ".join("{x: %s}" % x for x in xs)
        r = self.run_exp(self.exp("{min: 5, max: 5}", 10, 30, 0.1, scheduler="median",
                                  extra=enqueue), run_dir)
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            trials = s.trials()
            first, second = trials[:5], trials[5:]
            self.assertEqual([t["state"] for t in first], ["completed"] * 5)
            stopped = [t for t in second if t["state"] == "stopped"]
            kept = [t for t in second if t["state"] == "completed"]
            # Above the first five's median (0.5): stopped; below: run to the end.
            self.assertEqual([t["params"]["x"] for t in stopped], [0.8, 0.95, 0.6])
            self.assertEqual([t["params"]["x"] for t in kept], [0.2, 0.4])
            for t in stopped:
                self.assertIn("median", t["decision"] or "", t)
                steps = [m["step"] for m in s.metrics(t["id"])]
                self.assertLess(max(steps), 30, "a dropped configuration trained on")
            for t in kept:
                self.assertEqual(max(m["step"] for m in s.metrics(t["id"])), 30)
        (pid, k, _), = self.runs_of(run_dir, kept[0]["id"])
        self.assertEqual(k, 5)
        for t in stopped:
            # Same process as the ones that went on: it was told to drop this index only.
            self.assertEqual(self.runs_of(run_dir, t["id"])[0][0], pid)
            dpid, at = map(int, self.ckpt(run_dir, t["id"], "dropped").split())
            self.assertEqual(dpid, pid)
            self.assertLess(at, 30)

    def test_a_killed_fused_run_resumes_exactly(self):
        n, steps = 12, 8
        exp = self.exp("{min: 3, max: 3}", n, steps, 0.25, concurrency=2)
        run_dir = self.path("run")
        p = self.start_run(exp, run_dir)
        # Kill it once some configurations have checkpointed and none has finished.
        wait_for(lambda: (self.poll_query(run_dir, "SELECT count(*) AS n FROM metrics")
                          or [{"n": 0}])[0]["n"] >= 6, 60)
        self.assertIsNone(p.poll(), "the run ended before it could be killed")
        self.assertEqual(self.lock_pid(run_dir), p.pid)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        token = self.token_of(run_dir)
        wait_for(lambda: token_pids(token) == [], 20)
        with self.store(run_dir) as s:
            before = {t["id"]: t for t in s.trials()}
        self.assertTrue(any(t["state"] == "running" for t in before.values()), before)
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            trials = s.trials()
            self.assertEqual([t["id"] for t in trials], list(range(n)), "each trial once")
            for t in trials:
                self.assertEqual(t["state"], "completed", t)
                self.assertEqual(t["value"], t["params"]["x"])
                self.assertEqual(len(s.events(t["id"], "completed")), 1)
                if t["id"] in before and before[t["id"]]["state"] == "completed":
                    self.assertEqual(t["attempts"], before[t["id"]]["attempts"])
                # Each step was computed once, but for the one a kill may cut short: the
                # second attempt went on from its configuration's own checkpoint.
                work = [int(v) for v in self.ckpt(run_dir, t["id"], "work").split()]
                self.assertEqual(sorted(set(work)), list(range(1, steps + 1)), t)
                self.assertLessEqual(len(work), steps + len(self.runs_of(run_dir, t["id"])) - 1)
                self.assertEqual(self.ckpt(run_dir, t["id"], "step"), str(steps))
        self.assertEqual(token_pids(token), [])

    def test_k_stays_under_the_memory_limit(self):
        run_dir = self.path("run")
        # One configuration holds 120 MiB: K=1 measures at least that, so K=2 (about twice)
        # would not fit in 200 MiB and is never started.
        r = self.run_exp(self.exp("{max: 4, memory: 200M, shape: [width]}", 4, 2, 0.05, mb=120), run_dir)
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            measured = s.events(kind="fuse-measure")
            self.assertEqual(len(measured), 4, measured)
            self.assertTrue(all("K=1:" in e["detail"] for e in measured), measured)
            choices = [e["detail"] for e in s.events(kind="fuse-choice")]
            self.assertTrue(any("would use about" in c for c in choices) or
                            all("K=1" in c for c in choices), choices)
            table = json.loads(s.meta()["fusion"])['{"width":8}']
            self.assertEqual(list(table), ["1"])
            self.assertGreaterEqual(table["1"]["mem_mib"], 120)
        # Without the limit the next K up is explored once K=1 is measured.
        run2 = self.path("run2")
        r = self.run_exp(self.exp("{max: 4}", 4, 2, 0.05, mb=0, name="exp2.yaml"), run2)
        self.assertExit(r, 0)
        with self.store(run2) as s:
            ks = {e["detail"].split(": ")[1] for e in s.events(kind="fuse-measure")}
            self.assertIn("K=1", ks)
            self.assertIn("K=2", ks)

    def test_config_mistakes_say_where(self):
        cases = [
            ("fuse: {max: 0}\n", ":5:13:", "max"),
            ("fuse: {max: 4, min: 8}\n", ":5:21:", "fuse.min 8 is above fuse.max 4"),
            ("fuse: {max: 4, shape: [depth]}\n", ":5:24:", "not a parameter"),
            ("fuse: {max: 4, shape: [width]}\n", ":2:", "placeholder {x} names a parameter "
                                                        "outside fuse.shape"),
            ("fuse: {max: 4, sizes: 3}\n", ":5:16:", "sizes"),
            ("fuse: {max: 4}\nresources: {gpus: 1}\ngroups: {shares: dynamic}\n", ":5:7:",
             "fuse cannot be combined with groups"),
            ("", ":2:", "{configs_json} is given only to fused processes"),
        ]
        for fuse, where, what in cases:
            with self.subTest(fuse=fuse):
                exp = self.experiment(
                    "name: bad\ncommand: [x, \"{x}\", \"{configs_json}\"]\n"
                    "metric: {name: loss, mode: min}\n"
                    "space: {x: {uniform: [0, 1]}, width: 8}\n%s" % fuse, name="bad.yaml")
                r = self.tp("run", exp, "--dry-run")
                self.assertExit(r, 3)
                self.assertIn("bad.yaml" + where, r.stderr)
                self.assertIn(what, r.stderr)

    def test_pytorch_example_runs_fused(self):
        exp = os.path.join(SRC, "examples", "fuse", "experiment.yaml")
        text = open(exp).read().replace("trials: 16", "trials: 6").replace(
            "max: 9", "max: 3").replace("fuse: {max: 8}", "fuse: {min: 3, max: 3}").replace(
            "hidden: {choice: [32, 128]}", "hidden: 32").replace(
            "lr: {loguniform: [1.0e-3, 0.5]}", "lr: {loguniform: [0.05, 0.5]}")
        mine = self.experiment(text, name="torch.yaml")
        run_dir = self.path("run")
        r = self.run_exp(mine, run_dir, cwd=SRC, timeout=300)
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            trials = s.trials()
            self.assertEqual(len(trials), 6)
            self.assertTrue(all(t["state"] in ("completed", "stopped") for t in trials))
            best = max(t["value"] for t in trials if t["value"] is not None)
            self.assertGreater(best, 0.5, "no configuration learned the digits")
            self.assertTrue(s.events(kind="fuse-measure"))
        for t in trials:  # each configuration's own checkpoint
            ck = os.path.join(run_dir, "trials", "%06d" % t["id"], "checkpoint", "fused.pt")
            self.assertTrue(os.path.exists(ck), ck)
        # The first rung's six configurations ran as processes of three.
        with self.store(run_dir) as s:
            firsts = [e for e in s.events(kind="fuse-measure") if "K=3:" in e["detail"]]
            self.assertTrue(firsts, s.events(kind="fuse-measure"))


if __name__ == "__main__":
    main()
