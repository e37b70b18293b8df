/*
 * test_layernorm_colsum.cu — layernorm_bwd_input_add with its column sums (colsum not NULL,
 * kernels/layernorm_input.cu) on fresh seeded random inputs, in fp32 and bf16: dinp bitwise equal
 * to the plain kernel's (colsum NULL), also in place (dinp = dres), and near the double-precision
 * CPU reference; every partial sum (chunk × quantity × column) against a double-precision CPU sum
 * of that chunk's rows, |got − want| ≤ 1e-5 + 1e-5·Σ|terms| (fp32 over at most 1024 rows; a row
 * missing or counted twice is off by a whole term); the colsum buffer poisoned with NaN bytes
 * first (an unwritten element fails) and followed by a guard that must stay untouched; a second
 * call gives the same bits. Shapes: the reference (N 4096, C 1024), C = 512, 4096 and 8192 (one
 * and several column strips), N of one row, of 37 and 1500 rows (a short last chunk), of 300000
 * rows (chunks of the maximum rows), an odd C and unaligned pointers (the element path). Without
 * a GPU the program reports one skipped case and exits 0.
 */
#include "tests/check.h"
#include "gpu_skip.h"
#include "tests/ref/ref_kernels.h"

#include "common/pp_cuda.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static cudaStream_t g_stream;
static char g_ctx[160];

#define GUARD_BYTES 256

/* ---- memory: released after each case -------------------------------------------------------- */

#define MAX_ALLOCS 256
static void *g_dev[MAX_ALLOCS], *g_host[MAX_ALLOCS];
static int g_ndev, g_nhost;

static void must(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return;
    fprintf(stderr, "test_layernorm_colsum: %s failed: %s\n", what, cudaGetErrorString(e));
    exit(1);
}

static void release_all(void)
{
    cudaStreamSynchronize(g_stream);
    for (int i = 0; i < g_ndev; i++)
        cudaFree(g_dev[i]);
    for (int i = 0; i < g_nhost; i++)
        free(g_host[i]);
    g_ndev = g_nhost = 0;
}

static void *hmem(size_t bytes)
{
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p || g_nhost == MAX_ALLOCS) {
        fprintf(stderr, "test_layernorm_colsum: out of host memory or allocation slots\n");
        exit(1);
    }
    return g_host[g_nhost++] = p;
}

/* Device memory filled with 0xFF bytes (NaN), `offset` bytes into the allocation, with
 * GUARD_BYTES more after the `bytes`. */
static void *dmem(size_t bytes, size_t offset)
{
    void *p = NULL;
    if (g_ndev == MAX_ALLOCS) {
        fprintf(stderr, "test_layernorm_colsum: out of allocation slots\n");
        exit(1);
    }
    must(cudaMalloc(&p, bytes + offset + GUARD_BYTES), "cudaMalloc");
    must(cudaMemsetAsync(p, 0xff, bytes + offset + GUARD_BYTES, g_stream), "poison");
    g_dev[g_ndev++] = p;
    return (char *)p + offset;
}

static void copy_sync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    must(cudaMemcpyAsync(dst, src, bytes, kind, g_stream), "copy");
    must(cudaStreamSynchronize(g_stream), "sync");
}

static void *get(const void *d, size_t bytes)
{
    void *h = hmem(bytes);
    copy_sync(h, d, bytes, cudaMemcpyDeviceToHost);
    return h;
}

/* A device copy of h in dtype t (h is rounded to t in place first), `offset` elements in. */
static void *dev_of(double *h, size_t n, pp_dtype_t t, size_t offset)
{
    const int bf = t == PP_DTYPE_BF16;
    ref_round(h, n, bf);
    void *tmp = hmem(n * pp_dtype_size(t));
    for (size_t i = 0; i < n; i++) {
        if (bf)
            ((uint16_t *)tmp)[i] = ref_f32_to_bf16((float)h[i]);
        else
            ((float *)tmp)[i] = (float)h[i];
    }
    void *d = dmem(n * pp_dtype_size(t), offset * pp_dtype_size(t));
    copy_sync(d, tmp, n * pp_dtype_size(t), cudaMemcpyHostToDevice);
    return d;
}

