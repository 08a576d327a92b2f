#!/bin/sh
# Installs what is needed, builds with -Werror, and runs every test twice:
# once in a plain build and once under AddressSanitizer + UBSan; then runs
# each libFuzzer harness of tests/fuzz for a bounded time (clang's ASan +
# UBSan, float-cast-overflow included; scripts/fuzz.sh).
set -eu
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh

# The repository is self-contained: no tracked file but prose (*.md) may reach
# outside it for data.
if command -v git >/dev/null 2>&1 && git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    outside=$(git ls-files -z -- ':!*.md' | xargs -0 -r grep -ns -e '\.\./shared' -- || true)
    if [ -n "$outside" ]; then
        echo "test.sh: these tracked files read data from outside the repository:" >&2
        echo "$outside" >&2
        exit 1
    fi
fi

jobs=$(nproc 2>/dev/null || echo 2)

cmake -S . -B build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTP_WERROR=ON >/dev/null
cmake --build build-test -j"$jobs"
(cd build-test && ctest --output-on-failure -j"$jobs")

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTP_WERROR=ON -DTP_SANITIZE=ON >/dev/null
cmake --build build-asan -j"$jobs"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j"$jobs")

# TP_FUZZ_SECONDS per harness (4 harnesses; the clang build takes about a
# minute more). Longer runs: sh scripts/fuzz.sh 600.
sh scripts/fuzz.sh "${TP_FUZZ_SECONDS:-30}"
