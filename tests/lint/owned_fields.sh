#!/bin/sh
# Each part of the run is used only through its owner's functions: no file
# reaches into another part's fields (DESIGN.md, "Inside the orchestrator").
# A trial's feature parts (trial_t.demand, .elastic, .fluid, .fusion, .deadline) and the
# run's parts below may be touched only in the files that own them; every
# other file under src/ goes through the owner's functions.
# usage: owned_fields.sh SOURCE_DIR
src=${1:?usage: owned_fields.sh SOURCE_DIR}
[ -d "$src/src/run" ] || { echo "owned_fields: $src/src/run is missing" >&2; exit 2; }
# part (what follows `->` or `.`)  owners (files of src/run), one rule a line
# (an extended regex of what follows `->` or a name's `.`)
rules='demand\.[a-z_]     placement.c profiling.c
elastic\.[a-z_]    elastic.c
fluid\.[a-z_]      groups.c
fusion\.[a-z_]     fuse.c
deadline\.[a-z_]   deadline.c
clock\.[a-z_]      clock.c
pl\.[a-z_]         placement.c profiling.c inventory.c
agents\.links\b    agents.c
trials\.by_id\b    trial_state.c'
found=$(mktemp) || exit 2
trap 'rm -f "$found"' EXIT
files=$(find "$src/src" -name '*.[ch]' | sort)
[ -n "$files" ] || { echo "owned_fields: no sources under $src/src" >&2; exit 2; }
printf "%s\n" "$rules" | while read -r part owners; do
    # an access: the part after -> or after a name's `.`
    re="(->|[]A-Za-z0-9_)]\\.)$part"
    skip=$(for o in $owners; do printf '|/src/run/%s:' "$o"; done)
    # comments are not accesses: drop /* ... */ on a line, a comment opened at its end, and comment-only lines
    hits=$(grep -nHE "$re" $files | sed -e 's#/\*.*\*/##g' -e 's#/\*.*##' | grep -E "^[^:]+:[0-9]+:.*$re" |
        grep -vE ":[0-9]+: *(\*|/\*)" | grep -vE "^[^:]*(${skip#|})")
    if [ -n "$hits" ]; then
        printf '%s\n' "$hits" | sed "s#^$src/##"
        echo "owned_fields: the lines above reach into \`$part\` (owned by $owners);" \
             "go through the owner's functions" >&2
        echo x >>"$found"
    fi
done
[ -s "$found" ] && exit 1
# the pattern must find what it looks for, or this check proves nothing
printf 't->elastic.gpus_want = 1;\nr->pl.cluster.nodes[0];\nx = (*t).fluid.share;\n' |
    grep -cE "(->|[]A-Za-z0-9_)]\\.)(elastic|pl\\.cluster|fluid)\\.[A-Za-z_]" | grep -qx 3 ||
    { echo "owned_fields: pattern broken" >&2; exit 2; }
echo "owned_fields: no file reaches into a part another file owns"
