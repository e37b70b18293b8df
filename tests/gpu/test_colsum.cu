/*
 * test_colsum.cu — colsum_bwd (kernels/colsum.cu), the weight pass's bias and LayerNorm parameter
 * gradients, against a double-precision CPU sum on fresh seeded random inputs, in fp32 and bf16:
 * the block's four tasks at the reference widths (1024, 4096, 1024, 3072) and small ones, odd
 * widths and unaligned pointers (the scalar path), one row, rows not a multiple of a chunk, a
 * scratch that holds only a few chunks, a single task, and tasks of ready partial sums (fp32
 * rows, as the flash backward writes for the QKV bias; three quantities, as the LayerNorm input
 * gradients write for the LayerNorm and residual-bias gradients) beside tensor tasks, alone and
 * with no rows for the tensor tasks; plain tasks (dy only, a launch of their own) alone at the
 * reference widths and C = 512, with many rows a chunk, and with the bits of a task with x and
 * res over the same dy. The gradients start from random values (the sums are added, +=); every
 * call runs twice from the same start and must give the same bits. Tolerance per column:
 * |got − want| ≤ 1e-4 + 4e-6·Σ|terms| (fp32 accumulation over up to 20000 rows; a missing or
 * doubled row is off by about one term). Without a GPU the program reports one skipped case and
 * exits 0.
 */
#include "tests/check.h"
#include "tests/gpu/support.h"
#include "tests/ref/ref_kernels.h"

#include "common/pp_cuda.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_BYTES 16 /* after every device buffer (support.h) */

/* Per column, |got − want| ≤ 1e-4 + 4e-6·Σ|terms| (see the top). */
static const tg_tol_t TOL_SUMS = {1e-4, 4e-6};

static cudaStream_t g_stream;

/* ---- one case -------------------------------------------------------------------------------- */

/* One task on the host: its inputs (doubles, as the device holds them) and its outputs. */
typedef struct host_task {
    int C, has_x, has_res;
    double *dy, *x, *res, *mean, *rstd; /* [N,C], [N,C], [N,C], [N], [N] */
    double *want[3], *mag[3];           /* sum, xhat, res: start + Σ, and Σ|terms| */
    float *start[3], *dev_out[3];       /* host start values, device gradients */
} host_task_t;

/* The outputs of a task: for each quantity on, random start values on the device and in *h. */
static void make_outputs(ref_rng_t *rng, int C, const int on[3], host_task_t *h,
                         pp_colsum_task_t *t)
{
    float **outs[3] = {&t->d_sum, &t->d_xhat, &t->d_res};
    for (int q = 0; q < 3; q++) {
        if (!on[q]) continue;
        double *start = tg_randn(rng, (size_t)C, 1.0, PP_DTYPE_FP32);
        h->want[q] = tg_zeros((size_t)C);
        h->mag[q] = tg_zeros((size_t)C);
        *outs[q] = h->dev_out[q] = (float *)tg_dev_of(start, (size_t)C, PP_DTYPE_FP32);
        h->start[q] = (float *)tg_host((size_t)C * sizeof(float));
        for (int c = 0; c < C; c++) {
            h->start[q][c] = (float)start[c];
            h->want[q][c] = start[c];
        }
    }
}

/* A task of n partial sums: fp32 [3][n][C] (quantity q's rows at q·n·C, the layout of
 * layernorm_bwd_input_add's colsum), d_sum always, d_xhat and d_res where the flags say. */
static void make_partial_task(ref_rng_t *rng, int n, int C, int has_x, int has_res, host_task_t *h,
                              pp_colsum_task_t *t)
{
    const size_t rows = (size_t)n * C;
    const int on[3] = {1, has_x, has_res};
    h->C = t->C = C;
    h->dy = tg_randn(rng, 3 * rows, 1.0, PP_DTYPE_FP32);
    t->partial = (const float *)tg_dev_of(h->dy, 3 * rows, PP_DTYPE_FP32);
    t->n_partial = n;
    make_outputs(rng, C, on, h, t);
    for (int q = 0; q < 3; q++)
        for (size_t i = 0; on[q] && i < rows; i++) {
            h->want[q][i % C] += h->dy[q * rows + i];
            h->mag[q][i % C] += fabs(h->dy[q * rows + i]);
        }
}

