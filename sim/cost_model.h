/*
 * cost_model.h — the cost model of a plan, the one place it is made (cost_model.c): hand-set, or
 * the kernel table's times (model/cost.h) on the job's GPU, calibrated by a profile.
 */
#ifndef PP_COST_MODEL_H
#define PP_COST_MODEL_H

#include "common/pp_status.h"
#include "model/cost.h"
#include "model/job.h"
#include "plan/plan.h"
#include "simulate.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where a cost model came from, for the report's preamble. */
typedef enum pp_cost_source {
    PP_COST_HAND = 0, /* the `cost:` ms values, uniform */
    PP_COST_GPU,      /* the a-priori model on a GPU description */
    PP_COST_PROFILE   /* the model calibrated by a profile */
} pp_cost_source_t;

/* The shape of global stage s of a plan made from job. */
pp_model_shape_t cost_stage_shape(const pp_job_t *job, const pp_plan_t *plan, int s);

/* Build the cost model of a plan the way its job asks: the hand-set `cost:` ms values when any
 * is given (per device's share of the layers, so a chunk of an interleaved device costs 1/v; no
 * head or tail), else the model on cost_gpu_for(&job->cost_src, present, prof), calibrated by
 * `prof` when not NULL, with cost_calib_for's step factor and overlap, and the stages' heads and
 * tails (cost_model_tails, which neither scales). A transfer takes one boundary tensor over
 * its transport's link (cost_link_for: send_by[t] for each transport, `send` the slowest the plan
 * uses), or prof's measured sends for every transport. *source (may be NULL) says which. */
pp_status_t cost_model_build(pp_cost_model_t *cm, const pp_job_t *job, const pp_plan_t *plan,
                             const pp_gpu_t *present, const struct pp_profile *prof,
                             pp_cost_source_t *source);

/* Each stage's head and tail (cost_stage_tail on `gpu`: its gradients zeroed before its device's
 * first op, its optimizer after the device's last), for a model that did not measure them:
 * cost_model_build's on a GPU description or a profile, and a measured run's (its op times hold
 * neither). */
void cost_model_tails(pp_cost_model_t *cm, const pp_job_t *job, const pp_plan_t *plan,
                      const pp_gpu_t *gpu);

/* Each pipeline device's host link (link_of) from the job's placement (job_copy_link). */
void cost_model_links(pp_cost_model_t *cm, const pp_job_t *job);

/* One line saying where `cm` came from and what it holds (the profile's step factor and whether
 * the profile predates it, the pair overlap when the plan has pairs, the first, a middle and the
 * last stage's F, I, W and the send, ms), for the report's preamble. */
void cost_model_describe(char *buf, size_t size, const pp_cost_model_t *cm, const pp_job_t *job,
                         const pp_plan_t *plan, pp_cost_source_t source, const pp_gpu_t *gpu,
                         const struct pp_profile *prof);

#ifdef __cplusplus
}
#endif

#endif /* PP_COST_MODEL_H */
