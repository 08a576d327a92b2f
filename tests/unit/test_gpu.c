/* Unit tests for gpu: NVML through the stand-in libnvidia-ml.so.1, MPS
 * daemons through the stand-in nvidia-cuda-mps-control (both in
 * $TUNEPACK_FAKE_DIR), the trial environment under MPS, and recognising
 * out-of-GPU-memory lines. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu/gpu.h"
#include "tp_test.h"
#include "util/util.h"

/* ---- helpers ------------------------------------------------------------------ */
static const char *fake_dir(void) {
    const char *d = getenv("TUNEPACK_FAKE_DIR");
    if (!d || !*d) {
        fprintf(stderr, "  TUNEPACK_FAKE_DIR is not set (run through ctest)\n");
        exit(1);
    }
    return d;
}

static void fake_path(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/%s", fake_dir(), name);
}

static char *make_tmpdir(void) {
    char tmpl[] = "/tmp/tp_gpu_XXXXXX";
    char *d = mkdtemp(tmpl);
    if (!d) {
        perror("mkdtemp");
        exit(1);
    }
    return tp__strdup(d);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void rm_tree(char *dir) {
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(1);
    }
    fputs(text, f);
    fclose(f);
}

/* Point the fake NVML at dir/nvml.json holding json. */
static void set_fake_json(const char *dir, const char *json) {
    char path[512];
    snprintf(path, sizeof path, "%s/nvml.json", dir);
    write_text(path, json);
    setenv("TUNEPACK_FAKE_NVML", path, 1);
}

/* Four GPUs; GPU 2's "error" is filled in by the caller ("null" or "\"lost\""). */
static void set_four_gpus(const char *dir, const char *gpu2_error) {
    char json[2048];
    snprintf(
        json, sizeof json,
        "{\"gpus\": ["
        "{\"name\": \"NVIDIA A100-SXM4-80GB\", \"uuid\": \"GPU-fake-0\", \"memory_mib\": 81920,"
        " \"util\": 12, \"error\": null},"
        "{\"name\": \"NVIDIA A100-SXM4-80GB\", \"uuid\": \"GPU-fake-1\", \"memory_mib\": 81920,"
        " \"util\": 0},"
        "{\"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-fake-2\", \"memory_mib\": 81559,"
        " \"util\": 97, \"error\": %s},"
        "{\"name\": \"Tesla T4\", \"uuid\": \"GPU-fake-3\", \"memory_mib\": 15360, \"util\": 5}],"
        " \"processes\": [{\"gpu\": 0, \"pid\": 4242, \"used_mib\": 2048, \"sm_util\": 30},"
        "                 {\"gpu\": 2, \"pid\": 4343, \"used_mib\": 100, \"sm_util\": 80}],"
        " \"process_dir\": \"%s/procs\", \"init_error\": null}",
        gpu2_error, dir);
    set_fake_json(dir, json);
    char procs[512];
    snprintf(procs, sizeof procs, "%s/procs", dir);
    mkdir(procs, 0755);
}

static tp_nvml_t *open_fake(int *failed_) {
    char lib[512];
    fake_path(lib, sizeof lib, "libnvidia-ml.so.1");
    tp_nvml_t *n = NULL;
    tp_error_t err = {0};
    int rc = tp__nvml_open(lib, &n, &err);
    if (rc != 0) {
        fprintf(stderr, "  tp__nvml_open: %d %s\n", rc, err.msg);
        *failed_ = 1;
    }
    return n;
}

/* How often the fake library saw a call of name (its test-only counter). */
static unsigned fake_calls(const char *name) {
    char lib[512];
    fake_path(lib, sizeof lib, "libnvidia-ml.so.1");
    void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return 9999;
    unsigned (*calls)(const char *) = (unsigned (*)(const char *))dlsym(h, "fake_nvml_calls");
    unsigned c = calls ? calls(name) : 9999;
    dlclose(h);
    return c;
}

static void fake_reset_calls(void) {
    char lib[512];
    fake_path(lib, sizeof lib, "libnvidia-ml.so.1");
    void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return;
    void (*reset)(void) = (void (*)(void))dlsym(h, "fake_nvml_reset_calls");
    if (reset) reset();
    dlclose(h);
}

static const tp_gpu_proc_t *find_proc(const tp_gpu_proc_t *p, size_t n, pid_t pid) {
    for (size_t i = 0; i < n; i++)
        if (p[i].pid == pid) return &p[i];
    return NULL;
}

/* A pid that surely belonged to a process that is gone now. */
static pid_t dead_pid(void) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    waitpid(pid, NULL, 0);
    return pid;
}

/* ---- NVML ------------------------------------------------------------------------ */
TP_TEST(test_nvml_open_says_enoent_when_the_library_is_absent) {
    tp_nvml_t *n = NULL;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__nvml_open("/nonexistent/dir/libnvidia-ml.so.1", &n, &err), -ENOENT);
    TP_CHECK(n == NULL);
    TP_CHECK_INT(tp__nvml_open("libtunepack-no-such-nvml.so.1", &n, &err), -ENOENT);
    setenv("TUNEPACK_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    TP_CHECK_INT(tp__nvml_open(NULL, &n, &err), -ENOENT);
    unsetenv("TUNEPACK_NVML_LIB");
}

