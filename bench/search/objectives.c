/* search_objective - synthetic trials with learning curves and a known optimum, for comparing
 * search algorithms and early-stopping schedulers (bench/search/run.py) without training
 * anything real.
 *
 *     search_objective --objective bowl --x 0.3 --z 0.7 --y 1e-2 --c opt1 --epochs 27
 *     search_objective --describe            # every objective: space, optimum, curve speeds
 *
 * The space is the same for every objective: x, z uniform in [0, 1], y loguniform in
 * [1e-5, 1], c one of opt0 opt1 opt2 opt3. A configuration has a final quality q (what it
 * would reach after infinitely many epochs, at most 1) and a curve time constant tau (in
 * epochs); after epoch e it scores
 *
 *     score(e) = q * (1 - exp(-e / tau)) + noise(seed, configuration, e),   |noise| <= 0.005
 *
 * and that is reported each epoch as {"step": e, "score": ...} (tp_report: on
 * TUNEPACK_REPORT_FD, else "step=e score=..." on stdout). tau depends on the configuration,
 * so curves cross: a slow learner can end above a fast one, which is what early stopping
 * gets wrong.
 *
 * Budget and checkpoints (docs/checkpoints.md): --epochs is the budget (default
 * TUNEPACK_BUDGET, else 27). With TUNEPACK_CHECKPOINT_DIR set it keeps the epoch reached in
 * DIR/objective.ckpt (written to a temp file and renamed, each epoch) and a promoted or
 * resumed job goes on from there, reporting only the new epochs. A pause request ("pause" on
 * TUNEPACK_CONTROL_FD, or SIGUSR1) makes it exit 0 at the next epoch end. --epoch-ms sleeps
 * that long per epoch, to stand in for training time.
 *
 * Exit status: 0 (done or paused), 2 for bad arguments, 1 when a checkpoint cannot be written.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tunepack/report.h>

#define N_CHOICES 4 /* values of c: opt0 .. opt3 */
#define Y_LO 1e-5   /* y is loguniform in [Y_LO, Y_HI] */
#define Y_HI 1.0
#define NOISE 0.005 /* half-width of the deterministic noise */
#define CKPT_NAME "objective.ckpt"
#define PI 3.14159265358979323846

/* One configuration. ly is log10(y) mapped onto [0, 1]. */
struct config {
    double x, z, y; /* as given */
    int c;          /* index of the category */
    double ly;      /* (log10(y) - log10(Y_LO)) / (log10(Y_HI) - log10(Y_LO)) */
};

/* One objective: a row of the table below. */
struct objective {
    const char *name;                         /* --objective NAME */
    const char *about;                        /* one line, for --describe */
    double (*quality)(const struct config *); /* final quality q, at most 1 */
    double (*tau)(const struct config *);     /* curve time constant, epochs */
    struct config best;                       /* a configuration where q = 1 */
};

static double sq(double v) {
    return v * v;
}

/* bowl: a shifted quadratic bowl in (x, z, ly) with a penalty per category; tau grows with z,
 * and the optimum (z = 0.7) learns slower than half the space. */
static double bowl_quality(const struct config *p) {
    static const double pen[N_CHOICES] = {0.2, 0.0, 0.1, 0.3};
    return 1.0 - 1.5 * (sq(p->x - 0.3) + sq(p->z - 0.7) + sq(p->ly - 0.6)) - pen[p->c];
}

static double bowl_tau(const struct config *p) {
    return 1.5 + 5.0 * p->z;
}

/* Branin's function of (x, z) mapped onto [-5, 10] x [0, 15]: three global minima 0.397887. */
static double branin(double x, double z) {
    double a = -5.0 + 15.0 * x, b = 15.0 * z;
    double t = b - 5.1 / (4.0 * PI * PI) * a * a + 5.0 / PI * a - 6.0;
    return t * t + 10.0 * (1.0 - 1.0 / (8.0 * PI)) * cos(a) + 10.0;
}

/* branin: exp(-(Branin - min) / 20) times a bump in ly (best ly 0.4, y = 1e-3), minus a
 * penalty per category; small y (a small "learning rate") learns slowly. */
static double branin_quality(const struct config *p) {
    static const double pen[N_CHOICES] = {0.15, 0.05, 0.0, 0.25};
    return exp(-(branin(p->x, p->z) - 0.397887357729739) / 20.0) * (1.0 - 1.5 * sq(p->ly - 0.4)) -
           pen[p->c];
}

