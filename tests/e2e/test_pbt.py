#!/usr/bin/env python3
"""scheduler: pbt end to end: a population whose best learning rate changes during training
(high early, low late) runs to the end; each exploit copies the donor's checkpoint into the
recipient's (the recipient resumes at the donor's step with the donor's state), explores its
learning rate by the factors, journals the lineage and shows it in `trials` and `export`; a run
SIGKILLed at several points resumes into the same decisions, and a job whose agent is lost runs
again into the same decisions; under `explore_with: pb2` the GP bandit chooses the learning rate
once it has data, and a killed run resumes the same; mistakes are said."""

import csv
import io
import json
import math
import os
import signal
import sys

sys.dont_write_bytecode = True  # keep tests/e2e free of __pycache__

from helpers import E2E, PY, alive, main, wait_for, yaml_str

# score grows each epoch by a gain that peaks at lr 0.3 for epochs 1-3 and at lr 0.01 after;
# the checkpoint (JSON) keeps the epoch, the score and the trial that wrote it
TRIAL = r'''
import json, math, os, sys, time
lr, epochs = float(sys.argv[1]), int(float(sys.argv[2]))
fd = int(os.environ["TUNEPACK_REPORT_FD"])
me = int(os.environ["TUNEPACK_TRIAL_ID"])
path = os.path.join(os.environ["TUNEPACK_CHECKPOINT_DIR"], "state.json")
state = {"epoch": 0, "score": 0.0, "writer": me}
if os.path.exists(path):
    state = json.load(open(path))
loaded = dict(state)
def report():
    rep = {"step": state["epoch"], "score": state["score"], "lr": lr,
           "resumed_at": loaded["epoch"], "copied_from": loaded["writer"]}
    os.write(fd, (json.dumps(rep) + "\n").encode())
if state["epoch"] >= epochs:  # resumed at the job's end (docs/checkpoints.md): say where it is
    report()
gate = os.environ.get("PBT_GATE")  # trial 3's first job waits for this file (lost-agent test)
if gate and me == 3 and state["epoch"] == 0:
    with open(gate + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(gate + ".tmp", gate + ".started")  # the test reads the pid once it is there
    while not os.path.exists(gate):
        time.sleep(0.05)
while state["epoch"] < epochs:
    e = state["epoch"] + 1
    best = 0.3 if e <= 3 else 0.01
    state["score"] += math.exp(-(math.log10(lr) - math.log10(best)) ** 2)
    state["epoch"] = e
    report()
    state["writer"] = me
    os.makedirs(os.path.dirname(path), exist_ok=True)
    json.dump(state, open(path + ".tmp", "w"))
    os.replace(path + ".tmp", path)
'''

N = 4


