/* agents: the orchestrator's links to its agents, one per node: the local
 * agent, one per ssh host (`ssh -o BatchMode=yes HOST tunepack agent`), or
 * one per node of a Slurm allocation (`srun --overlap -N1 -n1 -w NODE
 * tunepack agent`). The protocol runs over each command's stdin/stdout;
 * authentication belongs to the transport (ssh keys, munge).
 *
 * A lost agent's attempts are interrupted (the orchestrator places them
 * again elsewhere) and the agent is started again: at once for the local
 * agent, up to MAX_RESTARTS times in a row; after a growing delay for a
 * remote node, for as long as another node keeps the run going. */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"

#define MAX_RESTARTS 3      /* losses in a row before a node is given up */
#define RETRY_FIRST_MS 1000 /* a remote node is tried again after this, doubling */
#define RETRY_MAX_MS 30000
#define HEARTBEAT_S 2.0    /* pings each way; the agent hears one at least this often */
#define SILENCE_S 10.0     /* an agent silent this long (a cut link) is taken for lost */
#define HEARTBEAT_SLOTS 20 /* the period is cut in this many ticks; each agent has one */

/* ---- the plan: which agents ---------------------------------------------------- */
static char **argv_dup(char *const *v) {
    size_t n = 0;
    while (v[n])
        n++;
    char **out = tp__xcalloc(n + 1, sizeof *out);
    for (size_t i = 0; i < n; i++)
        out[i] = tp__strdup(v[i]);
    return out;
}

static void argv_free(char **v) {
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* A new link (its own allocation: libuv holds pointers into it). */
static tp_agent_link_t *add_link(tp_agents_t *a, const char *name) {
    a->links = tp__xrealloc(a->links, (a->n + 1) * sizeof *a->links);
    tp_agent_link_t *l = tp__xcalloc(1, sizeof *l);
    a->links[a->n] = l;
    l->node = (int)a->n++;
    l->closed = 1;
    snprintf(l->name, sizeof l->name, "%s", name);
    return l;
}

/* The command that runs an agent on a node: the experiment's `agent`, else
 * this binary's own path (the same install on every node), then "agent". */
static void agent_words(const tp_run_t *r, const char **w, size_t *k) {
    if (r->x.cluster.nagent) {
        for (size_t i = 0; i < r->x.cluster.nagent; i++)
            w[(*k)++] = r->x.cluster.agent[i];
    } else {
        w[(*k)++] = r->agents.exe;
        w[(*k)++] = "agent";
    }
}

/* ssh [options] -- HOST <agent>: the agent on an ssh host ([user@]host[:port]). */
static char **ssh_argv(const tp_run_t *r, const char *spec) {
    const tp_cluster_cfg_t *k = &r->x.cluster;
    char host[256], port[16] = "";
    snprintf(host, sizeof host, "%s", spec);
    char *colon = strrchr(host, ':');
    if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
        snprintf(port, sizeof port, "%.15s", colon + 1);
        *colon = 0;
    }
    const char *w[64];
    size_t n = 0;
    w[n++] = "ssh";
    w[n++] = "-o";
    w[n++] = "BatchMode=yes"; /* never a password prompt */
    w[n++] = "-o";
    w[n++] = "ServerAliveInterval=5";
    w[n++] = "-o";
    w[n++] = "ServerAliveCountMax=3";
    if (k->ssh_config) w[n++] = "-F", w[n++] = k->ssh_config;
    if (k->identity) w[n++] = "-i", w[n++] = k->identity;
    if (port[0]) w[n++] = "-p", w[n++] = port;
    w[n++] = "--";
    w[n++] = host;
    agent_words(r, w, &n);
    w[n] = NULL;
    return argv_dup((char *const *)w);
}

/* cluster: command: the argv with {node} replaced. */
static char **command_argv(const tp_run_t *r, const char *node) {
    const tp_cluster_cfg_t *k = &r->x.cluster;
    char **argv = tp__xcalloc(k->nagent + 1, sizeof *argv);
    for (size_t j = 0; j < k->nagent; j++) {
        tp_buf_t b;
        tp__buf_init(&b);
        for (const char *p = k->agent[j]; *p;) {
            const char *at = strstr(p, "{node}");
            size_t n = at ? (size_t)(at - p) : strlen(p);
            tp__buf_append(&b, p, n);
            if (!at) break;
            tp__buf_append(&b, node, strlen(node));
            p = at + 6;
        }
        argv[j] = tp__buf_steal(&b);
    }
    return argv;
}

