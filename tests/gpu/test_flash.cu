/*
 * test_flash.cu — the fused causal attention (kernels/flash_attention.cu) against the CPU double
 * reference (tests/ref/ref_kernels.c), against the unfused path (gemm_strided_batched +
 * softmax_causal_*), and the stage's switch between the two paths.
 *
 * Inputs q, k, v, dout ~ N(0,1), seeded and rounded to bf16 before the reference sees them; every
 * output buffer is poisoned with 0xFF bytes (NaN) first. Shapes (B,H,T,d): (1,2,64,64),
 * (2,2,128,64), (2,3,192,64), (1,3,1024,64), (1,2,192,128); each d = 64 case and the packed one
 * run the 128-row kernels (the default) and the 64-row ones (PPSCHED_FLASH_TILE=64); packed
 * (3,2,64,64) and (2,4,512,64) on the default path only.
 * Tolerances, |got − want| ≤ atol + rtol·|want|:
 *   o, dq, dk, dv against the reference  atol 2e-2, rtol 2e-2 (P and dS enter the products as
 *                                        bf16, outputs are bf16)
 *   lse against the reference            atol 1e-3, rtol 1e-4 (fp32 statistics)
 *   fused against unfused                atol 4e-2, rtol 4e-2 (each within 2e-2 of the reference)
 * and, as fp32 sums against double sums of the same values, |got − want| ≤ rel·Σ|terms|:
 *   Dr (the scratch) against Σ dout·o    rel 1e-5 (64 terms)
 *   column sums of the packed dq, dk, dv rel 2e-5 (128 terms)
 * A second run gives the same bits (Dr and the column sums included); Dr of the 128-row dQ kernel
 * equals flash_bwd_dot_kernel's bit for bit, and PPSCHED_FLASH_BWD=unfused (the dot kernel first)
 * gives the same Dr, dq, dk, dv. The stage case runs a bf16 middle stage with d = 64,
 * T = 64 on both paths (PPSCHED_ATTENTION=unfused for the old one) against the CPU stage, with the
 * relative L2 tolerances of test_stage.cu; another at T = 192 checks the QKV bias gradient from
 * the flash backward's column sums (B against I then W bitwise, against the sums of d_qkv within
 * 1e-4 relative L2). Without a GPU only the CPU cases run; the others are skipped.
 * PPSCHED_TEST_QUICK=1 (check.h) leaves out T = 1024.
 */
#include "common/pp_cuda.h"
#include "kernels/kernels.h"
#include "stages/stage.h"
#include "tests/check.h"
#include "tests/gpu/support.h"
#include "tests/ref/ref_kernels.h"
#include "tests/ref/ref_stage.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const tg_tol_t TOL_OUT = {2e-2, 2e-2};  /* o, dq, dk, dv against the reference */
static const tg_tol_t TOL_LSE = {1e-3, 1e-4};  /* lse against the reference */
static const tg_tol_t TOL_PATH = {4e-2, 4e-2}; /* fused against unfused */
/* fp32 sums against double sums of the same values: |got − want| ≤ rel·Σ|terms| */
static const tg_tol_t TOL_DR = {1e-30, 1e-5};     /* Dr, 64 terms */
static const tg_tol_t TOL_COLSUM = {1e-30, 2e-5}; /* column sums, 128 terms */

/* Stage case: relative L2 error per tensor against the CPU stage (test_stage.cu's bf16 bounds). */
#define STAGE_RTOL_FWD 1e-2
#define STAGE_RTOL_BWD 2.5e-2

#define GUARD_BYTES 0 /* none after a device buffer (support.h) */

static int g_gpu;            /* a device is present */
static const char *g_no_gpu; /* why not */
static cudaStream_t g_stream;
static pp_gemm_t g_gemm;

/* ---- the reference itself (CPU) -------------------------------------------------------------- */

/* Σ r∘o of ref_attention_causal_fwd: the loss whose gradients ref_attention_causal_bwd gives. */
static double ref_loss(const double *r, const double *q, const double *k, const double *v, int BH,
                       int T, int d, double scale, double *o)
{
    ref_attention_causal_fwd(o, NULL, q, k, v, BH, T, d, scale);
    double s = 0.0;
    for (size_t i = 0; i < (size_t)BH * T * d; i++)
        s += r[i] * o[i];
    return s;
}

/* Forward against S = q kᵀ, softmax_causal, O = P v (the unfused references) and lse against its
 * definition; backward against central finite differences of Σ r∘o. */
static void test_reference(void)
{
    const int BH = 2, T = 7, d = 5;
    const double scale = 0.37, h = 1e-6;
    const size_t n = (size_t)BH * T * d, nt = (size_t)BH * T * T;
    ref_rng_t rng;
    ref_rng_seed(&rng, 7001);
    tg_ctx_set("reference BH=%d T=%d d=%d", BH, T, d);
    double *q = tg_zeros(n), *k = tg_zeros(n), *v = tg_zeros(n), *r = tg_zeros(n);
    ref_fill_normal(&rng, q, n, 1.0);
    ref_fill_normal(&rng, k, n, 1.0);
    ref_fill_normal(&rng, v, n, 1.0);
    ref_fill_normal(&rng, r, n, 1.0);
    double *o = tg_zeros(n), *lse = tg_zeros((size_t)BH * T), *S = tg_zeros(nt), *P = tg_zeros(nt);
    double *o2 = tg_zeros(n);
    ref_attention_causal_fwd(o, lse, q, k, v, BH, T, d, scale);
    ref_gemm_strided_batched(S, q, k, 0, 1, T, T, d, 1.0, 0.0, (long long)T * d, (long long)T * d,
                             (long long)T * T, BH);
    ref_softmax_causal_fwd(P, S, scale, BH, T);
    ref_gemm_strided_batched(o2, P, v, 0, 0, T, d, T, 1.0, 0.0, (long long)T * T, (long long)T * d,
                             (long long)T * d, BH);
    const tg_tol_t tight = {1e-12, 1e-12};
    EXPECT_CLOSE("o", o, o2, n, tight);
    double *lse2 = tg_zeros((size_t)BH * T);
    for (int bh = 0; bh < BH; bh++)
        for (int t = 0; t < T; t++) {
            double z = 0.0;
            for (int j = 0; j <= t; j++)
                z += exp(scale * S[((size_t)bh * T + t) * T + j]);
            lse2[(size_t)bh * T + t] = log(z);
        }
    EXPECT_CLOSE("lse", lse, lse2, (size_t)BH * T, tight);

    double *dq = tg_zeros(n), *dk = tg_zeros(n), *dv = tg_zeros(n), *fd = tg_zeros(n),
           *tmp = tg_zeros(n);
    ref_attention_causal_bwd(dq, dk, dv, r, q, k, v, BH, T, d, scale);
    double *xs[3] = {q, k, v}, *gs[3] = {dq, dk, dv};
    const char *names[3] = {"dq", "dk", "dv"};
    for (int w = 0; w < 3; w++) {
        for (size_t i = 0; i < n; i++) {
            const double x0 = xs[w][i];
            xs[w][i] = x0 + h;
            const double lp = ref_loss(r, q, k, v, BH, T, d, scale, tmp);
            xs[w][i] = x0 - h;
            const double lm = ref_loss(r, q, k, v, BH, T, d, scale, tmp);
            xs[w][i] = x0;
            fd[i] = (lp - lm) / (2 * h);
        }
        const tg_tol_t fd_tol = {1e-7, 1e-6};
        EXPECT_CLOSE(names[w], gs[w], fd, n, fd_tol);
    }
    tg_free_all();
}

/* ---- shapes, sizes and refusals (no device work) --------------------------------------------- */