class PbtTest(E2E):
    def exp(self, pbt=True, extra="", name="exp.yaml", concurrency=2, explore_with="perturb"):
        script = self.write("trial.py", TRIAL)
        return self.experiment(
            "name: pbt\n"
            "command: [%s, %s, \"{lr}\", \"{epochs}\"]\n"
            "metric: {name: score, mode: max}\n"
            "space:\n"
            "  lr: {loguniform: [0.001, 1.0]}\n"
            "search: {algorithm: random, trials: %d, seed: 3, scheduler: pbt}\n"
            "budget: {name: epochs, min: 1, max: 8}\n"
            "%s%s"
            "concurrency: %d\n"
            % (yaml_str(PY), yaml_str(script), N,
               "pbt: {perturbation_interval: 2, quantile: 0.25, explore_with: %s, "
               "explore: {lr: {factors: [0.5, 2.0]}}}\n" % explore_with if pbt else "", extra,
               concurrency),
            name=name)

    def exploits(self, run_dir):
        with self.store(run_dir) as s:
            return [(r["trial"], r["rung"], json.loads(r["detail"])) for r in
                    s.q("SELECT trial, rung, detail FROM decisions WHERE kind = 'exploit' "
                        "ORDER BY seq")]

    def decisions(self, run_dir):
        with self.store(run_dir) as s:
            return [(r["kind"], r["trial"], r["rung"],
                     r["detail"] if r["kind"] == "exploit" else None) for r in
                    s.q("SELECT kind, trial, rung, detail FROM decisions "
                        "WHERE kind IN ('job', 'result', 'exploit') ORDER BY seq")]

    def test_exploits_copy_the_donors_checkpoint_and_explore_the_learning_rate(self):
        run_dir = self.path("run")
        self.assertExit(self.run_exp(self.exp(), run_dir), 0)
        with self.store(run_dir) as s:
            trials = {t["id"]: t for t in s.trials()}
            metrics = s.metrics()
            lrs = {}  # (trial, step) -> lr it trained that step with
            for m in metrics:
                d = json.loads(m["data"])
                lrs[(m["trial"], d["step"])] = d["lr"]
        self.assertEqual(sorted(trials), list(range(N)))
        for t in trials.values():
            self.assertEqual(t["state"], "completed", t)
            self.assertEqual(t["step"], 8)
        ex = self.exploits(run_dir)
        # generations at 2, 4 and 6: ceil(4 x 0.25) = 1 exploit each
        self.assertEqual([d["donor_step"] for _, _, d in ex], [2, 4, 6])
        segments = {}
        for trial, rung, d in ex:
            segments[trial] = segments.get(trial, 0) + 1
            self.assertEqual(d["segment"], segments[trial])
            self.assertNotEqual(d["donor"], trial)
            step = d["donor_step"]
            self.assertEqual(rung, step // 2)
            # explore: the donor's lr times 0.5 or 2 (clipped to the space)
            donor_lr = lrs[(d["donor"], step)]
            self.assertEqual(d["new"]["lr"], lrs[(trial, step + 1)])
            self.assertTrue(any(math.isclose(d["new"]["lr"], min(1.0, donor_lr * f))
                                for f in (0.5, 2.0)), (d, donor_lr))
            # the recipient resumed from the donor's checkpoint at the donor's step
            first = [json.loads(m["data"]) for m in metrics
                     if m["trial"] == trial and json.loads(m["data"])["step"] == step + 1]
            self.assertTrue(first, (trial, step))
            self.assertEqual(first[-1]["resumed_at"], step)
            self.assertEqual(first[-1]["copied_from"], d["donor"])
        last = {}
        for trial, _, d in ex:
            last[trial] = d
        for trial, d in last.items():  # the store holds each trial's latest configuration
            self.assertEqual(trials[trial]["params"], d["new"])

        # trials and export show the lineage
        out = self.tp("trials", run_dir)
        self.assertExit(out, 0)
        for trial, d in last.items():
            self.assertIn("seg %d<-%d@%d" % (d["segment"], d["donor"], d["donor_step"]),
                          out.stdout)
        rows = list(csv.DictReader(io.StringIO(self.tp("export", run_dir).stdout)))
        by_id = {int(r["id"]): r for r in rows}
        for t in range(N):
            d = last.get(t)
            self.assertEqual(by_id[t]["segment"], str(d["segment"]) if d else "0")
            self.assertEqual(by_id[t]["parent"], str(d["donor"]) if d else "")
            self.assertEqual(by_id[t]["parent_step"], str(int(d["donor_step"])) if d else "")
        js = {t["id"]: t for t in json.loads(self.tp("export", run_dir, "--format",
                                                     "json").stdout)}
        for t in range(N):
            lineage = [d for trial, _, d in ex if trial == t]
            self.assertEqual([(e["segment"], e["parent"], e["parent_step"], e["params"])
                              for e in js[t]["lineage"]],
                             [(d["segment"], d["donor"], d["donor_step"], d["new"])
                              for d in lineage])

    def test_killed_at_any_moment_resumes_into_the_same_population(self):
        plain, killed = self.assert_kills_resume_the_same(self.exp(concurrency=1),
                                                          self.decisions)
        with self.store(plain) as a, self.store(killed) as b:
            self.assertEqual([(t["id"], t["params"]) for t in a.trials()],
                             [(t["id"], t["params"]) for t in b.trials()])

    def test_pb2_chooses_by_its_model_and_a_killed_run_resumes_the_same(self):
        plain, _ = self.assert_kills_resume_the_same(
            self.exp(concurrency=1, explore_with="pb2"), self.decisions)
        self.assertExit(self.tp("status", plain), 0)
        with self.store(plain) as s:
            self.assertTrue(all(t["state"] == "completed" for t in s.trials()))
            whys = [r["detail"] for r in s.q("SELECT detail FROM decisions WHERE kind = 'job' "
                                             "AND detail LIKE 'exploit%' ORDER BY seq")]
        ex = self.exploits(plain)
        self.assertEqual([d["donor_step"] for _, _, d in ex], [2, 4, 6])
        self.assertEqual(len(whys), 3)
        # at 2 no job has a gain yet: the factors; at 4 and 6 the model chose, in the range
        self.assertIn("explore: lr", whys[0])
        for why in whys[1:]:
            self.assertIn("explore by pb2: lr", why)
        for _, _, d in ex:
            self.assertTrue(0.001 <= d["new"]["lr"] <= 1.0, d)

    def test_a_job_its_agent_lost_runs_again_and_the_population_decides_the_same(self):
        # Trial 3's first job waits at a gate; the agent running it is killed there, so the
        # attempt is interrupted, not failed: the job runs again from the start and every
        # later decision (donors, exploits, explores) is the plain run's. The trainer dies with
        # its agent: left running, it would train past the gate to its job's end and save its
        # checkpoint there, for a run that no longer hears it.
        exp = self.exp(concurrency=1, explore_with="pb2")
        plain = self.path("plain")
        self.assertExit(self.run_exp(exp, plain), 0)
        gate, lost = self.path("gate"), self.path("lost")
        p = self.start_run(exp, lost, env={"PBT_GATE": gate})
        self.assertTrue(wait_for(lambda: os.path.exists(gate + ".started"), 120),
                        "trial 3's first job never started")
        agent = wait_for(lambda: self.find_agent(p.pid), 30)
        self.assertTrue(agent, "no `tunepack agent` child of the orchestrator")
        with open(gate + ".started") as f:
            trainer = int(f.read())
        os.kill(p.pid, signal.SIGSTOP)  # no next agent to reap the trainer meanwhile
        try:
            os.kill(agent, signal.SIGKILL)
            self.assertTrue(wait_for(lambda: not alive(trainer), 30),
                            "the trainer outlived its agent")
        finally:
            os.kill(p.pid, signal.SIGCONT)
        with open(gate, "w"):
            pass
        self.assertEqual(p.wait(timeout=300), 0, p.stderr.read())
        self.assertEqual(self.decisions(lost), self.decisions(plain))
        with self.store(lost) as s:
            self.assertTrue(all(t["state"] == "completed" for t in s.trials()))
            self.assertTrue(s.events(kind="agent-lost"), "the agent's loss is journaled")
            self.assertIn("interrupted: agent lost",
                          " ".join(e["detail"] or "" for e in s.events(3, "pending")))

    def test_mistakes_are_said_with_what_would_be_right(self):
        r = self.run_exp(self.exp(pbt=False), self.path("a"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("scheduler pbt needs its settings", r.stderr)
        with open(self.exp(name="c.yaml")) as f:
            bad = self.experiment(f.read().replace("explore: {lr:", "explore: {lrr:"),
                                  name="d.yaml")
        r = self.run_exp(bad, self.path("d"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("pbt explores \"lrr\", which is no parameter in space", r.stderr)
        self.assertIn("did you mean \"lr\"", r.stderr)
        r = self.run_exp(self.exp(name="e.yaml", explore_with="pb3"), self.path("e"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("unknown explore_with \"pb3\"; did you mean \"pb2\"?", r.stderr)


if __name__ == "__main__":
    main()
