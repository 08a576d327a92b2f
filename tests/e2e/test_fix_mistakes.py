"""Fixing a mistake without starting over (issue 34, items 3 and 5): a changed command is
taken while no trial has a result (the diff shown, journaled, used by a resume and by every
later launch) and refused with --fork suggested once one has; `run --retry-failed` runs the
failed trials again (a new attempt each, journaled as a decision, so a resume neither loses nor
repeats it); `trials` shows failures and retries apart from promotions.

Trials wait for marker files the test writes, so every step waits for the run's own events."""

import csv
import io
import json
import os

from helpers import E2E, PY, main, wait_for, yaml_str

# Reports acc = x after writing its argv beside its logs; waits while the file `hold` exists.
GOOD = """import json, os, sys, time
x, hold = float(sys.argv[1]), sys.argv[2]
json.dump(sys.argv, open(os.path.join(os.environ['TUNEPACK_TRIAL_DIR'], 'argv.json'), 'w'))
while os.path.exists(hold):
    time.sleep(0.02)
os.write(int(os.environ['TUNEPACK_REPORT_FD']), (json.dumps({'acc': x}) + '\\n').encode())
"""

# Fails while x > 0.5 and the file `fixed` is missing (the same exception each time); once it
# exists, such a trial waits while the file `hold` exists, then reports acc = x.
FLAKY = """import json, os, sys, time
x, fixed, hold = float(sys.argv[1]), sys.argv[2], sys.argv[3]
if x > 0.5:
    if not os.path.exists(fixed):
        raise ValueError('the model diverged at this learning rate')
    while os.path.exists(hold):
        time.sleep(0.02)
os.write(int(os.environ['TUNEPACK_REPORT_FD']), (json.dumps({'acc': x}) + '\\n').encode())
"""

# ASHA's trial: acc grows with the epochs; trial 1's first attempt fails, and trial 2's first
# two (the same error twice: automatic retries give up on it).
ASHA_TRIAL = """import json, os, sys
trial, attempt = int(os.environ['TUNEPACK_TRIAL_ID']), int(os.environ['TUNEPACK_ATTEMPT'])
if (trial, attempt) in ((1, 1), (2, 1), (2, 2)):
    raise RuntimeError('this attempt fails')
x, e = float(sys.argv[1]), int(float(sys.argv[2]))
fd = int(os.environ['TUNEPACK_REPORT_FD'])
for s in range(1, e + 1):
    os.write(fd, (json.dumps({'step': s, 'acc': x * s / 9}) + '\\n').encode())
"""


def command_exp(command, trials=5):
    return ("name: fix\ncommand: %s\nmetric: {name: acc, mode: max}\n"
            "space:\n  x: {uniform: [0, 1]}\n"
            "search: {algorithm: random, trials: %d, seed: 3}\nconcurrency: 1\nretries: 0\n"
            % (command, trials))


