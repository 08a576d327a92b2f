/* profile: see profile.h. */
#include "run/profile.h"

#include <stdlib.h>
#include <string.h>

#include "util/util.h"

/* A sample's sign of work, percent: the process's own SM use, else (an MPS
 * client, whose own reads 0) its GPU's busy share over the base. */
static double work(const tp_prof_sample_t *s) {
    if (s->sm > 0) return s->sm;
    return 100.0 * tp__prof_gpu_share(s->busy, s->base, 1);
}

static double mean_work(const tp_prof_sample_t *s, size_t n) {
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += work(&s[i]);
    return n ? sum / (double)n : 0;
}

/* Whether the last TP_PROF_SETTLE samples of p are training (profile.h). */
static int settled(const tp_prof_t *p) {
    if (p->n < TP_PROF_SETTLE || p->peak_lag == 0) return 0;
    const tp_prof_sample_t *w = &p->s[p->n - TP_PROF_SETTLE];
    if ((double)p->peak > (double)p->peak_lag * (1.0 + TP_PROF_GROWTH)) return 0; /* growing */
    if (2 * w[TP_PROF_SETTLE - 1].mib < p->peak) return 0; /* between phases, or leaving */
    if (mean_work(w, TP_PROF_SETTLE) < TP_PROF_MIN_WORK) return 0;
    size_t half = TP_PROF_SETTLE / 2;
    double early = mean_work(w, half), late = mean_work(w + half, TP_PROF_SETTLE - half);
    return late <= 1.25 * early + 2.0; /* still rising: ramping up, not settled */
}

tp_prof_step_t tp__prof_add(tp_prof_t *p, const tp_prof_sample_t *s, double reported,
                            double profile_s) {
    if (p->done) return TP_PROF_DONE;
    p->s = tp__xgrow(p->s, &p->cap, p->n + 1, sizeof *p->s, 64);
    p->s[p->n] = *s;
    p->s[p->n].sharers = 1;
    p->n++;
    if (s->mib > p->peak) p->peak = s->mib;
    if (p->n >= TP_PROF_SETTLE && p->s[p->n - TP_PROF_SETTLE].mib > p->peak_lag)
        p->peak_lag = p->s[p->n - TP_PROF_SETTLE].mib;
    if (p->how == TP_PROF_NOT_YET) {
        if (settled(p)) {
            p->how = TP_PROF_SETTLED, p->from = p->n - 1;
        } else if (reported > 0 && reported >= p->s[0].at) {
            p->how = TP_PROF_REPORT, p->from = p->n - 1;
        }
    }
    double since = s->at - p->s[0].at;
    if (p->how == TP_PROF_NOT_YET) {
        double wait = TP_PROF_WAIT_FACTOR * profile_s;
        if (wait < TP_PROF_WAIT_MIN_S) wait = TP_PROF_WAIT_MIN_S;
        if (since >= wait || p->n >= TP_PROF_MAX_SAMPLES) {
            p->how = TP_PROF_GAVE_UP;
            p->done = 1;
            return TP_PROF_DONE;
        }
        if (since >= profile_s && !p->extended) {
            p->extended = 1;
            return TP_PROF_EXTEND;
        }
        return TP_PROF_GO_ON;
    }
    if ((s->at - p->s[p->from].at >= profile_s && p->n - p->from >= TP_PROF_MIN_SAMPLES) ||
        p->n >= TP_PROF_MAX_SAMPLES) {
        p->done = 1;
        return TP_PROF_DONE;
    }
    return TP_PROF_GO_ON;
}

double tp__prof_gpu_share(double busy, double base, int sharers) {
    if (!(base > 0)) base = 0; /* unknown (NaN) or none: all of the busy share */
    double over = busy - base;
    if (!(over > 0)) return 0;
    if (over > 100) over = 100;
    return over / 100.0 / (sharers > 1 ? sharers : 1);
}

/* Whether sample s of p counts for the measurement (tp__prof_result). */
static int counts(const tp_prof_t *p, size_t i, int training) {
    return training ? i >= p->from : 2 * p->s[i].mib >= p->peak;
}

void tp__prof_result(const tp_prof_t *p, tp_prof_result_t *out) {
    memset(out, 0, sizeof *out);
    if (p->n == 0) return;
    int training = p->how == TP_PROF_REPORT || p->how == TP_PROF_SETTLED;
    int own = 0;
    for (size_t i = 0; i < p->n; i++)
        if (counts(p, i, training) && p->s[i].sm > 0) own = 1;
    double sum = 0, base = 0;
    for (size_t i = 0; i < p->n; i++) {
        const tp_prof_sample_t *s = &p->s[i];
        if (!counts(p, i, training)) continue;
        sum += own ? s->sm / 100.0 : tp__prof_gpu_share(s->busy, s->base, s->sharers);
        base += s->base > 0 ? s->base : 0;
        if (s->sharers > out->sharers) out->sharers = s->sharers;
        out->samples++;
    }
    out->per_process = own;
    out->compute = sum / (double)out->samples;
    if (out->compute > 1.0) out->compute = 1.0;
    out->base = base / (double)out->samples;
    double first = p->s[0].at, last = p->s[p->n - 1].at;
    out->waited_s = training ? p->s[p->from].at - first : last - first;
    out->trained_s = training ? last - p->s[p->from].at : 0;
}

void tp__prof_reset(tp_prof_t *p) {
    free(p->s);
    memset(p, 0, sizeof *p);
}
