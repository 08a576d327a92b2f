/* messages: each kind of message an agent sends the orchestrator, decoded
 * once into its struct (proto.h, docs/protocol.md). Every kind is a table of
 * members (name, JSON type, required, where it goes), so that one loop
 * checks them all and names the kind and member a malformed one gets wrong. */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/proto.h"

typedef enum ftype {
    F_INT,  /* JSON integer into int */
    F_I64,  /* JSON integer into int64_t */
    F_U64,  /* JSON integer >= 0 into uint64_t */
    F_NUM,  /* JSON number into double */
    F_STR,  /* JSON string into const char *, borrowed */
    F_BOOL, /* JSON true or false into int */
} ftype_t;

/* One member of a kind: where its value goes in the kind's struct. */
typedef struct field {
    const char *name; /* the JSON member */
    ftype_t type;     /* what it must be */
    int required;     /* absent is an error (else the struct keeps its default) */
    size_t at;        /* offsetof in the struct */
} field_t;

static const char *json_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

static const char *const want_name[] = {
    [F_INT] = "an integer", [F_I64] = "an integer", [F_U64] = "a non-negative integer",
    [F_NUM] = "a number",   [F_STR] = "a string",   [F_BOOL] = "a boolean",
};

/* The members of o per fields[0..n) into out (a struct of the kind). kind
 * and in ("gpus[2]." or "") name the place in an error. O(n). */
static int decode_fields(const json_t *o, const char *kind, const char *in, const field_t *fields,
                         size_t n, void *out, tp_error_t *err) {
    char *base = out;
    for (size_t i = 0; i < n; i++) {
        const field_t *f = &fields[i];
        const json_t *v = json_object_get(o, f->name);
        if (!v) {
            if (!f->required) continue;
            return tp__errorf(err, -EPROTO, "protocol: %s: member \"%s%s\" is missing", kind, in,
                              f->name);
        }
        int ok = 0;
        json_int_t x = json_is_integer(v) ? json_integer_value(v) : 0;
        switch (f->type) {
        case F_INT:
            ok = json_is_integer(v) && x >= INT_MIN && x <= INT_MAX;
            if (ok) *(int *)(base + f->at) = (int)x;
            break;
        case F_I64:
            ok = json_is_integer(v);
            if (ok) *(int64_t *)(base + f->at) = (int64_t)x;
            break;
        case F_U64:
            ok = json_is_integer(v) && x >= 0;
            if (ok) *(uint64_t *)(base + f->at) = (uint64_t)x;
            break;
        case F_NUM:
            ok = json_is_number(v);
            if (ok) *(double *)(base + f->at) = json_number_value(v);
            break;
        case F_STR:
            ok = json_is_string(v);
            if (ok) *(const char **)(base + f->at) = json_string_value(v);
            break;
        case F_BOOL:
            ok = json_is_boolean(v);
            if (ok) *(int *)(base + f->at) = json_is_true(v);
            break;
        }
        if (!ok && json_is_integer(v) && (f->type == F_INT || f->type == F_U64))
            return tp__errorf(err, -EPROTO,
                              "protocol: %s: member \"%s%s\" is %lld, out of range for %s", kind,
                              in, f->name, (long long)x, want_name[f->type]);
        if (!ok)
            return tp__errorf(err, -EPROTO, "protocol: %s: member \"%s%s\" must be %s, not %s",
                              kind, in, f->name, want_name[f->type], json_type_name(v));
    }
    return 0;
}

#define NFIELDS(arr) (sizeof(arr) / sizeof(arr)[0])

/* An array of objects, each decoded per fields into elements of `size`
 * bytes initialised from `init`: *out (owned, NULL when empty) and *n. An
 * absent array is empty unless required. O(elements x fields). */
static int decode_array(const json_t *head, const char *kind, const char *name, int required,
                        const field_t *fields, size_t nfields, size_t size, const void *init,
                        void **out, size_t *n, tp_error_t *err) {
    *out = NULL, *n = 0;
    const json_t *a = json_object_get(head, name);
    if (!a) {
        if (!required) return 0;
        return tp__errorf(err, -EPROTO, "protocol: %s: member \"%s\" is missing", kind, name);
    }
    if (!json_is_array(a))
        return tp__errorf(err, -EPROTO, "protocol: %s: member \"%s\" must be an array, not %s",
                          kind, name, json_type_name(a));
    size_t len = json_array_size(a);
    char *elems = len ? tp__xcalloc(len, size) : NULL;
    for (size_t i = 0; i < len; i++) {
        const json_t *e = json_array_get(a, i);
        char in[96];
        snprintf(in, sizeof in, "%s[%zu].", name, i);
        memcpy(elems + i * size, init, size);
        if (!json_is_object(e)) {
            free(elems);
            return tp__errorf(err, -EPROTO,
                              "protocol: %s: member \"%s[%zu]\" must be an object, "
                              "not %s",
                              kind, name, i, json_type_name(e));
        }
        int rc = decode_fields(e, kind, in, fields, nfields, elems + i * size, err);
        if (rc != 0) {
            free(elems);
            return rc;
        }
    }
    *out = elems, *n = len;
    return 0;
}

