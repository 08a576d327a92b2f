#!/usr/bin/env python3
"""place_scale: `tunepack place FILE --json` end to end on a large instance.

Writes an instance of TRIALS trials (random demands: compute 0.05-0.6, memory 0.5-20 GiB,
1-4 CPUs) over GPUS GPUs (8 per node, 80 GiB each), runs `tunepack place FILE --json
--timings` on it, checks the output parses and names every trial once, and prints the
wall time with tunepack's own read / decide / write split. Prints figures; not a test.

    bench/place_scale.py [--bin build/tunepack] [--trials 1000000] [--gpus 10000]
                         [--policy wfd] [--keep DIR]
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time


def write_instance(path, trials, gpus, seed=3):
    rng = random.Random(seed)
    nodes = (gpus + 7) // 8
    with open(path, "w") as f:
        f.write('{"nodes": [')
        left = gpus
        for n in range(nodes):
            k = min(8, left)
            left -= k
            gs = ", ".join('{"name": "gpu%d", "memory_mib": 81920}' % g for g in range(k))
            f.write('%s{"name": "n%d", "cpus": %d, "gpus": [%s]}' % (", " if n else "", n,
                                                                     32 * k, gs))
        f.write('],\n"trials": [\n')
        chunk = []
        for i in range(trials):
            chunk.append('{"id": "t%d", "gpus": 1, "memory_mib": %d, "compute": %.4f, '
                         '"cpus": %d, "duration_s": %.1f}'
                         % (i, 500 + rng.randrange(20000), 0.05 + 0.55 * rng.random(),
                            1 + rng.randrange(4), 30 + 600 * rng.random()))
            if len(chunk) == 10000:
                f.write(",\n".join(chunk) + (",\n" if i + 1 < trials else "\n"))
                chunk = []
        if chunk:
            f.write(",\n".join(chunk) + "\n")
        f.write("]}\n")
    return os.path.getsize(path)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(here, "..", "build", "tunepack"))
    ap.add_argument("--trials", type=int, default=1000000)
    ap.add_argument("--gpus", type=int, default=10000)
    ap.add_argument("--policy", default="wfd")
    ap.add_argument("--keep", help="write the instance and the output here and keep them")
    args = ap.parse_args()
    tmp = args.keep or tempfile.mkdtemp(prefix="place_scale.")
    os.makedirs(tmp, exist_ok=True)
    inst, out = os.path.join(tmp, "instance.json"), os.path.join(tmp, "decision.json")
    t0 = time.monotonic()
    size = write_instance(inst, args.trials, args.gpus)
    print("instance: %d trials, %d GPUs, %.1f MB (written in %.1f s)"
          % (args.trials, args.gpus, size / 1e6, time.monotonic() - t0))
    with open(out, "w") as f:
        t0 = time.monotonic()
        r = subprocess.run([args.bin, "place", inst, "--json", "--timings",
                            "--policy", args.policy], stdout=f, stderr=subprocess.PIPE,
                           text=True)
        wall = time.monotonic() - t0
    if r.returncode != 0:
        sys.exit("tunepack place failed (%d): %s" % (r.returncode, r.stderr))
    with open(out) as f:
        d = json.load(f)
    named = len(d["placed"]) + len(d["unplaced"])
    if named != args.trials:
        sys.exit("the decision names %d trials, not %d" % (named, args.trials))
    m = re.search(r"read ([\d.]+) s, decide ([\d.]+) s, write ([\d.]+) s "
                  r"\(cpu: ([\d.]+) s, ([\d.]+) s, ([\d.]+) s\)", r.stderr)
    split = ("read %s s  decide %s s  write %s s  (cpu %s / %s / %s s)" % m.groups()
             if m else r.stderr.strip())
    print("tunepack place --json --policy %s: %s  total %.2f s wall  (%d placed, "
          "occupancy %.2f%%, %.1f MB out)" % (args.policy, split, wall, len(d["placed"]),
                                              100 * d["occupancy"], os.path.getsize(out) / 1e6))
    if not args.keep:
        os.unlink(inst)
        os.unlink(out)
        os.rmdir(tmp)


if __name__ == "__main__":
    main()
