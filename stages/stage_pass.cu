/*
 * stage_pass.cu — the forward and the backward of a stage (contract: stages/stage.h): F, I
 * (input gradients), W (weight gradients) and B.
 *
 * Where each block's buffers are (stage_layout.h): F writes the saved parts into the slot, or into
 * the workspace's rebuild area when cfg->recompute does not keep them; I writes the gradients W
 * needs into an I→W buffer taken from the stage's pool (released by W), and B, which runs each
 * block's W right after its I, into the workspace's one-block I→W area. The backward rebuilds what
 * the slot lacks: selective rebuilds the LayerNorm outputs and GELU before W (and P before the
 * unfused attention's I); full re-runs the block's forward (without its output GEMM) before I
 * and, for a split W, again before W. Parameter gradients accumulate with +=; every gradient
 * tensor gets one addition per micro-batch from the same kernels on the same inputs whether B or
 * I then W ran, so the two give the same bits. W's bias and LayerNorm parameter gradients come
 * from one column-sum call per block after its weight GEMMs (PPSCHED_WGRAD=unfused: one reduction
 * after each GEMM and per LayerNorm); the QKV bias gradient's column sums come, at d = 64, from
 * partial sums the flash backward of I writes into the I→W parts (d_qkv_sum), and the LayerNorm
 * parameter gradients' and the fc2 and proj bias gradients' from partial sums I's two LayerNorm
 * input gradients write there (d_ln2_sum, d_ln1_sum; not under PPSCHED_LAYERNORM_BWD=unfused),
 * added by W's column-sum call: once per block and micro-batch under every recompute setting
 * (rebuilds write only saved parts, never the I→W parts). Every call enqueues on `stream`, never
 * syncs.
 */
#include "stage_impl.h"

#include "common/pp_cuda.h"
#include "data.h"
#include "stage_kernels.h"

#include <math.h>

static pp_status_t check_slot(const pp_stage_t *st, int slot, const char *what)
{
    if (!st || slot < 0 || slot >= st->n_slots)
        PP_FAIL(PP_ERR_INTERNAL, "%s: slot %d outside 0..%d", what, slot,
                st ? st->n_slots - 1 : -1);
    return PP_OK;
}

/* Block l's buffers for a call: `grad` holds the I→W parts (NULL: the workspace's, for B). */
static void view_of(pp_stage_t *st, const slot_t *s, const wgrad_t *grad, int l, block_bufs_t *b)
{
    stage_layout_view(&st->cfg, st->fused_attention, &s->blocks[l], &st->ws.rebuilt,
                      grad ? &grad->blocks[l] : &st->ws.grad, b);
}

/* The gradient at the input of block i (i = 0: dx; i = L: dy, the last block's output). */
static void *dres_of(pp_stage_t *st, const slot_t *s, const wgrad_t *grad, int i)
{
    if (i == 0 || i == st->cfg.n_layers) return s->dres[i];
    return grad ? grad->dres[i] : st->ws.dres[i & 1];
}

/* ---- forward --------------------------------------------------------------------------------- */

/* Block forward from x into the buffers of b; out = x2 + fc2(...) unless out is NULL (a rebuild,
 * which needs everything but the output). */
