#!/usr/bin/env python3
"""The store and the trial folders agree: each folder carries what the store knows of it
(trial.json: trial, attempt, the experiment's identity); a resume whose store is behind its
folders (its -wal lost after a checkpoint, an older copy put back) is refused, names what is
missing and how to recover, and changes nothing; every attempt's logs are kept, stdout and
stderr alike."""

import json
import os
import shutil
import sqlite3
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, main

EXP = """name: agree
command: [sh, -c, 'echo "{{\\"acc\\": $0}}" >&3; echo "out $0"; echo "err $0" >&2', "{x}"]
metric: {name: acc, mode: max}
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, trials: %d, seed: 5}
"""

# Fails its first attempt, completes its second; each says which it is on both streams.
TWICE = """name: twice
command: [sh, -c, 'echo "out $TUNEPACK_ATTEMPT"; echo "err $TUNEPACK_ATTEMPT" >&2;
  if [ "$TUNEPACK_ATTEMPT" = 1 ]; then exit 3; fi; echo "{{\\"acc\\": $0}}" >&3', "{x}"]
metric: {name: acc, mode: max}
space:
  x: {choice: [1]}
search: {algorithm: grid}
retries: 1
"""


def folder_files(run_dir):
    """{trial folder/name: bytes} of every file in the trial folders."""
    out = {}
    base = os.path.join(run_dir, "trials")
    for root, _, files in os.walk(base):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                out[os.path.relpath(os.path.join(root, name), base)] = f.read()
    return out


def read(path):
    with open(path, "rb") as f:
        return f.read()


class StoreAgrees(E2E):

    def test_each_trial_folder_carries_what_the_store_knows_of_it(self):
        run_dir = self.path("run")
        self.assertExit(self.run_exp(self.experiment(EXP % 3), run_dir), 0)
        with self.store(run_dir) as s:
            xid = s.meta()["experiment_id"]
            self.assertRegex(xid, r"^[0-9a-f]{32}$")
            for t in s.trials():
                with open(os.path.join(run_dir, "trials", "%06d" % t["id"], "trial.json")) as f:
                    self.assertEqual(json.load(f), {"trial": t["id"], "attempt": t["attempts"],
                                                    "experiment": xid})

    def test_a_rolled_back_store_is_refused_with_what_is_missing_and_how_to_recover(self):
        run_dir = self.path("run")
        self.assertExit(self.run_exp(self.experiment(EXP % 2), run_dir), 0)
        db = os.path.join(run_dir, "tunepack.db")
        old = read(db)  # checkpointed at the end: the file alone is the whole store
        grown = self.experiment(EXP % 4, name="grown.yaml")
        self.assertExit(self.run_exp(grown, run_dir), 0)
        # the store's -wal is lost after a checkpoint: the old copy is back
        for f in ("tunepack.db-wal", "tunepack.db-shm"):
            if os.path.exists(os.path.join(run_dir, f)):
                os.unlink(os.path.join(run_dir, f))
        with open(db, "wb") as f:
            f.write(old)
        before = folder_files(run_dir)
        r = self.run_exp(grown, run_dir)
        self.assertExit(r, 4)
        self.assertIn("is behind its trial folders", r.stderr)
        self.assertIn("no record of the trials in 000002, 000003", r.stderr)
        self.assertIn("Nothing was changed", r.stderr)
        self.assertIn("tunepack run %s --fork %s --dir NEW" % (grown, run_dir), r.stderr)
        self.assertIn("%s/trials/000002, %s/trials/000003" % (run_dir, run_dir), r.stderr)
        self.assertNotIn("tunepack: info: resuming", r.stderr)
        self.assertEqual(folder_files(run_dir), before, "no trial folder or log was touched")
        self.assertEqual(read(db), old, "the store was not changed")
        # the ways out it names: a fork into a new directory, seeded with what the store holds
        new_dir = self.path("new")
        self.assertExit(self.run_exp(grown, new_dir, "--fork", run_dir), 0)
        with self.store(new_dir) as s:
            self.assertEqual(len([t for t in s.trials() if t["id"] < 0]), 2)
        # or the folders it does not know moved aside: the resume runs those trials afresh
        aside = self.path("aside")
        os.mkdir(aside)
        for name in ("000002", "000003"):
            shutil.move(os.path.join(run_dir, "trials", name), aside)
        self.assertExit(self.run_exp(grown, run_dir), 0)
        with self.store(run_dir) as s:
            self.assertEqual([t["state"] for t in s.trials()], ["completed"] * 4)
        self.assertEqual(read(os.path.join(aside, "000002", "stdout.log")),
                         before[os.path.join("000002", "stdout.log")])

    def test_attempts_beyond_the_store_are_refused_and_every_attempts_logs_kept(self):
        run_dir = self.path("run")
        exp = self.experiment(TWICE)
        self.assertExit(self.run_exp(exp, run_dir), 0)
        home = os.path.join(run_dir, "trials", "000000")
        logs = {n: read(os.path.join(home, n)) for n in sorted(os.listdir(home)) if ".log" in n}
        self.assertEqual(logs, {"stdout.1.log": b"out 1\n", "stderr.1.log": b"err 1\n",
                                "stdout.log": b"out 2\n", "stderr.log": b"err 2\n"})
        # the store loses the second attempt (an older copy of it, in effect)
        conn = sqlite3.connect(os.path.join(run_dir, "tunepack.db"))
        conn.execute("UPDATE trials SET attempts = 1, state = 'pending' WHERE id = 0")
        conn.commit()
        conn.close()
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 4)
        self.assertIn("fewer attempts than ran in 000000 (2 ran, 1 recorded)", r.stderr)
        self.assertEqual({n: read(os.path.join(home, n)) for n in logs}, logs)


if __name__ == "__main__":
    main()
