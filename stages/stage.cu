/*
 * stage.cu — one pipeline stage on one GPU (the contract is stages/stage.h): parameters and their
 * init, activation slots, forward, backward as I (input gradient) then W (weight gradient), the
 * loss, AdamW, and the host copies the checks use.
 *
 * Memory, all allocated by stage_init on the current device and nothing after it:
 *   state      parameters in the storage dtype; an fp32 master copy when that is bf16 (for fp32
 *              the parameters are the master); fp32 gradients; AdamW m and v (one allocation);
 *              the vocabulary permutation and the loss accumulator (one small allocation).
 *              Tensors sit at the offsets of stages/model.h (aligned, gaps zero).
 *   slots      one allocation per slot, carved by stage_layout_slot: what F saves, what I keeps for
 * W. Fused attention (stage_attention_fused says which path, once per stage) keeps the QKV matmul
 * output [N,3C], which the flash kernels read in place, and the softmax log-sum-exp; its output is
 * the projection's input atty, and its gradients land in d_qkv directly. The unfused path permutes
 * the QKV output (scratch) into per-head q, k, v and saves P [B,H,T,T]. The residual adds, GELU and
 * its derivative run inside the GEMMs (matmul_fwd_ex, matmul_bwd_input_dgelu: cuBLASLt epilogues
 * where offered, separate kernels otherwise). workspace  the cuBLAS workspace (pp_gemm_t) and one
 * scratch area, carved three ways by stage_layout_scratch (forward, backward-input, backward-weight
 * never run at once). Every call enqueues on the stream it is given and never synchronizes, except
 * the documented synchronous helpers at the end. Gradients accumulate with += (B = I then W, the
 * same kernels in the same order, so B and I+W give the same bits).
 */
#include "stage.h"
#include "stage_layout.h"

#include "../common/pp_cuda.h"
#include "../kernels/kernels.h"
#include "data.h"
#include "model.h"
#include "stage_kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the stage object ------------------------------------------------------------------------ */

struct pp_stage {
    pp_stage_cfg_t cfg;
    pp_model_shape_t shape;
    int n_tensors;
    pp_param_tensor_t *tensors; /* [n_tensors], model.h order */
    size_t n_params;            /* packed count */
    size_t n_padded;            /* device buffer length in elements */
    void *params;               /* [n_padded] storage dtype (== master for fp32) */
    float *master;              /* [n_padded] fp32 */
    float *grads;               /* [n_padded] fp32 */
    float *adam;                /* [2 * n_padded] m then v, or NULL */
    char *aux;                  /* perm + loss accumulator */
    int32_t *perm;              /* [V] */
    float *loss_acc;            /* [1] */
    pp_gemm_t gemm;
    /* the attention path, fixed at init (stage_attention_fused) */
    int fused_attention;
    char *scratch_mem;
    scratch_t ws;
    int n_slots;
    slot_t *slots;          /* [n_slots] */
    const int *d_data_base; /* device counter added to every data index, or NULL */
    const int *d_opt_step;  /* device AdamW step count replacing the argument, or NULL */
};

static pp_status_t check_cfg(const pp_stage_cfg_t *c)
{
    if (c->hidden <= 0 || c->heads <= 0 || c->seq_len <= 0 || c->vocab <= 0 ||
        c->micro_batch_size <= 0)
        PP_FAIL(PP_ERR_INPUT,
                "stage: hidden %d, heads %d, seq_len %d, vocab %d, micro_batch_size %d must all "
                "be positive",
                c->hidden, c->heads, c->seq_len, c->vocab, c->micro_batch_size);
    if (c->hidden % c->heads != 0)
        PP_FAIL(PP_ERR_INPUT, "stage: hidden %d is not a multiple of heads %d", c->hidden,
                c->heads);
    if (c->n_layers < 0 || c->first_layer < 0 || c->first_layer + c->n_layers > c->total_layers)
        PP_FAIL(PP_ERR_INPUT, "stage: blocks %d..%d outside the model's %d", c->first_layer,
                c->first_layer + c->n_layers - 1, c->total_layers);
    if (c->n_slots <= 0)
        PP_FAIL(PP_ERR_INPUT, "stage: needs at least one slot (got %d)", c->n_slots);
    if (c->dtype != PP_DTYPE_FP32 && c->dtype != PP_DTYPE_BF16)
        PP_FAIL(PP_ERR_INPUT, "stage: unknown dtype %d", (int)c->dtype);
    if ((double)c->micro_batch_size * c->seq_len *
            (c->vocab > 4 * c->hidden ? c->vocab : 4 * c->hidden) >
        2147483647.0)
        PP_FAIL(PP_ERR_INPUT,
                "stage: micro-batch of %d x %d tokens is too large for 32-bit indexing",
                c->micro_batch_size, c->seq_len);
    return PP_OK;
}

