/*
 * test_ref_kernels.c — checks the CPU references of the kernels (tests/ref/ref_kernels.c), which
 * the GPU kernel tests trust: every backward formula against central finite differences of its
 * forward (through a random linear loss L = Σ R∘out), the permutes as exact inverses with the
 * documented index maps, the batched GEMM's transposes and strides, AdamW against its closed
 * form, and the bf16 rounding and random numbers. Plain C, runs without a GPU.
 */
#include "tests/check.h"
#include "tests/ref/ref_kernels.h"

#include <stdlib.h>

#define FD_H    1e-5
#define FD_ATOL 1e-7
#define FD_RTOL 1e-6

static double *dalloc(size_t n)
{
    return (double *)calloc(n ? n : 1, sizeof(double));
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* Compares an analytic gradient g[n] with central differences of loss() over x[n]. */
#define FD_CHECK(x, g, n, loss_expr)                                                               \
    do {                                                                                           \
        for (size_t i_ = 0; i_ < (size_t)(n); i_++) {                                              \
            double x0_ = (x)[i_];                                                                  \
            (x)[i_] = x0_ + FD_H;                                                                  \
            double lp_ = (loss_expr);                                                              \
            (x)[i_] = x0_ - FD_H;                                                                  \
            double lm_ = (loss_expr);                                                              \
            (x)[i_] = x0_;                                                                         \
            EXPECT_NEAR((g)[i_], (lp_ - lm_) / (2 * FD_H), FD_ATOL, FD_RTOL);                      \
        }                                                                                          \
    } while (0)

/* ---- layernorm ------------------------------------------------------------------------------- */

enum { LN_N = 3, LN_C = 7 };
static double ln_out[LN_N * LN_C], ln_mean[LN_N], ln_rstd[LN_N];

static double ln_loss(const double *x, const double *w, const double *b, const double *R)
{
    ref_layernorm_fwd(ln_out, ln_mean, ln_rstd, x, w, b, LN_N, LN_C);
    return dot(ln_out, R, LN_N * LN_C);
}

static void test_layernorm_grad(void)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 101);
    double x[LN_N * LN_C], w[LN_C], b[LN_C], R[LN_N * LN_C];
    double dx[LN_N * LN_C], dw[LN_C], db[LN_C], dx_acc[LN_N * LN_C];
    ref_fill_normal(&rng, x, LN_N * LN_C, 2.0);
    ref_fill_normal(&rng, w, LN_C, 1.0);
    ref_fill_normal(&rng, b, LN_C, 1.0);
    ref_fill_normal(&rng, R, LN_N * LN_C, 1.0);
    ref_fill_normal(&rng, dw, LN_C, 1.0);
    ref_fill_normal(&rng, db, LN_C, 1.0);
    double dw0[LN_C], db0[LN_C];
    memcpy(dw0, dw, sizeof(dw));
    memcpy(db0, db, sizeof(db));

    ln_loss(x, w, b, R);
    double mean[LN_N], rstd[LN_N];
    memcpy(mean, ln_mean, sizeof(mean));
    memcpy(rstd, ln_rstd, sizeof(rstd));
    ref_layernorm_bwd_input(dx, R, x, w, mean, rstd, LN_N, LN_C, 0);
    ref_layernorm_bwd_weight(dw, db, R, x, mean, rstd, LN_N, LN_C);
    for (int c = 0; c < LN_C; c++) { /* the += part: subtract the starting values */
        dw[c] -= dw0[c];
        db[c] -= db0[c];
    }
    FD_CHECK(x, dx, LN_N * LN_C, ln_loss(x, w, b, R));
    FD_CHECK(w, dw, LN_C, ln_loss(x, w, b, R));
    FD_CHECK(b, db, LN_C, ln_loss(x, w, b, R));

    /* accumulate = 1 adds onto what is there */
    ref_fill_normal(&rng, dx_acc, LN_N * LN_C, 1.0);
    double base[LN_N * LN_C];
    memcpy(base, dx_acc, sizeof(base));
    ref_layernorm_bwd_input(dx_acc, R, x, w, mean, rstd, LN_N, LN_C, 1);
    for (int i = 0; i < LN_N * LN_C; i++)
        EXPECT_NEAR(dx_acc[i], base[i] + dx[i], 1e-12, 1e-12);

    /* the forward normalises: each row of (out - b)/w has mean 0 */
    ln_loss(x, w, b, R);
    for (int n = 0; n < LN_N; n++) {
        double s = 0.0;
        for (int c = 0; c < LN_C; c++)
            s += (ln_out[n * LN_C + c] - b[c]) / w[c];
        EXPECT_NEAR(s / LN_C, 0.0, 1e-12, 0);
    }
}