TP_TEST(test_nvml_open_says_eio_for_a_file_that_is_not_a_library) {
    char *dir = make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/libnvidia-ml.so.1", dir);
    write_text(path, "not an ELF file\n");
    tp_nvml_t *n = NULL;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__nvml_open(path, &n, &err), -EIO);
    TP_CHECK_CONTAINS(err.msg, "cannot load NVML");
    rm_tree(dir);
}

TP_TEST(test_nvml_open_uses_tunepack_nvml_lib_when_no_path_is_given) {
    char *dir = make_tmpdir();
    set_four_gpus(dir, "null");
    char lib[512];
    fake_path(lib, sizeof lib, "libnvidia-ml.so.1");
    setenv("TUNEPACK_NVML_LIB", lib, 1);
    tp_nvml_t *n = NULL;
    TP_CHECK_INT(tp__nvml_open(NULL, &n, NULL), 0);
    unsetenv("TUNEPACK_NVML_LIB");
    tp__nvml_close(n);
    rm_tree(dir);
}

TP_TEST(test_nvml_init_error_is_eio_with_nvml_message) {
    char *dir = make_tmpdir();
    set_fake_json(dir, "{\"gpus\": [], \"init_error\": 999}");
    char lib[512];
    fake_path(lib, sizeof lib, "libnvidia-ml.so.1");
    tp_nvml_t *n = NULL;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__nvml_open(lib, &n, &err), -EIO);
    TP_CHECK(n == NULL);
    TP_CHECK_CONTAINS(err.msg, "NVML initialisation failed");
    TP_CHECK_CONTAINS(err.msg, "Unknown Error");
    TP_CHECK_CONTAINS(err.msg, "999");
    /* Unreadable JSON makes the fake answer 999 as well. */
    set_fake_json(dir, "{\"gpus\": [");
    TP_CHECK_INT(tp__nvml_open(lib, &n, &err), -EIO);
    rm_tree(dir);
}

TP_TEST(test_nvml_discovers_four_gpus_with_names_uuids_memory) {
    char *dir = make_tmpdir();
    set_four_gpus(dir, "null");
    tp_nvml_t *n = open_fake(tp_failed_);
    if (!n) {
        rm_tree(dir);
        return;
    }
    tp_gpu_info_t *g = NULL;
    size_t count = 0;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__nvml_gpus(n, &g, &count, &err), 0);
    TP_CHECK_INT(count, 4);
    if (count == 4) {
        const char *names[] = {"NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB",
                               "NVIDIA H100 80GB HBM3", "Tesla T4"};
        const uint64_t total[] = {81920, 81920, 81559, 15360};
        const uint64_t used[] = {2048, 0, 100, 0};
        const unsigned util[] = {12, 0, 97, 5};
        for (unsigned i = 0; i < 4; i++) {
            char uuid[32];
            snprintf(uuid, sizeof uuid, "GPU-fake-%u", i);
            TP_CHECK_INT(g[i].index, i);
            TP_CHECK_STR(g[i].name, names[i]);
            TP_CHECK_STR(g[i].uuid, uuid);
            TP_CHECK_INT(g[i].memory_total_mib, total[i]);
            TP_CHECK_INT(g[i].memory_used_mib, used[i]);
            TP_CHECK_INT(g[i].util_gpu, util[i]);
            TP_CHECK_INT(g[i].healthy, 1);
            TP_CHECK_STR(g[i].error, "");
        }
    }
    free(g);
    tp__nvml_close(n);
    rm_tree(dir);
}

TP_TEST(test_nvml_processes_come_from_the_list_and_the_process_dir) {
    char *dir = make_tmpdir();
    set_four_gpus(dir, "null");
    char path[512];
    snprintf(path, sizeof path, "%s/procs/%d.json", dir, (int)getpid());
    write_text(path, "{\"gpu\": 0, \"used_mib\": 1200, \"sm_util\": 25}");
    pid_t gone = dead_pid();
    snprintf(path, sizeof path, "%s/procs/%d.json", dir, (int)gone);
    write_text(path, "{\"gpu\": 0, \"used_mib\": 999, \"sm_util\": 99}");
    snprintf(path, sizeof path, "%s/procs/notes.txt", dir);
    write_text(path, "not a process");

    tp_nvml_t *n = open_fake(tp_failed_);
    if (!n) {
        rm_tree(dir);
        return;
    }
    tp_gpu_proc_t *p = NULL;
    size_t count = 0;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__nvml_processes(n, 0, &p, &count, &err), 0);
    TP_CHECK_INT(count, 2);
    const tp_gpu_proc_t *foreign = find_proc(p, count, 4242);
    const tp_gpu_proc_t *mine = find_proc(p, count, getpid());
    TP_CHECK(foreign && foreign->used_mib == 2048 && foreign->sm_util == 30);
    TP_CHECK(mine && mine->used_mib == 1200 && mine->sm_util == 25);
    TP_CHECK(find_proc(p, count, gone) == NULL);
    free(p);

    /* The device's used memory counts both. */
    tp_gpu_info_t *g = NULL;
    TP_CHECK_INT(tp__nvml_gpus(n, &g, &count, &err), 0);
    if (count == 4) TP_CHECK_INT(g[0].memory_used_mib, 2048 + 1200);
    free(g);

    /* A GPU with no processes: an empty list, not an error. */
    TP_CHECK_INT(tp__nvml_processes(n, 1, &p, &count, &err), 0);
    TP_CHECK_INT(count, 0);
    free(p);
    TP_CHECK_INT(tp__nvml_processes(n, 2, &p, &count, &err), 0);
    TP_CHECK_INT(count, 1);
    if (count == 1) TP_CHECK(p[0].pid == 4343 && p[0].used_mib == 100 && p[0].sm_util == 80);
    free(p);
    tp__nvml_close(n);
    rm_tree(dir);
}

