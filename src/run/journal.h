/* journal: the orchestrator's side of the store. Writes are grouped in one
 * open transaction per loop turn; actions that depend on what was written
 * wait for the commit (journal, then act); report rows alone may wait up to
 * TP_JOURNAL_PERIOD_S for theirs. A failed write is recorded here once and
 * makes the run stop: nothing is acted on that the journal did not keep.
 *
 * Owned by journal.c. Others write through tp__journal_tx() and report the
 * result of each write through tp__journal_ok(). */
#ifndef TP_RUN_JOURNAL_H
#define TP_RUN_JOURNAL_H

#include <stdint.h>
#include <uv.h>

#include "store/store.h"

#define TP_JOURNAL_PERIOD_S 0.05 /* report rows wait at most this long for their commit */

typedef struct tp_journal {
    tp_store_t *store;   /* the experiment's store, owned */
    int in_tx;           /* a transaction is open */
    double tx_opened;    /* monotonic time it was opened */
    uv_timer_t timer;    /* commits rows left waiting; initialised by tp__journal_start */
    int timer_ready;     /* timer initialised */
    int broken;          /* a write failed: the run stops */
    char failed[160];    /* what failed first, for the summary */
    int failed_rc;       /* its error code (tp__store_strerror) */
    int64_t metric_rows; /* report rows stored by this run */
    tp_buf_t announced;  /* lines for stdout held until the transaction that they
                            announce is committed (dropped if it fails) */
} tp_journal_t;

/* Print line (with its newline) on stdout once what it announces is
 * committed: now when no transaction is open, else after the commit. A
 * failed commit drops it: nothing is shown as done that the store lacks. */
void tp__journal_announce(tp_journal_t *j, const char *line);

/* Open the experiment's store in dir for writing (tp__store_open). 0, or its
 * error with err filled. */
int tp__journal_open(tp_journal_t *j, const char *dir, tp_error_t *err);
/* The store as it is, for reads outside a transaction; NULL before it is
 * opened. O(1). */
tp_store_t *tp__journal_store(const tp_journal_t *j);
/* The store, inside an open transaction (opened if none is). A failure to
 * open one is recorded like any failed write. */
tp_store_t *tp__journal_tx(tp_journal_t *j);
/* Record the result rc of a write about `what`: 0 passes through; any other
 * value marks the journal broken (logged once, as an error) and is returned. */
int tp__journal_ok(tp_journal_t *j, int rc, const char *what);
/* Whether a write has failed (the run then stops). O(1). */
int tp__journal_broken(const tp_journal_t *j);
/* Commit the open transaction, if any. 0, or the store's error (recorded). */
int tp__journal_commit(tp_journal_t *j);
/* Arm the commit timer on loop (call once the loop exists). */
void tp__journal_start(tp_journal_t *j, uv_loop_t *loop);
/* The loop's turn is over: commit now when urgent (actions wait for it) or
 * when the transaction has been open TP_JOURNAL_PERIOD_S; otherwise make
 * sure the timer commits it by then. */
void tp__journal_settle(tp_journal_t *j, int urgent);
/* Close the store (committing what is open). */
void tp__journal_close(tp_journal_t *j);

#endif