/* ---- GELU ------------------------------------------------------------------------------------ */

static void test_gelu_grad(void)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 202);
    enum { n = 64 };
    double x[n], R[n], out[n], dx[n];
    ref_fill_normal(&rng, x, n, 3.0);
    ref_fill_normal(&rng, R, n, 1.0);
    ref_gelu_bwd(dx, x, R, n);
    FD_CHECK(x, dx, n, (ref_gelu_fwd(out, x, n), dot(out, R, n)));
    EXPECT_NEAR(ref_gelu(0.0), 0.0, 1e-15, 0);
    EXPECT_NEAR(ref_gelu(10.0), 10.0, 1e-12, 0);
    EXPECT_NEAR(ref_gelu(-10.0), 0.0, 1e-12, 0);
    EXPECT_NEAR(ref_gelu(1.0), 0.8411919906082768, 1e-12, 0); /* tanh form at x = 1 */
    EXPECT_NEAR(ref_gelu_grad(0.0), 0.5, 1e-15, 0);
}

/* ---- causal softmax -------------------------------------------------------------------------- */

enum { SM_BH = 2, SM_T = 5 };

static double sm_loss(const double *S, const double *R, double scale)
{
    double P[SM_BH * SM_T * SM_T];
    ref_softmax_causal_fwd(P, S, scale, SM_BH, SM_T);
    return dot(P, R, SM_BH * SM_T * SM_T);
}

static void test_softmax_causal(void)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 303);
    enum { n = SM_BH * SM_T * SM_T };
    const double scale = 0.7;
    double S[n], R[n], P[n], dS[n];
    ref_fill_normal(&rng, S, n, 2.0);
    ref_fill_normal(&rng, R, n, 1.0);
    ref_softmax_causal_fwd(P, S, scale, SM_BH, SM_T);
    for (int r = 0; r < SM_BH * SM_T; r++) {
        int t = r % SM_T;
        double s = 0.0;
        for (int j = 0; j < SM_T; j++) {
            if (j > t) EXPECT(P[r * SM_T + j] == 0.0, "row %d key %d above the diagonal", r, j);
            s += P[r * SM_T + j];
        }
        EXPECT_NEAR(s, 1.0, 1e-12, 0);
    }
    ref_softmax_causal_bwd(dS, R, P, scale, SM_BH, SM_T);
    FD_CHECK(S, dS, n, sm_loss(S, R, scale));
    /* the first query of a row attends to itself only */
    EXPECT_NEAR(P[0], 1.0, 1e-15, 0);
}

/* ---- cross-entropy --------------------------------------------------------------------------- */

enum { CE_N = 4, CE_V = 9 };

static double ce_loss(const double *logits, const int *targets, double grad_scale)
{
    double losses[CE_N];
    ref_crossentropy(losses, NULL, logits, targets, grad_scale, CE_N, CE_V);
    double s = 0.0;
    for (int i = 0; i < CE_N; i++)
        s += losses[i];
    return s * grad_scale / CE_N;
}