/* srun ... -w NODE <agent>: the agent as a step of Slurm job `job` on NODE. */
static char **srun_argv(const tp_run_t *r, const char *job, const char *node) {
    char jobopt[64];
    snprintf(jobopt, sizeof jobopt, "--jobid=%s", job);
    const char *w[64];
    size_t n = 0;
    w[n++] = "srun";
    w[n++] = "--unbuffered"; /* else srun holds output until a newline: frames stall */
    w[n++] = "--overlap";    /* beside other steps, and beside the placeholder of our own job */
    w[n++] = jobopt;
    w[n++] = "--nodes=1";
    w[n++] = "--ntasks=1";
    w[n++] = "--nodelist";
    w[n++] = node;
    w[n++] = "--kill-on-bad-exit=1";
    w[n++] = "--quiet";
    agent_words(r, w, &n);
    w[n] = NULL;
    return argv_dup((char *const *)w);
}

char **tp__agents_argv(const tp_run_t *r, const char *name, const char *job) {
    switch (r->x.cluster.kind) {
    case TP_CLUSTER_SSH:
        return ssh_argv(r, name);
    case TP_CLUSTER_COMMAND:
        return command_argv(r, name);
    case TP_CLUSTER_SLURM:
        return srun_argv(r, job, name);
    case TP_CLUSTER_LOCAL:
        break;
    }
    char *w[] = {(char *)r->agents.exe, "agent", NULL};
    return argv_dup(w);
}

/* One link per node of Slurm job `job` (node list as Slurm writes it). */
static int plan_slurm_nodes(tp_run_t *r, const char *job, const char *nodelist) {
    char **nodes;
    size_t count;
    tp_error_t err = {0};
    if (tp__slurm_nodes(nodelist, &nodes, &count, &err) != 0) {
        tp__log(TP_LOG_ERROR, "cannot list the nodes of Slurm job %s: %s", job, err.msg);
        return TP_EXIT_AGENT;
    }
    for (size_t i = 0; i < count; i++) {
        tp_agent_link_t *l = add_link(&r->agents, nodes[i]);
        l->argv = srun_argv(r, job, nodes[i]);
        snprintf(l->job, sizeof l->job, "%s", job);
        free(nodes[i]);
    }
    free(nodes);
    return 0;
}

/* See orchestrator_internal.h. */
tp_slurm_request_t tp__agents_slurm_request(const tp_cluster_cfg_t *k, int nodes,
                                            const char *exclude) {
    return (tp_slurm_request_t){.nodes = nodes,
                                .gpus_per_node = k->gpus_per_node,
                                .cpus_per_node = k->cpus_per_node,
                                .partition = k->partition,
                                .account = k->account,
                                .time_limit = k->time_limit,
                                .extra = k->extra,
                                .nextra = k->nextra,
                                .exclude = exclude};
}

/* Ask Slurm for the allocation and wait for it, saying why it waits. */
static int request_allocation(tp_run_t *r, char *nodelist, size_t n) {
    const tp_cluster_cfg_t *k = &r->x.cluster;
    tp_slurm_request_t q = tp__agents_slurm_request(k, k->nodes_min, NULL);
    tp_error_t err = {0};
    if (tp__slurm_request(&q, r->agents.jobid, sizeof r->agents.jobid, &err) != 0) {
        tp__log(TP_LOG_ERROR, "Slurm refused the allocation: %s", err.msg);
        return TP_EXIT_AGENT;
    }
    r->agents.own_job = 1;
    char last[300] = "";
    for (;;) {
        char state[64], reason[200];
        if (tp__slurm_job_state(r->agents.jobid, state, sizeof state, reason, sizeof reason,
                                nodelist, n, &err) != 0) {
            tp__log(TP_LOG_ERROR, "Slurm job %s: %s", r->agents.jobid, err.msg);
            return TP_EXIT_AGENT;
        }
        if (strcmp(state, "RUNNING") == 0) break;
        if (strcmp(state, "PENDING") != 0 && strcmp(state, "CONFIGURING") != 0) {
            tp__log(TP_LOG_ERROR, "Slurm job %s is %s (%s), not running", r->agents.jobid, state,
                    reason);
            return TP_EXIT_AGENT;
        }
        char now[300];
        snprintf(now, sizeof now, "Slurm job %s %s: %s", r->agents.jobid,
                 strcmp(state, "PENDING") == 0 ? "pending" : "configuring", reason);
        if (strcmp(now, last) != 0) tp__log(TP_LOG_INFO, "%s", now);
        snprintf(last, sizeof last, "%s", now);
        if (r->stopping) return TP_EXIT_STOPPED;
        uv_sleep(500);
    }
    tp__log(TP_LOG_INFO, "Slurm job %s running on %s", r->agents.jobid, nodelist);
    return 0;
}

