#!/bin/sh
# Installs everything tunepack needs to build, run its examples and pass its
# tests, from Debian 12's own packages. Run as root (or through sudo).
set -eu
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
# Wait for another apt (an unattended upgrade, say) instead of failing at once.
APT="apt-get -o DPkg::Lock::Timeout=300"
$SUDO $APT update -qq
# libmicrohttpd: the dashboard's HTTP server. chromium (and a font for its
# screenshots): the real browser the dashboard's tests drive, headless.
# slurm-wlm, munge, openssh-server: the real Slurm cluster and sshd hosts that
# tests/cluster/ starts for the tests. They run on their own ports, sockets and
# configs, so Debian's packaged services, started or not, neither help nor hinder.
# tmux: the real terminal the live view's test reads back.
# python3-optuna: tests/python/test_asha_rules.py and bench/search (Optuna on the same objectives);
# python3-cmaes: Optuna's CmaEsSampler, which bench/search/field.py runs.
$SUDO $APT install -y -qq --no-install-recommends \
    build-essential cmake pkg-config clang clang-format libclang-rt-14-dev \
    libyaml-dev libjansson-dev libsqlite3-dev libuv1-dev libglpk-dev libmicrohttpd-dev liblapack-dev \
    python3 procps file dpkg-dev groff-base python3-torch python3-sklearn python3-optuna python3-cmaes \
    slurm-wlm munge openssh-server openssh-client iproute2 chromium fonts-dejavu-core tmux >/dev/null
echo "install-deps: build tools, clang with libFuzzer, clang-format, libyaml, jansson, sqlite3, libuv, GLPK, libmicrohttpd, LAPACK, python3, torch, sklearn, Optuna (with cmaes), Slurm, munge, OpenSSH, iproute2, Chromium and tmux are installed"
