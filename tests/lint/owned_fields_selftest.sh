#!/bin/sh
# The owned-fields lint catches what it is for: in a copy of the sources, one
# access per rule planted into a file that owns no part, each on its own line,
# must fail it, each line named; reads of a trial's shared sub-structs
# planted there (reads are broad, writes owned) must pass, and so must the
# clean copy.
# usage: owned_fields_selftest.sh SOURCE_DIR
src=${1:?usage: owned_fields_selftest.sh SOURCE_DIR}
lint="$src/tests/lint/owned_fields.sh"
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
cp -R "$src/src" "$tmp/src" || exit 2
sh "$lint" "$tmp" >/dev/null 2>&1 || { echo "owned_fields_selftest: the clean copy fails" >&2; exit 1; }
victim="$tmp/src/run/dryrun.c"
cp "$victim" "$tmp/victim.clean"
# plant ACCESS...: each on a line of its own at the end of the victim; their line numbers
# into $lines, the lint's output and status into $out and $rc
plant() {
    cp "$tmp/victim.clean" "$victim"
    lines=
    for a in "$@"; do
        printf 'static void planted(tp_run_t *r, trial_t *t, tp_fused_t *f) { (void)(%s); }\n' \
            "$a" >>"$victim"
        lines="$lines $(wc -l <"$victim")"
    done
    out=$(sh "$lint" "$tmp" 2>&1)
    rc=$?
}
set -- 't->elastic.gpus_want' 't->fluid.share' 't->fusion.proc' 't->demand.mem_mib' \
    'r->pl.cluster.nnodes' 'r->agents.links[0]->up' 'r->agents.n' 'r->trials.by_id[1]->id' \
    'r->trials.n' 'r->journal.store' 'r->el.resizing' 'r->dl.hit' 'r->view.t0' 'f->stop_sent' \
    't->job.rung = 1' 'snprintf(t->job.why, sizeof t->job.why, "x")' 't->current.pid = 0' \
    '--t->ranks.live' 'tp__logfile_close(&t->ranks.logs[0])' 't->pace.step_s += 1' \
    't->deadline.started' 'r->clock.reports' 'r->trials.count[0]' 'r->trials.nheap' \
    'r->journal.broken' 'r->agents.shutting_down'
plant "$@"
[ "$rc" -eq 1 ] || { echo "owned_fields_selftest: the planted accesses did not fail the lint (rc $rc):" >&2
    printf '%s\n' "$out" >&2; exit 1; }
for n in $lines; do
    if ! printf '%s\n' "$out" | grep -q "^src/run/dryrun.c:$n:"; then
        echo "owned_fields_selftest: \`$1\` planted at dryrun.c:$n was not caught:" >&2
        printf '%s\n' "$out" >&2
        exit 1
    fi
    shift
done
plant 't->job.rung == 1 && t->current.pid' 't->ranks.n <= 2 || t->pace.step_s != 0' \
    'snprintf(buf, 9, "%s", t->job.why)'
if [ "$rc" -ne 0 ]; then
    echo "owned_fields_selftest: reads of a trial's shared structs planted in dryrun.c were refused (rc $rc):" >&2
    printf '%s\n' "$out" >&2
    exit 1
fi
echo "owned_fields_selftest: each planted access was caught, reads pass, the clean copy passes"
