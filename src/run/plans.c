/* plans: a plan of the experiment (`tunepack plan EXPERIMENT`, whose front
 * end is cli/plan_experiment.c) kept in its run's store, so that `plan
 * --check` and the dashboard compare it with what happens. The plan waits
 * in DIR/plan.json until the store's one writer takes it: the run when it
 * starts or when asked (a `plan` request), or `plan` itself under the
 * directory's lock while no run holds it (docs/simulator.md). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/journal.h"
#include "run/orchestrator_internal.h"
#include "run/run.h"
#include "store/store.h"

#define PLAN_FILE "plan.json"

/* DIR/plan.json into s (a transaction the caller commits): 1 taken, 0 none
 * waiting, or a negative errno with err. The file stays until the caller
 * has committed (tp__plans_taken). */
static int take(const char *dir, tp_store_t *s, tp_error_t *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/" PLAN_FILE, dir);
    if (access(path, F_OK) != 0) return 0;
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return tp__errorf(err, -EINVAL, "%s is no plan (%s); make it again with `tunepack plan`",
                          path, jerr.text);
    }
    double at = json_number_value(json_object_get(doc, "at"));
    char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(doc);
    int rc = text ? tp__store_plan_add(s, at > 0 ? at : tp__wall_s(), text) : -ENOMEM;
    free(text);
    if (rc)
        return tp__errorf(err, rc, "cannot keep %s in the store: %s", path, tp__store_strerror(rc));
    return 1;
}

static void taken(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/" PLAN_FILE, dir);
    unlink(path);
}

int tp__plans_take(tp_run_t *r, char *msg, size_t n) {
    tp_error_t err = {0};
    int rc = take(r->dir, tp__journal_tx(&r->journal), &err);
    if (rc == 0) return snprintf(msg, n, "no plan waits in %s/" PLAN_FILE, r->dir), -ENOENT;
    if (rc < 0) {
        tp__log(TP_LOG_WARN, "%s", err.msg);
        return snprintf(msg, n, "%s", err.msg), rc;
    }
    if (tp__journal_commit(&r->journal) != 0)
        return snprintf(msg, n, "the store could not keep the plan"), -EIO;
    taken(r->dir);
    snprintf(msg, n, "the plan is kept in the store of %s", r->dir);
    return 0;
}

int tp__plans_put(const char *dir, const char *doc, tp_error_t *err) {
    char path[4200], tmp[4300];
    int rc = tp__mkdir_p_mode(dir, 0700, err);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/" PLAN_FILE, dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    rc = tp__write_file(tmp, doc, strlen(doc), err);
    if (rc) return rc;
    if (rename(tmp, path) != 0)
        return tp__errorf(err, -errno, "cannot write %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/" TP_STORE_FILE, dir);
    if (access(path, F_OK) != 0) return TP_PLAN_WAITS; /* the run takes it when it starts */
    snprintf(path, sizeof path, "%s/lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return tp__errorf(err, -errno, "cannot open %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) { /* a run holds it: ask it */
        close(fd);
        return TP_PLAN_ASK_THE_RUN;
    }
    tp_store_t *s = NULL;
    rc = tp__store_open(dir, TP_STORE_WRITE, &s, err);
    if (rc == 0) {
        rc = tp__store_begin(s);
        int took = rc ? rc : take(dir, s, err);
        rc = took < 0 ? took : tp__store_commit(s);
        if (rc == 0 && took == 1) taken(dir);
        if (rc && !err->msg[0])
            tp__errorf(err, rc, "cannot keep the plan in %s: %s", dir, tp__store_strerror(rc));
        tp__store_close(s);
    }
    close(fd); /* the lock goes with it */
    return rc ? rc : TP_PLAN_KEPT;
}