static double *hrand(ref_rng_t *rng, size_t n)
{
    double *x = (double *)hmem(n * sizeof(double));
    ref_fill_normal(rng, x, n, 1.0);
    return x;
}

static double elem(const void *h, size_t i, pp_dtype_t t)
{
    if (t == PP_DTYPE_BF16) return (double)ref_bf16_to_f32(((const uint16_t *)h)[i]);
    return (double)((const float *)h)[i];
}

/* ---- one case -------------------------------------------------------------------------------- */

/* Inputs on both sides: host doubles (as the device holds them) and device copies. */
typedef struct lnc_inputs {
    int N, C;
    pp_dtype_t dt;
    double *dy, *x, *dres, *w, *mean, *rstd;
    void *d_dy, *d_x, *d_dres, *d_w;
    float *d_mean, *d_rstd;
} lnc_inputs_t;

static void make_inputs(ref_rng_t *rng, int N, int C, pp_dtype_t dt, size_t off, lnc_inputs_t *in)
{
    const size_t n = (size_t)N * C;
    in->N = N;
    in->C = C;
    in->dt = dt;
    in->dy = hrand(rng, n);
    in->x = hrand(rng, n);
    in->dres = hrand(rng, n);
    in->w = hrand(rng, (size_t)C);
    in->mean = (double *)hmem((size_t)N * sizeof(double));
    in->rstd = (double *)hmem((size_t)N * sizeof(double));
    for (int r = 0; r < N; r++) { /* rows with their own offset and spread */
        in->mean[r] = 0.5 * ref_rng_normal(rng);
        in->rstd[r] = 0.5 + ref_rng_uniform(rng);
    }
    in->d_dy = dev_of(in->dy, n, dt, off);
    in->d_x = dev_of(in->x, n, dt, off);
    in->d_dres = dev_of(in->dres, n, dt, off);
    in->d_w = dev_of(in->w, (size_t)C, dt, off);
    in->d_mean = (float *)dev_of(in->mean, (size_t)N, PP_DTYPE_FP32, 0);
    in->d_rstd = (float *)dev_of(in->rstd, (size_t)N, PP_DTYPE_FP32, 0);
}

/* Every partial sum of `got` (layout of kernels.h) against the sums of its chunk's rows. */
static void check_partials(const lnc_inputs_t *in, const float *got)
{
    static const char *names[3] = {"sum dy", "sum dy*xhat", "sum dres"};
    const int N = in->N, C = in->C, R = layernorm_bwd_input_colsum_rows(N);
    const int rows = layernorm_colsum_chunk_rows(N);
    double *want = (double *)hmem((size_t)3 * C * sizeof(double));
    double *mag = (double *)hmem((size_t)3 * C * sizeof(double));
    int bad[3] = {0, 0, 0};
    for (int i = 0; i < R; i++) {
        memset(want, 0, (size_t)3 * C * sizeof(double));
        memset(mag, 0, (size_t)3 * C * sizeof(double));
        for (int r = i * rows; r < N && r < (i + 1) * rows; r++)
            for (int c = 0; c < C; c++) {
                const size_t at = (size_t)r * C + c;
                const double t[3] = {in->dy[at],
                                     in->dy[at] * ((in->x[at] - in->mean[r]) * in->rstd[r]),
                                     in->dres[at]};
                for (int q = 0; q < 3; q++) {
                    want[q * C + c] += t[q];
                    mag[q * C + c] += fabs(t[q]);
                }
            }
        for (int q = 0; q < 3; q++)
            for (int c = 0; c < C; c++) {
                const double g = got[((size_t)q * R + i) * C + c], wv = want[q * C + c];
                if (fabs(g - wv) <= 1e-5 + 1e-5 * mag[q * C + c]) continue;
                if (!bad[q]++)
                    EXPECT(0, "%s [%s]: chunk %d of %d, column %d: got %.9g want %.9g", names[q],
                           g_ctx, i, R, c, g, wv);
            }
    }
    for (int q = 0; q < 3; q++)
        EXPECT(bad[q] == 0, "%s [%s]: %d partial sums off", names[q], g_ctx, bad[q]);
}

