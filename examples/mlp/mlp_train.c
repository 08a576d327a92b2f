/* mlp_train - a small but real trainer for tunepack's examples.
 *
 * A multi-layer perceptron (tanh hidden layers, softmax cross-entropy output) trained with
 * mini-batch SGD with momentum on a 4-arm noisy spiral in 2-D (1.25 turns per arm, 5% of the
 * labels wrong, 8000 training points and 1000 held-out validation points). The problem is hard
 * on purpose: the best configurations reach a validation accuracy a little over 0.9 in 20
 * epochs (the wrong labels cap it near 0.95), poor ones stay near chance (0.25), so a search
 * has a real spread to find its way through. The data set comes from a PRNG with a fixed seed,
 * so it is the same for every trial whatever the hyperparameters; --seed only changes the
 * weight initialisation and the order of mini-batches: the same arguments give the same
 * reports.
 *
 *     mlp_train --lr 0.05 --momentum 0.9 --hidden 64 --layers 2 --epochs 20
 *
 * Each epoch is reported with tp_report(epoch, "val_acc", ..., "loss", ...); a one-line summary
 * goes to stderr at the end. Exit status: 0 after training (a diverged run included: it reports
 * and stops early) or after a pause, 2 for bad arguments or a checkpoint of another network,
 * 1 when memory runs out or a checkpoint cannot be written.
 *
 * Budget and checkpoints (docs/checkpoints.md): --epochs is the budget, the epoch to train up
 * to (TUNEPACK_BUDGET when --epochs is not given). With a checkpoint directory (--checkpoint-dir,
 * else TUNEPACK_CHECKPOINT_DIR) it resumes from DIR/mlp.ckpt when that exists (weights, momentum
 * buffers, batch order and its PRNG, the epoch reached) and saves it after every epoch (a temp
 * file renamed over the old one), so 3 epochs then --epochs 9 give bit for bit the reports and
 * weights of one 9-epoch run. At each epoch end it checks for a pause request ("pause" on
 * TUNEPACK_CONTROL_FD, or SIGUSR1 when a checkpoint directory is set) and, on one, exits 0
 * with the checkpoint saved.
 *
 * Cost: about 6 * (weights) float operations per sample and epoch; with 20 epochs the largest
 * configuration the demo's search space allows (3 x 128 units) takes 4-6 s on one core at
 * -O2, the smallest (1 x 16) a tenth of a second.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <tunepack/report.h>

#define N_CLASSES 4          /* spiral arms; chance is 1 / N_CLASSES */
#define N_INPUTS 2           /* x, y */
#define N_TRAIN 8000         /* training points */
#define N_VAL 1000           /* validation points, held out: never trained on */
#define DATA_SEED 20240607   /* fixed: the data never depends on a trial's arguments */
#define MAX_LAYERS 4         /* hidden layers */
#define MAX_HIDDEN 1024      /* units per hidden layer */
#define SPIRAL_TURNS 1.25    /* how far each arm winds: 20 epochs reach ~0.9 only when tuned well */
#define SPIRAL_RADIUS 3.0    /* outer radius: inputs of order 1 keep tanh units sensitive */
#define ANGLE_NOISE 0.15     /* radians, standard deviation */
#define POINT_NOISE 0.02     /* added to x and y before scaling, standard deviation */
#define LABEL_NOISE 0.05     /* share of points, train and validation, given a wrong class */
#define CKPT_NAME "mlp.ckpt" /* checkpoint file in the checkpoint directory */
#define CKPT_MAGIC "tpmlpck2" /* first 8 bytes of a checkpoint; 2: the 4-arm data set */

struct options {
    double lr;               /* learning rate */
    double momentum;         /* momentum coefficient, in [0, 1) */
    long hidden;             /* units per hidden layer */
    long layers;             /* hidden layers */
    long epochs;             /* passes over the training set */
    long batch;              /* samples per SGD step */
    unsigned long long seed; /* weight init and batch order */
    const char *ckpt_dir;    /* --checkpoint-dir, else TUNEPACK_CHECKPOINT_DIR; NULL: none */
};

