"""Surrogates end to end (`surrogate: {param, value, promote, eager}`): the search runs its
trials with the width parameter scaled down (placeholder and TUNEPACK_PARAM_*), the best
configurations run again at full size as target trials, both kinds are in the store, `trials`,
`best` and `export`, a killed run resumes into the same trials, and bad settings are refused
with file:line:col."""

import csv
import io
import json
import os
import subprocess
import sys
import unittest

from helpers import E2E, PY, SRC, yaml_str

# loss = (lr - 0.3)^2 + 0.01 / width: the optimum lr transfers across width; the width comes
# from the placeholder and must equal TUNEPACK_PARAM_WIDTH_MULT. With a budget it reports one
# line per epoch (the loss shrinking with epochs).
TRAINER = r'''
import json, os, sys, time
lr = float(sys.argv[1]); w = float(sys.argv[2]); epochs = int(float(sys.argv[3]))
assert float(os.environ["TUNEPACK_PARAM_WIDTH_MULT"]) == w, "placeholder and env differ"
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
for e in range(1, epochs + 1):
    time.sleep(float(sys.argv[4]))
    rep.write(json.dumps({"step": e, "loss": round((lr - 0.3) ** 2 + 0.01 / w + 1.0 / e, 6)}) + "\n")
'''


def tuples(rows):
    return [tuple(r.values()) for r in rows]


