"""Shared helpers for tunepack's end-to-end tests (Python standard library only).

Every test runs the real binary ($TUNEPACK_BIN) on real trials in its own temporary
directory, reads outcomes from the SQLite store (opened read-only) and the CLI output, and
kills whatever it started, including trial processes left behind, in tearDown.
TP_E2E_KEEP=1 keeps each test's directory (its path printed to stderr), to read a failed
run's store and files afterwards.
"""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("TUNEPACK_SRC") or os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("TUNEPACK_BUILD") or os.path.join(SRC, "build")
BIN = os.environ.get("TUNEPACK_BIN") or os.path.join(BUILD, "tunepack")
PY = sys.executable or "python3"

# Every limit a test sets on a wait is a guard against a hang, never an expectation of speed: a
# passing test never reaches one. HANG_SCALE stretches each limit given to wait_for, tp and run_exp,
# so that the suite holds on a machine ten times oversubscribed (ctest -j8 on 2 cores beside two
# CPU hogs, the ASan build) and a hang still ends the test.
HANG_SCALE = 5
# Limit for one `tunepack` command (before HANG_SCALE).
RUN_TIMEOUT = 90

# A trial that dumps its argv, its TUNEPACK_* environment and cwd to
# $TUNEPACK_TRIAL_DIR/seen.json (read back with E2E.seen) and reports acc=1.
DUMP_TRIAL = (
    "import json, os, sys\n"
    "env = {k: v for k, v in os.environ.items() if k.startswith('TUNEPACK_')}\n"
    "out = os.path.join(os.environ['TUNEPACK_TRIAL_DIR'], 'seen.json')\n"
    "json.dump({'argv': sys.argv, 'env': env, 'cwd': os.getcwd()}, open(out, 'w'))\n"
    "os.write(int(os.environ['TUNEPACK_REPORT_FD']), b'{\"acc\": 1}\\n')\n"
)


def yaml_str(text):
    """Quote text as a YAML double-quoted scalar (JSON strings are valid YAML)."""
    return json.dumps(text)


def hyperband_nine(name, trainer, resources, placement, extra=""):
    """An experiment text: x in 1..9 on `trainer` (argv: x, epochs; reports score = x * epoch),
    Hyperband over epochs 2, 6, 18, all nine at once, with the given resources and placement
    (YAML flow bodies) and extra lines."""
    return ("name: %s\n"
            "command: [%s, %s, \"{x}\", \"{epochs}\"]\n"
            "metric: {name: score, mode: max}\n"
            "space:\n  x: {grid: [1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"
            "search: {algorithm: grid, trials: 1, scheduler: hyperband}\n"
            "budget: {name: epochs, min: 2, max: 18, eta: 3}\n"
            "concurrency: 9\n"
            "resources: {%s}\n"
            "placement: {%s}\n%s"
            % (name, yaml_str(PY), yaml_str(trainer), resources, placement, extra))


def merged_env(env):
    """os.environ updated with env (None: unchanged); a value of None removes that name."""
    full = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    return full


def proc_stat(pid):
    """The fields of /proc/PID/stat after the command's name (state, ppid, ...), as bytes, or
    None when pid is gone."""
    try:
        with open("/proc/%s/stat" % pid, "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2:].split()


def alive(pid):
    """Whether pid is a process that has not died (a zombie has)."""
    st = proc_stat(pid)
    return st is not None and st[0] not in (b"Z", b"X")


def pids_mentioning(text):
    """Live (non-zombie) processes other than this one whose command line or environment
    contains text: for finding whatever a test started under its own directory."""
    needle = text.encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmd = f.read()
            with open("/proc/%s/environ" % name, "rb") as f:
                env = f.read()
        except OSError:
            continue
        if alive(name) and (needle in cmd or needle in env):
            out.append(int(name))
    return out


def token_pids(token):
    """Return the pids of live processes whose environment holds TUNEPACK_RUN_TOKEN=token,
    or token-NODE (the token an agent on a cluster node gives its trials)."""
    needle = ("TUNEPACK_RUN_TOKEN=" + token).encode()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % name, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        # A zombie keeps no environment worth caring about (it is already dead).
        if alive(name) and any(e == needle or e.startswith(needle + b"-") for e in env):
            pids.append(int(name))
    return pids


def children_of(pid):
    """Return the pids whose parent is pid (scanning /proc)."""
    out = []
    for name in os.listdir("/proc"):
        st = proc_stat(name) if name.isdigit() else None
        if st is not None and int(st[1]) == pid:
            out.append(int(name))
    return out


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def wait_for(predicate, timeout, interval=0.05):
    """Poll predicate until it returns a truthy value or timeout * HANG_SCALE seconds pass;
    return it."""
    deadline = time.monotonic() + timeout * HANG_SCALE
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)


