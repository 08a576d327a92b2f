/* journal: grouped transactions over the store, the commit timer, and the
 * one place where a failed write is noticed (see journal.h). */
#include "run/journal.h"

#include <stdio.h>
#include <string.h>

#include "util/util.h"

int tp__journal_broken(const tp_journal_t *j) {
    return j->broken;
}

int tp__journal_ok(tp_journal_t *j, int rc, const char *what) {
    if (rc == 0) return 0;
    if (!j->broken) {
        snprintf(j->failed, sizeof j->failed, "%s", what);
        j->failed_rc = rc;
        tp__log(TP_LOG_ERROR,
                "the store failed while %s: %s; no further trial is started, and what was "
                "not recorded is run again on resume",
                what, tp__store_strerror(rc));
    }
    j->broken = 1;
    return rc;
}

int tp__journal_open(tp_journal_t *j, const char *dir, tp_error_t *err) {
    return tp__store_open(dir, TP_STORE_WRITE, &j->store, err);
}

tp_store_t *tp__journal_store(const tp_journal_t *j) {
    return j->store;
}

tp_store_t *tp__journal_tx(tp_journal_t *j) {
    if (!j->in_tx) {
        if (tp__journal_ok(j, tp__store_begin(j->store), "opening a transaction") == 0) {
            j->in_tx = 1;
            j->tx_opened = tp__mono_s();
        }
    }
    return j->store;
}

static void flush_announced(tp_journal_t *j) {
    if (!j->announced.len) return;
    fwrite(j->announced.data, 1, j->announced.len, stdout);
    fflush(stdout);
    tp__buf_reset(&j->announced);
}

void tp__journal_announce(tp_journal_t *j, const char *line) {
    /* a trial's words in it reach no terminal or CI log raw (docs/output.md) */
    tp__buf_escape(&j->announced, line, strlen(line), TP_ESC_KEEP_NL);
    if (!j->in_tx) flush_announced(j);
}

int tp__journal_commit(tp_journal_t *j) {
    if (!j->in_tx) return 0;
    j->in_tx = 0;
    int rc = tp__journal_ok(j, tp__store_commit(j->store), "committing");
    if (rc == 0)
        flush_announced(j);
    else
        tp__buf_reset(&j->announced); /* never shown: the store does not have it */
    return rc;
}

static void on_timer(uv_timer_t *h) {
    tp__journal_commit(h->data);
}

void tp__journal_start(tp_journal_t *j, uv_loop_t *loop) {
    uv_timer_init(loop, &j->timer);
    j->timer.data = j;
    j->timer_ready = 1;
}

void tp__journal_settle(tp_journal_t *j, int urgent) {
    if (!j->in_tx) return;
    if (urgent || tp__mono_s() - j->tx_opened >= TP_JOURNAL_PERIOD_S) {
        tp__journal_commit(j);
    } else if (j->timer_ready && !uv_is_active((uv_handle_t *)&j->timer)) {
        uv_timer_start(&j->timer, on_timer, (uint64_t)(TP_JOURNAL_PERIOD_S * 1000), 0);
    }
}

void tp__journal_close(tp_journal_t *j) {
    tp__journal_commit(j);
    tp__buf_free(&j->announced);
    tp__store_close(j->store);
    j->store = NULL;
}