class FixMistakes(E2E):
    def test_command_change_is_taken_until_a_trial_has_a_result_then_refused(self):
        good = self.write("good.py", GOOD)
        hold = self.write("hold", "")
        run_dir = self.path("run")
        # A mistake in the command: every trial fails, fail-fast stops the run after 3.
        exp = self.experiment(command_exp(
            '[%s, -c, "raise SystemExit(\'no such model\')", "{x}"]' % yaml_str(PY)))
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 5)
        self.assertIn("fail-fast", r.stderr)
        with self.store(run_dir) as s:
            self.assertEqual([t["state"] for t in s.trials()], ["failed"] * 3)
            decisions = s.q("SELECT count(*) AS n FROM decisions")[0]["n"]

        # Fixed while no trial has a result: taken, the diff shown; the new command runs. The
        # run is killed while its first trial (held) runs, once the change is recorded.
        fixed = command_exp('[%s, %s, "{x}", %s]' % (yaml_str(PY), yaml_str(good),
                                                     yaml_str(hold)))
        self.experiment(fixed)
        self.kill_after(exp, run_dir, decisions + 1)  # trial 3's job: after the change
        shown = self.procs[-1].stderr.read().decode()
        self.assertIn("changed since the last run; taking the new values:\n"
                      "  command: (no trial has a result yet)\n    - [", shown)
        with self.store(run_dir) as s:
            self.assertEqual(s.meta()["experiment_text"], fixed)
            changes = [e["detail"] for e in s.events(kind="experiment-changed")]
            self.assertIn(s.trial(3)["state"], ("pending", "running"))  # placed, or started
        self.assertEqual(len(changes), 1)
        self.assertIn("  command: (no trial has a result yet)\n    - [", changes[0])
        self.assertIn("no such model", changes[0].split("\n")[1])
        self.assertIn("good.py", changes[0].split("\n")[2])

        # Resumed with the same file: no change left to take, every launch uses the new command.
        os.unlink(hold)
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        self.assertNotIn("changed since the last run", r.stderr)
        with self.store(run_dir) as s:
            trials = s.trials()
        self.assertEqual([t["state"] for t in trials], ["failed"] * 3 + ["completed"] * 2)
        self.assertIn(trials[3]["attempts"], (1, 2))  # 2 when the kill interrupted it
        for tid in (3, 4):
            with open(os.path.join(run_dir, "trials", "%06d" % tid, "argv.json")) as f:
                self.assertEqual(json.load(f)[0], good)

        # Trials have results now: the command is refused, --fork suggested, nothing touched.
        with self.store(run_dir) as s:
            before = (s.trials(), s.meta(), s.events(), s.q("SELECT * FROM decisions"))
        self.experiment(fixed.replace('"{x}"', '"{x}", "--again"'))
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 4)
        self.assertIn("  command: (trials have results under the old one)\n    - [", r.stderr)
        self.assertIn("    + [", r.stderr)
        self.assertIn("--fork %s --dir DIR" % run_dir, r.stderr)
        self.assertIn("The command may change only while no trial has a result; 2 have one.",
                      r.stderr)
        with self.store(run_dir) as s:
            after = (s.trials(), s.meta(), s.events(), s.q("SELECT * FROM decisions"))
        self.assertEqual(after, before)

    def test_retry_failed_runs_the_failed_trials_again_once_even_after_a_resume(self):
        trial = self.write("flaky.py", FLAKY)
        fixed, hold = self.path("fixed"), self.path("hold")
        run_dir = self.path("run")
        exp = self.experiment(
            "name: flaky\ncommand: [%s, %s, \"{x}\", %s, %s]\nmetric: {name: acc, mode: max}\n"
            "space:\n  x: {uniform: [0, 1]}\nsearch: {algorithm: random, trials: 8, seed: 5}\n"
            "concurrency: 2\nretries: 3\nfail_fast: false\n"
            % (yaml_str(PY), yaml_str(trial), yaml_str(fixed), yaml_str(hold)))
        self.assertExit(self.run_exp(exp, run_dir), 0)
        with self.store(run_dir) as s:
            trials = s.trials()
            decisions = s.q("SELECT count(*) AS n FROM decisions")[0]["n"]
        failed = [t["id"] for t in trials if t["state"] == "failed"]
        self.assertEqual(failed, [t["id"] for t in trials if t["params"]["x"] > 0.5])
        self.assertTrue(0 < len(failed) < len(trials), trials)
        for t in trials:
            if t["id"] in failed:  # the same exception twice: not retried a third time
                self.assertEqual((t["attempts"], t["failures"]), (2, 2), t)
                self.assertIn("the same error as its attempt before", t["error"])

        # The cause fixed; --retry-failed journals a retry for each failed trial and runs them.
        # Killed while they run (held), once the retries are journaled.
        self.write("fixed", "")
        self.write("hold", "")
        p = self.kill_after(exp, run_dir, decisions + len(failed), "--retry-failed")
        self.assertIn("retrying %d failed trial(s): %s (a new attempt each, same parameters)"
                      % (len(failed), ", ".join(map(str, failed))), p.stderr.read().decode())
        with self.store(run_dir) as s:
            retries = s.q("SELECT trial, rung, detail FROM decisions WHERE kind = 'retry'")
            states = {t["id"]: t["state"] for t in s.trials()}
        self.assertEqual([d["trial"] for d in retries], failed)
        self.assertTrue(all("--retry-failed" in d["detail"] for d in retries), retries)
        self.assertTrue(all(states[i] in ("pending", "running") for i in failed), states)

        # A plain resume runs them, and neither loses nor repeats the retry.
        os.unlink(hold)
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        self.assertIn("resuming", r.stderr)
        with self.store(run_dir) as s:
            trials = s.trials()
            retries = s.q("SELECT trial FROM decisions WHERE kind = 'retry'")
        self.assertEqual([t["state"] for t in trials], ["completed"] * len(trials))
        self.assertEqual(len(retries), len(failed))
        for t in trials:
            if t["id"] in failed:
                self.assertEqual(t["failures"], 2, t)
                self.assertGreaterEqual(t["attempts"], 3, t)  # 4 when the kill interrupted it
                self.assertAlmostEqual(t["value"], t["params"]["x"])
                folder = os.path.join(run_dir, "trials", "%06d" % t["id"])
                for k in (1, 2):  # the failed attempts' logs are kept
                    with open(os.path.join(folder, "stderr.%d.log" % k)) as f:
                        self.assertIn("ValueError: the model diverged", f.read())
        # `trials` shows the attempts: two failures, both run again.
        shown = {t["id"]: t for t in json.loads(self.tp("trials", run_dir, "--json").stdout)}
        for i in failed:
            self.assertEqual((shown[i]["failures"], shown[i]["retries"]), (2, 2), shown[i])
        # Asked again: nothing failed, nothing runs, nothing is journaled.
        r = self.run_exp(exp, run_dir, "--retry-failed")
        self.assertExit(r, 0)
        self.assertIn("holds no failed trial to retry", r.stderr)
        with self.store(run_dir) as s:
            self.assertEqual(len(s.q("SELECT trial FROM decisions WHERE kind = 'retry'")),
                             len(failed))
            self.assertEqual(s.trials(), trials)

    def test_trials_shows_failures_and_retries_apart_from_promotions(self):
        trial = self.write("asha.py", ASHA_TRIAL)
        run_dir = self.path("run")
        exp = self.experiment(
            "name: asha\ncommand: [%s, %s, \"{x}\", \"{epochs}\"]\n"
            "metric: {name: acc, mode: max}\nspace:\n  x: {uniform: [0, 1]}\n"
            "search: {algorithm: random, trials: 9, seed: 2, scheduler: asha}\n"
            "budget: {name: epochs, min: 1, max: 9, eta: 3}\nconcurrency: 1\nretries: 1\n"
            % (yaml_str(PY), yaml_str(trial)))
        self.assertExit(self.run_exp(exp, run_dir), 0)
        with self.store(run_dir) as s:
            self.assertEqual(s.trial(2)["state"], "failed")
        # Trial 2 retried on request under ASHA: back in the search; the replay of a resume
        # after it agrees with what the run decided.
        r = self.run_exp(exp, run_dir, "--retry-failed")
        self.assertExit(r, 0)
        self.assertIn("retrying 1 failed trial(s): 2", r.stderr)
        self.assertIn("0 failed, 1 retried", r.stdout)
        r = self.run_exp(exp, run_dir)
        self.assertExit(r, 0)
        self.assertNotIn("diverged", r.stderr)
        rows = json.loads(self.tp("trials", run_dir, "--json").stdout)
        by_id = {t["id"]: t for t in rows}
        self.assertEqual((by_id[1]["failures"], by_id[1]["retries"]), (1, 1), by_id[1])
        self.assertEqual((by_id[2]["failures"], by_id[2]["retries"]), (2, 2), by_id[2])
        self.assertIn(by_id[2]["state"], ("completed", "stopped"), by_id[2])
        with self.store(run_dir) as s:
            jobs = {t["id"]: len(s.q("SELECT 1 FROM decisions WHERE kind = 'job' AND trial = ?",
                                     t["id"])) for t in rows}
        for t in rows:  # every start is the first, a promotion, a retry (none interrupted)
            self.assertEqual(t["promotions"], jobs[t["id"]] - 1, t)
            self.assertEqual(t["attempts"], 1 + t["promotions"] + t["retries"], t)
            self.assertEqual(t["interrupted"], 0, t)
            if t["id"] not in (1, 2):
                self.assertEqual((t["failures"], t["retries"]), (0, 0), t)
        promoted = [t for t in rows if t["promotions"] > 0 and t["id"] not in (1, 2)]
        self.assertTrue(promoted, rows)  # ASHA promoted someone

        # export says the same: retries and promotions in JSON, and in CSV as the last two
        # columns, after the ones that were there before (a script reading by position works)
        exported = {t["id"]: t for t in json.loads(self.tp("export", run_dir, "--format",
                                                           "json").stdout)}
        for t in rows:
            self.assertEqual((exported[t["id"]]["retries"], exported[t["id"]]["promotions"]),
                             (t["retries"], t["promotions"]), t["id"])
        for fmt, sep in (("csv", ","), ("tsv", "\t")):
            r = self.tp("export", run_dir, "--format", fmt)
            self.assertExit(r, 0)
            lines = list(csv.reader(io.StringIO(r.stdout), delimiter=sep,
                                    quoting=csv.QUOTE_MINIMAL if sep == "," else csv.QUOTE_NONE))
            self.assertEqual(lines[0], [
                "id", "state", "attempts", "interrupted", "value", "step", "duration_s", "where",
                "exit_code", "error", "stderr_tail", "logs", "kind", "source", "x", "metric.step",
                "metric.acc", "retries", "promotions"])
            table = {int(l[0]): l for l in lines[1:]}
            self.assertEqual(sorted(table), sorted(by_id))
            for t in rows:
                self.assertEqual(table[t["id"]][-2:], [str(t["retries"]), str(t["promotions"])])

        # The table: fails and retries in their own columns; promotions show in the rung.
        out = self.tp("trials", run_dir).stdout.splitlines()
        self.assertEqual(out[0].split()[:4], ["trial", "state", "fails", "retries"])
        table = {int(l.split()[0]): l.split() for l in out[1:] if l[:5].strip().isdigit()}
        self.assertEqual(table[1][2:4], ["1", "1"])
        self.assertEqual(table[2][2:4], ["2", "2"])
        for t in promoted:
            self.assertEqual(table[t["id"]][2:4], ["0", "0"])
            self.assertEqual(table[t["id"]][6].split("/")[0], str(t["rung"]))

        # --sort takes each count (most first).
        for key in ("retries", "failures", "promotions", "attempts", "rung"):
            r = self.tp("trials", run_dir, "--json", "--sort", key)
            self.assertExit(r, 0)
            got = [t[key] for t in json.loads(r.stdout)]
            self.assertEqual(got, sorted(got, reverse=True), key)
        top = self.tp("trials", run_dir, "--sort", "retries").stdout.splitlines()[1:3]
        self.assertEqual([l.split()[0] for l in top], ["2", "1"])


if __name__ == "__main__":
    main()