/* A trial over more nodes than the cluster has would wait forever. */
static int check_nodes(tp_run_t *r) {
    if ((size_t)r->x.res.nodes <= r->agents.n) return 0;
    fprintf(stderr,
            "%s: each trial spans %d nodes (resources.nodes) but the cluster has %zu (%s); "
            "run on more nodes, or use procs_per_node to run the processes on one\n",
            r->x.path, r->x.res.nodes, r->agents.n, tp__cluster_kind_name(r->x.cluster.kind));
    return TP_EXIT_CONFIG;
}

static int plan(tp_run_t *r);

int tp__agents_plan(tp_run_t *r) {
    int rc = plan(r);
    return rc ? rc : check_nodes(r);
}

static int plan(tp_run_t *r) {
    tp_agents_t *a = &r->agents;
    size_t len = sizeof a->exe;
    if (uv_exepath(a->exe, &len) != 0) snprintf(a->exe, sizeof a->exe, "/proc/self/exe");
    switch (r->x.cluster.kind) {
    case TP_CLUSTER_LOCAL:
        add_link(a, "local")->argv = tp__agents_argv(r, "local", NULL);
        return 0;
    case TP_CLUSTER_SSH:
    case TP_CLUSTER_COMMAND:
        for (size_t i = 0; i < r->x.cluster.nhosts; i++)
            add_link(a, r->x.cluster.hosts[i])->argv =
                tp__agents_argv(r, r->x.cluster.hosts[i], NULL);
        return 0;
    case TP_CLUSTER_SLURM: {
        char nodelist[4096];
        if (r->x.cluster.slurm_request) {
            int rc = request_allocation(r, nodelist, sizeof nodelist);
            if (rc) return rc;
        } else {
            const char *job = getenv("SLURM_JOB_ID"), *list = getenv("SLURM_JOB_NODELIST");
            if (!job || !*job || !list || !*list) {
                tp__log(TP_LOG_ERROR,
                        "cluster: slurm runs inside an allocation (salloc ... tunepack run, or "
                        "an sbatch script), and SLURM_JOB_ID is not set here; or let tunepack "
                        "ask for one: cluster: {slurm: {nodes: 2}}");
                return TP_EXIT_CONFIG;
            }
            snprintf(a->jobid, sizeof a->jobid, "%s", job);
            snprintf(nodelist, sizeof nodelist, "%s", list);
        }
        return plan_slurm_nodes(r, a->jobid, nodelist);
    }
    }
    return 0;
}

/* ---- links ---------------------------------------------------------------------- */
static int start_link(tp_agent_link_t *l);

/* A message from the link's agent, decoded once (proto) and handed on to
 * the one handler table (messages.c). A malformed one (a member missing or
 * of the wrong type) is a protocol error, as a bad frame is: the agent is
 * taken for lost (on_lost: its trials run again), for a guess at what it
 * meant (an `exited` without its code) would be worse. */
static void on_msg(tp_agent_conn_t *c, const tp_msg_t *m) {
    tp_agent_link_t *l = c->data;
    l->heard_at = tp__mono_s();
    tp_agent_msg_t am;
    tp_error_t err = {0};
    if (tp__proto_decode(m, &am, &err) != 0) {
        char why[sizeof err.msg + 32];
        snprintf(why, sizeof why, "protocol error from the agent: %s", err.msg);
        tp__conn_kill(c, why);
        return;
    }
    if (am.kind == TP_MSG_PONG && am.pong.has_t)
        tp__samples_add(&l->run->rtt_ms, (l->heard_at - am.pong.t) * 1000.0);
    if (am.kind == TP_MSG_HELLO) l->restarts = 0;
    if (am.kind == TP_MSG_BYE) l->said_bye = 1; /* it ends as asked: given back */
    if (am.kind != TP_MSG_PONG) tp__orchestrator_on_msg(l->run, l->node, &am);
    tp__proto_agent_msg_free(&am);
}

