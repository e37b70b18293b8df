/*
 * test_cost.c — the stage cost model (cost.h), the GPU and link tables (gpu.h) and profiles
 * (profile.h) against hand computations.
 *
 * FLOPs and bytes of a pass are checked against the sums written out by hand from stages/stage.cu;
 * times against GPU rows built here so that one term dominates (infinite bandwidth: the time is
 * FLOPs / rate; infinite rates: launches x floor). Shapes are drawn from a seeded generator.
 * Monotonicity: more layers, width, sequence, vocabulary or micro-batch never costs less, past
 * 2^31 tokens a micro-batch too.
 */
#include "model/cost.h"
#include "sim/cost_model.h"
#include "model/kernel_sizes.h"
#include "schedule/generate.h"
#include "model/gpu.h"
#include "model/profile.h"
#include "model/stage_layout.h"
#include "plan/stage_cfg.h"
#include "tests/check.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pp_gpu_t gpu_flops_only(void)
{
    pp_gpu_t g = *gpu_find("h100");
    g.hbm_gbps = 1e30;
    g.launch_us = 0;
    g.bf16_tflops = ts_rand_uniform(100, 2000);
    g.fp32_tflops = ts_rand_uniform(10, 100);
    g.gemm_eff = ts_rand_uniform(0.3, 0.9);
    g.gemm_tail_us = 0; /* the FLOPs alone */
    for (int e = 0; e < PP_GPU_EPILOGUES; e++)
        g.epilogue_us[e] = 0;
    for (int k = 0; k < PP_GPU_ATTN_ROWS; k++) { /* a rate of its own for each pass and row */
        g.attn[k].fwd_eff = ts_rand_uniform(0.1, 0.5);
        g.attn[k].bwd_eff = ts_rand_uniform(0.1, 0.5);
        g.attn[k].fwd_wgmma = g.attn[k].bwd_wgmma = 0; /* the mma.sync kernels */
    }
    return g;
}

/* The partial column sums I leaves for W, bytes: the flash backward's (d = 64), one fp32 per
 * 128-row block of a sequence and column of d_qkv; a LayerNorm input gradient's, Σdy, Σdy·x̂ and
 * Σdres per chunk of rows and column. */
static double qkv_sum_bytes(const pp_model_shape_t *s)
{
    return 4.0 * s->batch * ((s->seq_len + 127) / 128) * 3 * s->hidden;
}

static double ln_sum_bytes(const pp_model_shape_t *s)
{
    return 4.0 * 3 * layernorm_bwd_input_colsum_rows(s->batch * s->seq_len) * s->hidden;
}

/* A shape the fused attention takes: head size 64, T a multiple of 64. */
static pp_model_shape_t random_shape(void)
{
    pp_model_shape_t s;
    memset(&s, 0, sizeof s);
    s.heads = ts_rand_int(1, 32);
    s.hidden = 64 * s.heads;
    s.seq_len = 64 * ts_rand_int(1, 32);
    s.vocab = ts_rand_int(100, 50000);
    s.batch = ts_rand_int(1, 8);
    s.n_layers = ts_rand_int(1, 12);
    s.total_layers = 4 * s.n_layers;
    return s;
}

static void test_block_flops_and_bytes(void)
{
    for (int rep = 0; rep < 20; rep++) {
        pp_model_shape_t s = random_shape();
        pp_gpu_t g = gpu_flops_only();
        double N = (double)s.batch * s.seq_len, C = s.hidden, T = s.seq_len, V = s.vocab;
        pp_work_t f = cost_part(&s, PP_DTYPE_BF16, &g, PP_PASS_F, PP_PART_BLOCK);
        pp_work_t i = cost_part(&s, PP_DTYPE_BF16, &g, PP_PASS_I, PP_PART_BLOCK);
        pp_work_t w = cost_part(&s, PP_DTYPE_BF16, &g, PP_PASS_W, PP_PART_BLOCK);
        /* QKV 6NC^2 + proj 2 + fc 8 + fc2 8; causal flash forward: QK^T and PV at half. */
        EXPECT_NEAR(f.flops, 24 * N * C * C + 2 * N * T * C, 0, 1e-12);
        /* the same GEMMs for dgrad; flash backward recomputes S twice: 7 half products */
        EXPECT_NEAR(i.flops, 24 * N * C * C + 7 * N * T * C, 0, 1e-12);
        EXPECT_NEAR(w.flops, 24 * N * C * C, 0, 1e-12);
        /* bf16 activations: LN1 2, QKV 4, flash 4, proj 3, LN2 2, fc 9, fc2 6 = 30 NC; weights
         * 3 + 1 + 4 + 4 = 12 C^2; LayerNorm statistics 4 floats a token. */
        EXPECT_NEAR(f.bytes, 2 * (30 * N * C + 12 * C * C) + 4 * 4 * N, 0, 1e-12);
        /* I: fc2 9, fc 5, LN2 4, proj 2, flash 8 (q, k, v, dO, O; dq, dk, dv), QKV 4, LN1 4 NC;
         * the same 12 C^2 of weights; the two LayerNorms' statistics; the partial sums written
         * for W: the flash backward's of d_qkv, each LayerNorm input gradient's */
        const double qs = qkv_sum_bytes(&s), ls = ln_sum_bytes(&s);
        EXPECT_NEAR(i.bytes, 2 * (36 * N * C + 12 * C * C) + 4 * 4 * N + qs + 2 * ls, 0, 1e-12);
        /* weight gradients: fp32 accumulators read and written, 12 C^2 of them; the GEMMs read
         * 5 + 5 + 2 + 4 NC, the column sums d_fc (4 NC) and I's partial sums */
        EXPECT_NEAR(w.bytes, 2 * (16 + 4) * N * C + 8 * 12 * C * C + qs + 2 * ls, 0, 1e-12);
        /* I: the flash backward in two kernels (dQ with Dr, dK/dV); W: the four weight GEMMs and
         * colsum_bwd's two launches for the six column sums */
        EXPECT(f.kernels == 7 && i.kernels == 8 && w.kernels == 6, "%d %d %d", f.kernels, i.kernels,
               w.kernels);
        double P = g.bf16_tflops * 1e12;
        const double fwd64 = g.attn[0].fwd_eff; /* d = 64: the first row */
        EXPECT_NEAR(f.ms, 1e3 * (24 * N * C * C / (P * g.gemm_eff) + 2 * N * T * C / (P * fwd64)),
                    1e-12, 1e-9);
        EXPECT_NEAR(w.ms, 1e3 * 24 * N * C * C / (P * g.gemm_eff), 1e-12, 1e-9);
        /* head: the LM head GEMM in each pass */
        pp_work_t h = cost_part(&s, PP_DTYPE_BF16, &g, PP_PASS_F, PP_PART_HEAD);
        EXPECT_NEAR(h.flops, 2 * N * V * C, 0, 1e-12);
        EXPECT_NEAR(h.ms, 1e3 * 2 * N * V * C / (P * g.gemm_eff), 1e-12, 1e-9);
    }
}

