/*
 * stage_size.h — the configuration of one pipeline stage and the bytes it will allocate, in plain
 * C11 with no CUDA header: the scheduler core plans and predicts memory with these functions, and
 * stage_init allocates with the same ones (stage_layout.c measures and carves with one layout
 * function). All sizes are for the current process's attention path (PPSCHED_ATTENTION).
 */
#ifndef PP_STAGE_SIZE_H
#define PP_STAGE_SIZE_H

#include "common/pp_status.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the forward keeps for the backward (run.recompute). NONE: everything the backward reads.
 * SELECTIVE: not the cheap, large parts (LayerNorm outputs, the GELU output, unfused attention's
 * probabilities): the backward rebuilds them from what is kept. FULL: only the residual stream
 * at each block boundary: the backward re-runs each block's forward. */
typedef enum pp_recompute {
    PP_RECOMPUTE_NONE = 0,
    PP_RECOMPUTE_SELECTIVE,
    PP_RECOMPUTE_FULL,
    PP_RECOMPUTE_COUNT
} pp_recompute_t;

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
    int optimizer_shards; /* run.optimizer_sharding zero1: the fp32 master and AdamW's moments are
                             split over this many replicas (0 or 1: whole), as stage_shard_part
                             lays them out */
    int optimizer_shard;  /* which of them this stage's replica keeps (0 .. shards - 1) */
    size_t shard_bucket;  /* the gradient bucket (values) the parts are cut in; 0: the whole
                             stage is one */
    float grad_scale;     /* scale of the loss gradient (1 / micro-batches per step) */
    pp_recompute_t recompute; /* what F keeps in a slot (NONE: everything) */
    int n_wgrad_slots; /* I→W buffers: micro-batches whose I ran and whose W has not, at most */
    int offload_keep;  /* run.offload: the backward-read tensors of a slot that stay on the device
                          while the rest goes to the host, the smallest of them (of equal sizes,
                          the last in slot order), at most stage_offload_pieces; 0: a copy moves
                          the whole range. They live in kept regions, one per micro-batch held */
    int n_keep_slots;  /* kept regions to allocate (micro-batches held at once); 0 when
                          offload_keep is 0 */
} pp_stage_cfg_t;

/* Bytes of one activation slot (under cfg->offload_keep, of one ring slot: a slot less its kept
 * region), of the parameters + gradients + optimizer state, and of the workspace (cuBLAS
 * workspace + scratch), for planning memory before anything is allocated. */
size_t stage_slot_bytes(const pp_stage_cfg_t *cfg);
size_t stage_state_bytes(const pp_stage_cfg_t *cfg);

/* zero1: the gradients' `count` values (stage_grad_bytes / 4) are cut in buckets of
 * cfg->shard_bucket values (the last one the rest; 0: one bucket), and each bucket in
 * cfg->optimizer_shards equal parts; replica r keeps the r-th part of every bucket, the parts one
 * after another in its sharded state (master, moments). Part `shard` of bucket b: values
 * [*lo, *lo + *n) of the stage's, at *at of the sharded state. Returns 0 past the last bucket,
 * and -1 when the shards do not divide the bucket evenly. */
int stage_shard_part(const pp_stage_cfg_t *cfg, int shard, size_t b, size_t *lo, size_t *n,
                     size_t *at);
/* The values of a replica's sharded state: the sum of its parts (the whole gradients' count
 * without zero1), or 0 when the shards do not divide a bucket evenly. */
size_t stage_shard_values(const pp_stage_cfg_t *cfg);
size_t stage_workspace_bytes(const pp_stage_cfg_t *cfg);
/* Bytes of one I→W buffer: what stage_backward_input writes for stage_backward_weight (the
 * gradients at the block's inner outputs), held from a micro-batch's I to its W. */
size_t stage_wgrad_slot_bytes(const pp_stage_cfg_t *cfg);
/* Bytes of a slot that its backward reads and an offload to host memory copies
 * (stage_slot_to_host): the slot's first bytes, before y (unless the last stage reads it), dx and
 * dy; under cfg->offload_keep, less the kept region's tensors. */
size_t stage_offload_bytes(const pp_stage_cfg_t *cfg);
/* Bytes of one kept region (cfg->offload_keep's tensors; 0 without). */
size_t stage_keep_bytes(const pp_stage_cfg_t *cfg);
/* The most backward-read tensors of a slot that may stay on the device: all but one moves (the
 * received stage input x, or on the first stage the largest); offload_keep's range is 0 .. this,
 * a larger one counting as this. */
int stage_offload_pieces(const pp_stage_cfg_t *cfg);
/* Everything stage_init allocates on the device: state + workspace + n_slots slots +
 * n_keep_slots kept regions + n_wgrad_slots I→W buffers (not the cuBLAS handles' own
 * allocations). */
size_t stage_device_bytes(const pp_stage_cfg_t *cfg);
/* Bytes of one boundary tensor (x, y, dx, dy): micro_batch_size * seq_len * hidden * dtype. */
size_t stage_boundary_bytes(const pp_stage_cfg_t *cfg);
/* Bytes of the stage's parameter gradients (fp32, as stage_init keeps them): what a data-parallel
 * reduction moves. */
size_t stage_grad_bytes(const pp_stage_cfg_t *cfg);
/* Parameters in the stage (for FLOP counts and reports). */
size_t stage_param_count(const pp_stage_cfg_t *cfg);

/* The work the backward adds under cfg->recompute, per block of a stage, for a cost model to
 * price with its own FLOP and byte counts. A plain B counts once what I and W each rebuild (I's
 * rebuild serves W: weight_forward is 0 for B). */
typedef struct pp_recompute_work {
    int input_forward;     /* 1: I re-runs the block forward, all but the fc2 GEMM (full) */
    int weight_forward;    /* 1: a W run apart from its I re-runs it too (full) */
    int weight_layernorms; /* LayerNorm forwards over [N,C] before W (selective: 2) */
    int weight_gelus;      /* GELU forwards over [N,4C] before W (selective: 1) */
    int input_scores;      /* unfused attention: QKᵀ GEMM + causal softmax before I (selective) */
} pp_recompute_work_t;

void stage_recompute_work(const pp_stage_cfg_t *cfg, pp_recompute_work_t *w);

/* "none", "selective", "full" (indexed by pp_recompute_t, NULL after the last); one name, and back
 * (-1 for an unknown name). */
extern const char *const stage_recompute_names[PP_RECOMPUTE_COUNT + 1];
const char *stage_recompute_name(pp_recompute_t r);
int stage_recompute_from_name(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* PP_STAGE_SIZE_H */
