#!/usr/bin/env python3
"""Trial start latency on remote nodes, through srun and through ssh; prints its figures,
asserts nothing.

  python3 bench/remote_start.py [BUILD_DIR] [--trials 20] [--rounds 10]

Uses the test harnesses (tests/cluster/slurm.py: slurmctld, slurmd and munge from Debian's
packages on this machine; tests/cluster/sshnet.py: real sshd hosts in network namespaces;
both need root), each in a `with` block that stops and removes everything it made.

1. The transport alone: the median of --rounds runs of `srun --overlap -w n1 true` inside an
   allocation (salloc -N2), and of `ssh -F CONFIG host1 true`.
2. tunepack: --trials trials of `sh -c 'echo v=1'` over `--cluster slurm` (salloc -N2) and
   over `cluster: {ssh: {hosts: [host1, host2]}}`, with TUNEPACK_STATS: first_start_s (run
   start to the first trial's `started`: the agent's start through srun / ssh, its hello,
   then one launch; comparable to one `srun true` / `ssh host true` plus a trial start), and
   start p50 / p99 (each trial's launch sent -> started received, agents already up).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # leave no __pycache__ in tests/cluster
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))
from slurm import SlurmCluster  # noqa: E402
from sshnet import SshHosts  # noqa: E402

# Inside the allocation: time `srun --overlap -w n1 true`, print the durations (s) as JSON.
SRUN_TIMES = r'''
import json, subprocess, sys, time
out = []
for _ in range(int(sys.argv[1])):
    t = time.monotonic()
    subprocess.run(["srun", "--overlap", "-N1", "-n1", "-w", "n1", "true"], check=True)
    out.append(time.monotonic() - t)
print(json.dumps(out))
'''


def experiment(tmp, name, trials, cluster=""):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write("name: %s\n"
                "command: [sh, -c, 'echo v=1']\n"
                "metric: {name: v, mode: max}\n"
                "space: {x: {uniform: [0, 1]}}\n"
                "search: {algorithm: random, trials: %d, seed: 1}\n"
                "concurrency: 2\n%s" % (name, trials, cluster))
    return path


def stats_of(path, rc, wall, err=""):
    try:
        with open(path) as f:
            s = json.load(f)
    except (OSError, ValueError):
        s = {}
    s.update(rc=rc, wall=wall)
    if rc != 0:
        sys.stderr.write(err[-2000:])
    return s


def slurm_figures(a, tmp):
    tp = os.path.join(a.build, "tunepack")
    with SlurmCluster(nodes=2, gpus_per_node=2, cpus_per_node=2, workdir=tmp) as c:
        r = c.run(["salloc", "-N2", "--no-kill", "--immediate=30", sys.executable, "-c",
                   SRUN_TIMES, str(a.rounds)], timeout=300)
        if r.returncode != 0:
            raise RuntimeError("salloc/srun: " + r.stderr[-2000:])
        bare = json.loads(r.stdout.strip().splitlines()[-1])
        exp = experiment(tmp, "slurm", a.trials)
        stats = os.path.join(tmp, "slurm.stats.json")
        env = dict(c.env, TUNEPACK_STATS=stats)
        t = time.monotonic()
        r = c.run(["salloc", "-N2", "--no-kill", "--immediate=30", tp, "run", exp, "--dir",
                   os.path.join(tmp, "slurm-run"), "--quiet", "--cluster", "slurm"],
                  env=env, cwd=tmp, timeout=300)
        s = stats_of(stats, r.returncode, time.monotonic() - t, r.stderr)
        c.run(["scancel", "--full", "-u", "root"], timeout=20)
    return bare, s


def ssh_figures(a, tmp):
    tp = os.path.join(a.build, "tunepack")
    with SshHosts(n=2, workdir=tmp) as h:
        bare = []
        for _ in range(a.rounds):
            t = time.monotonic()
            h.run("host1", ["true"], check=True)
            bare.append(time.monotonic() - t)
        exp = experiment(tmp, "ssh", a.trials,
                         "cluster: {ssh: {hosts: [host1, host2], config: %s}}\n"
                         % json.dumps(h.config))
        stats = os.path.join(tmp, "ssh.stats.json")
        env = dict(os.environ, TUNEPACK_STATS=stats)
        t = time.monotonic()
        r = subprocess.run([tp, "run", exp, "--dir", os.path.join(tmp, "ssh-run"), "--quiet"],
                           env=env, cwd=tmp, capture_output=True, text=True, timeout=300)
        s = stats_of(stats, r.returncode, time.monotonic() - t, r.stderr)
    return bare, s


def rtt(s):
    return "%d / %s" % (s.get("pings", 0), "%.2f" % s["ping_p50_ms"] if s.get("pings") else "-")


def ms(v):
    return "-" if v is None else "%.1f" % (v * 1000.0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    with tempfile.TemporaryDirectory(prefix="tp-remote-start-") as tmp:
        srun_bare, srun_tp = slurm_figures(a, tmp)
        ssh_bare, ssh_tp = ssh_figures(a, tmp)
    rows = [
        ("bare `true` through the transport, median of %d (ms)" % a.rounds,
         ms(statistics.median(srun_bare)), ms(statistics.median(ssh_bare))),
        ("  min / max (ms)", "%s / %s" % (ms(min(srun_bare)), ms(max(srun_bare))),
         "%s / %s" % (ms(min(ssh_bare)), ms(max(ssh_bare)))),
        ("tunepack: %d trials of sh -c 'echo v=1', 2 nodes (exit code)" % a.trials,
         "%d" % srun_tp["rc"], "%d" % ssh_tp["rc"]),
        ("  first start: agent up + hello + launch (ms)", ms(srun_tp.get("first_start_s")),
         ms(ssh_tp.get("first_start_s"))),
        ("  trial start p50, launch -> started (ms)",
         "%.2f" % srun_tp.get("start_p50_ms", float("nan")),
         "%.2f" % ssh_tp.get("start_p50_ms", float("nan"))),
        ("  trial start p99 (ms)", "%.2f" % srun_tp.get("start_p99_ms", float("nan")),
         "%.2f" % ssh_tp.get("start_p99_ms", float("nan"))),
        ("  pings / ping RTT p50 (ms)", rtt(srun_tp), rtt(ssh_tp)),
        ("  wall of the run, incl. salloc (s)", "%.2f" % srun_tp["wall"], "%.2f" % ssh_tp["wall"]),
    ]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows + [("", "srun (Slurm)")])
    print("remote trial start (%s)" % a.build)
    print("%s  %s  %s" % ("".ljust(w0), "srun (Slurm)".rjust(w1), "ssh"))
    for label, x, y in rows:
        print("%s  %s  %s" % (label.ljust(w0), x.rjust(w1), y))


if __name__ == "__main__":
    main()