static void test_unfused_fp32(void)
{
    pp_model_shape_t s = random_shape();
    pp_gpu_t g = gpu_flops_only();
    double N = (double)s.batch * s.seq_len, C = s.hidden, T = s.seq_len, H = s.heads;
    pp_work_t f = cost_part(&s, PP_DTYPE_FP32, &g, PP_PASS_F, PP_PART_BLOCK);
    /* fp32 takes the unfused path: two full T x T products, at the fp32 rate */
    EXPECT_NEAR(f.flops, 24 * N * C * C + 4 * N * T * C, 0, 1e-12);
    EXPECT_NEAR(f.ms, 1e3 * f.flops / (g.fp32_tflops * 1e12 * g.gemm_eff), 1e-12, 1e-9);
    /* fp32 elements; P [B,H,T,T] written by S, read and written by softmax, read by P V */
    double nc = 2 + 4 + 6 + 2 + 2 + 2 + 3 + 2 + 9 + 6;
    EXPECT_NEAR(f.bytes, 4 * (nc * N * C + 4 * N * T * H + 12 * C * C) + 4 * 4 * N, 0, 1e-12);
    EXPECT(f.kernels == 11, "%d kernels", f.kernels);
}

static void test_launch_floor(void)
{
    pp_gpu_t g = *gpu_find("h200");
    g.bf16_tflops = g.fp32_tflops = g.hbm_gbps = 1e30;
    g.launch_us = ts_rand_uniform(1, 20);
    g.gemm_tail_us = 0; /* the floor alone: no GEMM's tail or epilogue */
    for (int e = 0; e < PP_GPU_EPILOGUES; e++)
        g.epilogue_us[e] = 0;
    pp_model_shape_t s = random_shape();
    /* kernels per pass and part, counted in stage.cu */
    int want[PP_PASS_COUNT][PP_PART_COUNT] = {{7, 2, 5}, {8, 0, 2}, {6, 3, 2}};
    for (int p = 0; p < PP_PASS_COUNT; p++)
        for (int q = 0; q < PP_PART_COUNT; q++) {
            pp_work_t w = cost_part(&s, PP_DTYPE_BF16, &g, (pp_pass_t)p, (pp_part_t)q);
            EXPECT(w.kernels == want[p][q], "pass %d part %d: %d kernels", p, q, w.kernels);
            EXPECT_NEAR(w.ms, want[p][q] * g.launch_us * 1e-3, 1e-12, 1e-9);
        }
    /* PPSCHED_WGRAD=unfused: one reduction per bias and per LayerNorm, as the stage runs them */
    setenv("PPSCHED_WGRAD", "unfused", 1);
    pp_work_t w = cost_part(&s, PP_DTYPE_BF16, &g, PP_PASS_W, PP_PART_BLOCK);
    unsetenv("PPSCHED_WGRAD");
    EXPECT(w.kernels == 10, "%d kernels", w.kernels);
    EXPECT(cost_part(&s, PP_DTYPE_BF16, &g, PP_PASS_W, PP_PART_BLOCK).kernels == 6);
    /* d = 128: the dot kernel, dK/dV and dQ */
    s.hidden = 128 * s.heads;
    pp_work_t i = cost_part(&s, PP_DTYPE_BF16, &g, PP_PASS_I, PP_PART_BLOCK);
    EXPECT(i.kernels == 9, "%d kernels", i.kernels);
    EXPECT_NEAR(i.ms, 9 * g.launch_us * 1e-3, 1e-12, 1e-9);
}

/* The work of one block's pass at shape s under one environment switch (NULL: none). */
static pp_work_t block_with(const pp_model_shape_t *s, pp_pass_t pass, const char *var,
                            const char *value)
{
    if (var) setenv(var, value, 1);
    pp_work_t w = cost_part(s, PP_DTYPE_BF16, gpu_find("h100"), pass, PP_PART_BLOCK);
    if (var) unsetenv(var);
    return w;
}

/* The column sums at the reference shape (C 1024, 16 heads, T 1024, B 4), path by path as
 * stage.cu chooses them: what I writes for W, what W's colsum_bwd reads, the launches. */