static int links_up(const tp_run_t *r) {
    int up = 0;
    for (size_t i = 0; i < r->agents.n; i++)
        up += r->agents.links[i]->up;
    return up;
}

static int links_open(const tp_run_t *r) {
    int open = 0;
    for (size_t i = 0; i < r->agents.n; i++)
        open += !r->agents.links[i]->closed;
    return open;
}

static void on_retry(uv_timer_t *h) {
    tp_agent_link_t *l = h->data;
    tp_run_t *r = l->run;
    if (r->finished || r->agents.shutting_down || l->up) return;
    if (start_link(l) != 0 && !links_up(r)) {
        r->exit_code = TP_EXIT_AGENT;
        tp__orchestrator_finish(r);
    }
}

/* Give back the one-node Slurm job that held a retired node. */
static void release_job(tp_agent_link_t *l) {
    if (!l->own_job) return;
    tp_error_t err = {0};
    if (tp__slurm_release(l->job, &err) != 0)
        tp__log(TP_LOG_WARN, "could not give back Slurm job %s (%s): %s", l->job, l->name, err.msg);
    l->own_job = 0;
}

static void on_closed(tp_agent_conn_t *c) {
    tp_agent_link_t *l = c->data;
    tp_run_t *r = l->run;
    l->closed = 1;
    r->agents.nodes_dirty = 1;
    if (r->finished) return;
    if (r->agents.shutting_down) {
        if (!links_open(r)) tp__orchestrator_finish(r);
        return;
    }
    if (l->retired) {
        release_job(l);
        if (!links_open(r) && !r->agents.grow_job[0]) {
            tp__log(TP_LOG_ERROR, "no node is left to run the experiment");
            r->exit_code = TP_EXIT_AGENT;
            r->agents.shutting_down = 1;
            tp__orchestrator_finish(r);
        }
        return;
    }
    int local = r->x.cluster.kind == TP_CLUSTER_LOCAL;
    if (l->restarts > MAX_RESTARTS && !links_up(r)) {
        /* No node is left to run the experiment. */
        r->exit_code = TP_EXIT_AGENT;
        r->agents.shutting_down = 1;
        if (!links_open(r)) tp__orchestrator_finish(r);
        return;
    }
    if (local) {
        if (start_link(l) != 0) {
            r->exit_code = TP_EXIT_AGENT;
            tp__orchestrator_finish(r);
        }
        return;
    }
    /* A remote node: try again later, less often the more it fails. */
    uint64_t ms = RETRY_FIRST_MS;
    for (int i = 1; i < l->restarts && ms < RETRY_MAX_MS; i++)
        ms *= 2;
    if (ms > RETRY_MAX_MS) ms = RETRY_MAX_MS;
    uv_timer_start(&l->retry, on_retry, ms, 0);
}

static void on_lost(tp_agent_conn_t *c, const char *why) {
    tp_agent_link_t *l = c->data;
    tp_run_t *r = l->run;
    l->ready = 0;
    l->up = 0;
    r->agents.nodes_dirty = 1;
    if (l->retired) {
        tp__orchestrator_on_agent_lost(r, l->node, why); /* nothing should run there */
    } else if (!r->agents.shutting_down) {
        l->restarts++;
        int local = r->x.cluster.kind == TP_CLUSTER_LOCAL;
        int give_up = local && l->restarts > MAX_RESTARTS;
        tp__log(TP_LOG_WARN, "lost the agent on %s (%s)%s", l->name, why,
                give_up ? "; giving up"
                : local ? "; starting a new one"
                        : "; its trials run elsewhere, and it is tried again later");
        tp__orchestrator_on_agent_lost(r, l->node, why);
        if (give_up) {
            r->exit_code = TP_EXIT_AGENT;
            r->agents.shutting_down = 1;
        }
    }
    tp__conn_close(c, on_closed);
}