static pp_status_t block_forward(pp_stage_t *st, const block_bufs_t *b, int l, const void *x,
                                 void *out, cudaStream_t stream)
{
    const pp_stage_cfg_t *c = &st->cfg;
    const pp_dtype_t dt = c->dtype;
    const int B = c->micro_batch_size, T = c->seq_len, C = c->hidden, H = c->heads, d = C / H;
    const int N = B * T, BH = B * H;
    const long long Td = (long long)T * d, TT = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)d);
    pp_gemm_t *g = &st->gemm;
    const scratch_t *w = &st->ws.scratch;

    PP_CHECK(layernorm_fwd(b->ln1, (float *)b->ln1_mean, (float *)b->ln1_rstd, x,
                           P_(st, PP_PARAM_LN1_W, l), P_(st, PP_PARAM_LN1_B, l), N, C, dt, stream));
    if (st->fused_attention) {
        /* q, k, v read where the QKV matmul put them; O (heads side by side) and the row
         * log-sum-exp straight into their buffers; no T×T matrix, no permutes. */
        char *qkv = (char *)b->qkv;
        const size_t es = pp_dtype_size(dt);
        PP_CHECK(matmul_fwd(qkv, b->ln1, P_(st, PP_PARAM_QKV_W, l), P_(st, PP_PARAM_QKV_B, l), N, C,
                            3 * C, dt, g, stream));
        PP_CHECK(attention_flash_fwd(b->atty, C, (float *)b->lse, qkv, qkv + C * es,
                                     qkv + 2 * C * es, 3 * C, B, H, T, d, dt, stream));
    } else {
        PP_CHECK(matmul_fwd(w->qkv, b->ln1, P_(st, PP_PARAM_QKV_W, l), P_(st, PP_PARAM_QKV_B, l), N,
                            C, 3 * C, dt, g, stream));
        PP_CHECK(attention_permute_qkv(b->q, b->k, b->v, w->qkv, B, T, H, d, dt, stream));
        /* S = Q K^T into P's buffer, then P = causal softmax(scale S) in place; O = P V. */
        PP_CHECK(gemm_strided_batched(b->att, b->q, b->k, 0, 1, T, T, d, 1.0f, 0.0f, Td, Td, TT, BH,
                                      dt, g, stream));
        PP_CHECK(softmax_causal_fwd(b->att, b->att, scale, BH, T, dt, stream));
        PP_CHECK(gemm_strided_batched(w->attn, b->att, b->v, 0, 0, T, d, T, 1.0f, 0.0f, TT, Td, Td,
                                      BH, dt, g, stream));
        PP_CHECK(attention_unpermute_out(b->atty, w->attn, B, T, H, d, dt, stream));
    }
    /* x2 = x + proj(...): the residual enters the GEMM's epilogue */
    PP_CHECK(matmul_fwd_ex(b->x2, b->atty, P_(st, PP_PARAM_PROJ_W, l), P_(st, PP_PARAM_PROJ_B, l),
                           x, NULL, N, C, C, dt, g, stream));
    PP_CHECK(layernorm_fwd(b->ln2, (float *)b->ln2_mean, (float *)b->ln2_rstd, b->x2,
                           P_(st, PP_PARAM_LN2_W, l), P_(st, PP_PARAM_LN2_B, l), N, C, dt, stream));
    /* gelu(fc(...)) in one GEMM, keeping the pre-activation fc for the backward */
    PP_CHECK(matmul_fwd_ex(b->gelu, b->ln2, P_(st, PP_PARAM_FC_W, l), P_(st, PP_PARAM_FC_B, l),
                           NULL, b->fc, N, C, 4 * C, dt, g, stream));
    if (out)
        PP_CHECK(matmul_fwd_ex(out, b->gelu, P_(st, PP_PARAM_FC2_W, l), P_(st, PP_PARAM_FC2_B, l),
                               b->x2, NULL, N, 4 * C, C, dt, g, stream));
    return PP_OK;
}

pp_status_t stage_forward(pp_stage_t *st, int slot, int mb, cudaStream_t stream)
{
    PP_CHECK(check_slot(st, slot, "stage_forward"));
    const pp_stage_cfg_t *c = &st->cfg;
    const pp_dtype_t dt = c->dtype;
    const int B = c->micro_batch_size, T = c->seq_len, C = c->hidden, V = c->vocab, N = B * T;
    const int L = c->n_layers;
    slot_t *s = &st->slots[slot];

    if (c->is_first) {
        PP_CHECK(
            stage_make_tokens(s->tokens, st->perm, c->seed, V, B, T, st->d_data_base, mb, stream));
        PP_CHECK(encoder_fwd(s->res[0], s->tokens, P_(st, PP_PARAM_WTE, 0), P_(st, PP_PARAM_WPE, 0),
                             B, T, C, dt, stream));
    }
    for (int l = 0; l < L; l++) {
        block_bufs_t b;
        view_of(st, s, NULL, l, &b);
        PP_CHECK(block_forward(st, &b, l, s->res[l], s->res[l + 1], stream));
    }
    if (c->is_last) {
        PP_CHECK(layernorm_fwd(s->lnf, s->lnf_mean, s->lnf_rstd, s->res[L],
                               P_(st, PP_PARAM_LNF_W, 0), P_(st, PP_PARAM_LNF_B, 0), N, C, dt,
                               stream));
        PP_CHECK(matmul_fwd(s->logits, s->lnf, P_(st, PP_PARAM_LM_W, 0), NULL, N, C, V, dt,
                            &st->gemm, stream));
        PP_CHECK(stage_make_targets(s->targets, st->perm, c->seed, V, B, T, st->d_data_base, mb,
                                    stream));
        /* The logits are not needed again: their gradient replaces them. */
        PP_CHECK(crossentropy_fwd_bwd(s->losses, s->logits, s->logits, s->targets, c->grad_scale, N,
                                      V, dt, stream));
        PP_CHECK(loss_mean_accumulate(st->loss_acc, s->losses, N, stream));
    }
    return PP_OK;
}