static void test_column_sums(void)
{
    pp_model_shape_t s;
    memset(&s, 0, sizeof s);
    s.hidden = 1024, s.heads = 16, s.seq_len = 1024, s.batch = 4, s.vocab = 50257;
    s.n_layers = 1, s.total_layers = 6;
    const double N = 4096, C = 1024, MiB = 1 << 20;
    /* the weight GEMMs: bf16 activations 16 NC, fp32 accumulators 12 C^2 read and written */
    const double gemms = 2 * 16 * N * C + 8 * 12 * C * C;
    /* the partials: 4 x 8 row blocks of 3072 columns; 128 chunks of 32 rows, 3 x 1024 columns */
    const double qs = 384 * 1024, ls = 1.5 * MiB;
    EXPECT_NEAR(qkv_sum_bytes(&s), qs, 0, 0);
    EXPECT_NEAR(ln_sum_bytes(&s), ls, 0, 0);
    pp_work_t i0 = block_with(&s, PP_PASS_I, NULL, NULL);
    pp_work_t w0 = block_with(&s, PP_PASS_W, NULL, NULL);
    /* the default: d_fc (32 MiB) and the three partial sums */
    EXPECT_NEAR(w0.bytes - gemms, 32 * MiB + qs + 2 * ls, 0, 1e-12);
    EXPECT(i0.kernels == 8 && w0.kernels == 6, "%d %d", i0.kernels, w0.kernels);
    /* PPSCHED_LAYERNORM_BWD=unfused: W reads d_ln2, x2, dout, d_ln1, x, d_x2 and 4 statistics */
    pp_work_t i = block_with(&s, PP_PASS_I, "PPSCHED_LAYERNORM_BWD", "unfused");
    pp_work_t w = block_with(&s, PP_PASS_W, "PPSCHED_LAYERNORM_BWD", "unfused");
    EXPECT_NEAR(i.bytes, i0.bytes - 2 * ls, 0, 1e-12);
    EXPECT_NEAR(w.bytes - gemms, 2 * 10 * N * C + 4 * 4 * N + qs, 0, 1e-12);
    EXPECT(i.kernels == 8 && w.kernels == 6, "%d %d", i.kernels, w.kernels);
    /* PPSCHED_FLASH_BWD=unfused or PPSCHED_FLASH_TILE=64: the dot kernel again, W reads d_qkv */
    const char *flash[2][2] = {{"PPSCHED_FLASH_BWD", "unfused"}, {"PPSCHED_FLASH_TILE", "64"}};
    for (int k = 0; k < 2; k++) {
        i = block_with(&s, PP_PASS_I, flash[k][0], flash[k][1]);
        w = block_with(&s, PP_PASS_W, flash[k][0], flash[k][1]);
        EXPECT_NEAR(i.bytes, i0.bytes - qs, 0, 1e-12);
        EXPECT_NEAR(w.bytes - gemms, 2 * 7 * N * C + 2 * ls, 0, 1e-12);
        EXPECT(i.kernels == 9 && w.kernels == 6, "%s: %d %d", flash[k][0], i.kernels, w.kernels);
    }
    /* PPSCHED_WGRAD=unfused: two flash kernels, no partial sums written; six reductions */
    i = block_with(&s, PP_PASS_I, "PPSCHED_WGRAD", "unfused");
    w = block_with(&s, PP_PASS_W, "PPSCHED_WGRAD", "unfused");
    EXPECT_NEAR(i.bytes, i0.bytes - qs - 2 * ls, 0, 1e-12);
    EXPECT_NEAR(w.bytes - gemms, 2 * (1 + 4 + 2 + 1 + 3 + 2) * N * C + 4 * 4 * N, 0, 1e-12);
    EXPECT(i.kernels == 8 && w.kernels == 10, "%d %d", i.kernels, w.kernels);
    /* both sums back in W: every gradient tensor read again */
    setenv("PPSCHED_FLASH_BWD", "unfused", 1);
    w = block_with(&s, PP_PASS_W, "PPSCHED_LAYERNORM_BWD", "unfused");
    unsetenv("PPSCHED_FLASH_BWD");
    EXPECT_NEAR(w.bytes - gemms, 2 * 13 * N * C + 4 * 4 * N, 0, 1e-12);
    /* d = 128 (8 heads): no flash column sums, three flash kernels */
    s.heads = 8;
    i = block_with(&s, PP_PASS_I, NULL, NULL);
    w = block_with(&s, PP_PASS_W, NULL, NULL);
    EXPECT_NEAR(i.bytes, i0.bytes - qs, 0, 1e-12);
    EXPECT_NEAR(w.bytes - gemms, 2 * 7 * N * C + 2 * ls, 0, 1e-12);
    EXPECT(i.kernels == 9 && w.kernels == 6, "%d %d", i.kernels, w.kernels);
    /* the unfused attention: 13 kernels, the LayerNorm sums still taken in I */
    i = block_with(&s, PP_PASS_I, "PPSCHED_ATTENTION", "unfused");
    w = block_with(&s, PP_PASS_W, "PPSCHED_ATTENTION", "unfused");
    EXPECT_NEAR(w.bytes - gemms, 2 * 7 * N * C + 2 * ls, 0, 1e-12);
    EXPECT(i.kernels == 13 && w.kernels == 6, "%d %d", i.kernels, w.kernels);
}

static void test_stage_composition(void)
{
    const pp_gpu_t *g = gpu_find("h100");
    pp_model_shape_t s = random_shape();
    for (int p = 0; p < PP_PASS_COUNT; p++) {
        double blk = cost_part(&s, PP_DTYPE_BF16, g, (pp_pass_t)p, PP_PART_BLOCK).ms;
        double emb = cost_part(&s, PP_DTYPE_BF16, g, (pp_pass_t)p, PP_PART_EMBED).ms;
        double head = cost_part(&s, PP_DTYPE_BF16, g, (pp_pass_t)p, PP_PART_HEAD).ms;
        s.is_first = s.is_last = 0;
        EXPECT_NEAR(cost_stage_ms(&s, PP_DTYPE_BF16, g, NULL, (pp_pass_t)p), s.n_layers * blk, 0,
                    1e-12);
        s.is_first = 1;
        EXPECT_NEAR(cost_stage_ms(&s, PP_DTYPE_BF16, g, NULL, (pp_pass_t)p), s.n_layers * blk + emb,
                    0, 1e-12);
        s.is_first = 0;
        s.is_last = 1;
        EXPECT_NEAR(cost_stage_ms(&s, PP_DTYPE_BF16, g, NULL, (pp_pass_t)p),
                    s.n_layers * blk + head, 0, 1e-12);
        s.is_last = 0;
    }
}

/* Every model key, one at a time: more never costs less, and F, I, W each grow with it. */
static void test_monotonic(void)
{
    const pp_gpu_t *g = gpu_find("h200");
    for (int rep = 0; rep < 10; rep++) {
        pp_model_shape_t base = random_shape();
        base.is_first = base.is_last = 1;
        for (int key = 0; key < 5; key++) {
            pp_model_shape_t more = base;
            switch (key) {
            case 0: more.n_layers += ts_rand_int(1, 4); break;
            case 1: more.heads += ts_rand_int(1, 4), more.hidden = 64 * more.heads; break;
            case 2: more.seq_len += 64 * ts_rand_int(1, 4); break;
            case 3: more.vocab += ts_rand_int(1, 10000); break;
            default: more.batch += ts_rand_int(1, 4); break;
            }
            for (int p = 0; p < PP_PASS_COUNT; p++) {
                double a = cost_stage_ms(&base, PP_DTYPE_BF16, g, NULL, (pp_pass_t)p);
                double b = cost_stage_ms(&more, PP_DTYPE_BF16, g, NULL, (pp_pass_t)p);
                EXPECT(b >= a, "key %d pass %d: %g ms -> %g ms", key, p, a, b);
            }
        }
    }
}

/* Near 2^31 tokens a micro-batch (2047 and 2048 x 1M) the model counts in 64 bits: one more
 * sequence costs about 1/2047 more in every pass (an int sum wrapped and made 2047's I and W
 * 170 and 130 000 times too long). The resolve step refuses such shapes for the GPU kernels; the
 * model still prices them right. */
static void test_tokens_past_int(void)
{
    const pp_gpu_t *g = gpu_find("h100");
    pp_model_shape_t s = {0};
    s.hidden = 1024, s.heads = 16, s.seq_len = 1 << 20, s.vocab = 8192, s.n_layers = 6;
    s.total_layers = 24, s.is_first = s.is_last = 1;
    for (int p = 0; p < PP_PASS_COUNT; p++) {
        s.batch = 2047;
        double a = cost_stage_ms(&s, PP_DTYPE_BF16, g, NULL, (pp_pass_t)p);
        s.batch = 2048;
        double b = cost_stage_ms(&s, PP_DTYPE_BF16, g, NULL, (pp_pass_t)p);
        EXPECT(b >= a && b / a < 1.0 + 2.0 / 2047, "pass %d: %g ms at 2047, %g ms at 2048", p, a,
               b);
    }
}

