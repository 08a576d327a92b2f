#!/bin/sh
# The owned-fields lint catches what it is for: in a copy of the sources, one
# access planted at a time into a file that does not own the part (one per
# rule) must fail it, naming the file; the clean copy must pass.
# usage: owned_fields_selftest.sh SOURCE_DIR
src=${1:?usage: owned_fields_selftest.sh SOURCE_DIR}
lint="$src/tests/lint/owned_fields.sh"
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
cp -R "$src/src" "$tmp/src" || exit 2
sh "$lint" "$tmp" >/dev/null 2>&1 || { echo "owned_fields_selftest: the clean copy fails" >&2; exit 1; }
victim="$tmp/src/run/view.c"
cp "$victim" "$tmp/view.c.clean"
for access in 't->elastic.gpus_want' 't->fluid.share' 't->fusion.proc' 't->demand.mem_mib' \
    'r->pl.cluster.nnodes' 'r->agents.links[0]->up' 'r->trials.by_id[1]->id' \
    't->deadline.started' 'r->clock.reports'; do
    cp "$tmp/view.c.clean" "$victim"
    printf '\nstatic long planted(const tp_run_t *r, const trial_t *t) { return (long)%s; }\n' \
        "$access" >>"$victim"
    out=$(sh "$lint" "$tmp" 2>&1)
    rc=$?
    if [ "$rc" -ne 1 ] || ! printf '%s\n' "$out" | grep -q 'src/run/view.c:'; then
        echo "owned_fields_selftest: \`$access\` planted in view.c was not caught (rc $rc):" >&2
        printf '%s\n' "$out" >&2
        exit 1
    fi
done
echo "owned_fields_selftest: each planted access was caught, the clean copy passes"