static pp_stage_cfg_t reference_stage_cfg(void)
{
    pp_stage_cfg_t c;
    memset(&c, 0, sizeof c);
    c.hidden = 1024, c.heads = 16, c.seq_len = 1024, c.vocab = 8192, c.micro_batch_size = 4;
    c.n_layers = 6, c.first_layer = 6, c.total_layers = 24;
    c.dtype = PP_DTYPE_BF16, c.seed = 1, c.n_slots = 1, c.grad_scale = 1.0f;
    return c;
}

static size_t round256(size_t x)
{
    return (x + 255) / 256 * 256;
}

static void test_shapes_and_sizes(void)
{
    tg_ctx_set("sizes");
    const pp_dtype_t bf = PP_DTYPE_BF16;
    EXPECT(attention_flash_supported(64, 64, bf) && attention_flash_supported(1024, 64, bf));
    EXPECT(attention_flash_supported(192, 128, bf));
    EXPECT(!attention_flash_supported(96, 64, bf), "T = 96 is not a multiple of 64");
    EXPECT(!attention_flash_supported(32, 64, bf) && !attention_flash_supported(0, 64, bf));
    EXPECT(!attention_flash_supported(64, 32, bf) && !attention_flash_supported(64, 80, bf));
    EXPECT(!attention_flash_supported(64, 64, PP_DTYPE_FP32), "fp32 stays unfused");
    EXPECT(attention_flash_bwd_scratch_bytes(2, 3, 192) == (size_t)2 * 3 * 192 * sizeof(float));

    /* Refusals name the problem and launch nothing (pointers are never touched). */
    char fake[16] __attribute__((aligned(16)));
    void *p = fake;
    fprintf(stderr, "  (the next five errors are expected)\n");
    EXPECT(attention_flash_fwd(p, 64, (float *)p, p, p, p, 64, 1, 1, 96, 64, bf, 0) ==
           PP_ERR_INTERNAL);
    EXPECT(attention_flash_fwd(p, 64, (float *)p, p, p, p, 64, 1, 1, 64, 64, PP_DTYPE_FP32, 0) ==
           PP_ERR_INTERNAL);
    EXPECT(attention_flash_bwd(p, p, p, 64, p, p, p, p, 64, p, 64, (float *)p, NULL, NULL, 1, 1, 64,
                               64, bf, 0) == PP_ERR_INTERNAL);
    EXPECT(attention_flash_fwd(p, 64, (float *)p, p, p, p, 96, 1, 2, 64, 64, bf, 0) ==
               PP_ERR_INTERNAL,
           "ld_qkv = 96 < H·d = 128 accepted");
    EXPECT(attention_flash_bwd(p, p, p, 68, p, p, p, p, 64, p, 64, (float *)p, p, NULL, 1, 1, 64,
                               64, bf, 0) == PP_ERR_INTERNAL,
           "ld_d = 68 (not a multiple of 8) accepted");
    EXPECT(attention_flash_fwd(NULL, 0, NULL, NULL, NULL, NULL, 0, 0, 2, 64, 64, bf, 0) == PP_OK,
           "B = 0 is an empty launch");
    /* Column sums: d = 64 on the 128-row kernels only, with dq, dk, dv side by side. */
    static char packed[1024] __attribute__((aligned(16))); /* room for dq, dk, dv side by side */
    char *g = packed;
    float *cs = (float *)p;
    EXPECT(attention_flash_bwd_colsum_ok(64) && !attention_flash_bwd_colsum_ok(128));
    fprintf(stderr, "  (the next four errors are expected)\n");
    EXPECT(attention_flash_bwd(p, p, p, 64, p, p, p, p, 64, p, 64, (float *)p, p, cs, 1, 1, 64, 64,
                               bf, 0) == PP_ERR_INTERNAL,
           "column sums of dq, dk, dv apart accepted");
    EXPECT(attention_flash_bwd(g, g + 2 * 128, g + 4 * 128, 3 * 128, p, p, p, p, 128, p, 128,
                               (float *)p, p, cs, 1, 1, 64, 128, bf, 0) == PP_ERR_INTERNAL,
           "column sums at d = 128 accepted");
    setenv("PPSCHED_FLASH_TILE", "64", 1);
    EXPECT(!attention_flash_bwd_colsum_ok(64));
    EXPECT(attention_flash_bwd(g, g + 2 * 64, g + 4 * 64, 3 * 64, p, p, p, p, 64, p, 64, (float *)p,
                               p, cs, 1, 1, 64, 64, bf, 0) == PP_ERR_INTERNAL,
           "column sums under PPSCHED_FLASH_TILE=64 accepted");
    unsetenv("PPSCHED_FLASH_TILE");
    setenv("PPSCHED_FLASH_BWD", "unfused", 1);
    EXPECT(!attention_flash_bwd_colsum_ok(64));
    EXPECT(attention_flash_bwd(g, g + 2 * 64, g + 4 * 64, 3 * 64, p, p, p, p, 64, p, 64, (float *)p,
                               p, cs, 1, 1, 64, 64, bf, 0) == PP_ERR_INTERNAL,
           "column sums under PPSCHED_FLASH_BWD=unfused accepted");
    unsetenv("PPSCHED_FLASH_BWD");

    /* Per block the fused slot keeps the QKV output [N,3C] (as large as q, k, v) and lse [B,H,T]
     * instead of P [B,H,T,T]; its workspace has no permuted copies (d_attn, dq, dk, dv), no dP
     * and no QKV scratch, but the lse-sized bwd scratch and, in a plain B's I→W parts, d_qkv's
     * column sums per 128-row block. */
    pp_stage_cfg_t c = reference_stage_cfg();
    const size_t B = 4, H = 16, T = 1024, C = 1024, L = 6;
    unsetenv("PPSCHED_ATTENTION");
    const size_t fused = stage_slot_bytes(&c), fused_ws = stage_workspace_bytes(&c);
    setenv("PPSCHED_ATTENTION", "unfused", 1);
    const size_t unfused = stage_slot_bytes(&c), unfused_ws = stage_workspace_bytes(&c);
    unsetenv("PPSCHED_ATTENTION");
    const size_t per_block = round256(B * H * T * T * 2) - round256(B * H * T * sizeof(float));
    EXPECT(unfused - fused == L * per_block, "slot %zu (unfused) - %zu (fused) != %zu", unfused,
           fused, L * per_block);
    const size_t sums = round256(B * (T / 128) * 3 * C * sizeof(float));
    EXPECT(attention_flash_bwd_colsum_bytes(4, 16, 1024, 64) == B * (T / 128) * 3 * C * 4);
    EXPECT(unfused_ws - fused_ws == 4 * round256(B * T * C * 2) + round256(B * H * T * T * 2) -
                                        round256(B * H * T * sizeof(float)) - sums,
           "workspace %zu (unfused) vs %zu (fused)", unfused_ws, fused_ws);
    c.dtype = PP_DTYPE_FP32; /* fp32: unfused whatever the environment */
    const size_t f32 = stage_slot_bytes(&c);
    setenv("PPSCHED_ATTENTION", "unfused", 1);
    EXPECT(stage_slot_bytes(&c) == f32, "fp32 slot depends on PPSCHED_ATTENTION");
    unsetenv("PPSCHED_ATTENTION");

    /* A bad PPSCHED_ATTENTION is an input error, before any allocation. */
    pp_stage_t *st = NULL;
    setenv("PPSCHED_ATTENTION", "flash", 1);
    fprintf(stderr, "  (the next error is expected)\n");
    EXPECT(stage_init(&st, &c) == PP_ERR_INPUT && st == NULL, "PPSCHED_ATTENTION=flash accepted");
    unsetenv("PPSCHED_ATTENTION");
    setenv("PPSCHED_FLASH_TILE", "32", 1);
    fprintf(stderr, "  (the next error is expected)\n");
    EXPECT(stage_init(&st, &c) == PP_ERR_INPUT && st == NULL, "PPSCHED_FLASH_TILE=32 accepted");
    unsetenv("PPSCHED_FLASH_TILE");
}

