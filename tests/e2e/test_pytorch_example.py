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

from helpers import E2E, SRC, main, merged_env, yaml_str

TRAIN = os.path.join(SRC, "examples", "pytorch", "train.py")
DEBIAN_PY = "/usr/bin/python3"
# Several jobs of several seconds each (most of it importing torch), slower under ASan.
RUN_TIMEOUT = 300
# Outside tunepack: no report descriptor (reports go to stdout), no control channel.
BARE_ENV = {"TUNEPACK_REPORT_FD": None, "TUNEPACK_CONTROL_FD": None, "TUNEPACK_BUDGET": None,
            "TUNEPACK_CHECKPOINT_DIR": None, "TUNEPACK_TRIAL_DIR": None}


class PytorchExample(E2E):

    def setUp(self):
        super().setUp()
        probe = subprocess.run(
            [DEBIAN_PY, "-c", "import torch, sklearn.datasets"], capture_output=True,
            text=True, stdin=subprocess.DEVNULL)
        self.assertEqual(probe.returncode, 0,
                         "%s cannot import torch and sklearn: install python3-torch and "
                         "python3-sklearn (scripts/install-deps.sh)\n%s"
                         % (DEBIAN_PY, probe.stderr))

    def train(self, *args, env=None, pass_fds=()):
        """Run train.py outside tunepack; return CompletedProcess (text output)."""
        full = dict(BARE_ENV)
        full.update(env or {})
        return subprocess.run([DEBIAN_PY, TRAIN] + [str(a) for a in args],
                              env=merged_env(full), capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, pass_fds=pass_fds,
                              timeout=RUN_TIMEOUT)

    def test_shortened_example_runs_under_asha_and_learns_far_above_chance(self):
        with open(os.path.join(SRC, "examples", "pytorch", "experiment.yaml")) as f:
            text = f.read()
        # 6 configurations, rungs at 1 and 3 epochs: 6 one-epoch jobs, 2 promoted to 3.
        for old, new in (("examples/pytorch/train.py", yaml_str(TRAIN)),
                         ("trials: 30", "trials: 6"),
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
        self.assertEqual(len(trials), 6)
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

    def test_a_paused_trial_resumed_from_its_checkpoint_reports_what_an_uninterrupted_one_does(self):
        args = ["--lr", "0.003", "--dropout", "0.2", "--hidden", "32", "--batch", "64"]
        whole = self.train(*args, "--epochs", "3")
        self.assertEqual(whole.returncode, 0, whole.stderr)
        self.assertEqual(len(whole.stdout.splitlines()), 3, whole.stdout)

        # A pause request waits on the control channel from the start: the trial stops after
        # its first epoch, with status 0 and the checkpoint saved.
        ckpt = self.path("ckpt")
        r, w = os.pipe()
        os.write(w, b"pause\n")
        os.close(w)
        try:
            first = self.train(*args, "--epochs", "3", pass_fds=(r,),
                               env={"TUNEPACK_CONTROL_FD": str(r),
                                    "TUNEPACK_CHECKPOINT_DIR": ckpt})
        finally:
            os.close(r)
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertIn("paused", first.stderr)
        self.assertEqual(first.stdout.splitlines(), whole.stdout.splitlines()[:1])
        self.assertTrue(os.path.exists(os.path.join(ckpt, "model.pt")))

        # Resumed with the budget from TUNEPACK_BUDGET (no --epochs): epochs 2 and 3 only,
        # bit for bit what the uninterrupted run reported.
        rest = self.train(*args, env={"TUNEPACK_CHECKPOINT_DIR": ckpt, "TUNEPACK_BUDGET": "3"})
        self.assertEqual(rest.returncode, 0, rest.stderr)
        self.assertIn("resumed from", rest.stderr)
        self.assertEqual(first.stdout.splitlines() + rest.stdout.splitlines(),
                         whole.stdout.splitlines())
        # Far above chance after three epochs, below perfect.
        acc = float(whole.stdout.splitlines()[-1].split("val_acc=")[1].split()[0])
        self.assertTrue(0.5 < acc < 1.0, whole.stdout)


if __name__ == "__main__":
    main()
