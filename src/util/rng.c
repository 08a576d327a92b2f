/* rng: xoshiro256** seeded through splitmix64, per (seed, stream). */
#include <math.h>

#include "util/util.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

/* Seed from (seed, stream): the stream is mixed through its own splitmix64
 * step before being combined, so neighbouring streams of one seed (and
 * neighbouring seeds of one stream) start from unrelated states. */
void tp__rng_seed(tp_rng_t *r, uint64_t seed, uint64_t stream) {
    uint64_t st = stream * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
    uint64_t x = seed ^ splitmix64(&st);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3])) r->s[0] = 1;
}

uint64_t tp__rng_next(tp_rng_t *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
double tp__rng_uniform(tp_rng_t *r) {
    return (double)(tp__rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n), unbiased (Lemire's multiply-and-reject). */
uint64_t tp__rng_below(tp_rng_t *r, uint64_t n) {
    if (n <= 1) return 0;
    unsigned __int128 m = (unsigned __int128)tp__rng_next(r) * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            m = (unsigned __int128)tp__rng_next(r) * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* Standard normal by Box-Muller from two fresh uniforms (no cached state). */
double tp__rng_normal(tp_rng_t *r) {
    double u1 = 1.0 - tp__rng_uniform(r); /* (0, 1] so log is finite */
    double u2 = tp__rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}
