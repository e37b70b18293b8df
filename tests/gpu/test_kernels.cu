/*
 * test_kernels.cu — every kernel of kernels/kernels.h against its double-precision CPU reference
 * (tests/ref/ref_kernels.c) on fresh seeded random inputs, in fp32 and bf16, at odd shapes (N not
 * a multiple of a block, C = 64, 96, 1024 and an odd 67, V = 8192 and an odd 1001), with output
 * buffers poisoned with NaN bytes first so that an unwritten element fails. Accumulating outputs
 * start from random non-zero values; every backward runs twice and must be bitwise identical.
 * bf16 inputs are rounded to bf16 on the host before the reference sees them. The fused GEMM
 * epilogues (residual, GELU, GELU gradient) run both as cuBLASLt offers them and with
 * gemm.no_epilogue set (the separate kernels), against the same reference.
 *
 * Tolerances, |got − want| ≤ atol + rtol·|want|:
 *   fp32 storage          atol 1e-5, rtol 1e-4
 *   bf16 storage          atol 1e-2, rtol 2e-2 (one bf16 rounding of the output)
 *   fp32 accumulators and long reductions (sums over rows, GEMM K ≥ 64): atol 1e-4, rtol 1e-4
 * Without a GPU the program reports one skipped case with the reason and exits 0.
 * PPSCHED_TEST_QUICK=1 (check.h) leaves out the 300 x 96 x 1024 GEMMs and runs 8 shapes, once,
 * through the GEMM plan cache instead of 40 twice.
 */
#include "tests/check.h"
#include "tests/gpu/support.h"
#include "tests/ref/ref_kernels.h"

#include "common/pp_cuda.h"
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

static const tg_tol_t TOL_FP32 = {1e-5, 1e-4};
static const tg_tol_t TOL_BF16 = {1e-2, 2e-2};
static const tg_tol_t TOL_SUM = {1e-4, 1e-4};
static const tg_tol_t TOL_EXACT = {0.0, 0.0};

static tg_tol_t tol_of(pp_dtype_t t)
{
    return t == PP_DTYPE_BF16 ? TOL_BF16 : TOL_FP32;
}
/* storage-dtype output of a long reduction */
static tg_tol_t tol_sum_of(pp_dtype_t t)
{
    return t == PP_DTYPE_BF16 ? TOL_BF16 : TOL_SUM;
}
static int is_bf16(pp_dtype_t t)
{
    return t == PP_DTYPE_BF16;
}

static const pp_dtype_t dtypes[2] = {PP_DTYPE_FP32, PP_DTYPE_BF16};

#define GUARD_BYTES 16 /* after every device buffer (support.h) */

static cudaStream_t g_stream;
static pp_gemm_t g_gemm;

/* Buffers come from support.h's arena, released after each case. */

static int *dev_ints(const int *h, size_t n)
{
    int *d = (int *)tg_dev(n * sizeof(int));
    tg_copy(d, h, n * sizeof(int), cudaMemcpyHostToDevice);
    return d;
}

static void expect_same_bytes(const char *what, const void *a, const void *b, size_t bytes)
{
    EXPECT(memcmp(a, b, bytes) == 0, "%s [%s]: the second run differs bitwise", what, tg_ctx());
}

/* ---- matmul ---------------------------------------------------------------------------------- */

static void matmul_case(pp_dtype_t t, int N, int IC, int OC, int misalign)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 1000u + (uint64_t)N * 7 + IC * 13 + OC * 17 + t * 3 + misalign);
    tg_ctx_set("%s N=%d IC=%d OC=%d%s", pp_dtype_name(t), N, IC, OC, misalign ? " unaligned" : "");
    const size_t off = misalign ? 1 : 0;
    const tg_tol_t tol = tol_sum_of(t);
    double *inp = tg_randn(&rng, (size_t)N * IC, 1.0, t);
    double *w = tg_randn(&rng, (size_t)OC * IC, 1.0 / sqrt((double)IC), t);
    double *bias = tg_randn(&rng, OC, 1.0, t);
    double *dout = tg_randn(&rng, (size_t)N * OC, 1.0, t);
    void *d_inp = tg_dev_of_at(inp, (size_t)N * IC, t, off),
         *d_w = tg_dev_of_at(w, (size_t)OC * IC, t, off);
    void *d_bias = tg_dev_of_at(bias, OC, t, off),
         *d_dout = tg_dev_of_at(dout, (size_t)N * OC, t, off);

    /* forward, with and without bias */
    double *want = tg_zeros((size_t)N * OC);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        void *d_out = tg_dev_at((size_t)N * OC * pp_dtype_size(t), off * pp_dtype_size(t));
        REQUIRE_OK(matmul_fwd(d_out, d_inp, d_w, with_bias ? d_bias : NULL, N, IC, OC, t, &g_gemm,
                              g_stream));
        ref_matmul_fwd(want, inp, w, with_bias ? bias : NULL, N, IC, OC);
        EXPECT_CLOSE(with_bias ? "matmul_fwd (bias)" : "matmul_fwd",
                     tg_download(d_out, (size_t)N * OC, t), want, (size_t)N * OC, tol);
    }

    /* input gradient: = and += */
    for (int acc = 0; acc < 2; acc++) {
        double *dinp = acc ? tg_randn(&rng, (size_t)N * IC, 1.0, t) : tg_zeros((size_t)N * IC);
        void *d_dinp = acc ? tg_dev_of_at(dinp, (size_t)N * IC, t, off)
                           : tg_dev_at((size_t)N * IC * pp_dtype_size(t), off * pp_dtype_size(t));
        const size_t bytes = (size_t)N * IC * pp_dtype_size(t);
        void *init = tg_get(d_dinp, bytes);
        REQUIRE_OK(matmul_bwd_input(d_dinp, d_dout, d_w, N, IC, OC, acc, t, &g_gemm, g_stream));
        void *first = tg_get(d_dinp, bytes);
        ref_matmul_bwd_input(dinp, dout, w, N, IC, OC, acc);
        EXPECT_CLOSE(acc ? "matmul_bwd_input (+=)" : "matmul_bwd_input",
                     tg_download(d_dinp, (size_t)N * IC, t), dinp, (size_t)N * IC, tol);
        tg_put(d_dinp, init, bytes);
        REQUIRE_OK(matmul_bwd_input(d_dinp, d_dout, d_w, N, IC, OC, acc, t, &g_gemm, g_stream));
        expect_same_bytes("matmul_bwd_input", first, tg_get(d_dinp, bytes), bytes);
    }

    /* weight and bias gradients: fp32 += */
    double *dw = tg_randn(&rng, (size_t)OC * IC, 1.0, PP_DTYPE_FP32);
    double *db = tg_randn(&rng, OC, 1.0, PP_DTYPE_FP32);
    float *d_dw = (float *)tg_dev_of(dw, (size_t)OC * IC, PP_DTYPE_FP32);
    float *d_db = (float *)tg_dev_of(db, OC, PP_DTYPE_FP32);
    void *dw0 = tg_get(d_dw, (size_t)OC * IC * 4), *db0 = tg_get(d_db, (size_t)OC * 4);
    REQUIRE_OK(matmul_bwd_weight(d_dw, d_db, d_dout, d_inp, N, IC, OC, t, &g_gemm, g_stream));
    void *dw1 = tg_get(d_dw, (size_t)OC * IC * 4), *db1 = tg_get(d_db, (size_t)OC * 4);
    ref_matmul_bwd_weight(dw, db, dout, inp, N, IC, OC);
    EXPECT_CLOSE("matmul_bwd_weight dweight", tg_download(d_dw, (size_t)OC * IC, PP_DTYPE_FP32), dw,
                 (size_t)OC * IC, TOL_SUM);
    EXPECT_CLOSE("matmul_bwd_weight dbias", tg_download(d_db, OC, PP_DTYPE_FP32), db, OC, TOL_SUM);
    tg_put(d_dw, dw0, (size_t)OC * IC * 4);
    tg_put(d_db, db0, (size_t)OC * 4);
    REQUIRE_OK(matmul_bwd_weight(d_dw, d_db, d_dout, d_inp, N, IC, OC, t, &g_gemm, g_stream));
    expect_same_bytes("matmul_bwd_weight dweight", dw1, tg_get(d_dw, (size_t)OC * IC * 4),
                      (size_t)OC * IC * 4);
    expect_same_bytes("matmul_bwd_weight dbias", db1, tg_get(d_db, (size_t)OC * 4), (size_t)OC * 4);
}

