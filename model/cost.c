/*
 * cost.c — the stage cost model of cost.h: one table row per kernel the stage runs (stages/
 * stage.cu), with its FLOPs and bytes as multiples of the shape's terms, priced against a GPU row.
 *
 * Terms: N = micro_batch_size * seq_len tokens, C hidden, T seq_len, V vocab, H heads. FLOPs =
 * f_ncc N C^2 + f_ntc N T C + f_nvc N V C (a GEMM of M x K by K x N is 2 M K N; causal flash
 * attention computes about half of each T x T product). Bytes = es (nc N C + nv N V + nth N T H +
 * cc C^2 + vc V C + tc T C) + 4 (n N + gnc N C + gcc C^2 + gvc V C + gtc T C), es the storage
 * dtype's size; the fp32 terms are statistics, token ids and gradient accumulators (read and
 * written: 2 per element); + qs and ls times the partial column sums I writes for W (the flash
 * backward's, attention_flash_bwd_colsum_bytes; a LayerNorm input gradient's,
 * layernorm_bwd_input_colsum_bytes). Each row belongs to one path of the stage (PATHS: which of
 * the stage's choices must hold and which must not), and the choices are made by the functions
 * stage_init makes them with, environment switches included (stage_layout.h): the fused attention
 * rows where the stage takes the flash kernels (bf16, head size 64 or 128, T a multiple of 64),
 * the two-kernel flash backward at d = 64, the column sums in I's kernels or in W's.
 */
#include "cost.h"

#include "kernel_sizes.h"
#include "stage_layout.h"
#include "profile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum kclass { K_GEMM, K_ATTN, K_MEM } kclass_t;

/* The stage's choices at a shape, as bits (stage_choices). */
enum {
    S_FLASH = 1 << 0,    /* the fused attention (stage_attention_fused) */
    S_FLASH2 = 1 << 1,   /* its backward in two kernels, Dr in dQ (stage_flash_bwd_fused) */
    S_COLSUM = 1 << 2,   /* W's column sums in one colsum_bwd (stage_wgrad_fused) */
    S_QKV_SUMS = 1 << 3, /* the QKV bias's partial sums from I's flash backward: both above */
    S_LN_SUMS = 1 << 4,  /* the LayerNorm ones from I's LayerNorm input gradients
                            (stage_layernorm_sums) */
};

/* The path a row belongs to: it runs where every choice of `need` holds and none of `deny`. */
typedef enum kpath {
    ANY = 0,
    FUSED,       /* the flash kernels */
    UNFUSED,     /* GEMMs + softmax */
    FLASH3,      /* the flash backward's dot, dK/dV and dQ kernels: d = 128, PPSCHED_FLASH_TILE=64,
                    PPSCHED_FLASH_BWD=unfused */
    FLASH2,      /* dQ with Dr, then dK/dV, no column sums (PPSCHED_WGRAD=unfused at d = 64) */
    FLASH2_SUMS, /* the same writing d_qkv's partial sums (d = 64) */
    LN_PLAIN,    /* LayerNorm input gradients without column sums */
    LN_SUMS,     /* with the partial sums of Σdy, Σdy·x̂, Σdres */
    SEPARATE,    /* W: one reduction per bias and per LayerNorm (PPSCHED_WGRAD=unfused) */
    CS_TENSORS,  /* W: one colsum_bwd reading every gradient tensor */
    CS_QKV,      /* ... with the QKV bias from I's flash partial sums */
    CS_LN,       /* ... with the LayerNorm tasks from I's LayerNorm partial sums */
    CS_BOTH,     /* ... with both: d_fc the only tensor read */
    KPATH_COUNT
} kpath_t;