static void test_crossentropy_grad(void)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 404);
    const double grad_scale = 0.25;
    double logits[CE_N * CE_V], dlogits[CE_N * CE_V], losses[CE_N];
    int targets[CE_N];
    ref_fill_normal(&rng, logits, CE_N * CE_V, 3.0);
    for (int i = 0; i < CE_N; i++)
        targets[i] = ref_rng_int(&rng, CE_V);
    ref_crossentropy(losses, dlogits, logits, targets, grad_scale, CE_N, CE_V);
    FD_CHECK(logits, dlogits, CE_N * CE_V, ce_loss(logits, targets, grad_scale));
    for (int i = 0; i < CE_N; i++) { /* −log p_target, directly */
        double z = 0.0;
        for (int j = 0; j < CE_V; j++)
            z += exp(logits[i * CE_V + j]);
        EXPECT_NEAR(losses[i], -log(exp(logits[i * CE_V + targets[i]]) / z), 1e-12, 1e-12);
    }
}

/* ---- matmul and batched GEMM ----------------------------------------------------------------- */

enum { MM_N = 3, MM_IC = 4, MM_OC = 5 };

static double mm_loss(const double *x, const double *w, const double *b, const double *R)
{
    double out[MM_N * MM_OC];
    ref_matmul_fwd(out, x, w, b, MM_N, MM_IC, MM_OC);
    return dot(out, R, MM_N * MM_OC);
}

static void test_matmul_grad(void)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 505);
    double x[MM_N * MM_IC], w[MM_OC * MM_IC], b[MM_OC], R[MM_N * MM_OC];
    double dx[MM_N * MM_IC], dw[MM_OC * MM_IC] = {0}, db[MM_OC] = {0};
    ref_fill_normal(&rng, x, MM_N * MM_IC, 1.0);
    ref_fill_normal(&rng, w, MM_OC * MM_IC, 1.0);
    ref_fill_normal(&rng, b, MM_OC, 1.0);
    ref_fill_normal(&rng, R, MM_N * MM_OC, 1.0);
    ref_matmul_bwd_input(dx, R, w, MM_N, MM_IC, MM_OC, 0);
    ref_matmul_bwd_weight(dw, db, R, x, MM_N, MM_IC, MM_OC);
    FD_CHECK(x, dx, MM_N * MM_IC, mm_loss(x, w, b, R));
    FD_CHECK(w, dw, MM_OC * MM_IC, mm_loss(x, w, b, R));
    FD_CHECK(b, db, MM_OC, mm_loss(x, w, b, R));
    double dx2[MM_N * MM_IC];
    memcpy(dx2, dx, sizeof(dx));
    ref_matmul_bwd_input(dx2, R, w, MM_N, MM_IC, MM_OC, 1);
    for (int i = 0; i < MM_N * MM_IC; i++)
        EXPECT_NEAR(dx2[i], 2 * dx[i], 1e-12, 1e-12);
}

/* Stores the transpose of a row-major [r, c] matrix (batch of them) as [c, r]. */
static void transpose(double *dst, const double *src, int r, int c, int batch)
{
    for (int p = 0; p < batch; p++)
        for (int i = 0; i < r; i++)
            for (int j = 0; j < c; j++)
                dst[(size_t)p * r * c + (size_t)j * r + i] =
                    src[(size_t)p * r * c + (size_t)i * c + j];
}

static void test_gemm_batched(void)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 606);
    enum { BT = 3, M = 4, N = 5, K = 6 };
    double A[BT * M * K], At[BT * K * M], B[BT * K * N], Bt[BT * N * K];
    double C0[BT * M * N], C1[BT * M * N], want[BT * M * N];
    ref_fill_normal(&rng, A, BT * M * K, 1.0);
    ref_fill_normal(&rng, B, BT * K * N, 1.0);
    ref_fill_normal(&rng, C0, BT * M * N, 1.0);
    transpose(At, A, M, K, BT);
    transpose(Bt, B, K, N, BT);
    /* batch p of (0, 1) with B stored [N,K] is matmul_fwd(out, A_p, Bt_p) */
    for (int p = 0; p < BT; p++)
        ref_matmul_fwd(want + p * M * N, A + p * M * K, Bt + p * N * K, NULL, M, K, N);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            memcpy(C1, C0, sizeof(C1));
            ref_gemm_strided_batched(C1, ta ? At : A, tb ? Bt : B, ta, tb, M, N, K, 0.5, 2.0, M * K,
                                     K * N, M * N, BT);
            for (int i = 0; i < BT * M * N; i++)
                EXPECT_NEAR(C1[i], 0.5 * want[i] + 2.0 * C0[i], 1e-12, 1e-12);
        }
}

