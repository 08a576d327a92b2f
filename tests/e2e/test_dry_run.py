#!/usr/bin/env python3
"""`run --dry-run` tells the truth: the absolute path of each program, a Python interpreter's
version and whether the script's top-level imports import, and on an existing experiment which
changes the run would take or refuse and which trials it would run next, with the store left
as it was."""

import hashlib
import os
import shutil
import signal
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, main, wait_for

SCRIPT = """import json, os
import sys as system, collections.abc
from pathlib import Path
import tp_no_such_module_here
try:
    import tp_optional_module
except ImportError:
    pass
print("acc=1")
"""

EXP = """name: dry
command: [python3, train.py, --x, "{x}"]
metric: {name: acc, mode: max}
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, trials: 2, seed: 1}
"""

RUNS = """name: dry
command: [sh, -c, "echo acc=1", "{x}"]
metric: {name: acc, mode: max}
space:
  x: {uniform: [0, 1]}
search: {algorithm: random, trials: 2, seed: 1}
"""


class DryRun(E2E):

    def test_shows_each_programs_path_and_python_imports(self):
        self.write("train.py", SCRIPT)
        r = self.tp("run", self.experiment(EXP), "--dry-run", "--show", "1")
        self.assertExit(r, 0)
        python = shutil.which("python3")
        self.assertIn("  python3 -> %s\n" % python, r.stdout)
        self.assertIn("    script train.py -> %s\n" % os.path.realpath(self.path("train.py")),
                      r.stdout)
        self.assertRegex(r.stdout, r"    Python 3\.\d+\.\d+")
        for ok in ("json", "os", "sys", "collections.abc", "pathlib"):
            self.assertIn("      %s: ok\n" % ok, r.stdout)
        self.assertIn("      tp_no_such_module_here: ModuleNotFoundError", r.stdout)
        self.assertNotIn("tp_optional_module", r.stdout)  # indented: not top level
        self.assertIn("warning: 1 module(s)", r.stdout)
        # A program given by path is resolved from the working directory.
        sub = self.write("bin/tool", "#!/bin/sh\necho acc=1\n")
        os.chmod(sub, 0o755)
        r = self.tp("run", self.experiment(EXP.replace("python3, train.py", "./bin/tool"),
                                           name="tool.yaml"), "--dry-run")
        self.assertExit(r, 0)
        self.assertIn("  ./bin/tool -> %s/./bin/tool\n" % os.path.realpath(self.tmp), r.stdout)

    def test_a_missing_program_is_a_mistake_never_beside_no_mistakes(self):
        r = self.tp("run", self.experiment(EXP.replace("python3", "tp-no-such-program")),
                    "--dry-run")
        self.assertExit(r, 3)
        self.assertIn('the program "tp-no-such-program" does not exist', r.stderr)
        self.assertNotIn("no mistakes", r.stdout + r.stderr)

    def test_on_an_existing_experiment_says_changes_and_next_trials_and_writes_nothing(self):
        run_dir = self.path("run")
        exp = self.experiment(RUNS)
        self.assertExit(self.run_exp(exp, run_dir), 0)

        def snapshot():
            out = {}
            for name in sorted(os.listdir(run_dir)):
                p = os.path.join(run_dir, name)
                # SQLite's reader may leave an empty -wal and its -shm index: no data.
                if name.endswith("-shm") or (name.endswith("-wal") and not os.path.getsize(p)):
                    continue
                if os.path.isfile(p):
                    with open(p, "rb") as f:
                        out[name] = (hashlib.sha256(f.read()).hexdigest(), os.stat(p).st_mtime_ns)
            return out

        before = snapshot()
        with self.store(run_dir) as s:
            rows = (s.meta(), s.trials(), s.events())
        more = self.experiment(RUNS.replace("trials: 2", "trials: 5") + "concurrency: 2\n",
                               name="more.yaml")
        r = self.tp("run", more, "--dir", run_dir, "--dry-run")
        self.assertExit(r, 0)
        self.assertIn("no mistakes", r.stdout)
        self.assertIn("%s holds this experiment already" % run_dir, r.stdout)
        self.assertIn("    search.trials: 2 -> 5", r.stdout)
        self.assertIn("    concurrency: (none) -> 2", r.stdout)
        self.assertIn("2 trial(s) recorded: 2 completed", r.stdout)
        self.assertIn("then up to 3 new trial(s)", r.stdout)
        changed = self.experiment(RUNS.replace('"echo acc=1"', '"echo acc=2"'), name="cmd.yaml")
        r = self.tp("run", changed, "--dir", run_dir, "--dry-run")
        self.assertExit(r, 4)
        self.assertIn("the run would refuse these changes", r.stderr)
        self.assertIn("command:", r.stderr)
        self.assertNotIn("no mistakes", r.stdout)
        self.assertEqual(snapshot(), before, "a dry run must not write to the experiment")
        with self.store(run_dir) as s:
            self.assertEqual((s.meta(), s.trials(), s.events()), rows)
        # The run itself agrees with the dry run: the refused change exits 4.
        self.assertExit(self.run_exp(changed, run_dir), 4)

    def test_a_trial_cut_short_by_a_killed_run_is_next(self):
        run_dir = self.path("run")
        exp = self.experiment(RUNS.replace('"echo acc=1"', '"sleep 60; echo acc=1"')
                              .replace("trials: 2", "trials: 1"))
        p = self.start_run(exp, run_dir)

        def running():
            rows = self.poll_query(run_dir, "SELECT count(*) AS n FROM events WHERE kind = ?",
                                   "running")
            return p.poll() is not None or (rows and rows[0]["n"] >= 1)
        wait_for(running, 60)
        self.assertIsNone(p.poll(), "the run ended before its trial started")
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        r = self.tp("run", exp, "--dir", run_dir, "--dry-run")
        self.assertExit(r, 0)
        self.assertIn("1 trial(s) recorded: 1 running", r.stdout)
        self.assertIn("trial 0 (running, 1 attempt(s)): runs again", r.stdout)
        self.assertNotIn("new trial", r.stdout)  # search.trials is reached


if __name__ == "__main__":
    main()