/* Inputs of task k, uploaded into *t (device side) and kept in *h; the reference sums. A task of
 * n_partial > 0 partial sums has those rows of fp32 values for each of its quantities as its input
 * instead of N rows of dy, x and res. */
static void make_task(ref_rng_t *rng, int N, int C, int has_x, int has_res, int n_partial,
                      pp_dtype_t dt, size_t off, host_task_t *h, pp_colsum_task_t *t)
{
    memset(h, 0, sizeof *h);
    memset(t, 0, sizeof *t);
    if (n_partial > 0) {
        make_partial_task(rng, n_partial, C, has_x, has_res, h, t);
        return;
    }
    const size_t n = (size_t)N * C;
    const int on[3] = {1, has_x, has_res};
    h->C = t->C = C;
    h->has_x = has_x;
    h->has_res = has_res;
    h->dy = tg_randn(rng, n, 1.0, dt);
    t->dy = tg_dev_of_at(h->dy, n, dt, off);
    if (has_x) {
        h->x = tg_randn(rng, n, 1.0, dt);
        tg_row_stats(rng, N, &h->mean, &h->rstd);
        t->x = tg_dev_of_at(h->x, n, dt, off);
        t->mean = (const float *)tg_dev_of(h->mean, (size_t)N, PP_DTYPE_FP32);
        t->rstd = (const float *)tg_dev_of(h->rstd, (size_t)N, PP_DTYPE_FP32);
    }
    if (has_res) {
        h->res = tg_randn(rng, n, 1.0, dt);
        t->res = tg_dev_of_at(h->res, n, dt, off);
    }
    make_outputs(rng, C, on, h, t);
    for (int r = 0; r < N; r++)
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)r * C + c;
            h->want[0][c] += h->dy[i];
            h->mag[0][c] += fabs(h->dy[i]);
            if (has_x) {
                const double v = h->dy[i] * (h->x[i] - h->mean[r]) * h->rstd[r];
                h->want[1][c] += v;
                h->mag[1][c] += fabs(v);
            }
            if (has_res) {
                h->want[2][c] += h->res[i];
                h->mag[2][c] += fabs(h->res[i]);
            }
        }
}

static void check_task(const host_task_t *h, int k, float *const first[3])
{
    static const char *names[3] = {"d_sum", "d_xhat", "d_res"};
    for (int q = 0; q < 3; q++) {
        if (!h->want[q]) continue;
        float *got = (float *)tg_get(h->dev_out[q], (size_t)h->C * sizeof(float));
        char what[32];
        snprintf(what, sizeof what, "task %d %s", k, names[q]);
        EXPECT_CLOSE_TERMS(what, tg_doubles(got, (size_t)h->C, PP_DTYPE_FP32), h->want[q],
                           h->mag[q], (size_t)h->C, TOL_SUMS);
        if (first[q])
            EXPECT(memcmp(first[q], got, (size_t)h->C * sizeof(float)) == 0,
                   "task %d %s [%s]: the second run differs bitwise", k, names[q], tg_ctx());
    }
}

/* Resets every gradient to its start values. */
static void reset_outputs(const host_task_t *h, int n_tasks)
{
    for (int k = 0; k < n_tasks; k++)
        for (int q = 0; q < 3; q++)
            if (h[k].want[q])
                tg_copy(h[k].dev_out[q], h[k].start[q], (size_t)h[k].C * sizeof(float),
                        cudaMemcpyHostToDevice);
}

/* The tasks of widths C[k] (x and res where the flags say) over N rows, task k of partial sums
 * where partial[k] > 0 (partial NULL: none); scratch_cols limits the scratch to that many floats
 * (0: 32 MiB, the GEMM workspace's size). */
