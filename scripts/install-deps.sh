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
$SUDO $APT install -y -qq --no-install-recommends \
    build-essential cmake pkg-config \
    libyaml-dev libjansson-dev libsqlite3-dev libuv1-dev libglpk-dev \
    python3 procps file dpkg-dev groff-base python3-torch python3-sklearn >/dev/null
echo "install-deps: build tools, libyaml, jansson, sqlite3, libuv, GLPK, python3, torch and sklearn are installed"
