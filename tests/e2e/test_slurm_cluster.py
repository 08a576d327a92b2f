"""An experiment across the nodes of a real Slurm allocation (tests/cluster/slurm.py: slurmctld,
three slurmd, munge, from Debian's packages): `salloc -N3 ... tunepack run --cluster slurm`
starts one agent per node with `srun --overlap`, trials run on every node, and when a node
dies mid-run (its slurmd, step daemons and everything started there killed) its trials run
again on the others: every configuration completes exactly once. Killing the orchestrator
and running `tunepack run` again inside the same allocation resumes. `concurrency` counts on
each node (read from the journal's events: four at once on two nodes at concurrency 2, no
node beyond its share even when the placer would pack one), an allocation grows for trials
that every node's share holds back, and `tunepack nodes` says released for a node given back
at a clean end and lost for one that died."""

import json
import os
import signal
import subprocess
import sys
import time

from helpers import BIN, E2E, FAKE_DIR, PY, main, path_without_mps_control, wait_for, yaml_str

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
from slurm import SlurmCluster  # noqa: E402

# Each attempt appends "node attempt" to runs.log in its trial directory, works for `secs`
# seconds and reports x.
TRIAL = r'''
import json, os, sys, time
x = float(sys.argv[1]); secs = float(sys.argv[2])
d = os.environ["TUNEPACK_TRIAL_DIR"]
with open(os.path.join(d, "runs.log"), "a") as f:
    f.write("%s %s\n" % (os.environ.get("SLURMD_NODENAME", "?"), os.environ["TUNEPACK_ATTEMPT"]))
end = time.time() + secs
while time.time() < end:
    time.sleep(0.05)
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
rep.write(json.dumps({"step": 1, "x": x}) + "\n")
'''


# Each attempt leaves a mark in GATE, then waits (a minute at most) until WANT marks are there:
# WANT attempts at once let all of them go on; fewer keep the first ones waiting.
GATED = r'''
import json, os, sys, time
gate, want, x = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
open(os.path.join(gate, os.path.basename(os.environ["TUNEPACK_TRIAL_DIR"])), "w").close()
end = time.time() + 60
while len(os.listdir(gate)) < want and time.time() < end:
    time.sleep(0.05)
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
rep.write(json.dumps({"step": 1, "x": x}) + "\n")
'''

# As GATED, and then each attempt waits for RELEASE, leaves its pid in DONE and ends.
HELD = r'''
import json, os, sys, time
gate, done, release, x = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
open(os.path.join(gate, os.path.basename(os.environ["TUNEPACK_TRIAL_DIR"])), "w").close()
end = time.time() + 60
while (len(os.listdir(gate)) < 4 or not os.path.exists(release)) and time.time() < end:
    time.sleep(0.05)
rep = os.fdopen(int(os.environ["TUNEPACK_REPORT_FD"]), "w", buffering=1)
rep.write(json.dumps({"step": 1, "x": x}) + "\n")
open(os.path.join(done, str(os.getpid())), "w").close()
'''


