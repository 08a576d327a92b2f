#!/bin/sh
# Decisions are pure: no file under src/place or src/search reads a clock
# (callers that report how long a decision took measure it themselves).
# usage: no_clock_in_decisions.sh SOURCE_DIR
src=${1:?usage: no_clock_in_decisions.sh SOURCE_DIR}
pattern='tp__mono_s|tp__wall_s|\btime\(|clock_gettime|gettimeofday|\bclock\(|\btimespec_get\('
for dir in "$src/src/place" "$src/src/search"; do
    [ -d "$dir" ] || { echo "no_clock_in_decisions: $dir is missing" >&2; exit 2; }
done
if grep -rnE "$pattern" "$src/src/place" "$src/src/search"; then
    echo "no_clock_in_decisions: the lines above read a clock in src/place or src/search;" \
         "take the time as an argument or measure it in the caller" >&2
    exit 1
fi
# the pattern must find what it looks for, or this check proves nothing
printf 'double t0 = tp__mono_s();\nclock_gettime(CLOCK_MONOTONIC, &ts);\n' |
    grep -cE "$pattern" | grep -qx 2 || { echo "no_clock_in_decisions: pattern broken" >&2; exit 2; }
echo "no_clock_in_decisions: no clock read in src/place or src/search"
