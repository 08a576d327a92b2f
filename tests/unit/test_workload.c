/* sim/workload: data/workloads/sp.yaml loads; spaces expand to the right
 * jobs with the README's profile formulas; clusters have the right shape;
 * a missing or malformed file is an error naming file:line:col; the
 * default path follows $TUNEPACK_DATA_DIR, then the source tree. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/workload.h"
#include "tp_test.h"

static int load(tp_workload_t *w) {
    const char *src = getenv("TUNEPACK_SRC");
    char path[1024];
    snprintf(path, sizeof path, "%s/data/workloads/sp.yaml", src ? src : ".");
    tp_error_t err = {0};
    int rc = tp__workload_load(path, w, &err);
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    return rc;
}

TP_TEST(test_spaces_have_the_study_job_counts) {
    tp_workload_t w;
    TP_REQUIRE(load(&w) == 0);
    static const struct {
        const char *name;
        size_t jobs;
    } want[] = {{"SP1", 96}, {"SP2", 96}, {"SP3", 96}, {"SP4", 384}};
    for (size_t i = 0; i < TP_ARRAY_LEN(want); i++) {
        tp_wl_job_t *jobs = NULL;
        tp_demand_t *d = NULL;
        size_t n = 0;
        TP_CHECK_INT(tp__workload_jobs(&w, want[i].name, &jobs, &d, &n, NULL), 0);
        TP_CHECK_INT(n, want[i].jobs);
        for (size_t k = 0; k < n; k++) {
            TP_CHECK(d[k].gpus == 1 && d[k].compute > 0 && d[k].compute <= 0.9);
            TP_CHECK_INT(d[k].id, k);
        }
        free(jobs);
        free(d);
    }
    tp_error_t err = {0};
    size_t n;
    TP_CHECK(tp__workload_jobs(&w, "SP9", NULL, NULL, &n, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, "SP1, SP2, SP3, SP4");
    tp__workload_free(&w);
}

TP_TEST(test_job_profiles_follow_the_readme_formulas) {
    tp_workload_t w;
    TP_REQUIRE(load(&w) == 0);
    tp_wl_job_t *jobs = NULL;
    tp_demand_t *d = NULL;
    size_t n = 0;
    TP_CHECK_INT(tp__workload_jobs(&w, "SP4", &jobs, &d, &n, NULL), 0);
    /* models x batch sizes x lr: resnet18 (model 2), batch 256 (index 2), first lr */
    const tp_wl_job_t *j = &jobs[2 * 4 * 16 + 2 * 16];
    TP_CHECK_STR(j->model, "resnet18");
    TP_CHECK_INT(j->batch, 256);
    TP_CHECK_NEAR(j->lr, 1e-5, 1e-15);
    TP_CHECK_INT(j->memory_mib, 1000 + 5 * 256);
    TP_CHECK_NEAR(j->time_s, 108 * sqrt(64.0 / 256), 1e-9);
    TP_CHECK_NEAR(j->util, 0.26 * pow(4.0, 0.3), 1e-12);
    TP_CHECK_NEAR(j->gpu_s, j->util * j->time_s, 1e-9);
    TP_CHECK_NEAR(j->host_s, j->time_s - j->gpu_s, 1e-9);
    TP_CHECK_INT(j->cpus, 4);
    TP_CHECK_NEAR(jobs[2 * 4 * 16 + 2 * 16 + 15].lr, 1e-1, 1e-12);
    TP_CHECK_NEAR(d[2 * 4 * 16 + 2 * 16].duration_s, j->time_s, 1e-12);
    TP_CHECK_NEAR(d[2 * 4 * 16 + 2 * 16].compute, j->util, 1e-12);
    /* util is capped at 0.9 */
    tp_wl_model_t m = {.b_ref = 8,
                       .mem_base_mib = 10,
                       .mem_per_sample_mib = 1.5,
                       .time_ref_s = 100,
                       .util_ref = 0.8,
                       .cpus = 2};
    tp_wl_job_t big = tp__workload_profile(&m, 64, 0.01);
    TP_CHECK_NEAR(big.util, 0.9, 1e-12);
    TP_CHECK_INT(big.memory_mib, 106);
    free(jobs);
    free(d);
    tp__workload_free(&w);
}

