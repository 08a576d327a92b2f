#!/usr/bin/env python3
"""search: {algorithm: cmaes} end to end: a run goes to the end at concurrency below and above
the population, proposes the same trials whatever order the results come in, learns, and a
run SIGKILLed at several points resumes into the same trials."""

import math
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, PY, main, yaml_str

N = 48  # two coordinates: lambda = 6, eight generations
# loss = (x - 0.3)^2 + (log10 lr + 2)^2 + a small cost per choice; k == c with x > 1.5 fails.
TRIAL = r'''
import json, math, os, sys, time
x, lr, k = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
time.sleep(0.05)
if k == "c" and x > 1.5:
    sys.exit(1)
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w")
loss = (x - 0.3) ** 2 + (math.log10(lr) + 2) ** 2 + {"a": 0, "b": 0.1, "c": 0.2}[k]
rep.write(json.dumps({"loss": loss}) + "\n")
'''


class CmaesTest(E2E):
    def exp(self, concurrency):
        script = self.write("trial.py", TRIAL)
        return self.experiment(
            "name: cmaes\n"
            "command: [%s, %s, \"{x}\", \"{lr}\", \"{k}\"]\n"
            "metric: {name: loss, mode: min}\n"
            "space:\n"
            "  x: {uniform: [-2, 2]}\n"
            "  lr: {loguniform: [1e-4, 1]}\n"
            "  k: {choice: [a, b, c]}\n"
            "search: {algorithm: cmaes, trials: %d, seed: 11}\n"
            "concurrency: %d\n" % (yaml_str(PY), yaml_str(script), N, concurrency),
            name="exp-%d.yaml" % concurrency)

    def trials(self, run_dir):
        with self.store(run_dir) as s:
            return [(t["id"], t["params"], t["state"], t["value"]) for t in s.trials()]

    def decisions(self, run_dir):
        with self.store(run_dir) as s:
            return [tuple(r.values()) for r in
                    s.q("SELECT kind, trial, ok FROM decisions ORDER BY seq")]

    def test_runs_to_the_end_learns_and_ignores_the_order_of_results(self):
        one, eight = self.path("one"), self.path("eight")
        self.assertExit(self.run_exp(self.exp(1), one), 0)
        # concurrency 8 > lambda: asks past the generation wait for its results
        self.assertExit(self.run_exp(self.exp(8), eight), 0)
        a, b = self.trials(one), self.trials(eight)
        self.assertEqual([t[0] for t in a], list(range(N)))
        # a generation is updated once all of it is told, so the order the results came in
        # does not matter: the same configurations
        self.assertEqual([t[1] for t in a], [t[1] for t in b])
        self.assertEqual({t[1]["k"] for t in a}, {"a", "b", "c"})  # drawn independently

        def mean_loss(ts):  # the continuous part, which CMA-ES searches
            v = [(t[1]["x"] - 0.3) ** 2 + (math.log10(t[1]["lr"]) + 2) ** 2 for t in ts]
            return sum(v) / len(v)
        first, last = mean_loss(a[:6]), mean_loss(a[-6:])
        print("mean loss of x and lr, first generation %.4f, last %.4f" % (first, last))
        self.assertLess(last, 0.25 * first)

    def test_killed_at_any_moment_resumes_into_the_same_trials(self):
        plain, killed = self.assert_kills_resume_the_same(self.exp(1), self.decisions)
        self.assertEqual([t[:2] for t in self.trials(killed)], [t[:2] for t in self.trials(plain)])


if __name__ == "__main__":
    main()
