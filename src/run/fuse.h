/* fuse: a trial's part in a fused process (trial_t.fusion). Owned by fuse.c:
 * no other file reads or writes these fields (tests/lint/owned_fields.sh);
 * the others ask through the functions below. */
#ifndef TP_RUN_FUSE_H
#define TP_RUN_FUSE_H

#include <stdint.h>

struct trial;
struct tp_fused;

typedef struct tp_trial_fusion {
    struct tp_fused *fused; /* the fused process its attempt runs in, NULL if none */
    int index;              /* its configuration index in that process */
    uint64_t mem_mib;       /* GPU memory its fused process is expected to use at its K
                               (measured or extrapolated), placed with; 0: unknown */
    int64_t proc;           /* the trial whose directory holds its attempt's logs: its own id,
                               or its fused process's first configuration's */
} tp_trial_fusion_t;

/* The fused process t's attempt runs in, NULL if none; its index there. O(1). */
struct tp_fused *tp__fuse_of(const struct trial *t);
int tp__fuse_index(const struct trial *t);
/* The memory t's fused process is expected to use (0: unknown, or none). */
uint64_t tp__fuse_mem_mib(const struct trial *t);
/* The trial whose directory holds t's attempt's logs (its own id unless fused). */
int64_t tp__fuse_proc(const struct trial *t);
/* t's attempt starts on its own (not in a fused process): it logs as itself. */
void tp__fuse_alone(struct trial *t);

#endif