/* ---- fused kernels against the reference ----------------------------------------------------- */

typedef struct flash_io {
    int B, H, T, d;
    size_t n, rows;
    double *q, *k, *v, *dout;                   /* host inputs (bf16 values) */
    void *d_q, *d_k, *d_v, *d_dout;             /* device inputs */
    void *d_o, *d_dq, *d_dk, *d_dv, *d_scratch; /* device outputs, poisoned */
    float *d_lse;
} flash_io_t;

static void flash_io_make(flash_io_t *io, int B, int H, int T, int d, uint64_t seed)
{
    ref_rng_t rng;
    ref_rng_seed(&rng, seed);
    memset(io, 0, sizeof *io);
    io->B = B, io->H = H, io->T = T, io->d = d;
    io->n = (size_t)B * H * T * d, io->rows = (size_t)B * H * T;
    io->q = tg_randn(&rng, io->n, 1.0, PP_DTYPE_BF16);
    io->k = tg_randn(&rng, io->n, 1.0, PP_DTYPE_BF16);
    io->v = tg_randn(&rng, io->n, 1.0, PP_DTYPE_BF16);
    io->dout = tg_randn(&rng, io->n, 1.0, PP_DTYPE_BF16);
    io->d_q = tg_dev_of(io->q, io->n, PP_DTYPE_BF16);
    io->d_k = tg_dev_of(io->k, io->n, PP_DTYPE_BF16);
    io->d_v = tg_dev_of(io->v, io->n, PP_DTYPE_BF16);
    io->d_dout = tg_dev_of(io->dout, io->n, PP_DTYPE_BF16);
    io->d_o = tg_dev(io->n * 2), io->d_lse = (float *)tg_dev(io->rows * sizeof(float));
    io->d_dq = tg_dev(io->n * 2), io->d_dk = tg_dev(io->n * 2), io->d_dv = tg_dev(io->n * 2);
    io->d_scratch = tg_dev(attention_flash_bwd_scratch_bytes(B, H, T));
}

/* The backward in the head layout [B,H,T,d]: B·H batches of one head, row stride d. */
static pp_status_t flash_bwd(flash_io_t *io)
{
    const int BH = io->B * io->H, d = io->d;
    PP_CHECK(attention_flash_bwd(io->d_dq, io->d_dk, io->d_dv, d, io->d_dout, io->d_q, io->d_k,
                                 io->d_v, d, io->d_o, d, io->d_lse, io->d_scratch, NULL, BH, 1,
                                 io->T, d, PP_DTYPE_BF16, g_stream));
    PP_CUDA_CHECK(cudaStreamSynchronize(g_stream));
    return PP_OK;
}

/* Forward and backward in the head layout. */
static pp_status_t flash_run(flash_io_t *io)
{
    const int BH = io->B * io->H, d = io->d;
    PP_CHECK(attention_flash_fwd(io->d_o, d, io->d_lse, io->d_q, io->d_k, io->d_v, d, BH, 1, io->T,
                                 d, PP_DTYPE_BF16, g_stream));
    return flash_bwd(io);
}

/* Dr (the scratch after the backward) against Σ_i dout·o per row in double, o as returned. */
static void check_dr(const flash_io_t *io)
{
    const size_t rows = io->rows, d = (size_t)io->d;
    const double *o = tg_download(io->d_o, io->n, PP_DTYPE_BF16),
                 *dr = tg_download(io->d_scratch, rows, PP_DTYPE_FP32);
    double *want = tg_zeros(rows), *mag = tg_zeros(rows);
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < d; i++) {
            want[r] += io->dout[r * d + i] * o[r * d + i];
            mag[r] += fabs(io->dout[r * d + i] * o[r * d + i]);
        }
    EXPECT_CLOSE_TERMS("dr", dr, want, mag, rows, TOL_DR);
}

/* PPSCHED_FLASH_TILE for the launches that follow: NULL unsets it (the default path). */
static void set_tile(const char *tile)
{
    if (tile)
        setenv("PPSCHED_FLASH_TILE", tile, 1);
    else
        unsetenv("PPSCHED_FLASH_TILE");
}

static void flash_case(int B, int H, int T, int d, uint64_t seed, const char *tile)
{
    tg_ctx_set("B=%d H=%d T=%d d=%d tile %s", B, H, T, d, tile ? tile : "default");
    set_tile(tile);
    flash_io_t io;
    flash_io_make(&io, B, H, T, d, seed);
    const size_t n = io.n, rows = io.rows, BH = (size_t)B * H;
    const double scale = 1.0 / sqrt((double)d);

    REQUIRE_OK(flash_run(&io));
    double *o = tg_zeros(n), *lse = tg_zeros(rows), *dq = tg_zeros(n), *dk = tg_zeros(n),
           *dv = tg_zeros(n);
    ref_attention_causal_fwd(o, lse, io.q, io.k, io.v, (int)BH, T, d, scale);
    ref_attention_causal_bwd(dq, dk, dv, io.dout, io.q, io.k, io.v, (int)BH, T, d, scale);
    EXPECT_CLOSE("o", tg_download(io.d_o, n, PP_DTYPE_BF16), o, n, TOL_OUT);
    EXPECT_CLOSE("lse", tg_download(io.d_lse, rows, PP_DTYPE_FP32), lse, rows, TOL_LSE);
    EXPECT_CLOSE("dq", tg_download(io.d_dq, n, PP_DTYPE_BF16), dq, n, TOL_OUT);
    EXPECT_CLOSE("dk", tg_download(io.d_dk, n, PP_DTYPE_BF16), dk, n, TOL_OUT);
    EXPECT_CLOSE("dv", tg_download(io.d_dv, n, PP_DTYPE_BF16), dv, n, TOL_OUT);
    check_dr(&io);

    /* A second run into re-poisoned buffers gives the same bits. */
    void *outs[6] = {io.d_o, io.d_lse, io.d_dq, io.d_dk, io.d_dv, io.d_scratch};
    const size_t bytes[6] = {n * 2, rows * sizeof(float), n * 2, n * 2, n * 2, rows * 4};
    const char *names[6] = {"o", "lse", "dq", "dk", "dv", "dr"};
    void *first[6];
    for (int i = 0; i < 6; i++) {
        first[i] = tg_get(outs[i], bytes[i]);
        tg_poison(outs[i], bytes[i]);
    }
    REQUIRE_OK(flash_run(&io));
    for (int i = 0; i < 6; i++)
        EXPECT(memcmp(first[i], tg_get(outs[i], bytes[i]), bytes[i]) == 0,
               "%s [%s]: the second run differs bitwise", names[i], tg_ctx());
    if (!tile && d == 64) {
        /* PPSCHED_FLASH_BWD=unfused (flash_bwd_dot_kernel's Dr, then the same 128-row kernels):
         * Dr, dq, dk, dv the same bits; then Dr of the 64-row backward on the same o too. */
        setenv("PPSCHED_FLASH_BWD", "unfused", 1);
        for (int i = 2; i < 6; i++)
            tg_poison(outs[i], bytes[i]);
        REQUIRE_OK(flash_bwd(&io));
        unsetenv("PPSCHED_FLASH_BWD");
        for (int i = 2; i < 6; i++)
            EXPECT(memcmp(first[i], tg_get(outs[i], bytes[i]), bytes[i]) == 0,
                   "%s [%s]: PPSCHED_FLASH_BWD=unfused differs bitwise", names[i], tg_ctx());
        set_tile("64");
        tg_poison(io.d_scratch, rows * 4);
        REQUIRE_OK(flash_bwd(&io));
        EXPECT(memcmp(first[5], tg_get(io.d_scratch, rows * 4), rows * 4) == 0,
               "dr [%s]: differs from the 64-row backward's", tg_ctx());
    }
    set_tile(NULL);
    tg_free_all();
}