/* ---- embedding ------------------------------------------------------------------------------- */

enum { EN_B = 2, EN_T = 3, EN_C = 4, EN_V = 3 };

static double enc_loss(const int *tok, const double *wte, const double *wpe, const double *R)
{
    double out[EN_B * EN_T * EN_C];
    ref_encoder_fwd(out, tok, wte, wpe, EN_B, EN_T, EN_C);
    return dot(out, R, EN_B * EN_T * EN_C);
}

static void test_encoder_grad(void)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 707);
    int tok[EN_B * EN_T] = {0, 2, 2, 1, 2, 0}; /* repeats: several rows per token */
    double wte[EN_V * EN_C], wpe[EN_T * EN_C], R[EN_B * EN_T * EN_C];
    double dwte[EN_V * EN_C] = {0}, dwpe[EN_T * EN_C] = {0};
    ref_fill_normal(&rng, wte, EN_V * EN_C, 1.0);
    ref_fill_normal(&rng, wpe, EN_T * EN_C, 1.0);
    ref_fill_normal(&rng, R, EN_B * EN_T * EN_C, 1.0);
    ref_encoder_bwd(dwte, dwpe, R, tok, EN_B, EN_T, EN_C);
    FD_CHECK(wte, dwte, EN_V * EN_C, enc_loss(tok, wte, wpe, R));
    FD_CHECK(wpe, dwpe, EN_T * EN_C, enc_loss(tok, wte, wpe, R));
}

/* ---- permutes -------------------------------------------------------------------------------- */

static void test_permutes(void)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 808);
    const int B = 2, T = 3, H = 2, d = 3, C = H * d;
    const size_t n = (size_t)B * T * C;
    double *qkv = dalloc(3 * n), *back = dalloc(3 * n), *q = dalloc(n), *k = dalloc(n),
           *v = dalloc(n), *o = dalloc(n), *att = dalloc(n);
    REQUIRE(qkv && back && q && k && v && o && att);
    ref_fill_normal(&rng, qkv, 3 * n, 1.0);
    ref_attention_permute_qkv(q, k, v, qkv, B, T, H, d);
    /* the documented map: q[b,h,t,i] = qkv[b,t, h·d + i], k at +C, v at +2C */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int i = 0; i < d; i++) {
                    size_t hi = (((size_t)b * H + h) * T + t) * d + i;
                    size_t ti = ((size_t)b * T + t) * 3 * C + (size_t)h * d + i;
                    EXPECT(q[hi] == qkv[ti] && k[hi] == qkv[ti + C] && v[hi] == qkv[ti + 2 * C]);
                }
    ref_attention_unpermute_dqkv(back, q, k, v, B, T, H, d);
    EXPECT(memcmp(back, qkv, 3 * n * sizeof(double)) == 0, "unpermute_dqkv is not the inverse");
    ref_attention_unpermute_out(o, q, B, T, H, d);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                EXPECT(o[((size_t)b * T + t) * C + c] == qkv[((size_t)b * T + t) * 3 * C + c]);
    ref_attention_permute_dout(att, o, B, T, H, d);
    EXPECT(memcmp(att, q, n * sizeof(double)) == 0, "permute_dout is not the inverse");
    free(qkv);
    free(back);
    free(q);
    free(k);
    free(v);
    free(o);
    free(att);
}

/* ---- AdamW ----------------------------------------------------------------------------------- */

