/*
 * stage_impl.h — the stage object shared by stage.cu (init, free, optimizer, host copies) and
 * stage_pass.cu (forward and backward). Private to stages/.
 */
#ifndef PP_STAGE_IMPL_H
#define PP_STAGE_IMPL_H

#include "kernels/kernels.h"
#include "model/model.h"
#include "stage.h"
#include "model/stage_layout.h"

struct pp_stage {
    pp_stage_cfg_t cfg;
    pp_model_shape_t shape;
    int n_tensors;
    pp_param_tensor_t *tensors; /* [n_tensors], model.h order */
    size_t n_params;            /* packed count */
    size_t n_padded;            /* device buffer length in elements */
    void *params;               /* [n_padded] storage dtype (== master for fp32) */
    float *master;              /* [n_padded] fp32; under zero1 in bf16 [n_shard], this
                                   replica's parts (stage_shard_part) */
    float *grads;               /* [n_padded] fp32 */
    float *adam;                /* [2 * n_shard] m then v, or NULL */
    size_t n_shard;             /* the optimizer state's length: n_padded, or under zero1 the
                                   replica's parts' (n_padded / optimizer_shards) */
    char *aux;                  /* perm + loss accumulator */
    int32_t *perm;              /* [V] */
    float *loss_acc;            /* [1] */
    pp_gemm_t gemm;
    /* the attention path, fixed at init (stage_attention_fused) */
    int fused_attention;
    int fused_wgrad; /* the weight pass's column sums, fixed at init (stage_wgrad_fused) */
    /* I's flash backward writes the QKV bias gradient's partial sums (d_qkv_sum) and W adds them:
     * fused attention and column sums at d = 64 on the 128-row kernels (not under
     * PPSCHED_FLASH_TILE=64 or PPSCHED_FLASH_BWD=unfused), fixed at init */
    int qkv_sums;
    /* I's LayerNorm input gradients write the LayerNorm and fc2 / proj bias gradients' partial
     * sums (d_ln2_sum, d_ln1_sum) and W adds them: stage_layernorm_sums, fixed at init */
    int ln_sums;
    char *work_mem; /* the workspace beside cuBLAS's (stage_layout_workspace) */
    workspace_t ws; /* its pieces */
    int n_slots;
    slot_t *slots;        /* [n_slots] */
    size_t offload_bytes; /* the first bytes of a slot, which an offload moves */
    int n_keep;           /* kept regions (cfg->n_keep_slots; 0 without cfg->offload_keep) */
    char **keep_mem;      /* [n_keep]: each one allocation of keep_bytes */
    size_t keep_bytes;    /* of one kept region */
    int *keep_of_slot;    /* [n_slots]: the kept region each slot's pointers point into now */
    int n_wgrad;          /* I→W buffers */
    wgrad_t *wgrads;      /* [n_wgrad] */
    size_t wgrad_bytes;   /* of one; 0 when there is nothing to keep (no blocks, no head) */
    /* Host bookkeeping, at enqueue time: the I→W buffer of each slot's micro-batch between its I
     * and its W (-1: none), and which buffers are taken. A step's calls are enqueued in the order
     * they run on the stage's stream, so this holds for a captured graph's replays too. */
    int *wgrad_of_slot;        /* [n_slots] */
    unsigned char *wgrad_busy; /* [n_wgrad] */
    const int *d_data_base;    /* device counter added to every data index, or NULL */
    const int *d_opt_step;     /* device AdamW step count replacing the argument, or NULL */
};

/* Parameters of tensor (kind, local block l), in the storage dtype / fp32 gradients. */
static inline void *P_(pp_stage_t *st, pp_param_kind_t kind, int l)
{
    const pp_param_tensor_t *t = &st->tensors[model_tensor_index(&st->shape, kind, l)];
    return (char *)st->params + t->offset * pp_dtype_size(st->cfg.dtype);
}

static inline float *G_(pp_stage_t *st, pp_param_kind_t kind, int l)
{
    return st->grads + st->tensors[model_tensor_index(&st->shape, kind, l)].offset;
}

#endif /* PP_STAGE_IMPL_H */
