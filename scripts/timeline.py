#!/usr/bin/env python3
"""timeline.py DIR: what happened in an experiment, in time order, from its store (read-only).

For a deadline run (docs/deadline.md, docs/elastic.md): first a count of the trials admitted,
the refusals (and when new trials were closed) and the resizes; then the trials admitted (each
`job` decision) and refused (a decision or event that says so), with the scheduler's figures,
every attempt's GPUs (its placement row) and how it ended with its last report (step, value),
each resize with its why and its measured restart cost, the deadline, the checkpoints named
there, and at the end the GPUs each trial held over time, the measured curves, and the best
model with its value and checkpoint. Times are seconds from the experiment's creation. Standard library
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


def reported(last):
    """' (last report: step S, value V)' for an attempt's last report, '' without one."""
    if not last or last[1] is None:
        return ""
    step = "step %d, " % last[0] if last[0] is not None else ""
    return " (last report: %svalue %.6g)" % (step, last[1])


def summary(db, t0):
    """One line: trials admitted, refused (paused ones; when new trials were closed), resizes."""
    admitted = rows(db, "SELECT count(*) AS n FROM trials")[0]["n"]
    refused = rows(db, "SELECT trial, at FROM decisions WHERE kind = 'refused' ORDER BY seq")
    closed = [r["at"] for r in refused if r["trial"] < 0]
    resizes = rows(db, "SELECT count(*) AS n FROM decisions WHERE kind = 'resize'")[0]["n"]
    return ("%d trials admitted; %d refusals: %d waiting trials not promoted or continued%s; "
            "%d resizes" % (admitted, len(refused), sum(1 for r in refused if r["trial"] >= 0),
                            ", new trials closed at %+.2fs" % (closed[0] - t0) if closed else
                            "", resizes))


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
    last = {}  # (trial, attempt): its last report's (step, value)
    for m in rows(db, "SELECT trial, attempt, step, value FROM metrics ORDER BY trial, attempt, "
                      "seq"):
        last[(m["trial"], m["attempt"])] = (m["step"], m["value"])
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
            add(e["at"], "trial %d attempt %d ends: %s%s%s" % (
                e["trial"], e["attempt"], e["kind"], ": " + e["detail"] if e["detail"] else "",
                reported(last.get(key))), 3)
        elif e["kind"] in ("deadline", "resize-done", "checkpoint") or (
                e["kind"] != "scaling" and "refus" in (e["detail"] or "")):
            who = "trial %d " % e["trial"] if e["trial"] >= 0 else ""
            add(e["at"], "%s%s: %s" % (who, e["kind"], e["detail"]), 4)
    out = [summary(db, t0)]
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
        tr = rows(db, "SELECT value, step FROM trials WHERE id = ?", b["trial"])
        out.append("best model at the deadline: trial %d%s, checkpoint %s" % (
            b["trial"], " (%s %.6g at step %s)" % (meta.get("metric", "value"), tr[0]["value"],
                                                   tr[0]["step"]) if tr and tr[0]["value"]
            is not None else "",
            b["checkpoint"]))
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
