/*
 * support.c — the helpers of support.h, linked into every GPU test program.
 *
 * State is per program: its name, the stream, the guard bytes, the sub-case's context and the
 * arena (two lists of pointers that grow by doubling). Plain C: no check.h here (its counters are
 * the test program's), so comparisons return their message and the EXPECT_* macros record it.
 */
#include "tests/gpu/support.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *tg_prog = "gpu test"; /* in fatal messages */
static int tg_ready;                     /* tg_init found a device and made the stream */
static cudaStream_t tg_strm;             /* NULL: the legacy default stream */
static size_t tg_guard;                  /* bytes after every device buffer */
static char tg_ctx_buf[160];
static char tg_msg[640]; /* the last comparison's message */

typedef struct tg_list {
    void **p;
    size_t n, cap;
} tg_list_t;

static tg_list_t tg_devs, tg_hosts;

static void tg_die(const char *why)
{
    fprintf(stderr, "%s: %s\n", tg_prog, why);
    exit(1);
}

void tg_must(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "%s: %s failed: %s\n", tg_prog, what, cudaGetErrorString(e));
    exit(1);
}

static void tg_list_push(tg_list_t *l, void *p)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        void **q = (void **)realloc(l->p, cap * sizeof *q);
        if (!q) tg_die("out of host memory");
        l->p = q;
        l->cap = cap;
    }
    l->p[l->n++] = p;
}

/* ---- the device ------------------------------------------------------------------------------ */

const char *tg_skip_reason(void)
{
    static char why[160];
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0) return NULL;
    (void)cudaGetLastError();
    if (e == cudaSuccess) return "no CUDA device";
    if (e == cudaErrorInsufficientDriver) {
        /* The runtime says this both where libcuda is missing and where it is too old. */
        int drv = 0, rt = 0;
        cudaDriverGetVersion(&drv);
        cudaRuntimeGetVersion(&rt);
        (void)cudaGetLastError();
        if (drv == 0) return "no NVIDIA driver";
        snprintf(why, sizeof why, "NVIDIA driver too old: it runs CUDA %d.%d, the runtime is %d.%d",
                 drv / 1000, drv % 1000 / 10, rt / 1000, rt % 1000 / 10);
        return why;
    }
    snprintf(why, sizeof why, "no CUDA device (%s)", cudaGetErrorString(e));
    return why;
}

const char *tg_init(const char *prog, size_t guard)
{
    tg_prog = prog;
    tg_guard = guard;
    const char *why = tg_skip_reason();
    if (why) return why;
    tg_must(cudaSetDevice(0), "cudaSetDevice");
    tg_must(cudaStreamCreateWithFlags(&tg_strm, cudaStreamNonBlocking), "cudaStreamCreate");
    tg_ready = 1;
    return NULL;
}

cudaStream_t tg_stream(void)
{
    return tg_strm;
}

void tg_finish(void)
{
    tg_free_all();
    if (tg_ready) cudaStreamDestroy(tg_strm);
    tg_strm = NULL;
    tg_ready = 0;
    free(tg_devs.p);
    free(tg_hosts.p);
    memset(&tg_devs, 0, sizeof tg_devs);
    memset(&tg_hosts, 0, sizeof tg_hosts);
}

/* ---- the sub-case ---------------------------------------------------------------------------- */

void tg_ctx_set(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tg_ctx_buf, sizeof tg_ctx_buf, fmt, ap);
    va_end(ap);
}

const char *tg_ctx(void)
{
    return tg_ctx_buf;
}

/* ---- the arena ------------------------------------------------------------------------------- */

void *tg_host(size_t bytes)
{
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) tg_die("out of host memory");
    tg_list_push(&tg_hosts, p);
    return p;
}

double *tg_zeros(size_t n)
{
    return (double *)tg_host(n * sizeof(double));
}

void *tg_dev_at(size_t bytes, size_t offset)
{
    const size_t size = bytes + offset + tg_guard;
    void *p = NULL;
    tg_must(cudaMalloc(&p, size ? size : 1), "cudaMalloc");
    tg_list_push(&tg_devs, p);
    tg_poison(p, size);
    return (char *)p + offset;
}

void *tg_dev(size_t bytes)
{
    return tg_dev_at(bytes, 0);
}

void tg_free_all(void)
{
    if (tg_ready) cudaStreamSynchronize(tg_strm);
    for (size_t i = 0; i < tg_devs.n; i++)
        cudaFree(tg_devs.p[i]);
    for (size_t i = 0; i < tg_hosts.n; i++)
        free(tg_hosts.p[i]);
    tg_devs.n = tg_hosts.n = 0;
}

/* ---- fills and copies ------------------------------------------------------------------------ */

double *tg_randn(ref_rng_t *rng, size_t n, double scale, pp_dtype_t t)
{
    double *x = tg_zeros(n);
    ref_fill_normal(rng, x, n, scale);
    ref_round(x, n, t == PP_DTYPE_BF16);
    return x;
}

void tg_row_stats(ref_rng_t *rng, int N, double **mean, double **rstd)
{
    *mean = tg_zeros((size_t)N);
    *rstd = tg_zeros((size_t)N);
    for (int r = 0; r < N; r++) {
        (*mean)[r] = 0.5 * ref_rng_normal(rng);
        (*rstd)[r] = 0.5 + ref_rng_uniform(rng);
    }
    ref_round(*mean, (size_t)N, 0);
    ref_round(*rstd, (size_t)N, 0);
}