#define GPU_CASE(name, body)                                                                       \
    static void name(void)                                                                         \
    {                                                                                              \
        if (!g_gpu) SKIP("%s", g_no_gpu);                                                          \
        body;                                                                                      \
    }

/* d = 64 on both tile paths: T = 64 (one 64-row block, warps 2, 3 of the 128-row CTA idle),
 * T = 128 (one whole 128-row block), T = 192 (a whole block and a half one), T = 1024. */
GPU_CASE(test_flash_b1_h2_t64_d64, flash_case(1, 2, 64, 64, 101, NULL);
         flash_case(1, 2, 64, 64, 101, "64"))
GPU_CASE(test_flash_b2_h2_t128_d64, flash_case(2, 2, 128, 64, 107, NULL);
         flash_case(2, 2, 128, 64, 107, "64"))
GPU_CASE(test_flash_b2_h3_t192_d64, flash_case(2, 3, 192, 64, 102, NULL);
         flash_case(2, 3, 192, 64, 102, "64"))
/* quick: T = 192 already wraps the double-buffered tiles; the 16-tile rows are left out */
GPU_CASE(test_flash_b1_h3_t1024_d64, SKIP_IF_QUICK("T = 1024");
         flash_case(1, 3, 1024, 64, 103, NULL); flash_case(1, 3, 1024, 64, 103, "64"))
/* d = 128 has one path; the switch must not change it */
GPU_CASE(test_flash_b1_h2_t192_d128, flash_case(1, 2, 192, 128, 104, NULL);
         flash_case(1, 2, 192, 128, 104, "64"))

/* ---- the forward's two paths on Hopper --------------------------------------------------------
 */

/* 1 when the current GPU is compute capability 9.0, where the forward takes warpgroup MMA and
 * TMA (flash_hopper.cu) unless PPSCHED_FLASH_MMA=sync. */
static int hopper_gpu(void)
{
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    return major == 9 && minor == 0;
}

/* Forward and backward by default and under PPSCHED_FLASH_MMA=sync on the same inputs: each path
 * against the reference (o, lse, dq, dk, dv), the two paths within TOL_PATH of each other; the
 * forward also from the packed [B·T, 3C] matrix, the same bits as in the head layout. */
static void paths_case(int B, int H, int T, int d, uint64_t seed)
{
    tg_ctx_set("paths B=%d H=%d T=%d d=%d", B, H, T, d);
    flash_io_t io;
    flash_io_make(&io, B, H, T, d, seed);
    const size_t n = io.n, rows = io.rows, C = (size_t)H * d, N = (size_t)B * T;
    const int BH = B * H;
    double *want[5] = {tg_zeros(n), tg_zeros(rows), tg_zeros(n), tg_zeros(n), tg_zeros(n)};
    ref_attention_causal_fwd(want[0], want[1], io.q, io.k, io.v, BH, T, d, 1.0 / sqrt((double)d));
    ref_attention_causal_bwd(want[2], want[3], want[4], io.dout, io.q, io.k, io.v, BH, T, d,
                             1.0 / sqrt((double)d));
    /* the packed layout: head h of row b·T + t at columns h·d.. of q, k, v side by side */
    const uint16_t *hq = (const uint16_t *)tg_get(io.d_q, n * 2);
    const uint16_t *hk = (const uint16_t *)tg_get(io.d_k, n * 2);
    const uint16_t *hv = (const uint16_t *)tg_get(io.d_v, n * 2);
    uint16_t *qkv = (uint16_t *)tg_host(N * 3 * C * 2);
    for (size_t hi = 0; hi < n; hi++) {
        const size_t i = hi % d, t = hi / d % T, h = hi / d / T % H, b = hi / d / T / H;
        const size_t at = (b * T + t) * 3 * C + h * d + i;
        qkv[at] = hq[hi], qkv[at + C] = hk[hi], qkv[at + 2 * C] = hv[hi];
    }
    void *d_qkv = tg_dev(N * 3 * C * 2), *d_po = tg_dev(N * C * 2);
    float *d_plse = (float *)tg_dev(rows * sizeof(float));
    tg_copy(d_qkv, qkv, N * 3 * C * 2, cudaMemcpyHostToDevice);
    char *pq = (char *)d_qkv;
    void *outs[5] = {io.d_o, io.d_lse, io.d_dq, io.d_dk, io.d_dv};
    const pp_dtype_t types[5] = {PP_DTYPE_BF16, PP_DTYPE_FP32, PP_DTYPE_BF16, PP_DTYPE_BF16,
                                 PP_DTYPE_BF16};
    const size_t counts[5] = {n, rows, n, n, n};
    const char *names[5] = {"o", "lse", "dq", "dk", "dv"};
    const double *got[2][5];
    for (int path = 0; path < 2; path++) {
        if (path)
            setenv("PPSCHED_FLASH_MMA", "sync", 1);
        else
            unsetenv("PPSCHED_FLASH_MMA");
        for (int w = 0; w < 5; w++)
            tg_poison(outs[w], counts[w] * (w == 1 ? 4 : 2));
        REQUIRE_OK(flash_run(&io));
        REQUIRE_OK(attention_flash_fwd(d_po, (int)C, d_plse, pq, pq + C * 2, pq + 2 * C * 2,
                                       (int)(3 * C), B, H, T, d, PP_DTYPE_BF16, g_stream));
        REQUIRE(cudaStreamSynchronize(g_stream) == cudaSuccess);
        for (int w = 0; w < 5; w++) {
            char what[32];
            snprintf(what, sizeof what, "%s (%s)", names[w], path ? "sync" : "default");
            got[path][w] = tg_download(outs[w], counts[w], types[w]);
            EXPECT_CLOSE(what, got[path][w], want[w], counts[w], w == 1 ? TOL_LSE : TOL_OUT);
        }
        const uint16_t *ho = (const uint16_t *)tg_get(io.d_o, n * 2);
        const uint16_t *po = (const uint16_t *)tg_get(d_po, N * C * 2);
        size_t bad = 0;
        for (size_t hi = 0; hi < n; hi++) {
            const size_t i = hi % d, t = hi / d % T, h = hi / d / T % H, b = hi / d / T / H;
            bad += po[(b * T + t) * C + h * d + i] != ho[hi];
        }
        EXPECT(bad == 0,
               "o [%s, path %d]: %zu of %zu packed elements differ from the head layout's",
               tg_ctx(), path, bad, n);
        EXPECT(memcmp(tg_get(io.d_lse, rows * 4), tg_get(d_plse, rows * 4), rows * 4) == 0,
               "lse [%s, path %d]: packed differs from the head layout's", tg_ctx(), path);
    }
    unsetenv("PPSCHED_FLASH_MMA");
    for (int w = 0; w < 5; w++) {
        char what[40];
        snprintf(what, sizeof what, "%s: default against sync", names[w]);
        EXPECT_CLOSE(what, got[0][w], got[1][w], counts[w], w == 1 ? TOL_LSE : TOL_PATH);
    }
    tg_free_all();
}

/* T = 64 and 192: a block of 128 queries or keys with rows past T (zeros from the tensor map);
 * 1024: 8 blocks of 128 keys through the two buffers four times; d = 64 and 128. */
static void test_flash_mma_paths(void)
{
    if (!g_gpu) SKIP("%s", g_no_gpu);
    if (!hopper_gpu()) fprintf(stderr, "  (not compute capability 9.0: both paths are mma.sync)\n");
    paths_case(2, 2, 64, 64, 201);
    paths_case(2, 3, 192, 64, 202);
    paths_case(1, 2, 192, 128, 203);
    paths_case(1, 2, 256, 128, 204);
    if (!check_quick()) {
        paths_case(1, 3, 1024, 64, 205);
        paths_case(1, 2, 1024, 128, 206);
    }
}