/* cudaMalloc with a message that says what did not fit. */
static pp_status_t dev_alloc(void **p, size_t bytes, const char *what)
{
    cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        *p = NULL;
        fprintf(stderr, "%s:%d: stage_init: cannot allocate %.3f GiB for %s: %s\n", __FILE__,
                __LINE__, (double)bytes / (1 << 30), what, cudaGetErrorString(e));
        (void)cudaGetLastError();
        return e == cudaErrorMemoryAllocation ? PP_ERR_DEVICE : PP_ERR_CUDA;
    }
    return PP_OK;
}

/* Parameters of tensor (kind, local block l), in the storage dtype / fp32 gradients. */
static void *P_(pp_stage_t *st, pp_param_kind_t kind, int l)
{
    const pp_param_tensor_t *t = &st->tensors[model_tensor_index(&st->shape, kind, l)];
    return (char *)st->params + t->offset * pp_dtype_size(st->cfg.dtype);
}

static float *G_(pp_stage_t *st, pp_param_kind_t kind, int l)
{
    return st->grads + st->tensors[model_tensor_index(&st->shape, kind, l)].offset;
}

static pp_status_t init_params(pp_stage_t *st)
{
    const pp_stage_cfg_t *c = &st->cfg;
    PP_CUDA_CHECK(cudaMemsetAsync(st->master, 0, st->n_padded * sizeof(float), 0));
    for (int i = 0; i < st->n_tensors; i++) {
        const pp_param_tensor_t *t = &st->tensors[i];
        PP_CHECK(stage_init_tensor(
            st->master + t->offset, t->numel, c->seed, model_tensor_id(t->kind, t->layer),
            model_init_std(t->kind, c->total_layers), model_init_constant(t->kind), 0));
    }
    if (c->dtype != PP_DTYPE_FP32)
        PP_CHECK(cast_fp32_to_dtype(st->params, st->master, st->n_padded, c->dtype, 0));
    return PP_OK;
}

