/* rundir: finding an experiment directory and who owns it, and the trial
 * folders in it agreeing with its store (trial.json). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run/run.h"
#include "store/store.h"

char *tp__rundir_resolve(const char *dir, tp_error_t *err) {
    if (dir) return tp__strdup(dir);
    DIR *d = opendir("runs");
    if (!d && errno == EACCES) {
        tp__errorf(err, -EACCES,
                   "permission denied: cannot list ./runs to find the latest "
                   "experiment; name its directory, or ask the owner of ./runs");
        return NULL;
    }
    if (!d) {
        tp__errorf(err, -ENOENT,
                   "no experiment directory given and ./runs does not exist; "
                   "name one, e.g. `tunepack status runs/mlp-demo`");
        return NULL;
    }
    char *best = NULL;
    double best_t = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "runs/%s/%s", e->d_name, TP_STORE_FILE);
        if (stat(path, &st) != 0) continue;
        double t = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
        if (t > best_t) {
            best_t = t;
            free(best);
            snprintf(path, sizeof path, "runs/%s", e->d_name);
            best = tp__strdup(path);
        }
    }
    closedir(d);
    if (!best)
        tp__errorf(err, -ENOENT,
                   "no experiment found under ./runs; name its directory, e.g. "
                   "`tunepack status runs/mlp-demo`");
    return best;
}

int tp__rundir_owner(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/lock", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    int pid = 0;
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
        char buf[32] = {0};
        if (pread(fd, buf, sizeof buf - 1, 0) > 0) pid = atoi(buf);
        if (pid <= 0) pid = -1;
    }
    close(fd);
    return pid;
}

/* See run.h. */
int tp__rundir_mark(const char *dir, int64_t trial, int attempt, const char *experiment,
                    int dir_mode, tp_error_t *err) {
    char home[4200], path[4300];
    tp__trial_path(home, sizeof home, dir, (long long)trial, NULL);
    int rc = tp__mkdir_p_mode(home, dir_mode, err);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/trial.json", home);
    json_t *o = json_pack("{s:I, s:i, s:s}", "trial", (json_int_t)trial, "attempt", attempt,
                          "experiment", experiment ? experiment : "");
    char *text = json_dumps(o, JSON_PRESERVE_ORDER);
    json_decref(o);
    rc = text ? tp__write_file(path, text, strlen(text), err)
              : tp__errorf(err, -ENOMEM, "cannot encode %s", path);
    free(text);
    return rc;
}

/* The attempts a trial folder says ran: its trial.json's, or more when its
 * logs say so (NAME.<k>.log: attempt k ended; NAME.log: one ran). Its
 * trial.json's experiment into xid (n bytes), "" if none. */
static int attempts_seen(const char *home, char *xid, size_t n) {
    char path[4500];
    int seen = 0;
    xid[0] = 0;
    snprintf(path, sizeof path, "%s/trial.json", home);
    json_t *o = json_load_file(path, 0, NULL);
    if (o) {
        seen = (int)json_integer_value(json_object_get(o, "attempt"));
        const char *x = json_string_value(json_object_get(o, "experiment"));
        snprintf(xid, n, "%s", x ? x : "");
        json_decref(o);
    }
    DIR *d = opendir(home);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        const char *name = e->d_name, *tail = NULL;
        if (!strncmp(name, "stdout.", 7) || !strncmp(name, "stderr.", 7)) tail = name + 7;
        size_t len = tail ? strlen(tail) : 0;
        if (!tail || (strcmp(tail, "log") != 0 && (len < 4 || strcmp(tail + len - 4, ".log"))))
            continue;
        char *end;
        long long k = strtoll(tail, &end, 10);
        /* NAME.log: an attempt ran; NAME.<k>.log, NAME.<k>.<j>.log: attempt k ended and
         * attempt k + 1 started */
        long long ran = end == tail ? 1 : *end == '.' ? k + 1 : 0;
        if (ran > seen) seen = (int)ran;
    }
    if (d) closedir(d);
    return seen;
}