class Store:
    """A read-only view of DIR/tunepack.db."""

    def __init__(self, run_dir):
        path = os.path.join(run_dir, "tunepack.db")
        if not os.path.exists(path):
            raise AssertionError("no store at %s" % path)
        self.conn = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=10)
        self.conn.row_factory = sqlite3.Row

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def q(self, sql, *args):
        return [dict(r) for r in self.conn.execute(sql, args)]

    def meta(self):
        return {r["key"]: r["value"] for r in self.q("SELECT key, value FROM meta")}

    def trials(self):
        rows = self.q("SELECT * FROM trials ORDER BY id")
        for r in rows:
            r["params"] = json.loads(r["params"])
        return rows

    def trial(self, tid):
        rows = [t for t in self.trials() if t["id"] == tid]
        if not rows:
            raise AssertionError("no trial %d in the store" % tid)
        return rows[0]

    def events(self, trial=None, kind=None):
        sql, args = "SELECT * FROM events WHERE 1", []
        if trial is not None:
            sql += " AND trial = ?"
            args.append(trial)
        if kind is not None:
            sql += " AND kind = ?"
            args.append(kind)
        return self.q(sql + " ORDER BY id", *args)

    def metrics(self, trial=None):
        if trial is None:
            return self.q("SELECT * FROM metrics ORDER BY trial, attempt, seq")
        return self.q("SELECT * FROM metrics WHERE trial = ? ORDER BY attempt, seq", trial)


