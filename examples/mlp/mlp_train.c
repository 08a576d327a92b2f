/* mlp_train - a small but real trainer for tunepack's examples.
 *
 * A multi-layer perceptron (tanh hidden layers, softmax cross-entropy output) trained with
 * mini-batch SGD with momentum on a 3-arm noisy spiral in 2-D. The data set comes from a PRNG
 * with a fixed seed, so it is the same for every trial whatever the hyperparameters; --seed only
 * changes the weight initialisation and the order of mini-batches.
 *
 *     mlp_train --lr 0.05 --momentum 0.9 --hidden 64 --layers 2 --epochs 20
 *
 * Each epoch is reported with tp_report(epoch, "val_acc", ..., "loss", ...); a one-line summary
 * goes to stderr at the end. Exit status: 0 after training (a diverged run included: it reports
 * and stops early), 2 for bad arguments, 1 when memory runs out.
 *
 * Cost: about 6 * (weights) float operations per sample and epoch; the largest configuration
 * the demo's search space allows (3 x 128 units) takes about a second on one core at -O2.
 */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tunepack/report.h>

#define N_CLASSES 3        /* spiral arms */
#define N_INPUTS 2         /* x, y */
#define N_TRAIN 2000       /* training points */
#define N_VAL 1000         /* validation points */
#define DATA_SEED 20240607 /* fixed: the data never depends on a trial's arguments */
#define MAX_LAYERS 4       /* hidden layers */
#define MAX_HIDDEN 1024    /* units per hidden layer */
#define SPIRAL_TURNS 1.0   /* how far each arm winds; 1.25 is already too hard for 20 epochs */
#define SPIRAL_RADIUS 3.0  /* outer radius: inputs of order 1 keep tanh units sensitive */
#define ANGLE_NOISE 0.15   /* radians, standard deviation */
#define POINT_NOISE 0.02   /* added to x and y before scaling, standard deviation */

struct options {
    double lr;               /* learning rate */
    double momentum;         /* momentum coefficient, in [0, 1) */
    long hidden;             /* units per hidden layer */
    long layers;             /* hidden layers */
    long epochs;             /* passes over the training set */
    long batch;              /* samples per SGD step */
    unsigned long long seed; /* weight init and batch order */
};

struct dataset {
    float x[N_TRAIN + N_VAL][N_INPUTS]; /* inputs; first N_TRAIN rows train, the rest validate */
    int y[N_TRAIN + N_VAL];             /* class, 0 .. N_CLASSES-1 */
};

/* One dense layer, out = in * w + b. w is stored in-major (w[i * n_out + o]) so that both the
 * forward pass and the weight gradient run along contiguous rows. */
struct layer {
    int n_in, n_out; /* shape */
    float *w, *b;    /* parameters */
    float *vw, *vb;  /* momentum buffers */
    float *gw, *gb;  /* gradient of the current batch */
};

struct net {
    int n_layers;                      /* dense layers: hidden layers + output */
    struct layer layer[MAX_LAYERS + 1];
    float *act[MAX_LAYERS + 2];        /* act[0] = batch input, act[l + 1] = output of layer l */
    float *delta[MAX_LAYERS + 2];      /* d loss / d pre-activation, same shapes as act */
    int max_batch;                     /* rows in act and delta */
};

/* ---- a PRNG of our own: splitmix64, identical everywhere ---- */