/* More fused-bias shapes than gemm keeps plans for: evicted and rebuilt plans stay correct. */
static void test_matmul_many_shapes(void)
{
    /* quick: fewer shapes than gemm keeps plans for, one round (no eviction) */
    const int IC = 64, OC = 32, max_n = check_quick() ? 8 : 40, rounds = check_quick() ? 1 : 2;
    for (int round = 0; round < rounds; round++)
        for (int N = 1; N <= max_n; N++) {
            const pp_dtype_t t = dtypes[(N + round) % 2];
            ref_rng_t rng;
            ref_rng_seed(&rng, 1500u + N * 2 + round);
            tg_ctx_set("%s N=%d round %d", pp_dtype_name(t), N, round);
            double *inp = tg_randn(&rng, (size_t)N * IC, 1.0, t);
            double *w = tg_randn(&rng, (size_t)OC * IC, 0.125, t),
                   *bias = tg_randn(&rng, OC, 1.0, t);
            void *d_out = tg_dev((size_t)N * OC * pp_dtype_size(t));
            REQUIRE_OK(matmul_fwd(d_out, tg_dev_of(inp, (size_t)N * IC, t),
                                  tg_dev_of(w, (size_t)OC * IC, t), tg_dev_of(bias, OC, t), N, IC,
                                  OC, t, &g_gemm, g_stream));
            double *want = tg_zeros((size_t)N * OC);
            ref_matmul_fwd(want, inp, w, bias, N, IC, OC);
            EXPECT_CLOSE("matmul_fwd", tg_download(d_out, (size_t)N * OC, t), want, (size_t)N * OC,
                         tol_sum_of(t));
        }
}

/* matmul_fwd_ex (residual and GELU forms, with and without bias, the residual also in place) and
 * matmul_bwd_input_dgelu. unfused sets g_gemm.no_epilogue; OC or IC not a multiple of 8 and
 * misaligned pointers reach the unfused path too. */
static void matmul_epilogue_case(pp_dtype_t t, int N, int IC, int OC, int misalign, int unfused)
{
    ref_rng_t rng;
    ref_rng_seed(&rng,
                 1700u + (uint64_t)N * 7 + IC * 13 + OC * 17 + t * 3 + misalign * 5 + unfused);
    tg_ctx_set("%s N=%d IC=%d OC=%d%s%s", pp_dtype_name(t), N, IC, OC, misalign ? " unaligned" : "",
               unfused ? " unfused" : "");
    g_gemm.no_epilogue = unfused;
    const size_t off = misalign ? 1 : 0, es = pp_dtype_size(t);
    const size_t no = (size_t)N * OC, ni = (size_t)N * IC, bo = no * es, bi = ni * es;
    const tg_tol_t tol = tol_sum_of(t);
    double *inp = tg_randn(&rng, ni, 1.0, t);
    double *w = tg_randn(&rng, (size_t)OC * IC, 1.0 / sqrt((double)IC), t);
    double *bias = tg_randn(&rng, OC, 1.0, t), *res = tg_randn(&rng, no, 1.0, t);
    void *d_inp = tg_dev_of_at(inp, ni, t, off), *d_w = tg_dev_of_at(w, (size_t)OC * IC, t, off);
    void *d_bias = tg_dev_of_at(bias, OC, t, off), *d_res = tg_dev_of_at(res, no, t, off);
    double *want = tg_zeros(no), *pre = tg_zeros(no), *mag = tg_zeros(no);

    for (int with_bias = 0; with_bias < 2; with_bias++) {
        const void *b = with_bias ? d_bias : NULL;
        const char *name = with_bias ? "matmul_fwd_ex residual (bias)" : "matmul_fwd_ex residual";
        ref_matmul_fwd(want, inp, w, with_bias ? bias : NULL, N, IC, OC);
        for (size_t i = 0; i < no; i++) {
            mag[i] = fabs(want[i]) + fabs(res[i]);
            want[i] += res[i];
        }
        void *d_out = tg_dev_at(bo, off * es);
        REQUIRE_OK(
            matmul_fwd_ex(d_out, d_inp, d_w, b, d_res, NULL, N, IC, OC, t, &g_gemm, g_stream));
        void *first = tg_get(d_out, bo);
        EXPECT_CLOSE_TERMS(name, tg_download(d_out, no, t), want, mag, no, tol);
        EXPECT_CLOSE("matmul_fwd_ex residual unchanged", tg_download(d_res, no, t), res, no,
                     TOL_EXACT);
        tg_poison(d_out, bo);
        REQUIRE_OK(
            matmul_fwd_ex(d_out, d_inp, d_w, b, d_res, NULL, N, IC, OC, t, &g_gemm, g_stream));
        expect_same_bytes(name, first, tg_get(d_out, bo), bo);

        /* in place: out is the residual */
        void *d_io = tg_dev_of_at(res, no, t, off);
        REQUIRE_OK(matmul_fwd_ex(d_io, d_inp, d_w, b, d_io, NULL, N, IC, OC, t, &g_gemm, g_stream));
        void *first_io = tg_get(d_io, bo);
        EXPECT_CLOSE_TERMS("matmul_fwd_ex residual in place", tg_download(d_io, no, t), want, mag,
                           no, tol);
        tg_upload(d_io, res, no, t);
        REQUIRE_OK(matmul_fwd_ex(d_io, d_inp, d_w, b, d_io, NULL, N, IC, OC, t, &g_gemm, g_stream));
        expect_same_bytes("matmul_fwd_ex residual in place", first_io, tg_get(d_io, bo), bo);

        /* GELU: pre_gelu = inp·Wᵀ + bias, out = gelu(pre_gelu) */
        ref_matmul_fwd(pre, inp, w, with_bias ? bias : NULL, N, IC, OC);
        for (size_t i = 0; i < no; i++)
            want[i] = ref_gelu(pre[i]);
        void *d_pre = tg_dev_at(bo, off * es);
        tg_poison(d_out, bo);
        REQUIRE_OK(
            matmul_fwd_ex(d_out, d_inp, d_w, b, NULL, d_pre, N, IC, OC, t, &g_gemm, g_stream));
        void *out1 = tg_get(d_out, bo), *pre1 = tg_get(d_pre, bo);
        EXPECT_CLOSE(with_bias ? "matmul_fwd_ex pre_gelu (bias)" : "matmul_fwd_ex pre_gelu",
                     tg_download(d_pre, no, t), pre, no, tol);
        EXPECT_CLOSE(with_bias ? "matmul_fwd_ex gelu (bias)" : "matmul_fwd_ex gelu",
                     tg_download(d_out, no, t), want, no, tol);
        tg_poison(d_out, bo);
        tg_poison(d_pre, bo);
        REQUIRE_OK(
            matmul_fwd_ex(d_out, d_inp, d_w, b, NULL, d_pre, N, IC, OC, t, &g_gemm, g_stream));
        expect_same_bytes("matmul_fwd_ex gelu", out1, tg_get(d_out, bo), bo);
        expect_same_bytes("matmul_fwd_ex pre_gelu", pre1, tg_get(d_pre, bo), bo);
    }

    /* input gradient through the GELU: pre_gelu spread over the curved part of gelu */
    double *dout = tg_randn(&rng, no, 1.0, t), *pg = tg_randn(&rng, ni, 1.5, t),
           *dinp = tg_zeros(ni);
    void *d_dout = tg_dev_of_at(dout, no, t, off), *d_pg = tg_dev_of_at(pg, ni, t, off);
    void *d_dinp = tg_dev_at(bi, off * es);
    ref_matmul_bwd_input(dinp, dout, w, N, IC, OC, 0);
    for (size_t i = 0; i < ni; i++)
        dinp[i] *= ref_gelu_grad(pg[i]);
    REQUIRE_OK(matmul_bwd_input_dgelu(d_dinp, d_dout, d_w, d_pg, N, IC, OC, t, &g_gemm, g_stream));
    void *first = tg_get(d_dinp, bi);
    EXPECT_CLOSE("matmul_bwd_input_dgelu", tg_download(d_dinp, ni, t), dinp, ni, tol);
    EXPECT_CLOSE("matmul_bwd_input_dgelu pre_gelu unchanged", tg_download(d_pg, ni, t), pg, ni,
                 TOL_EXACT);
    tg_poison(d_dinp, bi);
    REQUIRE_OK(matmul_bwd_input_dgelu(d_dinp, d_dout, d_w, d_pg, N, IC, OC, t, &g_gemm, g_stream));
    expect_same_bytes("matmul_bwd_input_dgelu", first, tg_get(d_dinp, bi), bi);
}

