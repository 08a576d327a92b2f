"""tunepack from Python (standard library only): start, follow and read an experiment.

    import tunepack
    run = tunepack.run("experiment.yaml", "runs/demo", wait=False)
    for line in run.lines():          # the run's log lines, as they come
        print(line)
    tunepack.status("runs/demo")      # {"state": ..., "counts": {...}, "best": {...}, ...}
    tunepack.trials("runs/demo")      # [{"id": 0, "state": "completed", "params": {...}, ...}]
    tunepack.best("runs/demo")        # the best trial (dict), or None

`run` calls the `tunepack` binary ($TUNEPACK_BIN, else `tunepack` on PATH); `status`, `trials`
and `best` read the experiment's store (DIR/tunepack.db) read-only, so they are safe while the
run goes on. `best` ranks as `tunepack best` does (src/run/rank.c, src/cli/common.c): each trial
by the last job it ended with the objective (completed, stopped early, paused at a rung, or
promoted and running the next); the larger budget first, then the better value by the metric's
mode; under `surrogate:` a target trial above every surrogate.
"""

import fcntl
import json
import os
import sqlite3
import subprocess

__all__ = ["run", "status", "trials", "best", "Run", "TunepackError"]

# Trials that compete for "best" (src/run/rank.c: tp__rank_competes).
_RANKED = ("completed", "stopped", "paused")
# Counts `status` gives, in its order; "interrupted": running in a run no orchestrator owns.
_COUNTED = ("completed", "stopped", "failed", "running", "paused", "pending", "interrupted")


class TunepackError(RuntimeError):
    """A tunepack command failed: .code is its exit code, .stderr what it said."""

    def __init__(self, code, stderr):
        super().__init__("tunepack exited with %d: %s" % (code, stderr.strip()))
        self.code = code
        self.stderr = stderr


def _binary():
    return os.environ.get("TUNEPACK_BIN") or "tunepack"


class Run:
    """A `tunepack run` started in the background."""

    def __init__(self, dir, process):
        self.dir = dir
        self.process = process
        self._stderr = ""

    def lines(self):
        """Yield the run's log lines (stdout) until it ends."""
        for line in self.process.stdout:
            yield line.rstrip("\n")

    def wait(self):
        """Wait for the end; return the exit code (docs/exit-codes.md)."""
        for _ in self.lines():
            pass
        self._stderr = self.process.stderr.read()
        return self.process.wait()

    def stop(self):
        """Ask the run to stop (as `tunepack stop`); it resumes with run(file, dir) again."""
        subprocess.run([_binary(), "stop", self.dir], capture_output=True, text=True)
        return self.wait()

    @property
    def stderr(self):
        return self._stderr


def run(file, dir, wait=True, extra=()):
    """Run (or resume) the experiment in file with its store in dir.

    wait=True: run it to its end and return status(dir); raises TunepackError when the file is
    wrong, the directory cannot be used or the run failed (exit codes 1-4, 7). Exit 5 (no trial
    got a value) and 6 (stopped) return the status. wait=False: return a Run to follow.
    """
    p = subprocess.Popen([_binary(), "run", str(file), "--dir", str(dir), "--plain"] +
                         [str(a) for a in extra], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    r = Run(str(dir), p)
    if not wait:
        return r
    code = r.wait()
    if code not in (0, 5, 6):
        raise TunepackError(code, r.stderr)
    return status(dir)


def _connect(dir):
    path = os.path.join(str(dir), "tunepack.db")
    if not os.path.exists(path):
        raise FileNotFoundError("no experiment in %s (no tunepack.db there)" % dir)
    conn = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


def _owned(dir):
    """Whether an orchestrator holds dir's lock now."""
    try:
        fd = os.open(os.path.join(str(dir), "lock"), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _meta(conn):
    return {r["key"]: r["value"] for r in conn.execute("SELECT key, value FROM meta")}


def _trials(conn, dir, owned):
    where = {}
    for p in conn.execute("SELECT trial, attempt, node, gpus FROM placements ORDER BY id"):
        gpus = json.loads(p["gpus"])
        text = p["node"] + (":" + ",".join(str(g) for g in gpus) if gpus else "")
        key = (p["trial"], p["attempt"])
        where[key] = where[key] + " " + text if key in where else text
    out = []
    for r in conn.execute("SELECT * FROM trials ORDER BY id"):
        t = dict(r)
        t["params"] = json.loads(t["params"])
        t["metrics"] = json.loads(t["metrics"]) if t.get("metrics") else None
        if t["state"] == "running" and not owned:
            t["state"] = "interrupted"
        t["where"] = where.get((t["id"], t["attempts"]))
        t["duration_s"] = t.pop("run_s", None)
        t["logs"] = os.path.join(str(dir), "trials", "%06d" % t["id"]) if t["id"] >= 0 else None
        out.append(t)
    return out


def trials(dir):
    """Every trial of the experiment in dir, in id order, as dicts: id, state, params, metrics
    (its last report), value, step, rung, budget, attempts, failures, interrupted, error,
    stderr_tail, where (node:GPUs), duration_s (time spent running), logs (its folder), and
    under `surrogate:` kind (surrogate or target) and source (a target's surrogate trial)."""
    with _connect(dir) as conn:
        return _trials(conn, dir, _owned(dir))


def _last_results(conn):
    """{trial: (rung, budget, value)} of each trial's last job that ended with the objective."""
    out = {}
    for d in conn.execute("SELECT trial, rung, budget, value FROM decisions WHERE kind = 'result' "
                          "AND ok AND value IS NOT NULL ORDER BY seq"):
        out[d["trial"]] = (d["rung"], d["budget"], d["value"])
    return out


def _rank(ts, results, maximize, top):
    ranked = []
    for t in ts:
        if t["id"] in results:  # its last finished job, even while its next rung runs
            t = dict(t)
            t["rung"], t["budget"], t["value"] = results[t["id"]]
        elif t["state"] not in _RANKED or t["value"] is None:
            continue
        ranked.append(t)
    sign = -1 if maximize else 1
    # under surrogate: a target trial (kind "target") ranks above every surrogate
    ranked.sort(key=lambda t: (t.get("kind") != "target", -(t["budget"] or 0),
                               sign * t["value"], t["id"]))
    return ranked[:top]


def best(dir, top=None):
    """The best trial so far (a dict as trials() gives), or None; with top=N, a list of the N
    best, best first."""
    with _connect(dir) as conn:
        meta = _meta(conn)
        ranked = _rank(_trials(conn, dir, _owned(dir)), _last_results(conn),
                       meta.get("mode") == "max", top or 1)
    if top:
        return ranked
    return ranked[0] if ranked else None


def status(dir):
    """The experiment in dir: name, file, directory, state, trials, counts by state, metric,
    mode, best (a trial dict or None), as `tunepack status --json` says them."""
    owned = _owned(dir)
    with _connect(dir) as conn:
        meta = _meta(conn)
        ts = _trials(conn, dir, owned)
        results = _last_results(conn)
    state = meta.get("state", "new")
    if owned:
        state = "running"
    elif state == "running":
        state = "interrupted (run it again to resume)"
    counts = {k: 0 for k in _COUNTED}
    for t in ts:
        counts[t["state"]] = counts.get(t["state"], 0) + 1
    ranked = _rank(ts, results, meta.get("mode") == "max", 1)
    return {"name": meta.get("name"), "file": meta.get("experiment_path"), "directory": str(dir),
            "state": state, "trials": len(ts), "counts": counts, "metric": meta.get("metric"),
            "mode": meta.get("mode"), "best": ranked[0] if ranked else None}
