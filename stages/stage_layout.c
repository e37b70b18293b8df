/*
 * stage_layout.c — the layout of a stage's device memory and the sizes derived from it (contract in
 * stage_size.h and stage_layout.h). One function per allocation walks its pieces in order: with a
 * NULL base it measures, with the allocation it carves, so planned and allocated bytes agree.
 * Plain C11: part of the scheduler core's library.
 */
#include "stage_layout.h"

#include "../kernels/kernel_sizes.h"

#include <stdlib.h>
#include <string.h>

int stage_attention_fused(const pp_stage_cfg_t *cfg)
{
    const char *env = getenv("PPSCHED_ATTENTION");
    if (env && strcmp(env, "unfused") == 0) return 0;
    if (cfg->heads <= 0 || cfg->hidden % cfg->heads != 0) return 0;
    return attention_flash_supported(cfg->seq_len, cfg->hidden / cfg->heads, cfg->dtype);
}

pp_status_t stage_attention_env_check(void)
{
    const char *env = getenv("PPSCHED_ATTENTION");
    if (env && strcmp(env, "fused") != 0 && strcmp(env, "unfused") != 0)
        PP_FAIL(PP_ERR_INPUT,
                "stage: PPSCHED_ATTENTION is '%s'; allowed: fused (where supported, the default), "
                "unfused",
                env);
    return PP_OK;
}

size_t stage_layout_slot(const pp_stage_cfg_t *cfg, int fused, char *base, slot_t *s)
{
    carver_t c = {base, 0};
    size_t es = pp_dtype_size(cfg->dtype);
    size_t B = (size_t)cfg->micro_batch_size, T = (size_t)cfg->seq_len, C = (size_t)cfg->hidden;
    size_t H = (size_t)cfg->heads, V = (size_t)cfg->vocab, N = B * T;
    int L = cfg->n_layers;
#define TAKE(field, bytes)                                                                         \
    do {                                                                                           \
        void *p_ = carve(&c, (bytes));                                                             \
        if (s) (field) = p_;                                                                       \
    } while (0)
    if (cfg->is_first) TAKE(s->tokens, N * sizeof(int));
    if (cfg->is_last) TAKE(s->targets, N * sizeof(int));
    for (int l = 0; l <= L; l++)
        TAKE(s->res[l], N * C * es);
    for (int l = 0; l <= L; l++)
        TAKE(s->dres[l], N * C * es);
    for (int l = 0; l < L; l++) {
        block_slot_t *b = s ? &s->blocks[l] : NULL;
        TAKE(b->ln1, N * C * es);
        TAKE(b->ln1_mean, N * sizeof(float));
        TAKE(b->ln1_rstd, N * sizeof(float));
        if (fused) {
            TAKE(b->qkv, N * 3 * C * es);
            TAKE(b->lse, B * H * T * sizeof(float));
        } else {
            TAKE(b->q, N * C * es);
            TAKE(b->k, N * C * es);
            TAKE(b->v, N * C * es);
            TAKE(b->att, B * H * T * T * es);
        }
        TAKE(b->atty, N * C * es);
        TAKE(b->x2, N * C * es);
        TAKE(b->ln2, N * C * es);
        TAKE(b->ln2_mean, N * sizeof(float));
        TAKE(b->ln2_rstd, N * sizeof(float));
        TAKE(b->fc, N * 4 * C * es);
        TAKE(b->gelu, N * 4 * C * es);
        TAKE(b->d_fc, N * 4 * C * es);
        TAKE(b->d_ln2, N * C * es);
        TAKE(b->d_x2, N * C * es);
        TAKE(b->d_qkv, N * 3 * C * es);
        TAKE(b->d_ln1, N * C * es);
    }
    if (cfg->is_last) {
        TAKE(s->lnf, N * C * es);
        TAKE(s->lnf_mean, N * sizeof(float));
        TAKE(s->lnf_rstd, N * sizeof(float));
        TAKE(s->logits, N * V * es);
        TAKE(s->losses, N * sizeof(float));
        TAKE(s->d_lnf, N * C * es);
    }
    return carved_bytes(&c);
}

