/* store_internal: what the store's files share (not for other modules). */
#ifndef TP_STORE_INTERNAL_H
#define TP_STORE_INTERNAL_H

#include "store/store.h"

struct sqlite3;

/* Open DIR's store at path for reading into *db (closed by the caller,
 * also on failure). 0, or: -ENOENT "no experiment in DIR"; -EACCES
 * "permission denied", naming the directory or the file that denies it,
 * its mode and owner; -EBADMSG when the file is not an SQLite database. A
 * store that this reader cannot put its -shm beside (read-only media, a
 * directory it may not write) is read as immutable when no -wal holds
 * changes, and refused with -EACCES when one does. A few system calls. */
int tp__store_open_reader(const char *dir, const char *path, struct sqlite3 **db, tp_error_t *err);

#endif
