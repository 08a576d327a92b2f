/* agents: the orchestrator's links to its agents. Starts the agent, says
 * hello, hands its messages to the orchestrator, and when an agent is lost
 * tells the orchestrator (its attempts are interrupted) and starts a new
 * one, up to MAX_AGENT_RESTARTS times. Today there is one local agent, the
 * cluster's node 0; agents started over ssh or srun are more links. */
#include <stdio.h>
#include <string.h>

#include "run/orchestrator_internal.h"
#include "run/run.h"

#define MAX_AGENT_RESTARTS 3

static void on_msg(tp_agent_conn_t *c, const tp_msg_t *m) {
    tp_agent_link_t *link = c->data;
    tp__orchestrator_on_msg(link->run, 0, m);
}

static void on_closed(tp_agent_conn_t *c) {
    tp_agent_link_t *link = c->data;
    tp_run_t *r = link->run;
    if (r->finished) return;
    if (r->agents.shutting_down || link->restarts > MAX_AGENT_RESTARTS) {
        tp__orchestrator_finish(r);
        return;
    }
    if (tp__agents_start(r) != 0) {
        r->exit_code = TP_EXIT_AGENT;
        tp__orchestrator_finish(r);
    }
}

static void on_lost(tp_agent_conn_t *c, const char *why) {
    tp_agent_link_t *link = c->data;
    tp_run_t *r = link->run;
    link->ready = 0;
    if (!r->agents.shutting_down) {
        link->restarts++;
        int give_up = link->restarts > MAX_AGENT_RESTARTS;
        tp__log(TP_LOG_WARN, "lost the agent (%s)%s", why,
                give_up ? "; giving up" : "; starting a new one");
        tp__orchestrator_on_agent_lost(r, 0, why);
        if (give_up) {
            r->exit_code = TP_EXIT_AGENT;
            r->agents.shutting_down = 1;
        }
    }
    tp__conn_close(c, on_closed);
}

int tp__agents_start(tp_run_t *r) {
    tp_agent_link_t *link = &r->agents.link;
    if (!r->agents.exe[0]) {
        size_t len = sizeof r->agents.exe;
        if (uv_exepath(r->agents.exe, &len) != 0)
            snprintf(r->agents.exe, sizeof r->agents.exe, "/proc/self/exe");
    }
    link->run = r;
    link->ready = 0;
    tp_error_t err = {0};
    int rc = tp__launch_local(&r->loop, r->agents.exe, &link->conn, on_msg, on_lost, link, &err);
    if (rc != 0) {
        tp__log(TP_LOG_ERROR, "%s", err.msg);
        return rc;
    }
    json_t *m = json_pack("{s:s, s:i, s:s}", "type", "hello", "protocol", TP_PROTO_VERSION,
                          "token", r->token);
    rc = tp__conn_send(&link->conn, m, NULL, 0);
    json_decref(m);
    return rc;
}

int tp__agents_send(tp_run_t *r, int node, const json_t *m) {
    (void)node; /* one agent today */
    return tp__conn_send(&r->agents.link.conn, m, NULL, 0);
}

int tp__agents_ready(const tp_run_t *r) {
    return r->agents.link.ready;
}

void tp__agents_mark_ready(tp_run_t *r, int node) {
    (void)node;
    r->agents.link.ready = 1;
}

void tp__agents_shutdown(tp_run_t *r) {
    if (r->agents.shutting_down) return;
    r->agents.shutting_down = 1;
    json_t *m = json_pack("{s:s}", "type", "shutdown");
    if (tp__agents_send(r, 0, m) != 0) tp__orchestrator_finish(r);
    json_decref(m);
}

void tp__agents_close(tp_run_t *r) {
    tp__conn_close(&r->agents.link.conn, NULL);
}