static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_uniform(uint64_t *state)
{
    return (double)(rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller; the second value is thrown away to stay stateless). */
static double rng_normal(uint64_t *state)
{
    double u = rng_uniform(state), v = rng_uniform(state);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

/* Uniform integer in [0, n). */
static size_t rng_below(uint64_t *state, size_t n)
{
    return (size_t)(rng_uniform(state) * (double)n);
}

/* ---- data ---- */

/* Fills d with N_TRAIN + N_VAL spiral points, classes balanced, shuffled, from DATA_SEED. */
static void make_spirals(struct dataset *d)
{
    const int n = N_TRAIN + N_VAL;
    uint64_t rng = DATA_SEED;

    for (int i = 0; i < n; i++) {
        int c = i % N_CLASSES;
        double t = rng_uniform(&rng);
        double r = 0.1 + 0.9 * t;
        double a = c * 6.283185307179586 / N_CLASSES + t * SPIRAL_TURNS * 6.283185307179586 +
                   ANGLE_NOISE * rng_normal(&rng);
        d->x[i][0] = (float)(SPIRAL_RADIUS * (r * cos(a) + POINT_NOISE * rng_normal(&rng)));
        d->x[i][1] = (float)(SPIRAL_RADIUS * (r * sin(a) + POINT_NOISE * rng_normal(&rng)));
        d->y[i] = c;
    }
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(&rng, (size_t)i + 1);
        float x0 = d->x[i][0], x1 = d->x[i][1];
        int y = d->y[i];
        d->x[i][0] = d->x[j][0];
        d->x[i][1] = d->x[j][1];
        d->y[i] = d->y[j];
        d->x[j][0] = x0;
        d->x[j][1] = x1;
        d->y[j] = y;
    }
}

/* ---- the network ---- */

static void net_free(struct net *nt)
{
    for (int l = 0; l < nt->n_layers; l++) {
        struct layer *ly = &nt->layer[l];
        free(ly->w);
        free(ly->b);
        free(ly->vw);
        free(ly->vb);
        free(ly->gw);
        free(ly->gb);
    }
    for (int l = 0; l <= nt->n_layers; l++) {
        free(nt->act[l]);
        free(nt->delta[l]);
    }
}

/* Builds the network with Glorot-uniform weights from seed and zero biases. Returns 0, or -1
 * when memory runs out (what was allocated is freed by net_free either way). */
static int net_init(struct net *nt, const struct options *o)
{
    uint64_t rng = o->seed * 0x2545f4914f6cdd1dULL + 1;
    int width[MAX_LAYERS + 2];

    memset(nt, 0, sizeof *nt);
    nt->n_layers = (int)o->layers + 1;
    nt->max_batch = (int)o->batch;
    width[0] = N_INPUTS;
    for (int l = 1; l <= o->layers; l++)
        width[l] = (int)o->hidden;
    width[nt->n_layers] = N_CLASSES;

    for (int l = 0; l <= nt->n_layers; l++) {
        size_t cells = (size_t)nt->max_batch * (size_t)width[l];
        nt->act[l] = calloc(cells, sizeof(float));
        nt->delta[l] = calloc(cells, sizeof(float));
        if (nt->act[l] == NULL || nt->delta[l] == NULL)
            return -1;
    }
    for (int l = 0; l < nt->n_layers; l++) {
        struct layer *ly = &nt->layer[l];
        size_t nw = (size_t)width[l] * (size_t)width[l + 1];
        double limit = sqrt(6.0 / (width[l] + width[l + 1]));

        ly->n_in = width[l];
        ly->n_out = width[l + 1];
        ly->w = calloc(nw, sizeof(float));
        ly->vw = calloc(nw, sizeof(float));
        ly->gw = calloc(nw, sizeof(float));
        ly->b = calloc((size_t)ly->n_out, sizeof(float));
        ly->vb = calloc((size_t)ly->n_out, sizeof(float));
        ly->gb = calloc((size_t)ly->n_out, sizeof(float));
        if (!ly->w || !ly->vw || !ly->gw || !ly->b || !ly->vb || !ly->gb)
            return -1;
        for (size_t k = 0; k < nw; k++)
            ly->w[k] = (float)((2.0 * rng_uniform(&rng) - 1.0) * limit);
    }
    return 0;
}

/* The two kernels all the time goes into. They work in blocks of 8 so that GCC's -O2 (whose
 * loop vectorizer only takes the cheapest cases) still turns them into SIMD code through
 * straight-line (SLP) vectorization; the result is the same at any optimisation level. */

/* y[0..n) += a * x[0..n). */
static void axpy(float *restrict y, float a, const float *restrict x, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            y[i + k] += a * x[i + k];
    for (; i < n; i++)
        y[i] += a * x[i];
}

/* Sum of x[i] * y[i] over [0, n), in 8 partial sums. */
static float dot(const float *restrict x, const float *restrict y, int n)
{
    float acc[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            acc[k] += x[i + k] * y[i + k];
    for (; i < n; i++)
        acc[0] += x[i] * y[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Forward pass for rows of act[0]; leaves tanh activations in act[1..n-1] and raw logits
 * (pre-softmax) in act[n]. O(rows * weights). */
static void net_forward(struct net *nt, int rows)
{
    for (int l = 0; l < nt->n_layers; l++) {
        const struct layer *ly = &nt->layer[l];
        const int n_in = ly->n_in, n_out = ly->n_out;
        const int hidden = l + 1 < nt->n_layers;

        for (int s = 0; s < rows; s++) {
            const float *in = nt->act[l] + (size_t)s * n_in;
            float *out = nt->act[l + 1] + (size_t)s * n_out;

            memcpy(out, ly->b, (size_t)n_out * sizeof(float));
            for (int i = 0; i < n_in; i++)
                axpy(out, in[i], ly->w + (size_t)i * n_out, n_out);
            if (hidden)
                for (int o = 0; o < n_out; o++)
                    out[o] = tanhf(out[o]);
        }
    }
}

/* Softmax cross-entropy of one row of logits against class y; writes the gradient
 * (softmax - onehot) / scale into grad when it is not NULL. Returns the loss (may be inf or
 * NaN once training has diverged). */
static double softmax_xent(const float *logits, int y, float *grad, float scale)
{
    float max = logits[0], sum = 0.0f;
    float p[N_CLASSES];

    for (int k = 1; k < N_CLASSES; k++)
        if (logits[k] > max)
            max = logits[k];
    for (int k = 0; k < N_CLASSES; k++) {
        p[k] = expf(logits[k] - max);
        sum += p[k];
    }
    if (grad != NULL)
        for (int k = 0; k < N_CLASSES; k++)
            grad[k] = (p[k] / sum - (k == y ? 1.0f : 0.0f)) / scale;
    return -((double)logits[y] - max - log((double)sum));
}

/* Index of the largest logit; ties and NaN keep the lower index, so a diverged network still
 * predicts deterministically (class 0). */
static int argmax(const float *logits)
{
    int best = 0;
    for (int k = 1; k < N_CLASSES; k++)
        if (logits[k] > logits[best])
            best = k;
    return best;
}

/* Backward pass for a batch whose loss gradient is in delta[n]; fills each layer's gw, gb.
 * O(rows * weights). */
static void net_backward(struct net *nt, int rows)
{
    for (int l = nt->n_layers - 1; l >= 0; l--) {
        struct layer *ly = &nt->layer[l];
        const int n_in = ly->n_in, n_out = ly->n_out;

        memset(ly->gw, 0, (size_t)n_in * n_out * sizeof(float));
        memset(ly->gb, 0, (size_t)n_out * sizeof(float));
        for (int s = 0; s < rows; s++) {
            const float *in = nt->act[l] + (size_t)s * n_in;
            const float *d = nt->delta[l + 1] + (size_t)s * n_out;
            float *din = nt->delta[l] + (size_t)s * n_in;

            for (int o = 0; o < n_out; o++)
                ly->gb[o] += d[o];
            for (int i = 0; i < n_in; i++)
                axpy(ly->gw + (size_t)i * n_out, in[i], d, n_out);
            if (l == 0)
                continue; /* no gradient needed for the inputs */
            /* through tanh: d tanh(z) / dz = 1 - tanh(z)^2 */
            for (int i = 0; i < n_in; i++)
                din[i] = dot(ly->w + (size_t)i * n_out, d, n_out) * (1.0f - in[i] * in[i]);
        }
    }
}

/* v = momentum * v - lr * g; w += v, for every parameter. */
static void net_step(struct net *nt, float lr, float momentum)
{
    for (int l = 0; l < nt->n_layers; l++) {
        struct layer *ly = &nt->layer[l];
        size_t nw = (size_t)ly->n_in * ly->n_out;
        for (size_t k = 0; k < nw; k++) {
            ly->vw[k] = momentum * ly->vw[k] - lr * ly->gw[k];
            ly->w[k] += ly->vw[k];
        }
        for (int o = 0; o < ly->n_out; o++) {
            ly->vb[o] = momentum * ly->vb[o] - lr * ly->gb[o];
            ly->b[o] += ly->vb[o];
        }
    }
}

/* Accuracy over rows [from, from + n) of d, in batches of the network's size. */
static double evaluate(struct net *nt, const struct dataset *d, int from, int n)
{
    int correct = 0;
    for (int start = 0; start < n; start += nt->max_batch) {
        int rows = n - start < nt->max_batch ? n - start : nt->max_batch;
        memcpy(nt->act[0], d->x[from + start], (size_t)rows * N_INPUTS * sizeof(float));
        net_forward(nt, rows);
        for (int s = 0; s < rows; s++)
            correct += argmax(nt->act[nt->n_layers] + (size_t)s * N_CLASSES) ==
                       d->y[from + start + s];
    }
    return (double)correct / n;
}

/* One pass over the training set in the order given by perm; returns the mean training loss
 * (non-finite once diverged). */
static double train_epoch(struct net *nt, const struct dataset *d, const int *perm,
                          const struct options *o)
{
    const int n_out = nt->n_layers;
    double loss = 0.0;

    for (int start = 0; start < N_TRAIN; start += nt->max_batch) {
        int rows = N_TRAIN - start < nt->max_batch ? N_TRAIN - start : nt->max_batch;
        for (int s = 0; s < rows; s++)
            memcpy(nt->act[0] + (size_t)s * N_INPUTS, d->x[perm[start + s]],
                   N_INPUTS * sizeof(float));
        net_forward(nt, rows);
        for (int s = 0; s < rows; s++)
            loss += softmax_xent(nt->act[n_out] + (size_t)s * N_CLASSES, d->y[perm[start + s]],
                                 nt->delta[n_out] + (size_t)s * N_CLASSES, (float)rows);
        net_backward(nt, rows);
        net_step(nt, (float)o->lr, (float)o->momentum);
    }
    return loss / N_TRAIN;
}

/* ---- arguments ---- */

/* Parses a finite double from the whole of s. Returns 0 or -1. */
static int parse_double(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

/* Parses an integer in [lo, hi] from the whole of s; "64" and "64.0" are both accepted, since
 * a search space may hand integers over in either form. Returns 0 or -1. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
    double v;
    if (parse_double(s, &v) != 0 || v != floor(v) || v < (double)lo || v > (double)hi)
        return -1;
    *out = (long)v;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mlp_train [--lr X] [--momentum X] [--hidden N] [--layers N] [--epochs N]\n"
            "                 [--batch N] [--seed N]\n"
            "  --lr        learning rate, > 0 (default 0.05)\n"
            "  --momentum  SGD momentum, in [0, 1) (default 0.9)\n"
            "  --hidden    units per hidden layer, 1..%d (default 32)\n"
            "  --layers    hidden layers, 1..%d (default 1)\n"
            "  --epochs    passes over the %d training points, 1..100000 (default 20)\n"
            "  --batch     samples per step, 1..%d (default 32)\n"
            "  --seed      weight-init seed, >= 0 (default 0); the data never changes\n",
            MAX_HIDDEN, MAX_LAYERS, N_TRAIN, N_TRAIN);
}

/* Fills o from argv. Returns 0, 1 for --help, or -1 after printing what was wrong. */
static int parse_args(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"lr", required_argument, NULL, 'l'},     {"momentum", required_argument, NULL, 'm'},
        {"hidden", required_argument, NULL, 'H'}, {"layers", required_argument, NULL, 'L'},
        {"epochs", required_argument, NULL, 'e'}, {"batch", required_argument, NULL, 'b'},
        {"seed", required_argument, NULL, 's'},   {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    *o = (struct options){.lr = 0.05, .momentum = 0.9, .hidden = 32, .layers = 1,
                          .epochs = 20, .batch = 32, .seed = 0};
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        const char *what = NULL;
        long seed;
        switch (c) {
        case 'l':
            if (parse_double(optarg, &o->lr) != 0 || !(o->lr > 0.0))
                what = "--lr wants a number > 0";
            break;
        case 'm':
            if (parse_double(optarg, &o->momentum) != 0 || o->momentum < 0.0 ||
                o->momentum >= 1.0)
                what = "--momentum wants a number in [0, 1)";
            break;
        case 'H':
            if (parse_long(optarg, 1, MAX_HIDDEN, &o->hidden) != 0)
                what = "--hidden wants an integer in 1..1024";
            break;
        case 'L':
            if (parse_long(optarg, 1, MAX_LAYERS, &o->layers) != 0)
                what = "--layers wants an integer in 1..4";
            break;
        case 'e':
            if (parse_long(optarg, 1, 100000, &o->epochs) != 0)
                what = "--epochs wants an integer in 1..100000";
            break;
        case 'b':
            if (parse_long(optarg, 1, N_TRAIN, &o->batch) != 0)
                what = "--batch wants an integer in 1..2000";
            break;
        case 's':
            if (parse_long(optarg, 0, 2147483647L, &seed) != 0)
                what = "--seed wants an integer in 0..2147483647";
            else
                o->seed = (unsigned long long)seed;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            if (optopt != 0)
                fprintf(stderr, "mlp_train: option '%s' needs a value or is unknown\n",
                        argv[optind - 1]);
            else
                fprintf(stderr, "mlp_train: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return -1;
        }
        if (what != NULL) {
            fprintf(stderr, "mlp_train: %s, got '%s'\n", what, optarg);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "mlp_train: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return -1;
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    static struct dataset data;
    static int perm[N_TRAIN];
    struct options o;
    struct net nt;
    double t0 = now_s(), best = 0.0, acc = 0.0, loss = 0.0;
    long epoch;
    int rc;

    rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc > 0 ? 0 : 2;

    make_spirals(&data);
    if (net_init(&nt, &o) != 0) {
        fprintf(stderr, "mlp_train: out of memory for %ld x %ld units\n", o.layers, o.hidden);
        net_free(&nt);
        return 1;
    }

    uint64_t order = o.seed ^ 0xd1b54a32d192ed03ULL;
    for (int i = 0; i < N_TRAIN; i++)
        perm[i] = i;
    for (epoch = 1; epoch <= o.epochs; epoch++) {
        for (int i = N_TRAIN - 1; i > 0; i--) {
            int j = (int)rng_below(&order, (size_t)i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        loss = train_epoch(&nt, &data, perm, &o);
        acc = evaluate(&nt, &data, N_TRAIN, N_VAL);
        if (acc > best)
            best = acc;
        if (tp_report(epoch, "val_acc", acc, "loss", loss, NULL) != 0)
            perror("mlp_train: report");
        if (!isfinite(loss)) {
            fprintf(stderr, "mlp_train: training diverged at epoch %ld (lr %g), stopping\n",
                    epoch, o.lr);
            break;
        }
    }
    net_free(&nt);
    fprintf(stderr,
            "mlp_train: lr=%g momentum=%g hidden=%ld layers=%ld epochs=%ld batch=%ld seed=%llu: "
            "final val_acc=%.4f best=%.4f loss=%.4g in %.2f s\n",
            o.lr, o.momentum, o.hidden, o.layers, epoch > o.epochs ? o.epochs : epoch, o.batch,
            o.seed, acc, best, loss, now_s() - t0);
    return 0;
}
