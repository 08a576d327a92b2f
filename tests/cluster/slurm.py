"""A real Slurm 22.05 cluster on this one machine, for tests (Python 3 standard library only).

    with SlurmCluster(nodes=3, gpus_per_node=2) as cluster:
        cluster.run(["srun", "-N1", "-w", "n2", "hostname"])

starts, from Debian's packages (slurmctld, slurmd, munge):

  * its own munged, with its own key (`mungekey -c`) on its own socket;
  * one slurmctld on a free port, with its own state directory, log and pid file;
  * one `slurmd -N nK` per node, each on its own free port, NodeAddr=127.0.0.1, with its
    own spool directory, log and pid file, and `gpus_per_node` GPUs backed by plain files;

all configured by a slurm.conf in a temporary directory that the client commands find
through SLURM_CONF in `cluster.env`. Nothing under /etc is read or written, so Debian's
packaged munge/slurmd/slurmctld services (running or not) neither matter nor conflict.

Leaving the `with` block (or calling close()) cancels every job, stops every daemon, kills
every slurmstepd and task of the cluster, and removes its directory. A cluster whose owner
died without closing it (a crashed test run) is cleaned up by the next SlurmCluster: its
directory records the owner's pid.

`python3 tests/cluster/slurm.py serve --dir DIR [--nodes N]` keeps a cluster under DIR until
SIGTERM, for people to try tunepack on (scripts/local-slurm.sh; docs/cluster.md).
"""

import glob
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time

PREFIX = "tp-slurm-"
SLURMD = "/usr/sbin/slurmd"
SLURMCTLD = "/usr/sbin/slurmctld"
MUNGED = "/usr/sbin/munged"
MUNGEKEY = "/usr/sbin/mungekey"


class SlurmError(RuntimeError):
    pass


# --- /proc helpers --------------------------------------------------------------------------

def _stat(pid):
    """(state, ppid) of pid, or None if it is gone."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rfind(b")") + 2:].split()
    return rest[0].decode(), int(rest[1])


def _alive(pid):
    st = _stat(pid)
    return st is not None and st[0] not in ("Z", "X")


def _all_pids():
    return [int(n) for n in os.listdir("/proc") if n.isdigit()]


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _fd_targets(pid):
    out = []
    d = "/proc/%d/fd" % pid
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for n in names:
        try:
            out.append(os.readlink(os.path.join(d, n)))
        except OSError:
            pass
    return out


def _descendants(roots):
    """roots and every live process descended from them."""
    parent = {}
    for pid in _all_pids():
        st = _stat(pid)
        if st:
            parent[pid] = st[1]
    found = set(r for r in roots if r in parent)
    changed = True
    while changed:
        changed = False
        for pid, pp in parent.items():
            if pp in found and pid not in found:
                found.add(pid)
                changed = True
    return sorted(p for p in found if _alive(p))


def pids_touching(path):
    """Live processes (not this one) whose command line, environment, working directory or
    open files mention path: everything a cluster rooted at path started, whatever it
    renamed itself to (slurmstepd rewrites its argv, but keeps its log file open)."""
    needle = path.encode()
    me = os.getpid()
    out = []
    for pid in _all_pids():
        if pid == me or not _alive(pid):
            continue
        if (needle in _read("/proc/%d/cmdline" % pid)
                or needle in _read("/proc/%d/environ" % pid)):
            out.append(pid)
            continue
        try:
            cwd = os.readlink("/proc/%d/cwd" % pid)
        except OSError:
            cwd = ""
        if cwd.startswith(path) or any(t.startswith(path) for t in _fd_targets(pid)):
            out.append(pid)
    return out


def _kill_all(pids, sig=signal.SIGKILL):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def _wait_gone(pids, timeout):
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if _alive(p)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def free_port():
    """A TCP port that nothing listens on now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_stale(tmpdir=None):
    """Kill what crashed earlier clusters left running and remove their directories: those
    whose owner (the pid in DIR/owner) is no longer alive."""
    base = tmpdir or tempfile.gettempdir()
    for d in glob.glob(os.path.join(base, PREFIX + "*")):
        try:
            owner = int(_read(os.path.join(d, "owner")).decode().split()[0])
        except (ValueError, IndexError):
            owner = None
        if owner is not None and _alive(owner) and owner != os.getpid():
            continue  # a live cluster of another test run
        for _ in range(3):
            pids = pids_touching(d)
            if not pids:
                break
            _kill_all(pids)
            _wait_gone(pids, 5)
        shutil.rmtree(d, ignore_errors=True)