/* ---- rebuilding what the slot does not keep -------------------------------------------------- */

/* Before block l's I: full re-runs the forward; selective, on the unfused path, rebuilds P from
 * the kept q and k (the same kernels as F, so the same bits). */
static pp_status_t rebuild_for_input(pp_stage_t *st, const block_bufs_t *b, int l, const void *x,
                                     cudaStream_t stream)
{
    const pp_stage_cfg_t *c = &st->cfg;
    if (c->recompute == PP_RECOMPUTE_FULL) return block_forward(st, b, l, x, NULL, stream);
    if (c->recompute != PP_RECOMPUTE_SELECTIVE || st->fused_attention) return PP_OK;
    const int B = c->micro_batch_size, T = c->seq_len, H = c->heads, d = c->hidden / H;
    const long long Td = (long long)T * d, TT = (long long)T * T;
    PP_CHECK(gemm_strided_batched(b->att, b->q, b->k, 0, 1, T, T, d, 1.0f, 0.0f, Td, Td, TT, B * H,
                                  c->dtype, &st->gemm, stream));
    return softmax_causal_fwd(b->att, b->att, 1.0f / sqrtf((float)d), B * H, T, c->dtype, stream);
}

/* Before block l's W: selective rebuilds the two LayerNorm outputs (from the kept input and
 * statistics' inputs, the same kernel as F: the same bits) and the GELU output (from fc; F's came
 * out of the fc GEMM's epilogue, so it may differ in the last bit); full re-runs the forward
 * unless I just did (`after_input`). */
static pp_status_t rebuild_for_weight(pp_stage_t *st, const block_bufs_t *b, int l, const void *x,
                                      int after_input, cudaStream_t stream)
{
    const pp_stage_cfg_t *c = &st->cfg;
    const pp_dtype_t dt = c->dtype;
    const int N = c->micro_batch_size * c->seq_len, C = c->hidden;
    if (c->recompute == PP_RECOMPUTE_FULL)
        return after_input ? PP_OK : block_forward(st, b, l, x, NULL, stream);
    if (c->recompute != PP_RECOMPUTE_SELECTIVE) return PP_OK;
    PP_CHECK(layernorm_fwd(b->ln1, NULL, NULL, x, P_(st, PP_PARAM_LN1_W, l),
                           P_(st, PP_PARAM_LN1_B, l), N, C, dt, stream));
    PP_CHECK(layernorm_fwd(b->ln2, NULL, NULL, b->x2, P_(st, PP_PARAM_LN2_W, l),
                           P_(st, PP_PARAM_LN2_B, l), N, C, dt, stream));
    return gelu_fwd(b->gelu, b->fc, (size_t)N * 4 * C, dt, stream);
}

/* ---- backward: input gradients --------------------------------------------------------- */