TP_TEST(test_nvml_rereads_the_state_on_every_call) {
    char *dir = make_tmpdir();
    set_four_gpus(dir, "null");
    tp_nvml_t *n = open_fake(tp_failed_);
    if (!n) {
        rm_tree(dir);
        return;
    }
    tp_gpu_proc_t *p = NULL;
    size_t count = 0;
    TP_CHECK_INT(tp__nvml_processes(n, 3, &p, &count, NULL), 0);
    TP_CHECK_INT(count, 0);
    free(p);
    char path[512];
    snprintf(path, sizeof path, "%s/procs/%d.json", dir, (int)getpid());
    write_text(path, "{\"gpu\": 3, \"used_mib\": 512, \"sm_util\": 40}");
    TP_CHECK_INT(tp__nvml_processes(n, 3, &p, &count, NULL), 0);
    TP_CHECK_INT(count, 1);
    if (count == 1) TP_CHECK(p[0].pid == getpid() && p[0].used_mib == 512);
    free(p);
    tp__nvml_close(n);
    rm_tree(dir);
}

TP_TEST(test_nvml_lost_gpu_is_unhealthy_with_error_and_others_fine) {
    char *dir = make_tmpdir();
    set_four_gpus(dir, "\"lost\"");
    tp_nvml_t *n = open_fake(tp_failed_);
    if (!n) {
        rm_tree(dir);
        return;
    }
    tp_gpu_info_t *g = NULL;
    size_t count = 0;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__nvml_gpus(n, &g, &count, &err), 0);
    TP_CHECK_INT(count, 4);
    if (count == 4) {
        TP_CHECK_INT(g[2].healthy, 0);
        TP_CHECK_CONTAINS(g[2].error, "GPU is lost");
        TP_CHECK_CONTAINS(g[2].error, "15");
        for (int i = 0; i < 4; i++)
            if (i != 2) TP_CHECK(g[i].healthy == 1 && g[i].error[0] == '\0');
        TP_CHECK_STR(g[3].name, "Tesla T4");
    }
    free(g);
    tp_gpu_proc_t *p = NULL;
    TP_CHECK_INT(tp__nvml_processes(n, 2, &p, &count, &err), -EIO);
    TP_CHECK_CONTAINS(err.msg, "GPU is lost");
    TP_CHECK(p == NULL);
    tp__nvml_close(n);
    rm_tree(dir);
}

TP_TEST(test_nvml_process_list_grows_past_its_first_guess) {
    char *dir = make_tmpdir();
    tp_buf_t b;
    tp__buf_init(&b);
    tp__buf_puts(&b, "{\"gpus\": [{\"name\": \"G\", \"uuid\": \"GPU-g\", \"memory_mib\": 100000}],"
                     " \"processes\": [");
    for (int i = 0; i < 40; i++)
        tp__buf_printf(&b, "%s{\"gpu\": 0, \"pid\": %d, \"used_mib\": %d, \"sm_util\": %d}",
                       i ? "," : "", 10000 + i, 100 + i, i % 100);
    tp__buf_puts(&b, "]}");
    set_fake_json(dir, b.data);
    tp__buf_free(&b);
    tp_nvml_t *n = open_fake(tp_failed_);
    if (!n) {
        rm_tree(dir);
        return;
    }
    fake_reset_calls();
    tp_gpu_proc_t *p = NULL;
    size_t count = 0;
    TP_CHECK_INT(tp__nvml_processes(n, 0, &p, &count, NULL), 0);
    TP_CHECK_INT(count, 40);
    int right = 0;
    for (size_t i = 0; i < count; i++) {
        int k = (int)p[i].pid - 10000;
        right +=
            k >= 0 && k < 40 && p[i].used_mib == (uint64_t)(100 + k) && p[i].sm_util == (unsigned)k;
    }
    TP_CHECK_INT(right, 40);
    /* It asked more than once: the first room (16) was too small. */
    TP_CHECK(fake_calls("nvmlDeviceGetComputeRunningProcesses_v3") >= 2);
    free(p);
    tp__nvml_close(n);
    rm_tree(dir);
}

