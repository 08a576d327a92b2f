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

static const field_t hello_fields[] = {
    F(tp_msg_hello_t, protocol, F_INT, 1),     F(tp_msg_hello_t, node, F_STR, 1),
    F(tp_msg_hello_t, cpus, F_INT, 1),         F(tp_msg_hello_t, memory_mib, F_U64, 0),
    F(tp_msg_hello_t, pid, F_I64, 0),          F(tp_msg_hello_t, version, F_STR, 0),
    F(tp_msg_hello_t, reaped, F_I64, 0),       F(tp_msg_hello_t, nvml, F_STR, 0),
    F(tp_msg_hello_t, mps_control, F_BOOL, 0),
};
static const field_t hello_gpu_fields[] = {
    F(tp_msg_hello_gpu_t, index, F_INT, 1),
    F(tp_msg_hello_gpu_t, name, F_STR, 0),
    F(tp_msg_hello_gpu_t, uuid, F_STR, 0),
    F(tp_msg_hello_gpu_t, memory_mib, F_U64, 0),
    F(tp_msg_hello_gpu_t, memory_used_mib, F_U64, 0),
    F(tp_msg_hello_gpu_t, util, F_INT, 0),
    F(tp_msg_hello_gpu_t, healthy, F_BOOL, 0),
    F(tp_msg_hello_gpu_t, error, F_STR, 0),
};
static const field_t mps_failure_fields[] = {
    F(tp_msg_mps_failure_t, index, F_INT, 1),
    F(tp_msg_mps_failure_t, error, F_STR, 1),
};
static const field_t usage_gpu_fields[] = {
    F(tp_msg_usage_gpu_t, index, F_INT, 1), F(tp_msg_usage_gpu_t, foreign_mib, F_U64, 1),
    F(tp_msg_usage_gpu_t, util, F_INT, 1),  F(tp_msg_usage_gpu_t, healthy, F_BOOL, 1),
    F(tp_msg_usage_gpu_t, error, F_STR, 0),
};
static const field_t usage_trial_fields[] = {
    F(tp_msg_usage_trial_t, trial, F_I64, 1),   F(tp_msg_usage_trial_t, attempt, F_I64, 1),
    F(tp_msg_usage_trial_t, gpu, F_INT, 1),     F(tp_msg_usage_trial_t, used_mib, F_U64, 1),
    F(tp_msg_usage_trial_t, sm_util, F_INT, 1),
};
static const field_t error_fields[] = {F(tp_msg_error_t, message, F_STR, 1)};
static const field_t pong_fields[] = {F(tp_msg_pong_t, t, F_NUM, 0)};
static const field_t report_fields[] = {F(tp_msg_report_t, channel, F_STR, 1)};
static const field_t garbage_fields[] = {
    F(tp_msg_garbage_t, channel, F_STR, 1),
    F(tp_msg_garbage_t, what, F_STR, 1),
};
static const field_t log_fields[] = {F(tp_msg_log_t, stream, F_STR, 1)};
static const field_t started_fields[] = {
    F(tp_msg_started_t, pid, F_I64, 1),
    F(tp_msg_started_t, master_port, F_INT, 0),
};
static const field_t exited_fields[] = {
    F(tp_exited_t, status, F_STR, 0),     F(tp_exited_t, code, F_INT, 0),
    F(tp_exited_t, signal, F_INT, 0),     F(tp_exited_t, error, F_STR, 0),
    F(tp_exited_t, duration_s, F_NUM, 0), F(tp_exited_t, oom, F_BOOL, 0),
    F(tp_exited_t, maxrss_mib, F_NUM, 0), F(tp_exited_t, cpu_s, F_NUM, 0),
};
static const field_t about_fields[] = {
    F(tp_msg_about_t, trial, F_I64, 1),
    F(tp_msg_about_t, attempt, F_I64, 1),
    F(tp_msg_about_t, rank, F_INT, 0),
};

/* What a kind has beyond its flat members: arrays, and members derived
 * from the decoded ones. Each returns 0 or -EPROTO (err filled). */
static int hello_more(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    static const tp_msg_hello_gpu_t gpu0 = {.util = -1};
    tp_msg_hello_t *o = &am->hello;
    return decode_array(h, "hello", "gpus", 0, hello_gpu_fields, NFIELDS(hello_gpu_fields),
                        sizeof *o->gpus, &gpu0, (void **)&o->gpus, &o->ngpus, err);
}

static int mps_more(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    static const tp_msg_mps_failure_t failure0 = {0};
    tp_msg_mps_t *o = &am->mps;
    return decode_array(h, "mps", "failed", 0, mps_failure_fields, NFIELDS(mps_failure_fields),
                        sizeof *o->failed, &failure0, (void **)&o->failed, &o->nfailed, err);
}

