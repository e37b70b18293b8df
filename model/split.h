/*
 * split.h — how the model's layers are divided among the stages. `even` gives every stage
 * layers / stages blocks; `model.layers_per_stage: [5, 6, 6, 7]` lists them; `pipeline.split:
 * balanced` picks the split that evens the stages' predicted times: the cost model's (cost.h)
 * F + I + W of one block (with what run.recompute rebuilds), of the embedding on the first stage
 * and of the LM head on the last, on cost.gpu's description (else h100's). After job_resolve,
 * job->model.layers_per_stage holds one entry per stage in every case, and plan_stage_cfg (so the
 * executor, the memory prediction and the cost model) reads a stage's blocks through
 * split_stage_layers.
 */
#ifndef PP_SPLIT_H
#define PP_SPLIT_H

#include "model/job.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Split `layers` blocks into n_stages stages (out[n_stages]) minimising the largest stage cost,
 * a stage costing its blocks x block_cost, plus first_cost on the first stage and last_cost on the
 * last. Among splits with the same largest cost, it fills the stages in order as evenly as it can
 * (water-filling: each block goes to the cheapest stage so far, the earliest on a tie). */
void split_balanced(int *out, int n_stages, int layers, double block_cost, double first_cost,
                    double last_cost);

/* Predicted ms of one micro-batch's F + I + W over one block (*block, with run.recompute's
 * rebuilds), the embedding (*embed) and the head (*head), as the cost model prices them on the
 * job's GPU (cost.gpu, else h100); a profile's calibration is not applied. */
void split_part_ms(const pp_job_t *job, double *block, double *embed, double *head);

/* Blocks of stage s and the global index of its first block, from job->model.layers_per_stage
 * (job_resolve fills it; a job made by hand without it splits evenly). */
void split_stage_layers(const pp_job_t *job, int n_stages, int s, int *n_layers,
                        int *first_layer);

#ifdef __cplusplus
}
#endif

#endif /* PP_SPLIT_H */