static void test_matmul_epilogues(void)
{
    static const int shapes[][4] = {
        /* N, IC, OC, misaligned pointers */
        {37, 64, 96, 0}, {300, 96, 1024, 0}, {64, 2048, 64, 0}, /* long K: split-K */
        {37, 64, 96, 1}, {5, 67, 33, 0},                        /* OC, IC not multiples of 8 */
    };
    for (int unfused = 0; unfused < 2; unfused++)
        for (int i = 0; i < 2; i++)
            for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
                if (check_quick() && k == 1) continue; /* quick: not the largest shape */
                matmul_epilogue_case(dtypes[i], shapes[k][0], shapes[k][1], shapes[k][2],
                                     shapes[k][3], unfused);
                tg_free_all(); /* each case allocates ~60 host buffers */
            }
    g_gemm.no_epilogue = 0;
}

static void test_matmul(void)
{
    for (int i = 0; i < 2; i++) {
        matmul_case(dtypes[i], 37, 64, 96, 0);
        if (!check_quick()) matmul_case(dtypes[i], 300, 96, 1024, 0);
        matmul_case(dtypes[i], 37, 64, 96, 1);
        matmul_case(dtypes[i], 5, 67, 33, 0);
    }
}

/* The six attention GEMMs of the gemm_strided_batched doc comment, plus one with beta = 1. */
static void test_gemm_strided_batched(void)
{
    const int BH = 6, T = 33, d = 16;
    const size_t nq = (size_t)BH * T * d, ns = (size_t)BH * T * T;
    for (int i = 0; i < 2; i++) {
        pp_dtype_t t = dtypes[i];
        ref_rng_t rng;
        ref_rng_seed(&rng, 2000 + i);
        const tg_tol_t tol = tol_of(t);
        double *Q = tg_randn(&rng, nq, 1.0, t), *K = tg_randn(&rng, nq, 1.0, t);
        double *S = tg_randn(&rng, ns, 0.2, t);
        void *dQ = tg_dev_of(Q, nq, t), *dK = tg_dev_of(K, nq, t), *dS = tg_dev_of(S, ns, t);
        struct {
            const char *name;
            int ta, tb, m, n, k;
            const double *a, *b;
            void *da, *db;
            size_t nc;
            float alpha, beta;
        } cases[] = {
            {"S = a Q K^T", 0, 1, T, T, d, Q, K, dQ, dK, ns, 0.25f, 0.0f},
            {"O = P V", 0, 0, T, d, T, S, K, dS, dK, nq, 1.0f, 0.0f},
            {"dP = dO V^T", 0, 1, T, T, d, K, Q, dK, dQ, ns, 1.0f, 0.0f},
            {"dV = P^T dO", 1, 0, T, d, T, S, Q, dS, dQ, nq, 1.0f, 0.0f},
            {"dQ = dS K", 0, 0, T, d, T, S, K, dS, dK, nq, 1.0f, 0.0f},
            {"dK = dS^T Q", 1, 0, T, d, T, S, Q, dS, dQ, nq, 1.0f, 0.0f},
            {"dK += dS^T Q", 1, 0, T, d, T, S, Q, dS, dQ, nq, 1.0f, 1.0f},
        };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            tg_ctx_set("%s %s", pp_dtype_name(t), cases[c].name);
            const int m = cases[c].m, n = cases[c].n, k = cases[c].k;
            double *C =
                cases[c].beta != 0.0f ? tg_randn(&rng, cases[c].nc, 1.0, t) : tg_zeros(cases[c].nc);
            void *dC = cases[c].beta != 0.0f ? tg_dev_of(C, cases[c].nc, t)
                                             : tg_dev(cases[c].nc * pp_dtype_size(t));
            REQUIRE_OK(gemm_strided_batched(dC, cases[c].da, cases[c].db, cases[c].ta, cases[c].tb,
                                            m, n, k, cases[c].alpha, cases[c].beta,
                                            (long long)m * k, (long long)k * n, (long long)m * n,
                                            BH, t, &g_gemm, g_stream));
            ref_gemm_strided_batched(C, cases[c].a, cases[c].b, cases[c].ta, cases[c].tb, m, n, k,
                                     cases[c].alpha, cases[c].beta, (long long)m * k,
                                     (long long)k * n, (long long)m * n, BH);
            EXPECT_CLOSE("gemm_strided_batched", tg_download(dC, cases[c].nc, t), C, cases[c].nc,
                         tol);
        }
    }
}

/* ---- embedding ------------------------------------------------------------------------------- */