static int usage_more(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    static const tp_msg_usage_gpu_t gpu0 = {0};
    static const tp_msg_usage_trial_t trial0 = {0};
    tp_msg_usage_t *o = &am->usage;
    int rc = decode_array(h, "usage", "gpus", 1, usage_gpu_fields, NFIELDS(usage_gpu_fields),
                          sizeof *o->gpus, &gpu0, (void **)&o->gpus, &o->ngpus, err);
    if (rc == 0)
        rc = decode_array(h, "usage", "trials", 1, usage_trial_fields, NFIELDS(usage_trial_fields),
                          sizeof *o->trials, &trial0, (void **)&o->trials, &o->ntrials, err);
    if (rc == 0) o->gpus_json = json_object_get(h, "gpus");
    return rc;
}

static int pong_more(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    (void)err;
    am->pong.has_t = json_object_get(h, "t") != NULL;
    return 0;
}

static int report_more(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    (void)h, (void)err;
    am->report.kv = strcmp(am->report.channel, "stdout") == 0;
    return 0;
}

static int log_more(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    (void)h, (void)err;
    am->log.is_stderr = strcmp(am->log.stream, "stderr") == 0;
    return 0;
}

/* The status as a tp_ended_t (TP_ENDED_UNKNOWN for one not listed). */
static void exited_ended(tp_exited_t *e) {
    static const char *const names[] = {
        [TP_ENDED_EXITED] = "exited",   [TP_ENDED_SIGNALED] = "signaled",
        [TP_ENDED_TIMEOUT] = "timeout", [TP_ENDED_STOPPED] = "stopped",
        [TP_ENDED_PAUSED] = "paused",   [TP_ENDED_SPAWN_FAILED] = "spawn_failed",
    };
    e->ended = TP_ENDED_UNKNOWN;
    for (int i = 0; i < TP_ENDED_UNKNOWN; i++)
        if (strcmp(e->status, names[i]) == 0) e->ended = (tp_ended_t)i;
}

static const tp_exited_t exited0 = {.status = "exited", .code = -1, .error = ""};

static int exited_more(const json_t *h, tp_agent_msg_t *am, tp_error_t *err) {
    (void)h, (void)err;
    exited_ended(&am->exited);
    return 0;
}

int tp__proto_exited(const json_t *head, tp_exited_t *e, tp_error_t *err) {
    tp_exited_t d = exited0;
    int rc = decode_fields(head, "exited", "", exited_fields, NFIELDS(exited_fields), &d, err);
    if (rc != 0) return rc;
    exited_ended(&d);
    *e = d;
    return 0;
}

/* The kinds an agent sends (docs/protocol.md, "Agent to orchestrator"):
 * the flat members of each go into its struct in tp_agent_msg_t's union,
 * then `more` decodes the rest. */
#define KIND(name, k, about, fields, more)                                                         \
    { name, k, about, fields, NFIELDS(fields), more }
static const struct kind {
    const char *type;      /* the message's "type" */
    tp_msg_kind_t kind;    /* what it decodes to */
    int about;             /* about an attempt: trial, attempt, rank */
    const field_t *fields; /* its flat members; NULL for none */
    size_t nfields;        /* entries of fields */
    int (*more)(const json_t *h, tp_agent_msg_t *am, tp_error_t *err); /* NULL: none */
} kinds[] = {
    KIND("hello", TP_MSG_HELLO, 0, hello_fields, hello_more),
    {"mps", TP_MSG_MPS, 0, NULL, 0, mps_more},
    {"usage", TP_MSG_USAGE, 0, NULL, 0, usage_more},
    KIND("error", TP_MSG_ERROR, 0, error_fields, NULL),
    {"bye", TP_MSG_BYE, 0, NULL, 0, NULL},
    KIND("pong", TP_MSG_PONG, 0, pong_fields, pong_more),
    KIND("report", TP_MSG_REPORT, 1, report_fields, report_more),
    KIND("garbage", TP_MSG_GARBAGE, 1, garbage_fields, NULL),
    KIND("log", TP_MSG_LOG, 1, log_fields, log_more),
    KIND("started", TP_MSG_STARTED, 1, started_fields, NULL),
    KIND("exited", TP_MSG_EXITED, 1, exited_fields, exited_more),
};

int tp__proto_decode(const tp_msg_t *m, tp_agent_msg_t *out, tp_error_t *err) {
    memset(out, 0, sizeof *out);
    out->raw = m;
    for (size_t i = 0; i < TP_ARRAY_LEN(kinds); i++) {
        const struct kind *k = &kinds[i];
        if (strcmp(m->type, k->type) != 0) continue;
        out->kind = k->kind; /* what to free if a later member is wrong */
        if (k->kind == TP_MSG_EXITED) out->exited = exited0;
        /* every struct of the union starts where the union does */
        void *body = (char *)out + offsetof(tp_agent_msg_t, hello);
        int rc = 0;
        if (k->about)
            rc = decode_fields(m->head, k->type, "", about_fields, NFIELDS(about_fields),
                               &out->about, err);
        if (rc == 0 && k->fields)
            rc = decode_fields(m->head, k->type, "", k->fields, k->nfields, body, err);
        if (rc == 0 && k->more) rc = k->more(m->head, out, err);
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
