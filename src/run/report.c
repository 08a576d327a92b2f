/* report: parsing what trials report, both forms. Pure functions. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/run.h"

/* Copy at most 60 bytes of line into out, with non-printable bytes as '?'. */
static void excerpt(const char *line, size_t len, char *out, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < len && k + 4 < n && i < 60; i++)
        out[k++] = (line[i] >= 32 && line[i] < 127) ? line[i] : '?';
    if (len > 60 && k + 4 < n) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = 0;
}

/* A step given as a real: whole and within the range where a double holds
 * every integer (|d| < 2^53), so that the cast to int64 is defined. */
static int step_of_real(double d, int64_t *out) {
    if (!(d == floor(d) && fabs(d) < 9007199254740992.0)) return 0;
    *out = (int64_t)d;
    return 1;
}

int tp__report_parse_json(const char *line, size_t len, const char *metric, tp_report_t *out,
                          char *why, size_t whylen) {
    char ex[80];
    out->step = INT64_MIN;
    out->has_value = 0;
    out->value = NAN;
    out->config = -1;
    json_error_t jerr;
    json_t *obj = json_loadb(line, len, 0, &jerr);
    if (!obj) {
        excerpt(line, len, ex, sizeof ex);
        snprintf(why, whylen, "report line is not JSON (%s at column %d): \"%s\"", jerr.text,
                 jerr.column, ex);
        return -1;
    }
    int rc = 0;
    if (!json_is_object(obj)) {
        excerpt(line, len, ex, sizeof ex);
        snprintf(why, whylen, "report line is not a JSON object: \"%s\"", ex);
        rc = -1;
        goto done;
    }
    json_t *step = json_object_get(obj, "step");
    if (step) {
        if (json_is_integer(step)) {
            out->step = json_integer_value(step);
        } else if (!json_is_real(step) || !step_of_real(json_real_value(step), &out->step)) {
            snprintf(why, whylen, "report \"step\" must be an integer");
            rc = -1;
            goto done;
        }
    }
    json_t *cfg = json_object_get(obj, "config");
    if (cfg) {
        if (!json_is_integer(cfg) || json_integer_value(cfg) < 0 ||
            json_integer_value(cfg) >= TP_REPORT_CONFIG_MAX) {
            snprintf(why, whylen,
                     "report \"config\" must be the index of a fused "
                     "configuration, an integer from 0 to %d",
                     TP_REPORT_CONFIG_MAX - 1);
            rc = -1;
            goto done;
        }
        out->config = (int)json_integer_value(cfg);
    }
    json_t *v = json_object_get(obj, metric);
    if (v) {
        if (!json_is_number(v) || !isfinite(json_number_value(v))) {
            snprintf(why, whylen, "objective \"%s\" must be a finite number, got %s", metric,
                     json_is_null(v)     ? "null"
                     : json_is_string(v) ? "a string"
                                         : "a non-number");
            rc = -1;
            goto done;
        }
        out->has_value = 1;
        out->value = json_number_value(v);
    }
done:
    json_decref(obj);
    return rc;
}

static int name_char(int c, int first) {
    return isalpha(c) || c == '_' || (!first && (isdigit(c) || c == '.' || c == '-' || c == '/'));
}

int tp__report_parse_kv(const char *line, size_t len, const char *metric, tp_report_t *out,
                        tp_buf_t *json, char *why, size_t whylen) {
    out->step = INT64_MIN;
    out->has_value = 0;
    out->value = NAN;
    out->config = -1;
    /* Collect the pairs as JSON; it is a report only if the objective is among them. */
    size_t mlen = strlen(metric);
    int found = 0, bad = 0;
    size_t start = json->len;
    tp__buf_puts(json, "{");
    int members = 0;
    size_t i = 0;
    while (i < len) {
        while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == ',' || line[i] == '\r'))
            i++;
        size_t n0 = i;
        if (i >= len || !name_char((unsigned char)line[i], 1)) break;
        while (i < len && name_char((unsigned char)line[i], 0))
            i++;
        size_t n1 = i;
        while (i < len && line[i] == ' ')
            i++;
        if (i >= len || line[i] != '=') break;
        i++;
        while (i < len && line[i] == ' ')
            i++;
        size_t v0 = i;
        while (i < len && line[i] != ' ' && line[i] != '\t' && line[i] != ',' && line[i] != '\r')
            i++;
        size_t v1 = i;
        if (v1 == v0) break;
        char val[64];
        size_t vl = v1 - v0 < sizeof val - 1 ? v1 - v0 : sizeof val - 1;
        memcpy(val, line + v0, vl);
        val[vl] = 0;
        char *end;
        errno = 0;
        double d = strtod(val, &end);
        int numeric = end != val && *end == 0 && isfinite(d) && v1 - v0 < sizeof val;
        int is_metric = n1 - n0 == mlen && memcmp(line + n0, metric, mlen) == 0;
        int is_step = n1 - n0 == 4 && memcmp(line + n0, "step", 4) == 0;
        if (is_metric) {
            found = 1;
            if (!numeric) {
                bad = 1;
                snprintf(why, whylen, "objective \"%s\" must be a finite number, got \"%s\"",
                         metric, val);
            } else {
                out->has_value = 1;
                out->value = d;
            }
        }
        if (is_step && numeric) step_of_real(d, &out->step); /* else no step */
        tp__buf_printf(json, "%s\"%.*s\":", members++ ? "," : "", (int)(n1 - n0), line + n0);
        if (numeric) {
            char num[32];
            tp__fmt_double(d, num);
            tp__buf_puts(json, num);
        } else {
            json_t *s = json_stringn(line + v0, v1 - v0);
            char *enc = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
            tp__buf_puts(json, enc ? enc : "null");
            free(enc);
            json_decref(s);
        }
    }
    tp__buf_puts(json, "}");
    if (!found || bad) {
        json->len = start;
        if (json->data) json->data[start] = 0;
        return bad ? -1 : 0;
    }
    return 1;
}