static void encoder_case(pp_dtype_t t, int B, int T, int C, int V, int same_token)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 3000u + (uint64_t)B * 7 + T * 11 + C * 13 + V + t + same_token * 5);
    tg_ctx_set("%s B=%d T=%d C=%d V=%d%s", pp_dtype_name(t), B, T, C, V,
               same_token ? " one token" : "");
    const int N = B * T;
    int *tok = (int *)tg_host((size_t)N * sizeof(int));
    for (int i = 0; i < N; i++)
        tok[i] = same_token ? V - 1 : ref_rng_int(&rng, V);
    double *wte = tg_randn(&rng, (size_t)V * C, 1.0, t),
           *wpe = tg_randn(&rng, (size_t)T * C, 1.0, t);
    double *dout = tg_randn(&rng, (size_t)N * C, 1.0, t);
    int *d_tok = dev_ints(tok, N);
    void *d_wte = tg_dev_of(wte, (size_t)V * C, t), *d_wpe = tg_dev_of(wpe, (size_t)T * C, t);
    void *d_dout = tg_dev_of(dout, (size_t)N * C, t);

    void *d_out = tg_dev((size_t)N * C * pp_dtype_size(t));
    REQUIRE_OK(encoder_fwd(d_out, d_tok, d_wte, d_wpe, B, T, C, t, g_stream));
    double *out = tg_zeros((size_t)N * C);
    ref_encoder_fwd(out, tok, wte, wpe, B, T, C);
    EXPECT_CLOSE("encoder_fwd", tg_download(d_out, (size_t)N * C, t), out, (size_t)N * C,
                 tol_of(t));

    double *dwte = tg_randn(&rng, (size_t)V * C, 1.0, PP_DTYPE_FP32);
    double *dwpe = tg_randn(&rng, (size_t)T * C, 1.0, PP_DTYPE_FP32);
    float *d_dwte = (float *)tg_dev_of(dwte, (size_t)V * C, PP_DTYPE_FP32);
    float *d_dwpe = (float *)tg_dev_of(dwpe, (size_t)T * C, PP_DTYPE_FP32);
    const size_t sb = encoder_bwd_scratch_bytes(B, T, V);
    REQUIRE(sb > 0, "encoder_bwd_scratch_bytes [%s]", tg_ctx());
    void *scratch = tg_dev(sb);
    const size_t bte = (size_t)V * C * 4, bpe = (size_t)T * C * 4;
    void *te0 = tg_get(d_dwte, bte), *pe0 = tg_get(d_dwpe, bpe);
    REQUIRE_OK(encoder_bwd(d_dwte, d_dwpe, d_dout, d_tok, scratch, B, T, C, V, t, g_stream));
    void *te1 = tg_get(d_dwte, bte), *pe1 = tg_get(d_dwpe, bpe);
    ref_encoder_bwd(dwte, dwpe, dout, tok, B, T, C);
    EXPECT_CLOSE("encoder_bwd dwte", tg_download(d_dwte, (size_t)V * C, PP_DTYPE_FP32), dwte,
                 (size_t)V * C, TOL_SUM);
    EXPECT_CLOSE("encoder_bwd dwpe", tg_download(d_dwpe, (size_t)T * C, PP_DTYPE_FP32), dwpe,
                 (size_t)T * C, TOL_SUM);
    tg_put(d_dwte, te0, bte);
    tg_put(d_dwpe, pe0, bpe);
    tg_poison(scratch, sb);
    REQUIRE_OK(encoder_bwd(d_dwte, d_dwpe, d_dout, d_tok, scratch, B, T, C, V, t, g_stream));
    expect_same_bytes("encoder_bwd dwte", te1, tg_get(d_dwte, bte), bte);
    expect_same_bytes("encoder_bwd dwpe", pe1, tg_get(d_dwpe, bpe), bpe);
}

static void test_encoder(void)
{
    for (int i = 0; i < 2; i++) {
        encoder_case(dtypes[i], 3, 37, 64, 50, 0);
        encoder_case(dtypes[i], 4, 64, 96, 8192, 0);
        encoder_case(dtypes[i], 2, 33, 67, 29, 0);
        encoder_case(dtypes[i], 2, 300, 1024, 1000, 0);
        encoder_case(dtypes[i], 3, 37, 64, 50, 1);
        encoder_case(dtypes[i], 3, 100, 96, 5, 0);
        encoder_case(dtypes[i], 2, 300, 1024, 1000, 1);
    }
}

/* ---- layernorm ------------------------------------------------------------------------------- */

static void layernorm_case(pp_dtype_t t, int N, int C)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 4000u + (uint64_t)N * 3 + C * 5 + t);
    tg_ctx_set("%s N=%d C=%d", pp_dtype_name(t), N, C);
    const size_t n = (size_t)N * C;
    double *inp = tg_zeros(n);
    for (int r = 0; r < N; r++) /* rows with their own offset and spread */
    {
        double mu = 3.0 * ref_rng_normal(&rng), sd = 0.5 + 2.0 * ref_rng_uniform(&rng);
        for (int c = 0; c < C; c++)
            inp[(size_t)r * C + c] = mu + sd * ref_rng_normal(&rng);
    }
    ref_round(inp, n, is_bf16(t));
    double *w = tg_randn(&rng, C, 1.0, t), *b = tg_randn(&rng, C, 1.0, t);
    double *dout = tg_randn(&rng, n, 1.0, t);
    void *d_inp = tg_dev_of(inp, n, t), *d_w = tg_dev_of(w, C, t), *d_b = tg_dev_of(b, C, t);
    void *d_dout = tg_dev_of(dout, n, t);

    void *d_out = tg_dev(n * pp_dtype_size(t));
    float *d_mean = (float *)tg_dev((size_t)N * 4), *d_rstd = (float *)tg_dev((size_t)N * 4);
    REQUIRE_OK(layernorm_fwd(d_out, d_mean, d_rstd, d_inp, d_w, d_b, N, C, t, g_stream));
    double *out = tg_zeros(n), *mean = tg_zeros(N), *rstd = tg_zeros(N);
    ref_layernorm_fwd(out, mean, rstd, inp, w, b, N, C);
    EXPECT_CLOSE("layernorm_fwd out", tg_download(d_out, n, t), out, n, tol_of(t));
    EXPECT_CLOSE("layernorm_fwd mean", tg_download(d_mean, N, PP_DTYPE_FP32), mean, N, TOL_SUM);
    EXPECT_CLOSE("layernorm_fwd rstd", tg_download(d_rstd, N, PP_DTYPE_FP32), rstd, N, TOL_SUM);
    /* the three-pass kernel (PPSCHED_LAYERNORM=unfused) against the reference, then the default
     * path again: both bitwise repeatable */
    {
        void *out1 = tg_get(d_out, n * pp_dtype_size(t));
        void *d_out2 = tg_dev(n * pp_dtype_size(t));
        setenv("PPSCHED_LAYERNORM", "unfused", 1);
        REQUIRE_OK(layernorm_fwd(d_out2, NULL, NULL, d_inp, d_w, d_b, N, C, t, g_stream));
        unsetenv("PPSCHED_LAYERNORM");
        EXPECT_CLOSE("layernorm_fwd out (three-pass)", tg_download(d_out2, n, t), out, n,
                     tol_of(t));
        REQUIRE_OK(layernorm_fwd(d_out2, NULL, NULL, d_inp, d_w, d_b, N, C, t, g_stream));
        expect_same_bytes("layernorm_fwd out", out1, tg_get(d_out2, n * pp_dtype_size(t)),
                          n * pp_dtype_size(t));
    }

    const size_t bytes = n * pp_dtype_size(t);
    for (int acc = 0; acc < 2; acc++) {
        double *dinp = acc ? tg_randn(&rng, n, 1.0, t) : tg_zeros(n);
        void *d_dinp = acc ? tg_dev_of(dinp, n, t) : tg_dev(bytes);
        void *init = tg_get(d_dinp, bytes);
        REQUIRE_OK(layernorm_bwd_input(d_dinp, d_dout, d_inp, d_w, d_mean, d_rstd, N, C, acc, t,
                                       g_stream));
        void *first = tg_get(d_dinp, bytes);
        ref_layernorm_bwd_input(dinp, dout, inp, w, mean, rstd, N, C, acc);
        EXPECT_CLOSE(acc ? "layernorm_bwd_input (+=)" : "layernorm_bwd_input",
                     tg_download(d_dinp, n, t), dinp, n, tol_sum_of(t));
        tg_put(d_dinp, init, bytes);
        REQUIRE_OK(layernorm_bwd_input(d_dinp, d_dout, d_inp, d_w, d_mean, d_rstd, N, C, acc, t,
                                       g_stream));
        expect_same_bytes("layernorm_bwd_input", first, tg_get(d_dinp, bytes), bytes);
    }

    /* the residual gradient added in the same pass: out of place, then in place (bitwise the
     * same: one kernel, the same alignment) */
    double *dres = tg_randn(&rng, n, 1.0, t), *sum = tg_zeros(n);
    memcpy(sum, dres, n * sizeof(double));
    ref_layernorm_bwd_input(sum, dout, inp, w, mean, rstd, N, C, 1);
    void *d_dres = tg_dev_of(dres, n, t), *d_sum = tg_dev(bytes);
    REQUIRE_OK(layernorm_bwd_input_add(d_sum, NULL, d_dres, d_dout, d_inp, d_w, d_mean, d_rstd, N,
                                       C, t, g_stream));
    void *sum1 = tg_get(d_sum, bytes);
    EXPECT_CLOSE("layernorm_bwd_input_add", tg_download(d_sum, n, t), sum, n, tol_sum_of(t));
    EXPECT_CLOSE("layernorm_bwd_input_add dres unchanged", tg_download(d_dres, n, t), dres, n,
                 TOL_EXACT);
    tg_poison(d_sum, bytes);
    REQUIRE_OK(layernorm_bwd_input_add(d_sum, NULL, d_dres, d_dout, d_inp, d_w, d_mean, d_rstd, N,
                                       C, t, g_stream));
    expect_same_bytes("layernorm_bwd_input_add", sum1, tg_get(d_sum, bytes), bytes);
    REQUIRE_OK(layernorm_bwd_input_add(d_dres, NULL, d_dres, d_dout, d_inp, d_w, d_mean, d_rstd, N,
                                       C, t, g_stream));
    expect_same_bytes("layernorm_bwd_input_add in place", sum1, tg_get(d_dres, bytes), bytes);

    double *dw = tg_randn(&rng, C, 1.0, PP_DTYPE_FP32), *db = tg_randn(&rng, C, 1.0, PP_DTYPE_FP32);
    float *d_dw = (float *)tg_dev_of(dw, C, PP_DTYPE_FP32),
          *d_db = (float *)tg_dev_of(db, C, PP_DTYPE_FP32);
    const size_t sb = layernorm_bwd_weight_scratch_bytes(N, C);
    void *scratch = tg_dev(sb);
    void *dw0 = tg_get(d_dw, (size_t)C * 4), *db0 = tg_get(d_db, (size_t)C * 4);
    REQUIRE_OK(layernorm_bwd_weight(d_dw, d_db, d_dout, d_inp, d_mean, d_rstd, scratch, N, C, t,
                                    g_stream));
    void *dw1 = tg_get(d_dw, (size_t)C * 4), *db1 = tg_get(d_db, (size_t)C * 4);
    ref_layernorm_bwd_weight(dw, db, dout, inp, mean, rstd, N, C);
    EXPECT_CLOSE("layernorm_bwd_weight dw", tg_download(d_dw, C, PP_DTYPE_FP32), dw, C, TOL_SUM);
    EXPECT_CLOSE("layernorm_bwd_weight db", tg_download(d_db, C, PP_DTYPE_FP32), db, C, TOL_SUM);
    tg_put(d_dw, dw0, (size_t)C * 4);
    tg_put(d_db, db0, (size_t)C * 4);
    REQUIRE_OK(layernorm_bwd_weight(d_dw, d_db, d_dout, d_inp, d_mean, d_rstd, scratch, N, C, t,
                                    g_stream));
    expect_same_bytes("layernorm_bwd_weight dw", dw1, tg_get(d_dw, (size_t)C * 4), (size_t)C * 4);
    expect_same_bytes("layernorm_bwd_weight db", db1, tg_get(d_db, (size_t)C * 4), (size_t)C * 4);
}