/* ---- each kind ----------------------------------------------------------------- */
#define F(st, name, type, req)                                                                     \
    { #name, type, req, offsetof(st, name) }

static int decode_hello(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    static const field_t top[] = {
        F(tp_msg_hello_t, protocol, F_INT, 1),     F(tp_msg_hello_t, node, F_STR, 1),
        F(tp_msg_hello_t, cpus, F_INT, 1),         F(tp_msg_hello_t, memory_mib, F_U64, 0),
        F(tp_msg_hello_t, pid, F_I64, 0),          F(tp_msg_hello_t, version, F_STR, 0),
        F(tp_msg_hello_t, reaped, F_I64, 0),       F(tp_msg_hello_t, nvml, F_STR, 0),
        F(tp_msg_hello_t, mps_control, F_BOOL, 0),
    };
    static const field_t gpu[] = {
        F(tp_msg_hello_gpu_t, index, F_INT, 1),
        F(tp_msg_hello_gpu_t, name, F_STR, 0),
        F(tp_msg_hello_gpu_t, uuid, F_STR, 0),
        F(tp_msg_hello_gpu_t, memory_mib, F_U64, 0),
        F(tp_msg_hello_gpu_t, memory_used_mib, F_U64, 0),
        F(tp_msg_hello_gpu_t, util, F_INT, 0),
        F(tp_msg_hello_gpu_t, healthy, F_BOOL, 0),
        F(tp_msg_hello_gpu_t, error, F_STR, 0),
    };
    static const tp_msg_hello_gpu_t gpu0 = {.util = -1};
    tp_msg_hello_t *o = &am->hello;
    int rc = decode_fields(h, "hello", "", top, NFIELDS(top), o, err);
    if (rc == 0)
        rc = decode_array(h, "hello", "gpus", 0, gpu, NFIELDS(gpu), sizeof *o->gpus, &gpu0,
                          (void **)&o->gpus, &o->ngpus, err);
    return rc;
}

static int decode_mps(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    static const field_t failure[] = {
        F(tp_msg_mps_failure_t, index, F_INT, 1),
        F(tp_msg_mps_failure_t, error, F_STR, 1),
    };
    static const tp_msg_mps_failure_t failure0 = {0};
    tp_msg_mps_t *o = &am->mps;
    return decode_array(h, "mps", "failed", 0, failure, NFIELDS(failure), sizeof *o->failed,
                        &failure0, (void **)&o->failed, &o->nfailed, err);
}

static int decode_usage(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    static const field_t gpu[] = {
        F(tp_msg_usage_gpu_t, index, F_INT, 1), F(tp_msg_usage_gpu_t, foreign_mib, F_U64, 1),
        F(tp_msg_usage_gpu_t, util, F_INT, 1),  F(tp_msg_usage_gpu_t, healthy, F_BOOL, 1),
        F(tp_msg_usage_gpu_t, error, F_STR, 0),
    };
    static const field_t trial[] = {
        F(tp_msg_usage_trial_t, trial, F_I64, 1),   F(tp_msg_usage_trial_t, attempt, F_I64, 1),
        F(tp_msg_usage_trial_t, gpu, F_INT, 1),     F(tp_msg_usage_trial_t, used_mib, F_U64, 1),
        F(tp_msg_usage_trial_t, sm_util, F_INT, 1),
    };
    static const tp_msg_usage_gpu_t gpu0 = {0};
    static const tp_msg_usage_trial_t trial0 = {0};
    tp_msg_usage_t *o = &am->usage;
    int rc = decode_array(h, "usage", "gpus", 1, gpu, NFIELDS(gpu), sizeof *o->gpus, &gpu0,
                          (void **)&o->gpus, &o->ngpus, err);
    if (rc == 0)
        rc = decode_array(h, "usage", "trials", 1, trial, NFIELDS(trial), sizeof *o->trials,
                          &trial0, (void **)&o->trials, &o->ntrials, err);
    if (rc == 0) o->gpus_json = json_object_get(h, "gpus");
    return rc;
}

static int decode_error(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    static const field_t top[] = {F(tp_msg_error_t, message, F_STR, 1)};
    return decode_fields(h, "error", "", top, NFIELDS(top), &am->error, err);
}

static int decode_pong(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    static const field_t top[] = {F(tp_msg_pong_t, t, F_NUM, 0)};
    am->pong.has_t = json_object_get(h, "t") != NULL;
    return decode_fields(h, "pong", "", top, NFIELDS(top), &am->pong, err);
}

static int decode_report(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    static const field_t top[] = {F(tp_msg_report_t, channel, F_STR, 1)};
    int rc = decode_fields(h, "report", "", top, NFIELDS(top), &am->report, err);
    if (rc == 0) am->report.kv = strcmp(am->report.channel, "stdout") == 0;
    return rc;
}

static int decode_garbage(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    static const field_t top[] = {
        F(tp_msg_garbage_t, channel, F_STR, 1),
        F(tp_msg_garbage_t, what, F_STR, 1),
    };
    return decode_fields(h, "garbage", "", top, NFIELDS(top), &am->garbage, err);
}

static int decode_log(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    static const field_t top[] = {F(tp_msg_log_t, stream, F_STR, 1)};
    int rc = decode_fields(h, "log", "", top, NFIELDS(top), &am->log, err);
    if (rc == 0) am->log.is_stderr = strcmp(am->log.stream, "stderr") == 0;
    return rc;
}

static int decode_started(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    static const field_t top[] = {
        F(tp_msg_started_t, pid, F_I64, 1),
        F(tp_msg_started_t, master_port, F_INT, 0),
    };
    return decode_fields(h, "started", "", top, NFIELDS(top), &am->started, err);
}

int tp__proto_exited(const json_t *head, tp_exited_t *e, tp_error_t *err) {
    static const field_t top[] = {
        F(tp_exited_t, status, F_STR, 0),     F(tp_exited_t, code, F_INT, 0),
        F(tp_exited_t, signal, F_INT, 0),     F(tp_exited_t, error, F_STR, 0),
        F(tp_exited_t, duration_s, F_NUM, 0), F(tp_exited_t, oom, F_BOOL, 0),
        F(tp_exited_t, maxrss_mib, F_NUM, 0), F(tp_exited_t, cpu_s, F_NUM, 0),
    };
    static const char *const names[] = {
        [TP_ENDED_EXITED] = "exited",   [TP_ENDED_SIGNALED] = "signaled",
        [TP_ENDED_TIMEOUT] = "timeout", [TP_ENDED_STOPPED] = "stopped",
        [TP_ENDED_PAUSED] = "paused",   [TP_ENDED_SPAWN_FAILED] = "spawn_failed",
    };
    tp_exited_t d = {.status = "exited", .code = -1, .error = ""};
    int rc = decode_fields(head, "exited", "", top, NFIELDS(top), &d, err);
    if (rc != 0) return rc;
    d.ended = TP_ENDED_UNKNOWN;
    for (int i = 0; i < TP_ENDED_UNKNOWN; i++)
        if (strcmp(d.status, names[i]) == 0) d.ended = (tp_ended_t)i;
    *e = d;
    return 0;
}

static int decode_exited(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    return tp__proto_exited(h, &am->exited, err);
}

static int decode_nothing(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    (void)h, (void)am, (void)err;
    return 0;
}

/* The kinds an agent sends (docs/protocol.md, "Agent to orchestrator"). */
static const struct kind {
    const char *type;   /* the message's "type" */
    tp_msg_kind_t kind; /* what it decodes to */
    int about;          /* about an attempt: trial, attempt, rank */
    int (*decode)(const json_t *h, tp_agent_msg_t *am, tp_error_t *err);
} kinds[] = {
    {"hello", TP_MSG_HELLO, 0, decode_hello},    {"mps", TP_MSG_MPS, 0, decode_mps},
    {"usage", TP_MSG_USAGE, 0, decode_usage},    {"error", TP_MSG_ERROR, 0, decode_error},
    {"bye", TP_MSG_BYE, 0, decode_nothing},      {"pong", TP_MSG_PONG, 0, decode_pong},
    {"report", TP_MSG_REPORT, 1, decode_report}, {"garbage", TP_MSG_GARBAGE, 1, decode_garbage},
    {"log", TP_MSG_LOG, 1, decode_log},          {"started", TP_MSG_STARTED, 1, decode_started},
    {"exited", TP_MSG_EXITED, 1, decode_exited},
};

int tp__proto_decode(const tp_msg_t *m, tp_agent_msg_t *out, tp_error_t *err) {
    static const field_t about[] = {
        F(tp_msg_about_t, trial, F_I64, 1),
        F(tp_msg_about_t, attempt, F_I64, 1),
        F(tp_msg_about_t, rank, F_INT, 0),
    };
    memset(out, 0, sizeof *out);
    out->raw = m;
    for (size_t i = 0; i < TP_ARRAY_LEN(kinds); i++) {
        const struct kind *k = &kinds[i];
        if (strcmp(m->type, k->type) != 0) continue;
        int rc = k->about
                     ? decode_fields(m->head, k->type, "", about, NFIELDS(about), &out->about, err)
                     : 0;
        out->kind = k->kind; /* what to free if a later member is wrong */
        if (rc == 0) rc = k->decode(m->head, out, err);
        if (rc != 0) {
            tp__proto_agent_msg_free(out);
            memset(out, 0, sizeof *out);
            out->raw = m;
            return rc;
        }
        return 0;
    }
    return 0; /* TP_MSG_UNKNOWN */
}

void tp__proto_agent_msg_free(tp_agent_msg_t *am) {
    switch (am->kind) {
    case TP_MSG_HELLO:
        free(am->hello.gpus);
        break;
    case TP_MSG_MPS:
        free(am->mps.failed);
        break;
    case TP_MSG_USAGE:
        free(am->usage.gpus);
        free(am->usage.trials);
        break;
    default:
        break;
    }
    am->kind = TP_MSG_UNKNOWN;
}