static void test_adamw(void)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, 909);
    enum { n = 16 };
    const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    double p[n], p0[n], m[n] = {0}, v[n] = {0}, g[n];
    ref_fill_normal(&rng, p, n, 1.0);
    ref_fill_normal(&rng, g, n, 1.0);
    g[3] = 0.0;
    memcpy(p0, p, sizeof(p));
    ref_adamw_update(p, m, v, g, n, lr, b1, b2, eps, wd, 1);
    /* step 1 from zero moments: m̂ = g, v̂ = g², so the step is lr·(g/(|g|+eps) + wd·p) */
    for (int i = 0; i < n; i++) {
        double want = p0[i] - lr * (g[i] / (fabs(g[i]) + eps) + wd * p0[i]);
        EXPECT_NEAR(p[i], want, 1e-14, 1e-12);
        EXPECT_NEAR(m[i], (1 - b1) * g[i], 1e-15, 1e-12);
        EXPECT_NEAR(v[i], (1 - b2) * g[i] * g[i], 1e-15, 1e-12);
    }
    EXPECT_NEAR(p[3], p0[3] * (1 - lr * wd), 1e-15, 1e-12); /* zero gradient: decay only */
    /* step 2 with the same gradient: m̂ = g and v̂ = g² again */
    memcpy(p0, p, sizeof(p));
    ref_adamw_update(p, m, v, g, n, lr, b1, b2, eps, wd, 2);
    for (int i = 0; i < n; i++)
        EXPECT_NEAR(p[i], p0[i] - lr * (g[i] / (fabs(g[i]) + eps) + wd * p0[i]), 1e-14, 1e-10);
}

/* ---- bf16 and random numbers ----------------------------------------------------------------- */

static void test_bf16_and_rng(void)
{
    EXPECT(ref_f32_to_bf16(1.0f) == 0x3f80);
    EXPECT(ref_f32_to_bf16(-2.0f) == 0xc000);
    EXPECT(ref_bf16_to_f32(ref_f32_to_bf16(1.0f + 0x1.0p-8f)) == 1.0f, "tie rounds to even");
    EXPECT(ref_bf16_to_f32(ref_f32_to_bf16(1.0f + 3 * 0x1.0p-8f)) == 1.0f + 0x1.0p-6f,
           "tie rounds to even (up)");
    EXPECT(ref_bf16_to_f32(ref_f32_to_bf16(1.0f + 0x1.8p-8f)) == 1.0f + 0x1.0p-7f);
    EXPECT(isnan(ref_bf16_to_f32(ref_f32_to_bf16(NAN))));
    EXPECT(isinf(ref_bf16_to_f32(ref_f32_to_bf16(INFINITY))));
    double x[3] = {1.0 + 1e-3, 3.14159, -1e-7};
    ref_round(x, 3, 1);
    EXPECT(x[0] == 1.0 && x[1] == 3.140625, "got %.9g %.9g", x[0], x[1]);

    ref_rng_t a, b;
    ref_rng_seed(&a, 42);
    ref_rng_seed(&b, 42);
    for (int i = 0; i < 8; i++)
        EXPECT(ref_rng_next(&a) == ref_rng_next(&b));
    ref_rng_seed(&a, 7);
    double s = 0.0, s2 = 0.0;
    const int n = 200000;
    for (int i = 0; i < n; i++) {
        double z = ref_rng_normal(&a);
        s += z;
        s2 += z * z;
    }
    EXPECT_NEAR(s / n, 0.0, 0.01, 0);
    EXPECT_NEAR(s2 / n, 1.0, 0.02, 0);
    for (int i = 0; i < 1000; i++) {
        int k = ref_rng_int(&a, 13);
        EXPECT(k >= 0 && k < 13);
        double u = ref_rng_uniform(&a);
        EXPECT(u >= 0.0 && u < 1.0);
    }
}

int main(void)
{
    RUN(test_layernorm_grad);
    RUN(test_gelu_grad);
    RUN(test_softmax_causal);
    RUN(test_crossentropy_grad);
    RUN(test_matmul_grad);
    RUN(test_gemm_batched);
    RUN(test_encoder_grad);
    RUN(test_permutes);
    RUN(test_adamw);
    RUN(test_bf16_and_rng);
    return check_summary("test_ref_kernels");
}