static void test_layernorm(void)
{
    for (int i = 0; i < 2; i++) {
        layernorm_case(dtypes[i], 37, 64);
        layernorm_case(dtypes[i], 37, 96);
        layernorm_case(dtypes[i], 1000, 1024);
        layernorm_case(dtypes[i], 45, 67);
        layernorm_case(dtypes[i], 1, 64);
        layernorm_case(dtypes[i], 40, 2048); /* 8 packs a lane in bf16 */
        layernorm_case(dtypes[i], 20, 4096); /* too wide for registers: three-pass */
        layernorm_case(dtypes[i], 50, 520);  /* packs past C in the last lanes */
    }
}

/* ---- GELU and residual ----------------------------------------------------------------------- */

static void elementwise_case(pp_dtype_t t, size_t n, size_t off)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 5000u + n + off * 3 + t);
    tg_ctx_set("%s n=%zu offset=%zu", pp_dtype_name(t), n, off);
    const tg_tol_t tol = tol_of(t);
    double *x = tg_randn(&rng, n, 2.0, t), *y = tg_randn(&rng, n, 1.0, t), *want = tg_zeros(n);
    void *d_x = tg_dev_of_at(x, n, t, off), *d_y = tg_dev_of_at(y, n, t, off);
    void *d_out = tg_dev_at(n * pp_dtype_size(t), off * pp_dtype_size(t));

    REQUIRE_OK(gelu_fwd(d_out, d_x, n, t, g_stream));
    ref_gelu_fwd(want, x, n);
    EXPECT_CLOSE("gelu_fwd", tg_download(d_out, n, t), want, n, tol);

    void *d_dinp = tg_dev_at(n * pp_dtype_size(t), off * pp_dtype_size(t));
    REQUIRE_OK(gelu_bwd(d_dinp, d_x, d_y, n, t, g_stream));
    void *first = tg_get(d_dinp, n * pp_dtype_size(t));
    ref_gelu_bwd(want, x, y, n);
    EXPECT_CLOSE("gelu_bwd", tg_download(d_dinp, n, t), want, n, tol);
    REQUIRE_OK(gelu_bwd(d_dinp, d_x, d_y, n, t, g_stream));
    expect_same_bytes("gelu_bwd", first, tg_get(d_dinp, n * pp_dtype_size(t)),
                      n * pp_dtype_size(t));

    /* in place: gelu_bwd with dinp = dout, gelu_fwd with out = inp */
    void *d_io = tg_dev_of_at(y, n, t, off);
    REQUIRE_OK(gelu_bwd(d_io, d_x, d_io, n, t, g_stream));
    EXPECT_CLOSE("gelu_bwd in place", tg_download(d_io, n, t), want, n, tol);
    tg_upload(d_io, x, n, t);
    REQUIRE_OK(gelu_fwd(d_io, d_io, n, t, g_stream));
    ref_gelu_fwd(want, x, n);
    EXPECT_CLOSE("gelu_fwd in place", tg_download(d_io, n, t), want, n, tol);

    REQUIRE_OK(residual_fwd(d_out, d_x, d_y, n, t, g_stream));
    for (size_t i = 0; i < n; i++)
        want[i] = x[i] + y[i];
    EXPECT_CLOSE("residual_fwd", tg_download(d_out, n, t), want, n, tol);
    tg_upload(d_io, x, n, t);
    REQUIRE_OK(add_inplace(d_io, d_y, n, t, g_stream));
    EXPECT_CLOSE("add_inplace", tg_download(d_io, n, t), want, n, tol);
}

static void test_elementwise(void)
{
    for (int i = 0; i < 2; i++) {
        elementwise_case(dtypes[i], 10007, 0);
        elementwise_case(dtypes[i], 10007, 1);
        elementwise_case(dtypes[i], 5, 0);
        elementwise_case(dtypes[i], 4096, 0);
    }
}

/* ---- attention permutes and causal softmax --------------------------------------------------- */

