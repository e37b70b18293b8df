/*
 * stage.h — one pipeline stage on one GPU: a run of pre-LayerNorm transformer blocks, plus the
 * token + position embedding on the first stage and final LN + LM head + softmax cross-entropy on
 * the last. This is the interface the executor uses; it knows nothing of schedules.
 *
 * Memory: stage_init allocates, on the current CUDA device, the parameters (storage dtype, plus an
 * fp32 master copy for bf16), fp32 gradient accumulators, AdamW state (when asked), a workspace
 * for cuBLAS and our own, `n_slots` activation slots and `n_wgrad_slots` I->W buffers. A slot
 * holds what one micro-batch keeps from its forward to its backward: the stage input x, each
 * block's output, what the backward reads under cfg->recompute, the stage output y, the incoming
 * output-gradient dy and the outgoing input-gradient dx. An I->W buffer holds what an I leaves
 * for its W (I takes a free one, W gives it back: at most n_wgrad_slots micro-batches may sit
 * between their I and their W). Sizes: stage_size.h. Nothing is allocated after stage_init.
 *
 * Streams: every call enqueues on the stream it is given and never synchronizes the host. The
 * caller orders calls across streams with events. Calls on one stage must not run concurrently
 * with each other on two streams (they share the workspace), except copies into or out of slot
 * buffers, which the caller orders.
 *
 * Gradients: parameter gradients accumulate with += across micro-batches until
 * stage_zero_grads. B gives the bits of I then W (the same kernels on the same inputs, each
 * block's W right after its I, its I->W parts in the workspace). The loss of the last stage is the
 * mean over the tokens of a micro-batch, and its gradient is scaled by cfg->grad_scale (1/m for the
 * step mean).
 */
#ifndef PP_STAGE_H
#define PP_STAGE_H

#include "common/pp_status.h"
#include "model/stage_size.h"

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pp_stage pp_stage_t; /* opaque */

typedef struct pp_adamw_cfg {
    float lr, beta1, beta2, eps, weight_decay;
} pp_adamw_cfg_t;

/* The sizes (stage_slot_bytes, stage_state_bytes, ...) are in stage_size.h, plain C. */

/* Build a stage on the current CUDA device: allocate everything, initialise parameters from
 * cfg->seed (identical on any device), zero the gradients. */
pp_status_t stage_init(pp_stage_t **out, const pp_stage_cfg_t *cfg);
void stage_free(pp_stage_t *st); /* accepts NULL and half-built stages */

/* Boundary buffers of a slot, for the transports. Not meaningful on the first stage (x) or the
 * last stage (y, dy): those return NULL. */
void *stage_slot_x(pp_stage_t *st, int slot);  /* input activation (RECV_F writes here) */
void *stage_slot_y(pp_stage_t *st, int slot);  /* output activation (SEND_F reads here) */
void *stage_slot_dy(pp_stage_t *st, int slot); /* output gradient (RECV_B writes here) */
void *stage_slot_dx(pp_stage_t *st, int slot); /* input gradient (SEND_B reads here) */

/* Offload: copy the first stage_offload_bytes of `slot` (what its backward reads, less the kept
 * region's tensors under cfg->offload_keep; not y, dx, dy) to `host`, or back from `host` into
 * `slot` (which may be another slot than the one it came from: every slot has the same layout).
 * Asynchronous on `stream` when `host` is pinned (cudaMallocHost); the caller orders the copy
 * after the forward and before the backward with events, and keeps the slot's y until its send
 * has read it. */
pp_status_t stage_slot_to_host(pp_stage_t *st, int slot, void *host, cudaStream_t stream);
pp_status_t stage_slot_from_host(pp_stage_t *st, int slot, const void *host, cudaStream_t stream);
/* Under cfg->offload_keep: the calls enqueued after this one on `slot` (a ring slot) find the
 * micro-batch's kept tensors in kept region `keep` (0 .. n_keep_slots - 1), where its forward
 * wrote them. Host only, at enqueue time (a captured graph keeps the pointers of its capture);
 * nothing without kept regions. The boundary buffers (x, y, dx, dy) are always the ring slot's.
 * A new stage joins slot i with region i modulo their count. */
pp_status_t stage_slot_keep(pp_stage_t *st, int slot, int keep);

/* Forward of micro-batch `mb` into `slot`. `mb` indexes the synthetic data stream (the executor
 * passes step * micro_batches + k, so every step sees new data). The first stage generates mb's
 * tokens itself; the last stage generates mb's targets, computes the loss and the gradient of the
 * loss w.r.t. its logits, and adds the micro-batch's mean loss to the stage's loss accumulator. */
pp_status_t stage_forward(pp_stage_t *st, int slot, int mb, cudaStream_t stream);
/* Full backward of the micro-batch in `slot`: dx, and parameter gradients += . */
pp_status_t stage_backward(pp_stage_t *st, int slot, int mb, cudaStream_t stream);
/* Input-gradient half: dx, keeping in an I->W buffer (taken now) what the weight half needs;
 * PP_ERR_INTERNAL when all n_wgrad_slots are taken. */
pp_status_t stage_backward_input(pp_stage_t *st, int slot, int mb, cudaStream_t stream);
/* Weight-gradient half: parameter gradients += , from what backward_input kept; gives the I->W
 * buffer back. */
pp_status_t stage_backward_weight(pp_stage_t *st, int slot, int mb, cudaStream_t stream);

/* Make the stage read two counters from device memory (on its device) when its kernels run,
 * rather than from call arguments, so that one captured CUDA graph can replay every step:
 * `d_data_base` is added to the data index of stage_forward (NULL: 0), and `d_opt_step`, when not
 * NULL, is the AdamW step count (the `step` argument of stage_optimizer_step is then ignored). */
pp_status_t stage_bind_counters(pp_stage_t *st, const int *d_data_base, const int *d_opt_step);

/* The fp32 gradient accumulators in place on the device: every tensor's, at its offset, with zeros
 * in the padding between them; *count gets the length (stage_grad_bytes / 4). The executor reduces
 * them across data-parallel replicas between the last backward and the optimizer. */
float *stage_grads(pp_stage_t *st, size_t *count);
/* The parameters' storage copy (cfg->dtype), stage_grads' length: zero1 gathers it. */
void *stage_params(pp_stage_t *st);

/* Zero the gradient accumulators and the loss accumulator. */
pp_status_t stage_zero_grads(pp_stage_t *st, cudaStream_t stream);
/* One AdamW step over the stage's parameters (step counts from 1); under zero1
 * (cfg->optimizer_shards > 1) over this replica's parts of them only (stage_shard_part): the other
 * replicas update the rest, and the caller gathers every part's storage copy into every replica. */
pp_status_t stage_optimizer_step(pp_stage_t *st, const pp_adamw_cfg_t *opt, int step,
                                 cudaStream_t stream);

/* Copy the loss accumulator (sum of per-micro-batch mean losses; last stage only) to *out after
 * synchronizing `stream`. */
pp_status_t stage_loss_read(pp_stage_t *st, double *out, cudaStream_t stream);
/* Number of parameters, and copies of all parameters / gradients as fp32 to host memory in a
 * fixed order (for the pipeline-vs-one-device check). Synchronous. The parameters are the fp32
 * master's, or under zero1 in bf16 (cfg->optimizer_shards: the master holds this replica's parts)
 * the storage copy's. */
size_t stage_n_params(const pp_stage_t *st);
pp_status_t stage_grads_to_host(pp_stage_t *st, float *host);
pp_status_t stage_params_to_host(pp_stage_t *st, float *host);

#ifdef __cplusplus
}
#endif

#endif /* PP_STAGE_H */
