/* store_reader: how a reader (the CLI, the dashboard) opens a store it may
 * not write: one on read-only media, or in a directory of another user's
 * that it may read but not write. A missing store, a permission denied and
 * a damaged file each get their own words. */
#include <errno.h>
#include <pwd.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_internal.h"

/* "mode 0700, owned by alice" for path, or "" when stat fails. */
static void whose(const char *path, char *out, size_t n) {
    struct stat st;
    out[0] = 0;
    if (stat(path, &st) != 0) return;
    struct passwd *pw = getpwuid(st.st_uid);
    char uid[32];
    snprintf(uid, sizeof uid, "uid %u", (unsigned)st.st_uid);
    snprintf(out, n, " (mode %04o, owned by %s)", (unsigned)(st.st_mode & 07777),
             pw ? pw->pw_name : uid);
}

/* -EACCES with what this user may not do, where, and what would help. */
static int denied(const char *what, const char *where, tp_error_t *err) {
    char mode[160];
    whose(where, mode, sizeof mode);
    return tp__errorf(err, -EACCES,
                      "permission denied: cannot %s %s%s; ask its owner for access (the "
                      "experiment's `permissions:`, docs/security.md) or read it as them",
                      what, where, mode);
}

/* Whether path can be read: 0, -ENOENT (no store: DIR holds no experiment),
 * or -EACCES saying which of DIR and the file denies it. */
static int reachable(const char *dir, const char *path, tp_error_t *err) {
    struct stat st;
    if (stat(path, &st) == 0)
        return access(path, R_OK) == 0 || errno != EACCES ? 0 : denied("read", path, err);
    if (errno == EACCES)
        return stat(dir, &st) == 0
                   ? denied("enter the directory", dir, err)
                   : tp__errorf(err, -EACCES, "permission denied: cannot reach %s: %s", dir,
                                strerror(EACCES));
    if (errno != ENOENT) {
        int e = errno;
        return tp__errorf(err, -e, "cannot read %s: %s", path, strerror(e));
    }
    if (stat(dir, &st) != 0 && errno == EACCES)
        return tp__errorf(err, -EACCES, "permission denied: cannot reach %s: %s", dir,
                          strerror(EACCES));
    return tp__errorf(err, -ENOENT, "no experiment in %s (no %s there)", dir, TP_STORE_FILE);
}

/* "file:PATH?immutable=1", PATH percent-encoded where a URI needs it. */
static void immutable_uri(const char *path, char *out, size_t n) {
    size_t k = (size_t)snprintf(out, n, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p && k + 4 < n; p++) {
        if (*p == '%' || *p == '?' || *p == '#' || *p < 0x20 || *p >= 0x7f)
            k += (size_t)snprintf(out + k, n - k, "%%%02X", *p);
        else
            out[k++] = (char)*p;
    }
    snprintf(out + k, n - k, "?immutable=1");
}

/* The first read, which is where SQLite finds out what it cannot do. */
static int first_read(sqlite3 *db) {
    return sqlite3_exec(db, "SELECT 1 FROM sqlite_schema LIMIT 1", NULL, NULL, NULL);
}

/* See store_internal.h. */
int tp__store_open_reader(const char *dir, const char *path, sqlite3 **db, tp_error_t *err) {
    int rc = reachable(dir, path, err);
    if (rc) return rc;
    const int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX;
    if (sqlite3_open_v2(path, db, flags, NULL) != SQLITE_OK)
        return tp__errorf(err, -EIO, "cannot open %s: %s", path, sqlite3_errmsg(*db));
    int got = first_read(*db) & 0xff;
    if (got == SQLITE_READONLY || got == SQLITE_CANTOPEN || got == SQLITE_PERM) {
        /* A store in WAL mode needs its -shm beside it, and this reader can
         * create none (read-only media, a directory it may not write). With
         * no -wal holding changes the file alone is the whole store: read it
         * as immutable. */
        char wal[4200];
        struct stat st;
        snprintf(wal, sizeof wal, "%s-wal", path);
        if (stat(wal, &st) == 0 && st.st_size > 0)
            return tp__errorf(err, -EACCES,
                              "permission denied: %s holds changes not yet in %s, and reading "
                              "them takes write access to %s (SQLite keeps %s-shm beside it): %s. "
                              "Read it as its owner, or copy the directory somewhere you can write",
                              wal, TP_STORE_FILE, dir, TP_STORE_FILE, sqlite3_errmsg(*db));
        sqlite3_close(*db);
        char uri[8600];
        immutable_uri(path, uri, sizeof uri);
        if (sqlite3_open_v2(uri, db, flags | SQLITE_OPEN_URI, NULL) != SQLITE_OK)
            return tp__errorf(err, -EIO, "cannot open %s: %s", path, sqlite3_errmsg(*db));
        got = first_read(*db) & 0xff;
    }
    if (got == SQLITE_NOTADB)
        return tp__errorf(err, -EBADMSG,
                          "%s is damaged: it is not an SQLite database (its header is "
                          "overwritten); nothing was changed. Restore it from a backup",
                          path);
    return 0; /* anything else: the quick check says what it is */
}