size_t stage_layout_scratch(const pp_stage_cfg_t *cfg, int fused, char *base, scratch_t *w)
{
    size_t es = pp_dtype_size(cfg->dtype);
    size_t B = (size_t)cfg->micro_batch_size, T = (size_t)cfg->seq_len, C = (size_t)cfg->hidden;
    size_t H = (size_t)cfg->heads, N = B * T;
    int N_int = cfg->micro_batch_size * cfg->seq_len;
    size_t most = 0;
    carver_t c = {base, 0};
    scratch_t *s = w; /* TAKE writes through `s` */
    if (cfg->n_layers > 0 && !fused) {
        TAKE(s->qkv, N * 3 * C * es);
        TAKE(s->attn, N * C * es);
    }
    most = carved_bytes(&c);
    c.off = 0;
    if (cfg->n_layers > 0) {
        TAKE(s->d_atty, N * C * es);
        if (fused) {
            TAKE(s->d_flash, attention_flash_bwd_scratch_bytes(cfg->micro_batch_size, cfg->heads,
                                                               cfg->seq_len));
        } else {
            TAKE(s->d_attn, N * C * es);
            TAKE(s->d_p, B * H * T * T * es);
            TAKE(s->d_q, N * C * es);
            TAKE(s->d_k, N * C * es);
            TAKE(s->d_v, N * C * es);
        }
    }
    if (carved_bytes(&c) > most) most = carved_bytes(&c);
    c.off = 0;
    TAKE(s->ln_scratch, layernorm_bwd_weight_scratch_bytes(N_int, cfg->hidden));
    if (cfg->is_first)
        TAKE(s->enc_scratch,
             encoder_bwd_scratch_bytes(cfg->micro_batch_size, cfg->seq_len, cfg->vocab));
    if (carved_bytes(&c) > most) most = carved_bytes(&c);
    return most;
#undef TAKE
}

pp_model_shape_t stage_shape_of(const pp_stage_cfg_t *cfg)
{
    pp_model_shape_t s;
    s.hidden = cfg->hidden;
    s.heads = cfg->heads;
    s.seq_len = cfg->seq_len;
    s.vocab = cfg->vocab;
    s.batch = cfg->micro_batch_size;
    s.n_layers = cfg->n_layers;
    s.first_layer = cfg->first_layer;
    s.total_layers = cfg->total_layers;
    s.is_first = cfg->is_first;
    s.is_last = cfg->is_last;
    return s;
}

/* Elements of the padded device parameter buffer. */
static size_t padded_params(const pp_stage_cfg_t *cfg)
{
    pp_model_shape_t s = stage_shape_of(cfg);
    return model_tensors(&s, NULL, NULL);
}

size_t stage_layout_aux(const pp_stage_cfg_t *cfg)
{
    carver_t c = {NULL, 0};
    carve(&c, (size_t)cfg->vocab * sizeof(int32_t));
    carve(&c, sizeof(float));
    return carved_bytes(&c);
}

size_t stage_slot_bytes(const pp_stage_cfg_t *cfg)
{
    return stage_layout_slot(cfg, stage_attention_fused(cfg), NULL, NULL);
}

size_t stage_workspace_bytes(const pp_stage_cfg_t *cfg)
{
    return PP_GEMM_WORKSPACE_BYTES +
           stage_layout_scratch(cfg, stage_attention_fused(cfg), NULL, NULL);
}

size_t stage_state_bytes(const pp_stage_cfg_t *cfg)
{
    size_t P = padded_params(cfg);
    size_t bytes = P * pp_dtype_size(cfg->dtype); /* parameters (the master when fp32) */
    if (cfg->dtype != PP_DTYPE_FP32) bytes += P * sizeof(float); /* fp32 master */
    bytes += P * sizeof(float);                                  /* gradients */
    if (cfg->with_optimizer) bytes += 2 * P * sizeof(float);     /* AdamW m, v */
    return bytes + stage_layout_aux(cfg);
}

size_t stage_boundary_bytes(const pp_stage_cfg_t *cfg)
{
    return (size_t)cfg->micro_batch_size * cfg->seq_len * cfg->hidden * pp_dtype_size(cfg->dtype);
}

size_t stage_param_count(const pp_stage_cfg_t *cfg)
{
    pp_model_shape_t s = stage_shape_of(cfg);
    size_t n = 0;
    model_tensors(&s, NULL, &n);
    return n;
}