/* dinp of the column-sum kernel against the CPU reference (dres + the input gradient). */
static void check_dinp(const lnc_inputs_t *in, const void *got)
{
    const size_t n = (size_t)in->N * in->C;
    double *want = (double *)hmem(n * sizeof(double));
    memcpy(want, in->dres, n * sizeof(double));
    ref_layernorm_bwd_input(want, in->dy, in->x, in->w, in->mean, in->rstd, in->N, in->C, 1);
    const int bf = in->dt == PP_DTYPE_BF16;
    const double atol = bf ? 1e-2 : 1e-4, rtol = bf ? 2e-2 : 1e-4;
    size_t bad = 0, at = 0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs(elem(got, i, in->dt) - want[i]) <= atol + rtol * fabs(want[i])) && !bad++)
            at = i;
    EXPECT(bad == 0, "dinp [%s]: %zu of %zu off; first [%zu] got %.9g want %.9g", g_ctx, bad, n, at,
           bad ? elem(got, at, in->dt) : 0.0, bad ? want[at] : 0.0);
}

static int guard_intact(const void *d, size_t bytes)
{
    const unsigned char *g = (const unsigned char *)get((const char *)d + bytes, GUARD_BYTES);
    for (int i = 0; i < GUARD_BYTES; i++)
        if (g[i] != 0xff) return 0;
    return 1;
}

/* One shape: the plain call, the call with column sums (twice), and the in-place call. */
static void lnc_case(pp_dtype_t dt, int N, int C, int misalign)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 9100u + (uint64_t)N * 3 + (uint64_t)C * 5 + dt * 11 + misalign * 13);
    snprintf(g_ctx, sizeof g_ctx, "%s N=%d C=%d%s", pp_dtype_name(dt), N, C,
             misalign ? " unaligned" : "");
    lnc_inputs_t in;
    make_inputs(&rng, N, C, dt, misalign ? 1 : 0, &in);
    const size_t off = misalign ? pp_dtype_size(dt) : 0, bytes = (size_t)N * C * pp_dtype_size(dt);
    const size_t sbytes = layernorm_bwd_input_colsum_bytes(N, C);
    void *plain = dmem(bytes, off), *fused = dmem(bytes, off), *inplace = dmem(bytes, off);
    float *sums[2] = {(float *)dmem(sbytes, 0), (float *)dmem(sbytes, 0)};
    float *sums_inplace = (float *)dmem(sbytes, 0);
    const float *mu = in.d_mean, *rs = in.d_rstd;

    REQUIRE(layernorm_bwd_input_add(plain, NULL, in.d_dres, in.d_dy, in.d_x, in.d_w, mu, rs, N, C,
                                    dt, g_stream) == PP_OK,
            "plain [%s]", g_ctx);
    for (int run = 0; run < 2; run++)
        REQUIRE(layernorm_bwd_input_add(fused, sums[run], in.d_dres, in.d_dy, in.d_x, in.d_w, mu,
                                        rs, N, C, dt, g_stream) == PP_OK,
                "with column sums [%s]", g_ctx);
    copy_sync(inplace, in.d_dres, bytes, cudaMemcpyDeviceToDevice);
    REQUIRE(layernorm_bwd_input_add(inplace, sums_inplace, inplace, in.d_dy, in.d_x, in.d_w, mu, rs,
                                    N, C, dt, g_stream) == PP_OK,
            "in place [%s]", g_ctx);
    must(cudaStreamSynchronize(g_stream), "layernorm_bwd_input_add");

    const void *h_plain = get(plain, bytes), *h_fused = get(fused, bytes);
    EXPECT(memcmp(h_plain, h_fused, bytes) == 0, "dinp [%s] differs from the plain kernel's",
           g_ctx);
    EXPECT(memcmp(h_plain, get(inplace, bytes), bytes) == 0,
           "dinp in place [%s] differs from the plain kernel's", g_ctx);
    check_dinp(&in, h_fused);
    const float *s0 = (const float *)get(sums[0], sbytes);
    check_partials(&in, s0);
    EXPECT(memcmp(s0, get(sums[1], sbytes), sbytes) == 0, "[%s] the second call's sums differ",
           g_ctx);
    EXPECT(memcmp(s0, get(sums_inplace, sbytes), sbytes) == 0, "[%s] the in-place sums differ",
           g_ctx);
    EXPECT(guard_intact(sums[0], sbytes), "[%s] written past the column sums", g_ctx);
    release_all();
}