/* run.recompute: none adds nothing; full re-runs the block forward but its fc2 GEMM in I (and in a
 * W apart from I; once in B); selective rebuilds LayerNorms and GELU before W. */
static void test_recompute(void)
{
    pp_gpu_t g = gpu_flops_only();
    pp_model_shape_t s = random_shape();
    pp_stage_cfg_t c = {0};
    c.hidden = s.hidden, c.heads = s.heads, c.seq_len = s.seq_len, c.vocab = s.vocab;
    c.micro_batch_size = s.batch, c.n_layers = s.n_layers, c.dtype = PP_DTYPE_BF16;
    double in, w;
    cost_recompute_ms(&c, &g, NULL, &in, &w);
    EXPECT(in == 0 && w == 0, "none: %g %g", in, w);
    c.recompute = PP_RECOMPUTE_FULL;
    cost_recompute_ms(&c, &g, NULL, &in, &w);
    double N = (double)s.batch * s.seq_len, C = s.hidden, T = s.seq_len;
    double P = g.bf16_tflops * 1e12;
    double want = 1e3 * s.n_layers *
                  (16 * N * C * C / (P * g.gemm_eff) + 2 * N * T * C / (P * g.attn[0].fwd_eff));
    EXPECT_NEAR(in, want, 1e-12, 1e-9);
    EXPECT_NEAR(w, want, 1e-12, 1e-9);
    c.recompute = PP_RECOMPUTE_SELECTIVE;
    cost_recompute_ms(&c, &g, NULL, &in, &w);
    EXPECT(in == 0 && w > 0, "selective, fused attention: %g %g", in, w);
}

/* Attention is priced at its head dimension's row: d = 64 at the first (the rate the reference
 * shape was fitted with, unchanged), d = 128 at the second, each pass at its own (the forward
 * kernel in F, the backward's in I); a head dimension between or past the rows takes the row at or
 * below it. */
static void test_attention_by_head_dim(void)
{
    pp_gpu_t g = gpu_flops_only();
    for (int rep = 0; rep < 10; rep++) {
        pp_model_shape_t s = random_shape();
        const double P = g.bf16_tflops * 1e12;
        for (int k = 0; k < PP_GPU_ATTN_ROWS; k++) {
            s.hidden = g.attn[k].head_dim * s.heads;
            const double N = (double)s.batch * s.seq_len, C = s.hidden, T = s.seq_len;
            pp_work_t f = cost_part(&s, PP_DTYPE_BF16, &g, PP_PASS_F, PP_PART_BLOCK);
            pp_work_t i = cost_part(&s, PP_DTYPE_BF16, &g, PP_PASS_I, PP_PART_BLOCK);
            EXPECT_NEAR(
                f.ms,
                1e3 * (24 * N * C * C / (P * g.gemm_eff) + 2 * N * T * C / (P * g.attn[k].fwd_eff)),
                1e-12, 1e-9);
            EXPECT_NEAR(
                i.ms,
                1e3 * (24 * N * C * C / (P * g.gemm_eff) + 7 * N * T * C / (P * g.attn[k].bwd_eff)),
                1e-12, 1e-9);
        }
    }
    EXPECT(g.attn[0].head_dim == 64 && g.attn[1].head_dim == 128, "rows %d, %d", g.attn[0].head_dim,
           g.attn[1].head_dim);
    const int d[] = {32, 64, 96, 128, 256}, row[] = {0, 0, 0, 1, 1};
    for (int k = 0; k < 5; k++) {
        EXPECT(gpu_attn_eff(&g, d[k], 0, 0) == g.attn[row[k]].fwd_eff, "d = %d forward", d[k]);
        EXPECT(gpu_attn_eff(&g, d[k], 1, 0) == g.attn[row[k]].bwd_eff, "d = %d backward", d[k]);
        EXPECT(gpu_attn_eff(&g, d[k], 1, 1) == g.attn[row[k]].bwd_eff, "d = %d: no wgmma rate",
               d[k]);
    }
    /* the shipped Hopper rows: d = 64 as fitted before; d = 128's backward faster, its forward not
     */
    const pp_gpu_t *h = gpu_find("h200");
    EXPECT(h->attn[0].fwd_eff == 0.20 && h->attn[0].bwd_eff == 0.20, "%g %g", h->attn[0].fwd_eff,
           h->attn[0].bwd_eff);
    EXPECT(h->attn[1].bwd_eff > h->attn[0].bwd_eff && h->attn[1].fwd_eff == h->attn[0].fwd_eff);
}

/* On a GPU with warpgroup-MMA kernels (Hopper) the forward takes their rate at every head
 * dimension, the backward where it asks no column sums (d = 128 in a stage; d = 64 under
 * PPSCHED_WGRAD=unfused), and PPSCHED_FLASH_MMA=sync puts every pass back on the mma.sync rates;
 * a GPU without them (A100) prices mma.sync whatever the switch. */
static void test_attention_wgmma(void)
{
    pp_gpu_t g = gpu_flops_only();
    for (int k = 0; k < PP_GPU_ATTN_ROWS; k++) {
        g.attn[k].fwd_wgmma = ts_rand_uniform(0.3, 0.6);
        g.attn[k].bwd_wgmma = ts_rand_uniform(0.3, 0.6);
    }
    const double P = g.bf16_tflops * 1e12;
    for (int rep = 0; rep < 10; rep++) {
        pp_model_shape_t s = random_shape();
        for (int k = 0; k < PP_GPU_ATTN_ROWS; k++) {
            s.hidden = g.attn[k].head_dim * s.heads;
            const double N = (double)s.batch * s.seq_len, C = s.hidden, T = s.seq_len;
            const double gemm_f = 24 * N * C * C / (P * g.gemm_eff);
            for (int sync = 0; sync < 2; sync++) {
                if (sync)
                    setenv("PPSCHED_FLASH_MMA", "sync", 1);
                else
                    unsetenv("PPSCHED_FLASH_MMA");
                const double fe = sync ? g.attn[k].fwd_eff : g.attn[k].fwd_wgmma;
                /* d = 64's stage asks the column sums: its backward stays mma.sync */
                const double be = sync || k == 0 ? g.attn[k].bwd_eff : g.attn[k].bwd_wgmma;
                pp_work_t f = cost_part(&s, PP_DTYPE_BF16, &g, PP_PASS_F, PP_PART_BLOCK);
                pp_work_t i = cost_part(&s, PP_DTYPE_BF16, &g, PP_PASS_I, PP_PART_BLOCK);
                EXPECT_NEAR(f.ms, 1e3 * (gemm_f + 2 * N * T * C / (P * fe)), 1e-12, 1e-9);
                EXPECT_NEAR(i.ms, 1e3 * (gemm_f + 7 * N * T * C / (P * be)), 1e-12, 1e-9);
            }
            unsetenv("PPSCHED_FLASH_MMA");
        }
    }
    const pp_gpu_t *a = gpu_find("a100"), *h = gpu_find("h100");
    for (int k = 0; k < PP_GPU_ATTN_ROWS; k++) {
        EXPECT(a->attn[k].fwd_wgmma == 0 && a->attn[k].bwd_wgmma == 0, "a100 row %d", k);
        EXPECT(h->attn[k].fwd_wgmma > h->attn[k].fwd_eff &&
                   h->attn[k].bwd_wgmma > h->attn[k].bwd_eff,
               "h100 row %d", k);
    }
}

