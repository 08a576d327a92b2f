#!/usr/bin/env python3
"""The orchestrator under a simulated cluster; prints its figures, asserts nothing.

  python3 bench/cluster_load.py [BUILD_DIR] [--agents 100] [--gpus 8] [--trials 20000]
                                [--report-hz 4] [--trial-s 3.5] [--batch 1] [--concurrency N]
                                [--sweep 10,50,100] [--perf]

The issue's target: the orchestrator serving 100 agents x 8 GPUs, placement rounds and
heartbeats under 10 ms at the 99th percentile, and 10,000 metric messages/s sustained.

Each node is a bench/fake_agent process (the real protocol on a pipe, no trial processes:
`started` at once, then `report` messages at --report-hz for about --trial-s seconds, then
`exited`), started through `cluster: {command: ...}`. Trials ask for a quarter of a GPU
(gpus: 1, gpu_memory: 8G, gpu_compute: 0.25): 4 per GPU, 3,200 slots on 100 x 8 GPUs.
`tunepack run` writes what it measured of itself with TUNEPACK_STATS; this script adds the
orchestrator's peak RSS (VmHWM) and CPU time, the CPU time of everything else (the fake
agents), and the report rows per second in the sustained phase (while at least 90% of the
slots are busy), from the store's trial intervals.

--sweep H1,H2,...: one run per report rate (two waves of trials of --trial-s 5 by default),
to find where ingestion tops out: offered rows/s (slots x rate) beside what was stored.
--perf: record the orchestrator with `perf record -g` and print its hottest symbols.

Beside the table, the machine's floor for the heartbeat round trips: bench/ping_floor pings
the same number of idle fake agents at once with no orchestrator. With 100 agent processes on
a few cores, a round trip is mostly the time to schedule every agent once; on a real cluster
each agent has its own machine.

Everything goes into a temporary directory, removed at the end. Note the machine: the
orchestrator, SQLite and every fake agent share its cores.
"""
import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TICK = os.sysconf("SC_CLK_TCK")


def cpu_busy():
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v) - idle, sum(v)