static const struct {
    unsigned need, deny;
} PATHS[KPATH_COUNT] = {
    [ANY] = {0, 0},
    [FUSED] = {S_FLASH, 0},
    [UNFUSED] = {0, S_FLASH},
    [FLASH3] = {S_FLASH, S_FLASH2},
    [FLASH2] = {S_FLASH2, S_QKV_SUMS},
    [FLASH2_SUMS] = {S_QKV_SUMS, 0},
    [LN_PLAIN] = {0, S_LN_SUMS},
    [LN_SUMS] = {S_LN_SUMS, 0},
    [SEPARATE] = {0, S_COLSUM},
    [CS_TENSORS] = {S_COLSUM, S_QKV_SUMS | S_LN_SUMS},
    [CS_QKV] = {S_COLSUM | S_QKV_SUMS, S_LN_SUMS},
    [CS_LN] = {S_COLSUM | S_LN_SUMS, S_QKV_SUMS},
    [CS_BOTH] = {S_COLSUM | S_QKV_SUMS | S_LN_SUMS, 0},
};

typedef struct kernel_row {
    const char *name;
    pp_pass_t pass;
    pp_part_t part;
    kclass_t cls;
    kpath_t path;
    int launches;
    double f_ncc, f_ntc, f_nvc;     /* FLOPs */
    double nc, nv, nth, cc, vc, tc; /* elements of the storage dtype */
    double n, gnc, gcc, gvc, gtc;   /* 4-byte elements */
    double qs, ls;                  /* column-sum partials: flash backward's, a LayerNorm's */
} kernel_row_t;

#define F    PP_PASS_F
#define I    PP_PASS_I
#define W    PP_PASS_W
#define BLK  PP_PART_BLOCK
#define EMB  PP_PART_EMBED
#define HEAD PP_PART_HEAD