/* The column sums the backward wrote (sums: [B·⌈T/128⌉, 3C] fp32) against the CPU's sums of the
 * returned [B·T, 3C] gradient g (bf16) per block of 128 rows of a sequence: fp32 sums of at most
 * 128 values. */
static void check_colsum(const uint16_t *g, const float *sums, int B, int T, size_t C)
{
    const size_t W = 3 * C, nb = (size_t)(T + 127) / 128, n = (size_t)B * nb * W;
    REQUIRE(n * sizeof(float) == attention_flash_bwd_colsum_bytes(B, (int)C / 64, T, 64));
    const double *got = tg_download(sums, n, PP_DTYPE_FP32);
    double *want = tg_zeros(n), *mag = tg_zeros(n);
    for (size_t b = 0; b < (size_t)B; b++)
        for (size_t t = 0; t < (size_t)T; t++)
            for (size_t j = 0; j < W; j++) {
                const double x = ref_bf16_to_f32(g[(b * T + t) * W + j]);
                const size_t at = (b * nb + t / 128) * W + j;
                want[at] += x;
                mag[at] += fabs(x);
            }
    EXPECT_CLOSE_TERMS("colsum", got, want, mag, n, TOL_COLSUM);
}

/* The stage's layout: q, k, v side by side in one [B·T, 3C] matrix (the QKV matmul output), o and
 * dout [B·T, C], dq, dk, dv side by side in [B·T, 3C] (C = H·d). The same arithmetic on the same
 * values as the head layout, so the results match flash_case's bit for bit; where the kernels
 * write them (d = 64, the 128-row path), with the column sums of the gradient (check_colsum),
 * twice into re-poisoned buffers: the same bits. */
static void packed_case(int B, int H, int T, int d, uint64_t seed, const char *tile)
{
    tg_ctx_set("packed B=%d H=%d T=%d d=%d tile %s", B, H, T, d, tile ? tile : "default");
    set_tile(tile);
    flash_io_t io;
    flash_io_make(&io, B, H, T, d, seed);
    const size_t n = io.n, C = (size_t)H * d, N = (size_t)B * T;
    REQUIRE_OK(flash_run(&io));
    const uint16_t *o = (const uint16_t *)tg_get(io.d_o, n * 2);
    const uint16_t *dq = (const uint16_t *)tg_get(io.d_dq, n * 2);
    const uint16_t *dk = (const uint16_t *)tg_get(io.d_dk, n * 2);
    const uint16_t *dv = (const uint16_t *)tg_get(io.d_dv, n * 2);
    const float *lse = (const float *)tg_get(io.d_lse, io.rows * sizeof(float));

    /* element (b, h, t, i): head layout index ((b·H + h)·T + t)·d + i, packed at row b·T + t,
     * column h·d + i */
    size_t *row = (size_t *)tg_host(n * sizeof(size_t)),
           *col = (size_t *)tg_host(n * sizeof(size_t));
    for (size_t hi = 0; hi < n; hi++) {
        const size_t i = hi % d, t = hi / d % T, h = hi / d / T % H, b = hi / d / T / H;
        row[hi] = b * T + t, col[hi] = h * d + i;
    }
    const uint16_t *hq = (const uint16_t *)tg_get(io.d_q, n * 2);
    const uint16_t *hk = (const uint16_t *)tg_get(io.d_k, n * 2);
    const uint16_t *hv = (const uint16_t *)tg_get(io.d_v, n * 2);
    const uint16_t *hdo = (const uint16_t *)tg_get(io.d_dout, n * 2);
    uint16_t *qkv = (uint16_t *)tg_host(N * 3 * C * 2), *dout = (uint16_t *)tg_host(N * C * 2);
    for (size_t hi = 0; hi < n; hi++) {
        qkv[row[hi] * 3 * C + col[hi]] = hq[hi];
        qkv[row[hi] * 3 * C + C + col[hi]] = hk[hi];
        qkv[row[hi] * 3 * C + 2 * C + col[hi]] = hv[hi];
        dout[row[hi] * C + col[hi]] = hdo[hi];
    }
    void *d_qkv = tg_dev(N * 3 * C * 2), *d_dout = tg_dev(N * C * 2);
    void *d_o = tg_dev(N * C * 2), *d_dqkv = tg_dev(N * 3 * C * 2);
    float *d_lse = (float *)tg_dev(io.rows * sizeof(float));
    tg_copy(d_qkv, qkv, N * 3 * C * 2, cudaMemcpyHostToDevice);
    tg_copy(d_dout, dout, N * C * 2, cudaMemcpyHostToDevice);
    char *pq = (char *)d_qkv, *pd = (char *)d_dqkv;
    const int ld3 = (int)(3 * C), ld1 = (int)C;
    REQUIRE_OK(attention_flash_fwd(d_o, ld1, d_lse, pq, pq + C * 2, pq + 2 * C * 2, ld3, B, H, T, d,
                                   PP_DTYPE_BF16, g_stream));
    /* with the column sums where the kernels write them: dq, dk, dv keep their bits */
    const size_t sums_bytes = attention_flash_bwd_colsum_bytes(B, H, T, d);
    float *sums = attention_flash_bwd_colsum_ok(d) ? (float *)tg_dev(sums_bytes) : NULL;
    for (int run = 0; run < (sums ? 2 : 1); run++) {
        const void *first = run ? tg_get(sums, sums_bytes) : NULL;
        if (sums) tg_poison(sums, sums_bytes);
        REQUIRE_OK(attention_flash_bwd(pd, pd + C * 2, pd + 2 * C * 2, ld3, d_dout, pq, pq + C * 2,
                                       pq + 2 * C * 2, ld3, d_o, ld1, d_lse, io.d_scratch, sums, B,
                                       H, T, d, PP_DTYPE_BF16, g_stream));
        if (run)
            EXPECT(memcmp(first, tg_get(sums, sums_bytes), sums_bytes) == 0,
                   "colsum [%s]: the second run differs bitwise", tg_ctx());
    }
    const uint16_t *po = (const uint16_t *)tg_get(d_o, N * C * 2);
    const uint16_t *pdqkv = (const uint16_t *)tg_get(d_dqkv, N * 3 * C * 2);
    if (sums) check_colsum(pdqkv, sums, B, T, C);
    EXPECT(memcmp(lse, tg_get(d_lse, io.rows * sizeof(float)), io.rows * sizeof(float)) == 0,
           "lse [%s]: differs from the head layout's", tg_ctx());
    size_t bad[4] = {0, 0, 0, 0};
    for (size_t hi = 0; hi < n; hi++) {
        bad[0] += po[row[hi] * C + col[hi]] != o[hi];
        bad[1] += pdqkv[row[hi] * 3 * C + col[hi]] != dq[hi];
        bad[2] += pdqkv[row[hi] * 3 * C + C + col[hi]] != dk[hi];
        bad[3] += pdqkv[row[hi] * 3 * C + 2 * C + col[hi]] != dv[hi];
    }
    const char *names[4] = {"o", "dq", "dk", "dv"};
    for (int i = 0; i < 4; i++)
        EXPECT(bad[i] == 0, "%s [%s]: %zu of %zu elements differ from the head layout's", names[i],
               tg_ctx(), bad[i], n);
    set_tile(NULL);
    tg_free_all();
}

GPU_CASE(test_flash_packed_b2_h3_t192_d64, packed_case(2, 3, 192, 64, 105, NULL);
         packed_case(2, 3, 192, 64, 105, "64"))
/* T = 64: one half block a sequence (warps 2, 3 add zeros to the column sums); T = 512: four */
GPU_CASE(test_flash_packed_b3_h2_t64_d64, packed_case(3, 2, 64, 64, 107, NULL))
GPU_CASE(test_flash_packed_b2_h4_t512_d64, packed_case(2, 4, 512, 64, 108, NULL))
GPU_CASE(test_flash_packed_b1_h2_t128_d128, packed_case(1, 2, 128, 128, 106, NULL))

