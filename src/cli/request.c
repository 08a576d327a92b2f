/* request: ask a running orchestrator for a change (`nodes drain|add`,
 * `resize`) through DIR/requests/, and print its answer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "run/run.h"

int tp__cli_request(const char *dir_arg, const json_t *req, const char *what) {
    tp_error_t err = {0};
    char *dir = tp__rundir_resolve(dir_arg, &err);
    if (!dir) {
        fprintf(stderr, "tunepack: %s\n", err.msg);
        return TP_EXIT_STORE;
    }
    if (tp__rundir_owner(dir) == 0) {
        fprintf(stderr, "tunepack: %s is not running; %s only while it runs\n", dir, what);
        free(dir);
        return TP_EXIT_ERROR;
    }
    char msg[512];
    int rc = tp__cli_ask(dir, req, msg, sizeof msg);
    if (rc >= 0)
        fprintf(rc ? stderr : stdout, "%s%s\n", rc ? "tunepack: " : "", msg);
    else
        fprintf(stderr, "tunepack: %s\n", msg);
    free(dir);
    return rc < 0 ? TP_EXIT_ERROR : rc ? TP_EXIT_USAGE : TP_EXIT_OK;
}

int tp__cli_ask(const char *dir, const json_t *req, char *answer, size_t n) {
    char reqdir[4200], stem[4300], path[4400], tmp[4500], done[4400];
    snprintf(reqdir, sizeof reqdir, "%s/requests", dir);
    mkdir(reqdir, 0755);
    /* one name for the request and its answer: read the clock once (two
     * reads a second apart waited for an answer under another name) */
    snprintf(stem, sizeof stem, "%s/%ld-%d", reqdir, (long)time(NULL), (int)getpid());
    snprintf(path, sizeof path, "%s.json", stem);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(done, sizeof done, "%s.done", stem);
    int rc = json_dump_file(req, tmp, 0) == 0 && rename(tmp, path) == 0 ? 0 : -errno;
    if (rc) {
        snprintf(answer, n, "cannot write %s: %s", path, strerror(-rc));
        return rc;
    }
    json_t *ans = NULL;
    struct timespec ts = {0, 100 * 1000 * 1000};
    for (int i = 0; i < 300 && !(ans = json_load_file(done, 0, NULL)); i++)
        nanosleep(&ts, NULL);
    if (!ans) {
        snprintf(answer, n, "the orchestrator of %s did not answer within 30 s", dir);
        unlink(path);
        return -ETIMEDOUT;
    }
    unlink(done);
    int ok = json_is_true(json_object_get(ans, "ok"));
    const char *msg = json_string_value(json_object_get(ans, "message"));
    snprintf(answer, n, "%s", msg ? msg : "");
    json_decref(ans);
    return ok ? 0 : 1;
}
