/*
 * support.h — what the GPU test programs share (support.c, linked into each): why a program
 * skips where no device is usable, the device and the stream the helpers enqueue on, an arena of
 * host and device buffers freed together after a case, fresh random fills, copies that convert
 * between host doubles and the storage dtype, and comparisons under atol + rtol·|want| (or a
 * relative L2 error) that report the worst element.
 *
 * Rules: tg_init once, first thing in main(); from then on every helper enqueues on its stream,
 * and every copy waits for that stream (a program that does not call tg_init, or has no device,
 * uses the legacy default stream). Device buffers come poisoned with 0xFF bytes (NaN in fp32 and
 * bf16), followed by the program's guard bytes, so an element a kernel leaves unwritten fails its
 * comparison. Fills are fresh seeded random values, never zeros, rounded to the storage dtype
 * so that the host copy holds exactly what the device gets. A CUDA error or a failed allocation in
 * a helper ends the program (exit 1, with a message naming it): a case cannot go on without its
 * buffers. The EXPECT_*, RUN_AND_FREE and REQUIRE_OK macros expand to tests/check.h's; the program
 * includes it.
 */
#ifndef PP_TEST_GPU_SUPPORT_H
#define PP_TEST_GPU_SUPPORT_H

#include "common/pp_status.h"
#include "tests/ref/ref_kernels.h"

#include <cuda_runtime.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the device ------------------------------------------------------------------------------ */

/* NULL when at least one CUDA device is usable, else why not: "no NVIDIA driver", "no CUDA
 * device", or the runtime's own words. Clears the runtime's sticky error. */
const char *tg_skip_reason(void);

/* Names the program (in fatal messages) and the guard: bytes after every device buffer, poisoned
 * with it. Where a device is usable, selects device 0 and makes a non-blocking stream for the
 * helpers; returns NULL. Otherwise returns tg_skip_reason() (host buffers still work). */
const char *tg_init(const char *prog, size_t guard);

cudaStream_t tg_stream(void); /* the helpers' stream: NULL (legacy default) without tg_init */
void tg_finish(void);         /* tg_free_all, then the stream goes */

/* Ends the program with `what` and the runtime's message unless e is cudaSuccess. */
void tg_must(cudaError_t e, const char *what);

/* ---- the sub-case being run, named in every failure ------------------------------------------ */

void tg_ctx_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *tg_ctx(void);

/* ---- the arena: everything below lives until tg_free_all ------------------------------------- */

void *tg_host(size_t bytes); /* zeroed host memory */
double *tg_zeros(size_t n);  /* n zeroed host doubles */
void *tg_dev(size_t bytes);  /* device memory, poisoned */
/* Device memory, poisoned, `offset` bytes into its allocation (to test unaligned pointers). */
void *tg_dev_at(size_t bytes, size_t offset);
/* Waits for the stream, then frees every host and device buffer of the arena. */
void tg_free_all(void);

/* ---- fills and copies ------------------------------------------------------------------------ */

/* n values scale·N(0,1), rounded to what dtype t holds. */
double *tg_randn(ref_rng_t *rng, size_t n, double scale, pp_dtype_t t);
/* LayerNorm's saved statistics of N rows, each row with its own: mean 0.5·N(0,1) and rstd
 * 0.5 + U[0,1), drawn row by row, rounded to fp32. */
void tg_row_stats(ref_rng_t *rng, int N, double **mean, double **rstd);

void tg_poison(void *d, size_t bytes); /* 0xFF bytes, in stream order */
/* Copies on the stream and waits: ordered after every kernel enqueued before, and complete (for
 * pageable host memory too) when it returns. */
void tg_copy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
void *tg_get(const void *d, size_t bytes);         /* a host copy of the bytes at d */
void tg_put(void *d, const void *h, size_t bytes); /* the bytes of h to d */

/* h[n] converted to dtype t (float, or bf16 from the float) and copied to d. */
void tg_upload(void *d, const double *h, size_t n, pp_dtype_t t);
/* A poisoned device buffer holding h[n] in dtype t; _at: `offset` elements into its allocation. */
void *tg_dev_of(const double *h, size_t n, pp_dtype_t t);
void *tg_dev_of_at(const double *h, size_t n, pp_dtype_t t, size_t offset);
/* n elements of dtype t at d, as host doubles. */
double *tg_download(const void *d, size_t n, pp_dtype_t t);
/* n elements of dtype t in host memory h, as doubles. */
double *tg_doubles(const void *h, size_t n, pp_dtype_t t);

/* ---- comparisons ----------------------------------------------------------------------------- */

typedef struct tg_tol {
    double atol, rtol;
} tg_tol_t;

/* NULL when every |got[i] − want[i]| ≤ atol + rtol·|want[i]| (rtol·mag[i] where mag is not NULL:
 * the magnitude of the terms that made want[i], for sums whose error scales with the terms, not
 * with their possibly cancelling total). NaN never is. Otherwise a message (valid until the next
 * call) naming `what`, the context, how many are off and the worst: a NaN first, else the one
 * furthest past its tolerance. */
const char *tg_close(const char *what, const double *got, const double *want, const double *mag,
                     size_t n, tg_tol_t tol);
/* NULL when every got[i] is finite and ‖got − want‖ ≤ rtol·‖want‖ (L2; ‖got − want‖ ≤ rtol where
 * want is all zero), else a message with the largest difference. */
const char *tg_close_l2(const char *what, const double *got, const double *want, size_t n,
                        double rtol);

/* check.h's EXPECT for the comparisons above: a failure is recorded at the line of the call.
 * PP_TEST_VERBOSE=1 prints every comparison's largest error too. */
#define EXPECT_CLOSE(what, got, want, n, tol)                                                      \
    TG_EXPECT_("EXPECT_CLOSE", tg_close((what), (got), (want), NULL, (n), (tol)))
#define EXPECT_CLOSE_TERMS(what, got, want, mag, n, tol)                                           \
    TG_EXPECT_("EXPECT_CLOSE_TERMS", tg_close((what), (got), (want), (mag), (n), (tol)))
#define EXPECT_REL_L2(what, got, want, n, rtol)                                                    \
    TG_EXPECT_("EXPECT_REL_L2", tg_close_l2((what), (got), (want), (n), (rtol)))
#define TG_EXPECT_(check, msg)                                                                     \
    do {                                                                                           \
        const char *m_ = (msg);                                                                    \
        if (m_) check_fail_(__FILE__, __LINE__, check, "%s", m_);                                  \
    } while (0)

/* check.h's RUN, then tg_free_all: what the case allocated goes with it. */
#define RUN_AND_FREE(fn)                                                                           \
    do {                                                                                           \
        RUN(fn);                                                                                   \
        tg_free_all();                                                                             \
    } while (0)

/* A call that returns pp_status_t must give PP_OK, or the case ends here. */
#define REQUIRE_OK(call) REQUIRE((call) == PP_OK, "%s [%s]", #call, tg_ctx())

#ifdef __cplusplus
}
#endif

#endif /* PP_TEST_GPU_SUPPORT_H */