/* A random stage's configuration (the fused attention's shapes), bf16, no optimizer. */
static pp_stage_cfg_t random_stage(void)
{
    pp_model_shape_t s = random_shape();
    pp_stage_cfg_t c;
    memset(&c, 0, sizeof c);
    c.hidden = s.hidden, c.heads = s.heads, c.seq_len = s.seq_len, c.vocab = s.vocab;
    c.micro_batch_size = s.batch, c.n_layers = s.n_layers, c.total_layers = s.total_layers;
    c.is_first = ts_rand_int(0, 1), c.is_last = ts_rand_int(0, 1), c.dtype = PP_DTYPE_BF16;
    return c;
}

/* The step's head and tail of a stage (cost_stage_tail): the gradients (and the loss
 * accumulator's 4 bytes) zeroed, whatever the optimizer; AdamW's 30 bytes a bf16 parameter (28 in
 * fp32, where the master is the parameter) at the HBM rate, none without an optimizer, the
 * replica's 1/d under zero1; at least a launch floor a memset, a tensor, a piece of a tensor. */
static void test_stage_tail(void)
{
    for (int rep = 0; rep < 10; rep++) {
        pp_stage_cfg_t c = random_stage();
        pp_gpu_t g = *gpu_find("h200");
        g.launch_us = 0;
        g.hbm_gbps = ts_rand_uniform(1000, 8000);
        const double bw = g.hbm_gbps * 1e6 * g.bw_eff; /* bytes a ms */
        const double P = (double)stage_param_count(&c);
        double head, tail, head2, whole, part;
        cost_stage_tail(&c, &g, &head, &tail);
        EXPECT_NEAR(head, ((double)stage_grad_bytes(&c) + 4) / bw, 0, 1e-12);
        EXPECT(tail == 0, "no optimizer: %g", tail);
        c.with_optimizer = 1;
        cost_stage_tail(&c, &g, &head2, &whole);
        EXPECT(head2 == head, "the zeroing does not depend on the optimizer");
        EXPECT_NEAR(whole, 30 * P / bw, 0, 1e-12);
        c.dtype = PP_DTYPE_FP32;
        cost_stage_tail(&c, &g, &head2, &tail);
        EXPECT_NEAR(tail, 28 * P / bw, 0, 1e-12);
        c.dtype = PP_DTYPE_BF16;
        /* zero1 over 4 replicas, in buckets of a quarter of the stage or in one */
        c.optimizer_shards = 4;
        c.shard_bucket = ts_rand_int(0, 1) ? stage_grad_bytes(&c) / sizeof(float) / 4 : 0;
        REQUIRE(stage_shard_values(&c) > 0);
        cost_stage_tail(&c, &g, &head2, &part);
        EXPECT(head2 == head, "every replica zeroes all its gradients");
        EXPECT_NEAR(part, whole / 4, 0, 0.02); /* the padding between tensors aside */
        c.optimizer_shards = 1, c.shard_bucket = 0;
        /* the floor: two memsets, a launch a tensor */
        g.launch_us = ts_rand_uniform(1, 20);
        g.hbm_gbps = 1e30;
        pp_model_shape_t sh = stage_shape_of(&c);
        cost_stage_tail(&c, &g, &head, &tail);
        EXPECT_NEAR(head, 2 * g.launch_us * 1e-3, 0, 1e-12);
        EXPECT_NEAR(tail, model_tensor_count(&sh) * g.launch_us * 1e-3, 0, 1e-12);
    }
    /* the 7B-class first stage on an H200 (8 blocks and the embedding, 1.74 G parameters, AdamW):
     * 16.7 ms of zeroing and AdamW measured after its last op on 4x H200 (bench/NOTES.md, "The
     * optimizer at the 7B-class shape") */
    pp_stage_cfg_t c;
    memset(&c, 0, sizeof c);
    c.hidden = 4096, c.heads = 32, c.seq_len = 4096, c.vocab = 32000, c.micro_batch_size = 1;
    c.n_layers = 8, c.total_layers = 32, c.is_first = 1, c.dtype = PP_DTYPE_BF16;
    c.with_optimizer = 1;
    double head, tail;
    cost_stage_tail(&c, gpu_find("h200"), &head, &tail);
    EXPECT(head + tail > 0.85 * 16.7 && head + tail < 1.05 * 16.7, "%g + %g ms", head, tail);
}

/* A plan's cost model carries each stage's head and tail, on the GPU description or with a
 * profile, never hand-set: the tail is AdamW's where the job has it and 0 where it has none, a
 * zero1 replica's about half of it at d = 2. The optimizer lengthens the step, never the ops'
 * makespan, so the bubble of a run is the same with and without it. */
