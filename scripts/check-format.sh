#!/bin/sh
# check-format.sh [ROOT]: every C file of the tree at ROOT (default: the checkout
# holding this script) is laid out as the committed .clang-format says. Prints
# "FAIL file" per file that is not (with clang-format's first complaint) and
# exits 1; exits 0 with a count when all are. Run by CTest as lint.format.
# To fix: clang-format -i FILE (or every file: see the loop below).
set -u
root=${1:-$(dirname "$0")/..}
cd "$root" || exit 2
command -v clang-format >/dev/null || {
    echo "check-format: clang-format is missing (scripts/install-deps.sh installs it)"
    exit 2
}
bad=0 n=0
for f in $(find src include tests bench examples -name '*.[ch]' | sort); do
    n=$((n + 1))
    out=$(clang-format --dry-run --Werror "$f" 2>&1) || {
        echo "FAIL $f: $(echo "$out" | head -1)"
        bad=$((bad + 1))
    }
done
[ "$bad" = 0 ] || { echo "check-format: $bad of $n files differ from .clang-format"; exit 1; }
echo "check-format: $n files laid out as .clang-format says"
