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
#include <stdio.h>

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

/* The buffers of one block as a forward or a backward call sees them. stage_layout_view builds it
 * from three places: the slot (what F keeps), the workspace's rebuild area (what the backward
 * rebuilds under run.recompute), and an I→W buffer (what I writes for W). Every pointer is NULL
 * when the attention path does not use it. Statistics, lse and column sums are fp32, the rest
 * the storage dtype. All fields are pointers, in the order of the tables of stage_layout.c. */
typedef struct block_bufs {
    /* saved by F */
    void *ln1;                 /* LN1 output [N,C] (input of the QKV matmul) */
    void *ln1_mean, *ln1_rstd; /* LN1 statistics [N] fp32 */
    void *qkv;                 /* fused attention: QKV matmul output [N,3C], read in place */
    void *lse;                 /* fused attention: log-sum-exp of each score row [B,H,T] fp32 */
    void *q, *k, *v;           /* unfused attention: [B,H,T,d] each */
    void *att;                 /* unfused attention: softmax probabilities P [B,H,T,T] */
    void *atty;                /* attention output, heads side by side [N,C] (input of proj) */
    void *x2;                  /* residual stream after attention [N,C] */
    void *ln2;                 /* LN2 output [N,C] (input of fc) */
    void *ln2_mean, *ln2_rstd; /* LN2 statistics [N] fp32 */
    void *fc;                  /* fc output before GELU [N,4C] */
    void *gelu;                /* GELU output [N,4C] (input of fc2) */
    /* written by I for W */
    void *d_fc;      /* gradient at the fc output [N,4C] (dout of fc) */
    void *d_ln2;     /* gradient at the LN2 output [N,C] */
    void *d_x2;      /* gradient of x2 [N,C] (dout of proj) */
    void *d_qkv;     /* gradient at the QKV output [N,3C] */
    void *d_ln1;     /* gradient at the LN1 output [N,C] */
    void *d_qkv_sum; /* fused attention at d = 64: d_qkv's column sums per 128-row block of a
                        sequence, [B·⌈T/128⌉, 3C] fp32 (attention_flash_bwd's colsum) */
    void *d_ln2_sum; /* LN2's input gradient's column sums of d_ln2, d_ln2·x̂ and dout per chunk
                        of rows, [3, chunks, C] fp32 (layernorm_bwd_input_add's colsum) */
    void *d_ln1_sum; /* LN1's: of d_ln1, d_ln1·x̂ and d_x2 */
} block_bufs_t;

/* One activation slot: what F keeps until the backward. res[0] is the stage input x (the
 * embedding output on the first stage), res[l] the input of block l, res[L] the output y; dres[L]
 * is the output gradient dy and dres[0] the input gradient dx (the gradients between blocks live
 * in the I→W buffer or the workspace; their entries here are NULL). */
typedef struct slot {
    char *mem;            /* the slot's one allocation */
    int *tokens;          /* [N] first stage: input tokens */
    int *targets;         /* [N] last stage: targets */
    void **res;           /* [L+1] pointers, each [N,C] */
    void **dres;          /* [L+1] pointers: [0] and [L] set */
    block_bufs_t *blocks; /* [L]: the saved parts kept under cfg->recompute, others NULL */
    void *lnf;            /* last stage: final LN output [N,C] (input of the LM head) */
    float *lnf_mean, *lnf_rstd;
    void *logits;  /* last stage: logits, overwritten in F by dlogits [N,V] */
    float *losses; /* last stage: per-token losses [N] */
} slot_t;

/* What one micro-batch's I leaves for its W: the gradients at the inner outputs of each block,
 * the gradients between blocks, and the last stage's gradient at the final LN output. An I→W
 * buffer of the stage's pool, or (for a plain B, one block at a time) the workspace's. */
typedef struct wgrad {
    char *mem;            /* the buffer's one allocation (NULL inside the workspace) */
    void **dres;          /* [L+1]: [1..L-1] set (dres[l + 1] is block l's output gradient) */
    block_bufs_t *blocks; /* [L]: the I→W parts */
    void *d_lnf;          /* last stage: gradient at the final LN output [N,C] */
} wgrad_t;

/* Scratch shared by all calls of a stage. The three groups overlap in memory. */
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
/* PPSCHED_ATTENTION, PPSCHED_WGRAD, PPSCHED_LAYERNORM (read by layernorm_fwd),
 * PPSCHED_FLASH_BWD (read by attention_flash_bwd) and PPSCHED_LAYERNORM_BWD, when set, must name
 * a path (fused or unfused), PPSCHED_FLASH_TILE (read by attention_flash_fwd) 128 or 64:
 * PP_ERR_INPUT otherwise. */