static double branin_tau(const struct config *p) {
    return 1.0 + 8.0 * (1.0 - p->ly);
}

/* needle: a broad hill worth 0.6 at (0.2, 0.2) and a narrow peak worth 1 at (0.8, 0.75)
 * (width 0.05), times a bump in ly (best 0.7), minus a penalty per category. The peak sits
 * where x is large, where curves are slowest (tau up to 12): early stopping that trusts the
 * first epochs prefers the broad hill. */
static double needle_quality(const struct config *p) {
    static const double pen[N_CHOICES] = {0.1, 0.2, 0.05, 0.0};
    double hill = 0.6 * exp(-(sq(p->x - 0.2) + sq(p->z - 0.2)) / 0.1);
    double peak = exp(-(sq(p->x - 0.8) + sq(p->z - 0.75)) / (2.0 * 0.05 * 0.05));
    return (hill > peak ? hill : peak) * exp(-sq(p->ly - 0.7) / 0.08) - pen[p->c];
}

static double needle_tau(const struct config *p) {
    return 2.0 + 10.0 * p->x;
}

static const struct objective objectives[] = {
    {.name = "bowl",
     .about = "shifted quadratic bowl; tau 1.5..6.5 grows with z",
     .quality = bowl_quality,
     .tau = bowl_tau,
     .best = {.x = 0.3, .z = 0.7, .y = 1e-2, .c = 1}},
    {.name = "branin",
     .about = "Branin (three optima) times a bump in log y; tau 1..9, slow for small y",
     .quality = branin_quality,
     .tau = branin_tau,
     .best = {.x = 0.5427728435726528, .z = 0.1516666666666667, .y = 1e-3, .c = 2}},
    {.name = "needle",
     .about = "deceptive: broad hill worth 0.6, narrow peak worth 1 (width 0.05) where "
              "curves are slowest; tau 2..12",
     .quality = needle_quality,
     .tau = needle_tau,
     .best = {.x = 0.8, .z = 0.75, .y = 0.031622776601683794, .c = 3}},
};
#define N_OBJECTIVES (sizeof objectives / sizeof objectives[0])

static double log_unit(double y) {
    return (log10(y) - log10(Y_LO)) / (log10(Y_HI) - log10(Y_LO));
}