TP_TEST(test_nvml_table_picks_the_newest_versioned_symbols) {
    char *dir = make_tmpdir();
    set_four_gpus(dir, "null");
    tp_nvml_t *n = open_fake(tp_failed_);
    if (!n) {
        rm_tree(dir);
        return;
    }
    TP_CHECK_STR(tp__nvml_symbol(n, "nvmlInit"), "nvmlInit_v2");
    TP_CHECK_STR(tp__nvml_symbol(n, "nvmlDeviceGetCount"), "nvmlDeviceGetCount_v2");
    TP_CHECK_STR(tp__nvml_symbol(n, "nvmlDeviceGetHandleByIndex"), "nvmlDeviceGetHandleByIndex_v2");
    TP_CHECK_STR(tp__nvml_symbol(n, "nvmlDeviceGetComputeRunningProcesses"),
                 "nvmlDeviceGetComputeRunningProcesses_v3");
    TP_CHECK_STR(tp__nvml_symbol(n, "nvmlDeviceGetMemoryInfo"), "nvmlDeviceGetMemoryInfo");
    TP_CHECK(tp__nvml_symbol(n, "nvmlDeviceGetFanSpeed") == NULL);
    /* And those are the ones actually called. */
    fake_reset_calls();
    tp_gpu_proc_t *p = NULL;
    size_t count = 0;
    TP_CHECK_INT(tp__nvml_processes(n, 0, &p, &count, NULL), 0);
    free(p);
    TP_CHECK(fake_calls("nvmlDeviceGetComputeRunningProcesses_v3") >= 1);
    TP_CHECK_INT(fake_calls("nvmlDeviceGetComputeRunningProcesses_v2"), 0);
    TP_CHECK_INT(fake_calls("nvmlDeviceGetComputeRunningProcesses"), 0);
    TP_CHECK(fake_calls("nvmlDeviceGetHandleByIndex_v2") >= 1);
    TP_CHECK_INT(fake_calls("nvmlDeviceGetHandleByIndex"), 0);
    tp__nvml_close(n);
    rm_tree(dir);
}

/* A lookup that plays an older libnvidia-ml: names ending in one of the
 * suffixes in ctx (a NULL-terminated list) are "not exported". */
static void *older_library(void *lib, const char *name, void *ctx) {
    size_t len = strlen(name);
    for (const char *const *hide = ctx; *hide; hide++) {
        size_t h = strlen(*hide);
        if (len >= h && strcmp(name + len - h, *hide) == 0) return NULL;
    }
    return dlsym(lib, name);
}

/* Open through older_library(hide), list GPU 0's processes and check them. */
static void check_older_library(int *tp_failed_, const char *const *hide, const char *expect_sym,
                                const char *lib) {
    tp_nvml_t *n = NULL;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__nvml_open_with(lib, older_library, (void *)hide, &n, &err), 0);
    if (!n) return;
    TP_CHECK_STR(tp__nvml_symbol(n, "nvmlDeviceGetComputeRunningProcesses"), expect_sym);
    fake_reset_calls();
    tp_gpu_proc_t *p = NULL;
    size_t count = 0;
    TP_CHECK_INT(tp__nvml_processes(n, 0, &p, &count, &err), 0);
    TP_CHECK(fake_calls(expect_sym) >= 1);
    /* Three processes: a wrong stride would garble the second and third. */
    TP_CHECK_INT(count, 3);
    const tp_gpu_proc_t *a = find_proc(p, count, 501), *b = find_proc(p, count, 502),
                        *c = find_proc(p, count, 503);
    TP_CHECK(a && a->used_mib == 1000);
    TP_CHECK(b && b->used_mib == 2000);
    TP_CHECK(c && c->used_mib == 3000 && c->sm_util == 33);
    free(p);
    tp__nvml_close(n);
}

TP_TEST(test_nvml_falls_back_to_older_names_with_their_struct_layout) {
    char *dir = make_tmpdir();
    set_fake_json(dir, "{\"gpus\": [{\"name\": \"G\", \"uuid\": \"GPU-g\", \"memory_mib\": 8192}],"
                       " \"processes\": [{\"gpu\": 0, \"pid\": 501, \"used_mib\": 1000},"
                       " {\"gpu\": 0, \"pid\": 502, \"used_mib\": 2000},"
                       " {\"gpu\": 0, \"pid\": 503, \"used_mib\": 3000, \"sm_util\": 33}]}");
    char lib[512];
    fake_path(lib, sizeof lib, "libnvidia-ml.so.1");
    const char *no_v3[] = {"_v3", NULL};
    check_older_library(tp_failed_, no_v3, "nvmlDeviceGetComputeRunningProcesses_v2", lib);
    const char *unversioned[] = {"_v3", "_v2", NULL};
    check_older_library(tp_failed_, unversioned, "nvmlDeviceGetComputeRunningProcesses", lib);

    /* The unversioned library still works end to end. */
    tp_nvml_t *n = NULL;
    TP_CHECK_INT(tp__nvml_open_with(lib, older_library, (void *)unversioned, &n, NULL), 0);
    if (n) {
        TP_CHECK_STR(tp__nvml_symbol(n, "nvmlInit"), "nvmlInit");
        tp_gpu_info_t *g = NULL;
        size_t count = 0;
        TP_CHECK_INT(tp__nvml_gpus(n, &g, &count, NULL), 0);
        TP_CHECK(count == 1 && g[0].memory_used_mib == 6000 && g[0].healthy);
        free(g);
        tp__nvml_close(n);
    }
    rm_tree(dir);
}

