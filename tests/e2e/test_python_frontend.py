"""The Python front end (python/tunepack.py), from Debian's /usr/bin/python3: run an experiment,
follow it, and read status, trials and best from the store read-only; what it says agrees with
the CLI."""

import json
import os
import subprocess
import sys

from helpers import BIN, E2E, SRC, main
from test_everyday import ASHA

SYSTEM_PY = "/usr/bin/python3"


SCRIPT = """
import json, sys, tunepack
exp, run_dir = sys.argv[1], sys.argv[2]
r = tunepack.run(exp, run_dir, wait=False)
lines = list(r.lines())
code = r.wait()
out = {"code": code, "lines": lines, "status": tunepack.status(run_dir),
       "trials": tunepack.trials(run_dir), "best": tunepack.best(run_dir),
       "top": [t["id"] for t in tunepack.best(run_dir, top=3)]}
try:
    tunepack.run(sys.argv[3], run_dir + "-bad")
except tunepack.TunepackError as e:
    out["error"] = [e.code, e.stderr]
print(json.dumps(out))
"""


class PythonFrontEnd(E2E):
    def test_notebook_runs_follows_and_reads_an_experiment(self):
        py = SYSTEM_PY if os.path.exists(SYSTEM_PY) else sys.executable
        run_dir = self.path("run")
        self.run_dirs.append(run_dir)
        exp = self.experiment(ASHA)
        bad = self.experiment("name: bad\n", name="bad.yaml")
        script = self.write("nb.py", SCRIPT)
        env = dict(os.environ, PYTHONPATH=os.path.join(SRC, "python"), TUNEPACK_BIN=BIN)
        p = subprocess.run([py, script, exp, run_dir, bad], cwd=self.tmp, env=env,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout)
        self.assertEqual(out["code"], 0)
        self.assertTrue(any("completed" in l for l in out["lines"]), out["lines"])
        self.assertEqual(len(out["trials"]), 9)
        self.assertTrue(all(isinstance(t["params"]["x"], float) for t in out["trials"]))
        cli_best = json.loads(self.tp("best", run_dir, "--json").stdout)
        self.assertEqual(out["best"]["id"], cli_best["trial"])
        cli_top = [t["trial"] for t in json.loads(self.tp("best", run_dir, "--top", "3",
                                                          "--json").stdout)]
        self.assertEqual(out["top"], cli_top)
        cli_status = json.loads(self.tp("status", run_dir, "--json").stdout)
        cli_status["counts"].pop("pending_interrupted")
        self.assertEqual(out["status"]["counts"], cli_status["counts"])
        self.assertEqual(out["status"]["best"]["id"], cli_status["best"]["id"])
        self.assertEqual(out["error"][0], 3)
        self.assertIn("bad.yaml:1:1", out["error"][1])


if __name__ == "__main__":
    main()
