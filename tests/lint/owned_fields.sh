#!/bin/sh
# Each part of the run is used only through its owner's functions: no file
# reaches into another part's fields (DESIGN.md, "Inside the orchestrator").
# A trial's feature parts (trial_t.demand, .elastic, .fluid, .fusion, .deadline), the
# run's parts below and a fused process's fields may be touched only in the
# files that own them; a trial's shared sub-structs (job, current, ranks,
# pace) may be read anywhere but written only by their writers. Every other
# file under src/ goes through the owner's functions.
# usage: owned_fields.sh SOURCE_DIR
src=${1:?usage: owned_fields.sh SOURCE_DIR}
[ -d "$src/src/run" ] || { echo "owned_fields: $src/src/run is missing" >&2; exit 2; }
# One rule a line: kind, part, owners (files of src/run).
#   use    part: an extended regex of what follows `->` or a name's `.`;
#          any access outside the owners is one
#   write  the same, but only a write is one: an assignment (= += ...),
#          ++ or --, its address taken, or a call that writes into it
#          (snprintf, memcpy, free, json_decref, ...)
#   fused  part: a tp_fused_t field, as `f->` or `fused->` spells it in
#          src/run (the only files that see the type); any access
rules='use   demand\.[a-z_]     placement.c profiling.c
use   elastic\.[a-z_]    elastic.c
use   fluid\.[a-z_]      groups.c
use   fusion\.[a-z_]     fuse.c
use   deadline\.[a-z_]   deadline.c
use   clock\.[a-z_]      clock.c
use   pl\.[a-z_]         placement.c profiling.c inventory.c
use   agents\.links\b    agents.c
use   agents\.n\b        agents.c
use   trials\.by_id\b    trial_state.c
use   trials\.n\b        trial_state.c
use   trials\.(count|nheap|heap)\b trial_state.c
use   journal\.broken\b journal.c
use   agents\.shutting_down\b agents.c
use   journal\.store\b   journal.c
use   el\.[a-z_]         elastic.c
use   dl\.[a-z_]         reallocation.c
use   view\.[a-z_]       view.c
fused (proc|attempt|n|ids|base|last_step|last_at|running|stop_sent|busy|shape|started)\b fuse.c
write job\.[a-z_]        orchestrator.c trial_state.c
write current\.[a-z_]    orchestrator.c messages.c outcome.c
write ranks\.[a-z_]      orchestrator.c messages.c outcome.c trial_state.c
write pace\.[a-z_]       outcome.c trial_state.c'
# an lvalue's tail (a field's indexes) and what makes it written
idx='([[][^]]*[]])*'
assign="[[:space:]]*(([-+*/%|&^]|<<|>>)?=([^=]|\$)|\\+\\+|--)"
writers='snprintf|strcpy|strncpy|strcat|memcpy|memmove|memset|free|json_decref|tp__[a-z_]*(cpy|free|reset|close)'
lvalue='[A-Za-z_][]A-Za-z0-9_>.[-]*'
found=$(mktemp) || exit 2
trap 'rm -f "$found"' EXIT
files=$(find "$src/src" -name '*.[ch]' | sort)
[ -n "$files" ] || { echo "owned_fields: no sources under $src/src" >&2; exit 2; }
runfiles=$(find "$src/src/run" -name '*.[ch]' | sort)
printf "%s\n" "$rules" | while read -r kind part owners; do
    # an access: the part after -> or after a name's `.`
    at="(->|[]A-Za-z0-9_)]\\.)$part"
    in=$files
    case $kind in
    use) re=$at ;;
    write) re="$at[A-Za-z0-9_]*$idx$assign|(\\+\\+|--)[[:space:]]*$lvalue$at|(^|[^&])&$lvalue$at|\\b($writers)[[:space:]]*\\([[:space:]]*$lvalue$at" ;;
    fused) re="\\b(f|fused)->$part" in=$runfiles ;;
    *) echo "owned_fields: unknown rule kind $kind" >&2; echo x >>"$found"; continue ;;
    esac
    skip=$(for o in $owners; do printf '|/src/run/%s:' "$o"; done)
    # comments are not accesses: drop /* ... */ on a line, a comment opened at its end, and comment-only lines
    hits=$(grep -nHE "$re" $in | sed -e 's#/\*.*\*/##g' -e 's#/\*.*##' | grep -E "^[^:]+:[0-9]+:.*($re)" |
        grep -vE ":[0-9]+: *(\*|/\*)" | grep -vE "^[^:]*(${skip#|})")
    if [ -n "$hits" ]; then
        printf '%s\n' "$hits" | sed "s#^$src/##"
        if [ "$kind" = write ]; then what="write \`$part\` (written only by $owners)"; else
            what="reach into \`$part\` (owned by $owners)"; fi
        echo "owned_fields: the lines above $what; go through the owner's functions" >&2
        echo x >>"$found"
    fi
done
[ -s "$found" ] && exit 1
# the patterns must find what they look for, or this check proves nothing
printf 't->elastic.gpus_want = 1;\nr->pl.cluster.nodes[0];\nx = (*t).fluid.share;\n' |
    grep -cE "(->|[]A-Za-z0-9_)]\\.)(elastic|pl\\.cluster|fluid)\\.[A-Za-z_]" | grep -qx 3 ||
    { echo "owned_fields: pattern broken" >&2; exit 2; }
at='(->|[]A-Za-z0-9_)]\.)job\.[a-z_]'
w="$at[A-Za-z0-9_]*$idx$assign|(\\+\\+|--)[[:space:]]*$lvalue$at|(^|[^&])&$lvalue$at|\\b($writers)[[:space:]]*\\([[:space:]]*$lvalue$at"
printf 't->job.rung = 1;\nt->job.x[2] += 1;\n--a->t->job.n;\nsnprintf(t->job.why, 9, "");\nf(&t->job.why);\n' |
    grep -cE "$w" | grep -qx 5 || { echo "owned_fields: write pattern broken" >&2; exit 2; }
printf 'x = t->job.rung == 1;\nif (t->job.n <= 2 || t->job.n != 3) f(t->job.why);\nif (f && t->job.n) x = 1;\n' | grep -qE "$w" &&
    { echo "owned_fields: write pattern takes a read for a write" >&2; exit 2; }
echo "owned_fields: no file reaches into a part another file owns"