TP_TEST(test_nvml_missing_required_symbol_is_eio_naming_it) {
    char *dir = make_tmpdir();
    set_four_gpus(dir, "null");
    char lib[512];
    fake_path(lib, sizeof lib, "libnvidia-ml.so.1");
    const char *hide[] = {"GetMemoryInfo", NULL};
    tp_nvml_t *n = NULL;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__nvml_open_with(lib, older_library, (void *)hide, &n, &err), -EIO);
    TP_CHECK(n == NULL);
    TP_CHECK_CONTAINS(err.msg, "nvmlDeviceGetMemoryInfo");
    /* An optional one may be missing. */
    const char *no_samples[] = {"GetProcessUtilization", "ErrorString", NULL};
    TP_CHECK_INT(tp__nvml_open_with(lib, older_library, (void *)no_samples, &n, &err), 0);
    if (n) {
        tp_gpu_proc_t *p = NULL;
        size_t count = 0;
        TP_CHECK_INT(tp__nvml_processes(n, 0, &p, &count, &err), 0);
        const tp_gpu_proc_t *q = find_proc(p, count, 4242);
        TP_CHECK(q && q->used_mib == 2048 && q->sm_util == 0);
        free(p);
        tp__nvml_close(n);
    }
    rm_tree(dir);
}

TP_TEST(test_gpu_table_shows_each_gpu_and_why_one_is_unhealthy) {
    tp_gpu_info_t g[2] = {
        {.index = 0,
         .name = "NVIDIA A100-SXM4-80GB",
         .uuid = "GPU-fake-0",
         .memory_total_mib = 81920,
         .memory_used_mib = 20480,
         .util_gpu = 12,
         .healthy = 1},
        {.index = 1,
         .name = "Tesla T4",
         .uuid = "GPU-fake-1",
         .healthy = 0,
         .error = "nvmlDeviceGetMemoryInfo: GPU is lost (NVML error 15)"},
    };
    size_t procs[2] = {3, 0};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    tp__gpu_table(f, g, 2, procs);
    fclose(f);
    TP_CHECK_CONTAINS(text, "NVIDIA A100-SXM4-80GB");
    TP_CHECK_CONTAINS(text, "GPU-fake-0");
    TP_CHECK_CONTAINS(text, "20480/81920   25%   12%");
    /* Every label sits over its column: the header's columns end where the rows' do. */
    const char *row = strchr(text, '\n') + 1;
    TP_CHECK_INT((int)(strstr(text, "MEM%") + 4 - text), (int)(strstr(row, "25%") + 3 - row));
    TP_CHECK_INT((int)(strstr(text, "UTIL") + 4 - text), (int)(strstr(row, "12%") + 3 - row));
    TP_CHECK_INT((int)(strstr(text, "/TOTAL") + 6 - text), (int)(strstr(row, "/81920") + 6 - row));
    TP_CHECK_INT((int)(strstr(text, "HEALTH") - text), (int)(strstr(row, "ok") - row));
    TP_CHECK_CONTAINS(text, "UNHEALTHY: nvmlDeviceGetMemoryInfo: GPU is lost");
    free(text);
    f = open_memstream(&text, &len);
    tp__gpu_table(f, NULL, 0, NULL);
    fclose(f);
    TP_CHECK_STR(text, "no GPUs\n");
    free(text);
}

/* ---- MPS ---------------------------------------------------------------------------- */

/* The fake control program appends a line to $TUNEPACK_FAKE_MPS_CALLS for
 * each run ("-d", or "client"): what it says, "" if it never ran. */
static char *fake_mps_calls(const char *path) {
    char *text = NULL;
    if (tp__read_file(path, &text, NULL, NULL) != 0) return tp__strdup("");
    return text;
}

static pid_t read_pid_file(const char *pipe_dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/nvidia-cuda-mps-control.pid", pipe_dir);
    char *text = NULL;
    if (tp__read_file(path, &text, NULL, NULL) != 0) return -1;
    pid_t pid = (pid_t)atoi(text);
    free(text);
    return pid;
}

TP_TEST(test_mps_control_path_prefers_the_env_then_path) {
    char *old_path = tp__strdup(getenv("PATH"));
    setenv("TUNEPACK_MPS_CONTROL", "/opt/x/nvidia-cuda-mps-control", 1);
    char *p = tp__mps_control_path();
    TP_CHECK_STR(p, "/opt/x/nvidia-cuda-mps-control");
    free(p);
    unsetenv("TUNEPACK_MPS_CONTROL");
    char path[1024], expect[512];
    snprintf(path, sizeof path, "/nonexistent:%s:/usr/bin", fake_dir());
    fake_path(expect, sizeof expect, "nvidia-cuda-mps-control");
    setenv("PATH", path, 1);
    p = tp__mps_control_path();
    TP_CHECK_STR(p, expect);
    free(p);
    setenv("PATH", "/nonexistent:/also/not/here", 1);
    p = tp__mps_control_path();
    TP_CHECK(p == NULL);
    free(p);
    if (old_path) setenv("PATH", old_path, 1);
    free(old_path);
}

