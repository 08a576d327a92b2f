#!/usr/bin/env python3
"""The truth table from what bench/gpu/truth.sh left in OUTDIR: markdown on stdout.

    truth_table.py OUTDIR

Makespans of the mixed workload four ways (one at a time outside tunepack, `one-per-gpu`, the
default, and the bound), each trial's time against its time alone, the demand a 3 s profile
measured against a 30 s one, and fusion against separate processes. The bound is one start-up
(the median over the serial trials of their wall time less their training, TRUTH_EPOCHS
seconds) plus, per model, its trials' training time alone over the best aggregate speed-up
that k co-located copies of it reached under MPS (colocate.jsonl): what the GPU could do were
every trial co-located at its model's best k from the start.
"""
import json
import os
import sqlite3
import statistics
import sys


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip().startswith("{")]


def text(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return "?"


def db(out, run):
    path = os.path.join(out, "runs", run, "tunepack.db")
    return sqlite3.connect("file:%s?mode=ro" % path, uri=True) if os.path.exists(path) else None


def main():
    out = sys.argv[1]
    epochs = float(os.environ.get("TRUTH_EPOCHS", "10"))
    print("# Truth table\n")
    print("GPU: %s; %s; tunepack %s\n" % (text(os.path.join(out, "gpu.csv")).replace("\n", " / "),
                                          text(os.path.join(out, "torch.txt")),
                                          text(os.path.join(out, "commit.txt"))))
    serial = rows(os.path.join(out, "serial.jsonl"))
    runs = {r["run"]: r for r in rows(os.path.join(out, "runs.jsonl"))}
    colo = rows(os.path.join(out, "colocate.jsonl"))
    one = {}
    best = {}
    for r in colo:
        if r["k"] == 1:
            one[r["model"]] = r["samples_per_s"]
    for r in colo:
        if r["model"] in one:
            x = r["samples_per_s"] / one[r["model"]]
            if x > best.get(r["model"], (0, 0))[0]:
                best[r["model"]] = (x, r["k"])
    alone = {(s["model"], s["lr"]): s["wall_s"] for s in serial if s["rc"] == 0}
    serial_s = sum(s["wall_s"] for s in serial)
    startup = statistics.median([s["wall_s"] - epochs for s in serial]) if serial else None
    bound = None
    if serial and all(s["model"] in best for s in serial):
        bound = startup + sum(epochs / best[s["model"]][0] for s in serial)
    print("## Makespans (%d trials, %g epochs of 1 s alone each)\n" % (len(serial), epochs))
    print("| way | makespan s | one at a time / this | this / bound |")
    print("|---|---|---|---|")

    def line(name, s):
        if s is None:
            print("| %s | - | - | - |" % name)
            return
        print("| %s | %.1f | %s | %s |" % (name, s, "%.2fx" % (serial_s / s) if serial else "-",
                                           "%.2f" % (s / bound) if bound else "-"))
    line("one at a time, outside tunepack, uncapped", serial_s if serial else None)
    for name, run in (("`one-per-gpu`", "onepergpu"), ("default", "default")):
        r = runs.get(run)
        line(name + ("" if not r or r["rc"] == 0 else " (exit %d)" % r["rc"]),
             r["wall_s"] if r else None)
    line("bound", bound)
    if bound:
        print("\nBound: start-up %.1f s + training over each model's best co-located speed-up (%s).\n"
              % (startup, ", ".join("%s %.2fx at k = %d" % (m, x, k) for m, (x, k) in sorted(best.items()))))
    for run in ("onepergpu", "default"):
        c = db(out, run)
        if not c:
            continue
        print("\n## Each trial of `%s` against its time alone\n" % run)
        print("| trial | model | lr | state | time s | alone s | x alone | sharing | MPS env |")
        print("|---|---|---|---|---|---|---|---|---|")
        for tid, params, state, st, en in c.execute(
                "SELECT id, params, state, started_at, ended_at FROM trials ORDER BY id"):
            p = json.loads(params)
            pl = c.execute("SELECT sharing, env FROM placements WHERE trial = ? ORDER BY id DESC",
                           (tid,)).fetchone() or ("?", "{}")
            env = {k: v for k, v in json.loads(pl[1] or "{}").items() if k.startswith("CUDA_MPS_A")
                   or k.startswith("CUDA_MPS_PIN")}
            t = en - st if st and en else None
            a = alone.get((p.get("model"), p.get("lr")))
            print("| %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                tid, p.get("model"), p.get("lr"), state, "%.1f" % t if t else "-",
                "%.1f" % a if a else "-", "%.2f" % (t / a) if t and a else "-", pl[0],
                " ".join("%s=%s" % kv for kv in sorted(env.items())) or "none"))
        print()
        for kind, detail in c.execute("SELECT kind, detail FROM events WHERE kind LIKE 'profil%' "
                                      "ORDER BY id"):
            print("- %s: %s" % (kind, detail))
    print("\n## Profiles: 3 s (`default`) against 30 s (`profile30`)\n")
    print("| group | 3 s MiB | 30 s MiB | 3 s compute | 30 s compute | compute 3 s / 30 s |")
    print("|---|---|---|---|---|---|")
    prof = {}
    for run in ("default", "profile30"):
        c = db(out, run)
        if c:
            for key, mib, comp in c.execute("SELECT key, memory_mib, compute FROM profiles"):
                prof.setdefault(key, {})[run] = (mib, comp)
    for key, v in sorted(prof.items()):
        a, b = v.get("default"), v.get("profile30")
        print("| %s | %s | %s | %s | %s | %s |" % (
            key, a[0] if a else "-", b[0] if b else "-", "%.3f" % a[1] if a else "-",
            "%.3f" % b[1] if b else "-", "%.2f" % (a[1] / b[1]) if a and b and b[1] else "-"))
    fusion = rows(os.path.join(out, "fusion.jsonl"))
    if fusion:
        keys = []
        for r in fusion:
            keys += [k for k in r if k not in keys]
        print("\n## Fusion\n")
        print("| " + " | ".join(keys) + " |")
        print("|" + "---|" * len(keys))
        for r in fusion:
            print("| " + " | ".join(str(r.get(k, "")) for k in keys) + " |")
    print("\nSection times (s): " + text(os.path.join(out, "sections.txt")).replace("\n", "; "))


if __name__ == "__main__":
    main()
