/* nodes: the set of nodes while an experiment runs.
 *
 * - `tunepack nodes drain NODE` and `tunepack nodes add HOST` leave a request
 *   in DIR/requests/; every heartbeat the orchestrator acts on it and answers
 *   in NAME.done. A drained node takes no new trials and its agent is shut
 *   down once its trials have ended.
 * - With cluster: {slurm: {nodes: {min, max}}} tunepack grows its allocation
 *   while trials wait for room (a one-node job at a time, its queue state
 *   said as it changes) and gives back a grown node idle for `idle`.
 * - Every node's state goes to the store (meta "nodes") for `tunepack nodes`,
 *   and each join and leave is an event. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"

/* A node's state in words. "released": its agent ended as asked (the run
 * ended or was stopped, or an idle grown node went back to Slurm); "lost":
 * it ended on its own (it died, or its link was cut). */
static const char *node_state(const tp_agent_link_t *l) {
    if (l->retired) return l->closed ? (l->draining ? "drained" : "released") : "leaving";
    if (l->said_bye) return l->up ? "leaving" : "released";
    if (l->draining) return "draining";
    if (l->ready) return "up";
    if (l->up) return "starting";
    return "lost";
}

/* Trials running per node, for this tick (freed by the caller). */
static int *running_counts(const tp_run_t *r) {
    int *counts = tp__xcalloc(tp__agents_n(r) + 1, sizeof *counts);
    tp__agents_running(r, counts, 0);
    return counts;
}

void tp__nodes_journal(tp_run_t *r) {
    int *running = running_counts(r);
    json_t *list = json_array();
    for (size_t i = 0; i < tp__agents_n(r); i++) {
        const tp_agent_link_t *l = tp__agents_link(r, i);
        const tp_node_t *n =
            i < tp__placement_cluster(r)->nnodes ? &tp__placement_cluster(r)->nodes[i] : NULL;
        json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:i, s:i}", "name", l->name, "state",
                              node_state(l), "cpus", n ? n->cpus : 0, "gpus", n ? (int)n->ngpus : 0,
                              "running", running[i], "restarts", l->restarts);
        if (l->job[0]) json_object_set_new(o, "slurm_job", json_string(l->job));
        if (i < tp__placement_cluster(r)->nnodes)
            json_object_set_new(o, "memory_mib",
                                json_integer(tp__placement_node(r, i)->memory_mib));
        json_array_append_new(list, o);
    }
    free(running);
    char *text = json_dumps(list, JSON_COMPACT);
    tp__journal_ok(&r->journal, tp__store_meta_set(tp__journal_tx(&r->journal), "nodes", text),
                   "recording the nodes");
    free(text);
    json_decref(list);
    r->agents.nodes_dirty = 0;
}