pp_status_t stage_init(pp_stage_t **out, const pp_stage_cfg_t *cfg)
{
    pp_status_t s = PP_OK;
    pp_stage_t *st = NULL;
    int32_t *perm_host = NULL;
    *out = NULL;
    PP_CHECK(check_cfg(cfg));
    PP_CHECK(stage_attention_env_check());
    st = (pp_stage_t *)calloc(1, sizeof *st);
    PP_ALLOC_CHECK(st);
    st->cfg = *cfg;
    st->shape = stage_shape_of(cfg);
    st->fused_attention = stage_attention_fused(cfg);
    st->n_tensors = model_tensor_count(&st->shape);
    st->tensors = (pp_param_tensor_t *)calloc((size_t)st->n_tensors + 1, sizeof *st->tensors);
    st->slots = (slot_t *)calloc((size_t)cfg->n_slots, sizeof *st->slots);
    perm_host = (int32_t *)malloc((size_t)cfg->vocab * sizeof *perm_host);
    if (!st->tensors || !st->slots || !perm_host) {
        fprintf(stderr, "%s:%d: stage_init: out of host memory\n", __FILE__, __LINE__);
        s = PP_ERR_NOMEM;
        goto fail;
    }
    st->n_slots = cfg->n_slots;
    st->n_padded = model_tensors(&st->shape, st->tensors, &st->n_params);

    /* state */
    {
        size_t P = st->n_padded;
        size_t es = pp_dtype_size(cfg->dtype);
        PP_CHECK_GOTO(dev_alloc(&st->params, P * es, "parameters"), s, fail);
        if (cfg->dtype == PP_DTYPE_FP32) {
            st->master = (float *)st->params;
        } else {
            PP_CHECK_GOTO(
                dev_alloc((void **)&st->master, P * sizeof(float), "fp32 master parameters"), s,
                fail);
        }
        PP_CHECK_GOTO(dev_alloc((void **)&st->grads, P * sizeof(float), "gradients"), s, fail);
        PP_CUDA_CHECK_GOTO(cudaMemsetAsync(st->grads, 0, P * sizeof(float), 0), s, fail);
        if (cfg->with_optimizer) {
            PP_CHECK_GOTO(dev_alloc((void **)&st->adam, 2 * P * sizeof(float), "AdamW state"), s,
                          fail);
            PP_CUDA_CHECK_GOTO(cudaMemsetAsync(st->adam, 0, 2 * P * sizeof(float), 0), s, fail);
        }
        PP_CHECK_GOTO(dev_alloc((void **)&st->aux, stage_layout_aux(cfg), "permutation table"), s,
                      fail);
        carver_t c = {st->aux, 0};
        st->perm = (int32_t *)carve(&c, (size_t)cfg->vocab * sizeof(int32_t));
        st->loss_acc = (float *)carve(&c, sizeof(float));
        data_perm_fill(cfg->seed, cfg->vocab, perm_host);
        PP_CUDA_CHECK_GOTO(cudaMemcpy(st->perm, perm_host, (size_t)cfg->vocab * sizeof(int32_t),
                                      cudaMemcpyHostToDevice),
                           s, fail);
        PP_CUDA_CHECK_GOTO(cudaMemsetAsync(st->loss_acc, 0, sizeof(float), 0), s, fail);
        PP_CHECK_GOTO(init_params(st), s, fail);
    }

    /* workspace */
    PP_CHECK_GOTO(gemm_init(&st->gemm, PP_GEMM_WORKSPACE_BYTES), s, fail);
    {
        size_t bytes = stage_layout_scratch(cfg, st->fused_attention, NULL, NULL);
        PP_CHECK_GOTO(dev_alloc((void **)&st->scratch_mem, bytes, "workspace"), s, fail);
        PP_CUDA_CHECK_GOTO(cudaMemsetAsync(st->scratch_mem, 0, bytes, 0), s, fail);
        stage_layout_scratch(cfg, st->fused_attention, st->scratch_mem, &st->ws);
    }

    /* slots */
    for (int i = 0; i < st->n_slots; i++) {
        slot_t *sl = &st->slots[i];
        int L = cfg->n_layers;
        sl->res = (void **)calloc((size_t)L + 1, sizeof(void *));
        sl->dres = (void **)calloc((size_t)L + 1, sizeof(void *));
        sl->blocks = (block_slot_t *)calloc((size_t)L + 1, sizeof(block_slot_t));
        if (!sl->res || !sl->dres || !sl->blocks) {
            fprintf(stderr, "%s:%d: stage_init: out of host memory\n", __FILE__, __LINE__);
            s = PP_ERR_NOMEM;
            goto fail;
        }
        size_t bytes = stage_layout_slot(cfg, st->fused_attention, NULL, NULL);
        PP_CHECK_GOTO(dev_alloc((void **)&sl->mem, bytes, "an activation slot"), s, fail);
        PP_CUDA_CHECK_GOTO(cudaMemsetAsync(sl->mem, 0, bytes, 0), s, fail);
        stage_layout_slot(cfg, st->fused_attention, sl->mem, sl);
    }
    PP_CUDA_CHECK_GOTO(cudaStreamSynchronize(0), s, fail);
    free(perm_host);
    *out = st;
    return PP_OK;
fail:
    free(perm_host);
    stage_free(st);
    return s;
}