# --- the cluster -----------------------------------------------------------------------------

class SlurmCluster:
    """A running Slurm cluster of `nodes` nodes named n1..nN (see the module's doc)."""

    def __init__(self, nodes=3, gpus_per_node=2, cpus_per_node=2, workdir=None,
                 name="tpcluster", start_timeout=60, keep_on_failure=False):
        self.node_names = ["n%d" % i for i in range(1, nodes + 1)]
        self.gpus_per_node = gpus_per_node
        self.cpus_per_node = cpus_per_node
        self.cluster_name = name
        self.start_timeout = start_timeout
        self.keep_on_failure = keep_on_failure
        self._parent_dir = workdir
        self.dir = None
        self.env = None
        self.procs = {}      # "munged", "slurmctld", "n1", ... -> Popen (foreground daemons)
        self.node_ports = {}
        self._log_files = []
        self.gpu_devices_are_files = False
        self.hostname = socket.gethostname().split(".")[0]

    # paths
    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    @property
    def conf(self):
        return self.path("etc", "slurm.conf")

    @property
    def munge_socket(self):
        return self.path("munge", "munge.socket")

    def node_log(self, node):
        return self.path("log", "slurmd-%s.log" % node)

    # --- lifecycle ---

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def start(self):
        clean_stale(self._parent_dir)
        if self._parent_dir:
            os.makedirs(self._parent_dir, exist_ok=True)
        self.dir = os.path.realpath(tempfile.mkdtemp(prefix=PREFIX, dir=self._parent_dir))
        os.chmod(self.dir, 0o755)
        with open(self.path("owner"), "w") as f:
            f.write("%d\n" % os.getpid())
        try:
            for sub in ("etc", "munge", "log", "run", "state", "spool", "dev"):
                os.makedirs(self.path(sub))
                os.chmod(self.path(sub), 0o755)  # munged wants its socket's directory open
            self._start_munge()
            self._write_config()
            self.env = self._client_env()
            self._start_slurmctld()
            for node in self.node_names:
                self._start_slurmd(node)
            self.wait_nodes_idle(self.node_names, self.start_timeout)
        except BaseException:
            if not self.keep_on_failure:
                logs = self.logs_tail()
                self.close()
                raise SlurmError("the Slurm cluster did not come up:\n" + logs)
            raise

    def _log(self, name):
        """A file under log/ for a daemon's stderr: Popen dups it, so close ours at once."""
        f = open(self.path("log", name), "ab")
        self._log_files.append(f)
        return f

    def _close_logs(self):
        for f in self._log_files:
            f.close()
        self._log_files = []

    def _start_munge(self):
        key = self.path("munge", "munge.key")
        subprocess.run([MUNGEKEY, "-c", "-k", key], check=True, capture_output=True)
        os.chmod(key, 0o600)
        # -F: stay in the foreground, so that the Popen is the daemon itself.
        # -f: munged refuses to run as root, or with a key under /tmp, without it.
        self.procs["munged"] = subprocess.Popen(
            [MUNGED, "-F", "-f", "--socket=" + self.munge_socket, "--key-file=" + key,
             "--pid-file=" + self.path("run", "munged.pid"),
             "--log-file=" + self.path("log", "munged.log"),
             "--seed-file=" + self.path("munge", "munged.seed")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self._log("munged.stderr"), start_new_session=True)
        self._close_logs()
        self._wait(lambda: os.path.exists(self.munge_socket), 10, "munged's socket",
                   self.procs["munged"])

    def _write_config(self):
        self.ctld_port = free_port()
        for node in self.node_names:
            while True:
                port = free_port()
                if port != self.ctld_port and port not in self.node_ports.values():
                    break
            self.node_ports[node] = port
        gpu_files = [self._make_gpu_file(i) for i in range(self.gpus_per_node)]
        conf = [
            "# Written by tests/cluster/slurm.py; removed with the cluster.",
            "ClusterName=%s" % self.cluster_name,
            "SlurmctldHost=%s(127.0.0.1)" % self.hostname,
            "SlurmctldPort=%d" % self.ctld_port,
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            "AuthInfo=socket=%s" % self.munge_socket,
            "StateSaveLocation=%s" % self.path("state"),
            "SlurmdSpoolDir=%s" % self.path("spool", "%n"),
            "SlurmctldPidFile=%s" % self.path("run", "slurmctld.pid"),
            "SlurmdPidFile=%s" % self.path("run", "slurmd-%n.pid"),
            "SlurmctldLogFile=%s" % self.path("log", "slurmctld.log"),
            "SlurmdLogFile=%s" % self.path("log", "slurmd-%n.log"),
            "PlugStackConfig=%s" % self.path("etc", "plugstack.conf"),
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "GresTypes=gpu",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "ReturnToService=2",
            # Short timeouts: a dead node is noticed within seconds, not minutes.
            "SlurmdTimeout=5",
            "SlurmctldTimeout=5",
            "MessageTimeout=5",
            "TCPTimeout=2",
            "KillWait=2",
            "InactiveLimit=0",
            "MinJobAge=5",
            "Waittime=0",
            # Nodes as configured here, whatever this machine has (several slurmd share it).
            "SlurmdParameters=config_overrides",
            "NodeName=DEFAULT CPUs=%d RealMemory=1000 Gres=gpu:%d "
            "State=UNKNOWN" % (self.cpus_per_node, self.gpus_per_node),
        ]
        for node in self.node_names:
            conf.append("NodeName=%s NodeAddr=127.0.0.1 NodeHostname=%s Port=%d"
                        % (node, self.hostname, self.node_ports[node]))
        conf.append("PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        with open(self.conf, "w") as f:
            f.write("\n".join(conf) + "\n")
        with open(self.path("etc", "plugstack.conf"), "w") as f:
            f.write("# no SPANK plugins\n")
        gres = []
        if self.gpus_per_node:
            files = (self.path("dev", "gpu[0-%d]" % (self.gpus_per_node - 1))
                     if self.gpus_per_node > 1 else gpu_files[0])
            gres.append("NodeName=%s Name=gpu File=%s" % (self._nodelist(), files))
        with open(self.path("etc", "gres.conf"), "w") as f:
            f.write("\n".join(gres) + "\n")

    def _make_gpu_file(self, i):
        """DIR/dev/gpuI for gres.conf's File=. slurmd 22.05 ignores a File= that is not a
        character or block device ("is not a valid character or block device") and then
        sets no CUDA_VISIBLE_DEVICES, so it is a character device with /dev/null's numbers
        (1:3): harmless if anything opens it. Where mknod is refused it is a plain file, and
        steps get their GPU count (SLURM_GPUS_ON_NODE) but no device list."""
        p = self.path("dev", "gpu%d" % i)
        try:
            os.mknod(p, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        except OSError:
            open(p, "w").close()
            self.gpu_devices_are_files = True
        return p

    def _nodelist(self):
        return "n[1-%d]" % len(self.node_names) if len(self.node_names) > 1 else "n1"

    def _client_env(self):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SLURM_", "SLURMD_", "SALLOC_", "SRUN_", "SBATCH_", "SQUEUE_"))}
        env["SLURM_CONF"] = self.conf
        return env

    def _daemon_env(self, node=None):
        env = dict(self.env)
        env["TP_SLURM_CLUSTER"] = self.dir
        if node:
            env["TP_SLURM_NODE"] = node
        return env

    def _start_slurmctld(self):
        # -D: foreground; -i: ignore any saved state (there is none); -f: our config.
        self.procs["slurmctld"] = subprocess.Popen(
            [SLURMCTLD, "-D", "-i", "-f", self.conf],
            env=self._daemon_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self._log("slurmctld.stderr"), start_new_session=True,
            cwd=self.path("state"))
        self._close_logs()
        self._wait(lambda: self._port_open(self.ctld_port), 20, "slurmctld's port",
                   self.procs["slurmctld"])

    def _start_slurmd(self, node):
        os.makedirs(self.path("spool", node), mode=0o700, exist_ok=True)
        self.procs[node] = subprocess.Popen(
            [SLURMD, "-D", "-N", node, "-f", self.conf],
            env=self._daemon_env(node), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self._log("slurmd-%s.stderr" % node),
            start_new_session=True, cwd=self.path("spool", node))
        self._close_logs()
        # No probe of its port (slurmd logs each empty connection as an error): the
        # caller waits for sinfo to show the node idle, which also checks it is alive.

    @staticmethod
    def _port_open(port):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    def _wait(self, pred, timeout, what, proc=None):
        deadline = time.monotonic() + timeout
        while not pred():
            if proc is not None and proc.poll() is not None:
                raise SlurmError("%s: the daemon exited with %s" % (what, proc.returncode))
            if time.monotonic() >= deadline:
                raise SlurmError("timed out waiting for %s" % what)
            time.sleep(0.1)

    # --- queries and helpers ---

    def run(self, args, **kw):
        """subprocess.run(args) with the cluster's environment; text output captured unless
        told otherwise; a timeout of 60 s unless told otherwise."""
        kw.setdefault("env", self.env)
        kw.setdefault("timeout", 60)
        if "stdout" not in kw and "stderr" not in kw and "capture_output" not in kw:
            kw["capture_output"] = True
        if "input" not in kw and "stdin" not in kw:
            kw["stdin"] = subprocess.DEVNULL
        kw.setdefault("text", True)
        return subprocess.run(args, **kw)

    def popen(self, args, **kw):
        kw.setdefault("env", self.env)
        return subprocess.Popen(args, **kw)

    def node_states(self):
        """{node: state} from sinfo (state in lower case, e.g. 'idle', 'down*', 'alloc')."""
        r = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=20)
        states = {}
        for line in r.stdout.split("\n"):
            parts = line.split()
            if len(parts) == 2:
                states[parts[0]] = parts[1]
        return states

    def wait_nodes_idle(self, nodes, timeout=60):
        deadline = time.monotonic() + timeout
        states = {}
        while True:
            try:
                states = self.node_states()
            except subprocess.TimeoutExpired:
                states = {}
            if all(states.get(n) == "idle" for n in nodes):
                return states
            for name in ("slurmctld",) + tuple(nodes):
                p = self.procs.get(name)
                if p is not None and p.poll() is not None:
                    raise SlurmError("%s exited with %s" % (name, p.returncode))
            if time.monotonic() >= deadline:
                raise SlurmError("nodes not idle after %ss: %s" % (timeout, states))
            time.sleep(0.3)

    def node_pids(self, node):
        """Every live process of node: its slurmd, the slurmstepd daemons it started (they
        keep the node's log file open) and everything descended from them, and any task
        whose environment names this node of this cluster."""
        roots = []
        p = self.procs.get(node)
        if p is not None and p.poll() is None:
            roots.append(p.pid)
        log = self.node_log(node)
        spool = self.path("spool", node)
        tag = ("TP_SLURM_NODE=%s" % node).encode()
        conf = ("SLURM_CONF=%s" % self.conf).encode()
        nodename = ("SLURMD_NODENAME=%s" % node).encode()
        for pid in _all_pids():
            if pid == os.getpid() or not _alive(pid):
                continue
            env = _read("/proc/%d/environ" % pid).split(b"\0")
            if tag in env and ("TP_SLURM_CLUSTER=%s" % self.dir).encode() in env:
                roots.append(pid)
            elif nodename in env and conf in env:
                roots.append(pid)
            elif any(t == log or t.startswith(spool + "/") for t in _fd_targets(pid)):
                roots.append(pid)
        return _descendants(roots)

    def kill_node(self, node, timeout=10):
        """Kill node's slurmd and every process started through it (slurmstepd daemons and
        their tasks), as if the machine had died; verify that none is left."""
        for _ in range(5):
            pids = self.node_pids(node)
            if not pids:
                break
            _kill_all(pids)
            _wait_gone(pids, timeout)
        p = self.procs.pop(node, None)
        if p is not None:
            p.wait(timeout=timeout)
        left = self.node_pids(node)
        if left:
            raise SlurmError("processes of %s survived: %s" % (node, left))

    def restart_node(self, node, timeout=60):
        """Start node's slurmd again (killing it first if it runs) and wait until idle.
        With ReturnToService=2 a node that was DOWN comes back when it registers."""
        if node in self.procs:
            self.kill_node(node)
        self._start_slurmd(node)
        self.wait_nodes_idle([node], timeout)

    def all_pids(self):
        """Every live process of this cluster (daemons, slurmstepd, tasks, clients)."""
        if not self.dir:
            return []
        return _descendants(pids_touching(self.dir))

    def logs_tail(self, lines=30):
        out = []
        if not self.dir:
            return ""
        for path in sorted(glob.glob(self.path("log", "*"))):
            try:
                with open(path, "rb") as f:
                    text = f.read().decode(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            out.append("==> %s <==\n%s" % (os.path.basename(path), "\n".join(text)))
        return "\n".join(out)

    def close(self):
        """Cancel every job, stop the daemons, kill whatever is left of the cluster, remove
        its directory. Safe to call twice and after a failed start."""
        if not self.dir:
            return
        try:
            if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
                try:
                    self.run(["scancel", "--full", "-u", "root"], timeout=10)
                except (subprocess.TimeoutExpired, OSError):
                    pass
            # Daemons first (politely, then not), then whatever else is left.
            daemons = [p for p in self.procs.values() if p.poll() is None]
            for p in daemons:
                try:
                    p.terminate()
                except OSError:
                    pass
            deadline = time.monotonic() + 5
            for p in daemons:
                try:
                    p.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
            for _ in range(5):
                pids = self.all_pids()
                if not pids:
                    break
                _kill_all(pids)
                _wait_gone(pids, 10)
        finally:
            self.procs.clear()
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


# --- a cluster that outlives the command that starts it (scripts/local-slurm.sh) ------------

def serve(state_dir, nodes, cpus, gpus):
    """Start a cluster under state_dir, write state_dir/env (the shell lines that reach it)
    once it is up, and keep it until SIGTERM or SIGINT; then close it and remove env."""
    os.makedirs(state_dir, exist_ok=True)
    env_file = os.path.join(state_dir, "env")
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    signal.signal(signal.SIGINT, lambda *a: stop.append(1))
    cluster = SlurmCluster(nodes=nodes, gpus_per_node=gpus, cpus_per_node=cpus,
                           workdir=state_dir)
    try:
        cluster.start()
        tmp = env_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("export SLURM_CONF='%s'\nLOCAL_SLURM_NODES=%d\nLOCAL_SLURM_PID=%d\n"
                    % (cluster.conf, nodes, os.getpid()))
        os.rename(tmp, env_file)
        print("local Slurm cluster up: %s, SLURM_CONF=%s"
              % (" ".join(cluster.node_names), cluster.conf), flush=True)
        while not stop:
            time.sleep(0.5)  # a signal's handler runs in between
    finally:
        try:
            os.unlink(env_file)
        except OSError:
            pass
        cluster.close()


def _main(argv):
    import argparse
    p = argparse.ArgumentParser(
        description="A Slurm cluster on this machine (see scripts/local-slurm.sh).")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="start a cluster and keep it until SIGTERM")
    s.add_argument("--dir", required=True, help="where the cluster lives")
    s.add_argument("--nodes", type=int, default=2)
    s.add_argument("--cpus", type=int, default=2, help="CPUs per node")
    s.add_argument("--gpus", type=int, default=0, help="Slurm GPUs (gres) per node")
    c = sub.add_parser("clean", help="remove what a dead `serve` left under DIR")
    c.add_argument("--dir", required=True)
    a = p.parse_args(argv)
    if a.cmd == "serve":
        serve(a.dir, a.nodes, a.cpus, a.gpus)
    else:
        clean_stale(a.dir)
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(_main(sys.argv[1:]))