static void check_cluster(int *tp_failed_, const tp_workload_t *w, const char *name, size_t nodes,
                          size_t gpus, size_t h100) {
    tp_cluster_t c;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__workload_cluster(w, name, &c, &err), 0);
    TP_CHECK_INT(c.nnodes, nodes);
    size_t total = 0, fast = 0;
    for (size_t n = 0; n < c.nnodes; n++)
        for (size_t g = 0; g < c.nodes[n].ngpus; g++) {
            const tp_gpu_t *gpu = &c.nodes[n].gpus[g];
            total++;
            TP_CHECK(gpu->healthy);
            if (strcmp(gpu->type, "h100_80g") == 0) {
                fast++;
                TP_CHECK_NEAR(gpu->speed, 2.0, 0);
                TP_CHECK_INT(gpu->memory_mib, 81920);
                TP_CHECK_INT(c.nodes[n].cpus, 96);
            } else if (strcmp(gpu->type, "a100_40g") == 0) {
                TP_CHECK_INT(gpu->memory_mib, 40960);
                TP_CHECK_INT(c.nodes[n].cpus, 128);
            } else {
                TP_CHECK_STR(gpu->type, "a100_80g");
                TP_CHECK_INT(gpu->memory_mib, 81920);
                TP_CHECK_NEAR(gpu->speed, 1.0, 0);
                TP_CHECK_INT(c.nodes[n].cpus, 128);
            }
        }
    TP_CHECK_INT(total, gpus);
    TP_CHECK_INT(fast, h100);
    TP_CHECK_INT(c.limits.reserve_mib, 512);
    tp__cluster_free(&c);
}

TP_TEST(test_clusters_have_the_right_gpus_and_nodes) {
    tp_workload_t w;
    TP_REQUIRE(load(&w) == 0);
    check_cluster(tp_failed_, &w, "homog_4", 1, 4, 0);
    check_cluster(tp_failed_, &w, "homog_8", 2, 8, 0);
    check_cluster(tp_failed_, &w, "homog_16", 4, 16, 0);
    check_cluster(tp_failed_, &w, "hetero_4h", 2, 4, 4);
    check_cluster(tp_failed_, &w, "hetero_4h6a", 4, 10, 4);
    check_cluster(tp_failed_, &w, "hetero_4h12a", 6, 16, 4);
    tp_cluster_t c;
    TP_CHECK(tp__workload_cluster(&w, "homog_3", &c, NULL) < 0);
    tp__workload_free(&w);
}

TP_TEST(test_bad_workload_file_errors_name_line_and_column) {
    char path[] = "/tmp/tp_wl_XXXXXX";
    int fd = mkstemp(path);
    const char *text =
        "gpu_types:\n  a100_80g: {memory_mib: 81920, speed: 1.0}\n"
        "clusters:\n  c1: {nodes: 1, gpus_per_node: 4, gpu_type: a100_8g, cpus_per_node: 8}\n"
        "models: {}\nspaces: {}\n";
    TP_CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    tp_workload_t w;
    tp_error_t err = {0};
    TP_CHECK(tp__workload_load(path, &w, &err) < 0);
    TP_CHECK_CONTAINS(err.msg, ":4:");
    TP_CHECK_CONTAINS(
        err.msg,
        "clusters.c1.gpu_type \"a100_8g\" is not in gpu_types; did you mean \"a100_80g\"?");
    unlink(path);
}

/* Write text to a fresh temporary file; path receives its name. */
static int write_temp(char *path, const char *text) {
    int fd = mkstemp(path);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

static const char *const good_head =
    "gpu_types:\n  a100_80g: {memory_mib: 81920, speed: 1.0}\n"
    "clusters:\n  c1: {nodes: 1, gpus_per_node: 4, gpu_type: a100_80g, cpus_per_node: 8}\n"
    "models:\n";

TP_TEST(test_missing_workload_file_is_an_error_naming_the_path) {
    tp_workload_t w;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__workload_load("/nonexistent/tp/sp.yaml", &w, &err), -ENOENT);
    TP_CHECK_STR(err.msg, "/nonexistent/tp/sp.yaml: No such file or directory");
    TP_CHECK_INT(w.nmodels, 0);
    tp__workload_free(&w); /* harmless after a failed load */
}

