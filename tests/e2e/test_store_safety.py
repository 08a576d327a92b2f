#!/usr/bin/env python3
"""The store never loses or hides data: a damaged, emptied or truncated store is refused with
what was found and how to recover, a full disk is named as such and nothing is announced that
the store does not hold, and SIGKILLs of the orchestrator in the middle of its commits leave a
whole store that loses and repeats no trial."""

import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import BIN, E2E, main, token_pids, wait_for, yaml_str

N = 6
EXP = """name: store
command: [sh, -c, 'echo "{{\\"acc\\": $0}}" >&3; echo out', "{x}"]
metric: {name: acc, mode: max}
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, trials: %d, seed: 3}
concurrency: 2
""" % N

READERS = (("status",), ("trials",), ("best",), ("export", "--format", "json"))


class StoreSafety(E2E):

    def finished_run(self):
        exp = self.experiment(EXP)
        run_dir = self.path("run")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        return exp, run_dir

    def logs(self, run_dir):
        out = {}
        for tid in sorted(os.listdir(os.path.join(run_dir, "trials"))):
            with open(os.path.join(run_dir, "trials", tid, "stdout.log"), "rb") as f:
                out[tid] = f.read()
        return out

    def test_emptied_store_is_refused_and_the_old_trials_logs_stay(self):
        exp, run_dir = self.finished_run()
        before = self.logs(run_dir)
        db = os.path.join(run_dir, "tunepack.db")
        for f in ("tunepack.db-wal", "tunepack.db-shm"):
            if os.path.exists(os.path.join(run_dir, f)):
                os.unlink(os.path.join(run_dir, f))
        open(db, "w").close()
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 4)
        self.assertIn("it is empty (0 bytes)", r.stderr)
        self.assertIn("holds %d trial folder(s)" % N, r.stderr)
        self.assertIn("Nothing was changed", r.stderr)
        self.assertEqual(os.path.getsize(db), 0, "the empty store must be left as it was")
        self.assertEqual(self.logs(run_dir), before)
        os.unlink(db)  # missing altogether: refused too
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 4)
        self.assertIn("it is missing", r.stderr)
        self.assertFalse(os.path.exists(db))

    def damage(self, run_dir, how):
        db = os.path.join(run_dir, "tunepack.db")
        size = os.path.getsize(db)
        with open(db, "r+b") as f:
            if how == "truncated":
                f.truncate(size // 2)
            elif how == "middle":
                f.seek(size // 2)
                f.write(os.urandom(4096))
            else:  # header
                f.seek(0)
                f.write(b"\xff" * 100)

    def test_damaged_store_fails_every_command_and_run(self):
        for how in ("middle", "truncated", "header"):
            with self.subTest(how=how):
                exp, run_dir = self.finished_run()
                # The checkpoint moves every page into tunepack.db (no WAL left over).
                conn = sqlite3.connect(os.path.join(run_dir, "tunepack.db"))
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.close()
                self.damage(run_dir, how)
                for args in READERS:
                    r = self.tp(args[0], run_dir, *args[1:])
                    self.assertExit(r, 4)
                    self.assertIn("is damaged", r.stderr, args)
                r = self.run_exp(exp, run_dir)
                self.assertExit(r, 4)
                self.assertIn("is damaged", r.stderr)
                shutil.rmtree(run_dir)

    def test_full_disk_is_named_and_nothing_unrecorded_is_announced(self):
        if not shutil.which("unshare"):
            self.skipTest("unshare is needed to mount a small tmpfs")
        # Reports of 2 KB fill a 640 KiB disk after a few hundred lines.
        script = self.write("fill.sh", 'pad=$(head -c 2000 /dev/zero | tr "\\0" x)\n'
                            'for i in $(seq 1 20); do\n'
                            '  echo "{\\"step\\": $i, \\"acc\\": $1, \\"pad\\": \\"$pad\\"}" >&3\n'
                            'done\n')
        exp = self.experiment(
            "name: full\ncommand: [sh, %s, \"{x}\"]\nmetric: {name: acc, mode: max}\n"
            "space:\n  x: {uniform: [0, 1]}\nsearch: {algorithm: random, trials: 200}\n"
            "concurrency: 2\n" % yaml_str(script))
        mnt, out = self.path("mnt"), self.path("out")
        os.makedirs(mnt)
        os.makedirs(out)
        self.run_dirs.append(os.path.join(out, "run"))
        p = subprocess.run(
            ["unshare", "-rm", "sh", "-c",
             'mount -t tmpfs -o size=640k tmpfs "$1" || exit 99; '
             '"$2" run "$3" --dir "$1/run" --plain; rc=$?; cp -a "$1/run" "$4/"; exit $rc',
             "sh", mnt, BIN, exp, out],
            capture_output=True, text=True, timeout=120, errors="replace")
        if p.returncode == 99:
            self.skipTest("cannot mount a tmpfs here: %s" % p.stderr.strip())
        self.assertExit(p, 4)
        self.assertIn("the disk holding the store is full", p.stderr)
        announced = [int(m) for m in re.findall(r"trial (\d+) completed", p.stdout)]
        self.assertGreater(len(announced), 0, p.stdout)
        with self.store(os.path.join(out, "run")) as s:
            states = {t["id"]: t["state"] for t in s.trials()}
            self.assertEqual(s.q("PRAGMA integrity_check")[0]["integrity_check"], "ok")
        for tid in announced:
            self.assertEqual(states.get(tid), "completed",
                             "trial %d was announced as completed but the store has %s"
                             % (tid, states.get(tid)))

    def test_sigkill_inside_commits_keeps_the_store_whole_and_loses_no_trial(self):
        # About 6 s of trial work at concurrency 4: enough for the 10 kills (0.1-1.2 s
        # apart) to land before the run can finish, on a fast machine too.
        n, kills = 48, 10
        script = self.write("many.sh", 'for i in 1 2 3 4 5 6 7 8; do\n'
                            '  echo "{\\"step\\": $i, \\"acc\\": $1}" >&3; sleep 0.06\n'
                            'done\n')
        exp = self.experiment(
            "name: crash\ncommand: [sh, %s, \"{x}\"]\nmetric: {name: acc, mode: max}\n"
            "space:\n  x: {uniform: [0, 1]}\nsearch: {algorithm: random, trials: %d, seed: 5}\n"
            "concurrency: 4\n" % (yaml_str(script), n))
        run_dir = self.path("run")
        rng = random.Random(14)
        kept, done_kills = {}, 0
        for i in range(kills):
            p = self.start_run(exp, run_dir)
            wait_for(lambda: self.lock_pid(run_dir) == p.pid or p.poll() is not None, 20)
            # Once the store has its schema (a kill before that finds no store to check).
            wait_for(lambda: self.poll_query(run_dir, "SELECT 1 FROM trials") is not None
                     or p.poll() is not None, 20)
            # Reports commit every 50 ms or so: a kill at a random moment lands in or between
            # commits; several land inside one.
            time.sleep(rng.uniform(0.1, 1.2))
            if p.poll() is not None:
                break
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
            done_kills += 1
            with self.store(run_dir) as s:
                self.assertEqual(s.q("PRAGMA integrity_check")[0]["integrity_check"], "ok",
                                 "kill %d" % i)
                trials = s.trials()
                self.assertEqual([t["id"] for t in trials], list(range(len(trials))))
                done = {t["id"]: (t["value"], t["params"]) for t in trials
                        if t["state"] == "completed"}
                for t in done:
                    self.assertEqual(len(s.events(t, "completed")), 1, "kill %d" % i)
            for tid, row in kept.items():
                self.assertEqual(done.get(tid), row, "trial %d changed after kill %d" % (tid, i))
            kept = done
            token = self.token_of(run_dir)
            if token:
                wait_for(lambda: token_pids(token) == [], 20)
        print("crash loop: %d SIGKILLs, %d trials completed before the last" %
              (done_kills, len(kept)))
        self.assertGreaterEqual(done_kills, 8, "the run ended before the kills could land")
        self.assertExit(self.run_exp(exp, run_dir), 0)
        with self.store(run_dir) as s:
            self.assertEqual(s.q("PRAGMA integrity_check")[0]["integrity_check"], "ok")
            trials = s.trials()
            self.assertEqual([t["id"] for t in trials], list(range(n)))
            for t in trials:
                self.assertEqual(t["state"], "completed", t)
                self.assertEqual(len(s.events(t["id"], "completed")), 1, t)
            for tid, (value, params) in kept.items():
                self.assertEqual((trials[tid]["value"], trials[tid]["params"]), (value, params))


if __name__ == "__main__":
    main()
