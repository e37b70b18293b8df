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
#include "tests/gpu/support.h"
#include "tests/ref/ref_kernels.h"

#include "common/pp_cuda.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_BYTES 256 /* after every device buffer (support.h): the column sums' is checked */

static cudaStream_t g_stream;

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
    in->dy = tg_randn(rng, n, 1.0, dt);
    in->x = tg_randn(rng, n, 1.0, dt);
    in->dres = tg_randn(rng, n, 1.0, dt);
    in->w = tg_randn(rng, (size_t)C, 1.0, dt);
    tg_row_stats(rng, N, &in->mean, &in->rstd);
    in->d_dy = tg_dev_of_at(in->dy, n, dt, off);
    in->d_x = tg_dev_of_at(in->x, n, dt, off);
    in->d_dres = tg_dev_of_at(in->dres, n, dt, off);
    in->d_w = tg_dev_of_at(in->w, (size_t)C, dt, off);
    in->d_mean = (float *)tg_dev_of(in->mean, (size_t)N, PP_DTYPE_FP32);
    in->d_rstd = (float *)tg_dev_of(in->rstd, (size_t)N, PP_DTYPE_FP32);
}

/* Every partial sum of `got` (layout of kernels.h: quantity, chunk, column) against the sums of
 * its chunk's rows: |got − want| ≤ 1e-5 + 1e-5·Σ|terms|. */
static void check_partials(const lnc_inputs_t *in, const float *got)
{
    static const char *names[3] = {"sum dy", "sum dy*xhat", "sum dres"};
    static const tg_tol_t tol = {1e-5, 1e-5};
    const int N = in->N, C = in->C, R = layernorm_bwd_input_colsum_rows(N);
    const int rows = layernorm_colsum_chunk_rows(N);
    const size_t per_q = (size_t)R * C;
    double *want = tg_zeros(3 * per_q), *mag = tg_zeros(3 * per_q);
    for (int i = 0; i < R; i++)
        for (int r = i * rows; r < N && r < (i + 1) * rows; r++)
            for (int c = 0; c < C; c++) {
                const size_t at = (size_t)r * C + c;
                const double t[3] = {in->dy[at],
                                     in->dy[at] * ((in->x[at] - in->mean[r]) * in->rstd[r]),
                                     in->dres[at]};
                for (int q = 0; q < 3; q++) {
                    want[((size_t)q * R + i) * C + c] += t[q];
                    mag[((size_t)q * R + i) * C + c] += fabs(t[q]);
                }
            }
    const double *g = tg_doubles(got, 3 * per_q, PP_DTYPE_FP32);
    for (int q = 0; q < 3; q++)
        EXPECT_CLOSE_TERMS(names[q], g + q * per_q, want + q * per_q, mag + q * per_q, per_q, tol);
}

/* dinp of the column-sum kernel against the CPU reference (dres + the input gradient). */
static void check_dinp(const lnc_inputs_t *in, const void *got)
{
    const size_t n = (size_t)in->N * in->C;
    double *want = tg_zeros(n);
    memcpy(want, in->dres, n * sizeof(double));
    ref_layernorm_bwd_input(want, in->dy, in->x, in->w, in->mean, in->rstd, in->N, in->C, 1);
    const int bf = in->dt == PP_DTYPE_BF16;
    const tg_tol_t tol = {bf ? 1e-2 : 1e-4, bf ? 2e-2 : 1e-4};
    EXPECT_CLOSE("dinp", tg_doubles(got, n, in->dt), want, n, tol);
}

static int guard_intact(const void *d, size_t bytes)
{
    const unsigned char *g = (const unsigned char *)tg_get((const char *)d + bytes, GUARD_BYTES);
    for (int i = 0; i < GUARD_BYTES; i++)
        if (g[i] != 0xff) return 0;
    return 1;
}

/* One shape: the plain call, the call with column sums (twice), and the in-place call. */
static void lnc_case(pp_dtype_t dt, int N, int C, int misalign)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 9100u + (uint64_t)N * 3 + (uint64_t)C * 5 + dt * 11 + misalign * 13);
    tg_ctx_set("%s N=%d C=%d%s", pp_dtype_name(dt), N, C, misalign ? " unaligned" : "");
    lnc_inputs_t in;
    make_inputs(&rng, N, C, dt, misalign ? 1 : 0, &in);
    const size_t off = misalign ? pp_dtype_size(dt) : 0, bytes = (size_t)N * C * pp_dtype_size(dt);
    const size_t sbytes = layernorm_bwd_input_colsum_bytes(N, C);
    void *plain = tg_dev_at(bytes, off), *fused = tg_dev_at(bytes, off),
         *inplace = tg_dev_at(bytes, off);
    float *sums[2] = {(float *)tg_dev(sbytes), (float *)tg_dev(sbytes)};
    float *sums_inplace = (float *)tg_dev(sbytes);
    const float *mu = in.d_mean, *rs = in.d_rstd;

    REQUIRE(layernorm_bwd_input_add(plain, NULL, in.d_dres, in.d_dy, in.d_x, in.d_w, mu, rs, N, C,
                                    dt, g_stream) == PP_OK,
            "plain [%s]", tg_ctx());
    for (int run = 0; run < 2; run++)
        REQUIRE(layernorm_bwd_input_add(fused, sums[run], in.d_dres, in.d_dy, in.d_x, in.d_w, mu,
                                        rs, N, C, dt, g_stream) == PP_OK,
                "with column sums [%s]", tg_ctx());
    tg_copy(inplace, in.d_dres, bytes, cudaMemcpyDeviceToDevice);
    REQUIRE(layernorm_bwd_input_add(inplace, sums_inplace, inplace, in.d_dy, in.d_x, in.d_w, mu, rs,
                                    N, C, dt, g_stream) == PP_OK,
            "in place [%s]", tg_ctx());
    tg_must(cudaStreamSynchronize(g_stream), "layernorm_bwd_input_add");

    const void *h_plain = tg_get(plain, bytes), *h_fused = tg_get(fused, bytes);
    EXPECT(memcmp(h_plain, h_fused, bytes) == 0, "dinp [%s] differs from the plain kernel's",
           tg_ctx());
    EXPECT(memcmp(h_plain, tg_get(inplace, bytes), bytes) == 0,
           "dinp in place [%s] differs from the plain kernel's", tg_ctx());
    check_dinp(&in, h_fused);
    const float *s0 = (const float *)tg_get(sums[0], sbytes);
    check_partials(&in, s0);
    EXPECT(memcmp(s0, tg_get(sums[1], sbytes), sbytes) == 0, "[%s] the second call's sums differ",
           tg_ctx());
    EXPECT(memcmp(s0, tg_get(sums_inplace, sbytes), sbytes) == 0, "[%s] the in-place sums differ",
           tg_ctx());
    EXPECT(guard_intact(sums[0], sbytes), "[%s] written past the column sums", tg_ctx());
    tg_free_all();
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
    char *d = (char *)tg_dev(4096);
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
    tg_free_all();
}

static void test_device(void)
{
    SKIP("%s", tg_skip_reason());
}

int main(void)
{
    if (tg_init("test_layernorm_colsum", GUARD_BYTES)) {
        RUN(test_device);
        return check_summary("test_layernorm_colsum");
    }
    g_stream = tg_stream();
    RUN(test_reference_shape);
    RUN(test_widths);
    RUN(test_rows);
    RUN(test_element_path);
    RUN(test_errors);
    tg_finish();
    return check_summary("test_layernorm_colsum");
}