static void colsum_case(pp_dtype_t dt, int N, int n_tasks, const int *C, const int *has_x,
                        const int *has_res, const int *partial, int misalign, size_t scratch_cols)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 7000u + (uint64_t)N * 3 + (uint64_t)C[0] * 5 + n_tasks * 7 + dt * 11 +
                           misalign * 13 + scratch_cols + (partial ? 17 : 0));
    tg_ctx_set("%s N=%d C0=%d tasks=%d%s%s%s", pp_dtype_name(dt), N, C[0], n_tasks,
               misalign ? " unaligned" : "", scratch_cols ? " small scratch" : "",
               partial ? " partial sums" : "");
    host_task_t h[PP_COLSUM_MAX_TASKS];
    pp_colsum_task_t t[PP_COLSUM_MAX_TASKS];
    for (int k = 0; k < n_tasks; k++)
        make_task(&rng, N, C[k], has_x[k], has_res[k], partial ? partial[k] : 0, dt,
                  misalign ? 1 : 0, &h[k], &t[k]);
    const size_t sbytes = scratch_cols ? scratch_cols * sizeof(float) : (size_t)32 << 20;
    void *scratch = tg_dev(sbytes);
    float *first[PP_COLSUM_MAX_TASKS][3];
    memset(first, 0, sizeof first);
    for (int run = 0; run < 2; run++) {
        reset_outputs(h, n_tasks);
        REQUIRE(colsum_bwd(t, n_tasks, N, scratch, sbytes, dt, g_stream) == PP_OK,
                "colsum_bwd [%s]", tg_ctx());
        tg_must(cudaStreamSynchronize(g_stream), "colsum_bwd");
        for (int k = 0; k < n_tasks; k++) {
            float *none[3] = {NULL, NULL, NULL};
            check_task(&h[k], k, run ? first[k] : none);
            for (int q = 0; q < 3 && !run; q++)
                if (h[k].want[q])
                    first[k][q] = (float *)tg_get(h[k].dev_out[q], (size_t)h[k].C * sizeof(float));
        }
    }
    tg_free_all();
}

/* ---- tests ----------------------------------------------------------------------------------- */

static const pp_dtype_t dtypes[2] = {PP_DTYPE_FP32, PP_DTYPE_BF16};
/* A block's tasks: LN2 + fc2's bias, fc's bias, LN1 + proj's bias, QKV's bias. */
static const int BLOCK_X[4] = {1, 0, 1, 0}, BLOCK_RES[4] = {1, 0, 1, 0};

static void test_block_shapes(void)
{
    const int ref[4] = {1024, 4096, 1024, 3072}, small[4] = {64, 256, 64, 192};
    for (int i = 0; i < 2; i++) {
        /* quick (make sanitize): fewer rows at the reference widths */
        colsum_case(dtypes[i], check_quick() ? 130 : 1500, 4, ref, BLOCK_X, BLOCK_RES, NULL, 0, 0);
        colsum_case(dtypes[i], 512, 4, small, BLOCK_X, BLOCK_RES, NULL, 0, 0);
        colsum_case(dtypes[i], 37, 4, small, BLOCK_X, BLOCK_RES, NULL, 0, 0);
        colsum_case(dtypes[i], 1, 4, small, BLOCK_X, BLOCK_RES, NULL, 0, 0);
        tg_free_all();
    }
}

static void test_odd_and_unaligned(void)
{
    const int odd[4] = {67, 33, 67, 5}, even[4] = {96, 384, 96, 288};
    for (int i = 0; i < 2; i++) {
        colsum_case(dtypes[i], 300, 4, odd, BLOCK_X, BLOCK_RES, NULL, 0, 0);
        colsum_case(dtypes[i], 300, 4, even, BLOCK_X, BLOCK_RES, NULL, 1, 0);
        tg_free_all();
    }
}

static void test_small_scratch_and_one_task(void)
{
    const int small[4] = {64, 256, 64, 192}, one[1] = {320}, zero[1] = {0};
    /* 3·64 + 256 + 3·64 + 192 = 832 columns: room for 3 chunks of 700 rows */
    for (int i = 0; i < 2; i++) {
        colsum_case(dtypes[i], 700, 4, small, BLOCK_X, BLOCK_RES, NULL, 0, 3 * 832 + 100);
        colsum_case(dtypes[i], 2000, 1, one, zero, zero, NULL, 0, 0);
        tg_free_all();
    }
}

