/* tree_copy: how fast a PBT exploit copies a donor's checkpoint, which the
 * orchestrator does in its loop (src/run/lineage.c): tp__replace_tree of a
 * directory holding one file of MIB MiB and 100 small ones, ROUNDS times,
 * beside a plain 64 KiB read/write copy of the same file over the last
 * round's (the way tree.c copied before it used the kernel's copy).
 *
 *   tree_copy DIR [MIB [ROUNDS]]      (default 1024 MiB, 3 rounds)
 *
 * DIR should be on the file system the run's checkpoints live on. Prints
 * seconds and MiB/s per round for both; the orchestrator hears no agent for
 * that long, so a copy longer than the agents' heartbeat timeout (10 s) would
 * be read as a lost agent. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void write_file(const char *path, size_t bytes) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        fprintf(stderr, "tree_copy: %s: %s\n", path, strerror(errno));
        exit(1);
    }
    static unsigned char buf[1 << 20];
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < sizeof buf; i++) /* not zeros: no file system may skip them */
        buf[i] = (unsigned char)((x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 56);
    for (size_t done = 0; done < bytes;) {
        size_t n = bytes - done < sizeof buf ? bytes - done : sizeof buf;
        if (write(fd, buf, n) != (ssize_t)n) {
            fprintf(stderr, "tree_copy: writing %s: %s\n", path, strerror(errno));
            exit(1);
        }
        done += n;
    }
    fsync(fd);
    close(fd);
}

static void plain_copy(const char *from, const char *to) {
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    static char buf[1 << 16];
    ssize_t n;
    while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n) break;
    close(in);
    close(out);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: tree_copy DIR [MIB [ROUNDS]]\n");
        return 2;
    }
    const char *dir = argv[1];
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 1024;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    char donor[4096], recipient[4096], path[4200], plain[4200];
    snprintf(donor, sizeof donor, "%s/donor", dir);
    snprintf(recipient, sizeof recipient, "%s/recipient", dir);
    tp__remove_tree(donor);
    tp__remove_tree(recipient);
    if (mkdir(donor, 0755) < 0 || mkdir(recipient, 0755) < 0) {
        fprintf(stderr, "tree_copy: cannot make %s: %s\n", donor, strerror(errno));
        return 1;
    }
    snprintf(path, sizeof path, "%s/model.pt", donor);
    write_file(path, mib << 20);
    for (int i = 0; i < 100; i++) {
        char small[4200];
        snprintf(small, sizeof small, "%s/shard-%03d.json", donor, i);
        write_file(small, 4096);
    }
    snprintf(plain, sizeof plain, "%s/plain.pt", dir);
    printf("tree_copy: %zu MiB + 100 files of 4 KiB under %s\n", mib, dir);
    for (int r = 0; r < rounds; r++) {
        tp_error_t err = {0};
        double t0 = now_s();
        if (tp__replace_tree(donor, recipient, &err) != 0) {
            fprintf(stderr, "tree_copy: %s\n", err.msg);
            return 1;
        }
        double t1 = now_s();
        unlink(plain); /* the last round's, as tp__replace_tree removes the tree it replaces */
        plain_copy(path, plain);
        double t2 = now_s();
        printf("round %d: tp__replace_tree %.3f s (%.0f MiB/s); plain read/write of the big file "
               "%.3f s (%.0f MiB/s)\n",
               r + 1, t1 - t0, (double)mib / (t1 - t0), t2 - t1, (double)mib / (t2 - t1));
    }
    unlink(plain);
    tp__remove_tree(donor);
    tp__remove_tree(recipient);
    return 0;
}
