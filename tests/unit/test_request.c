/* Unit tests for cli/request.c: a request to a running orchestrator (`tunepack nodes`,
 * `tunepack resize`) is answered under its own name even when the clock turns a second
 * while it is named. A thread stands in for the orchestrator (it holds DIR/lock as a run
 * does, and answers DIR/requests/NAME.json in NAME.done, as run/nodes.c does), and this
 * file's time() steps one second per call, so that a client reading the clock twice waits
 * for an answer under another name (it did: `nodes add` then failed after 30 s, seen once
 * in CI under load). */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "tp_test.h"

/* The clock the client reads: a second later at every call. */
static time_t clock_now = 1000000;
time_t time(time_t *t) {
    time_t now = __atomic_fetch_add(&clock_now, 1, __ATOMIC_SEQ_CST);
    if (t) *t = now;
    return now;
}

typedef struct responder {
    char dir[256];
    int answered; /* read after the thread is joined */
    int stop;     /* set and read atomically */
} responder_t;

/* Answer every NAME.json of dir/requests in NAME.done, as the orchestrator does. */
static void *respond(void *arg) {
    responder_t *r = arg;
    char reqdir[300];
    snprintf(reqdir, sizeof reqdir, "%s/requests", r->dir);
    while (!__atomic_load_n(&r->stop, __ATOMIC_SEQ_CST)) {
        DIR *d = opendir(reqdir);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            size_t len = strlen(de->d_name);
            if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0) continue;
            char path[600], done[600], tmp[620];
            snprintf(path, sizeof path, "%s/%s", reqdir, de->d_name);
            snprintf(done, sizeof done, "%s/%.*s.done", reqdir, (int)(len - 5), de->d_name);
            snprintf(tmp, sizeof tmp, "%s.tmp", done);
            json_t *ans = json_pack("{s:b, s:s}", "ok", 1, "message", "added host9");
            if (json_dump_file(ans, tmp, 0) == 0 && rename(tmp, done) == 0) r->answered++;
            json_decref(ans);
            unlink(path);
        }
        if (d) closedir(d);
        usleep(10 * 1000);
    }
    return NULL;
}

TP_TEST(test_a_request_is_answered_when_the_clock_turns_a_second_meanwhile) {
    responder_t r = {0};
    snprintf(r.dir, sizeof r.dir, "/tmp/tp-request-XXXXXX");
    TP_REQUIRE(mkdtemp(r.dir) != NULL);
    char lock[300];
    snprintf(lock, sizeof lock, "%s/lock", r.dir);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644); /* a running orchestrator's lock */
    TP_REQUIRE(fd >= 0);
    TP_REQUIRE(flock(fd, LOCK_EX | LOCK_NB) == 0);
    TP_REQUIRE(write(fd, "4242\n", 5) == 5);
    pthread_t th;
    TP_REQUIRE(pthread_create(&th, NULL, respond, &r) == 0);
    json_t *req = json_pack("{s:s, s:s}", "op", "add", "node", "host9");
    int rc = tp__cli_request(r.dir, req, "nodes change");
    json_decref(req);
    __atomic_store_n(&r.stop, 1, __ATOMIC_SEQ_CST);
    pthread_join(th, NULL);
    TP_CHECK_INT(rc, 0);
    TP_CHECK_INT(r.answered, 1);
    close(fd);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", r.dir);
    TP_CHECK_INT(system(cmd), 0);
}

int main(void) {
    return tp_test_main();
}