/* The block's tasks with QKV's as partial sums (the flash backward's column sums: B·⌈T/128⌉
 * rows), alone, and with no rows for the tensor tasks (N = 0: only the partial sums are added);
 * with the LayerNorm tasks' three quantities as partial sums too (the LayerNorm input gradients'
 * chunks: 128 at N 4096), the fc task the only tensor one, and partial tasks of d_sum and d_res
 * only (the layout keeps quantity 2 at 2·n rows). */
static void test_partial_sums(void)
{
    const int ref[4] = {1024, 4096, 1024, 3072}, small[4] = {64, 256, 64, 192};
    const int qkv_sums[4] = {0, 0, 0, 32}, one[1] = {3072}, ones[1] = {24}, zero[1] = {0};
    const int odd[2] = {67, 5}, odd_sums[2] = {0, 3}, no[2] = {0, 0};
    const int all_sums[4] = {128, 0, 128, 32}, few_sums[4] = {9, 0, 9, 3};
    const int res_only[2] = {0, 1}, two_sums[2] = {0, 5};
    for (int i = 0; i < 2; i++) {
        colsum_case(dtypes[i], check_quick() ? 130 : 1500, 4, ref, BLOCK_X, BLOCK_RES, qkv_sums, 0,
                    0);
        colsum_case(dtypes[i], 300, 4, small, BLOCK_X, BLOCK_RES, qkv_sums, 1, 0);
        colsum_case(dtypes[i], 300, 2, odd, no, no, odd_sums, 0, 0);
        colsum_case(dtypes[i], 0, 1, one, zero, zero, ones, 0, 0);
        colsum_case(dtypes[i], check_quick() ? 130 : 1500, 4, ref, BLOCK_X, BLOCK_RES, all_sums, 0,
                    0);
        colsum_case(dtypes[i], 300, 4, small, BLOCK_X, BLOCK_RES, few_sums, 1, 0);
        colsum_case(dtypes[i], 77, 2, odd, no, res_only, two_sums, 0, 0);
        tg_free_all();
    }
}

/* Plain tasks (dy only: the bias gradients), which take a launch of their own in 16-byte loads:
 * the reference widths and C = 512 alone, rows not a multiple of a chunk or of a thread's batch of
 * loads, more rows a chunk than one batch (over 256 chunks' worth of rows; a scratch of 3 chunks),
 * widths that allow 4-element or no vector loads, unaligned pointers (elements one by one). */
static void test_plain(void)
{
    const int ref[4] = {512, 1024, 4096, 3072}, one[1] = {512}, wide[1] = {1024};
    const int odd[2] = {1020, 36}, no[4] = {0, 0, 0, 0};
    for (int i = 0; i < 2; i++) {
        colsum_case(dtypes[i], check_quick() ? 130 : 1500, 4, ref, no, no, NULL, 0, 0);
        colsum_case(dtypes[i], check_quick() ? 200 : 20000, 1, one, no, no, NULL, 0, 0);
        colsum_case(dtypes[i], 3000, 1, wide, no, no, NULL, 0, 3 * 1024 + 10);
        colsum_case(dtypes[i], 301, 2, odd, no, no, NULL, 0, 0);
        colsum_case(dtypes[i], 300, 4, ref, no, no, NULL, 1, 0);
        tg_free_all();
    }
}

/* The plain launch adds each column's rows in the order the mixed one does: Σ dy of one tensor as
 * a plain task and as a task with x and res (the other launch) gives the same bits. */