static int start_link(tp_agent_link_t *l) {
    tp_run_t *r = l->run;
    tp_error_t err = {0};
    l->ready = 0;
    int local = r->x.cluster.kind == TP_CLUSTER_LOCAL;
    int rc = tp__launch_argv(&r->loop, l->argv, local, &l->conn, on_msg, on_lost, l, &err);
    if (rc != 0) {
        tp__log(TP_LOG_ERROR, "%s: %s", l->name, err.msg);
        return rc;
    }
    l->up = 1;
    l->closed = 0;
    l->said_bye = 0;
    l->heard_at = tp__mono_s();
    /* Each node's agent reaps its predecessor's leftovers by token: on a
     * cluster the token names the node too, so that nodes sharing one
     * process table (containers, namespaces) never reap each other's. */
    char token[200];
    if (r->x.cluster.kind == TP_CLUSTER_LOCAL) {
        snprintf(token, sizeof token, "%s", r->token);
    } else {
        int k = snprintf(token, sizeof token, "%s-", r->token);
        for (const char *p = l->name; *p && k + 1 < (int)sizeof token; p++)
            token[k++] = (char)(isalnum((unsigned char)*p) ? *p : '_');
        token[k] = 0;
    }
    json_t *m =
        json_pack("{s:s, s:i, s:s, s:s, s:f}", "type", "hello", "protocol", TP_PROTO_VERSION,
                  "token", token, "node", l->name, "heartbeat_s", HEARTBEAT_S);
    rc = tp__conn_send(&l->conn, m, NULL, 0);
    json_decref(m);
    return rc;
}

/* Ping every agent that is up; one silent for SILENCE_S (a cut link, a
 * frozen node: nothing that closes the stream) is taken for lost. */
/* Every HEARTBEAT_S / HEARTBEAT_SLOTS: ping the agents whose turn it is
 * (each once per HEARTBEAT_S, spread over the period so that a hundred nodes
 * do not all answer at the same instant); one silent for SILENCE_S (a cut
 * link, a frozen node: nothing that closes the stream) is taken for lost.
 * Once per period, the node bookkeeping of nodes.c. */
static void on_heartbeat(uv_timer_t *h) {
    tp_run_t *r = h->data;
    if (r->finished) return;
    tp_agents_t *a = &r->agents;
    size_t slot = a->heartbeat_tick++ % HEARTBEAT_SLOTS;
    double now = tp__mono_s();
    json_t *ping = json_pack("{s:s, s:f}", "type", "ping", "t", now);
    for (size_t i = slot; i < a->n; i += HEARTBEAT_SLOTS) {
        tp_agent_link_t *l = a->links[i];
        if (!l->up || l->conn.lost || l->conn.closing) continue;
        if (now - l->heard_at > SILENCE_S) {
            char why[96];
            snprintf(why, sizeof why, "no word from it for %.0fs", now - l->heard_at);
            tp__conn_kill(&l->conn, why);
        } else {
            tp__conn_send(&l->conn, ping, NULL, 0);
        }
    }
    json_decref(ping);
    if (slot == 0) tp__nodes_tick(r);
}

void tp__agents_running(const tp_run_t *r, int *counts, int processes) {
    memset(counts, 0, r->agents.n * sizeof *counts);
    for (size_t i = 0; i < tp__trials_n(&r->trials); i++) {
        const trial_t *t = tp__trials_get(&r->trials, (int64_t)i);
        if (!t || t->state != TP_TRIAL_RUNNING) continue;
        if (processes && tp__fuse_of(t) && tp__fuse_member(r, tp__fuse_of(t), -1) != t) continue;
        for (size_t k = 0; k < tp__trial_nshards(r, t); k++) {
            size_t node = tp__trial_shard(t, k)->node;
            if (node < r->agents.n) counts[node]++;
        }
    }
}

int tp__agents_add(tp_run_t *r, const char *name, char **argv, const char *job, int own_job) {
    tp_agent_link_t *l = add_link(&r->agents, name);
    l->argv = argv;
    l->run = r;
    snprintf(l->job, sizeof l->job, "%s", job ? job : "");
    l->own_job = own_job;
    uv_timer_init(&r->loop, &l->retry);
    l->retry.data = l;
    tp__placement_add_node(r, name);
    r->agents.nodes_dirty = 1;
    if (start_link(l) != 0) uv_timer_start(&l->retry, on_retry, RETRY_FIRST_MS, 0);
    return l->node;
}

void tp__agents_retire(tp_run_t *r, int node) {
    if (node < 0 || (size_t)node >= r->agents.n) return;
    tp_agent_link_t *l = r->agents.links[node];
    if (l->retired) return;
    l->retired = 1;
    l->ready = 0;
    r->agents.nodes_dirty = 1;
    uv_timer_stop(&l->retry);
    json_t *m = json_pack("{s:s}", "type", "shutdown");
    if (!l->up || tp__conn_send(&l->conn, m, NULL, 0) != 0) {
        if (!l->closed)
            tp__conn_close(&l->conn, on_closed);
        else
            release_job(l);
    }
    json_decref(m);
}