static void event(tp_run_t *r, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void event(tp_run_t *r, const char *kind, const char *fmt, ...) {
    char detail[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    tp__log(TP_LOG_INFO, "%s", detail);
    tp__journal_ok(&r->journal,
                   tp__store_event(tp__journal_tx(&r->journal), -1, 0, kind, detail, tp__wall_s()),
                   "recording a node event");
}

static int node_by_name(const tp_run_t *r, const char *name) {
    for (size_t i = 0; i < tp__agents_n(r); i++)
        if (strcmp(tp__agents_link(r, i)->name, name) == 0) return (int)i;
    return -1;
}

int tp__nodes_concurrency(const tp_run_t *r) {
    int open = tp__agents_open(r);
    long long cap = (long long)r->x.concurrency * (open > 1 ? open : 1);
    if (r->x.concurrency_total && cap > r->x.concurrency_total) cap = r->x.concurrency_total;
    return (int)cap;
}

/* Trials that wait for room: pending ones that did not fit, or that every
 * node's concurrency holds back (not concurrency.total: another node would
 * not let them run); while the nodes are full the search is not asked, so
 * its next job counts as one. */
static int waiting(const tp_run_t *r) {
    int pending = (int)tp__trials_queued(&r->trials);
    int cap = tp__nodes_concurrency(r);
    if (tp__fuse_slots_used(r) >= cap && (!r->x.concurrency_total || cap < r->x.concurrency_total))
        return pending ? pending : !r->exhausted && !r->sched_waiting;
    return !tp__placement_may_fit(r) ? pending : 0;
}

/* ---- requests from `tunepack nodes` ---------------------------------------------- */
static int drain(tp_run_t *r, const char *name, char *msg, size_t n) {
    int k = node_by_name(r, name);
    if (k < 0) return snprintf(msg, n, "no node named \"%s\" in this experiment", name), -ENOENT;
    tp_agent_link_t *l = tp__agents_link(r, k);
    if (l->draining || l->retired)
        return snprintf(msg, n, "%s is already %s", name, node_state(l)), 0;
    l->draining = 1;
    r->agents.nodes_dirty = 1;
    int *counts = running_counts(r), running = counts[k];
    free(counts);
    event(r, "node-drain", "draining %s: no new trials; %d running finish there", name, running);
    snprintf(msg, n, "draining %s: %d trial(s) running there finish, no new ones start", name,
             running);
    return 0;
}

static int add(tp_run_t *r, const char *name, char *msg, size_t n) {
    if (r->x.cluster.kind != TP_CLUSTER_SSH && r->x.cluster.kind != TP_CLUSTER_COMMAND)
        return snprintf(msg, n, "nodes can be added to ssh and command clusters; this one is %s%s",
                        tp__cluster_kind_name(r->x.cluster.kind),
                        r->x.cluster.kind == TP_CLUSTER_SLURM
                            ? " (let it grow with cluster: {slurm: {nodes: {min, max}}})"
                            : ""),
               -EINVAL;
    if (!*name || *name == '-' || strpbrk(name, " \t\n"))
        return snprintf(msg, n, "\"%s\" is not a host name; write [user@]host[:port]", name),
               -EINVAL;
    int k = node_by_name(r, name);
    if (k >= 0 && !tp__agents_link(r, k)->retired)
        return snprintf(msg, n, "%s is already a node of this experiment (%s)", name,
                        node_state(tp__agents_link(r, k))),
               -EEXIST;
    tp__agents_add(r, name, tp__agents_argv(r, name, NULL), NULL, 0);
    event(r, "node-added", "added node %s", name);
    snprintf(msg, n, "added %s: its agent is starting", name);
    return 0;
}

/* Act on each DIR/requests/NAME.json ({"op": "drain"|"add", "node": ...},
 * {"op": "resize", "trial", "gpus"} from `tunepack resize`, or {"op": "plan"}
 * from `tunepack plan`) and answer in
 * NAME.done ({"ok", "message"}). */
static void requests(tp_run_t *r) {
    char dirpath[4200];
    snprintf(dirpath, sizeof dirpath, "%s/requests", r->dir);
    DIR *d = opendir(dirpath);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len < 6 || strcmp(de->d_name + len - 5, ".json") != 0) continue;
        char path[4500], done[4500], msg[400] = "";
        snprintf(path, sizeof path, "%s/%s", dirpath, de->d_name);
        snprintf(done, sizeof done, "%s/%.*s.done", dirpath, (int)(len - 5), de->d_name);
        json_t *req = json_load_file(path, 0, NULL);
        const char *op = json_string_value(json_object_get(req, "op"));
        const char *node = json_string_value(json_object_get(req, "node"));
        int rc;
        if (op && strcmp(op, "resize") == 0)
            rc = tp__elastic_request(r, req, msg, sizeof msg);
        else if (op && strcmp(op, "plan") == 0) /* `tunepack plan` left DIR/plan.json */
            rc = tp__plans_take(r, msg, sizeof msg);
        else if (!op || !node)
            rc = -EINVAL, snprintf(msg, sizeof msg, "a request needs \"op\" and \"node\"");
        else if (strcmp(op, "drain") == 0)
            rc = drain(r, node, msg, sizeof msg);
        else if (strcmp(op, "add") == 0)
            rc = add(r, node, msg, sizeof msg);
        else
            rc = -EINVAL, snprintf(msg, sizeof msg, "unknown request \"%s\"", op);
        json_decref(req);
        json_t *ans = json_pack("{s:b, s:s}", "ok", rc == 0, "message", msg);
        char tmp[4600];
        snprintf(tmp, sizeof tmp, "%s.tmp", done);
        if (json_dump_file(ans, tmp, 0) == 0) rename(tmp, done);
        json_decref(ans);
        unlink(path);
    }
    closedir(d);
}

/* ---- a growing and shrinking Slurm allocation ------------------------------------ */
static int held_nodes(const tp_run_t *r) {
    int n = 0;
    for (size_t i = 0; i < tp__agents_n(r); i++)
        n += !tp__agents_link(r, i)->retired;
    return n;
}

