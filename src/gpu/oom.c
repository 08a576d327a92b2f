/* oom: recognising "the GPU ran out of memory" in a line of a trial's
 * stderr, across the frameworks people train with. */
#include <string.h>

#include "gpu/gpu.h"

/* One recognised form: every non-NULL `need` must occur in the line and
 * `unless` must not. Case-sensitive: these are fixed strings the frameworks
 * print, and matching them exactly keeps host-RAM messages ("Cannot
 * allocate memory", "Out of memory: Killed process") from counting. */
typedef struct oom_form {
    const char *need;   /* a substring the line must contain */
    const char *also;   /* a second one it must contain too, or NULL */
    const char *unless; /* a substring that rules the line out, or NULL */
} oom_form_t;

static const oom_form_t OOM_FORMS[] = {
    /* PyTorch: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...",
     * older "RuntimeError: CUDA out of memory.", "torch.cuda.OutOfMemoryError: ..." */
    {.need = "CUDA out of memory"},
    /* PyTorch / CUDA runtime surfaced as text: "RuntimeError: CUDA error: out of memory" */
    {.need = "CUDA error: out of memory"},
    /* TensorFlow: "ResourceExhaustedError: OOM when allocating tensor with shape[...]
     * ... on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc";
     * the same error on a CPU allocator is host memory, not ours. */
    {.need = "ResourceExhaustedError", .also = "OOM when allocating", .unless = "device:CPU"},
    {.need = "OOM when allocating", .also = "device:GPU"},
    /* JAX / XLA: "XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate" */
    {.need = "RESOURCE_EXHAUSTED: Out of memory"},
    /* cuBLAS handle or workspace allocation */
    {.need = "CUBLAS_STATUS_ALLOC_FAILED"},
    /* CUDA runtime and driver API error names (CuPy, Numba, JAX print these) */
    {.need = "cudaErrorMemoryAllocation"},
    {.need = "CUDA_ERROR_OUT_OF_MEMORY"},
};

static int contains(const char *line, size_t len, const char *needle) {
    return memmem(line, len, needle, strlen(needle)) != NULL;
}

/* O(len * number of forms), i.e. O(len): each form is a handful of memmem
 * scans over the line. The line need not be NUL-terminated. */
int tp__gpu_oom_line(const char *line, size_t len) {
    if (!line || len == 0) return 0;
    for (size_t i = 0; i < TP_ARRAY_LEN(OOM_FORMS); i++) {
        const oom_form_t *f = &OOM_FORMS[i];
        if (!contains(line, len, f->need)) continue;
        if (f->also && !contains(line, len, f->also)) continue;
        if (f->unless && contains(line, len, f->unless)) continue;
        return 1;
    }
    return 0;
}
