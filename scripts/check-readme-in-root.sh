#!/bin/sh
# Proves the README's first two commands on a fresh Debian 12: copies a minimal
# bookworm root (made by `debootstrap --variant=minbase bookworm BASE`), clones
# this repository's HEAD into it as /root/tunepack, and runs there, as root with
# an empty environment, the README's first fenced code block (install, build,
# the example experiment) and then its second (install, build, every test).
#
#   sudo sh scripts/check-readme-in-root.sh BASE [LOG]
#
# It enters the copy with pivot_root in a new mount namespace, not chroot(2):
# the kernel refuses some namespaces to a chrooted process, and the SSH and
# Slurm harnesses make network namespaces. /proc, /sys (with the host's
# /sys/fs/cgroup, which slurmd needs), /dev and a fresh /run are mounted as a
# booted machine has them. BASE is never modified; the copy (ROOT_COPY, default
# /srv/readme-root) is removed on exit. The output goes to LOG (default
# /tmp/check-readme.log); the exit status is the second command's. Not part of
# CI: it takes about half an hour and needs network access to a Debian mirror.
# FIRST_ONLY=1 runs the first command alone (install, build, the example: about
# ten minutes) and exits with its status.
set -eu
base=${1:?usage: check-readme-in-root.sh BASE [LOG]}
log=${2:-/tmp/check-readme.log}
copy=${ROOT_COPY:-/srv/readme-root}
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "check-readme: run as root (mounts, pivot_root)" >&2; exit 1; }
[ -x "$base/usr/bin/apt-get" ] || { echo "check-readme: $base is not a Debian root" >&2; exit 1; }
[ ! -e "$copy" ] || { echo "check-readme: $copy exists; remove it or set ROOT_COPY" >&2; exit 1; }
trap 'rm -rf "$copy"' EXIT

# The README's first two fenced blocks, as files to run.
awk -v dir="$copy.cmds" 'BEGIN { system("mkdir -p " dir) }
    /^```/ { if (inb) { inb = 0; n++ } else if (n < 2) inb = 1; next }
    inb { print > (dir "/cmd" (n + 1) ".sh") }' README.md
cp -a "$base" "$copy"
mkdir -p "$copy/root"
git clone -q "$PWD" "$copy/root/tunepack"
git -C "$copy/root/tunepack" checkout -q "$(git rev-parse HEAD)"
mv "$copy.cmds"/cmd1.sh "$copy.cmds"/cmd2.sh "$copy/root/"
rmdir "$copy.cmds"
cp /etc/resolv.conf "$copy/etc/resolv.conf"

# shellcheck disable=SC2016 # expanded by the inner shell
unshare --mount --propagation private --fork -- sh -c '
set -e
R=$1
mount --bind "$R" "$R"
mount -t proc proc "$R/proc"
mount -t sysfs sysfs "$R/sys"
mount --rbind /sys/fs/cgroup "$R/sys/fs/cgroup"
mount --rbind /dev "$R/dev"
mount -t tmpfs tmpfs "$R/run"
mkdir -p "$R/.oldroot"
cd "$R"
pivot_root . .oldroot
umount -l /.oldroot
cd /root/tunepack
exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 FIRST_ONLY="$2" sh -c "echo \"=== README command 1\"; sh /root/cmd1.sh; rc=\$?;
                        echo \"=== command 1: exit \$rc\"; [ \"\$FIRST_ONLY\" = 1 ] && exit \$rc;
                        echo \"=== README command 2\"; sh /root/cmd2.sh; rc=\$?;
                        echo \"=== command 2: exit \$rc\"; exit \$rc"
' check-readme "$copy" "${FIRST_ONLY:-0}" > "$log" 2>&1