static void plain_bits_case(pp_dtype_t dt, int N, int C)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 9100u + (uint64_t)N * 3 + (uint64_t)C * 5 + dt * 11);
    tg_ctx_set("%s N=%d C=%d plain against mixed", pp_dtype_name(dt), N, C);
    const size_t n = (size_t)N * C;
    double *zero = tg_zeros((size_t)C), *stats = tg_zeros((size_t)N);
    for (int r = 0; r < N; r++)
        stats[r] = 1.0;
    pp_colsum_task_t t[2];
    memset(t, 0, sizeof t);
    t[0].C = t[1].C = C;
    t[0].dy = t[1].dy = tg_dev_of(tg_randn(&rng, n, 1.0, dt), n, dt);
    t[0].d_sum = (float *)tg_dev_of(zero, (size_t)C, PP_DTYPE_FP32);
    t[1].d_sum = (float *)tg_dev_of(zero, (size_t)C, PP_DTYPE_FP32);
    t[1].x = tg_dev_of(tg_randn(&rng, n, 1.0, dt), n, dt);
    t[1].mean = t[1].rstd = (const float *)tg_dev_of(stats, (size_t)N, PP_DTYPE_FP32);
    t[1].d_xhat = (float *)tg_dev_of(zero, (size_t)C, PP_DTYPE_FP32);
    t[1].res = tg_dev_of(tg_randn(&rng, n, 1.0, dt), n, dt);
    t[1].d_res = (float *)tg_dev_of(zero, (size_t)C, PP_DTYPE_FP32);
    void *scratch = tg_dev((size_t)32 << 20);
    REQUIRE(colsum_bwd(t, 2, N, scratch, (size_t)32 << 20, dt, g_stream) == PP_OK,
            "colsum_bwd [%s]", tg_ctx());
    float *got[2];
    for (int k = 0; k < 2; k++)
        got[k] = (float *)tg_get(t[k].d_sum, (size_t)C * sizeof(float));
    EXPECT(memcmp(got[0], got[1], (size_t)C * sizeof(float)) == 0,
           "[%s]: the plain task's d_sum differs bitwise from the mixed task's", tg_ctx());
    tg_free_all();
}

static void test_plain_bits(void)
{
    for (int i = 0; i < 2; i++) {
        plain_bits_case(dtypes[i], check_quick() ? 130 : 1500, 4096);
        plain_bits_case(dtypes[i], 301, 1020);
        plain_bits_case(dtypes[i], 2000, 64);
    }
}

static void test_errors(void)
{
    pp_colsum_task_t t;
    memset(&t, 0, sizeof t);
    float *d = (float *)tg_dev(1024);
    t.C = 8;
    t.dy = d;
    t.d_sum = d;
    EXPECT(colsum_bwd(&t, 1, 4, d, 16, PP_DTYPE_FP32, g_stream) == PP_ERR_INTERNAL,
           "a scratch smaller than one chunk is refused");
    EXPECT(colsum_bwd(&t, 0, 4, d, 1024, PP_DTYPE_FP32, g_stream) == PP_ERR_INTERNAL,
           "no task is refused");
    t.x = d;
    EXPECT(colsum_bwd(&t, 1, 4, d, 1024, PP_DTYPE_FP32, g_stream) == PP_ERR_INTERNAL,
           "x without mean, rstd and d_xhat is refused");
    t.x = NULL;
    EXPECT(colsum_bwd(&t, 1, 0, NULL, 0, PP_DTYPE_FP32, g_stream) == PP_OK, "N = 0 does nothing");
    t.partial = d;
    t.n_partial = 2;
    EXPECT(colsum_bwd(&t, 1, 4, d, 1024, PP_DTYPE_FP32, g_stream) == PP_ERR_INTERNAL,
           "a task with both dy and partial is refused");
    t.dy = NULL;
    t.n_partial = 0;
    EXPECT(colsum_bwd(&t, 1, 4, d, 1024, PP_DTYPE_FP32, g_stream) == PP_ERR_INTERNAL,
           "a task of no partial sums is refused");
    tg_free_all();
}

static void test_device(void)
{
    SKIP("%s", tg_skip_reason());
}

int main(void)
{
    if (tg_init("test_colsum", GUARD_BYTES)) {
        RUN(test_device);
        return check_summary("test_colsum");
    }
    g_stream = tg_stream();
    RUN(test_block_shapes);
    RUN(test_odd_and_unaligned);
    RUN(test_small_scratch_and_one_task);
    RUN(test_partial_sums);
    RUN(test_plain);
    RUN(test_plain_bits);
    RUN(test_errors);
    tg_finish();
    return check_summary("test_colsum");
}