/* splitmix64 finaliser: the noise generator. */
static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t bits_of(double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

/* Noise in [-NOISE, NOISE], a pure function of (objective, seed, configuration, epoch): a
 * resumed trial reports exactly what an uninterrupted one would. */
static double noise(size_t obj, uint64_t seed, const struct config *p, long epoch) {
    uint64_t h = mix(obj + 0x9e3779b97f4a7c15ULL * (seed + 1));
    h = mix(h ^ bits_of(p->x));
    h = mix(h ^ bits_of(p->z));
    h = mix(h ^ bits_of(p->y));
    h = mix(h ^ (uint64_t)p->c);
    h = mix(h ^ (uint64_t)epoch);
    return NOISE * (2.0 * (double)(h >> 11) / 9007199254740992.0 - 1.0);
}

/* The score after `epoch` epochs. */
static double score(size_t obj, uint64_t seed, const struct config *p, long epoch) {
    const struct objective *o = &objectives[obj];
    return o->quality(p) * (1.0 - exp(-(double)epoch / o->tau(p))) + noise(obj, seed, p, epoch);
}

/* Prints one JSON line per objective: space, the optimum (q = 1, noise-free), the optimum
 * configuration's noise-free score at budgets 9, 27 and 81, and the range of tau. */
static void describe(int only) {
    for (size_t i = 0; i < N_OBJECTIVES; i++) {
        const struct objective *o = &objectives[i];
        struct config b = o->best;
        double lo = INFINITY, hi = -INFINITY;

        if (only >= 0 && (size_t)only != i) continue;
        b.ly = log_unit(b.y);
        for (int a = 0; a <= 20; a++)
            for (int k = 0; k <= 20; k++) {
                struct config p = {.x = a / 20.0, .z = k / 20.0, .y = pow(10.0, -5.0 + k / 4.0)};
                p.ly = log_unit(p.y);
                double t = o->tau(&p);
                lo = t < lo ? t : lo;
                hi = t > hi ? t : hi;
            }
        printf("{\"objective\": \"%s\", \"about\": \"%s\", \"metric\": \"score\", \"mode\": "
               "\"max\", \"space\": {\"x\": {\"uniform\": [0, 1]}, \"z\": {\"uniform\": [0, "
               "1]}, \"y\": {\"loguniform\": [%g, %g]}, \"c\": {\"choice\": [\"opt0\", "
               "\"opt1\", \"opt2\", \"opt3\"]}}, \"optimum\": %.6f, \"optimum_at\": {\"x\": "
               "%.6f, \"z\": %.6f, \"y\": %.6g, \"c\": \"opt%d\"}, \"optimum_at_budget\": "
               "{\"9\": %.6f, \"27\": %.6f, \"81\": %.6f}, \"tau\": [%.3g, %.3g], \"noise\": "
               "%g}\n",
               o->name, o->about, Y_LO, Y_HI, o->quality(&b), b.x, b.z, b.y, b.c,
               o->quality(&b) * (1.0 - exp(-9.0 / o->tau(&b))),
               o->quality(&b) * (1.0 - exp(-27.0 / o->tau(&b))),
               o->quality(&b) * (1.0 - exp(-81.0 / o->tau(&b))), lo, hi, NOISE);
    }
}

/* ---- checkpoint: the epoch reached, and the configuration it belongs to ---- */

/* Returns the epoch recorded in DIR/objective.ckpt for this very configuration, or 0 (none,
 * unreadable, or another configuration's: said on stderr). */
static long ckpt_load(const char *dir, const char *name, const struct config *p) {
    char path[4096], want[512], line[512];
    long epoch = 0;
    FILE *f;

    if (snprintf(path, sizeof path, "%s/%s", dir, CKPT_NAME) >= (int)sizeof path) return 0;
    f = fopen(path, "r");
    if (f == NULL) return 0;
    snprintf(want, sizeof want, "%s %.17g %.17g %.17g %d", name, p->x, p->z, p->y, p->c);
    if (fgets(line, sizeof line, f) == NULL || strcspn(line, "\n") != strlen(want) ||
        strncmp(line, want, strlen(want)) != 0 || fscanf(f, "epoch %ld", &epoch) != 1 ||
        epoch < 0) {
        fprintf(stderr, "search_objective: %s is not this configuration's: starting over\n", path);
        epoch = 0;
    }
    fclose(f);
    return epoch;
}

/* Writes DIR/objective.ckpt through a temp file and rename(2). Returns 0 or -1 (said). */
static int ckpt_save(const char *dir, const char *name, const struct config *p, long epoch) {
    char path[4096], tmp[4096];
    FILE *f;

    if (snprintf(path, sizeof path, "%s/%s", dir, CKPT_NAME) >= (int)sizeof path ||
        snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, CKPT_NAME) >= (int)sizeof tmp) {
        fprintf(stderr, "search_objective: checkpoint directory name too long\n");
        return -1;
    }
    f = fopen(tmp, "w");
    if (f == NULL ||
        fprintf(f, "%s %.17g %.17g %.17g %d\nepoch %ld\n", name, p->x, p->z, p->y, p->c, epoch) <
            0 ||
        fclose(f) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "search_objective: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- arguments ---- */

struct options {
    int objective;   /* index into objectives[], -1 when not given */
    struct config p; /* the configuration */
    long epochs;     /* budget: the epoch to reach */
    long epoch_ms;   /* sleep per epoch */
    uint64_t seed;   /* noise seed */
    int describe;    /* --describe */
};

static int parse_double(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* Integers may arrive as "27" or "27.0" (a budget is a number). */
static int parse_long(const char *s, long lo, long hi, long *out) {
    double v;
    if (parse_double(s, &v) != 0 || v != floor(v) || v < (double)lo || v > (double)hi) return -1;
    *out = (long)v;
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: search_objective --objective NAME [--x X] [--z Z] [--y Y] [--c optK]\n"
               "                        [--epochs B] [--seed S] [--epoch-ms MS]\n"
               "       search_objective --describe [--objective NAME]\n"
               "  objectives:");
    for (size_t i = 0; i < N_OBJECTIVES; i++)
        fprintf(f, " %s", objectives[i].name);
    fprintf(f, "\n  x, z in [0, 1] (default 0.5); y in [1e-5, 1] (default 1e-3); c opt0..opt3\n"
               "  --epochs: budget, 1..100000 (default $TUNEPACK_BUDGET, else 27)\n");
}

/* Returns 0, 1 (--help) or -1 (said). */
static int parse_args(int argc, char **argv, struct options *o) {
    static const struct option longopts[] = {
        {"objective", required_argument, NULL, 'o'},
        {"x", required_argument, NULL, 'x'},
        {"z", required_argument, NULL, 'z'},
        {"y", required_argument, NULL, 'y'},
        {"c", required_argument, NULL, 'c'},
        {"epochs", required_argument, NULL, 'e'},
        {"seed", required_argument, NULL, 's'},
        {"epoch-ms", required_argument, NULL, 'm'},
        {"describe", no_argument, NULL, 'd'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    double budget = tp_budget(27.0);
    int ch;

    *o = (struct options){
        .objective = -1, .p = {.x = 0.5, .z = 0.5, .y = 1e-3, .c = 0}, .epochs = 27};
    if (budget == floor(budget) && budget >= 1.0 && budget <= 100000.0) o->epochs = (long)budget;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        const char *what = NULL;
        long v;
        switch (ch) {
        case 'o':
            for (size_t i = 0; i < N_OBJECTIVES; i++)
                if (strcmp(optarg, objectives[i].name) == 0) o->objective = (int)i;
            if (o->objective < 0) what = "--objective wants bowl, branin or needle";
            break;
        case 'x':
            if (parse_double(optarg, &o->p.x) != 0 || o->p.x < 0.0 || o->p.x > 1.0)
                what = "--x wants a number in [0, 1]";
            break;
        case 'z':
            if (parse_double(optarg, &o->p.z) != 0 || o->p.z < 0.0 || o->p.z > 1.0)
                what = "--z wants a number in [0, 1]";
            break;
        case 'y':
            if (parse_double(optarg, &o->p.y) != 0 || o->p.y < Y_LO || o->p.y > Y_HI)
                what = "--y wants a number in [1e-5, 1]";
            break;
        case 'c':
            if (strncmp(optarg, "opt", 3) != 0 || optarg[3] < '0' || optarg[3] >= '0' + N_CHOICES ||
                optarg[4] != '\0')
                what = "--c wants opt0, opt1, opt2 or opt3";
            else
                o->p.c = optarg[3] - '0';
            break;
        case 'e':
            if (parse_long(optarg, 1, 100000, &o->epochs) != 0)
                what = "--epochs wants an integer in 1..100000";
            break;
        case 's':
            if (parse_long(optarg, 0, 2147483647L, &v) != 0)
                what = "--seed wants an integer in 0..2147483647";
            else
                o->seed = (uint64_t)v;
            break;
        case 'm':
            if (parse_long(optarg, 0, 3600000L, &o->epoch_ms) != 0)
                what = "--epoch-ms wants an integer in 0..3600000";
            break;
        case 'd':
            o->describe = 1;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            fprintf(stderr, "search_objective: option '%s' needs a value or is unknown\n",
                    argv[optind - 1]);
            usage(stderr);
            return -1;
        }
        if (what != NULL) {
            fprintf(stderr, "search_objective: %s, got '%s'\n", what, optarg);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "search_objective: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    if (o->objective < 0 && !o->describe) {
        fprintf(stderr, "search_objective: --objective NAME is required\n");
        usage(stderr);
        return -1;
    }
    return 0;
}

static void sleep_ms(long ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int main(int argc, char **argv) {
    struct options o;
    const char *dir = tp_checkpoint_dir();
    const char *name;
    long epoch = 0;
    int rc = parse_args(argc, argv, &o);

    if (rc != 0) return rc > 0 ? 0 : 2;
    if (o.describe) {
        describe(o.objective);
        return 0;
    }
    name = objectives[o.objective].name;
    o.p.ly = log_unit(o.p.y);
    if (dir != NULL) {
        epoch = ckpt_load(dir, name, &o.p);
        if (tp_handle_pause_signal() != 0) perror("search_objective: SIGUSR1 handler");
    }
    if (epoch >= o.epochs) /* already there (a stale checkpoint): say where it stands */
        tp_report(epoch, "score", score((size_t)o.objective, o.seed, &o.p, epoch), NULL);
    while (epoch < o.epochs) {
        if (o.epoch_ms > 0) sleep_ms(o.epoch_ms);
        epoch++;
        if (tp_report(epoch, "score", score((size_t)o.objective, o.seed, &o.p, epoch), NULL))
            perror("search_objective: report");
        if (dir != NULL && ckpt_save(dir, name, &o.p, epoch) != 0) return 1;
        if (epoch < o.epochs && tp_should_pause()) break;
    }
    return 0;
}
