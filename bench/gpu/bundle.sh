#!/bin/sh
# Make .gpu/: tunepack and the libraries it links (from this Debian machine), for a GPU machine
# that has its own distribution and none of Debian's packages (bench/gpu/checks.sh uses it).
#
#   sh bench/gpu/bundle.sh [BUILD_DIR]      (default build; needs patchelf)
#
# .gpu/bin/tunepack carries an RPATH of $ORIGIN/../lib, which (unlike RUNPATH and unlike
# LD_LIBRARY_PATH) also finds its libraries' own libraries and is not inherited by the trials
# it starts. The C library, libm and the dynamic loader stay the host's: the binary and these
# libraries ask for glibc 2.34 at most (printed below). .gpu/ is 11 MiB or so; it is not part
# of the repository (this script adds /.gpu/ to git's info/exclude) and travels as a carried path.
set -eu
build=${1:-build}
[ -x "$build/tunepack" ] || { echo "bundle.sh: no $build/tunepack: build first" >&2; exit 2; }
command -v patchelf >/dev/null || { echo "bundle.sh: needs patchelf (apt-get install patchelf)" >&2; exit 2; }
rm -rf .gpu
mkdir -p .gpu/bin .gpu/lib
git rev-parse --short HEAD > .gpu/commit 2>/dev/null || true  # truth.sh names the commit
cp "$build/tunepack" .gpu/bin/tunepack
ldd "$build/tunepack" | awk '/=> \// { print $3 }' | while read -r lib; do
    case $(basename "$lib") in
        libc.so.*|libm.so.*|ld-linux*) ;;
        *) cp -L "$lib" .gpu/lib/ ;;
    esac
done
# scikit-learn's digits for bench/fuse/throughput.py where the GPU machine's python has no
# scikit-learn: Debian's copy of the data and a load_digits that reads it (checks.sh puts
# .gpu/py on PYTHONPATH only when `import sklearn` fails).
digits=$(/usr/bin/python3 -c 'import os, sklearn.datasets as d; print(os.path.join(os.path.dirname(d.__file__), "data", "digits.csv.gz"))' 2>/dev/null || true)
if [ -n "$digits" ] && [ -f "$digits" ]; then
    mkdir -p .gpu/py/sklearn/datasets
    cp "$digits" .gpu/py/sklearn/datasets/digits.csv.gz
    : > .gpu/py/sklearn/__init__.py
    cat > .gpu/py/sklearn/datasets/__init__.py <<'PY'
"""load_digits alone, for a machine without scikit-learn (written by bench/gpu/bundle.sh)."""
import gzip
import os
from types import SimpleNamespace


def load_digits():
    with gzip.open(os.path.join(os.path.dirname(__file__), "digits.csv.gz"), "rt") as f:
        rows = [[float(v) for v in line.split(",")] for line in f if line.strip()]
    return SimpleNamespace(data=[r[:-1] for r in rows], target=[int(r[-1]) for r in rows])
PY
fi
# shellcheck disable=SC2016 # $ORIGIN is for the loader, not the shell
patchelf --force-rpath --set-rpath '$ORIGIN/../lib' .gpu/bin/tunepack
newest=$(for f in .gpu/bin/tunepack .gpu/lib/*; do objdump -T "$f" | grep -o 'GLIBC_[0-9.]*'; done |
         sort -Vu | tail -1)
exclude=$(git rev-parse --git-path info/exclude 2>/dev/null || true)
if [ -n "$exclude" ] && ! grep -qx '/.gpu/' "$exclude" 2>/dev/null; then
    mkdir -p "$(dirname "$exclude")" && echo /.gpu/ >> "$exclude"
fi
echo "bundle.sh: .gpu/ $(du -sh .gpu | cut -f1), $(find .gpu/lib -type f | wc -l) libraries, needs $newest"