static void test_model_tails(void)
{
    const char *const cases[3][3] = {
        {"run.optimizer=none"},
        {"run.optimizer=adamw"},
        {"run.optimizer=adamw", "pipeline.devices=8", "pipeline.data_parallel=2"}};
    const char *yaml = "pipeline: {devices: 4, micro_batches: 8}\nschedule: {kind: 1f1b}\n"
                       "run: {optimizer_sharding: zero1}\ncost: {gpu: h200}\n";
    double step[2], span[2], tail[4];
    for (int k = 0; k < 3; k++) {
        pp_job_t cfg;
        pp_schedule_t sch;
        pp_plan_t plan;
        pp_cost_model_t cm;
        REQUIRE(ts_load_job(&cfg, yaml, cases[k], k == 2 ? 3 : 1, -1) == PP_OK);
        REQUIRE(generate_schedule(&sch, &cfg) == PP_OK && plan_lower(&plan, &sch, &cfg) == PP_OK);
        REQUIRE(plan.n_stages == 4);
        REQUIRE(cost_model_build(&cm, &cfg, &plan, NULL, NULL, NULL) == PP_OK);
        for (int s = 0; s < plan.n_stages; s++) {
            pp_stage_cfg_t c;
            double head, t;
            plan_stage_cfg(&c, &cfg, &plan, s);
            cost_stage_tail(&c, gpu_find("h200"), &head, &t);
            EXPECT(cm.head[s] == head && cm.tail[s] == t && head > 0, "case %d stage %d", k, s);
            EXPECT((t > 0) == (k > 0), "case %d stage %d: tail %g", k, s, t);
            if (k == 1) tail[s] = t;
            if (k == 2) /* zero1 over 2 replicas: half, and a launch floor a piece of a tensor */
                EXPECT(2 * t > tail[s] && 2 * t < 1.1 * tail[s], "stage %d: %g of %g", s, t,
                       tail[s]);
        }
        if (k < 2) {
            pp_timeline_t tl;
            REQUIRE(simulate_plan(&tl, &plan, &cm) == PP_OK);
            step[k] = tl.step_ms[0], span[k] = timeline_makespan(&tl);
            timeline_free(&tl);
        }
        cost_model_free(&cm);
        plan_free(&plan);
        schedule_free(&sch);
        job_free(&cfg);
    }
    EXPECT(span[0] == span[1] && step[1] > step[0] && step[0] > span[0],
           "makespan %.17g and %.17g, step %g without the optimizer, %g with it", span[0], span[1],
           step[0], step[1]);
    /* 1F1B's last op is device 0's: the step ends with its tail */
    EXPECT_NEAR(step[1] - step[0], tail[0], 1e-9, 0);
    /* hand-set costs: neither */
    pp_job_t cfg;
    pp_schedule_t sch;
    pp_plan_t plan;
    pp_cost_model_t cm;
    const char *hand[] = {"cost.forward=1", "run.optimizer=adamw"};
    REQUIRE(ts_load_job(&cfg, yaml, hand, 2, -1) == PP_OK);
    REQUIRE(generate_schedule(&sch, &cfg) == PP_OK && plan_lower(&plan, &sch, &cfg) == PP_OK);
    REQUIRE(cost_model_build(&cm, &cfg, &plan, NULL, NULL, NULL) == PP_OK);
    for (int s = 0; s < plan.n_stages; s++)
        EXPECT(cm.head[s] == 0 && cm.tail[s] == 0, "hand-set stage %d", s);
    cost_model_free(&cm);
    plan_free(&plan);
    schedule_free(&sch);
    job_free(&cfg);
}

static void test_tables(void)
{
    EXPECT(gpu_find("H100") == gpu_find("h100") && gpu_find("h100") != NULL);
    EXPECT(gpu_find("h300") == NULL);
    EXPECT(gpu_match_device("NVIDIA H100 80GB HBM3") == gpu_find("h100"));
    EXPECT(gpu_match_device("NVIDIA H200") == gpu_find("h200"));
    EXPECT(gpu_match_device("NVIDIA A100-SXM4-80GB") == gpu_find("a100"));
    EXPECT(gpu_match_device("Tesla T4") == NULL);
    for (int i = 0; i < gpu_count(); i++) {
        const pp_gpu_t *g = gpu_at(i);
        EXPECT(g->bf16_tflops > g->fp32_tflops && g->hbm_gbps > 0 && g->mem_gib > 0, "%s", g->name);
        EXPECT(g->gemm_eff > 0 && g->gemm_eff <= 1 && g->bw_eff > 0 && g->bw_eff <= 1, "%s",
               g->name);
    }
    char names[256];
    gpu_names(names, sizeof names);
    EXPECT(strcmp(names, "a100, h100, h200, b200") == 0, "%s", names);
    const pp_link_desc_t *l = link_find("nvlink-peer");
    REQUIRE(l != NULL);
    double bytes = ts_rand_uniform(1e3, 1e9);
    EXPECT_NEAR(link_time_ms(l, bytes), l->latency_us * 1e-3 + bytes / (l->gbps * 1e6), 0, 1e-12);
    /* 8 MiB over the peer copy: 24 us measured on H200 */
    EXPECT_NEAR(link_time_ms(l, 8 << 20), 0.024, 0.002, 0);
}

/* A job of the reference model on p devices with `chunks` stages each, lowered. */
static void make_plan(pp_job_t *cfg, pp_schedule_t *sch, pp_plan_t *plan, int p, int chunks)
{
    char yaml[256];
    snprintf(yaml, sizeof yaml,
             "pipeline: {devices: %d, chunks: %d, micro_batches: 8}\nschedule: {kind: %s}\n", p,
             chunks, chunks > 1 ? "interleaved-1f1b" : "1f1b");
    if (ts_load_job(cfg, yaml, NULL, 0, -1) != PP_OK || generate_schedule(sch, cfg) != PP_OK ||
        plan_lower(plan, sch, cfg) != PP_OK)
        abort();
}

static void test_model_build(void)
{
    pp_job_t cfg;
    pp_schedule_t sch;
    pp_plan_t plan;
    pp_cost_model_t cm;
    pp_cost_source_t src;
    make_plan(&cfg, &sch, &plan, 4, 2);
    REQUIRE(cost_model_build(&cm, &cfg, &plan, NULL, NULL, &src) == PP_OK);
    EXPECT(src == PP_COST_GPU && cm.n_stages == 8);
    const pp_gpu_t *h100 = gpu_find("h100");
    for (int s = 0; s < 8; s++) {
        pp_model_shape_t sh = cost_stage_shape(&cfg, &plan, s);
        EXPECT(sh.n_layers == 3 && sh.is_first == (s == 0) && sh.is_last == (s == 7));
        EXPECT_NEAR(cm.f[s], cost_stage_ms(&sh, PP_DTYPE_BF16, h100, NULL, PP_PASS_F), 0, 1e-12);
        EXPECT_NEAR(cm.b[s], cm.i[s] + cm.w[s], 0, 1e-12);
    }
    EXPECT(cm.f[7] > cm.f[3] && cm.f[0] > cm.f[3], "first and last cost more than a middle one");
    EXPECT_NEAR(cm.send, link_time_ms(link_find("nvlink-peer"), (double)plan.boundary_bytes), 0,
                1e-12);
    cost_model_free(&cm);
    /* `present` and cost.gpu pick the row; cost.gpu wins */
    REQUIRE(cost_model_build(&cm, &cfg, &plan, gpu_find("a100"), NULL, NULL) == PP_OK);
    double a100 = cm.f[3];
    cost_model_free(&cm);
    snprintf(cfg.cost_src.gpu, sizeof cfg.cost_src.gpu, "b200");
    REQUIRE(cost_model_build(&cm, &cfg, &plan, gpu_find("a100"), NULL, NULL) == PP_OK);
    EXPECT(cm.f[3] < a100, "b200 %g ms, a100 %g ms", cm.f[3], a100);
    cost_model_free(&cm);
    plan_free(&plan);
    schedule_free(&sch);
    job_free(&cfg);
}