/* ---- fused against unfused ------------------------------------------------------------------- */

/* The stage's unfused attention on the same inputs, then fused against it. */
static void unfused_case(int B, int H, int T, int d, uint64_t seed)
{
    tg_ctx_set("fused vs unfused B=%d H=%d T=%d d=%d", B, H, T, d);
    flash_io_t io;
    flash_io_make(&io, B, H, T, d, seed);
    const size_t n = io.n;
    const int BH = B * H;
    const long long Td = (long long)T * d, TT = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)d);
    const pp_dtype_t bf = PP_DTYPE_BF16;
    void *P = tg_dev((size_t)BH * T * T * 2), *dP = tg_dev((size_t)BH * T * T * 2);
    void *o = tg_dev(n * 2), *dq = tg_dev(n * 2), *dk = tg_dev(n * 2), *dv = tg_dev(n * 2);

    REQUIRE_OK(gemm_strided_batched(P, io.d_q, io.d_k, 0, 1, T, T, d, 1.0f, 0.0f, Td, Td, TT, BH,
                                    bf, &g_gemm, g_stream));
    REQUIRE_OK(softmax_causal_fwd(P, P, scale, BH, T, bf, g_stream));
    REQUIRE_OK(gemm_strided_batched(o, P, io.d_v, 0, 0, T, d, T, 1.0f, 0.0f, TT, Td, Td, BH, bf,
                                    &g_gemm, g_stream));
    REQUIRE_OK(gemm_strided_batched(dP, io.d_dout, io.d_v, 0, 1, T, T, d, 1.0f, 0.0f, Td, Td, TT,
                                    BH, bf, &g_gemm, g_stream));
    REQUIRE_OK(gemm_strided_batched(dv, P, io.d_dout, 1, 0, T, d, T, 1.0f, 0.0f, TT, Td, Td, BH, bf,
                                    &g_gemm, g_stream));
    REQUIRE_OK(softmax_causal_bwd(dP, dP, P, scale, BH, T, bf, g_stream));
    REQUIRE_OK(gemm_strided_batched(dq, dP, io.d_k, 0, 0, T, d, T, 1.0f, 0.0f, TT, Td, Td, BH, bf,
                                    &g_gemm, g_stream));
    REQUIRE_OK(gemm_strided_batched(dk, dP, io.d_q, 1, 0, T, d, T, 1.0f, 0.0f, TT, Td, Td, BH, bf,
                                    &g_gemm, g_stream));
    REQUIRE_OK(flash_run(&io));
    EXPECT_CLOSE("o", tg_download(io.d_o, n, PP_DTYPE_BF16), tg_download(o, n, PP_DTYPE_BF16), n,
                 TOL_PATH);
    EXPECT_CLOSE("dq", tg_download(io.d_dq, n, PP_DTYPE_BF16), tg_download(dq, n, PP_DTYPE_BF16), n,
                 TOL_PATH);
    EXPECT_CLOSE("dk", tg_download(io.d_dk, n, PP_DTYPE_BF16), tg_download(dk, n, PP_DTYPE_BF16), n,
                 TOL_PATH);
    EXPECT_CLOSE("dv", tg_download(io.d_dv, n, PP_DTYPE_BF16), tg_download(dv, n, PP_DTYPE_BF16), n,
                 TOL_PATH);
    tg_free_all();
}

GPU_CASE(test_fused_vs_unfused_d64, unfused_case(2, 3, 192, 64, 201))
GPU_CASE(test_fused_vs_unfused_d128, unfused_case(1, 2, 192, 128, 202))

/* ---- the stage on both paths ----------------------------------------------------------------- */

#define STAGE_MB 5 /* data index (a middle stage makes no data: any value) */

typedef struct stage_out {
    double *y, *dx, *grads; /* [NC], [NC], [n_params] */
    size_t n_params, slot_bytes;
} stage_out_t;

/* Forward + backward of one micro-batch on a fresh stage built under PPSCHED_ATTENTION=`mode`
 * (NULL: unset), from x and dy; twice, checking the second run gives the same bits. */
static void stage_run(const pp_stage_cfg_t *cfg, const char *mode, const double *x,
                      const double *dy, stage_out_t *out)
{
    const size_t NC = (size_t)cfg->micro_batch_size * cfg->seq_len * cfg->hidden;
    const size_t bytes = stage_boundary_bytes(cfg);
    pp_stage_t *st = NULL;
    if (mode)
        setenv("PPSCHED_ATTENTION", mode, 1);
    else
        unsetenv("PPSCHED_ATTENTION");
    out->slot_bytes = stage_slot_bytes(cfg);
    const pp_status_t s = stage_init(&st, cfg);
    unsetenv("PPSCHED_ATTENTION"); /* the stage keeps the path it chose */
    REQUIRE(s == PP_OK, "stage_init [%s]: %s", tg_ctx(), pp_status_str(s));
    out->n_params = stage_n_params(st);
    out->grads = (double *)tg_host(out->n_params * sizeof(double));
    float *g = (float *)tg_host(out->n_params * sizeof(float));
    float *g2 = (float *)tg_host(out->n_params * sizeof(float));
    void *y1 = tg_host(bytes), *dx1 = tg_host(bytes);
    void *xin = tg_dev_of(x, NC, PP_DTYPE_BF16), *dyin = tg_dev_of(dy, NC, PP_DTYPE_BF16);
    for (int run = 0; run < 2; run++) {
        tg_must(
            cudaMemcpyAsync(stage_slot_x(st, 0), xin, bytes, cudaMemcpyDeviceToDevice, g_stream),
            "copy x");
        tg_must(
            cudaMemcpyAsync(stage_slot_dy(st, 0), dyin, bytes, cudaMemcpyDeviceToDevice, g_stream),
            "copy dy");
        tg_poison(stage_slot_y(st, 0), bytes);
        tg_poison(stage_slot_dx(st, 0), bytes);
        int ok = stage_zero_grads(st, g_stream) == PP_OK &&
                 stage_forward(st, 0, STAGE_MB, g_stream) == PP_OK &&
                 stage_backward(st, 0, STAGE_MB, g_stream) == PP_OK &&
                 cudaStreamSynchronize(g_stream) == cudaSuccess;
        ok = ok && stage_grads_to_host(st, run ? g2 : g) == PP_OK;
        if (!ok) {
            stage_free(st);
            REQUIRE(0, "stage forward/backward failed [%s]", tg_ctx());
        }
        if (run == 0) {
            out->y = tg_download(stage_slot_y(st, 0), NC, PP_DTYPE_BF16);
            out->dx = tg_download(stage_slot_dx(st, 0), NC, PP_DTYPE_BF16);
            tg_copy(y1, stage_slot_y(st, 0), bytes, cudaMemcpyDeviceToHost);
            tg_copy(dx1, stage_slot_dx(st, 0), bytes, cudaMemcpyDeviceToHost);
        } else {
            EXPECT(memcmp(y1, tg_get(stage_slot_y(st, 0), bytes), bytes) == 0,
                   "y [%s]: the second run differs", tg_ctx());
            EXPECT(memcmp(dx1, tg_get(stage_slot_dx(st, 0), bytes), bytes) == 0,
                   "dx [%s]: the second run differs", tg_ctx());
            EXPECT(memcmp(g, g2, out->n_params * sizeof(float)) == 0,
                   "gradients [%s]: the second run differs", tg_ctx());
        }
    }
    for (size_t i = 0; i < out->n_params; i++)
        out->grads[i] = g[i];
    stage_free(st);
}

