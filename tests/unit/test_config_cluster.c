/* config: `cluster:` and --cluster: local, slurm (inside an allocation or
 * asked for), ssh hosts; every mistake located. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "tp_test.h"

#define HEAD "name: a\ncommand: [x]\nmetric: {name: v, mode: max}\n"

static int parse(const char *text, tp_experiment_t *x, tp_error_t *err) {
    memset(err, 0, sizeof *err);
    return tp__experiment_parse("exp.yaml", text, strlen(text), x, err);
}

/* A file with one mistake, and what its message must say. */
typedef struct {
    const char *text, *want;
} mistake_t;

static void expect_mistakes(int *tp_failed_, const mistake_t *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        tp_experiment_t x;
        tp_error_t err;
        int rc = parse(cases[i].text, &x, &err);
        TP_CHECK_INT(rc, -EINVAL);
        if (rc == 0) tp__experiment_free(&x);
        TP_CHECK_CONTAINS(err.msg, cases[i].want);
    }
}

TP_TEST(test_cluster_defaults_to_local) {
    tp_experiment_t x;
    tp_error_t err;
    TP_CHECK_INT(parse(HEAD, &x, &err), 0);
    TP_CHECK_INT(x.cluster.kind, TP_CLUSTER_LOCAL);
    tp__experiment_free(&x);
}

TP_TEST(test_cluster_slurm_inside_an_allocation) {
    tp_experiment_t x;
    tp_error_t err;
    TP_CHECK_INT(parse(HEAD "cluster: slurm\n", &x, &err), 0);
    TP_CHECK_INT(x.cluster.kind, TP_CLUSTER_SLURM);
    TP_CHECK_INT(x.cluster.slurm_request, 0);
    tp__experiment_free(&x);
}

TP_TEST(test_cluster_slurm_request_reads_every_key) {
    tp_experiment_t x;
    tp_error_t err;
    TP_CHECK_INT(parse(HEAD "cluster: {slurm: {partition: gpu, nodes: {min: 1, max: 4}, "
                            "gpus_per_node: 2, cpus_per_node: 8, time: 2h, account: ml, "
                            "extra: [--qos=short]}}\n",
                       &x, &err),
                 0);
    TP_CHECK_STR(err.msg, "");
    TP_CHECK_INT(x.cluster.kind, TP_CLUSTER_SLURM);
    TP_CHECK_INT(x.cluster.slurm_request, 1);
    TP_CHECK_INT(x.cluster.nodes_min, 1);
    TP_CHECK_INT(x.cluster.nodes_max, 4);
    TP_CHECK_INT(x.cluster.gpus_per_node, 2);
    TP_CHECK_INT(x.cluster.cpus_per_node, 8);
    TP_CHECK_STR(x.cluster.partition, "gpu");
    TP_CHECK_STR(x.cluster.account, "ml");
    TP_CHECK_STR(x.cluster.time_limit, "2h");
    TP_CHECK_INT(x.cluster.nextra, 1);
    TP_CHECK_STR(x.cluster.extra[0], "--qos=short");
    tp__experiment_free(&x);
}

TP_TEST(test_cluster_ssh_hosts_and_identity) {
    tp_experiment_t x;
    tp_error_t err;
    TP_CHECK_INT(parse(HEAD "cluster: {ssh: {hosts: [gpu1, gpu2:2222, alice@gpu3], "
                            "identity: /k/id, agent: [/opt/tp/bin/tunepack, agent]}}\n",
                       &x, &err),
                 0);
    TP_CHECK_INT(x.cluster.kind, TP_CLUSTER_SSH);
    TP_CHECK_INT(x.cluster.nhosts, 3);
    TP_CHECK_STR(x.cluster.hosts[1], "gpu2:2222");
    TP_CHECK_STR(x.cluster.hosts[2], "alice@gpu3");
    TP_CHECK_STR(x.cluster.identity, "/k/id");
    TP_CHECK_INT(x.cluster.nagent, 2);
    tp__experiment_free(&x);
}

TP_TEST(test_cluster_ssh_hosts_file) {
    char path[] = "/tmp/tp_hosts_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    fputs("# our nodes\ngpu1\n\n  gpu2:22  # the second\n", f);
    fclose(f);
    char text[512];
    snprintf(text, sizeof text, HEAD "cluster: {ssh: {hosts_file: %s}}\n", path);
    tp_experiment_t x;
    tp_error_t err;
    TP_CHECK_INT(parse(text, &x, &err), 0);
    TP_CHECK_INT(x.cluster.nhosts, 2);
    TP_CHECK_STR(x.cluster.hosts[0], "gpu1");
    TP_CHECK_STR(x.cluster.hosts[1], "gpu2:22");
    tp__experiment_free(&x);
    unlink(path);
}