/* Under auto with two processes of two devices each on two hosts, the boundary between them goes
 * over nccl and the others over peer: each transfer is priced by its own transport's link row,
 * `send` is the slower, the simulated transfers take each its own, and the description names both.
 * With cost.link set, every transport takes that link. */
static void test_model_per_transport(void)
{
    pp_job_t cfg;
    pp_schedule_t sch;
    pp_plan_t plan;
    pp_cost_model_t cm;
    REQUIRE(ts_load_job(&cfg, "pipeline: {devices: 4, micro_batches: 4}\n", NULL, 0, -1) == PP_OK);
    EXPECT(cfg.pipeline.transport == PP_TRANSPORT_AUTO);
    cfg.procs.n_procs = cfg.procs.n_hosts = 2;
    for (int d = 0; d < 4; d++)
        cfg.procs.rank_of[d] = cfg.procs.host_of[d] = d / 2;
    REQUIRE(generate_schedule(&sch, &cfg) == PP_OK && plan_lower(&plan, &sch, &cfg) == PP_OK);
    REQUIRE(cost_model_build(&cm, &cfg, &plan, NULL, NULL, NULL) == PP_OK);
    const double bytes = (double)plan.boundary_bytes;
    const double peer = link_time_ms(link_find("nvlink-peer"), bytes),
                 nccl = link_time_ms(link_find("nvlink-nccl"), bytes);
    EXPECT(peer != nccl, "the test needs two link rows of different speeds");
    EXPECT_NEAR(cost_model_send(&cm, PP_TRANSPORT_PEER), peer, 0, 1e-12);
    EXPECT_NEAR(cost_model_send(&cm, PP_TRANSPORT_NCCL), nccl, 0, 1e-12);
    EXPECT_NEAR(cm.send, peer > nccl ? peer : nccl, 0, 1e-12);
    pp_timeline_t tl;
    REQUIRE(simulate_plan(&tl, &plan, &cm) == PP_OK);
    int seen[PP_TRANSPORT_COUNT] = {0};
    for (int k = 0; k < plan.n_ops; k++) {
        const pp_op_t *o = &plan.ops[k];
        if (o->role != PP_ROLE_SEND) continue;
        int cross = o->device / 2 != plan.ops[o->peer].device / 2;
        EXPECT(o->link == (cross ? PP_TRANSPORT_NCCL : PP_TRANSPORT_PEER), "op %d: %s", k,
               transport_name(o->link));
        EXPECT_NEAR(tl.t[k].end_ms - tl.t[k].start_ms, cross ? nccl : peer, 1e-9, 1e-9);
        seen[o->link] = 1;
    }
    EXPECT(seen[PP_TRANSPORT_PEER] && seen[PP_TRANSPORT_NCCL]);
    char desc[512];
    cost_model_describe(desc, sizeof desc, &cm, &cfg, &plan, PP_COST_GPU, gpu_find("h100"), NULL);
    EXPECT(strstr(desc, "(peer),") && strstr(desc, "(nccl)"), "%s", desc);
    timeline_free(&tl);
    cost_model_free(&cm);
    /* cost.link prices every transport */
    snprintf(cfg.cost_src.link, sizeof cfg.cost_src.link, "pcie");
    REQUIRE(cost_model_build(&cm, &cfg, &plan, NULL, NULL, NULL) == PP_OK);
    double pcie = link_time_ms(link_find("pcie"), bytes);
    EXPECT_NEAR(cost_model_send(&cm, PP_TRANSPORT_PEER), pcie, 0, 1e-12);
    EXPECT_NEAR(cost_model_send(&cm, PP_TRANSPORT_NCCL), pcie, 0, 1e-12);
    cost_model_describe(desc, sizeof desc, &cm, &cfg, &plan, PP_COST_GPU, gpu_find("h100"), NULL);
    EXPECT(!strstr(desc, "(peer)"), "one figure for every transfer: %s", desc);
    cost_model_free(&cm);
    /* one process: every boundary peer, as before auto */
    cfg.cost_src.link[0] = '\0';
    memset(&cfg.procs, 0, sizeof cfg.procs);
    plan_free(&plan);
    REQUIRE(plan_lower(&plan, &sch, &cfg) == PP_OK);
    REQUIRE(cost_model_build(&cm, &cfg, &plan, NULL, NULL, NULL) == PP_OK);
    EXPECT_NEAR(cm.send, peer, 0, 1e-12);
    cost_model_free(&cm);
    plan_free(&plan);
    schedule_free(&sch);
    job_free(&cfg);
}

static void test_hand_set_overrides(void)
{
    pp_job_t cfg;
    const char *yaml = "pipeline: {devices: 2, chunks: 2, micro_batches: 4}\n"
                       "schedule: {kind: interleaved-1f1b}\n"
                       "cost: {gpu: h200, forward: 2.5, backward_input: 3, backward_weight: 1}\n";
    REQUIRE(ts_load_job(&cfg, yaml, NULL, 0, -1) == PP_OK);
    EXPECT(cfg.cost_hand_set && strcmp(cfg.cost_src.gpu, "h200") == 0);
    pp_schedule_t sch;
    pp_plan_t plan;
    REQUIRE(generate_schedule(&sch, &cfg) == PP_OK && plan_lower(&plan, &sch, &cfg) == PP_OK);
    pp_cost_model_t cm;
    pp_cost_source_t src;
    REQUIRE(cost_model_build(&cm, &cfg, &plan, NULL, NULL, &src) == PP_OK);
    /* per device's share: a chunk of a v = 2 device costs half */
    EXPECT(src == PP_COST_HAND && cm.f[0] == 1.25 && cm.i[1] == 1.5 && cm.b[3] == 2.0);
    cost_model_free(&cm);
    plan_free(&plan);
    schedule_free(&sch);
    job_free(&cfg);
    REQUIRE(ts_load_job(&cfg, "cost: {gpu: h200}\n", NULL, 0, -1) == PP_OK);
    EXPECT(!cfg.cost_hand_set);
    job_free(&cfg);
}

