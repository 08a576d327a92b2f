#!/usr/bin/env python3
"""timeline.py DIR: what happened in an experiment, in time order, from its store (read-only).

For a deadline run (docs/deadline.md, docs/elastic.md): the trials admitted (each `job`
decision) and refused (a decision or event that says so), every attempt's GPUs (its placement
row) and how it ended, each resize with its why and its measured restart cost, the deadline,
the checkpoints named there, and at the end the GPUs each trial held over time and the best
model with its checkpoint. Times are seconds from the experiment's creation. Standard library
only; prints to stdout; exit 1 when DIR holds no store.
"""

import json
import os
import sqlite3
import sys

ENDS = ("completed", "failed", "stopped", "paused", "pending")


def rows(db, sql, *args):
    cur = db.execute(sql, args)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def timeline(run_dir):
    path = os.path.join(run_dir, "tunepack.db")
    if not os.path.exists(path):
        raise SystemExit("timeline.py: %s holds no experiment (no tunepack.db)" % run_dir)
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    meta = {r["key"]: r["value"] for r in rows(db, "SELECT key, value FROM meta")}
    t0 = float(meta.get("created_at", 0))
    lines = []  # (at, order, text)

    def add(at, text, order=0):
        lines.append((at, order, text))

    for d in rows(db, "SELECT * FROM decisions ORDER BY seq"):
        what = d["detail"] or ""
        if d["kind"] == "job":
            word = "refused" if "refus" in what else "admitted"
            add(d["at"], "trial %d %s: %s" % (d["trial"], word, what))
        elif d["kind"] == "refused":
            add(d["at"], "trial %d refused: %s" % (d["trial"], what) if d["trial"] >= 0
                else "refused: %s" % what, 1)
        elif d["kind"] == "resize":
            add(d["at"], "trial %d %s" % (d["trial"], what), 1)
    attempts = {}
    for p in rows(db, "SELECT * FROM placements ORDER BY id"):
        gpus = json.loads(p["gpus"])
        attempts[(p["trial"], p["attempt"])] = {"start": p["at"], "gpus": gpus, "end": None}
        add(p["at"], "trial %d attempt %d starts on %d GPU(s) %s of %s"
            % (p["trial"], p["attempt"], len(gpus), gpus, p["node"]), 2)
    for e in rows(db, "SELECT * FROM events ORDER BY id"):
        key = (e["trial"], e["attempt"])
        if e["kind"] in ENDS and key in attempts and attempts[key]["end"] is None:
            attempts[key]["end"] = e["at"]
            add(e["at"], "trial %d attempt %d ends: %s%s" % (
                e["trial"], e["attempt"], e["kind"], ": " + e["detail"] if e["detail"] else ""), 3)
        elif e["kind"] in ("deadline", "resize-done", "checkpoint") or (
                e["kind"] != "scaling" and "refus" in (e["detail"] or "")):
            who = "trial %d " % e["trial"] if e["trial"] >= 0 else ""
            add(e["at"], "%s%s: %s" % (who, e["kind"], e["detail"]), 4)
    out = []
    for at, _, text in sorted(lines, key=lambda x: (x[0], x[1])):
        out.append("%+9.2fs  %s" % (at - t0, text))
    out.append("GPUs per trial over time (seconds from the start):")
    per_trial = {}
    for (trial, attempt), a in sorted(attempts.items()):
        end = "%.2f" % (a["end"] - t0) if a["end"] is not None else "..."
        per_trial.setdefault(trial, []).append(
            "%d GPU(s) [%.2f, %s)" % (len(a["gpus"]), a["start"] - t0, end))
    for trial in sorted(per_trial):
        out.append("  trial %d: %s" % (trial, ", ".join(per_trial[trial])))
    last_curve = {}
    for r in rows(db, "SELECT trial, detail FROM events WHERE kind = 'scaling' ORDER BY id"):
        last_curve[r["trial"]] = json.loads(r["detail"])
    curves = sorted(last_curve.items())
    if curves:
        out.append("measured seconds per step by GPU count, and restart cost:")
        for trial, c in curves:
            steps = ", ".join("%s GPU: %.4f s (%d steps)" % (k, v, c["samples"][k])
                              for k, v in sorted(c["step_s"].items(), key=lambda kv: int(kv[0])))
            rs = c.get("restart_s")
            out.append("  trial %d: %s; restart %s" % (
                trial, steps or "none yet", "%.2f s" % rs if rs is not None else "unknown"))
    best = meta.get("best_checkpoint")
    if best:
        b = json.loads(best)
        out.append("best model at the deadline: trial %d, checkpoint %s"
                   % (b["trial"], b["checkpoint"]))
    db.close()
    return "\n".join(out)


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) == 2 else 2
    print(timeline(sys.argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