class SurrogateTest(E2E):
    def exp(self, trials=10, scheduler="fifo", budget="", epochs='"1"', surrogate=None,
            concurrency=2, sleep=0.0, space="  lr: {uniform: [0, 1]}\n"):
        trainer = self.write("trainer.py", TRAINER)
        if surrogate is None:
            surrogate = "{param: width_mult, value: 0.125, promote: 3, eager: 0.5}"
        return self.experiment(
            "name: surr\n"
            "command: [%s, %s, \"{lr}\", \"{width_mult}\", %s, \"%s\"]\n"
            "metric: {name: loss, mode: min}\n"
            "space:\n%s"
            "search: {algorithm: random, trials: %d, seed: 5, scheduler: %s}\n%s"
            "concurrency: %d\n"
            "surrogate: %s\n"
            % (yaml_str(PY), yaml_str(trainer), epochs, sleep, space, trials, scheduler, budget,
               concurrency, surrogate))

    def kinds(self, run_dir):
        with self.store(run_dir) as s:
            return tuples(s.q("SELECT id, kind, source, params FROM trials ORDER BY id"))

    def test_the_top_surrogates_run_again_at_full_size_and_best_names_a_target(self):
        d = self.path("run")
        self.assertExit(self.run_exp(self.exp(), d), 0)
        rows = self.kinds(d)
        surrogates = [r for r in rows if r[1] == "surrogate"]
        targets = [r for r in rows if r[1] == "target"]
        self.assertEqual(len(surrogates), 10)
        # the top 3 at the eager point and the final top 3: never more than 2 x promote
        self.assertGreaterEqual(len(targets), 3)
        self.assertLessEqual(len(targets), 6)
        self.assertEqual(len(rows), len(surrogates) + len(targets))
        by_id = {r[0]: r for r in rows}
        for s in surrogates:
            self.assertEqual(json.loads(s[3])["width_mult"], 0.125)
            self.assertIsNone(s[2])
        for t in targets:  # the surrogate's configuration with width_mult 1
            src = json.loads(by_id[t[2]][3])
            self.assertEqual(by_id[t[2]][1], "surrogate")
            self.assertEqual(json.loads(t[3]), dict(src, width_mult=1.0))
        with self.store(d) as s:
            loss = {r["id"]: r["value"] for r in s.q("SELECT id, value FROM trials")}
        # the final top 3 surrogates all ran at full size
        top3 = sorted((loss[r[0]], r[0]) for r in surrogates)[:3]
        self.assertTrue({i for _, i in top3} <= {t[2] for t in targets})
        # best: the best target, and how its surrogate ranked
        b = self.tp("best", d, "--json")
        self.assertExit(b, 0)
        best = json.loads(b.stdout)
        want = min(targets, key=lambda t: (loss[t[0]], t[0]))
        self.assertEqual(best["trial"], want[0])
        self.assertEqual(best["kind"], "target")
        ranked = sorted((loss[r[0]], r[0]) for r in surrogates)
        self.assertEqual(best["surrogate"]["trial"], want[2])
        self.assertEqual(best["surrogate"]["rank"], [i for _, i in ranked].index(want[2]) + 1)
        self.assertEqual(best["surrogate"]["of"], 10)
        # the Python front end ranks the same way
        sys.path.insert(0, os.path.join(SRC, "python"))
        import tunepack
        self.assertEqual(tunepack.best(d)["id"], want[0])
        text = self.tp("best", d)
        self.assertIn("target of surrogate trial %d" % want[2], text.stdout)
        # trials: the kind before the parameters, and in --json
        t = self.tp("trials", d)
        self.assertIn("target<-%d" % want[2], t.stdout)
        self.assertIn("surrogate  lr=", t.stdout)
        js = json.loads(self.tp("trials", d, "--json").stdout)
        self.assertEqual([(x["id"], x["kind"], x["source"]) for x in js],
                         [(r[0], r[1], r[2]) for r in rows])
        # export: kind and source columns
        e = self.tp("export", d, "--format", "csv")
        table = list(csv.DictReader(io.StringIO(e.stdout)))
        self.assertEqual([(int(x["id"]), x["kind"], x["source"]) for x in table],
                         [(r[0], r[1], "" if r[2] is None else str(r[2])) for r in rows])

    def test_targets_start_once_half_the_surrogates_ended_not_after_all(self):
        d = self.path("run")
        self.assertExit(self.run_exp(self.exp(trials=12, concurrency=1), d), 0)
        with self.store(d) as s:
            order = tuples(s.q("SELECT t.kind FROM decisions d JOIN trials t ON t.id = d.trial "
                               "WHERE d.kind = 'job' ORDER BY d.seq"))
        kinds = [k for (k,) in order]
        first_target = kinds.index("target")
        # one at a time: 6 of 12 surrogates ended, then the targets go first
        self.assertEqual(kinds[:first_target], ["surrogate"] * 6)
        self.assertIn("surrogate", kinds[first_target:])

    def test_a_killed_asha_surrogate_run_resumes_into_the_same_trials(self):
        exp = self.exp(trials=9, scheduler="asha", epochs='"{epochs}"', concurrency=1,
                       budget="budget: {name: epochs, min: 1, max: 9, eta: 3}\n", sleep=0.01)
        plain = self.path("plain")
        self.assertExit(self.run_exp(exp, plain), 0)
        killed = self.path("killed")
        with self.store(plain) as s:
            total = s.q("SELECT count(*) AS n FROM decisions")[0]["n"]
        self.kill_at(exp, killed, [total * k // 5 for k in (1, 2, 3, 4)])
        self.assertExit(self.run_exp(exp, killed), 0)
        want = self.kinds(plain)
        self.assertTrue(any(r[1] == "target" for r in want))
        self.assertEqual(self.kinds(killed), want)
        with self.store(plain) as a, self.store(killed) as b:
            qa = tuples(a.q("SELECT kind, trial, rung, ok FROM decisions ORDER BY seq"))
            qb = tuples(b.q("SELECT kind, trial, rung, ok FROM decisions ORDER BY seq"))
        self.assertEqual(qb, qa)

    def test_bad_surrogate_settings_are_refused_where_they_are_written(self):
        cases = [
            ("{param: width_mult, value: 1}", "exp.yaml:8:39: \"value\" must be a number > 0 "
                                               "other than 1"),
            ("{param: width_mult, value: 0.25, eager: 0}", "exp.yaml:8:52: \"eager\" must be a "
                                                            "number in (0, 1] (a share"),
            ("{param: width_mult, value: 0.25, promote: 0}", "exp.yaml:8:54: \"promote\" must "
                                                              "be an integer from 1 to 1000"),
            ("{value: 0.25}", "exp.yaml:8:12: missing required key \"param\""),
            ("{param: width_mult, value: 0.25, promte: 2}",
             "exp.yaml:8:45: unknown key \"promte\"; did you mean \"promote\"?"),
        ]
        for text, msg in cases:
            r = self.tp("run", self.exp(surrogate=text), "--dry-run")
            self.assertNotEqual(r.returncode, 0, text)
            self.assertIn(msg, r.stderr, text)
        # the width parameter is tunepack's to set, not a parameter of the space
        r = self.tp("run", self.exp(space="  lr: {uniform: [0, 1]}\n  width_mult: {choice: [1]}\n"),
                    "--dry-run")
        self.assertIn("exp.yaml:9:12: the surrogate param \"width_mult\" is also a parameter in "
                      "space", r.stderr)

    def test_a_change_of_the_surrogate_setting_is_refused_on_resume(self):
        d = self.path("run")
        self.assertExit(self.run_exp(self.exp(trials=2), d), 0)
        r = self.run_exp(self.exp(trials=2, surrogate="{param: width_mult, value: 0.25}"), d)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("surrogate", r.stderr)

    def test_the_mup_example_checks_out_and_its_trainer_is_deterministic_at_the_surrogate_width(
            self):
        for name in ("experiment.yaml", "full.yaml"):
            r = self.tp("run", os.path.join(SRC, "examples", "mup", name), "--dry-run", cwd=SRC)
            self.assertExit(r, 0)
        self.assertIn("width_mult=0.25", self.tp(
            "run", os.path.join(SRC, "examples", "mup", "experiment.yaml"), "--dry-run",
            cwd=SRC).stdout)
        # the same arguments give the same losses (data, init and batch order fixed), so the
        # search compares learning rates, not draws of the noise
        got = []
        for _ in range(2):
            p = subprocess.run(["/usr/bin/python3",
                                os.path.join(SRC, "examples", "mup", "train.py"),
                                "--lr", "0.0005", "--width-mult", "0.25"],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertRegex(p.stdout, r"step=1 val_loss=[0-9.]+ val_acc=[0-9.]+ cpu_s=")
            got.append(p.stdout.split(" cpu_s=")[0])
        self.assertEqual(got[0], got[1])


if __name__ == "__main__":
    unittest.main()