void tg_poison(void *d, size_t bytes)
{
    tg_must(cudaMemsetAsync(d, 0xff, bytes, tg_strm), "cudaMemsetAsync (poison)");
}

void tg_copy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    tg_must(cudaMemcpyAsync(dst, src, bytes, kind, tg_strm), "cudaMemcpyAsync");
    tg_must(cudaStreamSynchronize(tg_strm), "cudaStreamSynchronize");
}

void *tg_get(const void *d, size_t bytes)
{
    void *h = tg_host(bytes);
    tg_copy(h, d, bytes, cudaMemcpyDeviceToHost);
    return h;
}

void tg_put(void *d, const void *h, size_t bytes)
{
    tg_copy(d, h, bytes, cudaMemcpyHostToDevice);
}

void tg_upload(void *d, const double *h, size_t n, pp_dtype_t t)
{
    void *tmp = tg_host(n * pp_dtype_size(t));
    for (size_t i = 0; i < n; i++) {
        if (t == PP_DTYPE_BF16)
            ((uint16_t *)tmp)[i] = ref_f32_to_bf16((float)h[i]);
        else
            ((float *)tmp)[i] = (float)h[i];
    }
    tg_copy(d, tmp, n * pp_dtype_size(t), cudaMemcpyHostToDevice);
}

void *tg_dev_of_at(const double *h, size_t n, pp_dtype_t t, size_t offset)
{
    void *d = tg_dev_at(n * pp_dtype_size(t), offset * pp_dtype_size(t));
    tg_upload(d, h, n, t);
    return d;
}

void *tg_dev_of(const double *h, size_t n, pp_dtype_t t)
{
    return tg_dev_of_at(h, n, t, 0);
}

double *tg_doubles(const void *h, size_t n, pp_dtype_t t)
{
    double *x = tg_zeros(n);
    for (size_t i = 0; i < n; i++)
        x[i] = t == PP_DTYPE_BF16 ? (double)ref_bf16_to_f32(((const uint16_t *)h)[i])
                                  : (double)((const float *)h)[i];
    return x;
}

double *tg_download(const void *d, size_t n, pp_dtype_t t)
{
    return tg_doubles(tg_get(d, n * pp_dtype_size(t)), n, t);
}

/* ---- comparisons ----------------------------------------------------------------------------- */

static int tg_verbose(void)
{
    const char *v = getenv("PP_TEST_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

const char *tg_close(const char *what, const double *got, const double *want, const double *mag,
                     size_t n, tg_tol_t tol)
{
    size_t bad = 0, worst = 0;
    double worst_excess = 0.0, max_err = 0.0, max_want = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double err = fabs(got[i] - want[i]);
        const double allowed = tol.atol + tol.rtol * (mag ? mag[i] : fabs(want[i]));
        if (!(err <= allowed)) {
            const double excess = isnan(err) ? INFINITY : err - allowed;
            if (!bad++ || excess > worst_excess) {
                worst = i;
                worst_excess = excess;
            }
        }
        if (err > max_err) max_err = err;
        if (fabs(want[i]) > max_want) max_want = fabs(want[i]);
    }
    if (tg_verbose())
        fprintf(stderr, "    %-28s [%s] max|want| %.3e max err %.3e\n", what, tg_ctx_buf, max_want,
                max_err);
    if (!bad) return NULL;
    int len = snprintf(tg_msg, sizeof tg_msg,
                       "%s [%s]: %zu of %zu outside atol %g rtol %g%s; worst [%zu]: got %.9g, "
                       "want %.9g",
                       what, tg_ctx_buf, bad, n, tol.atol, tol.rtol, mag ? " (of the terms)" : "",
                       worst, got[worst], want[worst]);
    if (mag && len > 0 && (size_t)len < sizeof tg_msg)
        snprintf(tg_msg + len, sizeof tg_msg - (size_t)len, ", terms %.9g", mag[worst]);
    return tg_msg;
}

const char *tg_close_l2(const char *what, const double *got, const double *want, size_t n,
                        double rtol)
{
    double num = 0.0, den = 0.0, largest = -1.0;
    size_t nonfinite = 0, at = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = got[i] - want[i];
        num += d * d;
        den += want[i] * want[i];
        nonfinite += !isfinite(got[i]);
        const double e = isnan(d) ? INFINITY : fabs(d);
        if (e > largest) {
            largest = e;
            at = i;
        }
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    if (tg_verbose()) fprintf(stderr, "    %-28s [%s] rel L2 err %.2e\n", what, tg_ctx_buf, rel);
    if (nonfinite == 0 && rel <= rtol) return NULL;
    snprintf(tg_msg, sizeof tg_msg,
             "%s [%s]: %zu of %zu non-finite, rel L2 error %.3e > %.1e; largest difference [%zu]: "
             "got %.9g, want %.9g",
             what, tg_ctx_buf, nonfinite, n, rel, rtol, at, n ? got[at] : 0.0, n ? want[at] : 0.0);
    return tg_msg;
}