void stage_free(pp_stage_t *st)
{
    if (!st) return;
    /* Nothing may still use the buffers; frees below synchronize the device anyway. */
    if (st->slots)
        for (int i = 0; i < st->n_slots; i++) {
            cudaFree(st->slots[i].mem);
            free(st->slots[i].res);
            free(st->slots[i].dres);
            free(st->slots[i].blocks);
        }
    free(st->slots);
    cudaFree(st->scratch_mem);
    gemm_free(&st->gemm);
    cudaFree(st->aux);
    cudaFree(st->adam);
    cudaFree(st->grads);
    if (st->master != st->params) cudaFree(st->master);
    cudaFree(st->params);
    free(st->tensors);
    free(st);
}

static pp_status_t check_slot(const pp_stage_t *st, int slot, const char *what)
{
    if (!st || slot < 0 || slot >= st->n_slots)
        PP_FAIL(PP_ERR_INTERNAL, "%s: slot %d outside 0..%d", what, slot,
                st ? st->n_slots - 1 : -1);
    return PP_OK;
}

void *stage_slot_x(pp_stage_t *st, int slot)
{
    if (st->cfg.is_first || slot < 0 || slot >= st->n_slots) return NULL;
    return st->slots[slot].res[0];
}

void *stage_slot_y(pp_stage_t *st, int slot)
{
    if (st->cfg.is_last || slot < 0 || slot >= st->n_slots) return NULL;
    return st->slots[slot].res[st->cfg.n_layers];
}

void *stage_slot_dy(pp_stage_t *st, int slot)
{
    if (st->cfg.is_last || slot < 0 || slot >= st->n_slots) return NULL;
    return st->slots[slot].dres[st->cfg.n_layers];
}

void *stage_slot_dx(pp_stage_t *st, int slot)
{
    if (st->cfg.is_first || slot < 0 || slot >= st->n_slots) return NULL;
    return st->slots[slot].dres[0];
}

/* ---- forward --------------------------------------------------------------------------------- */

static pp_status_t block_forward(pp_stage_t *st, slot_t *s, int l, cudaStream_t stream)
{
    const pp_stage_cfg_t *c = &st->cfg;
    const pp_dtype_t dt = c->dtype;
    const int B = c->micro_batch_size, T = c->seq_len, C = c->hidden, H = c->heads, d = C / H;
    const int N = B * T, BH = B * H;
    const long long Td = (long long)T * d, TT = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)d);
    block_slot_t *b = &s->blocks[l];
    pp_gemm_t *g = &st->gemm;
    const scratch_t *w = &st->ws;

    PP_CHECK(layernorm_fwd(b->ln1, b->ln1_mean, b->ln1_rstd, s->res[l], P_(st, PP_PARAM_LN1_W, l),
                           P_(st, PP_PARAM_LN1_B, l), N, C, dt, stream));
    if (st->fused_attention) {
        /* q, k, v read where the QKV matmul put them; O (heads side by side) and the row
         * log-sum-exp straight into the slot; no T×T matrix, no permutes. */
        char *qkv = (char *)b->qkv;
        const size_t es = pp_dtype_size(dt);
        PP_CHECK(matmul_fwd(qkv, b->ln1, P_(st, PP_PARAM_QKV_W, l), P_(st, PP_PARAM_QKV_B, l), N, C,
                            3 * C, dt, g, stream));
        PP_CHECK(attention_flash_fwd(b->atty, C, b->lse, qkv, qkv + C * es, qkv + 2 * C * es, 3 * C,
                                     B, H, T, d, dt, stream));
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
                           s->res[l], NULL, N, C, C, dt, g, stream));
    PP_CHECK(layernorm_fwd(b->ln2, b->ln2_mean, b->ln2_rstd, b->x2, P_(st, PP_PARAM_LN2_W, l),
                           P_(st, PP_PARAM_LN2_B, l), N, C, dt, stream));
    /* gelu(fc(...)) in one GEMM, keeping the pre-activation fc for the backward */
    PP_CHECK(matmul_fwd_ex(b->gelu, b->ln2, P_(st, PP_PARAM_FC_W, l), P_(st, PP_PARAM_FC_B, l),
                           NULL, b->fc, N, C, 4 * C, dt, g, stream));
    PP_CHECK(matmul_fwd_ex(s->res[l + 1], b->gelu, P_(st, PP_PARAM_FC2_W, l),
                           P_(st, PP_PARAM_FC2_B, l), b->x2, NULL, N, 4 * C, C, dt, g, stream));
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
    for (int l = 0; l < L; l++)
        PP_CHECK(block_forward(st, s, l, stream));
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