/* From dout (the gradient at the block's output) to din, keeping in b's I→W parts what W needs. */
static pp_status_t block_backward_input(pp_stage_t *st, const block_bufs_t *b, int l, const void *x,
                                        const void *dout, void *din, cudaStream_t stream)
{
    const pp_stage_cfg_t *c = &st->cfg;
    const pp_dtype_t dt = c->dtype;
    const int B = c->micro_batch_size, T = c->seq_len, C = c->hidden, H = c->heads, d = C / H;
    const int N = B * T, BH = B * H;
    const long long Td = (long long)T * d, TT = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t es = pp_dtype_size(dt);
    pp_gemm_t *g = &st->gemm;
    const scratch_t *w = &st->ws.scratch;

    /* MLP: out = x2 + fc2(gelu(fc(ln2(x2)))). d_fc = d(fc out): GELU's derivative in the GEMM's
     * epilogue. */
    PP_CHECK(matmul_bwd_input_dgelu(b->d_fc, dout, P_(st, PP_PARAM_FC2_W, l), b->fc, N, 4 * C, C,
                                    dt, g, stream));
    PP_CHECK(matmul_bwd_input(b->d_ln2, b->d_fc, P_(st, PP_PARAM_FC_W, l), N, C, 4 * C, 0, dt, g,
                              stream));
    /* d_x2 = dout (the residual path) + LN2's input gradient; with st->ln_sums also the partial
     * sums of LN2's dw, db and fc2's bias gradient, for W */
    PP_CHECK(layernorm_bwd_input_add(b->d_x2, st->ln_sums ? (float *)b->d_ln2_sum : NULL, dout,
                                     b->d_ln2, b->x2, P_(st, PP_PARAM_LN2_W, l),
                                     (float *)b->ln2_mean, (float *)b->ln2_rstd, N, C, dt, stream));

    /* Attention: x2 = x + proj(attention(qkv(ln1(x)))). */
    PP_CHECK(matmul_bwd_input(w->d_atty, b->d_x2, P_(st, PP_PARAM_PROJ_W, l), N, C, C, 0, dt, g,
                              stream));
    if (st->fused_attention) {
        /* P recomputed from q, k and the saved log-sum-exp, tile by tile; dq, dk, dv land side
         * by side in d_qkv, the layout of the QKV matmul output. */
        const char *qkv = (const char *)b->qkv;
        char *dqkv = (char *)b->d_qkv;
        float *sums = st->qkv_sums ? (float *)b->d_qkv_sum : NULL; /* for W's QKV bias */
        PP_CHECK(attention_flash_bwd(dqkv, dqkv + C * es, dqkv + 2 * C * es, 3 * C, w->d_atty, qkv,
                                     qkv + C * es, qkv + 2 * C * es, 3 * C, b->atty, C,
                                     (const float *)b->lse, w->d_flash, sums, B, H, T, d, dt,
                                     stream));
    } else {
        PP_CHECK(attention_permute_dout(w->d_attn, w->d_atty, B, T, H, d, dt, stream));
        /* dP = dO V^T; dV = P^T dO; dS = softmax backward (in place over dP); dQ = dS K;
         * dK = dS^T Q */
        PP_CHECK(gemm_strided_batched(w->d_p, w->d_attn, b->v, 0, 1, T, T, d, 1.0f, 0.0f, Td, Td,
                                      TT, BH, dt, g, stream));
        PP_CHECK(gemm_strided_batched(w->d_v, b->att, w->d_attn, 1, 0, T, d, T, 1.0f, 0.0f, TT, Td,
                                      Td, BH, dt, g, stream));
        PP_CHECK(softmax_causal_bwd(w->d_p, w->d_p, b->att, scale, BH, T, dt, stream));
        PP_CHECK(gemm_strided_batched(w->d_q, w->d_p, b->k, 0, 0, T, d, T, 1.0f, 0.0f, TT, Td, Td,
                                      BH, dt, g, stream));
        PP_CHECK(gemm_strided_batched(w->d_k, w->d_p, b->q, 1, 0, T, d, T, 1.0f, 0.0f, TT, Td, Td,
                                      BH, dt, g, stream));
        PP_CHECK(
            attention_unpermute_dqkv(b->d_qkv, w->d_q, w->d_k, w->d_v, B, T, H, d, dt, stream));
    }
    PP_CHECK(matmul_bwd_input(b->d_ln1, b->d_qkv, P_(st, PP_PARAM_QKV_W, l), N, C, 3 * C, 0, dt, g,
                              stream));
    return layernorm_bwd_input_add(din, st->ln_sums ? (float *)b->d_ln1_sum : NULL, b->d_x2,
                                   b->d_ln1, x, P_(st, PP_PARAM_LN1_W, l), (float *)b->ln1_mean,
                                   (float *)b->ln1_rstd, N, C, dt, stream);
}