class E2E(unittest.TestCase):
    """Base class: a temporary directory per test, and cleanup of everything started."""

    maxDiff = None

    def setUp(self):
        # TP_E2E_KEEP=1 keeps each test's directory, to read a failure's run afterwards
        self._tmp = None if os.environ.get("TP_E2E_KEEP") else \
            tempfile.TemporaryDirectory(prefix="tp-e2e-")
        self.tmp = os.path.realpath(self._tmp.name if self._tmp else
                                    tempfile.mkdtemp(prefix="tp-e2e-"))
        self.procs = []       # Popen objects started by the test
        self.run_dirs = []    # experiment directories, to kill leftovers by token

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    p.kill()
                except OSError:
                    pass
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            for f in (p.stdout, p.stderr):
                if f:
                    f.close()
        for d in self.run_dirs:
            token = self.token_of(d)
            if token:
                for pid in token_pids(token):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
        if self._tmp:
            self._tmp.cleanup()
        else:
            print("kept %s" % self.tmp, file=sys.stderr)

    # -- files ---------------------------------------------------------------------------

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def write(self, name, text):
        p = self.path(name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
        return p

    def seen(self, run_dir, tid):
        """What the DUMP_TRIAL script of trial tid saw: {argv, env, cwd}."""
        with open(os.path.join(run_dir, "trials", "%06d" % tid, "seen.json")) as f:
            return json.load(f)

    def experiment(self, text, name="exp.yaml"):
        return self.write(name, text)

    # -- running tunepack ------------------------------------------------------------------

    def tp(self, *args, cwd=None, timeout=RUN_TIMEOUT, env=None):
        """Run `tunepack args...` to its end (a hang: past timeout * HANG_SCALE seconds); return
        CompletedProcess (text output)."""
        full_env = merged_env(env)
        timeout *= HANG_SCALE
        try:
            return subprocess.run([BIN] + [str(a) for a in args], cwd=cwd or self.tmp,
                                  stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=timeout, env=full_env,
                                  errors="replace")
        except subprocess.TimeoutExpired as e:
            raise AssertionError("tunepack %s ran past %ss; stderr: %r"
                                 % (" ".join(map(str, args)), timeout, e.stderr)) from None

    def run_exp(self, exp_path, run_dir, *extra, cwd=None, timeout=RUN_TIMEOUT, env=None):
        """`tunepack run EXP --dir DIR --plain`; remember DIR for cleanup."""
        self.run_dirs.append(run_dir)
        return self.tp("run", exp_path, "--dir", run_dir, "--plain", *extra,
                       cwd=cwd, timeout=timeout, env=env)

    def start_run(self, exp_path, run_dir, *extra, cwd=None, env=None):
        """Start `tunepack run` (with options extra) in the background; return the Popen
        (killed in tearDown)."""
        self.run_dirs.append(run_dir)
        p = subprocess.Popen([BIN, "run", exp_path, "--dir", run_dir, "--plain", *extra],
                             cwd=cwd or self.tmp, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=merged_env(env))
        self.procs.append(p)
        return p

    def assert_each_completed_once(self, run_dir, n):
        """Trials 0..n-1 all completed, each with exactly one `completed` event."""
        with self.store(run_dir) as s:
            trials = s.trials()
            self.assertEqual([t["id"] for t in trials], list(range(n)))
            for t in trials:
                self.assertEqual(t["state"], "completed", t)
                self.assertEqual(len(s.events(t["id"], "completed")), 1, t)

    def ddp_experiment(self, resources, name="ddp"):
        """examples/ddp as one 2-epoch trial over `resources`, each rank writing its proof to
        self.path("proof").rank<k>; returns the experiment file."""
        return self.experiment(
            "name: %s\ncommand: [/usr/bin/python3, %s, --lr, \"0.05\", --epochs, \"2\", "
            "--proof, %s]\nmetric: {name: val_acc, mode: max}\n"
            "search: {algorithm: random, trials: 1}\nresources: %s\ntimeout: 3m\n"
            % (name, yaml_str(os.path.join(SRC, "examples", "ddp", "train.py")),
               yaml_str(self.path("proof")), resources), name=name + ".yaml")

    def assert_ranks_synchronised(self):
        """The two ranks of a ddp_experiment ended with the same parameters from different
        data; returns their proofs (params hash, data hash, node)."""
        ranks = []
        for k in (0, 1):
            with open("%s.rank%d" % (self.path("proof"), k)) as f:
                ranks.append(f.read().split())
        self.assertEqual(ranks[0][0], ranks[1][0], "the ranks' parameters differ")
        self.assertNotEqual(ranks[0][1], ranks[1][1], "the ranks saw the same data")
        return ranks

    def assertExit(self, proc, code):
        self.assertEqual(proc.returncode, code,
                         "exit %s, expected %s\nstdout:\n%s\nstderr:\n%s"
                         % (proc.returncode, code, proc.stdout, proc.stderr))

    def store(self, run_dir):
        s = Store(run_dir)
        self.addCleanup(s.close)
        return s

    @staticmethod
    def poll_query(run_dir, sql, *args):
        """Rows of sql on DIR's store, or None while the store (or its schema) is not there
        yet: for polling a run that is starting."""
        if not os.path.exists(os.path.join(run_dir, "tunepack.db")):
            return None
        try:
            with Store(run_dir) as s:
                return s.q(sql, *args)
        except (sqlite3.Error, AssertionError):
            return None

    @staticmethod
    def token_of(run_dir):
        path = os.path.join(run_dir, "tunepack.db")
        if not os.path.exists(path):
            return None
        try:
            with Store(run_dir) as s:
                return s.meta().get("token")
        except (sqlite3.Error, AssertionError):
            return None

    def kill_after(self, exp_path, run_dir, decisions, *extra):
        """Start the run (with options extra), wait until its store holds `decisions`
        decisions (the search's own events: the count goes on across resumes), and SIGKILL the
        process it started; return its Popen. A run that ends before that fails the test: the
        kill it set out to make never happened."""
        p = self.start_run(exp_path, run_dir, *extra)

        def reached():
            rows = self.poll_query(run_dir, "SELECT count(*) AS n FROM decisions")
            return p.poll() is not None or (rows and rows[0]["n"] >= decisions)
        wait_for(reached, RUN_TIMEOUT)
        self.assertIsNone(p.poll(), "the run ended before its store held %d decisions, so it "
                          "was never killed; kill earlier" % decisions)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        return p

    def kill_at(self, exp_path, run_dir, counts):
        """Start the run again and again, SIGKILL it once its store holds each of `counts`
        decisions in turn (kill_after)."""
        for n in counts:
            self.kill_after(exp_path, run_dir, n)

    def assert_kills_resume_the_same(self, exp_path, decisions, parts=4):
        """Run exp_path to the end once (DIR plain); then run it again in DIR killed, SIGKILLed
        at each of parts - 1 even shares of the plain run's decisions and resumed to the end;
        assert it exits 0, never says "diverged", and decisions(run_dir) (the test's own view
        of the decisions) is the same for both. Returns (plain, killed) for further checks."""
        plain, killed = self.path("plain"), self.path("killed")
        self.assertExit(self.run_exp(exp_path, plain), 0)
        want = decisions(plain)
        self.kill_at(exp_path, killed, [len(want) * k // parts for k in range(1, parts)])
        q = self.run_exp(exp_path, killed)
        self.assertExit(q, 0)
        self.assertNotIn("diverged", q.stderr)
        got = decisions(killed)
        if got != want:  # say which attempts of either run failed or were interrupted
            self.assertEqual(got, want, "failed attempts, plain: %r; killed: %r"
                             % (self.failed_attempts(plain), self.failed_attempts(killed)))
        return plain, killed

    def failed_attempts(self, run_dir):
        """[(trial, failures, interruptions, state, error, the end of its stderr)] of every
        trial of run_dir with a failed or interrupted attempt."""
        with self.store(run_dir) as s:
            return [(r["id"], r["failures"], r["interrupted"], r["state"], r["error"],
                     r["stderr_tail"])
                    for r in s.q("SELECT id, failures, interrupted, state, error, stderr_tail "
                                 "FROM trials WHERE failures > 0 OR interrupted > 0 ORDER BY id")]

    @staticmethod
    def find_agent(orchestrator):
        """The pid of the orchestrator's local `tunepack agent` child, or None."""
        for pid in children_of(orchestrator):
            argv = cmdline(pid)
            if len(argv) >= 2 and argv[-1] == "agent" and os.path.basename(argv[0]) == \
                    os.path.basename(BIN):
                return pid
        return None

    def lock_pid(self, run_dir):
        """The orchestrator's pid, as written in DIR/lock (None while there is none)."""
        try:
            with open(os.path.join(run_dir, "lock")) as f:
                text = f.read().strip()
            return int(text.split()[0]) if text else None
        except (OSError, ValueError, IndexError):
            return None


# -- GPUs (stand-ins from $TUNEPACK_FAKE_DIR) ---------------------------------------------

FAKE_DIR = os.environ.get("TUNEPACK_FAKE_DIR") or os.path.join(BUILD, "fake")
MPS_CONTROL = "nvidia-cuda-mps-control"

# Event kinds that end an attempt (its resources are free again afterwards).
END_KINDS = ("completed", "failed", "pending", "oom")


def path_without_mps_control():
    """$PATH less every directory that holds an nvidia-cuda-mps-control."""
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not os.path.exists(os.path.join(d, MPS_CONTROL))]
    return os.pathsep.join(dirs)


def attempt_intervals(store):
    """{(trial, attempt): (start, end)} in event ids (the orchestrator's own order): start is
    the attempt's 'running' event, end its first ending event (None while it runs)."""
    out = {}
    for e in store.q("SELECT id, trial, attempt, kind FROM events WHERE trial >= 0 ORDER BY id"):
        key = (e["trial"], e["attempt"])
        if e["kind"] == "running":
            out[key] = (e["id"], None)
        elif e["kind"] in END_KINDS and key in out and out[key][1] is None:
            out[key] = (out[key][0], e["id"])
    return out


def gpu_timeline(store):
    """Replay the placements over the attempts' [start, end) intervals. Returns (moments,
    rows): moments is a list, one per attempt start, of {gpu: [placement rows there]}
    right after that start; rows maps (trial, attempt) to its placement row (gpus parsed)."""
    rows = {}
    for p in store.q("SELECT * FROM placements ORDER BY id"):
        p["gpus"] = json.loads(p["gpus"])
        p["env"] = json.loads(p["env"]) if p["env"] else {}
        key = (p["trial"], p["attempt"])
        if key in rows:
            raise AssertionError("two placement rows for trial %d attempt %d" % key)
        rows[key] = p
    points = []
    for key, (start, end) in attempt_intervals(store).items():
        points.append((start, 1, key))
        if end is not None:
            points.append((end, 0, key))
    points.sort()
    live, moments = set(), []
    for _, is_start, key in points:
        if not is_start:
            live.discard(key)
            continue
        if key not in rows:
            raise AssertionError("trial %d attempt %d ran without a placement row" % key)
        live.add(key)
        on = {}
        for k in live:
            for g in rows[k]["gpus"]:
                on.setdefault(g, []).append(rows[k])
        moments.append(on)
    return moments, rows


class GpuE2E(E2E):
    """E2E with fake GPUs: an NVML JSON per test, and no MPS daemon left behind."""

    def tearDown(self):
        # Whatever still runs with this test's directory in its command line or environment
        # (trials, fake MPS daemons, a foreign stand-in) is this test's: kill it by pid.
        for pid in pids_mentioning(self.tmp):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        super().tearDown()

    def fake_gpus(self, gpus, processes=(), name="nvml.json"):
        """Write the fake NVML's JSON: gpus is a list of (memory_mib, extra dict or None)."""
        self.proc_dir = self.path("nvml-procs")
        os.makedirs(self.proc_dir, exist_ok=True)
        self.uuids = []
        out = []
        for i, (mib, extra) in enumerate(gpus):
            uuid = "GPU-%08x-fake-%d" % (0xbeef0000 + i, i)
            self.uuids.append(uuid)
            g = {"name": "NVIDIA Fake %dG" % (mib // 1024), "uuid": uuid, "memory_mib": mib,
                 "util": 0}
            g.update(extra or {})
            out.append(g)
        self.nvml_json = self.write(name, json.dumps(
            {"gpus": out, "processes": list(processes), "process_dir": self.proc_dir}))
        return self.nvml_json

    def gpu_env(self, mps=True, nvml=True):
        """Environment for `tunepack run`: the fake NVML (nvml), the fake MPS control program
        on PATH (mps) or no MPS control program at all."""
        env = {"TUNEPACK_MPS_CONTROL": None, "TUNEPACK_NVML_LIB": None,
               "CUDA_VISIBLE_DEVICES": None, "CUDA_MPS_PIPE_DIRECTORY": None,
               "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": None,
               "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": None, "TUNEPACK_FAKE_MPS_MAX_S": "120"}
        path = path_without_mps_control()
        env["PATH"] = FAKE_DIR + os.pathsep + path if mps else path
        if nvml:
            env["LD_LIBRARY_PATH"] = FAKE_DIR
            env["TUNEPACK_FAKE_NVML"] = self.nvml_json
        else:
            env["LD_LIBRARY_PATH"] = None
            env["TUNEPACK_FAKE_NVML"] = None
        return env

    def mps_daemons(self, run_dir):
        """Live fake MPS daemons serving run_dir (pids)."""
        return [pid for pid in pids_mentioning(os.path.join(run_dir, "mps"))
                if any(MPS_CONTROL in a for a in cmdline(pid))]


def main():
    unittest.main(verbosity=2)
