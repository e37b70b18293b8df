/*
 * stage_layout.h — how a stage's device memory is carved (private to stages/): the pieces of an
 * activation slot and of the shared scratch, and the one layout function per allocation that both
 * measures (base NULL) and carves (stage_init). Plain C11, no CUDA header: stage_layout.c is part
 * of the scheduler core's library, so the sizes the core plans with are the sizes allocated.
 */
#ifndef PP_STAGE_LAYOUT_H
#define PP_STAGE_LAYOUT_H

#include "model.h"
#include "stage_size.h"

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- layout ---------------------------------------------------------------------------------- */

/* Sub-buffers of an allocation start at multiples of this many bytes. */
#define STAGE_ALIGN 256

/* Hands out aligned pieces of one allocation. With base == NULL it only measures. */
typedef struct carver {
    char *base; /* the allocation, or NULL to measure */
    size_t off; /* bytes handed out so far */
} carver_t;

static inline void *carve(carver_t *c, size_t bytes)
{
    size_t at = (c->off + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
    c->off = at + bytes;
    return c->base ? c->base + at : NULL;
}

static inline size_t carved_bytes(const carver_t *c)
{
    return (c->off + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN;
}

/* What one block keeps in a slot. The first group is written by F; the second by I, for W. */
typedef struct block_slot {
    void *ln1;                  /* LN1 output [N,C] (input of the QKV matmul) */
    float *ln1_mean, *ln1_rstd; /* LN1 statistics [N] */
    void *qkv;                  /* fused attention: QKV matmul output [N,3C], read in place */
    void *q, *k, *v;            /* unfused attention: [B,H,T,d] each */
    void *att;                  /* unfused attention: softmax probabilities P [B,H,T,T] */
    float *lse;                 /* fused attention: log-sum-exp of each score row [B,H,T] */
    void *atty;                 /* attention output, heads side by side [N,C] (input of proj) */
    void *x2;                   /* residual stream after attention [N,C] */
    void *ln2;                  /* LN2 output [N,C] (input of fc) */
    float *ln2_mean, *ln2_rstd; /* LN2 statistics [N] */
    void *fc;                   /* fc output before GELU [N,4C] */
    void *gelu;                 /* GELU output [N,4C] (input of fc2) */

    void *d_fc;  /* gradient at the fc output [N,4C] (dout of fc) */
    void *d_ln2; /* gradient at the LN2 output [N,C] */
    void *d_x2;  /* gradient of x2 [N,C] (dout of proj) */
    void *d_qkv; /* gradient at the QKV output [N,3C] */
    void *d_ln1; /* gradient at the LN1 output [N,C] */
} block_slot_t;

/* One activation slot. res[0] is the stage input x (the embedding output on the first stage),
 * res[L] the output y; dres[L] is the output gradient dy, dres[0] the input gradient dx. The
 * gradient at the output of block l (dout of its fc2) is dres[l + 1]. */
typedef struct slot {
    char *mem;            /* the slot's one allocation */
    int *tokens;          /* [N] first stage: input tokens */
    int *targets;         /* [N] last stage: targets */
    void **res;           /* [L+1] pointers, each [N,C] */
    void **dres;          /* [L+1] pointers, each [N,C] */
    block_slot_t *blocks; /* [L] */
    void *lnf;            /* last stage: final LN output [N,C] (input of the LM head) */
    float *lnf_mean, *lnf_rstd;
    void *logits;  /* last stage: logits, overwritten in F by dlogits [N,V] */
    float *losses; /* last stage: per-token losses [N] */
    void *d_lnf;   /* last stage: gradient at the final LN output [N,C] */
} slot_t;

/* Scratch shared by all slots. The three groups overlap in memory. */
typedef struct scratch {
    /* forward */
    void *qkv;  /* unfused: QKV matmul output [N,3C], permuted at once into the slot's q, k, v */
    void *attn; /* unfused: attention output per head [B,H,T,d], before unpermuting */
    /* backward-input */
    void *d_atty;          /* [N,C] */
    void *d_attn;          /* unfused: [B,H,T,d] */
    void *d_p;             /* unfused: dP, then dS in place [B,H,T,T] */
    void *d_flash;         /* fused: attention_flash_bwd scratch */
    void *d_q, *d_k, *d_v; /* unfused: [B,H,T,d] each */
    /* backward-weight */
    void *ln_scratch;  /* layernorm_bwd_weight partial sums */
    void *enc_scratch; /* encoder_bwd sort (first stage) */
} scratch_t;

/* The attention path of a stage: 1 for the fused kernels (flash_attention.cu) where they take the
 * shape (attention_flash_supported), 0 for the GEMMs + causal softmax otherwise, or always when
 * the environment sets PPSCHED_ATTENTION=unfused (to compare the two). stage_init fixes the
 * choice for the stage's lifetime; the *_bytes functions ask again. */
int stage_attention_fused(const pp_stage_cfg_t *cfg);
/* PPSCHED_ATTENTION, when set, must name a path (fused or unfused): PP_ERR_INPUT otherwise. */
pp_status_t stage_attention_env_check(void);

/* Carve a slot out of `base` (NULL: measure only; then s may be NULL) for the attention path
 * `fused`. s->res, s->dres and s->blocks must hold n_layers + 1 entries. Returns its bytes. */
size_t stage_layout_slot(const pp_stage_cfg_t *cfg, int fused, char *base, slot_t *s);
/* Carve the scratch area (NULL base: measure; then w may be NULL) for the attention path `fused`.
 * Returns its bytes: the largest of the three groups, which overlap. */
size_t stage_layout_scratch(const pp_stage_cfg_t *cfg, int fused, char *base, scratch_t *w);
/* Bytes of the permutation table + loss accumulator allocation (carved in that order). */
size_t stage_layout_aux(const pp_stage_cfg_t *cfg);
/* The model.h shape of a stage. */
pp_model_shape_t stage_shape_of(const pp_stage_cfg_t *cfg);

#ifdef __cplusplus
}
#endif

#endif /* PP_STAGE_LAYOUT_H */