/* ---- backward: input gradients ----------------------------------------------------------------
 */

/* From dres[l+1] (the gradient at the block's output) to dres[l], keeping for W what it needs. */
static pp_status_t block_backward_input(pp_stage_t *st, slot_t *s, int l, cudaStream_t stream)
{
    const pp_stage_cfg_t *c = &st->cfg;
    const pp_dtype_t dt = c->dtype;
    const int B = c->micro_batch_size, T = c->seq_len, C = c->hidden, H = c->heads, d = C / H;
    const int N = B * T, BH = B * H;
    const long long Td = (long long)T * d, TT = (long long)T * T;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t es = pp_dtype_size(dt);
    block_slot_t *b = &s->blocks[l];
    pp_gemm_t *g = &st->gemm;
    const scratch_t *w = &st->ws;

    /* MLP: out = x2 + fc2(gelu(fc(ln2(x2)))). d_fc = d(fc out): GELU's derivative in the GEMM's
     * epilogue. */
    PP_CHECK(matmul_bwd_input_dgelu(b->d_fc, s->dres[l + 1], P_(st, PP_PARAM_FC2_W, l), b->fc, N,
                                    4 * C, C, dt, g, stream));
    PP_CHECK(matmul_bwd_input(b->d_ln2, b->d_fc, P_(st, PP_PARAM_FC_W, l), N, C, 4 * C, 0, dt, g,
                              stream));
    /* d_x2 = dres[l+1] (the residual path) + LN2's input gradient */
    PP_CHECK(layernorm_bwd_input_add(b->d_x2, s->dres[l + 1], b->d_ln2, b->x2,
                                     P_(st, PP_PARAM_LN2_W, l), b->ln2_mean, b->ln2_rstd, N, C, dt,
                                     stream));

    /* Attention: x2 = x + proj(attention(qkv(ln1(x)))). */
    PP_CHECK(matmul_bwd_input(w->d_atty, b->d_x2, P_(st, PP_PARAM_PROJ_W, l), N, C, C, 0, dt, g,
                              stream));
    if (st->fused_attention) {
        /* P recomputed from q, k and the saved log-sum-exp, tile by tile; dq, dk, dv land side
         * by side in d_qkv, the layout of the QKV matmul output. */
        const char *qkv = (const char *)b->qkv;
        char *dqkv = (char *)b->d_qkv;
        PP_CHECK(attention_flash_bwd(dqkv, dqkv + C * es, dqkv + 2 * C * es, 3 * C, w->d_atty, qkv,
                                     qkv + C * es, qkv + 2 * C * es, 3 * C, b->atty, C, b->lse,
                                     w->d_flash, B, H, T, d, dt, stream));
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
    PP_CHECK(layernorm_bwd_input_add(s->dres[l], b->d_x2, b->d_ln1, s->res[l],
                                     P_(st, PP_PARAM_LN1_W, l), b->ln1_mean, b->ln1_rstd, N, C, dt,
                                     stream));
    return PP_OK;
}

pp_status_t stage_backward_input(pp_stage_t *st, int slot, int mb, cudaStream_t stream)
{
    PP_CHECK(check_slot(st, slot, "stage_backward_input"));
    const pp_stage_cfg_t *c = &st->cfg;
    const pp_dtype_t dt = c->dtype;
    const int N = c->micro_batch_size * c->seq_len, C = c->hidden, V = c->vocab;
    const int L = c->n_layers;
    slot_t *s = &st->slots[slot];

    if (c->is_last) {
        /* dlogits (from the forward) -> d(final LN out) -> the gradient at the last block. */
        PP_CHECK(matmul_bwd_input(s->d_lnf, s->logits, P_(st, PP_PARAM_LM_W, 0), N, C, V, 0, dt,
                                  &st->gemm, stream));
        PP_CHECK(layernorm_bwd_input(s->dres[L], s->d_lnf, s->res[L], P_(st, PP_PARAM_LNF_W, 0),
                                     s->lnf_mean, s->lnf_rstd, N, C, 0, dt, stream));
    }
    for (int l = L - 1; l >= 0; l--)
        PP_CHECK(block_backward_input(st, s, l, stream));
    return PP_OK;
}

/* ---- backward: weight gradients ---------------------------------------------------------------
 */

static pp_status_t block_backward_weight(pp_stage_t *st, slot_t *s, int l, cudaStream_t stream)
{
    const pp_stage_cfg_t *c = &st->cfg;
    const pp_dtype_t dt = c->dtype;
    const int N = c->micro_batch_size * c->seq_len, C = c->hidden;
    block_slot_t *b = &s->blocks[l];
    pp_gemm_t *g = &st->gemm;
    void *lns = st->ws.ln_scratch;

    PP_CHECK(matmul_bwd_weight(G_(st, PP_PARAM_FC2_W, l), G_(st, PP_PARAM_FC2_B, l), s->dres[l + 1],
                               b->gelu, N, 4 * C, C, dt, g, stream));
    PP_CHECK(matmul_bwd_weight(G_(st, PP_PARAM_FC_W, l), G_(st, PP_PARAM_FC_B, l), b->d_fc, b->ln2,
                               N, C, 4 * C, dt, g, stream));
    PP_CHECK(layernorm_bwd_weight(G_(st, PP_PARAM_LN2_W, l), G_(st, PP_PARAM_LN2_B, l), b->d_ln2,
                                  b->x2, b->ln2_mean, b->ln2_rstd, lns, N, C, dt, stream));
    PP_CHECK(matmul_bwd_weight(G_(st, PP_PARAM_PROJ_W, l), G_(st, PP_PARAM_PROJ_B, l), b->d_x2,
                               b->atty, N, C, C, dt, g, stream));
    PP_CHECK(matmul_bwd_weight(G_(st, PP_PARAM_QKV_W, l), G_(st, PP_PARAM_QKV_B, l), b->d_qkv,
                               b->ln1, N, C, 3 * C, dt, g, stream));
    PP_CHECK(layernorm_bwd_weight(G_(st, PP_PARAM_LN1_W, l), G_(st, PP_PARAM_LN1_B, l), b->d_ln1,
                                  s->res[l], b->ln1_mean, b->ln1_rstd, lns, N, C, dt, stream));
    return PP_OK;
}

pp_status_t stage_backward_weight(pp_stage_t *st, int slot, int mb, cudaStream_t stream)
{
    PP_CHECK(check_slot(st, slot, "stage_backward_weight"));
    const pp_stage_cfg_t *c = &st->cfg;
    const pp_dtype_t dt = c->dtype;
    const int B = c->micro_batch_size, T = c->seq_len, N = B * T, C = c->hidden, V = c->vocab;
    const int L = c->n_layers;
    slot_t *s = &st->slots[slot];

    if (c->is_last) {
        PP_CHECK(matmul_bwd_weight(G_(st, PP_PARAM_LM_W, 0), NULL, s->logits, s->lnf, N, C, V, dt,
                                   &st->gemm, stream));
        PP_CHECK(layernorm_bwd_weight(G_(st, PP_PARAM_LNF_W, 0), G_(st, PP_PARAM_LNF_B, 0),
                                      s->d_lnf, s->res[L], s->lnf_mean, s->lnf_rstd,
                                      st->ws.ln_scratch, N, C, dt, stream));
    }
    for (int l = L - 1; l >= 0; l--)
        PP_CHECK(block_backward_weight(st, s, l, stream));
    if (c->is_first)
        PP_CHECK(encoder_bwd(G_(st, PP_PARAM_WTE, 0), G_(st, PP_PARAM_WPE, 0), s->dres[0],
                             s->tokens, st->ws.enc_scratch, B, T, C, V, dt, stream));
    return PP_OK;
}

pp_status_t stage_backward(pp_stage_t *st, int slot, int mb, cudaStream_t stream)
{
    PP_CHECK(stage_backward_input(st, slot, mb, stream));
    return stage_backward_weight(st, slot, mb, stream);
}

/* ---- gradients, optimizer, loss ---------------------------------------------------------------
 */

pp_status_t stage_zero_grads(pp_stage_t *st, cudaStream_t stream)
{
    PP_CUDA_CHECK(cudaMemsetAsync(st->grads, 0, st->n_padded * sizeof(float), stream));
    PP_CUDA_CHECK(cudaMemsetAsync(st->loss_acc, 0, sizeof(float), stream));
    return PP_OK;
}

pp_status_t stage_optimizer_step(pp_stage_t *st, const pp_adamw_cfg_t *opt, int step,
                                 cudaStream_t stream)
{
    if (!st->adam)
        PP_FAIL(PP_ERR_INTERNAL, "stage_optimizer_step: the stage was built without AdamW state "
                                 "(with_optimizer = 0)");
    if (step < 1) PP_FAIL(PP_ERR_INTERNAL, "stage_optimizer_step: step %d, counts from 1", step);
    const pp_dtype_t dt = st->cfg.dtype;
    float *m = st->adam, *v = st->adam + st->n_padded;
    for (int i = 0; i < st->n_tensors; i++) {
        const pp_param_tensor_t *t = &st->tensors[i];
        void *storage = (char *)st->params + t->offset * pp_dtype_size(dt);
        PP_CHECK(adamw_update_counted(st->master + t->offset, storage, st->grads + t->offset,
                                      m + t->offset, v + t->offset, t->numel, opt->lr, opt->beta1,
                                      opt->beta2, opt->eps, t->decay ? opt->weight_decay : 0.0f,
                                      step, st->d_opt_step, dt, stream));
    }
    return PP_OK;
}

pp_status_t stage_bind_counters(pp_stage_t *st, const int *d_data_base, const int *d_opt_step)
{
    st->d_data_base = d_data_base;
    st->d_opt_step = d_opt_step;
    return PP_OK;
}

pp_status_t stage_loss_read(pp_stage_t *st, double *out, cudaStream_t stream)
{
    float v = 0.0f;
    *out = 0.0;
    if (!st->cfg.is_last) PP_FAIL(PP_ERR_INTERNAL, "stage_loss_read: not the last stage");
    PP_CUDA_CHECK(cudaMemcpyAsync(&v, st->loss_acc, sizeof v, cudaMemcpyDeviceToHost, stream));
    PP_CUDA_CHECK(cudaStreamSynchronize(stream));
    *out = v;
    return PP_OK;
}

size_t stage_n_params(const pp_stage_t *st)
{
    return st->n_params;
}

/* Copy an fp32 device buffer laid out as st->tensors to host, packed. Synchronizes the device. */
static pp_status_t to_host_packed(pp_stage_t *st, const float *dev, float *host)
{
    PP_CUDA_CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < st->n_tensors; i++) {
        const pp_param_tensor_t *t = &st->tensors[i];
        PP_CUDA_CHECK(cudaMemcpy(host + t->packed, dev + t->offset, t->numel * sizeof(float),
                                 cudaMemcpyDeviceToHost));
    }
    return PP_OK;
}

pp_status_t stage_grads_to_host(pp_stage_t *st, float *host)
{
    return to_host_packed(st, st->grads, host);
}

/* The fp32 master values (for bf16 storage, the forward uses them rounded to bf16). */
pp_status_t stage_params_to_host(pp_stage_t *st, float *host)
{
    return to_host_packed(st, st->master, host);
}
