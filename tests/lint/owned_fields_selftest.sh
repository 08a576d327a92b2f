#!/bin/sh
# The owned-fields lint catches what it is for: in a copy of the sources, one
# access planted at a time into a file that owns no part (one per rule) must
# fail it, naming the file; a read of a trial's shared sub-structs (reads are
# broad, writes owned) must pass, and so must the clean copy.
# usage: owned_fields_selftest.sh SOURCE_DIR
src=${1:?usage: owned_fields_selftest.sh SOURCE_DIR}
lint="$src/tests/lint/owned_fields.sh"
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
cp -R "$src/src" "$tmp/src" || exit 2
sh "$lint" "$tmp" >/dev/null 2>&1 || { echo "owned_fields_selftest: the clean copy fails" >&2; exit 1; }
victim="$tmp/src/run/dryrun.c"
cp "$victim" "$tmp/victim.clean"
plant() {
    cp "$tmp/victim.clean" "$victim"
    printf '\nstatic void planted(tp_run_t *r, trial_t *t, tp_fused_t *f) { (void)(%s); }\n' "$1" >>"$victim"
    out=$(sh "$lint" "$tmp" 2>&1)
    rc=$?
}
for access in 't->elastic.gpus_want' 't->fluid.share' 't->fusion.proc' 't->demand.mem_mib' \
    'r->pl.cluster.nnodes' 'r->agents.links[0]->up' 'r->agents.n' 'r->trials.by_id[1]->id' \
    'r->trials.n' 'r->journal.store' 'r->el.resizing' 'r->dl.hit' 'r->view.t0' 'f->stop_sent' \
    't->job.rung = 1' 'snprintf(t->job.why, sizeof t->job.why, "x")' 't->current.pid = 0' \
    '--t->ranks.live' 'tp__logfile_close(&t->ranks.logs[0])' 't->pace.step_s += 1'; do
    plant "$access"
    if [ "$rc" -ne 1 ] || ! printf '%s\n' "$out" | grep -q 'src/run/dryrun.c:'; then
        echo "owned_fields_selftest: \`$access\` planted in dryrun.c was not caught (rc $rc):" >&2
        printf '%s\n' "$out" >&2
        exit 1
    fi
done
for read in 't->job.rung == 1 && t->current.pid' 't->ranks.n <= 2 || t->pace.step_s != 0'; do
    plant "$read"
    if [ "$rc" -ne 0 ]; then
        echo "owned_fields_selftest: the read \`$read\` planted in dryrun.c was refused (rc $rc):" >&2
        printf '%s\n' "$out" >&2
        exit 1
    fi
done
echo "owned_fields_selftest: each planted access was caught, reads pass, the clean copy passes"
