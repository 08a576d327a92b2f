#!/bin/sh
# fuzz.sh [SECONDS]: builds the libFuzzer harnesses of tests/fuzz with clang
# (ASan + UBSan, float-cast-overflow included) in build-fuzz/, and runs each
# for SECONDS (default 30) from its seed corpus in tests/fuzz/corpus/<name>.
# New inputs go to build-fuzz/corpus/<name> (kept between runs, so a longer
# run goes on from a shorter one), crashes to build-fuzz/crashes/. Prints one
# line per harness: executions, corpus size, crashes. Exits 1 if any harness
# crashed (the crashing input is named), 2 on a usage error.
# scripts/test.sh runs it for a short while; run it longer by hand, e.g.
#   sh scripts/fuzz.sh 600
set -eu
cd "$(dirname "$0")/.."
secs=${1:-30}
case $secs in
    '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;;
esac
jobs=$(nproc 2>/dev/null || echo 2)
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DTP_WERROR=ON -DTP_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$jobs" --target fuzzers >/dev/null
mkdir -p build-fuzz/crashes
status=0
printf '%-14s %12s %10s %8s\n' harness executions corpus crashes
for corpus in tests/fuzz/corpus/*/; do
    name=$(basename "$corpus")
    bin=build-fuzz/fuzz/fuzz_$name
    [ -x "$bin" ] || { echo "fuzz.sh: no harness $bin for $corpus" >&2; exit 1; }
    work=build-fuzz/corpus/$name
    mkdir -p "$work"
    log=build-fuzz/fuzz_$name.log
    rc=0
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$bin" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix=build-fuzz/crashes/"$name"- -print_final_stats=1 \
        "$work" "$corpus" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    size=$(find "$work" -type f | wc -l)
    crashes=0
    if [ "$rc" -ne 0 ]; then
        crashes=1
        status=1
    fi
    printf '%-14s %12s %10s %8s\n' "$name" "${execs:-?}" "$size" "$crashes"
    if [ "$rc" -ne 0 ]; then
        echo "fuzz.sh: $name failed (exit $rc); the end of $log:" >&2
        tail -n 40 "$log" >&2
    fi
done
exit $status