/* Where training stands: what a checkpoint holds besides the network's parameters. */
struct progress {
    long epoch;       /* epochs done */
    int diverged;     /* the loss went non-finite at `epoch`: training stopped there */
    uint64_t order;   /* PRNG state of the batch order */
    double best;      /* best validation accuracy so far */
    double acc, loss; /* validation accuracy and training loss of epoch `epoch` */
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
    int n_layers; /* dense layers: hidden layers + output */
    struct layer layer[MAX_LAYERS + 1];
    float *act[MAX_LAYERS + 2];   /* act[0] = batch input, act[l + 1] = output of layer l */
    float *delta[MAX_LAYERS + 2]; /* d loss / d pre-activation, same shapes as act */
    int max_batch;                /* rows in act and delta */
};

/* ---- a PRNG of our own: splitmix64, identical everywhere ---- */

static uint64_t rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_uniform(uint64_t *state) {
    return (double)(rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Standard normal (Box-Muller; the second value is thrown away to stay stateless). */
static double rng_normal(uint64_t *state) {
    double u = rng_uniform(state), v = rng_uniform(state);
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

/* Uniform integer in [0, n). */
static size_t rng_below(uint64_t *state, size_t n) {
    return (size_t)(rng_uniform(state) * (double)n);
}

/* ---- data ---- */

/* Fills d with N_TRAIN + N_VAL spiral points, arms balanced, shuffled, from DATA_SEED. A
 * share LABEL_NOISE of the points is given one of the other classes at random (drawn before
 * the split, so the validation set is as noisy as the training set: no network scores 1.0). */
static void make_spirals(struct dataset *d) {
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
        /* label noise: a uniform draw for every point keeps the PRNG sequence simple */
        if (rng_uniform(&rng) < LABEL_NOISE)
            d->y[i] = (c + 1 + (int)rng_below(&rng, N_CLASSES - 1)) % N_CLASSES;
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

static void net_free(struct net *nt) {
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
static int net_init(struct net *nt, const struct options *o) {
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
        if (nt->act[l] == NULL || nt->delta[l] == NULL) return -1;
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
        if (!ly->w || !ly->vw || !ly->gw || !ly->b || !ly->vb || !ly->gb) return -1;
        for (size_t k = 0; k < nw; k++)
            ly->w[k] = (float)((2.0 * rng_uniform(&rng) - 1.0) * limit);
    }
    return 0;
}

/* The two kernels all the time goes into. They work in blocks of 8 so that GCC's -O2 (whose
 * loop vectorizer only takes the cheapest cases) still turns them into SIMD code through
 * straight-line (SLP) vectorization; the result is the same at any optimisation level. */

/* y[0..n) += a * x[0..n). */
static void axpy(float *restrict y, float a, const float *restrict x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            y[i + k] += a * x[i + k];
    for (; i < n; i++)
        y[i] += a * x[i];
}

/* Sum of x[i] * y[i] over [0, n), in 8 partial sums. */
static float dot(const float *restrict x, const float *restrict y, int n) {
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
static void net_forward(struct net *nt, int rows) {
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
static double softmax_xent(const float *logits, int y, float *grad, float scale) {
    float max = logits[0], sum = 0.0f;
    float p[N_CLASSES];

    for (int k = 1; k < N_CLASSES; k++)
        if (logits[k] > max) max = logits[k];
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
static int argmax(const float *logits) {
    int best = 0;
    for (int k = 1; k < N_CLASSES; k++)
        if (logits[k] > logits[best]) best = k;
    return best;
}

/* Backward pass for a batch whose loss gradient is in delta[n]; fills each layer's gw, gb.
 * O(rows * weights). */
static void net_backward(struct net *nt, int rows) {
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
            if (l == 0) continue; /* no gradient needed for the inputs */
            /* through tanh: d tanh(z) / dz = 1 - tanh(z)^2 */
            for (int i = 0; i < n_in; i++)
                din[i] = dot(ly->w + (size_t)i * n_out, d, n_out) * (1.0f - in[i] * in[i]);
        }
    }
}

/* v = momentum * v - lr * g; w += v, for every parameter. */
static void net_step(struct net *nt, float lr, float momentum) {
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
static double evaluate(struct net *nt, const struct dataset *d, int from, int n) {
    int correct = 0;
    for (int start = 0; start < n; start += nt->max_batch) {
        int rows = n - start < nt->max_batch ? n - start : nt->max_batch;
        memcpy(nt->act[0], d->x[from + start], (size_t)rows * N_INPUTS * sizeof(float));
        net_forward(nt, rows);
        for (int s = 0; s < rows; s++)
            correct +=
                argmax(nt->act[nt->n_layers] + (size_t)s * N_CLASSES) == d->y[from + start + s];
    }
    return (double)correct / n;
}

/* One pass over the training set in the order given by perm; returns the mean training loss
 * (non-finite once diverged). */
static double train_epoch(struct net *nt, const struct dataset *d, const int *perm,
                          const struct options *o) {
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

/* ---- checkpoints: DIR/mlp.ckpt ----
 *
 * Layout, native byte order (a checkpoint is read back on the machine that wrote it):
 * CKPT_MAGIC (8 bytes); int64 layers, hidden, batch, seed, epoch, diverged; uint64 order;
 * double best, acc, loss; int32 perm[N_TRAIN]; then per dense layer float w, b, vw, vb; last a
 * uint64 FNV-1a hash of everything before it. Gradients and activations are not saved: every
 * batch recomputes them from scratch, so the state above is all a resumed run needs to go on
 * bit for bit as if it had never stopped. */

struct buf {
    unsigned char *p; /* bytes, malloc'd; NULL when sizing only */
    size_t len;       /* bytes written (or that would be) */
};

static void put(struct buf *b, const void *src, size_t n) {
    if (b->p != NULL) memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_i64(struct buf *b, int64_t v) {
    put(b, &v, sizeof v);
}

static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

/* Serialises everything but the trailing hash into b (sizes only when b->p is NULL). */
static void ckpt_encode(struct buf *b, const struct net *nt, const struct options *o,
                        const struct progress *pg, const int *perm) {
    put(b, CKPT_MAGIC, 8);
    put_i64(b, o->layers);
    put_i64(b, o->hidden);
    put_i64(b, o->batch);
    put_i64(b, (int64_t)o->seed);
    put_i64(b, pg->epoch);
    put_i64(b, pg->diverged);
    put(b, &pg->order, sizeof pg->order);
    put(b, &pg->best, sizeof pg->best);
    put(b, &pg->acc, sizeof pg->acc);
    put(b, &pg->loss, sizeof pg->loss);
    for (int i = 0; i < N_TRAIN; i++) {
        int32_t v = perm[i];
        put(b, &v, sizeof v);
    }
    for (int l = 0; l < nt->n_layers; l++) {
        const struct layer *ly = &nt->layer[l];
        size_t nw = (size_t)ly->n_in * ly->n_out * sizeof(float);
        size_t nb = (size_t)ly->n_out * sizeof(float);
        put(b, ly->w, nw);
        put(b, ly->b, nb);
        put(b, ly->vw, nw);
        put(b, ly->vb, nb);
    }
}

static int write_all(int fd, const unsigned char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes the checkpoint to DIR/mlp.ckpt.tmp, then renames it over DIR/mlp.ckpt, so a reader
 * (this program, resumed after a kill at any instant) sees the old checkpoint or the new one,
 * never half of one. Returns 0, or -1 with a message on stderr. O(parameters + N_TRAIN). */
static int ckpt_save(const char *dir, const struct net *nt, const struct options *o,
                     const struct progress *pg, const int *perm) {
    char path[4096], tmp[4096];
    struct buf b = {NULL, 0};
    uint64_t h;
    int fd, rc = -1;

    if (snprintf(path, sizeof path, "%s/%s", dir, CKPT_NAME) >= (int)sizeof path ||
        snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, CKPT_NAME) >= (int)sizeof tmp) {
        fprintf(stderr, "mlp_train: checkpoint directory name too long: %s\n", dir);
        return -1;
    }
    ckpt_encode(&b, nt, o, pg, perm);
    b.p = malloc(b.len + sizeof h);
    if (b.p == NULL) {
        fprintf(stderr, "mlp_train: out of memory for a checkpoint\n");
        return -1;
    }
    b.len = 0;
    ckpt_encode(&b, nt, o, pg, perm);
    h = fnv1a(b.p, b.len);
    put(&b, &h, sizeof h);

    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write_all(fd, b.p, b.len) != 0) {
        fprintf(stderr, "mlp_train: cannot write %s: %s\n", tmp, strerror(errno));
    } else if (close(fd) != 0) {
        fd = -1;
        fprintf(stderr, "mlp_train: cannot write %s: %s\n", tmp, strerror(errno));
    } else if (fd = -1, rename(tmp, path) != 0) {
        fprintf(stderr, "mlp_train: cannot rename %s to %s: %s\n", tmp, path, strerror(errno));
    } else {
        rc = 0;
    }
    if (fd >= 0) close(fd);
    free(b.p);
    return rc;
}

/* Reads DIR/mlp.ckpt into nt, pg and perm (nt already built by net_init for options o).
 * Returns 1 when loaded; 0 when there is none, or it is damaged (said on stderr: training
 * starts over); -1 when it belongs to another network shape, batch size or seed (said on
 * stderr: the caller stops, since going on would mix two trials). */
static int ckpt_load(const char *dir, struct net *nt, const struct options *o, struct progress *pg,
                     int *perm) {
    char path[4096];
    struct buf want = {NULL, 0};
    unsigned char *data = NULL;
    const unsigned char *p;
    int64_t hdr[6];
    uint64_t h;
    struct stat st;
    FILE *f;
    int rc = 0;

    if (snprintf(path, sizeof path, "%s/%s", dir, CKPT_NAME) >= (int)sizeof path) return 0;
    f = fopen(path, "rb");
    if (f == NULL) {
        if (errno != ENOENT)
            fprintf(stderr, "mlp_train: cannot read %s (%s): starting from epoch 0\n", path,
                    strerror(errno));
        return 0;
    }
    ckpt_encode(&want, nt, o, pg, perm); /* sizes only: the length this network needs */
    if (fstat(fileno(f), &st) != 0 || st.st_size < 8 + (off_t)sizeof hdr) {
        fprintf(stderr, "mlp_train: %s is truncated: starting from epoch 0\n", path);
        goto out;
    }
    data = malloc((size_t)st.st_size);
    if (data == NULL || fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        fprintf(stderr, "mlp_train: cannot read %s: starting from epoch 0\n", path);
        goto out;
    }
    if (memcmp(data, CKPT_MAGIC, 8) != 0) {
        fprintf(stderr, "mlp_train: %s is not an mlp_train checkpoint: starting from epoch 0\n",
                path);
        goto out;
    }
    memcpy(hdr, data + 8, sizeof hdr);
    if (hdr[0] != o->layers || hdr[1] != o->hidden || hdr[2] != o->batch ||
        hdr[3] != (int64_t)o->seed) {
        fprintf(stderr,
                "mlp_train: %s is of another network (layers %lld, hidden %lld, batch %lld, "
                "seed %lld); this run has layers %ld, hidden %ld, batch %ld, seed %llu: use "
                "another checkpoint directory or remove the file\n",
                path, (long long)hdr[0], (long long)hdr[1], (long long)hdr[2], (long long)hdr[3],
                o->layers, o->hidden, o->batch, o->seed);
        rc = -1;
        goto out;
    }
    memcpy(&h, data + st.st_size - sizeof h, sizeof h);
    if ((size_t)st.st_size != want.len + sizeof h ||
        fnv1a(data, (size_t)st.st_size - sizeof h) != h) {
        fprintf(stderr, "mlp_train: %s is damaged (size or hash): starting from epoch 0\n", path);
        goto out;
    }
    pg->epoch = (long)hdr[4];
    pg->diverged = hdr[5] != 0;
    p = data + 8 + sizeof hdr;
    memcpy(&pg->order, p, sizeof pg->order), p += sizeof pg->order;
    memcpy(&pg->best, p, sizeof pg->best), p += sizeof pg->best;
    memcpy(&pg->acc, p, sizeof pg->acc), p += sizeof pg->acc;
    memcpy(&pg->loss, p, sizeof pg->loss), p += sizeof pg->loss;
    for (int i = 0; i < N_TRAIN; i++, p += sizeof(int32_t)) {
        int32_t v;
        memcpy(&v, p, sizeof v);
        perm[i] = v;
    }
    for (int l = 0; l < nt->n_layers; l++) {
        struct layer *ly = &nt->layer[l];
        size_t nw = (size_t)ly->n_in * ly->n_out * sizeof(float);
        size_t nb = (size_t)ly->n_out * sizeof(float);
        memcpy(ly->w, p, nw), p += nw;
        memcpy(ly->b, p, nb), p += nb;
        memcpy(ly->vw, p, nw), p += nw;
        memcpy(ly->vb, p, nb), p += nb;
    }
    rc = 1;
out:
    free(data);
    fclose(f);
    return rc;
}

/* ---- arguments ---- */

/* Parses a finite double from the whole of s. Returns 0 or -1. */
static int parse_double(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* Parses an integer in [lo, hi] from the whole of s; "64" and "64.0" are both accepted, since
 * a search space may hand integers over in either form. Returns 0 or -1. */
static int parse_long(const char *s, long lo, long hi, long *out) {
    double v;
    if (parse_double(s, &v) != 0 || v != floor(v) || v < (double)lo || v > (double)hi) return -1;
    *out = (long)v;
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: mlp_train [--lr X] [--momentum X] [--hidden N] [--layers N] [--epochs N]\n"
            "                 [--batch N] [--seed N] [--checkpoint-dir DIR]\n"
            "  --lr        learning rate, > 0 (default 0.05)\n"
            "  --momentum  SGD momentum, in [0, 1) (default 0.9)\n"
            "  --hidden    units per hidden layer, 1..%d (default 32)\n"
            "  --layers    hidden layers, 1..%d (default 1)\n"
            "  --epochs    the budget: train until this epoch, over %d training points,\n"
            "              1..100000 (default $TUNEPACK_BUDGET, else 20)\n"
            "  --batch     samples per step, 1..%d (default 32)\n"
            "  --seed      weight-init seed, >= 0 (default 0); the data never changes\n"
            "  --checkpoint-dir  resume from and save DIR/" CKPT_NAME " each epoch\n"
            "              (default $TUNEPACK_CHECKPOINT_DIR; none: no checkpoints)\n",
            MAX_HIDDEN, MAX_LAYERS, N_TRAIN, N_TRAIN);
}

/* Fills o from argv. Returns 0, 1 for --help, or -1 after printing what was wrong. */
static int parse_args(int argc, char **argv, struct options *o) {
    static const struct option longopts[] = {
        {"lr", required_argument, NULL, 'l'},
        {"momentum", required_argument, NULL, 'm'},
        {"hidden", required_argument, NULL, 'H'},
        {"layers", required_argument, NULL, 'L'},
        {"epochs", required_argument, NULL, 'e'},
        {"batch", required_argument, NULL, 'b'},
        {"seed", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {"checkpoint-dir", required_argument, NULL, 'c'},
        {NULL, 0, NULL, 0},
    };
    double budget = tp_budget(20.0);
    int c;

    *o = (struct options){.lr = 0.05,
                          .momentum = 0.9,
                          .hidden = 32,
                          .layers = 1,
                          .epochs = 20,
                          .batch = 32,
                          .seed = 0,
                          .ckpt_dir = tp_checkpoint_dir()};
    if (budget == floor(budget) && budget >= 1.0 && budget <= 100000.0) o->epochs = (long)budget;
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
            if (parse_double(optarg, &o->momentum) != 0 || o->momentum < 0.0 || o->momentum >= 1.0)
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
                what = "--batch wants an integer in 1..8000";
            break;
        case 's':
            if (parse_long(optarg, 0, 2147483647L, &seed) != 0)
                what = "--seed wants an integer in 0..2147483647";
            else
                o->seed = (unsigned long long)seed;
            break;
        case 'c':
            if (*optarg == '\0')
                what = "--checkpoint-dir wants a directory";
            else
                o->ckpt_dir = optarg;
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

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Makes dir when it does not exist (one level). Returns 0 or -1 with a message on stderr. */
static int ensure_dir(const char *dir) {
    if (mkdir(dir, 0777) == 0 || errno == EEXIST) return 0;
    fprintf(stderr, "mlp_train: cannot create checkpoint directory %s: %s\n", dir, strerror(errno));
    return -1;
}

int main(int argc, char **argv) {
    static struct dataset data;
    static int perm[N_TRAIN];
    struct options o;
    struct net nt;
    struct progress pg;
    double t0 = now_s();
    long resumed_from = 0, epoch;
    int rc, paused = 0, failed = 0;

    rc = parse_args(argc, argv, &o);
    if (rc != 0) return rc > 0 ? 0 : 2;

    make_spirals(&data);
    if (net_init(&nt, &o) != 0) {
        fprintf(stderr, "mlp_train: out of memory for %ld x %ld units\n", o.layers, o.hidden);
        net_free(&nt);
        return 1;
    }

    pg = (struct progress){.order = o.seed ^ 0xd1b54a32d192ed03ULL};
    for (int i = 0; i < N_TRAIN; i++)
        perm[i] = i;
    if (o.ckpt_dir != NULL) {
        if (ensure_dir(o.ckpt_dir) != 0) {
            net_free(&nt);
            return 1;
        }
        rc = ckpt_load(o.ckpt_dir, &nt, &o, &pg, perm);
        if (rc < 0) {
            net_free(&nt);
            return 2;
        }
        resumed_from = pg.epoch;
        /* SIGUSR1 asks for a pause too (checkpoint: {signal: SIGUSR1}); without a checkpoint
         * directory it keeps its default action, as before. */
        if (tp_handle_pause_signal() != 0) perror("mlp_train: SIGUSR1 handler");
    }
    if (resumed_from > 0)
        fprintf(stderr, "mlp_train: resumed from %s/%s at epoch %ld%s\n", o.ckpt_dir, CKPT_NAME,
                pg.epoch, pg.diverged ? " (diverged there)" : "");
    if (pg.epoch >= o.epochs || pg.diverged) {
        /* Nothing left to train (the checkpoint is at or past this budget, or training had
         * diverged): report where it stands, so this job too has a value. */
        if (tp_report(pg.epoch, "val_acc", pg.acc, "loss", pg.loss, NULL) != 0)
            perror("mlp_train: report");
    }

    for (epoch = pg.epoch + 1; epoch <= o.epochs && !pg.diverged; epoch++) {
        for (int i = N_TRAIN - 1; i > 0; i--) {
            int j = (int)rng_below(&pg.order, (size_t)i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        pg.loss = train_epoch(&nt, &data, perm, &o);
        pg.acc = evaluate(&nt, &data, N_TRAIN, N_VAL);
        pg.epoch = epoch;
        if (pg.acc > pg.best) pg.best = pg.acc;
        /* report before saving: a kill between the two repeats this epoch's report on resume
         * rather than losing it */
        if (tp_report(epoch, "val_acc", pg.acc, "loss", pg.loss, NULL) != 0)
            perror("mlp_train: report");
        if (!isfinite(pg.loss)) {
            fprintf(stderr, "mlp_train: training diverged at epoch %ld (lr %g), stopping\n", epoch,
                    o.lr);
            pg.diverged = 1;
        }
        if (o.ckpt_dir != NULL && ckpt_save(o.ckpt_dir, &nt, &o, &pg, perm) != 0) {
            failed = 1;
            break;
        }
        if (epoch < o.epochs && !pg.diverged && tp_should_pause()) {
            paused = 1;
            break;
        }
    }
    net_free(&nt);
    if (paused)
        fprintf(stderr, "mlp_train: pause requested: %s at epoch %ld, exiting\n",
                o.ckpt_dir != NULL ? "checkpoint saved" : "no checkpoint directory, progress lost",
                pg.epoch);
    fprintf(stderr,
            "mlp_train: lr=%g momentum=%g hidden=%ld layers=%ld epochs=%ld batch=%ld seed=%llu: "
            "final val_acc=%.4f best=%.4f loss=%.4g in %.2f s",
            o.lr, o.momentum, o.hidden, o.layers, pg.epoch, o.batch, o.seed, pg.acc, pg.best,
            pg.loss, now_s() - t0);
    if (resumed_from > 0) fprintf(stderr, " (resumed from epoch %ld)", resumed_from);
    fputc('\n', stderr);
    return failed ? 1 : 0;
}