/* Last stage: dlogits (from the forward) -> d(final LN out) -> the gradient at the last block. */
static pp_status_t head_backward_input(pp_stage_t *st, slot_t *s, void *d_lnf, cudaStream_t stream)
{
    const pp_stage_cfg_t *c = &st->cfg;
    const int N = c->micro_batch_size * c->seq_len, C = c->hidden, L = c->n_layers;
    PP_CHECK(matmul_bwd_input(d_lnf, s->logits, P_(st, PP_PARAM_LM_W, 0), N, C, c->vocab, 0,
                              c->dtype, &st->gemm, stream));
    return layernorm_bwd_input(s->dres[L], d_lnf, s->res[L], P_(st, PP_PARAM_LNF_W, 0), s->lnf_mean,
                               s->lnf_rstd, N, C, 0, c->dtype, stream);
}

/* ---- backward: weight gradients -------------------------------------------------------- */

/* A LayerNorm's task of block_colsums (its dw, db and the bias gradient of the branch that joins
 * the residual stream there) reading the partial sums that I's input gradient left at `sums`. */
static void ln_sums_task(pp_colsum_task_t *t, const void *sums, int N)
{
    t->dy = t->x = t->res = NULL;
    t->mean = t->rstd = NULL;
    t->partial = (const float *)sums;
    t->n_partial = layernorm_bwd_input_colsum_rows(N);
}

/* The column sums of block l's W in one colsum_bwd (two or three launches) after its four GEMMs:
 * LN2's dw, db with fc2's bias gradient (dout joins the residual stream at LN2's input gradient),
 * fc's, LN1's with proj's (d_x2), QKV's. The LayerNorm tasks read d_ln2, x2, dout and d_ln1, x,
 * d_x2, or (st->ln_sums) the partial sums I's LayerNorm input gradients left in d_ln2_sum and
 * d_ln1_sum; QKV's reads d_qkv, or (st->qkv_sums) the partial sums I's flash backward left in
 * d_qkv_sum. Partial sums are read only by the second launch; the first one's go to the GEMM
 * workspace, idle by then. */
static pp_status_t block_colsums(pp_stage_t *st, const block_bufs_t *b, int l, const void *x,
                                 const void *dout, cudaStream_t stream)
{
    const pp_stage_cfg_t *c = &st->cfg;
    const int N = c->micro_batch_size * c->seq_len, C = c->hidden;
    pp_colsum_task_t tasks[4] = {
        {C, b->d_ln2, G_(st, PP_PARAM_LN2_B, l), b->x2, (const float *)b->ln2_mean,
         (const float *)b->ln2_rstd, G_(st, PP_PARAM_LN2_W, l), dout, G_(st, PP_PARAM_FC2_B, l)},
        {4 * C, b->d_fc, G_(st, PP_PARAM_FC_B, l), NULL, NULL, NULL, NULL, NULL, NULL},
        {C, b->d_ln1, G_(st, PP_PARAM_LN1_B, l), x, (const float *)b->ln1_mean,
         (const float *)b->ln1_rstd, G_(st, PP_PARAM_LN1_W, l), b->d_x2,
         G_(st, PP_PARAM_PROJ_B, l)},
        {3 * C, b->d_qkv, G_(st, PP_PARAM_QKV_B, l), NULL, NULL, NULL, NULL, NULL, NULL},
    };
    if (st->qkv_sums) {
        tasks[3].dy = NULL;
        tasks[3].partial = (const float *)b->d_qkv_sum;
        tasks[3].n_partial = attention_flash_bwd_colsum_rows(c->micro_batch_size, c->seq_len);
    }
    if (st->ln_sums) {
        ln_sums_task(&tasks[0], b->d_ln2_sum, N);
        ln_sums_task(&tasks[2], b->d_ln1_sum, N);
    }
    return colsum_bwd(tasks, 4, N, st->gemm.workspace, st->gemm.workspace_bytes, c->dtype, stream);
}

