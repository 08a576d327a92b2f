#!/bin/sh
# Proves the Debian package on a fresh Debian 12: copies a minimal bookworm
# root (made by `debootstrap --variant=minbase`), installs the .deb there with
# apt-get (which must resolve every declared dependency), then, with an empty
# environment, runs the installed example experiment and `best`, a simulation
# that reads the installed workload, a trial that imports the installed
# Python helper from /usr/bin/python3 with no PYTHONPATH, and that the man
# pages (sections 1 and 5) and /usr/share/doc/tunepack/ (README, docs/,
# examples/) are there.
#
#   sudo sh scripts/check-deb-in-chroot.sh CHROOT_BASE
#
# CHROOT_BASE is never modified. The copy (CHROOT_COPY, default
# /srv/chroot-deb) is unmounted and removed on exit. The package is built in
# BUILD_DIR (default build) when it has none. Not part of CI: it takes minutes
# and needs root and network access to a Debian mirror.
set -eu
base=${1:?usage: check-deb-in-chroot.sh CHROOT_BASE}
copy=${CHROOT_COPY:-/srv/chroot-deb}
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
[ "$(id -u)" = 0 ] || { echo "check-deb: run as root (chroot, mount)" >&2; exit 1; }
[ -x "$base/usr/bin/apt-get" ] || { echo "check-deb: $base is not a Debian root" >&2; exit 1; }
[ ! -e "$copy" ] || { echo "check-deb: $copy exists; remove it or set CHROOT_COPY" >&2; exit 1; }

# The package, built when missing.
deb=$(ls "$build"/tunepack_*.deb 2>/dev/null | head -n 1 || true)
if [ -z "$deb" ]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" -j"$(nproc 2>/dev/null || echo 2)"
    (cd "$build" && cpack -G DEB >/dev/null)
    deb=$(ls "$build"/tunepack_*.deb | head -n 1)
fi
echo "check-deb: package $deb"

cleanup() {
    umount "$copy/proc" 2>/dev/null || umount -l "$copy/proc" 2>/dev/null || true
    umount "$copy/dev" 2>/dev/null || umount -l "$copy/dev" 2>/dev/null || true
    if mountpoint -q "$copy/proc" 2>/dev/null || mountpoint -q "$copy/dev" 2>/dev/null; then
        echo "check-deb: $copy still has mounts; not removing it" >&2
    else
        rm -rf "$copy"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cp -a "$base" "$copy"
mount --bind /dev "$copy/dev"
mount -t proc proc "$copy/proc"
cp /etc/resolv.conf "$copy/etc/resolv.conf" 2>/dev/null || true

# The mirror: this host's own apt source (read now, never written into the
# repository); else the copy keeps what debootstrap wrote.
mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1 || true)
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
    mirror=$(sed -n 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\).*/\2/p' /etc/apt/sources.list | head -n 1)
fi
if [ -n "$mirror" ]; then
    echo "deb $mirror bookworm main" >"$copy/etc/apt/sources.list"
    rm -f "$copy"/etc/apt/sources.list.d/*.sources "$copy"/etc/apt/sources.list.d/*.list
fi

cp "$deb" "$copy/tmp/"
cat >"$copy/tmp/py-helper.yaml" <<'YAML'
name: py-helper
command: [/usr/bin/python3, -c, "import tunepack_report as t, os; t.report(step=1, score=float(os.environ['TUNEPACK_PARAM_X']) * 2); print('helper from', t.__file__)"]
metric: {name: score, mode: max}
space:
  x: {choice: [1, 2, 3]}
search: {algorithm: grid, trials: 1}
concurrency: 1
YAML
cat >"$copy/tmp/check.sh" <<'CHECK'
set -eu
cd /tmp
echo "== apt-get install ./$(ls tunepack_*.deb)"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "./$(ls tunepack_*.deb)" >/tmp/apt.log 2>&1 || { cat /tmp/apt.log; exit 1; }
grep -E '^(Setting up|Unpacking) ' /tmp/apt.log | sed 's/^/  /'
dpkg -s tunepack | grep -E '^(Status|Version|Depends):'
echo "== env: $(env | tr '\n' ' ')"
echo "== which tunepack: $(command -v tunepack); PYTHONPATH=${PYTHONPATH:-unset}"
echo "== tunepack run /usr/share/tunepack/examples/mlp/experiment.yaml --dir /tmp/r"
tunepack run /usr/share/tunepack/examples/mlp/experiment.yaml --dir /tmp/r >/tmp/run.log 2>&1 || { tail -20 /tmp/run.log; exit 1; }
tail -3 /tmp/run.log
echo "== tunepack best /tmp/r"
tunepack best /tmp/r
echo "== tunepack simulate --space SP4 --cluster homog_16 --policy wfd"
tunepack simulate --space SP4 --cluster homog_16 --policy wfd
echo "== a trial that imports the installed helper (/usr/bin/python3, no PYTHONPATH)"
tunepack run /tmp/py-helper.yaml --dir /tmp/py --plain >/tmp/py.log 2>&1 || { tail -20 /tmp/py.log; exit 1; }
tunepack best /tmp/py --json
grep -h 'helper from' /tmp/py/trials/*/stdout.log | sort -u
/usr/bin/python3 -c 'import tunepack_report; print("import tunepack_report:", tunepack_report.__file__)'
echo "== man, completion and documentation"
ls /usr/share/man/man1/tunepack*.1 | wc -l
ls /usr/share/man/man5/tunepack-experiment.5
ls /usr/share/bash-completion/completions/tunepack
for f in README.md docs/exit-codes.md docs/img/dashboard-trials.png examples/pytorch/train.py \
         examples/fuse/train.py examples/mup/train.py; do
    [ -f "/usr/share/doc/tunepack/$f" ] || { echo "check-deb: no /usr/share/doc/tunepack/$f" >&2; exit 1; }
done
echo "/usr/share/doc/tunepack: $(find /usr/share/doc/tunepack -type f | wc -l) files"
echo "check-deb: all passed"
CHECK
env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    chroot "$copy" /bin/sh /tmp/check.sh