static void permute_case(pp_dtype_t t, int B, int T, int H, int d)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 6000u + (uint64_t)B + T * 3 + H * 5 + d * 7 + t);
    tg_ctx_set("%s B=%d T=%d H=%d d=%d", pp_dtype_name(t), B, T, H, d);
    const size_t n = (size_t)B * T * H * d;
    double *qkv = tg_randn(&rng, 3 * n, 1.0, t);
    void *d_qkv = tg_dev_of(qkv, 3 * n, t);
    const size_t bytes = n * pp_dtype_size(t);
    void *d_q = tg_dev(bytes), *d_k = tg_dev(bytes), *d_v = tg_dev(bytes);
    REQUIRE_OK(attention_permute_qkv(d_q, d_k, d_v, d_qkv, B, T, H, d, t, g_stream));
    double *q = tg_zeros(n), *k = tg_zeros(n), *v = tg_zeros(n);
    ref_attention_permute_qkv(q, k, v, qkv, B, T, H, d);
    EXPECT_CLOSE("attention_permute_qkv q", tg_download(d_q, n, t), q, n, TOL_EXACT);
    EXPECT_CLOSE("attention_permute_qkv k", tg_download(d_k, n, t), k, n, TOL_EXACT);
    EXPECT_CLOSE("attention_permute_qkv v", tg_download(d_v, n, t), v, n, TOL_EXACT);

    /* backward: fresh gradients in head layout back to the token layout */
    double *dq = tg_randn(&rng, n, 1.0, t), *dk = tg_randn(&rng, n, 1.0, t),
           *dv = tg_randn(&rng, n, 1.0, t);
    void *d_dq = tg_dev_of(dq, n, t), *d_dk = tg_dev_of(dk, n, t), *d_dv = tg_dev_of(dv, n, t);
    void *d_dqkv = tg_dev(3 * bytes);
    REQUIRE_OK(attention_unpermute_dqkv(d_dqkv, d_dq, d_dk, d_dv, B, T, H, d, t, g_stream));
    double *dqkv = tg_zeros(3 * n);
    ref_attention_unpermute_dqkv(dqkv, dq, dk, dv, B, T, H, d);
    EXPECT_CLOSE("attention_unpermute_dqkv", tg_download(d_dqkv, 3 * n, t), dqkv, 3 * n, TOL_EXACT);

    void *d_out = tg_dev(bytes);
    REQUIRE_OK(attention_unpermute_out(d_out, d_dq, B, T, H, d, t, g_stream));
    double *out = tg_zeros(n);
    ref_attention_unpermute_out(out, dq, B, T, H, d);
    EXPECT_CLOSE("attention_unpermute_out", tg_download(d_out, n, t), out, n, TOL_EXACT);
    void *d_datt = tg_dev(bytes);
    double *dout = tg_randn(&rng, n, 1.0, t), *datt = tg_zeros(n);
    void *d_dout = tg_dev_of(dout, n, t);
    REQUIRE_OK(attention_permute_dout(d_datt, d_dout, B, T, H, d, t, g_stream));
    ref_attention_permute_dout(datt, dout, B, T, H, d);
    EXPECT_CLOSE("attention_permute_dout", tg_download(d_datt, n, t), datt, n, TOL_EXACT);
}

static void test_attention_permutes(void)
{
    for (int i = 0; i < 2; i++) {
        permute_case(dtypes[i], 2, 33, 4, 16);
        permute_case(dtypes[i], 3, 17, 3, 6);
        permute_case(dtypes[i], 1, 64, 16, 64);
    }
}

static void softmax_case(pp_dtype_t t, int BH, int T)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 7000u + (uint64_t)BH * 3 + T + t);
    tg_ctx_set("%s BH=%d T=%d", pp_dtype_name(t), BH, T);
    const size_t n = (size_t)BH * T * T, bytes = n * pp_dtype_size(t);
    const float scale = 0.125f;
    double *S = tg_randn(&rng, n, 16.0, t), *P = tg_zeros(n);
    void *d_S = tg_dev_of(S, n, t), *d_P = tg_dev(bytes);
    REQUIRE_OK(softmax_causal_fwd(d_P, d_S, scale, BH, T, t, g_stream));
    ref_softmax_causal_fwd(P, S, scale, BH, T);
    EXPECT_CLOSE("softmax_causal_fwd", tg_download(d_P, n, t), P, n, tol_of(t));
    REQUIRE_OK(softmax_causal_fwd(d_S, d_S, scale, BH, T, t, g_stream)); /* in place */
    EXPECT_CLOSE("softmax_causal_fwd in place", tg_download(d_S, n, t), P, n, tol_of(t));

    ref_round(P, n, is_bf16(t)); /* the stored probabilities are the backward's input */
    tg_upload(d_P, P, n, t);
    double *dP = tg_randn(&rng, n, 1.0, t), *dS = tg_zeros(n);
    void *d_dP = tg_dev_of(dP, n, t), *d_dS = tg_dev(bytes);
    REQUIRE_OK(softmax_causal_bwd(d_dS, d_dP, d_P, scale, BH, T, t, g_stream));
    void *first = tg_get(d_dS, bytes);
    ref_softmax_causal_bwd(dS, dP, P, scale, BH, T);
    EXPECT_CLOSE("softmax_causal_bwd", tg_download(d_dS, n, t), dS, n, tol_of(t));
    REQUIRE_OK(softmax_causal_bwd(d_dS, d_dP, d_P, scale, BH, T, t, g_stream));
    expect_same_bytes("softmax_causal_bwd", first, tg_get(d_dS, bytes), bytes);
    REQUIRE_OK(softmax_causal_bwd(d_dP, d_dP, d_P, scale, BH, T, t, g_stream)); /* dS aliases dP */
    EXPECT_CLOSE("softmax_causal_bwd in place", tg_download(d_dP, n, t), dS, n, tol_of(t));
}

static void test_softmax_causal(void)
{
    for (int i = 0; i < 2; i++) {
        softmax_case(dtypes[i], 3, 17);
        softmax_case(dtypes[i], 2, 64);
        softmax_case(dtypes[i], 5, 1);
        softmax_case(dtypes[i], 2, 1024);
        softmax_case(dtypes[i], 1, 2048);
        softmax_case(dtypes[i], 2, 99);
    }
}

/* ---- cross-entropy --------------------------------------------------------------------------- */

