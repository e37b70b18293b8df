/*
 * cost.h — the time of a stage's forward (F), input-gradient (I) and weight-gradient (W) passes,
 * predicted from the FLOPs and bytes of every kernel the stage runs, against a GPU description;
 * the GPU, link and calibration a job's costs use. sim/cost_model.h builds a plan's cost model
 * from these.
 *
 * A stage is `n_layers` blocks, plus the embedding on the first stage and the final LayerNorm,
 * LM head and cross-entropy on the last; each of the three parts is priced alone, so stages of
 * different sizes and roles get different times. One kernel takes max(launch floor, FLOPs /
 * achieved rate, bytes / achieved bandwidth); a pass is the sum of its kernels (the kernels of a
 * pass run one after another on one stream). A profile (profile.h) measured at one shape
 * multiplies each (pass, part) by measured / predicted at that shape, so the model's FLOP and
 * byte ratios carry it to other shapes. What a stage adds to its device's step outside the passes
 * (its gradients zeroed, its optimizer step) is priced here too, from its bytes. Plain C; every
 * function is pure and cheap (a table walk), safe to call in a loop, and prints nothing unless it
 * fails.
 */
#ifndef PP_COST_H
#define PP_COST_H

#include "common/pp_status.h"
#include "model.h"
#include "stage_size.h"
#include "model/job.h"
#include "gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pp_pass { PP_PASS_F = 0, PP_PASS_I, PP_PASS_W, PP_PASS_COUNT } pp_pass_t;

/* The parts of a stage: one transformer block, the embedding (first stage), the head (last). */
typedef enum pp_part { PP_PART_BLOCK = 0, PP_PART_EMBED, PP_PART_HEAD, PP_PART_COUNT } pp_part_t;

/* What one pass over one part costs. */
typedef struct pp_work {
    double flops; /* arithmetic, as the kernels run it (causal attention counts half) */
    double bytes; /* device memory traffic */
    int kernels;  /* launches */
    double ms;    /* predicted time on the GPU */
} pp_work_t;

struct pp_profile; /* profile.h */

/* The work of `pass` over `part` of a stage of this shape (PP_PART_BLOCK: one block, whatever
 * shape->n_layers says; the flags is_first / is_last are not read). */
pp_work_t cost_part(const pp_model_shape_t *shape, pp_dtype_t dt, const pp_gpu_t *gpu,
                    pp_pass_t pass, pp_part_t part);

/* The time of `pass` over a whole stage: n_layers blocks, plus the embedding when is_first and the
 * head when is_last, each scaled by prof's calibration when prof is not NULL. */
double cost_stage_ms(const pp_model_shape_t *shape, pp_dtype_t dt, const pp_gpu_t *gpu,
                     const struct pp_profile *prof, pp_pass_t pass);

/* The time run.recompute adds to a stage's I (*input) and to a W run apart from its I (*weight),
 * ms: the forward work stage_recompute_work says is rebuilt, priced with the forward's rows (and
 * the forward's calibration when prof is not NULL). Both 0 for recompute none. */
void cost_recompute_ms(const pp_stage_cfg_t *c, const pp_gpu_t *gpu, const struct pp_profile *prof,
                       double *input, double *weight);

/* What stage c adds to its device's step outside its passes (stages/stage.cu as exec/execute_step.c
 * runs it each step), ms: *head, its fp32 gradients and loss accumulator zeroed before the device's
 * first op; *tail, the optimizer after the device's last op: AdamW, one launch a tensor, reading
 * the gradient, the fp32 master and both moments and writing the master, the moments and (bf16)
 * the parameters, over the replica's part of every bucket under zero1 (a launch a piece); 0
 * without run.optimizer. Each launch takes its bytes at the HBM rate (bw_eff), at least the
 * launch floor. No profile calibrates it: a profile's passes and steps are scaled, never this. */
void cost_stage_tail(const pp_stage_cfg_t *c, const pp_gpu_t *gpu, double *head, double *tail);

/* The GPU the costs of `src` are for: cost.gpu when set, else `present` (the GPU this process
 * runs on, NULL when none), else the profile's, else h100. Never NULL. */
const pp_gpu_t *cost_gpu_for(const pp_job_cost_src_t *src, const pp_gpu_t *present,
                             const struct pp_profile *prof);

/* The link a cross-device transfer over transport t takes: cost.link when set, else the row of
 * the link table t's row of the transport table names (peer and shared: nvlink-peer, nccl:
 * nvlink-nccl); NULL for a transport that crosses no devices. */
const pp_link_desc_t *cost_link_for(const pp_job_t *job, pp_transport_t t);

/* GB/s of the host link each direction (run.offload's copies): cost.host_link_gbps when set,
 * else the link table's `host` row. */
double cost_host_link_gbps(const pp_job_t *job);

/* What the model sets beyond each pass's time: the profile's step factor (every compute cost is
 * multiplied by it; 1 without a profile or one without measured steps) and the share of an
 * overlapped pair's shorter half hidden (cost.overlap when the config sets it, else the profile's
 * pairs, else the GPU description's curve), both at the config's micro-batch and m. */
typedef struct pp_cost_calib {
    double step_factor;
    double overlap;
    const char *overlap_from; /* "cost.overlap", "profile" or "<gpu> description" */
} pp_cost_calib_t;

/* The share of a block's F + I + W time (a priori, at shape s) above its kernels' launch floor:
 * 0 when every kernel sits at the floor, 1 with no launch cost. */
double cost_busy_share(const pp_model_shape_t *s, pp_dtype_t dt, const pp_gpu_t *gpu);

/* A profile's step factor f (measured at its own micro-batch) at stage shape s: 1 + (f - 1) x
 * min(1, s's busy share / the profiled shape's); f itself without a profile. */
double cost_scaled_step_factor(double f, const pp_model_shape_t *s, pp_dtype_t dt,
                               const pp_gpu_t *gpu, const struct pp_profile *prof);

void cost_calib_for(pp_cost_calib_t *c, const pp_job_t *job, int m, const pp_gpu_t *gpu,
                    const struct pp_profile *prof);

#ifdef __cplusplus
}
#endif

#endif /* PP_COST_H */
