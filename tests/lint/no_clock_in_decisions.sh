#!/bin/sh
# Decisions are pure: no file under src/place or src/search, nor the verdict
# on an attempt's end (src/run/verdict.c) or a profile's reading of its
# samples (src/run/profile.c), reads a clock (callers that report how long a
# decision took measure it themselves); the verdict and the profile do no
# I/O either (no file, no store, no log).
# usage: no_clock_in_decisions.sh SOURCE_DIR
src=${1:?usage: no_clock_in_decisions.sh SOURCE_DIR}
pattern='tp__mono_s|tp__wall_s|\btime\(|clock_gettime|gettimeofday|\bclock\(|\btimespec_get\('
io='\bfopen\(|\bopen\(|\bread\(|\bwrite\(|\bf?printf\(|tp__store_|tp__journal_|tp__log\('
for path in "$src/src/place" "$src/src/search" "$src/src/run/verdict.c" "$src/src/run/profile.c"; do
    [ -e "$path" ] || { echo "no_clock_in_decisions: $path is missing" >&2; exit 2; }
done
if grep -rnE "$pattern" "$src/src/place" "$src/src/search" "$src/src/run/verdict.c" \
    "$src/src/run/profile.c"; then
    echo "no_clock_in_decisions: the lines above read a clock in a decision (src/place," \
         "src/search, src/run/verdict.c, src/run/profile.c); take the time as an argument or" \
         "measure it in the caller" >&2
    exit 1
fi
if grep -nE "$io" "$src/src/run/verdict.c" "$src/src/run/profile.c"; then
    echo "no_clock_in_decisions: the lines above do I/O in src/run/verdict.c or profile.c;" \
         "they are pure: their callers (outcome.c, profiling.c) read, write and log" >&2
    exit 1
fi
# the patterns must find what they look for, or this check proves nothing
printf 'double t0 = tp__mono_s();\nclock_gettime(CLOCK_MONOTONIC, &ts);\n' |
    grep -cE "$pattern" | grep -qx 2 || { echo "no_clock_in_decisions: pattern broken" >&2; exit 2; }
printf 'FILE *f = fopen(p, "r");\ntp__log(TP_LOG_WARN, "x");\nsnprintf(b, n, "x");\n' |
    grep -cE "$io" | grep -qx 2 || { echo "no_clock_in_decisions: I/O pattern broken" >&2; exit 2; }
echo "no_clock_in_decisions: no clock read in the decisions, no I/O in the verdict or profile"