static void crossentropy_case(pp_dtype_t t, int N, int V)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 8000u + (uint64_t)N * 3 + V + t);
    tg_ctx_set("%s N=%d V=%d", pp_dtype_name(t), N, V);
    const size_t n = (size_t)N * V, bytes = n * pp_dtype_size(t);
    const float grad_scale = 0.5f;
    double *logits = tg_randn(&rng, n, 2.0, t);
    int *tgt = (int *)tg_host((size_t)N * sizeof(int));
    for (int i = 0; i < N; i++)
        tgt[i] = ref_rng_int(&rng, V);
    tgt[0] = V - 1;
    int *d_tgt = dev_ints(tgt, N);
    void *d_logits = tg_dev_of(logits, n, t), *d_dlogits = tg_dev(bytes);
    float *d_losses = (float *)tg_dev((size_t)N * 4);
    double *losses = tg_zeros(N), *dlogits = tg_zeros(n);
    ref_crossentropy(losses, dlogits, logits, tgt, grad_scale, N, V);
    /* compare the gradient in units of grad_scale / N, where its entries are O(1/V) .. 1 */
    const double unit = (double)N / grad_scale;
    for (size_t i = 0; i < n; i++)
        dlogits[i] *= unit;
    const tg_tol_t dtol = {1e-6, is_bf16(t) ? 1e-2 : 1e-4};

    REQUIRE_OK(
        crossentropy_fwd_bwd(d_losses, d_dlogits, d_logits, d_tgt, grad_scale, N, V, t, g_stream));
    void *first = tg_get(d_dlogits, bytes), *lfirst = tg_get(d_losses, (size_t)N * 4);
    EXPECT_CLOSE("crossentropy losses", tg_download(d_losses, N, PP_DTYPE_FP32), losses, N,
                 TOL_SUM);
    double *got = tg_download(d_dlogits, n, t);
    for (size_t i = 0; i < n; i++)
        got[i] *= unit;
    EXPECT_CLOSE("crossentropy dlogits", got, dlogits, n, dtol);
    REQUIRE_OK(
        crossentropy_fwd_bwd(d_losses, d_dlogits, d_logits, d_tgt, grad_scale, N, V, t, g_stream));
    expect_same_bytes("crossentropy dlogits", first, tg_get(d_dlogits, bytes), bytes);
    expect_same_bytes("crossentropy losses", lfirst, tg_get(d_losses, (size_t)N * 4),
                      (size_t)N * 4);

    /* dlogits aliasing logits, and losses only */
    REQUIRE_OK(
        crossentropy_fwd_bwd(d_losses, d_logits, d_logits, d_tgt, grad_scale, N, V, t, g_stream));
    expect_same_bytes("crossentropy dlogits in place", first, tg_get(d_logits, bytes), bytes);
    tg_upload(d_logits, logits, n, t);
    tg_poison(d_losses, (size_t)N * 4);
    REQUIRE_OK(
        crossentropy_fwd_bwd(d_losses, NULL, d_logits, d_tgt, grad_scale, N, V, t, g_stream));
    expect_same_bytes("crossentropy losses only", lfirst, tg_get(d_losses, (size_t)N * 4),
                      (size_t)N * 4);

    /* the mean accumulates onto a non-zero value */
    const float acc0 = 1.75f;
    float *d_acc = (float *)tg_dev(4);
    tg_put(d_acc, &acc0, 4);
    REQUIRE_OK(loss_mean_accumulate(d_acc, d_losses, N, g_stream));
    double want = 0.0;
    for (int i = 0; i < N; i++)
        want += losses[i];
    want = acc0 + want / N;
    double *acc = tg_download(d_acc, 1, PP_DTYPE_FP32);
    EXPECT_CLOSE("loss_mean_accumulate", acc, &want, 1, TOL_SUM);
    float a1 = (float)acc[0];
    tg_put(d_acc, &acc0, 4);
    REQUIRE_OK(loss_mean_accumulate(d_acc, d_losses, N, g_stream));
    expect_same_bytes("loss_mean_accumulate", &a1, tg_get(d_acc, 4), 4);
}

static void test_crossentropy(void)
{
    for (int i = 0; i < 2; i++) {
        crossentropy_case(dtypes[i], 37, 8192);
        crossentropy_case(dtypes[i], 64, 1001);
        crossentropy_case(dtypes[i], 3000, 64);
    }
}

/* ---- AdamW ----------------------------------------------------------------------------------- */

/* mode 0: fp32, storage = master; 1: fp32, separate storage; 2: fp32, no storage; 3: bf16. */
static void adamw_case(int mode, size_t n)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 9000u + (uint64_t)mode * 31 + n);
    const pp_dtype_t t = mode == 3 ? PP_DTYPE_BF16 : PP_DTYPE_FP32;
    tg_ctx_set("%s mode %d n=%zu", pp_dtype_name(t), mode, n);
    const double lr = 3e-3, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    double *p = tg_randn(&rng, n, 1.0, PP_DTYPE_FP32), *m = tg_zeros(n), *v = tg_zeros(n);
    float *d_p = (float *)tg_dev_of(p, n, PP_DTYPE_FP32);
    float *d_m = (float *)tg_dev_of(m, n, PP_DTYPE_FP32),
          *d_v = (float *)tg_dev_of(v, n, PP_DTYPE_FP32);
    float *d_g = (float *)tg_dev(n * 4);
    void *d_store = mode == 0 ? (void *)d_p : (mode == 2 ? NULL : tg_dev(n * pp_dtype_size(t)));
    for (int step = 1; step <= 3; step++) {
        double *g = tg_randn(&rng, n, step == 2 ? 1e-3 : 1.0, PP_DTYPE_FP32);
        tg_upload(d_g, g, n, PP_DTYPE_FP32);
        REQUIRE_OK(adamw_update(d_p, d_store, d_g, d_m, d_v, n, (float)lr, (float)b1, (float)b2,
                                (float)eps, (float)wd, step, t, g_stream));
        ref_adamw_update(p, m, v, g, n, lr, b1, b2, eps, wd, step);
    }
    EXPECT_CLOSE("adamw param", tg_download(d_p, n, PP_DTYPE_FP32), p, n, TOL_FP32);
    EXPECT_CLOSE("adamw m", tg_download(d_m, n, PP_DTYPE_FP32), m, n, TOL_FP32);
    EXPECT_CLOSE("adamw v", tg_download(d_v, n, PP_DTYPE_FP32), v, n, TOL_FP32);
    if (mode == 1 || mode == 3) { /* storage = master rounded to the storage type, exactly */
        float *master = (float *)tg_get(d_p, n * 4);
        if (mode == 1) {
            expect_same_bytes("adamw fp32 storage", master, tg_get(d_store, n * 4), n * 4);
        } else {
            uint16_t *st = (uint16_t *)tg_get(d_store, n * 2);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++)
                bad += st[i] != ref_f32_to_bf16(master[i]);
            EXPECT(bad == 0, "adamw bf16 storage [%s]: %zu of %zu not the rounded master", tg_ctx(),
                   bad, n);
        }
    }
}

/* The step count read from device memory (a replayed graph's) gives the bits of the host's. */
static void adamw_counted_case(size_t n)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 9400u + n);
    tg_ctx_set("bf16 counted n=%zu", n);
    double *p = tg_randn(&rng, n, 1.0, PP_DTYPE_FP32), *g = tg_randn(&rng, n, 1.0, PP_DTYPE_FP32);
    double *m = tg_randn(&rng, n, 0.1, PP_DTYPE_FP32), *v = tg_randn(&rng, n, 0.01, PP_DTYPE_FP32);
    for (size_t i = 0; i < n; i++)
        v[i] = fabs(v[i]); /* a second moment is not negative */
    float *d_p[2], *d_m[2], *d_v[2];
    void *d_s[2];
    float *d_g = (float *)tg_dev_of(g, n, PP_DTYPE_FP32);
    int step = 5, *d_step = (int *)tg_dev(sizeof(int));
    REQUIRE(cudaMemcpy(d_step, &step, sizeof step, cudaMemcpyHostToDevice) == cudaSuccess,
            "step to the device");
    for (int k = 0; k < 2; k++) {
        d_p[k] = (float *)tg_dev_of(p, n, PP_DTYPE_FP32);
        d_m[k] = (float *)tg_dev_of(m, n, PP_DTYPE_FP32);
        d_v[k] = (float *)tg_dev_of(v, n, PP_DTYPE_FP32);
        d_s[k] = tg_dev(n * 2);
    }
    REQUIRE_OK(adamw_update_counted(d_p[0], d_s[0], d_g, d_m[0], d_v[0], n, 1e-3f, 0.9f, 0.95f,
                                    1e-8f, 0.1f, step, NULL, PP_DTYPE_BF16, g_stream));
    REQUIRE_OK(adamw_update_counted(d_p[1], d_s[1], d_g, d_m[1], d_v[1], n, 1e-3f, 0.9f, 0.95f,
                                    1e-8f, 0.1f, 0, d_step, PP_DTYPE_BF16, g_stream));
    expect_same_bytes("adamw counted master", tg_get(d_p[0], n * 4), tg_get(d_p[1], n * 4), n * 4);
    expect_same_bytes("adamw counted storage", tg_get(d_s[0], n * 2), tg_get(d_s[1], n * 2), n * 2);
}