static void grow(tp_run_t *r) {
    tp_agents_t *a = &r->agents;
    const tp_cluster_cfg_t *k = &r->x.cluster;
    tp_error_t err = {0};
    if (a->grow_job[0]) { /* asked: is it there yet? */
        char state[64], reason[200], nodelist[1024];
        if (tp__slurm_job_state(a->grow_job, state, sizeof state, reason, sizeof reason, nodelist,
                                sizeof nodelist, &err) != 0) {
            event(r, "node-request-failed", "Slurm job %s for one more node: %s", a->grow_job,
                  err.msg);
            a->grow_job[0] = 0;
            return;
        }
        if (strcmp(state, "RUNNING") == 0) {
            char **nodes;
            size_t count;
            if (tp__slurm_nodes(nodelist, &nodes, &count, &err) == 0) {
                for (size_t i = 0; i < count; i++) {
                    tp__agents_add(r, nodes[i], tp__agents_argv(r, nodes[i], a->grow_job),
                                   a->grow_job, 1);
                    event(r, "node-added",
                          "added node %s (Slurm job %s) after %.0fs; %d trial(s) "
                          "waiting, %d node(s) held",
                          nodes[i], a->grow_job, tp__mono_s() - a->grow_asked, waiting(r),
                          held_nodes(r));
                    free(nodes[i]);
                }
                free(nodes);
            }
            a->grow_job[0] = 0;
            a->grow_state[0] = 0;
        } else if (strcmp(state, "PENDING") == 0 || strcmp(state, "CONFIGURING") == 0) {
            char now[400];
            snprintf(now, sizeof now, "Slurm job %s (one more node) %s: %s", a->grow_job,
                     strcmp(state, "PENDING") == 0 ? "pending" : "configuring", reason);
            if (strcmp(now, a->grow_state) != 0) tp__log(TP_LOG_INFO, "%s", now);
            snprintf(a->grow_state, sizeof a->grow_state, "%s", now);
        } else {
            event(r, "node-request-failed", "Slurm job %s for one more node is %s (%s)",
                  a->grow_job, state, reason);
            a->grow_job[0] = 0;
        }
        return;
    }
    if (waiting(r) == 0 || held_nodes(r) >= k->nodes_max || r->stopping) return;
    char held[2048] = "";
    size_t len = 0;
    for (size_t i = 0; i < a->n && len + 1 < sizeof held; i++) {
        if (a->links[i]->retired) continue;
        int w = snprintf(held + len, sizeof held - len, "%s%s", len ? "," : "", a->links[i]->name);
        if (w > 0) len += (size_t)w;
    }
    tp_slurm_request_t q = tp__agents_slurm_request(k, 1, held);
    if (tp__slurm_request(&q, a->grow_job, sizeof a->grow_job, &err) != 0) {
        tp__log(TP_LOG_WARN, "could not ask Slurm for one more node: %s", err.msg);
        a->grow_job[0] = 0;
        return;
    }
    a->grow_asked = tp__mono_s();
    event(r, "node-requested",
          "asked Slurm for one more node (job %s): %d trial(s) waiting, %d "
          "node(s) held",
          a->grow_job, waiting(r), held_nodes(r));
}

/* Give back grown nodes (of the first n, whose running trials are counted in
 * running) that have had nothing to do for cluster.slurm.idle while no trial
 * waits, keeping at least nodes.min. */
static void shrink(tp_run_t *r, const int *running, size_t n) {
    double now = tp__mono_s();
    for (size_t i = 0; i < n; i++) {
        tp_agent_link_t *l = tp__agents_link(r, i);
        if (!l->own_job || l->retired || !l->ready) continue;
        if (running[i] > 0 || waiting(r) > 0) {
            l->idle_since = 0;
            continue;
        }
        if (l->idle_since == 0) l->idle_since = now;
        if (now - l->idle_since < r->x.cluster.idle_s || held_nodes(r) <= r->x.cluster.nodes_min)
            continue;
        event(r, "node-released",
              "gave back node %s (Slurm job %s), idle for %.0fs; %d node(s) "
              "held",
              l->name, l->job, now - l->idle_since, held_nodes(r) - 1);
        tp__agents_retire(r, (int)i);
    }
}

void tp__nodes_tick(tp_run_t *r) {
    if (r->finished || tp__agents_shutting_down(r)) return;
    requests(r);
    int *running = running_counts(r);
    for (size_t i = 0; i < tp__agents_n(r); i++) { /* drained nodes leave once idle */
        tp_agent_link_t *l = tp__agents_link(r, i);
        if (l->draining && !l->retired && running[i] == 0) {
            event(r, "node-drained", "%s is drained: its agent ends", l->name);
            tp__agents_retire(r, (int)i);
        }
    }
    const tp_cluster_cfg_t *k = &r->x.cluster;
    if (k->kind == TP_CLUSTER_SLURM && k->slurm_request && k->nodes_max > k->nodes_min) {
        size_t n = tp__agents_n(r); /* the nodes `running` counts; grow may add one */
        grow(r);
        shrink(r, running, n);
    }
    free(running);
    /* On a cluster the list (with each node's running trials) is kept fresh. */
    if (r->agents.nodes_dirty || k->kind != TP_CLUSTER_LOCAL) tp__nodes_journal(r);
}