typedef struct known {
    int *attempts; /* by trial id: attempts recorded, -1 for no trial */
    size_t n;
} known_t;

static int note_known(const tp_trial_row_t *row, void *ud) {
    known_t *k = ud;
    if (row->id < 0) return 0; /* seeded by a fork: never ran here */
    if ((size_t)row->id >= k->n) {
        size_t n = (size_t)row->id + 64;
        k->attempts = tp__xrealloc(k->attempts, n * sizeof *k->attempts);
        for (size_t i = k->n; i < n; i++)
            k->attempts[i] = -1;
        k->n = n;
    }
    k->attempts[row->id] = row->attempts;
    return 0;
}

/* Append "000003" folder names to a list shown to people, 8 at most. */
static void list_add(tp_buf_t *b, size_t *count, const char *name, const char *more) {
    if ((*count)++ < 8)
        tp__buf_printf(b, "%s%s%s", b->len ? ", " : "", name, more);
    else if (*count == 9)
        tp__buf_puts(b, ", ...");
}

/* See run.h. */
int tp__rundir_check_store(const char *dir, struct tp_store *s, const char *experiment,
                           const char *exp_path, tp_error_t *err) {
    char trials[4200];
    snprintf(trials, sizeof trials, "%s/trials", dir);
    DIR *d = opendir(trials);
    if (!d) return 0;
    known_t k = {0};
    tp__store_trials(s, note_known, &k);
    tp_buf_t unknown, behind, foreign, move;
    tp__buf_init(&unknown), tp__buf_init(&behind), tp__buf_init(&foreign), tp__buf_init(&move);
    size_t nunknown = 0, nbehind = 0, nforeign = 0, nmove = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!*e->d_name || strspn(e->d_name, "0123456789") != strlen(e->d_name)) continue;
        long long id = atoll(e->d_name);
        char home[4480], xid[64], more[64] = "";
        snprintf(home, sizeof home, "%s/%s", trials, e->d_name);
        int seen = attempts_seen(home, xid, sizeof xid);
        int stored = (size_t)id < k.n ? k.attempts[id] : -1;
        if (*xid && experiment && *experiment && strcmp(xid, experiment) != 0) {
            list_add(&foreign, &nforeign, e->d_name, "");
        } else if (stored < 0 && seen > 0) {
            list_add(&unknown, &nunknown, e->d_name, "");
        } else if (seen > stored) {
            snprintf(more, sizeof more, " (%d ran, %d recorded)", seen, stored < 0 ? 0 : stored);
            list_add(&behind, &nbehind, e->d_name, more);
        } else {
            continue;
        }
        list_add(&move, &nmove, home, "");
    }
    closedir(d);
    free(k.attempts);
    int rc = 0;
    if (nunknown + nbehind + nforeign) {
        tp_buf_t what;
        tp__buf_init(&what);
        if (nunknown) tp__buf_printf(&what, "; no record of the trials in %s", unknown.data);
        if (nbehind) tp__buf_printf(&what, "; fewer attempts than ran in %s", behind.data);
        if (nforeign)
            tp__buf_printf(&what, "; %s belong to another experiment (their trial.json)",
                           foreign.data);
        rc = tp__errorf(
            err, -EBADMSG,
            "%s/%s is behind its trial folders under %s/trials%s. The store lost changes (its "
            "%s-wal deleted after a checkpoint, or an older copy put back), and resuming would "
            "run those trials again over their folders. Nothing was changed. To recover: put "
            "back the store's latest copy with its %s-wal; or go on from what the store holds "
            "in a new directory, seeded with its results: tunepack run %s --fork %s --dir NEW; "
            "or move the folders it does not know aside (%zu: %s) and run again",
            dir, TP_STORE_FILE, dir, what.data, TP_STORE_FILE, TP_STORE_FILE,
            exp_path ? exp_path : "EXPERIMENT.yaml", dir, nmove, move.data);
        tp__buf_free(&what);
    }
    tp__buf_free(&unknown), tp__buf_free(&behind), tp__buf_free(&foreign), tp__buf_free(&move);
    return rc;
}