/* Block l's weight gradients: the four weight GEMMs, and the bias and LayerNorm gradients either
 * in block_colsums (st->fused_wgrad) or, PPSCHED_WGRAD=unfused, one reduction after each GEMM and
 * one per LayerNorm. */
static pp_status_t block_backward_weight(pp_stage_t *st, const block_bufs_t *b, int l,
                                         const void *x, const void *dout, cudaStream_t stream)
{
    const pp_stage_cfg_t *c = &st->cfg;
    const pp_dtype_t dt = c->dtype;
    const int N = c->micro_batch_size * c->seq_len, C = c->hidden;
    const int sep = !st->fused_wgrad;
    pp_gemm_t *g = &st->gemm;
    void *lns = st->ws.scratch.ln_scratch;

    PP_CHECK(matmul_bwd_weight(G_(st, PP_PARAM_FC2_W, l), sep ? G_(st, PP_PARAM_FC2_B, l) : NULL,
                               dout, b->gelu, N, 4 * C, C, dt, g, stream));
    PP_CHECK(matmul_bwd_weight(G_(st, PP_PARAM_FC_W, l), sep ? G_(st, PP_PARAM_FC_B, l) : NULL,
                               b->d_fc, b->ln2, N, C, 4 * C, dt, g, stream));
    if (sep)
        PP_CHECK(layernorm_bwd_weight(G_(st, PP_PARAM_LN2_W, l), G_(st, PP_PARAM_LN2_B, l),
                                      b->d_ln2, b->x2, (float *)b->ln2_mean, (float *)b->ln2_rstd,
                                      lns, N, C, dt, stream));
    PP_CHECK(matmul_bwd_weight(G_(st, PP_PARAM_PROJ_W, l), sep ? G_(st, PP_PARAM_PROJ_B, l) : NULL,
                               b->d_x2, b->atty, N, C, C, dt, g, stream));
    PP_CHECK(matmul_bwd_weight(G_(st, PP_PARAM_QKV_W, l), sep ? G_(st, PP_PARAM_QKV_B, l) : NULL,
                               b->d_qkv, b->ln1, N, C, 3 * C, dt, g, stream));
    if (!sep) return block_colsums(st, b, l, x, dout, stream);
    return layernorm_bwd_weight(G_(st, PP_PARAM_LN1_W, l), G_(st, PP_PARAM_LN1_B, l), b->d_ln1, x,
                                (float *)b->ln1_mean, (float *)b->ln1_rstd, lns, N, C, dt, stream);
}

static pp_status_t head_backward_weight(pp_stage_t *st, slot_t *s, const void *d_lnf,
                                        cudaStream_t stream)
{
    const pp_stage_cfg_t *c = &st->cfg;
    const int N = c->micro_batch_size * c->seq_len, C = c->hidden, L = c->n_layers;
    PP_CHECK(matmul_bwd_weight(G_(st, PP_PARAM_LM_W, 0), NULL, s->logits, s->lnf, N, C, c->vocab,
                               c->dtype, &st->gemm, stream));
    return layernorm_bwd_weight(G_(st, PP_PARAM_LNF_W, 0), G_(st, PP_PARAM_LNF_B, 0), d_lnf,
                                s->res[L], s->lnf_mean, s->lnf_rstd, st->ws.scratch.ln_scratch, N,
                                C, c->dtype, stream);
}

static pp_status_t encoder_backward(pp_stage_t *st, slot_t *s, cudaStream_t stream)
{
    const pp_stage_cfg_t *c = &st->cfg;
    return encoder_bwd(G_(st, PP_PARAM_WTE, 0), G_(st, PP_PARAM_WPE, 0), s->dres[0], s->tokens,
                       st->ws.scratch.enc_scratch, c->micro_batch_size, c->seq_len, c->hidden,
                       c->vocab, c->dtype, stream);
}

/* ---- the I→W buffers ------------------------------------------------------------------------- */

/* The I→W buffer of the micro-batch in `slot`: the one it holds, or (take) a free one. NULL when
 * the stage keeps nothing from I to W (no blocks, no head). */