int tp__agents_start(tp_run_t *r) {
    int started = 0;
    uv_timer_init(&r->loop, &r->agents.heartbeat);
    r->agents.heartbeat.data = r;
    uint64_t ms = (uint64_t)(HEARTBEAT_S * 1000 / HEARTBEAT_SLOTS);
    uv_timer_start(&r->agents.heartbeat, on_heartbeat, ms, ms);
    for (size_t i = 0; i < r->agents.n; i++) {
        tp_agent_link_t *l = r->agents.links[i];
        l->run = r;
        uv_timer_init(&r->loop, &l->retry);
        l->retry.data = l;
        if (start_link(l) == 0) started++;
    }
    return started ? 0 : -EIO;
}

int tp__agents_send(tp_run_t *r, int node, const json_t *m) {
    if (node < 0 || (size_t)node >= r->agents.n) return -EINVAL;
    tp_agent_link_t *l = r->agents.links[node];
    return l->up ? tp__conn_send(&l->conn, m, NULL, 0) : -ENOTCONN;
}

int tp__agents_open(const tp_run_t *r) {
    int open = 0;
    for (size_t i = 0; i < r->agents.n; i++)
        open += r->agents.links[i]->ready && !r->agents.links[i]->draining;
    return open;
}

tp_agent_link_t *tp__agents_link(const tp_run_t *r, size_t node) {
    assert(node < r->agents.n);
    return r->agents.links[node];
}

size_t tp__agents_n(const tp_run_t *r) {
    return r->agents.n;
}

int tp__agents_shutting_down(const tp_run_t *r) {
    return r->agents.shutting_down;
}

int tp__agents_ready(const tp_run_t *r) {
    int ready = 0;
    for (size_t i = 0; i < r->agents.n; i++)
        ready += r->agents.links[i]->ready;
    return ready;
}

void tp__agents_mark_ready(tp_run_t *r, int node) {
    if (node < 0 || (size_t)node >= r->agents.n || r->agents.links[node]->retired) return;
    r->agents.links[node]->ready = 1;
    r->agents.nodes_dirty = 1;
}

void tp__agents_shutdown(tp_run_t *r) {
    if (r->agents.shutting_down) return;
    r->agents.shutting_down = 1;
    uv_timer_stop(&r->agents.heartbeat);
    json_t *m = json_pack("{s:s}", "type", "shutdown");
    int open = 0;
    for (size_t i = 0; i < r->agents.n; i++) {
        tp_agent_link_t *l = r->agents.links[i];
        uv_timer_stop(&l->retry);
        if (l->up && tp__conn_send(&l->conn, m, NULL, 0) == 0)
            open++;
        else if (!l->closed)
            tp__conn_close(&l->conn, on_closed);
    }
    json_decref(m);
    if (!open && !links_open(r)) tp__orchestrator_finish(r);
}

/* Give back the Slurm job tunepack asked for, once. */
static void give_back(tp_run_t *r) {
    if (r->agents.own_job) {
        tp_error_t err = {0};
        if (tp__slurm_release(r->agents.jobid, &err) != 0)
            tp__log(TP_LOG_WARN, "could not give back Slurm job %s: %s", r->agents.jobid, err.msg);
        else
            tp__log(TP_LOG_INFO, "gave back Slurm job %s", r->agents.jobid);
        r->agents.own_job = 0;
    }
}

void tp__agents_close(tp_run_t *r) {
    for (size_t i = 0; i < r->agents.n; i++) {
        if (!r->agents.links[i]->closed) tp__conn_close(&r->agents.links[i]->conn, NULL);
        release_job(r->agents.links[i]);
    }
    if (r->agents.grow_job[0]) { /* asked, never used */
        tp_error_t err = {0};
        tp__slurm_release(r->agents.grow_job, &err);
        r->agents.grow_job[0] = 0;
    }
    give_back(r);
}

void tp__agents_free(tp_run_t *r) {
    give_back(r);
    for (size_t i = 0; i < r->agents.n; i++) {
        argv_free(r->agents.links[i]->argv);
        free(r->agents.links[i]);
    }
    free(r->agents.links);
    r->agents.links = NULL;
    r->agents.n = 0;
}
