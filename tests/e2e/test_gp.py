#!/usr/bin/env python3
"""search: {algorithm: gp} runs to the end, and a run killed at any point resumes into the
same trials (the journal's replay asks the sampler the same questions)."""

import json
import sys
import unittest

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, PY, yaml_str

N = 14  # 10 random startup trials, then 4 from the GP


class Gp(E2E):

    def exp(self):
        script = self.write("trial.py",
                            "import math, os, sys\n"
                            "x, lr = float(sys.argv[1]), float(sys.argv[2])\n"
                            "loss = (x - 0.3) ** 2 + math.log10(lr / 2) ** 2\n"
                            "os.write(3, ('{\"loss\": %r}\\n' % loss).encode())\n")
        return self.experiment(
            "name: gp\n"
            "command: [%s, %s, \"{x}\", \"{lr}\"]\n"
            "metric: {name: loss, mode: min}\n"
            "space:\n"
            "  x: {uniform: [0, 1]}\n"
            "  lr: {loguniform: [0.1, 10]}\n"
            "search: {algorithm: gp, trials: %d, seed: 11}\n"
            "concurrency: 1\n" % (yaml_str(PY), yaml_str(script), N))

    def trials(self, run_dir):
        with self.store(run_dir) as s:
            return [(t["id"], t["state"], json.dumps(t["params"], sort_keys=True), t["value"])
                    for t in s.trials()]

    def decisions(self, run_dir):
        with self.store(run_dir) as s:
            return len(s.q("SELECT seq FROM decisions"))

    def test_gp_runs_to_the_end_and_resumes_after_a_kill_with_the_same_trials(self):
        exp = self.exp()
        plain = self.path("plain")
        self.assertExit(self.run_exp(exp, plain), 0)
        want = self.trials(plain)
        self.assertEqual([t[0] for t in want], list(range(N)))
        self.assertEqual({t[1] for t in want}, {"completed"})
        total = self.decisions(plain)
        # killed before the model's first ask, and after it
        for k in (total // 3, total * 5 // 6):
            killed = self.path("killed-%d" % k)
            self.kill_after(exp, killed, k)
            for _ in range(2):  # resume, then replay the finished journal once more
                q = self.run_exp(exp, killed)
                self.assertExit(q, 0)
                self.assertNotIn("diverged", q.stderr)
            self.assertEqual(self.trials(killed), want)


if __name__ == "__main__":
    unittest.main()
