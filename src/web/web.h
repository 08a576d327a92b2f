/* web: the dashboard, a read-only HTTP view over experiment stores
 * (libmicrohttpd). It never writes a store: every request opens the store
 * read-only (SQLite WAL readers never block the writer) and closes it again. */
#ifndef TP_WEB_H
#define TP_WEB_H

#include <jansson.h>
#include <signal.h>
#include <stddef.h>

#include "store/store.h"

#include "util/util.h"

#define TP_WEB_DEFAULT_LISTEN "127.0.0.1:8080"

/* The ranking `best` and `status` use (given by the caller, so that the
 * dashboard names the same best trial without depending on the run module):
 * the first `top` trials of the store as JSON objects (id, value, state, rung,
 * budget, ...), best first. */
typedef json_t *(*tp_web_rank_fn)(tp_store_t *s, const char *dir, int maximize, size_t top);
/* Whether an orchestrator runs the experiment in dir now (given by the
 * caller, as the ranking is). A store whose run died says "running": the
 * dashboard shows such a run and its running trials as "interrupted". */
typedef int (*tp_web_live_fn)(const char *dir);

typedef struct tp_web_opts {
    const char *listen;      /* "HOST:PORT" (port 0: any free one); NULL: the default */
    const char *const *dirs; /* experiment directories served, in this order */
    size_t ndirs;            /* 0: every experiment under ./runs, looked up per request */
    const char *ready_file;  /* NULL, or a file to write the served URL into once listening */
    tp_web_rank_fn rank;     /* the best trial; NULL: the best completed or stopped value */
    tp_web_live_fn live;     /* NULL: every store that says "running" is taken at its word */
    const char *unix_path;   /* listen on this Unix socket (0600) instead of `listen` */
    int no_token;            /* serve without a token: on loopback or a Unix socket only
                                (the caller has the user acknowledge it) */
} tp_web_opts_t;

/* Serve until *stop becomes non-zero (a signal handler sets it). Every
 * request needs a random 128-bit token, loopback included, unless
 * o->no_token (refused on an address other than loopback): the URL printed
 * once on stdout carries it (`?token=`), the first page opened with it sets
 * a cookie and redirects to the URL without it, and later requests are let
 * in by the cookie (or `Authorization: Bearer`); others get 403. Returns 0,
 * or a negative errno with err filled (a bad address, a port in use). */
int tp__web_serve(const tp_web_opts_t *o, volatile sig_atomic_t *stop, tp_error_t *err);

/* "HOST:PORT" -> its parts; 0 or -EINVAL with err naming what is wrong. */
int tp__web_parse_listen(const char *text, char *host, size_t nhost, unsigned *port,
                         tp_error_t *err);
/* Whether host is a loopback address (127.0.0.0/8, ::1, localhost). */
int tp__web_is_loopback(const char *host);
/* Equal strings, compared in time that depends only on the expected length. */
int tp__web_token_equal(const char *given, const char *expected);

#endif