static void test_adamw(void)
{
    for (int mode = 0; mode < 4; mode++) {
        adamw_case(mode, 10007);
        adamw_case(mode, 3);
    }
    /* more elements than the capped grid has threads: each thread takes several passes */
    adamw_case(3, ((size_t)1 << 21) + 5);
    adamw_case(0, ((size_t)1 << 21) + 5);
    adamw_counted_case(((size_t)1 << 20) + 3);
}

/* ---- casts and fill -------------------------------------------------------------------------- */

static void test_casts_fill(void)
{
    for (size_t off = 0; off < 2; off++) {
        const size_t n = 1003;
        ref_rng_t rng;
        ref_rng_seed(&rng, 9500u + off);
        tg_ctx_set("n=%zu offset=%zu", n, off);
        double *x = tg_randn(&rng, n, 3.0, PP_DTYPE_FP32);
        float *d_x = (float *)tg_dev_of_at(x, n, PP_DTYPE_FP32, off);
        void *d_b = tg_dev_at(n * 2, off * 2);
        REQUIRE_OK(cast_fp32_to_dtype(d_b, d_x, n, PP_DTYPE_BF16, g_stream));
        uint16_t *b = (uint16_t *)tg_get(d_b, n * 2);
        size_t bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += b[i] != ref_f32_to_bf16((float)x[i]);
        EXPECT(bad == 0, "cast_fp32_to_dtype bf16 [%s]: %zu of %zu not round-to-nearest-even",
               tg_ctx(), bad, n);
        float *d_back = (float *)tg_dev_at(n * 4, off * 4);
        REQUIRE_OK(cast_dtype_to_fp32(d_back, d_b, n, PP_DTYPE_BF16, g_stream));
        float *back = (float *)tg_get(d_back, n * 4);
        bad = 0;
        for (size_t i = 0; i < n; i++)
            bad += back[i] != ref_bf16_to_f32(b[i]);
        EXPECT(bad == 0, "cast_dtype_to_fp32 bf16 [%s]: %zu of %zu not exact", tg_ctx(), bad, n);
        float *d_f = (float *)tg_dev(n * 4);
        REQUIRE_OK(cast_fp32_to_dtype(d_f, d_x, n, PP_DTYPE_FP32, g_stream));
        expect_same_bytes("cast_fp32_to_dtype fp32", tg_get(d_x, n * 4), tg_get(d_f, n * 4), n * 4);
        tg_poison(d_back, n * 4);
        REQUIRE_OK(cast_dtype_to_fp32(d_back, d_f, n, PP_DTYPE_FP32, g_stream));
        expect_same_bytes("cast_dtype_to_fp32 fp32", tg_get(d_x, n * 4), tg_get(d_back, n * 4),
                          n * 4);
        REQUIRE_OK(fill_fp32(d_back, -2.5f, n, g_stream));
        double *f = tg_download(d_back, n, PP_DTYPE_FP32), *want = tg_zeros(n);
        for (size_t i = 0; i < n; i++)
            want[i] = -2.5;
        EXPECT_CLOSE("fill_fp32", f, want, n, TOL_EXACT);
    }
}

/* ---- argument checks ------------------------------------------------------------------------- */

/* Bad sizes and pointers are refused with PP_ERR_INTERNAL (their messages are silenced here). */
static void test_bad_arguments(void)
{
    tg_ctx_set("argument checks");
    void *d = tg_dev(1024);
    fflush(stderr);
    int saved = dup(2), devnull = open("/dev/null", O_WRONLY);
    if (saved >= 0 && devnull >= 0) dup2(devnull, 2);
    char *c = (char *)d;
    pp_status_t s[11];
    s[0] = layernorm_fwd(d, NULL, NULL, d, d, d, 4, 0, PP_DTYPE_FP32, g_stream);
    s[1] = matmul_fwd(d, d, d, NULL, -1, 4, 4, PP_DTYPE_FP32, &g_gemm, g_stream);
    s[2] = gelu_fwd(NULL, d, 16, PP_DTYPE_BF16, g_stream);
    s[3] = softmax_causal_fwd(d, d, 1.0f, 1, 0, PP_DTYPE_FP32, g_stream);
    s[4] = adamw_update((float *)d, d, (float *)d, (float *)d, (float *)d, 4, 1e-3f, 0.9f, 0.95f,
                        1e-8f, 0.0f, 0, PP_DTYPE_FP32, g_stream);
    s[5] =
        crossentropy_fwd_bwd((float *)d, d, d, (const int *)d, 1.0f, 2, 0, PP_DTYPE_FP32, g_stream);
    s[6] =
        encoder_bwd((float *)d, NULL, d, (const int *)d, NULL, 1, 2, 4, 8, PP_DTYPE_FP32, g_stream);
    s[7] = gemm_strided_batched(d, d, d, 0, 0, 0, 2, 2, 1.0f, 0.0f, 4, 4, 4, 1, (pp_dtype_t)7,
                                &g_gemm, g_stream);
    s[8] = matmul_fwd_ex(c, c + 128, c + 256, NULL, c + 384, c + 512, 2, 4, 4, PP_DTYPE_FP32,
                         &g_gemm, g_stream);
    s[9] = matmul_bwd_input_dgelu(c, c + 128, c + 256, NULL, 2, 4, 4, PP_DTYPE_BF16, &g_gemm,
                                  g_stream);
    s[10] = layernorm_bwd_input_add(c, NULL, c + 128, c, c + 256, c + 384, (const float *)(c + 512),
                                    (const float *)(c + 640), 4, 4, PP_DTYPE_FP32, g_stream);
    fflush(stderr);
    if (saved >= 0 && devnull >= 0) dup2(saved, 2);
    if (saved >= 0) close(saved);
    if (devnull >= 0) close(devnull);
    for (int i = 0; i < (int)(sizeof s / sizeof s[0]); i++)
        EXPECT(s[i] == PP_ERR_INTERNAL, "case %d returned %d", i, (int)s[i]);
    EXPECT(cudaStreamSynchronize(g_stream) == cudaSuccess);
}

/* ---- driver ---------------------------------------------------------------------------------- */

static void test_device(void)
{
    SKIP("%s", tg_skip_reason());
}

int main(void)
{
    if (tg_init("test_kernels", GUARD_BYTES)) {
        RUN(test_device);
        return check_summary("test_kernels");
    }
    g_stream = tg_stream();
    if (gemm_init(&g_gemm, 0) != PP_OK) {
        fprintf(stderr, "test_kernels: device setup failed\n");
        return 1;
    }
    RUN_AND_FREE(test_matmul);
    RUN_AND_FREE(test_matmul_many_shapes);
    RUN_AND_FREE(test_matmul_epilogues);
    RUN_AND_FREE(test_gemm_strided_batched);
    RUN_AND_FREE(test_encoder);
    RUN_AND_FREE(test_layernorm);
    RUN_AND_FREE(test_elementwise);
    RUN_AND_FREE(test_attention_permutes);
    RUN_AND_FREE(test_softmax_causal);
    RUN_AND_FREE(test_crossentropy);
    RUN_AND_FREE(test_adamw);
    RUN_AND_FREE(test_casts_fill);
    RUN_AND_FREE(test_bad_arguments);
    gemm_free(&g_gemm);
    tg_finish();
    return check_summary("test_kernels");
}
