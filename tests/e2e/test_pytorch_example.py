#!/usr/bin/env python3
"""The PyTorch example (examples/pytorch): a shortened copy of its experiment runs to the end
under ASHA with real training on scikit-learn's digits, and its trainer keeps the checkpoint
contract: a paused trial resumed from its checkpoint reports exactly what an uninterrupted
one reports.

The trials run under /usr/bin/python3, Debian's interpreter, which has python3-torch and
python3-sklearn (scripts/install-deps.sh installs them); this test itself needs only the
standard library."""

import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, HANG_SCALE, SRC, main, merged_env, yaml_str

TRAIN = os.path.join(SRC, "examples", "pytorch", "train.py")
DEBIAN_PY = "/usr/bin/python3"
# Several jobs of several seconds each (most of it importing torch), slower under ASan.
RUN_TIMEOUT = 300
# Outside tunepack: no report descriptor (reports go to stdout), no control channel.
BARE_ENV = {"TUNEPACK_REPORT_FD": None, "TUNEPACK_CONTROL_FD": None, "TUNEPACK_BUDGET": None,
            "TUNEPACK_CHECKPOINT_DIR": None, "TUNEPACK_TRIAL_DIR": None}


class PytorchExample(E2E):

    @classmethod
    def setUpClass(cls):
        # Once for the class: importing torch takes seconds.
        probe = subprocess.run(
            [DEBIAN_PY, "-c", "import torch, sklearn.datasets"], capture_output=True,
            text=True, stdin=subprocess.DEVNULL)
        if probe.returncode != 0:
            raise AssertionError("%s cannot import torch and sklearn: install python3-torch "
                                 "and python3-sklearn (scripts/install-deps.sh)\n%s"
                                 % (DEBIAN_PY, probe.stderr))

    def start_train(self, *args, env=None, pass_fds=()):
        """Start train.py outside tunepack; return the Popen (text output, killed in
        tearDown if still running)."""
        full = dict(BARE_ENV)
        full.update(env or {})
        p = subprocess.Popen([DEBIAN_PY, TRAIN] + [str(a) for a in args],
                             env=merged_env(full), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                             pass_fds=pass_fds)
        self.procs.append(p)
        return p

    def finish(self, p):
        """Wait for a process from start_train; return (stdout, stderr) after checking that
        it exited 0."""
        out, err = p.communicate(timeout=RUN_TIMEOUT * HANG_SCALE)
        self.assertEqual(p.returncode, 0, err)
        return out, err

    def test_shortened_example_runs_under_asha_and_learns_far_above_chance(self):
        with open(os.path.join(SRC, "examples", "pytorch", "experiment.yaml")) as f:
            text = f.read()
        # 5 configurations, rungs at 1 and 3 epochs: 5 one-epoch jobs, 1 or 2 promoted to 3.
        for old, new in (("examples/pytorch/train.py", yaml_str(TRAIN)),
                         ("trials: 30", "trials: 5"),
                         ("max: 9", "max: 3")):
            self.assertEqual(text.count(old), 1,
                             "examples/pytorch/experiment.yaml changed: %r" % old)
            text = text.replace(old, new)
        run_dir = self.path("run")
        r = self.run_exp(self.experiment(text), run_dir, timeout=RUN_TIMEOUT)
        self.assertExit(r, 0)
        with self.store(run_dir) as s:
            trials = s.trials()
            metrics = s.metrics()
            self.assertEqual(s.meta()["state"], "finished")
        self.assertEqual(len(trials), 5)
        states = [t["state"] for t in trials]
        self.assertLessEqual(set(states), {"completed", "stopped"}, trials)
        # ASHA stopped some after one epoch and took at least one to the top rung.
        stopped = [t for t in trials if t["state"] == "stopped"]
        self.assertGreaterEqual(len(stopped), 1, trials)
        for t in stopped:
            self.assertIn("not promoted", t["decision"], t)
        self.assertIn(3, [t["budget"] for t in trials if t["state"] == "completed"], trials)
        # Every trial reported val_acc; the best is far above chance (0.1 for 10 digits).
        for t in trials:
            self.assertTrue(0.0 <= t["value"] <= 1.0, t)
            reports = [json.loads(m["data"]) for m in metrics if m["trial"] == t["id"]]
            self.assertGreaterEqual(len(reports), 1, t)
            for rep in reports:
                self.assertTrue(0.0 <= rep["val_acc"] <= 1.0, rep)
        best = json.loads(self.tp("best", run_dir, "--json").stdout)
        self.assertEqual(best["value"], max(t["value"] for t in trials))
        self.assertGreater(best["value"], 0.8)
        # A promoted trial resumed from its checkpoint: each epoch was reported once, in
        # order, across its jobs (a job that started over would repeat step 1).
        for t in trials:
            steps = [m["step"] for m in metrics if m["trial"] == t["id"]]
            self.assertEqual(steps, list(range(1, t["step"] + 1)), t)
            self.assertTrue(os.path.exists(os.path.join(run_dir, "trials", "%06d" % t["id"],
                                                        "checkpoint", "model.pt")), t)
        promoted = [t for t in trials if t["budget"] == 3]
        self.assertGreaterEqual(len(promoted), 1)
        for t in promoted:
            with open(os.path.join(run_dir, "trials", "%06d" % t["id"], "stderr.log")) as f:
                self.assertIn("at epoch 1", f.read())

    def test_a_paused_trial_resumed_from_its_checkpoint_matches_an_uninterrupted_one(self):
        args = ["--lr", "0.003", "--dropout", "0.2", "--hidden", "32", "--batch", "64"]
        # The reference, 3 epochs in one go, runs beside the paused trial.
        whole_p = self.start_train(*args, "--epochs", "3")

        # A pause request waits on the control channel from the start: the trial stops after
        # its first epoch, with status 0 and the checkpoint saved.
        ckpt = self.path("ckpt")
        r, w = os.pipe()
        os.write(w, b"pause\n")
        os.close(w)
        try:
            first_p = self.start_train(*args, "--epochs", "3", pass_fds=(r,),
                                       env={"TUNEPACK_CONTROL_FD": str(r),
                                            "TUNEPACK_CHECKPOINT_DIR": ckpt})
        finally:
            os.close(r)
        first, first_err = self.finish(first_p)
        self.assertIn("paused", first_err)
        self.assertEqual(len(first.splitlines()), 1, first)
        self.assertTrue(first.startswith("step=1 "), first)
        self.assertTrue(os.path.exists(os.path.join(ckpt, "model.pt")))

        # Resumed with the budget from TUNEPACK_BUDGET (no --epochs): epochs 2 and 3 only,
        # bit for bit what the uninterrupted run reported.
        rest, rest_err = self.finish(self.start_train(
            *args, env={"TUNEPACK_CHECKPOINT_DIR": ckpt, "TUNEPACK_BUDGET": "3"}))
        self.assertIn("resumed from", rest_err)
        whole, _ = self.finish(whole_p)
        self.assertEqual(len(whole.splitlines()), 3, whole)
        self.assertEqual(first.splitlines() + rest.splitlines(), whole.splitlines())
        # Far above chance after three epochs, below perfect.
        acc = float(whole.splitlines()[-1].split("val_acc=")[1].split()[0])
        self.assertTrue(0.5 < acc < 1.0, whole)


    def test_pbt_example_shortened_exploits_from_a_copied_checkpoint(self):
        """examples/pbt: 4 trials, 4 epochs in jobs of 2: one generation at epoch 2 where the
        worst trial takes the best's checkpoint and goes on from epoch 3 with a perturbed lr."""
        with open(os.path.join(SRC, "examples", "pbt", "experiment.yaml")) as f:
            text = f.read()
        for old, new in (("examples/pbt/train.py",
                          yaml_str(os.path.join(SRC, "examples", "pbt", "train.py"))),
                         ("trials: 8", "trials: 4"),
                         ("max: 8", "max: 4")):
            self.assertEqual(text.count(old), 1, "examples/pbt/experiment.yaml changed: %r" % old)
            text = text.replace(old, new)
        run_dir = self.path("run")
        self.assertExit(self.run_exp(self.experiment(text), run_dir, timeout=RUN_TIMEOUT), 0)
        with self.store(run_dir) as s:
            trials = s.trials()
            ex = [(r["trial"], json.loads(r["detail"])) for r in
                  s.q("SELECT trial, detail FROM decisions WHERE kind = 'exploit'")]
            metrics = [(m["trial"], json.loads(m["data"])) for m in s.metrics()]
        self.assertEqual(len(trials), 4)
        for t in trials:
            self.assertEqual(t["state"], "completed", t)
            self.assertEqual(t["step"], 4)
            self.assertGreater(t["value"], 0.3, t)  # far above chance (0.1)
        self.assertEqual(len(ex), 1)  # ceil(4 x 0.25): the worst at epoch 2
        trial, d = ex[0]
        self.assertEqual(d["donor_step"], 2)
        steps = [m for t, m in metrics if t == trial and m["step"] == 3]
        self.assertTrue(steps)  # it went on from epoch 3: the donor's epoch 2 checkpoint
        self.assertEqual(steps[-1]["lr"], d["new"]["lr"])

if __name__ == "__main__":
    main()
