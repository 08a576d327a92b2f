/* Unit tests for util's tree.c: a directory copied whole over another (a PBT
 * exploit's checkpoint copy) and removed whole. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tp_test.h"
#include "util/util.h"

/* Write dir/name (tp__write_file) with mode; 0, or -1 when it cannot. */
static int put(const char *dir, const char *name, const void *data, size_t n, mode_t mode) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return tp__write_file(path, data, n, NULL) == 0 && chmod(path, mode) == 0 ? 0 : -1;
}

/* The file's bytes (malloc'd) and their number in *n; NULL when unreadable. */
static unsigned char *get(const char *dir, const char *name, size_t *n) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = NULL;
    size_t len = 0;
    if (tp__read_file(path, &text, &len, NULL) != 0) return NULL;
    *n = len;
    return (unsigned char *)text;
}

static int exists(const char *dir, const char *name) {
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &st) == 0;
}

TP_TEST(test_replace_tree_copies_every_byte_mode_and_link_and_drops_what_was_there) {
    char root[] = "/tmp/tp-tree-XXXXXX", from[64], to[64], sub[80];
    TP_CHECK(mkdtemp(root) != NULL);
    snprintf(from, sizeof from, "%s/from", root);
    snprintf(to, sizeof to, "%s/to", root);
    snprintf(sub, sizeof sub, "%s/sub", from);
    TP_CHECK_INT(mkdir(from, 0755), 0);
    TP_CHECK_INT(mkdir(sub, 0700), 0);
    TP_CHECK_INT(mkdir(to, 0755), 0);
    size_t big = 200000; /* more than one 64 KiB read, not a multiple of it */
    unsigned char *data = malloc(big);
    for (size_t i = 0; i < big; i++)
        data[i] = (unsigned char)(i * 2654435761u >> 13);
    TP_CHECK_INT(put(from, "model.pt", data, big, 0600), 0);
    TP_CHECK_INT(put(from, "empty", "", 0, 0644), 0);
    TP_CHECK_INT(put(sub, "opt.json", "{\"lr\": 0.1}", 11, 0644), 0);
    char link[100];
    snprintf(link, sizeof link, "%s/latest", from);
    TP_CHECK_INT(symlink("model.pt", link), 0);
    TP_CHECK_INT(put(to, "stale.pt", "old", 3, 0644), 0);

    tp_error_t err = {0};
    TP_CHECK_INT(tp__replace_tree(from, to, &err), 0);
    size_t n = 0;
    unsigned char *got = get(to, "model.pt", &n);
    TP_CHECK(got && n == big && memcmp(got, data, big) == 0);
    free(got);
    got = get(to, "empty", &n);
    TP_CHECK(got && n == 0);
    free(got);
    got = get(to, "sub/opt.json", &n);
    TP_CHECK(got && n == 11 && memcmp(got, "{\"lr\": 0.1}", 11) == 0);
    free(got);
    char target[64] = "", path[4200];
    snprintf(path, sizeof path, "%s/latest", to);
    TP_CHECK(readlink(path, target, sizeof target - 1) == 8 && !strncmp(target, "model.pt", 8));
    struct stat st;
    snprintf(path, sizeof path, "%s/model.pt", to);
    TP_CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
    snprintf(path, sizeof path, "%s/sub", to);
    TP_CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0700);
    TP_CHECK(!exists(to, "stale.pt"));
    TP_CHECK(!exists(root, "to.copying") && !exists(root, "to.replaced"));

    /* a donor that is gone: an error that names it, and the recipient's tree kept whole */
    char gone[80];
    snprintf(gone, sizeof gone, "%s/gone", root);
    TP_CHECK(tp__replace_tree(gone, to, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, "cannot read");
    TP_CHECK_CONTAINS(err.msg, gone);
    got = get(to, "model.pt", &n);
    TP_CHECK(got && n == big && memcmp(got, data, big) == 0);
    free(got);
    TP_CHECK(!exists(root, "to.copying"));

    free(data);
    TP_CHECK_INT(tp__remove_tree(root), 0);
    TP_CHECK(access(root, F_OK) != 0);
}

int main(void) {
    return tp_test_main();
}