def self_cpu_s(pid):
    """utime + stime of pid itself (not its children), in seconds, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return (int(rest[11]) + int(rest[12])) / TICK
    except (OSError, IndexError, ValueError):
        return None


def children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def vm_hwm_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def experiment(a, fake, hz, trials, trial_s, jitter):
    nodes = ", ".join("n%03d" % (i + 1) for i in range(a.agents))
    agent = [fake, "{node}", "--report-hz", str(hz), "--trial-s", str(trial_s),
             "--trial-jitter", str(jitter), "--batch", str(a.batch), "--gpus", str(a.gpus),
             "--seed", "1"]
    return (
        "name: cluster-load\n"
        "command: [train, --x, \"{x}\"]\n"
        "metric: {name: loss, mode: min}\n"
        "space:\n"
        "  x: {uniform: [0, 1]}\n"
        "search: {algorithm: random, trials: %d, seed: 1}\n"
        "concurrency: %d\n"
        "resources: {gpus: 1, gpu_memory: 8G, gpu_compute: 0.25}\n"
        "cluster: {command: {nodes: [%s], argv: %s}}\n"
        % (trials, a.concurrency, nodes, json.dumps(agent)))


def sustained(db_path, slots):
    """Report rows per second while at least 90% of the slots were busy, each trial's rows
    spread evenly over its [started_at, ended_at]; (rows/s, window seconds) or (None, 0)."""
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        rows = dict(db.execute("SELECT trial, count(*) FROM metrics GROUP BY trial"))
        iv = [(s, e, rows.get(t, 0)) for t, s, e in db.execute(
            "SELECT id, started_at, ended_at FROM trials WHERE started_at IS NOT NULL "
            "AND ended_at IS NOT NULL")]
    finally:
        db.close()
    if not iv:
        return None, 0.0
    moments = sorted([(s, 1) for s, _, _ in iv] + [(e, -1) for _, e, _ in iv])
    busy, lo, hi = 0, None, None
    for t, d in moments:
        busy += d
        if busy >= 0.9 * slots:
            if lo is None:
                lo = t
            hi = t
    if lo is None or hi - lo < 1.0:
        return None, 0.0
    got = 0.0
    for s, e, n in iv:
        if e > s:
            got += n * max(0.0, min(e, hi) - max(s, lo)) / (e - s)
    return got / (hi - lo), hi - lo


def run_once(a, tmp, name, hz, trials, trial_s, jitter):
    fake = os.path.join(a.build, "bench", "fake_agent")
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(experiment(a, fake, hz, trials, trial_s, jitter))
    d = os.path.join(tmp, name)
    stats = os.path.join(tmp, name + ".stats.json")
    env = dict(os.environ, TUNEPACK_STATS=stats)
    busy0, total0 = cpu_busy()
    t0 = time.monotonic()
    p = subprocess.Popen([os.path.join(a.build, "tunepack"), "run", path, "--dir", d, "--quiet"],
                         cwd=tmp, env=env)
    perf = None
    if a.perf:
        perf = subprocess.Popen(["perf", "record", "-g", "--no-inherit", "-q", "-o", os.path.join(tmp, name + ".perf"),
                                 "-p", str(p.pid)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    peak, own, agents, n = 0, 0.0, {}, 0
    try:
        while True:
            try:
                pid, status, _ = os.wait4(p.pid, os.WNOHANG)
            except ChildProcessError:
                break
            if pid:
                p.returncode = os.waitstatus_to_exitcode(status)
                break
            peak = max(peak, vm_hwm_kib(p.pid) or 0)
            own = self_cpu_s(p.pid) or own
            if n % 5 == 0:  # the fake agents' CPU time, each one's last sample
                for c in children(p.pid):
                    agents[c] = self_cpu_s(c) or agents.get(c, 0.0)
            n += 1
            time.sleep(0.05)
    except KeyboardInterrupt:
        p.terminate()
        p.wait()
        raise
    finally:
        if perf:
            perf.wait(timeout=60)  # ends with the process it records
    wall = time.monotonic() - t0
    busy1, total1 = cpu_busy()
    with open(stats) as f:
        s = json.load(f)
    slots = a.agents * a.gpus * 4
    rate, window = sustained(os.path.join(d, "tunepack.db"), min(slots, a.concurrency))
    s.update(rc=p.returncode, peak_kib=peak, orch_cpu_s=own, agents_cpu_s=sum(agents.values()),
             machine_busy=(busy1 - busy0) / max(1, total1 - total0), wall_outer=wall,
             hz=hz, trials=trials, slots=slots, sustained_rows_s=rate, window_s=window,
             offered_rows_s=min(slots, a.concurrency) * hz)
    if perf:
        out = subprocess.run(["perf", "report", "-i", os.path.join(tmp, name + ".perf"), "--stdio",
                              "--no-children", "--sort", "dso,symbol", "-g", "none",
                              "--percent-limit", "0.7"],
                             capture_output=True, text=True)
        s["perf"] = "\n".join(l for l in out.stdout.splitlines()
                              if l.strip() and not l.startswith("#"))
    shutil.rmtree(d, ignore_errors=True)
    return s


def fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def table(a, runs):
    rows = [
        ("agents x GPUs", lambda s: "%d x %d" % (s["agents"], a.gpus)),
        ("report rate per trial (lines/s)", lambda s: fmt(s["hz"], "g")),
        ("trials (exit code)", lambda s: "%d (%d)" % (s["trials"], s["rc"])),
        ("wall (s)", lambda s: fmt(s["wall_s"])),
        ("placement rounds", lambda s: "%d" % s["rounds"]),
        ("  round p50 / p99 / max (ms)", lambda s: "%s / %s / %s" % (
            fmt(s["round_p50_ms"], ".2f"), fmt(s["round_p99_ms"], ".2f"),
            fmt(s["round_max_ms"], ".2f"))),
        ("pings", lambda s: "%d" % s["pings"]),
        ("  ping RTT p50 / p99 / max (ms)", lambda s: "%s / %s / %s" % (
            fmt(s["ping_p50_ms"], ".2f"), fmt(s["ping_p99_ms"], ".2f"),
            fmt(s["ping_max_ms"], ".2f"))),
        ("messages from agents", lambda s: "%d" % s["messages"]),
        ("  messages/s (whole run)", lambda s: fmt(s["messages"] / s["wall_s"], ".0f")),
        ("report rows stored", lambda s: "%d" % s["report_rows"]),
        ("  rows/s (whole run)", lambda s: fmt(s["report_rows"] / s["wall_s"], ".0f")),
        ("  rows/s sustained (>=90% slots busy)", lambda s: "%s over %.0f s" % (
            fmt(s["sustained_rows_s"], ".0f"), s["window_s"])),
        ("  rows/s offered (slots x rate)", lambda s: fmt(s["offered_rows_s"], ".0f")),
        ("start latency p50 / p99 (ms)", lambda s: "%s / %s" % (
            fmt(s["start_p50_ms"], ".2f"), fmt(s["start_p99_ms"], ".2f"))),
        ("first start (s)", lambda s: fmt(s["first_start_s"], ".3f")),
        ("orchestrator peak RSS (MiB)", lambda s: fmt(s["peak_kib"] / 1024)),
        ("orchestrator CPU (s, % of one core)", lambda s: "%.1f (%.0f%%)" % (
            s["orch_cpu_s"], 100 * s["orch_cpu_s"] / s["wall_outer"])),
        ("fake agents CPU (s, % of one core)", lambda s: "%.1f (%.0f%%)" % (
            s["agents_cpu_s"], 100 * s["agents_cpu_s"] / s["wall_outer"])),
        ("machine busy, all processes (%% of %d cores)" % os.cpu_count(),
         lambda s: "%.0f%%" % (100 * s["machine_busy"])),
    ]
    w0 = max(len(r[0]) for r in rows)
    cells = [[f(s) for s in runs] for _, f in rows]
    w = [max(len(c[i]) for c in cells) for i in range(len(runs))]
    for (label, _), c in zip(rows, cells):
        print("  ".join([label.ljust(w0)] + [x.rjust(w[i]) for i, x in enumerate(c)]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(ROOT, "build"))
    ap.add_argument("--agents", type=int, default=100)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--trials", type=int, default=None)
    ap.add_argument("--report-hz", type=float, default=4.0)
    ap.add_argument("--trial-s", type=float, default=None)
    ap.add_argument("--batch", type=int, default=1, help="report lines per message")
    ap.add_argument("--concurrency", type=int, default=None)
    ap.add_argument("--sweep", default=None, help="report rates, e.g. 10,50,100")
    ap.add_argument("--perf", action="store_true")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    slots = a.agents * a.gpus * 4
    if a.concurrency is None:
        a.concurrency = slots
    if a.perf and not shutil.which("perf"):
        sys.exit("--perf: perf is not installed")
    print("tunepack cluster load (%s): %d fake agents x %d GPUs, %d slots, concurrency %d, "
          "%d cores" % (a.build, a.agents, a.gpus, slots, a.concurrency, os.cpu_count()))
    runs = []
    with tempfile.TemporaryDirectory(prefix="tp-cluster-load-") as tmp:
        if a.sweep:
            trial_s = a.trial_s or 5.0
            trials = a.trials or 2 * min(slots, a.concurrency)
            for hz in [float(x) for x in a.sweep.split(",")]:
                runs.append(run_once(a, tmp, "hz%g" % hz, hz, trials, trial_s, 0.33))
        else:
            trial_s = a.trial_s or 3.5
            runs.append(run_once(a, tmp, "load", a.report_hz, a.trials or 20000, trial_s, 0.43))
    table(a, runs)
    floor = subprocess.run([os.path.join(a.build, "bench", "ping_floor"),
                            os.path.join(a.build, "bench", "fake_agent"), str(a.agents), "20"],
                           capture_output=True, text=True)
    if floor.returncode == 0:
        p50, p99, top = floor.stdout.split()
        print("ping RTT floor with no orchestrator (bench/ping_floor: %d idle fake agents pinged "
              "at once, 20 rounds): p50 %s / p99 %s / max %s ms"
              % (a.agents, fmt(float(p50), ".2f"), fmt(float(p99), ".2f"), fmt(float(top), ".2f")))
    for s in runs:
        if "perf" in s:
            print("\nperf, the orchestrator (self time, %g lines/s per trial):\n%s"
                  % (s["hz"], s["perf"]))


if __name__ == "__main__":
    main()