/* clang-format off */
static const kernel_row_t kernels[] = {
    /* name               pass part cls     path         k  f_ncc ntc nvc nc nv nth cc vc  tc  n gnc  gcc gvc gtc qs ls */
    {"ln1",               F,  BLK,  K_MEM,  ANY,         1, 0, 0, 0,   2,  0,  0,  0,  0,  0,  2, 0, 0, 0, 0,  0, 0},
    {"qkv",               F,  BLK,  K_GEMM, ANY,         1, 6, 0, 0,   4,  0,  0,  3,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"flash_fwd",         F,  BLK,  K_ATTN, FUSED,       1, 0, 2, 0,   4,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"permute_qkv",       F,  BLK,  K_MEM,  UNFUSED,     1, 0, 0, 0,   6,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"scores",            F,  BLK,  K_GEMM, UNFUSED,     1, 0, 2, 0,   2,  0,  1,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"softmax",           F,  BLK,  K_MEM,  UNFUSED,     1, 0, 0, 0,   0,  0,  2,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"attn_v",            F,  BLK,  K_GEMM, UNFUSED,     1, 0, 2, 0,   2,  0,  1,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"unpermute_out",     F,  BLK,  K_MEM,  UNFUSED,     1, 0, 0, 0,   2,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"proj+residual",     F,  BLK,  K_GEMM, ANY,         1, 2, 0, 0,   3,  0,  0,  1,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"ln2",               F,  BLK,  K_MEM,  ANY,         1, 0, 0, 0,   2,  0,  0,  0,  0,  0,  2, 0, 0, 0, 0,  0, 0},
    {"fc+gelu",           F,  BLK,  K_GEMM, ANY,         1, 8, 0, 0,   9,  0,  0,  4,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"fc2+residual",      F,  BLK,  K_GEMM, ANY,         1, 8, 0, 0,   6,  0,  0,  4,  0,  0,  0, 0, 0, 0, 0,  0, 0},

    {"fc2_dgrad+dgelu",   I,  BLK,  K_GEMM, ANY,         1, 8, 0, 0,   9,  0,  0,  4,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"fc_dgrad",          I,  BLK,  K_GEMM, ANY,         1, 8, 0, 0,   5,  0,  0,  4,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"ln2_bwd+residual",  I,  BLK,  K_MEM,  LN_PLAIN,    1, 0, 0, 0,   4,  0,  0,  0,  0,  0,  2, 0, 0, 0, 0,  0, 0},
    {"ln2_bwd+sums",      I,  BLK,  K_MEM,  LN_SUMS,     1, 0, 0, 0,   4,  0,  0,  0,  0,  0,  2, 0, 0, 0, 0,  0, 1},
    {"proj_dgrad",        I,  BLK,  K_GEMM, ANY,         1, 2, 0, 0,   2,  0,  0,  1,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    /* q, k, v, dO, O read, dq, dk, dv written: by the dot, dK/dV and dQ kernels, or by dQ (with
     * Dr, reading O) and dK/dV, which at d = 64 also write d_qkv's partial sums for W */
    {"flash_bwd",         I,  BLK,  K_ATTN, FLASH3,      3, 0, 7, 0,   8,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"flash_bwd",         I,  BLK,  K_ATTN, FLASH2,      2, 0, 7, 0,   8,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"flash_bwd+sums",    I,  BLK,  K_ATTN, FLASH2_SUMS, 2, 0, 7, 0,   8,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  1, 0},
    {"permute_dout",      I,  BLK,  K_MEM,  UNFUSED,     1, 0, 0, 0,   2,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"d_scores",          I,  BLK,  K_GEMM, UNFUSED,     1, 0, 2, 0,   2,  0,  1,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"d_v",               I,  BLK,  K_GEMM, UNFUSED,     1, 0, 2, 0,   2,  0,  1,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"softmax_bwd",       I,  BLK,  K_MEM,  UNFUSED,     1, 0, 0, 0,   0,  0,  3,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"d_q",               I,  BLK,  K_GEMM, UNFUSED,     1, 0, 2, 0,   2,  0,  1,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"d_k",               I,  BLK,  K_GEMM, UNFUSED,     1, 0, 2, 0,   2,  0,  1,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"unpermute_dqkv",    I,  BLK,  K_MEM,  UNFUSED,     1, 0, 0, 0,   6,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"qkv_dgrad",         I,  BLK,  K_GEMM, ANY,         1, 6, 0, 0,   4,  0,  0,  3,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"ln1_bwd+residual",  I,  BLK,  K_MEM,  LN_PLAIN,    1, 0, 0, 0,   4,  0,  0,  0,  0,  0,  2, 0, 0, 0, 0,  0, 0},
    {"ln1_bwd+sums",      I,  BLK,  K_MEM,  LN_SUMS,     1, 0, 0, 0,   4,  0,  0,  0,  0,  0,  2, 0, 0, 0, 0,  0, 1},

    {"fc2_wgrad",         W,  BLK,  K_GEMM, ANY,         1, 8, 0, 0,   5,  0,  0,  0,  0,  0,  0, 0, 8, 0, 0,  0, 0},
    {"fc2_bias",          W,  BLK,  K_MEM,  SEPARATE,    1, 0, 0, 0,   1,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"fc_wgrad",          W,  BLK,  K_GEMM, ANY,         1, 8, 0, 0,   5,  0,  0,  0,  0,  0,  0, 0, 8, 0, 0,  0, 0},
    {"fc_bias",           W,  BLK,  K_MEM,  SEPARATE,    1, 0, 0, 0,   4,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"ln2_wgrad",         W,  BLK,  K_MEM,  SEPARATE,    1, 0, 0, 0,   2,  0,  0,  0,  0,  0,  2, 0, 0, 0, 0,  0, 0},
    {"proj_wgrad",        W,  BLK,  K_GEMM, ANY,         1, 2, 0, 0,   2,  0,  0,  0,  0,  0,  0, 0, 2, 0, 0,  0, 0},
    {"proj_bias",         W,  BLK,  K_MEM,  SEPARATE,    1, 0, 0, 0,   1,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"qkv_wgrad",         W,  BLK,  K_GEMM, ANY,         1, 6, 0, 0,   4,  0,  0,  0,  0,  0,  0, 0, 6, 0, 0,  0, 0},
    {"qkv_bias",          W,  BLK,  K_MEM,  SEPARATE,    1, 0, 0, 0,   3,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
    {"ln1_wgrad",         W,  BLK,  K_MEM,  SEPARATE,    1, 0, 0, 0,   2,  0,  0,  0,  0,  0,  2, 0, 0, 0, 0,  0, 0},
    /* the same six column sums in one colsum_bwd: a partial-sum launch and a finishing one, which
     * alone reads the partial sums I wrote. Tensors read: LN2's d_ln2, x2, dout (+ 2 statistics),
     * fc's d_fc (4), LN1's d_ln1, x, d_x2 (+ 2), QKV's d_qkv (3) */
    {"colsums",           W,  BLK,  K_MEM,  CS_TENSORS,  2, 0, 0, 0,  13,  0,  0,  0,  0,  0,  4, 0, 0, 0, 0,  0, 0},
    {"colsums",           W,  BLK,  K_MEM,  CS_QKV,      2, 0, 0, 0,  10,  0,  0,  0,  0,  0,  4, 0, 0, 0, 0,  1, 0},
    {"colsums",           W,  BLK,  K_MEM,  CS_LN,       2, 0, 0, 0,   7,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  0, 2},
    {"colsums",           W,  BLK,  K_MEM,  CS_BOTH,     2, 0, 0, 0,   4,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  1, 2},

    {"make_tokens",       F,  EMB,  K_MEM,  ANY,         1, 0, 0, 0,   0,  0,  0,  0,  0,  0,  1, 0, 0, 0, 0,  0, 0},
    {"encoder_fwd",       F,  EMB,  K_MEM,  ANY,         1, 0, 0, 0,   2,  0,  0,  0,  0,  1,  1, 0, 0, 0, 0,  0, 0},
    {"encoder_bwd",       W,  EMB,  K_MEM,  ANY,         3, 0, 0, 0,   1,  0,  0,  0,  0,  0,  4, 2, 0, 0, 2,  0, 0},

    {"lnf",               F,  HEAD, K_MEM,  ANY,         1, 0, 0, 0,   2,  0,  0,  0,  0,  0,  2, 0, 0, 0, 0,  0, 0},
    {"lm_head",           F,  HEAD, K_GEMM, ANY,         1, 0, 0, 2,   1,  1,  0,  0,  1,  0,  0, 0, 0, 0, 0,  0, 0},
    {"make_targets",      F,  HEAD, K_MEM,  ANY,         1, 0, 0, 0,   0,  0,  0,  0,  0,  0,  1, 0, 0, 0, 0,  0, 0},
    {"cross_entropy",     F,  HEAD, K_MEM,  ANY,         1, 0, 0, 0,   0,  2,  0,  0,  0,  0,  3, 0, 0, 0, 0,  0, 0},
    {"loss_mean",         F,  HEAD, K_MEM,  ANY,         1, 0, 0, 0,   0,  0,  0,  0,  0,  0,  1, 0, 0, 0, 0,  0, 0},
    {"lm_dgrad",          I,  HEAD, K_GEMM, ANY,         1, 0, 0, 2,   1,  1,  0,  0,  1,  0,  0, 0, 0, 0, 0,  0, 0},
    {"lnf_bwd",           I,  HEAD, K_MEM,  ANY,         1, 0, 0, 0,   3,  0,  0,  0,  0,  0,  2, 0, 0, 0, 0,  0, 0},
    {"lm_wgrad",          W,  HEAD, K_GEMM, ANY,         1, 0, 0, 2,   1,  1,  0,  0,  0,  0,  0, 0, 0, 2, 0,  0, 0},
    {"lnf_wgrad",         W,  HEAD, K_MEM,  ANY,         1, 0, 0, 0,   2,  0,  0,  0,  0,  0,  2, 0, 0, 0, 0,  0, 0},

    /* Rebuilt under run.recompute only (stage_recompute_work says how many): priced by name. */
    {"gelu_rebuild",      PP_PASS_COUNT, BLK,  K_MEM,  ANY,         1, 0, 0, 0,   8,  0,  0,  0,  0,  0,  0, 0, 0, 0, 0,  0, 0},
};
/* clang-format on */

#undef F
#undef I
#undef W

#define N_KERNELS ((int)(sizeof(kernels) / sizeof(kernels[0])))

/* The stage's choices at shape s (stage.cu's stage_init: fused_attention, fused_wgrad, qkv_sums,
 * ln_sums), from the functions it decides with, so the environment switches count here too. */
static unsigned stage_choices(const pp_model_shape_t *s, pp_dtype_t dt)
{
    pp_stage_cfg_t c;
    memset(&c, 0, sizeof c);
    c.hidden = s->hidden;
    c.heads = s->heads;
    c.seq_len = s->seq_len;
    c.dtype = dt;
    unsigned ch = (stage_attention_fused(&c) ? S_FLASH : 0u) |
                  (stage_flash_bwd_fused(&c) ? S_FLASH2 : 0u) |
                  (stage_wgrad_fused() ? S_COLSUM : 0u) | (stage_layernorm_sums() ? S_LN_SUMS : 0u);
    if ((ch & S_FLASH2) && (ch & S_COLSUM)) ch |= S_QKV_SUMS;
    return ch;
}

/* Whether row r runs where the stage made the choices ch. */
static int row_applies(const kernel_row_t *r, unsigned ch)
{
    return (ch & PATHS[r->path].need) == PATHS[r->path].need && (ch & PATHS[r->path].deny) == 0;
}

/* The GEMM rows whose fused cuBLASLt epilogue costs a fixed extra (pp_gpu_t.epilogue_us). */
static const struct {
    const char *row;
    pp_gpu_epilogue_t epi;
} EPILOGUE_ROWS[] = {{"fc+gelu", PP_GPU_EPI_GELU_AUX}, {"fc2_dgrad+dgelu", PP_GPU_EPI_DGELU}};

static double epilogue_us(const kernel_row_t *r, const pp_gpu_t *g)
{
    for (size_t k = 0; k < sizeof EPILOGUE_ROWS / sizeof EPILOGUE_ROWS[0]; k++)
        if (strcmp(EPILOGUE_ROWS[k].row, r->name) == 0) return g->epilogue_us[EPILOGUE_ROWS[k].epi];
    return 0.0;
}

/* Time of one kernel row, ms: the longest of its launches' floor, its FLOPs at the class's rate
 * (a GEMM's plus its tail and its epilogue's `extra_us`, at most the FLOPs' own time; attention's
 * at `attn_eff` of the peak) and its bytes at the HBM rate. */
static double kernel_ms(const pp_gpu_t *g, pp_dtype_t dt, kclass_t cls, int launches, double flops,
                        double bytes, double extra_us, double attn_eff)
{
    double peak = (dt == PP_DTYPE_BF16 ? g->bf16_tflops : g->fp32_tflops) * 1e12;
    double rate = cls == K_GEMM ? peak * g->gemm_eff : cls == K_ATTN ? peak * attn_eff : 0.0;
    double t = launches * g->launch_us * 1e-6;
    /* an epilogue's extra, fitted where the GEMM is large, at most its GEMM's own time */
    double extra = rate > 0 ? fmin(extra_us * 1e-6, flops / rate) : 0.0;
    double fixed = cls == K_GEMM ? launches * g->gemm_tail_us * 1e-6 + extra : 0.0;
    if (rate > 0 && flops / rate + fixed > t) t = flops / rate + fixed;
    double bw = g->hbm_gbps * 1e9 * g->bw_eff;
    if (bytes / bw > t) t = bytes / bw;
    return t * 1e3;
}

/* The work of one kernel row at shape s. */
static pp_work_t row_work(const kernel_row_t *r, const pp_model_shape_t *s, pp_dtype_t dt,
                          const pp_gpu_t *gpu)
{
    const double N = (double)s->batch * s->seq_len, C = s->hidden, T = s->seq_len;
    const double V = s->vocab, H = s->heads, es = (double)pp_dtype_size(dt);
    const int d = s->heads > 0 ? s->hidden / s->heads : 0;
    const double qs = (double)attention_flash_bwd_colsum_bytes(s->batch, s->heads, s->seq_len, d);
    const double ls =
        (double)layernorm_bwd_input_colsum_bytes64((int64_t)s->batch * s->seq_len, s->hidden);
    pp_work_t w;
    w.flops = r->f_ncc * N * C * C + r->f_ntc * N * T * C + r->f_nvc * N * V * C;
    w.bytes = es * (r->nc * N * C + r->nv * N * V + r->nth * N * T * H + r->cc * C * C +
                    r->vc * V * C + r->tc * T * C) +
              4.0 * (r->n * N + r->gnc * N * C + r->gcc * C * C + r->gvc * V * C + r->gtc * T * C) +
              r->qs * qs + r->ls * ls;
    w.kernels = r->launches;
    /* attention's rate at the stage's head dimension, its forward's in F and its backward's; on
     * warpgroup MMA where the GPU has it, the backward where it asks no column sums */
    const int wgmma =
        flash_wgmma_enabled() && (r->pass == PP_PASS_F || r->path == FLASH3 || r->path == FLASH2);
    const double attn = gpu_attn_eff(gpu, d, r->pass != PP_PASS_F, wgmma);
    w.ms = kernel_ms(gpu, dt, r->cls, r->launches, w.flops, w.bytes, epilogue_us(r, gpu), attn);
    return w;
}

/* The time of the rows called `name` on the stage's paths, ms (0 when none). */
static double named_ms(const char *name, const pp_model_shape_t *s, pp_dtype_t dt,
                       const pp_gpu_t *gpu)
{
    const unsigned ch = stage_choices(s, dt);
    double t = 0;
    for (int k = 0; k < N_KERNELS; k++)
        if (strcmp(kernels[k].name, name) == 0 && row_applies(&kernels[k], ch))
            t += row_work(&kernels[k], s, dt, gpu).ms;
    return t;
}

pp_work_t cost_part(const pp_model_shape_t *s, pp_dtype_t dt, const pp_gpu_t *gpu, pp_pass_t pass,
                    pp_part_t part)
{
    const unsigned ch = stage_choices(s, dt);
    pp_work_t w = {0, 0, 0, 0};
    for (int k = 0; k < N_KERNELS; k++) {
        const kernel_row_t *r = &kernels[k];
        if (r->pass != pass || r->part != part || !row_applies(r, ch)) continue;
        pp_work_t x = row_work(r, s, dt, gpu);
        w.flops += x.flops;
        w.bytes += x.bytes;
        w.kernels += x.kernels;
        w.ms += x.ms;
    }
    return w;
}

void cost_recompute_ms(const pp_stage_cfg_t *c, const pp_gpu_t *gpu, const struct pp_profile *prof,
                       double *input, double *weight)
{
    pp_recompute_work_t rw;
    pp_model_shape_t s;
    memset(&s, 0, sizeof s);
    s.hidden = c->hidden, s.heads = c->heads, s.seq_len = c->seq_len, s.vocab = c->vocab;
    s.batch = c->micro_batch_size;
    stage_recompute_work(c, &rw);
    /* Rebuilt forward work runs forward kernels: the forward's calibration applies. */
    double f = prof ? prof->factor[PP_PASS_F][PP_PART_BLOCK] : 1.0;
    double fwd = cost_part(&s, c->dtype, gpu, PP_PASS_F, PP_PART_BLOCK).ms -
                 named_ms("fc2+residual", &s, c->dtype, gpu);
    double scores = named_ms("scores", &s, c->dtype, gpu) + named_ms("softmax", &s, c->dtype, gpu);
    double ln = named_ms("ln1", &s, c->dtype, gpu);
    double gelu = named_ms("gelu_rebuild", &s, c->dtype, gpu);
    *input = f * c->n_layers * (rw.input_forward * fwd + rw.input_scores * scores);
    *weight = f * c->n_layers *
              (rw.weight_forward * fwd + rw.weight_layernorms * ln + rw.weight_gelus * gelu);
}

double cost_stage_ms(const pp_model_shape_t *s, pp_dtype_t dt, const pp_gpu_t *gpu,
                     const struct pp_profile *prof, pp_pass_t pass)
{
    double count[PP_PART_COUNT] = {s->n_layers, s->is_first ? 1 : 0, s->is_last ? 1 : 0};
    double t = 0;
    for (int part = 0; part < PP_PART_COUNT; part++) {
        if (count[part] == 0) continue;
        double f = prof ? prof->factor[pass][part] : 1.0;
        t += count[part] * f * cost_part(s, dt, gpu, pass, (pp_part_t)part).ms;
    }
    return t;
}

/* ---- the step's head and tail ------------------------------------------------------------- */

/* Bytes AdamW moves for one parameter (adamw.cu): the fp32 gradient, master and moments read (16),
 * the master and moments written (12), and the storage copy written where it is not the master. */
static double adamw_bytes(pp_dtype_t dt)
{
    return 28.0 + (dt == PP_DTYPE_FP32 ? 0.0 : (double)pp_dtype_size(dt));
}

/* One memory-bound launch over `bytes`, ms. */
static double launch_ms(const pp_gpu_t *g, double bytes)
{
    return kernel_ms(g, PP_DTYPE_FP32, K_MEM, 1, 0.0, bytes, 0.0, 0.0);
}

/* AdamW over the parameters [lo, lo + n) of the stage, one launch for each tensor's piece in it
 * (stage_optimizer_step), ms. */
static double adamw_range_ms(const pp_param_tensor_t *t, int n_tensors, size_t lo, size_t n,
                             double per, const pp_gpu_t *g)
{
    double ms = 0;
    for (int i = 0; i < n_tensors; i++) {
        size_t x0 = t[i].offset > lo ? t[i].offset : lo;
        size_t x1 = t[i].offset + t[i].numel < lo + n ? t[i].offset + t[i].numel : lo + n;
        if (x0 < x1) ms += launch_ms(g, per * (double)(x1 - x0));
    }
    return ms;
}

/* The optimizer step of stage c, ms: every tensor whole, or under zero1 replica 0's part of each
 * bucket (every replica's part is as large). */
static double adamw_ms(const pp_stage_cfg_t *c, const pp_gpu_t *g)
{
    pp_model_shape_t s = stage_shape_of(c);
    const int n = model_tensor_count(&s);
    const double per = adamw_bytes(c->dtype);
    pp_param_tensor_t *t = malloc(sizeof *t * (size_t)(n > 0 ? n : 1));
    if (!t) /* out of host memory: the parameters at the HBM rate, no floor per tensor */
        return launch_ms(g, per * (double)stage_shard_values(c));
    const size_t padded = model_tensors(&s, t, NULL);
    double ms = 0;
    size_t lo, len, at;
    if (c->optimizer_shards <= 1)
        ms = adamw_range_ms(t, n, 0, padded, per, g);
    else
        for (size_t b = 0; stage_shard_part(c, 0, b, &lo, &len, &at) > 0; b++)
            ms += adamw_range_ms(t, n, lo, len, per, g);
    free(t);
    return ms;
}

void cost_stage_tail(const pp_stage_cfg_t *c, const pp_gpu_t *gpu, double *head, double *tail)
{
    /* stage_zero_grads: the gradients, then the loss accumulator's 4 bytes */
    *head = launch_ms(gpu, (double)stage_grad_bytes(c)) + launch_ms(gpu, 4.0);
    *tail = c->with_optimizer ? adamw_ms(c, gpu) : 0.0;
}

const pp_gpu_t *cost_gpu_for(const pp_job_cost_src_t *src, const pp_gpu_t *present,
                             const struct pp_profile *prof)
{
    const pp_gpu_t *g = src->gpu[0] ? gpu_find(src->gpu) : NULL;
    if (!g) g = present;
    if (!g && prof) g = gpu_find(prof->gpu);
    if (!g) g = gpu_find("h100");
    return g;
}

const pp_link_desc_t *cost_link_for(const pp_job_t *job, pp_transport_t t)
{
    const char *own = transport_row(t)->link;
    if (!own) return NULL;
    const pp_link_desc_t *l = job->cost_src.link[0] ? link_find(job->cost_src.link) : NULL;
    return l ? l : link_find(own);
}

double cost_host_link_gbps(const pp_job_t *job)
{
    if (job->cost.host_link_gbps > 0) return job->cost.host_link_gbps;
    return link_find("host")->gbps;
}

void cost_calib_for(pp_cost_calib_t *c, const pp_job_t *job, int m, const pp_gpu_t *gpu,
                    const struct pp_profile *prof)
{
    double el =
        profile_elements(job->pipeline.micro_batch_size, job->model.seq_len, job->model.hidden);
    c->step_factor = prof ? profile_step_factor(prof, el, m) : 1.0;
    if ((job)->overlap_set) {
        c->overlap = job->cost.overlap;
        c->overlap_from = "cost.overlap";
    } else if (prof && profile_overlap(prof, el, &c->overlap)) {
        c->overlap_from = "profile";
    } else {
        c->overlap = gpu_overlap(gpu, el);
        c->overlap_from = "gpu";
    }
    if (!(c->overlap >= 0)) c->overlap = 0; /* NaN too */
    if (c->overlap > 1) c->overlap = 1;
}

/* The share of a block's F + I + W time (a priori) above its kernels' launch floor. */
double cost_busy_share(const pp_model_shape_t *s, pp_dtype_t dt, const pp_gpu_t *gpu)
{
    double ms = 0, floor_ms = 0;
    for (int p = 0; p < PP_PASS_COUNT; p++) {
        pp_work_t w = cost_part(s, dt, gpu, (pp_pass_t)p, PP_PART_BLOCK);
        ms += w.ms;
        floor_ms += w.kernels * gpu->launch_us * 1e-3;
    }
    return ms > 0 && ms > floor_ms ? (ms - floor_ms) / ms : 0.0;
}

/* The step factor f of a profile (measured at its own micro-batch) at stage shape s: what a real
 * step adds to the replayed passes is taken to grow with the work above the launch floor, which
 * a launch-bound kernel does not have (its launches are replayed from a graph in both), so the
 * factor's excess is scaled by s's share above the floor against the profiled shape's. With the
 * whole factor the small model comes out 8-12 % over on an H200: at 2 x 256 tokens of hidden 512,
 * where most kernels sit at the floor, a real step is 1.02-1.05 times the passes, against
 * 1.07-1.11 at the profiled 4 x 1024 (bench/NOTES.md). */
double cost_scaled_step_factor(double f, const pp_model_shape_t *s, pp_dtype_t dt,
                               const pp_gpu_t *gpu, const struct pp_profile *prof)
{
    if (!prof || f == 1.0) return f;
    double own = cost_busy_share(&prof->shape, dt, gpu), here = cost_busy_share(s, dt, gpu);
    if (!(own > 0)) return f;
    double u = here / own;
    return 1.0 + (f - 1.0) * (u > 1.0 ? 1.0 : u);
}
