/* A minimal unit-test harness: TP_TEST(name) defines a test, TP_CHECK*
 * assert, tp_test_main runs them all and prints "N passed, N failed". */
#ifndef TP_TEST_H
#define TP_TEST_H

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

typedef void (*tp_test_fn)(int *failed);
typedef struct {
    const char *name;
    tp_test_fn fn;
} tp_test_case;

#define TP_MAX_TESTS 256
static tp_test_case tp_tests_[TP_MAX_TESTS];
static int tp_ntests_;

#define TP_TEST(name)                                                                              \
    static void name(int *tp_failed_);                                                             \
    __attribute__((constructor)) static void name##_register(void) {                               \
        tp_tests_[tp_ntests_++] = (tp_test_case){#name, name};                                     \
    }                                                                                              \
    static void name(int *tp_failed_)

#define TP_CHECK(cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);             \
            *tp_failed_ = 1;                                                                       \
        }                                                                                          \
    } while (0)
/* As TP_CHECK, and ends the test at once when cond is false: for a check
 * that what follows depends on (a loaded file, an allocated result). */
#define TP_REQUIRE(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "  %s:%d: required: %s\n", __FILE__, __LINE__, #cond);                 \
            *tp_failed_ = 1;                                                                       \
            return;                                                                                \
        }                                                                                          \
    } while (0)
#define TP_CHECK_INT(a, b)                                                                         \
    do {                                                                                           \
        long long a_ = (long long)(a), b_ = (long long)(b);                                        \
        if (a_ != b_) {                                                                            \
            fprintf(stderr, "  %s:%d: %s == %lld, expected %lld\n", __FILE__, __LINE__, #a, a_,    \
                    b_);                                                                           \
            *tp_failed_ = 1;                                                                       \
        }                                                                                          \
    } while (0)
#define TP_CHECK_STR(a, b)                                                                         \
    do {                                                                                           \
        const char *a_ = (a), *b_ = (b);                                                           \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                                   \
            fprintf(stderr, "  %s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, #a,    \
                    a_ ? a_ : "(null)", b_ ? b_ : "(null)");                                       \
            *tp_failed_ = 1;                                                                       \
        }                                                                                          \
    } while (0)
#define TP_CHECK_NEAR(a, b, eps) TP_CHECK(fabs((double)(a) - (double)(b)) <= (eps))
#define TP_CHECK_CONTAINS(hay, needle)                                                             \
    do {                                                                                           \
        const char *h_ = (hay), *n_ = (needle);                                                    \
        if (!h_ || !strstr(h_, n_)) {                                                              \
            fprintf(stderr, "  %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,       \
                    h_ ? h_ : "(null)", n_);                                                       \
            *tp_failed_ = 1;                                                                       \
        }                                                                                          \
    } while (0)

/* Gone: no such process, or a zombie waiting for its (new) parent to reap it. */
static inline int process_gone(int pid) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
    char path[64], line[512] = "";
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 1;
    char *ok = fgets(line, sizeof line, f);
    fclose(f);
    const char *paren = ok ? strrchr(line, ')') : NULL; /* "pid (comm) S ..." */
    return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

static int tp_test_main(void) {
    int passed = 0, failed = 0;
    for (int i = 0; i < tp_ntests_; i++) {
        int f = 0;
        tp_tests_[i].fn(&f);
        printf("%s %s\n", f ? "FAIL" : "ok  ", tp_tests_[i].name);
        if (f)
            failed++;
        else
            passed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

#endif
