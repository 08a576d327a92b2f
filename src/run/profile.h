/* profile: what a profiling attempt measures, as pure functions of its NVML
 * samples. placement.c feeds each sample in and acts on what comes back:
 * when the trial is training (its start-up, a CUDA context and a model being
 * built, says nothing of what its training needs), when the profile has seen
 * enough of that training, and the compute share the training takes, from
 * the process's own SM use or, where NVML gives it none (an MPS client), from
 * its GPU's busy share over what that GPU was busy before.
 *
 * No clock, no I/O, no run state: times are arguments
 * (tests/unit/test_profile.c plays start-ups and training through it). */
#ifndef TP_RUN_PROFILE_H
#define TP_RUN_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#define TP_PROF_MIN_SAMPLES 3    /* a profile takes at least this many samples of training */
#define TP_PROF_MAX_SAMPLES 4096 /* samples kept per attempt; the profile ends when full */
#define TP_PROF_SETTLE 4         /* samples over which memory and work must have settled */
#define TP_PROF_GROWTH 0.05      /* peak memory that grew by less than this has settled */
#define TP_PROF_MIN_WORK 5.0     /* percent: less is no training (a context, imports, data) */
#define TP_PROF_WAIT_FACTOR                                                                        \
    10.0                         /* a profile waits for training at most this many profile_times   \
                                  */
#define TP_PROF_WAIT_MIN_S 120.0 /* ... and never less than this */

/* One NVML sample of a profiling attempt's process. */
typedef struct tp_prof_sample {
    double at;    /* monotonic seconds it arrived */
    uint64_t mib; /* GPU memory the process held */
    double sm;    /* its own SM use, percent (0 for an MPS client: NVML gives it the server) */
    double busy;  /* its GPU's busy share, percent (NVML utilization.gpu) */
    double base;  /* that GPU's busy share before a profiler came, percent */
    int sharers;  /* profilers training on that GPU at this sample, >= 1 (the caller's) */
} tp_prof_sample_t;

/* How the profile knew the trial was training. */
typedef enum tp_prof_how {
    TP_PROF_NOT_YET, /* not seen training (so far, or ever) */
    TP_PROF_REPORT,  /* a report arrived while it was on the GPU */
    TP_PROF_SETTLED, /* its memory stopped growing and its work settled above TP_PROF_MIN_WORK */
    TP_PROF_GAVE_UP, /* waited TP_PROF_WAIT_* without seeing it: measured what there was */
} tp_prof_how_t;

/* A profiling attempt's state: a member of trial_t, placement's alone. */
typedef struct tp_prof {
    tp_prof_sample_t *s; /* its samples, owned; NULL before the first */
    size_t n, cap;       /* of them, and room */
    size_t from;         /* the first sample of training (valid once how != NOT_YET) */
    tp_prof_how_t how;   /* how training was seen */
    uint64_t peak;       /* the largest memory of the samples */
    uint64_t peak_lag;   /* ... up to the first of the last TP_PROF_SETTLE */
    int extended;        /* profile_time passed before training was seen (said once) */
    int done;            /* the profile has seen enough: its group's demand can be recorded */
} tp_prof_t;

/* What tp__prof_add says of a sample. */
typedef enum tp_prof_step {
    TP_PROF_GO_ON,  /* keep sampling */
    TP_PROF_EXTEND, /* once: profile_s passed since the first sample, no training seen yet */
    TP_PROF_DONE,   /* profile_s of training sampled (at least TP_PROF_MIN_SAMPLES), or gave up */
} tp_prof_step_t;

/* Add s (its sharers still 1: the caller sets p->s[p->n - 1].sharers once it
 * knows who trains beside it). reported: monotonic time of the attempt's
 * latest report, 0 if none. Training is seen at the first sample after a
 * report that came while the process was on the GPU, or at the last of
 * TP_PROF_SETTLE samples over which the peak memory grew by at most
 * TP_PROF_GROWTH, the last held at least half of it, and the work (own SM,
 * else the GPU's busy share over its base) averaged TP_PROF_MIN_WORK or
 * more and did not rise (the later half at most 1.25x the earlier, + 2
 * points). Training counts from the sample that showed it, never earlier:
 * each sample's sharers were counted as it came, among the profilers known
 * to train then. The profile is done profile_s after training started, with at
 * least TP_PROF_MIN_SAMPLES of it; or when no training was seen
 * max(TP_PROF_WAIT_FACTOR x profile_s, TP_PROF_WAIT_MIN_S) after the first
 * sample; or when p is full. Amortised O(TP_PROF_SETTLE). */
tp_prof_step_t tp__prof_add(tp_prof_t *p, const tp_prof_sample_t *s, double reported,
                            double profile_s);

/* The compute share a GPU-level reading gives one profiler: the GPU's busy
 * percent over its base, split evenly among the sharers training there, as
 * a fraction in [0, 1]. O(1). */
double tp__prof_gpu_share(double busy, double base, int sharers);

/* What a profile measured. */
typedef struct tp_prof_result {
    double compute;   /* share of a GPU its training used; 0: no work was seen at all */
    int per_process;  /* 1: from the process's own SM use; 0: from GPU-level readings */
    size_t samples;   /* samples the compute is the mean of */
    double base;      /* GPU-level: the mean base it was measured over, percent */
    int sharers;      /* GPU-level: the most profilers that trained on its GPU at once */
    double waited_s;  /* first sample -> training seen (0 when training was the first) */
    double trained_s; /* training seen -> last sample */
} tp_prof_result_t;

/* The measurement of p (at least one sample): the mean of the training
 * samples; without training seen (it ended first, or the wait gave up), of
 * the samples that held at least half the peak memory. Own SM use where any
 * of those samples has some, else tp__prof_gpu_share per sample. O(n). */
void tp__prof_result(const tp_prof_t *p, tp_prof_result_t *out);

/* Forget p's samples and state (a new attempt). */
void tp__prof_reset(tp_prof_t *p);

#endif
