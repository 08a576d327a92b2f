#!/bin/sh
# shellcheck disable=SC2317 # the check_*/why_* functions are called by name
# check-house-rules.sh [ROOT]: checks the tree at ROOT (default: the checkout
# holding this script) against house rules that a compiler does not see.
# Prints "ok   NAME" per rule kept, and "FAIL NAME: why" followed by one
# "  file:line: text" per offending line per rule broken; exits 1 if any
# rule is broken, 2 on a usage error. POSIX sh and grep only. Run by CTest
# as lint.house_rules.
#
# The checks are a list: CHECKS names them, and each NAME is a function
# check_NAME that prints the offending lines (file:line: text, paths
# relative to ROOT) and nothing else, plus a line in the why_NAME function
# giving the rule in words. To add a rule, write both and add NAME to CHECKS.
#
# The checks are line-based heuristics, kept simple on purpose:
#
#   timed_unit_tests   Unit tests prove behaviour; speed and timing belong
#                      in bench/ (programs that print figures). Flags a line
#                      of tests/unit/*.c holding TP_CHECK (any TP_CHECK_*
#                      too) and a clock reading: now_s(, tp__mono_s(,
#                      tp__wall_s(, clock_gettime, or a word dt, took or
#                      elapsed (the usual names of a duration). A bounded
#                      wait in a helper is fine: it has no TP_CHECK. A check
#                      spread over several lines, or a duration under
#                      another name, is not seen.
#   fprintf_warnings   Code under src/ warns through the logger (tp__log),
#                      not by printing: flags a line of src/ holding
#                      fprintf(stderr and "warn" (any case).
set -u

if [ $# -gt 1 ]; then
    echo "usage: $0 [ROOT]" >&2
    exit 2
fi
root=${1:-"$(dirname "$0")/.."}
cd "$root" 2>/dev/null || {
    echo "$0: cannot enter $root" >&2
    exit 2
}

CHECKS="timed_unit_tests fprintf_warnings"

# grep -n -E over files (matching each line's text, never its file name),
# always naming the file (the extra /dev/null makes grep name it even for a
# single file), as "file:line:text". OPTS: more grep options, e.g. -i.
grep_files() { # OPTS PATTERN FILE...
    opts=$1
    pattern=$2
    shift 2
    # shellcheck disable=SC2086 # OPTS is a list of options
    grep -n -E $opts -- "$pattern" "$@" /dev/null 2>/dev/null
}

# "file:line:text" -> "file:line: text"
tidy() {
    sed 's/^\([^:]*:[0-9]*\):[[:space:]]*/\1: /'
}

check_timed_unit_tests() {
    set -- tests/unit/*.c
    [ -e "$1" ] || return 0
    clock='now_s\(|tp__mono_s\(|tp__wall_s\(|clock_gettime|(^|[^A-Za-z0-9_])(dt|took|elapsed)([^A-Za-z0-9_]|$)'
    grep_files '' "TP_CHECK.*($clock)|($clock).*TP_CHECK" "$@" | tidy
}
why_timed_unit_tests() {
    echo "a unit test asserts a clock reading; assert the outcome, put figures in bench/"
}

check_fprintf_warnings() {
    [ -d src ] || return 0
    # shellcheck disable=SC2046 # file names under src/ have no blanks
    grep_files -i 'fprintf\(stderr.*warn|warn.*fprintf\(stderr' \
        $(find src -type f \( -name '*.c' -o -name '*.h' \) | sort) | tidy
}
why_fprintf_warnings() {
    echo "code under src/ prints a warning with fprintf; use the logger (tp__log)"
}

status=0
for name in $CHECKS; do
    found=$("check_$name")
    if [ -n "$found" ]; then
        echo "FAIL $name: $("why_$name")"
        printf '%s\n' "$found" | sed 's/^/  /'
        status=1
    else
        echo "ok   $name"
    fi
done
exit $status