pp_status_t stage_attention_env_check(void);
/* The weight pass's column sums (bias and LayerNorm parameter gradients): 1 for one colsum_bwd
 * per block after its weight GEMMs, 0 for one reduction after each GEMM and per LayerNorm when
 * the environment sets PPSCHED_WGRAD=unfused (to compare the two). Sizes do not depend on it. */
int stage_wgrad_fused(void);
/* Where the LayerNorm parameter gradients and the fc2 and proj bias gradients are summed: 1 in
 * the LayerNorm input gradients of I (partial sums per chunk of rows in the I→W parts, added by
 * W's colsum_bwd); 0, W reads d_ln2, d_ln1 and their inputs again, when the environment sets
 * PPSCHED_LAYERNORM_BWD=unfused (to compare the two) or PPSCHED_WGRAD=unfused. Sizes do not
 * depend on it. */
int stage_layernorm_sums(void);
/* 1 where I's flash backward runs in two kernels (Dr computed in the dQ kernel, which also reads
 * O) and can write the QKV column sums: the fused attention at d = 64 on the 128-row kernels, not
 * under PPSCHED_FLASH_TILE=64 or PPSCHED_FLASH_BWD=unfused; 0 elsewhere (d = 128, the 64-row
 * kernels or those switches: the dot kernel first, three kernels), by attention_flash_bwd_colsum_ok
 * (kernel_sizes.h), the launcher's own rule. */
int stage_flash_bwd_fused(const pp_stage_cfg_t *cfg);

/* The bytes of a slot's two regions. */
typedef struct slot_split {
    size_t kept;  /* one kept region: the backward-read tensors that stay on the device for the
                     micro-batch's whole lifetime (cfg->offload_keep of them, the smallest); 0
                     when the whole range moves */
    size_t moved; /* the first bytes of a ring slot: the tensors an offload copies */
    size_t ring;  /* one ring slot: the moved tensors, then y (unless the last stage reads it), dx
                     and dy */
} slot_split_t;

/* Carve a slot from two bases for the attention path `fused`: the kept region `kept` (the
 * micro-batch's own, held from its F to its last backward op) and the ring slot `ring` (the one
 * the phase in hand holds; the moved tensors at its start, in slot order, so that one copy each
 * way moves them). A NULL base: measure, the pointers into it set NULL (s may be NULL). With
 * cfg->offload_keep 0 the kept region is empty and the ring slot is the whole slot. s->res,
 * s->dres and s->blocks hold n_layers + 1 entries. Returns the ring slot's bytes; *split (may be
 * NULL) gets all three sizes. */
size_t stage_layout_slot(const pp_stage_cfg_t *cfg, int fused, char *kept, char *ring, slot_t *s,
                         slot_split_t *split);
/* Carve one I→W buffer (NULL base: measure; then g may be NULL); g->dres and g->blocks hold
 * n_layers + 1 entries. Returns its bytes. */
size_t stage_layout_wgrad(const pp_stage_cfg_t *cfg, int fused, char *base, wgrad_t *g);

/* The workspace beside cuBLAS's: the rebuild area (one block's parts that run.recompute does not
 * keep), the I→W parts of one block with two inter-block gradients for a plain B (which runs each
 * block's W right after its I), and the scratch, whose three groups overlap. */
typedef struct workspace {
    block_bufs_t rebuilt; /* the saved parts not kept in the slot under cfg->recompute */
    block_bufs_t grad;    /* B: the I→W parts of the block in hand */
    void *dres[2];        /* B: the gradients between blocks, alternating */
    void *d_lnf;          /* B: last stage's gradient at the final LN output */
    scratch_t scratch;
} workspace_t;

/* Carve the workspace (NULL base: measure; then w may be NULL). Returns its bytes. */
size_t stage_layout_workspace(const pp_stage_cfg_t *cfg, int fused, char *base, workspace_t *w);

/* Block buffers for one call: each saved part from `kept` (a slot's block) or, when the recompute
 * setting does not keep it, from `rebuilt`; each I→W part from `grad` (NULL: none). */
void stage_layout_view(const pp_stage_cfg_t *cfg, int fused, const block_bufs_t *kept,
                       const block_bufs_t *rebuilt, const block_bufs_t *grad, block_bufs_t *out);

/* Print each part of a slot, of an I→W buffer and of the workspace with its bytes (one block's
 * parts once, per-block bytes), for run.recompute = cfg->recompute. */
void stage_layout_print(const pp_stage_cfg_t *cfg, FILE *f);

/* Bytes of the permutation table + loss accumulator allocation (carved in that order). */
size_t stage_layout_aux(const pp_stage_cfg_t *cfg);
/* The model.h shape of a stage. */
pp_model_shape_t stage_shape_of(const pp_stage_cfg_t *cfg);

#ifdef __cplusplus
}
#endif

#endif /* PP_STAGE_LAYOUT_H */
