/* lineage: scheduler pbt's exploits in the run. A trial that exploits
 * another takes a copy of the donor's checkpoint directory over its own
 * (copied here, in the loop turn that hands the job out: the scheduler only
 * names a donor that is paused, so its checkpoint stands still), its
 * configuration becomes the explored one, and an `exploit` decision
 * journals the new segment of its lineage: {segment, donor, donor_step,
 * old, new}, before the job's own decision. `trials`, `export` and the
 * dashboard read the lineage back from those decisions; a resume replays
 * them (setup.c), comparing each with what the scheduler decides again.
 *
 * The copy blocks the loop for as long as it takes: nothing on a file system
 * that shares extents (a reflink), the kernel's copy of the data elsewhere
 * (tree.c; docs/search.md, PBT, has the figures).
 *
 * The copy is made before the turn's commit. A crash between the two
 * leaves the copy made and the decision lost; the resumed run decides the
 * same again (the scheduler is pure) and copies the same files again. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"

void tp__lineage_exploit(tp_run_t *r, trial_t *t, const tp_job_t *job, double now) {
    const trial_t *donor = tp__trials_get(&r->trials, job->donor);
    char from[4400], to[4400];
    if (donor) {
        tp__run_checkpoint_dir(r, donor, from, sizeof from);
        tp__run_checkpoint_dir(r, t, to, sizeof to);
        struct stat st;
        tp_error_t err = {0};
        if (stat(from, &st) != 0)
            tp__log(TP_LOG_WARN,
                    "trial %lld exploits trial %lld, which saved no checkpoint in %s: it goes on "
                    "from its own (the trainer must save to $TUNEPACK_CHECKPOINT_DIR)",
                    (long long)t->id, (long long)job->donor, from);
        else if (tp__replace_tree(from, to, &err) != 0)
            tp__log(TP_LOG_WARN,
                    "trial %lld exploits trial %lld, but its checkpoint could not be copied (%s): "
                    "it goes on from its own",
                    (long long)t->id, (long long)job->donor, err.msg);
    }
    json_t *detail = json_pack("{s:i, s:I, s:f, s:O, s:O}", "segment", job->segment, "donor",
                               (json_int_t)job->donor, "donor_step", job->from, "old", t->params,
                               "new", job->config);
    char *text = json_dumps(detail, JSON_COMPACT | JSON_SORT_KEYS);
    char *params = json_dumps(job->config, JSON_COMPACT);
    tp_decision_row_t d = {.at = now,
                           .kind = "exploit",
                           .trial = t->id,
                           .rung = job->rung,
                           .budget = job->budget,
                           .attempt = t->attempts,
                           .ok = 1,
                           .has_value = 1,
                           .value = job->from,
                           .detail = text};
    tp_store_t *s = tp__journal_tx(&r->journal);
    if (tp__journal_ok(&r->journal, tp__store_decision(s, &d), "recording an exploit") == 0)
        tp__journal_ok(&r->journal, tp__store_trial_params(s, t->id, params),
                       "recording an exploit");
    free(params);
    free(text);
    json_decref(detail);
    json_decref(t->params);
    t->params = json_incref(job->config);
    tp__trial_job_set_checkpoint(t, (int64_t)job->from); /* its checkpoint is the donor's */
}

/* See orchestrator_internal.h. */
json_t *tp__lineage_first_params(const char *detail) {
    json_t *o = detail ? json_loads(detail, 0, NULL) : NULL;
    json_t *old = json_incref(json_object_get(o, "old"));
    json_int_t seg = json_integer_value(json_object_get(o, "segment"));
    json_decref(o);
    if (!json_is_object(old) || seg != 1) {
        json_decref(old);
        return NULL;
    }
    return old;
}