TP_TEST(test_mps_start_creates_the_pipe_and_logs_the_device_and_stop_quits_it) {
    char *dir = make_tmpdir();
    setenv("TUNEPACK_MPS_WAIT_S", "60", 1); /* a loaded machine starts python slowly */
    char pipe_dir[512], log_dir[512], control[512], fifo[600], log[600], calls[600];
    snprintf(pipe_dir, sizeof pipe_dir, "%s/mps/gpu2/pipe", dir);
    snprintf(log_dir, sizeof log_dir, "%s/mps/gpu2/log", dir);
    snprintf(fifo, sizeof fifo, "%s/control", pipe_dir);
    snprintf(log, sizeof log, "%s/control.log", log_dir);
    snprintf(calls, sizeof calls, "%s/calls", dir);
    fake_path(control, sizeof control, "nvidia-cuda-mps-control");
    setenv("TUNEPACK_FAKE_MPS_CALLS", calls, 1);
    tp_error_t err = {0};
    /* 0, not -ETIMEDOUT: the pipe appeared before the deadline; one run of
     * the control program, as a daemon. */
    int rc = tp__mps_start(control, "2", pipe_dir, log_dir, &err);
    TP_CHECK_INT(rc, 0);
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    char *ran = fake_mps_calls(calls);
    TP_CHECK_STR(ran, "-d\n");
    free(ran);
    struct stat st;
    TP_CHECK(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    char *text = NULL;
    TP_CHECK_INT(tp__read_file(log, &text, NULL, NULL), 0);
    TP_CHECK_CONTAINS(text, "CUDA_VISIBLE_DEVICES=2");
    free(text);
    pid_t daemon = read_pid_file(pipe_dir);
    TP_CHECK(daemon > 0 && !process_gone(daemon));

    /* A second daemon on the same pipe dir is refused, without a run. */
    TP_CHECK_INT(tp__mps_start(control, "2", pipe_dir, log_dir, &err), -EBUSY);
    TP_CHECK_CONTAINS(err.msg, pipe_dir);

    /* 0, not -ETIMEDOUT: the daemon quit on the one client's "quit". */
    rc = tp__mps_stop(control, pipe_dir, &err);
    TP_CHECK_INT(rc, 0);
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    ran = fake_mps_calls(calls);
    TP_CHECK_STR(ran, "-d\nclient\n");
    free(ran);
    unsetenv("TUNEPACK_FAKE_MPS_CALLS");
    TP_CHECK(lstat(fifo, &st) != 0);
    text = NULL;
    TP_CHECK_INT(tp__read_file(log, &text, NULL, NULL), 0);
    TP_CHECK_CONTAINS(text, "command quit");
    TP_CHECK_CONTAINS(text, "] quit\n");
    free(text);
    if (daemon > 0) {
        for (int i = 0; i < 200 && !process_gone(daemon); i++)
            usleep(10000);
        TP_CHECK(process_gone(daemon));
    }
    /* Started again after a stop: fine. Then stopped for good. */
    TP_CHECK_INT(tp__mps_start(control, "2", pipe_dir, log_dir, &err), 0);
    TP_CHECK_INT(tp__mps_stop(control, pipe_dir, &err), 0);
    TP_CHECK(lstat(fifo, &st) != 0);
    unsetenv("TUNEPACK_MPS_WAIT_S");
    rm_tree(dir);
}

TP_TEST(test_mps_stop_is_quick_and_harmless_without_a_live_daemon) {
    char *dir = make_tmpdir();
    char control[512], pipe_dir[512], fifo[600], pidfile[600 + 32], calls[600];
    fake_path(control, sizeof control, "nvidia-cuda-mps-control");
    /* Quick: with no live daemon the control program is never run (and so
     * never waited for); the fake notes each run here. */
    snprintf(calls, sizeof calls, "%s/calls", dir);
    setenv("TUNEPACK_FAKE_MPS_CALLS", calls, 1);
    tp_error_t err = {0};
    snprintf(pipe_dir, sizeof pipe_dir, "%s/never-made", dir);
    TP_CHECK_INT(tp__mps_stop(control, pipe_dir, &err), 0);
    TP_CHECK_INT(tp__mps_stop(control, dir, &err), 0); /* exists, empty */
    /* Left over from a crash: a control FIFO nobody reads, and a pid file
     * naming a dead process. Both are cleaned up. */
    snprintf(fifo, sizeof fifo, "%s/control", dir);
    snprintf(pidfile, sizeof pidfile, "%s/nvidia-cuda-mps-control.pid", dir);
    TP_CHECK_INT(mkfifo(fifo, 0600), 0);
    TP_CHECK_INT(tp__mps_stop(control, dir, &err), 0);
    struct stat st;
    TP_CHECK(lstat(fifo, &st) != 0);
    TP_CHECK_INT(mkfifo(fifo, 0600), 0);
    char text[32];
    snprintf(text, sizeof text, "%d\n", (int)dead_pid());
    write_text(pidfile, text);
    TP_CHECK_INT(tp__mps_stop(NULL, dir, &err), 0); /* no control program needed */
    TP_CHECK(lstat(fifo, &st) != 0 && lstat(pidfile, &st) != 0);
    char *ran = fake_mps_calls(calls);
    TP_CHECK_STR(ran, "");
    free(ran);
    unsetenv("TUNEPACK_FAKE_MPS_CALLS");
    rm_tree(dir);
}

TP_TEST(test_mps_start_reports_a_control_program_that_fails) {
    char *dir = make_tmpdir();
    char pipe_dir[512], log_dir[512];
    snprintf(pipe_dir, sizeof pipe_dir, "%s/pipe", dir);
    snprintf(log_dir, sizeof log_dir, "%s/log", dir);
    tp_error_t err = {0};
    TP_CHECK_INT(
        tp__mps_start("/nonexistent/nvidia-cuda-mps-control", "0", pipe_dir, log_dir, &err),
        -ENOENT);
    TP_CHECK_CONTAINS(err.msg, "/nonexistent/nvidia-cuda-mps-control");
    TP_CHECK_INT(tp__mps_start("/bin/false", "0", pipe_dir, log_dir, &err), -EIO);
    TP_CHECK_CONTAINS(err.msg, "exit status 1");
    TP_CHECK_INT(tp__mps_start(NULL, "0", pipe_dir, log_dir, &err), -EINVAL);
    rm_tree(dir);
}

TP_TEST(test_mps_start_gives_up_after_five_seconds_without_a_pipe) {
    char *dir = make_tmpdir();
    char pipe_dir[512], log_dir[512], fifo[600];
    snprintf(pipe_dir, sizeof pipe_dir, "%s/pipe", dir);
    snprintf(log_dir, sizeof log_dir, "%s/log", dir);
    snprintf(fifo, sizeof fifo, "%s/control", pipe_dir);
    tp_error_t err = {0};
    /* The "daemon" exits at once and never makes a pipe: start gives up
     * with -ETIMEDOUT at its 5 s bound and says which pipe it waited for. */
    TP_CHECK_INT(tp__mps_start("/bin/true", "0", pipe_dir, log_dir, &err), -ETIMEDOUT);
    TP_CHECK_CONTAINS(err.msg, "did not create");
    TP_CHECK_CONTAINS(err.msg, fifo);
    TP_CHECK_CONTAINS(err.msg, "within 5 s");
    rm_tree(dir);
}

TP_TEST(test_mps_start_waits_for_a_daemon_slow_to_make_its_pipe) {
    char *dir = make_tmpdir();
    setenv("TUNEPACK_MPS_WAIT_S", "60", 1); /* a loaded machine starts python slowly */
    char pipe_dir[512], log_dir[512], control[512], fifo[600];
    snprintf(pipe_dir, sizeof pipe_dir, "%s/pipe", dir);
    snprintf(log_dir, sizeof log_dir, "%s/log", dir);
    snprintf(fifo, sizeof fifo, "%s/control", pipe_dir);
    fake_path(control, sizeof control, "nvidia-cuda-mps-control");
    /* The pipe comes a while after `-d` returned: start polls for it rather
     * than judging at the first look (well within its 5 s). */
    setenv("TUNEPACK_FAKE_MPS_PIPE_DELAY_S", "0.3", 1);
    tp_error_t err = {0};
    int rc = tp__mps_start(control, "0", pipe_dir, log_dir, &err);
    unsetenv("TUNEPACK_FAKE_MPS_PIPE_DELAY_S");
    TP_CHECK_INT(rc, 0);
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    struct stat st;
    TP_CHECK(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    TP_CHECK_INT(tp__mps_stop(control, pipe_dir, &err), 0);
    TP_CHECK(lstat(fifo, &st) != 0);
    unsetenv("TUNEPACK_MPS_WAIT_S");
    rm_tree(dir);
}

TP_TEST(test_mps_start_kills_a_control_program_that_does_not_return) {
    char *dir = make_tmpdir();
    char pipe_dir[512], log_dir[512], script[600], pidfile[600];
    snprintf(pipe_dir, sizeof pipe_dir, "%s/pipe", dir);
    snprintf(log_dir, sizeof log_dir, "%s/log", dir);
    snprintf(script, sizeof script, "%s/stuck-control", dir);
    snprintf(pidfile, sizeof pidfile, "%s/stuck.pid", dir);
    /* A `-d` that never forks away: it notes its pid and sleeps in place. */
    char text[1400];
    snprintf(text, sizeof text, "#!/bin/sh\necho $$ > '%s'\nexec sleep 60\n", pidfile);
    write_text(script, text);
    TP_CHECK_INT(chmod(script, 0755), 0);
    tp_error_t err = {0};
    TP_CHECK_INT(tp__mps_start(script, "0", pipe_dir, log_dir, &err), -ETIMEDOUT);
    TP_CHECK_CONTAINS(err.msg, "did not return within 5 s");
    TP_CHECK_CONTAINS(err.msg, "killed it");
    char *pid_text = NULL;
    TP_CHECK_INT(tp__read_file(pidfile, &pid_text, NULL, NULL), 0);
    pid_t stuck = pid_text ? (pid_t)atoi(pid_text) : 0;
    free(pid_text);
    TP_CHECK(stuck > 0 && process_gone(stuck)); /* killed and reaped */
    rm_tree(dir);
}

TP_TEST(test_mps_env_rounds_and_clamps_the_thread_percentage) {
    char out[3][512];
    TP_CHECK_INT(tp__mps_env("/run/mps/0", "0", 0.07, 0, 0, out), 2);
    TP_CHECK_STR(out[0], "CUDA_MPS_PIPE_DIRECTORY=/run/mps/0");
    TP_CHECK_STR(out[1], "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=7"); /* not 8: 0.07*100 > 7 */
    tp__mps_env("/p", "0", 0.29, 0, 0, out);
    TP_CHECK_STR(out[1], "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=29");
    tp__mps_env("/p", "0", 0.251, 0, 0, out);
    TP_CHECK_STR(out[1], "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=26"); /* ceil */
    tp__mps_env("/p", "0", 0.0001, 0, 0, out);
    TP_CHECK_STR(out[1], "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=1");
    tp__mps_env("/p", "0", 1.0, 0, 0, out);
    TP_CHECK_STR(out[1], "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100");
    tp__mps_env("/p", "0", 3.5, 0, 0, out);
    TP_CHECK_STR(out[1], "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=100");
    /* No share declared: no limit, only the pipe directory. */
    TP_CHECK_INT(tp__mps_env("/p", "0", 0, 0, 0, out), 1);
    TP_CHECK_INT(tp__mps_env("/p", "0", -1, 0, 0, out), 1);
    TP_CHECK_INT(tp__mps_env("/p", "0", NAN, 0, 0, out), 1);
}

TP_TEST(test_mps_env_memory_limit_adds_headroom_in_mib) {
    char out[3][512];
    TP_CHECK_INT(tp__mps_env("/p", "0", 0.5, 1000, 0.1, out), 3);
    TP_CHECK_STR(out[1], "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50");
    TP_CHECK_STR(out[2], "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1100M"); /* not 1101 */
    tp__mps_env("/p", "1", 0.5, 1001, 0.1, out);
    TP_CHECK_STR(out[2], "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=1=1102M"); /* 1101.1 rounds up */
    tp__mps_env("/p", "0", 0.5, 81920, 0.1, out);
    TP_CHECK_STR(out[2], "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=90112M");
    tp__mps_env("/p", "0", 0.5, 2048, 0, out);
    TP_CHECK_STR(out[2], "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2048M");
    tp__mps_env("/p", "0", 0.5, 2048, -0.5, out); /* no negative headroom */
    TP_CHECK_STR(out[2], "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2048M");
    /* Memory without a compute share: pipe dir and memory limit. */
    TP_CHECK_INT(tp__mps_env("/p", "0", 0, 4096, 0.25, out), 2);
    TP_CHECK_STR(out[1], "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=5120M");
    /* A pipe dir that does not fit is an error, not a truncated path. */
    char long_dir[600];
    memset(long_dir, 'd', sizeof long_dir - 1);
    long_dir[sizeof long_dir - 1] = '\0';
    TP_CHECK_INT(tp__mps_env(long_dir, "0", 0.5, 10, 0, out), -ENAMETOOLONG);
}

/* ---- out of memory ----------------------------------------------------------------- */
static int oom(const char *line) {
    return tp__gpu_oom_line(line, strlen(line));
}

TP_TEST(test_oom_line_recognises_framework_messages) {
    const char *yes[] = {
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a "
        "total capacity of 79.15 GiB of which 6.75 MiB is free.",
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total "
        "capacity; 13.21 GiB already allocated; 1.05 GiB free; 13.50 GiB reserved in total by "
        "PyTorch)",
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB",
        "RuntimeError: CUDA error: out of memory",
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
        "tensor with shape[8192,8192] and type float on /job:localhost/replica:0/task:0/"
        "device:GPU:0 by allocator GPU_0_bfc",
        "2024-05-01 12:00:00.000000: W tensorflow/core/framework/op_kernel.cc:1828] OP_REQUIRES "
        "failed at matmul_op.cc:57 : RESOURCE_EXHAUSTED: OOM when allocating tensor with "
        "shape[4096,4096] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by "
        "allocator GPU_0_bfc",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
        "allocate 17179869184 bytes.",
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorMemoryAllocation: out of memory",
        "numba.cuda.cudadrv.driver.CudaAPIError: [2] Call to cuMemAlloc results in "
        "CUDA_ERROR_OUT_OF_MEMORY",
    };
    for (size_t i = 0; i < TP_ARRAY_LEN(yes); i++) {
        if (!oom(yes[i])) fprintf(stderr, "  missed: %s\n", yes[i]);
        TP_CHECK(oom(yes[i]));
    }
}

TP_TEST(test_oom_line_ignores_host_memory_and_near_misses) {
    const char *no[] = {
        "OSError: [Errno 12] Cannot allocate memory",
        "fork: Cannot allocate memory (the host is out of memory)",
        "MemoryError: Unable to allocate 8.00 GiB for an array with shape (1073741824,) and data "
        "type float64",
        "RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough "
        "memory: you tried to allocate 1073741824 bytes.",
        "Out of memory: Killed process 1234 (python) total-vm:123456kB",
        "ResourceExhaustedError: OOM when allocating tensor with shape[10] and type float on "
        "/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu",
        "epoch 3: cuda memory 1.2 GiB, out of memory retries: 0",
        "warning: cuda out of memory is lower-case here, which no framework prints",
        "RESOURCE_EXHAUSTED: too many open files",
        "",
    };
    for (size_t i = 0; i < TP_ARRAY_LEN(no); i++) {
        if (oom(no[i])) fprintf(stderr, "  wrongly matched: %s\n", no[i]);
        TP_CHECK(!oom(no[i]));
    }
    TP_CHECK_INT(tp__gpu_oom_line(NULL, 0), 0);
}

TP_TEST(test_oom_line_reads_only_len_bytes) {
    const char *line = "RuntimeError: CUDA out of memory. Tried to allocate";
    size_t cut = strlen("RuntimeError: CUDA out of");
    TP_CHECK_INT(tp__gpu_oom_line(line, cut), 0);
    TP_CHECK_INT(tp__gpu_oom_line(line, strlen(line)), 1);
    /* Not NUL-terminated: a buffer holding exactly the message. */
    char buf[18];
    memcpy(buf, "CUDA out of memory", 18);
    TP_CHECK_INT(tp__gpu_oom_line(buf, sizeof buf), 1);
}

int main(void) {
    return tp_test_main();
}
