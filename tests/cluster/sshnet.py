"""Real sshd hosts on this one machine, each in its own network namespace, for tests
(Python 3 standard library only).

    with SshHosts(n=2) as hosts:
        subprocess.run(hosts.ssh_args("host1") + ["echo", "ok"])

Per host it claims a slot K (1..250) and makes:

  * a network namespace tpsshK, with lo up and one end of a veth pair (tpsshK-n,
    10.213.K.2/30); the other end (tpsshK-h, 10.213.K.1/30) stays in the root namespace;
  * its own ed25519 host key and sshd_config (Port 22 inside the namespace, keys only,
    root by key), and a real Debian sshd run as `ip netns exec tpsshK sshd -D -e -f CONF`.

The client side is an ssh_config (`hosts.config`) with BatchMode, strict host key checking
against a known_hosts written here, the harness's own user key, ServerAlive 1 s x 3, and
`Host hostI` -> `HostName 10.213.K.2`; `hosts.ssh_args("host1")` is the ssh command line.
Only these namespaces' addresses are ever used.

`cut(host)` takes the root side of the host's link down (its TCP connections stall and
ServerAlive ends them); `restore(host)` brings it back. Leaving the `with` block kills every
process in the namespaces (`ip netns pids`), deletes them (and so the veths) and removes
the temporary directory. Slots are claimed through owner files under /run/tp-sshnet, so
concurrent test runs do not collide, and a crashed run's namespaces (owner gone) are
cleaned by the next SshHosts.
"""

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time

PREFIX = "tpssh"
OWNERS = "/run/tp-sshnet"
SSHD = "/usr/sbin/sshd"
SUBNET = "10.213.%d.%d"
MAX_SLOT = 250
# `ip netns exec NS` bind-mounts each file of /etc/netns/NS/ over /etc/: a host's own passwd
# gives its root a home of its own (in the harness's directory), as on a separate machine.
ETC_NETNS = "/etc/netns"


class SshNetError(RuntimeError):
    pass


def _ip(*args, check=True, ns=None):
    cmd = (["ip", "netns", "exec", ns] if ns else []) + ["ip"] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise SshNetError("%s: %s" % (" ".join(cmd), r.stderr.strip()))
    return r


def _start_time(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
    except OSError:
        return None
    rest = s[s.rfind(")") + 2:].split()
    if rest[0] in ("Z", "X"):
        return None
    return rest[19]


def _me():
    return "%d %s\n" % (os.getpid(), _start_time(os.getpid()))


def namespaces():
    """Names of this harness's network namespaces (tpsshK), whoever made them."""
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    out = []
    for line in r.stdout.split("\n"):
        name = line.split(" ")[0]
        if name.startswith(PREFIX) and name[len(PREFIX):].isdigit():
            out.append(name)
    return out


def ns_pids(ns):
    r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30)
    return [int(p) for p in r.stdout.split() if p.isdigit()]


def _kill_ns_processes(ns, timeout=10):
    for _ in range(5):
        pids = [p for p in ns_pids(ns) if p != os.getpid()]
        if not pids:
            return
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(_start_time(p) for p in pids):
            time.sleep(0.05)


def destroy_slot(k):
    """Kill every process in namespace tpsshK, delete it and its veth, free the slot."""
    ns = "%s%d" % (PREFIX, k)
    if ns in namespaces():
        _kill_ns_processes(ns)
        _ip("netns", "del", ns, check=False)
    # The veth goes with the namespace; a half-made one may be left in the root namespace.
    if os.path.exists("/sys/class/net/%s-h" % ns):
        _ip("link", "del", "%s-h" % ns, check=False)
    shutil.rmtree(os.path.join(ETC_NETNS, ns), ignore_errors=True)
    try:
        os.unlink(os.path.join(OWNERS, ns))
    except OSError:
        pass


def _owner_alive(path):
    try:
        with open(path) as f:
            text = f.read()
        age = time.time() - os.stat(path).st_mtime
    except OSError:
        return False
    parts = text.split()
    if len(parts) != 2:
        return age < 60  # being written right now, or left half-written by a crash
    pid, start = int(parts[0]), parts[1]
    return _start_time(pid) == start


def clean_stale(tmpdir=None):
    """Destroy the slots (namespaces, veths, owner files) and the directories whose owner
    process is gone."""
    seen = set(namespaces())
    if os.path.isdir(OWNERS):
        seen |= {n for n in os.listdir(OWNERS) if n.startswith(PREFIX)}
    if os.path.isdir(ETC_NETNS):
        seen |= {n for n in os.listdir(ETC_NETNS) if n.startswith(PREFIX)}
    for name in os.listdir("/sys/class/net"):
        if name.startswith(PREFIX) and name.endswith("-h"):
            seen.add(name[:-2])
    for ns in sorted(seen):
        suffix = ns[len(PREFIX):]
        if not suffix.isdigit():
            continue
        if not _owner_alive(os.path.join(OWNERS, ns)):
            destroy_slot(int(suffix))
    for d in glob.glob(os.path.join(tmpdir or tempfile.gettempdir(), "tp-sshnet-*")):
        if not _owner_alive(os.path.join(d, "owner")):
            shutil.rmtree(d, ignore_errors=True)