TP_TEST(test_model_source_must_be_assumed_or_measured_at_its_line) {
    static const struct {
        const char *row;
        const char *where;
        const char *what;
    } bad[] = {
        {"  m1: {b_ref: 64, mem_base_mib: 1, mem_per_sample_mib: 1, time_ref_s: 1, util_ref: 0.5, "
         "cpus: 1, source: guessed}\n",
         ":6:106: ", "models.m1.source must be assumed or measured, got \"guessed\""},
        {"  m1: {b_ref: 64, mem_base_mib: 1, mem_per_sample_mib: 1, time_ref_s: 1, util_ref: 0.5, "
         "cpus: 1}\n",
         ":6:7: ", "models.m1.source is missing; give assumed or measured"},
        {"  m1: {b_ref: 64, mem_base_mib: lots, mem_per_sample_mib: 1, time_ref_s: 1, util_ref: "
         "0.5, cpus: 1, source: assumed}\n",
         ":6:33: ", "models.m1.mem_base_mib must be a number in [0, 1e+09], got \"lots\""},
    };
    for (size_t i = 0; i < TP_ARRAY_LEN(bad); i++) {
        char text[1024], path[] = "/tmp/tp_wl_src_XXXXXX";
        snprintf(text, sizeof text, "%s%sspaces: {}\n", good_head, bad[i].row);
        TP_REQUIRE(write_temp(path, text) == 0);
        tp_workload_t w;
        tp_error_t err = {0};
        TP_CHECK_INT(tp__workload_load(path, &w, &err), -EINVAL);
        char want[1200];
        snprintf(want, sizeof want, "%s%s%s", path, bad[i].where, bad[i].what);
        TP_CHECK_STR(err.msg, want);
        unlink(path);
    }
}

TP_TEST(test_measured_and_assumed_sources_load) {
    char path[] = "/tmp/tp_wl_ok_XXXXXX";
    char text[1024];
    snprintf(text, sizeof text, "%s%s%sspaces: {}\n", good_head,
             "  m1: {b_ref: 64, mem_base_mib: 1, mem_per_sample_mib: 1, time_ref_s: 1, util_ref: "
             "0.5, cpus: 1, source: measured}\n",
             "  m2: {b_ref: 64, mem_base_mib: 1, mem_per_sample_mib: 1, time_ref_s: 1, util_ref: "
             "0.5, cpus: 1, source: assumed}\n");
    TP_REQUIRE(write_temp(path, text) == 0);
    tp_workload_t w;
    tp_error_t err = {0};
    TP_CHECK_INT(tp__workload_load(path, &w, &err), 0);
    TP_REQUIRE(w.nmodels == 2);
    TP_CHECK_STR(w.models[0].source, "measured");
    TP_CHECK_STR(w.models[1].source, "assumed");
    tp__workload_free(&w);
    unlink(path);
}

TP_TEST(test_project_workload_marks_every_model_assumed) {
    tp_workload_t w;
    TP_REQUIRE(load(&w) == 0);
    TP_CHECK_INT(w.nmodels, 9);
    for (size_t i = 0; i < w.nmodels; i++)
        TP_CHECK_STR(w.models[i].source, "assumed");
    tp__workload_free(&w);
}

TP_TEST(test_default_workload_path_follows_tunepack_data_dir_then_the_source_tree) {
    char path[4096];
    const char *old = getenv("TUNEPACK_DATA_DIR");
    char saved[4096] = "";
    if (old) snprintf(saved, sizeof saved, "%s", old);
    setenv("TUNEPACK_DATA_DIR", "/opt/tp-data", 1);
    TP_CHECK_INT(tp__workload_default_path(path, sizeof path), 0);
    TP_CHECK_STR(path, "/opt/tp-data/workloads/sp.yaml");
    char tiny[8];
    TP_CHECK_INT(tp__workload_default_path(tiny, sizeof tiny), -ENAMETOOLONG);
    unsetenv("TUNEPACK_DATA_DIR");
    /* a test binary has no share/tunepack beside it: the source tree's data/ */
    TP_CHECK_INT(tp__workload_default_path(path, sizeof path), 0);
    const char *src = getenv("TUNEPACK_SRC");
    if (src) {
        char want[4096];
        snprintf(want, sizeof want, "%s/data/workloads/sp.yaml", src);
        TP_CHECK_STR(path, want);
    }
    TP_CHECK(access(path, R_OK) == 0);
    if (old) setenv("TUNEPACK_DATA_DIR", saved, 1);
}

int main(void) {
    return tp_test_main();
}