TP_TEST(test_cluster_command_names_the_node) {
    tp_experiment_t x;
    tp_error_t err;
    TP_CHECK_INT(parse(HEAD "cluster: {command: {nodes: [w1, w2], argv: [docker, exec, -i, "
                            "\"{node}\", tunepack, agent]}}\n",
                       &x, &err),
                 0);
    TP_CHECK_INT(x.cluster.kind, TP_CLUSTER_COMMAND);
    TP_CHECK_INT(x.cluster.nhosts, 2);
    TP_CHECK_STR(x.cluster.agent[3], "{node}");
    tp__experiment_free(&x);
    TP_CHECK_INT(
        parse(HEAD "cluster: {command: {nodes: [w1], argv: [tunepack, agent]}}\n", &x, &err),
        -EINVAL);
    TP_CHECK_CONTAINS(err.msg, "must name the node somewhere with {node}");
}

TP_TEST(test_cluster_mistakes_are_located) {
    static const mistake_t cases[] = {
        {HEAD "cluster: slrum\n",
         "exp.yaml:4:10: unknown cluster \"slrum\"; did you mean \"slurm\"?"},
        {HEAD "cluster: ssh\n", "exp.yaml:4:10: cluster: ssh needs its hosts"},
        {HEAD "cluster: {ssh: {}}\n", "exp.yaml:4:16: cluster.ssh needs hosts"},
        {HEAD "cluster: {ssh: {hosts: [-oProxyCommand=x]}}\n", "is not a host name"},
        {HEAD "cluster: {slurm: {nodes: {min: 4, max: 2}}}\n",
         "nodes.max (2) is below nodes.min (4)"},
        {HEAD "cluster: {slurm: {gpus: 2}}\n", "exp.yaml:4:19: unknown key \"gpus\""},
        {HEAD "cluster: {slurm: {}, ssh: {hosts: [a]}}\n", "cluster takes one kind"},
    };
    expect_mistakes(tp_failed_, cases, sizeof cases / sizeof *cases);
}

TP_TEST(test_checkpoint_root_is_an_absolute_path) {
    tp_experiment_t x;
    tp_error_t err;
    TP_CHECK_INT(parse(HEAD "checkpoint_root: /shared/ckpt\n", &x, &err), 0);
    TP_CHECK_STR(x.checkpoint_root, "/shared/ckpt");
    tp__experiment_free(&x);
    TP_CHECK_INT(parse(HEAD "checkpoint_root: ckpt\n", &x, &err), -EINVAL);
    TP_CHECK_CONTAINS(err.msg, "exp.yaml:4:18: checkpoint_root must be an absolute path");
}

TP_TEST(test_cluster_from_the_command_line) {
    tp_cluster_cfg_t k = {0};
    tp_error_t err = {0};
    TP_CHECK_INT(tp__cluster_cfg_from_arg("ssh:h1,bob@h2:2200", &k, &err), 0);
    TP_CHECK_INT(k.kind, TP_CLUSTER_SSH);
    TP_CHECK_INT(k.nhosts, 2);
    TP_CHECK_STR(k.hosts[1], "bob@h2:2200");
    TP_CHECK_INT(tp__cluster_cfg_from_arg("slurm", &k, &err), 0);
    TP_CHECK_INT(k.kind, TP_CLUSTER_SLURM);
    TP_CHECK_INT(k.nhosts, 0);
    TP_CHECK_INT(tp__cluster_cfg_from_arg("kubernetes", &k, &err), -EINVAL);
    TP_CHECK_CONTAINS(err.msg, "use local, slurm");
    TP_CHECK_INT(tp__cluster_cfg_from_arg("ssh:", &k, &err), -EINVAL);
    tp__cluster_cfg_free(&k);
}

TP_TEST(test_concurrency_is_per_node_unless_a_total_is_given) {
    static const struct {
        const char *text;
        int per_node, total;
    } cases[] = {
        {"", 1, 0},
        {"concurrency: 3\n", 3, 0},
        {"concurrency: {per_node: 2}\n", 2, 0},
        {"concurrency: {per_node: 2, total: 5}\n", 2, 5},
        {"concurrency: {total: 6}\n", 6, 6}, /* no node beyond the total, none less */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char text[256];
        snprintf(text, sizeof text, "%s%s", HEAD, cases[i].text);
        tp_experiment_t x;
        tp_error_t err;
        TP_CHECK_INT(parse(text, &x, &err), 0);
        TP_CHECK_STR(err.msg, "");
        TP_CHECK_INT(x.concurrency, cases[i].per_node);
        TP_CHECK_INT(x.concurrency_total, cases[i].total);
        tp__experiment_free(&x);
    }
}

TP_TEST(test_concurrency_mistakes_are_located) {
    static const mistake_t cases[] = {
        {HEAD "concurrency: {}\n", "exp.yaml:4:14: \"concurrency\" needs per_node or total"},
        {HEAD "concurrency: {per_nod: 2}\n", "exp.yaml:4:15: unknown key \"per_nod\"; did you "
                                             "mean \"per_node\"?"},
        {HEAD "concurrency: {per_node: 4, total: 2}\n",
         "concurrency.per_node (4) is above concurrency.total (2)"},
        {HEAD "concurrency: {total: 0}\n", "\"total\" must be an integer from 1"},
        {HEAD "concurrency: [2]\n", "\"concurrency\" must be a number or a mapping"},
    };
    expect_mistakes(tp_failed_, cases, sizeof cases / sizeof *cases);
}

int main(void) {
    return tp_test_main();
}