static void test_config_errors(void)
{
    pp_config_t cfg;
    ts_capture_begin();
    pp_status_t st = config_load_string(&cfg, "t.yaml", "cost:\n  gpu: h300\n", NULL, 0);
    const char *got = ts_capture_end();
    TS_EXPECT_REJECT(st, got,
                     "t.yaml:2:8: cost.gpu: unknown GPU 'h300' (allowed: a100, h100, "
                     "h200, b200)");
    config_free(&cfg);
    const char *sets[] = {"cost.link=carrier-pigeon"};
    ts_capture_begin();
    st = config_load_string(&cfg, "t.yaml", "name: x\n", sets, 1);
    got = ts_capture_end();
    TS_EXPECT_REJECT(st, got,
                     "--set cost.link=carrier-pigeon: unknown link 'carrier-pigeon' "
                     "(allowed: nvlink-peer, nvlink-nccl, pcie, host, ib)");
    config_free(&cfg);
    ts_capture_begin();
    st = config_load_string(&cfg, "t.yaml", "cost: {profile: /nonexistent/p.yaml}\n", NULL, 0);
    got = ts_capture_end();
    TS_EXPECT_REJECT(st, got,
                     "t.yaml:1:17: cost.profile: cannot open /nonexistent/p.yaml: No such "
                     "file or directory (allowed: a profile written by `ppsched profile`, "
                     "relative to the YAML's folder)");
    config_free(&cfg);
}

static void test_profile_calibration(void)
{
    double factor[PP_PASS_COUNT][PP_PART_COUNT];
    for (int p = 0; p < PP_PASS_COUNT; p++)
        for (int q = 0; q < PP_PART_COUNT; q++)
            factor[p][q] = ts_rand_uniform(0.5, 2.0);
    factor[PP_PASS_I][PP_PART_EMBED] = 1.0; /* the embedding has no I pass */
    pp_profile_t prof;
    ts_profile_fake(&prof, factor);
    profile_calibrate(&prof);
    for (int p = 0; p < PP_PASS_COUNT; p++)
        for (int q = 0; q < PP_PART_COUNT; q++)
            EXPECT_NEAR(prof.factor[p][q], factor[p][q], 1e-9, 1e-9);
    /* at another shape: the model's ratio times the factor */
    pp_model_shape_t s = random_shape();
    s.is_first = 1;
    const pp_gpu_t *g = gpu_find("h200");
    for (int p = 0; p < PP_PASS_COUNT; p++) {
        double want =
            s.n_layers * factor[p][0] *
                cost_part(&s, PP_DTYPE_BF16, g, (pp_pass_t)p, PP_PART_BLOCK).ms +
            factor[p][1] * cost_part(&s, PP_DTYPE_BF16, g, (pp_pass_t)p, PP_PART_EMBED).ms;
        EXPECT_NEAR(cost_stage_ms(&s, PP_DTYPE_BF16, g, &prof, (pp_pass_t)p), want, 0, 1e-12);
    }
    /* sends: the line through the two points */
    double slope = (0.024 - 0.005) / (7 << 20);
    EXPECT_NEAR(profile_send_ms(&prof, 4 << 20), 0.005 + slope * (3 << 20), 1e-12, 1e-9);
}

static void test_profile_round_trip(void)
{
    double ones[PP_PASS_COUNT][PP_PART_COUNT] = {{1.1, 0.9, 1.3}, {1.2, 1, 0.8}, {0.7, 1.5, 1.1}};
    pp_profile_t a, b;
    ts_profile_fake(&a, ones);
    a.stage_bytes[PP_PROF_LAST] = 1.5e9;
    char path[] = "/tmp/ppsched_profile_XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    FILE *f = fdopen(fd, "w");
    REQUIRE(profile_write(&a, f) == PP_OK);
    fclose(f);
    REQUIRE(profile_load(&b, path) == PP_OK);
    EXPECT(strcmp(a.device, b.device) == 0 && strcmp(a.gpu, b.gpu) == 0);
    EXPECT(strcmp(a.date, b.date) == 0 && b.dtype == PP_DTYPE_BF16);
    EXPECT(a.shape.hidden == b.shape.hidden && a.shape.heads == b.shape.heads &&
           a.shape.seq_len == b.shape.seq_len && a.shape.vocab == b.shape.vocab &&
           a.shape.batch == b.shape.batch && a.shape.n_layers == b.shape.n_layers);
    for (int k = 0; k < PP_PROF_STAGE_COUNT; k++)
        for (int p = 0; p < PP_PASS_COUNT; p++)
            EXPECT_NEAR(b.ms[k][p], a.ms[k][p], 0, 1e-5);
    EXPECT(b.n_sends == 2 && b.stage_bytes[PP_PROF_LAST] == 1.5e9);
    EXPECT_NEAR(b.runtime_bytes, a.runtime_bytes, 0, 1e-5);
    EXPECT_NEAR(b.stage_overhead_bytes, a.stage_overhead_bytes, 0, 1e-5);
    EXPECT_NEAR(b.factor[PP_PASS_W][PP_PART_EMBED], 1.5, 0, 1e-4);
    /* the summary: each stage's measured F against the model, on the profile's GPU row */
    char *buf = NULL;
    size_t len = 0;
    FILE *mf = open_memstream(&buf, &len);
    profile_print_summary(&b, mf);
    fclose(mf);
    pp_model_shape_t mid = b.shape;
    char want[128];
    snprintf(want, sizeof want, "forward %.3f (%.3f, ", b.ms[PP_PROF_MIDDLE][PP_PASS_F],
             cost_stage_ms(&mid, b.dtype, gpu_find("h200"), NULL, PP_PASS_F));
    EXPECT(
        strstr(buf, "#   middle  ") && strstr(buf, want) &&
            strstr(buf,
                   "a stage holds 43 MiB beyond its sizing functions; 0.61 GiB held with no stage"),
        "%s", buf);
    free(buf);
    /* a bad value names its place */
    f = fopen(path, "w");
    fputs("device: x\nshape: {hidden: wide}\n", f);
    fclose(f);
    ts_capture_begin();
    pp_status_t st = profile_load(&b, path);
    const char *got = ts_capture_end();
    EXPECT(st == PP_ERR_INPUT && strstr(got, ":2:17: hidden: expected a number"), "%s", got);
    unlink(path);
}

int main(void)
{
    ts_rng_seed(0xc0575);
    RUN(test_block_flops_and_bytes);
    RUN(test_unfused_fp32);
    RUN(test_launch_floor);
    RUN(test_column_sums);
    RUN(test_stage_composition);
    RUN(test_monotonic);
    RUN(test_tokens_past_int);
    RUN(test_recompute);
    RUN(test_attention_by_head_dim);
    RUN(test_attention_wgmma);
    RUN(test_tables);
    RUN(test_stage_tail);
    RUN(test_model_build);
    RUN(test_model_tails);
    RUN(test_model_per_transport);
    RUN(test_hand_set_overrides);
    RUN(test_config_errors);
    RUN(test_profile_calibration);
    RUN(test_profile_round_trip);
    return check_summary("test_cost");
}