def _create_in(directory, name, flags=0):
    """os.open(directory/name) for writing, making directory first: another run's close()
    may remove it (when empty) between the two, so try again."""
    for attempt in range(5):
        os.makedirs(directory, exist_ok=True)
        try:
            return os.open(os.path.join(directory, name),
                           os.O_WRONLY | os.O_CREAT | os.O_TRUNC | flags, 0o644)
        except FileNotFoundError:
            if attempt == 4:
                raise


def _remove_if_empty(directory):
    try:
        os.rmdir(directory)
    except OSError:
        pass  # not empty (another run uses it), or gone


def _claim_slot():
    live = set(namespaces())
    for k in range(1, MAX_SLOT + 1):
        ns = "%s%d" % (PREFIX, k)
        if ns in live or os.path.exists("/sys/class/net/%s-h" % ns):
            continue
        try:
            fd = _create_in(OWNERS, ns, os.O_EXCL)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as f:
            f.write(_me())
        return k
    raise SshNetError("no free %sK slot (1..%d)" % (PREFIX, MAX_SLOT))


class SshHosts:
    """n sshd hosts named host1..hostN (see the module's doc)."""

    @classmethod
    def for_class(cls, test_class, n=2):
        """Give a unittest.TestCase class `hosts`, n hosts started before its tests and
        closed after them (call from its setUpClass)."""
        test_class.hosts = cls(n=n)
        test_class.addClassCleanup(test_class.hosts.close)
        test_class.hosts.start()

    def __init__(self, n=2, workdir=None, start_timeout=20):
        self.names = ["host%d" % i for i in range(1, n + 1)]
        self._parent_dir = workdir
        self.start_timeout = start_timeout
        self.dir = None
        self.slots = {}    # host -> K
        self.procs = {}    # host -> Popen of its sshd
        self._log_files = []

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    @property
    def config(self):
        return self.path("ssh_config")

    @property
    def known_hosts(self):
        return self.path("known_hosts")

    @property
    def identity(self):
        return self.path("id_ed25519")

    def address(self, host):
        return SUBNET % (self.slots[host], 2)

    def namespace(self, host):
        return "%s%d" % (PREFIX, self.slots[host])

    def veth(self, host):
        """The root namespace's end of the host's link."""
        return "%s-h" % self.namespace(host)

    def ssh_args(self, host):
        return ["ssh", "-F", self.config, host]

    def run(self, host, args, **kw):
        """subprocess.run(ssh ... host args): output captured as bytes, a 60 s timeout,
        stdin from /dev/null, unless told otherwise."""
        kw.setdefault("timeout", 60)
        if "stdout" not in kw and "stderr" not in kw and "capture_output" not in kw:
            kw["capture_output"] = True
        if "input" not in kw and "stdin" not in kw:
            kw["stdin"] = subprocess.DEVNULL
        return subprocess.run(self.ssh_args(host) + list(args), **kw)

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
        self.dir = os.path.realpath(tempfile.mkdtemp(prefix="tp-sshnet-", dir=self._parent_dir))
        with open(self.path("owner"), "w") as f:
            f.write(_me())
        try:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privsep directory
            self._keygen(self.identity, "tunepack-test-client")
            with open(self.identity + ".pub") as f:
                client_pub = f.read()
            with open(self.path("authorized_keys"), "w") as f:
                f.write(client_pub)
            known = []
            for host in self.names:
                self.slots[host] = _claim_slot()
                self._make_link(host)
                key = self.path(host, "ssh_host_ed25519_key")
                os.makedirs(self.path(host))
                self._keygen(key, host)
                with open(key + ".pub") as f:
                    kind, blob = f.read().split()[:2]
                known.append("%s,%s %s %s" % (host, self.address(host), kind, blob))
                self._start_sshd(host, key)
            with open(self.known_hosts, "w") as f:
                f.write("\n".join(known) + "\n")
            self._write_client_config()
            for host in self.names:
                self._wait_up(host)
        except BaseException:
            logs = self.logs_tail()
            self.close()
            raise SshNetError("the sshd hosts did not come up:\n" + logs)

    @staticmethod
    def _keygen(path, comment):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                        "-f", path], check=True, capture_output=True, timeout=30)

    def _make_link(self, host):
        k, ns = self.slots[host], self.namespace(host)
        inner = "%s-n" % ns
        _ip("netns", "add", ns)
        _ip("link", "add", self.veth(host), "type", "veth", "peer", "name", inner)
        _ip("link", "set", inner, "netns", ns)
        _ip("addr", "add", SUBNET % (k, 1) + "/30", "dev", self.veth(host))
        _ip("link", "set", self.veth(host), "up")
        _ip("addr", "add", SUBNET % (k, 2) + "/30", "dev", inner, ns=ns)
        _ip("link", "set", inner, "up", ns=ns)
        _ip("link", "set", "lo", "up", ns=ns)

    def _write_passwd(self, host):
        """/etc/netns/NS/passwd: this machine's, but root's home is DIR/HOST/home, so that a
        session on the host runs no startup files of this machine's root (here ~/.bashrc
        takes seconds), and each host has a home of its own."""
        home = self.path(host, "home")
        os.makedirs(home)
        with open("/etc/passwd") as f:
            lines = f.read().split("\n")
        out = []
        for line in lines:
            fields = line.split(":")
            if len(fields) == 7 and fields[0] == "root":
                fields[5] = home
                line = ":".join(fields)
            out.append(line)
        etc = os.path.join(ETC_NETNS, self.namespace(host))
        for attempt in range(5):
            try:
                with os.fdopen(_create_in(etc, "passwd"), "w") as f:
                    f.write("\n".join(out))
                break
            except FileNotFoundError:  # ETC_NETNS itself removed by another run's close()
                if attempt == 4:
                    raise
        return home

    def home(self, host):
        """root's home directory on host (a directory of this machine)."""
        return self.path(host, "home")

    def _start_sshd(self, host, key):
        self._write_passwd(host)
        conf = self.path(host, "sshd_config")
        with open(conf, "w") as f:
            f.write("\n".join([
                "# Written by tests/cluster/sshnet.py; removed with the hosts.",
                "Port 22",
                "ListenAddress %s" % self.address(host),
                "HostKey %s" % key,
                "PidFile %s" % self.path(host, "sshd.pid"),
                "AuthorizedKeysFile %s" % self.path("authorized_keys"),
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PermitRootLogin prohibit-password",
                "UsePAM no",
                "StrictModes no",
                "PrintMotd no",
                "PrintLastLog no",
                "X11Forwarding no",
                "AllowTcpForwarding no",
                "AcceptEnv none",
                "LogLevel VERBOSE",
                "MaxStartups 100:30:200",
                "",
            ]))
        log = open(self.path(host, "sshd.log"), "ab")
        try:
            self.procs[host] = subprocess.Popen(
                ["ip", "netns", "exec", self.namespace(host), SSHD, "-D", "-e", "-f", conf],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        finally:
            log.close()

    def _write_client_config(self):
        lines = [
            "# Written by tests/cluster/sshnet.py; removed with the hosts.",
            "Host *",
            "  User root",
            "  BatchMode yes",
            "  StrictHostKeyChecking yes",
            "  UserKnownHostsFile %s" % self.known_hosts,
            "  GlobalKnownHostsFile /dev/null",
            "  UpdateHostKeys no",
            "  IdentityFile %s" % self.identity,
            "  IdentitiesOnly yes",
            "  ServerAliveInterval 1",
            "  ServerAliveCountMax 3",
            "  ConnectTimeout 10",
            "  ControlMaster no",
            "  ControlPath none",
            "  LogLevel ERROR",
        ]
        for host in self.names:
            lines += ["Host %s" % host, "  HostName %s" % self.address(host)]
        with open(self.config, "w") as f:
            f.write("\n".join(lines) + "\n")

    def _wait_up(self, host):
        deadline = time.monotonic() + self.start_timeout
        while True:
            p = self.procs[host]
            if p.poll() is not None:
                raise SshNetError("sshd of %s exited with %s" % (host, p.returncode))
            r = self.run(host, ["true"], timeout=15)
            if r.returncode == 0:
                return
            if time.monotonic() >= deadline:
                raise SshNetError("ssh %s true: %s" % (host, r.stderr.decode(errors="replace")))
            time.sleep(0.2)

    # --- failures ---

    def cut(self, host):
        """Take the host's link down: traffic to and from it stops, nothing is told."""
        _ip("link", "set", self.veth(host), "down")

    def restore(self, host):
        _ip("link", "set", self.veth(host), "up")

    def logs_tail(self, lines=20):
        out = []
        for host in self.names:
            try:
                with open(self.path(host, "sshd.log"), "rb") as f:
                    text = f.read().decode(errors="replace").splitlines()[-lines:]
            except (OSError, TypeError):
                continue
            out.append("==> %s sshd.log <==\n%s" % (host, "\n".join(text)))
        return "\n".join(out)

    def close(self):
        """Kill every process in the hosts' namespaces, delete them, free the slots and
        remove the directory. Safe to call twice and after a failed start."""
        try:
            for host in list(self.slots):
                destroy_slot(self.slots[host])
            for p in self.procs.values():
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
        finally:
            self.slots.clear()
            self.procs.clear()
            # Directories that the harness may have made, when no other run uses them.
            _remove_if_empty(OWNERS)
            _remove_if_empty(ETC_NETNS)
            if self.dir:
                shutil.rmtree(self.dir, ignore_errors=True)
                self.dir = None
