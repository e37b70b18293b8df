/*
 * stage_size.h — the configuration of one pipeline stage and the bytes it will allocate, in plain
 * C11 with no CUDA header: the scheduler core plans and predicts memory with these functions, and
 * stage_init allocates with the same ones (stage_layout.c measures and carves with one layout
 * function). All sizes are for the current process's attention path (PPSCHED_ATTENTION).
 */
#ifndef PP_STAGE_SIZE_H
#define PP_STAGE_SIZE_H

#include "../common/pp_status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_stage_cfg {
    int hidden, heads, seq_len, vocab;
    int micro_batch_size; /* sequences per micro-batch (B) */
    int n_layers;         /* blocks in this stage (may be 0 for a pure embedding/head stage) */
    int first_layer;      /* global index of the first block, so init is the same on any device */
    int total_layers;     /* blocks in the whole model (init scale of residual projections) */
    int is_first;         /* owns the token + position embedding; makes its own input tokens */
    int is_last;          /* owns final LN, LM head, cross-entropy; makes its own targets */
    pp_dtype_t dtype;     /* storage of activations and parameters */
    uint64_t seed;        /* parameters and synthetic data */
    int n_slots;          /* activation slots to allocate */
    int with_optimizer;   /* allocate AdamW state */
    float grad_scale;     /* scale of the loss gradient (1 / micro-batches per step) */
} pp_stage_cfg_t;

/* Bytes of one activation slot, of the parameters + gradients + optimizer state, and of the
 * workspace (cuBLAS workspace + scratch), for planning memory before anything is allocated. */
size_t stage_slot_bytes(const pp_stage_cfg_t *cfg);
size_t stage_state_bytes(const pp_stage_cfg_t *cfg);
size_t stage_workspace_bytes(const pp_stage_cfg_t *cfg);
/* Bytes of one boundary tensor (x, y, dx, dy): micro_batch_size * seq_len * hidden * dtype. */
size_t stage_boundary_bytes(const pp_stage_cfg_t *cfg);
/* Parameters in the stage (for FLOP counts and reports). */
size_t stage_param_count(const pp_stage_cfg_t *cfg);

#ifdef __cplusplus
}
#endif

#endif /* PP_STAGE_SIZE_H */
