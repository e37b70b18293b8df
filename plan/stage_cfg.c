/*
 * stage_cfg.c — the plan-to-stage mapping of stage_cfg.h; a stage's blocks come from the split
 * (split.h), so uneven stages reach the executor, the memory prediction and the cost model alike.
 */
#include "stage_cfg.h"
#include "model/split.h"

void plan_stage_cfg(pp_stage_cfg_t *c, const pp_job_t *job, const pp_plan_t *plan, int s)
{
    job_stage_cfg(c, job);
    split_stage_layers(job, plan->n_stages, s, &c->n_layers, &c->first_layer);
    c->is_first = s == 0;
    c->is_last = s == plan->n_stages - 1;
    c->n_slots = plan->slots_per_stage[s];
    c->n_wgrad_slots = plan->wgrad_slots_per_stage ? plan->wgrad_slots_per_stage[s] : 0;
    c->offload_keep = plan->offload_keep ? plan->offload_keep[s] : 0;
    c->n_keep_slots = plan->keep_slots_per_stage ? plan->keep_slots_per_stage[s] : 0;
    /* the step's mean over every replica's micro-batches: the reduction across replicas sums */
    c->grad_scale = 1.0f / (float)(plan->n_mb * plan_replicas(plan));
    /* zero1 cuts each replica's part of the gradients in the reduction's buckets */
    c->shard_bucket = plan_reduce_bucket_bytes(job, stage_grad_bytes(c)) / sizeof(float);
}