/* ---- tests ----------------------------------------------------------------------------------- */

static const pp_dtype_t dtypes[2] = {PP_DTYPE_FP32, PP_DTYPE_BF16};

static void test_reference_shape(void)
{
    for (int i = 0; i < 2; i++)
        lnc_case(dtypes[i], check_quick() ? 300 : 4096, 1024, 0);
}

static void test_widths(void)
{
    const int widths[4] = {512, 4096, 8192, 64};
    const int rows[4] = {1500, 777, 100, 37};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 4; k++)
            lnc_case(dtypes[i], rows[k], widths[k], 0);
}

static void test_rows(void)
{
    for (int i = 0; i < 2; i++) {
        lnc_case(dtypes[i], 1, 64, 0);
        lnc_case(dtypes[i], 9000, 96, 0);
        if (!check_quick()) lnc_case(dtypes[i], 300000, 8, 0);
    }
}

static void test_element_path(void)
{
    for (int i = 0; i < 2; i++) {
        lnc_case(dtypes[i], 300, 67, 0);
        lnc_case(dtypes[i], 300, 96, 1);
        lnc_case(dtypes[i], 70, 1030, 1);
    }
}

static void test_errors(void)
{
    char *d = (char *)dmem(4096, 0);
    const float *f = (const float *)(d + 2048);
    EXPECT(layernorm_bwd_input_add(d, (float *)(d + 1026), d + 512, d + 1024, d + 1536, d + 1792, f,
                                   f, 4, 4, PP_DTYPE_FP32, g_stream) == PP_ERR_INTERNAL,
           "a colsum not 4-byte aligned is refused");
    EXPECT(layernorm_bwd_input_add(d, (float *)(d + 3072), NULL, d + 1024, d + 1536, d + 1792, f, f,
                                   4, 4, PP_DTYPE_FP32, g_stream) == PP_ERR_INTERNAL,
           "no dres is refused");
    EXPECT(layernorm_bwd_input_add(d, (float *)(d + 3072), d + 512, d + 1024, d + 1536, d + 1792, f,
                                   f, 0, 4, PP_DTYPE_FP32, g_stream) == PP_OK,
           "N = 0 does nothing");
    release_all();
}

static void test_device(void)
{
    SKIP("%s", gpu_skip_reason());
}

int main(void)
{
    if (gpu_skip_reason()) {
        RUN(test_device);
        return check_summary("test_layernorm_colsum");
    }
    must(cudaSetDevice(0), "cudaSetDevice");
    must(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking), "stream");
    RUN(test_reference_shape);
    RUN(test_widths);
    RUN(test_rows);
    RUN(test_element_path);
    RUN(test_errors);
    release_all();
    cudaStreamDestroy(g_stream);
    return check_summary("test_layernorm_colsum");
}