def child_of(parent, exe):
    """The pid of parent's child process running exe."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == parent and os.readlink("/proc/%s/exe" % name) == os.path.realpath(exe):
                return int(name)
        except (OSError, ValueError, IndexError):
            pass
    raise AssertionError("no %s under pid %d" % (exe, parent))


def overlap(store):
    """From the journal's events (an attempt's `running`, then its end) and the placements:
    the most attempts running at once, in all and on each node."""
    node = {(r["trial"], r["attempt"]): r["node"] for r in store.q(
        "SELECT trial, attempt, node FROM placements")}
    now, most, on, most_on = 0, 0, {}, {}
    for e in store.q("SELECT trial, attempt, kind FROM events WHERE trial >= 0 AND attempt > 0 "
                     "AND kind IN ('running', 'completed', 'failed', 'pending') ORDER BY id"):
        n = node[(e["trial"], e["attempt"])]
        step = 1 if e["kind"] == "running" else -1
        now += step
        on[n] = on.get(n, 0) + step
        most = max(most, now)
        most_on[n] = max(most_on.get(n, 0), on[n])
    return most, most_on


class SlurmCluster3(E2E):
    @classmethod
    def setUpClass(cls):
        cls.cluster = SlurmCluster(nodes=3, gpus_per_node=2, cpus_per_node=2)
        cls.cluster.start()
        cls.addClassCleanup(cls.cluster.close)

    def tearDown(self):
        self.cluster.run(["scancel", "--full", "-u", "root"], timeout=20)
        super().tearDown()

    def exp(self, trials, secs, concurrency):
        trial = self.write("trial.py", TRIAL)
        return self.experiment(
            "name: slurm-cluster\n"
            "command: [%s, %s, \"{x}\", \"%s\"]\n"
            "metric: {name: x, mode: max}\n"
            "space: {x: {uniform: [0, 1]}}\n"
            "search: {algorithm: random, trials: %d, seed: 5}\n"
            "concurrency: %d\nstop_grace: 1s\n"
            % (yaml_str(PY), yaml_str(trial), secs, trials, concurrency))

    def salloc_run(self, exp, run_dir, *extra):
        """`salloc -N3 --no-kill tunepack run EXP --cluster slurm`, in the background."""
        self.run_dirs.append(run_dir)
        p = self.cluster.popen(["salloc", "-N3", "--no-kill", "--immediate=30", BIN, "run", exp,
                                "--dir", run_dir, "--plain", "--cluster", "slurm"] + list(extra),
                               cwd=self.tmp, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    def nodes_of(self, run_dir):
        rows = self.poll_query(run_dir, "SELECT trial, attempt, node FROM placements") or []
        return {(r["trial"], r["attempt"]): r["node"] for r in rows}

    def test_three_nodes_and_one_dies(self):
        d = self.path("run")
        started = time.monotonic()
        p = self.salloc_run(self.exp(18, 1.5, 2), d)  # 2 a node: 6 at once
        self.assertTrue(wait_for(lambda: "n2" in self.nodes_of(d).values(), 60),
                        "no trial was placed on n2")
        self.cluster.kill_node("n2")
        out, err = p.communicate(timeout=240)
        wall = time.monotonic() - started
        self.assertEqual(p.returncode, 0, err.decode(errors="replace")[-3000:])
        self.assert_each_completed_once(d, 18)
        nodes = self.nodes_of(d)
        with self.store(d) as s:
            trials = s.trials()
            lost = s.q("SELECT detail FROM events WHERE kind = 'agent-lost'")
        self.assertEqual({"n1", "n2", "n3"}, set(nodes.values()))
        self.assertTrue(any(r["detail"].startswith("n2:") for r in lost), lost)
        # `tunepack nodes`: the dead node lost; the others given back at the clean end.
        states = {n: v["state"] for n, v in self.nodes_json(d).items()}
        self.assertEqual(states, {"n1": "released", "n2": "lost", "n3": "released"})
        moved = [t for t in trials if t["attempts"] > 1]
        self.assertTrue(moved, "no trial was interrupted by n2's death")
        for t in moved:  # interrupted on n2: completed by a later attempt on a live node
            self.assertIn(nodes[(t["id"], t["attempts"])], ("n1", "n3"), t)
        for t in trials:  # each ran where the journal placed it
            with open(os.path.join(d, "trials", "%06d" % t["id"], "runs.log")) as f:
                runs = f.read().split("\n")
            self.assertIn("%s %d" % (nodes[(t["id"], t["attempts"])], t["attempts"]), runs)
        per_node = {}
        for (tid, attempt), node in nodes.items():
            per_node[node] = per_node.get(node, 0) + 1
        print("\n[slurm] 18 trials on 3 nodes, n2 killed: attempts per node %s, %d moved, "
              "wall %.1fs" % (per_node, len(moved), wall), file=sys.stderr)
        self.cluster.restart_node("n2")

    def nodes_json(self, run_dir):
        r = self.tp("nodes", run_dir, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        return {n["name"]: n for n in json.loads(r.stdout)}

    def test_concurrency_is_per_node_and_no_node_idles_while_trials_wait(self):
        # concurrency: 2 on an allocation of two nodes: four at once, two on each; with
        # {per_node: 2, total: 3}, three at once. The gate holds each attempt until that many
        # run, so a node left idle shows as fewer at once in the journal, not as a slow run.
        trial = self.write("gated.py", GATED)
        for conc, want, per_node in (("2", 4, 2), ("{per_node: 2, total: 3}", 3, 2)):
            gate = self.path("gate-%d" % want)
            os.makedirs(gate)
            exp = self.experiment(
                "name: per-node\ncommand: [%s, %s, %s, \"%d\", \"{x}\"]\n"
                "metric: {name: x, mode: max}\nspace: {x: {uniform: [0, 1]}}\n"
                "search: {algorithm: random, trials: 8, seed: 2}\nconcurrency: %s\n"
                % (yaml_str(PY), yaml_str(trial), yaml_str(gate), want, conc),
                name="per-node-%d.yaml" % want)
            d = self.path("run-%d" % want)
            self.run_dirs.append(d)
            r = self.cluster.run(["salloc", "-N2", "--immediate=30", BIN, "run", exp, "--dir", d,
                                  "--plain", "--cluster", "slurm"], cwd=self.tmp, timeout=240)
            self.assertEqual(r.returncode, 0, r.stderr[-3000:])
            self.assert_each_completed_once(d, 8)
            with self.store(d) as s:
                most, most_on = overlap(s)
            self.assertEqual(most, want, (conc, most_on))
            self.assertEqual(sorted(most_on), ["n1", "n2"], most_on)
            self.assertTrue(all(k <= per_node for k in most_on.values()), (conc, most_on))
            # A clean end: each node's agent was given back, none lost.
            nodes = self.nodes_json(d)
            self.assertEqual({n: v["state"] for n, v in nodes.items()},
                             {"n1": "released", "n2": "released"}, nodes)
            print("\n[slurm] concurrency: %s on two nodes: %d attempts at once, at most %s per "
                  "node" % (conc, most, most_on), file=sys.stderr)

    def test_killed_orchestrator_resumes_inside_the_same_allocation(self):
        d = self.path("run")
        exp = self.exp(9, 1.0, 1)  # 1 a node: 3 at once
        # One allocation; inside it, two `tunepack run`s: the first is killed mid-run.
        script = self.write("twice.sh", (
            "set -u\n"
            "%s run %s --dir %s --plain --cluster slurm & pid=$!\n"
            "for i in $(seq 200); do\n"
            "  n=$(ls %s/trials 2>/dev/null | wc -l); [ \"$n\" -ge 4 ] && break; sleep 0.1\n"
            "done\n"
            "kill -9 $pid; wait $pid\n"
            "exec %s run %s --dir %s --plain --cluster slurm\n")
            % (BIN, exp, d, d, BIN, exp, d))
        self.run_dirs.append(d)
        r = self.cluster.run(["salloc", "-N3", "--immediate=30", "sh", script], cwd=self.tmp,
                             timeout=240)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertIn("resuming", r.stderr)
        self.assert_each_completed_once(d, 9)

    def test_allocation_grows_while_trials_wait_and_shrinks_when_idle(self):
        d = self.path("run")
        trial = self.write("trial.py", TRIAL)
        # Nine 2-second trials, then one of 12 s: the allocation grows while the short ones
        # wait for room, and the nodes idle during the long one are given back.
        exp = self.experiment(
            "name: elastic\ncommand: [%s, %s, \"{secs}\", \"{secs}\"]\n"
            "metric: {name: x, mode: max}\n"
            "space: {secs: {grid: [2, 2, 2, 2, 2, 2, 2, 2, 2, 12]}}\n"
            "search: {algorithm: grid}\nconcurrency: 10\n"
            "resources: {cpus: 2}\n"   # one trial per node: the others wait for room
            "cluster: {slurm: {nodes: {min: 1, max: 3}, cpus_per_node: 2, idle: 3s, "
            "time: '10:00'}}\n" % (yaml_str(PY), yaml_str(trial)), name="elastic.yaml")
        self.run_dirs.append(d)
        started = time.monotonic()
        r = self.cluster.run([BIN, "run", exp, "--dir", d, "--plain"], cwd=self.tmp,
                             timeout=240)
        wall = time.monotonic() - started
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assert_each_completed_once(d, 10)
        with self.store(d) as s:
            events = s.q("SELECT at, kind, detail FROM events WHERE kind LIKE 'node-%' "
                         "ORDER BY at")
            nodes = {r["node"] for r in s.q("SELECT node FROM placements")}
        kinds = [e["kind"] for e in events]
        self.assertGreaterEqual(kinds.count("node-added"), 2, events)  # grew from 1 to 3
        self.assertGreaterEqual(kinds.count("node-released"), 1, events)  # shrank when idle
        self.assertLess(kinds.index("node-added"), kinds.index("node-released"))
        self.assertEqual(nodes, {"n1", "n2", "n3"})
        # Everything tunepack asked Slurm for is given back.
        q = self.cluster.run(["squeue", "--noheader", "--name=tunepack",
                              "--states=PENDING,RUNNING"], timeout=20)
        self.assertEqual(q.stdout.strip(), "", q.stdout)
        t0 = events[0]["at"]
        print("\n[slurm] elastic allocation (min 1, max 3 nodes), nine 2 s trials and one of "
              "12 s, one per node; wall %.1fs:" % wall, file=sys.stderr)
        for e in events:
            print("  +%5.1fs %-16s %s" % (e["at"] - t0, e["kind"], e["detail"]),
                  file=sys.stderr)

    def test_allocation_grows_for_trials_that_each_nodes_concurrency_holds_back(self):
        # concurrency: 1 on an allocation of one node that may grow to two: the gate holds
        # the first trial until a second runs beside it, which only a second node allows.
        trial = self.write("gated.py", GATED)
        gate = self.path("gate")
        os.makedirs(gate)
        exp = self.experiment(
            "name: grow-per-node\ncommand: [%s, %s, %s, \"2\", \"{x}\"]\n"
            "metric: {name: x, mode: max}\nspace: {x: {uniform: [0, 1]}}\n"
            "search: {algorithm: random, trials: 4, seed: 3}\nconcurrency: 1\n"
            "cluster: {slurm: {nodes: {min: 1, max: 2}, time: '10:00'}}\n"
            % (yaml_str(PY), yaml_str(trial), yaml_str(gate)), name="grow.yaml")
        d = self.path("run")
        self.run_dirs.append(d)
        r = self.cluster.run([BIN, "run", exp, "--dir", d, "--plain"], cwd=self.tmp,
                             timeout=240)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assert_each_completed_once(d, 4)
        with self.store(d) as s:
            most, most_on = overlap(s)
            kinds = [e["kind"] for e in s.q("SELECT kind FROM events WHERE kind LIKE 'node-%' "
                                             "ORDER BY id")]
        self.assertEqual(kinds[:2], ["node-requested", "node-added"], kinds)
        self.assertEqual(most, 2, most_on)
        self.assertEqual(sorted(most_on.values()), [1, 1], most_on)
        states = {n: v["state"] for n, v in self.nodes_json(d).items()}
        self.assertEqual(sorted(states.values()), ["released", "released"], states)

    def gpu_env(self):
        """Each node's agent sees its own two 40 GB GPUs through a stand-in NVML (the %n in
        TUNEPACK_FAKE_NVML is the Slurm node), and runs one MPS daemon per GPU."""
        proc_dir = self.path("procs")
        os.makedirs(proc_dir)
        for node in ("n1", "n2", "n3"):
            gpus = [{"name": "NVIDIA Fake 40G", "uuid": "GPU-%s-%d" % (node, i),
                     "memory_mib": 40960, "util": 0} for i in range(2)]
            self.write("nvml-%s.json" % node, json.dumps(
                {"gpus": gpus, "processes": [], "process_dir": proc_dir}))
        return dict(self.cluster.env, LD_LIBRARY_PATH=FAKE_DIR,
                    TUNEPACK_FAKE_NVML=self.path("nvml-%n.json"), TUNEPACK_FAKE_MPS_MAX_S="120",
                    PATH=FAKE_DIR + os.pathsep + path_without_mps_control())

    def test_gpu_placement_keeps_each_node_to_its_concurrency(self):
        # Twelve 0.2-GPU trials would all fit on one node's two GPUs, and first fit fills n1
        # first; at concurrency 2 no node runs more than two. The orchestrator is held
        # (SIGSTOP) while the first four end, so that one turn of its loop places four at once:
        # the round packs them on n1, gives back what is beyond its two, and places those on n2.
        trial = self.write("held.py", HELD)
        gate, done, release = self.path("gate"), self.path("done"), self.path("release")
        os.makedirs(gate)
        os.makedirs(done)
        exp = self.experiment(
            "name: gpu-per-node\ncommand: [%s, %s, %s, %s, %s, \"{x}\"]\n"
            "metric: {name: x, mode: max}\nspace: {x: {uniform: [0, 1]}}\n"
            "search: {algorithm: random, trials: 12, seed: 4}\nconcurrency: 2\n"
            "resources: {gpus: 1, gpu_memory: 4G, gpu_compute: 0.2}\n"
            "placement: {policy: ff}\n"
            % (yaml_str(PY), yaml_str(trial), yaml_str(gate), yaml_str(done),
               yaml_str(release)), name="gpu-per-node.yaml")
        d = self.path("run")
        self.run_dirs.append(d)
        p = self.cluster.popen(["salloc", "-N2", "--immediate=30", BIN, "run", exp, "--dir", d,
                                "--plain", "--cluster", "slurm"], cwd=self.tmp,
                               env=self.gpu_env(), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.procs.append(p)
        self.assertTrue(wait_for(lambda: len(os.listdir(gate)) >= 4, 120),
                        "four trials never ran at once")
        orchestrator = child_of(p.pid, BIN)
        os.kill(orchestrator, signal.SIGSTOP)
        try:
            open(release, "w").close()
            ended = lambda: [n for n in os.listdir(done)
                             if not os.path.exists("/proc/" + n)]
            self.assertTrue(wait_for(lambda: len(ended()) >= 4, 8), os.listdir(done))
        finally:
            os.kill(orchestrator, signal.SIGCONT)
        out, err = p.communicate(timeout=240)
        self.assertEqual(p.returncode, 0, err.decode(errors="replace")[-3000:])
        self.assert_each_completed_once(d, 12)
        with self.store(d) as s:
            most, most_on = overlap(s)
        self.assertEqual(most, 4, most_on)
        self.assertEqual(sorted(most_on.items()), [("n1", 2), ("n2", 2)], most_on)

    def test_gpu_trials_are_packed_across_the_nodes_gpus(self):
        trial = self.write("gpu_trial.py", (
            "import json, os, time\n"
            "time.sleep(1.5)\n"
            "open(os.path.join(os.environ['TUNEPACK_TRIAL_DIR'], 'where'), 'w').write("
            "os.environ.get('SLURMD_NODENAME', '?') + ' ' + "
            "os.environ.get('CUDA_VISIBLE_DEVICES', '?') + ' ' + "
            "os.environ.get('CUDA_MPS_PIPE_DIRECTORY', '-'))\n"
            "os.write(int(os.environ['TUNEPACK_REPORT_FD']), b'{\"v\": 1}\\n')\n"))
        exp = self.experiment(
            "name: gpus\ncommand: [%s, %s]\nmetric: {name: v, mode: max}\n"
            "search: {algorithm: random, trials: 12}\nconcurrency: 12\n"
            "resources: {gpus: 1, gpu_memory: 10G, gpu_compute: 0.5}\n"
            % (yaml_str(PY), yaml_str(trial)), name="gpus.yaml")
        d = self.path("run")
        self.run_dirs.append(d)
        env = self.gpu_env()
        r = self.cluster.run(["salloc", "-N3", "--immediate=30", BIN, "run", exp, "--dir", d,
                              "--plain", "--cluster", "slurm"], cwd=self.tmp, env=env,
                             timeout=240)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assert_each_completed_once(d, 12)
        with self.store(d) as s:
            rows = s.q("SELECT trial, node, gpus, sharing, env FROM placements")
        per_gpu = {}
        for row in rows:
            gpu = json.loads(row["gpus"])
            self.assertEqual(len(gpu), 1, row)
            per_gpu.setdefault((row["node"], gpu[0]), []).append(row["trial"])
            self.assertEqual(row["sharing"], "mps", row)
            with open(os.path.join(d, "trials", "%06d" % row["trial"], "where")) as f:
                node, visible, pipe = f.read().split()
            # It ran on its node, on that node's GPU, with that node's MPS daemon.
            self.assertEqual(node, row["node"])
            self.assertEqual(visible, "GPU-%s-%d" % (node, gpu[0]))
            self.assertEqual(pipe, os.path.join(d, "mps", node, "gpu%d" % gpu[0], "pipe"))
        # 12 trials at 0.5 of a GPU each: two on every GPU of the three nodes (1.0 <= C_2 =
        # 1.14 under MPS), never three (1.5 > C_3 = 1.36).
        self.assertEqual(len(per_gpu), 6, per_gpu)
        self.assertTrue(all(len(t) == 2 for t in per_gpu.values()), per_gpu)

    def test_ddp_trial_spans_two_nodes_and_synchronises_gradients(self):
        d = self.path("run")
        exp = self.ddp_experiment("{nodes: 2}", name="ddp2")
        self.run_dirs.append(d)
        started = time.monotonic()
        r = self.cluster.run(["salloc", "-N2", "--immediate=30", BIN, "run", exp, "--dir", d,
                              "--plain", "--cluster", "slurm"], cwd=self.tmp, timeout=240)
        wall = time.monotonic() - started
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        ranks = self.assert_ranks_synchronised()
        self.assertNotEqual(ranks[0][2], ranks[1][2], "both ranks ran on one node")
        with self.store(d) as s:
            t = s.trial(0)
            nodes = sorted(r["node"] for r in s.q("SELECT node FROM placements"))
        self.assertEqual(t["state"], "completed")
        self.assertEqual(len(set(nodes)), 2, nodes)
        print("\n[slurm] DDP trial over %s (ranks on %s): val_acc %.3f, wall %.1fs"
              % (nodes, [x[2] for x in ranks], t["value"], wall), file=sys.stderr)


if __name__ == "__main__":
    main()