static pp_status_t wgrad_of(pp_stage_t *st, int slot, int take, wgrad_t **out)
{
    *out = NULL;
    if (st->wgrad_bytes == 0) return PP_OK;
    int e = st->wgrad_of_slot[slot];
    if (e < 0 && !take)
        PP_FAIL(PP_ERR_INTERNAL, "stage_backward_weight: slot %d has no I before its W", slot);
    for (int i = 0; e < 0 && i < st->n_wgrad; i++)
        if (!st->wgrad_busy[i]) e = i;
    if (e < 0)
        PP_FAIL(PP_ERR_INTERNAL,
                "stage_backward_input: %d micro-batches already wait for their W, all the stage's "
                "I->W buffers (n_wgrad_slots %d)",
                st->n_wgrad, st->n_wgrad);
    st->wgrad_busy[e] = 1;
    st->wgrad_of_slot[slot] = e;
    *out = &st->wgrads[e];
    return PP_OK;
}

/* ---- I, W, B --------------------------------------------------------------------------- */

pp_status_t stage_backward_input(pp_stage_t *st, int slot, int mb, cudaStream_t stream)
{
    PP_CHECK(check_slot(st, slot, "stage_backward_input"));
    slot_t *s = &st->slots[slot];
    wgrad_t *gr = NULL;
    PP_CHECK(wgrad_of(st, slot, 1, &gr));
    if (st->cfg.is_last) PP_CHECK(head_backward_input(st, s, gr->d_lnf, stream));
    for (int l = st->cfg.n_layers - 1; l >= 0; l--) {
        block_bufs_t b;
        view_of(st, s, gr, l, &b);
        PP_CHECK(rebuild_for_input(st, &b, l, s->res[l], stream));
        PP_CHECK(block_backward_input(st, &b, l, s->res[l], dres_of(st, s, gr, l + 1),
                                      dres_of(st, s, gr, l), stream));
    }
    return PP_OK;
}

pp_status_t stage_backward_weight(pp_stage_t *st, int slot, int mb, cudaStream_t stream)
{
    PP_CHECK(check_slot(st, slot, "stage_backward_weight"));
    slot_t *s = &st->slots[slot];
    wgrad_t *gr = NULL;
    PP_CHECK(wgrad_of(st, slot, 0, &gr));
    if (st->cfg.is_last) PP_CHECK(head_backward_weight(st, s, gr->d_lnf, stream));
    for (int l = st->cfg.n_layers - 1; l >= 0; l--) {
        block_bufs_t b;
        view_of(st, s, gr, l, &b);
        PP_CHECK(rebuild_for_weight(st, &b, l, s->res[l], 0, stream));
        PP_CHECK(block_backward_weight(st, &b, l, s->res[l], dres_of(st, s, gr, l + 1), stream));
    }
    if (st->cfg.is_first) PP_CHECK(encoder_backward(st, s, stream));
    if (gr) {
        st->wgrad_busy[st->wgrad_of_slot[slot]] = 0;
        st->wgrad_of_slot[slot] = -1;
    }
    return PP_OK;
}

/* Each block's W right after its I, the I→W parts in the workspace: no I→W buffer is taken. */
pp_status_t stage_backward(pp_stage_t *st, int slot, int mb, cudaStream_t stream)
{
    PP_CHECK(check_slot(st, slot, "stage_backward"));
    slot_t *s = &st->slots[slot];
    if (st->cfg.is_last) {
        PP_CHECK(head_backward_input(st, s, st->ws.d_lnf, stream));
        PP_CHECK(head_backward_weight(st, s, st->ws.d_lnf, stream));
    }
    for (int l = st->cfg.n_layers - 1; l >= 0; l--) {
        block_bufs_t b;
        void *dout = dres_of(st, s, NULL, l + 1);
        view_of(st, s, NULL, l, &b);
        PP_CHECK(rebuild_for_input(st, &b, l, s->res[l], stream));
        PP_CHECK(block_backward_input(st, &b, l, s->res[l], dout, dres_of(st, s, NULL, l), stream));
        PP_CHECK(rebuild_for_weight(st, &b, l, s->res[l], 1, stream));
        PP_CHECK(block_backward_weight(st, &b, l, s->res[l], dout, stream));
    }
    if (st->cfg.is_first) PP_CHECK(encoder_backward(st, s, stream));
    return PP_OK;
}