static void test_stage_paths(void)
{
    if (!g_gpu) SKIP("%s", g_no_gpu);
    pp_stage_cfg_t c;
    memset(&c, 0, sizeof c);
    c.hidden = 128, c.heads = 2, c.seq_len = 64, c.vocab = 128, c.micro_batch_size = 2;
    c.n_layers = 2, c.first_layer = 2, c.total_layers = 6; /* a middle stage, d = 64 */
    c.dtype = PP_DTYPE_BF16, c.seed = 0x5eed5eedULL, c.n_slots = 1, c.grad_scale = 1.0f;
    const size_t NC = (size_t)c.micro_batch_size * c.seq_len * c.hidden;
    ref_rng_t rng;
    ref_rng_seed(&rng, 301);
    double *x = tg_randn(&rng, NC, 1.0, PP_DTYPE_BF16),
           *dy = tg_randn(&rng, NC, 1e-2, PP_DTYPE_BF16);

    stage_out_t fused, unfused;
    memset(&fused, 0, sizeof fused), memset(&unfused, 0, sizeof unfused);
    tg_ctx_set("stage, fused");
    stage_run(&c, NULL, x, dy, &fused);
    tg_ctx_set("stage, unfused");
    stage_run(&c, "unfused", x, dy, &unfused);
    REQUIRE(fused.grads && unfused.grads && fused.n_params == unfused.n_params);
    /* Per block: P [B,H,T,T] out, lse [B,H,T] in (q, k, v and the QKV output weigh the same). */
    const size_t BH = (size_t)c.micro_batch_size * c.heads, T = (size_t)c.seq_len;
    EXPECT(unfused.slot_bytes - fused.slot_bytes ==
               (size_t)c.n_layers * (round256(BH * T * T * 2) - round256(BH * T * 4)),
           "slot bytes %zu (fused) vs %zu (unfused)", fused.slot_bytes, unfused.slot_bytes);

    pp_model_shape_t shape;
    memset(&shape, 0, sizeof shape);
    shape.hidden = c.hidden, shape.heads = c.heads, shape.seq_len = c.seq_len;
    shape.vocab = c.vocab, shape.batch = c.micro_batch_size, shape.n_layers = c.n_layers;
    shape.first_layer = c.first_layer, shape.total_layers = c.total_layers;
    ref_stage_t ref;
    REQUIRE(ref_stage_init(&ref, &shape, c.seed) == 0, "ref_stage_init: out of memory");
    REQUIRE(ref.n_params == fused.n_params, "%zu parameters, reference %zu", fused.n_params,
            ref.n_params);
    double *want_y = tg_zeros(NC), *want_dx = tg_zeros(NC);
    ref_stage_forward(&ref, x, STAGE_MB, want_y);
    ref_stage_backward(&ref, dy, 1.0, want_dx);

    stage_out_t *outs[2] = {&fused, &unfused};
    const char *names[2] = {"fused", "unfused"};
    char what[96];
    for (int p = 0; p < 2; p++) {
        tg_ctx_set("stage, %s vs the CPU stage", names[p]);
        EXPECT_REL_L2("y", outs[p]->y, want_y, NC, STAGE_RTOL_FWD);
        EXPECT_REL_L2("dx", outs[p]->dx, want_dx, NC, STAGE_RTOL_BWD);
        for (int t = 0; t < ref.n_tensors; t++) {
            const pp_param_tensor_t *tt = &ref.tensors[t];
            snprintf(what, sizeof what, "d%s[layer %d]", model_param_name(tt->kind), tt->layer);
            EXPECT_REL_L2(what, outs[p]->grads + tt->packed, ref.grads + tt->packed, tt->numel,
                          STAGE_RTOL_BWD);
        }
    }
    tg_ctx_set("stage, fused vs unfused");
    EXPECT_REL_L2("y", fused.y, unfused.y, NC, STAGE_RTOL_FWD);
    EXPECT_REL_L2("dx", fused.dx, unfused.dx, NC, STAGE_RTOL_BWD);
    EXPECT_REL_L2("gradients", fused.grads, unfused.grads, fused.n_params, STAGE_RTOL_BWD);
    ref_stage_free(&ref);
    tg_free_all();
}

/* run.recompute on the fused path: full gives none's bits; selective too, except fc2's weight
 * gradient (GELU's output rebuilt by the GELU kernel, not the fc GEMM's epilogue), which stays
 * within the CPU stage's tolerance. */
static void test_stage_recompute_fused(void)
{
    if (!g_gpu) SKIP("%s", g_no_gpu);
    pp_stage_cfg_t c;
    memset(&c, 0, sizeof c);
    c.hidden = 128, c.heads = 2, c.seq_len = 64, c.vocab = 128, c.micro_batch_size = 2;
    c.n_layers = 2, c.first_layer = 2, c.total_layers = 6; /* a middle stage, d = 64 */
    c.dtype = PP_DTYPE_BF16, c.seed = 0x5eed5eedULL, c.n_slots = 1, c.grad_scale = 1.0f;
    const size_t NC = (size_t)c.micro_batch_size * c.seq_len * c.hidden;
    ref_rng_t rng;
    ref_rng_seed(&rng, 302);
    double *x = tg_randn(&rng, NC, 1.0, PP_DTYPE_BF16),
           *dy = tg_randn(&rng, NC, 1e-2, PP_DTYPE_BF16);
    stage_out_t out[PP_RECOMPUTE_COUNT];
    memset(out, 0, sizeof out);
    for (int r = 0; r < PP_RECOMPUTE_COUNT; r++) {
        c.recompute = (pp_recompute_t)r;
        tg_ctx_set("stage, fused, recompute %s", stage_recompute_name(c.recompute));
        stage_run(&c, NULL, x, dy, &out[r]);
        REQUIRE(out[r].grads, "[%s]", tg_ctx());
    }
    EXPECT(out[2].slot_bytes < out[1].slot_bytes && out[1].slot_bytes < out[0].slot_bytes,
           "slot bytes none %zu, selective %zu, full %zu", out[0].slot_bytes, out[1].slot_bytes,
           out[2].slot_bytes);
    pp_model_shape_t shape;
    memset(&shape, 0, sizeof shape);
    shape.hidden = c.hidden, shape.heads = c.heads, shape.seq_len = c.seq_len;
    shape.vocab = c.vocab, shape.batch = c.micro_batch_size, shape.n_layers = c.n_layers;
    shape.first_layer = c.first_layer, shape.total_layers = c.total_layers;
    ref_stage_t ref;
    REQUIRE(ref_stage_init(&ref, &shape, c.seed) == 0, "ref_stage_init: out of memory");
    double *want_y = tg_zeros(NC), *want_dx = tg_zeros(NC);
    ref_stage_forward(&ref, x, STAGE_MB, want_y);
    ref_stage_backward(&ref, dy, 1.0, want_dx);
    for (int r = 1; r < PP_RECOMPUTE_COUNT; r++) {
        tg_ctx_set("stage, fused, recompute %s vs none", stage_recompute_name((pp_recompute_t)r));
        EXPECT(memcmp(out[r].y, out[0].y, NC * sizeof(double)) == 0, "y [%s]", tg_ctx());
        EXPECT(memcmp(out[r].dx, out[0].dx, NC * sizeof(double)) == 0, "dx [%s]", tg_ctx());
        for (int t = 0; t < ref.n_tensors; t++) {
            const pp_param_tensor_t *tt = &ref.tensors[t];
            const double *got = out[r].grads + tt->packed;
            char what[96];
            snprintf(what, sizeof what, "d%s[layer %d]", model_param_name(tt->kind), tt->layer);
            if (r == PP_RECOMPUTE_SELECTIVE && tt->kind == PP_PARAM_FC2_W)
                EXPECT_REL_L2(what, got, ref.grads + tt->packed, tt->numel, STAGE_RTOL_BWD);
            else
                EXPECT(memcmp(got, out[0].grads + tt->packed, tt->numel * sizeof(double)) == 0,
                       "%s [%s]: not none's bits", what, tg_ctx());
        }
    }
    ref_stage_free(&ref);
    tg_free_all();
}

/* ---- the QKV bias gradient from the flash backward's column sums ----------------------------- */

