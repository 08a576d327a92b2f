#!/usr/bin/env python3
"""Engine overhead benchmark for issue 2; prints its figures, asserts nothing.

  python3 bench/engine.py [BUILD_DIR]      (default: build)

1. throughput: 2,000 trials of `true` and of `echo acc=1` at concurrency 16,
   every transition journaled: trials per second; beside it, the machine's
   ceiling for the same processes with no engine (bench/spawn_ceiling.c).
2. ingestion: one trial writing 1,000,000 JSON report lines: lines per second
   from the first line written to the last row committed.
3. memory: the orchestrator's peak resident set (VmHWM) with 10,000 trials in
   the experiment.
"""
import os
import sqlite3
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
BIN = os.path.join(BUILD, "tunepack")
FLOOD = os.path.join(BUILD, "bench", "report_flood")
CEILING = os.path.join(BUILD, "bench", "spawn_ceiling")


def run(tmp, name, body, poll_rss=False):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(body)
    d = os.path.join(tmp, name)
    t0 = time.monotonic()
    p = subprocess.Popen([BIN, "run", path, "--dir", d, "--quiet"], cwd=tmp)
    peak = 0
    while p.poll() is None:
        if poll_rss:
            try:
                with open(f"/proc/{p.pid}/status") as s:
                    for line in s:
                        if line.startswith("VmHWM:"):
                            peak = max(peak, int(line.split()[1]))
            except OSError:
                pass
        time.sleep(0.02)
    wall = time.monotonic() - t0
    db = sqlite3.connect(f"file:{d}/tunepack.db?mode=ro", uri=True)
    return wall, db, peak, p.returncode


def main():
    with tempfile.TemporaryDirectory() as tmp:
        print(f"tunepack engine benchmark ({BIN})")
        for name, argv in (("true", ["true"]), ("echo", ["echo", "acc=1"])):
            for how, opt in (("posix_spawn", []), ("fork + prctl, as the agent", ["--fork"])):
                out = subprocess.run([CEILING, "2000", "16"] + opt + argv, capture_output=True,
                                     text=True)
                print(f"ceiling     {name:5s}: {out.stdout.strip()} processes/s: this machine's own "
                      f"limit (a bare {how} loop, concurrency 16, no engine)")
        for name, cmd in (("true", "[true]"), ("echo", '[echo, "acc=1"]')):
            wall, db, _, _ = run(tmp, "thr_" + name, f"""name: thr-{name}
command: {cmd}
metric: {{name: acc, mode: max}}
search: {{algorithm: random, trials: 2000, seed: 1}}
concurrency: 16
""")
            n = db.execute("select count(*) from trials where state in ('completed','failed')").fetchone()[0]
            ev = db.execute("select count(*) from events").fetchone()[0]
            print(f"throughput  {name:5s}: {n} trials in {wall:.2f} s = {n / wall:.0f} trials/s "
                  f"({ev} events journaled; target >= 500 trials/s)")

        wall, db, _, _ = run(tmp, "flood", f"""name: flood
command: [{FLOOD}, "1000000"]
metric: {{name: acc, mode: max}}
search: {{algorithm: random, trials: 1, seed: 1}}
""")
        rows = db.execute("select count(*) from metrics").fetchone()[0]
        start, end = db.execute("select started_at, ended_at from trials").fetchone()
        span = end - start
        print(f"ingestion        : {rows} metric rows stored in {span:.2f} s (trial start to end) "
              f"= {rows / span:.0f} lines/s; whole run {wall:.2f} s = {rows / wall:.0f} lines/s "
              f"(target >= 200,000 lines/s)")

        wall, db, peak, _ = run(tmp, "mem", """name: mem
command: [echo, "acc={x}"]
metric: {name: acc, mode: max}
space:
  x: {uniform: [0, 1]}
  lr: {loguniform: [1.0e-5, 1.0]}
  hidden: {choice: [16, 32, 64, 128]}
search: {algorithm: random, trials: 10000, seed: 1}
concurrency: 16
""", poll_rss=True)
        n = db.execute("select count(*) from trials").fetchone()[0]
        print(f"memory           : peak orchestrator RSS {peak / 1024:.1f} MB with {n} trials "
              f"({wall:.1f} s; target < 50 MB)")


if __name__ == "__main__":
    main()