/* A fresh stage built under the environment as it is, x and dy into slot 0, then F and B (split 0)
 * or F, I and W (split 1); its gradients into g (packed order). Returns 1 when all went well. */
static int stage_grads(const pp_stage_cfg_t *cfg, const void *xin, const void *dyin, int split,
                       float *g)
{
    const size_t bytes = stage_boundary_bytes(cfg);
    const cudaMemcpyKind d2d = cudaMemcpyDeviceToDevice;
    pp_stage_t *st = NULL;
    if (stage_init(&st, cfg) != PP_OK) return 0;
    int ok = cudaMemcpyAsync(stage_slot_x(st, 0), xin, bytes, d2d, g_stream) == cudaSuccess &&
             cudaMemcpyAsync(stage_slot_dy(st, 0), dyin, bytes, d2d, g_stream) == cudaSuccess &&
             stage_zero_grads(st, g_stream) == PP_OK &&
             stage_forward(st, 0, STAGE_MB, g_stream) == PP_OK;
    if (split)
        ok = ok && stage_backward_input(st, 0, STAGE_MB, g_stream) == PP_OK &&
             stage_backward_weight(st, 0, STAGE_MB, g_stream) == PP_OK;
    else
        ok = ok && stage_backward(st, 0, STAGE_MB, g_stream) == PP_OK;
    ok =
        ok && cudaStreamSynchronize(g_stream) == cudaSuccess && stage_grads_to_host(st, g) == PP_OK;
    stage_free(st);
    return ok;
}

/* A middle stage at d = 64, T = 192 (a whole and a half 128-row block a sequence): B and I then W
 * give the same bits with the QKV bias gradient from the column sums; PPSCHED_FLASH_BWD=unfused
 * (the dot kernel, W sums d_qkv) gives every other gradient's bits and that one within 1e-4
 * (relative L2: the same values summed in another order), and so do the separate reductions
 * (PPSCHED_WGRAD=unfused) for that one; the 64-row kernels' stage (PPSCHED_FLASH_TILE=64: no
 * column sums) is within the CPU stage's tolerance of the default everywhere. */
static void test_stage_qkv_bias_sums(void)
{
    if (!g_gpu) SKIP("%s", g_no_gpu);
    pp_stage_cfg_t c;
    memset(&c, 0, sizeof c);
    c.hidden = 128, c.heads = 2, c.seq_len = 192, c.vocab = 128, c.micro_batch_size = 2;
    c.n_layers = 2, c.first_layer = 2, c.total_layers = 6;
    c.dtype = PP_DTYPE_BF16, c.seed = 0x5eed5eedULL, c.n_slots = 1, c.grad_scale = 1.0f;
    c.n_wgrad_slots = 1;
    const size_t NC = (size_t)c.micro_batch_size * c.seq_len * c.hidden;
    ref_rng_t rng;
    ref_rng_seed(&rng, 303);
    void *x = tg_dev_of(tg_randn(&rng, NC, 1.0, PP_DTYPE_BF16), NC, PP_DTYPE_BF16),
         *dy = tg_dev_of(tg_randn(&rng, NC, 1e-2, PP_DTYPE_BF16), NC, PP_DTYPE_BF16);
    pp_model_shape_t shape;
    memset(&shape, 0, sizeof shape);
    shape.hidden = c.hidden, shape.heads = c.heads, shape.seq_len = c.seq_len;
    shape.vocab = c.vocab, shape.batch = c.micro_batch_size, shape.n_layers = c.n_layers;
    shape.first_layer = c.first_layer, shape.total_layers = c.total_layers;
    const int nt = model_tensor_count(&shape);
    pp_param_tensor_t *tensors = (pp_param_tensor_t *)tg_host((size_t)nt * sizeof *tensors);
    size_t n = 0;
    model_tensors(&shape, tensors, &n);
    float *g[5];
    for (int i = 0; i < 5; i++)
        g[i] = (float *)tg_host(n * sizeof(float));
    /* 0: B, 1: I then W, 2: PPSCHED_WGRAD=unfused, 3: PPSCHED_FLASH_TILE=64, 4: I then W under
     * PPSCHED_FLASH_BWD=unfused */
    const char *vars[5] = {NULL, NULL, "PPSCHED_WGRAD", "PPSCHED_FLASH_TILE", "PPSCHED_FLASH_BWD"};
    const char *vals[5] = {NULL, NULL, "unfused", "64", "unfused"};
    for (int i = 0; i < 5; i++) {
        tg_ctx_set("stage, QKV bias sums, run %d %s=%s", i, vars[i] ? vars[i] : "-",
                   vals[i] ? vals[i] : "-");
        if (vars[i]) setenv(vars[i], vals[i], 1);
        const int ok = stage_grads(&c, x, dy, i == 1 || i == 4, g[i]);
        if (vars[i]) unsetenv(vars[i]);
        REQUIRE(ok, "stage run failed [%s]", tg_ctx());
    }
    tg_ctx_set("stage, QKV bias sums");
    EXPECT(memcmp(g[0], g[1], n * sizeof(float)) == 0, "I then W differs from B [%s]", tg_ctx());
    double *a = tg_zeros(n), *b = tg_zeros(n), *e = tg_zeros(n), *u = tg_zeros(n);
    for (size_t i = 0; i < n; i++)
        a[i] = g[0][i], b[i] = g[2][i], e[i] = g[3][i], u[i] = g[4][i];
    char what[96];
    for (int t = 0; t < nt; t++) {
        const pp_param_tensor_t *tt = &tensors[t];
        if (tt->kind != PP_PARAM_QKV_B) {
            EXPECT(memcmp(a + tt->packed, u + tt->packed, tt->numel * sizeof(double)) == 0,
                   "d%s[layer %d] [%s]: PPSCHED_FLASH_BWD=unfused differs bitwise",
                   model_param_name(tt->kind), tt->layer, tg_ctx());
            continue;
        }
        snprintf(what, sizeof what, "dqkv_b[layer %d] vs the separate reduction", tt->layer);
        EXPECT_REL_L2(what, a + tt->packed, b + tt->packed, tt->numel, 1e-4);
        snprintf(what, sizeof what, "dqkv_b[layer %d] vs PPSCHED_FLASH_BWD=unfused", tt->layer);
        EXPECT_REL_L2(what, a + tt->packed, u + tt->packed, tt->numel, 1e-4);
    }
    EXPECT_REL_L2("gradients vs the 64-row kernels", a, e, n, STAGE_RTOL_BWD);
    tg_free_all();
}

int main(void)
{
    g_no_gpu = tg_init("test_flash", GUARD_BYTES);
    g_stream = tg_stream();
    if (!g_no_gpu && gemm_init(&g_gemm, 0) != PP_OK) {
        fprintf(stderr, "test_flash: device setup failed\n");
        return 1;
    }
    g_gpu = !g_no_gpu;
    RUN(test_reference);
    RUN(test_shapes_and_sizes);
    RUN(test_flash_b1_h2_t64_d64);
    RUN(test_flash_b2_h2_t128_d64);
    RUN(test_flash_b2_h3_t192_d64);
    RUN(test_flash_b1_h3_t1024_d64);
    RUN(test_flash_b1_h2_t192_d128);
    RUN(test_flash_mma_paths);
    RUN(test_flash_packed_b2_h3_t192_d64);
    RUN(test_flash_packed_b3_h2_t64_d64);
    RUN(test_flash_packed_b2_h4_t512_d64);
    RUN(test_flash_packed_b1_h2_t128_d128);
    RUN(test_fused_vs_unfused_d64);
    RUN(test_fused_vs_unfused_d128);
    RUN(test_stage_paths);
    RUN(test_stage_recompute_fused);
    RUN(test_stage_qkv_bias_sums);
    if (g_gpu) gemm_free(&g_gemm);
    tg_finish();
    return check_summary("test_flash");
}
